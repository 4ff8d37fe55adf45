"""A small HTTP server on a loopback port, run by uvicorn on an event loop of its own in a daemon thread.

The demo model server (:class:`~mmsp_notebook.demo.DemoServer`) and the wire proxy
(:class:`~mmsp_notebook.demo.WireProxy`) are both one of these, each by composition: a
:class:`LoopbackServer` runs the ASGI app it is given (life cycle, address, clean stop), a
:class:`TranscriptLog` keeps what was sent for each request (:class:`Transcript`). The helpers the
two apps share live here too: :class:`AbruptClose` (close a connection mid-body), :func:`scrub`
(a request body without its credentials), :func:`read_body` (a request body up to a size limit)
and :func:`until_disconnect` (run a response until the client goes away or the server stops).

Stopping sets :attr:`LoopbackServer.shutdown` on the server's loop first, so a stream waiting on it
(a stalled demo stream, a proxied one) ends at once, then asks uvicorn to exit; a stream that still
holds on is dropped by uvicorn's forced exit.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

import uvicorn
from starlette.requests import Request

from ._errors import DemoServerError

__all__ = ["AbruptClose", "KEEP_REQUEST", "LoopbackServer", "MAX_BODY", "MAX_LOG_BYTES", "Served", "Transcript", "TranscriptLog",
           "body_limit", "is_loopback", "read_body", "scrub", "until_disconnect"]

_STARTUP_TIMEOUT = 10.0
_STOP_TIMEOUT = 2.0
#: Body fields that look like a credential: never kept in a record.
SENSITIVE_FIELDS = frozenset({"authorization", "api_key", "apikey", "api-key", "x-api-key", "x_api_key", "key",
                              "token", "secret"})
#: The largest request body a server takes by default (bytes); a larger one is refused with 413.
MAX_BODY = 32 * 1024 * 1024
#: The largest request body whose JSON a record keeps (a larger one: its size and model only).
KEEP_REQUEST = 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scrub(value: Any) -> Any:
    """A copy of a request body without any field that looks like a credential."""
    if isinstance(value, dict):
        return {key: scrub(item) for key, item in value.items() if str(key).lower() not in SENSITIVE_FIELDS}
    if isinstance(value, list):
        return [scrub(item) for item in value]
    return value


def body_limit(max_body: object) -> int:
    """``max_body`` checked: a whole number of bytes above 0.

    Raises:
        DemoServerError: It is not.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise DemoServerError(f"max_body is a number of bytes above 0, not {max_body!r}")
    return max_body


async def read_body(request: Request, limit: int) -> bytes | int:
    """A request's body, or its size when it is over ``limit`` bytes.

    A body over the limit is read to its end and dropped as it comes (memory stays flat, and the
    client, still sending, then reads the 413 rather than a broken connection), up to four times
    the limit; one declared (``Content-Length``) larger than that is not read at all.
    """
    drain = 4 * limit
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > drain:
        return int(declared)
    body = bytearray()
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            body += chunk
        elif body:
            body = bytearray()  # over the limit: nothing more is kept
        if size > drain:
            break
    return bytes(body) if size <= limit else size


class AbruptClose(Exception):
    """Raised out of a response to have uvicorn close the connection mid-body (its traceback is not logged)."""


def _caused_by_cut(exc: BaseException | None, depth: int = 0) -> bool:
    if exc is None or depth > 10:
        return False
    if isinstance(exc, AbruptClose):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_caused_by_cut(inner, depth + 1) for inner in exc.exceptions)
    return _caused_by_cut(exc.__cause__ or exc.__context__, depth + 1)


class _QuietCuts(logging.Filter):
    """Drops uvicorn's traceback for a connection closed on purpose (:class:`AbruptClose`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _caused_by_cut(record.exc_info[1] if record.exc_info else None)


_quiet = _QuietCuts()


async def until_disconnect(pump: Coroutine[Any, Any, None], receive: Callable[[], Awaitable[Any]],
                           stop: asyncio.Event | None = None) -> asyncio.Task[None]:
    """Run a response's ``pump`` until it ends, the client disconnects or ``stop`` is set.

    What is still running then is cancelled. Returns the pump's task, for the caller to read the
    outcome (done, cancelled, or failed with its exception).
    """

    async def listen() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    pump_task = asyncio.create_task(pump)
    tasks: set[asyncio.Task[Any]] = {pump_task, asyncio.create_task(listen())}
    if stop is not None:
        tasks.add(asyncio.create_task(stop.wait()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return pump_task


@dataclass
class Transcript:
    """What a loopback server sent for one request.

    Attributes:
        id: The request id (the demo server also sends it as the ``x-demo-request-id`` header).
        endpoint: The path requested, e.g. ``/v1/chat/completions``.
        protocol: ``mmsp``, ``chat``, ``responses``, ``messages``, ``embeddings`` (or ``other``).
        model: The model name requested.
        request: The request body (parsed JSON); no header, key or Authorization is kept.
        status: The HTTP status.
        response: The raw response body bytes, as sent.
        chunk_times_ms: For each chunk sent, milliseconds since the request arrived.
        outcome: ``complete``, ``refused``, ``cut`` (closed mid-stream), ``client_gone``,
            ``stopped`` (the server shut down), ``error``, ``upstream_error``, or ``streaming``.
        chunks: The sizes of the chunks sent, in order.
    """

    id: str
    endpoint: str
    protocol: str
    model: str
    request: Any
    status: int = 200
    chunk_times_ms: list[float] = field(default_factory=list, repr=False)
    outcome: str = "streaming"
    chunks: list[int] = field(default_factory=list, repr=False)
    started: float = field(default_factory=time.monotonic, repr=False)
    _body: bytearray = field(default_factory=bytearray, repr=False)

    @property
    def response(self) -> bytes:
        """The raw response body bytes sent so far."""
        return bytes(self._body)

    def add(self, chunk: bytes) -> None:
        """Record one chunk as sent now."""
        self._body += chunk
        self.chunks.append(len(chunk))
        self.chunk_times_ms.append(round((time.monotonic() - self.started) * 1000, 3))

    def summary(self) -> dict[str, Any]:
        """The record without its bytes."""
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "protocol": self.protocol,
            "model": self.model,
            "status": self.status,
            "outcome": self.outcome,
            "bytes": len(self._body),
            "chunks": len(self.chunks),
        }


T = TypeVar("T", bound=Transcript)


#: the bytes of response bodies a :class:`TranscriptLog` keeps at most (beyond, the oldest records go)
MAX_LOG_BYTES = 256 * 1024 * 1024


class TranscriptLog(Generic[T]):
    """The records of the last ``limit`` requests a server answered, oldest first (thread-safe).

    Their response bodies are kept to about ``max_bytes`` in all: as a record is added, the oldest
    finished ones are dropped while the bodies come to more (the newest record and those still
    streaming are kept, whatever their size), so that a kernel streaming images or long answers
    through the proxy for hours holds the last few hundred megabytes, not every body."""

    def __init__(self, limit: int = 200, max_bytes: int = MAX_LOG_BYTES) -> None:
        self._records: deque[T] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    def add(self, record: T) -> None:
        with self._lock:
            self._records.append(record)
            total = sum(len(r._body) for r in self._records)
            if total <= self.max_bytes:
                return
            kept: deque[T] = deque(maxlen=self._records.maxlen)
            for r in self._records:  # oldest first
                if total > self.max_bytes and r is not record and r.outcome != "streaming":
                    total -= len(r._body)
                else:
                    kept.append(r)
            self._records = kept

    def find(self, request_id: str) -> T | None:
        with self._lock:
            return next((record for record in self._records if record.id == request_id), None)

    def all(self) -> list[T]:
        with self._lock:
            return list(self._records)

    def get(self, request_id: str) -> T:
        """The record of one request.

        Raises:
            DemoServerError: No record has that id.
        """
        record = self.find(request_id)
        if record is None:
            raise DemoServerError(f"no transcript with id {request_id!r}")
        return record

    def save(self, request_id: str, path: str | Path) -> Path:
        """Write the raw bytes streamed for one request to ``path`` (what ``DemoServer(replay=...)`` serves).

        Raises:
            DemoServerError: No record has that id, or the response was not a stream.
        """
        record = self.get(request_id)
        if record.protocol == "embeddings" or record.status != 200 or record.response.startswith(b"{"):
            # a refusal, or the JSON body of a request that asked for no stream
            raise DemoServerError(f"transcript {request_id} is not an SSE stream (status {record.status})")
        target = Path(path)
        target.write_bytes(record.response)
        return target


class LoopbackServer:
    """uvicorn serving one ASGI app on ``host:port`` in a daemon thread, on an event loop of its own.

    Args:
        name: What the server is, for messages (``demo server``, ``wire proxy``).
        host: The address to bind: a loopback one (``127.0.0.1``, ``::1``, ``localhost``), or any
            other with ``allow_remote=True``.
        port: The port; 0 picks a free one.
        allow_remote: Allow binding a non-loopback address.

    Raises:
        DemoServerError: A non-loopback host without ``allow_remote``, or a port out of range.
    """

    def __init__(self, name: str, host: str = "127.0.0.1", port: int = 0, *, allow_remote: bool = False) -> None:
        if not is_loopback(host) and not allow_remote:
            hint = " unless allow_remote=True (--allow-remote)" if name == "demo server" else ""
            raise DemoServerError(
                f"refusing to bind {host}: the {name} listens on loopback addresses only (127.0.0.1, ::1, "
                f"localhost){hint}"
            )
        if not 0 <= port <= 65535:
            raise DemoServerError(f"invalid port {port}")
        self.name = name
        self.host = host
        self._requested_port = port
        #: Set on the server's loop when it stops: streams waiting on it end at once.
        self.shutdown = asyncio.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port: int | None = None
        self._startup_error: BaseException | None = None

    # -- addresses -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on (the real one when started with port 0)."""
        if self._port is None:
            raise DemoServerError(f"the {self.name} is not running; call start() first")
        return self._port

    @property
    def root_url(self) -> str:
        """``http://HOST:PORT``, with a wildcard or ``localhost`` host given as its loopback address."""
        host = self.host
        if host in ("localhost", "0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is serving."""
        return self._thread is not None and self._thread.is_alive() and self._port is not None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self, app: Any, on_exit: Callable[[], Awaitable[None]] | None = None) -> None:
        """Bind the socket and serve ``app`` in a daemon thread; returns once the server accepts.

        Args:
            app: The ASGI application.
            on_exit: Awaited on the server's loop once serving has ended (to close clients it holds).

        Raises:
            DemoServerError: Already running, the address cannot be bound or the server did not start.
        """
        if self._thread is not None:
            raise DemoServerError(f"the {self.name} is already running")
        bind_host = "127.0.0.1" if self.host == "localhost" else self.host
        family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind_host, self._requested_port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise DemoServerError(f"cannot listen on {self.host}:{self._requested_port}: {exc}") from exc
        self._port = sock.getsockname()[1]
        logger = logging.getLogger("uvicorn.error")
        if _quiet not in logger.filters:
            logger.addFilter(_quiet)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, timeout_keep_alive=5)
        self.shutdown = asyncio.Event()
        self._startup_error = None
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, args=(sock, on_exit), daemon=True,
                                        name=f"mmsp-{self.name.replace(' ', '-')}")
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                error = self._startup_error
                self._server.should_exit = True
                self._thread = None
                self._port = None
                raise DemoServerError(f"the {self.name} did not start: {error or 'timed out'}")
            time.sleep(0.01)

    def _run(self, sock: socket.socket, on_exit: Callable[[], Awaitable[None]] | None) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            assert self._server is not None
            loop.run_until_complete(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # reported by start()
            self._startup_error = exc
        finally:
            try:
                if on_exit is not None:
                    try:
                        loop.run_until_complete(asyncio.wait_for(on_exit(), _STOP_TIMEOUT / 2))
                    except Exception:  # closing what the app held: nothing left to report it to
                        pass
                pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            finally:
                loop.close()
                sock.close()

    def stop(self) -> None:
        """Stop serving: open streams are closed at once (a stalled one too), then the loop ends."""
        thread, server, loop = self._thread, self._server, self._loop
        if thread is None or server is None:
            return
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.shutdown.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        server.should_exit = True
        thread.join(_STOP_TIMEOUT / 2)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT / 2)
        self._thread = None
        self._server = None
        self._loop = None
        self._port = None


class Served:
    """What a server running on a :class:`LoopbackServer` (its ``_server``) shows of it: its address,
    whether it serves, stopping it, and use as a context manager. ``start`` is each server's own."""

    _server: LoopbackServer

    @property
    def port(self) -> int:
        """The port it listens on (the real one when started with port 0)."""
        return self._server.port

    @property
    def root_url(self) -> str:
        """``http://HOST:PORT``."""
        return self._server.root_url

    @property
    def running(self) -> bool:
        """Whether it serves."""
        return self._server.running

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving: open streams end at once (a stalled one too), then the loop ends."""
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
