"""Running a turn: stream each step through a real mmsp client, run tools, trace, record timing.

Everything here runs on the worker loop. The engine feeds every UniEvent into the step's
:class:`~mmsp_notebook.TurnState` under the turn's lock and sets ``changed`` so the main thread can
repaint; it never renders anything itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

from .._errors import IdleTimeoutError, NotAnEventStreamError
from ..core.chars import mend_surrogates
from ..core.endings import error_type
from ..core.redact import redact, redact_data, redact_exception
from ..core.run import TurnRun
from ..core.store import SidecarError, SidecarRecord, append_sidecar, save_trace, sidecar_record, to_ms
from ..core.turn import Turn
from .session import Conversation
from .tools import ToolSet

__all__ = ["TurnRun", "run_turn", "IdleTimeoutError", "watch_bytes"]  # IdleTimeoutError is defined in _errors


def _assistant_count(history: list[dict[str, Any]]) -> int:
    return sum(1 for message in history if message.get("role") == "assistant")


async def run_turn(
    run: TurnRun,
    client: Any,
    conversation: Conversation,
    message: dict[str, Any],
    config: dict[str, Any],
    tools: ToolSet | None = None,
    max_steps: int = 8,
    trace: bool = True,
) -> Turn:
    """Stream ``message`` through ``client`` with the conversation's history, running tool calls until the model stops.

    Args:
        run: The turn in flight (its turn collects the steps; ``run.idle_timeout`` bounds silence).
        client: An ``mmsp.AutoLLMClient`` created on this loop, maybe shared with other conversations:
            it is used statelessly, each request carrying the history.
        conversation: Whose history the turn continues, and records into once it completes.
        message: The user message of the turn.
        config: The UniConfig (``trace_id`` in it when traced).
        tools: The Python functions offered as tools.
        max_steps: The most model responses one turn may take.
        trace: Save the trace and write the timing sidecar.

    The conversation records the turn only when it completes, as mmsp's stateful calls record a call
    only at its stop event: a failed, cut-off or cancelled turn leaves the history as it was. Each
    step streams through mmsp's ``streaming_response`` with the history so far (what
    ``streaming_response_stateful`` sends); two turns of one conversation at once are refused with
    mmsp's ``ConcurrentCallError``. The trace is saved from here for every client type, with the
    configured keys redacted (:func:`~mmsp_notebook.core.redact.redact_data`): the client is given
    the config without ``trace_id``, so mmsp writes no copy of its own.
    """
    from mmsp import ConcurrentCallError

    turn = run.turn
    if conversation.streaming:
        turn.fail_before_stream(ConcurrentCallError(f"conversation {conversation.name!r}"))
        run.notify()
        run.finished.set()
        return turn
    conversation.streaming = True
    trace_id = config.get("trace_id") if trace else None
    client_config = {key: value for key, value in config.items() if key != "trace_id"}
    history = conversation.messages()
    next_message = message
    if history and history[-1].get("role") == "user":
        # the previous turn stopped with tool calls unanswered and recorded why (see below): that
        # message opens this one, so every provider sees each call answered and one user turn
        next_message = {**message, "content_items": list(history[-1].get("content_items", []))
                        + list(message.get("content_items", []))}
        history = history[:-1]
    try:
        for step_no in range(max_steps):
            state = turn.new_step()
            turn_index = _assistant_count(history)
            request = history + [next_message]
            with turn.lock:
                state.mark_request_sent()
            run.notify()
            try:
                await _consume(run, client, request, client_config, state)
            except (Exception, asyncio.CancelledError) as exc:
                with turn.lock:
                    state.fail(redact_exception(exc) or exc)
                if isinstance(exc, asyncio.CancelledError) and not run.signal.aborted:
                    raise
            finally:
                run.waiting_since = None
                run.notify()
                if trace_id:  # (off the loop: a long turn's record is a second of work that would stall every stream)
                    await _off_loop(_write_sidecar, turn, state, trace_id, turn_index, len(request))
            if state.status != "complete":
                break
            # (surrogates a model sent mended: a raw half pair would fail every later request's body)
            history = request + [mend_surrogates(state.message())]
            if trace_id:  # (off the loop too: the whole conversation is encoded and written, each turn)
                await _off_loop(_save_trace, history, turn, config)
                conversation.traced = True
            calls = [item for item in state.items if item.kind == "tool_call" and item.done is not None]
            if not calls:
                break
            if not tools or step_no == max_steps - 1:
                # the turn ends with calls no tool ran for: the conversation records that they were
                # not run, as providers want every call answered before the next user message
                why = ("not run: the turn reached its step limit (max_steps)" if tools
                       else "not run: no tools were offered in this turn")
                history = history + [{"role": "user", "content_items": [
                    {"type": "tool_result.done", "text": why, "tool_call_id": item.tool_call_id} for item in calls]}]
                turn.max_steps_reached = bool(tools)
                break
            results = []
            for item in calls:
                if run.signal.aborted:
                    break
                tool_run = await _run_tool(run, tools, item)
                if tool_run is None:  # aborted while the tool ran
                    break
                results.append({"type": "tool_result.done", "text": tool_run.output, "tool_call_id": item.tool_call_id})
            if run.signal.aborted:
                with turn.lock:
                    state.status = "cancelled"
                break
            next_message = {"role": "user", "content_items": results}
            with turn.lock:
                turn.tool_messages.append(next_message)
        if turn.status == "complete":
            conversation.record(history)
    except asyncio.CancelledError:
        turn.mark_cancelled()  # e.g. cancelled between two steps: nothing more runs, nothing is recorded
        raise
    finally:
        conversation.streaming = False
        run.waiting_since = None
        run.notify()
        run.finished.set()
    return turn


Outcome = Literal["done", "aborted", "idle"]


async def _race(run: TurnRun, task: asyncio.Future[Any], idle: float | None = None) -> Outcome:
    """Wait for ``task``, the turn's abort signal, or ``idle`` seconds since ``run.waiting_since``.

    The signal is watched once for the whole task. An abort or the idle limit cancels the task and
    waits for it to wind down; cancelling this wait cancels the task too.
    """
    aborted = asyncio.ensure_future(run.signal.wait())
    outcome: Outcome = "done"
    pulse = run.pulse
    try:
        while True:
            timeout = None
            if idle is not None:
                # look four times per limit for new bytes; each is dated (``run.pulse_at``), so the
                # last wait ends when the limit is reached after the last of them, not later
                left = (run.waiting_since or time.monotonic()) + idle - time.monotonic()
                timeout = max(0.0, min(left, idle / 4))
            await asyncio.wait({task, aborted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return "done"
            if aborted.done():
                outcome = "aborted"
                break
            if run.pulse != pulse:
                pulse = run.pulse
                run.waiting_since = run.pulse_at or time.monotonic()
                continue
            since = run.waiting_since
            if idle is not None and since is not None and time.monotonic() - since >= idle:
                outcome = "idle"
                break
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        if not aborted.done():
            aborted.cancel()
    task.cancel(run.signal.reason if outcome == "aborted" else "idle timeout")
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
    return outcome


async def _unless_aborted(run: TurnRun, task: asyncio.Future[Any]) -> bool:
    """Wait for ``task`` or the turn's abort signal, whichever comes first; ``False`` when the abort did."""
    return await _race(run, task) == "done"


async def _run_tool(run: TurnRun, tools: ToolSet, item: Any) -> Any:
    """Run one tool call, raced against the turn's abort signal; ``None`` when the abort came first.

    A coroutine function is cancelled; a plain function runs in a thread, which cannot be stopped:
    it finishes on its own and its result is dropped.
    """
    task = asyncio.ensure_future(tools.run(item, run.notify))
    if await _unless_aborted(run, task):
        return task.result()
    run.notify()
    return None


# ------------------------------------------------------------------------------- bytes as signs of life
#: The turn whose step the current task reads (set in that task only, so a client shared by several
#: conversations credits each response's bytes to the turn that asked for it).
_beat: contextvars.ContextVar[TurnRun | None] = contextvars.ContextVar("mmsp_notebook_beat", default=None)


class _Beating:
    """A response body that counts its chunks into ``run.pulse`` as they arrive (made a subclass of
    the ``AsyncByteStream`` of the response's own httpx, see :func:`_beating_class`)."""

    def __init__(self, stream: Any, run: TurnRun, tail: bool = False) -> None:
        self._stream, self._run, self._tail = stream, run, tail

    def __aiter__(self) -> Any:
        return (_TailChunks if self._tail else _BeatingChunks)(self._stream.__aiter__(), self._run)

    async def aclose(self) -> None:
        await self._stream.aclose()


class _BeatingChunks:
    """The chunks of a body, counted into ``run.pulse`` as each next one is asked for (right after
    the previous arrived and was taken), the time of the last in ``run.pulse_at``. That is all it
    does per chunk, and the inner awaitable is returned as it is (an extra coroutine per chunk cost
    about 8 % of a 20,000-event stream); :func:`_race` reads them when it checks for silence."""

    __slots__ = ("_next", "_run")

    def __init__(self, chunks: Any, run: TurnRun) -> None:
        self._next, self._run = chunks.__anext__, run

    def __aiter__(self) -> _BeatingChunks:
        return self

    def __anext__(self) -> Any:
        run = self._run
        run.pulse += 1
        run.pulse_at = _monotonic()
        return self._next()


class _TailChunks(_BeatingChunks):
    """:class:`_BeatingChunks` that also keep the last :data:`TAIL` bytes or so in ``run.tail`` (for a
    Responses stream only: see :func:`_reported_error`)."""

    __slots__ = ()

    async def __anext__(self) -> Any:
        chunk = await super().__anext__()
        tail = self._run.tail
        tail.append(chunk)
        self._run.tail_size += len(chunk)
        while len(tail) > 1 and self._run.tail_size - len(tail[0]) >= TAIL:
            self._run.tail_size -= len(tail.popleft())
        return chunk


TAIL = 256 * 1024
_monotonic = time.monotonic
_beating_classes: dict[type, type] = {}


def _beating_class(base: type) -> type:
    """:class:`_Beating` as a subclass of ``base`` (httpx checks the type of a response's stream; the
    provider SDKs run a copy of httpx of their own, ``httpx2``)."""
    cls = _beating_classes.get(base)
    if cls is None:
        cls = _beating_classes[base] = type("Beating", (_Beating, base), {})
    return cls


async def _on_response(response: Any) -> None:
    run = _beat.get()
    if run is None:
        return
    run.waiting_since = time.monotonic()  # the response's head arrived
    headers = getattr(response, "headers", None)
    run.content_type = headers.get("content-type", "") if headers is not None else None
    # a provider SDK retries a 408, 409, 429 or 5xx (after the Retry-After it names, within its
    # retry budget): the views say what it waits for meanwhile; a client that does not retry fails
    # at once, so the words are never seen
    status = getattr(response, "status_code", 200)
    run.turn.retrying_after = status if isinstance(status, int) and (status in (408, 409, 429) or status >= 500) else None
    base = getattr(sys.modules.get(type(response).__module__.partition(".")[0]), "AsyncByteStream", None)
    if isinstance(base, type) and isinstance(response.stream, base):
        path = str(getattr(getattr(response, "request", None), "url", "")).split("?")[0]
        response.stream = _beating_class(base)(response.stream, run, path.rstrip("/").endswith("/responses"))


def _is_http_client(value: Any) -> bool:
    """An httpx ``AsyncClient`` (or the same class of the SDKs' ``httpx2``): it has response hooks."""
    hooks = getattr(value, "event_hooks", None)
    return isinstance(hooks, dict) and isinstance(hooks.get("response"), list) and hasattr(value, "send")


def _http_client(client: Any) -> Any:
    """The HTTP client under an mmsp client: the MMSP wire client's own, or its provider SDK's."""
    inner = getattr(client, "_client", None)  # AutoLLMClient -> the client of its type
    http = getattr(inner, "_client", None)
    if _is_http_client(http):
        return http
    sdk = getattr(http, "_client", None)  # the OpenAI and Anthropic SDKs keep theirs here
    return sdk if _is_http_client(sdk) else None


def watch_bytes(client: Any) -> bool:
    """Count every byte ``client`` receives as a sign of life of the turn that asked for it (idempotent).

    Heartbeats and keep-alive comments then keep a silent-but-alive stream from timing out. A
    client whose HTTP layer is not found (not httpx) is watched by its events only. Returns
    whether bytes are watched.
    """
    http = _http_client(client)
    if http is None:
        return False
    hooks = http.event_hooks
    if _on_response not in hooks["response"]:
        hooks["response"].append(_on_response)
        http.event_hooks = hooks
    return True


BATCH = 64  # events fed to the turn state at once, at most, while they arrive faster than it runs


async def _consume(run: TurnRun, client: Any, messages: list[dict[str, Any]], config: dict[str, Any],
                   state: Any) -> None:
    """Feed one stream into ``state``; the turn's AbortSignal cancels it at any point, silence ends it.

    Events are stamped as they arrive and fed to the turn state in batches: right away when the
    stream pauses (a callback scheduled on the loop runs as soon as the reader waits for the
    network), or every ``BATCH`` events while they arrive back to back. On a 20,000-event instant
    stream, feeding in bursts costs about 1.07× a bare iteration where feeding each event between
    two network reads cost 1.2×; a paced stream is still fed event by event.

    The signal is watched once for the whole stream rather than handed to mmsp, which would race
    every single event against it: the abort cancels the reading task, which closes mmsp's stream
    and with it the provider's request. So does ``run.idle_timeout`` seconds without a byte or an
    event (:class:`IdleTimeoutError`). A grammar violation found while feeding ends the stream the
    same way and is raised.
    """
    turn = run.turn
    loop = asyncio.get_running_loop()
    pending: list[Any] = []
    stamps: list[float] = []
    scheduled = False
    failure: list[BaseException] = []
    clock = state._clock
    idle = run.idle_timeout
    watch_bytes(client)  # (also without a limit: the response's content type tells a page from a stream)
    run.content_type = None
    run.tail.clear()
    run.tail_size = 0

    def flush() -> None:
        nonlocal scheduled
        scheduled = False
        if not pending or failure:
            return
        before = state.n_events
        try:
            with turn.lock:
                state.feed_many(pending, stamps)
        except Exception as exc:  # a ProtocolError: the state already says so
            failure.append(exc)
            if not reader.done() and asyncio.current_task() is not reader:
                reader.cancel()
        finally:
            batch = pending[: state.n_events - before] if run.listeners else ()
            pending.clear()
            stamps.clear()
        for listener in run.listeners:
            for event in batch:
                try:
                    listener(event)
                except Exception as exc:  # a user's on_event callback: reported once, the turn goes on
                    _report_listener_error(run, listener, exc)
        run.notify()

    async def read() -> None:
        nonlocal scheduled
        _beat.set(run)
        stream = client.streaming_response(messages=messages, config=config)
        keep, stamp = pending.append, stamps.append
        try:
            async for event in stream:
                keep(event)
                stamp(now := clock())
                turn.waiting_since = now  # (the run's property, set directly: once per event)
                if len(pending) >= BATCH:
                    flush()
                    if failure:  # a flush from here cannot cancel the task it runs in
                        break
                elif not scheduled:
                    scheduled = True
                    loop.call_soon(flush)
        finally:
            await stream.aclose()
        flush()
        if failure:
            raise failure[0]
        with turn.lock:
            state.finish()

    run.waiting_since = time.monotonic()
    reader = asyncio.ensure_future(read())
    outcome = await _race(run, reader, idle)
    if outcome != "done":
        flush()  # what arrived before the abort or the silence is kept
        if outcome == "aborted":
            raise asyncio.CancelledError(run.signal.reason)
        raise IdleTimeoutError(idle or 0.0, turn.retrying_after)  # (a provider SDK waiting to retry a 429, a 5xx)
    if not reader.cancelled() and reader.exception() is not None:  # (retrieved, so asyncio does not log it)
        flush()  # what arrived before the error is kept
    if failure:
        raise failure[0]
    try:
        reader.result()
    except Exception as exc:
        if error_type(exc) != "IncompleteStreamError":
            raise
        if state.n_events == 0 and _not_a_stream(run.content_type):
            raise NotAnEventStreamError(run.content_type or "", 200) from exc
        reported = _reported_error(run, exc)
        if reported is not None:
            raise reported from exc
        raise


def _reported_error(run: TurnRun, exc: BaseException) -> BaseException | None:
    """The error a Responses stream reported in an ``error`` or ``response.failed`` event, as mmsp's
    ``UpstreamError``, or None.

    mmsp's Responses client passes over both events (the OpenAI SDK raises only for an ``error``
    event whose data nests an ``error`` object), then finds the stream ended without its stop event:
    the turn would be ``incomplete``, "worth retrying", and the server's message lost. The last bytes
    of the response are read for it (``run.tail``).
    """
    from mmsp import UpstreamError

    from ..wire.sse import parse_frame, split_frames

    if not run.tail:
        return None
    for raw in reversed(split_frames(b"".join(run.tail))):
        payload = parse_frame(0, 0.0, raw).json()
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        error = payload.get("error") if kind == "error" else None
        if kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if isinstance(response, dict) else None
        if kind == "error" and not isinstance(error, dict):
            error = payload  # (the event itself: {"type": "error", "code": ..., "message": ...})
        if isinstance(error, dict):
            message = error.get("message")
            code = error.get("code") or error.get("type")
            return UpstreamError(getattr(exc, "client", None) or "OpenaiResponsesClient", None,
                                 str(code) if code else kind, str(message or f"the server reported {kind}"),
                                 {k: v for k, v in error.items() if k != "sequence_number"})
    return None


def _not_a_stream(content_type: str | None) -> bool:
    """Whether a response's Content-Type says its body is something else than an event stream."""
    if content_type is None:  # (not known: the client's HTTP layer is not watched)
        return False
    return content_type.split(";")[0].strip().lower() != "text/event-stream"


def _report_listener_error(run: TurnRun, listener: Any, exc: Exception) -> None:
    """Say once per turn and listener that an event listener raised; it keeps getting the events."""
    import logging

    reported = run.listener_errors
    if id(listener) in reported:
        return
    reported.add(id(listener))
    name = getattr(listener, "__qualname__", None) or type(listener).__name__
    logging.getLogger("mmsp_notebook").warning(
        "the event listener %s raised %s: %s (the turn goes on; later errors of this listener in this turn are not shown)",
        name, type(exc).__name__, redact(str(exc)))


async def _off_loop(work: Callable[..., None], *args: Any) -> None:
    """``work(*args)`` in a thread, not on the worker loop, waited for to its end even when the turn
    is cancelled meanwhile (the cancellation goes on once it has ended): what a turn writes is on
    disk before the turn is reported over, and one write of a conversation ends before the next
    begins."""
    task = asyncio.ensure_future(asyncio.to_thread(work, *args))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    task.result()


def _save_trace(history: list[dict[str, Any]], turn: Turn, config: dict[str, Any]) -> None:
    """Save the conversation's trace through mmsp's Tracer, configured keys redacted; a disk error
    does not fail the turn (the sidecar says it completed). Run in a thread (:func:`_off_loop`): a
    long conversation, rewritten whole at each turn, takes seconds to redact, encode and write."""
    try:
        save_trace(turn.model, redact_data(history), config["trace_id"], redact_data(config))
    except OSError:
        pass


def _write_sidecar(turn: Turn, state: Any, trace_id: str, turn_index: int, message_index: int) -> None:
    """Append the step's timing record to the sidecar; run in a thread, not on the worker loop
    (100,000 events take ~0.6 s to list, encode and write), the step's state read under the turn's lock."""
    with turn.lock:
        record = _sidecar_record(turn, state, trace_id, turn_index, message_index)
    _append(record)


async def record_refused(turn: Turn, trace_id: str, history: list[dict[str, Any]]) -> None:
    """Append the timing record of a turn refused before any request (its client could not be
    made: a missing key, a model no provider serves) to the conversation's sidecar, so that the
    trace's rows show the attempt as they show a failed one; off the loop, as every sidecar write.
    The error is the turn's, redacted."""
    record = sidecar_record(
        trace_id=trace_id, turn=_assistant_count(history), message_index=None, model=turn.model,
        client_type=turn.client_type, status=turn.status, error=_sidecar_error(turn.error),
        started_at=to_ms(time.time()), ttft_ms=None, total_ms=0.0, usage=None, finish_reason=None, events=[],
        comparison=turn.comparison)
    await _off_loop(_append, record)


def _append(record: SidecarRecord) -> None:
    try:
        append_sidecar(record)
    except OSError:
        pass  # timing is a bonus; the turn itself must not fail for it


def _sidecar_error(exc: BaseException | None) -> SidecarError | None:
    if exc is None:
        return None
    return {"type": type(exc).__name__, "message": redact(str(exc) or type(exc).__name__)}


def _sidecar_record(turn: Turn, state: Any, trace_id: str, turn_index: int, message_index: int) -> SidecarRecord:
    return sidecar_record(
        trace_id=trace_id,
        turn=turn_index,
        message_index=message_index if state.status == "complete" else None,
        model=turn.model,
        client_type=turn.client_type,
        status=state.status,
        error=_sidecar_error(state.error if state.status != "complete" else None),
        started_at=to_ms(state.started_at),
        ttft_ms=to_ms(state.ttft),
        total_ms=to_ms(state.total),
        usage=state.usage,
        finish_reason=state.finish_reason,
        events=state.sidecar_events(),
        comparison=turn.comparison,
    )
