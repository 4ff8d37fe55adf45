"""Scanning a trace folder for :func:`mmsp_notebook.traces.sync`: which traces are new, changed,
deleted or unchanged since the manifest was written.

A trace is unchanged while the size and change time of its trace file and sidecar are (plus a
content hash for files changed within :data:`~._manifest.RACY_S` of a scan). The change time is
the later of the file's mtime and ctime: a file copied with its mtime kept (``cp -p``, ``rsync -a``,
a synced folder) or renamed over another has a new ctime, which no program can set, so a new
content of the same size and mtime is seen too (a ``chmod`` converts a trace again, harmlessly).

While no directory's change time changed since the last full listing (the later of its mtime and
ctime, as for a file: a ``chmod`` that makes it unreadable changes its ctime only), no file was
added, removed or renamed, and the manifest's list of files is the list (read from the scan's copy
of the records, ``_snapshot``, when the sync that wrote it ended; else from the manifest). When
some directories' change times changed, only those are listed again, as the loaders list a
directory (``_io.sources_in``), with the directories added in them (and in those, recorded from
then on); the traces found with the files the copy has for them are compared with it, as every
other trace is; those found with other files (new, a sidecar added or removed) are taken from the
listing, and those not found, or in a directory gone, are deleted. They are listed a batch at a
time, each batch compared with the copy once it holds :data:`PARTIAL` traces, so that however
many directories changed, the folder is not listed whole for it. Otherwise (a link to a
directory, a second way into one such as a bind mount, a name that is not UTF-8, a directory that
cannot be listed) the whole folder is listed again (``_io.iter_sources``, as the loaders find
traces); so it always is while a directory is reached by a link or by a second way
(``meta.links``, from the last full listing: which way the loaders' breadth-first walk takes into
it decides its traces' ids).

The scan goes a window of traces at a time and writes what it finds into the manifest's work
tables (``todo``: the traces to convert or remove; ``seen``; ``settled``): its memory is a window
and the list of directories, whatever the number of traces (and, listing some directories, a
batch of what they hold: :data:`PARTIAL` traces and one directory's at most).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat as stat_mode
from array import array
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

from .._errors import TraceError
from ..core.store import MAX_FILE_SIZE, read_regular
from ._io import iter_sources, sources_in
from ._manifest import RACY_S, Manifest
from ._snapshot import DamagedCopy, Draft, Snapshot
from ._walk import Pattern, list_dir

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
    dirs: dict[str, int] | None  # directory -> change time, after a full listing
    settled: int  # unchanged traces whose content hash is no longer needed
    #: after a full listing, its own skip notes (None: not listed): traces whose file names are not
    #: UTF-8, directories that could not be listed (as the loaders report them)
    unnamed: list[dict[str, str]] | None = None
    #: after a listing: whether a directory was reached by a link, or by a second way (then every
    #: listing is a full one: which way the loaders take into it decides its traces' ids)
    linked: bool | None = None
    #: the scan's copy was found damaged (the manifest was read instead)
    damaged: bool = False


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


def _walk_dirs(src: str, racy_ns: int, skip: set[tuple[int, int]]) -> tuple[dict[str, int], bool]:
    """Every directory below ``src`` (through links, each real one once) with its change time; -1 for
    one modified within the racy window, so that the next scan does not trust it. ``skip`` (the
    dataset's own directories by device and inode, should they lie below ``src``) change with
    every sync and are left out.
    With them, whether a directory was reached by a link or by a second way (a bind mount).
    None are returned when a directory's name is not UTF-8: its mtime cannot be kept (the
    manifest holds text), so every scan lists the folder again (a change in it is seen, and a
    link to it, by a name that is, is not passed over as a directory seen before)."""
    out: dict[str, int] = {}
    seen = set(skip)
    linked = False
    stack = [src]
    while stack:
        d = stack.pop()
        try:
            st = os.stat(d)
            entries = list(os.scandir(d))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            linked = linked or (st.st_dev, st.st_ino) not in skip
            continue
        seen.add((st.st_dev, st.st_ino))
        if not _utf8(d):
            return {}, linked
        changed = max(st.st_mtime_ns, st.st_ctime_ns)
        out[d] = changed if changed < racy_ns else -1
        for e in entries:
            try:
                if e.is_dir():
                    stack.append(e.path)
                    linked = linked or e.is_symlink()
            except OSError:
                pass
    return out, linked


def _changed_dirs(dirs: dict[str, int]) -> tuple[dict[str, int], set[str], set[tuple[int, int]]] | None:
    """The directories of the last full listing whose change time changed (a file or directory
    added, removed or renamed in them, or their mode changed), with it now (taken before they are
    listed again); those gone (or no directory any more); and the device and inode of those still
    there. None when there was no listing, or a directory cannot be looked at (a full listing
    reports it)."""
    if not dirs:
        return None
    out: dict[str, int] = {}
    gone: set[str] = set()
    inodes: set[tuple[int, int]] = set()
    for d, mtime in dirs.items():
        try:
            st = os.stat(d)
        except (FileNotFoundError, NotADirectoryError):
            gone.add(d)
            continue
        except OSError:
            return None
        if not stat_mode.S_ISDIR(st.st_mode):
            gone.add(d)
            continue
        inodes.add((st.st_dev, st.st_ino))
        now = max(st.st_mtime_ns, st.st_ctime_ns)
        if now != mtime:
            out[d] = now
    return out, gone, inodes


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


def _from_copy(snap: Snapshot, m: Manifest, w: _Window, within: Container[str] = (),
               listed: dict[str, tuple[str | None, str | None]] | None = None,
               changed: Container[str] = (), outside: bool = True) -> set[str]:
    """The known traces against the scan's copy of their records (``_snapshot``): every file is
    stat'ed and compared in NumPy; the few traces that differ, or keep a content hash, or were
    modified within the racy window, go through :meth:`_Window.add` with their records as the
    manifest holds them. Of the traces of the directories ``within`` (listed again), those the
    listing ``listed`` found with the same trace file and sidecar are compared so too (and taken
    out of ``listed``); the others are left to the listing: returned. Those of the other
    directories ``changed`` are passed over (another call lists them), and those of every other
    directory are compared only when ``outside``."""
    import numpy as np

    def by_dir(d: str) -> int:
        return 2 if d in within else 1 if outside and d not in changed else 0

    racy_ns, stat = w.racy_ns, os.stat
    aside: set[str] = set()
    listed = {} if listed is None else listed
    split = within or changed or not outside
    for tids, paths, sidecars, rec, inside in snap.windows(WINDOW, by_dir if split else None):
        if inside is not None and inside.any():
            kept = np.ones(len(tids), bool)
            for i in np.flatnonzero(inside).tolist():
                if listed.get(tids[i]) == (paths[i], sidecars[i]):  # listed as the copy has it: compared here
                    del listed[tids[i]]
                else:
                    aside.add(tids[i])
                    kept[i] = False
            if not kept.all():
                tids = list(itertools.compress(tids, kept))
                paths, sidecars = list(itertools.compress(paths, kept)), list(itertools.compress(sidecars, kept))
                rec = rec[kept]
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
        if which:  # compared with the manifest's records, which must name the same files as the copy
            records = {r[0]: r for r in m.records([tids[i] for i in which])}
            rows = []
            for i in which:
                r = records.get(tids[i])
                if r is None or r[1] != paths[i] or r[2] != sidecars[i]:
                    raise DamagedCopy(f"{snap.path}: the trace {tids[i]!r} is not recorded so in the manifest")
                rows.append(r)
            w.add(rows)
    return aside


#: traces held at most of the directories listed again (a scan lists them a batch of directories
#: at a time, each batch then compared with the copy; a batch ends past this many). Of those they
#: hold, the traces the copy has with the same files are compared with it as every other trace,
#: so listing most directories again costs their listing and a pass of the copy a batch
PARTIAL = 65536


def _listing(d: str, recorded: dict[str, int], skipped: set[tuple[int, int]], inodes: set[tuple[int, int]]
             ) -> tuple[list[str], set[str], list[str]] | None:
    """The entries of the directory ``d`` that are not directories, those of them the listing says
    are regular files (``_walk.list_dir``, as the loaders' walk lists a directory), and the
    directories in it the last full listing did not record; None when it holds a link to a
    directory, or a second way into one (``inodes``: those known), or a name that is not UTF-8, or
    cannot be listed (a full listing decides, and reports)."""
    try:
        files, regular, dirs = list_dir(d)
    except OSError:
        return None
    new = []
    for e in dirs:
        if e.is_symlink():
            return None
        if e.path in recorded:
            continue
        try:
            st = e.stat()
        except OSError:
            return None
        key = (st.st_dev, st.st_ino)
        if key in skipped:
            continue
        if key in inodes or not _utf8(e.path):
            return None
        new.append(e.path)
    return files, regular, new


def _walked(root: str, d: str, pat: Pattern) -> bool:
    """Whether the loaders' walk enters the directory ``d`` (below ``root``, or ``root``)."""
    if d == root:
        return True
    parts = d[len(root) + 1:].split(os.sep)
    if pat.depth is not None and len(parts) + 1 > pat.depth:
        return False
    return pat.hidden or not any(p.startswith(".") for p in parts)


def _partial(src: str, pattern: str, m: Manifest, w: _Window, copy: Snapshot, recorded: dict[str, int],
             changed: dict[str, int], gone: set[str], inodes: set[tuple[int, int]],
             skipped: set[tuple[int, int]]) -> Scan | None:
    """A scan that lists again only the directories whose change time changed (files were added,
    removed or renamed in them), with the directories added in them (listed whole: no link in
    them, no second way into a directory), takes the traces of those ``gone`` for deleted, and
    the other traces from the copy; None when a full listing is needed (what it wrote to the work
    tables meanwhile is the caller's to drop). The directories are listed a batch at a time, each
    batch compared with the copy when it holds :data:`PARTIAL` traces (the first comparison takes
    the traces of the directories that did not change as well)."""
    root = os.path.abspath(src)
    if os.path.dirname(root) == root:  # a file system's root ("/", "D:\\"): its entries are not root + sep + name
        return None
    if root in gone or not all(d == root or d.startswith(root + os.sep) for d in (*changed, *gone)):
        return None
    pat = Pattern(pattern)
    every = {*changed, *gone}  # (what the comparisons of the batches pass over)
    unnamed = [n for n in m.meta().get("unnamed") or [] if os.path.dirname(n["path"]) not in every]
    listed: dict[str, tuple[str | None, str | None]] = {}
    batch: set[str] = set(gone)  # (nothing listed: what the copy has in them is deleted)
    made: dict[str, int] = {}  # directories added, with their change time
    order = sorted(changed)
    gone_n, first, k = 0, True, 0
    while k < len(order):
        d = order[k]
        k += 1
        batch.add(d)
        if d not in changed:  # added: its change time taken before it is listed, as a full listing does
            try:
                st = os.stat(d)
            except OSError:
                return None
            inodes.add((st.st_dev, st.st_ino))
            made[d] = max(st.st_mtime_ns, st.st_ctime_ns)
        if _walked(root, d, pat):  # (else nothing in it or below it is a trace the loaders find)
            got = _listing(d, recorded, skipped, inodes)
            if got is None:
                return None
            files, regular, added = got
            order += added
            every.update(added)
            for s in sources_in(root, pattern, files, regular):
                if not _utf8(s.trace_id, s.path, s.sidecar):
                    unnamed.append({"path": shown(s.path or s.sidecar or s.trace_id), "reason": NOT_UTF8})
                    continue
                listed.setdefault(s.trace_id, (s.path, s.sidecar))
        if len(listed) >= PARTIAL:
            gone_n += _compared(copy, m, w, batch, listed, every, first)
            listed, batch, first = {}, set(), False
    if batch or first:
        gone_n += _compared(copy, m, w, batch, listed, every, first)
    racy_ns = w.racy_ns
    dirs = {d: mtime for d, mtime in recorded.items() if d not in gone}
    dirs.update((d, mtime if mtime < racy_ns else -1) for d, mtime in (*changed.items(), *made.items()))
    return Scan(w.new, w.changed, gone_n, w.unchanged, dirs, w.settled, unnamed, linked=False)


def _compared(copy: Snapshot, m: Manifest, w: _Window, batch: set[str],
              listed: dict[str, tuple[str | None, str | None]], changed: Container[str], first: bool) -> int:
    """One batch of the directories listed again (``listed``: what they hold) against the copy;
    returns the traces found deleted."""
    aside = _from_copy(copy, m, w, batch, listed, changed, first)  # (what it takes out of listed: known, compared)
    gone = [t for t in aside if t not in listed]
    if gone:
        m.put_todo([(t, DELETED, *(None,) * 7) for t in gone])
    ids = list(listed)
    none = (None,) * 5
    for i in range(0, len(ids), WINDOW):
        part = ids[i : i + WINDOW]
        known = m.known(part)
        w.add((t, *listed[t], *known.get(t, none)) for t in part)
    return len(gone)


def scan_sources(src: str, pattern: str, m: Manifest, started: float, skip: Iterable[str] = (),
                 copy: Snapshot | None = None, draft: Draft | None = None, max_size: int = MAX_FILE_SIZE) -> Scan:
    """The traces under ``src`` against the manifest: new, changed, deleted, unchanged, written to
    the manifest's work tables a window at a time.

    When no directory changed since the last full scan the manifest's list of files is the
    list (only their stats are taken). When some did (files added, removed or renamed in them)
    and nothing else about the directories did, those are listed again and the copy gives the
    rest. Otherwise the directories are listed again, after their
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
    recorded = m.dirs()
    looked = _changed_dirs(recorded)
    changed, gone, inodes = looked if looked is not None else (None, set(), set())
    same = changed == {} and not gone  # (no directory changed)
    damaged = False
    if same and copy is not None:
        try:
            _from_copy(copy, m, w)
            return Scan(w.new, w.changed, deleted, w.unchanged, dirs, w.settled, unnamed)
        except DamagedCopy:  # the manifest's records instead: the scan starts again
            w, copy, damaged = _afresh(m, w), None, True
    if same:
        for page in m.known_pages(WINDOW):
            w.add(page)
            if draft is not None:
                draft.add(page)
        return Scan(w.new, w.changed, deleted, w.unchanged, dirs, w.settled, unnamed, damaged=damaged)
    skipped = set()
    for d in skip:
        try:
            st = os.stat(d)
        except OSError:
            continue
        skipped.add((st.st_dev, st.st_ino))
    if changed is not None and copy is not None and m.meta().get("links") is False:
        try:
            partial = _partial(src, pattern, m, w, copy, recorded, changed, gone, inodes, skipped)
            if partial is not None:
                return partial
        except DamagedCopy:  # a full listing instead, from the start
            damaged = True
        w = _afresh(m, w)  # (what the partial scan wrote before it found a full listing needed)
    dirs, linked = _walk_dirs(src, racy_ns, skipped)
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
    return Scan(w.new, w.changed, deleted, w.unchanged, dirs, w.settled, unnamed, linked, damaged)


def _afresh(m: Manifest, w: _Window) -> _Window:
    """The scan started again (the copy it read was damaged, or a partial scan found a full listing
    needed): its work tables emptied, a new window."""
    m.begin_scan()
    return _Window(m, w.racy_ns, w.max_size)


def _listed(m: Manifest, w: _Window, batch: dict[str, tuple[str | None, str | None]], draft: Draft | None) -> None:
    if not batch:
        return
    ids = list(batch)  # (a trace id is one directory's: no window repeats another's)
    m.put_seen(ids)
    if draft is not None:  # the records read once, for the window and the draft
        records = m.records(ids)
        known = {r[0]: r[3:] for r in records}
        draft.add(records)
    else:
        known = m.known(ids)
    none = (None,) * 5
    w.add((t, *batch[t], *known.get(t, none)) for t in ids)
