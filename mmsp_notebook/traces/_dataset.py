"""Trace datasets: mmsp traces converted incrementally into a Hive-partitioned Parquet dataset
(:func:`sync`), read with pyarrow, DuckDB (``_readers``: ``dataset``, ``connect``, ``query``), Dask
or Spark.

Layout of ``dataset_dir``::

    turns/_manifest.sqlite                        what was converted (see ``_manifest``)
    turns/month=2026-01/model=glm-5.3/part-<token>-<n>.parquet
    turns/month=__HIVE_DEFAULT_PARTITION__/...    rows without a start time
    items/...   events/...                        the other kinds, when synced

The files hold the columns of ``load_turns`` (``load_items`` / ``load_events``) with the types
:func:`~mmsp_notebook.traces.to_arrow` gives them, except ``model``, which is in the path with the
UTC ``month`` (``YYYY-MM``) of ``started`` (``created_at`` for items); model ids are URI-encoded there,
capital letters too, so that ids differing only in case never share a directory (a trace whose
model no directory name can hold is skipped with the reason; see ``_convert`` for both), and read
back as a string column.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Container, Iterator
from concurrent.futures import Executor
from numbers import Real
from pathlib import Path
from typing import Any

from .._errors import OptionError, OptionTypeError, TraceNotFoundError
from ..core.pricing import Prices, PriceTable
from ..core.store import MAX_FILE_SIZE
from ._common import PathLike, check_flags, check_max_size, dir_path, max_size_of
from ._compact import merge, plan
from ._convert import KINDS, Job, convert, held_path, unread
from ._copies import Settled, resolve, settle_chunk
from ._files import UNREADABLE, DamagedFiles, reprice, rewrite
from ._folder import CHECKED, check_kind_dir, clean, locked, stat_of
from ._load import PROGRESS_THRESHOLD
from ._manifest import MANIFEST_NAME, UNREAD_SIZE, Manifest
from ._readers import kind_dir
from ._result import SyncResult, warn
from ._runner import Runner, not_while_importing_main
from ._scan import CHANGED, DELETED, NEW, WINDOW, scan_sources
from ._snapshot import ScanCopy
from ._walk import Pattern

__all__ = ["sync", "SyncResult"]

#: traces per chunk at most: a worker holds one chunk's frame at a time
CHUNK_FILES = 2000
#: bytes of trace files and sidecars per chunk at most (one large trace still makes a chunk)
CHUNK_BYTES = 128 << 20
#: on the default pool a chunk is made smaller to spread the work, down to this many traces (a
#: sync of fewer runs in this process: starting workers would cost more than it saves)
MIN_CHUNK = 1000
#: traces removed at a time (the files holding them are rewritten once a window)
REMOVE_WINDOW = 50_000
#: runs of a sync's steps at most: each after data files were found damaged (and removed)
MAX_ATTEMPTS = 8


# --------------------------------------------------------------------------- sync


def sync(
    src: PathLike,
    dataset_dir: PathLike,
    *,
    kind: str = "turns",
    executor: Executor | None = None,
    chunk_files: int = CHUNK_FILES,
    progress: bool | None = None,
    pattern: str = "**/*.json",
    dedupe: bool = True,
    prices: Prices | None = None,
    payloads: bool = False,
    verify: bool = False,
    max_size: int = MAX_FILE_SIZE,
) -> SyncResult:
    """Convert the traces under ``src`` into the Parquet dataset ``dataset_dir/<kind>``, incrementally.

    The first run converts every trace; later runs convert only traces whose trace file or
    sidecar is new or changed (size and change time: the later of mtime and ctime, which a copy
    keeping its mtime does not keep; plus a content hash for files modified within two seconds of
    the scan), replace a changed trace's rows (mmsp's Tracer rewrites the
    whole conversation each turn) and remove the rows of traces whose files are gone. The rows are
    those of ``load_turns(src, dedupe=dedupe, prices=prices)`` (``load_items`` / ``load_events``
    for the other kinds), repeated messages shown once across the whole dataset by the loaders'
    rule.

    Interrupting a sync leaves the dataset readable (files are written to a temporary name and
    renamed; the manifest is updated after the data it describes); the next run finishes the work.
    Ctrl-C raises one ``KeyboardInterrupt`` here, the pool's workers ended first (they never take
    the signal themselves; see ``_runner``).
    Memory is bounded by a chunk per worker (``chunk_files`` traces, at most 128 MB of files), not
    by the corpus; the main process reads the folder and the manifest a window of traces at a
    time (the traces to convert wait in the manifest's work table) and holds the traces of the
    chunks in flight, and rows only when the whole sync is one chunk (run in this process).

    Args:
        src: the directory the traces are in (as for the loaders; globbed with ``pattern``).
        dataset_dir: where the dataset is (created when missing); its kind directory
            (``traces_ds/turns``) stands for it, as for the readers.
        kind: ``"turns"``, ``"items"`` or ``"events"``.
        executor: any ``concurrent.futures.Executor`` to convert chunks on, e.g.
            ``dask.distributed.Client(...).get_executor()`` (its workers must reach ``src`` and
            ``dataset_dir`` under the same paths); default a process pool with one worker per
            CPU, or this process when there is a single chunk.
        chunk_files: traces per chunk (task), at most.
        progress: a ``tqdm.auto`` bar; ``None`` = when more than 200 traces are converted.
        verify: read every data file whole, checking its pages' checksums, and rebuild a damaged
            one (see below). Without it, a sync checks the files changed since the last sync
            left them, and every file it reads to rewrite or merge.
        pattern, dedupe, prices, payloads, max_size: as for the loaders (``prices`` for turns,
            the only kind with cost columns: items and events refuse it; ``payloads`` for items;
            a trace file or sidecar over ``max_size`` bytes is skipped as ``too large``).
            A sync with other ``pattern``, ``dedupe``, ``payloads`` or ``max_size`` than the
            dataset was made with rebuilds it; with other prices (``prices``, or mmsp's list prices after an upgrade)
            it recomputes the turns' cost columns in every file, reading no trace again.

    A data file the manifest lists that is missing, or damaged (cut short; a page failing its
    checksum, in a file changed since the last sync or one the sync reads), is removed and the
    traces with rows in it converted again from their trace files, in the same run: the result's
    ``rebuilt`` names such files, and a :class:`TraceLoadWarning` says so.

    Returns:
        A :class:`SyncResult`. Trace files that could not be used are listed in its
        ``skipped`` and, when found in this run, summarized in a :class:`TraceLoadWarning`.

    Raises:
        TraceNotFoundError: ``src`` does not exist.
        OptionError: ``prices`` for items or events (a ``ValueError``; nothing is written).
        ValueError: a bad ``kind`` or ``chunk_files``, a ``dataset_dir`` that is a file, a dataset
            synced from another directory, or a kind directory (``dataset_dir/<kind>``) that is no
            dataset and holds files of its own (nothing in it is touched).
        ManifestError: the dataset's manifest is damaged or from another version (nothing is
            changed; a new ``dataset_dir`` starts afresh).
        SyncBusyError: another sync of the same dataset kind is running (a ``RuntimeError``, as
            ``ManifestError`` is; both are exported by ``mmsp_notebook``).
        OSError: the dataset cannot be written (a full disk, a read-only folder); readable as it
            was, the next sync finishes the work.
    """
    not_while_importing_main()
    t0 = time.time()
    src = dir_path(src, "src")
    # (absolute, as src: the workers of an executor may run in other directories, a cluster's do)
    dataset_dir = _dataset_of(os.path.abspath(dir_path(dataset_dir, "dataset_dir")), kind)
    root = kind_dir(dataset_dir, kind)
    if not isinstance(chunk_files, int) or isinstance(chunk_files, bool):
        raise OptionTypeError(f"chunk_files takes a number of traces, not {type(chunk_files).__name__} {chunk_files!r}")
    if chunk_files < 1:
        raise ValueError(f"chunk_files must be at least 1, not {chunk_files}")
    if prices is not None and kind != "turns":  # (their loaders take no prices: nothing of theirs has a cost)
        raise OptionError(f"prices apply to the turns' cost columns only; the {kind} have none: sync kind={kind!r} without prices")
    if executor is not None and not isinstance(executor, Executor):
        # (a Dask client has a submit of its own, whose futures no concurrent.futures.wait takes)
        hint = ": give client.get_executor()" if hasattr(executor, "get_executor") else ""
        raise OptionTypeError(f"executor takes a concurrent.futures.Executor (a process or thread pool, Dask's "
                              f"client.get_executor()), not {type(executor).__name__} {executor!r:.80}{hint}")
    check_flags(progress=progress, dedupe=dedupe, payloads=payloads, verify=verify)
    check_max_size(max_size)
    Pattern(pattern)  # a bad pattern fails here, before a dataset made with another is reset
    src_path = os.path.abspath(os.fspath(src))
    if not os.path.isdir(src_path):
        if not os.path.exists(src_path):
            raise TraceNotFoundError(f"no such trace directory: {src}", path=os.fspath(src), reason="no such trace file or directory")
        raise ValueError(f"sync takes a directory of traces, not a file: {src}")
    # a bad price fails here, before anything is written. The table keeps mmsp's list prices as
    # this process has them, so that every worker prices with them; its fingerprint (the user's
    # and the list prices) tells when the turns' cost columns must be recomputed
    table = PriceTable(prices).snapshot()
    pricing = table.digest() if kind == "turns" else None
    options = {
        "version": Manifest.version(),
        "kind": kind,
        "pattern": pattern,
        "dedupe": bool(dedupe) and kind != "events",
        "prices": _as_json(prices) if prices else None,  # (what it was made with, for the record)
        "payloads": bool(payloads) if kind == "items" else False,
        # (None for the default: a dataset made before sync took it keeps its rows)
        "max_size": None if max_size == MAX_FILE_SIZE else max_size,
    }
    for p in (Path(dataset_dir), root):
        if p.exists() and not p.is_dir():
            raise ValueError(f"dataset_dir must be a directory; {p} is a file")
    check_kind_dir(root)  # (a folder of someone else's files: nothing of it is touched)
    # the dataset's directories, left out of the scan when they lie inside src (or src is the
    # dataset_dir): those of the kinds synced there, never the rest of the folder
    own = [str(d) for d in map(functools.partial(kind_dir, dataset_dir), KINDS) if d == root or (d / MANIFEST_NAME).exists()]
    real_src, real_root = os.path.realpath(src_path), os.path.realpath(root)
    if real_src == real_root or real_src.startswith(real_root + os.sep):
        raise ValueError(f"the trace directory {src} is inside the dataset's own {root}: keep traces elsewhere")
    root.mkdir(parents=True, exist_ok=True)
    with locked(root), Manifest(str(root)) as m:
        meta = m.meta()
        if meta.get("src") not in (None, src_path) and os.path.realpath(meta["src"]) != os.path.realpath(src_path):
            raise ValueError(
                f"{root} holds traces of {meta['src']}, not {src_path}: sync into another dataset_dir"
            )
        if meta and any(meta.get(k) != v for k, v in options.items() if k != "prices"):
            with m.transaction() as db:  # other options: the rows would differ, start again
                m.reset(db)
        with m.transaction() as db:
            first = not m.db.execute("SELECT 1 FROM sources LIMIT 1").fetchone()
            token = m.meta().get("scan_token")  # (the scan's copy: trusted by no other sync until this one ends)
            # a first sync settles every fingerprint at the end instead of listing them one by one
            m.set_meta(db, {**options, "src": src_path, "scan_token": None,
                            **({"resolve_all": True, "pricing": pricing} if first else {})})
        if m.meta().get("resolve_all"):
            m.bulk()
        sc = ScanCopy(m, str(root), token, first)
        rebuilt: list[str] = []  # data files found missing or damaged, whose traces were converted again
        stopped: list[_Sync] = []  # the attempts that found damaged files
        try:  # (the copy is mended once the sync ends; closed whatever happens)
            for attempt in range(MAX_ATTEMPTS):
                state = _Sync(m, root, options, executor, chunk_files, progress, table)
                try:
                    result, fresh = state.run(src_path, pattern, t0, own, pricing, verify and not attempt, sc)
                    break
                except DamagedFiles as exc:  # removed: the next attempt finds them missing, as a sync stopped here would
                    sc.copy = None  # (its scan reads the manifest: the copy is only mended at the end)
                    if attempt == MAX_ATTEMPTS - 1:
                        raise OSError(f"data files of {root} are found damaged again and again as this sync writes "
                                      f"them ({', '.join(exc.names[:3])}): is the disk failing?") from exc
                    for name in exc.names:
                        try:
                            os.remove(root / name)
                        except FileNotFoundError:
                            pass
                    state.rebuilt.extend(exc.names)
                    stopped.append(state)
                except KeyboardInterrupt:  # the pool's workers ended at once: what they were writing is left for the next sync
                    state.runner.close(abort=True)
                    raise
                finally:
                    state.runner.close()
                    rebuilt.extend(n for n in state.rebuilt if n not in rebuilt)
            sc.finish(WINDOW)
        finally:
            sc.close()
        result.rebuilt = sorted(rebuilt)
        scanned = next((s.result for s in stopped if s.result is not None), None)
        if scanned is not None:  # what the first scan found (the next ones found the traces it converted unchanged)
            result.converted, result.removed, result.unchanged = scanned.converted, scanned.removed, scanned.unchanged
        if stopped:  # (a note found twice, by a chunk whose commit failed, once)
            notes = [n for s in stopped for n in s.found] + result.new_skipped
            result.new_skipped = list({(n["path"], n["reason"]): n for n in notes}.values())
        result.skipped = m.notes() + (m.meta().get("unnamed") or [])
        result.traces = m.counts()[0]
        result.files, result.rows = m.db.execute("SELECT count(*), coalesce(sum(rows), 0) FROM files").fetchone()
    result.seconds = time.time() - t0
    warn(result, result.converted + len(fresh))
    return result


class _Sync:
    """One sync's steps, each committed to the manifest after the files it changed. The traces to
    convert or remove are read from the manifest's ``todo`` table a window at a time."""

    def __init__(self, m: Manifest, root: Path, options: dict[str, Any], executor: Executor | None,
                 chunk_files: int, progress: bool | None, prices: PriceTable) -> None:
        self.m, self.root, self.options, self.prices = m, root, options, prices
        self.runner = Runner(executor)
        self.chunk_files, self.progress = chunk_files, progress
        self.touched: set[str] = set()  # partitions that got new files
        self._file_schema: bytes | None = None
        self.rebuilt: list[str] = []  # data files found missing or damaged, their traces converted again
        self.result: SyncResult | None = None  # (once the scan is done)
        self.found: list[dict[str, str]] = []  # skip notes of the traces committed, as they are
        self._running: dict[str, list[tuple[Any, ...]]] = {}  # first trace id of a chunk -> its todo rows
        #: replaced traces waiting for their old rows to be removed: (their todo rows, results, held files, units)
        self._held: list[tuple[Any, ...]] = []

    def run(self, src_path: str, pattern: str, t0: float, own: list[str], pricing: str | None,
            verify: bool, sc: ScanCopy) -> tuple[SyncResult, list[dict[str, str]]]:
        """The sync's steps; returns its result and the traces left out for their names found in
        this run. A data file found damaged by a step that reads it raises :class:`DamagedFiles`
        (the files it changed until then are those of a sync stopped there)."""
        o = self.options
        fresh: list[dict[str, str]] = []
        self.repair(self.clean(verify))
        # other prices (the user's, or mmsp's list prices after an upgrade): the cost columns
        # of every file are recomputed in place, before any trace is converted with them
        repriced = self.reprice(pricing) if self.m.meta().get("pricing") != pricing else 0
        copy, draft = sc.for_scan()
        scan = scan_sources(src_path, pattern, self.m, t0, skip=own, copy=copy, draft=draft,
                            max_size=max_size_of(self.options))
        sc.scanned(scan.damaged)
        result = self.result = SyncResult(o["kind"], self.root, scan.new + scan.changed, scan.deleted, scan.unchanged,
                                          repriced)
        self.remove_todo(DELETED)
        self.convert(NEW)
        # a changed trace that only grew gets its new rows; any other is removed, then converted
        self.convert(CHANGED, priors=True)
        self.replace()
        if scan.unnamed is not None:  # listed: these are the notes of the listing now
            reported = self.m.meta().get("unnamed") or []
            fresh = [n for n in scan.unnamed if n not in reported]
        result.new_skipped = self.found + fresh
        if o["dedupe"]:
            self.resolve()  # (which ends a first sync)
        elif self.m.meta().get("resolve_all"):
            with self.m.transaction() as db:  # nothing to resolve: the first sync ends here
                self.m.clear_pending(db)
        self.compact()
        self.record_sizes()
        if scan.dirs is not None or scan.settled:
            with self.m.transaction() as db:
                if scan.dirs is not None:  # the listing is complete: later scans may trust it
                    self.m.put_dirs(db, scan.dirs)
                    self.m.set_meta(db, {"unnamed": scan.unnamed, "links": scan.linked})
                self.m.settle(db)
        return result, fresh

    def _rewrite(self, by_file: dict[str, tuple[list[str], list[tuple[str, int]]]]) -> dict[str, int]:
        """Rewrite files without the given traces' rows / units' rows; file -> rows left. A file
        left with none is not touched: :meth:`_emptied` removes it once the manifest no longer
        lists it (a reader of the manifest never finds a listed file missing)."""
        kind = self.options["kind"]
        tasks = [(str(self.root), name, kind, tids, units) for name, (tids, units) in sorted(by_file.items())]
        left: dict[str, int] = {}
        damaged: list[str] = []
        for task, n in self.runner.run(rewrite, tasks, len(tasks), io=True):
            if isinstance(n, str):  # UNREADABLE
                damaged.append(task[1])
            else:
                left[task[1]] = n
        if damaged:  # (once every rewrite has ended: none is left running)
            raise DamagedFiles(damaged)
        return left

    def clean(self, verify: bool) -> set[str]:
        """Remove what an interrupted sync left (see ``_folder.clean``); returns the listed files
        that are missing or damaged (removed), which :meth:`repair` converts again. Files changed
        since the last sync left them (every file, with ``verify``) are read whole first."""
        since = -1 if verify else self.m.meta().get(CHECKED)  # (None: a dataset of an earlier version, not checked)
        lost = clean(self.root, self.m.file_sizes(), since)
        self.rebuilt.extend(sorted(lost))
        return lost

    def reprice(self, pricing: str | None) -> int:
        """Recompute the cost columns of every file with the sync's prices, then record their
        fingerprint; returns the files rewritten. The fingerprint is cleared first: interrupted,
        the files may hold costs of either prices, and the next sync reprices them all, whichever
        prices it has. A file that cannot be read is removed and its traces converted again."""
        with self.m.transaction() as db:
            self.m.set_meta(db, {"pricing": None})
        names = sorted(self.m.file_names())
        tasks = [(str(self.root), name, self.prices) for name in names]
        bar = _progress_bar(len(tasks), self.progress, "repricing turns")
        n = 0
        damaged: set[str] = set()
        try:
            for task, changed in self.runner.run(reprice, tasks, len(tasks), io=True):
                if changed == UNREADABLE:
                    damaged.add(task[1])
                else:
                    n += bool(changed)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        if damaged:
            for name in damaged:
                os.remove(self.root / name)
            self.rebuilt.extend(sorted(damaged))
            self.repair(damaged)
        with self.m.transaction() as db:
            self.m.set_meta(db, {"pricing": pricing})
        return n

    def record_sizes(self) -> None:
        """Keep the size of every listed file as this sync leaves it, and the latest of their
        modification times (see ``_folder.clean``)."""
        known = self.m.file_sizes()
        now: dict[str, int] = {}
        newest = self.m.meta().get(CHECKED, -1)
        for name in known:
            st = stat_of(self.root / name)
            if st is not None:
                now[name] = st.st_size
                newest = max(newest, st.st_mtime_ns)
        if now != known or newest != self.m.meta().get(CHECKED):
            with self.m.transaction() as db:
                if now != known:
                    self.m.put_sizes(db, now)
                self.m.set_meta(db, {CHECKED: newest})

    def repair(self, lost: set[str]) -> None:
        """Data files the manifest lists that are gone: their traces are forgotten (their rows
        dropped from other files) and the folder listed again, so that they are converted anew."""
        if not lost:
            return
        self.remove(self.m.traces_in(lost))
        with self.m.transaction() as db:
            self.m.set_rows(db, dict.fromkeys(lost, 0))  # (a file no trace named any more)
            self.m.put_dirs(db, {})  # the folder is listed again

    def remove_todo(self, state: int) -> None:
        """Drop every row of the traces in ``todo`` with this state (a window of them at a time)."""
        for page in self.m.todo_pages(state, REMOVE_WINDOW):
            self.remove([r[0] for r in page])

    def remove(self, trace_ids: list[str]) -> None:
        """Drop every row of these traces from the files, then forget them."""
        if not trace_ids:
            return
        left = self._drop(trace_ids)
        with self.m.transaction() as db:
            self._forget(db, trace_ids, left)
        self._emptied(left)

    def _drop(self, trace_ids: list[str]) -> dict[str, int]:
        """Rewrite the files holding rows of these traces without them; file -> rows left. They are
        marked changed first (see ``Manifest.untrust``)."""
        with self.m.transaction() as db:
            self.m.untrust(db, trace_ids)
        none: list[tuple[str, int]] = []
        return self._rewrite({name: (tids, none) for name, tids in self.m.files_of(trace_ids).items()})

    def _emptied(self, left: dict[str, int]) -> None:
        """Remove the files :meth:`_rewrite` left with no rows (listed no more)."""
        for name, rows in left.items():
            if not rows:
                try:
                    os.remove(self.root / name)
                except FileNotFoundError:
                    pass

    def _forget(self, db: Any, trace_ids: list[str], left: dict[str, int]) -> None:
        self.m.set_rows(db, left)
        self.m.forget(db, trace_ids)

    def convert(self, state: int, hide: dict[str, list[int]] | None = None, priors: bool = False) -> list[dict[str, str]]:
        """Convert the traces in ``todo`` with this state chunk by chunk, committing each chunk as it
        finishes; returns the skip notes found. With ``priors``, each is converted against the rows
        the dataset holds for it: those that did not only grow wait for :meth:`replace` (their
        rows written under hidden names, nothing of them committed)."""
        n = self.m.todo_count(state)
        if not n:
            return []
        o = self.options
        limit = self._limit(n)
        schema = self._schema()
        hide = hide or {}
        n_chunks = -(-n // limit)
        alone = 2 if n_chunks == 1 and self.runner.given is None else 1  # run here, alone: write on two threads

        def jobs() -> Iterator[tuple[Job]]:
            for part in self._chunks(state, limit):
                ids = [r[0] for r in part]
                self._running[ids[0]] = part
                yield (Job(o["kind"], str(self.root), [r[:3] for r in part], o["dedupe"], self.prices, o["payloads"],
                           {t: hide[t] for t in ids if t in hide}, self.m.priors(ids) if priors else {}, schema, alone,
                           max_size_of(o)),)

        notes: list[dict[str, str]] = []
        bar = _progress_bar(n, self.progress, f"syncing {o['kind']}")
        try:
            for (job,), res in self.runner.run(convert, jobs(), n_chunks):
                part = self._running.pop(job.sources[0][0])
                if res.replaced:  # committed by replace(), once their old rows are gone
                    gone = set(res.replaced)
                    self._held.append(([r for r in part if r[0] in gone], {t: res.traces.pop(t) for t in res.replaced},
                                       res.held, [u for u in res.units if u[1] in gone]))
                    res.units = [u for u in res.units if u[1] not in gone]
                files, units, settled = settle_chunk(self, res.files, res.units)
                notes.extend(self._commit(job.prior, part, res.traces, files, units, settled))
                if bar is not None:
                    bar.update(len(job.sources))
        finally:
            self._running.clear()
            if bar is not None:
                bar.close()
        return notes

    def _schema(self) -> bytes | None:
        """The schema of the dataset's files, read from one of them (None: there is none yet)."""
        if self._file_schema is None:
            import pyarrow.parquet as pq

            for (name,) in self.m.db.execute("SELECT name FROM files"):
                try:
                    self._file_schema = pq.read_schema(self.root / name).remove_metadata().serialize().to_pybytes()
                    break
                except (OSError, ValueError):
                    continue
        return self._file_schema

    def _limit(self, n: int) -> int:
        """Traces per chunk for ``n`` traces: at most ``chunk_files``; on the default pool, small
        enough for four chunks a worker (the last round finishes together)."""
        limit = self.chunk_files
        if self.runner.given is None:
            workers = max(1, os.cpu_count() or 1)
            limit = min(limit, max(MIN_CHUNK, -(-n // (4 * workers))))
        return limit

    def _chunks(self, state: int, limit: int) -> Iterator[list[tuple[Any, ...]]]:
        """Consecutive ``todo`` rows, at most ``limit`` and :data:`CHUNK_BYTES` of files a chunk."""
        part: list[tuple[Any, ...]] = []
        size = 0
        for page in self.m.todo_pages(state, WINDOW):
            for r in page:
                n = max(r[3], 0) + max(r[5], 0)
                if part and (len(part) >= limit or size + n > CHUNK_BYTES):
                    yield part
                    part, size = [], 0
                part.append(r)
                size += n
        if part:
            yield part

    def replace(self) -> list[dict[str, str]]:
        """The changed traces whose rows were all replaced, a window of them at a time: their old
        rows are removed from the files, the files of their new rows renamed into place and their
        copies of repeated messages settled (see ``_copies.settle_chunk``), then one transaction
        forgets the old rows and records the new; returns their skip notes.

        Interrupted before the transaction, the manifest still holds the old signatures: the next
        sync finds the traces changed and replaces them again (the new files, listed nowhere, are
        removed as leftovers)."""
        notes: list[dict[str, str]] = []
        held, self._held = self._held, []
        while held:
            batch: list[tuple[Any, ...]] = []
            n = 0
            while held and (not batch or n + len(held[-1][1]) <= REMOVE_WINDOW):
                batch.append(held.pop())
                n += len(batch[-1][1])
            part = [r for b in batch for r in b[0]]
            traces = {t: v for b in batch for t, v in b[1].items()}
            files = [f for b in batch for f in b[2]]
            units = [u for b in batch for u in b[3]]
            left = self._drop(list(traces))
            for name, _n, _tids in files:  # (in place, listed nowhere yet)
                path = os.path.join(self.root, name)
                os.replace(held_path(path), path)
            files, units, settled = settle_chunk(self, files, units, frozenset(traces), frozenset(n for n, r in left.items() if not r))
            with self.m.transaction() as db:  # (recorded anew: no earlier rows, all were replaced)
                self.m.set_rows(db, left)
                notes += self._put(db, (), part, traces, files, self.m.swap_units(db, list(traces), units))
                if settled.hidden:
                    self.m.set_rows(db, settled.left)
                    self.m.set_kept(db, settled.hidden, 0)
            self._emptied({**left, **settled.left})
        return notes

    def _commit(self, grown: Container[str], part: list[tuple[Any, ...]],
                traces: dict[str, tuple[bool, list[dict[str, str]], int, str]], files: list[tuple[str, int, list[str]]],
                units: list[tuple[int, str, int, int, int]], settled: Settled) -> list[dict[str, str]]:
        """Record in the manifest the traces of a chunk and the files holding their rows, with the
        copies of the dataset it hid (see ``_copies.settle_chunk``)."""
        with self.m.transaction() as db:
            notes = self._put(db, grown, part, traces, files, units)
            if settled.hidden:
                self.m.set_rows(db, settled.left)
                self.m.set_kept(db, settled.hidden, 0)
        self._emptied(settled.left)
        return notes

    def _put(self, db: Any, grown: Container[str], part: list[tuple[Any, ...]],
             traces: dict[str, tuple[bool, list[dict[str, str]], int, str]], files: list[tuple[str, int, list[str]]],
             units: list[tuple[int, str, int, int, int]]) -> list[dict[str, str]]:
        """Put in the manifest (in the transaction ``db``) the traces of a chunk (their todo rows
        ``part``) and the files holding their rows; traces in ``grown`` keep the files of their
        earlier rows too. Returns their skip notes."""
        import orjson

        info = {r[0]: r for r in part}
        notes: list[dict[str, str]] = []
        where: dict[str, list[str]] = {}
        self.touched.update(name.rsplit("/", 1)[0] for name, _n, _t in files)
        for name, _n, tids in files:
            for t in tids:
                where.setdefault(t, []).append(name)
        rows = []
        for tid, (loaded, tnotes, n_rows, digest) in traces.items():
            notes.extend(tnotes)
            mine = where.get(tid, [])
            if tid in grown:  # it grew: its earlier rows stay where they are
                mine = self.m.trace_files(tid) + mine
            _t, path, sidecar, *sig, content_hash = info[tid]
            if unread(tnotes):  # (made readable, its size and mtime need not change)
                sig[0] = UNREAD_SIZE
            rows.append((tid, *sig, content_hash, orjson.dumps(tnotes).decode() if tnotes else None,
                         int(loaded), n_rows, digest, path, sidecar, orjson.dumps(mine).decode()))
        self.m.put_sources(db, rows)
        for name, n, _tids in files:
            self.m.put_file(db, name, n)
        if units:
            self.m.put_units(db, units, pending=not self.m.meta().get("resolve_all"))
        self.found.extend(notes)  # (the transaction may yet fail: a sync stopped then finds them again)
        return notes

    def compact(self) -> None:
        """Merge the small files of the partitions this sync wrote into (see ``_compact``)."""
        groups = plan(self.m.file_rows(), self.touched)
        o = self.options
        schema = self._schema() if groups else None
        tasks = [(str(self.root), g, o["kind"], o["payloads"], schema) for g in groups]
        damaged: list[str] = []
        for (_root, names, *_), (new, rows, tids, bad) in self.runner.run(merge, tasks, len(tasks), io=True):
            if bad:  # (nothing written)
                damaged.extend(bad)
                continue
            with self.m.transaction() as db:
                self.m.move(db, tids, names, new, rows)
            for name in names:  # listed no more: readers of the manifest no longer open them
                try:
                    os.remove(self.root / name)
                except FileNotFoundError:
                    pass
        if damaged:
            raise DamagedFiles(sorted(damaged))

    def resolve(self) -> None:
        resolve(self)


def _dataset_of(dataset_dir: str, kind: str) -> str:
    """The dataset folder of ``dataset_dir``, which may be its kind directory (``traces_ds/turns``,
    as the readers take it) for that kind; another kind's is refused (it would nest a dataset
    in it)."""
    kind_dir(dataset_dir, kind)  # (a bad kind is named first)
    p = Path(dataset_dir)
    if p.name in KINDS and (p / MANIFEST_NAME).is_file():
        if p.name != kind:
            raise ValueError(f"{dataset_dir} is the {p.name} directory of the dataset {p.parent}: give {p.parent} as dataset_dir")
        return str(p.parent)
    return dataset_dir


def _as_json(prices: Prices) -> dict[str, Any]:
    """Checked prices as the manifest keeps them (JSON): model ids as text, the numbers as floats
    (a NumPy or Fraction price is taken as the loaders take it)."""
    return {str(model): {str(k): float(v) if isinstance(v, Real) else v for k, v in dict(p).items()}
            for model, p in prices.items()}


def _progress_bar(n: int, progress: bool | None, desc: str) -> Any:
    show = n > PROGRESS_THRESHOLD if progress is None else bool(progress)
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n, desc=desc, unit="file")
