"""Pairing the UniEvents a client yielded with the SSE frames that produced them.

* MMSP wire (``/v1/stream``): the n-th ``data:`` frame holding a JSON event is the n-th UniEvent —
  exact, one to one (an MMSP server sends the public stream itself). It is checked: each pair must
  agree on ``event_type`` and item types, else the general rule applies.
* The vendor protocols (rule ``fragment + arrival time``): each delta event by the fragment it
  carries, found by the protocol's own structure first. Each frame is read as mmsp's client reads
  it: the deltas it carries (thinking, text, a tool call's name or arguments, fidelity alone), each
  under the item it belongs to on the wire — the Messages content block ``index``, the Responses
  ``item_id`` (else ``output_index``), the Chat Completions field of ``choices[0].delta`` that
  carried it (``reasoning_content``, ``content``, ``tool_calls[i]``...) — and mmsp's rule for what
  goes out (a delta with no content and no fidelity does not). The deltas the client yielded are
  then, in order, the deltas the frames carry, in order: each is paired with the frame of the
  next wire delta that carries exactly it (its kind, its value, a call's name), which also pairs a
  whitespace-only fragment or a redacted thinking block (whose text, mmsp's placeholder, is not on
  the wire). The stop event is paired with the last frame that carried a finish reason or usage.
* What the structure does not pair (a client that merges or splits fragments, an unknown protocol):
  an event that carries a fragment is paired with the first frame, not before the previous
  event's frame, whose JSON holds that fragment as a string value.
* Any other event (``.done`` items, media) is paired with the latest frame that had arrived at
  the proxy before the client yielded the event, but never after the next paired event's frame
  and never before the previous event's frame. A ``.done`` is emitted when the next item begins or
  the stream ends, so this names the frame that closed the item.
* Limits: arrival times are taken at the proxy, just before the bytes go on to the client. When
  frames arrive faster than the client parses them (an instant demo server, a replay, a proxy or
  network that coalesces frames), "arrived before" cannot tell frames of one burst apart: an event
  paired by arrival alone is then pinned to its neighbours' frames, which is right for ``.done``
  items in practice. Frames that produced no event (heartbeats, ``event: ping``, ``[DONE]``,
  bookkeeping events of the vendor protocols) are paired with none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sse import Frame

__all__ = ["MMSP_RULE", "VENDOR_RULE", "pair_events"]

MMSP_RULE = "mmsp 1:1"
VENDOR_RULE = "fragment + arrival time"

#: The text mmsp's Messages clients give a redacted thinking block (its data goes in the fidelity).
REDACTED_THINKING = "_REDACTED_THINKING"


# ------------------------------------------------------------------------------------------ structure
@dataclass(frozen=True)
class _WireDelta:
    """One delta a frame carries, as mmsp's client yields it."""

    frame: int
    kind: str  # thinking, text or tool_call
    key: str  # the item it belongs to on the wire
    value: str  # the growing field: the thinking, the text or the arguments
    name: str = ""  # a tool call's name (on its first delta)
    fidelity: bool = False  # carries fidelity (a signature, encrypted content): goes out even when empty

    @property
    def goes_out(self) -> bool:
        """Whether mmsp yields it: a delta with no content, no name and no fidelity does not."""
        return bool(self.value or self.name or self.fidelity)


def _list(value: Any) -> list[Any]:
    """A field of a frame's payload that should be a list (a damaged or foreign frame's may be anything)."""
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    """A field of a frame's payload that should be an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _chat_deltas(index: int, payload: dict[str, Any]) -> list[_WireDelta]:
    """A Chat Completions chunk: the fields of ``choices[0].delta`` in the order mmsp reads them."""
    choices = _list(payload.get("choices"))
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        return []
    out: list[_WireDelta] = []
    details, reasoning_content, reasoning = delta.get("reasoning_details"), delta.get("reasoning_content"), delta.get("reasoning")
    if details and isinstance(details, list):
        for block in details:
            if isinstance(block, dict):
                text = block.get("summary") or block.get("text") or ""
                out.append(_WireDelta(index, "thinking", "reasoning_details", str(text),
                                      fidelity=block.get("type") == "reasoning.encrypted"))
    elif reasoning_content:
        out.append(_WireDelta(index, "thinking", "reasoning_content", str(reasoning_content)))
    elif reasoning:
        out.append(_WireDelta(index, "thinking", "reasoning", str(reasoning)))
    if delta.get("content"):
        out.append(_WireDelta(index, "text", "content", str(delta["content"])))
    for position, call in enumerate(_list(delta.get("tool_calls"))):
        if isinstance(call, dict):
            function = call.get("function") or {}
            name = str(function.get("name") or call.get("id") or "")
            out.append(_WireDelta(index, "tool_call", f"tool_calls[{call.get('index', position)}]",
                                  str(function.get("arguments") or ""), name))
    return out


def _responses_deltas(index: int, payload: dict[str, Any]) -> list[_WireDelta]:
    """A Responses event: its deltas under their output item's id (else its ``output_index``)."""
    kind = payload.get("type")
    raw = payload.get("item")
    item: dict[str, Any] = raw if isinstance(raw, dict) else {}
    key = str(payload.get("item_id") or item.get("id") or f"#{payload.get('output_index')}")
    if kind == "response.output_text.delta":
        return [_WireDelta(index, "text", key, str(payload.get("delta") or ""))]
    if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
        return [_WireDelta(index, "thinking", key, str(payload.get("delta") or ""))]
    if kind == "response.function_call_arguments.delta":
        return [_WireDelta(index, "tool_call", key, str(payload.get("delta") or ""))]
    if kind == "response.output_item.added":
        if item.get("type") == "function_call":
            return [_WireDelta(index, "tool_call", str(item.get("id") or item.get("call_id") or key), "",
                               str(item.get("name") or ""))]
        if item.get("type") == "message":
            return [_WireDelta(index, "text", key, "", fidelity=bool(item.get("phase")))]
    if kind == "response.output_item.done" and item.get("type") == "reasoning":
        carried = bool(item.get("summary")) or any(item.get(k) is not None for k in ("encrypted_content", "signature", "format"))
        return [_WireDelta(index, "thinking", key, "", fidelity=carried)]
    return []


_MESSAGES_DELTAS = {"thinking_delta": ("thinking", "thinking"), "text_delta": ("text", "text"),
                    "input_json_delta": ("tool_call", "partial_json")}


def _messages_deltas(index: int, payload: dict[str, Any]) -> list[_WireDelta]:
    """A Messages event: its deltas under their content block's ``index``."""
    kind = payload.get("type")
    key = str(payload.get("index"))
    if kind == "content_block_start":
        block = _dict(payload.get("content_block"))
        if block.get("type") == "tool_use":
            return [_WireDelta(index, "tool_call", key, "", str(block.get("name") or ""))]
        if block.get("type") == "redacted_thinking":  # its text is mmsp's placeholder, its data the fidelity
            return [_WireDelta(index, "thinking", key, REDACTED_THINKING, fidelity=True)]
    elif kind == "content_block_delta":
        delta = _dict(payload.get("delta"))
        if delta.get("type") == "signature_delta":
            return [_WireDelta(index, "thinking", key, "", fidelity=True)]
        if delta.get("type") in _MESSAGES_DELTAS:
            what, field = _MESSAGES_DELTAS[delta["type"]]
            return [_WireDelta(index, what, key, str(delta.get(field) or ""))]
    return []


_READERS = {"chat": _chat_deltas, "responses": _responses_deltas, "messages": _messages_deltas}
_LOOKAHEAD = 64  # wire deltas searched past the expected one for a delta the client yielded


def _ends_stream(protocol: str, payload: dict[str, Any]) -> bool:
    """Whether a frame carries what mmsp's stop event is made of: a finish reason or usage."""
    if protocol == "chat":
        return bool(payload.get("usage")) or any(isinstance(c, dict) and c.get("finish_reason")
                                                 for c in _list(payload.get("choices")))
    if protocol == "responses":
        return payload.get("type") in ("response.completed", "response.incomplete")
    return protocol == "messages" and payload.get("type") == "message_delta"


def _wire_deltas(frames: list[Frame], protocol: str) -> tuple[list[_WireDelta], int | None]:
    """The deltas the frames carry that mmsp yields, in order, and the last frame that ends the stream."""
    reader = _READERS[protocol]
    deltas: list[_WireDelta] = []
    last_stop = None
    for frame in frames:
        payload = frame.json() if frame.kind == "data" else None
        if not isinstance(payload, dict):
            continue
        deltas.extend(delta for delta in reader(frame.index, payload) if delta.goes_out)
        if _ends_stream(protocol, payload):
            last_stop = frame.index
    return deltas, last_stop


def _event_delta(event: dict[str, Any]) -> tuple[str, str, str, bool] | None:
    """``(kind, value, name, has fidelity)`` of a delta event of thinking, text or a tool call, else None."""
    items = event.get("content_items") or []
    if event.get("event_type") != "delta" or len(items) != 1:
        return None
    item = items[0]
    kind, _, phase = str(item.get("type", "")).partition(".")
    field = {"thinking": "thinking", "text": "text", "tool_call": "arguments"}.get(kind)
    if phase != "delta" or field is None:
        return None
    name = str(item.get("name") or "") if kind == "tool_call" else ""
    return kind, str(item.get(field) or ""), name, bool(item.get("fidelity"))


def _carries(wire: _WireDelta, delta: tuple[str, str, str, bool]) -> bool:
    kind, value, name, fidelity = delta
    if wire.value != value or wire.name != name:
        return False
    # fidelity sent alone under an item's id belongs to that item, whatever kind carried it
    return wire.kind == kind or (not value and fidelity and wire.fidelity)


def _structure_anchors(frames: list[Frame], events: list[dict[str, Any]], protocol: str) -> list[int | None]:
    """The frame of each event the protocol's structure pairs (None for the others)."""
    anchors: list[int | None] = [None] * len(events)
    if protocol not in _READERS:
        return anchors
    wire, last_stop = _wire_deltas(frames, protocol)
    cursor = 0
    for k, event in enumerate(events):
        if event.get("event_type") == "stop":
            anchors[k] = last_stop
            continue
        delta = _event_delta(event)
        if delta is None:
            continue
        # in step, the next wire delta is this one; else the next that carries exactly it (one the
        # client skipped, or merged into its neighbour, lies in between), looked for a little way
        # ahead only: a client out of step for good is left to the fragment rule
        found = next((j for j in range(cursor, min(cursor + _LOOKAHEAD, len(wire))) if _carries(wire[j], delta)), None)
        if found is not None:
            anchors[k] = wire[found].frame
            cursor = found + 1
    return anchors


# ------------------------------------------------------------------------------------------ fragments
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
    if isinstance(value, str) and value.strip() and value != REDACTED_THINKING:
        return value
    fidelity = item.get("fidelity")  # a signature or an encrypted block arrives in a frame of its own
    if isinstance(fidelity, dict):
        return next((v for v in fidelity.values() if isinstance(v, str) and len(v) >= 8), None)
    return None


def _fragment_anchors(frames: list[Frame], events: list[dict[str, Any]],
                      anchors: list[int | None]) -> list[int | None]:
    """``anchors`` completed: each event still unpaired that carries a fragment, paired with the first
    frame from the previous paired event's on that holds it."""
    strings: list[set[str]] | None = None
    out = list(anchors)
    cursor = 0
    for k, event in enumerate(events):
        if out[k] is not None:
            cursor = out[k]  # type: ignore[assignment]
            continue
        fragment = _fragment(event)
        if fragment is None:
            continue
        if strings is None:
            strings = [_strings(frame.json(), set()) if frame.kind == "data" else set() for frame in frames]
        found = next((i for i in range(cursor, len(frames)) if fragment in strings[i]), None)
        if found is None:  # a fragment inside a longer string (a client that split one)
            found = next((i for i in range(cursor, len(frames)) if any(fragment in s for s in strings[i])), None)
        out[k] = found
        if found is not None:
            cursor = found
    return out


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
        wire_items, items = _list(payload.get("content_items")), _list(event.get("content_items"))
        if [_dict(i).get("type") for i in wire_items] != [_dict(i).get("type") for i in items]:
            return None
        pairs.append(index)
    return pairs


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
    anchors = _fragment_anchors(frames, events, _structure_anchors(frames, events, protocol))
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
