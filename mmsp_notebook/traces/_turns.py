"""The turns frame of :mod:`mmsp_notebook.traces` (``load_turns``): one row per assistant message,
joined with its sidecar record, plus one row per sidecar record the trace file does not hold (an
attempt that did not complete, or a completed turn beyond the file's messages), as ``show`` draws
them (:func:`~._build.split_sidecar` says which is which).

The cost column uses :class:`~mmsp_notebook.core.pricing.PriceTable`, the prices and fallback rule
of ``Turn.cost``: a turn streamed here and the row loaded from its trace cost the same.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..core.fields import record_status
from ..core.pricing import LIST_PRICES, Prices, PriceTable
from ..core.stamps import SECONDS_BELOW, created_ms
from ._build import Window, config_fields, error_fields, other_message, split_sidecar
from ._columns import (
    _DUR_HI,
    _NAN,
    INT_NA,
    MS_HI,
    MS_LO,
    as_int,
    as_ms,
    as_str,
    cat_col,
    count_or_na,
    float_col,
    int_col,
    keep_rows,
    obj_col,
    obj_series,
    sidecar_timing,
    str_col,
    time_col,
)
from ._fast import Decoded, Summary, safe_names, summarize

#: the categories of the ``source`` column, in their order (codes 0, 1, 2)
SOURCES = ("trace", "trace+sidecar", "sidecar")
#: integer values of a row, in this order, in one flat ``array('q')``: the file, the turn, the
#: message index, the source (0 trace, 1 trace+sidecar, 2 sidecar), the four usage buckets, the
#: eight content counts and the tool errors, the fingerprint of the assistant message (0 = none)
_INTS = ("file_no", "turn", "message_index", "source", "cached_tokens", "prompt_tokens", "thoughts_tokens",
         "response_tokens", "n_items", "n_text", "n_thinking", "n_tool_calls", "n_images", "n_audio", "text_chars",
         "thinking_chars", "n_tool_errors", "fp")
_I = {name: k for k, name in enumerate(_INTS)}
_N_INTS = len(_INTS)
#: float values of a row, in one flat ``array('d')`` (Unix ms, ms, s, s; NaN = missing)
_FLOATS = ("started", "ended", "latency", "ttft")
_N_FLOATS = len(_FLOATS)
_NO_COUNTS = (INT_NA,) * 9
_NO_DONE: dict[int, dict[str, Any]] = {}  # never changed: add() pops from it only when it is not empty
_NO_FAILED: list[dict[str, Any]] = []


class TurnBuilder(Window):
    """Collects one row per assistant turn (plus sidecar-only turns).

    :meth:`add` takes a trace as :func:`~mmsp_notebook.core.store.read_trace` returns it, or as
    :func:`~mmsp_notebook.traces._fast.decode_trace` decodes it (the fields this frame needs,
    nothing else). Each row's integers go to one flat ``array('q')`` and its floats to one
    ``array('d')`` (one ``extend`` each per row); per-file values (trace id, config fields) are
    stored once per file, converted once per file and expanded by index at the end; what only a
    sidecar record gives a row (its model when the record names one, client type, comparison)
    is kept for those rows only (their numbers and the values in step); derived columns (input/output/total tokens, cost, tokens per second,
    fallback latency) are computed vectorized in :meth:`frame`.
    """

    _COUNTS = ("n_items", "n_text", "n_thinking", "n_tool_calls", "n_images", "n_audio", "text_chars", "thinking_chars",
               "n_tool_errors")

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
        dedupe: bool = True,
        prices: Prices | PriceTable | None = None,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        # a bad price fails here, before any file; a table is taken as it is (a sync's snapshot)
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices) if prices else LIST_PRICES
        self.dedupe = dedupe
        # per file
        self.f_trace_id: list[str] = []
        self.f_cfg: list[tuple[Any, ...]] = []
        # per row
        self.ints = array("q")
        self.floats = array("d")
        self.finish: list[str | None] = []
        # sparse: for the rows joined with a sidecar record, their numbers and, in step, the model,
        # client type and comparison it gives (a row without a record has its file's model and
        # neither of the others: 32 bytes a joined row, nothing for the others); row -> value for
        # the few sidecar-only rows (status, error)
        self.rec_rows = array("q")
        self.model: list[str | None] = []
        self.client: list[str | None] = []
        self.comparison: list[str | None] = []
        self.status: dict[int, str] = {}
        self.errors: dict[int, tuple[str | None, str | None]] = {}

    def _sidecar_row(self, fno: int, cfg_model: str | None, rec: dict[str, Any]) -> None:
        started = as_ms(rec.get("started_at"))
        latency, ttft = sidecar_timing(rec)
        row = len(self.finish)
        self.rec_rows.append(row)
        self.model.append(as_str(rec.get("model")) or cfg_model)
        self.client.append(as_str(rec.get("client_type")))
        self.comparison.append(as_str(rec.get("comparison")))
        status = record_status(rec)
        self.status[row] = status
        err = error_fields(rec)
        if err != (None, None):
            self.errors[row] = err
        usage = rec.get("usage")
        if usage.__class__ is dict:
            buckets = tuple(count_or_na(usage.get(k)) for k in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"))
        else:
            buckets = (INT_NA,) * 4
        # an attempt that did not complete recorded no message, whatever message_index it names
        mi = as_int(rec.get("message_index")) if status == "complete" else None
        self.ints.extend((fno, as_int(rec.get("turn")) or 0, INT_NA if mi is None else mi, 2, *buckets, *_NO_COUNTS, 0))
        self.floats.extend((_NAN if started is None else started, _NAN if started is None else started + latency * 1000.0,
                            latency, ttft))
        self.finish.append(as_str(rec.get("finish_reason")))

    def add(self, trace_id: str, data: dict[str, Any] | Decoded | None, records: list[dict[str, Any]] | None) -> None:
        """Add the turns of one trace (``data`` None: sidecar only) joined with its sidecar records."""
        messages: list[Summary]
        if data.__class__ is Decoded:
            messages, cfg = data.messages, data.cfg
        else:
            if data is None:
                messages, cfg = [], config_fields({})
            else:
                messages, cfg = summarize(data["history"]), config_fields(data["config"])  # type: ignore[index]
            if cfg[5]:  # lone surrogates in a tool name: U+FFFD, so Arrow can store it
                cfg = (*cfg[:5], safe_names(cfg[5]))
        cfg_model = cfg[0]
        fno = len(self.f_trace_id)
        self.f_trace_id.append(trace_id)
        self.f_cfg.append(cfg)
        if records:
            done, failed = split_sidecar(records)
            fi, nf = 0, len(failed)
        else:
            done, failed, fi, nf = _NO_DONE, _NO_FAILED, 0, 0
        # bound methods and constants: this loop runs once per message of the whole corpus
        ints, floats, a_finish = self.ints.extend, self.floats.extend, self.finish.append
        r_row, r_model, r_client = self.rec_rows.append, self.model.append, self.client.append
        r_comparison = self.comparison.append
        # created_at: an int of ms is the common case, checked inline; any other goes through created_ms
        created_lo, ms_lo, ms_hi, dur_hi = SECONDS_BELOW, MS_LO, MS_HI, _DUR_HI
        lat_s: Any
        ttft_s: Any
        started: Any
        row = len(self.finish)
        for turn, m in enumerate(messages):
            if fi < nf:
                while fi < nf and as_int(failed[fi].get("turn")) <= turn:  # type: ignore[operator]
                    self._sidecar_row(fno, cfg_model, failed[fi])
                    fi += 1
                row = len(self.finish)
            ended = m[2]
            if ended.__class__ is not int or not created_lo <= ended < ms_hi:
                ended = created_ms(ended)
            finish = m[3]
            rec = done.pop(turn, None) if done else None
            # a record of another message (other_message(), its usual case inlined: a completed
            # record's message_index is an int, or a whole float equal to it): no timing, as show
            if rec is not None and rec.get("message_index") != m[0] and other_message(rec, m[0]):
                rec = None
            if rec is None:
                # started: the user message's created_at just before, if any; the file's model
                started = m[1]
                if started.__class__ is not int or not created_lo <= started < ms_hi:
                    started = created_ms(started)
                source = 0
                lat_s = ttft_s = _NAN
            else:
                started = rec.get("started_at")
                c = started.__class__
                if not ((c is float or c is int) and ms_lo < started < ms_hi):  # as_ms(), inlined
                    started = created_ms(m[1])
                # as_str(), inlined: a non-empty string or None (the file's model)
                r_row(row)
                r_model(v if (v := rec.get("model")).__class__ is str and v else cfg_model)
                r_client(v if (v := rec.get("client_type")).__class__ is str and v else None)
                r_comparison(v if (v := rec.get("comparison")).__class__ is str and v else None)
                source = 1
                # sidecar_timing(rec), inlined: negative / non-finite durations and ttft > total are NA
                lat_s = rec.get("total_ms")
                c = lat_s.__class__
                lat_s = lat_s / 1000.0 if (c is float or c is int) and 0 <= lat_s < dur_hi else _NAN
                ttft_s = rec.get("ttft_ms")
                c = ttft_s.__class__
                ttft_s = ttft_s / 1000.0 if (c is float or c is int) and 0 <= ttft_s < dur_hi else _NAN
                if ttft_s > lat_s:
                    ttft_s = _NAN
            a_finish(finish)
            # the assistant message's fingerprint: ended, finish, n_items, characters, tool calls, usage
            fp = 0 if ended is None else hash((ended, finish, m[8], m[14], m[15], m[11], m[4], m[5], m[6], m[7]))
            ints((fno, turn, m[0], source, *m[4:17], fp))
            floats((_NAN if started is None else started, _NAN if ended is None else ended, lat_s, ttft_s))
            row += 1
        # turns the sidecar saw complete but the trace file does not (yet) hold, in turn order with
        # the attempts that failed after the file's last message
        if done:
            for t in sorted(done):
                while fi < nf and as_int(failed[fi].get("turn")) <= t:  # type: ignore[operator]
                    self._sidecar_row(fno, cfg_model, failed[fi])
                    fi += 1
                self._sidecar_row(fno, cfg_model, done[t])
        while fi < nf:
            self._sidecar_row(fno, cfg_model, failed[fi])
            fi += 1

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
        n = len(self.finish)
        ints = np.frombuffer(self._take("ints"), dtype=np.int64).reshape(n, _N_INTS) if n else np.empty((0, _N_INTS), np.int64)
        floats = np.frombuffer(self._take("floats"), dtype=np.float64).reshape(n, _N_FLOATS) if n else np.empty((0, _N_FLOATS))

        def icol(name: str) -> np.ndarray:
            return ints[:, _I[name]]

        # de-duplicate first, then filter: a filter must not change which copy of a turn is kept
        source = icol("source").astype(np.int8)
        drop = _duplicates(icol("fp"), source) if self.dedupe else None
        fno = icol("file_no")
        # the config fields, one tuple of every file's value each (expanded to the rows by ``fno``)
        f_fields = list(zip(*self._take("f_cfg"))) or [()] * 6

        def per_file(k: int) -> list[Any]:
            return list(f_fields[k])


        cols: dict[str, Any] = {}
        # per-file columns are converted once per file, then taken by row
        cols["trace_id"] = str_col(self._take("f_trace_id")).take(fno)
        cols["turn"] = int_col(icol("turn"))
        cols["message_index"] = int_col(icol("message_index"))
        rec_rows = np.frombuffer(self._take("rec_rows"), dtype=np.int64)
        model_col = obj_col(per_file(0))[fno]  # the file's model, but where a record names one
        model_col[rec_rows] = obj_col(self._take("model"))
        model = cols["model"] = cat_col(model_col)
        del model_col
        client = cols["client_type"] = _sparse_cat(rec_rows, self._take("client"), n)
        cols["comparison"] = _sparse_cat(rec_rows, self._take("comparison"), n)
        status = np.full(n, "complete", dtype=object)
        for row, s in self._take("status").items():
            status[row] = s
        cols["status"] = cat_col(status)
        del status
        cols["source"] = pd.Categorical.from_codes(source, categories=list(SOURCES))
        started = float_col(floats[:, 0])
        ended = float_col(floats[:, 1])
        latency = float_col(floats[:, 2])
        fallback = np.isnan(latency)
        latency[fallback] = (ended[fallback] - started[fallback]) / 1000.0  # NaN when either is NA
        latency[latency < 0] = np.nan  # an answer stamped before its question
        del fallback
        keep = self._window_mask(started, model)
        cols["started"] = time_col(started)
        cols["ended"] = time_col(ended)
        del started, ended
        ttft = float_col(floats[:, 3])
        del floats
        cols["latency"] = latency
        cols["ttft"] = ttft
        cols["tokens_per_s"] = None  # placed here, computed below from output_tokens
        cols["finish_reason"] = cat_col(self._take("finish"))
        ca = cols["cached_tokens"] = int_col(icol("cached_tokens"))
        pr = cols["prompt_tokens"] = int_col(icol("prompt_tokens"))
        th = cols["thoughts_tokens"] = int_col(icol("thoughts_tokens"))
        re_ = cols["response_tokens"] = int_col(icol("response_tokens"))
        inp = cols["input_tokens"] = _nasum(ca, pr)
        out = cols["output_tokens"] = _nasum(th, re_)
        beyond = (inp.isna() & ~(ca.isna() & pr.isna())) | (out.isna() & ~(th.isna() & re_.isna()))
        tot = cols["total_tokens"] = _nasum(inp, out, np.asarray(beyond))
        with np.errstate(invalid="ignore", divide="ignore"):
            window = latency - ttft
            outf = out.to_numpy(dtype=np.float64, na_value=np.nan)
            cols["tokens_per_s"] = np.where(window > 0, outf / window, np.nan)
        del window, outf
        for name in self._COUNTS:
            cols[name] = int_col(icol(name))
        cols["cost"], cols["cost_missing"] = row_costs(
            (b.to_numpy(dtype=np.float64, na_value=0.0) for b in (ca, pr, th, re_)), np.asarray(tot.isna()),
            row_prices(model, client, self.prices))
        cols["temperature"] = np.array(per_file(1), dtype=np.float64)[fno]  # a float or None (NaN) per file
        cols["max_tokens"] = _take_distinct(f_fields[2], fno, lambda v: pd.array(v, dtype="Int64"))
        cols["thinking_level"] = _take_distinct(f_fields[3], fno, str_col)
        cols["n_tools"] = _take_distinct(f_fields[4], fno, lambda v: pd.array(v, dtype="Int64"))
        cols["tool_names"] = obj_series(obj_col(per_file(5))[fno])  # names made UTF-8 safe in add()
        errors = self._take("errors")
        cols["error_type"] = _sparse_str({row: e[0] for row, e in errors.items()}, n)
        cols["error_message"] = _sparse_str({row: e[1] for row, e in errors.items()}, n)
        df = pd.DataFrame(cols, copy=False)
        n_dup = 0
        if drop is not None:
            n_dup = int(drop.sum())  # copies left out, counted before any filter
            if n_dup or keep is not None:
                keep = ~drop if keep is None else keep & ~drop
        if keep is not None and not keep.all():
            df = keep_rows(df, keep, fixed=("source",))
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


def _take_distinct(values: Any, index: np.ndarray, convert: Any) -> Any:
    """``convert(values)`` taken at ``index``, with only the distinct values converted (a few: a
    per-file config field through the file numbers, a sparse column's values)."""
    distinct = list(dict.fromkeys(values))
    where = {v: i for i, v in enumerate(distinct)}
    codes = np.fromiter(map(where.__getitem__, values), dtype=np.intp, count=len(values))
    return convert(distinct).take(codes[index])


def _sparse_cat(rows: np.ndarray, values: list[str | None], n: int) -> pd.Categorical:
    """:func:`cat_col` of a column of ``n`` rows that is None but at ``rows``, which hold ``values``:
    only the values given are factorized."""
    if not values:
        return cat_col(np.full(n, None, dtype=object))
    given = cat_col(obj_col(values))
    codes = np.full(n, -1, dtype=given.codes.dtype)
    codes[rows] = given.codes
    return pd.Categorical.from_codes(codes, dtype=given.dtype)


def _sparse_str(values: dict[int, str | None], n: int) -> Any:
    """:func:`str_col` of a column of ``n`` rows that is None but where ``values`` says otherwise:
    the distinct values are converted, then taken by row."""
    index = np.zeros(n, dtype=np.intp)  # the row's place in [None, *values]
    index[np.fromiter(values, dtype=np.intp, count=len(values))] = np.arange(1, len(values) + 1)
    return _take_distinct([None, *values.values()], index, str_col)


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


def _nasum(a: pd.arrays.IntegerArray, b: pd.arrays.IntegerArray, beyond: np.ndarray | None = None) -> pd.arrays.IntegerArray:
    """a + b where NA counts as 0: NA when both are NA, and when the sum is beyond int64 (as a value
    beyond int64 is) or ``beyond`` says a term is (a sum of sums)."""
    va = a.to_numpy(dtype=np.int64, na_value=0)
    vb = b.to_numpy(dtype=np.int64, na_value=0)
    total = va + vb  # (int64 arrays wrap around silently)
    wrapped = ((va ^ total) & (vb ^ total)) < 0  # both signs differ from the sum's
    mask = (np.asarray(a.isna()) & np.asarray(b.isna())) | wrapped | (total == INT_NA)
    if beyond is not None:
        mask |= beyond
    return pd.arrays.IntegerArray(total, mask)


def row_costs(buckets: Iterable[np.ndarray], no_usage: np.ndarray, prices: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The ``cost`` and ``cost_missing`` columns: ``buckets`` the four usage buckets per row as
    floats (0 where missing, taken one at a time), ``no_usage`` where a row has none,
    ``prices`` per row (:func:`row_prices`). The one computation of both columns (a trace
    dataset recomputes them with it when prices change): the same numbers, not just close."""
    cost = np.zeros(len(no_usage), dtype=np.float64)
    for bucket, price in zip(buckets, prices):
        cost += bucket * price
    missing_price = np.isnan(prices[1])
    cost[no_usage | missing_price] = np.nan
    return cost, missing_price


def row_prices(model: pd.Categorical, client: pd.Categorical, table: PriceTable) -> list[np.ndarray]:
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
