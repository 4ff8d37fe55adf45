"""The view model of a turn (JSON for the front end) and the ops that bring a view up to date.

See ``js/PROTOCOL.md``. :func:`view_model` draws a whole :class:`~mmsp_notebook.Turn`;
:class:`OpsTracker` remembers what a front end has already been sent and yields only what changed
(new items, appended text, ``.done`` fields, tool results, the turn's status and footer), so a
20,000-token answer crosses the comm about once, never the whole text per update.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.pricing import format_cost
from ..core.redact import redact
from ..core.state import ItemState
from ..core.turn import Turn, media_kind
from .hints import error_hint
from .media import media_src

__all__ = ["status_text", "view_model", "item_header", "item_done_fields", "turn_fields", "OpsTracker", "event_row"]

_TEXT_KINDS = ("text", "thinking", "tool_call")

STATUS_TEXT = {
    "incomplete": "ended without a stop event — the answer may be cut off",
    "cancelled": "cancelled — partial output kept",
    "error": "failed — partial output kept",
    "streaming": "streaming…",
    "complete": "",
}


def status_text(turn: Turn) -> str:
    """The line a view shows under a turn that did not simply complete."""
    if turn.status == "complete" and turn.max_steps_reached:
        return "stopped after --max-steps with tool calls still pending"
    if turn.status in ("error", "cancelled") and not turn.items:
        return "failed before any output" if turn.status == "error" else "cancelled before any output"
    return STATUS_TEXT.get(turn.status, "")


def _kind(item: ItemState) -> str:
    if item.kind == "inline_data":
        return media_kind(item)
    if item.kind in ("text", "thinking", "tool_call", "embedding", "inline_thinking"):
        return item.kind
    return "data"


def item_header(i: int, item: ItemState) -> dict[str, Any]:
    """The fields of a new item, without its growing text."""
    out: dict[str, Any] = {"i": i, "kind": _kind(item), "status": "streaming"}
    if item.kind == "tool_call":
        out["name"] = item.name
        out["tool_call_id"] = item.tool_call_id
        out["result"] = None
    if item.kind in ("thinking", "inline_thinking", "text"):
        out["fidelity"] = sorted(item.fidelity) if item.fidelity else []
    if item.mime_type:
        out["mime_type"] = item.mime_type
    if item.kind in ("inline_data", "inline_thinking"):
        out["bytes"] = item.size
    return out


def item_done_fields(item: ItemState) -> dict[str, Any]:
    """The fields an item gains with its ``.done``."""
    out: dict[str, Any] = {"status": "done", "duration": item.duration}
    if item.fidelity:
        out["fidelity"] = sorted(item.fidelity)
    kind = _kind(item)
    if item.kind == "tool_call":
        out["arguments"] = item.arguments
        out["name"] = item.name
    elif kind in ("image", "audio"):
        src, seconds = media_src(item)
        out["src"] = src
        out["mime_type"] = item.mime_type
        out["bytes"] = item.size
        if seconds is not None:
            out["seconds"] = round(seconds, 3)
    elif item.kind == "embedding":
        vector = item.content()
        out["dims"] = len(vector)
        norm = item.norm
        out["norm"] = None if norm is None or not math.isfinite(norm) else round(norm, 6)
        out["preview"] = [round(float(v), 4) if math.isfinite(float(v)) else None for v in vector[:8]]
    elif item.kind in ("inline_data", "inline_thinking"):
        out["bytes"] = item.size
    return out


TOOL_OUTPUT_LIMIT = 20_000  # characters of a tool's result shown (the model gets it whole)


def _shown(text: str | None) -> str | None:
    if text is None or len(text) <= TOOL_OUTPUT_LIMIT:
        return text
    rest = len(text) - TOOL_OUTPUT_LIMIT
    return f"{text[:TOOL_OUTPUT_LIMIT]}\n… {rest:,} more characters not shown (turn.tool_calls has them all)"


def tool_result_fields(item: ItemState) -> dict[str, Any] | None:
    run = item.tool_run
    if run is None:
        return None
    return {
        "ok": run.ok,
        "output": _shown(redact(run.output)) if run.ended is not None else None,
        "error": _shown(redact(run.error)) if run.error else None,
        "duration": run.duration,
        "running": run.ended is None,
    }


def item_view(i: int, item: ItemState) -> dict[str, Any]:
    out = item_header(i, item)
    if item.kind in _TEXT_KINDS:
        out["text"] = item.content()
    if item.status == "done":
        out.update(item_done_fields(item))
    if item.kind == "tool_call":
        out["result"] = tool_result_fields(item)
    return out


def footer(turn: Turn) -> dict[str, Any] | None:
    if turn.status == "streaming":
        return None
    timings = turn.timings
    cost = turn.cost
    if not turn.steps:
        return None
    return {
        "usage": turn.usage,
        "finish_reason": turn.finish_reason,
        "ttft": timings["ttft"],
        "total": timings["total"],
        "tokens_per_second": timings["tokens_per_second"],
        "cost": cost,
        "cost_text": format_cost(cost),
        "steps": len(turn.steps),
    }


def turn_fields(turn: Turn) -> dict[str, Any]:
    """The turn-level fields: status, footer, error, status text."""
    exc = turn.error
    error = None
    if exc is not None and turn.status in ("error", "incomplete"):
        error = {
            "type": type(exc).__name__,
            "message": turn.error_message,
            "hint": error_hint(exc, turn.api_key_env, turn.client_type),
        }
    return {"status": turn.status, "footer": footer(turn), "error": error, "status_text": status_text(turn)}


def view_model(turn: Turn) -> dict[str, Any]:
    """The whole turn as the front end draws it."""
    with turn.lock:
        vm = {"id": turn.id, "model": turn.model, "items": [item_view(i, it) for i, it in enumerate(turn.items)]}
        vm.update(turn_fields(turn))
        return vm


def event_row(n: int, ms: float | None, event: dict[str, Any]) -> dict[str, Any]:
    """A row of the events table: what the UniEvent was, with a short preview."""
    items = event.get("content_items") or []
    if event.get("event_type") == "stop":
        preview = json.dumps({"finish_reason": event.get("finish_reason"), "usage": event.get("usage_metadata")})
        item_type = ""
    elif items:
        item = items[0]
        item_type = item.get("type", "?")
        shown = {}
        for key, value in item.items():
            if key == "type":
                continue
            if isinstance(value, (bytes, bytearray)):
                value = f"<{len(value)} bytes>"
            elif isinstance(value, list) and len(value) > 4:
                value = f"<{len(value)} values>"
            shown[key] = value
        preview = json.dumps(shown, ensure_ascii=False, default=str)
    else:
        item_type, preview = "", ""
    if len(preview) > 120:
        preview = preview[:117] + "…"
    return {"n": n, "ms": None if ms is None else round(ms, 1), "event_type": event.get("event_type"),
            "type": item_type, "preview": preview}


class OpsTracker:
    """What one front end has been sent of one turn; :meth:`ops` yields only the difference."""

    def __init__(self, events: bool = False) -> None:
        self.events = events
        self._sent_items = 0
        self._text_len: list[int] = []
        self._done: list[bool] = []
        self._result: list[Any] = []
        self._turn: dict[str, Any] = {}
        self._events_sent = 0

    def ops(self, turn: Turn) -> list[list[Any]]:
        out: list[list[Any]] = []
        with turn.lock:
            items = turn.items
            for i, item in enumerate(items):
                if i >= self._sent_items:
                    out.append(["item", i, item_header(i, item)])
                    self._text_len.append(0)
                    self._done.append(False)
                    self._result.append(None)
                    self._sent_items = i + 1
                if item.kind in _TEXT_KINDS and item.size != self._text_len[i]:
                    text = item.content()
                    if len(text) > self._text_len[i]:
                        out.append(["append", i, text[self._text_len[i]:]])
                    self._text_len[i] = len(text)
                if item.status == "done" and not self._done[i]:
                    out.append(["set", i, item_done_fields(item)])
                    self._done[i] = True
                if item.kind == "tool_call":
                    result = tool_result_fields(item)
                    if result != self._result[i]:
                        out.append(["set", i, {"result": result}])
                        self._result[i] = result
            if self.events:
                n = 0
                for step in turn.steps:
                    base = step.request_sent
                    for event, at in zip(step.events, step.event_times):
                        if n >= self._events_sent:
                            ms = None if base is None else (at - base) * 1000.0
                            out.append(["event", event_row(n, ms, event)])
                        n += 1
                self._events_sent = n
            fields = turn_fields(turn)
            changed = {k: v for k, v in fields.items() if self._turn.get(k, object()) != v}
            if changed:
                out.append(["turn", changed])
                self._turn.update(changed)
        return out
