"""Per-group statistics of a turns frame (:func:`summary`), in pandas over a frame or in DuckDB over
a trace dataset (:func:`mmsp_notebook.traces.sync`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._errors import OptionError, OptionTypeError
from ._common import FROM_OTEL, plain
from ._turns import SOURCES

__all__ = ["summary"]

_SEQUENCES = (tuple, list, np.ndarray)


def summary(turns: Any, by: str | Sequence[str] | None = "model") -> pd.DataFrame:
    """Per-group statistics of a turns frame, or of a trace dataset computed in DuckDB.

    Columns: ``count`` (turns, failed included), ``latency_p50/p90/p99``, ``ttft_p50/p90/p99``
    and ``tokens_per_s_p50/p90/p99`` (over the turns that have the value), ``cost_total`` and
    ``cost_mean`` (USD, over the turns with a known cost; NaN when none), ``cost_missing`` (turns
    whose model has no price), ``error_rate`` (share of turns whose status is not ``complete``:
    error, incomplete or cancelled) and ``truncation_rate`` (share of complete turns that ended
    with ``finish_reason == "length"``).

    The same figures come out of a frame and of a dataset holding the same turns: percentiles
    interpolate linearly in both (pandas' ``quantile``, DuckDB's ``quantile_cont``).

    Args:
        turns: a frame from :func:`load_turns` (``otel=True`` frames are accepted), or a trace
            dataset: its directory (made by :func:`sync`) or :func:`dataset`'s
            ``pyarrow.dataset.Dataset``; a dataset is summarized in DuckDB without loading it.
        by: column(s) to group by (OTel names accepted; a dataset also has ``month``); ``None``
            summarizes everything as one row labelled ``"all"``.
    """
    keys: list[str] = []
    if by is not None:
        keys = [by] if isinstance(by, str) else list(by) if isinstance(by, Iterable) else [by]
        if not all(isinstance(k, str) for k in keys):
            raise OptionTypeError(f"summary: by takes a column name or a list of them (None for one row of all "
                                  f"turns), not {type(by).__name__} {by!r:.80}")
        keys = [FROM_OTEL.get(k, k) for k in keys]
    if not isinstance(turns, pd.DataFrame):
        return _finish(_sql_rows(turns, keys), keys)
    df = plain(turns)
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise OptionError(f"summary: no column {', '.join(map(repr, missing))} to group by; columns: "
                          f"{', '.join(df.columns)}")
    rows: list[dict[str, Any]] = []
    index: list[Any] = []
    # a column of tuples (tool_names) is grouped by each tuple's place among them, in Python's
    # order as DuckDB orders lists (pandas does not sort tuples among missing values), and the
    # tuples put back as the keys
    ranked: dict[int, list[Any]] = {}
    for i, k in enumerate(keys):
        if df[k].dtype == object and any(isinstance(v, _SEQUENCES) for v in df[k]):
            # (a frame read back from Parquet holds arrays there, one from JSON lists: each a tuple again)
            df = df.assign(**{k: pd.Series([tuple(v) if isinstance(v, _SEQUENCES) else v for v in df[k]],
                                           index=df.index, dtype=object)})
            values = sorted({v for v in df[k] if isinstance(v, tuple)})
            place = {v: n for n, v in enumerate(values)}
            df = df.assign(**{k: pd.array([place.get(v) if isinstance(v, tuple) else None for v in df[k]], dtype="Int64")})
            ranked[i] = values
    if keys:
        groups: Iterable[tuple[Any, pd.DataFrame]] = df.groupby(keys, observed=True, dropna=False, sort=True)
    else:
        groups = [("all", df)]
    for key, g in groups:
        if ranked:
            parts = list(key) if isinstance(key, tuple) else [key]
            for i, values in ranked.items():
                parts[i] = None if pd.isna(parts[i]) else values[int(parts[i])]
            key = tuple(parts) if len(keys) > 1 else parts[0]
        elif isinstance(key, tuple) and len(keys) == 1:
            key = key[0]
        if (isinstance(key, float) and key != key) or key is pd.NA:  # (the group of missing values: None, as DuckDB gives it for a dataset)
            key = None
        row: dict[str, Any] = {"count": len(g)}
        for col in ("latency", "ttft", "tokens_per_s"):
            s = pd.to_numeric(g[col], errors="coerce").dropna() if col in g else pd.Series(dtype=float)
            for q in (50, 90, 99):
                row[f"{col}_p{q}"] = float(s.quantile(q / 100)) if len(s) else float("nan")
        # (a hand-made frame's text is no number there, as for the times above: a sum of texts joins them)
        cost = pd.to_numeric(g["cost"], errors="coerce").dropna() if "cost" in g else pd.Series(dtype=float)
        row["cost_total"] = float(cost.sum()) if len(cost) else float("nan")
        row["cost_mean"] = float(cost.mean()) if len(cost) else float("nan")
        row["cost_missing"] = int(pd.to_numeric(g["cost_missing"], errors="coerce").fillna(0).astype(bool).sum()) \
            if "cost_missing" in g else 0
        status = g["status"].astype(object) if "status" in g else pd.Series(["complete"] * len(g))
        complete = status == "complete"
        row["error_rate"] = float((~complete).mean()) if len(g) else float("nan")
        n_complete = int(complete.sum())
        finish = g["finish_reason"].astype(object) if "finish_reason" in g else pd.Series([None] * len(g))
        truncated = int(((finish == "length") & complete.to_numpy()).sum())
        row["truncation_rate"] = truncated / n_complete if n_complete else float("nan")
        rows.append(row)
        index.append(key)
    return _finish((rows, index), keys)


def _finish(rows_index: tuple[list[dict[str, Any]], list[Any]], keys: list[str]) -> pd.DataFrame:
    rows, index = rows_index
    out = pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)
    if keys:
        if len(keys) == 1:
            # (tupleize_cols: a column of tuples, tool_names, keys each group by its tuple, not a MultiIndex)
            out.index = pd.Index(index, name=keys[0], tupleize_cols=False)
        elif index:
            out.index = pd.MultiIndex.from_tuples(index, names=keys)
        else:
            out.index = pd.MultiIndex.from_arrays([[] for _ in keys], names=keys)
    else:
        out.index = pd.Index(index)
    out = out.astype({c: "float64" for c in _SUMMARY_COLUMNS})
    out["count"] = out["count"].astype("int64")
    out["cost_missing"] = out["cost_missing"].astype("int64")
    return out


_SUMMARY_COLUMNS = [
    "count",
    *(f"{col}_p{q}" for col in ("latency", "ttft", "tokens_per_s") for q in (50, 90, 99)),
    "cost_total",
    "cost_mean",
    "cost_missing",
    "error_rate",
    "truncation_rate",
]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _order(key: str) -> str:
    """What the groups of ``key`` are ordered by: its value, or for ``source`` its place among the
    column's categories, as a frame's groups are (the other categories are sorted)."""
    if key == "source":
        return f"list_position([{', '.join(repr(s) for s in SOURCES)}], {_q(key)})"
    return _q(key)


#: the columns of the turns the summary reads in a dataset
_NEEDED = ("latency", "ttft", "tokens_per_s", "cost", "cost_missing", "status", "finish_reason")


def _sql_rows(source: Any, keys: list[str]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The summary's rows computed in DuckDB over a dataset (directory or pyarrow Dataset)."""
    import duckdb

    from ._readers import _views_note, dataset_root, read_retrying

    def run(con: Any) -> tuple[list[str], list[Any]]:
        try:
            cols = [r[0] for r in con.execute("DESCRIBE turns").fetchall()]
        except duckdb.CatalogException:  # (a dataset folder of other kinds only: say which it has)
            raise OptionError(f"summary takes a dataset of turns; {_views_note(dataset_root(source))}") from None
        missing = [k for k in keys if k not in cols]
        if missing:
            raise OptionError(f"summary: no column {', '.join(map(repr, missing))} to group by in the dataset's turns; "
                              f"columns: {', '.join(cols)}")
        lacking = [c for c in _NEEDED if c not in cols]
        if lacking:
            raise OptionError(f"summary takes a dataset of turns; this one has no {', '.join(map(repr, lacking))} "
                              f"column (columns: {', '.join(cols)})")
        num = "{c} IS NOT NULL AND NOT isnan({c})"
        aggs = ["count(*) AS count"]
        for col in ("latency", "ttft", "tokens_per_s"):
            for q in (50, 90, 99):
                aggs.append(f"quantile_cont({col}, {q / 100}) FILTER (WHERE {num.format(c=col)}) AS {col}_p{q}")
        aggs += [
            f"sum(cost) FILTER (WHERE {num.format(c='cost')}) AS cost_total",
            f"avg(cost) FILTER (WHERE {num.format(c='cost')}) AS cost_mean",
            "count(*) FILTER (WHERE cost_missing) AS cost_missing",
            "avg(CASE WHEN status = 'complete' THEN 0.0 ELSE 1.0 END) AS error_rate",
            "(count(*) FILTER (WHERE status = 'complete' AND finish_reason = 'length'))::DOUBLE"
            " / nullif(count(*) FILTER (WHERE status = 'complete'), 0) AS truncation_rate",
        ]
        group = ", ".join(_q(k) for k in keys)
        sql = f"SELECT {group + ', ' if keys else ''}{', '.join(aggs)} FROM turns"
        if keys:
            sql += f" GROUP BY {group} ORDER BY " + ", ".join(f"{_order(k)} ASC NULLS LAST" for k in keys)
        result = con.execute(sql)
        return [d[0] for d in result.description], result.fetchall()

    if isinstance(source, (str, bytes, os.PathLike)):
        # (a kind directory, traces_ds/turns, is taken for its dataset; while a sync changes the files too)
        names, fetched = read_retrying(run, dataset_root(source, "turns"))
    else:
        import pyarrow as pa
        import pyarrow.dataset as pads

        if not isinstance(source, (pads.Dataset, pa.Table)):
            raise OptionTypeError(f"summary takes a turns frame (load_turns, query), a dataset directory (sync) or "
                                  f"its traces.dataset(...), not {type(source).__name__} {source!r:.80}")
        con = duckdb.connect()
        con.register("turns", source)
        try:
            names, fetched = run(con)
        finally:
            con.close()
    rows: list[dict[str, Any]] = []
    index: list[Any] = []
    n = len(keys)
    for r in fetched:
        row = dict(zip(names[n:], r[n:]))  # (no turns and no keys: the row "all" of no turns, as of a frame)
        rows.append({k: (float("nan") if v is None else v) for k, v in row.items()})
        key = tuple(tuple(v) if isinstance(v, list) else v for v in r[:n])  # (a list column's values as a frame's tuples)
        index.append((key[0] if n == 1 else key) if keys else "all")
    return rows, index
