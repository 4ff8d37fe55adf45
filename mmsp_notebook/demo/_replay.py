"""Replaying a captured SSE transcript verbatim.

A transcript is the raw bytes a server sent for one streamed response (what
``DemoServer.save_transcript`` and ``turn.save_wire`` write, or what ``curl -N`` prints). Its
protocol is recognised from its content, or named; it is cut into frames as the wire inspector
cuts a capture (:mod:`mmsp_notebook.wire.sse`). A streamed request gets the bytes as captured; one
without a stream gets the frames folded into the protocol's JSON body (:mod:`._whole`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._errors import DemoServerError, TraceError
from ..core.store import read_regular
from ..wire.sse import PROTOCOLS, detect_protocol, split_frames

__all__ = ["PROTOCOLS", "Replay", "load_replay"]

_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_DATA_LINE = re.compile(rb"(?:^|[\r\n])data:")


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
        DemoServerError: The file cannot be read (missing, no regular file, over 256 MiB), is empty or holds no ``data:`` line (JSON, say), the
            protocol is unknown or cannot be recognised.
    """
    if protocol is not None and protocol not in PROTOCOLS:
        raise DemoServerError(f"unknown replay protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    try:  # a regular file only, read to MAX_FILE_SIZE: a FIFO would block, /dev/zero fill the memory
        data = read_regular(Path(path))[0]
    except TraceError as exc:
        why = "no such file" if isinstance(exc, FileNotFoundError) and not os.path.islink(path) else exc.reason
        raise DemoServerError(f"cannot read the replay file {path}: {why}") from None
    # a byte order mark is an editor's, never a server's: left in, it would hide the first field
    data = data.removeprefix(_BOM)
    if data.startswith(_UTF16_BOMS):  # re-saved as UTF-16 (Windows PowerShell's > redirect): the UTF-8 it was
        data = data.decode("utf-16", errors="replace").encode("utf-8")
    if not data.strip():
        raise DemoServerError(f"the replay file {path} is empty")
    if not _DATA_LINE.search(data):
        what = "JSON" if data.lstrip()[:1] in (b"{", b"[") else "text"
        raise DemoServerError(
            f"the replay file {path} holds {what} with no SSE 'data:' line, not a captured stream; "
            "save one with turn.save_wire(path) or curl -N"
        )
    detected = protocol or detect_protocol(data)
    if detected is None:
        raise DemoServerError(
            f"cannot tell which protocol {path} speaks; pass replay_protocol (--replay-protocol) "
            f"as one of {', '.join(PROTOCOLS)}"
        )
    return Replay(detected, data, str(path))
