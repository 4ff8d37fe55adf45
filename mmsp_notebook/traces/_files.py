"""The data files of a trace dataset (:func:`mmsp_notebook.traces.sync`): written atomically, and
changed in place a row group at a time.

Every file is written under a hidden temporary name in its partition directory and renamed into
place, so a reader never opens half a file. Its pages carry CRC checksums, which every read here
verifies: a file damaged in place (bytes overwritten at its own size) is an error
(:class:`DamagedFiles` from a rewrite), never rows with other values. A file changed after it was written (rows removed,
costs recomputed) is read and written one row group at a time: the memory it takes is that of a
row group (at most :data:`ROW_GROUP` rows), not of the file. Merged files (``_compact``) are
written the same way, so no step of a sync holds more than a chunk's rows or a row group.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.pricing import PriceTable
from ._turns import row_costs, row_prices

__all__ = ["ROW_GROUP", "NULL_PARTITION", "UNREADABLE", "DamagedFiles", "READ_ERRORS", "Unreadable", "atomic_write", "atomic_writer", "key_mask",
           "open_parquet", "partition_model", "read_group", "release", "reprice", "rewrite", "row_groups", "verify"]

#: rows of a row group at most, in the files merged or rewritten here
ROW_GROUP = 16_384
#: Hive's name for a missing partition value (pyarrow, Spark, Dask and DuckDB read it as null)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: what :func:`reprice` returns for a file it cannot read as Parquet
UNREADABLE = "unreadable"


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns a data file dictionary-encodes: those whose Arrow type is a dictionary (a few
    distinct values). The others are written plain: their values are mostly distinct (ids,
    numbers, timestamps), where a dictionary makes the file no smaller and its writing ~30 %
    slower."""
    return [f.name for f in schema if pa.types.is_dictionary(f.type)]


def _temporary(path: str) -> str:
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f".{name}.tmp")


class DamagedFiles(Exception):
    """Data files of the dataset found damaged (their pages fail their checksums, their footer
    does not read) by a step that relies on them: the sync removes them and converts their traces
    again."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"damaged data files: {', '.join(names)}")
        self.names = names


#: errors of reading a damaged file (a page failing its checksum is an OSError, a bad footer or
#: thrift header an OSError or ArrowInvalid)
READ_ERRORS = (OSError, pa.ArrowException)


def atomic_write(table: pa.Table, path: str) -> None:
    """Write ``table`` as the Parquet file ``path`` (a temporary file renamed into place)."""
    tmp = _temporary(path)
    pq.write_table(table, tmp, use_dictionary=dictionary_columns(table.schema), write_page_checksum=True)
    os.replace(tmp, path)


@contextmanager
def atomic_writer(path: str, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
    """A ``ParquetWriter`` whose file becomes ``path`` when the block ends (nothing does when it
    raises: the temporary file is removed)."""
    tmp = _temporary(path)
    writer = pq.ParquetWriter(tmp, schema, use_dictionary=dictionary_columns(schema), write_page_checksum=True)
    try:
        yield writer
    except BaseException:
        writer.close()
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    writer.close()
    os.replace(tmp, path)


def partition_model(name: str) -> str | None:
    """The model of a data file's partition, from its name (``month=.../model=<model>/part-...``)."""
    for part in name.split("/"):
        if part.startswith("model="):
            model = unquote(part[len("model="):])
            return None if model == NULL_PARTITION else model
    return None


def key_mask(tids: np.ndarray, mi: np.ndarray, sidecar: np.ndarray | None, keys: set[tuple[str, int]]) -> np.ndarray:
    """Rows whose (trace id, message index) is one of ``keys`` (but a sidecar-only row, which is no
    copy of a message)."""
    mask = np.fromiter(((t, m) in keys for t, m in zip(tids, mi.tolist())), dtype=bool, count=len(tids))
    if sidecar is not None:
        mask &= ~sidecar
    return mask


class Unreadable(Exception):
    """A data file whose row groups cannot all be read."""


def open_parquet(path: str) -> pq.ParquetFile:
    """A data file to read a row group at a time: without pre-buffering (which reads whole column
    chunks ahead into buffers of its own) and, in :func:`read_group`, without Arrow's thread
    pool: the tasks that read run side by side already, and each holds one row group. Page
    checksums are verified (a file written without them, by an earlier version, has none to)."""
    return pq.ParquetFile(path, pre_buffer=False, page_checksum_verification=True)


def read_group(file: pq.ParquetFile, i: int, columns: list[str] | None = None) -> pa.Table:
    return file.read_row_group(i, columns=columns, use_threads=False)


def release() -> None:
    """Hand the memory Arrow's pool keeps for reuse back to the system (a worker that converted
    a chunk holds on to it), before a task that reads and writes files."""
    pa.default_memory_pool().release_unused()


def row_groups(file: pq.ParquetFile) -> Iterator[pa.Table]:
    """The file's row groups, read one at a time (see :func:`read_group`); a group that cannot be
    read (damaged) raises :class:`Unreadable`."""
    for i in range(file.num_row_groups):
        try:
            group = read_group(file, i)
        except FileNotFoundError:
            raise
        except READ_ERRORS as exc:
            raise Unreadable from exc
        yield group


def verify(path: str) -> bool:
    """Whether a data file reads whole, every page matching its checksum (False: damaged; a file
    that cannot be opened for want of permission is not for this check to say: True)."""
    try:
        file = open_parquet(path)
        for i in range(file.num_row_groups):
            read_group(file, i)
    except (FileNotFoundError, PermissionError):
        return True
    except READ_ERRORS:
        return False
    return True


def rewrite(root: str, name: str, kind: str, drop_traces: list[str], drop_units: list[tuple[str, int]]) -> int | str:
    """Rewrite one data file without the rows of ``drop_traces`` and of the units ``drop_units``;
    returns the rows left, or :data:`UNREADABLE` for a damaged file (left as it is: the caller
    converts its traces again). The columns that say which rows go are read first: a file left
    unchanged is not written, nor one left with no rows (0: the caller removes it once the manifest
    no longer lists it, so that no reader of the manifest finds a listed file missing). The file is
    then written again a row group at a time."""
    path = os.path.join(root, name)
    release()
    needed = ["trace_id"] + (["message_index"] + (["source"] if kind == "turns" else []) if drop_units else [])
    try:
        file = open_parquet(path)
        keys = file.read(columns=needed, use_threads=False)
    except FileNotFoundError:
        return 0
    except PermissionError:
        raise
    except READ_ERRORS:
        return UNREADABLE
    tids = keys.column("trace_id")
    drop = pc.is_in(tids, value_set=pa.array(drop_traces, pa.large_string())) if drop_traces else None
    if drop_units:
        mi = pc.fill_null(keys.column("message_index"), -1).to_numpy()
        sidecar = None
        if kind == "turns":
            sidecar = pc.fill_null(pc.equal(keys.column("source").cast(pa.string()), "sidecar"), False).to_numpy()
        unit = pa.array(key_mask(tids.to_numpy(), mi, sidecar, set(drop_units)))
        drop = unit if drop is None else pc.or_(drop, unit)
    if drop is None or not pc.any(drop).as_py():
        return keys.num_rows
    keep = pc.invert(drop)
    left = pc.sum(keep).as_py() or 0
    if left == 0:  # left as it is: the caller removes it once no manifest lists it
        return 0
    start = 0
    try:
        with atomic_writer(path, file.schema_arrow) as out:
            for group in row_groups(file):
                part = group.filter(keep.slice(start, group.num_rows))
                start += group.num_rows
                if part.num_rows:
                    out.write_table(part, row_group_size=ROW_GROUP)
    except Unreadable:  # damaged past the columns read first: the file is left as it is
        return UNREADABLE
    return left


#: the columns :func:`reprice` computes from and compares
_PRICED = ("client_type", "cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens", "total_tokens",
           "cost", "cost_missing")


def reprice(root: str, name: str, prices: PriceTable) -> bool | str:
    """Recompute the ``cost`` and ``cost_missing`` columns of one turns file with the price table
    ``prices``, as the loader computes them. The file is rewritten (a row group at a time) only
    when a value changes; returns whether it was, or :data:`UNREADABLE` (a damaged file: the caller
    converts its traces again)."""
    path = os.path.join(root, name)
    release()
    try:
        file = open_parquet(path)
        table = file.read(columns=list(_PRICED), use_threads=False)  # the whole file only when a value changes
    except (FileNotFoundError, PermissionError):
        if not os.path.exists(path):
            return False
        raise
    except (OSError, pa.ArrowException):  # not Parquet, cut short, a damaged footer
        return UNREADABLE
    n = table.num_rows
    model = partition_model(name)
    model_cat = pd.Categorical.from_codes(np.zeros(n, np.int8) if model is not None else np.full(n, -1, np.int8),
                                          categories=[model] if model is not None else [])
    client = table.column("client_type").to_pandas()
    client_cat = client.array if isinstance(client.dtype, pd.CategoricalDtype) else pd.Categorical(client)
    buckets = (pc.fill_null(table.column(b), 0).to_numpy().astype(np.float64)
               for b in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"))
    no_usage = table.column("total_tokens").is_null().to_numpy(zero_copy_only=False)
    cost, missing = row_costs(buckets, no_usage, row_prices(model_cat, client_cat, prices))
    old_cost = table.column("cost").to_numpy()
    old_missing = table.column("cost_missing").to_numpy(zero_copy_only=False)
    if np.array_equal(old_cost, cost, equal_nan=True) and np.array_equal(old_missing, missing):
        return False
    schema = file.schema_arrow
    i, j = schema.get_field_index("cost"), schema.get_field_index("cost_missing")
    start = 0
    try:
        with atomic_writer(path, schema) as out:
            for group in row_groups(file):  # (damaged past its footer: the file is left as it is)
                end = start + group.num_rows
                group = group.set_column(i, schema.field(i), pa.array(cost[start:end], schema.field(i).type, from_pandas=True))  # NaN: null
                group = group.set_column(j, schema.field(j), pa.array(missing[start:end], schema.field(j).type))
                out.write_table(group, row_group_size=ROW_GROUP)
                start = end
    except Unreadable:
        return UNREADABLE
    return True
