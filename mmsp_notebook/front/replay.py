"""Replay: watch a recorded turn stream again, with its original timing.

``mmsp_notebook.replay(trace)`` reads an assistant message from an mmsp trace (written by mmsp's
Tracer to ``Path(trace_id).with_suffix(".json")``: ``<trace_id>.json``, or ``runs/v1.json`` for
``runs/v1.5``) and its timing from the sidecar next to it (``<trace_id>.timing.jsonl``, written by
this project: ``events: [[ms, type, size], ...]``), rebuilds the UniEvents and feeds
them into a fresh :class:`~mmsp_notebook.TurnState` at the recorded moments, through the same live
views a real turn uses. It returns the replayed :class:`~mmsp_notebook.Turn`::

    import mmsp_notebook as mn
    from mmsp_notebook import traces

    mn.replay("quickstart/default/turn_002")            # a trace id, under MMSP_CACHE_DIR
    mn.replay("cache/quickstart/default/turn_002.json", turn=0, speed=4)
    turns = traces.load_turns("cache/")
    mn.replay(turns.iloc[3], root="cache/")             # a row of load_turns

How the events are rebuilt
    The trace keeps only the ``.done`` items; the sidecar keeps, for every event, when it arrived and
    how big its fragment was. Each ``.done`` content is cut into the recorded fragment sizes
    (characters of text / thinking, bytes of inline data, values of an embedding, which must add up
    to the content; the last fragment of a tool call takes any remainder), so the deltas, their
    number and their timing match the original and their concatenation equals the ``.done`` item,
    as the grammar demands. A tool
    call's raw argument text is not recorded: it is rebuilt as the JSON of its parsed arguments,
    so the raw text seen while it streams may be formatted differently (the parsed arguments and
    the final view are the same). Signatures (``fidelity``) travel on the ``.done`` item. Without
    a sidecar record, when it does not match the message, or when any of its events is damaged
    (not ``[ms, type, size]`` with a finite ``0 <= ms <=`` one day and a non-negative integer
    size), each item arrives as one delta and its ``.done``, all at once: the whole message, never
    an exception.

What is replayed
    One assistant message: one model response, i.e. one step of a turn (a turn with tools has one
    message per step; ``turn=`` counts assistant messages as ``traces.load_turns`` does). The
    results of its tool calls, found in the next message of the history, are attached to the calls
    (with zero duration). Turns that failed are never in the trace, so they cannot be replayed.
    The stop event is rebuilt from the message's finish reason and usage; a message that has
    neither (a stream recorded without its stop: a hand-made or third-party trace) is replayed
    without one, so the replayed turn ends ``incomplete`` ("ended without a stop event"), as the
    recorded stream did, never as a complete answer.

Timing
    ``speed=1`` keeps the recorded pacing (measured: well within 10 % on a one-second turn),
    ``speed=10`` plays ten times faster, ``speed=math.inf`` (or no sidecar) at once. No single wait
    is longer than :data:`MAX_WAIT` (30 s, after ``speed``): a longer recorded pause is shortened
    to it, and a stopped replay ends at once. The replayed turn measures its own timings, so its
    footer shows the replay's ttft and total (at speed 1 close to the original's).
    :func:`strip_timings` is the normalization under which a replay's static rendering equals the
    original's.

Finding and reading the recorded message is :func:`mmsp_notebook.traces.recorded.load_recorded`'s
(through the trace store); this module builds the event plan and plays it.
"""


from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import operator
import re
import time
from pathlib import Path
from typing import Any

from .._errors import OptionError, OptionTypeError
from ..core.run import TurnRun
from ..core.stamps import created_ms
from ..core.state import GROWING_FIELD, ToolRun
from ..core.turn import Turn
from ..traces.recorded import load_recorded

__all__ = ["replay", "start_replay", "replay_plan", "load_recorded", "strip_timings"]


def strip_timings(text: str) -> str:
    """``text`` (a static rendering) with every duration, speed and tokens/s replaced by ``#``.

    ``Thought for 1.2 s``, ``TTFT 410 ms``, ``total 2.20 s``, ``53.1 tok/s`` and tool durations
    (``4 ms``, ``1.25 s``, ``2 min 5 s``) are the only parts of a rendering that depend on when the
    events arrived.
    """
    text = re.sub(r"\d+(?:\.\d+)?\s*tok/s", "# tok/s", text)
    text = re.sub(r"\d+ min \d+ s\b", "# s", text)
    text = re.sub(r"\d+(?:\.\d+)?\s*m?s\b", "# s", text)
    # tok/s is left out of a footer when it cannot be measured: a text footer's "| # tok/s", an
    # HTML footer's whole stat
    text = re.sub(r'(?:<span class="mmsp-sep">[^<]*</span>)?<span class="mmsp-stat"[^>]*># tok/s</span>', "", text)
    return re.sub(r"\s*\|\s*# tok/s", "", text)


# ---------------------------------------------------------------------------------------------- rebuilding
def _content(item: dict[str, Any], kind: str, total: int | None) -> Any:
    if kind == "tool_call":
        args = item.get("arguments") or {}
        options = [json.dumps(args, ensure_ascii=False), json.dumps(args, ensure_ascii=False, separators=(",", ":")),
                   json.dumps(args)]
        return next((o for o in options if total is not None and len(o) == total), options[0])
    value = item.get(GROWING_FIELD[kind])
    if kind in ("inline_data", "inline_thinking"):
        return value if isinstance(value, (bytes, bytearray)) else b""
    if kind == "embedding":
        return list(value or [])
    return value if isinstance(value, str) else ""


def _delta(kind: str, item: dict[str, Any], piece: Any, first: bool) -> dict[str, Any]:
    delta: dict[str, Any] = {"type": f"{kind}.delta", GROWING_FIELD[kind]: piece}
    if kind == "tool_call" and first:
        delta["name"] = item.get("name", "")
        delta["tool_call_id"] = item.get("tool_call_id", "")
    if kind in ("inline_data", "inline_thinking") and item.get("mime_type"):
        delta["mime_type"] = item["mime_type"]
    return delta


def _event(item: dict[str, Any], created_at: Any) -> dict[str, Any]:
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None, "created_at": created_at}


#: A sidecar event later than this (ms since the request: a day) makes the record unusable.
MAX_EVENT_MS = 86_400_000.0
#: No single wait of a replay is longer than this (seconds, after ``speed``): a longer recorded
#: pause is shortened to it.
MAX_WAIT = 30.0


def _usable_timing(timing: Any) -> list[tuple[float, str, int]] | None:
    """The sidecar's ``events`` as ``(ms, type, size)``, or ``None`` when any of them is unusable.

    Every event must be ``[ms, type, size]`` with ``ms`` a finite number, ``0 <= ms <=``
    :data:`MAX_EVENT_MS`, ``type`` a string and ``size`` a non-negative integer.
    """
    if not isinstance(timing, (list, tuple)) or not timing:
        return None
    rows = []
    for row in timing:
        if not isinstance(row, (list, tuple)) or len(row) < 3:
            return None
        ms, kind, size = row[0], row[1], row[2]
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= MAX_EVENT_MS:
            return None  # NaN fails the comparison too
        if not isinstance(kind, str):
            return None
        if isinstance(size, float) and size.is_integer():
            size = int(size)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            return None
        rows.append((float(ms), kind, size))
    return rows


def _plays_cleanly(plan: list[tuple[float | None, dict[str, Any]]], status: str = "complete") -> bool:
    """Whether ``plan`` streams through the grammar checks of a turn to ``status`` (``complete``; a
    plan with no stop event ends ``incomplete``)."""
    from ..core.state import TurnState

    state = TurnState(clock=lambda: 0.0, wall=lambda: 0.0)
    try:
        for _, event in plan:
            state.feed(event)
        state.finish()
    except Exception:
        return False
    return state.status == status


def replay_plan(message: dict[str, Any], timing: list[list[Any]] | None) -> list[tuple[float | None, dict[str, Any]]]:
    """The UniEvents of a recorded message, each with the ms (since the request) it arrived at.

    Args:
        message: The assistant UniMessage (its ``.done`` items, usage and finish reason).
        timing: The sidecar's ``events`` (``[ms, type, size]``), or ``None``.

    Returns:
        ``[(ms or None, event), ...]`` ending with the stop event, made of the message's finish reason
        and usage (``"stop"`` for a reason not recorded, ``{}`` for usage not recorded); a message
        with neither (a stream recorded without its stop: a hand-made or third-party trace) gets no
        stop event, so its replayed turn ends ``incomplete``, as the recorded stream did. ``None`` times mean "at once":
        no usable timing (no sidecar, one that does not match the message, or one with any event
        that is not ``[ms, type, size]`` with a finite ``0 <= ms <=`` :data:`MAX_EVENT_MS` and a
        non-negative integer size). The content is the message's in every case.
    """
    ms = created_ms(message.get("created_at"))  # as mmsp stamps it: an int of ms (seconds are converted)
    created_at = None if ms is None else int(ms)
    items = [i for i in message.get("content_items") or []
             if isinstance(i, dict) and str(i.get("type", "")).endswith(".done")
             and str(i.get("type")).rpartition(".")[0] in GROWING_FIELD]
    usage = message.get("usage_metadata")
    reason = message.get("finish_reason")
    stop: dict[str, Any] | None = None
    if usage is not None or reason not in (None, ""):  # (neither: recorded without its stop, none is made up)
        stop = {"role": "assistant", "event_type": "stop", "content_items": [],
                "usage_metadata": usage if isinstance(usage, dict) else {},
                "finish_reason": reason if isinstance(reason, str) and reason else "stop", "created_at": created_at}
    rows = _usable_timing(timing) if timing else None
    plan = _timed_plan(items, rows, created_at) if rows else None
    if plan is not None and rows is not None:
        if stop is not None:
            stop_ms = next((row[0] for row in rows if row[1] == "stop"), plan[-1][0] if plan else None)
            plan.append((stop_ms, stop))
        if _plays_cleanly(plan, "complete" if stop is not None else "incomplete"):
            return plan
    plan = []
    for item in items:
        kind = item["type"].rpartition(".")[0]
        plan.append((None, _event(_delta(kind, item, _content(item, kind, None), True), created_at)))
        plan.append((None, _event(item, created_at)))
    if stop is not None:
        plan.append((None, stop))
    return plan


def _timed_plan(items: list[dict[str, Any]], timing: list[tuple[float, str, int]],
                created_at: Any) -> list[tuple[float | None, dict[str, Any]]] | None:
    plan: list[tuple[float | None, dict[str, Any]]] = []
    rows = [row for row in timing if row[1] != "stop"]
    position = 0
    for item in items:
        kind = item["type"].rpartition(".")[0]
        deltas = []
        while position < len(rows) and rows[position][1] == f"{kind}.delta":
            deltas.append(rows[position])
            position += 1
        if not deltas or position >= len(rows) or rows[position][1] != f"{kind}.done":
            return None  # the sidecar does not describe this message
        done_ms = rows[position][0]
        position += 1
        total = sum(r[2] for r in deltas)
        content = _content(item, kind, total)
        if kind != "tool_call" and total != len(content):
            return None  # fragments of another content (a tool call's raw text may be formatted otherwise)
        offset = 0
        for n, (ms, _, size) in enumerate(deltas):
            piece = content[offset:] if n == len(deltas) - 1 else content[offset:offset + size]
            offset += size
            plan.append((ms, _event(_delta(kind, item, piece, n == 0), created_at)))
        plan.append((done_ms, _event(item, created_at)))
    if position != len(rows):
        return None
    return plan


# ---------------------------------------------------------------------------------------------- playing
async def _wait(run: TurnRun, delay: float) -> None:
    """Sleep ``delay`` seconds, or until the replay is stopped."""
    try:
        await asyncio.wait_for(run.signal.wait(), timeout=delay)
    except TimeoutError:
        pass


async def _play(run: TurnRun, plan: list[tuple[float | None, dict[str, Any]]], speed: float,
                results: dict[str, str]) -> Turn:
    turn = run.turn
    state = turn.new_step()
    try:
        with turn.lock:
            state.mark_request_sent()
        run.notify()
        target = state.request_sent or time.monotonic()  # when the next event is due
        latest = 0.0  # the latest recorded ms so far
        for ms, event in plan:
            if ms is not None and math.isfinite(speed):
                if ms > latest:
                    target += min((ms - latest) / 1000.0 / speed, MAX_WAIT)
                    latest = ms
                delay = target - time.monotonic()
                if delay > 0:
                    await _wait(run, delay)
            if run.signal.aborted:
                with turn.lock:
                    state.cancel(str(run.signal.reason or "cancelled"))
                break
            with turn.lock:
                touched = state.feed(event)
                if touched is not None and touched.kind == "tool_call" and touched.status == "done" \
                        and touched.tool_call_id in results:
                    touched.tool_run = ToolRun(touched.name, touched.tool_call_id, touched.arguments or {},
                                               output=results[touched.tool_call_id], started=0.0, ended=0.0)
            for listener in run.listeners:
                listener(event)
            run.notify()
        with turn.lock:
            state.finish()
    except Exception as exc:  # a grammar violation in a damaged trace: keep what was fed
        with turn.lock:
            state.fail(exc)
    finally:
        run.notify()
        run.finished.set()
    return turn


def _speed(speed: Any) -> float:
    """``speed`` as a float; OptionTypeError for what is not a number, OptionError for one not positive."""
    if isinstance(speed, (str, bytes, bool)) or speed is None:
        raise OptionTypeError(f"speed must be a number (1 as recorded, 10 ten times faster, math.inf at once), "
                              f"not {type(speed).__name__} {speed!r}")
    try:
        value = float(speed)
    except OverflowError:  # an integer beyond any float: as fast as math.inf (or as negative)
        value = math.inf if speed > 0 else -math.inf
    except (TypeError, ValueError):
        raise OptionTypeError(f"speed must be a number (1 as recorded, 10 ten times faster, math.inf at once), "
                              f"not {type(speed).__name__}") from None
    if not value > 0:  # NaN too
        raise OptionError(f"speed must be a positive number (math.inf: at once), not {speed!r}")
    return value


def replay(trace: Any, *, turn: int = -1, speed: float = 1.0, display: bool = True,
           root: str | Path | None = None) -> Turn:
    """Stream a recorded turn again, with its original timing, into the live view; returns the replayed Turn.

    Args:
        trace: A trace id (under ``root``, default ``MMSP_CACHE_DIR``; found where mmsp's Tracer
            writes it, so ``runs/v1.5`` in ``runs/v1.json``), a path to a trace ``.json`` file (or to
            its ``.timing.jsonl`` sidecar), or
            a row of ``traces.load_turns`` (a pandas Series or its ``to_dict()``, ``otel=True``
            column names accepted).
        turn: Which assistant message of the trace (0-based; ``-1``, the default, is the last).
            Ignored for a row, which names its own.
        speed: How much faster than recorded: ``1`` as recorded, ``10`` ten times faster,
            ``math.inf`` at once. Without a usable timing sidecar the replay is always at once.
            No single wait exceeds :data:`MAX_WAIT` (30 s): a longer recorded pause is shortened.
        display: Show the live view (a widget in Jupyter, text in a terminal); ``False`` just
            rebuilds the turn (still paced by ``speed``).
        root: The directory trace ids are relative to.

    The timing sidecar is ``<trace_id>.timing.jsonl`` next to the trace file; one whose name
    differs from the file's (``runs/v1.5.timing.jsonl`` beside ``runs/v1.json``) is used when its
    records name the trace id the file records. A sidecar record that is damaged (an event that is
    not ``[ms, type, size]`` with a finite ``0 <= ms <=`` one day and a non-negative integer size)
    or does not match the message is ignored: the message then plays in full, at once.

    An interrupt (■, Ctrl-C) stops the replay, drawn with what had played, then goes on up as a
    :class:`KeyboardInterrupt` whose ``.turn`` is that turn, as from :func:`ask`.

    Returns:
        The replayed :class:`~mmsp_notebook.Turn` (one step); ``turn.replayed_from`` says what was
        replayed (trace id, trace file, message index, whether the timing was recorded and from
        which sidecar).

    Raises:
        TraceNotFoundError: The trace file does not exist (a ``FileNotFoundError`` too).
        TraceError: No such turn, a turn that failed (never recorded), a file that is not an mmsp
            trace or a damaged message (a ``ValueError`` too).
        OptionError: ``speed`` not positive, a row without a trace id (a ``ValueError`` too).
        OptionTypeError: ``speed`` or ``turn`` not a number, ``trace`` of another type (a
            ``TypeError`` too).
    """
    run, future = start_replay(trace, turn=turn, speed=speed, root=root)
    if not display:
        return future.result()
    from .finish import present

    # a replay is a turn like any other: shown, drawn in its cell, recorded as the last turn; never
    # strict (a replayed failure is what the user asked to see)
    return present(run, future, strict=False)


def start_replay(trace: Any, *, turn: int = -1, speed: float = 1.0,
                 root: str | Path | None = None) -> tuple[TurnRun, concurrent.futures.Future[Turn]]:
    """Start playing a recorded turn on the worker loop, shown nowhere: ``(run, future)`` for a view
    to follow (the arguments and errors of :func:`replay`)."""
    from ..engine import worker as _worker

    speed = _speed(speed)
    if isinstance(turn, bool) or not isinstance(turn, int):
        try:
            if isinstance(turn, bool):  # (an int to operator.index: True would be turn 1)
                raise TypeError
            turn = operator.index(turn)
        except TypeError:
            raise OptionTypeError(f"turn must be an integer (0-based; -1 the last), not {type(turn).__name__}") from None
    recorded = load_recorded(trace, turn, root)
    record = recorded["record"]
    plan = replay_plan(recorded["message"], record.get("events") if record else None)
    config = dict(recorded["config"])
    model = next((m for m in (record.get("model") if record else None, config.get("model"))
                  if isinstance(m, str) and m), "")
    client_type = record.get("client_type") if record else None
    replayed = Turn(recorded["prompt"], model=model, client_type=client_type if isinstance(client_type, str) else None,
                    trace_id=recorded["trace_id"], config=config)
    replayed.replayed_from = {"trace_id": recorded["trace_id"], "path": str(recorded["path"]),
                              "message_index": recorded["message_index"], "turn": recorded["turn"],
                              "timed": plan[0][0] is not None if plan else False,
                              "sidecar": str(recorded["sidecar"]) if recorded["sidecar"] else None}
    run = TurnRun(replayed)
    return run, _worker.submit(_play(run, plan, speed, recorded["tool_results"]))
