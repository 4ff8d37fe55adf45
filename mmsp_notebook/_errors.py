"""Errors raised by mmsp_notebook.

Hierarchy (every class is exported from ``mmsp_notebook``)::

    MMSPNotebookError            base of everything this package raises itself
    ├── ProtocolError            a stream broke the UniEvent grammar (index + reason)
    ├── OptionError              a bad magic option, config key or argument (also a ValueError)
    │   └── OptionTypeError      an argument of the wrong type (also a TypeError)
    ├── DemoServerError          the demo model server cannot start or was misused
    ├── TurnError                a turn did not complete and strict mode asked to raise
    ├── IdleTimeoutError         the server sent nothing for the turn's --timeout (also httpx.ReadTimeout)
    ├── NotAnEventStreamError    an HTTP 200 whose body is no event stream (an HTML page) and gave no
    │                            event (also a ValueError); ``content_type`` says what came
    ├── LoopBlockedError         code on the worker event loop (an async tool that blocks) held it until the
    │                            turn was interrupted or reached its --timeout (also a TimeoutError)
    ├── BusyError                a conversation already has a turn streaming
    ├── TraceError               a trace or its timing cannot be found, read or used (also a
    │   │                        ValueError); ``path`` and ``reason`` name the file and what is wrong
    │   └── TraceNotFoundError   no such trace file (also a FileNotFoundError)
    ├── ManifestError            a trace dataset's manifest is damaged or of another version: ``traces.sync``
    │                            changes nothing (also a RuntimeError); ``path`` names the manifest
    └── SyncBusyError            another ``traces.sync`` of the same dataset kind is running (also a
                                 RuntimeError); ``path`` names the kind's directory

Errors of the ``mmsp`` library itself (``UpstreamError``, ``IncompleteStreamError``,
``ToolCallArgumentParseError``, ...) are never wrapped: a turn records them as they are, and
strict mode raises :class:`TurnError` with the original as ``__cause__``. The one exception is the
``IncompleteStreamError`` of a response that was no event stream at all: a
:class:`NotAnEventStreamError` says so, with it as ``__cause__``; so does mmsp's ``UpstreamError``
with the server's message for a Responses stream that reported an ``error`` or ``response.failed``
event, which mmsp's client passes over.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["MMSPNotebookError", "ProtocolError", "OptionError", "OptionTypeError", "DemoServerError", "TurnError",
           "BusyError", "TraceError", "TraceNotFoundError", "IdleTimeoutError",
           "LoopBlockedError", "ManifestError", "NotAnEventStreamError", "SyncBusyError"]


class MMSPNotebookError(Exception):
    """Base class of the errors mmsp_notebook raises itself."""


class ProtocolError(MMSPNotebookError, ValueError):
    """A stream of UniEvents broke the grammar of the streaming protocol.

    ``index`` is the 0-based position of the offending event in the stream, ``reason`` says what
    was wrong, ``event`` is the offending event (as received).
    """

    def __init__(self, index: int, reason: str, event: Any = None) -> None:
        self.index = index
        self.reason = reason
        self.event = event
        super().__init__(f"event {index}: {reason}")


class OptionError(MMSPNotebookError, ValueError):
    """A malformed option, configuration value or argument (a one-line message, no traceback)."""


class OptionTypeError(OptionError, TypeError):
    """An argument of the wrong type: catchable as :class:`OptionError` and as ``TypeError``."""


class DemoServerError(MMSPNotebookError, RuntimeError):
    """The demo model server could not start, or was asked for something it refuses."""


class TurnError(MMSPNotebookError, RuntimeError):
    """A turn ended in error, incomplete or cancelled, and strict mode asked to raise.

    ``turn`` is the result object, with its partial content; ``__cause__`` is the original error.
    """

    def __init__(self, message: str, turn: Any = None) -> None:
        self.turn = turn
        super().__init__(message)


class BusyError(MMSPNotebookError, RuntimeError):
    """A conversation (a chat) already has a turn streaming: stop it or wait for it first."""


class TraceError(MMSPNotebookError, ValueError):
    """A trace cannot be found, read or used: a missing file, a damaged record, a turn it does not hold.

    ``path`` is the file concerned (or None) and ``reason`` what is wrong with it, without the path
    (the message when no shorter reason was given).
    """

    def __init__(self, message: str, *, path: str | None = None, reason: str | None = None) -> None:
        self.path = path
        self.reason = reason if reason is not None else message
        super().__init__(message)


class TraceNotFoundError(TraceError, FileNotFoundError):
    """No trace file where one was looked for: catchable as :class:`TraceError` and as ``FileNotFoundError``."""


class NotAnEventStreamError(MMSPNotebookError, ValueError):
    """The server answered a streaming request with a body that is no event stream (an HTML page, a
    JSON document) and no event came of it: ``content_type`` is what it said it sent, ``status`` its
    HTTP status. Its ``__cause__`` is the client's own error (mmsp's ``IncompleteStreamError``)."""

    def __init__(self, content_type: str, status: int | None) -> None:
        self.content_type, self.status = content_type, status
        shown = "".join(c for c in content_type[:80] if c.isprintable()) or "no content type"
        super().__init__(
            f"the server answered HTTP {status or 200} with {shown}, not an event stream (text/event-stream): "
            "--base-url is likely not this client type's API endpoint (a web page, a proxy's login or error page) "
            "or the server does not stream; check --base-url and --client-type (--wire shows what it sent)")


class ManifestError(MMSPNotebookError, RuntimeError):
    """A trace dataset's manifest cannot be used (damaged, or written by another version): the sync
    changes nothing. ``path`` is the manifest file (or None)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class SyncBusyError(MMSPNotebookError, RuntimeError):
    """Another ``traces.sync`` of the same dataset kind holds its lock: wait for it to end, then sync
    again. ``path`` is the kind's directory (or None)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class IdleTimeoutError(MMSPNotebookError, httpx.ReadTimeout):
    """The server sent nothing (no byte, no event) for the turn's idle timeout (``--timeout``).

    A read timeout: the step ends ``incomplete`` when events had arrived (they are kept), else
    ``error``. ``seconds`` is the limit that was reached. ``status`` is the HTTP status (429, 5xx…)
    the server had answered with when a provider SDK was waiting to retry it, else None: the server
    was not silent then, it had refused the request.
    """

    def __init__(self, seconds: float, status: int | None = None) -> None:
        self.seconds, self.status = seconds, status
        if status is not None:
            why = {429: "rate limited", 408: "request timeout", 409: "conflict"}.get(status, "server error")
            super().__init__(
                f"HTTP {status} ({why}): the server refused the request and the provider's SDK was waiting to retry "
                f"it (as its Retry-After asked, or backing off) when the turn's --timeout of {seconds:g} s ended it; "
                "what arrived is kept. Wait a moment and run it again, or allow the retry longer with --timeout "
                "SECONDS (%mmsp config timeout=..., ask(timeout=...), Chat(timeout=...))")
            return
        super().__init__(
            f"no data for {seconds:g} s: the server sent nothing (no byte, no event) for that long, so the turn "
            f"was ended; what arrived is kept. Allow longer with --timeout SECONDS (%mmsp config timeout=..., "
            f"ask(timeout=...), Chat(timeout=...)), or timeout=none for no limit")


class LoopBlockedError(MMSPNotebookError, TimeoutError):
    """Code running on the worker event loop blocked it (an ``async def`` tool that calls
    ``time.sleep`` or computes for long), and the turn was ended from the front door: on an
    interrupt, or once the loop had been blocked for the turn's ``--timeout``.

    What arrived is kept. The blocking code itself cannot be stopped: it runs on until it returns,
    and every other stream waits for it. ``stall`` describes the block (``stall.tool`` names the
    tool when one is the culprit), ``interrupted`` says whether an interrupt ended the turn, and
    ``hint`` what to do.
    """

    def __init__(self, stall: Any, interrupted: bool = False, limit: float | None = None) -> None:
        self.stall = stall
        self.interrupted = interrupted
        self.hint = stall.advice
        how = "on interrupt" if interrupted else f"after {limit:g} s (the turn's --timeout)" if limit else "early"
        super().__init__(
            f"{stall.who} blocked the worker event loop for {stall.seconds:.0f} s, so the turn was ended {how}; what "
            f"arrived is kept. It runs on until it returns, and every other stream waits for it. {stall.advice}")
