"""A whole recorded conversation drawn with the turn view: user messages, each assistant message as a
turn (its view model, :func:`~.model.view_model`; its static HTML, :func:`~.html.render_html`), the
responses that failed where they happened, and a timing waterfall of one response.

Nothing here reads a file: :mod:`mmsp_notebook.traces` finds a trace and its timing sidecar and
hands over the history (UniMessages as the Tracer stores them, bytes as base64 text), the config and
the sidecar records. Each assistant message becomes a :class:`~mmsp_notebook.Turn` by feeding its
``.done`` items through a :class:`~mmsp_notebook.TurnState` on a clock that reads the sidecar's
times, so the footer (TTFT, total, tokens/s), the thinking label ("Thought for 1.2 s") and every
item's duration are the recorded ones; without a sidecar record the turn has no clock marks and
shows none. A message's tool calls get the results of the user message that follows it (a result
starting with ``error:`` — this project's convention for a tool that raised — or a Python traceback
is shown raised). A response the trace never recorded (failed, cut off, cancelled: sidecar only) is
a turn with its banner and what its record says, in place. A damaged message is named in place and
the rest is drawn.

The conversation view model (:func:`build_conversation`) is what the explorer's front end draws
(``js/src/explore.js``); :func:`conversation_html` and :func:`conversation_text` are its static
templates. Every string of the trace is escaped or goes through the turn view's sanitizer.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.fields import as_int, attempt_order, record_status
from ..core.items import GROWING_FIELD, ToolRun, not_a_number
from ..core.redact import held_secrets, redact, redact_value
from ..core.stamps import created_ms
from ..core.state import TurnState
from ..core.store import completed, tool_error
from ..core.turn import Turn, media_kind
from . import format as fmt
from .html import _IMAGE_SRC, CSS, render_html, render_text
from .model import ERROR_LIMIT, STATUS_TEXT, present_turn, present_view, view_model
from .text import HTML_TEXT_LIMIT, cut_text, footer_line, not_shown, printable
from .waterfall import number as _number
from .waterfall import stop_ms as _stop_ms
from .waterfall import waterfall, waterfall_html

__all__ = ["build_conversation", "conversation_html", "conversation_text", "step_lines", "waterfall", "waterfall_html",
           "tool_error", "message_turn", "CONVERSATION_CSS"]

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_LEGACY = {"text": "text.done", "thinking": "thinking.done", "tool_call": "tool_call.done",
           "inline_data": "inline_data.done", "tool_result": "tool_result.done", "image_url": "image_url.done"}


def _read_css() -> str:
    try:
        css = (Path(__file__).resolve().parent.parent / "static" / "explore.css").read_text(encoding="utf-8").strip()
    except OSError:  # pragma: no cover - the bundle is part of the package
        return ""
    return re.sub(r"\.mmsp-root(?![\w-])", ".mmsp-root.mmsp-static", css).replace("</", "<\\/")


#: The explorer's stylesheet (``static/explore.css``) as the static view embeds it.
CONVERSATION_CSS = _read_css()
_STYLE = f"<style>{CSS}{CONVERSATION_CSS}</style>"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# ---------------------------------------------------------------------------------------------- items
def _type(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    return _LEGACY.get(kind, kind) if isinstance(kind, str) else ""


def _decoded(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item with its inline bytes decoded (ValueError when they are not base64)."""
    out = dict(item)
    out["type"] = _type(item)
    if out["type"].startswith(("inline_data.", "inline_thinking.")):
        data = out.get("data")
        if isinstance(data, str):
            try:
                out["data"] = base64.b64decode(data, validate=False)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"its data is not base64 ({exc})") from None
        elif not isinstance(data, (bytes, bytearray)):
            raise ValueError(f"its data is a {type(data).__name__}, not base64 text")
    return out


def _problem(item: Mapping[str, Any]) -> str | None:
    """Why a ``.done`` item of an assistant message cannot go through the turn state, or None."""
    kind = item["type"].rpartition(".")[0]
    value = item.get(GROWING_FIELD[kind])
    if kind == "tool_call":
        if not isinstance(value, dict):
            return f"tool call arguments that are a {type(value).__name__}, not an object"
        if not isinstance(item.get("name"), str) or not item.get("name") or not isinstance(item.get("tool_call_id"), str):
            return "a tool call without its name or id"
        return None
    expected: dict[str, Any] = {"text": str, "thinking": str, "inline_data": (bytes, bytearray),
                                "inline_thinking": (bytes, bytearray), "embedding": list}
    if value is None:  # (the turn state refuses a done without its content: mmsp's always carry it)
        return f"a {kind} item without its {GROWING_FIELD[kind]}"
    if not isinstance(value, expected[kind]):
        return f"a {kind} item whose {GROWING_FIELD[kind]} is a {type(value).__name__}"
    if kind == "embedding" and not_a_number(value) is not None:
        return "an embedding that is not a list of numbers"
    return None


def _item_times(record: Mapping[str, Any] | None, items: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]] | None:
    """``(first delta, done)`` in seconds for each item, from the record's events; None when they do
    not describe these items (the same walk as a replay's)."""
    events = record.get("events") if record else None
    if not isinstance(events, list):
        return None
    rows = [e for e in events if isinstance(e, list) and len(e) >= 2 and fmt.is_number(e[0]) and isinstance(e[1], str)
            and e[1] != "stop"]
    out, n = [], 0
    for item in items:
        kind = item["type"].rpartition(".")[0]
        first = None
        while n < len(rows) and rows[n][1] == f"{kind}.delta":
            first = rows[n][0] if first is None else first
            n += 1
        if first is None or n >= len(rows) or rows[n][1] != f"{kind}.done":
            return None
        out.append((first / 1000.0, rows[n][0] / 1000.0))
        n += 1
    return out if n == len(rows) else None


def _content_items(message: Mapping[str, Any], notes: list[str]) -> list[Any]:
    """A message's ``content_items``; one that is no list is named in ``notes`` (a text's characters
    are not items) and read as none."""
    items = message.get("content_items")
    if not isinstance(items, list) and items is not None:
        notes.append(f"content_items is damaged: a {type(items).__name__}, not a list")
    return fmt.listed(items)


def _items(message: Mapping[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    """The ``.done`` items of an assistant message the turn state can take (the others named in ``notes``)."""
    items: list[dict[str, Any]] = []
    for n, raw in enumerate(_content_items(message, notes)):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str):
            notes.append(f"content item {n} is not an item (no type)")
            continue
        try:
            item = _decoded(raw)
        except ValueError as exc:
            notes.append(f"content item {n} ({raw['type']}) is damaged: {exc}")
            continue
        kind, _, phase = item["type"].rpartition(".")
        if phase != "done" or kind not in GROWING_FIELD:
            notes.append(f"content item {n}: {item['type']}")
            continue
        problem = _problem(item)
        if problem:
            notes.append(f"content item {n} is damaged: {problem}")
            continue
        items.append(item)
    return items


def _step(message: Mapping[str, Any], record: Mapping[str, Any] | None, offset: float | None,
          notes: list[str]) -> TurnState:
    """One recorded assistant message fed through a turn state whose clock reads its sidecar record
    (shifted by ``offset`` seconds, the request's time in the turn); without one, no clock marks."""
    items = _items(message, notes)
    timed = record is not None and offset is not None and _stop_ms(record) is not None
    times = _item_times(record, items) if timed else None
    base = offset or 0.0
    ttft = _number(record.get("ttft_ms")) if timed and record else None
    stop = (_stop_ms(record) or 0.0) / 1000.0 if timed and record else 0.0
    started = _number(record.get("started_at")) if record else None
    state = TurnState(clock=lambda: base, wall=lambda: (started or 0.0) / 1000.0)
    state.mark_request_sent()
    ms = created_ms(message.get("created_at"))  # (seconds from other producers: read as ms, an int as mmsp stamps)
    created = None if ms is None else int(ms)
    for k, item in enumerate(items):
        kind = item["type"].rpartition(".")[0]
        field = GROWING_FIELD[kind]
        delta: dict[str, Any] = {"type": f"{kind}.delta"}
        if kind == "tool_call":
            delta.update(arguments=json.dumps(item["arguments"], ensure_ascii=False), name=item["name"],
                         tool_call_id=item["tool_call_id"])
        else:
            delta[field] = item[field]  # (never None: _items names such an item damaged)
            if item.get("mime_type"):
                delta["mime_type"] = item["mime_type"]
        at = times[k] if times else ((ttft or 0.0) / 1000.0,) * 2
        for event, when in ((delta, at[0]), (item, at[1])):
            state.feed({"role": "assistant", "event_type": "delta", "content_items": [event], "usage_metadata": None,
                        "finish_reason": None, "created_at": created}, at=base + when)
    usage = message.get("usage_metadata")
    reason = message.get("finish_reason")
    state.feed({"role": "assistant", "event_type": "stop", "content_items": [],
                "usage_metadata": usage if isinstance(usage, dict) else {},
                "finish_reason": reason if isinstance(reason, str) and reason else "unknown", "created_at": created},
               at=base + stop)
    if not timed:  # no clock: no time is shown
        state.request_sent = state.first_delta = state.first_event = state.stopped = state.ended = None
    if times is None:  # the sidecar does not describe the items: no per-item durations
        for it in state.items:
            it.ended = None
        if ttft is None:
            state.first_delta = None
    return state


def message_turn(steps: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                 results: Sequence[Mapping[str, str]] = (), *, model: str = "", client_type: str | None = None,
                 config: Mapping[str, Any] | None = None, trace_id: str | None = None) -> tuple[Turn, list[str], set[int]]:
    """Recorded assistant messages (the steps of one turn, each with its sidecar record or None) as a
    finished :class:`~mmsp_notebook.Turn`: ``(turn, notes, untimed)``.

    ``results[k]`` maps the tool call ids of step ``k`` to the result texts of the user message that
    followed it; the tools ran between that step's stop and the next step's request. ``notes`` say
    what could not be drawn; ``untimed`` holds the items (indices in ``turn.items``) whose tool run
    has no measured duration.
    """
    notes: list[str] = []
    origin = next((at for _, rec in steps if rec and (at := _number(rec.get("started_at"))) is not None), None)
    turn = Turn(None, model=model, client_type=client_type, trace_id=trace_id, config=dict(config or {}))
    offsets: list[float | None] = []
    for message, rec in steps:
        at = _number(rec.get("started_at")) if rec else None
        offset = None if at is None or origin is None else (at - origin) / 1000.0
        offsets.append(offset)
        turn.steps.append(_step(message, rec, offset, notes))
    untimed: set[int] = set()
    n = 0
    for k, state in enumerate(turn.steps):
        found = results[k] if k < len(results) else {}
        last = k == len(turn.steps) - 1
        nxt = offsets[k + 1] if not last else None
        span = (state.ended, nxt) if state.ended is not None and nxt is not None and nxt >= state.ended else None
        for it in state.items:
            if it.kind == "tool_call" and it.tool_call_id in found:
                text = found[it.tool_call_id]
                if text.startswith("not run:"):  # what the card says of a call without a run
                    pass
                elif last:  # nothing followed: a result with no step after it is named, not drawn as a run
                    notes.append(f"tool result of {fmt.isolate(it.name)}: {text[:500]}")
                else:
                    it.tool_run = ToolRun(it.name, it.tool_call_id, it.arguments or {}, output=text,
                                          error=tool_error(text), started=span[0] if span else 0.0,
                                          ended=span[1] if span else 0.0)
                    if span is None:
                        untimed.add(n)
            n += 1
    return turn, notes, untimed


def _turn_vm(turn: Turn, untimed: set[int]) -> dict[str, Any]:
    vm = view_model(turn)
    for item in vm["items"]:  # a result without a measured run shows no duration
        if item.get("i") in untimed and isinstance(item.get("result"), dict):
            item["result"]["took"] = ""
    return vm


def _step_lines(turn: Turn) -> list[str]:
    """Per assistant message: its footer's stats (for a turn of several) and each item's duration."""
    return [line for line in step_lines(turn) if line]


def step_lines(turn: Turn) -> list[str]:
    """The timing line of each step (assistant message) of ``turn``, in order ("" for one with none)."""
    lines = []
    for k, state in enumerate(turn.steps):
        parts = []
        if len(turn.steps) > 1:
            facts = {"usage": state.usage, "finish_reason": state.finish_reason, "ttft": state.ttft,
                     "total": None if state.request_sent is None else state.total,
                     "tokens_per_second": state.tokens_per_second, "steps": 1}
            parts.append(footer_line(present_turn({"status": "complete", "footer": facts})["footer"]))
        for item in state.items:
            if item.duration is not None:
                name = fmt.isolate(item.name) if item.kind == "tool_call" else media_kind(item) if item.kind == "inline_data" else item.kind
                parts.append(f"{name} {fmt.seconds(item.duration)}")
        lines.append((f"step {k + 1}: " if len(turn.steps) > 1 else "timing: ") + " · ".join(p for p in parts if p)
                     if any(parts) else "")
    with held_secrets():  # (a tool's name as the trace holds it: redacted as the turn view redacts it)
        return [redact(line) for line in lines]


# ---------------------------------------------------------------------------------------------- failed
def _failed_vm(record: Mapping[str, Any], key: str, model: str) -> dict[str, Any]:
    """The view of a response the trace file does not hold, from its sidecar record alone."""
    status = redact(record_status(record))  # (the loaders' status column: a foreign word kept, else "unknown")
    error = record.get("error") if isinstance(record.get("error"), Mapping) else {}
    events = [e for e in fmt.listed(record.get("events")) if isinstance(e, list) and len(e) >= 3]
    arrived = [e for e in events if str(e[1]).endswith(".delta")]
    if status == "error" and not arrived:
        text = "failed before any output"
    elif status == "cancelled" and not arrived:
        text = "cancelled before any output"
    else:
        text = STATUS_TEXT.get(status, "")
    facts: dict[str, Any] = {"id": key, "model": model, "status": status, "status_text": text,
             "error": {"type": redact(str(error.get("type") or "")) or None, "message": redact(str(error.get("message") or "")),
                       "hint": ""} if error else None,
             "footer": {"usage": record.get("usage") if isinstance(record.get("usage"), Mapping) else None,
                        "finish_reason": record.get("finish_reason") if isinstance(record.get("finish_reason"), str)
                        else None,
                        "ttft": _seconds(record.get("ttft_ms")), "total": _seconds(record.get("total_ms")),
                        "tokens_per_second": None, "cost": None, "cost_text": "", "steps": 1},
             "items": []}
    vm = present_view(facts)
    if status not in ("error", "incomplete", "cancelled") and not completed(record):  # drawn as no live turn
        said = ("recorded as complete, without the message it timed" if status == "complete" else
                "its record holds no status" if status == "unknown" else f"ended with status {fmt.isolate(status)}")
        err = facts["error"] or {}
        detail, left = cut_text(": ".join(x for x in (err.get("type"), err.get("message")) if x), ERROR_LIMIT)
        detail += "…" if left else ""
        vm["banner"] = {"kind": "muted", "text": said, **({"detail": detail} if detail else {})}
    return vm


def _seconds(ms: Any) -> float | None:
    return float(ms) / 1000.0 if fmt.is_number(ms) else None


def _beyond_note(record: Mapping[str, Any]) -> str:
    return (f"completed as message {fmt.isolate(as_int(record.get('message_index')))}, which the trace file does not hold "
            "(saved before it, or an older copy): its content is not shown, its timing is the sidecar's")


def _arrived_note(record: Mapping[str, Any]) -> str:
    sizes: dict[str, int] = {}
    for e in fmt.listed(record.get("events")):
        if isinstance(e, list) and len(e) >= 3 and isinstance(e[1], str) and e[1].endswith(".delta") and fmt.is_number(e[2]):
            kind = e[1].rpartition(".")[0]
            sizes[kind] = sizes.get(kind, 0) + int(e[2])
    if not sizes:
        return "nothing arrived before it ended; the trace records no failed response"
    said = ", ".join(f"{fmt.isolate(kind)} {fmt.integer(n)}" for kind, n in sizes.items())
    return f"arrived before it ended (not recorded in the trace): {said}"


# ---------------------------------------------------------------------------------------------- users
def _user(message: Mapping[str, Any]) -> tuple[str, list[dict[str, str]], list[str], dict[str, str]]:
    """(text, images, notes, tool results by call id) of a user message."""
    texts: list[str] = []
    images: list[dict[str, str]] = []
    notes: list[str] = []
    results: dict[str, str] = {}
    for n, raw in enumerate(_content_items(message, notes)):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str):
            notes.append(f"content item {n} is not an item (no type)")
            continue
        kind = _type(raw)
        if kind == "text.done":
            texts.append(raw["text"] if isinstance(raw.get("text"), str) else json.dumps(raw.get("text"), default=str))
        elif kind == "tool_result.done":
            text = raw.get("text")
            call = raw.get("tool_call_id")
            results[str(call)] = text if isinstance(text, str) else json.dumps(text, default=str)
            for src in fmt.listed(raw.get("images")):
                images.append(_image(src, f"tool result image ({call})"))
        elif kind == "image_url.done":
            images.append(_image(raw.get("image_url"), "attached image"))
        elif kind == "inline_data.done":
            mime = str(raw.get("mime_type") or "")
            data = raw.get("data")
            if mime.split(";")[0].strip().lower() in _IMAGE_TYPES and isinstance(data, str):
                images.append(_image(f"data:{mime.split(';')[0].strip().lower()};base64,{data}", "attached image"))
            else:
                size = len(data) * 3 // 4 if isinstance(data, str) else None
                notes.append(f"attached {fmt.isolate(mime) or 'data'}" + (f" · {fmt.size(size)}" if size is not None else ""))
        else:
            notes.append(f"content item {n}: {kind}")
    return "\n\n".join(texts), images, notes, results


def _image(src: Any, alt: str) -> dict[str, str]:
    """An image drawn from its data URL, or a note naming it (a URL's keys redacted: ``?key=…``; the
    base64 of an image drawn is never searched, where a key's shape can occur by chance)."""
    alt = redact_value(alt)
    if isinstance(src, str) and _IMAGE_SRC.fullmatch(src):
        return {"src": src, "alt": alt}
    shown = src if isinstance(src, str) and not src.startswith("data:") else (src[:40] + "…" if isinstance(src, str) else "")
    return {"note": redact_value(f"{alt} not shown (only PNG, JPEG, GIF or WebP data URLs are displayed){': ' + shown if shown else ''}")}


# ---------------------------------------------------------------------------------------------- building
def _turn_of(record: Mapping[str, Any]) -> int | None:
    return as_int(record.get("turn"))  # (a whole-number float too, as the loaders read it)


def build_conversation(history: Sequence[Any], config: Mapping[str, Any], records: Sequence[Mapping[str, Any]] = (),
                       *, trace_id: str = "", source: str = "", notes: Sequence[str] = ()) -> dict[str, Any]:
    """The view model of a whole conversation: ``{"trace_id", "source", "notes", "entries", "turns"}``.

    Each entry is ``{"kind": "user" | "assistant" | "failed" | "sidecar" | "damaged", "key", "label", ...}``: a
    user entry has ``text``, ``images`` and ``notes``; an assistant entry is one turn as the
    project draws it — the assistant messages from one user prompt to the next (a tool-using turn
    has one per step, the user messages of tool results between them are drawn in the calls they
    answer) — with its view model ``vm``, the history ``indices`` of its messages, their ``turns``
    (0-based among the trace's assistant messages, as ``load_turns`` counts), per-message ``lines``
    and ``notes``; a failed entry (a sidecar record of a response the trace never recorded) has its
    ``vm`` and a ``note``, before the message of the turn it preceded; a damaged entry says what is
    wrong. ``turns`` maps each entry key to ``(Turn or None, [(history index, record), ...])`` for
    :func:`waterfall`. Keys: ``m<history index of the first message>``, ``f<n>`` for failed ones.
    """
    model = str(config.get("model") or "")
    done: dict[int, Mapping[str, Any]] = {}
    failed: list[Mapping[str, Any]] = []
    for r in records:
        t = _turn_of(r)
        if t is None:
            continue
        if completed(r):
            done[t] = r
        else:
            failed.append(r)
    n_answers = sum(1 for m in history if isinstance(m, Mapping) and m.get("role") == "assistant")
    failed.extend(r for t, r in done.items() if t >= n_answers)  # completed, but beyond the trace file
    failed.sort(key=attempt_order)  # (the loaders' order of these rows)
    entries: list[dict[str, Any]] = []
    turns: dict[str, Any] = {}
    fi = 0

    def add_failed(upto: int | None) -> None:
        nonlocal fi
        while fi < len(failed) and (upto is None or (_turn_of(failed[fi]) or 0) <= upto):
            rec, key = failed[fi], f"f{fi}"
            rec_model = str(rec.get("model") or model)
            beyond = completed(rec)  # a completed response the trace file does not hold
            entries.append({"kind": "sidecar" if beyond else "failed", "key": key, "turns": [_turn_of(rec)],
                            "indices": [], "status": record_status(rec), "started": _number(rec.get("started_at")),
                            "message_index": as_int(rec.get("message_index")) if beyond else None,
                            "label": f"assistant · turn {_turn_of(rec)} · {fmt.isolate(rec_model)} · {fmt.isolate(record_status(rec))} (sidecar only)",
                            "vm": _failed_vm(rec, key, rec_model), "note": _beyond_note(rec) if beyond else _arrived_note(rec)})
            turns[key] = (None, [(None, rec)])
            fi += 1

    # group the history: a turn is an assistant message and the steps that follow it through tool results
    groups: list[list[int]] = []
    n_assistant: dict[int, int] = {}
    for index, message in enumerate(history):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            n_assistant[index] = len(n_assistant)
            previous = history[index - 1] if index else None
            continues = (groups and index >= 2 and groups[-1][-1] == index - 2 and isinstance(previous, Mapping)
                         and _only_results(previous))
            if continues:
                groups[-1].append(index)
            else:
                groups.append([index])
    first_of = {g[0]: g for g in groups}
    inside = {i for g in groups for i in g[1:]} | {i + 1 for g in groups for i in g[:-1]}
    inside |= {g[-1] + 1 for g in groups if g[-1] + 1 < len(history) and isinstance(history[g[-1] + 1], Mapping)
               and _only_results(history[g[-1] + 1])}  # its results are in the turn (its notes, "not run")
    for index, message in enumerate(history):
        if index in inside:
            continue
        if not isinstance(message, Mapping):
            entries.append({"kind": "damaged", "key": f"m{index}", "index": index, "indices": [index],
                            "label": f"message {index}",
                            "text": f"message {index} is damaged: a {type(message).__name__}, not a message object"})
            continue
        role = message.get("role")
        if role == "assistant":
            group = first_of[index]
            add_failed(n_assistant[index])
            entries.append(_assistant_entry(history, group, [n_assistant[i] for i in group], done, config, trace_id,
                                            model, turns))
        elif role == "user":
            add_failed(sum(1 for i in n_assistant if i < index))  # an attempt that failed came before this prompt
            text, images, user_notes, results = _user(message)
            if not text and not images and not user_notes and results:
                user_notes = [f"tool result {k}: {v}" for k, v in results.items()]
            text, left = cut_text(text, HTML_TEXT_LIMIT)  # (a prompt of whole documents: as an answer's text is cut)
            if left:
                user_notes.append(not_shown(left))
            entries.append({"kind": "user", "key": f"m{index}", "index": index, "indices": [index],
                            "label": f"user · message {index}", "text": text, "images": images, "notes": user_notes})
        else:
            entries.append({"kind": "damaged", "key": f"m{index}", "index": index, "indices": [index],
                            "label": f"message {index}",
                            "text": f"message {index} has role {role!r}, neither user nor assistant"})
    add_failed(None)
    for entry in entries:  # what a trace file holds is shown with any key in it redacted, as text is
        for k in ("label", "text", "note", "notes"):
            if k in entry:
                entry[k] = redact_value(entry[k])
    return {"trace_id": trace_id, "source": source, "notes": redact_value(list(notes)), "entries": entries,
            "turns": turns, "model": redact_value(model)}


def _only_results(message: Mapping[str, Any]) -> bool:
    """A user message that holds only tool results (the answer to the calls of the message before it)."""
    items = message.get("content_items")
    return (message.get("role") == "user" and isinstance(items, list) and bool(items)
            and all(isinstance(i, Mapping) and _type(i) == "tool_result.done" for i in items))


def _assistant_entry(history: Sequence[Any], group: list[int], numbers: list[int], done: Mapping[int, Any],
                     config: Mapping[str, Any], trace_id: str, model: str, turns: dict[str, Any]) -> dict[str, Any]:
    key = f"m{group[0]}"
    steps, results, records = [], [], []
    for index, number in zip(group, numbers):
        rec = done.get(number)
        if rec is not None and as_int(rec.get("message_index")) != index:
            rec = None  # a record of another message (3.0 is 3, as for the loaders)
        steps.append((history[index], rec))
        records.append((index, rec))
        following = history[index + 1] if index + 1 < len(history) else None
        results.append(_user(following)[3] if isinstance(following, Mapping) and following.get("role") == "user" else {})
    rec0 = next((r for _, r in steps if r), None) or {}
    turn_model = str(rec0.get("model") or model)
    client = rec0.get("client_type")
    label = f"assistant · turn {numbers[0]}" + (f"–{numbers[-1]} ({len(group)} steps)" if len(group) > 1 else "")
    label += f" · {fmt.isolate(turn_model)}" + ("" if rec0 else " · no timing")
    try:
        turn, notes, untimed = message_turn(steps, results, model=turn_model,
                                            client_type=client if isinstance(client, str) else None,
                                            config=config, trace_id=trace_id)
        vm = _turn_vm(turn, untimed)
    except Exception as exc:  # a message the turn state refuses is named, the rest drawn
        turns[key] = (None, records)
        return {"kind": "damaged", "key": key, "index": group[0], "indices": group, "turns": numbers,
                "label": label, "text": f"message {group[0]} is damaged: {type(exc).__name__}: {exc}"}
    turns[key] = (turn, records)
    return {"kind": "assistant", "key": key, "index": group[0], "indices": group, "turns": numbers, "label": label,
            "vm": vm, "lines": _step_lines(turn), "notes": notes}


# ---------------------------------------------------------------------------------------------- templates
_LEADING_STYLE = re.compile(r"<style>.*?</style>", re.S)  # a stylesheet never holds "</" (html.CSS)


def _strip_style(markup: str) -> str:
    """A turn's static HTML without its stylesheet: the conversation carries one for all its turns."""
    found = _LEADING_STYLE.match(markup)
    return markup[found.end():] if found else markup


def _entry_html(entry: Mapping[str, Any], conversation: Mapping[str, Any], selected: str | None) -> str:
    kind = entry["kind"]
    cls = f"mmsp-conv-msg mmsp-conv-{kind}" + (" mmsp-conv-selected" if entry["key"] == selected else "")
    head = f'<div class="mmsp-conv-head" dir="auto">{_e(entry.get("label"))}</div>'
    body = ""
    if kind == "user":
        body = f'<div class="mmsp-conv-user-text">{_e(entry.get("text"))}</div>' if entry.get("text") else ""
        for image in entry.get("images") or []:
            body += (f'<img class="mmsp-conv-image" src="{_e(image["src"])}" alt="{_e(image["alt"])}" loading="lazy"/>'
                     if image.get("src") else f'<div class="mmsp-meta">{_e(image.get("note"))}</div>')
    elif kind in ("assistant", "failed", "sidecar"):
        turn = conversation.get("turns", {}).get(entry["key"], (None,))[0]
        body = _strip_style(render_html(turn, entry["vm"]))
        for line in entry.get("lines") or []:
            body += f'<div class="mmsp-conv-timing mmsp-meta">{_e(line)}</div>'
        if entry.get("note"):
            body += f'<div class="mmsp-conv-note mmsp-meta">{_e(entry["note"])}</div>'
    else:
        body = f'<div class="mmsp-conv-note mmsp-conv-damaged-text">{_e(entry.get("text"))}</div>'
    for note in entry.get("notes") or []:
        body += f'<div class="mmsp-conv-note mmsp-meta">{_e(note)}</div>'
    return f'<section class="{cls}" data-key="{_e(entry["key"])}">{head}{body}</section>'


def conversation_html(conversation: Mapping[str, Any], selected: str | None = None, style: bool = True,
                      wf: Mapping[str, Any] | None = None) -> str:
    """The whole conversation as static sanitized HTML (the selected entry marked, its waterfall
    above when given)."""
    # (the trace id and the paths as shown: a trace file not written here may hold a key in its id)
    head = (f'<div class="mmsp-conv-title"><code>{_e(redact_value(conversation.get("trace_id")))}</code>'
            f' <span class="mmsp-meta">{_e(redact_value(conversation.get("source")))}</span></div>')
    notes = "".join(f'<div class="mmsp-conv-note mmsp-meta">{_e(n)}</div>' for n in conversation.get("notes") or [])
    parts = [_STYLE if style else "", '<div class="mmsp-root mmsp-static mmsp-conversation">', head, notes]
    if wf is not None or selected:
        parts.append(waterfall_html(wf))
    parts.extend(_entry_html(entry, conversation, selected) for entry in conversation.get("entries") or [])
    parts.append("</div>")
    return "".join(parts)


def conversation_text(conversation: Mapping[str, Any], limit: int | None = 4000) -> str:
    """The conversation as plain text, for terminals (``limit`` caps each text item)."""
    out = [f"conversation {fmt.isolate(redact(str(conversation.get('trace_id'))))} "
           f"({fmt.isolate(redact(str(conversation.get('source'))))})"]
    out.extend(f"  ! {n}" for n in conversation.get("notes") or [])
    for entry in conversation.get("entries") or []:
        out.append(f"--- {entry.get('label')}")
        if entry["kind"] == "user":
            text = entry.get("text") or ""
            out.append(text if limit is None or len(text) <= limit else text[:limit] + "…")
            out.extend(f"[image] {i.get('alt') or i.get('note')}" for i in entry.get("images") or [])
        elif entry["kind"] in ("assistant", "failed", "sidecar"):
            turn = conversation.get("turns", {}).get(entry["key"], (None,))[0]
            out.append(render_text(turn, entry["vm"], limit=limit))
            out.extend(entry.get("lines") or [])
            if entry.get("note"):
                out.append(entry["note"])
        else:
            out.append(f"! {entry.get('text')}")
        out.extend(f"! {n}" for n in entry.get("notes") or [])
    return printable("\n".join(out))

