"""Export of the frames of :mod:`mmsp_notebook.traces`: Arrow tables and Parquet files; and back,
a column read from them (by DuckDB) in the dtype the loaders give it (:func:`as_loaded`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ._columns import as_num, as_text, cat_col, obj_col, obj_series
from ._common import PathLike, Paths
from ._load import load_turns

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["to_arrow", "to_parquet", "as_loaded"]

#: Arrow types for the object columns (they may be all-None in a small frame).
_ARROW_OBJECT_TYPES = {
    "tool_names": ("list", "string"),
    "images": ("list", "string"),
    "embedding": ("list", "float64"),
    "data": ("scalar", "string"),
}
#: the sequence a list column's values are in the loaders' frames (the others hold lists, as parsed)
_SEQUENCES = {"tool_names": tuple}


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and as_num(v) is not None else None


def _list_of(fit: Any) -> Any:
    def convert(v: Any) -> list[Any] | None:
        if v is None or (isinstance(v, float) and v != v):
            return None
        return [fit(x) for x in v] if isinstance(v, (list, tuple)) else [fit(v)]

    return convert


_FIT = {
    ("list", "string"): _list_of(as_text),
    ("list", "float64"): _list_of(_number),
    ("scalar", "string"): lambda v: None if isinstance(v, float) and v != v else as_text(v),
}


def to_arrow(df: pd.DataFrame) -> pa.Table:
    """A ``pyarrow.Table`` of a frame from this module (index dropped).

    Category columns become dictionary arrays, tuples of tool names ``list<string>``, nullable
    integers stay integers with nulls, timestamps stay UTC. ``df.attrs`` is stored as JSON in the
    schema metadata under ``PANDAS_ATTRS``, where ``pandas.read_parquet`` restores it. Payload
    columns holding what their type cannot (a foreign file's number as ``data``, a string in an
    ``embedding``) are exported as the nearest value: JSON text for a string column, null for a
    number that is not one.
    """
    import pyarrow as pa

    try:
        table = _table(df)
    except (pa.ArrowException, UnicodeEncodeError, TypeError, ValueError, OverflowError):
        # a payload column holding what its type cannot (a number as ``data``, a string in an
        # embedding, a lone surrogate): exported as the nearest value of the column's type
        fitted = df.assign(**{name: df[name].map(_FIT[shape, inner]) for name, (shape, inner) in _ARROW_OBJECT_TYPES.items()
                              if name in df.columns})
        table = _table(fitted)
    meta = dict(table.schema.metadata or {})
    meta[b"PANDAS_ATTRS"] = json.dumps(df.attrs, default=str).encode()
    return table.replace_schema_metadata(meta)


def _table(df: pd.DataFrame) -> pa.Table:
    import pyarrow as pa

    # the payload columns' types are given: object columns are not inferred (they may be all None)
    payload = {name: spec for name, spec in _ARROW_OBJECT_TYPES.items() if name in df.columns}
    schema = pa.Schema.from_pandas(df.drop(columns=list(payload)), preserve_index=False)
    for name, dtype in df.dtypes.items():
        # every category column is a dictionary of strings, also when it holds no value at all
        # (client_type without sidecars, finish_reason of sidecar-only turns), so that files
        # written from any corpus share one schema
        if isinstance(dtype, pd.CategoricalDtype) and (
            len(dtype.categories) == 0 or pd.api.types.is_string_dtype(dtype.categories.dtype)
        ):
            i = schema.get_field_index(str(name))
            schema = schema.set(i, pa.field(str(name), pa.dictionary(pa.int32(), pa.string())))
    fields = {f.name: f for f in schema}
    for name, (shape, inner) in payload.items():
        t = pa.string() if inner == "string" else pa.float64()
        fields[name] = pa.field(name, pa.list_(t) if shape == "list" else t)
    schema = pa.schema([fields[str(c)] for c in df.columns], metadata=schema.metadata)
    return pa.Table.from_pandas(df, schema=schema, preserve_index=False)


def as_loaded(col: pd.Series, dtype: Any) -> pd.Series:
    """A column of a frame from :func:`to_arrow`'s types (read back by DuckDB, say: strings for the
    dictionaries, lists as arrays) in ``dtype``, the loaders' dtype of a column of its name.

    Category columns are made as the loaders make them (:func:`~._columns.cat_col`: categories
    sorted, no value no category) or with the loaders' own categories when these are fixed and
    hold every value (``source``); list columns hold tuples of tool names, lists of the rest;
    timestamps are UTC. A boolean column holding nulls (an outer join's) stays as it is.
    """
    if isinstance(dtype, pd.CategoricalDtype):
        values = col.to_numpy(dtype=object, na_value=None)
        fixed = dtype.categories
        if len(fixed) and pd.Series(values, dtype=object).dropna().isin(fixed).all():
            out = pd.Categorical(values, dtype=dtype)
        else:
            out = cat_col(values)
        return pd.Series(out, index=col.index, name=col.name)
    if isinstance(dtype, pd.DatetimeTZDtype):
        return col.dt.tz_convert(dtype.tz).astype(dtype)
    if pd.api.types.is_bool_dtype(dtype) and col.isna().any():
        return col
    spec = _ARROW_OBJECT_TYPES.get(str(col.name))
    if spec is not None and spec[0] == "list":
        seq = _SEQUENCES.get(str(col.name), list)
        values = [None if v is None or v is pd.NA or (isinstance(v, float) and v != v)
                  else seq(v.tolist() if hasattr(v, "tolist") else v) for v in col]
        return obj_series(obj_col(values)).set_axis(col.index).rename(col.name)
    return col.astype(dtype)


def to_parquet(df_or_path: pd.DataFrame | Paths, out: PathLike, **load_kwargs: Any) -> Path:
    """Write a turns (or items / events) frame to Parquet; returns the output path.

    ``df_or_path`` is a DataFrame, or trace path(s) loaded first with :func:`load_turns`
    (``load_kwargs`` are passed on). Read it back with ``pandas.read_parquet`` or query it with
    DuckDB (``SELECT model, avg(latency) FROM 'turns.parquet' GROUP BY model``). ``read_parquet``
    gives the frame's dtypes but for a category column holding no value (no row, all missing): no
    category, of ``object`` dtype where the loaders' have none of text (pyarrow's conversion of an
    empty dictionary).
    """
    import pyarrow.parquet as pq

    df = df_or_path if isinstance(df_or_path, pd.DataFrame) else load_turns(df_or_path, **load_kwargs)
    out = Path(out).expanduser()  # (as pandas' to_parquet takes ~)
    pq.write_table(to_arrow(df), out)
    return out
