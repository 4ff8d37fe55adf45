"""Pairing the UniEvents a client yielded with the SSE frames that produced them.

* MMSP wire (``/v1/stream``): the n-th ``data:`` frame holding a JSON event is the n-th UniEvent —
  exact, one to one (an MMSP server sends the public stream itself). It is checked: each pair must
  agree on ``event_type`` and item types, else the general rule applies.
* The vendor protocols (Chat Completions, Responses, Messages, anything else): an event that
  carries a fragment (a ``text.delta``, ``thinking.delta``, the arguments or the name of a
  ``tool_call.delta``) is paired with the first frame, not before the previous event's frame,
  whose JSON holds that fragment as a string value. Any other event (``.done`` items, the stop
  event, media, a fragment the client rewrote) is paired with the latest frame that had arrived
  at the proxy before the client yielded the event, but never after the next fragment-anchored
  event's frame and never before the previous event's frame. A ``.done`` is emitted when the
  next item begins or the stream ends, so this names the frame that closed the item.
* Limits: arrival times are taken at the proxy, just before the bytes go on to the client. When
  frames arrive faster than the client parses them (an instant demo server, a proxy or network
  that coalesces frames), "arrived before" cannot tell frames of one burst apart: an unanchored
  event is then pinned to its neighbours' frames, which is right for ``.done`` items and the stop
  event in practice, but a client that merges or splits fragments can be paired with a
  neighbouring frame. Frames that produced no event (heartbeats, ``event: ping``, ``[DONE]``,
  bookkeeping events of the vendor protocols) are paired with none.
"""

from __future__ import annotations

from typing import Any

from .sse import Frame

__all__ = ["MMSP_RULE", "VENDOR_RULE", "pair_events"]

MMSP_RULE = "mmsp 1:1"
VENDOR_RULE = "fragment + arrival time"


def _strings(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    return out


def _fragment(event: dict[str, Any]) -> str | None:
    """The string a delta event carries, as a vendor frame would hold it."""
    items = event.get("content_items") or []
    if event.get("event_type") != "delta" or not items:
        return None
    item = items[0]
    kind = str(item.get("type", ""))
    if kind == "text.delta":
        value = item.get("text")
    elif kind == "thinking.delta":
        value = item.get("thinking")
    elif kind == "tool_call.delta":
        value = item.get("arguments") or item.get("name")
    else:
        return None
    if isinstance(value, str) and value.strip():
        return value
    fidelity = item.get("fidelity")  # a signature or an encrypted block arrives in a frame of its own
    if isinstance(fidelity, dict):
        return next((v for v in fidelity.values() if isinstance(v, str) and len(v) >= 8), None)
    return None


def _mmsp_pairs(frames: list[Frame], events: list[dict[str, Any]]) -> list[int | None] | None:
    data = []
    for frame in frames:
        payload = frame.json() if frame.kind == "data" else None
        if isinstance(payload, dict) and "event_type" in payload:
            data.append((frame.index, payload))
    if len(data) < len(events):
        return None
    pairs: list[int | None] = []
    for event, (index, payload) in zip(events, data):
        if payload.get("event_type") != event.get("event_type"):
            return None
        wire_items = payload.get("content_items") or []
        items = event.get("content_items") or []
        if [i.get("type") for i in wire_items] != [i.get("type") for i in items]:
            return None
        pairs.append(index)
    return pairs


def _anchors(frames: list[Frame], events: list[dict[str, Any]]) -> list[int | None]:
    """For each event that carries a fragment, the first frame from the previous anchor on that holds it."""
    strings = [_strings(frame.json(), set()) if frame.kind == "data" else set() for frame in frames]
    anchors: list[int | None] = []
    cursor = 0
    for event in events:
        fragment = _fragment(event)
        found = None
        if fragment is not None:
            found = next((i for i in range(cursor, len(frames)) if fragment in strings[i]), None)
            if found is None:  # a fragment inside a longer string (a client that split one)
                found = next((i for i in range(cursor, len(frames)) if any(fragment in s for s in strings[i])), None)
        anchors.append(found)
        if found is not None:
            cursor = found
    return anchors


def pair_events(frames: list[Frame], events: list[dict[str, Any]], times: list[float],
                protocol: str) -> tuple[list[int | None], str]:
    """The frame index of each event, and the rule that paired them (see the module docstring).

    Args:
        frames: The response's frames, in order.
        events: The UniEvents the client yielded, in order.
        times: When each event was fed (``time.monotonic()``, the clock of the frames' arrival).
        protocol: ``mmsp``, ``chat``, ``responses``, ``messages`` or anything else.

    Returns:
        ``(pairs, rule)``: ``pairs[k]`` is the frame index of event ``k`` (``None`` when there is no
        frame at all); ``rule`` is ``"mmsp 1:1"``, ``"fragment + arrival time"`` or ``"no frames"``.
    """
    if not frames:
        return [None] * len(events), "no frames"
    if protocol == "mmsp":
        exact = _mmsp_pairs(frames, events)
        if exact is not None:
            return exact, MMSP_RULE
    anchors = _anchors(frames, events)
    # arrival time: the latest frame that had arrived when the event was fed
    arrived: list[int] = []
    j = -1
    for t in times:
        while j + 1 < len(frames) and frames[j + 1].t <= t:
            j += 1
        arrived.append(max(j, 0))
    pairs: list[int | None] = []
    previous = 0
    for k in range(len(events)):
        anchor = anchors[k]
        if anchor is not None:
            index = max(anchor, previous)
        else:
            index = max(arrived[k] if k < len(arrived) else len(frames) - 1, previous)
            upcoming = next((a for a in anchors[k + 1:] if a is not None), None)
            if upcoming is not None:
                index = max(min(index, upcoming), previous)
        pairs.append(index)
        previous = index
    return pairs, VENDOR_RULE
