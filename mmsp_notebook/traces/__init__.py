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
    traces.show("agent1/conversation_001")         # a whole conversation, drawn with the turn view
    traces.explore("cache/")                       # a widget: filter, sort, page, open, replay

Paths
    ``path_or_paths`` is a directory, a file or a list of both (a leading ``~`` is the home
    directory, as for pandas, here and in every path ``sync``, the dataset readers, ``show``,
    ``explore`` and ``to_parquet`` take). A directory is globbed with
    ``pattern`` (default ``"**/*.json"``, recursive); the trace id of a file found there is its
    path relative to that directory without ``.json`` (``agent1/conversation_001``). Tracer
    transcripts (``.txt``) and sidecars (``.timing.jsonl``) are never taken for traces; a sidecar
    with no trace file beside it (every turn of that conversation failed) still contributes its
    failed turns. The Tracer names a file ``Path(trace_id).with_suffix(".json")``, so a trace id
    with a dot in its last part (``runs/v1.5``) lives in ``runs/v1.json`` while its sidecar keeps
    the full id; the two are paired. A file given on its own has its stem as trace id, or the
    config's ``trace_id`` when the path ends with it; anything else given on its own (a FIFO,
    ``/dev/null``) is skipped and named for what it is (``not a regular file``). A path that does
    not exist, or a broken link given on its own, raises :class:`~mmsp_notebook.TraceNotFoundError`
    (a ``FileNotFoundError``). A directory is walked once, breadth first: each real directory
    (device and inode) is entered once, so links to directories are followed but loops of them
    (``ln -s .. t/sub/loop; ln -s . t/self``) cannot repeat or hang a load, and a file reached
    several ways is read once, under its shortest path; so is a tree given several times in a list
    (twice, within another, or through a link: named as the first path given reaches it). Two
    directories given together that hold the same trace id (``jan/nb/default.json`` and
    ``feb/nb/default.json``) hold two conversations under one id: the load warns and lists them in
    ``df.attrs["repeated_trace_ids"]`` (trace id -> files), and ``show``, ``replay`` and the
    explorer refuse a row of such an id (TraceError) rather than open the wrong conversation.
    ``pattern`` follows :mod:`glob`'s rules
    (``*``, ``?``, ``[...]`` within one path part, ``**`` across parts, wildcards match no hidden
    name) and must be relative to the directory (else ``OptionError``). Directories matched by
    ``pattern`` are ignored; a directory that cannot be listed is named in ``attrs["skipped"]``
    (``unreadable directory``). A ``pattern`` that matches no file while ``**/`` + it finds traces
    in subfolders (``"*.json"`` on a folder of folders) warns (:class:`TraceLoadWarning`), naming
    the recursive pattern. So does a directory given that is a trace dataset (the folder
    :func:`sync` writes, or one of its kind folders) and so holds no trace: the warning names what
    reads it (``query``, ``dataset``, ``summary``) and the trace folder it was synced from.

Robustness
    A corrupt, truncated (being written), empty, binary or foreign JSON file (``[1, 2]``,
    ``{"foo": 1}``, a ``history`` that is not a list) never stops a load: it is skipped, counted
    and named in ``df.attrs["skipped"]`` (a list of ``{"path", "reason"}``), and ONE
    :class:`TraceLoadWarning` summarizes the skips. Files are read through the trace store
    (:func:`mmsp_notebook.core.store.read_trace`): only regular files, checked before they are
    opened, so a FIFO never blocks a load and a link to ``/dev/zero`` or ``/dev/urandom`` is never
    read (``not a regular file``); a file over ``max_size`` bytes (256 MiB by default,
    :data:`~mmsp_notebook.core.store.MAX_FILE_SIZE`; every loader takes ``max_size=``) is skipped
    unread as ``too large``; one that fails to parse and was modified in the last two seconds is
    read once more after 50 ms before it is skipped, since the Tracer rewrites traces in place and
    a reader can catch one half-written (an older damaged file is skipped at once); a file deleted
    mid-load is skipped as vanished, a broken link as such, a link loop as unreadable. When a
    trace file is skipped its sidecar is skipped with it (its failed turns alone would distort
    error rates), by every loader: ``load_events`` reads the trace files too, so the turns, items
    and events frames (and a dataset's kinds) hold the same traces. A sidecar that cannot be read at all is named as ``sidecar not read: <why>``
    (its trace loads without timing); one with damaged lines (not JSON, not a record: one without an
    integer ``turn`` belongs to no turn) is listed in
    ``attrs["skipped"]`` too, as ``damaged sidecar``, and its readable lines are used; a last line
    without its newline is one being written and is passed over silently, a leading UTF-8 BOM is
    ignored and a sidecar saved as UTF-16 (with its BOM) is read as such. Values that cannot be
    what they claim never stop a load: integers beyond int64 are NA, so are negative token counts
    (a producer's ``-1`` for unknown), timestamps outside 1970..9999 are NaT (a message's
    ``created_at`` is Unix ms as mmsp writes it, or seconds as other producers do, told value by
    value by :func:`~mmsp_notebook.core.stamps.created_ms`: below 1e11 it is seconds), negative durations
    (and a ``ttft`` longer than the whole response) are NaN, lone surrogates in strings (tool
    names included), bytes that are not UTF-8 and undecodable bytes in file names become U+FFFD; a content item whose ``type`` is not
    a string is an unknown item. ``tests/test_traces_fuzz.py`` sets every field of a trace and of
    a sidecar to each of a list of wrong values, damages files and plants FIFOs, devices and link
    loops: no load crashes, hangs or runs out of memory, every unusable file is named. Unknown content item types load as they are (their ``type`` as stored, unknown fields
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
    the items frame a message (role, ``created_at``, usage and item shapes; a user message also
    by the answer that follows it, so the prompt of a comparison, one trace per model, stays in
    every model's trace) is kept from the same file as its turn: the one whose sidecar times the
    turn, else the first (so the two frames join on ``trace_id`` and ``message_index``). ``df.attrs["duplicates"]`` counts what was left out (before any filter: copies
    are resolved first, then ``since`` / ``until`` / ``models`` apply to the copy kept);
    ``dedupe=False`` keeps every copy.

Re-runs
    A sidecar is appended to while the Tracer overwrites its trace file, so running a notebook
    again into the same cache leaves several runs in one sidecar. A completed record
    (``message_index`` set) for a turn already completed earlier in the sidecar means the
    conversation went back to that turn (a re-run goes back to turn 0): the earlier records of
    that turn and of later turns are dropped, so only the run the trace file holds is counted. A
    failed record alone does not: the Tracer writes no trace file for a failed turn, so after a
    re-run whose first turn failed the file still holds the run before, which keeps its records
    (the failure is a row of its own). A line repeated verbatim in a sidecar counts once. A
    completed record whose ``message_index`` (an integer) is not the index of its turn's assistant
    message times another version of the conversation (edited since): it is left out with its
    events, and that turn is loaded without timing (``source`` ``trace``), as ``show`` draws it.
    Every reader takes a ``message_index`` of ``3.0`` as 3, and one that is no integer (``"x"``,
    ``2.5``, ``true``) as absent: such a record did not complete, whatever its status says.

Filters
    ``since`` / ``until`` (anything ``pandas.Timestamp`` accepts, naive meaning UTC; a number is a
    Unix time in seconds or milliseconds, told apart as ``created_at`` is) keep turns with
    ``since <= started < until`` (turns without a start time are dropped when a bound is given);
    items follow their turn (a user message belongs to the turn it feeds), events their turn's
    ``started``. ``models`` (a model id or several) keeps turns, items and events of those models.

Progress
    ``progress=None`` shows a ``tqdm.auto`` bar when more than 200 files are loaded; ``True`` /
    ``False`` force it on or off.

Categories
    A category column of any frame holds the values found, sorted (``source`` has its fixed
    three): not the order the files were read in, so two loads of the same traces, and a
    dataset's ``query``, give the same categories in the same order. A column holding no value
    (``client_type`` of traces without sidecars; every one but ``source`` in an empty frame: a
    folder without traces, filters or a query that match nothing) has no category, of text as the
    others' are, so an empty frame has the dtypes of any other and ``df.model.str.startswith(...)``
    works on it.

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
comparison         category         the comparison (``-m a,b``) the turn ran in, from the sidecar; NA
                                    for a turn of its own
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
                   Int64            mmsp's usage buckets as recorded; a missing (or negative) bucket
                                    is NA
input_tokens       Int64            cached + prompt (NA when both are NA, or the sum is beyond int64)
output_tokens      Int64            thoughts + response (NA when both are NA, or beyond int64)
total_tokens       Int64            input + output (NA when both are NA, or beyond int64)
n_items            Int64            content items of the assistant message (NA for failed turns)
n_text, n_thinking, n_tool_calls
                   Int64            ``text.done``, ``thinking.done``, ``tool_call.done`` items
n_images, n_audio  Int64            ``inline_data.done`` items with an ``image/*`` / ``audio/*`` type (any case)
text_chars, thinking_chars
                   Int64            characters of text / thinking
n_tool_errors      Int64            results of this turn's tool calls (the next message) that
                                    report an error: ``error: …`` or a Python traceback
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
    One price table for this module and ``Turn.cost`` (:mod:`mmsp_notebook.core.pricing`), so a
    turn and its row cost the same. Prices come from ``mmsp.registry.list_supported_models()``
    (USD per million tokens per usage bucket), looked up by ``(model, client_type)`` when the
    client type is known, else by model id (a model served by several platforms takes its first
    registry entry, the vendor's own endpoint). ``cost = cached*p_cached + prompt*p_prompt +
    thoughts*p_thoughts + response*p_response`` with NA buckets counted as 0 (at least one bucket
    must be present). One fallback rule: cached tokens without a cache price cost the prompt
    price, thoughts tokens without a thoughts price the response price (providers bill reasoning
    as output). A model without a price gets ``cost`` NaN and ``cost_missing`` True — never 0.
    ``load_turns(..., prices={"my-model": {"prompt_tokens": 0.5, "response_tokens": 1.5}})`` adds
    or overrides prices (USD per million tokens, the registry's shape, ``prompt_tokens`` and
    ``response_tokens`` required) by model id; ``turn.cost_at(prices)`` takes the same mapping.

Items frame (:func:`load_items`): one row per content item of every message, both roles:
``trace_id, message_index, turn, role, item_index, type, model, created_at`` (the message's),
``text, thinking, arguments`` (compact JSON text of the tool call arguments), ``name,
tool_call_id, mime_type, size`` (characters of text / thinking / arguments, decoded bytes of
inline data computed from the base64 length without decoding, dimensions of an embedding),
``embedding_dims, n_images`` (images of a tool result), ``image_url`` (data URLs are left out
unless ``payloads=True``), ``has_fidelity`` (bool) and ``extra`` (JSON text of fields the item
type does not define). ``payloads=True`` adds ``data`` (base64 text as stored; a value that is no string as its JSON text), ``embedding``,
``images`` and ``fidelity`` (JSON text) so every message can be rebuilt exactly.

Events frame (:func:`load_events`): one row per event of each sidecar record: ``trace_id, turn,
message_index, model, client_type, status, started, event_index, t`` (seconds since the request
was sent), ``at`` (timestamp), ``type`` (``text.delta``, ``tool_call.done``, ``stop``, ...),
``kind`` (``text``, ``thinking``, ..., ``stop``), ``phase`` (``delta``/``done``/``stop``),
``size`` (length of the item's growing field). ``model`` is the sidecar record's, else the trace
config's, as in the turns frame.

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

Datasets
    :func:`sync` converts a trace folder into a Hive-partitioned Parquet dataset (``month`` /
    ``model`` directories, the loaders' columns and :func:`to_arrow`'s types), incrementally: a
    manifest records what was converted, so a re-run converts only new or changed traces (a trace
    that only grew gets its new rows), replaces changed ones and drops deleted ones; chunks run on a
    process pool or any ``concurrent.futures`` executor (Dask's ``client.get_executor()``), each
    worker holding one chunk. :func:`dataset` gives it as a ``pyarrow.dataset``, :func:`query` /
    :func:`connect` in DuckDB (views ``turns``, ``items``, ``events``), and :func:`summary` takes
    it as well as a frame.

Parts
    ``_load`` (the loaders), ``_turns`` / ``_items`` / ``_events`` (one frame builder each, on
    ``_build`` and ``_columns``; ``_fast`` decodes only what the turns frame needs), ``_io`` and
    ``_walk`` (finding traces), ``_summary``, ``_export``, ``_plot``; ``_dataset`` (sync), ``_scan``
    (what changed), ``_convert`` (a chunk's work on a worker), ``_manifest`` (what a dataset
    holds), ``_compact`` (merging small files), ``_readers`` (pyarrow and DuckDB over a dataset);
    :mod:`mmsp_notebook.traces.recorded` locates one recorded message for ``replay``. Files are
    read through :mod:`mmsp_notebook.core.store`. Importing this package imports no pandas: each
    function loads its part when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._common import OTEL_COLUMNS, TraceLoadWarning

if TYPE_CHECKING:  # pragma: no cover
    from ._dataset import sync
    from ._explore import Explorer, explore
    from ._export import to_arrow, to_parquet
    from ._held import held_value
    from ._load import load_events, load_items, load_turns
    from ._plot import plot_latency, plot_usage_over_time
    from ._readers import connect, dataset, query
    from ._result import SyncResult
    from ._show import Conversation, show
    from ._summary import summary

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
    "show",
    "explore",
    "Conversation",
    "Explorer",
    "held_value",
    "sync",
    "SyncResult",
    "dataset",
    "connect",
    "query",
]

#: public name -> the part that defines it, imported on first use (pandas comes with it)
_LAZY = {
    "load_turns": "._load",
    "load_items": "._load",
    "load_events": "._load",
    "summary": "._summary",
    "to_arrow": "._export",
    "to_parquet": "._export",
    "plot_latency": "._plot",
    "plot_usage_over_time": "._plot",
    "show": "._show",
    "Conversation": "._show",
    "explore": "._explore",
    "Explorer": "._explore",
    "held_value": "._held",
    "sync": "._dataset",
    "SyncResult": "._result",
    "dataset": "._readers",
    "connect": "._readers",
    "query": "._readers",
}


def __getattr__(name: str) -> Any:
    part = _LAZY.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(part, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
