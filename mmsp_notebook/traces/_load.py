"""The loaders of :mod:`mmsp_notebook.traces`: find the traces, read each file once through the
trace store, feed a frame builder, report what was skipped (see the package docstring).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, cast

import pandas as pd

from .._errors import TraceError
from ..core.pricing import Prices
from ..core.store import IS_A_DIRECTORY, read_sidecar, read_trace
from ._common import OTEL_COLUMNS, Paths, TimeLike, TraceLoadWarning
from ._events import EventBuilder
from ._io import collect_sources, config_trace_id, latest_run
from ._items import ItemBuilder
from ._turns import TurnBuilder

__all__ = ["load_turns", "load_items", "load_events", "PROGRESS_THRESHOLD"]

#: More files than this show a progress bar when ``progress=None``.
PROGRESS_THRESHOLD = 200


def _to_ms(value: TimeLike | None) -> float | None:
    if value is None:
        return None
    ts = pd.Timestamp(value)
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return ts.value / 1e6


def _model_set(models: str | Iterable[str] | None) -> frozenset[str] | None:
    if models is None:
        return None
    if isinstance(models, str):
        return frozenset({models})
    return frozenset(models)


def _progress(n: int, progress: bool | None, desc: str) -> Any:
    show = n > PROGRESS_THRESHOLD if progress is None else bool(progress)
    if not show:
        return None
    from tqdm.auto import tqdm  # imported on use: a plain load pulls in no progress machinery

    return tqdm(total=n, desc=desc, unit="file")


def _finish(df: pd.DataFrame, n_files: int, skipped: list[dict[str, str]], otel: bool) -> pd.DataFrame:
    if otel:
        df = df.rename(columns=OTEL_COLUMNS)
    df.attrs["skipped"] = skipped
    df.attrs["n_files"] = n_files
    df.attrs["n_skipped"] = len(skipped)
    if skipped:
        n_damaged = sum(1 for s in skipped if s["reason"].startswith(_DAMAGED))
        n_skip = len(skipped) - n_damaged
        kinds = Counter(s["reason"].split(":")[0] for s in skipped if not s["reason"].startswith(_DAMAGED))
        detail = "; ".join(f"{n} {k}" for k, n in kinds.most_common())
        parts = [f"skipped {n_skip} of {n_files + n_skip} trace files ({detail})"] if n_skip else []
        if n_damaged:
            parts.append(f"{n_damaged} damaged timing sidecars (their readable lines were used)")
        warnings.warn(
            f"mmsp_notebook.traces: {'; '.join(parts)}; see df.attrs['skipped'] for paths and reasons",
            TraceLoadWarning,
            stacklevel=3,
        )
    return df


_DAMAGED = "damaged sidecar"


def _drive(
    paths: Paths,
    pattern: str,
    progress: bool | None,
    desc: str,
    each: Callable[[str, dict[str, Any] | None, list[dict[str, Any]] | None], None],
    *,
    need_trace: bool = True,
    events: bool = True,
) -> tuple[int, list[dict[str, str]]]:
    sources = collect_sources(paths, pattern)
    bar = _progress(len(sources), progress, desc)
    skipped: list[dict[str, str]] = []
    loaded = 0
    try:
        for src in sources:
            data = None
            if src.path is not None and need_trace:
                try:
                    data = read_trace(src.path)
                except TraceError as exc:
                    if exc.reason != IS_A_DIRECTORY:  # a directory matched by the pattern: not reported
                        skipped.append({"path": src.path, "reason": exc.reason})
                    if bar is not None:
                        bar.update(1)
                    continue
            records = None
            if src.sidecar is not None:
                sidecar = read_sidecar(src.sidecar, events)
                if sidecar.damaged:
                    skipped.append(
                        {"path": src.sidecar, "reason": f"{_DAMAGED}: {sidecar.damaged} unreadable lines ({len(sidecar)} records read)"}
                    )
                # records as the file holds them: every builder checks each value it uses
                records = latest_run(cast("list[dict[str, Any]]", sidecar))
            tid = src.trace_id
            if src.standalone:
                if data is not None:
                    tid = config_trace_id(src, data["config"])
                elif records:
                    rec_tid = records[-1].get("trace_id")
                    tid = config_trace_id(src, {"trace_id": rec_tid})
            each(tid, data, records)
            loaded += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return loaded, skipped


def load_turns(
    path_or_paths: Paths,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    models: str | Iterable[str] | None = None,
    pattern: str = "**/*.json",
    otel: bool = False,
    progress: bool | None = None,
    dedupe: bool = True,
    prices: Prices | None = None,
) -> pd.DataFrame:
    """One row per assistant turn of the traces under ``path_or_paths`` (see the module docstring).

    Args:
        path_or_paths: a trace directory (globbed with ``pattern``), a trace file, or a list.
        since: keep turns that started at or after this time (naive = UTC).
        until: keep turns that started before this time.
        models: keep turns of this model id (or of these ids).
        pattern: glob for directories; ``**`` recurses.
        otel: rename columns to OpenTelemetry GenAI attribute names (:data:`OTEL_COLUMNS`).
        progress: show a progress bar; ``None`` = when more than 200 files.
        dedupe: count an assistant message repeated in several files once (see "Repeated
            histories" in the module docstring).
        prices: extra list prices by model id, USD per million tokens per usage bucket (the
            shape of the registry's ``pricing``: ``{"prompt_tokens": 1.0, "response_tokens":
            4.0, ...}``); they take precedence over mmsp's registry. The same mapping prices a
            turn in ``Turn.cost_at(prices)``.

    Raises:
        TraceNotFoundError: a given path does not exist (a ``FileNotFoundError`` too).
        OptionError: a price without ``prompt_tokens`` / ``response_tokens`` or not a number.

    Returns:
        The turns frame, sorted by trace then turn order; ``attrs`` holds ``skipped``,
        ``n_files``, ``n_skipped`` and ``duplicates``.
    """
    builder = TurnBuilder(_to_ms(since), _to_ms(until), _model_set(models), dedupe, prices)
    n, skipped = _drive(path_or_paths, pattern, progress, "loading turns", builder.add, events=False)
    return _finish(builder.frame(), n, skipped, otel)


def load_items(
    path_or_paths: Paths,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    models: str | Iterable[str] | None = None,
    pattern: str = "**/*.json",
    otel: bool = False,
    progress: bool | None = None,
    payloads: bool = False,
    dedupe: bool = True,
) -> pd.DataFrame:
    """One row per content item of every message, user and assistant (see the module docstring).

    Args:
        path_or_paths, since, until, models, pattern, otel, progress: as for :func:`load_turns`.
        payloads: also keep ``data`` (base64 text), ``embedding``, ``images`` and ``fidelity``, so
            that grouping by ``(trace_id, message_index)`` rebuilds each message's items exactly.
        dedupe: keep one copy of a message repeated in several files (see "Repeated histories").

    Returns:
        The items frame, in history order; ``attrs["duplicates"]`` counts messages left out.
    """
    builder = ItemBuilder(_to_ms(since), _to_ms(until), _model_set(models), payloads, dedupe)

    def each(tid: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        if data is not None:
            builder.add(tid, data, records)

    n, skipped = _drive(path_or_paths, pattern, progress, "loading items", each, events=False)
    return _finish(builder.frame(), n, skipped, otel)


def load_events(
    path_or_paths: Paths,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    models: str | Iterable[str] | None = None,
    pattern: str = "**/*.json",
    otel: bool = False,
    progress: bool | None = None,
) -> pd.DataFrame:
    """One row per streamed event, from the timing sidecars (see the module docstring).

    Traces without a sidecar contribute nothing (mmsp's Tracer records no event timing). The
    trace files themselves are not read, except to name a standalone file's trace.

    Args:
        path_or_paths, since, until, models, pattern, otel, progress: as for :func:`load_turns`;
            ``since``/``until`` apply to the turn's ``started``.

    Returns:
        The events frame, in sidecar order.
    """
    builder = EventBuilder(_to_ms(since), _to_ms(until), _model_set(models))

    def each(tid: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        if records:
            builder.add(tid, records)

    n, skipped = _drive(path_or_paths, pattern, progress, "loading events", each, need_trace=False)
    return _finish(builder.frame(), n, skipped, otel)
