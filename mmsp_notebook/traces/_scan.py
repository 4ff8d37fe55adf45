"""Scanning a trace folder for :func:`mmsp_notebook.traces.sync`: which traces are new, changed,
deleted or unchanged since the manifest was written.

A trace is unchanged while the size and change time of its trace file and sidecar are (plus a
content hash for files changed within :data:`~._manifest.RACY_S` of a scan). The change time is
the later of the file's mtime and ctime: a file copied with its mtime kept (``cp -p``, ``rsync -a``,
a synced folder) or renamed over another has a new ctime, which no program can set, so a new
content of the same size and mtime is seen too (a ``chmod`` converts a trace again, harmlessly). While no directory's mtime
changed since the last full listing, no file was added, removed or renamed, and the manifest's list
of files is the list (read from the scan's copy of the records, ``_snapshot``, when the sync that
wrote it ended; else from the manifest); otherwise the directories are listed again (``_io.iter_sources``, as the
loaders find traces).

The scan goes a window of traces at a time and writes what it finds into the manifest's work
tables (``todo``: the traces to convert or remove; ``seen``; ``settled``): its memory is a window
and the list of directories, whatever the number of traces.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._errors import TraceError
from ..core.store import MAX_FILE_SIZE, read_regular
from ._io import iter_sources
from ._manifest import RACY_S, Manifest
from ._snapshot import Draft, Snapshot

__all__ = ["Scan", "scan_sources", "NEW", "CHANGED", "DELETED", "AGAIN"]

#: states of a trace in the manifest's ``todo`` table
NEW, CHANGED, DELETED, AGAIN = 0, 1, 2, 3
#: traces looked at a time
WINDOW = 4096


def _content_hash(*paths: str | None, max_size: int = MAX_FILE_SIZE) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in paths:
        h.update(b"\x00")
        if p is None:
            continue
        try:  # the loaders' read: never blocking, regular files only (a FIFO would hold the sync for ever)
            raw, _ = read_regular(p, max_size)
        except TraceError as exc:
            h.update(exc.reason.encode())
            continue
        h.update(raw)
    return h.hexdigest()


@dataclass
class Scan:
    """What the scan found (the traces themselves are in the manifest's ``todo`` table)."""

    new: int
    changed: int
    deleted: int
    unchanged: int
    dirs: dict[str, int] | None  # directory -> mtime, after a full listing
    settled: int  # unchanged traces whose content hash is no longer needed
    #: after a full listing, its own skip notes (None: not listed): traces whose file names are not
    #: UTF-8, directories that could not be listed (as the loaders report them)
    unnamed: list[dict[str, str]] | None = None


#: why a trace whose path is not UTF-8 is left out of a dataset
NOT_UTF8 = ("file name is not valid UTF-8 (the manifest and the Parquet files hold text): rename it to "
            "sync it (the loaders read it, with U+FFFD in its trace id)")


def _utf8(*names: str | None) -> bool:
    """Whether every name can be stored as text (a path read from the file system holds surrogate
    escapes for the bytes of a name that is not UTF-8)."""
    for n in names:
        if n is not None and not n.isascii():
            try:
                n.encode()
            except UnicodeEncodeError:
                return False
    return True


def shown(path: str) -> str:
    """A path that is not UTF-8 with its odd bytes written as ``\\xNN`` (text a note can hold)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _walk_dirs(src: str, racy_ns: int, skip: set[tuple[int, int]]) -> dict[str, int]:
    """Every directory below ``src`` (through links, each real one once) with its mtime; -1 for
    one modified within the racy window, so that the next scan does not trust it. ``skip`` (the
    dataset's own directories by device and inode, should they lie below ``src``) change with
    every sync and are left out.
    None are returned when a directory's name is not UTF-8: its mtime cannot be kept (the
    manifest holds text), so every scan lists the folder again (a change in it is seen, and a
    link to it, by a name that is, is not passed over as a directory seen before)."""
    out: dict[str, int] = {}
    seen = set(skip)
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
        if not _utf8(d):
            return {}
        out[d] = st.st_mtime_ns if st.st_mtime_ns < racy_ns else -1
        for e in entries:
            try:
                if e.is_dir():
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


class _Window:
    """Classifies the traces of one window against what the manifest recorded of them."""

    def __init__(self, m: Manifest, racy_ns: int, max_size: int = MAX_FILE_SIZE) -> None:
        self.m, self.racy_ns, self.max_size = m, racy_ns, max_size
        self.new = self.changed = self.unchanged = self.settled = 0

    def add(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Rows of (trace id, trace file, sidecar, then as recorded: t_size, t_mtime, s_size,
        s_mtime, content hash; t_size None for a trace never converted)."""
        racy_ns, stat = self.racy_ns, os.stat
        todo: list[tuple[object, ...]] = []
        settled: list[str] = []
        unchanged = 0
        for r in rows:
            tid, path, sidecar = r[0], r[1], r[2]
            a = b = c = d = -1
            if path is not None:  # size and mtime, -1 when missing (once per file of the corpus: inlined)
                try:
                    st = stat(path)
                    a, b = st.st_size, max(st.st_mtime_ns, st.st_ctime_ns)
                except OSError:
                    pass
            if sidecar is not None:
                try:
                    st = stat(sidecar)
                    c, d = st.st_size, max(st.st_mtime_ns, st.st_ctime_ns)
                except OSError:
                    pass
            racy = b >= racy_ns or d >= racy_ns
            known = r[3] is not None
            same = known and r[3] == a and r[4] == b and r[5] == c and r[6] == d
            if same and r[7] is None and not racy:
                unchanged += 1  # the common case
                continue
            digest = _content_hash(path, sidecar, max_size=self.max_size) if racy or (known and r[7] is not None) else None
            if not known:
                self.new += 1
                state = NEW
            elif same and (r[7] is None or r[7] == digest):
                unchanged += 1
                if r[7] is not None and not racy:
                    settled.append(tid)
                continue
            else:
                self.changed += 1
                state = CHANGED
            todo.append((tid, state, path, sidecar, a, b, c, d, digest if racy else None))
        self.unchanged += unchanged
        if todo:
            self.m.put_todo(todo)
        if settled:
            self.m.put_settled(settled)
            self.settled += len(settled)


def _from_copy(snap: Snapshot, m: Manifest, w: _Window) -> None:
    """The known traces against the scan's copy of their records (``_snapshot``): every file is
    stat'ed and compared in NumPy; the few traces that differ, or keep a content hash, or were
    modified within the racy window, go through :meth:`_Window.add` with their records as the
    manifest holds them."""
    import numpy as np

    racy_ns, stat = w.racy_ns, os.stat
    none = (None,) * 5
    for tids, paths, sidecars, rec in snap.windows(WINDOW):
        got = array("q")
        put = got.append
        for path, sidecar in zip(paths, sidecars):  # (once per file of the corpus: inlined)
            try:
                st = stat(path)  # type: ignore[arg-type]  # (a trace always has its file in a copy)
                put(st.st_size)
                put(max(st.st_mtime_ns, st.st_ctime_ns))
            except (OSError, TypeError):
                put(-1)
                put(-1)
            if sidecar is None:  # (recorded as missing: -1)
                put(-1)
                put(-1)
                continue
            try:
                st = stat(sidecar)
                put(st.st_size)
                put(max(st.st_mtime_ns, st.st_ctime_ns))
            except OSError:
                put(-1)
                put(-1)
        now = np.frombuffer(got, np.int64).reshape(-1, 4)
        odd = ((now != rec[:, :4]).any(axis=1) | (rec[:, 4] != 0) | (now[:, 1] >= racy_ns) | (now[:, 3] >= racy_ns))
        which = np.flatnonzero(odd).tolist()
        w.unchanged += len(tids) - len(which)
        if which:
            ids = [tids[i] for i in which]
            known = m.known(ids)
            w.add([(tids[i], paths[i], sidecars[i], *known.get(tids[i], none)) for i in which])


def scan_sources(src: str, pattern: str, m: Manifest, started: float, skip: Iterable[str] = (),
                 copy: Snapshot | None = None, draft: Draft | None = None, max_size: int = MAX_FILE_SIZE) -> Scan:
    """The traces under ``src`` against the manifest: new, changed, deleted, unchanged, written to
    the manifest's work tables a window at a time.

    When no directory changed since the last full scan the manifest's list of files is the
    list (only their stats are taken); else the directories are listed again, after their
    mtimes are taken (a file added meanwhile changes them again). A directory that cannot be
    listed is reported as the loaders report it, and every scan lists the folder again until it
    can be (made readable, its mtime need not change). Nothing under the directories
    ``skip`` (the dataset's, when they are inside ``src``; by whatever path, links included) is
    taken for a trace."""
    racy_ns = int((started - RACY_S) * 1e9)
    m.begin_scan()
    w = _Window(m, racy_ns, max_size)
    dirs: dict[str, int] | None = None
    unnamed: list[dict[str, str]] | None = None
    deleted = 0
    if _same_dirs(m.dirs()):
        if copy is not None:
            _from_copy(copy, m, w)
        else:
            for page in m.known_pages(WINDOW):
                w.add(page)
                if draft is not None:
                    draft.add(page)
    else:
        skipped = set()
        for d in skip:
            try:
                st = os.stat(d)
            except OSError:
                continue
            skipped.add((st.st_dev, st.st_ino))
        dirs = _walk_dirs(src, racy_ns, skipped)
        batch: dict[str, tuple[str | None, str | None]] = {}
        unnamed = []
        unlisted: list[dict[str, str]] = []
        for found in iter_sources(src, pattern, skipped, unlisted):
            for s in found:
                if not _utf8(s.trace_id, s.path, s.sidecar):
                    unnamed.append({"path": shown(s.path or s.sidecar or s.trace_id), "reason": NOT_UTF8})
                    continue
                batch.setdefault(s.trace_id, (s.path, s.sidecar))  # (a trace id named twice: the first)
            if len(batch) >= WINDOW:
                _listed(m, w, batch, draft)
                batch = {}
        _listed(m, w, batch, draft)
        deleted = m.unseen(DELETED)
        if unlisted:  # reported as the loaders do; the listing is not trusted while one stays unreadable
            unnamed += [{"path": shown(u["path"]), "reason": u["reason"]} for u in unlisted]
            dirs = {}
    return Scan(w.new, w.changed, deleted, w.unchanged, dirs, w.settled, unnamed)


def _listed(m: Manifest, w: _Window, batch: dict[str, tuple[str | None, str | None]], draft: Draft | None) -> None:
    if not batch:
        return
    ids = list(batch)  # (a trace id is one directory's: no window repeats another's)
    m.put_seen(ids)
    known = m.known(ids)
    if draft is not None and known:
        draft.add_known(m, list(known))
    none = (None,) * 5
    w.add((t, *batch[t], *known.get(t, none)) for t in ids)
