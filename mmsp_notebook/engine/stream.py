"""Running a turn: stream each step through a real mmsp client, run tools, trace, record timing.

Everything here runs on the worker loop. The engine feeds every UniEvent into the step's
:class:`~mmsp_notebook.TurnState` under the turn's lock and sets ``changed`` so the main thread can
repaint; it never renders anything itself.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

from ..core.redact import redact, redact_exception
from ..core.store import SidecarError, append_sidecar, save_trace, sidecar_record, to_ms
from .tools import ToolSet
from ..core.run import TurnRun
from ..core.turn import Turn

__all__ = ["TurnRun", "run_turn"]


def _assistant_count(history: list[dict[str, Any]]) -> int:
    return sum(1 for message in history if message.get("role") == "assistant")


async def run_turn(
    run: TurnRun,
    client: Any,
    message: dict[str, Any],
    config: dict[str, Any],
    tools: ToolSet | None = None,
    max_steps: int = 8,
    trace: bool = True,
    save_trace_here: bool = False,
) -> Turn:
    """Stream ``message`` through ``client`` (stateful), running tool calls until the model stops.

    Args:
        run: The turn in flight (its turn collects the steps).
        client: An ``mmsp.AutoLLMClient`` created on this loop; its history is the conversation.
        message: The user message of the turn.
        config: The UniConfig (``trace_id`` in it when traced).
        tools: The Python functions offered as tools.
        max_steps: The most model responses one turn may take.
        trace: Write the timing sidecar next to the trace.
        save_trace_here: Save the mmsp trace from here (the mmsp wire client leaves it to its server).

    The conversation records the turn only when it completes, as mmsp's stateful calls record a call
    only at its stop event: a failed, cut-off or cancelled turn leaves the history as it was. Each
    step streams through mmsp's ``streaming_response`` with the history so far (what
    ``streaming_response_stateful`` sends), and the history is stored back in the client once the
    turn completes; two turns of one conversation at once are refused with mmsp's
    ``ConcurrentCallError``.
    """
    from mmsp import ConcurrentCallError

    turn = run.turn
    if id(client) in _in_flight:
        turn.fail_before_stream(ConcurrentCallError(type(client).__name__))
        run.notify()
        run.finished.set()
        return turn
    _in_flight.add(id(client))
    history = client.get_history()
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
                await _consume(run, client, request, config, state)
            except (Exception, asyncio.CancelledError) as exc:
                with turn.lock:
                    state.fail(redact_exception(exc))
                if isinstance(exc, asyncio.CancelledError) and not run.signal.aborted:
                    raise
            finally:
                run.notify()
                if trace and config.get("trace_id"):
                    _write_sidecar(turn, state, config["trace_id"], turn_index, len(request))
            if state.status != "complete":
                break
            history = request + [state.message()]
            if save_trace_here and config.get("trace_id"):
                _save_trace(history, turn, config)
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
            client.set_history(history)
    except asyncio.CancelledError:
        turn.mark_cancelled()  # e.g. cancelled between two steps: nothing more runs, nothing is recorded
        raise
    finally:
        _in_flight.discard(id(client))
        run.notify()
        run.finished.set()
    return turn


async def _unless_aborted(run: TurnRun, task: "asyncio.Future[Any]") -> bool:
    """Wait for ``task`` or the turn's abort signal, whichever comes first; ``False`` when the abort did.

    The signal is watched once for the whole task. An abort cancels the task and waits for it to
    wind down; cancelling this wait cancels the task too.
    """
    aborted = asyncio.ensure_future(run.signal.wait())
    try:
        await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        if not aborted.done():
            aborted.cancel()
    if task.done():
        return True
    task.cancel(run.signal.reason)
    try:
        await task
    except asyncio.CancelledError:
        pass
    return False


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


_in_flight: set[int] = set()  # clients with a turn streaming (touched on the worker loop only)


BATCH = 64  # events fed to the turn state at once, at most, while they arrive faster than it runs


async def _consume(run: TurnRun, client: Any, messages: list[dict[str, Any]], config: dict[str, Any],
                   state: Any) -> None:
    """Feed one stream into ``state``; the turn's AbortSignal cancels it at any point.

    Events are stamped as they arrive and fed to the turn state in batches: right away when the
    stream pauses (a callback scheduled on the loop runs as soon as the reader waits for the
    network), or every ``BATCH`` events while they arrive back to back. On a 20,000-event instant
    stream, feeding in bursts costs about 1.07× a bare iteration where feeding each event between
    two network reads cost 1.2×; a paced stream is still fed event by event.

    The signal is watched once for the whole stream rather than handed to mmsp, which would race
    every single event against it: the abort cancels the reading task, which closes mmsp's stream
    and with it the provider's request. A grammar violation found while feeding ends the stream
    the same way and is raised.
    """
    turn = run.turn
    loop = asyncio.get_running_loop()
    pending: list[Any] = []
    stamps: list[float] = []
    scheduled = False
    failure: list[BaseException] = []
    clock = state._clock

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
        stream = client.streaming_response(messages=messages, config=config)
        keep, stamp = pending.append, stamps.append
        try:
            async for event in stream:
                keep(event)
                stamp(clock())
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

    reader = asyncio.ensure_future(read())
    if not await _unless_aborted(run, reader):
        flush()  # what arrived before the abort is kept
        raise asyncio.CancelledError(run.signal.reason)
    if not reader.cancelled() and reader.exception() is not None:  # (retrieved, so asyncio does not log it)
        flush()  # what arrived before the error is kept
    if failure:
        raise failure[0]
    reader.result()


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


def _save_trace(history: list[dict[str, Any]], turn: Turn, config: dict[str, Any]) -> None:
    save_trace(turn.model, history, config["trace_id"], config)


def _write_sidecar(turn: Turn, state: Any, trace_id: str, turn_index: int, message_index: int) -> None:
    error: SidecarError | None = None
    if state.error is not None and state.status != "complete":
        error = {"type": type(state.error).__name__, "message": redact(str(state.error) or type(state.error).__name__)}
    record = sidecar_record(
        trace_id=trace_id,
        turn=turn_index,
        message_index=message_index if state.status == "complete" else None,
        model=turn.model,
        client_type=turn.client_type,
        status=state.status,
        error=error,
        started_at=to_ms(state.started_at),
        ttft_ms=to_ms(state.ttft),
        total_ms=to_ms(state.total),
        usage=state.usage,
        finish_reason=state.finish_reason,
        events=state.sidecar_events(),
    )
    try:
        append_sidecar(record)
    except OSError:
        pass  # timing is a bonus; the turn itself must not fail for it
