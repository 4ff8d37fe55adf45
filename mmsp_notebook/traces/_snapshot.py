"""The scan's copy of the manifest's stat signatures (:func:`mmsp_notebook.traces.sync`).

A scan that needs no listing compares the stat signature of every trace file and sidecar with the
one recorded (``_scan``). Read from SQLite, the records of 100,000 traces cost ~0.3 s of CPU in
Python objects; this copy holds the same columns (trace id, trace file, sidecar, the four numbers,
whether a content hash is kept) in an Arrow IPC file, ``<kind>/_scan.arrow``, read a window at a
time into lists and NumPy arrays (~0.03 s), so that what is left of a scan is its ``stat`` calls.

It is an exact copy or it is not used. A copy damaged on disk where its structure still reads is
found by the scan (:class:`DamagedCopy`): a text that is no UTF-8, or a trace the scan finds
changed whose files the manifest records otherwise (the changed traces are compared with the
manifest's own records, never the copy's); the scan then reads the manifest, and the copy is not
mended from. The file carries a token, and the manifest's ``meta`` holds
the token of the copy that matches it. A sync takes the token out of ``meta`` in its first
transaction and puts one back after its last, once the copy is mended: a sync stopped in between
leaves none. While a sync runs, a temporary trigger records the traces whose ``sources`` row
changes (``temp.touched``), and the copy is mended for them only: in place when only their numbers
changed (the Tracer's change: the same trace file and sidecar, each in the copy once), else
written again (the old copy without them, then their rows as the manifest holds them now).

A sync with no copy to trust (the first, one after an interrupted sync, one after more than
:data:`MEND` traces changed) reads the manifest's records in its scan, as before the copy, and
writes them as a draft as it goes; mended at the end, the draft becomes the copy the next scan
reads. A first sync writes none (every trace is new: the next sync's scan writes it).

Readers of the dataset skip it, as every name starting with ``_`` (Hive's and Spark's rule).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ._manifest import Manifest, _in_parts

__all__ = ["SNAPSHOT_NAME", "Snapshot", "DamagedCopy", "Draft", "ScanCopy", "clear", "track", "refresh"]

SNAPSHOT_NAME = "_scan.arrow"
#: touched traces the copy is mended for at most (their ids are held); with more, no copy is
#: written (the next sync's scan writes one)
MEND = 16384
_TOKEN = b"mmsp_notebook.scan_token"
#: the stand-in for a number the manifest does not hold: matches no stat
_NONE = -9
#: the manifest's records as the copy holds them
_COLUMNS = ("SELECT trace_id, path, sidecar, coalesce(t_size, -9), coalesce(t_mtime, -9), coalesce(s_size, -9),"
            " coalesce(s_mtime, -9), hash IS NOT NULL")


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("trace_id", pa.string()), ("path", pa.string()), ("sidecar", pa.string()),
                      *((n, pa.int64()) for n in ("t_size", "t_mtime", "s_size", "s_mtime")), ("hashed", pa.bool_())])


def _records(m: Manifest, trace_ids: list[str]) -> list[tuple[Any, ...]]:
    """The records of these traces as the copy holds them, those the manifest holds."""
    rows: list[tuple[Any, ...]] = []
    for part, marks in _in_parts(trace_ids):
        rows += m.db.execute(f"{_COLUMNS} FROM sources WHERE trace_id IN ({marks})", part).fetchall()
    return rows


def _batch(rows: list[tuple[Any, ...]]) -> Any:
    """A record batch of rows (trace id, trace file, sidecar, four numbers, hashed as 0 or 1)."""
    import pyarrow as pa

    schema = _schema()
    cols = list(zip(*rows))
    arrays = [pa.array(c, f.type) for c, f in zip(cols[:7], schema)]
    arrays.append(pa.array(cols[7], pa.int8()).cast(pa.bool_()))  # (SQLite's booleans are 0 and 1)
    return pa.record_batch(arrays, schema=schema)


class DamagedCopy(Exception):
    """The copy does not read as the manifest it stands for (damaged on disk past its structure: a
    text that is no UTF-8, a trace whose file or sidecar the manifest records otherwise): the scan
    reads the manifest instead, and the copy is not mended from."""


class Snapshot:
    """An open copy whose token matched (see :meth:`open`); :meth:`windows` reads it."""

    def __init__(self, path: str, source: Any, reader: Any, token: str) -> None:
        self.path, self.token, self._source, self._reader = path, token, source, reader
        self.batches = reader.num_record_batches
        self.rows = sum(reader.get_batch(i).num_rows for i in range(self.batches))

    @classmethod
    def open(cls, root: str, token: str | None, name: str = SNAPSHOT_NAME) -> Snapshot | None:
        """The copy in ``root`` if its token is ``token``; None when there is none, or another, or
        it cannot be read (a damaged copy is not trusted: the manifest is read instead)."""
        if not token:
            return None
        import pyarrow as pa

        path = os.path.join(root, name)
        try:
            source = pa.memory_map(path)
        except (OSError, pa.ArrowException):
            return None
        try:
            reader = pa.ipc.open_file(source)
            meta = reader.schema.metadata or {}
            if meta.get(_TOKEN) == token.encode() and reader.schema.remove_metadata().equals(_schema()):
                return cls(path, source, reader, token)
        except (OSError, pa.ArrowException):
            pass
        source.close()
        return None

    def close(self) -> None:
        self._reader = None
        self._source.close()

    def batch(self, i: int) -> Any:
        return self._reader.get_batch(i)

    def mapped(self) -> tuple[int, int]:
        """(address in memory, size) of the mapped file, which the batches' buffers point into."""
        self._source.seek(0)
        return self._source.read_buffer(1).address, self._source.size()

    def windows(self, window: int, by_dir: Callable[[str], int] | None = None
                ) -> Iterator[tuple[list[str], list[str | None], list[str | None], np.ndarray, np.ndarray | None]]:
        """(trace ids, trace files, sidecars, numbers, inside), ``window`` traces at a time;
        ``numbers`` is an int64 array of shape (n, 5): t_size, t_mtime, s_size, s_mtime (-9 for
        none) and 1 where a content hash is kept. With ``by_dir``, which tells of a directory
        whether its traces are left out (0), wanted (1) or wanted and marked (2), only the traces
        wanted are (a trace's directory is its trace file's, else its sidecar's), and ``inside``
        is a bool array marking them; else it is None."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for i in range(self.batches):
            try:
                whole = self._reader.get_batch(i)
                for k in range(0, whole.num_rows, window):
                    b = whole.slice(k, window)
                    inside = None
                    if by_dir is not None:  # the directories of a window are few: classified once each
                        where = pc.replace_substring_regex(pc.coalesce(b.column(1), b.column(2), ""), _BASENAME, "")
                        coded = pc.dictionary_encode(where)
                        kinds = np.array([by_dir(d) for d in coded.dictionary.to_pylist()] or [0], np.int8)
                        kind = kinds[coded.indices.to_numpy(zero_copy_only=False)]
                        wanted = kind != 0
                        if not wanted.all():
                            b = b.filter(pa.array(wanted))
                        inside = kind[wanted] == 2
                    nums = np.empty((b.num_rows, 5), np.int64)
                    for j in range(4):
                        nums[:, j] = b.column(3 + j).to_numpy()
                    nums[:, 4] = b.column(7).to_numpy(zero_copy_only=False)
                    got = b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(2).to_pylist(), nums, inside
                    if None in got[0]:
                        raise ValueError("a trace without its id")
                    yield got
            except (UnicodeDecodeError, ValueError, pa.ArrowException) as exc:
                raise DamagedCopy(f"{self.path}: {exc}") from exc


#: a path's last part, with the separator before it (what ``str.rpartition(os.sep)[0]`` leaves)
_BASENAME = f"(^|{re.escape(os.sep)})[^{re.escape(os.sep)}]*$"


class Draft:
    """The records a scan read from the manifest, written as they are read (``add``), for a copy
    when there was none to trust (see the module docstring)."""

    def __init__(self, root: str) -> None:
        import pyarrow as pa

        self.root, self.token = root, secrets.token_hex(16)
        self.name = f"{SNAPSHOT_NAME}.{self.token}.draft"
        self.rows = 0
        self._sink = pa.OSFile(os.path.join(root, self.name), "wb")
        self._out = pa.ipc.new_file(self._sink, _schema().with_metadata({_TOKEN: self.token.encode()}))

    def add(self, records: Iterable[tuple[Any, ...]]) -> None:
        """Records (trace id, trace file, sidecar, t_size, t_mtime, s_size, s_mtime, hash, ...) of
        converted traces, as the manifest holds them."""
        rows = [(r[0], r[1], r[2], _NONE if r[3] is None else r[3], _NONE if r[4] is None else r[4],
                 _NONE if r[5] is None else r[5], _NONE if r[6] is None else r[6], int(r[7] is not None)) for r in records]
        if rows:
            self._out.write_batch(_batch(rows))
            self.rows += len(rows)

    def finish(self) -> Snapshot | None:
        """The draft as a copy to mend (None: it could not be written or read back)."""
        try:
            self._out.close()
            self._sink.close()
        except OSError:
            return None
        return Snapshot.open(self.root, self.token, self.name)

    def discard(self) -> None:
        try:
            self._out.close()
            self._sink.close()
        except OSError:
            pass
        try:
            os.remove(os.path.join(self.root, self.name))
        except OSError:
            pass


def clear(root: str) -> None:
    """Remove the drafts and temporary copies an interrupted sync left."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for n in names:
        if n.startswith(SNAPSHOT_NAME + ".") and n.endswith((".draft", ".tmp")):
            try:
                os.remove(os.path.join(root, n))
            except OSError:
                pass


def track(m: Manifest) -> None:
    """Record, for the rest of this connection, the traces whose scan columns change
    (``temp.touched``, repeats and all: a trigger's ``OR IGNORE`` would yield to the statement's
    own conflict clause)."""
    m.db.executescript("""
        CREATE TEMP TABLE IF NOT EXISTS touched (trace_id TEXT);
        DELETE FROM temp.touched;
        CREATE TEMP TRIGGER IF NOT EXISTS touched_put AFTER INSERT ON main.sources
            BEGIN INSERT INTO touched VALUES (new.trace_id); END;
        CREATE TEMP TRIGGER IF NOT EXISTS touched_set
            AFTER UPDATE OF trace_id, t_size, t_mtime, s_size, s_mtime, hash, path, sidecar ON main.sources
            BEGIN INSERT INTO touched VALUES (old.trace_id), (new.trace_id); END;
        CREATE TEMP TRIGGER IF NOT EXISTS touched_gone AFTER DELETE ON main.sources
            BEGIN INSERT INTO touched VALUES (old.trace_id); END;
    """)


def _touched(m: Manifest) -> list[str] | None:
    """The traces touched, or None when they are more than :data:`MEND`."""
    ids = [r[0] for r in m.db.execute(f"SELECT DISTINCT trace_id FROM temp.touched LIMIT {MEND + 1}")]
    return ids if len(ids) <= MEND else None


def _mended(old: Snapshot, touched: list[str], rows: list[tuple[Any, ...]], window: int) -> Iterator[Any]:
    """The old copy's batches without the touched traces, then their rows as the manifest holds
    them now, ``rows`` (those it holds no more are gone)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    gone = pa.array(touched, pa.string())
    for i in range(old.batches):
        b = old.batch(i)
        if touched:
            b = b.filter(pc.invert(pc.is_in(b.column(0), value_set=gone)))
        if b.num_rows:
            yield b
    for k in range(0, len(rows), window):
        yield _batch(rows[k : k + window])


def _patched(base: Snapshot, touched: list[str], rows: list[tuple[Any, ...]]) -> bool:
    """Mend the copy in place when every touched trace is in it once, with the same trace file and
    sidecar, and still in the manifest, ``rows`` (the Tracer's change: only the numbers differ): their
    numbers are written over the old ones where the file holds them (a copy is written without
    compression: a batch's numbers are at fixed offsets, which the batches read in place from
    the mapped file give). False, with nothing written and ``base`` open, when another kind of
    change calls for :func:`_mended`; ``base`` is closed when True. A sync stopped halfway
    leaves a copy whose token ``meta`` does not hold: trusted by no scan."""
    import mmap
    import sys

    import pyarrow as pa
    import pyarrow.compute as pc

    now = {r[0]: r for r in rows}
    if len(now) != len(touched):  # (a trace removed)
        return False
    batches = [base.batch(i) for i in range(base.batches)]
    where = pc.index_in(pa.chunked_array([b.column(0) for b in batches], pa.string()),
                        value_set=pa.array(touched, pa.string()))
    hits = np.flatnonzero(pc.is_valid(where).to_numpy(zero_copy_only=False))
    if len(hits) != len(touched):  # (a trace added, or one the copy holds twice)
        return False
    recs = [now[touched[k]] for k in where.take(hits).to_pylist()]
    files = zip(*(pa.chunked_array([b.column(c) for b in batches], pa.string()).take(hits).to_pylist() for c in (1, 2)))
    if list(files) != [r[1:3] for r in recs]:
        return False  # (a trace file or sidecar renamed: their strings differ)
    start, size = base.mapped()
    # each batch's columns of numbers: (offset in the file of its row 0's value, array offset) each
    at: list[list[tuple[int, int]]] = []
    for b in batches:
        cols = [b.column(3 + j) for j in range(5)]
        places = [(c.buffers()[1].address - start, c.offset) for c in cols]
        if any(c.null_count for c in cols) or not all(0 <= p < size for p, _ in places):
            return False  # (not as a copy is written here)
        at.append(places)
    firsts = np.cumsum([0] + [b.num_rows for b in batches])
    which = (np.searchsorted(firsts, hits, side="right") - 1).tolist()
    numbers: list[tuple[int, int]] = []  # (offset in the file, value)
    flags: list[tuple[int, int, bool]] = []  # (offset of the byte, bit, value) of ``hashed``
    for i, row, rec in zip(which, (hits - firsts[which]).tolist(), recs):
        numbers += ((p + 8 * (o + row), rec[3 + j]) for j, (p, o) in enumerate(at[i][:4]))
        p, o = at[i][4]
        flags.append((p + (o + row) // 8, (o + row) % 8, bool(rec[7])))
    base.close()  # (written through one mapping)
    try:
        with open(base.path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
            for off, value in numbers:
                mm[off : off + 8] = value.to_bytes(8, sys.byteorder, signed=True)
            for off, bit, on in flags:
                mm[off] = (mm[off] | (1 << bit)) if on else (mm[off] & ~(1 << bit) & 0xFF)
    except ValueError as exc:  # (mmap's own errors; the caller leaves the copy untrusted)
        raise OSError(str(exc)) from exc
    return True


def _rechunked(batches: Iterator[Any], window: int) -> Iterator[Any]:
    """The same rows in batches of ``window`` (the last one shorter)."""
    import pyarrow as pa

    schema = _schema()
    held: list[Any] = []
    n = 0
    for b in batches:
        held.append(pa.record_batch(b.columns, schema=schema))
        n += b.num_rows
        if n >= window:
            table = pa.Table.from_batches(held, schema).combine_chunks()
            cut = n - n % window
            yield from table.slice(0, cut).to_batches(max_chunksize=window)
            rest = table.slice(cut)
            held, n = rest.to_batches(), rest.num_rows
    if n:
        yield from pa.Table.from_batches(held, schema).combine_chunks().to_batches(max_chunksize=window)


def _drop(base: Snapshot | None) -> None:
    """Close a copy; a draft's file is removed."""
    if base is None:
        return
    base.close()
    if base.path != os.path.join(os.path.dirname(base.path), SNAPSHOT_NAME):
        try:
            os.remove(base.path)
        except OSError:
            pass


def refresh(m: Manifest, root: str, base: Snapshot | None, window: int) -> str | None:
    """The copy of the manifest's signatures as they are now, made from ``base`` (the copy trusted
    when the sync began, or the scan's draft; :func:`track` called since) and the traces touched
    meanwhile; returns its token (for ``meta``), or None when there is none to trust (no base, or
    more touched traces than :data:`MEND`). With nothing touched, an old copy stays as it is."""
    import pyarrow as pa

    path = os.path.join(root, SNAPSHOT_NAME)
    touched = _touched(m) if base is not None else None
    if base is None or touched is None:
        _drop(base)
        try:
            os.remove(path)  # (untrusted, and as large as the manifest's records)
        except OSError:
            pass
        return None
    if not touched and base.path == path:
        return base.token
    rows = _records(m, touched)  # (at most MEND)
    if base.path == path and _patched(base, touched, rows):
        return base.token
    token = secrets.token_hex(16)
    tmp = f"{path}.{token}.tmp"
    try:
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, _schema().with_metadata({_TOKEN: token.encode()})) as out:
            batches = _mended(base, touched, rows, window)
            # batches thinned by many mends, or a draft's, are gathered again: a window of rows each
            if base.batches > 2 * -(-base.rows // window) + 8 or base.path != path:
                batches = _rechunked(batches, window)
            for b in batches:
                out.write_batch(b)
        _drop(base)  # (a file mapped in memory cannot be replaced everywhere)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return token


class ScanCopy:
    """One sync's use of the copy: the copy trusted when it began (its token taken out of ``meta``
    by then), read by the first scan only (a later attempt of the same sync, after damaged files
    were removed, reads the manifest); else a draft of the first scan's records; the base the
    copy is mended from at the end (:meth:`finish`), with every change to ``sources`` tracked
    since the base was as the manifest."""

    def __init__(self, m: Manifest, root: str, token: str | None, first: bool) -> None:
        clear(root)
        self.m, self.root = m, root
        self.copy = self.base = Snapshot.open(root, token)
        if self.copy is not None:
            track(m)
        # none to trust: the scan's records are written as a draft of one (a first sync has none)
        self.draft = Draft(root) if self.copy is None and not first else None

    def for_scan(self) -> tuple[Snapshot | None, Draft | None]:
        """The copy and draft the next scan takes: the first scan's only."""
        copy, self.copy = self.copy, None
        return copy, self.draft

    def scanned(self, damaged: bool = False) -> None:
        """After a scan: its draft, if any, becomes the base (changes tracked from now on); with
        ``damaged`` (the scan found the copy damaged), the copy is no base: none is trusted after
        this sync, and the next one writes a draft of the manifest's records."""
        if damaged and self.base is not None:
            self.base.close()
            self.base = None
        draft, self.draft = self.draft, None
        if draft is None:
            return
        if draft.rows:
            self.base = draft.finish()
            if self.base is not None:
                track(self.m)
        else:
            draft.discard()

    def finish(self, window: int) -> None:
        """At the end of the sync: the copy mended and its token put in ``meta`` (none when there
        is no copy to trust, or it could not be written: the next scan reads the manifest)."""
        base, self.base = self.base, None
        try:
            token = refresh(self.m, self.root, base, window)
        except OSError:  # (a full disk)
            token = None
        with self.m.transaction() as db:
            self.m.set_meta(db, {"scan_token": token})

    def close(self) -> None:
        if self.draft is not None:
            self.draft.discard()
        if self.base is not None:
            self.base.close()
