"""Compaction of a trace dataset's partitions (:func:`mmsp_notebook.traces.sync`).

Every sync that converts something writes new files in the partitions it touches: a notebook synced
every few minutes would leave a partition with hundreds of small files, which every query then
opens. At the end of a sync, a partition it touched that holds :data:`COMPACT_FILES` files or more
of under :data:`SMALL_ROWS` rows has the smallest of them merged into one (more when very many
rows), by size tiers: taken from the smallest up, a file joins (after the two smallest) only
while its rows are at most :data:`TIER_RATIO` times those of the files taken before it. A few rows written by each sync are
merged among themselves, not into the partition's large file (rewritten whole for them every
few syncs otherwise); their merged file joins the large one once it is of a comparable size, so
that a row is rewritten a few times over the dataset's life, not once every few syncs.

The merged file is written under a temporary name and renamed, the manifest then lists it in place
of the files it merged (one transaction), and those are removed last. ``traces.dataset`` and
``traces.query`` read the files the manifest lists, so they never see a row twice; a reader that
globs the folder (Dask, Spark) may, for the moment between the rename and the removal.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._convert import data_schema
from ._files import READ_ERRORS, ROW_GROUP, Unreadable, atomic_writer, open_parquet, release, row_groups

__all__ = ["plan", "merge", "SMALL_ROWS", "COMPACT_FILES", "MERGED_ROWS", "TIER_RATIO"]

#: a file with fewer rows is small
SMALL_ROWS = 20_000
#: a partition with this many small files has them merged
COMPACT_FILES = 8
#: rows of one merged file at most
MERGED_ROWS = 500_000
#: a file joins a merge while its rows are at most this many times those of the smaller files taken
TIER_RATIO = 2


def plan(files: dict[str, int], partitions: Iterable[str]) -> list[list[str]]:
    """Groups of file names to merge, among ``files`` (name -> rows) in the given partitions."""
    wanted = set(partitions)
    small: dict[str, list[tuple[str, int]]] = {}
    for name, rows in files.items():
        part = name.rsplit("/", 1)[0]
        if part in wanted and rows < SMALL_ROWS:
            small.setdefault(part, []).append((name, rows))
    groups: list[list[str]] = []
    for part in sorted(small):
        if len(small[part]) < COMPACT_FILES:
            continue
        tier: list[tuple[str, int]] = []
        taken = 0
        for name, rows in sorted(small[part], key=lambda f: (f[1], f[0])):  # the smallest first
            if len(tier) > 1 and rows > TIER_RATIO * taken:  # (the two smallest always: one far
                break  # smaller than the rest, the last chunk of a first sync say, holds none back)
            tier.append((name, rows))
            taken += rows
        group: list[str] = []
        total = 0
        for name, rows in sorted(tier):
            if group and total + rows > MERGED_ROWS:
                groups.append(group)
                group, total = [], 0
            group.append(name)
            total += rows
        if len(group) > 1:
            groups.append(group)
    return groups


def merge(root: str, names: list[str], kind: str, payloads: bool, schema_bytes: bytes | None = None
          ) -> tuple[str, int, list[str], list[str]]:
    """Write the rows of ``names`` (one partition) as one file; returns (its name, rows, trace
    ids, the damaged files among ``names``). The merged files are left in place: the caller
    removes them once the manifest lists the new one. ``schema_bytes``: the data files' schema,
    when known (see ``data_schema``). A file that cannot be read whole (damaged: see
    ``_files.verify``) makes no file written: its names are returned, no rows.

    The files are read one at a time and written in row groups of up to :data:`ROW_GROUP` rows:
    a merge holds a row group, not the merged file."""
    release()
    schema = data_schema(kind, payloads, schema_bytes)
    part = names[0].rsplit("/", 1)[0]
    new = f"{part}/part-{uuid.uuid4().hex[:16]}-m.parquet"
    tids: set[str] = set()
    damaged: list[str] = []
    rows = buffered = 0  # rows merged, rows waiting in ``pending``
    pending: list[pa.Table] = []

    def flush(out: pq.ParquetWriter) -> None:
        nonlocal buffered
        if pending:
            out.write_table(pa.concat_tables(pending).unify_dictionaries().combine_chunks(), row_group_size=ROW_GROUP)
            pending.clear()
            buffered = 0

    try:
        with atomic_writer(os.path.join(root, new), schema) as out:
            for name in names:
                try:
                    file = open_parquet(os.path.join(root, name))
                    for group in row_groups(file):
                        if damaged:  # (the others are read only to be checked)
                            continue
                        table = group.cast(schema)
                        tids.update(pc.unique(table.column("trace_id")).to_pylist())
                        if buffered + table.num_rows > ROW_GROUP:
                            flush(out)
                        pending.append(table)
                        buffered += table.num_rows
                        rows += table.num_rows
                except FileNotFoundError:  # removed by a sync that stopped before its manifest said so
                    continue
                except PermissionError:
                    raise
                except (Unreadable, *READ_ERRORS):
                    damaged.append(name)
            if damaged:
                raise _NothingToMerge
            flush(out)
            if not rows:
                raise _NothingToMerge
    except _NothingToMerge:  # no file is written
        return new, 0, [], damaged
    return new, rows, list(tids), damaged


class _NothingToMerge(Exception):
    """Every file of a merge was gone."""
