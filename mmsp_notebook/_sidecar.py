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

__all__ = ["SIDECAR_SUFFIX", "sidecar_path", "append_sidecar", "read_sidecar", "cache_dir"]

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
    """The records of a sidecar file; lines that are partial or not JSON objects are skipped, a
    line repeated verbatim is read once, a leading UTF-8 BOM is ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return
    seen: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line in seen:
            continue
        seen.add(line)
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "trace_id" in record:
            yield record
