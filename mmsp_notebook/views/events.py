"""The events table of a turn: its UniEvents as rows, each with a short preview, configured keys redacted.

The live widget gets the rows as ops (:class:`~.model.OpsTracker`), the static HTML draws them
under the turn (:mod:`.html`), and the wire view keeps a delta's redaction out of its raw frame
(:mod:`.wire`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..core.redact import redact_data, redact_secrets, redact_streamed, secret_values
from ..core.turn import Turn
from . import format as fmt

__all__ = ["event_row", "event_view", "events_label", "turn_events"]


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
        item_type = ""
    elif items:
        item = items[0]
        item_type = item.get("type", "?")
        delta = isinstance(item_type, str) and item_type.endswith(".delta") and streamed is not None
        shown = {}
        for key, value in item.items():
            if key == "type":
                continue
            if isinstance(value, (bytes, bytearray)):
                value = f"<{len(value)} bytes>"
            elif isinstance(value, list) and len(value) > 4:
                value = f"<{len(value)} values>"
            elif isinstance(value, str) and delta:
                shown_value = redact_streamed(streamed, key, value, secrets)  # type: ignore[arg-type]
                if changed is not None and shown_value != value:
                    changed.append((value, shown_value))
                value = shown_value
            else:
                value = redact_data(value, secrets)
            shown[key] = value
        if not delta and streamed:
            streamed.clear()  # the group is done
        preview = json.dumps(shown, ensure_ascii=False, default=str)
    else:
        item_type, preview = "", ""
    preview = redact_secrets(preview, secrets)  # (anything else, before the cut: a key is never left half shown)
    if len(preview) > 120:
        preview = preview[:117] + "…"
    return {"n": n, "ms": None if ms is None else round(ms, 1), "event_type": event.get("event_type"),
            "type": item_type, "preview": preview}


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
