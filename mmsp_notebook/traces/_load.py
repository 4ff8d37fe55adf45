"""The loaders of :mod:`mmsp_notebook.traces`: find the traces, read each file once through the
trace store, feed a frame builder, report what was skipped (see the package docstring).
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from .._errors import OptionError, OptionTypeError, TraceError
from ..core.pricing import Prices
from ..core.redact import held_secrets
from ..core.stamps import created_ms
from ..core.store import IS_A_DIRECTORY, MAX_FILE_SIZE, read_sidecar, read_trace
from ._common import OTEL_COLUMNS, Paths, TimeLike, TraceLoadWarning, check_flags, check_max_size
from ._events import EventBuilder
from ._fast import Decoded, decode_trace
from ._io import Source, config_trace_id, deeper_match, find_sources, latest_run
from ._items import ItemBuilder
from ._manifest import synced_dataset
from ._turns import TurnBuilder

__all__ = ["load_turns", "load_items", "load_events", "PROGRESS_THRESHOLD"]

#: More files than this show a progress bar when ``progress=None``.
PROGRESS_THRESHOLD = 200


def _to_ms(value: TimeLike | None, name: str = "since") -> float | None:
    """Unix ms of a ``since`` / ``until`` value (anything ``pandas.Timestamp`` takes; naive = UTC). A
    number is a Unix time, in seconds or milliseconds as a message's ``created_at`` is read
    (:func:`~mmsp_notebook.core.stamps.created_ms`), not pandas' nanoseconds."""
    if value is None:
        return None
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        ms = created_ms(float(value))
        if ms is None:
            raise OptionError(f"{name} takes a time: a number is Unix seconds or milliseconds (such as "
                              f"time.time()), not {value!r}")
        return float(ms)
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise OptionError(f"{name} takes a time (a datetime, a pandas Timestamp, an ISO string such as "
                          f"'2026-01-31T12:00'), not {value!r}: {exc}") from None
    if ts is pd.NaT:
        raise OptionError(f"{name} takes a time, not {value!r} (a missing time): leave it out for no bound")
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return ts.timestamp() * 1000.0  # (any year pandas takes: a nanosecond count would overflow past 2262)


def _window(since: TimeLike | None, until: TimeLike | None) -> tuple[float | None, float | None]:
    """Unix ms of ``since`` and ``until``; one after the other is refused (it would load nothing)."""
    lo, hi = _to_ms(since), _to_ms(until, "until")
    if lo is not None and hi is not None and lo > hi:
        raise OptionError(f"since ({since!r:.60}) is after until ({until!r:.60}): no turn is in between; swap them")
    return lo, hi


def _model_set(models: str | Iterable[str] | None) -> frozenset[str] | None:
    if models is None:
        return None
    if isinstance(models, str):
        return frozenset({models})
    given = list(models) if isinstance(models, Iterable) else None
    if given is None or not all(isinstance(m, str) for m in given):
        raise OptionTypeError(f"models takes a model id or a list of them, not {models!r}")
    return frozenset(given)


def _progress(n: int, progress: bool | None, desc: str) -> Any:
    show = n > PROGRESS_THRESHOLD if progress is None else bool(progress)
    if not show:
        return None
    from tqdm.auto import tqdm  # imported on use: a plain load pulls in no progress machinery

    return tqdm(total=n, desc=desc, unit="file")


def _finish(df: pd.DataFrame, n_files: int, skipped: list[dict[str, str]], otel: bool,
            repeated: dict[str, list[str]] | None = None) -> pd.DataFrame:
    if otel:
        df = df.rename(columns=OTEL_COLUMNS)
    df.attrs["skipped"] = skipped
    df.attrs["n_files"] = n_files
    df.attrs["n_skipped"] = len(skipped)
    if repeated:
        df.attrs["repeated_trace_ids"] = repeated
    if skipped or repeated:
        groups: dict[str, list[str]] = {"file": [], _DAMAGED: [], UNREAD: [], _UNLISTED: []}
        for s in skipped:
            reason = s["reason"]
            kind = next((k for k in (_DAMAGED, UNREAD, _UNLISTED) if reason.startswith(k)), "file")
            groups[kind].append(reason[len(UNREAD) + 2:] if kind == UNREAD else reason)
        parts = []
        if groups["file"]:
            n_skip = len(groups["file"])
            parts.append(f"skipped {n_skip} of {n_files + n_skip} trace files ({_kinds(groups['file'])})")
        if groups[_DAMAGED]:
            parts.append(f"{len(groups[_DAMAGED])} damaged timing sidecars (their readable lines were used)")
        if groups[UNREAD]:
            parts.append(f"{len(groups[UNREAD])} timing sidecars not read ({_kinds(groups[UNREAD])})")
        if groups[_UNLISTED]:
            parts.append(f"{len(groups[_UNLISTED])} directories could not be listed")
        if parts:
            parts[-1] += "; see df.attrs['skipped'] for paths and reasons"
        if repeated:
            tid, where = next(iter(repeated.items()))
            ids = "1 trace id names" if len(repeated) == 1 else f"{len(repeated)} trace ids name"
            parts.append(f"{ids} several conversations ({tid!r}: {', '.join(where)}), so their rows cannot be told "
                         "apart: load each directory on its own, or one directory holding them all; see "
                         "df.attrs['repeated_trace_ids']")
        warnings.warn(
            f"mmsp_notebook.traces: {'; '.join(parts)}",
            TraceLoadWarning,
            stacklevel=3,
        )
    return df


def _kinds(reasons: list[str]) -> str:
    return "; ".join(f"{n} {k}" for k, n in Counter(r.split(":")[0] for r in reasons).most_common())


_DAMAGED = "damaged sidecar"
#: the reason of a sidecar that could not be read at all starts with this (its trace is loaded)
UNREAD = "sidecar not read"
_UNLISTED = "unreadable directory"


def _drive(*args: Any, **kwargs: Any) -> tuple[int, list[dict[str, str]], dict[str, list[str]]]:
    """:func:`_drive_sources`, the keys to redact (in error messages) read once for the whole load."""
    with held_secrets():
        return _drive_sources(*args, **kwargs)


def _drive_sources(
    paths: Paths,
    pattern: str,
    progress: bool | None,
    desc: str,
    each: Callable[[str, Any, list[dict[str, Any]] | None], None],
    *,
    events: bool = True,
    max_size: int = MAX_FILE_SIZE,
    decode: Callable[[bytes], Any] | None = None,
    kind: str = "turns",
) -> tuple[int, list[dict[str, str]], dict[str, list[str]]]:
    check_max_size(max_size)
    if not isinstance(paths, (str, bytes, os.PathLike)) and isinstance(paths, Iterable):
        paths = list(paths)  # (walked, then looked at again: a generator would be spent)
    sources, skipped = find_sources(paths, pattern)
    for note in _datasets_given(paths, sources, kind):
        warnings.warn(note, TraceLoadWarning, stacklevel=4)
    if not sources:  # (only then: a load that found traces pays for no second walk)
        deeper = deeper_match(paths, pattern)
        if deeper is not None:
            warnings.warn(f"mmsp_notebook.traces: pattern {pattern!r} matched no trace file, but there are some in "
                          f"subfolders: pass pattern={deeper!r} (** recurses)", TraceLoadWarning, stacklevel=4)
    bar = _progress(len(sources), progress, desc)
    loaded = 0
    skip = skipped.append
    first: dict[str, str] = {}  # trace id -> the file it was first found in
    repeated: dict[str, list[str]] = {}  # trace ids found in several files (given under several directories)
    try:
        for src in sources:
            data = None
            path, sidecar_path = src.path, src.sidecar
            if path is not None:
                try:
                    data = read_trace(path, max_size=max_size, decode=decode, listed=src.listed)
                except TraceError as exc:
                    if exc.reason != IS_A_DIRECTORY:  # a directory matched by the pattern: not reported
                        skip({"path": path, "reason": exc.reason})
                    if bar is not None:
                        bar.update(1)
                    continue
            records = None
            if sidecar_path is not None:
                sidecar = read_sidecar(sidecar_path, events, max_size, src.sidecar_listed)
                if sidecar.error is not None:
                    if path is None:  # nothing else to load from this source
                        skip({"path": sidecar_path, "reason": sidecar.error})
                        if bar is not None:
                            bar.update(1)
                        continue
                    skip({"path": sidecar_path, "reason": f"{UNREAD}: {sidecar.error}"})
                if sidecar.damaged:
                    skip({"path": sidecar_path,
                          "reason": f"{_DAMAGED}: {sidecar.damaged} unreadable lines ({len(sidecar)} records read)"})
                # records as the file holds them: every builder checks each value it uses
                records = latest_run(sidecar)  # type: ignore[arg-type]
            tid = src.trace_id
            if src.standalone:
                if data is not None:
                    tid = config_trace_id(src, {"trace_id": data.trace_id} if isinstance(data, Decoded) else data["config"])
                elif records:
                    rec_tid = records[-1].get("trace_id")
                    tid = config_trace_id(src, {"trace_id": rec_tid})
            each(tid, data, records)
            where = path or sidecar_path or ""
            if first.setdefault(tid, where) != where:
                repeated.setdefault(tid, [first[tid]]).append(where)
            loaded += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return loaded, skipped, repeated


def _datasets_given(paths: Paths, sources: list[Source], kind: str) -> list[str]:
    """A warning for each directory given that is a trace dataset (made by ``sync``, or one of its
    kind directories) and gave no trace: what reads it, and the trace directory it was synced from."""
    notes = []
    for raw in [paths] if isinstance(paths, (str, bytes, os.PathLike)) else paths:
        if not isinstance(raw, (str, bytes, os.PathLike)):
            continue
        given = os.fsdecode(raw)
        path = os.path.abspath(os.path.expanduser(given))
        if not os.path.isdir(path):
            continue
        found = synced_dataset(path)
        if found is None or any((src.path or src.sidecar or "").startswith(path + os.sep) for src in sources):
            continue
        root, kinds, origin = found
        view = kind if kind in kinds else kinds[0]
        readers = [f"traces.query(\"SELECT * FROM {view}\", {root!r})",
                   f"traces.dataset({root!r}{'' if view == 'turns' else f', kind={view!r}'})"]
        if "turns" in kinds:
            readers.append(f"traces.summary({root!r})")
        then = (f"; or give the trace folder it was synced from instead: traces.load_{kind}({origin!r})"
                if origin is not None else "; or give the trace folder it was synced from instead")
        notes.append(f"mmsp_notebook.traces: {given} is a trace dataset made by traces.sync, not a folder of traces, "
                     f"so no trace was loaded from it: read it with {', '.join(readers[:-1])} or {readers[-1]}{then}")
    return notes


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
    max_size: int = MAX_FILE_SIZE,
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
        max_size: the largest file read, in bytes (default 256 MiB,
            :data:`mmsp_notebook.core.store.MAX_FILE_SIZE`); a larger trace file or sidecar is
            skipped unread and named in ``attrs["skipped"]`` as ``too large``.

    Raises:
        TraceNotFoundError: a given path does not exist (a ``FileNotFoundError`` too).
        OptionError: a price without ``prompt_tokens`` / ``response_tokens`` or not a number; a
            ``pattern`` that is not relative to the directory; a ``max_size`` that is not an int; a
            ``since`` / ``until`` that is no time (``NaT``, ``""``, unparsable), or a ``since`` after ``until``.
        OptionTypeError: a path that is not a str, bytes or path-like object (``None``, a number), or
            ``models`` that is not a model id or a list of them.

    Returns:
        The turns frame, sorted by trace then turn order; ``attrs`` holds ``skipped``,
        ``n_files``, ``n_skipped`` and ``duplicates``.
    """
    check_flags(otel=otel, progress=progress, dedupe=dedupe)
    builder = TurnBuilder(*_window(since, until), _model_set(models), dedupe, prices)
    n, skipped, repeated = _drive(path_or_paths, pattern, progress, "loading turns", builder.add, events=False,
                                  max_size=max_size, decode=decode_trace, kind="turns")
    return _finish(builder.frame(), n, skipped, otel, repeated)


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
    max_size: int = MAX_FILE_SIZE,
) -> pd.DataFrame:
    """One row per content item of every message, user and assistant (see the module docstring).

    Args:
        path_or_paths, since, until, models, pattern, otel, progress, max_size: as for
            :func:`load_turns`.
        payloads: also keep ``data`` (base64 text; a value that is no string as its JSON text), ``embedding``, ``images`` and ``fidelity``, so
            that grouping by ``(trace_id, message_index)`` rebuilds each message's items exactly.
        dedupe: keep one copy of a message repeated in several files (see "Repeated histories").

    Returns:
        The items frame, in history order; ``attrs["duplicates"]`` counts messages left out.
    """
    check_flags(otel=otel, progress=progress, payloads=payloads, dedupe=dedupe)
    builder = ItemBuilder(*_window(since, until), _model_set(models), payloads, dedupe)

    def each(tid: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        if data is not None:
            builder.add(tid, data, records)

    n, skipped, repeated = _drive(path_or_paths, pattern, progress, "loading items", each, events=False,
                                  max_size=max_size, kind="items")
    return _finish(builder.frame(), n, skipped, otel, repeated)


def load_events(
    path_or_paths: Paths,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    models: str | Iterable[str] | None = None,
    pattern: str = "**/*.json",
    otel: bool = False,
    progress: bool | None = None,
    max_size: int = MAX_FILE_SIZE,
) -> pd.DataFrame:
    """One row per streamed event, from the timing sidecars (see the module docstring).

    Traces without a sidecar contribute nothing (mmsp's Tracer records no event timing). Each
    trace file is read as :func:`load_turns` reads it (only what it needs), so that the loaders
    agree on which traces are in: a trace whose file is skipped (damaged, unreadable, too large)
    is named in ``attrs["skipped"]`` and its sidecar's events are left out, as its turns are.

    Args:
        path_or_paths, since, until, models, pattern, otel, progress, max_size: as for
            :func:`load_turns`; ``since``/``until`` apply to the turn's ``started``.

    Returns:
        The events frame, in sidecar order.
    """
    check_flags(otel=otel, progress=progress)
    builder = EventBuilder(*_window(since, until), _model_set(models))

    def each(tid: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        if records:
            builder.add(tid, records, data)

    n, skipped, repeated = _drive(path_or_paths, pattern, progress, "loading events", each, max_size=max_size,
                                  decode=decode_trace, kind="events")
    return _finish(builder.frame(), n, skipped, otel, repeated)
