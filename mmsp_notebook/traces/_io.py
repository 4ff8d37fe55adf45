"""Finding the traces under a path, and choosing the records of a sidecar's latest run.

Reading and parsing files is the trace store's (:mod:`mmsp_notebook.core.store`: ``read_trace``,
``read_sidecar``); nothing here opens a file or writes anywhere.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import TraceNotFoundError
from ..core.store import SIDECAR_SUFFIX, tracer_path
from ._columns import INT_HI, INT_LO, as_int

__all__ = ["Source", "collect_sources", "latest_run", "config_trace_id"]

#: Files the Tracer (and this project) write next to a trace that are not traces themselves.
_COMPANION_SUFFIXES = (SIDECAR_SUFFIX, ".txt")


@dataclass(slots=True)
class Source:
    """One trace: its ``.json`` file (None when only a sidecar exists) and its sidecar."""

    trace_id: str
    path: str | None
    sidecar: str | None
    #: a file given on its own: its trace id may be refined from the config's ``trace_id``
    standalone: bool = False


def _rel_id(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    if os.sep != "/":  # pragma: no cover - Windows
        rel = rel.replace(os.sep, "/")
    if rel.endswith(SIDECAR_SUFFIX):
        return rel[: -len(SIDECAR_SUFFIX)]
    return rel[:-5] if rel.endswith(".json") else rel


def _sidecar_pattern(pattern: str) -> str:
    if pattern.endswith(".json"):
        return pattern[:-5] + SIDECAR_SUFFIX
    return pattern


def _is_companion(name: str) -> bool:
    return name.endswith(_COMPANION_SUFFIXES)


def _through_link(paths: Iterable[str], root: str) -> bool:
    """Whether any of ``paths`` (found under ``root``) goes through a link to a directory."""
    sep = os.sep
    dirs = {p[: p.rfind(sep)] for p in paths}  # os.path.dirname, without its overhead per file
    below: set[str] = set()
    n = len(root)
    for d in dirs:
        while len(d) > n and d not in below:
            below.add(d)
            d = os.path.dirname(d)
    return any(os.path.islink(d) for d in below)


def _one_path_per_file(paths: Iterable[str]) -> list[str]:
    """One path per file reached through directory links (the shortest), sorted: ``**`` follows
    links, so a link loop would otherwise yield every file once per level of the loop."""
    best: dict[str, str] = {}
    for f in paths:
        key = os.path.realpath(f)
        cur = best.get(key)
        if cur is None or (f.count(os.sep), f) < (cur.count(os.sep), cur):
            best[key] = f
    return sorted(best.values())


def _expand(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def collect_sources(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    pattern: str = "**/*.json",
) -> list[Source]:
    """Find the traces under ``paths`` (directories, files, or a list of both).

    A directory is globbed with ``pattern`` (recursive ``**`` allowed); the trace id of a file
    found there is its path relative to that directory without ``.json``. Tracer companions
    (``.txt``) and timing sidecars are never taken for traces; a sidecar whose trace file is
    missing (every turn of that trace failed) becomes a sidecar-only source. A file given on its
    own is a trace whatever its name; a ``.timing.jsonl`` given on its own stands for its trace.

    Raises:
        TraceNotFoundError: a given path does not exist (a ``FileNotFoundError`` too).
    """
    out: list[Source] = []
    seen: set[str] = set()
    for raw in _expand(paths):
        p = os.path.abspath(raw)
        if os.path.isdir(p):
            root = p
            esc = glob.escape(root)
            found = sorted(glob.glob(os.path.join(esc, pattern), recursive=True))
            side = set(glob.glob(os.path.join(esc, _sidecar_pattern(pattern)), recursive=True))
            side = {s for s in side if s.endswith(SIDECAR_SUFFIX)}
            if "**" in pattern and _through_link([*found, *side], root):
                found = _one_path_per_file(found)
                side = set(_one_path_per_file(side))
            used: set[str] = set()
            start = len(out)
            for f in found:
                if _is_companion(f) or f in seen:
                    continue
                seen.add(f)
                sc = None
                if f.endswith(".json"):
                    cand = f[:-5] + SIDECAR_SUFFIX
                    if cand in side:
                        sc = cand
                        used.add(cand)
                out.append(Source(_rel_id(f, root), f, sc))
            by_path = {src.path: src for src in out[start:]}
            for s in sorted(side - used):
                stem = s[: -len(SIDECAR_SUFFIX)]
                if stem + ".json" in seen or s in seen:
                    continue
                # mmsp's Tracer names the file Path(trace_id).with_suffix(".json"): a trace id
                # with a dot in its last part ("run_1.5") lands in "run_1.json"
                dotted = tracer_path(_rel_id(s, root), root)
                twin_src = by_path.get(str(dotted)) if dotted is not None else None
                if twin_src is not None and twin_src.sidecar is None:
                    twin_src.sidecar = s
                    continue
                seen.add(s)
                out.append(Source(_rel_id(s, root), None, s))
            out[start:] = sorted(out[start:], key=lambda src: src.trace_id)
        elif os.path.isfile(p):
            if p.endswith(SIDECAR_SUFFIX):
                twin = p[: -len(SIDECAR_SUFFIX)] + ".json"
                path = twin if os.path.isfile(twin) else None
                sc = p
                key = path or p
            else:
                path = p
                cand = (p[:-5] if p.endswith(".json") else p) + SIDECAR_SUFFIX
                sc = cand if os.path.isfile(cand) else None
                key = p
            if key in seen:
                continue
            seen.add(key)
            base = os.path.basename(key)
            if base.endswith(SIDECAR_SUFFIX):
                base = base[: -len(SIDECAR_SUFFIX)]
            elif base.endswith(".json"):
                base = base[:-5]
            out.append(Source(base, path, sc, standalone=True))
        else:
            raise TraceNotFoundError(f"no such trace file or directory: {raw}", path=raw,
                                     reason="no such trace file or directory")
    return out


def _turn(r: dict[str, Any]) -> int | None:
    t = r.get("turn")
    if t.__class__ is not int or not INT_LO < t < INT_HI:
        t = as_int(t)
    return t


def latest_run(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that belong to the conversation the trace file holds now, in file order.

    A sidecar is appended to while its trace file is overwritten. A record for a turn already
    completed (``message_index`` not null) earlier in the sidecar means the conversation went
    back to that turn: the notebook was run again into the same cache (back to turn 0), or a
    turn was answered again. The earlier records of that turn and of later turns are dropped;
    those of earlier turns stay.
    """
    top = -1  # highest completed turn among the records kept
    kept: list[dict[str, Any]] | None = None  # None: every record so far
    lo, hi = INT_LO, INT_HI
    for i, r in enumerate(records):
        t = r.get("turn")
        if t.__class__ is not int or not lo < t < hi:  # _turn(r), inlined
            t = as_int(t)
        if t is None:
            if kept is not None:
                kept.append(r)
            continue
        if t <= top:
            kept = [x for x in (records[:i] if kept is None else kept) if not ((tx := _turn(x)) is not None and tx >= t)]
            top = max((tx for x in kept if (tx := _turn(x)) is not None and x.get("message_index") is not None), default=-1)
        if kept is not None:
            kept.append(r)
        if t > top and r.get("message_index") is not None:
            top = t
    return records if kept is None else kept


def config_trace_id(source: Source, config: dict[str, Any]) -> str:
    """The trace id of a standalone file: the config's ``trace_id`` when the path ends with it."""
    tid = config.get("trace_id")
    if source.standalone and isinstance(tid, str) and tid:
        base = source.path or source.sidecar or ""
        stem = base[:-5] if base.endswith(".json") else base[: -len(SIDECAR_SUFFIX)]
        if Path(stem).as_posix().endswith("/" + tid.strip("/")) or Path(stem).name == tid:
            return tid
    return source.trace_id
