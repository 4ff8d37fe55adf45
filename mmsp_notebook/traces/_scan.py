"""Scanning a trace folder for :func:`mmsp_notebook.traces.sync`: which traces are new, changed,
deleted or unchanged since the manifest was written.

A trace is unchanged while the size and mtime of its trace file and sidecar are (plus a content
hash for files modified within :data:`~._manifest.RACY_S` of a scan). While no directory's mtime
changed since the last full listing, no file was added, removed or renamed, and the manifest's list
of files is the list; otherwise the loaders' ``collect_sources`` lists them again.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from ._io import collect_sources
from ._manifest import RACY_S, Manifest, Signature

__all__ = ["Scan", "scan_sources"]


def _content_hash(*paths: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in paths:
        h.update(b"\x00")
        if p is None:
            continue
        try:
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        except OSError as exc:
            h.update(repr(exc).encode())
    return h.hexdigest()


@dataclass
class Scan:
    sources: dict[str, tuple[str | None, str | None]]  # trace id -> (trace file, sidecar)
    sigs: dict[str, Signature]  # of the traces not unchanged
    hashes: dict[str, str | None]
    new: list[str]
    changed: list[str]
    deleted: list[str]
    unchanged: int
    dirs: dict[str, int] | None  # directory -> mtime, after a full scan
    settled: list[str]  # unchanged traces whose content hash is no longer needed


def _walk_dirs(src: str, racy_ns: int, skip: str) -> dict[str, int]:
    """Every directory below ``src`` (through links, each real one once) with its mtime; -1 for
    one modified within the racy window, so that the next scan does not trust it. ``skip`` (the
    dataset's own folder, should it lie below ``src``) changes with every sync and is left out."""
    out: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    stack = [src]
    while stack:
        d = stack.pop()
        try:
            st = os.stat(d)
            entries = list(os.scandir(d))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        out[d] = st.st_mtime_ns if st.st_mtime_ns < racy_ns else -1
        for e in entries:
            try:
                if e.is_dir() and e.path != skip:
                    stack.append(e.path)
            except OSError:
                pass
    return out


def _same_dirs(dirs: dict[str, int]) -> bool:
    """Whether no directory changed since the last full scan (no file added, removed, renamed)."""
    if not dirs:
        return False
    for d, mtime in dirs.items():
        try:
            if os.stat(d).st_mtime_ns != mtime:
                return False
        except OSError:
            return False
    return True


def _size_mtime(path: str | None) -> tuple[int, int]:
    """A file's size and mtime (ns); -1, -1 for no file or one that cannot be stat'ed."""
    if path is None:
        return -1, -1
    try:
        st = os.stat(path)
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def scan_sources(src: str, pattern: str, m: Manifest, started: float, skip: str = "") -> Scan:
    """The traces under ``src`` against the manifest: new, changed, deleted, unchanged.

    When no directory changed since the last full scan the manifest's list of files is the
    list (only their stats are taken); else the loaders' ``collect_sources`` finds them again,
    after the directories' mtimes are taken (a file added meanwhile changes them again)."""
    racy_ns = int((started - RACY_S) * 1e9)
    known = m.signatures()
    dirs: dict[str, int] | None = None
    if _same_dirs(m.dirs()):
        found = [(tid, v[3], v[4]) for tid, v in known.items()]
    else:
        dirs = _walk_dirs(src, racy_ns, skip)
        found = [(s.trace_id, s.path, s.sidecar) for s in collect_sources(src, pattern)]
    sources: dict[str, tuple[str | None, str | None]] = {}
    sigs: dict[str, Signature] = {}
    hashes: dict[str, str | None] = {}
    new: list[str] = []
    changed: list[str] = []
    settled: list[str] = []
    unchanged = 0
    found.reverse()
    while found:  # consumed as it goes, as ``known`` is: the scan's peak memory is one copy of the list
        tid, path, sidecar = found.pop()
        sources[tid] = (path, sidecar)
        a, b = _size_mtime(path)
        c, d = _size_mtime(sidecar)
        old = known.pop(tid, None)
        racy = b >= racy_ns or d >= racy_ns
        if old is not None and old[2] is None and not racy and old[1] == f"{a} {b} {c} {d}":
            unchanged += 1  # the common case, decided on one text
            continue
        sigs[tid] = (a, b, c, d)
        digest = _content_hash(path, sidecar) if racy or (old is not None and old[2] is not None) else None
        if racy:
            hashes[tid] = digest
        if old is None:
            new.append(tid)
        elif old[1] == f"{a} {b} {c} {d}" and (old[2] is None or old[2] == digest):
            unchanged += 1
            if old[2] is not None and not racy:
                settled.append(tid)
        else:
            changed.append(tid)
    deleted = sorted(known)  # known and not found
    return Scan(sources, sigs, hashes, new, changed, deleted, unchanged, dirs, settled)
