"""Trace analysis: load the conversation traces of any mmsp program into pandas.

Every mmsp client saves a conversation when its config carries a ``trace_id``: mmsp's Tracer writes
``<MMSP_CACHE_DIR>/<trace_id>.json`` (plus a ``.txt`` transcript), rewriting the whole history
after each successful turn. The file is ``{"history": [UniMessage, ...], "config": {... UniConfig,
"model": ...}, "timestamp": "<iso>"}`` with bytes stored as base64 text. This module reads that
format exactly — traces written by any mmsp program load, not only those of this project — and
joins the timing sidecar ``<trace_id>.timing.jsonl`` this project writes next to it (time to first
token, per-event timing, and the failed turns the Tracer never records) when one is present::

    from mmsp_notebook import traces

    turns = traces.load_turns("cache/")            # one row per assistant turn
    items = traces.load_items("cache/")            # one row per content item (user and assistant)
    events = traces.load_events("cache/")          # one row per streamed event (sidecars)
    traces.summary(turns, by="model")              # latency / ttft / speed percentiles, cost, rates
    traces.to_parquet(turns, "turns.parquet")      # or traces.to_parquet("cache/", "turns.parquet")
    traces.plot_latency(turns); traces.plot_usage_over_time(turns)   # needs matplotlib

Paths
    ``path_or_paths`` is a directory, a file or a list of both. A directory is globbed with
    ``pattern`` (default ``"**/*.json"``, recursive); the trace id of a file found there is its
    path relative to that directory without ``.json`` (``agent1/conversation_001``). Tracer
    transcripts (``.txt``) and sidecars (``.timing.jsonl``) are never taken for traces; a sidecar
    with no trace file beside it (every turn of that conversation failed) still contributes its
    failed turns. The Tracer names a file ``Path(trace_id).with_suffix(".json")``, so a trace id
    with a dot in its last part (``runs/v1.5``) lives in ``runs/v1.json`` while its sidecar keeps
    the full id; the two are paired. A file given on its own has its stem as trace id, or the
    config's ``trace_id`` when the path ends with it. A path that does not exist raises
    ``FileNotFoundError``. Directories matched by ``pattern`` are ignored; with ``**``, a file
    reached through directory links (a link loop included) is read once, under its shortest path.

Robustness
    A corrupt, truncated (being written), empty, binary or foreign JSON file (``[1, 2]``,
    ``{"foo": 1}``, a ``history`` that is not a list) never stops a load: it is skipped, counted
    and named in ``df.attrs["skipped"]`` (a list of ``{"path", "reason"}``), and ONE
    :class:`TraceLoadWarning` summarizes the skips. A file that fails to parse is read once more
    before it is skipped, since the Tracer rewrites traces in place and a reader can catch one
    half-written; a file deleted mid-load is skipped as vanished, a broken link as such. When a
    trace file is skipped its sidecar is skipped with it (its failed turns alone would distort
    error rates). A sidecar with damaged lines (not JSON, not a record) is listed in
    ``attrs["skipped"]`` too, as ``damaged sidecar``, and its readable lines are used; a last line
    without its newline is one being written and is passed over silently, a leading UTF-8 BOM is
    ignored. Values that cannot be what they claim never stop a load: integers beyond int64 are
    NA, timestamps outside 1970..9999 are NaT, negative durations (and a ``ttft`` longer than the
    whole response) are NaN, lone surrogates in strings and undecodable bytes in file names become
    U+FFFD. Unknown content item types load as they are (their ``type`` as stored, unknown fields
    in ``extra``). Item types of traces written before mmsp 0.5 (``text``, ``tool_call``, ...)
    are kept as stored in the items frame and counted like their ``.done`` forms in the turns
    frame. Nothing is ever written next to the traces. ``df.attrs`` also holds ``n_files``
    (sources loaded) and ``n_skipped`` (entries of ``skipped``, damaged sidecars included).

Repeated histories
    mmsp programs often give every call its own trace id (``agent1/00001``, ``agent1/00002``...):
    each file then holds the whole conversation so far, and the same assistant message appears in
    several files. With ``dedupe=True`` (the default) a message is counted once: assistant
    messages with the same ``created_at``, finish reason, usage and content counts are one turn,
    kept from the file whose sidecar times it, else from the first file (in trace id order); in
    the items frame a message (role, ``created_at``, usage and item shapes) is kept from the
    first file. ``df.attrs["duplicates"]`` counts what was left out (before any filter: copies
    are resolved first, then ``since`` / ``until`` / ``models`` apply to the copy kept);
    ``dedupe=False`` keeps every copy.

Re-runs
    A sidecar is appended to while the Tracer overwrites its trace file, so running a notebook
    again into the same cache leaves several runs in one sidecar. A record for a turn already
    completed earlier in the sidecar (``message_index`` set) means the conversation went back to
    that turn (a re-run goes back to turn 0): the earlier records of that turn and of later turns
    are dropped, so only the run the trace file holds is counted. A line repeated verbatim in a
    sidecar counts once.

Filters
    ``since`` / ``until`` (anything ``pandas.Timestamp`` accepts; naive means UTC) keep turns with
    ``since <= started < until`` (turns without a start time are dropped when a bound is given);
    items follow their turn (a user message belongs to the turn it feeds), events their turn's
    ``started``. ``models`` (a model id or several) keeps turns, items and events of those models.

Progress
    ``progress=None`` shows a ``tqdm.auto`` bar when more than 200 files are loaded; ``True`` /
    ``False`` force it on or off.

Turns frame (:func:`load_turns`): one row per assistant message of each trace, plus one row per
sidecar record of a turn that recorded nothing (status ``error`` / ``incomplete`` /
``cancelled``, usage NA) — so error rates are real. Columns and dtypes:

=================  ===============  ==========================================================
trace_id           str              path of the trace relative to the loaded directory
turn               Int64            0-based index of the assistant turn in its trace (a failed
                                    attempt shares the index of the turn that followed it)
message_index      Int64            index of the assistant message in the history; NA when failed
model              category         sidecar's model, else the trace config's ``model``
client_type        category         mmsp client type, from the sidecar; NA without one
status             category         ``complete`` for every turn in the trace file; the sidecar's
                                    status (``error``/``incomplete``/``cancelled``) otherwise
source             category         ``trace``, ``trace+sidecar`` or ``sidecar`` (sidecar only)
started            datetime64[us, UTC]  sidecar ``started_at`` (request sent), else ``created_at``
                                    of the user message just before the assistant message
ended              datetime64[us, UTC]  ``created_at`` of the assistant message (the stop event);
                                    ``started + total`` for failed turns
latency            float64 (s)      sidecar ``total_ms``, else ``ended - started`` (NaN when
                                    either is NaT or the difference is negative)
ttft               float64 (s)      time to first content delta (sidecar); NaN without one
tokens_per_s       float64          ``output_tokens / (latency - ttft)``: decode speed, sidecar only
finish_reason      category         ``stop``, ``length``, ``tool_call``, ``unknown`` or NA
cached_tokens, prompt_tokens, thoughts_tokens, response_tokens
                   Int64            mmsp's usage buckets as recorded; a missing bucket stays NA
input_tokens       Int64            cached + prompt (NA only when both are NA)
output_tokens      Int64            thoughts + response (NA only when both are NA)
total_tokens       Int64            input + output
n_items            Int64            content items of the assistant message (NA for failed turns)
n_text, n_thinking, n_tool_calls
                   Int64            ``text.done``, ``thinking.done``, ``tool_call.done`` items
n_images, n_audio  Int64            ``inline_data.done`` items with an ``image/*`` / ``audio/*`` type
text_chars, thinking_chars
                   Int64            characters of text / thinking
cost               float64 (USD)    list price of the turn's usage (see below); NaN if unknown
cost_missing       bool             True when the model has no price in mmsp's registry
temperature        float64          config ``temperature`` (NaN when unset)
max_tokens         Int64            config ``max_tokens``
thinking_level     str              config ``thinking_level``
n_tools            Int64            number of tools offered in the config (NA when none given)
tool_names         object (tuple)   their names; survives Parquet as ``list<string>``
error_type, error_message
                   str              sidecar error of a failed turn
=================  ===============  ==========================================================

The config fields come from the trace file's config, which the Tracer rewrites with each turn,
so they are the conversation's latest config.

Cost
    Prices come from ``mmsp.registry.list_supported_models()`` (USD per million tokens per usage
    bucket), looked up by ``(model, client_type)`` when the client type is known, else by model
    id (a model served by several platforms takes its first registry entry, the vendor's own
    endpoint). ``cost = cached*p_cached + prompt*p_prompt + thoughts*p_thoughts +
    response*p_response`` with NA buckets counted as 0 (at least one bucket must be present);
    a platform that publishes no cache-hit price bills cached tokens at the prompt price. A model
    without a price gets ``cost`` NaN and ``cost_missing`` True — never 0. ``load_turns(...,
    prices={"my-model": {"prompt_tokens": 0.5, "response_tokens": 1.5}})`` adds or overrides
    prices (USD per million tokens, the registry's shape) for models the registry does not list.

Items frame (:func:`load_items`): one row per content item of every message, both roles:
``trace_id, message_index, turn, role, item_index, type, model, created_at`` (the message's),
``text, thinking, arguments`` (compact JSON text of the tool call arguments), ``name,
tool_call_id, mime_type, size`` (characters of text / thinking / arguments, decoded bytes of
inline data computed from the base64 length without decoding, dimensions of an embedding),
``embedding_dims, n_images`` (images of a tool result), ``image_url`` (data URLs are left out
unless ``payloads=True``), ``has_fidelity`` (bool) and ``extra`` (JSON text of fields the item
type does not define). ``payloads=True`` adds ``data`` (base64 text as stored), ``embedding``,
``images`` and ``fidelity`` (JSON text) so every message can be rebuilt exactly.

Events frame (:func:`load_events`): one row per event of each sidecar record: ``trace_id, turn,
message_index, model, client_type, status, started, event_index, t`` (seconds since the request
was sent), ``at`` (timestamp), ``type`` (``text.delta``, ``tool_call.done``, ``stop``, ...),
``kind`` (``text``, ``thinking``, ..., ``stop``), ``phase`` (``delta``/``done``/``stop``),
``size`` (length of the item's growing field).

OpenTelemetry
    :data:`OTEL_COLUMNS` maps column names to the OpenTelemetry GenAI semantic-convention
    attribute names (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ...); ``otel=True``
    renames the columns that way. ``client_type`` maps to ``gen_ai.provider.name`` (called
    ``gen_ai.system`` before semantic conventions 1.37); it holds mmsp's client type token
    (``openai-chat``, ``anthropic-official``, ...). ``finish_reason`` keeps one reason per row
    under ``gen_ai.response.finish_reasons``. ``latency`` and ``ttft`` take the names of the
    conventions' duration metrics, in seconds. :func:`summary` accepts renamed frames too.

Export
    :func:`to_arrow` converts a frame to a ``pyarrow.Table`` (categories as ``dictionary<int32,
    string>`` even when all missing, so files of different corpora share a schema; tuples
    as lists, ``df.attrs`` in the schema metadata where ``pandas.read_parquet`` restores it);
    :func:`to_parquet` writes one, from a frame or from a trace path loaded first.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import pandas as pd

from . import _build as _b
from ._io import (
    NotAFile,
    Skip,
    collect_sources,
    config_trace_id,
    latest_run,
    read_sidecar_file,
    read_trace,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from matplotlib.figure import Figure

__all__ = [
    "OTEL_COLUMNS",
    "TraceLoadWarning",
    "load_turns",
    "load_items",
    "load_events",
    "summary",
    "to_arrow",
    "to_parquet",
    "plot_latency",
    "plot_usage_over_time",
]

PathLike = str | os.PathLike[str]
Paths = PathLike | Iterable[PathLike]
TimeLike = str | int | float | pd.Timestamp | Any

#: Column name -> OpenTelemetry GenAI semantic-convention attribute name (``otel=True``).
OTEL_COLUMNS: dict[str, str] = {
    "trace_id": "gen_ai.conversation.id",
    "model": "gen_ai.request.model",
    "client_type": "gen_ai.provider.name",
    "finish_reason": "gen_ai.response.finish_reasons",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "thoughts_tokens": "gen_ai.usage.reasoning.output_tokens",
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "error_type": "error.type",
    "latency": "gen_ai.client.operation.duration",
    "ttft": "gen_ai.server.time_to_first_token",
}

_FROM_OTEL = {v: k for k, v in OTEL_COLUMNS.items()}

#: More files than this show a progress bar when ``progress=None``.
PROGRESS_THRESHOLD = 200


class TraceLoadWarning(UserWarning):
    """Some files could not be loaded; ``df.attrs["skipped"]`` names them with the reason."""


# --------------------------------------------------------------------------- helpers


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
                except NotAFile:
                    if bar is not None:
                        bar.update(1)
                    continue
                except Skip as exc:
                    skipped.append({"path": src.path, "reason": str(exc)})
                    if bar is not None:
                        bar.update(1)
                    continue
            records = None
            if src.sidecar is not None:
                records, damaged = read_sidecar_file(src.sidecar, events)
                if damaged:
                    skipped.append(
                        {"path": src.sidecar, "reason": f"{_DAMAGED}: {damaged} unreadable lines ({len(records)} records read)"}
                    )
                records = latest_run(records)
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


# --------------------------------------------------------------------------- loaders


def load_turns(
    path_or_paths: Paths,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    models: str | Iterable[str] | None = None,
    pattern: str = "**/*.json",
    otel: bool = False,
    progress: bool | None = None,
    dedupe: bool = True,
    prices: dict[str, dict[str, float]] | None = None,
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
            4.0, ...}``); they take precedence over mmsp's registry.

    Returns:
        The turns frame, sorted by trace then turn order; ``attrs`` holds ``skipped``,
        ``n_files``, ``n_skipped`` and ``duplicates``.
    """
    builder = _b.TurnBuilder(_to_ms(since), _to_ms(until), _model_set(models), dedupe, prices)
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
    builder = _b.ItemBuilder(_to_ms(since), _to_ms(until), _model_set(models), payloads, dedupe)

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
    builder = _b.EventBuilder(_to_ms(since), _to_ms(until), _model_set(models))

    def each(tid: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        if records:
            builder.add(tid, records)

    n, skipped = _drive(path_or_paths, pattern, progress, "loading events", each, need_trace=False)
    return _finish(builder.frame(), n, skipped, otel)


# --------------------------------------------------------------------------- summary


def _plain(turns: pd.DataFrame) -> pd.DataFrame:
    """A frame with this module's column names (undoes ``otel=True``)."""
    if any(c in _FROM_OTEL for c in turns.columns):
        return turns.rename(columns=_FROM_OTEL)
    return turns


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
    df = _plain(turns)
    keys: list[str] = []
    if by is not None:
        keys = [by] if isinstance(by, str) else list(by)
        keys = [_FROM_OTEL.get(k, k) for k in keys]
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


# --------------------------------------------------------------------------- export

#: Arrow types for the object columns (they may be all-None in a small frame).
_ARROW_OBJECT_TYPES = {
    "tool_names": ("list", "string"),
    "images": ("list", "string"),
    "embedding": ("list", "float64"),
    "data": ("scalar", "string"),
}


def to_arrow(df: pd.DataFrame) -> "pa.Table":
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


# --------------------------------------------------------------------------- plots


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is installed in the test env
        raise ImportError(
            "mmsp_notebook.traces plots need matplotlib: pip install 'mmsp_notebook[plot]' "
            "(or pip install matplotlib)"
        ) from exc
    return plt


def plot_latency(
    turns: pd.DataFrame,
    by: str = "model",
    metrics: Sequence[str] = ("latency", "ttft"),
) -> "Figure":
    """Box plots of latency and time to first token (seconds) per group.

    One panel per metric that has data (``ttft`` needs sidecars). Requires matplotlib (the
    ``plot`` extra). Returns the figure.
    """
    plt = _pyplot()
    df = _plain(turns)
    by = _FROM_OTEL.get(by, by)
    panels = [m for m in metrics if m in df and df[m].notna().any()]
    if not panels:
        panels = [metrics[0]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False)
    groups = [(str(k), g) for k, g in df.groupby(by, observed=True, sort=True)]
    for ax, metric in zip(axes[0], panels):
        data = [g[metric].dropna().to_numpy() if metric in g else [] for _, g in groups]
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
    return "7D"


def plot_usage_over_time(turns: pd.DataFrame, freq: str | None = None, by: str | None = None) -> "Figure":
    """Tokens (input and output) and cost over time, binned by ``started`` (else ``ended``).

    Top panel: input and output tokens per bin. Bottom panel: cost per bin (bars) and cumulative
    cost (line), in USD. ``freq`` is a pandas frequency (``"1min"``, ``"1h"``...), chosen from the
    time span when None. ``by`` (e.g. ``"model"``) splits the output tokens line per group.
    Requires matplotlib (the ``plot`` extra). Returns the figure.
    """
    plt = _pyplot()
    df = _plain(turns)
    t = df["started"].where(df["started"].notna(), df["ended"])
    df = df.assign(_t=t).dropna(subset=["_t"]).sort_values("_t")
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
            by = _FROM_OTEL.get(by, by)
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
        missing = int(df["cost_missing"].sum()) if "cost_missing" in df else 0
        title = "Cost (list prices)" + (f" — {missing} turns without a price not counted" if missing else "")
        ax_cost.set_title(title, fontsize="medium")
    ax_tok.set_title("Tokens over time")
    ax_cost.set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig
