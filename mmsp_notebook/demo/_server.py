"""The demo server: a Starlette app on uvicorn, run on its own event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._errors import DemoServerError
from .._loopback import (
    KEEP_REQUEST,
    MAX_BODY,
    AbruptClose,
    LoopbackServer,
    Served,
    Transcript,
    TranscriptLog,
    body_limit,
    read_body,
    scrub,
    until_disconnect,
)
from ._answer import build_plan
from ._bodies import embeddings_body, http_error
from ._protocols import ENCODERS, Encoder, MmspEncoder, StreamEnds
from ._replay import Replay, load_replay
from ._requests import (
    BadRequest,
    DemoRequest,
    read_chat,
    read_embeddings,
    read_messages,
    read_mmsp,
    read_responses,
    seed_payload,
)
from ._scenario import DEMO_MODELS, SILENCE_HEARTBEAT, ModelSpec, Plan, Usage, parse_model, request_seed
from ._trace import RequestTrace, trace_request
from ._whole import WholeResponse, wants_stream

__all__ = ["DemoServer", "Transcript"]

_READERS: dict[str, Callable[[Any], DemoRequest]] = {
    "mmsp": read_mmsp,
    "chat": read_chat,
    "responses": read_responses,
    "messages": read_messages,
}


@dataclass
class _Settings:
    instant: bool
    tokens_per_second: float
    first_token_delay: float
    heartbeat: float
    max_body: int


#: The largest request body read and planned on the server's loop; a larger one is, in a worker thread.
_PLAN_ON_LOOP = 64 * 1024


class _Pacer:
    """Waits between fragments, writing heartbeats while a wait is long, ending on shutdown."""

    def __init__(self, shutdown: asyncio.Event, heartbeat: float, encoder: Encoder) -> None:
        self._shutdown = shutdown
        self._heartbeat = heartbeat
        self._encoder = encoder

    async def _sleep(self, seconds: float) -> None:
        if self._shutdown.is_set():
            raise AbruptClose("server stopping")
        try:
            await asyncio.wait_for(self._shutdown.wait(), timeout=seconds)
        except TimeoutError:
            return
        raise AbruptClose("server stopping")

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

    async def stall(self) -> AsyncIterator[bytes]:
        """Wait until the server stops (the client going away cancels the wait), yielding a heartbeat
        every interval meanwhile: a server keeps a silent stream alive while its model says nothing."""
        while True:
            await self._sleep(self._heartbeat)
            yield self._encoder.heartbeat()


# frames written between two turns of the loop, at most: fewer than the writes into a closed socket
# after which asyncio warns ("socket.send() raised exception.", from the fifth on)
_YIELD_EVERY = 3


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
            sent = 0
            async for frame in self._frames:
                self._record.add(frame)
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                sent += 1
                if sent % _YIELD_EVERY == 0:
                    # a turn of the loop: an instant stream never waits otherwise, so a client gone
                    # would be noticed only at its end, after a write per frame into a dead socket
                    await asyncio.sleep(0)
            # every frame is out: the record says so before the client can see the stream's end
            # (a client reading its record right after the last byte finds it final)
            self._record.outcome = "complete"
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            pump_task = await until_disconnect(pump(), receive)
        finally:
            await self._frames.aclose()  # type: ignore[attr-defined]
        error = pump_task.exception() if pump_task.done() and not pump_task.cancelled() else None
        if error is None and pump_task.done() and not pump_task.cancelled():
            self._record.outcome = "complete"
        elif isinstance(error, AbruptClose):
            self._record.outcome = "stopped" if "stopping" in str(error) else "cut"
        elif error is None:
            self._record.outcome = "client_gone"
        else:
            self._record.outcome = "error"
        if error is not None:
            raise error


_Answer = Response | _SSEResponse | WholeResponse


class _App:
    """The routes, over the server's settings, replay, records and shutdown event."""

    def __init__(self, settings: _Settings, replay: Replay | None, log: TranscriptLog[Transcript],
                 loopback: LoopbackServer) -> None:
        self.settings = settings
        self.replay = replay
        self.log = log
        self.loopback = loopback

    # -- helpers ---------------------------------------------------------------------------

    def _json(self, body: Any, status: int = 200, record: Transcript | None = None, **headers: str) -> JSONResponse:
        if record is not None:
            headers["x-demo-request-id"] = record.id
        response = JSONResponse(body, status_code=status, headers=headers or None)
        if record is not None:
            record.status = status
            record.outcome = "refused" if status >= 400 else "complete"
            record.add(bytes(response.body))
        return response

    def _refuse(self, protocol: str, status: int, kind: str, message: str, record: Transcript | None = None,
                fault: str | None = None, **headers: str) -> JSONResponse:
        return self._json(http_error(protocol, kind, message, fault), status, record, **headers)

    def _shutdown_event(self) -> asyncio.Event:
        return self.loopback.shutdown

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
        return JSONResponse([record.summary() for record in self.log.all()])

    async def transcript(self, request: Request) -> Response:
        """``GET /v1/_demo/transcripts/{id}``: the raw bytes sent for one request."""
        record = self.log.find(request.path_params["request_id"])
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

    async def _begin(self, request: Request, protocol: str) -> tuple[Transcript, bytes] | JSONResponse:
        """The request's record and body; a body over ``max_body`` is refused with 413 (and not kept)."""
        record = Transcript(
            id=uuid.uuid4().hex[:16], endpoint=request.url.path, protocol=protocol, model="", request=None
        )
        self.log.add(record)
        raw = await read_body(request, self.settings.max_body)
        if isinstance(raw, int):
            record.request = {"bytes": raw}
            message = (f"Request body too large: the demo server takes request bodies of up to "
                       f"{self.settings.max_body:,} bytes, this one has at least {raw:,}: send less (fewer or smaller "
                       "images), or start a demo server of your own with a larger max_body (DemoServer(max_body=...), "
                       "python -m mmsp_notebook.demo --max-body-mb N) and give its base_url.")
            return self._refuse(protocol, 413, "too_large", message, record,
                                **{"connection": "close", "x-should-retry": "false"})
        return record, raw

    def _parse(self, record: Transcript, raw: bytes, protocol: str) -> Any:
        """The JSON of a request body, kept (without keys) in its record; a refusal when it is not JSON."""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self._refuse(protocol, 400, "invalid_request", "Request body is not valid JSON.", record)
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            record.model = body["model"]
        # a large body (images in its history) is not kept whole: the records' memory stays small
        record.request = scrub(body) if len(raw) <= KEEP_REQUEST else {"bytes": len(raw), "model": record.model}
        return body

    async def _answer(self, raw: bytes, answer: Callable[..., _Answer], *args: Any) -> _Answer:
        """``answer(*args)``: on the loop for a small body, in a worker thread for a larger one.

        Reading and planning a request costs time in proportion to its size (about a fifth of a
        second a megabyte of text): on the loop it would hold every other stream the server serves.
        """
        if len(raw) <= _PLAN_ON_LOOP:
            return answer(*args)
        return await asyncio.to_thread(answer, *args)

    async def stream(self, request: Request) -> _Answer:
        """The four answer endpoints: a stream, or one JSON body for a vendor protocol's request without
        ``"stream": true`` (``_whole``)."""
        protocol = _PATHS[request.url.path]
        begun = await self._begin(request, protocol)
        if isinstance(begun, JSONResponse):
            return begun
        record, raw = begun
        return await self._answer(raw, self._stream, record, raw, protocol, request.url.path)

    def _stream(self, record: Transcript, raw: bytes, protocol: str, path: str) -> _Answer:
        body = self._parse(record, raw, protocol)
        if isinstance(body, JSONResponse):
            return body
        settings = self.settings
        replay = self.replay
        if replay is not None and replay.protocol == protocol:
            frames = _replay_frames(replay, settings, self._shutdown_event())
            if not wants_stream(protocol, body):  # the transcript's frames, folded as the demo's own are
                return WholeResponse(frames, record, protocol, record.model, None, replay=replay.source)
            return self._sse(frames, record)
        try:
            demo_request = _READERS[protocol](body)
        except BadRequest as exc:
            return self._refuse(protocol, 400, "invalid_request", str(exc), record)
        try:
            spec = parse_model(demo_request.model)
        except DemoServerError as exc:
            # refused before streaming, as an MMSP server and the providers' APIs refuse a model they lack
            return self._refuse(protocol, 404, "not_found", str(exc), record)
        if spec.base == "demo-embed" and protocol != "mmsp":
            message = (f"Model not found: {spec.name} is an embedding model, not served on {path}; "
                       "use POST /v1/embeddings or /v1/stream")
            return self._refuse(protocol, 404, "not_found", message, record)
        refused = self._refuse_fault(protocol, spec, record)
        if refused is not None:
            return refused
        tracing = None
        if protocol == "mmsp":
            try:
                tracing = trace_request(body, spec.name)
            except BadRequest as exc:
                return self._refuse(protocol, 400, "invalid_request", str(exc), record)
        encoder_class = ENCODERS[protocol]
        seed = request_seed(seed_payload(demo_request, spec.base, spec.xss))
        plan = build_plan(demo_request, spec, media=encoder_class.media, seed=seed)
        if spec.base == "demo-embed" and not plan.blocks:
            message = "Nothing to embed: the request ends with the model's answer; send a user message to embed."
            return self._refuse(protocol, 400, "invalid_request", message, record)
        encoder = encoder_class(plan, spec.name, record.id)
        frames = _drive(encoder, plan, spec, settings, self._shutdown_event(), tracing)
        if not wants_stream(protocol, body):  # the same frames, folded into the protocol's JSON body
            return WholeResponse(frames, record, protocol, spec.name, spec.fault)
        return self._sse(frames, record)

    def _refuse_fault(self, protocol: str, spec: ModelSpec, record: Transcript) -> JSONResponse | None:
        """The refusal of an injected ``+401`` or ``+429`` fault (the error object names it in ``demo_fault``)."""
        if spec.fault == "401":
            message = (f"Invalid API key (injected fault +401 of {spec.name}: the demo server checks no key, "
                       "a model name without +401 is answered).")
            return self._refuse(protocol, 401, "authentication", message, record, fault="401",
                                **{"x-should-retry": "false"})
        if spec.fault == "429":
            message = (f"Rate limit reached; retry after {spec.retry_after} s (injected fault +429 of {spec.name}: "
                       "a model name without +429 is answered).")
            return self._refuse(protocol, 429, "rate_limit", message, record, fault="429",
                                **{"retry-after": str(spec.retry_after), "x-should-retry": "false"})
        return None

    async def embeddings(self, request: Request) -> Response:
        """``POST /v1/embeddings`` for ``demo-embed``, as the OpenAI embeddings API answers."""
        begun = await self._begin(request, "embeddings")
        if isinstance(begun, JSONResponse):
            return begun
        record, raw = begun
        answer = await self._answer(raw, self._embeddings, record, raw)
        assert isinstance(answer, Response)
        return answer

    def _embeddings(self, record: Transcript, raw: bytes) -> Response:
        body = self._parse(record, raw, "embeddings")
        if isinstance(body, JSONResponse):
            return body
        try:
            demo_request = read_embeddings(body)
            spec = parse_model(demo_request.model)
        except BadRequest as exc:
            return self._refuse("embeddings", 400, "invalid_request", str(exc), record)
        except DemoServerError as exc:
            return self._refuse("embeddings", 404, "not_found", str(exc), record)
        if spec.base != "demo-embed":
            return self._refuse("embeddings", 400, "invalid_request", f"{spec.name} is not an embedding model; use demo-embed.", record)
        refused = self._refuse_fault("embeddings", spec, record)
        if refused is not None:
            return refused
        seed = request_seed(seed_payload(demo_request, spec.base, False))
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


async def _replay_frames(replay: Replay, settings: _Settings, shutdown: asyncio.Event) -> AsyncIterator[bytes]:
    """The frames of a transcript, as captured; paced one frame per token unless instant."""
    pacer = _Pacer(shutdown, settings.heartbeat, ENCODERS[replay.protocol](_empty_plan("replay"), "replay", ""))
    for index, frame in enumerate(replay.frames):
        if not settings.instant:
            delay = settings.first_token_delay if index == 1 else (1 / settings.tokens_per_second if index else 0)
            async for heartbeat in pacer.wait(delay):
                yield heartbeat
        yield frame


def _fault_error(encoder: Encoder, spec: ModelSpec) -> list[bytes]:
    """The in-stream error of the ``+error`` fault, saying what it is."""
    message = (f"Injected fault +error of {spec.name}: the demo model breaks off its answer with an in-stream "
               "error here; a model name without +error is answered.")
    return encoder.error("model_not_found", message, fault="error")


async def _drive(
    encoder: Encoder, plan: Plan, spec: ModelSpec, settings: _Settings, shutdown: asyncio.Event,
    tracing: RequestTrace | None = None,
) -> AsyncIterator[bytes]:
    """The frames of one live stream: the plan, paced, with its fault injected; traced at its stop if asked."""
    paced = not (spec.instant or (settings.instant and spec.tps is None and spec.delay is None))
    tps = spec.tps or settings.tokens_per_second
    delay = spec.delay if spec.delay is not None else settings.first_token_delay
    pacer = _Pacer(shutdown, settings.heartbeat, encoder)
    for frame in encoder.open():
        yield frame
    if spec.silence:
        # the silence is the point of +silence, so it is kept in instant mode too, and it keeps its
        # heartbeats: one a second (or at the server's interval when shorter), whatever the interval
        quiet = _Pacer(shutdown, min(settings.heartbeat, SILENCE_HEARTBEAT), encoder)
        async for heartbeat in quiet.wait(spec.silence):
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
                        raise AbruptClose(f"injected fault +{spec.fault}")
                    if spec.fault == "error":
                        for frame in _fault_error(encoder, spec):
                            yield frame
                        return
                    if spec.fault == "stall":
                        async for heartbeat in pacer.stall():
                            yield heartbeat
            for frame in encoder.end(index, block):
                yield frame
    except StreamEnds as ending:
        for frame in ending.frames:
            yield frame
        return
    if spec.fault == "error":
        # a plan too short to reach the fault's position still reports it
        for frame in _fault_error(encoder, spec):
            yield frame
        return
    if spec.fault == "nostop":
        frames = encoder.unterminated()
    else:
        frames = encoder.finish()
        if tracing is not None and isinstance(encoder, MmspEncoder):
            # saved before the stop goes out, as mmsp's clients save a trace before yielding the stop
            frames = tracing.save(encoder.done_items, encoder.stop_event) or frames
    for frame in frames:
        yield frame


class DemoServer(Served):
    """An offline model server speaking MMSP's wire and the Chat Completions, Responses and Messages protocols.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with DemoServer(instant=True) as srv:
            client = srv.client("demo")            # an mmsp.AutoLLMClient for /v1/stream
            chat = srv.client("demo", "openai-chat")

    The server runs uvicorn on an event loop of its own in a daemon thread, on a socket it binds
    itself (port 0 picks a free port): a :class:`~mmsp_notebook._loopback.LoopbackServer`, as the
    wire proxy is. It binds loopback addresses only unless ``allow_remote``.

    Args:
        host: The address to bind: ``127.0.0.1`` (default), ``::1``, ``localhost``, or any other
            address with ``allow_remote=True``.
        port: The port; 0 picks a free one.
        instant: Stream without any pacing (tests); ``+tps=``/``+delay=`` in a model name still pace.
        tokens_per_second: Fragments per second after the first.
        first_token_delay: Seconds before the first fragment.
        heartbeat: Seconds of silence after which a heartbeat frame is written.
        replay: A captured SSE transcript served verbatim to every streamed request on its protocol's
            endpoint, folded into the protocol's JSON body for one without ``"stream": true``.
        replay_protocol: The transcript's protocol; recognised from its content when None.
        allow_remote: Allow binding a non-loopback address.
        max_transcripts: How many request records :attr:`transcripts` keeps (oldest dropped first).
        max_body: The largest request body taken, in bytes (32 MiB by default: images in a
            conversation's history travel as base64); a larger one is refused with HTTP 413 in the
            protocol's error shape, read no further than four times the limit and never kept.

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
        max_body: int = MAX_BODY,
    ) -> None:
        self._server = LoopbackServer("demo server", host, port, allow_remote=allow_remote)
        # (compared so that NaN fails too: it paced every stream at random, and inf never sent a first token)
        if not 0 < tokens_per_second < math.inf:
            raise DemoServerError(f"tokens_per_second must be a positive number, not {tokens_per_second!r}")
        if not 0 <= first_token_delay < math.inf:
            raise DemoServerError(f"first_token_delay must be a number of seconds, 0 or more, not {first_token_delay!r}")
        if not heartbeat > 0:
            raise DemoServerError(f"heartbeat must be a positive number of seconds, not {heartbeat!r}")
        self.host = host
        settings = _Settings(instant, float(tokens_per_second), float(first_token_delay), float(heartbeat),
                             body_limit(max_body))
        self._log: TranscriptLog[Transcript] = TranscriptLog(max_transcripts)
        loaded = load_replay(replay, replay_protocol) if replay is not None else None
        self._app = _App(settings, loaded, self._log, self._server)

    # -- addresses -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``, the base URL of the MMSP and OpenAI clients."""
        return f"{self.root_url}/v1"

    @property
    def instant(self) -> bool:
        """Whether the demo models answer at once; set it to change how the next requests are paced."""
        return self._app.settings.instant

    @instant.setter
    def instant(self, value: bool) -> None:
        self._app.settings.instant = bool(value)

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> DemoServer:
        """Bind the socket and start serving in a daemon thread; returns once the server accepts.

        Raises:
            DemoServerError: Already running, the address cannot be bound or the server did not start.
        """
        self._server.start(self._app.build())
        return self

    def __repr__(self) -> str:
        state = self.base_url if self.running else "stopped"
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

    @property
    def transcripts(self) -> list[Transcript]:
        """The records of the requests served, oldest first (at most ``max_transcripts``)."""
        return self._log.all()

    def transcript(self, request_id: str) -> Transcript:
        """The record of one request, by the id of its ``x-demo-request-id`` header.

        Raises:
            DemoServerError: No record has that id.
        """
        return self._log.get(request_id)

    def save_transcript(self, request_id: str, path: str | Path) -> Path:
        """Write the raw bytes streamed for one request to a file ``--replay`` can serve.

        Returns:
            The path written.

        Raises:
            DemoServerError: No record has that id, or the response was not a stream.
        """
        return self._log.save(request_id, path)
