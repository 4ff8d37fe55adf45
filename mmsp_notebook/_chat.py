"""The chat widget: a multi-turn conversation in a cell, streamed with the live view's renderer."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from typing import Any, Callable, Sequence

import anywidget
import traitlets

from . import _worker
from ._api import finish_turn, launch, usage_frame, user_message
from ._engine import TurnRun
from ._errors import MMSPNotebookError, OptionError
from ._live import UPDATES_PER_SECOND
from ._redact import redact
from ._session import THINKING_LEVELS, session
from ._state import GROWING_FIELD
from ._turn import Turn, error_hint
from ._view import OpsTracker, view_model
from ._widget import STATIC

__all__ = ["Chat"]

_counter = 0


def _next_name() -> str:
    global _counter
    _counter += 1
    return f"chat-{_counter}"


class Chat(anywidget.AnyWidget):
    """A chat in a cell: type, watch thinking, text, tool calls, images and audio stream, press Stop.

    Args:
        model: The model (default ``demo``, served offline by the embedded demo server).
        tools: Python callables offered as tools (same tool loop as ``%%mmsp --tools``).
        system: System prompt. thinking: Thinking level. max_tokens, temperature: as in ``%%mmsp``.
        models: The models the picker offers (default: the demo models plus ``model``).
        client_type, base_url, api_key_env: The endpoint, as in ``%%mmsp``.
        name: The conversation's name (its trace ids are ``<notebook>/<name>/turn_<n>``).
        trace: Trace every turn (mmsp trace + timing sidecar).
        wire: Send every turn through the recording wire proxy: each turn's ``turn.wire`` holds the
            raw SSE frames next to their UniEvents, and :meth:`send` shows them below the cell.
    """

    _esm = STATIC / "chat.js"
    _css = STATIC / "widget.css"

    transcript = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    models = traitlets.List(traitlets.Unicode()).tag(sync=True)
    model = traitlets.Unicode("demo").tag(sync=True)
    thinking = traitlets.Unicode("").tag(sync=True)
    thinking_levels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        model: str = "demo",
        *,
        tools: Sequence[Callable[..., Any]] = (),
        system: str | None = None,
        thinking: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        models: Sequence[str] | None = None,
        client_type: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_steps: int | None = None,
        name: str | None = None,
        trace: bool = True,
        wire: bool = False,
        **kwargs: Any,
    ) -> None:
        if thinking is not None and thinking not in THINKING_LEVELS:
            raise OptionError(f"thinking takes one of {', '.join(THINKING_LEVELS)}, not {thinking!r}")
        if not isinstance(model, str) or not model.strip():
            raise OptionError("Chat needs a model id (e.g. 'demo', or one of %mmsp models)")
        choices = list(models) if models else ["demo", "demo-embed"]
        if model not in choices:
            choices.insert(0, model)
        super().__init__(models=choices, model=model, thinking=thinking or "",
                         thinking_levels=["", *THINKING_LEVELS], **kwargs)
        self._tools = list(tools)
        self._options = {"system": system, "max_tokens": max_tokens, "temperature": temperature,
                         "client_type": client_type, "base_url": base_url, "api_key_env": api_key_env,
                         "max_steps": max_steps, "wire": wire}
        self._trace = trace
        self._name = name or _next_name()
        self._run: TurnRun | None = None
        self._live_index: int | None = None
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._last_prompt: tuple[str, list[str]] | None = None
        self.message_bytes = 0  # bytes of custom messages sent, for measurement
        self.message_count = 0
        self.on_msg(self._on_front_end_msg)

    # ---------------------------------------------------------------- Python API
    @property
    def name(self) -> str:
        return self._name

    @property
    def conversation(self) -> Any:
        return session().conversation(self._name)

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation as UniMessages (what the next turn sends before its own message)."""
        return self.conversation.history()

    @history.setter
    def history(self, messages: list[dict[str, Any]]) -> None:
        """Replace the conversation with UniMessages: checked whole first, so a bad value changes nothing."""
        if self.busy:
            raise MMSPNotebookError("a turn is streaming: stop it before replacing the history")
        messages = _checked_history(messages)
        try:
            transcript = _transcript_of(messages)
        except Exception as exc:  # e.g. a .done item its own content contradicts
            raise OptionError(f"history: {type(exc).__name__}: {exc}") from None
        conv = self.conversation
        conv.pending_history = list(messages)
        if conv.client is not None:
            conv.client.set_history(list(messages))
            conv.pending_history = None
        self.transcript = transcript

    @property
    def turns(self) -> Any:
        """A DataFrame of this chat's turns, like ``%mmsp usage``."""
        return usage_frame(self.conversation.turns)

    def on_event(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call ``callback(event)`` with every UniEvent of every later turn (on the worker thread)."""
        self._listeners.append(callback)

    def send(self, text: str, images: Sequence[Any] = ()) -> Turn:
        """Send a message and wait for the turn (KeyboardInterrupt stops it); returns the turn."""
        future = _worker.submit(self._start(text, list(images)))
        run = future.result()
        try:
            while not run.shown.wait(0.05):
                pass
        except KeyboardInterrupt:
            self.stop()
            run.shown.wait(3)
        if self._options.get("wire"):
            from ._live import in_kernel
            from ._wire import show_wire

            show_wire(run.turn, in_kernel())
        return finish_turn(run.turn)

    async def asend(self, text: str, images: Sequence[Any] = ()) -> Turn:
        """Send a message from async code; returns the turn when it ends."""
        run = await asyncio.wrap_future(_worker.submit(self._start(text, list(images))))
        try:
            while not run.shown.is_set():
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            self.stop()
            raise
        return finish_turn(run.turn)

    def stop(self) -> None:
        """Stop the streaming turn: the upstream request is aborted, the partial turn kept, nothing recorded."""
        run = self._run
        if run is not None:
            run.abort("stopped by the user")

    def new_chat(self) -> None:
        """Forget the conversation and start a fresh one."""
        self.stop()
        _worker.submit(self._new_chat())

    # ---------------------------------------------------------------- worker side
    def _send_msg(self, content: dict[str, Any]) -> None:
        self.message_bytes += len(json.dumps(content, separators=(",", ":")))
        self.message_count += 1
        # Widget.send (custom message); Chat.send is the chat's own "send a message"
        anywidget.AnyWidget.send(self, content)

    async def _new_chat(self) -> None:
        while self._run is not None and not self._run.shown.is_set():
            await asyncio.sleep(0.02)
        self.conversation.reset()
        self.transcript = []
        self.error = ""

    async def _start(self, text: str, images: list[Any]) -> TurnRun:
        """On the worker loop: add the user message, launch the turn, pump its ops to the front end."""
        if self._run is not None and not self._run.shown.is_set():
            raise MMSPNotebookError("a turn is already streaming in this chat: stop it or wait for it")
        message = user_message(text, images)
        srcs = [item["image_url"] for item in message["content_items"] if item["type"] == "image_url.done"]
        self._last_prompt = (text, srcs)
        self.error = ""
        self.transcript = [*self.transcript, {"role": "user", "text": text, "images": srcs}]
        index = len(self.transcript)
        wake = asyncio.Event()
        run, future = launch(
            message,
            model=self.model,
            thinking=self.thinking or None,
            tools=self._tools,
            chat=self._name,
            trace=None if self._trace else False,
            listeners=list(self._listeners),
            **self._options,
        )
        run.listeners.append(lambda _e: wake.set())
        run.shown = threading.Event()  # set once the finished turn is in the transcript
        self._run = run
        self._live_index = index
        self.busy = True
        asyncio.ensure_future(self._pump(run, index, wake))
        return run

    async def _pump(self, run: TurnRun, index: int, wake: asyncio.Event) -> None:
        tracker = OpsTracker()
        interval = 1 / UPDATES_PER_SECOND
        last = -math.inf
        turn = run.turn
        try:
            while not run.finished.is_set():
                try:
                    await asyncio.wait_for(wake.wait(), timeout=0.05)
                except asyncio.TimeoutError:
                    pass
                wake.clear()
                wait_left = last + interval - time.monotonic()
                if wait_left > 0:
                    await asyncio.sleep(wait_left)
                ops = tracker.ops(turn)
                if ops:
                    self._send_msg({"type": "ops", "turn": index, "ops": ops})
                    last = time.monotonic()
            ops = tracker.ops(turn)
            if ops:
                self._send_msg({"type": "ops", "turn": index, "ops": ops})
        finally:
            vm = view_model(turn)
            self.transcript = [*self.transcript[:index], {"role": "assistant", "turn": vm}]
            if turn.status in ("error", "incomplete"):
                exc = turn.error
                said = (turn.error_message or "").rstrip().rstrip(".")
                self.error = f"{type(exc).__name__}: {said}. {error_hint(exc, turn.api_key_env, turn.client_type)}".strip()
            self._live_index = None
            self.busy = False
            run.shown.set()

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # comm messages may arrive on any thread: hand the work to the worker loop
        if isinstance(content, dict):
            _worker.submit(self._handle(content))

    async def _handle(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        try:
            if kind == "hello":
                live = None
                if self._run is not None and self._live_index is not None and not self._run.finished.is_set():
                    live = view_model(self._run.turn)
                self._send_msg({"type": "chat_snapshot", "chat": {"transcript": self.transcript, "live": live}})
            elif kind == "send":
                text = str(content.get("text") or "")
                images = [src for src in content.get("images") or [] if isinstance(src, str)]
                await self._start(text, images)
            elif kind == "stop":
                self.stop()
            elif kind == "new_chat":
                self.stop()
                await self._new_chat()
            elif kind == "retry":
                await self._retry()
        except Exception as exc:  # shown in the banner; the widget stays usable
            self.error = redact(f"{type(exc).__name__}: {exc}")

    async def _retry(self) -> None:
        if self._last_prompt is None or self.busy:
            return
        text, srcs = self._last_prompt
        entries = list(self.transcript)
        # drop the failed turn and its user message; the retry sends the message again
        if entries and entries[-1].get("role") == "assistant":
            entries.pop()
        if entries and entries[-1].get("role") == "user":
            entries.pop()
        self.transcript = entries
        await self._start(text, srcs)


def _checked_history(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as a list of UniMessages, or an OptionError saying what is wrong."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise OptionError(f"history takes a list of UniMessages (dicts with role and content_items), "
                          f"not {type(messages).__name__}")
    out = list(messages)
    for n, message in enumerate(out):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise OptionError(f"history[{n}]: a UniMessage is a dict with role 'user' or 'assistant'")
        items = message.get("content_items")
        if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("type"), str)
                                                  and i["type"].endswith(".done") for i in items):
            raise OptionError(f"history[{n}]: content_items must be a list of items, each a dict whose "
                              "'type' ends in .done")
    return out


def _transcript_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript for the front end from UniMessages (a history set from Python)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        items = message.get("content_items", [])
        if message.get("role") == "user":
            if items and all(item.get("type") == "tool_result.done" for item in items):
                continue
            text = "".join(item.get("text", "") for item in items if item.get("type") == "text.done")
            srcs = [item["image_url"] for item in items if item.get("type") == "image_url.done"]
            out.append({"role": "user", "text": text, "images": srcs})
        else:
            turn = Turn(None)
            state = turn.new_step()
            for item in items:
                kind = item["type"].rsplit(".", 1)[0]
                field = GROWING_FIELD.get(kind)
                if field is None:
                    continue
                delta = dict(item, type=f"{kind}.delta")
                if kind == "tool_call":
                    delta["arguments"] = json.dumps(item.get("arguments") or {})
                state.feed(_event(delta))
                state.feed(_event(item))
            state.feed({"role": "assistant", "event_type": "stop", "content_items": [],
                        "usage_metadata": message.get("usage_metadata") or {}, "finish_reason":
                        message.get("finish_reason") or "stop"})
            out.append({"role": "assistant", "turn": view_model(turn)})
    return out


def _event(item: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None}
