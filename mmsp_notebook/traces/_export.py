"""Export of the frames of :mod:`mmsp_notebook.traces`: Arrow tables and Parquet files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ._common import PathLike, Paths
from ._load import load_turns

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["to_arrow", "to_parquet"]

#: Arrow types for the object columns (they may be all-None in a small frame).
_ARROW_OBJECT_TYPES = {
    "tool_names": ("list", "string"),
    "images": ("list", "string"),
    "embedding": ("list", "float64"),
    "data": ("scalar", "string"),
}


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """A ``pyarrow.Table`` of a frame from this module (index dropped).

    Category columns become dictionary arrays, tuples of tool names ``list<string>``, nullable
    integers stay integers with nulls, timestamps stay UTC. ``df.attrs`` is stored as JSON in the
    schema metadata under ``PANDAS_ATTRS``, where ``pandas.read_parquet`` restores it.
    """
    import pyarrow as pa

    schema = pa.Schema.from_pandas(df, preserve_index=False)
    for name, dtype in df.dtypes.items():
        # every category column is a dictionary of strings, also when it holds no value at all
        # (client_type without sidecars, finish_reason of sidecar-only turns), so that files
        # written from any corpus share one schema
        if isinstance(dtype, pd.CategoricalDtype) and (
            len(dtype.categories) == 0 or pd.api.types.is_string_dtype(dtype.categories.dtype)
        ):
            i = schema.get_field_index(str(name))
            schema = schema.set(i, pa.field(str(name), pa.dictionary(pa.int32(), pa.string())))
    for name, (shape, inner) in _ARROW_OBJECT_TYPES.items():
        if name in df.columns:
            t = pa.string() if inner == "string" else pa.float64()
            typ = pa.list_(t) if shape == "list" else t
            schema = schema.set(schema.get_field_index(name), pa.field(name, typ))
    table = pa.Table.from_pandas(df, schema=schema, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"PANDAS_ATTRS"] = json.dumps(df.attrs, default=str).encode()
    return table.replace_schema_metadata(meta)


def to_parquet(df_or_path: pd.DataFrame | Paths, out: PathLike, **load_kwargs: Any) -> Path:
    """Write a turns (or items / events) frame to Parquet; returns the output path.

    ``df_or_path`` is a DataFrame, or trace path(s) loaded first with :func:`load_turns`
    (``load_kwargs`` are passed on). Read it back with ``pandas.read_parquet`` or query it with
    DuckDB (``SELECT model, avg(latency) FROM 'turns.parquet' GROUP BY model``).
    """
    import pyarrow.parquet as pq

    df = df_or_path if isinstance(df_or_path, pd.DataFrame) else load_turns(df_or_path, **load_kwargs)
    out = Path(out)
    pq.write_table(to_arrow(df), out)
    return out
