"""The chat widget: a multi-turn conversation in a cell, streamed with the live view's renderer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anywidget
import traitlets

from .._errors import BusyError, OptionError, OptionTypeError
from ..core.flags import check_flag
from ..core.redact import redact
from ..core.run import TurnRun
from ..core.turn import Turn
from ..engine import worker as _worker
from ..engine.launch import check_chat_name, check_trace_id, launch, refuse_unknown, user_message
from ..engine.messages import check_history
from ..engine.options import THINKING_LEVELS, TurnOptions
from ..engine.session import session
from ..engine.tools import ToolSet
from ..views.live import LiveView, LoopWatch, adrive, await_turn
from ..views.model import OpsTracker, view_model
from ..views.text import banner_line
from ..views.widget import STATIC, MarkdownWidget
from .finish import finish_turn
from .frames import usage_frame
from .history import transcript_of

__all__ = ["Chat"]

_counter = 0

#: The models the picker offers when none are given (chat models only: no embedding model).
DEFAULT_MODELS = ("demo",)

#: Seconds a reply in flight may go without a message to the front end before it sends a heartbeat
#: (js/src/chat.js cuts a reply after 10 s without a word from the kernel).
HEARTBEAT = 2.0

#: How a turn ends that Retry sends again (js/src/chat.js shows its Retry button on the last answer then).
_RETRYABLE = ("error", "incomplete", "cancelled")

#: The traits a front end sets (its pickers), each with the trait that holds its choices; every
#: other trait is the kernel's (see Chat.set_state).
_PICKERS = {"model": "models", "thinking": "thinking_levels"}


def _clip(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a front end's value may be of any size)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _next_name() -> str:
    global _counter
    _counter += 1
    return f"chat-{_counter}"


class Chat(MarkdownWidget):
    """A chat in a cell: type, watch thinking, text, tool calls, images and audio stream, press Stop.

    An option not given takes the kernel's default, as ``%%mmsp`` and ``ask`` do (``%mmsp config``,
    IPython's configuration, ``MMSP_NOTEBOOK_MODEL``); an option given always wins. The model and
    thinking pickers start at the defaults of the moment the chat is made; the other options take
    the kernel's defaults at each turn.

    Args:
        model: The model or alias (default: the kernel's default model, ``demo`` when none is set:
            served offline by the embedded demo server).
        tools: Python callables offered as tools (same tool loop as ``%%mmsp --tools``).
        system: System prompt. thinking: Thinking level (default: the model alias's, else the
            kernel's, else the model's own). max_tokens, temperature: as in ``%%mmsp``.
        models: The models the picker offers (default: the demo models plus ``model``).
        client_type, base_url, api_key_env: The endpoint, as in ``%%mmsp``.
        name: The conversation's name (its trace id is ``<notebook>/<name>`` unless ``trace`` names one).
        history: UniMessages the conversation starts from (as :attr:`history` takes them).
        trace: Trace every turn (mmsp trace + timing sidecar): ``True`` under the conversation's
            trace id, a string to use that trace id (checked as ``%%mmsp --trace ID`` checks it:
            parts of letters, digits, ``_ - ~`` separated by ``/``), ``False`` for none (default:
            the kernel's setting, ``%mmsp config trace=...``, on unless turned off).
        wire: Send every turn through the recording wire proxy: each turn's ``turn.wire`` holds the
            raw SSE frames next to their UniEvents, and :meth:`send` shows them below the cell.
    """

    _esm = STATIC / "chat.js"
    _css = STATIC / "widget.css"

    #: The conversation. Once a view has said hello, it is sent whole only to a front end that opens
    #: the widget (its state) or in a snapshot; each change goes as a ``transcript`` message carrying
    #: the entries that changed (:meth:`_send_transcript`), so a turn costs the same bytes early and
    #: late in a long chat.
    transcript = traitlets.List(traitlets.Dict()).tag(sync=True)
    busy = traitlets.Bool(False).tag(sync=True)
    models = traitlets.List(traitlets.Unicode()).tag(sync=True)
    model = traitlets.Unicode("demo").tag(sync=True)
    thinking = traitlets.Unicode("").tag(sync=True)
    thinking_levels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        model: str | None = None,
        *,
        tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]] = (),
        system: str | None = None,
        thinking: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        models: Sequence[str] | None = None,
        client_type: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_steps: int | None = None,
        timeout: float | str | None = None,
        name: str | None = None,
        trace: bool | str | None = None,
        wire: bool = False,
        history: Sequence[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        # a mistyped option is refused, not handed to the widget (which would only warn it was unused)
        own = [n for n in inspect.signature(Chat.__init__).parameters if n not in ("self", "kwargs")]
        refuse_unknown("Chat", [k for k in kwargs if not self.class_traits().get(k)], own,
                       more=" and the widget's traits (layout, ...)")
        # checked as every option is (a bad value is refused here, not at the first message)
        given = TurnOptions(model=model if isinstance(model, str) and model.strip() else None,
                            client_type=client_type, base_url=base_url, api_key_env=api_key_env, system=system,
                            thinking=thinking, max_tokens=max_tokens, temperature=temperature, max_steps=max_steps,
                            timeout=timeout)
        if model is not None and given.model is None:
            raise OptionError("Chat needs a model id (e.g. 'demo', or one of %mmsp models)")
        if name is not None:
            check_chat_name(name, "name")
        if isinstance(trace, str):
            check_trace_id(trace)  # (an empty one too) before anything is made
        elif trace is not None and not isinstance(trace, bool):
            raise OptionTypeError(f"trace takes True, False or a trace id (e.g. 'nb/x'), not {trace!r}")
        check_flag("wire", wire)
        if models is not None:
            # (a string is a sequence of its letters: the picker would offer 'd', 'e', 'm', 'o')
            offered = None if isinstance(models, str) or not isinstance(models, Iterable) else list(models)
            if offered is None or not all(isinstance(m, str) and m.strip() for m in offered):
                raise OptionTypeError("models takes a list of model ids (e.g. ['demo', 'demo+nothink']), not "
                                      + redact(_clip(models)))
            models = offered
        # the pickers start where a turn of ask() would: the kernel's default model (its name: an alias
        # is resolved at each turn, as the picker's other choices are) and the thinking level that
        # model's turn would take (the alias's, else the kernel's); the other options not given are
        # the kernel's at each turn (launch resolves them)
        settings = session().settings
        model = given.model or settings.model
        thinking = dataclasses.replace(given, model=model).resolve(settings).thinking
        toolset = tools if isinstance(tools, ToolSet) else ToolSet(tools)  # (a bad tool is refused here too)
        choices = list(models) if models else list(DEFAULT_MODELS)
        if model not in choices:
            choices.insert(0, model)
        self._refused_pick = ""  # the error line of the last pick refused (see _pick)
        self._heard = False  # whether a view has said hello (its model keeps the transcript from then on)
        super().__init__(models=choices, model=model, thinking=thinking or "",
                         thinking_levels=["", *THINKING_LEVELS], **kwargs)
        self._tools = toolset
        self._options = {"system": system, "max_tokens": max_tokens, "temperature": temperature,
                         "client_type": client_type, "base_url": base_url, "api_key_env": api_key_env,
                         "max_steps": max_steps, "timeout": timeout, "wire": wire}
        self._trace = trace
        self._name = name or _next_name()
        self._run: TurnRun | None = None
        self._shown: concurrent.futures.Future[Turn] | None = None  # the turn in flight, once in the transcript
        self._follow_task: asyncio.Task[Turn] | None = None
        self._live: _ChatLive | None = None  # the view of the turn in flight, until its answer is in the transcript
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self._last_prompt: tuple[str, list[str]] | None = None
        self._answered: BaseException | None = None  # why the last start failed once its message was in the transcript
        self.message_bytes = 0  # bytes of custom messages sent, for measurement
        self.message_count = 0
        self._display_id = f"mmsp-chat-{uuid.uuid4().hex}"
        self._saved_markup: dict[int, tuple[Any, str]] = {}  # (see render_transcript_html)
        self._displayed = False
        self.on_msg(self._on_front_end_msg)
        self.observe(self._send_transcript, names="transcript")
        self.observe(self._save_view, names="transcript")
        if history is not None:
            self.history = history

    # ---------------------------------------------------------------- the transcript on the comm
    def _should_send_property(self, key: str, value: Any) -> bool:
        # (ipywidgets asks this on every change of a synced trait) once a view listens, the
        # transcript's changes go as messages; until then as state, which no front end drops (a
        # message sent before the page has loaded the widget's code is lost) and which a notebook
        # run with no front end (nbclient) saves
        if key == "transcript" and self._heard:
            return False
        return bool(super()._should_send_property(key, value))

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """A state from a front end (or a saved widget state): only the pickers' traits are taken.

        ``model`` and ``thinking`` are the user's choice, taken when they are one of ``models`` and
        ``thinking_levels`` (else refused in the error line, see :meth:`_pick`). Every other trait is
        the kernel's (the transcript, ``busy``, ``error``, the choices offered, the widget's code):
        a front end's value is ignored, and the kernel's is sent back so that the front end shows it.
        """
        taken = {name: value for name, value in sync_data.items()
                 if name in _PICKERS and self._pick(name, value, resend=False)}
        if taken:
            super().set_state(taken)
        kept = [name for name in sync_data if name not in taken and name in self.keys]
        if kept:
            self.send_state(key=kept)

    def _pick(self, name: str, value: Any, *, resend: bool = True) -> bool:
        """Whether a front end's ``model`` or ``thinking`` is one the chat offers.

        One it does not offer is refused in the error line, and the trait keeps its value (sent back
        to the front end when ``resend``); a refusal said here is cleared by the next good pick.
        """
        offered = getattr(self, _PICKERS[name])
        if isinstance(value, str) and value in offered:
            if self.error and self.error == self._refused_pick:
                self.error = ""
            return True
        def said(choice: str) -> str:
            return repr(choice) if choice else "the model's default"

        what = "model" if name == "model" else "thinking level"
        self._refused_pick = redact(
            f"{what} {_clip(value)} is not one this chat offers ({', '.join(map(said, offered)) or 'none'}); "
            "pick one of them" + (", or offer it with Chat(models=[...])" if name == "model" else "")
            + f": the chat keeps {said(getattr(self, name))}")
        self.error = self._refused_pick
        if resend:
            self.send_state(key=name)
        return False

    def _send_transcript(self, change: Any) -> None:
        """Tell the front end what changed: the first ``at`` entries stay, ``entries`` follow them.

        Entries are compared by identity (an appended transcript keeps its earlier entries), so a
        turn sends its own entries only. js/src/chat.js sets the result in its model's state, where
        every view reads it and a saved notebook keeps it.
        """
        if not self._heard:
            return  # (sent as state)
        old = change["old"] if isinstance(change["old"], list) else []
        new = change["new"]
        at = 0
        while at < len(old) and at < len(new) and old[at] is new[at]:
            at += 1
        if at == len(old) == len(new):
            return
        self._send_msg({"type": "transcript", "at": at, "entries": new[at:]})

    # ---------------------------------------------------------------- in a notebook
    def _ipython_display_(self, **kwargs: Any) -> None:
        """Two outputs: the live widget, then the conversation as static HTML (its saved view).

        The static view is what a saved notebook shows with no widget state (GitHub, nbviewer,
        nbconvert, a reopened notebook on a new kernel: the widget's output then hides); while the
        widget is live it hides itself. It is updated in place whenever the transcript changes.
        """
        from IPython.display import display

        bundle = self._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        display({**(data or {}), "text/plain": f"Chat {self._name} (its conversation is the next output)"}, raw=True)
        display(self._saved_bundle(), raw=True, display_id=self._display_id)
        self._displayed = True

    def _saved_bundle(self) -> dict[str, str]:
        from ..views.html import render_transcript_html
        from ..views.text import render_transcript_text

        return {"text/html": render_transcript_html(self.transcript, self._saved_markup),
                "text/plain": render_transcript_text(self.transcript)}

    def _save_view(self, _change: Any = None) -> None:
        transcript = self.transcript
        if not self._displayed or (transcript and transcript[-1].get("role") == "user"):
            return  # saved once the answer is in (a message alone would send the whole conversation again)
        try:
            from IPython.display import update_display

            update_display(self._saved_bundle(), raw=True, display_id=self._display_id)
        except Exception as exc:  # the live widget goes on; only the saved view is behind
            self.error = redact(f"the saved view of this chat could not be updated: {type(exc).__name__}: {exc}")

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
        if self._streaming:
            raise BusyError("a turn is streaming: stop it before replacing the history")
        messages = check_history(messages)
        try:
            transcript = transcript_of(messages)
        except Exception as exc:  # e.g. a .done item its own content contradicts
            raise OptionError(f"history: {type(exc).__name__}: {exc}") from None
        self.conversation.set_history(messages)
        self.transcript = transcript

    @property
    def turns(self) -> Any:
        """A DataFrame of this chat's turns, like ``%mmsp usage``."""
        return usage_frame(session().usage.rows(chat=self._name))

    def on_event(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call ``callback(event)`` with every UniEvent of every later turn (on the worker thread)."""
        self._listeners.append(callback)

    def send(self, text: str, images: Sequence[Any] = (), *, strict: bool | None = None) -> Turn:
        """Send a message and wait for the turn; returns the turn. A KeyboardInterrupt stops the turn,
        kept and drawn cancelled, then goes on up (with the turn as ``.turn``), as from ``ask``;
        ``strict`` defaults to the kernel's setting, as for ``%%mmsp`` and ``ask``."""
        ticket = _Start()
        try:  # (an interrupt as the start is submitted, as it is awaited: the same)
            ticket.started = _worker.submit(self._start(text, list(images), ticket))
            run, future, shown = ticket.started.result()
        except KeyboardInterrupt:  # (the worker loop is blocked, or launching) the turn is not started, or is stopped
            ticket.drop()
            raise
        turn = self._wait(run, future, shown)
        if self._options.get("wire"):
            from ..views.live import in_kernel
            from ..views.wire import show_wire

            show_wire(turn, in_kernel())
        return finish_turn(turn, strict, interrupted=run.interrupted)

    def _wait(self, run: TurnRun, future: concurrent.futures.Future[Turn],
              shown: concurrent.futures.Future[Turn]) -> Turn:
        """The turn of :meth:`send` once its view has drawn its end; a KeyboardInterrupt stops it.

        While the worker loop is blocked (an async tool that does not await), the turn cannot end
        there: the watch the magic and ``aask`` keep on the loop
        (:class:`~mmsp_notebook.views.live.LoopWatch`) ends it here, at once on an interrupt
        (``cancelled``), else at its idle timeout (``error``), with a
        :class:`~mmsp_notebook.LoopBlockedError`; the transcript shows it once the loop turns again.
        """
        watch = LoopWatch(run, _worker.stalled)
        interrupted, deadline = False, None
        while True:
            try:
                if watch.due(interrupted):
                    watch.settle(future, run.finished.is_set(), interrupted)  # (one that ended keeps its end)
                    return run.turn
                try:
                    turn = shown.result(timeout=0.1)
                except concurrent.futures.TimeoutError:
                    if deadline is not None and time.monotonic() > deadline:
                        raise
                    continue
                watch.settle(future, True, interrupted)  # (a block that passed is no longer said)
                return turn
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = run.interrupted = True  # (send raises it once the turn is finished)
                deadline = time.monotonic() + 5
                self.stop()

    async def asend(self, text: str, images: Sequence[Any] = (), *, strict: bool | None = None) -> Turn:
        """Send a message from async code; returns the turn when it ends (cancelling the await stops it).

        As for :meth:`send`: while an ``async def`` tool blocks the worker loop, the turn ends once
        the block has lasted its ``timeout`` (at once when the await is cancelled), with a
        :class:`~mmsp_notebook.LoopBlockedError` that names the tool; what arrived is kept.
        """
        ticket = _Start()
        try:
            ticket.started = _worker.submit(self._start(text, list(images), ticket))
            run, future, shown = await asyncio.wrap_future(ticket.started)
        except BaseException:  # cancelled (a kernel interrupt) as the turn started: it is not started, or is stopped
            ticket.drop()
            raise
        turn = await await_turn(run, future, _worker.stalled, shown=shown)
        return finish_turn(turn, strict)

    @property
    def _streaming(self) -> bool:
        return self._shown is not None and not self._shown.done()

    def stop(self) -> None:
        """Stop the streaming turn: the upstream request is aborted, the partial turn kept, nothing recorded.

        It returns at once; a message sent next starts once the stopped turn has wound down.
        """
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
        if self._shown is not None:
            await asyncio.wrap_future(self._shown)
        self.conversation.reset()
        self.transcript = []
        self.error = ""

    async def _start(self, text: str, images: list[Any], ticket: _Start | None = None,
                     ) -> tuple[TurnRun, concurrent.futures.Future[Turn], concurrent.futures.Future[Turn]]:
        """On the worker loop: add the user message, launch the turn and follow it with the pacer.

        Returns the run, the turn's future, and a future that resolves to the turn once its
        finished view is in the transcript. ``ticket``: that of :meth:`send` or :meth:`asend`,
        which may drop the start (interrupted) while it waits, or launches.
        """
        while self._streaming and self._run is not None and self._run.signal.aborted and self._shown is not None:
            await asyncio.wrap_future(self._shown)  # a stopped turn winding down: the next one follows it
        if ticket is not None and ticket.dropped:  # (its caller is gone: nothing is sent)
            raise asyncio.CancelledError
        if self._streaming:
            raise BusyError("a turn is already streaming in this chat: stop it or wait for it")
        message = user_message(text, images)
        srcs = [item["image_url"] for item in message["content_items"] if item["type"] == "image_url.done"]
        self._last_prompt = (text, srcs)
        self.error = ""
        # (shown and saved with the notebook with any key in it redacted; the model gets it as written)
        self.transcript = [*self.transcript, {"role": "user", "text": redact(text), "images": srcs}]
        index = len(self.transcript)
        try:
            run, future = launch(
                message,
                model=self.model,
                thinking=self.thinking or None,
                tools=self._tools,
                chat=self._name,
                trace=self._trace,
                listeners=list(self._listeners),
                **self._options,
            )
        except Exception as exc:  # refused before it started: a failed answer (with Retry), not a message left unanswered
            refused = Turn(message, model=self.model)
            refused.fail_before_stream(exc)
            vm = view_model(refused)
            if isinstance(exc, OptionError) and vm.get("banner"):  # (the other options were checked by Chat())
                vm["banner"]["hint"] = "Choose another model or thinking level (chat.model, chat.thinking), then Retry."
            self.transcript = [*self.transcript, {"role": "assistant", "turn": vm}]
            self._answered = exc  # (its message is answered: not handed back to the view that sent it)
            raise
        shown: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        live = _ChatLive(self, index)
        self._run, self._shown, self._live = run, shown, live
        self.busy = True
        self._follow_task = asyncio.ensure_future(self._follow(run, future, live, shown))
        if ticket is not None:
            ticket.launched(run)
        return run, future, shown

    async def _follow(self, run: TurnRun, future: concurrent.futures.Future[Turn], live: _ChatLive,
                      shown: concurrent.futures.Future[Turn]) -> Turn:
        try:
            return await adrive(run, future, live)
        finally:
            shown.set_result(run.turn)

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # comm messages may arrive on any thread: hand the work to the worker loop
        if isinstance(content, dict):
            _worker.submit(self._handle(content))

    async def _handle(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        try:
            if kind == "hello":
                self._heard = True
                live = None
                if self._run is not None and self._live is not None and self._streaming:
                    # what the views have not been sent yet goes first: the snapshot holds what they
                    # were sent, which the ops after it continue, in this view and the others
                    self._live.update(self._run.turn)
                    live = self._live.tracker.view(self._run.turn)
                self._send_msg({"type": "chat_snapshot", "chat": {"transcript": self.transcript, "live": live}})
            elif kind == "send":
                text, images = content.get("text") or "", content.get("images") or []
                # (the front end sends text and data: URLs only: nothing else is taken for a message, nor a path read)
                if not isinstance(text, str) or not isinstance(images, list) or not all(
                        isinstance(src, str) and src.startswith("data:image/") for src in images):
                    raise OptionError("a message from the chat takes text and images as data:image/... URLs: "
                                      "run the chat's cell again to reload its front end")
                await self._start(text, images)
            elif kind == "pick":  # the model and thinking pickers
                for name in _PICKERS:
                    if name in content and self._pick(name, content[name]):
                        setattr(self, name, content[name])
            elif kind == "stop":
                self.stop()
            elif kind == "new_chat":
                self.stop()
                await self._new_chat()
            elif kind == "retry":
                await self._retry()
        except Exception as exc:  # shown in the banner; the widget stays usable
            self.error = redact(f"{type(exc).__name__}: {exc}")
            if kind == "send" and exc is not self._answered:  # refused before it joined the transcript:
                sent = content.get("id")  # the view that sent it puts it back in its box
                self._send_msg({"type": "refused", "id": sent if isinstance(sent, str) else None, "error": self.error})

    async def _retry(self) -> None:
        entries = list(self.transcript)
        last = entries[-1] if entries else {}
        if (self._last_prompt is None or self._streaming or last.get("role") != "assistant"
                or last.get("turn", {}).get("status") not in _RETRYABLE):
            return  # (a retry from a view that has not caught up: the answer it would drop is in the history)
        text, srcs = self._last_prompt
        # drop the failed turn and its user message; the retry sends the message again
        entries.pop()
        if entries and entries[-1].get("role") == "user":
            entries.pop()
        self.transcript = entries
        await self._start(text, srcs)


class _Start:
    """A start of a turn by :meth:`Chat.send` or :meth:`Chat.asend`, which an interrupt may drop as
    the worker loop runs it: one not begun sends nothing; a turn it launched (lost to the caller,
    which could not stop it) is aborted, its partial answer kept as cancelled, the chat free."""

    def __init__(self) -> None:  # (started: the start on the worker loop, once submitted)
        self.dropped, self.run, self.started = False, None, None  # type: bool, TurnRun | None, concurrent.futures.Future[Any] | None

    def drop(self) -> None:
        """The caller was interrupted (any thread): stop what the start launched, or will."""
        self.dropped = True
        if self.started is not None:  # (a start waiting for a stopped turn to wind down ends there)
            self.started.cancel()
        _worker.loop().call_soon_threadsafe(self._abort)  # (after the start's step that may be launching)

    def launched(self, run: TurnRun) -> None:
        """On the worker loop, once the turn is launched."""
        self.run = run
        if self.dropped:
            self._abort()

    def _abort(self) -> None:
        if self.run is not None:
            self.run.abort("cancelled")


class _ChatLive(LiveView):
    """The chat's view of its turn in flight: ops to the front end, then the transcript entry.

    Its updates run on the worker loop (:func:`~mmsp_notebook.views.live.adrive` calls them every
    half second or so while nothing changes): when the turn has had nothing to show for
    :data:`HEARTBEAT` seconds (a silent model, a tool at work), a heartbeat tells the front end that
    the kernel is alive, also while the kernel's shell thread runs a cell and reads no message.
    """

    def __init__(self, chat: Chat, index: int) -> None:
        self.chat = chat
        self.index = index
        self.tracker = OpsTracker()
        self.said = time.monotonic()  # when the front end last got a message of this turn

    def update(self, turn: Turn) -> None:
        ops = self.tracker.ops(turn)
        now = time.monotonic()
        if ops:
            self.chat._send_msg({"type": "ops", "turn": self.index, "ops": ops})
            self.said = now
        elif now - self.said >= HEARTBEAT:
            # (not counted with the conversation's messages)
            anywidget.AnyWidget.send(self.chat, {"type": "heartbeat"})
            self.said = now

    def finish(self, turn: Turn) -> None:
        chat = self.chat
        try:
            ops = self.tracker.ops(turn, final=True)
            if ops:
                chat._send_msg({"type": "ops", "turn": self.index, "ops": ops})
        finally:
            vm = view_model(turn)
            chat.transcript = [*chat.transcript[: self.index], {"role": "assistant", "turn": vm}]
            if turn.status in ("error", "incomplete"):
                chat.error = banner_line(vm.get("banner"))  # the same words as the turn's own banner
            chat._live = None
            chat.busy = False
