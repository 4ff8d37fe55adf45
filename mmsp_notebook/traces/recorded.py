"""One recorded assistant message of a trace, with what surrounds it: what ``replay`` plays.

:func:`load_recorded` finds the trace file of a trace id (where mmsp's Tracer writes it:
:func:`~mmsp_notebook.core.store.tracer_path`, so ``runs/v1.5`` in ``runs/v1.json``), a path or a
row of ``traces.load_turns``; reads it through the trace store's one read policy
(:func:`~mmsp_notebook.core.store.read_trace`); picks the assistant message (``turn=`` counts
assistant messages as ``load_turns`` does); checks that each of its items can stream; and finds
its timing record in a sidecar next to the file (:func:`~mmsp_notebook.core.store.read_sidecar`).

Every failure names the file and what is wrong: :class:`~mmsp_notebook.TraceNotFoundError` (also
a ``FileNotFoundError``) when there is no trace file, :class:`~mmsp_notebook.TraceError` for a
file that is not an mmsp trace, a damaged message, a turn it does not hold or one that failed
(never recorded), :class:`~mmsp_notebook.OptionError` / :class:`~mmsp_notebook.OptionTypeError`
for an argument that cannot name a trace. No pandas, no views: a row of ``load_turns`` is read
through its ``get``.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, TypedDict

from .._errors import OptionError, OptionTypeError, TraceError, TraceNotFoundError
from ..core.chars import LONE_SURROGATE
from ..core.fields import as_int
from ..core.redact import redact
from ..core.state import GROWING_FIELD
from ..core.store import (
    SIDECAR_SUFFIX,
    SidecarRecord,
    cache_dir,
    completed,
    read_sidecar,
    read_trace,
    sidecar_path,
    tracer_path,
)
from ._common import check_unique

__all__ = ["Recorded", "load_recorded"]


class Recorded(TypedDict):
    """A recorded assistant message and what surrounds it (see :func:`load_recorded`)."""

    trace_id: str
    #: the trace file
    path: Path
    #: the assistant UniMessage, decoded (inline data as bytes)
    message: dict[str, Any]
    #: its index in the trace's history, and its index among the assistant messages
    message_index: int
    turn: int
    #: the user message before it (decoded), or None
    prompt: dict[str, Any] | None
    #: tool_call_id -> result text, from the user message that follows it
    tool_results: dict[str, str]
    config: dict[str, Any]
    #: its timing sidecar record (None without one) and the sidecar file
    record: SidecarRecord | None
    sidecar: Path | None


def is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False for a name the system refuses (too long for a file name)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _decode(message: dict[str, Any]) -> dict[str, Any]:
    from mmsp.wire import decode_wire

    return decode_wire(message)


def shown_path(path: Path) -> Path:
    """``path`` as the file system names it, when a frame shows it: a loader shows a name that is
    not UTF-8 with U+FFFD for each byte it cannot decode (a trace id is text), so a part holding
    U+FFFD that names nothing is the one entry of its directory shown so. ``path`` itself when it
    names a file, or no entry (or several) is shown so."""
    if "\ufffd" not in str(path) or os.path.lexists(path):
        return path
    cur = Path(path.anchor or ".")
    for part in path.parts[1:] if path.anchor else path.parts:
        nxt = cur / part
        if "\ufffd" in part and not os.path.lexists(nxt):
            try:
                names = [n for n in os.listdir(cur) if LONE_SURROGATE.sub("\ufffd", n) == part]
            except OSError:
                return path
            if len(names) != 1:
                return path
            nxt = cur / names[0]
        cur = nxt
    return cur


def _trace_candidates(base: Path, name: str) -> list[Path]:
    trace_id = name.removesuffix(".json")
    found = [base / name] if name.endswith(".json") else []
    found += [p for p in (tracer_path(trace_id, base), base / f"{trace_id}.json") if p is not None]
    return [shown_path(p) for p in dict.fromkeys(found)]


def _row_field(row: Any, *keys: str) -> Any:
    """The first of ``keys`` a row has a value for (None, NaN and pandas NA count as missing)."""
    for key in keys:
        try:
            value = row.get(key)
            if value is None or value != value:
                continue
        except Exception:
            continue
        return value
    return None


def _damaged(path: Path, index: int, what: str) -> TraceError:
    reason = f"message {index} is damaged: {what}"
    return TraceError(f"{path}: {reason}", path=str(path), reason=reason)


def _message(path: Path, history: list[dict[str, Any]], index: int, replayed: bool = False) -> dict[str, Any]:
    """History message ``index`` decoded (inline data as bytes); TraceError when it is damaged (for
    the ``replayed`` message, also when one of its items could not stream)."""
    message = history[index]
    items = message.get("content_items")
    if items is not None and not isinstance(items, list):
        raise _damaged(path, index, f"its content_items are a {type(items).__name__}, not a list")
    for n, item in enumerate(items or []):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise _damaged(path, index, f"content item {n} is not an object with a 'type'")
    try:
        decoded = _decode(message)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _damaged(path, index, f"{type(exc).__name__}: {exc}") from None
    if replayed:
        for n, item in enumerate(decoded["content_items"]):
            problem = _item_problem(item)
            if problem:
                raise _damaged(path, index, f"content item {n} ({item['type']}) {problem}")
    return decoded


def _item_problem(item: dict[str, Any]) -> str | None:
    """What makes a ``.done`` item of a replayed message unplayable, or None."""
    kind, _, phase = item["type"].rpartition(".")
    if phase != "done" or kind not in GROWING_FIELD:
        return None
    fidelity = item.get("fidelity")
    if fidelity is not None and not isinstance(fidelity, dict):
        return f"has a fidelity that is a {type(fidelity).__name__}, not an object"
    value: Any = item.get(GROWING_FIELD[kind])
    if kind == "tool_call":
        if not isinstance(value, dict):
            return f"has arguments that are a {type(value).__name__}, not an object"
        for key in ("name", "tool_call_id"):
            if not isinstance(item.get(key), str) or not item[key]:
                return f"has no {key}"
        try:  # streamed as their JSON text
            json.dumps(value)
        except RecursionError:
            return "has arguments nested too deeply to stream as JSON text"
        return None
    if value is None:
        return None
    if kind == "embedding":
        if not isinstance(value, list):
            return f"has an embedding that is a {type(value).__name__}"
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return "has an embedding that is not a list of numbers"
        return None
    expected: dict[str, type | tuple[type, ...]] = {
        "text": str, "thinking": str, "inline_data": (bytes, bytearray), "inline_thinking": (bytes, bytearray)}
    if not isinstance(value, expected[kind]):
        return f"has a {GROWING_FIELD[kind]} that is a {type(value).__name__}"
    return None


def _sidecar_candidates(path: Path, trace_ids: list[str]) -> tuple[list[Path], list[Path]]:
    """The sidecars that may time the trace file ``path``: ``(named, others)``.

    ``named`` are ``<trace id>.timing.jsonl`` next to it for the trace ids known (the one asked for,
    the file's own name); ``others`` the sidecars next to it whose trace id mmsp's Tracer would store
    in this file (``v1.5.timing.jsonl`` for ``v1.json``), trusted only when their records name the trace.
    """
    named = [path.parent / f"{Path(t).name}{SIDECAR_SUFFIX}" for t in trace_ids if Path(t).name]
    named.append(path.with_name(path.name[: -len(".json")] + SIDECAR_SUFFIX) if path.name.endswith(".json")
                 else path.with_name(path.name + SIDECAR_SUFFIX))
    others = []
    try:
        pattern = glob.escape(path.stem) + ".*" + SIDECAR_SUFFIX
        for candidate in sorted(path.parent.glob(pattern)):
            tid = candidate.name[: -len(SIDECAR_SUFFIX)]
            if tracer_path(tid, path.parent) == path:
                others.append(candidate)
    except (OSError, ValueError):
        pass
    named = [p for p in dict.fromkeys(named) if is_file(p)]
    return named, [p for p in others if p not in named]


def _pick_record(records: Sequence[SidecarRecord], message_index: int, turn_no: int,
                 trace_id: str | None) -> SidecarRecord | None:
    chosen = None
    for record in records:
        if not completed(record):  # (an attempt that recorded nothing times no message, as for the loaders)
            continue
        if trace_id is not None and record.get("trace_id") != trace_id:
            continue
        if as_int(record.get("message_index")) == message_index:  # (3.0 is 3, as for the loaders)
            chosen = record
    return chosen


def _failed_turn(records: Sequence[SidecarRecord], turn: int, trace_id: str) -> str | None:
    """Why turn ``turn`` of ``trace_id`` cannot be replayed, when its sidecar ``records`` say it failed
    (for a negative ``turn``: when no turn completed, counting among the failed ones)."""
    failed = [r for r in records if not completed(r)]  # (the loaders' rule: a record without its message failed)
    if not failed:
        return None
    none_completed = len(failed) == len(records)
    record: SidecarRecord | None
    if turn < 0:
        if not none_completed:
            return None
        record = failed[turn] if -len(failed) <= turn else failed[0]
    else:
        record = next((r for r in failed if as_int(r.get("turn")) == turn), None)  # (4.0 is 4, as for the loaders)
        if record is None:
            return None
    error = record.get("error")
    why = str(record.get("status"))
    if isinstance(error, dict) and error:
        why += f": {error.get('type')}: {str(error.get('message'))[:200]}"
    every = "; no turn of it completed" if none_completed else ""
    n = as_int(record.get("turn"))
    return redact(f"turn {record.get('turn') if n is None else n} of {trace_id} did not complete ({why}{every}): "
                  "its content was never recorded, so it cannot be replayed")


def _refused(reason: str, path: Path | None = None) -> TraceError:
    return TraceError(f"{path}: {reason}" if path is not None else reason, path=None if path is None else str(path),
                      reason=reason)


def load_recorded(trace: Any, turn: int = -1, root: str | Path | None = None) -> Recorded:
    """The recorded assistant message of a trace and what surrounds it.

    Args:
        trace: A trace id (relative to ``root``, default ``MMSP_CACHE_DIR``), a path to a trace
            ``.json`` file (or to its ``.timing.jsonl`` sidecar: the trace beside it), or a row of ``traces.load_turns`` (a pandas Series or a dict, with
            this module's or the ``otel=True`` column names: its trace id and ``message_index``).
            A trace id is found where mmsp's Tracer writes it, ``Path(trace_id).with_suffix(".json")``
            (``runs/v1.5`` in ``runs/v1.json``).
        turn: Which assistant message (0-based among the trace's assistant messages; negative
            counts from the end). Ignored for a row.
        root: The directory trace ids are relative to.

    Returns:
        A :class:`Recorded`: ``record`` is the sidecar record (``None`` without one) and ``sidecar``
        its file. The timing sidecar is ``<trace_id>.timing.jsonl`` next to the trace file; one
        whose name differs from the file's (``runs/v1.5.timing.jsonl`` beside ``runs/v1.json``) is
        used when its records name the trace id the file records.

    Raises:
        TraceNotFoundError: No trace file (a ``FileNotFoundError`` too).
        TraceError: No such turn, a failed turn (never recorded), a file that is not an mmsp
            trace or a damaged message (the message names the file and what is wrong).
        OptionError: A row without a trace id. OptionTypeError: ``trace`` of another type, or a
            whole DataFrame.
    """
    base = Path(root) if root is not None else cache_dir()
    message_index = None
    asked: str | None = None  # the trace id asked for
    trace_id: str | None
    if hasattr(trace, "columns") and hasattr(trace, "iloc"):
        raise OptionTypeError("a whole DataFrame was given: pass one of its rows (turns.iloc[n])")
    if isinstance(trace, Mapping) or (hasattr(trace, "get") and hasattr(trace, "keys")
                                      and not isinstance(trace, (str, bytes, Path))):  # a row (Series or dict)
        value = _row_field(trace, "trace_id", "gen_ai.conversation.id")
        if value is None:
            raise OptionError("the row has no trace id (a 'trace_id' or 'gen_ai.conversation.id' field): "
                              "pass a row of traces.load_turns")
        trace_id = str(value)
        check_unique(trace_id, getattr(trace, "attrs", None) or {})
        value = _row_field(trace, "message_index")
        try:
            message_index = None if value is None else int(value)
        except (TypeError, ValueError, OverflowError):
            message_index = None
        if message_index is None:
            raise _refused(f"turn {_row_field(trace, 'turn')} of {trace_id} did not complete "
                           f"({_row_field(trace, 'status')}): its content was never recorded, so it cannot be "
                           "replayed")
        asked = trace_id
        candidates = _trace_candidates(base, trace_id)
    else:
        if isinstance(trace, bytes) or not isinstance(trace, (str, PurePath)):
            raise OptionTypeError("trace must be a trace id, a path or a row of traces.load_turns, "
                                  f"not {type(trace).__name__}")
        candidate = Path(trace)
        if candidate.suffix == ".json" and is_file(candidate):
            candidates = [candidate]
            trace_id = None
        elif candidate.name.endswith(SIDECAR_SUFFIX) and is_file(candidate):
            # a timing sidecar given (as show takes one): the trace it times, beside it
            base = candidate.parent
            trace_id = asked = candidate.name.removesuffix(SIDECAR_SUFFIX)
            candidates = _trace_candidates(base, trace_id)
        else:
            trace_id = asked = str(trace).removesuffix(".json")
            candidates = _trace_candidates(base, str(trace))
    path = next((p for p in candidates if is_file(p)), None)
    if path is None:
        tried = candidates[0] if candidates else base / f"{trace_id}.json"
        records = read_sidecar(sidecar_path(asked, base)) if asked else []
        if asked and records and not any(completed(r) for r in records):  # every turn failed
            raise _refused(_failed_turn(records, turn, asked) or
                           f"no turn of {asked} completed ({len(records)} failed): nothing was recorded, so "
                           "nothing can be replayed")
        raise TraceNotFoundError(f"no trace file {tried}", path=str(tried), reason="no trace file")
    data = read_trace(path)
    history: list[dict[str, Any]] = data["history"]
    config: dict[str, Any] = data["config"]
    config_id = config.get("trace_id") if isinstance(config.get("trace_id"), str) and config.get("trace_id") else None
    if asked is not None and config_id is not None and Path(asked).suffix and Path(config_id).name != Path(asked).name \
            and tracer_path(Path(config_id).name, path.parent) == path == tracer_path(Path(asked).name, path.parent):
        raise TraceNotFoundError(f"no trace file for {asked}: {path}, where mmsp's Tracer keeps it, now holds trace "
                                 f"{config_id} (the Tracer stores both ids in the same file)", path=str(path),
                                 reason=f"holds trace {config_id}, not {asked}")
    if trace_id is None:
        trace_id = config_id or path.stem
    assistant = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    named, others = _sidecar_candidates(path, [t for t in (asked, config_id) if t])
    records_of = {p: read_sidecar(p) for p in named + others}
    if message_index is None:
        if not assistant:
            raise _refused("holds no assistant message", path)
        try:
            message_index = assistant[turn]
        except IndexError:
            for source in named:
                failed = _failed_turn(records_of[source], turn, trace_id) if turn >= 0 else None
                if failed is not None:
                    raise _refused(failed) from None
            raise _refused(f"holds {len(assistant)} assistant message{'s' if len(assistant) != 1 else ''}; "
                           f"there is no turn {turn}", path) from None
    if not (0 <= message_index < len(history)) or history[message_index].get("role") != "assistant":
        raise _refused(f"message {message_index} is not an assistant message", path)
    turn_no = assistant.index(message_index)
    message = _message(path, history, message_index, replayed=True)
    prompt_index = next((i for i in range(message_index - 1, -1, -1) if history[i].get("role") == "user"), None)
    prompt = _message(path, history, prompt_index) if prompt_index is not None else None
    following = history[message_index + 1] if message_index + 1 < len(history) else None
    results: dict[str, str] = {}
    if following and following.get("role") == "user" and isinstance(following.get("content_items"), list):
        for item in following["content_items"]:
            if isinstance(item, dict) and item.get("type") == "tool_result.done" \
                    and isinstance(call_id := item.get("tool_call_id"), str):
                text = item.get("text", "")
                results[call_id] = text if isinstance(text, str) else json.dumps(text, default=str)
    # the sidecar: a record of this message whose trace id is the file's own, from any sidecar next
    # to the file; else one from a sidecar named after the trace (whatever trace id it records)
    record = sidecar = None
    for source in named + others:
        record = _pick_record(records_of[source], message_index, turn_no, config_id) if config_id else None
        if record is not None:
            sidecar = source
            break
    else:
        for source in named + (others if config_id is None else []):
            record = _pick_record(records_of[source], message_index, turn_no, None)
            if record is not None:
                sidecar = source
                break
    return {"trace_id": trace_id, "path": path, "message": message, "message_index": message_index,
            "turn": turn_no, "prompt": prompt, "tool_results": results, "config": config, "record": record,
            "sidecar": sidecar}

