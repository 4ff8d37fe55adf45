"""Plots of a turns frame (matplotlib, the ``plot`` extra): latency and usage over time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from .._errors import OptionError, OptionTypeError
from ._common import FROM_OTEL, plain

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["plot_latency", "plot_usage_over_time"]


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is installed in the test env
        raise ImportError(
            "mmsp_notebook.traces plots need matplotlib: pip install 'mmsp_notebook[plot]' "
            "(or pip install matplotlib)"
        ) from exc
    return plt


def _frame(turns: Any, plot: str, needed: Sequence[str], by: str | None) -> tuple[pd.DataFrame, str | None]:
    """The turns frame to plot (this package's column names) and its ``by`` column, or a clear
    error: a plot takes a frame of turns, grouped by one of its columns."""
    if not isinstance(turns, pd.DataFrame):
        raise OptionTypeError(f"{plot} takes a turns frame (traces.load_turns, or traces.query('SELECT * FROM turns', "
                              f"dataset_dir) for a dataset), not {type(turns).__name__} {turns!r:.80}")
    df = plain(turns)
    lacking = [c for c in needed if c not in df.columns]
    if lacking:
        raise OptionError(f"{plot} takes a turns frame (traces.load_turns); this one has no "
                          f"{', '.join(map(repr, lacking))} column (columns: {', '.join(map(str, df.columns))})")
    if by is not None:
        by = FROM_OTEL.get(by, by)
        if by not in df.columns:
            raise OptionError(f"{plot}: no column {by!r} to group by; columns: {', '.join(map(str, df.columns))}")
    return df, by


def _numbers(column: pd.Series) -> pd.Series:
    """A column as float64, NaN where it holds no number (a hand-made frame's text, NA in an object column)."""
    return pd.to_numeric(column.astype(object), errors="coerce").astype("float64")


def _times(column: pd.Series, name: str) -> pd.Series:
    """A time column as UTC datetimes: a frame read back from CSV holds ISO texts, each read (NaT when
    it is none); one of numbers has no unit to read them in, and is refused with what to do."""
    if isinstance(column.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(column.dtype):
        return column
    if pd.api.types.is_numeric_dtype(column.dtype):
        raise OptionError(f"plot_usage_over_time: {name!r} holds numbers, not times (a frame read back from JSON?); "
                          f"convert it first, e.g. turns[{name!r}] = pd.to_datetime(turns[{name!r}], unit='ms', utc=True)")
    return pd.to_datetime(column.astype(object).where(column.notna(), None), utc=True, errors="coerce", format="ISO8601")


def plot_latency(
    turns: pd.DataFrame,
    by: str | None = "model",
    metrics: Sequence[str] = ("latency", "ttft"),
) -> Figure:
    """Box plots of latency and time to first token (seconds) per group.

    One panel per metric that has data (``ttft`` needs sidecars); ``by=None`` draws all turns as
    one group. Requires matplotlib (the ``plot`` extra). Returns the figure.
    """
    plt = _pyplot()
    df, by = _frame(turns, "plot_latency", [], by)
    metrics = [FROM_OTEL.get(m, m) for m in ([metrics] if isinstance(metrics, str) else metrics)]
    if not metrics:
        raise OptionError("plot_latency: give at least one metric (such as 'latency' or 'ttft')")
    unknown = [m for m in metrics if m not in df.columns]
    if unknown:
        raise OptionError(f"plot_latency: no column {', '.join(map(repr, unknown))} to plot; metrics are columns of "
                          f"seconds such as 'latency' and 'ttft'")
    panels = [m for m in metrics if _numbers(df[m]).notna().any()]
    if not panels:
        panels = [metrics[0]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False)
    groups = [(str(k), g) for k, g in df.groupby(by, observed=True, sort=True)] if by is not None else [("all", df)]
    for ax, metric in zip(axes[0], panels):
        data = [_numbers(g[metric]).dropna().to_numpy() if metric in g else [] for _, g in groups]
        keep = [(name, d) for (name, _), d in zip(groups, data) if len(d)]
        if keep:
            import inspect

            horizontal = (
                {"orientation": "horizontal"}
                if "orientation" in inspect.signature(ax.boxplot).parameters
                else {"vert": False}
            )
            ax.boxplot([d for _, d in keep], showfliers=True, **horizontal)
            ax.set_yticks(range(1, len(keep) + 1), [name for name, _ in keep])
        ax.set_xlabel(f"{metric} (s)")
        ax.set_title({"latency": "Latency", "ttft": "Time to first token"}.get(metric, metric))
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def _auto_freq(span: pd.Timedelta) -> str:
    for freq, width in (
        ("1s", "1s"),
        ("10s", "10s"),
        ("1min", "1min"),
        ("10min", "10min"),
        ("1h", "1h"),
        ("6h", "6h"),
        ("1D", "1D"),
    ):
        if span / pd.Timedelta(width) <= 60:
            return freq
    # weeks, or wider bins still when the turns span years (a stray timestamp: at most ~60 bins)
    return f"{max(7, math.ceil(span / pd.Timedelta('1D') / 60))}D"


def _check_freq(freq: Any) -> None:
    """A ``freq`` the bins can be made of: a pandas frequency of a fixed, positive width, else a
    clear error (a ``"0s"`` would divide by zero, ``"1M"`` has no fixed width, ``5`` is no text)."""
    if freq is None:
        return
    if not isinstance(freq, str):
        raise OptionTypeError(f"plot_usage_over_time: freq takes a pandas frequency such as '1min' or '1h', not "
                              f"{type(freq).__name__} {freq!r:.60}")
    try:
        pd.tseries.frequencies.to_offset(freq)
        width = pd.Timedelta(freq)
    except ValueError:
        width = None
    if width is None or width is pd.NaT or width <= pd.Timedelta(0):
        raise OptionError(f"plot_usage_over_time: freq {freq!r:.60} is no positive fixed width; give a pandas "
                          f"frequency such as '10s', '1min', '1h' or '1D'")


def plot_usage_over_time(turns: pd.DataFrame, freq: str | None = None, by: str | None = None) -> Figure:
    """Tokens (input and output) and cost over time, binned by ``started`` (else ``ended``).

    Top panel: input and output tokens per bin. Bottom panel: cost per bin (bars) and cumulative
    cost (line), in USD. ``freq`` is a pandas frequency (``"1min"``, ``"1h"``...), chosen from the
    time span when None (about 60 bins at most). ``by`` (e.g. ``"model"``) splits the output tokens line per group.
    Requires matplotlib (the ``plot`` extra). Returns the figure.
    """
    plt = _pyplot()
    _check_freq(freq)
    df, by = _frame(turns, "plot_usage_over_time", ("started", "ended", "input_tokens", "output_tokens", "cost"), by)
    started, ended = _times(df["started"], "started"), _times(df["ended"], "ended")
    t = started.where(started.notna(), ended)
    df = df.assign(_t=t, **{c: _numbers(df[c]) for c in ("input_tokens", "output_tokens", "cost")})
    df = df.dropna(subset=["_t"]).sort_values("_t")
    fig, (ax_tok, ax_cost) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    if len(df):
        freq = freq or _auto_freq(df["_t"].iloc[-1] - df["_t"].iloc[0])
        g = df.set_index("_t")
        tok = pd.DataFrame(
            {
                "input": g["input_tokens"].astype("float64").resample(freq).sum(),
                "output": g["output_tokens"].astype("float64").resample(freq).sum(),
            }
        )
        if by is None:
            ax_tok.plot(tok.index, tok["input"], label="input tokens", drawstyle="steps-post")
            ax_tok.plot(tok.index, tok["output"], label="output tokens", drawstyle="steps-post")
        else:
            ax_tok.plot(tok.index, tok["input"], label="input tokens (all)", drawstyle="steps-post", alpha=0.5)
            for name, sub in g.groupby(by, observed=True):
                s = sub["output_tokens"].astype("float64").resample(freq).sum()
                ax_tok.plot(s.index, s.to_numpy(), label=f"output tokens: {name}", drawstyle="steps-post")
        ax_tok.set_ylabel(f"tokens per {freq}")
        ax_tok.legend(fontsize="small")
        cost = g["cost"].resample(freq).sum(min_count=1)
        width = pd.Timedelta(freq) * 0.9 if len(cost) > 1 else pd.Timedelta(freq)
        ax_cost.bar(cost.index, cost.fillna(0).to_numpy(), width=width, align="edge", label="cost per bin")
        ax_cost.set_ylabel("USD per bin")
        cum = ax_cost.twinx()
        cum.plot(cost.index, cost.fillna(0).cumsum().to_numpy(), color="black", label="cumulative")
        cum.set_ylabel("cumulative USD")
        missing = int(_numbers(df["cost_missing"]).fillna(0).astype(bool).sum()) if "cost_missing" in df else 0
        title = "Cost (list prices)" + (f" — {missing} turns without a price not counted" if missing else "")
        ax_cost.set_title(title, fontsize="medium")
    ax_tok.set_title("Tokens over time")
    ax_cost.set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig
