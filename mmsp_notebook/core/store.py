"""The timing sidecar: when every event of a turn arrived, next to mmsp's own trace.

mmsp's Tracer writes ``<MMSP_CACHE_DIR>/<trace_id>.json`` (and ``.txt``) with the whole history of a
conversation, rewritten after every successful turn; it records no timing and no failed turn.
Next to it this module appends one JSON line per turn to ``<MMSP_CACHE_DIR>/<trace_id>.timing.jsonl``
(failed, cut-off and cancelled turns included). Format, version 1 — one object per line::

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

Each entry of ``events`` is ``[ms since the request was sent, item type or "stop", size]`` where
size is the length of the item's growing field (characters of text / thinking / raw arguments,
bytes of inline data, dimensions of an embedding; 0 for ``.done`` items' own size is the full
size). That is enough to recompute time to first token, per-item durations and tokens per second,
and to re-stream a recorded turn with its original pacing (``mmsp_notebook.replay``).

A line is written with one ``write`` call in append mode, so concurrent writers of one trace id do
not interleave within a line; a reader skips a last line that is partial. The file is only ever
appended to while the Tracer overwrites ``<trace_id>.json``: a notebook run again into the same cache
leaves the records of every run. :mod:`mmsp_notebook.traces` keeps those of the latest one: a record
for a turn already completed drops the earlier records of that turn and of later turns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

try:  # orjson is several times faster on a long sidecar; the stdlib parser is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    _orjson = None

__all__ = ["SIDECAR_SUFFIX", "sidecar_path", "append_sidecar", "read_sidecar", "read_sidecar_file", "parse_sidecar",
           "cache_dir"]

SIDECAR_SUFFIX = ".timing.jsonl"
FORMAT_VERSION = 1


def cache_dir() -> Path:
    """The directory mmsp's Tracer writes to: ``MMSP_CACHE_DIR``, else ``./cache``."""
    return Path(os.getenv("MMSP_CACHE_DIR", "cache")).absolute()


def sidecar_path(trace_id: str, base: str | os.PathLike[str] | None = None) -> Path:
    """The sidecar file of a trace id (the Tracer's ``<trace_id>.json`` with another suffix)."""
    root = Path(base) if base is not None else cache_dir()
    return root / f"{trace_id}{SIDECAR_SUFFIX}"


def append_sidecar(record: dict[str, Any], base: str | os.PathLike[str] | None = None) -> Path:
    """Append one turn's record to the sidecar of ``record["trace_id"]``; returns the path."""
    path = sidecar_path(record["trace_id"], base)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"v": FORMAT_VERSION, **record}, ensure_ascii=False, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
    return path


def read_sidecar(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of a sidecar file (see :func:`parse_sidecar`); an unreadable file has none."""
    yield from read_sidecar_file(path)[0]


_EVENTS_KEY = b',"events":'


def _without_events(line: bytes) -> bytes | None:
    """The line with a trailing ``"events"`` array cut off, or None when that is not provably safe.

    The project's writer puts ``events`` last. The cut is taken only when nothing after it looks
    like a key (no ``":``: event entries are ``[ms, "type", size]``) and the line ends the array
    and the object; otherwise the whole line is parsed.
    """
    i = line.rfind(_EVENTS_KEY)
    if i < 0 or not line.endswith(b"]}"):
        return None
    if line.find(b'":', i + len(_EVENTS_KEY)) >= 0:
        return None
    return line[:i] + b"}"


_BOM = b"\xef\xbb\xbf"


def parse_sidecar(raw: bytes, events: bool = True) -> tuple[list[dict[str, Any]], int]:
    """``(records, damaged lines)`` of a sidecar's bytes.

    A leading UTF-8 BOM is ignored, blank lines are skipped, a line repeated verbatim counts once
    (with ``events=False``, lines that differ only in their unparsed ``events`` count once too),
    objects with a ``trace_id`` are records. Any other line is damaged — except a last line without
    its newline that starts like a record, which a writer is still appending (not counted). With
    orjson installed it parses the lines; the stdlib takes what orjson refuses (NaN, huge integers).
    """
    if raw.startswith(_BOM):
        raw = raw[3:]
    loads = _orjson.loads if _orjson is not None else json.loads
    lines = raw.splitlines()
    open_tail = bool(lines) and not raw.endswith((b"\n", b"\r"))
    last = len(lines) - 1
    out: list[dict[str, Any]] = []
    seen: set[bytes] = set()
    damaged = 0
    for no, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        record = None
        key = line
        if not events:
            cut = _without_events(line)
            if cut is not None:
                key = cut  # shorter to hash; a repeated line has the same cut
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
        if isinstance(record, dict) and "trace_id" in record:
            out.append(record)
        else:
            damaged += 1
    return out, damaged


def read_sidecar_file(path: str | os.PathLike[str], events: bool = True) -> tuple[list[dict[str, Any]], int]:
    """``(records, damaged lines)`` of a timing sidecar file (see :func:`parse_sidecar`); an
    unreadable file has no records and no damaged lines."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return [], 0
    return parse_sidecar(raw, events)
