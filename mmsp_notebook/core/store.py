"""The trace store: where mmsp's Tracer keeps a trace, how trace files are read, and the timing sidecar.

Everything that knows a trace's file name or format is here, used by the engine (writing the
sidecar, checking a trace id), :mod:`mmsp_notebook.traces` (the loaders, ``load_recorded``) and
``replay``. No pandas, no IPython.

Where a trace lives
    mmsp's Tracer writes ``(<MMSP_CACHE_DIR> / trace_id).with_suffix(".json")`` (and ``.txt``)
    with the whole history of a conversation, rewritten after every successful turn: a dotted last
    part is replaced, so ``runs/v1.5`` lives in ``runs/v1.json`` (:func:`tracer_path`, the one copy
    of that rule). It records no timing and no failed turn.

Reading a trace file (:func:`read_trace`, the one read policy)
    Only regular files are read: a FIFO, a socket or a device (a link to ``/dev/zero`` included)
    is refused from its ``stat`` without being opened, so nothing blocks on it, and a file larger
    than ``max_size`` bytes (default :data:`MAX_FILE_SIZE`, 256 MiB) is refused as ``too large``
    without being read (at most ``max_size + 1`` bytes are ever read, also from a file that grows
    or lies about its size). The JSON is parsed with orjson when installed, else (and when orjson
    refuses: NaN, integers beyond 64 bits, a UTF-8 BOM) with the standard library; bytes that are
    not UTF-8 become U+FFFD rather than losing the whole file. It must be an object with a
    ``history`` list of message objects (``config`` is made ``{}`` when it is not an object). The Tracer rewrites a
    trace in place (truncate, then write), so a reader can catch one empty or half written: a file
    that does not parse and was modified less than :data:`REWRITE_WINDOW` seconds ago is read
    once more after :data:`RETRY_DELAY` seconds; an older one is damaged at once (a corpus of old
    damaged files costs no waiting). Every failure is a :class:`~mmsp_notebook.TraceError` whose
    ``reason`` says what is wrong (:class:`~mmsp_notebook.TraceNotFoundError` for a missing file).

The timing sidecar
    Next to the trace this project appends one JSON line per turn to
    ``<MMSP_CACHE_DIR>/<trace_id>.timing.jsonl`` (:func:`sidecar_path`: the full trace id, dots
    included), failed, cut-off and cancelled turns included: a :class:`SidecarRecord`, format
    version 1 (``"v": 1``)::

        {
          "v": 1,
          "trace_id": "quickstart/default/turn_0003",
          "turn": 3,                 # 0-based index of this assistant turn among the trace's turns
                                     # (number of assistant messages in the history before it)
          "message_index": 7,        # index of the assistant message in the trace's history, or null
                                     # when the turn recorded nothing (error, incomplete, cancelled)
          "model": "demo", "client_type": "mmsp",
          "status": "complete",      # complete | incomplete | error | cancelled
          "error": null,             # or {"type": "UpstreamError", "message": "..."}
          "started_at": 1764441600123.4,   # wall clock, Unix ms, when the request was sent
          "ttft_ms": 412.5,          # request sent -> first content delta (null if none)
          "total_ms": 2210.0,        # request sent -> stop (or end of the stream)
          "usage": {...} | null, "finish_reason": "stop" | null,
          "events": [[412.5, "thinking.delta", 7], ..., [2210.0, "stop", 0]]
        }

    Each entry of ``events`` is ``[ms since the request was sent, item type or "stop", size]``
    where size is the length of the item's growing field (characters of text / thinking / raw
    arguments, bytes of inline data, dimensions of an embedding; a ``.done`` item's size is the
    full size, the stop's 0). That is enough to recompute time to first token, per-item durations
    and tokens per second, and to re-stream a recorded turn with its original pacing
    (``mmsp_notebook.replay``). ``events`` is always the last key (a reader that does not need it
    skips it unparsed).

    A record times the message it names only when it completed (:func:`completed`); any other is
    an attempt the trace never recorded, whatever ``message_index`` a foreign writer gave it.

    A line is written with one ``write`` call in append mode, so concurrent writers of one trace
    id do not interleave within a line; a reader skips a last line that is partial. The file is
    only ever appended to while the Tracer overwrites the trace: a notebook run again into the same
    cache leaves the records of every run (:mod:`mmsp_notebook.traces` keeps the latest run's).

    Reading (:func:`read_sidecar`, one parser: :func:`parse_sidecar`): every line that is a JSON
    object with a ``trace_id`` and an integer ``turn`` is a record (one without belongs to no turn:
    a damaged line, which the loaders name), whatever its version — lines written before versions
    were stamped (no ``"v"``) are version 1, and a later version is read for the fields this one
    knows. A record read back is what the file holds: in a damaged or foreign file any field may be
    missing or of another type, so readers check each value they use.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeVar, overload

from .._errors import TraceError, TraceNotFoundError
from .chars import mend_surrogates
from .fields import as_int
from .redact import redact_value

try:  # orjson is several times faster on traces and long sidecars; the stdlib parser is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    _orjson = None  # type: ignore[assignment]

__all__ = [
    "SIDECAR_SUFFIX", "FORMAT_VERSION", "REWRITE_WINDOW", "RETRY_DELAY", "MAX_FILE_SIZE", "IS_A_DIRECTORY",
    "read_regular", "NOT_REGULAR", "cache_dir", "tracer_path", "sidecar_path", "read_trace", "save_trace",
    "parse_json", "JSON_PARSER", "SidecarError", "SidecarRecord", "Sidecar", "sidecar_record", "to_ms", "completed",
    "append_sidecar", "read_sidecar", "parse_sidecar", "tool_error", "TOOL_ERROR_PREFIX", "TRACEBACK_START",
]

SIDECAR_SUFFIX = ".timing.jsonl"
FORMAT_VERSION = 1
#: A trace file that does not parse and was modified less than this many seconds ago may be in the
#: middle of a rewrite by the Tracer: it is read once more.
REWRITE_WINDOW = 2.0
#: Seconds to wait before reading such a file again.
RETRY_DELAY = 0.05
#: Trace files and sidecars larger than this many bytes are refused (``too large``) unread; the
#: readers take a ``max_size`` argument to change it.
MAX_FILE_SIZE = 256 * 2**20

JSON_PARSER = "orjson" if _orjson is not None else "json"
_PathLike = str | os.PathLike[str]
_T = TypeVar("_T")


# ----------------------------------------------------------------------------------------- where
def cache_dir() -> Path:
    """The directory mmsp's Tracer writes to: ``MMSP_CACHE_DIR``, else ``./cache``."""
    return Path(os.getenv("MMSP_CACHE_DIR", "cache")).absolute()


def _root(base: _PathLike | None) -> Path:
    return Path(base) if base is not None else cache_dir()


def tracer_path(trace_id: str, base: _PathLike | None = None) -> Path | None:
    """Where mmsp's Tracer writes the trace of ``trace_id``: ``(base / trace_id).with_suffix(".json")``.

    A dotted last part is replaced (``runs/v1.5`` -> ``runs/v1.json``, so two trace ids can share a
    file). ``base`` defaults to :func:`cache_dir`. ``None`` for an id whose last part is empty
    (``""``, ``"runs/"``), which names no file under ``base``.
    """
    if not trace_id or trace_id.endswith(("/", "\\")):
        return None
    try:
        return (_root(base) / trace_id).with_suffix(".json")
    except ValueError:  # a last part with no name ("..", "/")
        return None


def sidecar_path(trace_id: str, base: _PathLike | None = None) -> Path:
    """The timing sidecar of a trace id: ``base / (trace_id + ".timing.jsonl")``, the full id kept."""
    return _root(base) / f"{trace_id}{SIDECAR_SUFFIX}"


# ------------------------------------------------------------------------------------ reading files
def read_regular(path: _PathLike, max_size: int = MAX_FILE_SIZE, listed: bool = False) -> tuple[bytes, float]:
    """``(bytes, mtime)`` of a regular file; TraceError (TraceNotFoundError) naming what is wrong.

    The file's ``stat`` is checked before it is opened: anything but a regular file (a FIFO, a
    socket, a device) is refused unopened, and so is one over ``max_size`` bytes (``listed``: the
    caller's directory listing just said it is a regular file, not a link, and this ``stat`` is
    skipped). It is then opened non-blocking (a FIFO swapped in meanwhile cannot block either),
    checked again with ``fstat`` and read with plain ``os.read`` calls, never more than
    ``max_size + 1`` bytes.
    """
    name = os.fspath(path)
    if not listed:
        try:
            st = os.stat(name)
        except FileNotFoundError:
            raise _missing(name) from None
        except OSError as exc:  # a link loop (ELOOP), a path through a file (ENOTDIR), no permission
            raise _unreadable(name, exc) from None
        _check_regular(name, st, max_size)
    try:
        fd = os.open(name, _READ_FLAGS)
    except FileNotFoundError:
        raise _missing(name) from None
    except OSError as exc:
        raise _unreadable(name, exc) from None
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) and st.st_size <= max_size):
            _check_regular(name, st, max_size)
        first = os.read(fd, st.st_size + 1)
        if len(first) <= st.st_size:  # a short read of a regular file: its end
            return first, st.st_mtime
        chunks = [first]
        total = len(first)
        while chunks[-1]:  # it grew meanwhile: on to the end
            if total > max_size:
                raise _too_large(name, total, max_size)
            chunks.append(os.read(fd, min(max(st.st_size, 1 << 16), max_size + 1 - total)))
            total += len(chunks[-1])
        return (chunks[0] if len(chunks) == 2 else b"".join(chunks)), st.st_mtime
    except OSError as exc:
        raise _unreadable(name, exc) from None
    finally:
        os.close(fd)


def _missing(name: str) -> TraceNotFoundError:
    if os.path.islink(name):
        try:
            reason = f"broken symbolic link: to {os.readlink(name)}"
        except OSError:  # pragma: no cover - the link went away meanwhile
            reason = "vanished (deleted or renamed)"
    else:
        reason = "vanished (deleted or renamed)"
    return TraceNotFoundError(f"{name}: {reason}", path=name, reason=reason)


def _check_regular(name: str, st: os.stat_result, max_size: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        reason = IS_A_DIRECTORY if stat.S_ISDIR(st.st_mode) else NOT_REGULAR
        raise TraceError(f"{name}: {reason} ({_file_kind(st.st_mode)})", path=name, reason=reason)
    if st.st_size > max_size:
        raise _too_large(name, st.st_size, max_size)


def _too_large(name: str, size: int, max_size: int) -> TraceError:
    more = "more than " if size == max_size + 1 else ""
    reason = f"too large: {more}{size:,} bytes (max_size is {max_size:,})"
    return TraceError(f"{name}: {reason}", path=name, reason=reason)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a file"  # pragma: no cover - a door, a whiteout...


def _unreadable(name: str, exc: OSError) -> TraceError:
    reason = f"unreadable: {exc.__class__.__name__}: {exc.strerror or exc}"
    return TraceError(f"{name}: {reason}", path=name, reason=reason)


#: The ``reason`` of a TraceError for a directory where a trace file was expected.
IS_A_DIRECTORY = "a directory, not a file"
#: The ``reason`` of a TraceError for a FIFO, a socket or a device (the message says which).
NOT_REGULAR = "not a regular file"

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def parse_json(raw: bytes) -> Any:
    """Parse JSON bytes with orjson when installed, else (or when orjson refuses) the stdlib.

    orjson rejects ``NaN``, integers beyond 64 bits and a UTF-8 BOM, all of which Python's
    ``json`` (and so mmsp's Tracer, or an editor) can write; those go through the stdlib parser.
    Bytes that are not valid UTF-8 are replaced by U+FFFD.
    """
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except ValueError:
            pass
    try:
        return json.loads(raw)
    except UnicodeDecodeError:  # bytes that are not UTF-8 (nor UTF-16/32) become U+FFFD
        return json.loads(raw.decode("utf-8-sig", errors="replace"))


def _trace_object(raw: bytes) -> dict[str, Any] | str:
    """The checked JSON object of a trace's bytes, or the reason it is not one."""
    if not raw.strip():
        return "empty file"
    try:
        data = parse_json(raw)
    except (ValueError, RecursionError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        return f"not valid JSON (truncated, partially written or corrupt): {msg[:120]}"
    if not isinstance(data, dict):
        return f"not an mmsp trace: top level is a JSON {_json_kind(data)}, not an object"
    history = data.get("history")
    if history is None:
        return "not an mmsp trace: " + ("'history' is null, not a list" if "history" in data else "no 'history' key")
    if not isinstance(history, list):
        return f"not an mmsp trace: 'history' is a {type(history).__name__}, not a list"
    for i, message in enumerate(history):
        if not isinstance(message, dict):
            return f"not an mmsp trace: history[{i}] is a {type(message).__name__}, not a message object"
    if not isinstance(data.get("config"), dict):
        data["config"] = {}
    return data


def _json_kind(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")


@overload
def read_trace(path: _PathLike, *, max_size: int = ..., listed: bool = ...) -> dict[str, Any]: ...


@overload
def read_trace(
    path: _PathLike, *, max_size: int = ..., decode: Callable[[bytes], _T | None] | None, listed: bool = ...
) -> _T | dict[str, Any]: ...


def read_trace(
    path: _PathLike, *, max_size: int = MAX_FILE_SIZE, decode: Callable[[bytes], Any] | None = None, listed: bool = False
) -> Any:
    """The checked JSON object of one trace file (see "Reading a trace file" above).

    Returns ``{"history": [...], "config": {...}, ...}`` as stored (bytes still base64 text).
    ``max_size`` is the largest file read, in bytes. ``decode``, when given, is tried first on
    the file's bytes: what it returns is returned as it is, unless None (it cannot take this
    file), in which case the file is parsed and checked as usual. A reader that needs only some
    fields uses it to skip the rest. ``listed``: the caller's directory listing just said the path
    is a regular file (not a link), so it is opened without a ``stat`` first.

    Raises:
        TraceNotFoundError: no such file (``reason`` says vanished, or a broken link).
        TraceError: not a regular file, too large, unreadable, empty, not JSON or not an mmsp
            trace; its ``reason`` says which, without the path (``str()`` has the path first).
    """
    raw, mtime = read_regular(path, max_size, listed)
    result = decode(raw) if decode is not None else None
    if result is not None:
        return result
    result = _trace_object(raw)
    if isinstance(result, str) and time.time() - mtime < REWRITE_WINDOW:  # maybe being rewritten
        time.sleep(RETRY_DELAY)
        raw, _ = read_regular(path, max_size)
        result = _decode_trace(raw, decode)
    if isinstance(result, str):
        name = os.fspath(path)
        raise TraceError(f"{name}: {result}", path=name, reason=result)
    return result


def _decode_trace(raw: bytes, decode: Callable[[bytes], Any] | None) -> Any:
    if decode is not None:
        fast = decode(raw)
        if fast is not None:
            return fast
    return _trace_object(raw)


def save_trace(model: str, history: list[dict[str, Any]], trace_id: str, config: dict[str, Any],
               base: _PathLike | None = None) -> Path | None:
    """Save a conversation as mmsp's Tracer does (it writes the file, at :func:`tracer_path`).

    For clients that leave tracing to their server (mmsp's wire client): the trace is then saved
    from here, in the same format as any mmsp program's. A lone surrogate in a string (a model's
    JSON may escape half a pair) is written as U+FFFD. Returns the trace file.
    """
    from mmsp.integration.tracer import Tracer

    Tracer(cache_dir=Path(base) if base is not None else None).save_history(
        model, mend_surrogates(history), trace_id, mend_surrogates(config))
    return tracer_path(trace_id, base)


# ------------------------------------------------------------------------------------- the sidecar
class SidecarError(TypedDict):
    """Why a turn failed: the exception's class name and its (redacted) message."""

    type: str
    message: str


class SidecarRecord(TypedDict):
    """One turn's line of a timing sidecar, format :data:`FORMAT_VERSION` (see the module docstring).

    Build one with :func:`sidecar_record`, which puts the keys in the written order.
    """

    v: int
    trace_id: str
    turn: int
    message_index: int | None
    model: str
    client_type: str | None
    status: str
    error: SidecarError | None
    started_at: float | None
    ttft_ms: float | None
    total_ms: float | None
    usage: dict[str, Any] | None
    finish_reason: str | None
    comparison: NotRequired[str]  # the comparison the turn is a column of (written only then)
    events: list[list[Any]]


def sidecar_record(
    *,
    trace_id: str,
    turn: int,
    message_index: int | None,
    model: str,
    client_type: str | None,
    status: str,
    error: SidecarError | None,
    started_at: float | None,
    ttft_ms: float | None,
    total_ms: float | None,
    usage: dict[str, Any] | None,
    finish_reason: str | None,
    events: list[list[Any]],
    comparison: str | None = None,
) -> SidecarRecord:
    """A :class:`SidecarRecord` of the current format, ``events`` last (times in ms, see :func:`to_ms`)."""
    record: SidecarRecord = {  # type: ignore[typeddict-item]  # events are added last, below
        "v": FORMAT_VERSION,
        "trace_id": trace_id,
        "turn": turn,
        "message_index": message_index,
        "model": model,
        "client_type": client_type,
        "status": status,
        "error": error,
        "started_at": started_at,
        "ttft_ms": ttft_ms,
        "total_ms": total_ms,
        "usage": usage,
        # what the server sent as the finish reason, with any key in it redacted (as the trace is)
        "finish_reason": redact_value(finish_reason),
    }
    if comparison is not None:
        record["comparison"] = comparison
    record["events"] = events  # last: a reader that needs no timing skips it unparsed
    return record


def to_ms(seconds: float | None) -> float | None:
    """Seconds as the sidecar's milliseconds, rounded to the microsecond (None stays None)."""
    return None if seconds is None else round(seconds * 1000.0, 3)


def completed(record: Any) -> bool:
    """Whether a sidecar record times the message it names: ``status`` ``"complete"`` and an integer
    ``message_index`` (:func:`~.fields.as_int`: ``3.0`` is 3, and ``"x"``, ``2.5`` or ``true`` as if
    absent). Any other is an attempt that recorded nothing (the loaders', ``show``'s rule)."""
    return as_int(record.get("message_index")) is not None and record.get("status") == "complete"


def append_sidecar(record: SidecarRecord, base: _PathLike | None = None) -> Path:
    """Append one turn's record to the sidecar of ``record["trace_id"]`` under ``base``; returns the path.

    One ``write`` of one line in append mode. A record without ``"v"`` is stamped with the current
    version; a lone surrogate in a string (an error message a server sent) is written as U+FFFD.
    """
    path = sidecar_path(record["trace_id"], base)
    path.parent.mkdir(parents=True, exist_ok=True)
    whole = {"v": FORMAT_VERSION, **mend_surrogates(record)}
    try:  # orjson: ~20x faster on 100,000 events, and the C json encoder holds the GIL throughout
        data = _orjson.dumps(whole) + b"\n"
    except (AttributeError, TypeError):  # (no orjson, or a value it does not take)
        data = (json.dumps(whole, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    with open(path, "ab") as fh:
        fh.write(data)
    return path


class Sidecar(list[SidecarRecord]):
    """The records of a sidecar, in file order; ``damaged`` counts the lines that are not records,
    ``error`` is the reason the file could not be read at all (None when it was)."""

    def __init__(self, records: Iterable[SidecarRecord] = (), damaged: int = 0, error: str | None = None) -> None:
        super().__init__(records)
        self.damaged = damaged
        self.error = error


_EVENTS_KEY = b',"events":'
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _without_events(line: bytes) -> bytes | None:
    """The line with a trailing ``"events"`` array cut off, or None when that is not provably safe.

    The writer puts ``events`` last. The cut is taken only when nothing after it looks like a key
    (no ``:`` at all: event entries are ``[ms, "type", size]``) and the line ends the array and
    the object; otherwise the whole line is parsed. The key is looked for from the start (it
    comes after a few short fields; the events can be long), which finds the same one: with no
    ``:`` after the first, there is no other.
    """
    i = line.find(_EVENTS_KEY)
    if i < 0 or not line.endswith(b"]}"):
        return None
    if line.find(b":", i + len(_EVENTS_KEY)) >= 0:
        return None
    return line[:i] + b"}"


def _plain_records(raw: bytes, events: bool) -> list[SidecarRecord] | None:
    """The records of a sidecar as its writer leaves it — every line one record, whole, written
    once, the last ending in a newline (and with ``events=False``, each line's ``events`` provably
    last, see :func:`_without_events`) — parsed a line at a time with nothing else to decide;
    None for anything else (:func:`parse_sidecar` then takes the file line by line and says what
    is wrong with it). Each line is parsed on its own, so the records are exactly those the
    line-by-line way finds."""
    if _orjson is None or not raw.endswith(b"\n"):
        return None
    lines = raw.split(b"\n")
    lines.pop()
    if events:
        for line in lines:
            if line[:1] != b"{" or line[-1:] != b"}":
                return None
        keys = lines
    else:
        keys = []
        key = keys.append
        for line in lines:
            cut = _without_events(line)
            if cut is None or line[:1] != b"{":
                return None
            key(cut)
    if len(set(keys)) != len(keys):
        return None
    try:
        records = list(map(_orjson.loads, keys))
    except (ValueError, RecursionError):
        return None
    for r in records:
        if r.__class__ is not dict or "trace_id" not in r or not _has_turn(r):
            return None
    return records


def _has_turn(record: dict[str, Any]) -> bool:
    """Whether a record's ``turn`` is an integer (in JSON: one, or a float without a fraction,
    within int64): without one it belongs to no turn, and is a damaged line."""
    t = record.get("turn")
    return (t.__class__ is int or t.__class__ is float and t.is_integer()) and -(2**63) < t < 2**63


def parse_sidecar(raw: bytes, events: bool = True) -> Sidecar:
    """The records of a sidecar's bytes (and how many lines are damaged).

    A leading UTF-8 BOM is ignored, a file with a UTF-16 BOM is decoded as UTF-16, blank lines
    are skipped, a line repeated verbatim counts once
    (with ``events=False``, lines that differ only in their unparsed ``events`` count once too, and
    records may lack ``events``), objects with a ``trace_id`` and an integer ``turn`` are records. Any other line is
    damaged — except a last line without its newline that starts like a record, which a writer is
    still appending (not counted). With orjson installed it parses the lines; the stdlib takes what
    orjson refuses (NaN, huge integers).
    """
    plain = _plain_records(raw, events)
    if plain is not None:
        return Sidecar(plain)
    if raw.startswith(_BOM):
        raw = raw[3:]
    elif raw.startswith(_UTF16_BOMS):  # re-saved by a tool that writes UTF-16 (as a trace then is read too)
        raw = raw.decode("utf-16", errors="replace").encode("utf-8", errors="surrogatepass")
    loads = _orjson.loads if _orjson is not None else json.loads
    lines = raw.splitlines()
    open_tail = bool(lines) and not raw.endswith((b"\n", b"\r"))
    last = len(lines) - 1
    out = Sidecar()
    seen: set[bytes] = set()
    damaged = 0
    space = b" \t\r\x0b\x0c"
    for no, line in enumerate(lines):
        if line[:1] in space or line[-1:] in space:  # (b"" is in any bytes: an empty line too)
            line = line.strip()
            if not line:
                continue
        record = None
        key = line
        if not events and line.endswith(b"]}"):
            # _without_events(line), inlined: this runs once per line of every sidecar
            i = line.find(_EVENTS_KEY)
            if i >= 0 and line.find(b":", i + 10) < 0:
                key = cut = line[:i] + b"}"  # shorter to hash; a repeated line has the same cut
                try:
                    record = loads(cut)
                except ValueError:
                    record = None
        if key in seen:
            continue
        seen.add(key)
        if record is None:
            try:
                record = loads(line)
            except ValueError:
                try:  # invalid UTF-8 is replaced; NaN / huge ints need the stdlib
                    record = json.loads(line.decode("utf-8", errors="replace"))
                except (ValueError, RecursionError):
                    if not (open_tail and no == last and line.startswith(b"{")):
                        damaged += 1
                    continue
            except RecursionError:
                damaged += 1
                continue
        if isinstance(record, dict) and "trace_id" in record and _has_turn(record):
            out.append(record)  # type: ignore[arg-type]  # a record as the file holds it
        else:
            damaged += 1
    out.damaged = damaged
    return out


def read_sidecar(path: _PathLike, events: bool = True, max_size: int = MAX_FILE_SIZE, listed: bool = False) -> Sidecar:
    """The records of a timing sidecar file (see :func:`parse_sidecar`); ``.damaged`` counts bad lines.

    A file that cannot be read (missing, not a regular file, larger than ``max_size`` bytes,
    unreadable) has no records and no damaged lines: timing is a bonus, its absence is never an
    error. ``.error`` then holds the reason (what a loader that listed the file reports).
    """
    try:
        raw, _ = read_regular(path, max_size, listed)
    except TraceError as exc:
        return Sidecar(error=exc.reason)
    return parse_sidecar(raw, events)


# ---------------------------------------------------------------------------------------------- tool results
#: How a tool that raised is answered in the history (``tool_result.done`` text): ``error: <why>``.
TOOL_ERROR_PREFIX = "error: "
#: The first line of a Python traceback, which a tool result may open with.
TRACEBACK_START = "Traceback (most recent call last)"


def tool_error(text: object) -> str | None:
    """The error a tool result's text reports, or None: ``error: …`` (how this project records a
    tool that raised, :data:`TOOL_ERROR_PREFIX`, any case, after leading blanks) or a Python
    traceback (its last line). The loaders count these per turn (``n_tool_errors``) and the
    conversation view marks them."""
    if not isinstance(text, str):
        return None
    head = text.lstrip()
    if head[:6].lower() == "error:":
        return head[6:].strip() or "error"
    if head.startswith(TRACEBACK_START):
        lines = [line for line in head.splitlines() if line.strip()]
        return lines[-1].strip() if lines else "traceback"
    return None
