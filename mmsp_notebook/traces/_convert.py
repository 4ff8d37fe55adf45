"""The work of :func:`mmsp_notebook.traces.sync` that runs on an executor: convert a chunk of traces
into Parquet files of a Hive-partitioned dataset, and rewrite a data file without some rows.

Both are plain functions of picklable arguments, so any ``concurrent.futures.Executor`` runs them: a
local process pool, ``dask.distributed.Client(...).get_executor()``, Ray's executor. A worker needs
this package importable and the source and dataset directories reachable under the same paths.

Files are written next to their final name as ``.<name>.tmp`` (readers skip names starting with a
dot) and renamed into place, so a reader never sees half a file.

A file's partition directories are ``month=YYYY-MM/model=<model id>``, the model id URI-encoded
(:func:`model_segment`): every byte but ASCII lower-case letters, digits and ``_.-~`` as ``%XX``,
capital letters too (``GLM-5`` is ``model=%47%4C%4D-5``, ``glm-5`` ``model=glm-5``). The names left
are one per model id on a file system that ignores case (macOS's, Windows'), where ``GLM-5`` and
``glm-5`` would otherwise share a directory, and so the rows of one model would be read as the
other's: a name holds no capital letter of its own, and ``%4D`` and ``%4d`` decode alike. Every
reader of Hive partitions (pyarrow, Dask, DuckDB, Spark) decodes ``%XX``, so it reads back the exact
model id, whatever case the file system gives the names in. (Skipping the second of two such models
would keep its traces out of the dataset on every file system, for the sake of some.)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import uuid
from collections.abc import Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._errors import TraceError
from ..core.pricing import PriceTable
from ..core.redact import held_secrets
from ..core.stamps import created_ms
from ..core.store import IS_A_DIRECTORY, MAX_FILE_SIZE, read_sidecar, read_trace
from ._build import own_records, split_sidecar
from ._events import EventBuilder
from ._export import to_arrow
from ._fast import decode_trace
from ._files import NULL_PARTITION, atomic_write, key_mask
from ._io import latest_run
from ._items import ItemBuilder, message_key
from ._load import UNREAD
from ._manifest import KINDS
from ._turns import TurnBuilder

__all__ = ["Job", "ChunkResult", "convert", "file_schema", "data_schema", "KINDS", "DATE_FROM", "NULL_PARTITION", "held_path", "unread",
           "model_segment"]

#: the column whose UTC month partitions each kind
DATE_FROM = {"turns": "started", "items": "created_at", "events": "started"}
#: the start of a skip note's reason for a damaged sidecar
DAMAGED = "damaged sidecar"
#: the start of a skip note's reason when a file could not be read (no permission, an I/O error),
#: of a trace file or (after :data:`~._load.UNREAD`) of a sidecar: nothing is known of its content
_UNREADABLE_REASONS = ("unreadable:", f"{UNREAD}: unreadable:")


def unread(notes: list[dict[str, str]]) -> bool:
    """Whether a trace's skip notes say one of its files could not be read (its size and mtime
    may never change when it becomes readable: a sync reads it again every time until it is)."""
    return any(n["reason"].startswith(_UNREADABLE_REASONS) for n in notes)

_TURN_FP_COLUMNS = (
    "ended", "finish_reason", "n_items", "text_chars", "thinking_chars", "n_tool_calls",
    "cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens",
)


@dataclass
class Job:
    """One chunk of traces to convert."""

    kind: str
    root: str  # the kind's directory of the dataset
    sources: list[tuple[str, str | None, str | None]]  # (trace_id, trace file, sidecar)
    dedupe: bool = True
    #: the sync's prices (:meth:`PriceTable.snapshot`: the same list prices in every worker)
    prices: PriceTable | dict[str, Any] | None = None
    payloads: bool = False
    #: trace id -> message indexes whose rows are shown from another trace
    hide: dict[str, list[int]] = field(default_factory=dict)
    #: trace id -> (rows, digest) of what the dataset holds for a changed trace
    prior: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: the data files' schema as a file of the dataset has it (serialized), so that a small sync
    #: does not build an empty frame to learn it (:func:`file_schema` when None)
    schema: bytes | None = None
    #: threads writing the chunk's files: more than one where the chunk runs alone in a process
    #: (a small sync, in the calling process), where the files are small and their fixed costs
    #: (Arrow writes them without the GIL) add up; a pool's workers write with one
    write_threads: int = 1
    #: trace files and sidecars over this many bytes are skipped as ``too large`` (the loaders' rule)
    max_size: int = MAX_FILE_SIZE


@dataclass
class ChunkResult:
    """What a chunk wrote: files (name, rows, trace ids), de-duplication units (fp, trace id,
    message index, preference, shown), per trace whether it loaded, its skip notes and the rows
    and digest it has now, and the changed traces whose rows replace those the dataset holds
    (their rows are in ``held``, not ``files``)."""

    files: list[tuple[str, int, list[str]]]
    units: list[tuple[int, str, int, int, int]]
    traces: dict[str, tuple[bool, list[dict[str, str]], int, str]]
    replaced: list[str]
    rows: int
    #: files of the replaced traces' rows, written under a hidden name (:func:`held_path`) to be
    #: renamed into place once their old rows are gone
    held: list[tuple[str, int, list[str]]] = field(default_factory=list)


def _builder(job: Job) -> Any:
    if job.kind == "turns":
        return TurnBuilder(dedupe=False, prices=job.prices)
    if job.kind == "items":
        return ItemBuilder(payloads=job.payloads, dedupe=False)
    return EventBuilder()


@functools.cache
def file_schema(kind: str, payloads: bool = False) -> pa.Schema:
    """The schema of a data file: the frame's columns as :func:`to_arrow` types them, without the
    ``model`` partition column."""
    job = Job(kind, "", [], payloads=payloads)
    schema = to_arrow(_builder(job).frame()).schema.remove_metadata()
    return schema.remove(schema.get_field_index("model"))


def data_schema(kind: str, payloads: bool = False, known: bytes | None = None) -> pa.Schema:
    """The data files' schema: ``known`` (serialized, as a file of the dataset has it), else built
    by :func:`file_schema`."""
    return pa.ipc.read_schema(pa.py_buffer(known)) if known else file_schema(kind, payloads)


def convert(job: Job) -> ChunkResult:
    """:func:`_convert_chunk`, the keys to redact (in error messages) read once for the chunk."""
    with held_secrets():
        return _convert_chunk(job)


def _convert_chunk(job: Job) -> ChunkResult:
    """Read the chunk's traces as the loaders do, build the kind's frame, drop the copies of
    repeated messages it holds twice (and those shown from other traces), write one Parquet file
    per (month, model) partition.

    A changed trace (``job.prior``) whose first rows are still those the dataset holds (the Tracer
    appended a turn, a sidecar a record) gets only its new rows written; any other changed trace
    is returned in ``replaced``, its rows written to ``held`` files (hidden from readers until
    its old rows are removed and they are renamed into place)."""
    builder = _builder(job)
    # every kind reads the trace file, so that a trace whose file is skipped has no rows in any kind;
    # the turns and the events need only some fields of it (the events none): msgspec's way
    decode = decode_trace if job.kind != "items" else None
    loaded: dict[str, tuple[bool, list[dict[str, str]]]] = {}
    item_fps: list[tuple[int, str, int, int]] = []
    for tid, path, sidecar in job.sources:
        notes: list[dict[str, str]] = []
        data: Any = None  # the trace's dict, or what decode_trace made of it
        if path is not None:
            try:
                data = read_trace(path, decode=decode, max_size=job.max_size)
            except TraceError as exc:
                if exc.reason != IS_A_DIRECTORY:  # a directory matched by the pattern: not reported
                    notes.append({"path": path, "reason": exc.reason})
                loaded[tid] = (False, notes)
                continue
        records = None
        if sidecar is not None:
            sc = read_sidecar(sidecar, job.kind == "events", job.max_size)
            if sc.error is not None:  # as the loaders report it
                if path is None:  # nothing else to load from this trace
                    loaded[tid] = (False, [{"path": sidecar, "reason": sc.error}])
                    continue
                notes.append({"path": sidecar, "reason": f"{UNREAD}: {sc.error}"})
            if sc.damaged:
                notes.append({"path": sidecar, "reason": f"{DAMAGED}: {sc.damaged} unreadable lines ({len(sc)} records read)"})
            records = latest_run(list(sc))  # type: ignore[arg-type]
        if job.kind == "turns":
            builder.add(tid, data, records)
        elif job.kind == "items":
            if data is not None:
                builder.add(tid, data, records)
                if job.dedupe:
                    history = data["history"]
                    item_fps.extend(_message_fps(tid, history, own_records(split_sidecar(records)[0], history) if records else ()))
        elif records:
            builder.add(tid, records, data)
        loaded[tid] = (True, notes)
    df = builder.frame()
    df.attrs = {}  # (not copied into every slice and column taken below)
    gone = _unplaceable(job, df)
    if gone:  # skipped as an unreadable file is, so that the next sync tries it again only if it changes
        df = df.loc[~df["trace_id"].isin(gone).to_numpy()].reset_index(drop=True)
        item_fps = [u for u in item_fps if u[1] not in gone]
        for tid, path, sidecar in job.sources:
            if tid in gone:
                loaded[tid] = (False, [*loaded[tid][1], {"path": path or sidecar or tid, "reason": gone[tid]}])
    spans = _spans(df)
    hashes = row_hashes(df)
    traces: dict[str, tuple[bool, list[dict[str, str]], int, str]] = {}
    replaced: list[str] = []
    drop = np.zeros(len(df), dtype=bool)
    known_units: set[tuple[str, int]] = set()
    mi = df["message_index"].to_numpy(dtype=np.int64, na_value=-1) if job.prior and len(df) else np.empty(0, np.int64)
    for tid, (ok, notes) in loaded.items():
        lo, hi = spans.get(tid, (0, 0))
        digest = _digest(hashes[lo:hi])
        prior = job.prior.get(tid)
        if prior is not None:
            n_old, old_digest = prior
            if hi - lo < n_old or _digest(hashes[lo : lo + n_old]) != old_digest:
                replaced.append(tid)  # all its rows are new
                traces[tid] = (ok, notes, hi - lo, digest)
                continue
            drop[lo : lo + n_old] = True  # already in the dataset
            if n_old:
                known_units.update((tid, m) for m in mi[lo : lo + n_old].tolist() if m >= 0)
        traces[tid] = (ok, notes, hi - lo, digest)
    if known_units:
        item_fps = [u for u in item_fps if (u[1], u[2]) not in known_units]
    if drop.any():
        df = df.loc[~drop].reset_index(drop=True)
    units: list[tuple[int, str, int, int, int]] = []
    if job.dedupe and job.kind != "events" and len(df):
        df, units = _dedupe(job, df, item_fps)
    elif job.hide and len(df):
        df = df.loc[~_unit_mask(df, job.kind, {(t, m) for t, ms in job.hide.items() for m in ms})].reset_index(drop=True)
    held: list[tuple[str, int, list[str]]] = []
    if replaced and len(df):
        mine = df["trace_id"].isin(replaced).to_numpy()
        held = _write(job, df.loc[mine].reset_index(drop=True), hidden=True)
        df = df.loc[~mine].reset_index(drop=True)
    files = _write(job, df)
    return ChunkResult(files, units, traces, replaced, len(df) + sum(n for _, n, _ in held), held)


def _spans(df: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """trace id -> (first row, end row): a builder adds each trace's rows together."""
    if not len(df):
        return {}
    tids = df["trace_id"].to_numpy(dtype=object)
    starts = np.flatnonzero(np.concatenate(([True], tids[1:] != tids[:-1])))
    ends = np.append(starts[1:], len(tids))
    return {tids[a]: (int(a), int(b)) for a, b in zip(starts, ends)}


#: columns a row's hash leaves out: what prices make of its other columns (a price change
#: recomputes them in place, and a trace that then grows keeps its rows)
_UNHASHED = ("cost", "cost_missing")


def row_hashes(df: pd.DataFrame) -> np.ndarray:
    """A 64-bit hash of every row (all columns but :data:`_UNHASHED`), to tell the rows a changed
    trace still has."""
    if not len(df):
        return np.empty(0, dtype=np.uint64)
    return np.asarray(pd.util.hash_pandas_object(_hashable(df.drop(columns=[c for c in _UNHASHED if c in df])),
                                                 index=False), dtype=np.uint64)


_NESTED = (list, dict, np.ndarray)


def _nested_json(v: Any) -> Any:
    if isinstance(v, _NESTED):
        return json.dumps(v.tolist() if isinstance(v, np.ndarray) else v, sort_keys=True, default=str)
    return v


def _hashable(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with nested values (an embedding's list, a tool result's images: payloads of the
    items) written as JSON text, which pandas can hash; the frame itself when it holds none."""
    out = df
    for col in df.columns:
        s = df[col]
        if s.dtype == object and any(isinstance(v, _NESTED) for v in s.to_numpy()):
            if out is df:
                out = df.copy(deep=False)
            out[col] = pd.Series([_nested_json(v) for v in s.to_numpy()], index=df.index, dtype=object)
    return out


def _digest(hashes: np.ndarray) -> str:
    return hashlib.blake2b(hashes.tobytes(), digest_size=16).hexdigest()


# --------------------------------------------------------------------------- de-duplication


def _mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One step of a 64-bit hash over columns (splitmix64's finalizer), the same on every machine."""
    with np.errstate(over="ignore"):
        h = (h ^ v.astype(np.uint64, copy=False)) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h


def _str_hash(s: Any) -> int:
    if s is None or s is pd.NA or (isinstance(s, float) and s != s):
        return 0x5555
    return int.from_bytes(hashlib.blake2b(str(s).encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def turn_fps(df: pd.DataFrame) -> np.ndarray:
    """Per row of a turns frame, the fingerprint of its assistant message (0: none): the same
    fields the loader compares (``created_at``, finish reason, content counts, usage), hashed
    the same way in every process."""
    h = np.full(len(df), 0x243F6A8885A308D3, dtype=np.uint64)
    for col in _TURN_FP_COLUMNS:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            codes = np.asarray(s.cat.codes, dtype=np.int64)
            table = np.array([_str_hash(c) for c in s.cat.categories] + [_str_hash(None)], dtype=np.uint64)
            v = table[codes]
        elif col == "ended":
            v = np.asarray(s.to_numpy(dtype="datetime64[us]").view(np.int64), dtype=np.int64).view(np.uint64)
        else:
            v = s.to_numpy(dtype=np.int64, na_value=-(2**62)).view(np.uint64)
        h = _mix(h, v)
    fp = h.view(np.int64).copy()
    fp[fp == 0] = 1
    no_message = np.asarray(df["ended"].isna()) | np.asarray(df["source"] == "sidecar")
    fp[no_message] = 0
    return fp


def _canon(v: Any) -> Any:
    """Values equal under ``==`` (``1``, ``1.0``, ``True``) written alike, for a stable digest."""
    if v.__class__ is tuple:
        return tuple(_canon(x) for x in v)
    if v.__class__ is bool:
        return int(v)
    if v.__class__ is float and v.is_integer():
        return int(v)
    return v


def _message_key(msg: dict[str, Any]) -> tuple[Any, ...] | None:
    """The items loader's :func:`~._items.message_key` of a message; None when it does not
    de-duplicate the message (no items, no time, an unhashable value)."""
    items = msg.get("content_items")
    if items.__class__ is not list:
        return None
    created = created_ms(msg.get("created_at"))
    if created is None:
        return None
    role = msg.get("role")
    key = message_key(role if role.__class__ is str else None, created, msg, items)
    try:
        hash(key)
    except TypeError:  # the loader does not de-duplicate it either
        return None
    return key


def _message_fps(tid: str, history: list[dict[str, Any]], timed: Container[int]) -> list[tuple[int, str, int, int]]:
    """(fingerprint, trace id, message index, preference) of each message the items loader
    de-duplicates, by its rule: the fields of :func:`_message_key`, a user message's joined with
    those of the assistant message answering it (a comparison's prompt, one trace per model, is
    no copy); preference 0 for a message of a turn the sidecar times (``timed``: turn indexes),
    else 1, as the turns'. Digested with BLAKE2b so that every process and every run agrees."""
    out: list[tuple[int, str, int, int]] = []
    keys = [_message_key(m) if m.__class__ is dict else None for m in history]
    turn = 0
    for mi, (msg, key) in enumerate(zip(history, keys)):
        role = msg.get("role") if msg.__class__ is dict else None
        if key is not None:
            if role == "user" and mi + 1 < len(keys) and (nxt := keys[mi + 1]) is not None and nxt[0] == "assistant":
                key = (key, nxt)
            digest = hashlib.blake2b(repr(_canon(key)).encode("utf-8", "surrogatepass"), digest_size=8).digest()
            out.append((int.from_bytes(digest, "little", signed=True) or 1, tid, mi, 0 if turn in timed else 1))
        if role == "assistant":
            turn += 1
    return out


def _unit_mask(df: pd.DataFrame, kind: str, keys: set[tuple[str, int]]) -> np.ndarray:
    """Rows of the units ``keys`` ((trace id, message index)): a trace's turn row, a message's items."""
    if not keys or not len(df):
        return np.zeros(len(df), dtype=bool)
    return key_mask(
        df["trace_id"].to_numpy(dtype=object),
        df["message_index"].to_numpy(dtype=np.int64, na_value=-1),
        np.asarray(df["source"] == "sidecar") if kind == "turns" else None,
        keys,
    )


def _dedupe(job: Job, df: pd.DataFrame, item_fps: list[tuple[int, str, int, int]]) -> tuple[pd.DataFrame, list[tuple[int, str, int, int, int]]]:
    """Units of the chunk, each marked shown or not, and the frame without the rows not shown.

    Within the chunk the rule of the loaders applies (first by preference, trace id, message
    index); a unit that loses here loses in the whole dataset too, so it is never written. The
    manifest settles the units that remain against the other chunks."""
    if job.kind == "turns":
        fp = turn_fps(df)
        rows = np.nonzero(fp)[0]
        pref = np.asarray(df["source"] != "trace+sidecar", dtype=np.int64)
        cand = pd.DataFrame(
            {
                "fp": fp[rows],
                "tid": df["trace_id"].to_numpy(dtype=object)[rows],
                "mi": df["message_index"].to_numpy(dtype=np.int64, na_value=-1)[rows],
                "pref": pref[rows],
            }
        )
    else:
        cand = pd.DataFrame(item_fps, columns=["fp", "tid", "mi", "pref"])
    hide = {(t, m) for t, ms in job.hide.items() for m in ms}
    forced = np.fromiter(((t, m) in hide for t, m in zip(cand["tid"], cand["mi"])), dtype=bool, count=len(cand)) if hide else np.zeros(len(cand), dtype=bool)
    order = cand.assign(forced=forced).sort_values(["fp", "forced", "pref", "tid", "mi"], kind="stable")
    first = ~order["fp"].duplicated().to_numpy() & ~order["forced"].to_numpy()
    kept = pd.Series(first, index=order.index).sort_index().to_numpy()
    units = list(zip(cand["fp"].tolist(), cand["tid"].tolist(), cand["mi"].tolist(), cand["pref"].tolist(), kept.astype(int).tolist()))
    drop = {(t, m) for (_, t, m, _, k) in units if not k}
    if drop:
        df = df.loc[~_unit_mask(df, job.kind, drop)].reset_index(drop=True)
    return df, units


# --------------------------------------------------------------------------- files


def partition_dir(month: Any, model: Any) -> str:
    """``month=YYYY-MM/model=<model, URI-encoded>`` (Hive's null name where missing)."""
    m = NULL_PARTITION if month is None or pd.isna(month) else str(month)
    return f"month={m}/{_model_dir(model)}"


def _model_dir(model: Any) -> str:
    if model is None or pd.isna(model):
        return f"model={NULL_PARTITION}"
    return f"model={model_segment(str(model))}"


#: an escape ``quote`` wrote (left as it is), or a capital letter it left (to escape)
_ESCAPE_OR_CAPITAL = re.compile(r"%[0-9A-F]{2}|[A-Z]")


def model_segment(model: str) -> str:
    """A model id as its partition directory names it: URI-encoded, capital letters too, so that no
    two ids differing in case share a directory where the file system ignores case (see the
    module docstring); ``urllib.parse.unquote`` (and every Hive reader) gives the id back."""
    return _ESCAPE_OR_CAPITAL.sub(lambda m: m[0] if len(m[0]) == 3 else f"%{ord(m[0]):02X}", quote(model, safe=""))


def _name_max(root: str) -> int:
    """The longest file name the file system of ``root`` takes (255 bytes where it cannot say)."""
    try:
        return int(os.pathconf(root if os.path.isdir(root) else os.path.dirname(root) or ".", "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


def _unplaceable(job: Job, df: pd.DataFrame) -> dict[str, str]:
    """Trace id -> why, of the traces with rows whose model no partition directory can hold: a
    name longer than the file system takes (a model id of hundreds of characters, or of fewer
    non-ASCII ones, each URI-encoded as up to 12 bytes), or Hive's null name, which every reader
    decodes to null. Such a trace is left out whole."""
    if not len(df) or "model" not in df:
        return {}
    models = df["model"].cat.categories if isinstance(df["model"].dtype, pd.CategoricalDtype) else df["model"].dropna().unique()
    limit = _name_max(job.root)
    why = {}
    for m in models:
        if len(_model_dir(m)) > limit:  # the encoded name is ASCII
            why[m] = (f"model id too long for a partition directory: {len(_model_dir(m)) - 6:,} bytes URI-encoded "
                      f"(this file system takes names of {limit} bytes): {str(m)[:40]!r}...")
        elif str(m) == NULL_PARTITION:
            why[m] = f"model id {NULL_PARTITION!r} is Hive's name for a missing value: readers would give null"
    if not why:
        return {}
    bad = df.loc[df["model"].isin(list(why)).to_numpy(), ["trace_id", "model"]].drop_duplicates("trace_id")
    return {tid: why[m] for tid, m in zip(bad["trace_id"], bad["model"].astype(object))}


def held_path(path: str) -> str:
    """Where a file to be renamed into ``path`` later is kept: a hidden name readers skip."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.held")


def _write(job: Job, df: pd.DataFrame, hidden: bool = False) -> list[tuple[str, int, list[str]]]:
    """One file per (month, model) partition of the frame's rows: (name, rows, trace ids) each;
    ``hidden``: written at :func:`held_path` of the name. The rows are put in partition order
    once and each file written from a slice (on ``job.write_threads`` threads)."""
    if not len(df):
        return []
    schema = data_schema(job.kind, job.payloads, job.schema)
    month = df[DATE_FROM[job.kind]].to_numpy(dtype="datetime64[us]").astype("datetime64[M]")
    keys = pd.DataFrame({"d": month, "m": df["model"].astype(object)})
    groups = list(keys.groupby(["d", "m"], dropna=False, sort=True).indices.items())
    order = np.concatenate([idx for _, idx in groups])
    try:  # straight into the files' types (to_arrow infers them first, ~2x the time)
        table = pa.Table.from_pandas(df.drop(columns=["model"]), schema=schema, preserve_index=False)
    except (pa.ArrowException, UnicodeEncodeError, TypeError, ValueError, OverflowError):
        # what to_arrow makes of values their column's type cannot hold (payloads of foreign files)
        table = to_arrow(df).replace_schema_metadata(None).drop_columns(["model"]).cast(schema)
    table = table.take(pa.array(order))
    token = uuid.uuid4().hex[:16]
    parts: list[tuple[str, pa.Table]] = []
    start = 0
    for n, ((d, m), idx) in enumerate(groups):
        when = None if pd.isna(d) else str(np.datetime64(d, "M"))
        parts.append((f"{partition_dir(when, m)}/part-{token}-{n}.parquet", table.slice(start, len(idx))))
        start += len(idx)

    def write(name: str, part: pa.Table) -> tuple[str, int, list[str]]:
        path = os.path.join(job.root, name)
        atomic_write(part, held_path(path) if hidden else path)
        return name, part.num_rows, pc.unique(part.column("trace_id")).to_pylist()

    if job.write_threads < 2 or len(parts) < 4:
        return [write(*p) for p in parts]
    with ThreadPoolExecutor(job.write_threads, thread_name_prefix="mmsp-notebook-parquet") as ex:
        return list(ex.map(lambda p: write(*p), parts))
