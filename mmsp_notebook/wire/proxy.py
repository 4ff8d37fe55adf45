"""A recording loopback proxy in front of any model endpoint: :class:`WireProxy`.

Point a client's base URL at the proxy and it forwards every request to the upstream unchanged
(method, path, query, body, every header but the hop-by-hop ones; ``Accept-Encoding`` keeps only the
codings the proxy can undo: gzip, deflate), streams the response back as it arrives, and keeps a copy of the response bytes with the time each chunk arrived — the raw
server-sent events the client received, for the wire inspector (``%%mmsp --wire``)::

    from mmsp_notebook.demo import WireProxy

    with WireProxy("https://api.openai.com/v1") as proxy:
        client = mmsp.AutoLLMClient("gpt-4.1-mini", api_key=key, base_url=proxy.base_url, client_type="openai-chat")
        ...
        record = proxy.transcripts[-1]          # a WireTranscript: the raw SSE bytes, chunk times
        proxy.save_transcript(record.id, "capture.sse")   # DemoServer(replay="capture.sse") plays it back

``python -m mmsp_notebook.demo --proxy UPSTREAM_URL`` runs one from a terminal.

Keys
    The proxy never stores or logs a request header (``Authorization``, ``x-api-key``,
    ``api-key``, ``x-goog-api-key``... are forwarded, then forgotten), never stores the query
    string (``?key=`` goes upstream only; httpx's request log lines get it masked, as the password of an
    upstream given as ``https://user:KEY@host``), and stores the request body with every field named like
    a credential removed. Errors reaching the upstream are reported by exception type only, so a
    URL holding a key never reaches a message. It listens on loopback addresses only. A saved
    stream (:meth:`WireProxy.save_transcript`, ``--save-dir``) has every key redacted as
    ``turn.save_wire`` has (:func:`~mmsp_notebook.core.redact.redact_bytes`: a key the upstream
    echoed back is written ``[redacted]``).

Request bodies
    A request body larger than ``max_body`` bytes (:data:`MAX_BODY`, 32 MiB, by default) is
    refused with HTTP 413 and a JSON error saying so, without being forwarded; it is read to its
    end and dropped as it arrives (memory stays flat), unless it is over four times the limit,
    when the connection is closed instead. A record keeps the (scrubbed)
    JSON of a body up to :data:`KEEP_REQUEST` bytes, only the size and model of a larger one.

Server stack
    The proxy is a :class:`~mmsp_notebook._loopback.LoopbackServer` (Starlette on uvicorn, its own
    event loop in a daemon thread, loopback-only bind), as the demo server is, with a catch-all
    route; the upstream call is made with httpx and no redirect following. Its records are
    :class:`~mmsp_notebook._loopback.Transcript` records, the demo server's kind
    (:class:`WireTranscript` adds the arrival clock), so ``transcripts``, ``transcript(id)`` and
    ``save_transcript(id, path)`` work as on the demo server.

Query strings
    An upstream may carry a query (``...?api-version=2024-06-01``, a gateway's ``?key=``): mmsp's
    clients append their path to the base URL as it is written, query and all (``/v1?key=K`` gives
    ``/v1?key=K/stream``, ``/v1/?key=Kchat/completions`` for the OpenAI SDKs), so the proxy's
    :attr:`~WireProxy.base_url` and :meth:`~WireProxy.tap_url` keep the upstream's query in the same
    place, and the request line the client makes is forwarded as it is: the upstream gets what the
    client would have sent it directly. The query is never stored (a record's ``endpoint`` is the
    path) and is masked in every log line (:func:`mask_query`).

Taps
    A path beginning with ``/_tap/NAME/`` is forwarded without that prefix and its record is tagged
    ``tap=NAME``: several conversations can share one proxy and each find its own requests
    (:meth:`WireProxy.tap_url`).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
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
from ..core.redact import redact, redact_bytes, redact_url_secrets
from .sse import detect_protocol

__all__ = ["WireProxy", "WireTranscript", "HOP_BY_HOP", "SENSITIVE_HEADERS", "mask_query", "MAX_BODY",
           "KEEP_REQUEST"]


#: Headers that belong to one connection and are never forwarded (RFC 9110 §7.6.1), plus the ones
#: the proxy's own HTTP stack sets (host, content-length, date, server).
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})
_RESPONSE_SKIP = HOP_BY_HOP - {"content-length"} | {"date", "server"}
#: Request headers that hold a key: forwarded, never stored (no request header is stored at all).
SENSITIVE_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization",
                               "cookie", "openai-organization", "openai-project"})
#: The response headers a record keeps (no cookie, nothing else).
_KEPT_RESPONSE_HEADERS = ("content-type", "content-encoding", "x-demo-request-id", "x-request-id", "request-id",
                          "retry-after")
_TAP = re.compile(r"^/_tap/([A-Za-z0-9_.~-]{1,80})(/.*)?$")
_PROTOCOL_BY_PATH = (
    ("/stream", "mmsp"),
    ("/chat/completions", "chat"),
    ("/responses", "responses"),
    ("/messages", "messages"),
    ("/embeddings", "embeddings"),
)


@dataclass
class WireTranscript(Transcript):
    """A request forwarded by the proxy: the record a loopback server keeps, plus what only a proxy knows.

    Attributes:
        tap: The tap the request came through (``""`` without one).
        method: The HTTP method.
        upstream_request_id: The upstream's ``x-demo-request-id`` / ``x-request-id`` / ``request-id``.
        response_headers: The few response headers kept (content type and ids; never a cookie).
        times: For each chunk, the ``time.monotonic()`` at which it arrived from the upstream
            (before it was passed on to the client).
    """

    tap: str = ""
    method: str = "POST"
    upstream_request_id: str | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    times: list[float] = field(default_factory=list, repr=False)

    def add(self, chunk: bytes) -> None:
        """Record one chunk as arrived now."""
        self.times.append(time.monotonic())
        super().add(chunk)


def mask_query(text: str) -> str:
    """``text`` with the value of every query parameter named like a credential, and the password
    of a URL's user info (``https://user:KEY@host``; httpx sends it as Basic auth), replaced by
    ``[redacted]`` (:func:`~mmsp_notebook.core.redact.redact_url_secrets`, as every message redacts them)."""
    return redact_url_secrets(text)


class _MaskQueryKeys(logging.Filter):
    """httpx logs every request's URL at INFO: mask a key held in its query (``?key=``) or its user
    info (``https://user:KEY@host``) first."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and isinstance(record.args, tuple):
            # (httpx's URL, or the URL of its copy the OpenAI SDK uses, httpx2's)
            record.args = tuple(mask_query(str(a)) if isinstance(a, str) or type(a).__name__ == "URL" else a
                                for a in record.args)
        elif isinstance(record.msg, str):
            record.msg = mask_query(record.msg)
        return True


_mask = _MaskQueryKeys()


def install_log_filter() -> None:
    """Mask query keys in what httpx and httpcore log (installed when a proxy starts), and their
    copies the OpenAI SDK logs under (``httpx2``: its request to a tap URL holding the upstream's query)."""
    for name in ("httpx", "httpcore", "httpx2", "httpcore2"):
        logger = logging.getLogger(name)
        if _mask not in logger.filters:
            logger.addFilter(_mask)


#: the content codings the proxy can undo for the copy it keeps (:class:`_Decoder`)
DECODED = ("gzip", "x-gzip", "deflate", "identity")


def accept_encoding(value: str) -> str:
    """A client's ``Accept-Encoding`` narrowed to the codings the proxy can undo: a client with
    brotli or zstandard installed (httpx then asks for ``br``, ``zstd``) would get a stream whose kept
    copy is compressed bytes. The client still decodes what comes (it asked for it); ``identity``
    when none of its codings is left."""
    kept = [part.strip() for part in value.split(",") if part.split(";")[0].strip().lower() in DECODED]
    return ", ".join(kept) or "identity"


class _Decoder:
    """Undoes gzip / deflate for the copy kept (the client gets the bytes as they came). A
    ``deflate`` stream is zlib-wrapped as RFC 9110 says, or raw deflate as some servers send it."""

    def __init__(self, encoding: str | None) -> None:
        encoding = (encoding or "").strip().lower()
        self._zlib = None
        self._raw_next = False
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
            self._raw_next = True  # (if its first bytes are no zlib header)

    def __call__(self, chunk: bytes) -> bytes:
        if self._zlib is None:
            return chunk
        try:
            out = self._zlib.decompress(chunk)
        except zlib.error:
            if self._raw_next:
                self._raw_next = False
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                return self(chunk)
            self._zlib = None
            return chunk
        if chunk:
            self._raw_next = False
        return out


def _protocol_of(path: str) -> str:
    for suffix, protocol in _PROTOCOL_BY_PATH:
        if path.rstrip("/").endswith(suffix):
            return protocol
    return "other"


class _Forward:
    """The ASGI response of one forwarded request: stream the upstream's answer, tee the bytes."""

    def __init__(self, app: _ProxyApp, request: Request, body: bytes, record: WireTranscript, path: bytes) -> None:
        self.app, self.request, self.body, self.record, self.path = app, request, body, record, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        record = self.record
        proxy = self.app.proxy
        url = proxy._upstream_origin + self.path.decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        named = {n.strip().lower() for n in self.request.headers.get("connection", "").split(",") if n.strip()}
        headers = [(k, accept_encoding(v.decode("latin-1")).encode("latin-1") if k.lower() == b"accept-encoding" else v)
                   for k, v in self.request.headers.raw
                   if k.decode("latin-1").lower() not in HOP_BY_HOP and k.decode("latin-1").lower() not in named]
        client = self.app.http()
        try:
            upstream = await client.send(
                client.build_request(self.request.method, httpx.URL(url), headers=headers, content=self.body),
                stream=True,
            )
        except (httpx.HTTPError, OSError) as exc:
            # the type only: an httpx message may quote the URL, and a URL may hold a key
            message = f"the wire proxy could not reach the upstream {proxy.upstream_display}: {type(exc).__name__}"
            body = json.dumps({"error": {"type": "ProxyError", "message": message}}).encode()
            record.status, record.outcome = 502, "upstream_error"
            record.add(body)
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        record.status = upstream.status_code
        kept = {name: upstream.headers[name] for name in _KEPT_RESPONSE_HEADERS if name in upstream.headers}
        record.response_headers = kept
        record.upstream_request_id = kept.get("x-demo-request-id") or kept.get("x-request-id") or kept.get("request-id")
        decoder = _Decoder(upstream.headers.get("content-encoding"))
        out_headers = [(k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in _RESPONSE_SKIP]

        async def pump() -> None:
            await send({"type": "http.response.start", "status": upstream.status_code, "headers": out_headers})
            async for chunk in upstream.aiter_raw():
                if not chunk:
                    continue
                record.add(decoder(chunk))
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        shutdown = proxy._server.shutdown
        try:
            pump_task = await until_disconnect(pump(), receive, shutdown)
        finally:
            await upstream.aclose()
        if pump_task.done() and not pump_task.cancelled() and pump_task.exception() is None:
            record.outcome = "complete" if record.status < 400 else "refused"
        elif pump_task.done() and not pump_task.cancelled():
            record.outcome = "cut"  # the upstream closed mid-body
        else:
            record.outcome = "stopped" if shutdown.is_set() else "client_gone"
        if record.protocol in ("other", "chat", "responses", "messages", "mmsp") and record.status == 200:
            detected = detect_protocol(record.response)
            if detected is not None:
                record.protocol = detected
        if record.outcome in ("cut", "stopped"):
            # close the client's connection mid-body too (a stream that was cut, or the proxy stopping)
            raise AbruptClose(f"wire proxy: {record.outcome}")


class _ProxyApp:
    """The proxy's one route, over the proxy's records and its httpx client."""

    def __init__(self, proxy: WireProxy) -> None:
        self.proxy = proxy
        self._http: httpx.AsyncClient | None = None

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            # streams are open-ended between events, so no read timeout (as the mmsp clients do)
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(connect=30.0, read=None, write=30.0, pool=30.0),
                                           follow_redirects=False)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def forward(self, request: Request) -> _Forward | Response:
        raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode()
        raw_path = raw_path.split(b"?", 1)[0]
        tap = ""
        match = _TAP.match(raw_path.decode("latin-1"))
        if match:
            tap = match.group(1)
            raw_path = (match.group(2) or "/").encode("latin-1")
        path = raw_path.decode("latin-1")
        body = await read_body(request, self.proxy.max_body)
        record = WireTranscript(id=uuid.uuid4().hex[:16], endpoint=redact(path), protocol=_protocol_of(path), model="",
                                request=None, tap=tap, method=request.method)
        if isinstance(body, int):
            return self._too_large(record, body)
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                record.request = {"bytes": len(body)}  # not JSON: only its size is kept
            else:
                model = parsed.get("model") if isinstance(parsed, dict) else None
                record.model = model if isinstance(model, str) else ""
                record.request = (scrub(parsed) if len(body) <= KEEP_REQUEST
                                  else {"bytes": len(body), "model": record.model})
        self.proxy._log.add(record)
        return _Forward(self, request, body, record, raw_path)

    def _too_large(self, record: WireTranscript, size: int) -> Response:
        limit = self.proxy.max_body
        message = (f"request body too large (HTTP 413): the wire proxy forwards request bodies of up to {limit:,} "
                   f"bytes, this one has at least {size:,}; it was not sent upstream (start the proxy with a larger "
                   "max_body, --max-body-mb, to allow it)")
        body = json.dumps({"error": {"type": "RequestTooLarge", "message": message, "status": 413}}).encode()
        record.request = {"bytes": size}
        record.status, record.outcome = 413, "refused"
        record.add(body)
        self.proxy._log.add(record)
        return Response(body, status_code=413, media_type="application/json", headers={"connection": "close"})

    def build(self) -> Starlette:
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
        return Starlette(routes=[Route("/{path:path}", self.forward, methods=methods)])


class WireProxy(Served):
    """A recording proxy on loopback in front of ``upstream`` (see the module docstring).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. It serves no model: every
    request goes to the upstream.

    Args:
        upstream: The endpoint's base URL, as a client would be given it
            (``https://api.openai.com/v1``, ``https://api.anthropic.com``, a demo server's
            ``base_url``, ``https://res.openai.azure.com/openai/deployments/d?api-version=2024-06-01``).
            Paths are forwarded unchanged to its scheme, host and port; a query is kept on
            :attr:`base_url` (see *Query strings* in the module docstring).
        host: A loopback address (``127.0.0.1`` default, ``::1``, ``localhost``); nothing else.
        port: The port; 0 picks a free one.
        max_transcripts: How many request records are kept (oldest dropped first).
        max_body: The largest request body forwarded, in bytes (:data:`MAX_BODY` by default); a
            larger one is answered HTTP 413 with a JSON error, and not forwarded.

    Attributes:
        upstream: The upstream base URL, normalised (no trailing slash on its path; its query, a
            key in it too: show it through :func:`mask_query`).
        upstream_display: The upstream's scheme, host and port only (what messages show).

    Raises:
        DemoServerError: ``upstream`` is not an http(s) URL, has a ``#fragment``, or ``host`` is not
            a loopback address.
    """

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0, *, max_transcripts: int = 200,
                 max_body: int = MAX_BODY) -> None:
        self.max_body = body_limit(max_body)
        self._server = LoopbackServer("wire proxy", host, port)
        parts = urlsplit(str(upstream))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise DemoServerError(f"the upstream must be an http(s) URL, not {upstream!r}")
        if parts.fragment:
            raise DemoServerError("give the upstream without its #fragment (a client never sends one; a query "
                                  "string is taken)")
        # a query stays on the base URL handed the client, which appends its path as it would to the
        # upstream's, so the same request line reaches the upstream (see "Query strings" above)
        self._query = f"?{parts.query}" if parts.query else ""
        self.upstream = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}{self._query}"
        self._upstream_origin = f"{parts.scheme}://{parts.netloc}"
        self._upstream_path = parts.path.rstrip("/")
        self.upstream_display = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self._log: TranscriptLog[WireTranscript] = TranscriptLog(max_transcripts)
        self._app = _ProxyApp(self)

    # -- addresses -----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def upstream_path(self) -> str:
        """The upstream's path (no trailing slash, no query)."""
        return self._upstream_path

    @property
    def base_url(self) -> str:
        """The proxy's root plus the upstream's path and query: the base URL to hand a client instead
        of ``upstream`` (it holds the upstream's query, a key in it too: show it through :func:`mask_query`)."""
        return f"{self.root_url}{self._upstream_path}{self._query}"

    def tap_url(self, tap: str, root: bool = False) -> str:
        """The base URL of a tap: requests through it are tagged ``tap`` in :attr:`transcripts`.

        Args:
            tap: Letters, digits, ``_ . ~ -``.
            root: The tap's root (no upstream path), for clients that append ``/v1/...`` themselves.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.~-]{1,80}", tap):
            raise DemoServerError(f"invalid tap name {tap!r}")
        return f"{self.root_url}/_tap/{tap}" + ("" if root else self._upstream_path) + self._query

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> WireProxy:
        """Start serving on loopback in a daemon thread; returns once the proxy accepts.

        Raises:
            DemoServerError: Already running, or the address cannot be bound.
        """
        install_log_filter()
        self._server.start(self._app.build(), on_exit=self._app.close)
        return self

    def stop(self) -> None:
        """Stop serving: open streams end at once, then the upstream connections are closed."""
        self._server.stop()

    def __repr__(self) -> str:
        state = self.root_url if self.running else "stopped"
        return f"WireProxy({state} -> {self.upstream_display})"

    # -- clients -------------------------------------------------------------------------------

    def client(self, model: str = "demo", client_type: str = "mmsp", api_key: str | None = None) -> Any:
        """An ``mmsp.AutoLLMClient`` whose requests go through this proxy.

        ``ant-messages`` / ``anthropic-official`` clients are given the proxy's root URL plus the
        upstream path (they append ``/v1/messages``), every other type :attr:`base_url`.
        """
        from mmsp import AutoLLMClient

        path = self._upstream_path
        if client_type in ("ant-messages", "anthropic-official") and path.endswith("/v1"):
            path = path[: -len("/v1")]
        base_url = f"{self.root_url}{path}{self._query}"
        return AutoLLMClient(model=model, api_key=api_key, base_url=base_url, client_type=client_type)

    # -- records -------------------------------------------------------------------------------

    @property
    def transcripts(self) -> list[WireTranscript]:
        """The records of the requests forwarded, oldest first (at most ``max_transcripts``)."""
        return self._log.all()

    def transcript(self, request_id: str) -> WireTranscript:
        """The record of one request, by its id.

        Raises:
            DemoServerError: No record has that id.
        """
        return self._log.get(request_id)

    def records(self, tap: str | None = None) -> list[WireTranscript]:
        """The records kept, oldest first; only those of one tap when ``tap`` is given."""
        return [r for r in self._log.all() if tap is None or r.tap == tap]

    def settle(self, timeout: float = 2.0) -> bool:
        """Wait until no record is still streaming (a client may finish before the proxy's last write).

        Returns:
            Whether every record had ended within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while any(r.outcome == "streaming" for r in self._log.all()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def save_transcript(self, request_id: str, path: str | Path) -> Path:
        """Write the response bytes of one streamed request to a file ``DemoServer(replay=...)`` serves.

        Keys are redacted as in every file this project writes (``turn.save_wire`` too): an upstream
        that echoed a key has it written ``[redacted]``.

        Raises:
            DemoServerError: No record has that id, or the response was not a stream.
        """
        record = self._log.get(request_id)
        if record.protocol == "embeddings" or record.status != 200:
            raise DemoServerError(f"transcript {request_id} is not an SSE stream (status {record.status})")
        target = Path(path)
        target.write_bytes(redact_bytes(record.response))
        return target
