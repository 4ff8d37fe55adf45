"""The explorer's detail pane in windows: the selected turn and what surrounds it, the rest on request.

A conversation is cut into blocks: each step (assistant message) of an assistant turn of several
steps (an agent loop of 80 tool calls is one turn), every other entry whole. A detail message
carries what the whole conversation holds (its ``outline``: user messages, turns, steps), the
number of ``blocks`` and the blocks of a ``window`` around the selected row's block, up to about
``budget`` bytes of JSON (the selected block always whole, a quarter of the budget at most before
it). The front end asks for the blocks before or after its window as the reader scrolls
(``{"type": "more", "row": n, "before": first}`` or ``"after": end``), answered with the next
window (:func:`more`).

An entry sent whole is the conversation view's entry (without the fields only the kernel reads:
its history indices and turn numbers); the steps ``[lo, hi)`` of a turn of ``n``
are the entry with ``steps: [lo, hi, n]``, the view-model items of those steps only (each with
its ``step``) and their timing ``lines``. A tool call's raw argument text is left out when its
parsed arguments are shown (the turn view draws one of the two).
"""

from __future__ import annotations

import json
from typing import Any

from ..views.conversation import step_lines
from ..views.text import HTML_TEXT_LIMIT, cut_text, not_shown

__all__ = ["DETAIL_BUDGET", "Window", "more"]

#: bytes of JSON (about) of conversation a detail message carries around the selected turn
DETAIL_BUDGET = 48_000


#: fields of an entry the front end does not draw (the kernel finds turns and messages with them)
_KERNEL_ONLY = ("index", "indices", "turns", "started", "status", "message_index")


def _lean(item: dict[str, Any]) -> dict[str, Any]:
    """An item as a detail message carries it: a text longer than the HTML views draw cut as they
    cut it, with a line that says so (a 30 MB answer is not sent to the page whole)."""
    if item.get("kind") == "tool_call" and isinstance(item.get("args"), str) and "text" in item:
        return {k: v for k, v in item.items() if k != "text"}
    text = item.get("text")
    if isinstance(text, str) and len(text) > HTML_TEXT_LIMIT:
        shown, left = cut_text(text, HTML_TEXT_LIMIT)
        return {**item, "text": f"{shown}\n\n{not_shown(left)}"}
    return item


class Window:
    """The blocks of a conversation view (see the module docstring) and the pieces that carry them."""

    def __init__(self, view: dict[str, Any]) -> None:
        self.view = view
        self.entries: list[dict[str, Any]] = view["entries"]
        #: (entry position, step or None for the whole entry)
        self.blocks: list[tuple[int, int | None]] = []
        self._starts: dict[int, list[int]] = {}  # entry position -> first item of each step (and the end)
        self._lines: dict[int, list[str]] = {}  # entry position -> the timing line of each step (when asked)
        for pos, entry in enumerate(self.entries):
            turn = view["turns"].get(entry["key"], (None,))[0] if entry["kind"] == "assistant" else None
            steps = turn.steps if turn is not None else []
            if len(steps) > 1:
                starts = [0]
                for state in steps:
                    starts.append(starts[-1] + len(state.items))
                self._starts[pos] = starts
                self.blocks.extend((pos, s) for s in range(len(steps)))
            else:
                self.blocks.append((pos, None))
        self._sizes: dict[int, int] = {}

    def block_of(self, key: str | None, index: int | None) -> int:
        """The block of entry ``key`` (its step holding history message ``index``); 0 when none."""
        for b, (pos, step) in enumerate(self.blocks):
            entry = self.entries[pos]
            if entry["key"] != key:
                continue
            if step is None or index is None:
                return b
            indices = entry.get("indices") or []
            if index in indices and indices.index(index) == step:
                return b
        return 0

    def steps_of(self, key: str) -> int:
        """How many steps entry ``key`` is cut into (0: sent whole)."""
        pos = next((p for p, e in enumerate(self.entries) if e["key"] == key), None)
        return len(self._starts[pos]) - 1 if pos in self._starts else 0

    def _piece(self, pos: int, lo: int | None, hi: int | None) -> dict[str, Any]:
        entry = {k: v for k, v in self.entries[pos].items() if k not in _KERNEL_ONLY}
        vm = entry.get("vm")
        if lo is None or hi is None:
            if not isinstance(vm, dict):
                return entry
            return {**entry, "vm": {**vm, "items": [_lean(it) for it in vm.get("items") or []]}}
        starts = self._starts[pos]
        step_of = {i: s for s in range(lo, hi) for i in range(starts[s], starts[s + 1])}
        items = [{**_lean(it), "step": step_of[it["i"]]} for it in (vm or {}).get("items") or [] if it.get("i") in step_of]
        if pos not in self._lines:
            self._lines[pos] = step_lines(self.view["turns"][entry["key"]][0])
        return {**entry, "vm": {**(vm or {}), "items": items}, "lines": [x for x in self._lines[pos][lo:hi] if x],
                "steps": [lo, hi, len(starts) - 1]}

    def size(self, b: int) -> int:
        if b not in self._sizes:
            pos, step = self.blocks[b]
            piece = self._piece(pos, step, None if step is None else step + 1)
            self._sizes[b] = len(json.dumps(piece, ensure_ascii=False, default=str))
        return self._sizes[b]

    def pieces(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """The entries (whole, or the steps of a turn) that carry blocks ``[lo, hi)``, in order."""
        out: list[dict[str, Any]] = []
        b = lo
        while b < hi:
            pos, step = self.blocks[b]
            if step is None:
                out.append(self._piece(pos, None, None))
                b += 1
                continue
            end = b
            while end < hi and self.blocks[end][0] == pos:
                end += 1
            last = self.blocks[end - 1][1]
            out.append(self._piece(pos, step, (last or 0) + 1))
            b = end
        return out

    def around(self, at: int, budget: float) -> tuple[int, int]:
        """The window ``[lo, hi)`` around block ``at``: it whole, then blocks before it up to a quarter
        of ``budget``, after it up to ``budget``, and before it again while the budget lasts."""
        lo, hi, total = at, at + 1, self.size(at)
        before = 0
        while lo > 0 and before + self.size(lo - 1) <= budget / 4 and total + self.size(lo - 1) <= budget:
            lo -= 1
            before += self.size(lo)
            total += self.size(lo)
        while hi < len(self.blocks) and total + self.size(hi) <= budget:
            total += self.size(hi)
            hi += 1
        while lo > 0 and total + self.size(lo - 1) <= budget:
            lo -= 1
            total += self.size(lo)
        return lo, hi

    def next(self, edge: int, forward: bool, budget: float) -> tuple[int, int]:
        """The blocks after ``edge`` (``forward``) or before it, at least one, up to ``budget``."""
        edge = max(0, min(edge, len(self.blocks)))
        if forward:
            hi, total = edge, 0
            while hi < len(self.blocks) and (hi == edge or total + self.size(hi) <= budget):
                total += self.size(hi)
                hi += 1
            return edge, hi
        lo, total = edge, 0
        while lo > 0 and (lo == edge or total + self.size(lo - 1) <= budget):
            lo -= 1
            total += self.size(lo)
        return lo, edge

    def outline(self) -> str:
        """What the conversation holds, in a line: its user messages, assistant turns (and their steps),
        failed and damaged entries."""
        kinds = [e["kind"] for e in self.entries]
        turns = kinds.count("assistant")
        steps = sum(len(s) - 1 for s in self._starts.values()) + turns - len(self._starts)

        def n(count: int, what: str) -> str:
            return f"{count:,} {what}{'' if count == 1 else 's'}" if count else ""

        parts = [n(kinds.count("user"), "user message"),
                 n(turns, "assistant turn") + (f" ({steps:,} steps)" if steps > turns else ""),
                 n(kinds.count("failed"), "failed response"), n(kinds.count("sidecar"), "response only in the sidecar"),
                 n(kinds.count("damaged"), "damaged message")]
        return " · ".join(p for p in parts if p)


def cut_waterfall(wf: dict[str, Any] | None, steps: list[int] | None) -> dict[str, Any] | None:
    """The waterfall with the bars of steps ``[lo, hi)`` of ``n`` only (``steps`` ``[lo, hi, n]``; None: all)."""
    if wf is None or steps is None:
        return wf
    lo, hi, n = steps
    bars = [b for b in wf.get("bars") or [] if lo <= b.get("step", lo) < hi]
    shown = f"steps {lo + 1}–{hi} of {n} shown" if hi - lo > 1 else f"step {lo + 1} of {n} shown"
    return {**wf, "bars": bars, "summary": " · ".join(s for s in (wf.get("summary"), shown) if s)}


def more(window: Window, content: dict[str, Any], budget: float) -> dict[str, Any] | None:
    """The answer to ``{"type": "more", "row", "before" | "after"}``: the next blocks, or None for a
    request that names no edge."""
    for name, forward in (("after", True), ("before", False)):
        edge = content.get(name)
        if type(edge) is int:
            lo, hi = window.next(edge, forward, budget)
            return {"type": "more", "row": content.get("row"), "window": [lo, hi], "entries": window.pieces(lo, hi)}
    return None
