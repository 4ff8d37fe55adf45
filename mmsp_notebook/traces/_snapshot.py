"""The scan's copy of the manifest's stat signatures (:func:`mmsp_notebook.traces.sync`).

A scan that needs no listing compares the stat signature of every trace file and sidecar with the
one recorded (``_scan``). Read from SQLite, the records of 100,000 traces cost ~0.3 s of Python
objects; this copy holds the same columns (trace id, trace file, sidecar, the four numbers, whether
a content hash is kept) in an Arrow IPC file, ``<kind>/_scan.arrow``, read a window at a time into
lists and NumPy arrays, so that what is left of a scan is its ``stat`` calls.

It is an exact copy or it is not used. The file carries a token, and the manifest's ``meta`` holds
the token of the copy that matches it; a sync takes the token out of ``meta`` in its first
transaction and puts one back after its last, once the copy is written again: a sync stopped in
between leaves none, and the next scan reads the manifest itself (and writes a new copy). While a
sync runs, a temporary trigger records the traces whose ``sources`` row changed, so that the copy
is mended for them only.

Readers of the dataset skip it, as every name starting with ``_`` (Hive's and Spark's rule).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._manifest import Manifest

__all__ = ["SNAPSHOT_NAME", "Snapshot", "track", "refresh"]

SNAPSHOT_NAME = "_scan.arrow"
#: touched traces the copy is mended for at most (their ids are held): with more, it is written anew
MEND = 16384
_NAMES = ("trace_id", "path", "sidecar", "t_size", "t_mtime", "s_size", "s_mtime", "hashed")
_TOKEN = b"mmsp_notebook.scan_token"
#: the stand-in for a missing number (a trace not read, a file that is not there): matches no stat
_NONE = -9


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("trace_id", pa.string()), ("path", pa.string()), ("sidecar", pa.string()),
                      *((n, pa.int64()) for n in _NAMES[3:7]), ("hashed", pa.bool_())])


class Snapshot:
    """An open copy whose token matched (see :meth:`open`); :meth:`windows` reads it."""

    def __init__(self, path: str, source: Any, reader: Any, token: str) -> None:
        self.path, self.token, self._source, self._reader = path, token, source, reader

    @classmethod
    def open(cls, root: str, token: str | None) -> Snapshot | None:
        """The copy in ``root`` if its token is ``token``; None when there is none, or another, or
        it cannot be read (a damaged copy is not trusted: the manifest is read instead)."""
        if not token:
            return None
        import pyarrow as pa

        path = os.path.join(root, SNAPSHOT_NAME)
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

    def windows(self, window: int) -> Iterator[tuple[list[str], list[str | None], list[str | None], np.ndarray]]:
        """(trace ids, trace files, sidecars, numbers), ``window`` traces at a time; ``numbers`` is
        an int64 array of shape (n, 5): t_size, t_mtime, s_size, s_mtime (-9 for none) and 1 where
        a content hash is kept."""
        for i in range(self._reader.num_record_batches):
            whole = self._reader.get_batch(i)
            for k in range(0, whole.num_rows, window):
                yield self._window(whole.slice(k, window))

    @staticmethod
    def _window(b: Any) -> tuple[list[str], list[str | None], list[str | None], np.ndarray]:
        nums = np.empty((b.num_rows, 5), np.int64)
        for j in range(4):
            nums[:, j] = b.column(3 + j).to_numpy()
        nums[:, 4] = b.column(7).to_numpy(zero_copy_only=False)
        return b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(2).to_pylist(), nums


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


_COLUMNS = ("SELECT trace_id, path, sidecar, coalesce(t_size, -9), coalesce(t_mtime, -9), coalesce(s_size, -9),"
            " coalesce(s_mtime, -9), hash IS NOT NULL")


def _batch(rows: list[tuple[Any, ...]]) -> Any:
    import pyarrow as pa

    cols = list(zip(*rows)) if rows else [()] * len(_NAMES)
    arrays = [pa.array(c, f.type) for c, f in zip(cols[:7], _schema())]
    arrays.append(pa.array(cols[7], pa.int8()).cast(pa.bool_()))  # (SQLite's booleans are 0 and 1)
    return pa.record_batch(arrays, schema=_schema())


def _mend(m: Manifest, old: Snapshot, touched: list[str], out: Any, window: int) -> None:
    """Write the old copy without the touched traces, then their rows as the manifest holds them
    now (those it holds no more are gone), in batches of ``window`` rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = _schema()
    gone = pa.array(touched, pa.string())
    held: list[Any] = []
    n = 0

    def put(last: bool) -> None:
        nonlocal held, n
        if not held:
            return
        table = pa.Table.from_batches(held, schema).combine_chunks()
        cut = table.num_rows if last else table.num_rows - table.num_rows % window
        if cut:
            out.write_table(table.slice(0, cut), max_chunksize=window)
        rest = table.slice(cut)
        held, n = (rest.to_batches() if rest.num_rows else []), rest.num_rows

    for i in range(old._reader.num_record_batches):
        b = old._reader.get_batch(i)
        b = pa.record_batch(b.filter(pc.invert(pc.is_in(b.column(0), value_set=gone))).columns, schema=schema)
        held.append(b)
        n += b.num_rows
        if n >= window:
            put(False)
    for k in range(0, len(touched), 500):
        part = touched[k : k + 500]
        rows = m.db.execute(f"{_COLUMNS} FROM sources WHERE trace_id IN ({','.join('?' * len(part))})", part).fetchall()
        if rows:
            held.append(_batch(rows))
            n += len(rows)
            if n >= window:
                put(False)
    put(True)


def refresh(m: Manifest, root: str, old: Snapshot | None, window: int) -> str:
    """Write the copy of the manifest's signatures as they are now; returns its token (for
    ``meta``). With ``old`` (valid when the sync began, :func:`track` called since), only the traces
    touched meanwhile are read from the manifest, unless they are many; with nothing touched the
    old copy stays as it is."""
    import pyarrow as pa

    touched = _touched(m) if old is not None else None
    if old is not None and touched == []:
        return old.token
    token = secrets.token_hex(16)
    path = os.path.join(root, SNAPSHOT_NAME)
    tmp = f"{path}.{token}.tmp"
    schema = _schema().with_metadata({_TOKEN: token.encode()})
    try:
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, schema) as out:
            if old is not None and touched is not None:
                _mend(m, old, touched, out, window)
            else:
                last = 0
                while True:
                    rows = m.db.execute(f"{_COLUMNS}, rowid FROM sources WHERE rowid > ? ORDER BY rowid LIMIT {window}",
                                        (last,)).fetchall()
                    if not rows:
                        break
                    last = rows[-1][-1]
                    out.write_batch(_batch([r[:-1] for r in rows]))
        if old is not None:
            old.close()  # (a file mapped in memory cannot be replaced everywhere)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return token
