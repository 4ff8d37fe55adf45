"""The turns frame of :mod:`mmsp_notebook.traces` (``load_turns``): one row per assistant message,
joined with its sidecar record, plus one row per sidecar record of a turn that recorded nothing.

The cost column uses :class:`~mmsp_notebook.core.pricing.PriceTable`, the prices and fallback rule
of ``Turn.cost``: a turn streamed here and the row loaded from its trace cost the same.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pandas as pd

from ..core.pricing import LIST_PRICES, Prices, PriceTable
from ._build import INLINE as _INLINE
from ._build import TEXT as _TEXT
from ._build import THINKING as _THINKING
from ._build import TOOL_CALL as _TOOL_CALL
from ._build import Window, config_fields, error_fields, split_sidecar
from ._columns import (
    _DUR_HI,
    _NAN,
    INT_HI,
    INT_LO,
    INT_NA,
    MS_HI,
    MS_LO,
    as_int,
    as_ms,
    as_str,
    cat_col,
    float_col,
    int_col,
    int_or_na,
    obj_col,
    obj_series,
    sidecar_timing,
    str_col,
    time_col,
)


class TurnBuilder(Window):
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
        prices: Prices | None = None,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.prices = PriceTable(prices) if prices else LIST_PRICES  # a bad price fails here, before any file
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
        err = error_fields(rec)
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
                lat_s: Any = rec.get("total_ms")
                c = lat_s.__class__
                lat_s = lat_s / 1000.0 if (c is float or c is int) and 0 <= lat_s < dur_hi else _NAN
                ttft_s: Any = rec.get("ttft_ms")
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


def _row_prices(model: pd.Categorical, client: pd.Categorical, table: PriceTable) -> list[np.ndarray]:
    """Per-row (cached, prompt, thoughts, response) USD per token; NaN where the model has no price.

    One :meth:`PriceTable.lookup` per distinct (model, client type) pair: the prices ``Turn.cost``
    uses, with the same fallback rule.
    """
    mc = np.asarray(model.codes, dtype=np.int64)
    cc = np.asarray(client.codes, dtype=np.int64)
    width = len(client.categories) + 1
    key = (mc + 1) * width + (cc + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    prices = np.full((len(uniq), 4), np.nan)
    for j, k in enumerate(uniq.tolist()):
        m, c = divmod(k, width)
        if m == 0:  # no model
            continue
        found = table.lookup(model.categories[m - 1], client.categories[c - 1] if c > 0 else None)
        if found is not None:
            prices[j] = found
    rows = prices[inv.reshape(-1)] if len(key) else np.empty((0, 4))
    return [rows[:, j].copy() for j in range(4)]
