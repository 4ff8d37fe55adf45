"""Reading a trace dataset made by :func:`mmsp_notebook.traces.sync`: as a ``pyarrow.dataset``
(:func:`dataset`) or in DuckDB (:func:`connect`, :func:`query`; views ``turns``, ``items``,
``events``), both over the files the manifest lists (a file a sync is writing, or one left by an
interrupted sync, is not read). Nothing here writes: the manifest is opened read-only, so a sync may
run meanwhile.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import OptionError, OptionTypeError, TraceNotFoundError
from ._common import PathLike, TraceLoadWarning
from ._convert import KINDS, NULL_PARTITION, Job
from ._manifest import MANIFEST_NAME, open_read_only

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pandas as pd
    import pyarrow.dataset as pads

__all__ = ["dataset", "connect", "query", "read_retrying", "kind_dir", "iter_kinds", "dataset_root"]

T = TypeVar("T")


def kind_dir(dataset_dir: PathLike, kind: str = "turns") -> Path:
    """The directory of one kind of a dataset (``dataset_dir/kind``)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return Path(dataset_dir) / kind


def dataset_root(dataset_dir: PathLike | bytes, kind: str | None = None) -> PathLike:
    """The dataset folder of a path that may name one of its kind directories (``traces_ds/turns``,
    a folder holding a manifest; with ``kind``, only that kind's), else the path as it is (``~``
    expanded, as the loaders expand it). A path that is no text, or empty (the working directory),
    is refused as ``sync`` refuses it."""
    if isinstance(dataset_dir, bytes) or (isinstance(dataset_dir, os.PathLike)
                                          and isinstance(os.fspath(dataset_dir), bytes)):
        dataset_dir = os.fsdecode(dataset_dir)
    if not isinstance(dataset_dir, (str, os.PathLike)):
        several = " (one dataset at a time: query each and pd.concat the frames)" \
            if isinstance(dataset_dir, (list, tuple)) else ""
        raise OptionTypeError(f"give the directory of a trace dataset (made by traces.sync){several}, not "
                              f"{type(dataset_dir).__name__} {dataset_dir!r:.80}")
    if not os.fspath(dataset_dir):
        raise OptionError("an empty dataset path: give the directory of a trace dataset (\".\" for the working directory)")
    dataset_dir = os.path.expanduser(dataset_dir)
    p = Path(dataset_dir)
    if p.name in KINDS and (kind is None or p.name == kind) and (p / MANIFEST_NAME).is_file():
        return p.parent
    return dataset_dir


def _partition_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("month", pa.string()), ("model", pa.string())])


@functools.cache
def _full_schema(kind: str, payloads: bool) -> Any:
    """The dataset's schema: the frame's columns in the loader's order, then ``month``. ``model``
    (from the partition directories) is a string column, not the loader's dictionary: pyarrow
    gives a null partition value as a null entry of the dictionary, and tables with such
    dictionaries cannot be made DataFrames ("Cannot yet unify dictionaries with nulls")."""
    import pyarrow as pa

    from ._convert import _builder  # the frame of an empty builder: the loader's columns and types
    from ._export import to_arrow

    frame_schema = to_arrow(_builder(Job(kind, "", [], payloads=payloads)).frame()).schema.remove_metadata()
    i = frame_schema.get_field_index("model")
    return frame_schema.set(i, pa.field("model", pa.string())).append(pa.field("month", pa.string()))


@functools.cache
def _loaded_columns() -> dict[str, tuple[str, Any]]:
    """Column name -> (its DuckDB type in the views, its dtype in the loaders' frames), for the
    columns of every kind (payloads included; no name is given two dtypes by two kinds), from the
    frames of empty builders and the dataset's schema."""
    import duckdb

    from ._convert import _builder

    out: dict[str, tuple[str, Any]] = {}
    con = duckdb.connect()
    try:
        for kind in KINDS:
            con.register("_schema", _full_schema(kind, True).empty_table())
            rel = con.sql("SELECT * FROM _schema")
            types = dict(zip(rel.columns, map(str, rel.types)))
            for name, dtype in _builder(Job(kind, "", [], payloads=True)).frame().dtypes.items():
                out.setdefault(str(name), (types[str(name)], dtype))
    finally:
        con.close()
    return out


def _as_loaded(df: pd.DataFrame, types: list[Any]) -> pd.DataFrame:
    """DuckDB's frame of a query with the loaders' dtypes in the columns named as theirs and of the
    views' types (a column computed under such a name, of another type, keeps DuckDB's dtype)."""
    from ._export import as_loaded

    known = _loaded_columns()
    for i, (name, sql_type) in enumerate(zip(df.columns, types)):
        found = known.get(str(name))
        if found is not None and found[0] == str(sql_type):
            df.isetitem(i, as_loaded(df.iloc[:, i], found[1]))
    return df


def is_missing(path: str) -> bool:
    """Whether a data file is not there (a file that cannot be looked at, in an unreadable
    directory say, is not missing: reading it says what is wrong)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _state_of(root: Path, stacklevel: int = 3) -> tuple[dict[str, Any], list[str]]:
    """The manifest's meta and the data files it lists (absolute paths), read without writing: a
    sync may be running, and the folder may be a read-only copy. A listed file that is missing
    (removed by hand, or lost) raises TraceNotFoundError saying so, unless the manifest read again
    no longer lists it (a sync removed it meanwhile). A dataset whose first sync has not finished
    (running, or stopped) is read with a :class:`TraceLoadWarning` saying so: it holds the traces
    converted so far, and a message repeated across traces may show more than once."""
    meta, files = _listed_files(root)
    if meta.get("resolve_all"):  # (set by a first sync until its end, see _manifest)
        import warnings

        warnings.warn(
            f"the first traces.sync into {root} has not finished (it is running, or it was stopped: sync again to "
            f"finish it): {len(files)} data files hold the traces converted so far, and a message repeated across "
            "traces may show more than once until it finishes", TraceLoadWarning, stacklevel=stacklevel)
    missing = [f for f in files if is_missing(f)]
    if missing:
        meta, files = _listed_files(root)
        missing = [f for f in files if is_missing(f)]
    if missing:
        raise TraceNotFoundError(
            f"{len(missing)} of the {len(files)} data files the manifest of {root} lists are missing "
            f"({missing[0]}{', ...' if len(missing) > 1 else ''}): the next traces.sync into this dataset converts "
            "their traces again", path=missing[0], reason="data file missing")
    return meta, files


def _listed_files(root: Path) -> tuple[dict[str, Any], list[str]]:
    path = (root / MANIFEST_NAME).absolute()  # a relative dataset path too (an URI needs an absolute path)
    if not path.is_file():
        raise TraceNotFoundError(f"no trace dataset at {root} (make one with traces.sync)", path=str(root),
                                 reason="no such trace dataset")
    import json

    try:
        db = open_read_only(path)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # made a moment ago by a first sync, which has not written it yet
            raise TraceNotFoundError(f"no trace dataset at {root} yet: the first traces.sync into it has just "
                                     "begun", path=str(root), reason="no such trace dataset") from None
        raise
    try:
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
        names = sorted(r[0] for r in db.execute("SELECT name FROM files"))
    finally:
        db.close()
    return meta, [os.path.join(str(root), n) for n in names]


def dataset(dataset_dir: PathLike, kind: str = "turns") -> pads.Dataset:
    """The dataset as a ``pyarrow.dataset.Dataset`` of the files the manifest lists (columns of the
    loader, in its order, then ``month``; ``model`` and ``month`` come from the Hive partition
    directories, so filters on them skip whole directories)::

        ds = traces.dataset("traces_ds")
        ds.to_table(filter=pc.field("model") == "glm-5.3", columns=["latency", "cost"])

    It holds the files listed when it is made: a sync that rewrites or removes files afterwards
    makes reading it fail (``FileNotFoundError``); make a new one then. (``query`` and
    ``summary`` read the dataset again by themselves when a sync changes it under them.)

    ``.to_table().to_pandas()`` is pyarrow's own conversion, not the loaders' dtypes: integers with
    missing values as ``float64``, lists as arrays, ``model`` as text, and a category column's
    categories those of the files read, in the order pyarrow unifies the files' dictionaries (each
    file's sorted, a later file's new values after them; a filter keeps the categories of the rows
    it drops), where the loaders' are sorted; a category column holding no value (no row, all
    missing) has no category of ``object`` dtype, where the loaders' have none of text.
    :func:`query` gives the loaders' dtypes, these included.

    Reads verify the pages' checksums: a data file damaged in place fails with an ``OSError``
    ("CRC checksum verification failed"), never gives other values; pyarrow does not name the
    file there: ``traces.sync(src, dataset_dir, verify=True)`` finds it and converts its traces
    again.
    """
    import pyarrow.dataset as pads

    dataset_dir = dataset_root(dataset_dir, kind)
    root = kind_dir(dataset_dir, kind)
    part = pads.partitioning(_partition_schema(), flavor="hive")
    checked = pads.ParquetFileFormat(
        default_fragment_scan_options=pads.ParquetFragmentScanOptions(page_checksum_verification=True))

    def make() -> pads.Dataset:
        meta, files = _state_of(root)
        return pads.dataset(files, schema=_full_schema(kind, bool(meta.get("payloads"))), format=checked,
                            partitioning=part, partition_base_dir=str(root))

    return _again_if_changed(make, dataset_dir, (FileNotFoundError,))  # (a file removed since it was listed)


#: the partition values of a data file, from the last two directories of its path
_PARTS = r"/month=([^/]*)/model=([^/]*)/[^/]*$"
#: the partition columns taken from the path when DuckDB cannot read them itself (see _view_sql)
_FROM_PATH = {
    "month": f"nullif(regexp_extract(filename, '{_PARTS}', 1), '{NULL_PARTITION}')",
    "model": f"url_decode(nullif(regexp_extract(filename, '{_PARTS}', 2), '{NULL_PARTITION}'))",
}


def _view_sql(kind: str, payloads: bool, files: list[str], root: Path) -> str | None:
    """The view of a kind's files. DuckDB reads the partition columns from every ``key=value``
    directory of a file's path, the first of a name winning: when a directory above the dataset
    is named so (``snapshots/month=2024-01/ds``), they are taken from the path's last two
    directories instead (no directory is then skipped by a filter on them)."""
    if not files:
        return None
    cols = [f.name for f in _full_schema(kind, payloads)]
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    if not any("=" in part for part in Path(os.path.abspath(root)).parts):
        select = ", ".join(f'"{c}"' for c in cols)
        return (f"CREATE OR REPLACE VIEW {kind} AS SELECT {select} FROM read_parquet([{listed}], hive_partitioning = true, "
                f"hive_types = {{'month': 'VARCHAR', 'model': 'VARCHAR'}})")
    select = ", ".join(f'{_FROM_PATH[c]} AS "{c}"' if c in _FROM_PATH else f'"{c}"' for c in cols)
    return (f"CREATE OR REPLACE VIEW {kind} AS SELECT {select} FROM read_parquet([{listed}], hive_partitioning = false, "
            "filename = true)")


def connect(dataset_dir: PathLike, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (a new in-memory one, its time zone UTC as :func:`query`'s, unless ``con``
    is given) with a view per synced kind of the dataset: ``turns``, ``items``, ``events`` (the
    loader's columns, then ``month``).
    ``dataset_dir`` may name one of its kind directories (``traces_ds/turns``), as for
    :func:`query`, :func:`dataset` (that kind's) and ``summary``. Connecting another dataset to
    ``con`` replaces the views it made and warns (:class:`TraceLoadWarning`): one connection has one
    view of each name.

    The views read the files the manifest lists when they are made, as a :func:`dataset` does: after
    a sync, connect again (``traces.connect(ds, con=con)`` makes them anew), else they miss the
    traces it added and fail on a file it removed (DuckDB's "No files found that match the pattern").
    :func:`query` and ``summary`` read the files listed at each call."""
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - duckdb is an optional dependency
        raise ImportError("traces.query and traces.connect need DuckDB: pip install duckdb") from exc
    return _connect(dataset_dir, _in_utc(duckdb.connect()) if con is None else con, marked=True, stacklevel=4)


def _in_utc(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A new connection with its time zone UTC, as the dataset's months are: DuckDB's own is the
    machine's, in which ``started::DATE``, ``date_trunc`` and a ``'2026-01-01'`` compared with a
    time would be taken."""
    con.execute("SET TimeZone = 'UTC'")
    return con


def _connect(dataset_dir: PathLike, con: duckdb.DuckDBPyConnection, marked: bool,
             stacklevel: int = 3) -> duckdb.DuckDBPyConnection:
    """:func:`connect`'s views; ``marked``: a connection the caller keeps, whose views are marked as
    this dataset's and checked for another's (a private, fresh one, as :func:`read_retrying`'s, has none).
    ``stacklevel``: its warnings name the line that called the public function."""
    dataset_dir = dataset_root(dataset_dir)
    mark = _VIEW_MARK + os.path.abspath(dataset_dir)
    found = False
    moved: dict[str, str] = {}  # kind -> the other dataset its view read
    marks = _view_marks(con) if marked else {}
    for kind in KINDS:
        root = kind_dir(dataset_dir, kind)
        if not (root / MANIFEST_NAME).is_file():
            continue
        found = True
        before = marks.get(kind)
        if before is not None and before != mark:
            moved[kind] = before[len(_VIEW_MARK):]
        meta, files = _state_of(root, stacklevel)
        sql = _view_sql(kind, bool(meta.get("payloads")), files, root)
        if sql is None:  # nothing converted yet: an empty view with the right columns
            empty = _full_schema(kind, bool(meta.get("payloads"))).empty_table()
            con.register(f"_empty_{kind}", empty)
            con.execute(f"CREATE OR REPLACE VIEW {kind} AS SELECT * FROM _empty_{kind}")
        else:
            con.execute(sql)
        if marked:
            con.execute(f"COMMENT ON VIEW {kind} IS '{mark.replace(chr(39), chr(39) * 2)}'")
    if not found:
        _state_of(kind_dir(dataset_dir, "turns"))  # raises: no dataset there
    if moved:
        views, other = " and ".join(moved), next(iter(moved.values()))
        warnings.warn(f"traces.connect: the views {views} now read {dataset_dir}, no longer {other} (a connection has "
                      "one view of each name); to query two datasets, connect each to its own connection, or read "
                      f"both in one with DuckDB: read_parquet(['{other}/turns/**/*.parquet', "
                      f"'{dataset_dir}/turns/**/*.parquet'], hive_partitioning = true)", TraceLoadWarning, stacklevel=stacklevel - 1)
    return con


#: The comment :func:`connect` puts on its views: this, then the dataset's directory.
_VIEW_MARK = "mmsp_notebook.traces dataset "


def _view_marks(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """View name -> its comment, for the views :func:`connect` made on ``con`` (another dataset's, or this one's)."""
    rows = con.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
                       "AND schema_name = current_schema()").fetchall()
    return {name: c for name, c in rows if isinstance(c, str) and c.startswith(_VIEW_MARK)}


def query(sql: str, dataset_dir: PathLike) -> pd.DataFrame:
    """Run SQL over the dataset in DuckDB and return a DataFrame; the views ``turns``, ``items``
    and ``events`` are the synced kinds::

        traces.query("SELECT model, quantile_cont(latency, 0.9) FROM turns GROUP BY model", "traces_ds")

    A column named as a loader's column and of its type in the views comes with the dtype the
    loader gives it, so ``query("SELECT * FROM turns", ds)`` equals ``load_turns`` of the same
    traces (but for the row order and ``month``): nullable ``Int64``, ``datetime64[us, UTC]``,
    categories (sorted, as the loaders sort them; ``source`` with its fixed three), tuples of
    tool names. Columns the SQL computes (``count(*)``, ``avg(latency)``), ``month``, and one named
    as a loader's column but of another type keep DuckDB's pandas dtypes; so does a frame read
    through :func:`connect`. The SQL runs in UTC, as the dataset's months: ``started::DATE`` is the
    UTC day, and ``started >= '2026-01-01'`` means midnight UTC, whatever the machine's time zone.

    It may run while a sync changes the dataset: a read that fails on a file the sync rewrote or
    removed meanwhile is run again over the files the manifest then lists. DuckDB's own errors
    (``duckdb.ParserException``, ``duckdb.BinderException``, ...) say what is wrong with the SQL; a
    ``duckdb.CatalogException`` (a table that is not there) also names the views the dataset has and
    the kinds not synced into it.
    """
    if not isinstance(sql, str):
        raise OptionTypeError(f"query takes SQL text, not {type(sql).__name__} {sql!r}")

    import duckdb

    root = dataset_root(dataset_dir)

    def run(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
        try:
            rel = con.sql(sql)
        except duckdb.CatalogException as exc:  # (a table or function it does not have: say which views it has)
            raise type(exc)(f"{exc}\n{_views_note(root)}") from None
        if rel is None:  # (DuckDB's answer to blank text or comments)
            raise OptionError(f"no SQL statement to run in {sql!r}: give one, e.g. 'SELECT count(*) FROM turns'")
        return _as_loaded(rel.df(), rel.types)

    return read_retrying(run, root)


def _views_note(dataset_dir: PathLike) -> str:
    """Which views a query over ``dataset_dir`` has, and how to make the others."""
    have = iter_kinds(dataset_dir)
    note = f"the views of the trace dataset {dataset_dir} are: {', '.join(have)}"
    others = [k for k in KINDS if k not in have]
    if others:
        note += (f" ({' and '.join(others)} {'is' if len(others) == 1 else 'are'} not synced: "
                 f"traces.sync(src, dataset_dir, kind={others[0]!r}) makes {'it' if len(others) == 1 else 'one'})")
    return note


def _files_state(dataset_dir: PathLike) -> tuple[Any, ...]:
    """What a read of the dataset depends on: the files each synced kind's manifest lists, with
    their sizes and modification times."""
    out: list[Any] = []
    for kind, files in _kinds_files(dataset_dir):
        if files is None:
            out.append((kind, None))
            continue
        listed: list[tuple[str, int | None, int | None]] = []
        for f in files:
            try:
                st = os.stat(f)
                listed.append((f, st.st_size, st.st_mtime_ns))
            except OSError:
                listed.append((f, None, None))
        out.append((kind, tuple(listed)))
    return tuple(out)


def _kinds_files(dataset_dir: PathLike) -> Iterator[tuple[str, list[str] | None]]:
    """Each synced kind with the data files its manifest lists (None: its manifest cannot be read)."""
    for kind in iter_kinds(dataset_dir):
        try:
            yield kind, _listed_files(kind_dir(dataset_dir, kind))[1]
        except (TraceNotFoundError, OSError, sqlite3.Error):
            yield kind, None


def read_retrying(read: Callable[[duckdb.DuckDBPyConnection], T], dataset_dir: PathLike, attempts: int = 4) -> T:
    """``read(connect(dataset_dir))``; when it fails to read a file while a sync changes the
    dataset (a file rewritten, merged or removed since the connection listed it), it runs again
    over the files then listed. A read that fails with the files as they were (a damaged file, a
    bad query) raises at once."""
    import duckdb

    def once() -> T:
        con = _in_utc(duckdb.connect())
        try:
            return read(_connect(dataset_dir, con, marked=False))  # (making the views reads the files' schemas)
        finally:
            con.close()

    try:
        return _again_if_changed(once, dataset_dir, (duckdb.IOException, duckdb.InvalidInputException, FileNotFoundError),
                                 attempts)
    except (duckdb.IOException, duckdb.InvalidInputException) as exc:
        note = _damaged_note(dataset_dir, str(exc))
        if note is None:
            raise
        raise type(exc)(f"{exc}\n{note}") from None


def _damaged_note(dataset_dir: PathLike, error: str) -> str | None:
    """When a read failed on a data file of the dataset (DuckDB names it, or its footer cannot be
    read): which, and how the dataset mends it. None for any other error."""
    if "parquet" not in error.lower() and "TProtocolException" not in error and "Thrift" not in error:
        return None
    listed = [f for _kind, files in _kinds_files(dataset_dir) for f in files or []]
    bad = [f for f in listed if os.path.basename(f) in error]  # (its names are unique: part-<random>-n.parquet)
    if not bad:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for f in listed:  # (the footers first: a few ms a file)
            try:
                pq.read_metadata(f)
            except (OSError, pa.ArrowException):
                bad.append(f)
    if not bad:
        from ._files import verify

        bad = [f for f in listed if not verify(f)]  # (whole, their pages' checksums checked)
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"the dataset's data file {bad[0]}{more} cannot be read (damaged or cut short): remove it and run "
            "traces.sync again, which converts its traces anew")


def _again_if_changed(step: Callable[[], T], dataset_dir: PathLike, errors: tuple[type[BaseException], ...],
                      attempts: int = 4) -> T:
    """``step()``, run again (up to ``attempts`` times in all) when it fails with one of ``errors``
    while the dataset's files changed under it; raised as it is when they did not."""
    for attempt in range(attempts):
        before = _files_state(dataset_dir)
        try:
            return step()
        except errors:
            if attempt == attempts - 1 or _files_state(dataset_dir) == before:
                raise
        time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def iter_kinds(dataset_dir: PathLike) -> list[str]:
    """The kinds synced into ``dataset_dir``."""
    return [k for k in KINDS if (kind_dir(dataset_dir, k) / MANIFEST_NAME).is_file()]
