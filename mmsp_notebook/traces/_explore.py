"""``traces.explore``: find the failing turn among 100,000, read its conversation, replay it.

An anywidget over a turns frame (:func:`~mmsp_notebook.traces.load_turns`). The kernel keeps the
frame; filtering (text search with ``column>value`` and ``column:text`` terms, model / status /
finish facets, numeric ranges, quick filters) and sorting run in pandas on the kernel, and only
the page on screen crosses to the browser, formatted: the bytes per page do not depend on the
number of rows. Selecting a row sends its conversation (as :func:`~mmsp_notebook.traces.show`
draws it: the turn view of each assistant message) with the selected turn marked and scrolled
into view, and the timing waterfall of its turn from the sidecar: a window of about 48 KB around
that turn (or step of an agent loop), the rest as the reader scrolls to it (``_detail``), so the
bytes per selection do not grow with the conversation; Replay plays the selected
assistant message again into the explorer with its recorded timing (``mmsp_notebook.replay``'s
engine and the live views' pacer).

Messages (``msg:custom``). Front end → kernel: ``{"type": "hello"}`` (answered with a ``state``),
``{"type": "query", "patch": {...}}`` (any of ``text, model, status, finish, ranges, quick, sort,
desc, page, page_size``; answered with a ``page``), ``{"type": "select", "row": n}`` (a row
position in the frame; answered with a ``detail``), ``{"type": "more", "row": n, "before": b}``
or ``"after": b`` (the blocks of the conversation before / after the window shown; answered with
a ``more``), ``{"type": "code"}`` (answered with a ``code``: the filter as pandas code, whole),
``{"type": "replay", "speed": s}``, ``{"type": "stop"}``. Kernel → front end:
``state`` (``page`` + ``detail``), ``page`` (the query, ``columns``, ``rows`` as ``[position,
status, finish, [cell text, ...]]``, ``total``, ``matched``, ``facets`` (each picker's
``[value, label(, title)]``, bounded, a long value or one holding a key sent as a stand-in:
``_facets``) and ``facet_other`` (when one leaves values out), ``quick``, ``code``
(the filter as pandas code; None when longer than :data:`CODE_CHARS`, a long value picked or
typed, or when it holds a key, a value picked through its stand-in: Copy filter then asks for
it), ``took_ms``), ``code`` (``code``: a value holding a key named by its redacted form, which the
kernel turns back into the value, ``_held``), ``detail`` (the ``entries`` of the conversation view in the ``window`` ``[lo, hi)``
of its ``blocks``, its ``outline``, the ``selected`` key and ``selected_step``, ``index``,
``waterfall``, ``replayable``, or ``error``), ``more`` (``window`` and ``entries``), ``replay``
(``phase`` ``start`` / ``ops`` / ``end`` with the turn's ops and final view model).

From Python: :meth:`Explorer.filter`, :meth:`~Explorer.sort`, :meth:`~Explorer.go`,
:meth:`~Explorer.select`, :attr:`~Explorer.filtered` (the matching rows, in order),
:attr:`~Explorer.selection` (the selected row), :attr:`~Explorer.filter_code` (the same filter as
pandas code on ``turns``). A saved notebook shows the page and the open conversation as static HTML.
"""

from __future__ import annotations

import html
import inspect
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._errors import MMSPNotebookError, OptionError, OptionTypeError, TraceError, TraceNotFoundError
from ..core.flags import refuse_unknown
from ..core.pricing import format_cost
from ..core.redact import redact, redact_exception
from ..core.store import SIDECAR_SUFFIX, cache_dir, read_trace
from ..views import format as fmt
from ..views.conversation import CONVERSATION_CSS, conversation_html, tool_error
from ..views.html import CSS
from ..views.live import LiveView, drive
from ..views.model import OpsTracker, present_turn, view_model
from ..views.text import cut_text
from ..views.widget import STATIC, MarkdownWidget
from ._common import check_unique, plain
from ._detail import DETAIL_BUDGET, Window, cut_waterfall, more
from ._facets import Facets
from ._held import copy_code
from ._query import FACETS, QUICK, RANGE_COLUMNS, TurnQuery
from ._show import Conversation, locate, read_conversation, row_key

__all__ = ["explore", "Explorer", "COLUMNS", "CODE_CHARS"]

#: the filter's pandas code comes with each page up to this length; a longer one (a long value
#: picked or typed) is sent when Copy filter asks for it, so that pages stay small
CODE_CHARS = 4096

#: (column, title, numeric): the table's columns (``error`` is ``error_type: error_message``)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("trace_id", "trace", False), ("turn", "turn", True), ("model", "model", False), ("status", "status", False),
    ("finish_reason", "finish", False), ("latency", "latency", True), ("ttft", "TTFT", True),
    ("cached_tokens", "cached", True), ("prompt_tokens", "prompt", True), ("thoughts_tokens", "thoughts", True),
    ("response_tokens", "response", True), ("cost", "cost", True), ("error", "error", False))


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class _ExplorerLive(LiveView):
    """A replay drawn in the explorer: the ops of the replayed turn, then its final view model."""

    def __init__(self, explorer: Explorer, title: str) -> None:
        self.explorer, self.title, self.tracker = explorer, title, OpsTracker()

    def start(self, turn: Any) -> None:
        self.explorer.send({"type": "replay", "phase": "start", "title": self.title})

    def update(self, turn: Any) -> None:
        ops = self.tracker.ops(turn)
        if ops:
            self.explorer.send({"type": "replay", "phase": "ops", "ops": ops})

    def finish(self, turn: Any) -> None:
        self.update(turn)
        vm = view_model(turn)
        if vm["status"] == "streaming" and turn.status != "streaming":
            # a replayed message whose calls carry their recorded results reads as a turn about to take
            # another step; a replay has no other step: it ended as its turn state says
            timings = turn.timings
            vm.update(present_turn({"status": turn.status, "status_text": "", "error": None, "footer": {
                "usage": turn.usage, "finish_reason": turn.finish_reason, "ttft": timings["ttft"],
                "total": timings["total"], "tokens_per_second": timings["tokens_per_second"], "cost": turn.cost,
                "steps": len(turn.steps)}}))
        self.explorer.send({"type": "replay", "phase": "end", "vm": vm})


class Explorer(MarkdownWidget):
    """The trace explorer (see the module docstring); made by :func:`explore`."""

    _esm = STATIC / "explore.js"
    _css = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("widget.css", "explore.css"))

    def __init__(self, turns: pd.DataFrame, roots: Sequence[str | Path] = (), files: dict[str, Path] | None = None,
                 page_size: int = 25, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns = turns
        self._df = turns.reset_index(drop=True)
        self._roots = [Path(r) for r in roots] or [cache_dir()]
        self._files = dict(files or {})
        self._conversations: OrderedDict[str, Conversation | Exception] = OrderedDict()
        self._windows: OrderedDict[str, Window] = OrderedDict()
        self.selected: int | None = None
        #: bytes of JSON (about) of conversation a detail message carries (see ``_detail``)
        self.detail_budget: float = DETAIL_BUDGET
        self._run: Any = None
        # the loaders count tool errors per turn; a frame without that column (saved by an older
        # version) is scanned from its trace files the first time the filter is used
        scan = {} if "n_tool_errors" in self._df else {"tool_errors": (self._scan_tool_errors, 'turns["tool_error"]')}
        self.q = TurnQuery(self._df, scan, page_size)
        self._facets = Facets(self._df)
        #: the table's columns: those the frame has (nothing to show or sort in the others)
        self._columns = [c for c in COLUMNS if c[0] in self._df or c[0] == "error" and "error_type" in self._df]
        self.on_msg(self._on_msg)

    @property
    def query(self) -> dict[str, Any]:
        """The query now (a copy: change it with :meth:`filter`, :meth:`sort`, :meth:`go`)."""
        return dict(self.q.query)

    def _scan_tool_errors(self) -> np.ndarray:
        """Turns whose tool calls got an error back (a result ``error: …`` or a traceback): one pass over
        the trace files of turns with tool calls, parsing only files whose bytes could hold one."""
        df = self._df
        mask = np.zeros(len(df), dtype=bool)
        if "n_tool_calls" in df and "message_index" in df:
            with_calls = df["n_tool_calls"].fillna(0).to_numpy() > 0
            found: set[tuple[str, int]] = set()
            for tid in pd.unique(df.loc[with_calls, "trace_id"]):
                path = self._locate(str(tid))[0]
                try:
                    raw = path.read_bytes() if path is not None else b""
                    if b"tool_result" not in raw or not (b"rror" in raw or b"RROR" in raw or b"Traceback" in raw):
                        continue
                    history = read_trace(path)["history"] if path is not None else []
                except (OSError, MMSPNotebookError):
                    continue
                for i, message in enumerate(history[:-1]):
                    nxt = history[i + 1]
                    if not isinstance(message, dict) or not isinstance(nxt, dict):
                        continue
                    items = nxt.get("content_items")
                    if message.get("role") == "assistant" and nxt.get("role") == "user" and isinstance(items, list) and any(
                            isinstance(it, dict) and it.get("type") == "tool_result.done" and tool_error(it.get("text"))
                            for it in items):
                        found.add((str(tid), i))
            if found:
                keys = pd.MultiIndex.from_arrays([df["trace_id"].astype(object),
                                                  df["message_index"].fillna(-1).astype("int64")])
                mask = np.asarray(keys.isin(pd.MultiIndex.from_tuples(sorted(found))), dtype=bool)
        self.turns["tool_error"] = mask  # what filter_code refers to
        return mask

    # ------------------------------------------------------------------ what is shown
    @property
    def filtered(self) -> pd.DataFrame:
        """The rows that match the query, in the order shown (the frame's own index labels)."""
        return self.turns.iloc[self.q.order]

    @property
    def filter_code(self) -> str:
        """The query as pandas code on ``turns`` (this explorer's ``turns``; on a frame without
        ``n_tool_errors``, ``tool_error`` is the column the tool-error filter adds to it):
        ``eval(explorer.filter_code)`` equals :attr:`filtered`."""
        return self.q.pandas

    @property
    def selection(self) -> pd.Series | None:
        """The selected row (its label is the frame's), or None."""
        return None if self.selected is None else self.turns.iloc[self.selected]

    @property
    def conversation(self) -> Conversation | None:
        """The selected row's conversation (as ``traces.show`` draws it), or None."""
        found = self._detail_of(self.selected)[0] if self.selected is not None else None
        return found if isinstance(found, Conversation) else None

    def page_message(self) -> dict[str, Any]:
        """What the front end gets for the current page: the query, formatted rows, counts and code."""
        q, total, matched = self.q.query, len(self._df), len(self.q.order)
        rows = []
        positions = self.q.page()
        wanted = [c for c in (*(c for c, _, _ in COLUMNS), "error_type", "error_message") if c in self._df]
        window = self._df.iloc[positions][wanted]
        values = {c: window[c].astype(object).tolist() for c in wanted}  # the page's values, column by column
        for k, pos in enumerate(positions.tolist()):
            row = {c: v[k] for c, v in values.items()}
            rows.append([pos, redact(_s(row.get("status"))), redact(_s(row.get("finish_reason"))),  # (as their cells)
                         [_cell(row, c) for c, _, _ in self._columns]])
        counts = self.q.counts
        quick = [[name, label if counts.get(name) is None else f"{label} ({fmt.integer(counts[name])})"]
                 for name, label in QUICK.items()]
        facets = {k: self._facets.items(k, q[k]) for k in FACETS}
        code = self.filter_code
        summary = f"{fmt.integer(matched)} of {fmt.integer(total)} turns · answered in {fmt.seconds(self.q.took_ms / 1000)}"
        return {"type": "page", "query": self._facets.query(q), "columns": [list(c) for c in self._columns], "rows": rows, "total": total,
                "matched": matched, "pages": self.q.pages, "selected": self.selected, "summary": summary,
                "page_label": f"page {fmt.integer(q['page'] + 1)} of {fmt.integer(self.q.pages)}",
                "facets": facets, "quick": quick, "code": code if len(code) <= CODE_CHARS and redact(code) == code else None,
                "took_ms": round(self.q.took_ms, 1),
                "ranges": [c for c in RANGE_COLUMNS if c in self._df], **self._facets.other()}

    # ------------------------------------------------------------------ detail
    def _locate(self, trace_id: str) -> tuple[Path | None, Path | None]:
        check_unique(trace_id, self.turns.attrs)
        path, sidecar = locate(trace_id, self._roots)
        if path is None and sidecar is None:
            given = self._files.get(trace_id) or self._files.get(Path(trace_id).name)
            if given is not None:
                if str(given).endswith(SIDECAR_SUFFIX):
                    return None, given
                return given, None
        return path, sidecar

    def _detail_of(self, pos: int) -> tuple[Conversation | Exception, str | None, int | None]:
        row = self._df.iloc[pos]
        tid = str(row["trace_id"])
        found = self._conversations.get(tid)
        if found is None:
            try:
                path, sidecar = self._locate(tid)
                if path is None and sidecar is None:
                    raise FileNotFoundError(f"no trace file or sidecar for {tid} under "
                                            f"{', '.join(map(str, self._roots))}")
                found = Conversation(read_conversation(tid, path, sidecar), path, sidecar)
            except Exception as exc:  # a damaged or missing file: said in the detail pane, the explorer goes on
                redact_exception(exc)  # (it names the trace id and its path, which may hold a key)
                found = exc
            self._conversations[tid] = found
            while len(self._conversations) > 8:
                self._conversations.popitem(last=False)
        else:
            self._conversations.move_to_end(tid)
        if isinstance(found, Exception):
            return found, None, None
        key, index = row_key(found.view, row)
        return found.select(key, index), key, index

    def detail_message(self) -> dict[str, Any]:
        if self.selected is None:
            return {"type": "detail", "row": None}
        t0 = time.perf_counter()
        found, key, index = self._detail_of(self.selected)
        row = self._df.iloc[self.selected]
        title = f"{_shown(row['trace_id'])} · turn {_cell({'turn': row.get('turn')}, 'turn')}"
        if isinstance(found, Exception):
            return {"type": "detail", "row": self.selected, "title": title,
                    "error": redact(f"{type(found).__name__}: {found}")}
        window = self._window(found)
        if not window.blocks:  # (a sidecar whose trace file is gone: no message to draw, its notes say why)
            return {"type": "detail", "row": self.selected, "title": title,
                    "error": "; ".join(found.view["notes"]) or "this conversation holds no message to draw"}
        at = window.block_of(key, index)
        lo, hi = window.around(at, self.detail_budget)
        pieces = window.pieces(lo, hi)
        steps = next((p["steps"] for p in pieces if p["key"] == key and "steps" in p), None)
        return {"type": "detail", "row": self.selected, "title": title, "outline": window.outline(),
                "blocks": len(window.blocks), "window": [lo, hi], "entries": pieces, "selected": key,
                "selected_step": window.blocks[at][1], "index": index,
                "waterfall": cut_waterfall(found.waterfall(), steps), "notes": found.view["notes"],
                "source": redact(found.view["source"]), "replayable": index is not None and found.path is not None,
                "took_ms": round((time.perf_counter() - t0) * 1000.0, 1)}

    def more_message(self, content: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to the front end's ``more`` (the blocks before or after its window), or None."""
        row = content.get("row")
        if type(row) is not int or not 0 <= row < len(self._df):
            return None
        found = self._detail_of(row)[0]
        return None if isinstance(found, Exception) else more(self._window(found), content, self.detail_budget)

    def _window(self, found: Conversation) -> Window:
        """The blocks of a conversation (kept with it: its sizes are measured once)."""
        window = self._windows.get(found.trace_id)
        if window is None or window.view is not found.view:
            window = self._windows[found.trace_id] = Window(found.view)
            while len(self._windows) > 8:
                self._windows.popitem(last=False)
        return window

    # ------------------------------------------------------------------ Python API
    def filter(self, text: str | None = None, *, model: Any = None, status: Any = None, finish: Any = None,
               ranges: dict[str, tuple[float | None, float | None]] | None = None,
               quick: Iterable[str] | None = None) -> Explorer:
        """Change the filter (only what is given); back to the first page."""
        patch: dict[str, Any] = {}
        for name, value in (("text", text), ("model", model), ("status", status), ("finish", finish),
                            ("ranges", ranges), ("quick", quick)):
            if value is not None:
                patch[name] = value
        return self._apply({**patch, "page": 0})

    def sort(self, column: str | None, descending: bool = False) -> Explorer:
        """Sort by a column (``None``: the frame's order)."""
        return self._apply({"sort": column, "desc": descending, "page": 0})

    def go(self, page: int) -> Explorer:
        """Show page ``page`` (0-based)."""
        return self._apply({"page": page})

    def select(self, n: int = 0) -> Explorer:
        """Select the ``n``-th row of :attr:`filtered` and open its conversation."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or not 0 <= n < len(self.q.order):
            raise OptionError(f"there is no row {n!r}: {len(self.q.order)} rows match the filter")
        self.selected = int(self.q.order[int(n)])  # (a NumPy integer too)
        self.send(self.detail_message())
        return self

    def replay(self, speed: float = 1.0) -> Any:
        """Replay the selected assistant message into the explorer with its recorded timing (in the
        background); returns the future of the replayed Turn."""
        if self.selected is None:
            raise OptionError("select a row first (explorer.select(n))")
        found, _, index = self._detail_of(self.selected)
        row = self._df.iloc[self.selected]
        if isinstance(found, Exception):  # a damaged or unreadable trace file: said as the detail pane says it
            cls = TraceNotFoundError if isinstance(found, FileNotFoundError) else TraceError
            raise cls(f"this row's trace cannot be read, so there is nothing to replay: "
                             f"{type(found).__name__}: {found}", path=getattr(found, "path", None)) from found
        if found.path is None and _s(row.get("status")) in ("", "complete"):
            raise TraceNotFoundError(f"no trace file of {_shown(row['trace_id'])}, so there is nothing to replay: "
                                     + ("; ".join(found.view["notes"]) or "only its timing sidecar was found"),
                                     path=str(found.sidecar) if found.sidecar is not None else None)
        if index is None or found.path is None:
            raise OptionError("this row's response was never recorded (it failed): there is nothing to replay")
        from ..front.replay import start_replay  # the explorer's Replay plays as mmsp_notebook.replay does

        if self._run is not None:
            self._run.abort("replaced by another replay")
        run, future = start_replay(found.path, turn=int(row["turn"]), speed=speed)
        self._run = run
        pace = "at once" if speed >= 1e6 else f"at {speed:g}×"
        live = _ExplorerLive(self, f"replay of {_shown(row['trace_id'])} · turn {_cell({'turn': row.get('turn')}, 'turn')} {pace}")
        threading.Thread(target=drive, args=(run, future, live), name="mmsp-explorer-replay", daemon=True).start()
        return future

    def _apply(self, patch: dict[str, Any]) -> Explorer:
        self.q.update(patch)
        self.send(self.page_message())
        return self

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        try:
            if kind == "hello":
                self.send({"type": "state", "page": self.page_message(), "detail": self.detail_message()})
            elif kind == "query" and isinstance(content.get("patch"), dict):
                self._apply(self._facets.resolve(content["patch"]))
            elif kind == "select" and type(content.get("row")) is int and 0 <= content["row"] < len(self._df):
                self.selected = content["row"]
                self.send(self.detail_message())
            elif kind == "more":
                answer = self.more_message(content)
                if answer is not None:
                    self.send(answer)
            elif kind == "code":  # Copy filter, for a code too long to come with every page or holding a key
                self.send({"type": "code", "code": copy_code(self.filter_code)})
            elif kind == "replay":
                self.replay(_speed(content.get("speed")))
            elif kind == "stop" and self._run is not None:
                self._run.abort("stopped")
        except Exception as exc:  # said in the widget; the explorer stays usable
            self.send({"type": "error", "error": redact(f"{type(exc).__name__}: {exc}")})

    # ------------------------------------------------------------------ static
    def static_html(self) -> str:
        """The current page and the open conversation as static sanitized HTML (a saved notebook's view)."""
        msg = self.page_message()
        head = "".join(f'<th scope="col">{html.escape(t)}</th>' for _, t, _ in self._columns)
        mark = ' aria-selected="true"'
        body = "".join(
            f'<tr data-status="{html.escape(status)}"{mark if pos == self.selected else ""}>'
            + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for pos, status, _, cells in msg["rows"])
        code = msg["code"]
        if code is None:  # long, or holding a key: shown redacted, cut
            shown, left = cut_text(redact(self.filter_code), CODE_CHARS)
            code = shown[:-1] + "…" if left else shown  # (CODE_CHARS characters in all, the mark of the cut one of them)
        summary = f"{msg['summary'].split(' · ')[0]} · {msg['page_label']}" + (f" · {code}" if code != "turns" else "")
        detail = ""
        if self.selected is not None:
            found = self._detail_of(self.selected)[0]
            detail = (f'<div class="mmsp-x-empty">{html.escape(redact(str(found)))}</div>' if isinstance(found, Exception)
                      else conversation_html(found.view, found.selected, style=False, wf=found.waterfall()))
            detail = f'<div class="mmsp-x-detail">{detail}</div>'
        return (f"<style>{CSS}{CONVERSATION_CSS}</style><div class=\"mmsp-root mmsp-static mmsp-explorer\">"
                f'<div class="mmsp-x-summary">{html.escape(summary)}</div><div class="mmsp-x-table-wrap">'
                f'<table class="mmsp-x-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
                f"{detail}</div>")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/html"] = self.static_html()
            data["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        return f"<Explorer: {len(self.q.order):,} of {len(self._df):,} turns>"


def _speed(value: Any) -> float:
    speed = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1.0
    return speed if speed > 0 else 1.0


def _s(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT:
        return ""
    return str(value)


def _shown(trace_id: Any) -> str:
    """A row's trace id as a title shows it: redacted as its cell is (a trace file not written here
    may hold a key in it), isolated in the line it is joined into. (Rows are looked up by position,
    never by the id shown.)"""
    return fmt.isolate(redact(_s(trace_id)))


def _cell(row: dict[str, Any], col: str) -> str:
    """A cell's text; a number column holding something else (a frame built by hand) shows it as text,
    and every text is cut to 160 characters (the page's bytes stay bounded)."""
    value = row.get(col)
    if col == "error":
        kind, message = _s(row.get("error_type")), _s(row.get("error_message"))
        text = redact(f"{kind}: {message}" if kind and message else kind or message)
    elif fmt.is_number(value) and col in ("latency", "ttft"):
        return fmt.seconds(value)  # (numbers as formatted here: nothing to redact or cut)
    elif fmt.is_number(value) and col == "cost":
        return format_cost(float(value))
    elif fmt.is_number(value) and (col.endswith("_tokens") or col == "turn"):
        return fmt.integer(value)
    else:
        text = redact(_s(value))  # (model ids, trace ids... as a trace file holds them)
    return text if len(text) <= 160 else text[:159] + "…"


def _roots(root: str | Path | Sequence[str | Path] | None) -> list[Path]:
    """``root=`` as a list of directories (``~`` expanded, as load_turns takes it)."""
    paths = [root] if isinstance(root, (str, os.PathLike)) else list(root or [])
    return [Path(r).expanduser() for r in paths]


def _sources(source: Any) -> tuple[list[Path], dict[str, Path]]:
    """The roots trace ids are relative to, and the files given on their own (by trace id stem)."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    roots: list[Path] = []
    files: dict[str, Path] = {}
    for item in items:
        p = Path(item).expanduser()  # (as load_turns takes ~)
        if p.is_dir():
            roots.append(p)
        else:
            name = p.name.removesuffix(SIDECAR_SUFFIX).removesuffix(".json")
            files[name] = p
    return roots, files


def explore(source: Any, *, root: str | Path | Sequence[str | Path] | None = None, page_size: int = 25,
            **load_options: Any) -> Explorer:
    """A widget to find turns among many, read their conversations and replay them.

    Args:
        source: A trace directory, a trace file or a list of them (loaded with
            :func:`~mmsp_notebook.traces.load_turns`, ``**load_options`` passed on), or a turns frame
            already loaded (``otel=True`` names too).
        root: Where the trace ids of a frame are found (default ``MMSP_CACHE_DIR``; several roots
            are tried in order). For a path, the path itself.
        page_size: Rows per page (1 to 500).

    Returns:
        An :class:`Explorer`: the table (trace, turn, model, status, finish, latency, TTFT, tokens per
        bucket, cost, error) with search, facets, ranges and quick filters (errors, truncations, bad
        tool arguments, tool errors, slowest TTFT, longest thinking), paged; the selected row's
        conversation with its turn's timing waterfall and a Replay button. ``explorer.filtered``,
        ``explorer.selection`` and ``explorer.filter_code`` bring it back to pandas.
    """
    if isinstance(source, pd.DataFrame):
        if load_options:
            raise OptionError(f"load options ({', '.join(load_options)}) apply to a path, not to a loaded frame")
        twice = sorted({str(c) for c in source.columns[source.columns.duplicated()]})
        if twice:
            raise OptionError(f"the frame has columns named twice ({', '.join(twice)}): keep one of each "
                              "(df.loc[:, ~df.columns.duplicated()])")
        turns = plain(source).copy(deep=False)
        roots = _roots(root)
        files: dict[str, Path] = {}
    elif isinstance(source, (str, os.PathLike)) or (isinstance(source, Iterable) and not isinstance(source, bytes)):
        from ._load import load_turns

        # (a keyword named as explore's, not load_turns', with the nearest one)
        refuse_unknown("explore", load_options, ["root", "page_size", *list(inspect.signature(load_turns).parameters)[1:]])
        turns = plain(load_turns(source, **load_options))  # (otel=True: read as a loaded frame of it is)
        roots, files = _sources(source)
        roots += _roots(root)
    else:
        raise OptionTypeError(f"explore takes a trace path, a list of them or a turns frame, not {type(source).__name__}")
    if "trace_id" not in turns:
        raise OptionError("the frame has no trace_id column: pass a frame of traces.load_turns")
    return Explorer(turns, roots, files, page_size=page_size)
