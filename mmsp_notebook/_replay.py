"""Replay: watch a recorded turn stream again, with its original timing.

``mmsp_notebook.replay(trace)`` reads an assistant message from an mmsp trace (``<trace_id>.json``,
written by mmsp's Tracer) and its timing from the sidecar next to it (``<trace_id>.timing.jsonl``,
written by this project: ``events: [[ms, type, size], ...]``), rebuilds the UniEvents and feeds
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
    (characters of text / thinking, bytes of inline data, values of an embedding; the last fragment
    of a group takes any remainder), so the deltas, their number and their timing match the
    original and their concatenation equals the ``.done`` item, as the grammar demands. A tool
    call's raw argument text is not recorded: it is rebuilt as the JSON of its parsed arguments,
    so the raw text seen while it streams may be formatted differently (the parsed arguments and
    the final view are the same). Signatures (``fidelity``) travel on the ``.done`` item. Without
    a sidecar record, or when it does not match the message, each item arrives as one delta and its
    ``.done``, all at once.

What is replayed
    One assistant message: one model response, i.e. one step of a turn (a turn with tools has one
    message per step; ``turn=`` counts assistant messages as ``traces.load_turns`` does). The
    results of its tool calls, found in the next message of the history, are attached to the calls
    (with zero duration). Turns that failed are never in the trace, so they cannot be replayed.

Timing
    ``speed=1`` keeps the recorded pacing (measured: well within 10 % on a one-second turn),
    ``speed=10`` plays ten times faster, ``speed=math.inf`` (or no sidecar) at once. The replayed
    turn measures its own timings, so its footer shows the replay's ttft and total (at speed 1
    close to the original's). :func:`strip_timings` is the normalization under which a replay's
    static rendering equals the original's.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

from ._engine import TurnRun
from ._sidecar import SIDECAR_SUFFIX, cache_dir, read_sidecar
from ._state import ToolRun
from ._turn import Turn

__all__ = ["replay", "replay_plan", "load_recorded", "strip_timings"]

_GROWING = {"text": "text", "thinking": "thinking", "tool_call": "arguments", "inline_data": "data",
            "inline_thinking": "data", "embedding": "embedding"}


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


# ---------------------------------------------------------------------------------------------- loading
def _decode(message: dict[str, Any]) -> dict[str, Any]:
    from mmsp.wire import decode_wire

    return decode_wire(message)


def load_recorded(trace: Any, turn: int = -1, root: str | Path | None = None) -> dict[str, Any]:
    """The recorded assistant message of a trace and what surrounds it.

    Args:
        trace: A trace id (relative to ``root``, default ``MMSP_CACHE_DIR``), a path to a trace
            ``.json`` file, or a row of ``traces.load_turns`` (its ``trace_id`` and
            ``message_index``).
        turn: Which assistant message (0-based among the trace's assistant messages; negative
            counts from the end). Ignored for a row.
        root: The directory trace ids are relative to.

    Returns:
        ``{"trace_id", "path", "message", "message_index", "turn", "prompt", "tool_results",
        "config", "record"}`` where ``record`` is the sidecar record (``None`` without one).

    Raises:
        FileNotFoundError: No trace file. ValueError: No such turn, or a failed turn (never recorded).
    """
    base = Path(root) if root is not None else cache_dir()
    message_index = None
    if hasattr(trace, "get") and not isinstance(trace, (str, Path, dict)):  # a pandas Series
        trace_id = str(trace.get("trace_id"))
        value = trace.get("message_index")
        try:
            message_index = None if value is None or value != value else int(value)
        except (TypeError, ValueError):
            message_index = None
        if message_index is None:
            raise ValueError(f"turn {trace.get('turn')} of {trace_id} did not complete ({trace.get('status')}): "
                             "its content was never recorded, so it cannot be replayed")
        path = base / f"{trace_id}.json"
    else:
        candidate = Path(trace)
        if candidate.suffix == ".json" and candidate.is_file():
            path = candidate
            trace_id = None
        else:
            trace_id = str(trace).removesuffix(".json")
            path = base / f"{trace_id}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no trace file {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    history = [_decode(m) for m in data.get("history") or []]
    config = data.get("config") or {}
    if trace_id is None:
        trace_id = config.get("trace_id") or path.stem
    assistant = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    if message_index is None:
        if not assistant:
            raise ValueError(f"{path} holds no assistant message")
        try:
            message_index = assistant[turn]
        except IndexError:
            raise ValueError(f"{path} holds {len(assistant)} assistant messages; there is no turn {turn}") from None
    if not (0 <= message_index < len(history)) or history[message_index].get("role") != "assistant":
        raise ValueError(f"message {message_index} of {path} is not an assistant message")
    turn_no = assistant.index(message_index)
    prompt = next((history[i] for i in range(message_index - 1, -1, -1) if history[i].get("role") == "user"), None)
    following = history[message_index + 1] if message_index + 1 < len(history) else None
    results = {}
    if following and following.get("role") == "user":
        for item in following.get("content_items") or []:
            if item.get("type") == "tool_result.done":
                results[item.get("tool_call_id")] = item.get("text", "")
    sidecar = path.with_name(path.name[: -len(".json")] + SIDECAR_SUFFIX)
    record = None
    for candidate_record in read_sidecar(sidecar):
        if candidate_record.get("status") != "complete":
            continue
        if candidate_record.get("message_index") == message_index or (
                candidate_record.get("message_index") is None and candidate_record.get("turn") == turn_no):
            record = candidate_record
    return {"trace_id": trace_id, "path": path, "message": history[message_index], "message_index": message_index,
            "turn": turn_no, "prompt": prompt, "tool_results": results, "config": config, "record": record}


# ---------------------------------------------------------------------------------------------- rebuilding
def _content(item: dict[str, Any], kind: str, total: int | None) -> Any:
    if kind == "tool_call":
        args = item.get("arguments") or {}
        options = [json.dumps(args, ensure_ascii=False), json.dumps(args, ensure_ascii=False, separators=(",", ":")),
                   json.dumps(args)]
        return next((o for o in options if total is not None and len(o) == total), options[0])
    value = item.get(_GROWING[kind])
    if kind in ("inline_data", "inline_thinking"):
        return value if isinstance(value, (bytes, bytearray)) else b""
    if kind == "embedding":
        return list(value or [])
    return value if isinstance(value, str) else ""


def _delta(kind: str, item: dict[str, Any], piece: Any, first: bool) -> dict[str, Any]:
    delta: dict[str, Any] = {"type": f"{kind}.delta", _GROWING[kind]: piece}
    if kind == "tool_call" and first:
        delta["name"] = item.get("name", "")
        delta["tool_call_id"] = item.get("tool_call_id", "")
    if kind in ("inline_data", "inline_thinking") and item.get("mime_type"):
        delta["mime_type"] = item["mime_type"]
    return delta


def _event(item: dict[str, Any], created_at: Any) -> dict[str, Any]:
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None, "created_at": created_at}


def replay_plan(message: dict[str, Any], timing: list[list[Any]] | None) -> list[tuple[float | None, dict[str, Any]]]:
    """The UniEvents of a recorded message, each with the ms (since the request) it arrived at.

    Args:
        message: The assistant UniMessage (its ``.done`` items, usage and finish reason).
        timing: The sidecar's ``events`` (``[ms, type, size]``), or ``None``.

    Returns:
        ``[(ms or None, event), ...]`` ending with the stop event; ``None`` times mean "at once"
        (no usable timing: no sidecar, or one that does not match the message).
    """
    created_at = message.get("created_at")
    items = [i for i in message.get("content_items") or [] if str(i.get("type", "")).rpartition(".")[0] in _GROWING]
    stop = {"role": "assistant", "event_type": "stop", "content_items": [],
            "usage_metadata": message.get("usage_metadata") or {}, "finish_reason": message.get("finish_reason") or "stop",
            "created_at": created_at}
    plan = _timed_plan(items, timing, created_at) if timing else None
    if plan is None:
        plan = []
        for item in items:
            kind = item["type"].rpartition(".")[0]
            plan.append((None, _event(_delta(kind, item, _content(item, kind, None), True), created_at)))
            plan.append((None, _event(item, created_at)))
        plan.append((None, stop))
        return plan
    stop_ms = next((row[0] for row in timing if row[1] == "stop"), plan[-1][0] if plan else None)  # type: ignore[union-attr]
    plan.append((stop_ms, stop))
    return plan


def _timed_plan(items: list[dict[str, Any]], timing: list[list[Any]],
                created_at: Any) -> list[tuple[float | None, dict[str, Any]]] | None:
    plan: list[tuple[float | None, dict[str, Any]]] = []
    rows = [row for row in timing if isinstance(row, list) and len(row) >= 3 and row[1] != "stop"]
    position = 0
    for item in items:
        kind = item["type"].rpartition(".")[0]
        deltas = []
        while position < len(rows) and rows[position][1] == f"{kind}.delta":
            deltas.append(rows[position])
            position += 1
        if not deltas or position >= len(rows) or rows[position][1] != f"{kind}.done":
            return None  # the sidecar does not describe this message
        done_ms = float(rows[position][0])
        position += 1
        content = _content(item, kind, sum(int(r[2] or 0) for r in deltas))
        offset = 0
        for n, row in enumerate(deltas):
            size = int(row[2] or 0)
            piece = content[offset:] if n == len(deltas) - 1 else content[offset:offset + size]
            offset += size
            plan.append((float(row[0]), _event(_delta(kind, item, piece, n == 0), created_at)))
        plan.append((done_ms, _event(item, created_at)))
    if position != len(rows):
        return None
    return plan


# ---------------------------------------------------------------------------------------------- playing
async def _play(run: TurnRun, plan: list[tuple[float | None, dict[str, Any]]], speed: float,
                results: dict[str, str]) -> Turn:
    import asyncio

    turn = run.turn
    state = turn.new_step()
    try:
        with turn.lock:
            state.mark_request_sent()
        run.notify()
        t0 = state.request_sent or time.monotonic()
        for ms, event in plan:
            if ms is not None and math.isfinite(speed):
                delay = t0 + ms / 1000.0 / speed - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
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


def replay(trace: Any, *, turn: int = -1, speed: float = 1.0, display: bool = True,
           root: str | Path | None = None) -> Turn:
    """Stream a recorded turn again, with its original timing, into the live view; returns the replayed Turn.

    Args:
        trace: A trace id (under ``root``, default ``MMSP_CACHE_DIR``), a path to a trace ``.json``
            file, or a row (pandas Series) of ``traces.load_turns``.
        turn: Which assistant message of the trace (0-based; ``-1``, the default, is the last).
            Ignored for a row, which names its own.
        speed: How much faster than recorded: ``1`` as recorded, ``10`` ten times faster,
            ``math.inf`` at once. Without a timing sidecar the replay is always at once.
        display: Show the live view (a widget in Jupyter, text in a terminal); ``False`` just
            rebuilds the turn (still paced by ``speed``).
        root: The directory trace ids are relative to.

    Returns:
        The replayed :class:`~mmsp_notebook.Turn` (one step); ``turn.replayed_from`` says what was
        replayed (trace id, message index, whether the timing was recorded).

    Raises:
        FileNotFoundError: The trace file does not exist.
        ValueError: No such turn, a turn that failed (never recorded), or ``speed`` not positive.
    """
    from . import _worker

    if not speed or speed <= 0 or speed != speed:
        raise ValueError("speed must be a positive number (math.inf: at once)")
    recorded = load_recorded(trace, turn, root)
    record = recorded["record"]
    plan = replay_plan(recorded["message"], record.get("events") if record else None)
    config = dict(recorded["config"])
    model = (record or {}).get("model") or config.get("model") or ""
    replayed = Turn(recorded["prompt"], model=model, client_type=(record or {}).get("client_type"),
                    trace_id=recorded["trace_id"], config=config)
    replayed.replayed_from = {"trace_id": recorded["trace_id"], "path": str(recorded["path"]),
                              "message_index": recorded["message_index"], "turn": recorded["turn"],
                              "timed": plan[0][0] is not None if plan else False}
    run = TurnRun(replayed)
    future = _worker.submit(_play(run, plan, float(speed), recorded["tool_results"]))
    if not display:
        return future.result()
    from ._live import TextLive, WidgetLive, drive, in_kernel

    live = WidgetLive() if in_kernel() else TextLive()
    result = drive(run, future, live)
    if isinstance(live, WidgetLive):
        result.mark_drawn()
    return result
