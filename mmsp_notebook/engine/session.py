"""Per-kernel state: settings, named conversations (each with its history), shared clients, loopback servers.

Nothing here imports IPython. The magic, ``ask``/``aask`` and the chat widget all go through
:class:`Session` so a conversation, its trace ids and its usage table are the same whichever way a
turn was started.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import hashlib
import inspect
import math
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .._errors import DemoServerError, OptionError
from ..core.redact import redact_value, register_secret_env
from ..wire.proxies import WireProxies
from .messages import sniff_image
from .options import Settings, is_demo_model

__all__ = ["Conversation", "Session", "session", "is_demo_model", "image_item", "api_key_from_env", "LocalServer",
           "provide_local_server", "ClientPool", "Lease", "UsageLog", "usage_row", "close_client", "RecentTurns"]

def api_key_from_env(name: str | None) -> str | None:
    """The key the variable ``name`` holds (``--api-key-env NAME``), redacted from then on; ``None`` without a name."""
    if not name:
        return None
    register_secret_env(name)
    key = os.environ.get(name)
    if not key:
        raise OptionError(f"the environment variable {name} is not set (it should hold the API key)")
    return key


class LocalServer(Protocol):
    """What a session needs of the local server of the demo models (``mmsp_notebook.demo.DemoServer``)."""

    #: whether the demo models answer at once (set again when ``%mmsp config demo_instant=...`` changes it)
    instant: bool

    @property
    def base_url(self) -> str: ...

    def client(self, model: str, client_type: str = "mmsp") -> Any: ...

    def stop(self) -> None: ...


#: Starts the local model server: ``factory(instant)`` returns it running.
LocalServerFactory = Callable[[bool], LocalServer]
_local_server: LocalServerFactory | None = None


def provide_local_server(factory: LocalServerFactory) -> None:
    """Name what starts the server of the demo models in sessions that were given none.

    The engine does not import the demo package (a layer rule): the package's ``__init__``
    provides :class:`~mmsp_notebook.demo.DemoServer` here, so every way into the package finds the
    demo models served; a session can be handed another server instead (``Session(local_server=...)``).
    """
    global _local_server
    _local_server = factory


def image_item(value: Any) -> dict[str, Any] | None:
    """An ``image_url.done`` item for a PIL image, image bytes or a path to one (PNG, JPEG, GIF, WebP as they are,
    another format PIL reads as PNG); else ``None``."""
    data: bytes | None = None
    mime = None
    if hasattr(value, "save") and hasattr(value, "mode") and hasattr(value, "size"):  # a PIL image
        data, mime = _pil_png(value), "image/png"
        frames = getattr(value, "n_frames", 1)
        if isinstance(frames, int) and frames > 1:  # (an animated GIF, WebP or PNG opened with PIL)
            import warnings

            warnings.warn(f"an animated image of {frames} frames: only its frame {value.tell() + 1} is sent, as PNG "
                          "(give the file's path or bytes to send the animation as it is)", UserWarning, stacklevel=3)
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, Path) or (isinstance(value, str) and len(value) < 1024 and re.search(
            r"\.(png|jpe?g|gif|webp)$", value, re.I)):
        path = Path(value).expanduser()
        if path.is_file():
            data = path.read_bytes()
    if data is None:
        return None
    if mime is None:
        mime = sniff_image(data)
        if mime is None:  # another format PIL reads (BMP, TIFF, ICO...): sent as PNG, not as the bytes' repr
            data = _other_format_png(data)
            if data is None:
                return None
            mime = "image/png"
    return {"type": "image_url.done", "image_url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}


def _other_format_png(data: bytes) -> bytes | None:
    """PNG bytes of an image of a format no provider takes that PIL reads (BMP, TIFF...), else ``None``."""
    try:
        import io

        from PIL import Image
    except ImportError:
        return None
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception:  # not an image PIL knows (text, a PDF...), or a damaged one
        return None
    return _pil_png(image)


def _pil_png(image: Any) -> bytes:
    """A PIL image of any mode as PNG bytes; one that is empty or cannot be read is an :class:`OptionError`."""
    import io

    if not all(image.size):
        raise OptionError(f"not an image to send: an empty PIL image ({image.size[0]}×{image.size[1]} pixels)")
    try:
        image.load()  # an image opened from a damaged file fails here, not half-way through a save
        mode = image.mode
        if mode in ("La", "RGBa"):  # premultiplied alpha: PNG holds straight alpha
            image = image.convert(mode.upper())
        elif mode == "F" or (mode.startswith("I") and mode != "I;16"):
            image = _scaled(image)
        buf = io.BytesIO()
        try:
            image.save(buf, format="PNG")
        except (OSError, ValueError):  # a mode PNG cannot hold (CMYK, YCbCr, LAB, HSV...): sent as RGB(A)
            buf = io.BytesIO()
            image.convert("RGBA" if image.mode.endswith("A") else "RGB").save(buf, format="PNG")
    except (OSError, ValueError, SyntaxError) as exc:
        raise OptionError(f"not an image to send: a PIL image that cannot be read ({type(exc).__name__}: {exc})") from None
    return buf.getvalue()


def _scaled(image: Any) -> Any:
    """A float or 32-bit integer image as 8 or 16-bit grey: values of 0–1 (float), 0–255 or 0–65535 kept
    to scale, any other range stretched over 0–255 (never clipped to black or white)."""
    if image.mode != "F" and image.mode != "I":
        image = image.convert("I")
    lo, hi = image.getextrema()
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if image.mode == "I" and 0 <= lo and hi <= 65535:
        return image.convert("I;16") if hi > 255 else image.convert("L")
    if image.mode == "F" and 0 <= lo and hi <= 1:
        lo, hi = 0.0, 1.0
    elif (0 <= lo and hi <= 255) or lo == hi:  # a constant image keeps its value, clipped to 0–255
        lo, hi = min(lo, 0.0), max(hi, 255.0)
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return image.convert("F").point(lambda v: (v - lo) * scale).convert("L")


class RecentTurns(list[Any]):
    """A list that keeps only its last ``limit`` items (older ones are dropped as new ones come)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > self.limit:
            del self[: len(self) - self.limit]


#: Turns a session keeps whole (with their events) for ``sess.turns``; older ones live on only as
#: usage rows (and wherever the program kept them).
KEEP_TURNS = 32
#: Usage rows a session keeps (``%mmsp usage``), oldest dropped first.
KEEP_USAGE_ROWS = 100_000
#: Idle shared clients a session keeps open; the least recently used is closed beyond that.
KEEP_CLIENTS = 16


class Conversation:
    """A named conversation: its history (the UniMessages its next turn sends first) and its turns.

    The history is the conversation's own; the mmsp client a turn streams through is shared by
    every conversation on the same endpoint (:class:`ClientPool`) and is handed the history with
    each request. One turn at a time: a second one while one streams is refused (mmsp's
    ``ConcurrentCallError``), per conversation.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.endpoint: tuple[Any, ...] | None = None  # the endpoint of its last turn
        self.generation = 1  # bumped by --new, so trace ids of a fresh start do not collide
        self.turn_count = 0  # turns started in this conversation
        self.streaming = False  # a turn is in flight (touched on the worker loop)
        self.traced = False  # a turn of this generation was traced
        self._history: list[dict[str, Any]] = []
        self._turns: list[weakref.ref[Any]] = []

    @property
    def turns(self) -> list[Any]:
        """Its recent turns still in memory (the session keeps the last :data:`KEEP_TURNS` of all turns)."""
        return [turn for turn in (ref() for ref in self._turns) if turn is not None]

    def add_turn(self, turn: Any) -> None:
        self.turn_count += 1
        self._turns = [ref for ref in self._turns[-KEEP_TURNS:] if ref() is not None]
        self._turns.append(weakref.ref(turn))

    # what a conversation offered when it held a client of its own: no client (they are shared), and
    # a history set before the first turn is simply its history
    client = None

    @property
    def pending_history(self) -> list[dict[str, Any]] | None:
        return self.history() or None

    @pending_history.setter
    def pending_history(self, messages: list[dict[str, Any]] | None) -> None:
        self.set_history(messages or [])

    def history(self) -> list[dict[str, Any]]:
        """A copy of the history."""
        return copy.deepcopy(self._history)

    def messages(self) -> list[dict[str, Any]]:
        """The history itself, not a copy (for the engine, which never changes it in place)."""
        return self._history

    def set_history(self, messages: list[dict[str, Any]]) -> None:
        """Replace the history with a copy of ``messages`` (legacy shapes normalised, as mmsp's clients do).

        Once a turn of it was traced, the conversation starts a new trace id (as ``--new`` does):
        the trace keeps the history it recorded.
        """
        from mmsp.legacy import normalize_legacy_messages

        self._history = copy.deepcopy(normalize_legacy_messages(list(messages)))
        if self.traced:
            self.generation += 1
            self.traced = False

    def record(self, history: list[dict[str, Any]]) -> None:
        """The engine's: the history after a complete turn; the messages the turn added are copied."""
        kept = len(self._history)
        if history[:kept] == self._history:
            self._history = self._history + copy.deepcopy(history[kept:])
        else:  # the turn replaced a message (a pending "not run" user message it merged)
            self._history = copy.deepcopy(history)

    def reset(self) -> None:
        self._history = []
        self.generation += 1
        self.traced = False


def usage_row(turn: Any) -> dict[str, Any]:
    """One row of the usage table (``%mmsp usage``, ``chat.turns``): what a turn cost and how it went."""
    usage = turn.usage or {}
    t = turn.timings
    return {
        "turn": turn.id, "chat": turn.chat, "model": turn.model, "client_type": turn.client_type,
        "status": turn.status, "finish_reason": redact_value(turn.finish_reason), "steps": len(turn.steps),
        "cached_tokens": usage.get("cached_tokens"), "prompt_tokens": usage.get("prompt_tokens"),
        "thoughts_tokens": usage.get("thoughts_tokens"), "response_tokens": usage.get("response_tokens"),
        "ttft_s": t["ttft"], "total_s": t["total"], "tokens_per_s": t["tokens_per_second"], "cost": turn.cost,
        "trace_id": turn.trace_id,
    }


class UsageLog:
    """Every turn of a session as a usage row: the turns in flight live, the ended ones as rows only.

    Thread-safe: turns start on the main thread and end on the worker loop.
    """

    def __init__(self, limit: int = KEEP_USAGE_ROWS) -> None:
        self.limit = limit
        self._entries: OrderedDict[str, Any] = OrderedDict()  # turn id -> Turn (in flight) or its row
        self._lock = threading.Lock()

    def start(self, turn: Any) -> None:
        with self._lock:
            self._entries[turn.id] = turn
            while len(self._entries) > self.limit:
                oldest = next((key for key, value in self._entries.items() if isinstance(value, dict)), None)
                if oldest is None:
                    break
                del self._entries[oldest]

    def end(self, turn: Any) -> None:
        row = usage_row(turn)
        with self._lock:
            if turn.id in self._entries:
                self._entries[turn.id] = row

    def rows(self, chat: str | None = None) -> list[dict[str, Any]]:
        """The rows, oldest first; only those of conversation ``chat`` when given."""
        with self._lock:
            entries = list(self._entries.values())
        rows = [entry if isinstance(entry, dict) else usage_row(entry) for entry in entries]
        return [row for row in rows if chat is None or row["chat"] == chat]

    def __len__(self) -> int:
        return len(self._entries)


async def close_client(client: Any) -> None:
    """Close what an mmsp client holds open (its HTTP client or SDK client); never raises."""
    inner = getattr(client, "_client", client)
    http = getattr(inner, "_client", None)
    for target in (http, getattr(http, "aio", None)):
        for name in ("aclose", "close"):
            method = getattr(target, name, None)
            if method is not None and inspect.iscoroutinefunction(method):
                try:
                    await method()
                except Exception:
                    pass
                return


@dataclasses.dataclass(frozen=True)
class Lease:
    """A shared client held by one turn: ``client``, its endpoint ``key``, the ``pool`` to give it back to."""

    client: Any
    key: tuple[Any, ...]
    pool: ClientPool

    async def release(self) -> None:
        await self.pool.release(self.key)


def import_client_class(model: str, client_type: str | None = None, base_url: str | None = None) -> None:
    """Import the client class ``mmsp.AutoLLMClient`` picks for this endpoint: each provider's SDK is
    imported when its first client is made (``anthropic`` takes seconds). A client is made through
    mmsp's public ``AutoLLMClient`` and dropped (it routes the model as the turn will: the client
    type in any casing, or the ``CLIENT_TYPE`` variable; nothing is sent, a client connects at its
    first request). Nothing is raised: an unknown model, a missing key, an mmsp that changed are
    reported by the turn's own making of its client."""
    demo = is_demo_model(model) and not base_url  # (as the turn routes it: launch.py)
    try:
        from mmsp import AutoLLMClient

        AutoLLMClient(model=model, base_url=base_url, client_type=client_type or ("mmsp" if demo else None))
    except Exception:
        pass


class ClientPool:
    """The mmsp clients of a session, one per endpoint, shared by every conversation that uses it.

    A client is stateless here (each request carries the conversation's history), so one serves
    any number of conversations, concurrently. The pool keeps at most ``limit`` clients that no
    turn is using; beyond that the least recently used is closed. Used on the worker loop only.
    """

    def __init__(self, limit: int = KEEP_CLIENTS) -> None:
        self.limit = limit
        self._clients: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._users: dict[tuple[Any, ...], int] = {}
        self.closed = 0  # clients closed so far (for tests and measurements)

    def __len__(self) -> int:
        return len(self._clients)

    def __contains__(self, key: object) -> bool:
        return key in self._clients

    async def lease(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Lease:
        """The client of ``key`` (made with ``make()`` the first time), held until the lease is released."""
        return Lease(await self.acquire(key, make), key, self)

    async def acquire(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """The client of ``key`` (made with ``make()`` the first time), held until :meth:`release`."""
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = make()
        self._clients.move_to_end(key)
        self._users[key] = self._users.get(key, 0) + 1
        await self._trim()
        return client

    async def release(self, key: tuple[Any, ...]) -> None:
        users = self._users.get(key, 0) - 1
        if users > 0:
            self._users[key] = users
        else:
            self._users.pop(key, None)
        await self._trim()

    async def _trim(self) -> None:
        idle = [key for key in self._clients if not self._users.get(key)]
        for key in idle[: max(0, len(self._clients) - self.limit)]:
            await close_client(self._clients.pop(key))
            self.closed += 1

    async def aclose(self) -> None:
        """Close every client (a turn still streaming through one ends with a transport error)."""
        clients = list(self._clients.values())
        self._clients.clear()
        self._users.clear()
        for client in clients:
            await close_client(client)
            self.closed += 1


def key_digest(api_key: str | None) -> str | None:
    """A digest of a key, so that a client made with an older value of the variable is not reused."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16] if api_key else None


class Session:
    """Everything a kernel keeps between cells.

    Args:
        local_server: Starts the server of the demo models (``local_server(instant)`` returns it
            running); by default what :func:`provide_local_server` named.

    Memory: the conversations keep their histories; the session keeps the last
    :data:`KEEP_TURNS` turns whole (``turns``), every turn as a usage row (``usage``), and one
    open client per endpoint in use (``clients``), at most :data:`KEEP_CLIENTS` idle ones.
    """

    def __init__(self, local_server: LocalServerFactory | None = None) -> None:
        self.settings = Settings()
        self.conversations: dict[str, Conversation] = {}
        self.turns: RecentTurns = RecentTurns(KEEP_TURNS)  # the latest turns of this kernel, whole
        self.usage = UsageLog()  # every turn of this kernel as a row, for %mmsp usage
        self.clients = ClientPool()
        self.last_error: BaseException | None = None
        self.last_turn: Any = None
        self.notebook = "notebook"
        self.wire_proxies = WireProxies()  # the recording proxies of --wire turns, one per upstream
        self._local_server = local_server
        self._demo: LocalServer | None = None
        self._demo_lock = threading.Lock()

    # ---------------------------------------------------------------- loopback servers
    def demo_server(self) -> LocalServer:
        """The local model server of the demo models, started on first use (loopback, a free port).

        Raises:
            DemoServerError: No local model server is provided, or it cannot start.
        """
        with self._demo_lock:
            if self._demo is None:
                start = self._local_server or _local_server
                if start is None:
                    raise DemoServerError("no local model server serves the demo models here: give a --base-url, "
                                          "or start one with mmsp_notebook.demo.DemoServer")
                self._demo = start(self.settings.demo_instant)
            elif self._demo.instant != self.settings.demo_instant:  # %mmsp config demo_instant=... since it started
                self._demo.instant = self.settings.demo_instant
            return self._demo

    def close(self) -> None:
        """Close the shared clients, stop the loopback servers this session started: its wire proxies,
        then the demo model server.

        The session stays usable: a later turn starts what it needs again.
        """
        self._close_clients()
        self.wire_proxies.close()
        with self._demo_lock:
            if self._demo is not None:
                self._demo.stop()
                self._demo = None

    def _close_clients(self) -> None:
        from . import worker

        if not len(self.clients):
            return
        pool, self.clients = self.clients, ClientPool(self.clients.limit)
        future = worker.submit(pool.aclose())
        if threading.current_thread().name != "mmsp-notebook-worker":
            try:
                future.result(timeout=5)
            except Exception:
                pass

    def stop_demo(self) -> None:
        """Stop the demo model server and the wire proxies (the same as :meth:`close`)."""
        self.close()

    # ---------------------------------------------------------------- conversations
    def conversation(self, name: str | None) -> Conversation:
        name = name or "default"
        if name not in self.conversations:
            self.conversations[name] = Conversation(name)
        return self.conversations[name]

    def make_client(self, model: str, client_type: str | None, base_url: str | None, api_key: str | None) -> Any:
        """A new ``mmsp.AutoLLMClient`` for the endpoint; demo models without a base URL go to the demo server."""
        import mmsp

        if is_demo_model(model) and not base_url:
            return self.demo_server().client(model, client_type=client_type or "mmsp")
        return mmsp.AutoLLMClient(model=model, api_key=api_key, base_url=base_url, client_type=client_type)

    async def lease_client(self, model: str, client_type: str | None, base_url: str | None,
                           api_key_env: str | None) -> Lease:
        """The shared client of this endpoint, held until the lease is released.

        Call it on the worker loop. The key is read from the environment variable ``api_key_env``
        names (never passed on a command line); without one, mmsp's own variables apply. The
        endpoint is the model, client type, base URL (the demo server's for demo models), key
        variable and a digest of the key's value.
        """
        api_key = api_key_from_env(api_key_env)
        where = base_url
        if is_demo_model(model) and not base_url:
            where = "demo:" + (await asyncio.to_thread(self.demo_server)).base_url
        key = (model, client_type, where, api_key_env, key_digest(api_key))
        if key not in self.clients:  # a provider's SDK takes seconds to import: not on the loop, which serves every turn
            await asyncio.to_thread(import_client_class, model, client_type, base_url)
        return await self.clients.lease(key, lambda: self.make_client(model, client_type, base_url, api_key))

    def trace_id(self, conv: Conversation) -> str:
        """``<notebook>/<chat>`` (``<chat>~<k>`` after a fresh start): one trace per conversation.

        mmsp's Tracer rewrites the conversation's one file after each turn, and the timing sidecar
        numbers the turns (its ``turn``), so a conversation's traces cost what it holds, once. A name
        with other characters than letters, digits, ``_`` and ``-`` has them replaced and a short
        hash of it added (``a b`` → ``a_b-<hash>``), so two names never share a trace; one longer
        than 200 characters (a comparison's long model name) is cut there with the hash added, so
        each part stays a file name mmsp's Tracer can write.
        """
        def clean(part: str) -> str:
            tidy = re.sub(r"[^A-Za-z0-9_\-]+", "_", part).strip("_")[:200].strip("_") or "x"
            return tidy if tidy == part else f"{tidy}-{hashlib.sha1(part.encode()).hexdigest()[:6]}"

        chat = clean(conv.name) + (f"~{conv.generation}" if conv.generation > 1 else "")
        return f"{clean(self.notebook)}/{chat}"


_session: Session | None = None
_session_lock = threading.Lock()


def session() -> Session:
    """The session of this process."""
    global _session
    with _session_lock:
        if _session is None:
            _session = Session()
        return _session


Callback = Callable[[dict[str, Any]], None]
