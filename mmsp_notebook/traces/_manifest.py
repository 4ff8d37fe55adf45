"""The manifest of a trace dataset (:func:`mmsp_notebook.traces.sync`): what was converted, where its
rows are, and which copy of a repeated message is shown.

One SQLite file per dataset kind, ``<dataset>/<kind>/_manifest.sqlite`` (readers of the Parquet tree
skip names starting with ``_``). Tables:

``meta``       the kind, the options the rows were made with, the source directory, the token of
               the scan's copy of ``sources`` that matches it (``_snapshot``), the skip notes of
               the last listing and whether a directory was reached by a link (``links``)
``sources``    one row per trace (its trace id): the stat signature of its trace file and sidecar
               (size, and the later of mtime and ctime in ns: see ``_scan``), a content hash when
               the files were modified within
               :data:`RACY_S` of the scan (a same-size rewrite in the same mtime tick would go
               unseen), the skip notes the loaders reported for it, the number and digest of its
               rows (so that a trace that only grew gets only its new rows written) and the data
               files holding them
``dirs``       every directory below the source directory with its mtime at the last full scan:
               while none changed, no file was added, removed or renamed, and a scan only stats
               the files it knows
``files``      the Parquet files of the dataset (path relative to the kind's directory) and rows
``sizes``      the size of each data file at the end of the last sync: a file found with another
               size is opened, and one that is no Parquet file any more (cut short, damaged) is
               taken for lost
``units``      one row per de-duplicated unit (a turn for ``turns``, a message for ``items``): its
               fingerprint, trace id, message index, preference and whether it is the copy shown
               (``kept``: 1 shown, 0 hidden, :data:`HIDING` while its rows are being removed)
``pending``    fingerprints whose shown copy must be decided again (kept until that is done, so a
               sync interrupted before it resumes it; ``meta.resolve_all`` stands for every one
               during a first sync)

Every change is a transaction committed after the data files it describes are in place. Rows are
removed from data files only after a transaction has said so: the traces losing rows are marked
changed (:meth:`Manifest.untrust`), the copies being hidden :data:`HIDING`; a sync stopped before
the transaction recording the removal converts those traces again in full, hides those copies
again, or shows them again when they have become the copy to show.

A sync also keeps work tables of its own (SQLite temporary tables of its connection, gone when it
closes): ``todo`` (the traces to convert or remove, each with its state, files and stat
signature, written by the scan a window at a time), ``seen`` (the traces a listing found) and
``settled``, so that its memory does not grow with the number of traces.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import ManifestError

__all__ = ["Manifest", "ManifestError", "MANIFEST_NAME", "RACY_S", "KINDS", "synced_dataset", "open_read_only"]

#: the kinds of rows a dataset holds, each in a directory of its name (``<dataset>/<kind>``)
KINDS = ("turns", "items", "events")
MANIFEST_NAME = "_manifest.sqlite"
LOCK_NAME = "_sync.lock"
#: files modified less than this many seconds before a scan get a content hash
RACY_S = 2.0
#: the version of the rows and of the layout: a dataset of another version is rebuilt by its next sync
_VERSION = "15"
#: ``units.kept`` of a copy whose rows are being removed from the files (see the module docstring)
HIDING = 2
#: ``sources.t_size`` of a trace a file of which could not be read (no permission, an I/O error):
#: it matches no file, so every scan finds the trace changed and it is read again until it can be
UNREAD_SIZE = -3
#: SQLite's (primary) result codes for a manifest the file system will not let be read or written:
#: a full disk, an I/O error, a read-only or unreachable file, a lock held elsewhere
_UNWRITABLE = {sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY,
               sqlite3.SQLITE_PERM, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    trace_id TEXT PRIMARY KEY, t_size INTEGER, t_mtime INTEGER, s_size INTEGER, s_mtime INTEGER,
    hash TEXT, notes TEXT, loaded INTEGER NOT NULL, n_rows INTEGER NOT NULL, digest TEXT NOT NULL,
    path TEXT, sidecar TEXT, files TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dirs (path TEXT PRIMARY KEY, mtime INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, rows INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sizes (name TEXT PRIMARY KEY, size INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS units (
    fp INTEGER NOT NULL, trace_id TEXT NOT NULL, mi INTEGER NOT NULL, pref INTEGER NOT NULL,
    kept INTEGER NOT NULL, PRIMARY KEY (trace_id, mi)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (fp INTEGER PRIMARY KEY);
CREATE INDEX IF NOT EXISTS sources_noted ON sources (trace_id) WHERE notes IS NOT NULL;
CREATE INDEX IF NOT EXISTS sources_unloaded ON sources (trace_id) WHERE loaded = 0;
"""

_WORK = """
CREATE TEMP TABLE IF NOT EXISTS todo (
    trace_id TEXT PRIMARY KEY, state INTEGER NOT NULL, path TEXT, sidecar TEXT,
    t_size INTEGER, t_mtime INTEGER, s_size INTEGER, s_mtime INTEGER, hash TEXT) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS seen (trace_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS settled (trace_id TEXT PRIMARY KEY) WITHOUT ROWID;
DELETE FROM temp.todo;
DELETE FROM temp.seen;
DELETE FROM temp.settled;
"""
_SOURCE_COLUMNS = ("trace_id", "t_size", "t_mtime", "s_size", "s_mtime", "hash", "notes", "loaded", "n_rows", "digest",
                   "path", "sidecar", "files")
#: a trace recorded again is updated where it is (a replaced row would move to the end of the table
#: and change its key's index entry too: more pages written, and copied at the next checkpoint)
_PUT_SOURCE = (f"INSERT INTO sources VALUES ({', '.join('?' * len(_SOURCE_COLUMNS))}) ON CONFLICT (trace_id) DO UPDATE SET "
               + ", ".join(f"{c} = excluded.{c}" for c in _SOURCE_COLUMNS[1:]))
#: trace ids per ``IN (...)`` list (SQLite's oldest limit on parameters is 999)
_IN = 900


def _in_parts(trace_ids: list[str]) -> Iterator[tuple[list[str], str]]:
    """The trace ids :data:`_IN` at a time, each part with its ``?, ?, ...`` placeholders."""
    for i in range(0, len(trace_ids), _IN):
        part = trace_ids[i : i + _IN]
        yield part, ",".join("?" * len(part))


def synced_dataset(path: str) -> tuple[str, list[str], str | None] | None:
    """When the directory ``path`` is a dataset made by :func:`~mmsp_notebook.traces.sync` (or one
    of its kind directories): the dataset's directory, its kinds, and the trace directory its
    manifest says it was synced from (None when that cannot be read); else None. The manifests are
    only read (a sync may be running)."""
    root = os.path.normpath(path)
    if os.path.basename(root) in KINDS and os.path.isfile(os.path.join(root, MANIFEST_NAME)):
        root = os.path.dirname(root)  # (a kind's directory: its dataset)
    kinds = [k for k in KINDS if os.path.isfile(os.path.join(root, k, MANIFEST_NAME))]
    if not kinds:
        return None
    src = None
    for kind in kinds:
        src = _meta_value(os.path.join(root, kind, MANIFEST_NAME), "src")
        if isinstance(src, str):
            break
    return root, kinds, src if isinstance(src, str) else None


def _meta_value(manifest: str, key: str) -> Any:
    """One value of a manifest's ``meta``, read without writing; None when it cannot be read."""
    try:
        db = open_read_only(manifest)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    try:
        return json.loads(row[0]) if row is not None else None
    except (TypeError, ValueError):
        return None


def open_read_only(manifest: str | Path) -> sqlite3.Connection:
    """A connection that reads a manifest without writing it (a sync may be running): ``mode=ro``,
    or, in a read-only folder, where SQLite cannot make its ``-shm`` file, ``immutable=1`` (nothing
    can write the manifest there meanwhile). A manifest a first sync has just made, without its
    tables yet, raises the ``OperationalError`` "no such table"."""
    uri = Path(manifest).absolute().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        try:
            db.execute("SELECT 1 FROM meta LIMIT 1")
        except sqlite3.OperationalError:
            db.close()
            raise
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)
    return db


class Manifest:
    """The manifest of one dataset kind (see the module docstring). Use as a context manager."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = os.path.join(root, MANIFEST_NAME)
        self.db = sqlite3.connect(self.path, isolation_level=None)  # explicit transactions
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if self._stored_version() not in (None, _VERSION):  # another layout: rebuilt, as for other options
                for table in ("meta", "sources", "dirs", "files", "sizes", "units", "pending"):
                    self.db.execute(f"DROP TABLE IF EXISTS {table}")
            self.db.executescript(_SCHEMA)
            self.db.execute("SELECT trace_id, files FROM sources LIMIT 0")  # the columns this version reads
        except sqlite3.DatabaseError as exc:
            self.db.close()
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _UNWRITABLE:  # the file system's, not the manifest's
                raise OSError(
                    f"cannot open the manifest {self.path}: {exc} (a full disk, a read-only or unreachable folder?); "
                    "nothing was changed: sync again once it is writable") from exc
            raise ManifestError(
                f"{self.path} is not a trace dataset manifest this version can use ({exc}); the data files "
                f"are left as they are: sync into a new dataset_dir, or remove the folder {self.root} (the manifest "
                "with its data files: a folder holding data files without a manifest is refused) to rebuild it",
                path=self.path) from exc

    def _stored_version(self) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        except sqlite3.OperationalError:  # a new file: no tables yet
            return None
        return json.loads(row[0]) if row is not None else None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Manifest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic change: committed when the block ends, rolled back when it raises."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if self.db.in_transaction:  # (SQLite rolls back by itself on a full disk or an I/O error)
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # meta ------------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def set_meta(self, db: sqlite3.Connection, values: dict[str, Any]) -> None:
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()])

    @staticmethod
    def version() -> str:
        return _VERSION

    def reset(self, db: sqlite3.Connection) -> None:
        """Forget everything (the caller removes the data files)."""
        for table in ("meta", "sources", "dirs", "files", "sizes", "units", "pending"):
            db.execute(f"DELETE FROM {table}")

    # sources ---------------------------------------------------------------------------------
    def known(self, trace_ids: list[str]) -> dict[str, tuple[int, int, int, int, str | None]]:
        """trace id -> (t_size, t_mtime, s_size, s_mtime, content hash or None) of the given
        traces that were converted."""
        out: dict[str, tuple[int, int, int, int, str | None]] = {}
        for part, marks in _in_parts(trace_ids):
            out.update((r[0], r[1:]) for r in self.db.execute(
                f"SELECT trace_id, t_size, t_mtime, s_size, s_mtime, hash FROM sources WHERE trace_id IN ({marks})", part))
        return out

    def records(self, trace_ids: list[str]) -> list[tuple[Any, ...]]:
        """(trace id, trace file, sidecar, t_size, t_mtime, s_size, s_mtime, content hash or None)
        of the given traces that were converted, as recorded."""
        out: list[tuple[Any, ...]] = []
        for part, marks in _in_parts(trace_ids):
            out += self.db.execute(
                "SELECT trace_id, path, sidecar, t_size, t_mtime, s_size, s_mtime, hash FROM sources"
                f" WHERE trace_id IN ({marks})", part).fetchall()
        return out

    def known_pages(self, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """Every converted trace, ``size`` at a time (in the table's order): (trace id, trace file,
        sidecar, t_size, t_mtime, s_size, s_mtime, content hash or None, rowid)."""
        last = 0
        while True:
            page = self.db.execute(
                "SELECT trace_id, path, sidecar, t_size, t_mtime, s_size, s_mtime, hash, rowid FROM sources"
                " WHERE rowid > ? ORDER BY rowid LIMIT ?", (last, size)).fetchall()
            if not page:
                return
            yield page
            last = page[-1][-1]

    # the work of one sync: temporary tables of this connection, gone when it closes -------------
    def begin_scan(self) -> None:
        """Empty the sync's work tables: ``todo`` (the traces to convert or remove, with the state
        they are in and, to convert, their files and stat signature), ``seen`` (the traces a
        listing found) and ``settled`` (traces whose content hash is no longer needed)."""
        self.db.executescript(_WORK)

    def put_todo(self, rows: list[tuple[Any, ...]]) -> None:
        """Rows of (trace_id, state, trace file, sidecar, t_size, t_mtime, s_size, s_mtime, hash)."""
        self.db.executemany("INSERT OR REPLACE INTO temp.todo VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def put_seen(self, trace_ids: list[str]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO temp.seen VALUES (?)", ((t,) for t in trace_ids))

    def put_settled(self, trace_ids: list[str]) -> None:
        self.db.executemany("INSERT OR IGNORE INTO temp.settled VALUES (?)", ((t,) for t in trace_ids))

    def unseen(self, state: int) -> int:
        """Put the converted traces a listing did not find in ``todo`` with ``state``; how many."""
        return self.db.execute(
            "INSERT OR REPLACE INTO temp.todo (trace_id, state) SELECT trace_id, ? FROM sources"
            " WHERE trace_id NOT IN (SELECT trace_id FROM temp.seen)", (state,)).rowcount

    def todo_count(self, state: int) -> int:
        return int(self.db.execute("SELECT count(*) FROM temp.todo WHERE state = ?", (state,)).fetchone()[0])

    def todo_pages(self, state: int, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The ``todo`` rows in ``state``, ``size`` at a time in trace id order: (trace id, trace file,
        sidecar, t_size, t_mtime, s_size, s_mtime, hash)."""
        last = ""
        while True:
            page = self.db.execute(
                "SELECT trace_id, path, sidecar, t_size, t_mtime, s_size, s_mtime, hash FROM temp.todo"
                " WHERE state = ? AND trace_id > ? ORDER BY trace_id LIMIT ?", (state, last, size)).fetchall()
            if not page:
                return
            yield page
            last = page[-1][0]

    def todo_again(self, trace_ids: list[str], state: int) -> None:
        """Put converted traces in ``todo`` with ``state`` (to convert them again), as recorded."""
        self.db.execute("DELETE FROM temp.todo WHERE state = ?", (state,))
        for part, marks in _in_parts(trace_ids):
            self.db.execute(
                "INSERT OR REPLACE INTO temp.todo SELECT trace_id, ?, path, sidecar, t_size, t_mtime, s_size, s_mtime, hash"
                f" FROM sources WHERE trace_id IN ({marks})", (state, *part))

    def settle(self, db: sqlite3.Connection) -> None:
        """Traces whose files are no longer recent (``settled``): their stat signature suffices from now on."""
        db.execute("UPDATE sources SET hash = NULL WHERE trace_id IN (SELECT trace_id FROM temp.settled)")

    def dirs(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT path, mtime FROM dirs").fetchall())

    def put_dirs(self, db: sqlite3.Connection, dirs: dict[str, int]) -> None:
        db.execute("DELETE FROM dirs")
        db.executemany("INSERT INTO dirs VALUES (?, ?)", dirs.items())

    def notes(self) -> list[dict[str, str]]:
        """The skip notes of every trace, as the loaders report them (``{"path", "reason"}``)."""
        out: list[dict[str, str]] = []
        for (notes,) in self.db.execute("SELECT notes FROM sources WHERE notes IS NOT NULL ORDER BY trace_id"):
            out.extend(json.loads(notes))
        return out

    def counts(self) -> tuple[int, int]:
        """(traces loaded, traces skipped)."""
        # (each reads an index: the trace ids', and the few skipped traces')
        every = self.db.execute("SELECT count(*) FROM sources").fetchone()[0]
        skipped = self.db.execute("SELECT count(*) FROM sources WHERE loaded = 0").fetchone()[0]
        return int(every - skipped), int(skipped)

    def put_sources(self, db: sqlite3.Connection, rows: Iterable[tuple[Any, ...]]) -> None:
        """Rows of (trace_id, t_size, t_mtime, s_size, s_mtime, hash, notes json, loaded, n_rows, digest,
        trace file, sidecar, data files json)."""
        db.executemany(_PUT_SOURCE, rows)

    def priors(self, trace_ids: list[str]) -> dict[str, tuple[int, str]]:
        """trace id -> (rows, digest) of the rows the dataset holds for it."""
        out: dict[str, tuple[int, str]] = {}
        for part, marks in _in_parts(trace_ids):
            out.update((r[0], (int(r[1]), str(r[2]))) for r in self.db.execute(
                f"SELECT trace_id, n_rows, digest FROM sources WHERE trace_id IN ({marks})", part))
        return out

    # files -----------------------------------------------------------------------------------
    def file_names(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM files")}

    def file_sizes(self) -> dict[str, int | None]:
        """Every listed file -> its size at the end of the last sync (None: not known)."""
        return dict(self.db.execute("SELECT name, size FROM files LEFT JOIN sizes USING (name)").fetchall())

    def put_sizes(self, db: sqlite3.Connection, sizes: dict[str, int]) -> None:
        """The sizes of the listed files now (those of files no longer listed are dropped)."""
        db.execute("DELETE FROM sizes")
        db.executemany("INSERT INTO sizes VALUES (?, ?)", sizes.items())

    def file_rows(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT name, rows FROM files").fetchall())

    def move(self, db: sqlite3.Connection, trace_ids: Iterable[str], old: list[str], new: str, rows: int) -> None:
        """Files ``old`` merged into ``new`` (``rows`` rows; none: not written) for these traces."""
        gone = set(old)
        updates: list[tuple[str, str]] = []
        for part, marks in _in_parts(list(trace_ids)):
            for tid, listed in db.execute(f"SELECT trace_id, files FROM sources WHERE trace_id IN ({marks})", part):
                files = [f for f in json.loads(listed) if f not in gone]
                if rows and new not in files:
                    files.append(new)
                updates.append((json.dumps(files), tid))
        db.executemany("UPDATE sources SET files = ? WHERE trace_id = ?", updates)
        db.executemany("DELETE FROM files WHERE name = ?", ((n,) for n in old))
        if rows:
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?)", (new, rows))

    def files_of(self, trace_ids: Iterable[str]) -> dict[str, list[str]]:
        """file name -> the given traces that have rows in it (a file since emptied may be named)."""
        out: dict[str, list[str]] = {}
        for part, marks in _in_parts(list(trace_ids)):
            for tid, listed in self.db.execute(f"SELECT trace_id, files FROM sources WHERE trace_id IN ({marks})", part):
                for name in json.loads(listed):
                    out.setdefault(name, []).append(tid)
        return out

    def traces_in(self, names: Iterable[str]) -> list[str]:
        """The traces that have rows in any of these files."""
        wanted = set(names)
        return [tid for tid, files in self.db.execute("SELECT trace_id, files FROM sources")
                if not wanted.isdisjoint(json.loads(files))]

    def trace_files(self, trace_id: str) -> list[str]:
        row = self.db.execute("SELECT files FROM sources WHERE trace_id = ?", (trace_id,)).fetchone()
        return json.loads(row[0]) if row is not None else []

    def put_file(self, db: sqlite3.Connection, name: str, rows: int) -> None:
        db.execute("INSERT OR REPLACE INTO files VALUES (?, ?)", (name, rows))

    def set_rows(self, db: sqlite3.Connection, left: dict[str, int]) -> None:
        """Files rewritten: name -> rows left (0: listed no more)."""
        db.executemany("UPDATE files SET rows = ? WHERE name = ?", ((rows, name) for name, rows in left.items() if rows))
        db.executemany("DELETE FROM files WHERE name = ?", ((name,) for name, rows in left.items() if not rows))

    # removing traces -------------------------------------------------------------------------
    def untrust(self, db: sqlite3.Connection, trace_ids: Iterable[str]) -> None:
        """Before rows of these traces are removed from the files: their recorded signature and rows
        match nothing, so that a sync stopped before forgetting them finds them changed and
        converts them again in full (never as traces that only grew)."""
        db.executemany("UPDATE sources SET t_size = -2, digest = '' WHERE trace_id = ?", ((t,) for t in trace_ids))

    def forget(self, db: sqlite3.Connection, trace_ids: Iterable[str]) -> None:
        """Remove traces whose rows were dropped from the files: their source rows and units; their
        units' fingerprints become pending."""
        tids = [(t,) for t in trace_ids]
        db.executemany("INSERT OR IGNORE INTO pending SELECT fp FROM units WHERE trace_id = ?", tids)
        for table in ("sources", "units"):
            db.executemany(f"DELETE FROM {table} WHERE trace_id = ?", tids)

    def swap_units(self, db: sqlite3.Connection, trace_ids: list[str], units: list[tuple[int, str, int, int, int]]
                   ) -> list[tuple[int, str, int, int, int]]:
        """The units of these traces become ``units`` (those of their new rows): the recorded units
        that are not among them are removed (their fingerprints pending); returns the units to put
        (:meth:`put_units`), those not recorded as they are. A trace whose config changed keeps
        its messages: its units are left as they were, and their index entries unwritten."""
        old: set[tuple[int, str, int, int, int]] = set()
        for part, marks in _in_parts(trace_ids):
            old.update(db.execute(f"SELECT fp, trace_id, mi, pref, kept FROM units WHERE trace_id IN ({marks})", part))
        gone = old.difference(units)
        if gone:
            db.executemany("INSERT OR IGNORE INTO pending VALUES (?)", {(u[0],) for u in gone})
            db.executemany("DELETE FROM units WHERE trace_id = ? AND mi = ?", [(u[1], u[2]) for u in gone])
        return [u for u in units if u not in old]

    # de-duplication --------------------------------------------------------------------------
    def put_units(self, db: sqlite3.Connection, rows: list[tuple[int, str, int, int, int]], pending: bool = True) -> None:
        """Units (fp, trace_id, message_index, preference, kept); their fingerprints become pending
        (not one by one while ``meta.resolve_all`` stands for all)."""
        db.executemany("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?, ?)", rows)
        if pending:
            db.executemany("INSERT OR IGNORE INTO pending VALUES (?)", ((r[0],) for r in rows))

    def flips(self) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """Units of pending fingerprints whose shown state is wrong: (to hide, to show).

        Of the units sharing a fingerprint the one shown is the first by (preference, trace id,
        message index): the copy timed by a sidecar, else the first file in trace id order
        (SQLite compares text as UTF-8 bytes, which orders as Python orders ``str``).
        """
        # first the fingerprints that can be wrong (shared, or a copy hidden), usually none; both
        # queries read an index only
        every = bool(self.meta().get("resolve_all"))
        self.index_units()
        where = "" if every else " WHERE fp IN (SELECT fp FROM pending)"
        self.db.execute("DROP TABLE IF EXISTS temp.suspect")
        self.db.execute(
            f"CREATE TEMP TABLE suspect AS SELECT fp FROM units{where} GROUP BY fp HAVING count(*) > 1"
            f" UNION SELECT fp FROM units WHERE kept != 1{where.replace(' WHERE', ' AND')}"
        )
        rows = self.db.execute(
            f"""
            SELECT trace_id, mi, kept, rn FROM (
                SELECT trace_id, mi, kept,
                       row_number() OVER (PARTITION BY fp ORDER BY pref, trace_id, mi) AS rn
                FROM units WHERE fp IN (SELECT fp FROM temp.suspect))
            WHERE kept = {HIDING} OR (rn = 1) != (kept = 1)
            """
        ).fetchall()
        hide = [(r[0], r[1]) for r in rows if r[3] != 1]
        show = [(r[0], r[1]) for r in rows if r[3] == 1]
        return hide, show

    def shown_units(self, fps: list[int]) -> dict[int, list[tuple[str, int, int]]]:
        """fingerprint -> [(trace id, message index, preference)] of the units whose rows may be in the
        files, shown or :data:`HIDING` (a hide stopped half-way), for these fingerprints."""
        out: dict[int, list[tuple[str, int, int]]] = {}
        self.index_units()
        for k in range(0, len(fps), 500):
            part = fps[k : k + 500]
            for fp, tid, mi, pref in self.db.execute(
                    f"SELECT fp, trace_id, mi, pref FROM units WHERE kept != 0 AND fp IN ({','.join('?' * len(part))})", part):
                out.setdefault(fp, []).append((tid, mi, pref))
        return out

    def hidden(self, trace_ids: Iterable[str]) -> dict[str, list[int]]:
        """trace id -> message indexes of its units not shown."""
        out: dict[str, list[int]] = {}
        for tid in trace_ids:
            mis = [r[0] for r in self.db.execute("SELECT mi FROM units WHERE trace_id = ? AND kept != 1", (tid,))]
            if mis:
                out[tid] = mis
        return out

    def add_pending(self, db: sqlite3.Connection, fps: Iterable[int]) -> None:
        db.executemany("INSERT OR IGNORE INTO pending VALUES (?)", ((fp,) for fp in fps))

    def set_kept(self, db: sqlite3.Connection, units: Iterable[tuple[str, int]], kept: int) -> None:
        db.executemany("UPDATE units SET kept = ? WHERE trace_id = ? AND mi = ?", ((kept, t, m) for t, m in units))

    def bulk(self) -> None:
        """Before a first sync: the units' indexes are built once at the end, not row by row."""
        self.db.execute("DROP INDEX IF EXISTS units_by_fp")
        self.db.execute("DROP INDEX IF EXISTS units_hidden")
        self.db.execute("DROP INDEX IF EXISTS units_unshown")

    def index_units(self) -> None:
        self.db.execute("CREATE INDEX IF NOT EXISTS units_by_fp ON units (fp, pref)")
        self.db.execute("DROP INDEX IF EXISTS units_hidden")  # (kept = 0 only: made by earlier versions)
        self.db.execute("CREATE INDEX IF NOT EXISTS units_unshown ON units (fp) WHERE kept != 1")

    def clear_pending(self, db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM pending")
        db.execute("DELETE FROM meta WHERE key = 'resolve_all'")
