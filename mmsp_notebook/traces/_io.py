"""Finding the traces under a path, and choosing the records of a sidecar's latest run.

Reading and parsing files is the trace store's (:mod:`mmsp_notebook.core.store`: ``read_trace``,
``read_sidecar``); nothing here opens a file (only directories, to list them) or writes anywhere.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import OptionError, OptionTypeError, TraceNotFoundError
from ..core.fields import INT_HI, INT_LO, as_int
from ..core.store import SIDECAR_SUFFIX, completed, tracer_path
from ._walk import Pattern, walk_dirs

__all__ = ["Source", "collect_sources", "find_sources", "iter_sources", "sources_in", "latest_run", "config_trace_id", "deeper_match"]

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
    #: the directory listing said the trace file / the sidecar is a regular file (not a link)
    listed: bool = False
    sidecar_listed: bool = False


_TRACE_ID = operator.attrgetter("trace_id")


def _patterns(pattern: str) -> tuple[Pattern, Pattern]:
    """The pattern of trace files and that of their sidecars (compiled once a pattern; one that is
    no text is refused as :class:`~._walk.Pattern` refuses it)."""
    return _compiled(pattern) if isinstance(pattern, str) else (Pattern(pattern), Pattern(pattern))


@functools.lru_cache(maxsize=16)
def _compiled(pattern: str) -> tuple[Pattern, Pattern]:
    return Pattern(pattern), Pattern(_sidecar_pattern(pattern))


def _sidecar_pattern(pattern: str) -> str:
    if pattern.endswith(".json"):
        return pattern[:-5] + SIDECAR_SUFFIX
    return pattern


def _expand(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    elif not isinstance(paths, Iterable):
        raise OptionTypeError(f"give a trace directory or file (or a list of them), not {type(paths).__name__} {paths!r}")
    out = []
    for p in paths:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise OptionTypeError(f"a path in the list is {type(p).__name__} {p!r}, not a trace directory or file")
        out.append(os.path.expanduser(os.fsdecode(p)))  # (a leading ~ is the home directory, as for pandas)
    if any(not p for p in out):  # ("" would be this process's working directory, walked whole)
        raise OptionError("an empty path: give a trace directory or file (\".\" for the working directory)")
    return out


def collect_sources(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    pattern: str = "**/*.json",
) -> list[Source]:
    """The traces under ``paths`` (see :func:`find_sources`), without the directories that could
    not be listed."""
    return find_sources(paths, pattern)[0]


def find_sources(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    pattern: str = "**/*.json",
) -> tuple[list[Source], list[dict[str, str]]]:
    """Find the traces under ``paths`` (directories, files, or a list of both).

    A directory is walked once (:func:`~mmsp_notebook.traces._walk.walk_dirs`: each real directory
    entered once, link loops included) and its entries matched with ``pattern`` (recursive
    ``**`` allowed); the trace id of a file found there is its path relative to that directory
    without ``.json``. Tracer companions (``.txt``) and timing sidecars are never taken for
    traces; a sidecar whose trace file is missing (every turn of that trace failed) becomes a
    sidecar-only source. A path given on its own that is not a directory is a trace whatever its
    name and kind (reading it says what is wrong with a FIFO or a device); a ``.timing.jsonl``
    given on its own stands for its trace.

    Returns:
        The sources, and the directories that could not be listed (``{"path", "reason"}``).

    Raises:
        TraceNotFoundError: a given path does not exist, or is a broken link (a
            ``FileNotFoundError`` too).
        OptionError: ``pattern`` is not a glob relative to the directory.
    """
    out: list[Source] = []
    problems: list[dict[str, str]] = []
    seen: set[str] = set()
    entered: set[tuple[int, int]] = set()  # directories walked: a tree given twice (or by a link) is read once
    for raw in _expand(paths):
        p = os.path.abspath(raw)
        if os.path.isdir(p):
            problems += _from_directory(p, *_patterns(pattern), out, seen, entered)
        elif os.path.lexists(p):
            if not os.path.exists(p) and os.path.islink(p):
                reason = f"broken symbolic link: to {os.readlink(p)}"
                raise TraceNotFoundError(f"{raw}: {reason}", path=raw, reason=reason)
            src = _given_file(p)
            key = src.path or src.sidecar or p
            if key not in seen:
                seen.add(key)
                out.append(src)
        else:
            raise TraceNotFoundError(f"no such trace file or directory: {raw}", path=raw,
                                     reason="no such trace file or directory")
    return out, problems


def _from_directory(root: str, pattern: Pattern, side_pattern: Pattern, out: list[Source], seen: set[str],
                    entered: set[tuple[int, int]] | None = None) -> list[dict[str, str]]:
    """Append the sources found under ``root`` to ``out`` (sorted by trace id); returns the
    directories that could not be listed."""
    unlisted: list[dict[str, str]] = []
    start = len(out)
    for found, regular in walk_dirs(root, pattern, unlisted, entered):  # (a trace and its sidecar share a directory)
        out += _pair(root, found, regular, pattern, side_pattern, seen)
    out[start:] = sorted(out[start:], key=_TRACE_ID)
    return unlisted


def iter_sources(root: str, pattern: str = "**/*.json", skip: Iterable[tuple[int, int]] = (),
                 problems: list[dict[str, str]] | None = None) -> Iterator[list[Source]]:
    """The traces under the directory ``root``, as :func:`find_sources` finds them, one directory at
    a time (each list sorted by trace id; the directories in breadth-first order). A trace file
    and its sidecar are always in one directory, so each list is complete. Directories that
    cannot be listed are passed over (appended to ``problems`` as :func:`find_sources` reports
    them), and so are those in ``skip`` (device and inode: whatever path reaches them). Memory is
    one directory's entries, not the tree's."""
    root = os.path.abspath(root)
    pat, side_pat = _patterns(pattern)
    for found, regular in walk_dirs(root, pat, problems if problems is not None else [], set(skip)):
        yield sorted(_pair(root, found, regular, pat, side_pat, set()), key=_TRACE_ID)


def sources_in(root: str, pattern: str, files: list[str], regular: set[str]) -> list[Source]:
    """The traces of one directory's entries that are not directories (``files``; ``regular``:
    those the listing says are regular files), as :func:`iter_sources` finds them in it (sorted
    by trace id)."""
    pat, side_pat = _patterns(pattern)
    return sorted(_pair(os.path.abspath(root), files, regular, pat, side_pat, set()), key=_TRACE_ID)


def deeper_match(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], pattern: str) -> str | None:
    """For a ``pattern`` that found nothing: ``**/`` + it when that finds a trace file under one of
    the given directories (the walk stops at the first directory holding one), else ``None``."""
    if pattern.startswith("**/"):
        return None
    deeper = "**/" + pattern
    for raw in _expand(paths):
        root = os.path.abspath(raw)
        if os.path.isdir(root) and any(src.path for batch in iter_sources(root, deeper) for src in batch):
            return deeper
    return None


def _pair(root: str, found: list[str], regular: set[str], pattern: Pattern, side_pattern: Pattern,
          seen: set[str]) -> list[Source]:
    """The sources of files found under ``root``: trace files matching ``pattern``, each with its
    sidecar, and sidecars without a trace file; paths in ``seen`` (found before) are left out."""
    n = len(root) + 1
    slash = os.sep == "/"
    traces: list[tuple[str, str]] = []  # (path, path relative to root)
    side: dict[str, str] = {}
    match, side_match, n_side = pattern.matcher(), side_pattern.matcher(), len(SIDECAR_SUFFIX)
    for f in found:
        rel = f[n:] if slash else f[n:].replace(os.sep, "/")
        if f.endswith(SIDECAR_SUFFIX):
            if side_match(rel):
                side[f] = rel
        elif match(rel) and not f.endswith(_COMPANION_SUFFIXES):
            traces.append((f, rel))
    out: list[Source] = []
    put, add = out.append, seen.add
    for f, rel in traces:  # (once per trace of the folder: inlined)
        if f in seen:
            continue
        add(f)
        if rel.endswith(".json"):
            sc = f[:-5] + SIDECAR_SUFFIX
            if sc in side:
                add(sc)  # (a later path reaching it again does not take it for sidecar-only)
                del side[sc]
                put(Source(rel[:-5], f, sc, False, f in regular, sc in regular))
            else:
                put(Source(rel[:-5], f, None, False, f in regular))
        else:
            put(Source(rel, f, None, False, f in regular))
    if side:  # sidecars without a trace file of their name
        by_path = {src.path: src for src in out}
        for s in sorted(side):
            if s[:-n_side] + ".json" in seen or s in seen:
                continue
            tid = side[s][:-n_side]
            # mmsp's Tracer names the file Path(trace_id).with_suffix(".json"): a trace id with
            # a dot in its last part ("run_1.5") lands in "run_1.json"
            dotted = tracer_path(tid, root)
            twin_src = by_path.get(str(dotted)) if dotted is not None else None
            if twin_src is not None and twin_src.sidecar is None:
                twin_src.sidecar = s
                twin_src.sidecar_listed = s in regular
                seen.add(s)
                continue
            seen.add(s)
            out.append(Source(tid, None, s, sidecar_listed=s in regular))
    return out


def _given_file(p: str) -> Source:
    """The source of a path given on its own (a file, or a FIFO, a device... that reading refuses)."""
    if p.endswith(SIDECAR_SUFFIX):
        twin = p[: -len(SIDECAR_SUFFIX)] + ".json"
        path = twin if os.path.isfile(twin) else None
        sc: str | None = p
        key = path or p
    else:
        path = p
        cand = (p[:-5] if p.endswith(".json") else p) + SIDECAR_SUFFIX
        sc = cand if os.path.lexists(cand) else None
        key = p
    base = os.path.basename(key)
    if base.endswith(SIDECAR_SUFFIX):
        base = base[: -len(SIDECAR_SUFFIX)]
    elif base.endswith(".json"):
        base = base[:-5]
    return Source(base, path, sc, standalone=True)


def _turn(r: dict[str, Any]) -> int | None:
    t = r.get("turn")
    if t.__class__ is not int or not INT_LO < t < INT_HI:
        t = as_int(t)
    return t


def latest_run(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that belong to the conversation the trace file holds now, in file order.

    A sidecar is appended to while its trace file is overwritten. A completed record
    (:func:`~mmsp_notebook.core.store.completed`) for a turn already completed earlier in the sidecar means the
    conversation went back to that turn: the notebook was run again into the same cache (back to
    turn 0), or a turn was answered again. The earlier records of that turn and of later turns are
    dropped (but the failed attempts at that turn since the last completed record: they are the
    new run's); those of earlier turns stay. A failed record alone goes back nowhere: the Tracer
    writes no trace file for a failed turn, so the file still holds the conversation before it
    (a re-run whose first turn failed), which keeps its records; the failed one is kept too.
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
        mi = r.get("message_index")  # completed(r), inlined: an int is the usual case
        done = (mi.__class__ is int and lo < mi < hi or as_int(mi) is not None) and r.get("status") == "complete"
        if t <= top and done:
            kept = _back_to(records[:i] if kept is None else kept, t)
            top = max((tx for x in kept if (tx := _turn(x)) is not None and completed(x)), default=-1)
        if kept is not None:
            kept.append(r)
        if t > top and done:
            top = t
    return records if kept is None else kept


def _back_to(records: list[dict[str, Any]], t: int) -> list[dict[str, Any]]:
    """``records`` without those of turn ``t`` and later turns, but the failed attempts at turn
    ``t`` after the last completed record (the run that went back to ``t`` made them)."""
    last = max((j for j, x in enumerate(records) if completed(x)), default=-1)
    return [x for j, x in enumerate(records)
            if not ((tx := _turn(x)) is not None and tx >= t
                    and not (j > last and tx == t and not completed(x)))]


def config_trace_id(source: Source, config: dict[str, Any]) -> str:
    """The trace id of a standalone file: the config's ``trace_id`` when the path ends with it."""
    tid = config.get("trace_id")
    if source.standalone and isinstance(tid, str) and tid:
        base = source.path or source.sidecar or ""
        stem = base[:-5] if base.endswith(".json") else base[: -len(SIDECAR_SUFFIX)]
        if Path(stem).as_posix().endswith("/" + tid.strip("/")) or Path(stem).name == tid:
            return tid
    return source.trace_id
