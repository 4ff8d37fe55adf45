"""The demo server: a Starlette app on uvicorn, run on its own event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._errors import DemoServerError
from . import _requests
from ._protocols import ENCODERS, Encoder, StreamEnds, embeddings_body, http_error
from ._replay import Replay, load_replay
from ._scenario import DEMO_MODELS, ModelSpec, Plan, Usage, build_plan, parse_model, request_seed

__all__ = ["DemoServer", "Transcript"]

_READERS: dict[str, Callable[[Any], _requests.DemoRequest]] = {
    "mmsp": _requests.read_mmsp,
    "chat": _requests.read_chat,
    "responses": _requests.read_responses,
    "messages": _requests.read_messages,
}
_SENSITIVE = {"authorization", "api_key", "apikey", "api-key", "x-api-key", "x_api_key", "key", "token", "secret"}
_STARTUP_TIMEOUT = 10.0
_STOP_TIMEOUT = 2.0


class _AbruptClose(Exception):
    """Raised out of a response to have uvicorn close the connection mid-body."""


class _QuietCuts(logging.Filter):
    """Drops uvicorn's traceback for a connection the demo closed on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _caused_by_cut(record.exc_info[1] if record.exc_info else None)


def _caused_by_cut(exc: BaseException | None, depth: int = 0) -> bool:
    if exc is None or depth > 10:
        return False
    if isinstance(exc, _AbruptClose):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_caused_by_cut(inner, depth + 1) for inner in exc.exceptions)
    return _caused_by_cut(exc.__cause__ or exc.__context__, depth + 1)


_quiet = _QuietCuts()


def _install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if _quiet not in logger.filters:
        logger.addFilter(_quiet)


@dataclass
class Transcript:
    """What the server sent for one request.

    Attributes:
        id: The request id, also sent as the ``x-demo-request-id`` response header.
        endpoint: The path requested, e.g. ``/v1/chat/completions``.
        protocol: ``mmsp``, ``chat``, ``responses``, ``messages`` or ``embeddings``.
        model: The model name requested.
        request: The request body (parsed JSON); no header, key or Authorization is kept.
        status: The HTTP status.
        response: The raw response body bytes, as sent.
        chunk_times_ms: For each chunk sent, milliseconds since the request arrived.
        outcome: ``complete``, ``refused``, ``cut`` (closed mid-stream on purpose),
            ``client_gone`` or ``stopped`` (the server shut down), or ``streaming``.
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
        """The record without its bytes, for ``GET /v1/_demo/transcripts``."""
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


def _scrub(value: Any) -> Any:
    """A copy of a request body without any field that looks like a credential."""
    if isinstance(value, dict):
        return {key: _scrub(item) for key, item in value.items() if str(key).lower() not in _SENSITIVE}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    return value


@dataclass
class _Settings:
    instant: bool
    tokens_per_second: float
    first_token_delay: float
    heartbeat: float


class _Pacer:
    """Waits between fragments, writing heartbeats while a wait is long, ending on shutdown."""

    def __init__(self, shutdown: asyncio.Event, heartbeat: float, encoder: Encoder) -> None:
        self._shutdown = shutdown
        self._heartbeat = heartbeat
        self._encoder = encoder

    async def _sleep(self, seconds: float) -> None:
        if self._shutdown.is_set():
            raise _AbruptClose("server stopping")
        try:
            await asyncio.wait_for(self._shutdown.wait(), timeout=seconds)
        except TimeoutError:
            return
        raise _AbruptClose("server stopping")

    async def wait(self, seconds: float) -> AsyncIterator[bytes]:
        """Wait `seconds`, yielding a heartbeat after each full heartbeat interval of it."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if remaining > self._heartbeat:
                await self._sleep(self._heartbeat)
                yield self._encoder.heartbeat()
            else:
                await self._sleep(remaining)
                return

    async def stall(self) -> None:
        """Wait until the server stops (the client going away cancels the wait)."""
        await self._shutdown.wait()
        raise _AbruptClose("server stopping")


async def _until_disconnect(
    pump: Coroutine[Any, Any, None], receive: Receive, stop: asyncio.Event | None = None
) -> asyncio.Task[None]:
    """Run a response's ``pump`` until it ends, the client disconnects or ``stop`` is set; what is
    still running then is cancelled. Returns the pump's task, for the caller to read the outcome."""

    async def listen() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return

    pump_task = asyncio.create_task(pump)
    tasks = {pump_task, asyncio.create_task(listen())}
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


class _SSEResponse:
    """An ASGI response that streams frames, records them, and notices the client going away."""

    def __init__(self, frames: AsyncIterator[bytes], record: Transcript) -> None:
        self._frames = frames
        self._record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            (b"x-demo-request-id", self._record.id.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def pump() -> None:
            async for frame in self._frames:
                self._record.add(frame)
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            pump_task = await _until_disconnect(pump(), receive)
        finally:
            await self._frames.aclose()  # type: ignore[attr-defined]
        error = pump_task.exception() if pump_task.done() and not pump_task.cancelled() else None
        if error is None and pump_task.done() and not pump_task.cancelled():
            self._record.outcome = "complete"
        elif isinstance(error, _AbruptClose):
            self._record.outcome = "stopped" if "stopping" in str(error) else "cut"
        elif error is None:
            self._record.outcome = "client_gone"
        else:
            self._record.outcome = "error"
        if error is not None:
            raise error


class _App:
    """The routes, over the server's settings, transcripts and shutdown event."""

    def __init__(self, server: DemoServer) -> None:
        self.server = server
        self.shutdown: asyncio.Event | None = None

    # -- helpers ---------------------------------------------------------------------------

    def _json(self, body: Any, status: int = 200, record: Transcript | None = None, **headers: str) -> JSONResponse:
        if record is not None:
            headers["x-demo-request-id"] = record.id
        response = JSONResponse(body, status_code=status, headers=headers or None)
        if record is not None:
            record.status = status
            record.outcome = "refused" if status >= 400 else "complete"
            record.add(response.body)
        return response

    def _refuse(self, protocol: str, status: int, kind: str, message: str, record: Transcript | None = None, **headers: str) -> JSONResponse:
        return self._json(http_error(protocol, kind, message), status, record, **headers)

    def _shutdown_event(self) -> asyncio.Event:
        if self.shutdown is None:
            self.shutdown = asyncio.Event()
        return self.shutdown

    # -- routes ----------------------------------------------------------------------------

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the demo models, in a list both OpenAI's and Anthropic's SDKs read."""
        data = [_model_entry(name) for name in DEMO_MODELS]
        return JSONResponse(
            {"object": "list", "data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        )

    async def model(self, request: Request) -> Response:
        """``GET /v1/models/{id}``: one model, a variant with options included; 404 NotFoundError else."""
        name = request.path_params["model_id"]
        try:
            parse_model(name)
        except DemoServerError as exc:
            return self._json(http_error("mmsp", "not_found", str(exc)), 404)
        return JSONResponse(_model_entry(name))

    async def transcripts(self, request: Request) -> Response:
        """``GET /v1/_demo/transcripts``: every record kept, without bytes."""
        return JSONResponse([record.summary() for record in self.server.transcripts])

    async def transcript(self, request: Request) -> Response:
        """``GET /v1/_demo/transcripts/{id}``: the raw bytes sent for one request."""
        record = self.server._find(request.path_params["request_id"])
        if record is None:
            return self._json(http_error("mmsp", "not_found", "No transcript with that id."), 404)
        return Response(record.response, media_type="text/plain; charset=utf-8")

    async def not_found(self, request: Request, exc: Exception) -> Response:
        """Any other path or method: a JSON 404, as an MMSP server answers."""
        message = (
            f"No route for {request.method} {request.url.path}; the demo serves POST /v1/stream, "
            "/v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings and GET /v1/models."
        )
        return self._json(http_error("mmsp", "not_found", message), 404)

    async def _begin(self, request: Request, protocol: str) -> tuple[Transcript, Any] | JSONResponse:
        record = Transcript(
            id=uuid.uuid4().hex[:16], endpoint=request.url.path, protocol=protocol, model="", request=None
        )
        self.server._add(record)
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self._refuse(protocol, 400, "invalid_request", "Request body is not valid JSON.", record)
        record.request = _scrub(body)
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            record.model = body["model"]
        return record, body

    async def stream(self, request: Request) -> Response | _SSEResponse:
        """The four streaming endpoints."""
        protocol = _PATHS[request.url.path]
        begun = await self._begin(request, protocol)
        if isinstance(begun, JSONResponse):
            return begun
        record, body = begun
        settings = self.server._settings
        replay = self.server._replay
        if replay is not None and replay.protocol == protocol:
            return self._sse(_replay_frames(replay, settings, self._shutdown_event()), record)
        try:
            demo_request = _READERS[protocol](body)
        except _requests.BadRequest as exc:
            return self._refuse(protocol, 400, "invalid_request", str(exc), record)
        try:
            spec = parse_model(demo_request.model)
        except DemoServerError as exc:
            if protocol == "mmsp":
                # as an MMSP server answers a model its table does not have
                return self._refuse(protocol, 404, "not_found", str(exc), record)
            return self._sse(_error_frames(protocol, demo_request.model, str(exc)), record)
        if spec.base == "demo-embed" and protocol != "mmsp":
            message = f"Model not found: {spec.name} is an embedding model; use POST /v1/embeddings or /v1/stream"
            return self._sse(_error_frames(protocol, spec.name, message), record)
        if spec.fault == "401":
            return self._refuse(
                protocol, 401, "authentication", "Invalid API key (injected fault +401).", record, **{"x-should-retry": "false"}
            )
        if spec.fault == "429":
            return self._refuse(
                protocol,
                429,
                "rate_limit",
                f"Rate limit reached; retry after {spec.retry_after} s (injected fault +429).",
                record,
                **{"retry-after": str(spec.retry_after), "x-should-retry": "false"},
            )
        encoder_class = ENCODERS[protocol]
        seed = request_seed(_requests.seed_payload(demo_request, spec.base, spec.xss))
        plan = build_plan(demo_request, spec, media=encoder_class.media, seed=seed)
        encoder = encoder_class(plan, spec.name, record.id)
        return self._sse(_drive(encoder, plan, spec, settings, self._shutdown_event()), record)

    async def embeddings(self, request: Request) -> Response:
        """``POST /v1/embeddings`` for ``demo-embed``, as the OpenAI embeddings API answers."""
        begun = await self._begin(request, "embeddings")
        if isinstance(begun, JSONResponse):
            return begun
        record, body = begun
        try:
            demo_request = _requests.read_embeddings(body)
            spec = parse_model(demo_request.model)
        except _requests.BadRequest as exc:
            return self._refuse("embeddings", 400, "invalid_request", str(exc), record)
        except DemoServerError as exc:
            return self._refuse("embeddings", 404, "not_found", str(exc), record)
        if spec.base != "demo-embed":
            return self._refuse("embeddings", 400, "invalid_request", f"{spec.name} is not an embedding model; use demo-embed.", record)
        if spec.fault == "401":
            return self._refuse("embeddings", 401, "authentication", "Invalid API key (injected fault +401).", record, **{"x-should-retry": "false"})
        if spec.fault == "429":
            return self._refuse(
                "embeddings", 429, "rate_limit", "Rate limit reached (injected fault +429).", record,
                **{"retry-after": str(spec.retry_after), "x-should-retry": "false"},
            )
        seed = request_seed(_requests.seed_payload(demo_request, spec.base, False))
        plan = build_plan(demo_request, spec, media=False, seed=seed)
        return self._json(embeddings_body(plan, spec.name, body.get("encoding_format")), 200, record)

    def _sse(self, frames: AsyncIterator[bytes], record: Transcript) -> _SSEResponse:
        return _SSEResponse(frames, record)

    def build(self) -> Starlette:
        """The Starlette application."""
        routes = [
            Route(path, self.stream, methods=["POST"]) for path in _PATHS
        ] + [
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/v1/_demo/transcripts", self.transcripts, methods=["GET"]),
            Route("/v1/_demo/transcripts/{request_id}", self.transcript, methods=["GET"]),
        ]
        return Starlette(routes=routes, exception_handlers={404: self.not_found, 405: self.not_found})


_PATHS = {
    "/v1/stream": "mmsp",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


def _model_entry(name: str) -> dict[str, Any]:
    base = name.split("+", 1)[0]
    info = DEMO_MODELS.get(base, {})
    return {
        "id": name,
        "object": "model",
        "created": 1735689600,
        "owned_by": "mmsp-demo",
        "type": "model",
        "display_name": name,
        "created_at": "2025-01-01T00:00:00Z",
        "description": info.get("description", ""),
        "capabilities": info.get("capabilities", []),
    }


def _empty_plan(model: str) -> Plan:
    return Plan([], "stop", Usage(prompt=0), ModelSpec(name=model, base="demo"), request_seed(model))


async def _error_frames(protocol: str, model: str, message: str) -> AsyncIterator[bytes]:
    """An in-stream ``model_not_found`` error before any content, as the gateway reports it."""
    encoder = ENCODERS[protocol](_empty_plan(model), model, "")
    for frame in encoder.error("model_not_found", message):
        yield frame


async def _replay_frames(replay: Replay, settings: _Settings, shutdown: asyncio.Event) -> AsyncIterator[bytes]:
    """The frames of a transcript, as captured; paced one frame per token unless instant."""
    pacer = _Pacer(shutdown, settings.heartbeat, ENCODERS[replay.protocol](_empty_plan("replay"), "replay", ""))
    for index, frame in enumerate(replay.frames):
        if not settings.instant:
            delay = settings.first_token_delay if index == 1 else (1 / settings.tokens_per_second if index else 0)
            async for heartbeat in pacer.wait(delay):
                yield heartbeat
        yield frame


async def _drive(
    encoder: Encoder, plan: Plan, spec: ModelSpec, settings: _Settings, shutdown: asyncio.Event
) -> AsyncIterator[bytes]:
    """The frames of one live stream: the plan, paced, with its fault injected."""
    paced = not (spec.instant or (settings.instant and spec.tps is None and spec.delay is None))
    tps = spec.tps or settings.tokens_per_second
    delay = spec.delay if spec.delay is not None else settings.first_token_delay
    pacer = _Pacer(shutdown, settings.heartbeat, encoder)
    for frame in encoder.open():
        yield frame
    if spec.silence:
        # the silence is the point of +silence, so it is kept in instant mode too
        async for heartbeat in pacer.wait(spec.silence):
            yield heartbeat
    if paced and delay > 0:
        async for heartbeat in pacer.wait(delay):
            yield heartbeat
    count = 0
    try:
        for index, block in enumerate(plan.blocks):
            for frame in encoder.begin(index, block):
                yield frame
            for position in range(len(block.fragments)):
                if paced and count:
                    async for heartbeat in pacer.wait(1 / tps):
                        yield heartbeat
                for frame in encoder.fragment(index, block, position):
                    yield frame
                count += 1
                if count == plan.fault_at:
                    if spec.fault in ("cut-text", "cut-args"):
                        raise _AbruptClose(f"injected fault +{spec.fault}")
                    if spec.fault == "error":
                        for frame in encoder.error("model_not_found", f"Model not found: {spec.name} (injected fault +error)"):
                            yield frame
                        return
                    if spec.fault == "stall":
                        await pacer.stall()
            for frame in encoder.end(index, block):
                yield frame
    except StreamEnds as ending:
        for frame in ending.frames:
            yield frame
        return
    if spec.fault == "error":
        # a plan too short to reach the fault's position still reports it
        for frame in encoder.error("model_not_found", f"Model not found: {spec.name} (injected fault +error)"):
            yield frame
        return
    for frame in encoder.unterminated() if spec.fault == "nostop" else encoder.finish():
        yield frame


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DemoServer:
    """An offline model server speaking MMSP's wire and the Chat Completions, Responses and Messages protocols.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with DemoServer(instant=True) as srv:
            client = srv.client("demo")            # an mmsp.AutoLLMClient for /v1/stream
            chat = srv.client("demo", "openai-chat")

    The server runs uvicorn on an event loop of its own in a daemon thread, on a socket it binds
    itself (port 0 picks a free port). It binds loopback addresses only unless ``allow_remote``.

    Args:
        host: The address to bind: ``127.0.0.1`` (default), ``::1``, ``localhost``, or any other
            address with ``allow_remote=True``.
        port: The port; 0 picks a free one.
        instant: Stream without any pacing (tests); ``+tps=``/``+delay=`` in a model name still pace.
        tokens_per_second: Fragments per second after the first.
        first_token_delay: Seconds before the first fragment.
        heartbeat: Seconds of silence after which a heartbeat frame is written.
        replay: A captured SSE transcript served verbatim to every request on its protocol's endpoint.
        replay_protocol: The transcript's protocol; recognised from its content when None.
        allow_remote: Allow binding a non-loopback address.
        max_transcripts: How many request records :attr:`transcripts` keeps (oldest dropped first).

    Raises:
        DemoServerError: A non-loopback host without ``allow_remote``, a bad setting or replay file.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        instant: bool = False,
        tokens_per_second: float = 40.0,
        first_token_delay: float = 0.4,
        heartbeat: float = 15.0,
        replay: str | Path | None = None,
        replay_protocol: str | None = None,
        allow_remote: bool = False,
        max_transcripts: int = 200,
    ) -> None:
        if not _is_loopback(host) and not allow_remote:
            raise DemoServerError(
                f"refusing to bind {host}: the demo server listens on loopback addresses only "
                "(127.0.0.1, ::1, localhost) unless allow_remote=True (--allow-remote)"
            )
        if tokens_per_second <= 0:
            raise DemoServerError("tokens_per_second must be positive")
        if first_token_delay < 0:
            raise DemoServerError("first_token_delay must not be negative")
        if heartbeat <= 0:
            raise DemoServerError("heartbeat must be positive")
        if not 0 <= port <= 65535:
            raise DemoServerError(f"invalid port {port}")
        self.host = host
        self._requested_port = port
        self._settings = _Settings(instant, float(tokens_per_second), float(first_token_delay), float(heartbeat))
        self._replay: Replay | None = load_replay(replay, replay_protocol) if replay is not None else None
        self._transcripts: deque[Transcript] = deque(maxlen=max_transcripts)
        self._lock = threading.Lock()
        self._app = _App(self)
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
            raise DemoServerError("the demo server is not running; call start() first")
        return self._port

    @property
    def root_url(self) -> str:
        """``http://HOST:PORT``, the base URL Anthropic's SDK takes (it appends ``/v1/messages``)."""
        host = self.host
        if host == "localhost":
            host = "127.0.0.1"
        elif host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``, the base URL of the MMSP and OpenAI clients."""
        return f"{self.root_url}/v1"

    @property
    def running(self) -> bool:
        """Whether the server is serving."""
        return self._thread is not None and self._thread.is_alive() and self._port is not None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> DemoServer:
        """Bind the socket and start serving in a daemon thread; returns once the server accepts.

        Raises:
            DemoServerError: The address cannot be bound or the server did not start.
        """
        if self._thread is not None:
            raise DemoServerError("the demo server is already running")
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
        _install_log_filter()
        config = uvicorn.Config(
            self._app.build(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="mmsp-demo-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                error = self._startup_error
                self._thread = None
                self._port = None
                sock.close()
                raise DemoServerError(f"the demo server did not start: {error or 'timed out'}")
            time.sleep(0.01)
        return self

    def _run(self, sock: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._app.shutdown = asyncio.Event()
            assert self._server is not None
            loop.run_until_complete(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # reported by start()
            self._startup_error = exc
        finally:
            try:
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
        if loop is not None and not loop.is_closed() and self._app.shutdown is not None:
            try:
                loop.call_soon_threadsafe(self._app.shutdown.set)
            except RuntimeError:
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

    def __enter__(self) -> DemoServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.base_url if self._port is not None else "stopped"
        return f"DemoServer({state})"

    # -- clients -------------------------------------------------------------------------------

    def client(self, model: str = "demo", client_type: str = "mmsp") -> Any:
        """An ``mmsp.AutoLLMClient`` for a demo model on this server.

        Args:
            model: A demo model name, options included (``demo+instant``, ``demo-embed``...).
            client_type: ``mmsp`` (``/v1/stream``), ``openai-chat``, ``openai-responses``,
                ``ant-messages`` (handed the root URL, without ``/v1``) or ``openai-embedding``.

        Returns:
            The client. Every type but ``mmsp`` is handed the dummy key ``demo-key``: mmsp refuses a
            non-default base URL without a key; the demo checks none.
        """
        from mmsp import AutoLLMClient

        if client_type == "mmsp":
            return AutoLLMClient(model=model, base_url=self.base_url, client_type="mmsp")
        base_url = self.root_url if client_type in ("ant-messages", "anthropic-official") else self.base_url
        return AutoLLMClient(model=model, api_key="demo-key", base_url=base_url, client_type=client_type)

    # -- transcripts ---------------------------------------------------------------------------

    def _add(self, record: Transcript) -> None:
        with self._lock:
            self._transcripts.append(record)

    def _find(self, request_id: str) -> Transcript | None:
        with self._lock:
            return next((record for record in self._transcripts if record.id == request_id), None)

    @property
    def transcripts(self) -> list[Transcript]:
        """The records of the requests served, oldest first (at most ``max_transcripts``)."""
        with self._lock:
            return list(self._transcripts)

    def transcript(self, request_id: str) -> Transcript:
        """The record of one request, by the id of its ``x-demo-request-id`` header.

        Raises:
            DemoServerError: No record has that id.
        """
        record = self._find(request_id)
        if record is None:
            raise DemoServerError(f"no transcript with id {request_id!r}")
        return record

    def save_transcript(self, request_id: str, path: str | Path) -> Path:
        """Write the raw bytes streamed for one request to a file ``--replay`` can serve.

        Returns:
            The path written.

        Raises:
            DemoServerError: No record has that id, or the response was not a stream.
        """
        record = self.transcript(request_id)
        if record.protocol == "embeddings" or record.status != 200:
            raise DemoServerError(f"transcript {request_id} is not an SSE stream (status {record.status})")
        target = Path(path)
        target.write_bytes(record.response)
        return target
