"""Replaying a captured SSE transcript verbatim.

A transcript is the raw bytes a server sent for one streamed response (what
``DemoServer.save_transcript`` writes, or what ``curl -N`` prints). Its protocol is recognised
from its content, or named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .._errors import DemoServerError

__all__ = ["PROTOCOLS", "Replay", "detect_protocol", "load_replay", "split_frames"]

PROTOCOLS = ("mmsp", "chat", "responses", "messages")

_FRAME_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def detect_protocol(data: bytes) -> str | None:
    """The protocol a transcript speaks, recognised from its content, or None.

    ``event: message_start`` is Messages, ``event: response.`` is Responses,
    ``chat.completion.chunk`` is Chat Completions and ``"event_type"`` is MMSP's wire.
    """
    if b"event: message_start" in data or b"event:message_start" in data:
        return "messages"
    if b"event: response." in data or b"event:response." in data:
        return "responses"
    if b"chat.completion.chunk" in data:
        return "chat"
    if b'"event_type"' in data:
        return "mmsp"
    return None


def split_frames(data: bytes) -> list[bytes]:
    """Cut a transcript into its SSE frames, each with the blank line that ends it.

    ``b"".join(split_frames(data)) == data`` always holds; trailing bytes without a blank line
    form a last frame of their own.
    """
    frames = []
    start = 0
    for match in _FRAME_END.finditer(data):
        frames.append(data[start : match.end()])
        start = match.end()
    if start < len(data):
        frames.append(data[start:])
    return frames


@dataclass(frozen=True)
class Replay:
    """A transcript to serve: its protocol, its bytes and its frames."""

    protocol: str
    data: bytes
    source: str

    @property
    def frames(self) -> list[bytes]:
        """The transcript's SSE frames, in order."""
        return split_frames(self.data)


def load_replay(path: str | Path, protocol: str | None = None) -> Replay:
    """Read a transcript file.

    Args:
        path: The file.
        protocol: ``mmsp``, ``chat``, ``responses`` or ``messages``; recognised from the content
            when None.

    Returns:
        The replay.

    Raises:
        DemoServerError: The file cannot be read, the protocol is unknown or cannot be recognised.
    """
    if protocol is not None and protocol not in PROTOCOLS:
        raise DemoServerError(f"unknown replay protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DemoServerError(f"cannot read the replay file {path}: {exc}") from exc
    if not data:
        raise DemoServerError(f"the replay file {path} is empty")
    detected = protocol or detect_protocol(data)
    if detected is None:
        raise DemoServerError(
            f"cannot tell which protocol {path} speaks; pass replay_protocol (--replay-protocol) "
            f"as one of {', '.join(PROTOCOLS)}"
        )
    return Replay(detected, data, str(path))
