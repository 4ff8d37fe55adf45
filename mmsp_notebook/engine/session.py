"""Per-kernel state: settings, named conversations (each an mmsp client with its history), loopback servers.

Nothing here imports IPython. The magic, ``ask``/``aask`` and the chat widget all go through
:class:`Session` so a conversation, its trace ids and its usage table are the same whichever way a
turn was started.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from .._errors import DemoServerError, OptionError
from ..core.redact import register_secret_env
from .options import Settings
from ..wire.proxies import WireProxies

__all__ = ["Conversation", "Session", "session", "is_demo_model", "image_item", "api_key_from_env", "LocalServer",
           "provide_local_server"]

DEMO_BASES = ("demo", "demo-embed")


def api_key_from_env(name: str | None) -> str | None:
    """The key the variable ``name`` holds (``--api-key-env NAME``), redacted from then on; ``None`` without a name."""
    if not name:
        return None
    register_secret_env(name)
    key = os.environ.get(name)
    if not key:
        raise OptionError(f"the environment variable {name} is not set (it should hold the API key)")
    return key


def is_demo_model(model: str) -> bool:
    return model.split("+", 1)[0] in DEMO_BASES


class LocalServer(Protocol):
    """What a session needs of the local server of the demo models (``mmsp_notebook.demo.DemoServer``)."""

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
    """An ``image_url.done`` item for a PIL image, PNG/JPEG/GIF/WebP bytes or a path to one; else ``None``."""
    data: bytes | None = None
    mime = None
    if hasattr(value, "save") and hasattr(value, "mode") and hasattr(value, "size"):  # a PIL image
        import io

        buf = io.BytesIO()
        try:
            value.save(buf, format="PNG")
        except (OSError, ValueError):  # a mode PNG cannot hold (CMYK, YCbCr, float...): sent as RGB(A)
            buf = io.BytesIO()
            value.convert("RGBA" if "A" in value.mode else "RGB").save(buf, format="PNG")
        data, mime = buf.getvalue(), "image/png"
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
        mime = _sniff(data)
        if mime is None:
            return None
    return {"type": "image_url.done", "image_url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}


def _sniff(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class Conversation:
    """A named conversation: an mmsp client (created on the worker loop) holding the history."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.client: Any = None
        self.endpoint: tuple[Any, ...] | None = None
        self.turns: list[Any] = []
        self.generation = 1  # bumped by --new, so trace ids of a fresh start do not collide
        self.pending_history: list[dict[str, Any]] | None = None  # set before the client exists

    def history(self) -> list[dict[str, Any]]:
        if self.client is None:
            return list(self.pending_history or [])
        return self.client.get_history()

    def reset(self) -> None:
        if self.client is not None:
            self.client.clear_history()
        self.pending_history = None
        self.generation += 1


class Session:
    """Everything a kernel keeps between cells.

    Args:
        local_server: Starts the server of the demo models (``local_server(instant)`` returns it
            running); by default what :func:`provide_local_server` named.
    """

    def __init__(self, local_server: LocalServerFactory | None = None) -> None:
        self.settings = Settings()
        self.conversations: dict[str, Conversation] = {}
        self.turns: list[Any] = []  # every turn of this kernel, for %mmsp usage
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
            return self._demo

    def close(self) -> None:
        """Stop the loopback servers this session started: its wire proxies, then the demo model server.

        The session stays usable: a later turn starts what it needs again.
        """
        self.wire_proxies.close()
        with self._demo_lock:
            if self._demo is not None:
                self._demo.stop()
                self._demo = None

    def stop_demo(self) -> None:
        """Stop the demo model server and the wire proxies (the same as :meth:`close`)."""
        self.close()

    # ---------------------------------------------------------------- conversations
    def conversation(self, name: str | None) -> Conversation:
        name = name or "default"
        if name not in self.conversations:
            self.conversations[name] = Conversation(name)
        return self.conversations[name]

    def make_client(self, model: str, client_type: str | None, base_url: str | None, api_key_env: str | None) -> Any:
        """An ``mmsp.AutoLLMClient`` for the endpoint; demo models without a base URL go to the demo server.

        Call it on the worker loop. The key is read from the environment variable ``api_key_env``
        names (never passed on a command line); without one, mmsp's own variables apply.
        """
        import mmsp

        if is_demo_model(model) and not base_url:
            return self.demo_server().client(model, client_type=client_type or "mmsp")
        api_key = api_key_from_env(api_key_env)
        return mmsp.AutoLLMClient(model=model, api_key=api_key, base_url=base_url, client_type=client_type)

    async def ensure_client(self, conv: Conversation, model: str, client_type: str | None, base_url: str | None,
                            api_key_env: str | None) -> Any:
        """The conversation's client for this endpoint; a new endpoint keeps the history."""
        endpoint = (model, client_type, base_url, api_key_env)
        if conv.client is None or conv.endpoint != endpoint:
            history = conv.history()
            client = self.make_client(model, client_type, base_url, api_key_env)
            if history:
                client.set_history(history)
            conv.client, conv.endpoint, conv.pending_history = client, endpoint, None
        return conv.client

    def trace_id(self, conv: Conversation) -> str:
        """``<notebook>/<chat>/turn_<n>`` (``<chat>~<k>`` after a fresh start)."""
        def clean(part: str) -> str:
            return re.sub(r"[^A-Za-z0-9_\-]+", "_", part).strip("_") or "x"

        chat = clean(conv.name) + (f"~{conv.generation}" if conv.generation > 1 else "")
        return f"{clean(self.notebook)}/{chat}/turn_{len(conv.turns):03d}"


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
