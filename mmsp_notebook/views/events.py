"""The events table of a turn: its UniEvents as rows, each with a short preview, configured keys redacted.

The live widget gets the rows as ops (:class:`~.model.OpsTracker`), the static HTML draws them
under the turn (:mod:`.html`), and the wire view keeps a delta's redaction out of its raw frame
(:mod:`.wire`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..core.redact import redact_data, redact_secrets, redact_streamed, secret_values, split_point
from ..core.turn import Turn
from . import format as fmt

__all__ = ["event_row", "event_view", "events_label", "turn_events"]

#: the longest preview shown whole: a longer one is shown as its first ``PREVIEW - 3`` characters and "…"
PREVIEW = 120
#: the characters of a long string a preview is first worked out from (more while keys redacted shorten it)
HEAD = 256


def event_row(n: int, ms: float | None, event: dict[str, Any], streamed: dict[str, str] | None = None,
              changed: list[tuple[str, str]] | None = None, secrets: list[str] | None = None) -> dict[str, Any]:
    """A row of the events table: what the UniEvent was, with a short preview, configured keys
    redacted. ``streamed``: the state of a run of events shown in order (a dict the caller keeps),
    so that a key split across the deltas of a group shows in none of them; ``changed`` collects
    each delta string so redacted, with what it became (the wire view hides it in the raw frame)."""
    items = event.get("content_items") or []
    secrets = secret_values() if secrets is None else secrets  # (a caller with many rows reads them once)
    if event.get("event_type") == "stop":
        preview = json.dumps({"finish_reason": event.get("finish_reason"), "usage": event.get("usage_metadata")})
        preview = redact_secrets(preview, secrets)  # (before the cut: a key is never left half shown)
        item_type = ""
    elif items:
        item = items[0]
        item_type = item.get("type", "?")
        delta = isinstance(item_type, str) and item_type.endswith(".delta") and streamed is not None
        shown, final = {}, set()  # (final: the values shown as they are, the others redacted as data)
        for key, value in item.items():
            if key == "type":
                continue
            if isinstance(value, (bytes, bytearray)):
                value = f"<{len(value)} bytes>"
                final.add(key)
            elif isinstance(value, list) and len(value) > 4:
                value = f"<{len(value)} values>"
                final.add(key)
            elif isinstance(value, str) and delta:
                shown_value = redact_streamed(streamed, key, value, secrets)  # type: ignore[arg-type]
                if changed is not None and shown_value != value:
                    changed.append((value, shown_value))
                value = shown_value
                final.add(key)
            shown[key] = value
        if not delta and streamed:
            streamed.clear()  # the group is done
        preview = _preview(shown, final, secrets)
    else:
        item_type, preview = "", ""
    if len(preview) > PREVIEW:
        preview = preview[:PREVIEW - 3] + "…"
    return {"n": n, "ms": None if ms is None else round(ms, 1), "event_type": event.get("event_type"),
            "type": item_type, "preview": preview}


def _preview(shown: dict[str, Any], final: set[str], secrets: list[str]) -> str:
    """The JSON of an item's values with configured keys redacted: every string in a value not in
    ``final`` redacted as :func:`redact_data` does, then the whole JSON as :func:`redact_secrets`
    does (before :func:`event_row` cuts it: a key is never left half shown). Whole, or, when longer
    than :data:`PREVIEW`, at least its first ``PREVIEW + 1`` characters.

    A long string is not redacted whole for it: only its head, up to a point no key spans
    (:func:`_clip`), and the JSON up to that point, when that alone is longer than the preview. The
    redaction of the JSON is that of the part up to the point followed by that of the rest
    (:func:`split_point`), so the preview is the one the whole would give. Keys redacted may shorten
    the head: a longer one then, at last the whole string."""
    limit = HEAD
    while True:
        head, cut = _clip(shown, limit, secrets)
        text = json.dumps({k: v if k in final else redact_data(v, secrets) for k, v in head.items()},
                          ensure_ascii=False, default=str)
        if not cut:
            return redact_secrets(text, secrets)
        text = redact_secrets(text.rstrip("]}")[:-1], secrets)  # (up to the point: the string's quote and the brackets after it off)
        if len(text) > PREVIEW:
            return text
        limit *= 4


def _clip(value: Any, limit: int, secrets: list[str]) -> tuple[Any, bool]:
    """``value`` (a JSON-like value) as JSON writes it as far as its first string longer than
    ``limit`` characters, cut at the first :func:`split_point` from ``limit`` on, and nothing after
    it; and whether one was cut (``value`` itself when none was: none is that long, or none splits)."""
    if isinstance(value, str):
        at = split_point(value, limit, secrets) if len(value) > limit else -1
        return (value[:at], True) if 0 < at < len(value) else (value, False)
    if isinstance(value, (dict, list)):
        out: list[tuple[Any, Any]] = []
        for k, v in (value.items() if isinstance(value, dict) else enumerate(value)):
            v, cut = _clip(v, limit, secrets)
            out.append((k, v))
            if cut:
                return (dict(out) if isinstance(value, dict) else [v for _, v in out]), True
    return value, False


def event_view(row: Mapping[str, Any]) -> dict[str, str]:
    """An events-table row as its cells show it: every value a string."""
    ms = row.get("ms")
    return {"n": str(row.get("n", "")), "ms": fmt.fixed(ms, 1), "event_type": fmt.as_text(row.get("event_type")),
            "type": fmt.as_text(row.get("type")), "preview": fmt.as_text(row.get("preview"))}


def events_label(count: int) -> str:
    """The count beside the events table's title."""
    return f"({fmt.integer(count)})"


def turn_events(turn: Turn, start: int = 0) -> Iterator[tuple[int, float | None, dict[str, Any]]]:
    """Every UniEvent of a turn from the one numbered ``start`` (those before not walked), with its number and ms since its step's request."""
    n = 0
    for step in turn.steps:
        times, base = step.event_times, step.request_sent
        count = min(len(times), step.n_events)
        if n + count > start:
            events = step.events
            for j in range(max(0, start - n), count):
                yield n + j, None if base is None else (times[j] - base) * 1000.0, events[j]
        n += count
