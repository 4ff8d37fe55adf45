"""How a stream that mmsp ended with an error ended: what mmsp knew when it raised.

mmsp parses a tool call's arguments when the call is done, at the end of the stream for the last
call, and raises ``ToolCallArgumentParseError`` when they do not parse; over MMSP's wire the same
failure arrives as an ``UpstreamError`` whose ``error_type`` names it. Arguments that stop in the
middle (the JSON parser ran out of input) were cut off, for one of two reasons the exception does
not carry: the provider's finish reason said the token limit (``length``), or the stream ended with
no finish reason at all (the connection was lost, or a gateway closed it cleanly). mmsp's stream
had that finish reason when it raised: its public stream object is on the exception's traceback,
and :func:`stream_finish` reads it there. Over MMSP's wire the finish reason stayed on the server,
so the cause of a cut is not known.
"""

from __future__ import annotations

import json
import re
from typing import Literal

__all__ = ["ArgumentsEnding", "error_type", "frame_cut_off", "stream_finish", "tool_arguments_ending"]

#: How a call's arguments that do not parse ended: cut off by the token limit, cut off with the
#: connection (no finish reason came), cut off for a reason not known here, or malformed.
ArgumentsEnding = Literal["length", "lost", "cut", "malformed"]

_AT_CHAR = re.compile(r"\(char (\d+)\)\s*$")


def error_type(exc: BaseException) -> str:
    """mmsp's name for an error: what an MMSP server reported (``UpstreamError.error_type``), else its class."""
    reported = getattr(exc, "error_type", None)
    return reported if isinstance(reported, str) and reported else type(exc).__name__


def stream_finish(exc: BaseException) -> tuple[bool, str | None]:
    """``(seen, finish_reason)``: the finish reason mmsp's stream had received when it raised ``exc``.

    ``seen`` is False when ``exc`` was not raised inside mmsp's public stream (an MMSP server's
    error, an SDK's), and the finish reason is then unknown.
    """
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__") == "mmsp.base_client":
            for value in list(frame.f_locals.values()):
                if type(value).__name__ == "_PublicStream" and hasattr(value, "_finish_reason"):
                    finish = value._finish_reason
                    return True, finish if isinstance(finish, str) else None
        tb = tb.tb_next
    return False, None


def _cut_off(exc: BaseException) -> bool | None:
    """Whether tool arguments that did not parse stop mid-way (None: ``exc`` is no such failure)."""
    if "ToolCallArgumentParseError" in {cls.__name__ for cls in type(exc).__mro__}:
        length = getattr(exc, "raw_arguments_length", None)
    elif getattr(exc, "error_type", None) == "ToolCallArgumentParseError":
        error = getattr(exc, "error", None)
        length = error.get("raw_arguments_length") if isinstance(error, dict) else None
    else:
        return None
    reason = str(exc).rsplit("): ", 1)[-1]  # mmsp's message ends with the parser's reason
    if reason.startswith("Unterminated string"):
        return True
    at = _AT_CHAR.search(reason)
    return at is not None and isinstance(length, int) and int(at.group(1)) >= length


def tool_arguments_ending(exc: BaseException | None) -> ArgumentsEnding | None:
    """How the arguments ended when ``exc`` is mmsp's failure to parse a tool call's arguments, else None."""
    if exc is None:
        return None
    cut = _cut_off(exc)
    if cut is None:
        return None
    if not cut:
        return "malformed"
    seen, finish = stream_finish(exc)
    if not seen:
        return "cut"
    if finish == "length":
        return "length"
    if finish is None:
        return "lost"
    return "malformed"  # the provider said it finished, with arguments that stop mid-way


def frame_cut_off(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a client's JSON parser running out of input in a frame's JSON: the frame stops
    mid-way, as the last one of a stream cut inside it does (a frame that is no JSON at all is not cut off)."""
    if not isinstance(exc, json.JSONDecodeError) or not isinstance(exc.doc, str):
        return False
    doc = exc.doc.rstrip()
    if doc and "[DONE]".startswith(doc):  # the closing ``data: [DONE]`` of a stream, cut inside it
        return True
    return doc[:1] in ("{", "[") and (exc.msg.startswith("Unterminated string") or exc.pos >= len(doc))
