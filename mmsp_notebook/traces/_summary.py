"""Per-group statistics of a turns frame (:func:`summary`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ._common import FROM_OTEL, plain

__all__ = ["summary"]


def summary(turns: pd.DataFrame, by: str | Sequence[str] | None = "model") -> pd.DataFrame:
    """Per-group statistics of a turns frame.

    Columns: ``count`` (turns, failed included), ``latency_p50/p90/p99``, ``ttft_p50/p90/p99``
    and ``tokens_per_s_p50/p90/p99`` (over the turns that have the value), ``cost_total`` and
    ``cost_mean`` (USD, over the turns with a known cost; NaN when none), ``cost_missing`` (turns
    whose model has no price), ``error_rate`` (share of turns whose status is not ``complete``:
    error, incomplete or cancelled) and ``truncation_rate`` (share of complete turns that ended
    with ``finish_reason == "length"``).

    Args:
        turns: a frame from :func:`load_turns` (``otel=True`` frames are accepted).
        by: column(s) to group by (OTel names accepted); ``None`` summarizes everything as one
            row labelled ``"all"``.
    """
    df = plain(turns)
    keys: list[str] = []
    if by is not None:
        keys = [by] if isinstance(by, str) else list(by)
        keys = [FROM_OTEL.get(k, k) for k in keys]
    rows: list[dict[str, Any]] = []
    index: list[Any] = []
    if keys:
        groups: Iterable[tuple[Any, pd.DataFrame]] = df.groupby(keys, observed=True, dropna=False, sort=True)
    else:
        groups = [("all", df)]
    for key, g in groups:
        if isinstance(key, tuple) and len(keys) == 1:
            key = key[0]
        row: dict[str, Any] = {"count": len(g)}
        for col in ("latency", "ttft", "tokens_per_s"):
            s = pd.to_numeric(g[col], errors="coerce").dropna() if col in g else pd.Series(dtype=float)
            for q in (50, 90, 99):
                row[f"{col}_p{q}"] = float(s.quantile(q / 100)) if len(s) else float("nan")
        cost = g["cost"].dropna() if "cost" in g else pd.Series(dtype=float)
        row["cost_total"] = float(cost.sum()) if len(cost) else float("nan")
        row["cost_mean"] = float(cost.mean()) if len(cost) else float("nan")
        row["cost_missing"] = int(g["cost_missing"].sum()) if "cost_missing" in g else 0
        status = g["status"].astype(object) if "status" in g else pd.Series(["complete"] * len(g))
        complete = status == "complete"
        row["error_rate"] = float((~complete).mean()) if len(g) else float("nan")
        n_complete = int(complete.sum())
        finish = g["finish_reason"].astype(object) if "finish_reason" in g else pd.Series([None] * len(g))
        truncated = int(((finish == "length") & complete.to_numpy()).sum())
        row["truncation_rate"] = truncated / n_complete if n_complete else float("nan")
        rows.append(row)
        index.append(key)
    out = pd.DataFrame(rows, columns=_SUMMARY_COLUMNS)
    if keys:
        if len(keys) == 1:
            out.index = pd.Index(index, name=keys[0])
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
