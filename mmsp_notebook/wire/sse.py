"""Server-sent events as bytes: cutting a response into frames, and telling which protocol it speaks.

A frame is an event block and the blank line that ends it (a line's end then another, each
``\\r\\n``, ``\\n`` or ``\\r``, mixed as they come: ``\\n\\n``, ``\\r\\n\\r\\n``, ``\\n\\r\\n``...);
comments (``: keep-alive``) and heartbeats are frames too. The demo server's replay serves frames
cut by :func:`split_frames`; the wire inspector cuts a captured response the same way and times
each frame by the chunk that completed it (:func:`split_timed_frames`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["PROTOCOLS", "Frame", "detect_protocol", "parse_frame", "split_frames", "split_timed_frames"]

#: The streaming protocols a captured response can be recognised as.
PROTOCOLS = ("mmsp", "chat", "responses", "messages")

# a line's end and a blank line's, each CRLF, LF or CR (atomic: a CRLF is one end, never a CR and an LF)
_FRAME_END = re.compile(rb"(?>\r\n|\n|\r)(?>\r\n|\n|\r)")
_LINE_END = re.compile(r"\r\n|\n|\r")


def detect_protocol(data: bytes) -> str | None:
    """The protocol a stream speaks, recognised from its content, or None.

    Its frames are read in order until one tells: an ``event: message_start`` (or a payload of
    that ``type``) is Messages, an ``event: response.…`` (or a payload of such a ``type``) is
    Responses, a payload whose ``object`` is ``chat.completion.chunk`` is Chat Completions and one
    with an ``event_type`` is MMSP's wire. Only fields and payloads count, never what a text says:
    an answer that quotes another protocol's stream is its own protocol's.
    """
    return next((found for raw in _frames(data) if (found := _frame_protocol(raw)) is not None), None)


def _frame_protocol(raw: bytes) -> str | None:
    """The protocol one frame shows, or None (a comment, ``[DONE]``, an error, a payload of no protocol)."""
    frame = parse_frame(0, 0.0, raw)
    payload = frame.json()
    kind = payload.get("type") if isinstance(payload, dict) else None
    names = [name for name in (frame.event, kind) if isinstance(name, str)]
    if "message_start" in names:
        return "messages"
    if any(name.startswith("response.") for name in names):
        return "responses"
    if not isinstance(payload, dict):
        return None
    if payload.get("object") == "chat.completion.chunk":
        return "chat"
    if "event_type" in payload:
        return "mmsp"
    return None


def split_frames(data: bytes) -> list[bytes]:
    """Cut a stream into its SSE frames, each with the blank line that ends it.

    ``b"".join(split_frames(data)) == data`` always holds; trailing bytes without a blank line
    form a last frame of their own.
    """
    return list(_frames(data))


def _frames(data: bytes) -> Iterator[bytes]:
    """The frames of :func:`split_frames`, one at a time (:func:`detect_protocol` stops at the first that tells)."""
    start = 0
    for match in _FRAME_END.finditer(data):
        yield data[start : match.end()]
        start = match.end()
    if start < len(data):
        yield data[start:]


@dataclass
class Frame:
    """One SSE frame as it arrived: its bytes (blank line included) and when its end arrived.

    Attributes:
        index: Its position in the response.
        t: ``time.monotonic()`` when the chunk that completed it arrived.
        raw: Its bytes.
        kind: ``data`` (a data payload), ``done`` (``[DONE]``), ``comment`` (only ``:`` lines) or ``other``.
        event: Its ``event:`` field.
        data: Its ``data:`` lines, joined.
    """

    index: int
    t: float
    raw: bytes
    kind: str
    event: str | None = None
    data: str | None = None

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The data payload parsed as JSON, or None."""
        if self.data is None:
            return None
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def parse_frame(index: int, t: float, raw: bytes) -> Frame:
    """Read one frame's fields."""
    text = raw.decode("utf-8", errors="replace")
    lines = [line for line in _LINE_END.split(text) if line != ""]
    # as an EventSource reads fields: one space after the colon is not the value's, a name with no
    # colon has an empty value, and the last ``event`` of a frame names it (an empty one: none)
    data = [line[5:].removeprefix(" ") if line != "data" else "" for line in lines if line.startswith("data:") or line == "data"]
    events = [line[6:].removeprefix(" ") for line in lines if line.startswith("event:")]
    event = events[-1] or None if events else None
    if data:
        joined = "\n".join(data)
        return Frame(index, t, raw, "done" if joined.strip() == "[DONE]" else "data", event, joined)
    if lines and all(line.startswith(":") for line in lines):
        return Frame(index, t, raw, "comment", event)
    return Frame(index, t, raw, "other", event)


def split_timed_frames(data: bytes, sizes: list[int], times: list[float]) -> list[Frame]:
    """Cut a response into SSE frames, each timed by the chunk that completed it.

    Args:
        data: The response bytes (``b"".join`` of the chunks).
        sizes: The size of each chunk, in order.
        times: When each chunk arrived (``time.monotonic()``).
    """
    ends: list[int] = []
    total = 0
    for size in sizes:
        total += size
        ends.append(total)
    frames: list[Frame] = []
    end = 0
    chunk = 0
    for raw in split_frames(data):
        end += len(raw)
        while chunk < len(ends) - 1 and ends[chunk] < end:
            chunk += 1
        frames.append(parse_frame(len(frames), times[chunk] if times else 0.0, raw))
    return frames
