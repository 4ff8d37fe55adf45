"""Column builders for :mod:`mmsp_notebook.traces`: one pass over parsed traces, plain Python
containers (``array.array`` for numbers, lists for strings), one DataFrame construction at the end.

Integers use ``INT_NA`` (the smallest int64) as the missing-value sentinel while building; it turns
into a nullable ``Int64`` mask when the frame is made, so a missing usage bucket stays ``<NA>`` and
never becomes 0. Floats use NaN. Category columns are built as codes (``-1`` = missing).
"""

from __future__ import annotations

import json
import math
import re
from array import array
from typing import Any

import numpy as np
import pandas as pd

INT_NA = -(2**63)
#: integers strictly between these fit an int64 column (INT_NA itself is the missing-value sentinel)
INT_LO, INT_HI = INT_NA, 2**63
#: timestamps are Unix ms strictly between these (1970-01-01 excluded, year 10000 excluded)
MS_LO, MS_HI = 0, 253_402_300_800_000
_NAN = math.nan
#: durations are ms in ``0 <= ms < _DUR_HI`` (a finite float bound, so huge integers compare safely)
_DUR_HI = 1e300

# Content item types as mmsp writes them, and the names used before mmsp 0.5 (still found in
# older trace files; the Tracer's own viewer accepts both).
_TEXT = frozenset({"text.done", "text"})
_THINKING = frozenset({"thinking.done", "thinking"})
_TOOL_CALL = frozenset({"tool_call.done", "tool_call"})
_INLINE = frozenset({"inline_data.done", "inline_data"})
_INLINE_THINKING = frozenset({"inline_thinking.done", "inline_thinking"})
_EMBEDDING = frozenset({"embedding.done", "embedding"})
_TOOL_RESULT = frozenset({"tool_result.done", "tool_result"})
_IMAGE_URL = frozenset({"image_url.done", "image_url"})

#: fields that get their own column in the items frame; anything else lands in ``extra``
_ITEM_FIELDS = frozenset(
    {
        "type",
        "text",
        "thinking",
        "arguments",
        "name",
        "tool_call_id",
        "mime_type",
        "data",
        "embedding",
        "images",
        "image_url",
        "fidelity",
    }
)


# --------------------------------------------------------------------------- small coercions


def as_int(v: Any) -> int | None:
    """An integer count from JSON, or None (bools, strings, non-integral floats and integers
    beyond int64 are not counts)."""
    c = v.__class__
    if c is int:
        return v if INT_LO < v < INT_HI else None
    if c is float and v == v and v not in (math.inf, -math.inf) and v.is_integer():
        return int(v) if INT_LO < v < INT_HI else None
    return None


def int_or_na(v: Any) -> int:
    """:func:`as_int` with ``INT_NA`` for None (the value an int64 column is built from)."""
    v = as_int(v)
    return INT_NA if v is None else v


def as_num(v: Any) -> float | None:
    """A finite number from JSON, or None."""
    c = v.__class__
    if c is int or c is float:
        try:
            f = float(v)
        except OverflowError:  # an integer beyond float range
            return None
        return f if f == f and f not in (math.inf, -math.inf) else None
    return None


def as_ms(v: Any) -> float | int | None:
    """A plausible Unix-ms timestamp (after 1970-01-01, before year 10000), or None."""
    c = v.__class__
    if (c is int or c is float) and MS_LO < v < MS_HI:  # NaN compares False
        return v
    return None


def as_dur(v: Any) -> float | None:
    """A duration in ms (finite, not negative), or None."""
    v = as_num(v)
    return v if v is not None and v >= 0 else None


def sidecar_timing(rec: dict[str, Any]) -> tuple[float, float]:
    """``(latency, ttft)`` in seconds (NaN when unknown) of a sidecar record: a negative duration
    is NA, and so is a time to first token longer than the whole response."""
    total = rec.get("total_ms")
    c = total.__class__
    lat = total / 1000.0 if (c is float or c is int) and 0 <= total < _DUR_HI else _NAN  # NaN compares False
    ttft = rec.get("ttft_ms")
    c = ttft.__class__
    first = ttft / 1000.0 if (c is float or c is int) and 0 <= ttft < _DUR_HI else _NAN
    return lat, (_NAN if first > lat else first)


def as_str(v: Any) -> str | None:
    """A non-empty string, or None."""
    return v if v.__class__ is str and v else None


def b64_size(s: str) -> int:
    """Decoded byte length of base64 text, computed from its length (the payload is never decoded)."""
    n = len(s)
    if n == 0:
        return 0
    pad = 2 if s.endswith("==") else (1 if s.endswith("=") else 0)
    return n * 3 // 4 - pad


def payload_size(data: Any) -> int | None:
    """Byte size of an inline payload as stored by the Tracer (base64 text), or of raw bytes."""
    if data.__class__ is str:
        return b64_size(data)
    if isinstance(data, (bytes, bytearray)):
        return len(data)
    return None


def _data_url_info(url: str) -> tuple[str | None, int | None]:
    # "data:image/png;base64,AAAA" -> ("image/png", decoded size)
    head, sep, body = url.partition(",")
    if not sep:
        return None, None
    meta = head[5:]
    mime = meta.split(";", 1)[0] or None
    return mime, (b64_size(body) if meta.endswith(";base64") else len(body))


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


try:  # compact JSON for tool arguments and fidelity; orjson when installed
    import orjson as _orjson

    def dumps(v: Any) -> str:
        """Compact JSON text of a parsed value (orjson, falling back to the stdlib)."""
        try:
            return _orjson.dumps(v).decode()
        except (TypeError, ValueError):
            return _dumps(v)

except ImportError:  # pragma: no cover
    dumps = _dumps


# --------------------------------------------------------------------------- column kinds


class Cat:
    """A categorical column built as codes."""

    __slots__ = ("codes", "index", "cats")

    def __init__(self) -> None:
        self.codes = array("i")
        self.index: dict[Any, int] = {}
        self.cats: list[Any] = []

    def code(self, v: Any) -> int:
        if v is None:
            return -1
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.cats)
            self.cats.append(v)
        return c

    def append(self, v: Any) -> None:
        self.codes.append(self.code(v))

    def build(self) -> pd.Categorical:
        codes = np.frombuffer(self.codes, dtype=np.int32) if len(self.codes) else np.empty(0, np.int32)
        cats = self.cats
        if not _encodable(cats):
            fixed = [utf8_safe(c) if c.__class__ is str else c for c in cats]
            uniq = list(dict.fromkeys(fixed))
            if len(uniq) < len(fixed):  # two categories became one
                where = {c: i for i, c in enumerate(uniq)}
                remap = np.array([where[c] for c in fixed] + [-1], dtype=np.int32)
                codes = remap[codes]
            cats = uniq
        return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))


def int_col(a: array) -> pd.arrays.IntegerArray:
    """A nullable Int64 array from an ``array('q')`` holding ``INT_NA`` for missing values."""
    v = np.array(a, dtype=np.int64)
    mask = v == INT_NA
    v[mask] = 0
    return pd.arrays.IntegerArray(v, mask)


def float_col(a: array) -> np.ndarray:
    """A float64 array (NaN = missing)."""
    return np.array(a, dtype=np.float64)


def time_col(a: array) -> pd.DatetimeIndex:
    """Tz-aware UTC timestamps (microsecond resolution) from Unix milliseconds (NaN and values
    outside ``MS_LO < ms < MS_HI`` = NaT)."""
    ms = np.array(a, dtype=np.float64)
    us = np.full(ms.shape, np.iinfo(np.int64).min, dtype=np.int64)
    ok = (ms > MS_LO) & (ms < MS_HI)
    us[ok] = np.round(ms[ok] * 1000.0).astype(np.int64)
    return pd.DatetimeIndex(us.view("M8[us]")).tz_localize("UTC")


def obj_col(values: list[Any]) -> np.ndarray:
    """An object array holding the values as they are (tuples and lists are not unpacked)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def obj_series(values: np.ndarray) -> pd.Series:
    """An object-dtype column (pandas would otherwise infer its string dtype from the values)."""
    return pd.Series(values, dtype=object, copy=False)


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(s: str) -> str:
    """``s`` with lone surrogates (JSON ``"\\ud83d"``, undecodable file name bytes) replaced by
    U+FFFD, so that it can be stored as UTF-8 (Arrow strings, Parquet)."""
    return _SURROGATE.sub("\ufffd", s)


def _encodable(values: Any) -> bool:
    try:
        "".join(v for v in values if v.__class__ is str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def str_col(values: Any) -> Any:
    """A string column in pandas' default string dtype (missing = NA); lone surrogates become
    U+FFFD (see :func:`utf8_safe`)."""
    if pd.__version__ < "3":
        values = [utf8_safe(v) if v.__class__ is str else v for v in values] if not _encodable(values) else values
        return pd.array(values, dtype=object)
    try:
        return pd.array(values, dtype="str")
    except UnicodeEncodeError:
        return pd.array([utf8_safe(v) if v.__class__ is str else v for v in values], dtype="str")


def cat_col(values: list[str | None]) -> pd.Categorical:
    """A categorical column of strings (None = missing); lone surrogates become U+FFFD."""
    try:
        return pd.Categorical(values)
    except UnicodeEncodeError:
        return pd.Categorical([utf8_safe(v) if v.__class__ is str else v for v in values])


# --------------------------------------------------------------------------- pricing


def price_tuple(p: dict[str, Any]) -> tuple[float, ...]:
    """``(cached, prompt, thoughts, response)`` USD per token from a registry-shaped pricing dict
    (USD per million tokens; a missing cache price is the prompt price, a missing thoughts price
    the response price)."""
    try:
        prompt = float(p["prompt_tokens"])
        response = float(p["response_tokens"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a price needs prompt_tokens and response_tokens per million tokens, got {p!r}") from exc
    return (
        float(p.get("cached_tokens", prompt)) / 1e6,
        prompt / 1e6,
        float(p.get("thoughts_tokens", response)) / 1e6,
        response / 1e6,
    )


def price_tables() -> tuple[dict[tuple[str, str], tuple[float, ...]], dict[str, tuple[float, ...]]]:
    """Per-token prices from ``mmsp.registry.list_supported_models`` (USD).

    Returns ``(by_model_and_client, by_model)`` mapping to ``(cached, prompt, thoughts, response)``
    prices per token. A model listed by several platforms is priced, when the turn's client type is
    unknown, at its first registry entry (the vendor's official endpoint comes first). A missing
    cache-hit price means the platform publishes no discount: cached tokens cost the prompt price.
    """
    from mmsp.registry import list_supported_models

    by_pair: dict[tuple[str, str], tuple[float, ...]] = {}
    by_model: dict[str, tuple[float, ...]] = {}
    for entry in list_supported_models("USD"):
        p = entry.get("pricing")
        if not p:
            continue
        t = price_tuple(p)
        by_pair.setdefault((entry["model"], entry["client"]), t)
        by_model.setdefault(entry["model"], t)
    return by_pair, by_model


# --------------------------------------------------------------------------- per-file context


def config_fields(config: dict[str, Any]) -> tuple[Any, ...]:
    """(model, temperature, max_tokens, thinking_level, n_tools, tool_names) of a trace's config."""
    tools = config.get("tools")
    if isinstance(tools, list):
        names = tuple(
            t.get("name") if isinstance(t, dict) and isinstance(t.get("name"), str) else str(t) for t in tools
        )
        n_tools: int | None = len(names)
    else:
        names, n_tools = None, None
    level = config.get("thinking_level")
    return (
        as_str(config.get("model")),
        as_num(config.get("temperature")),
        as_int(config.get("max_tokens")),
        str(level) if level is not None and level != "" else None,
        n_tools,
        names,
    )


def split_sidecar(records: list[dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """Sidecar records of one trace: ``({turn: record}, [records of turns that recorded nothing])``.

    A turn recorded twice keeps the last record (the file is append-only). Records without an
    integer ``turn`` are ignored.
    """
    done: dict[int, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    for r in records:
        t = as_int(r.get("turn"))
        if t is None:
            continue
        if r.get("message_index") is None:
            failed.append(r)
        else:
            done[t] = r
    failed.sort(key=lambda r: (as_int(r.get("turn")), as_num(r.get("started_at")) or 0.0))
    return done, failed


def _error_fields(rec: dict[str, Any]) -> tuple[str | None, str | None]:
    err = rec.get("error")
    if isinstance(err, dict):
        t, m = err.get("type"), err.get("message")
        return (str(t) if t is not None else None), (str(m) if m is not None else None)
    if err is None:
        return None, None
    return None, str(err)


# --------------------------------------------------------------------------- filters


class _Window:
    """The ``since`` / ``until`` / ``models`` filter the three builders share: keep a row when
    ``since <= started < until`` (a row without a start time is dropped when a bound is given) and
    its model is one of ``models``."""

    def __init__(self, since_ms: float | None, until_ms: float | None, models: frozenset[str] | None) -> None:
        self.since_ms, self.until_ms, self.models = since_ms, until_ms, models
        self.filtered = since_ms is not None or until_ms is not None or models is not None

    def _keep(self, started: float | None, model: str | None) -> bool:
        if self.since_ms is not None and (started is None or started < self.since_ms):
            return False
        if self.until_ms is not None and (started is None or started >= self.until_ms):
            return False
        return self.models is None or model in self.models


# --------------------------------------------------------------------------- turns


class TurnBuilder(_Window):
    """Collects one row per assistant turn (plus sidecar-only turns).

    The hot path appends raw values to ``array.array`` columns; per-file values (trace id, config
    fields) are stored once per file and expanded by index at the end, and derived columns
    (input/output/total tokens, cost, tokens per second, fallback latency) are computed
    vectorized in :meth:`frame`.
    """

    _COUNTS = ("n_items", "n_text", "n_thinking", "n_tool_calls", "n_images", "n_audio", "text_chars", "thinking_chars")

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
        dedupe: bool = True,
        prices: dict[str, dict[str, float]] | None = None,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.prices = {m: price_tuple(p) for m, p in (prices or {}).items()}
        self.dedupe = dedupe
        # per row: hash of the assistant message's fingerprint (0 = none), see frame()
        self.fp = array("q")
        # per file
        self.f_trace_id: list[str] = []
        self.f_cfg: list[tuple[Any, ...]] = []
        # per row
        self.file_no = array("i")
        self.turn = array("q")
        self.message_index = array("q")
        self.model: list[str | None] = []
        self.client: list[str | None] = []
        self.finish: list[str | None] = []
        self.source = array("b")  # 0 trace, 1 trace+sidecar, 2 sidecar
        self.started = array("d")
        self.ended = array("d")
        self.latency = array("d")
        self.ttft = array("d")
        self.cached = array("q")
        self.prompt = array("q")
        self.thoughts = array("q")
        self.response = array("q")
        self.counts = tuple(array("q") for _ in self._COUNTS)
        # sparse: row -> value, for the few sidecar-only rows
        self.status: dict[int, str] = {}
        self.errors: dict[int, tuple[str | None, str | None]] = {}

    def _usage(self, usage: Any) -> None:
        if usage.__class__ is dict:
            for arr, key in (
                (self.cached, "cached_tokens"),
                (self.prompt, "prompt_tokens"),
                (self.thoughts, "thoughts_tokens"),
                (self.response, "response_tokens"),
            ):
                arr.append(int_or_na(usage.get(key)))
        else:
            for arr in (self.cached, self.prompt, self.thoughts, self.response):
                arr.append(INT_NA)

    def _sidecar_row(self, fno: int, cfg_model: str | None, rec: dict[str, Any]) -> None:
        started = as_ms(rec.get("started_at"))
        model = as_str(rec.get("model")) or cfg_model
        latency, ttft = sidecar_timing(rec)
        row = len(self.file_no)
        status = rec.get("status")
        self.status[row] = status if isinstance(status, str) and status else "unknown"
        err = _error_fields(rec)
        if err != (None, None):
            self.errors[row] = err
        self.file_no.append(fno)
        self.turn.append(as_int(rec.get("turn")) or 0)
        mi = as_int(rec.get("message_index"))
        self.message_index.append(INT_NA if mi is None else mi)
        self.model.append(model)
        self.client.append(as_str(rec.get("client_type")))
        self.finish.append(as_str(rec.get("finish_reason")))
        self.source.append(2)
        self.started.append(_NAN if started is None else started)
        self.ended.append(_NAN if started is None else started + latency * 1000.0)
        self.latency.append(latency)
        self.ttft.append(ttft)
        self._usage(rec.get("usage"))
        for arr in self.counts:
            arr.append(INT_NA)
        self.fp.append(0)

    def add(self, trace_id: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        """Add the turns of one trace (``data`` None: sidecar only) joined with its sidecar records."""
        history = data["history"] if data is not None else []
        config = data["config"] if data is not None else {}
        cfg = config_fields(config)
        cfg_model = cfg[0]
        fno = len(self.f_trace_id)
        self.f_trace_id.append(trace_id)
        self.f_cfg.append(cfg)
        done, failed = split_sidecar(records) if records else ({}, [])
        fi, nf = 0, len(failed)
        # bound appends: this loop runs once per turn of the whole corpus
        a_file, a_turn, a_mi = self.file_no.append, self.turn.append, self.message_index.append
        a_model, a_client, a_finish, a_source = self.model.append, self.client.append, self.finish.append, self.source.append
        a_start, a_end, a_lat, a_ttft = self.started.append, self.ended.append, self.latency.append, self.ttft.append
        a_ca, a_pr, a_th, a_re = self.cached.append, self.prompt.append, self.thoughts.append, self.response.append
        c_items, c_text, c_think, c_tool, c_img, c_aud, c_tch, c_kch = (a.append for a in self.counts)
        TEXT, THINKING, TOOL_CALL, INLINE = _TEXT, _THINKING, _TOOL_CALL, _INLINE
        a_fp = self.fp.append
        lo, hi, ms_lo, ms_hi, dur_hi = INT_LO, INT_HI, MS_LO, MS_HI, _DUR_HI
        turn = 0
        prev: Any = None
        for i, msg in enumerate(history):
            if msg.get("role") != "assistant":
                prev = msg
                continue
            while fi < nf and as_int(failed[fi].get("turn")) <= turn:  # type: ignore[operator]
                self._sidecar_row(fno, cfg_model, failed[fi])
                fi += 1
            rec = done.pop(turn, None) if done else None
            if rec is None:
                started = None
                if prev is not None and prev.get("role") == "user":
                    started = prev.get("created_at")
                    if started.__class__ is not int or not ms_lo < started < ms_hi:
                        started = as_ms(started)
                model = cfg_model
            else:
                started = as_ms(rec.get("started_at"))
                if started is None and prev is not None and prev.get("role") == "user":
                    started = as_ms(prev.get("created_at"))
                model = as_str(rec.get("model")) or cfg_model
            prev = msg
            # content counts
            items = msg.get("content_items")
            n_items = n_text = n_think = n_tool = n_img = n_aud = text_chars = think_chars = 0
            if items.__class__ is list:
                n_items = len(items)
                for it in items:
                    if it.__class__ is not dict:
                        continue
                    t = it.get("type")
                    if t in TEXT:
                        n_text += 1
                        s = it.get("text")
                        if s.__class__ is str:
                            text_chars += len(s)
                    elif t in THINKING:
                        n_think += 1
                        s = it.get("thinking")
                        if s.__class__ is str:
                            think_chars += len(s)
                    elif t in TOOL_CALL:
                        n_tool += 1
                    elif t in INLINE:
                        mt = it.get("mime_type")
                        if mt.__class__ is str:
                            if mt.startswith("image/"):
                                n_img += 1
                            elif mt.startswith("audio/"):
                                n_aud += 1
            ended = msg.get("created_at")
            if ended.__class__ is not int or not ms_lo < ended < ms_hi:
                ended = as_ms(ended)
            finish = msg.get("finish_reason")
            if finish is not None and finish.__class__ is not str:
                finish = str(finish)
            a_file(fno)
            a_turn(turn)
            a_mi(i)
            a_model(model)
            a_finish(finish or None)
            a_start(_NAN if started is None else started)
            a_end(_NAN if ended is None else ended)
            if rec is None:
                a_client(None)
                a_source(0)
                a_lat(_NAN)
                a_ttft(_NAN)
            else:
                a_client(as_str(rec.get("client_type")))
                a_source(1)
                # sidecar_timing(rec), inlined: negative / non-finite durations and ttft > total are NA
                lat_s = rec.get("total_ms")
                c = lat_s.__class__
                lat_s = lat_s / 1000.0 if (c is float or c is int) and 0 <= lat_s < dur_hi else _NAN
                ttft_s = rec.get("ttft_ms")
                c = ttft_s.__class__
                ttft_s = ttft_s / 1000.0 if (c is float or c is int) and 0 <= ttft_s < dur_hi else _NAN
                a_lat(lat_s)
                a_ttft(_NAN if ttft_s > lat_s else ttft_s)
            usage = msg.get("usage_metadata")
            if usage.__class__ is dict:
                u0 = usage.get("cached_tokens")
                if u0.__class__ is not int or not lo < u0 < hi:
                    u0 = INT_NA if (u0 := as_int(u0)) is None else u0
                u1 = usage.get("prompt_tokens")
                if u1.__class__ is not int or not lo < u1 < hi:
                    u1 = INT_NA if (u1 := as_int(u1)) is None else u1
                u2 = usage.get("thoughts_tokens")
                if u2.__class__ is not int or not lo < u2 < hi:
                    u2 = INT_NA if (u2 := as_int(u2)) is None else u2
                u3 = usage.get("response_tokens")
                if u3.__class__ is not int or not lo < u3 < hi:
                    u3 = INT_NA if (u3 := as_int(u3)) is None else u3
            else:
                u0 = u1 = u2 = u3 = INT_NA
            a_ca(u0)
            a_pr(u1)
            a_th(u2)
            a_re(u3)
            c_items(n_items)
            c_text(n_text)
            c_think(n_think)
            c_tool(n_tool)
            c_img(n_img)
            c_aud(n_aud)
            c_tch(text_chars)
            c_kch(think_chars)
            a_fp(0 if ended is None else hash((ended, finish, n_items, text_chars, think_chars, n_tool, u0, u1, u2, u3)))
            turn += 1
        while fi < nf:
            self._sidecar_row(fno, cfg_model, failed[fi])
            fi += 1
        # turns the sidecar saw complete but the trace file does not (yet) hold
        for t in sorted(done):
            self._sidecar_row(fno, cfg_model, done[t])

    # the frame -------------------------------------------------------------------------------
    def _take(self, name: str) -> Any:
        """Hand over a built column's raw container and drop the builder's reference to it, so
        that raw and converted copies of every column never coexist (peak memory)."""
        value = getattr(self, name)
        setattr(self, name, None)
        return value

    def frame(self) -> pd.DataFrame:
        """Build the turns DataFrame (columns in documented order), deriving computed columns.

        The builder is consumed: each raw column is released as soon as it is converted.
        """
        n = len(self.file_no)
        # de-duplicate first, then filter: a filter must not change which copy of a turn is kept
        drop = _duplicates(np.array(self._take("fp"), dtype=np.int64), np.array(self.source, dtype=np.int8)) if self.dedupe else None
        fno = np.array(self._take("file_no"), dtype=np.int64)
        f_cfg = self._take("f_cfg")

        def per_file(k: int) -> np.ndarray:
            return obj_col([c[k] for c in f_cfg])[fno] if n else np.empty(0, dtype=object)

        cols: dict[str, Any] = {}
        tids = obj_col(self._take("f_trace_id"))[fno] if n else np.empty(0, dtype=object)
        cols["trace_id"] = str_col(tids)
        del tids
        cols["turn"] = int_col(self._take("turn"))
        cols["message_index"] = int_col(self._take("message_index"))
        model = cols["model"] = cat_col(self._take("model"))
        client = cols["client_type"] = cat_col(self._take("client"))
        status = np.full(n, "complete", dtype=object)
        for row, s in self._take("status").items():
            status[row] = s
        cols["status"] = cat_col(status)
        del status
        src_codes = np.array(self._take("source"), dtype=np.int8)
        cols["source"] = pd.Categorical.from_codes(src_codes, categories=["trace", "trace+sidecar", "sidecar"])
        started = float_col(self._take("started"))
        ended = float_col(self._take("ended"))
        latency = float_col(self._take("latency"))
        fallback = np.isnan(latency)
        latency[fallback] = (ended[fallback] - started[fallback]) / 1000.0  # NaN when either is NA
        latency[latency < 0] = np.nan  # an answer stamped before its question
        del fallback
        keep = self._window_mask(started, model)
        cols["started"] = time_col(started)
        cols["ended"] = time_col(ended)
        del started, ended
        ttft = float_col(self._take("ttft"))
        cols["latency"] = latency
        cols["ttft"] = ttft
        cols["tokens_per_s"] = None  # placed here, computed below from output_tokens
        cols["finish_reason"] = cat_col(self._take("finish"))
        ca = cols["cached_tokens"] = int_col(self._take("cached"))
        pr = cols["prompt_tokens"] = int_col(self._take("prompt"))
        th = cols["thoughts_tokens"] = int_col(self._take("thoughts"))
        re_ = cols["response_tokens"] = int_col(self._take("response"))
        inp = cols["input_tokens"] = _nasum(ca, pr)
        out = cols["output_tokens"] = _nasum(th, re_)
        tot = cols["total_tokens"] = _nasum(inp, out)
        with np.errstate(invalid="ignore", divide="ignore"):
            window = latency - ttft
            outf = out.to_numpy(dtype=np.float64, na_value=np.nan)
            cols["tokens_per_s"] = np.where(window > 0, outf / window, np.nan)
        del window, outf
        counts = self._take("counts")
        for name, i in zip(self._COUNTS, range(len(counts))):
            cols[name] = int_col(counts[i])
        del counts
        prices = _row_prices(model, client, self.prices)
        cost = np.zeros(n, dtype=np.float64)
        for bucket, price in zip((ca, pr, th, re_), prices):
            cost += bucket.to_numpy(dtype=np.float64, na_value=0.0) * price
        missing_price = np.isnan(prices[1])
        del prices
        cost[np.asarray(tot.isna()) | missing_price] = np.nan
        cols["cost"] = cost
        cols["cost_missing"] = missing_price
        cols["temperature"] = pd.to_numeric(per_file(1), errors="coerce").astype(np.float64) if n else np.empty(0)
        cols["max_tokens"] = pd.array(per_file(2), dtype="Int64")
        cols["thinking_level"] = str_col(per_file(3))
        cols["n_tools"] = pd.array(per_file(4), dtype="Int64")
        cols["tool_names"] = obj_series(per_file(5))
        err_t = np.full(n, None, dtype=object)
        err_m = np.full(n, None, dtype=object)
        for row, (et, em) in self._take("errors").items():
            err_t[row], err_m[row] = et, em
        cols["error_type"] = str_col(err_t)
        cols["error_message"] = str_col(err_m)
        df = pd.DataFrame(cols, copy=False)
        n_dup = 0
        if drop is not None:
            n_dup = int(drop.sum())  # copies left out, counted before any filter
            if n_dup or keep is not None:
                keep = ~drop if keep is None else keep & ~drop
        if keep is not None and not keep.all():
            df = df.loc[keep].reset_index(drop=True)
        df.attrs["duplicates"] = n_dup
        return df

    def _window_mask(self, started: np.ndarray, model: pd.Categorical) -> np.ndarray | None:
        """Rows inside ``since`` / ``until`` / ``models`` (None when no filter is given)."""
        if not self.filtered:
            return None
        keep = np.ones(len(started), dtype=bool)
        if self.since_ms is not None:
            keep &= started >= self.since_ms  # NaN compares False: no start time, dropped
        if self.until_ms is not None:
            keep &= started < self.until_ms
        if self.models is not None:
            wanted = [i for i, m in enumerate(model.categories) if m in self.models]
            keep &= np.isin(np.asarray(model.codes), wanted)
        return keep


def _duplicates(fp: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Rows repeating an earlier row's assistant message (same fingerprint hash; 0 = none).

    Of each group of copies the one joined with a sidecar record (source 1) is kept, else the
    first; the others are marked True.
    """
    drop = np.zeros(len(fp), dtype=bool)
    rows = np.nonzero(fp)[0]
    if len(rows) < 2:
        return drop
    order = rows[np.lexsort((rows, source[rows] != 1, fp[rows]))]
    keys = fp[order]
    repeat = np.empty(len(order), dtype=bool)
    repeat[0] = False
    repeat[1:] = keys[1:] == keys[:-1]
    drop[order[repeat]] = True
    return drop


def _nasum(a: pd.arrays.IntegerArray, b: pd.arrays.IntegerArray) -> pd.arrays.IntegerArray:
    """a + b where NA counts as 0, NA only when both are NA."""
    va = a.to_numpy(dtype=np.int64, na_value=0)
    vb = b.to_numpy(dtype=np.int64, na_value=0)
    mask = np.asarray(a.isna()) & np.asarray(b.isna())
    return pd.arrays.IntegerArray(va + vb, mask)


def _row_prices(
    model: pd.Categorical, client: pd.Categorical, extra: dict[str, tuple[float, ...]] | None = None
) -> list[np.ndarray]:
    """Per-row (cached, prompt, thoughts, response) USD per token; NaN where the model has no price."""
    by_pair, by_model = price_tables()
    extra = extra or {}
    mc = np.asarray(model.codes, dtype=np.int64)
    cc = np.asarray(client.codes, dtype=np.int64)
    width = len(client.categories) + 1
    key = (mc + 1) * width + (cc + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    table = np.full((len(uniq), 4), np.nan)
    for j, k in enumerate(uniq.tolist()):
        m, c = divmod(k, width)
        if m == 0:  # no model
            continue
        mname = model.categories[m - 1]
        cname = client.categories[c - 1] if c > 0 else None
        p = extra.get(mname)
        if p is None and cname is not None:
            p = by_pair.get((mname, cname))
        if p is None:
            p = by_model.get(mname)
        if p is not None:
            table[j] = p
    rows = table[inv.reshape(-1)] if len(key) else np.empty((0, 4))
    return [rows[:, j].copy() for j in range(4)]


# --------------------------------------------------------------------------- items


def turn_context(
    history: list[dict[str, Any]],
    cfg_model: str | None,
    done: dict[int, dict[str, Any]],
) -> tuple[list[int], list[float | None], list[str | None]]:
    """Per message: its turn index; per turn: its start (Unix ms) and model.

    A user message belongs to the turn it feeds (the number of assistant messages before it).
    """
    turn_of: list[int] = []
    starts: list[float | None] = []
    models: list[str | None] = []
    turn = 0
    prev: Any = None
    for msg in history:
        turn_of.append(turn)
        if msg.get("role") == "assistant":
            rec = done.get(turn)
            started = as_ms(rec.get("started_at")) if rec else None
            if started is None and prev is not None and prev.get("role") == "user":
                started = as_ms(prev.get("created_at"))
            starts.append(started)
            models.append((as_str(rec.get("model")) if rec else None) or cfg_model)
            turn += 1
        prev = msg
    return turn_of, starts, models


class ItemBuilder(_Window):
    """Collects one row per content item of every message (user and assistant)."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
        payloads: bool = False,
        dedupe: bool = True,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.payloads = payloads
        self.seen: set[int] | None = set() if dedupe else None
        self.duplicates = 0
        self.trace_id: list[str] = []
        self.strs: dict[str, list[str | None]] = {
            k: []
            for k in ("text", "thinking", "arguments", "name", "tool_call_id", "mime_type", "image_url", "extra")
        }
        self.ints = {k: array("q") for k in ("message_index", "turn", "item_index", "size", "embedding_dims", "n_images")}
        self.created = array("d")
        self.has_fidelity = bytearray()
        self.cats = {k: Cat() for k in ("role", "type", "model")}
        self.data: list[Any] = []
        self.embedding: list[Any] = []
        self.images: list[Any] = []
        self.fidelity: list[str | None] = []

    def add(self, trace_id: str, data: dict[str, Any], records: list[dict[str, Any]] | None) -> None:
        """Add every content item of one trace."""
        history = data["history"]
        cfg_model = as_str(data["config"].get("model"))
        done = split_sidecar(records)[0] if records else {}
        turn_of, starts, models = turn_context(history, cfg_model, done)
        n_turns = len(starts)
        filtered, payloads = self.filtered, self.payloads
        I, S, C = self.ints, self.strs, self.cats
        for mi, msg in enumerate(history):
            t = turn_of[mi]
            created = as_ms(msg.get("created_at"))
            if t < n_turns:
                anchor, model = starts[t], models[t]
            else:  # trailing user message with no answer (yet)
                anchor, model = created, cfg_model
            items = msg.get("content_items")
            if items.__class__ is not list:
                continue
            role = msg.get("role")
            role = role if role.__class__ is str else None
            # de-duplicate first, then filter: a filter must not change which copy is kept
            if self.seen is not None and created is not None:
                fp = _message_fingerprint(role, created, msg, items)
                if fp is not None:
                    if fp in self.seen:
                        self.duplicates += 1
                        continue
                    self.seen.add(fp)
            if filtered and not self._keep(anchor, model):
                continue
            for ii, it in enumerate(items):
                if it.__class__ is not dict:
                    it = {"type": None, "value": it}
                typ = it.get("type")
                text = it.get("text")
                thinking = it.get("thinking")
                args = it.get("arguments")
                data_ = it.get("data")
                emb = it.get("embedding")
                img = it.get("image_url")
                images = it.get("images")
                mime = it.get("mime_type")
                size: int | None = None
                dims: int | None = None
                n_images: int | None = None
                if text.__class__ is str:
                    size = len(text)
                elif thinking.__class__ is str:
                    size = len(thinking)
                if args is not None:
                    args = dumps(args)
                    if size is None:
                        size = len(args)
                if data_ is not None:
                    size = payload_size(data_)
                if emb.__class__ is list:
                    dims = len(emb)
                    if size is None:
                        size = dims
                if images.__class__ is list:
                    n_images = len(images)
                if img.__class__ is str and img.startswith("data:"):
                    m, sz = _data_url_info(img)
                    if mime is None:
                        mime = m
                    if size is None:
                        size = sz
                    if not payloads:
                        img = None
                extra = {k: v for k, v in it.items() if k not in _ITEM_FIELDS}
                self.trace_id.append(trace_id)
                I["message_index"].append(mi)
                I["turn"].append(t)
                I["item_index"].append(ii)
                I["size"].append(INT_NA if size is None else size)
                I["embedding_dims"].append(INT_NA if dims is None else dims)
                I["n_images"].append(INT_NA if n_images is None else n_images)
                C["role"].append(role)
                C["type"].append(typ if typ.__class__ is str else (None if typ is None else str(typ)))
                C["model"].append(model)
                self.created.append(_NAN if created is None else created)
                self.has_fidelity.append("fidelity" in it)
                S["text"].append(text if text.__class__ is str else None)
                S["thinking"].append(thinking if thinking.__class__ is str else None)
                S["arguments"].append(args)
                nm = it.get("name")
                S["name"].append(nm if nm.__class__ is str else None)
                tc = it.get("tool_call_id")
                S["tool_call_id"].append(tc if tc.__class__ is str else None)
                S["mime_type"].append(mime if mime.__class__ is str else None)
                S["image_url"].append(img if img.__class__ is str else None)
                S["extra"].append(dumps(extra) if extra else None)
                if payloads:
                    self.data.append(data_)
                    self.embedding.append(emb)
                    self.images.append(images)
                    self.fidelity.append(dumps(it["fidelity"]) if "fidelity" in it else None)

    def frame(self) -> pd.DataFrame:
        """Build the items DataFrame."""
        I, S, C = self.ints, self.strs, self.cats
        cols: dict[str, Any] = {
            "trace_id": str_col(self.trace_id),
            "message_index": int_col(I["message_index"]),
            "turn": int_col(I["turn"]),
            "role": C["role"].build(),
            "item_index": int_col(I["item_index"]),
            "type": C["type"].build(),
            "model": C["model"].build(),
            "created_at": time_col(self.created),
            "text": str_col(S["text"]),
            "thinking": str_col(S["thinking"]),
            "arguments": str_col(S["arguments"]),
            "name": str_col(S["name"]),
            "tool_call_id": str_col(S["tool_call_id"]),
            "mime_type": str_col(S["mime_type"]),
            "size": int_col(I["size"]),
            "embedding_dims": int_col(I["embedding_dims"]),
            "n_images": int_col(I["n_images"]),
            "image_url": str_col(S["image_url"]),
            "has_fidelity": np.frombuffer(bytes(self.has_fidelity), dtype=np.bool_).copy(),
            "extra": str_col(S["extra"]),
        }
        if self.payloads:
            cols["data"] = obj_series(obj_col(self.data))
            cols["embedding"] = obj_series(obj_col(self.embedding))
            cols["images"] = obj_series(obj_col(self.images))
            cols["fidelity"] = str_col(self.fidelity)
        df = pd.DataFrame(cols, copy=False)
        df.attrs["duplicates"] = self.duplicates
        return df


def _slen(v: Any) -> int | None:
    return len(v) if v.__class__ is str else None


def _message_fingerprint(role: str | None, created: float, msg: dict[str, Any], items: list[Any]) -> int | None:
    """A hash identifying one message across trace files that repeat a conversation's history."""
    usage = msg.get("usage_metadata")
    try:
        return hash(
            (
                role,
                created,
                msg.get("finish_reason"),
                tuple(usage.values()) if usage.__class__ is dict else None,
                tuple(
                    (it.get("type"), _slen(it.get("text")), _slen(it.get("thinking")), _slen(it.get("data")),
                     it.get("tool_call_id"))
                    if it.__class__ is dict
                    else repr(it)
                    for it in items
                ),
            )
        )
    except TypeError:  # an unhashable value in a foreign file: no de-duplication for it
        return None


# --------------------------------------------------------------------------- events


class EventBuilder(_Window):
    """Collects one row per streamed event recorded in the timing sidecars."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.trace_id: list[str] = []
        self.ints = {k: array("q") for k in ("turn", "message_index", "event_index", "size")}
        self.floats = {k: array("d") for k in ("t", "at", "started")}
        self.cats = {k: Cat() for k in ("model", "client_type", "status", "type", "kind", "phase")}

    def add(self, trace_id: str, records: list[dict[str, Any]]) -> None:
        """Add the events of one trace's sidecar records."""
        filtered = self.filtered
        I, F, C = self.ints, self.floats, self.cats
        for rec in records:
            events = rec.get("events")
            if events.__class__ is not list:
                continue
            started = as_ms(rec.get("started_at"))
            model = as_str(rec.get("model"))
            if filtered and not self._keep(started, model):
                continue
            turn = as_int(rec.get("turn"))
            mi = as_int(rec.get("message_index"))
            client = as_str(rec.get("client_type"))
            status = as_str(rec.get("status"))
            cm, cc, cs = C["model"].code(model), C["client_type"].code(client), C["status"].code(status)
            for ei, ev in enumerate(events):
                if ev.__class__ is not list or len(ev) < 2:
                    continue
                ms = as_dur(ev[0])
                typ = ev[1] if ev[1].__class__ is str else str(ev[1])
                size = as_int(ev[2]) if len(ev) > 2 else None
                kind, _, phase = typ.partition(".")
                if not phase:
                    phase = "stop" if typ == "stop" else None
                self.trace_id.append(trace_id)
                I["turn"].append(INT_NA if turn is None else turn)
                I["message_index"].append(INT_NA if mi is None else mi)
                I["event_index"].append(ei)
                I["size"].append(INT_NA if size is None else size)
                F["t"].append(_NAN if ms is None else ms / 1000.0)
                F["at"].append(_NAN if ms is None or started is None else started + ms)
                F["started"].append(_NAN if started is None else started)
                C["model"].codes.append(cm)
                C["client_type"].codes.append(cc)
                C["status"].codes.append(cs)
                C["type"].append(typ)
                C["kind"].append(kind)
                C["phase"].append(phase)

    def frame(self) -> pd.DataFrame:
        """Build the events DataFrame."""
        I, F, C = self.ints, self.floats, self.cats
        return pd.DataFrame(
            {
                "trace_id": str_col(self.trace_id),
                "turn": int_col(I["turn"]),
                "message_index": int_col(I["message_index"]),
                "model": C["model"].build(),
                "client_type": C["client_type"].build(),
                "status": C["status"].build(),
                "started": time_col(F["started"]),
                "event_index": int_col(I["event_index"]),
                "t": float_col(F["t"]),
                "at": time_col(F["at"]),
                "type": C["type"].build(),
                "kind": C["kind"].build(),
                "phase": C["phase"].build(),
                "size": int_col(I["size"]),
            },
            copy=False,
        )
