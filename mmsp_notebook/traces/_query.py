"""The explorer's query over a turns frame, in pandas: filter, sort, and the same as pandas code.

A query is ``text`` (search terms: a word is looked for in the trace id, model, status, finish
reason and error, case-insensitively; ``column>value``, ``>=``, ``<``, ``<=``, ``=``, ``!=`` compare
a column, ``column:text`` looks in one column; ``latency>10s`` / ``ttft<500ms`` take units, a
true/false column takes ``=`` / ``!=`` with ``true`` / ``false`` in any case or 1 / 0, as
``cost_missing=true``),
facets (``model``, ``status``, ``finish``: lists of values), ``ranges`` (``{column: (min, max)}``,
either bound None), ``quick`` filters (:data:`QUICK`), ``sort`` / ``desc``, ``page`` /
``page_size``. :class:`TurnQuery` answers it with the positions of the matching rows in order,
caching the mask between pages and sorts and each column's sort key; :attr:`TurnQuery.code` is the
same filter as pandas code on ``turns``, which gives the same rows.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._errors import OptionError
from ..core.chars import refuse_lone_surrogate

__all__ = ["TurnQuery", "QUICK", "DEFAULT_QUERY", "RANGE_COLUMNS"]

#: quick filter -> its label
QUICK = {"errors": "errors", "truncated": "truncated", "bad_args": "bad tool arguments", "tool_errors": "tool errors",
         "slow_ttft": "slowest TTFT", "long_thinking": "longest thinking"}
#: quick filters that also sort, most first: by this column
QUICK_SORT = {"slow_ttft": "ttft", "long_thinking": "thoughts_tokens"}
DEFAULT_QUERY: dict[str, Any] = {"text": "", "model": [], "status": [], "finish": [], "ranges": {}, "quick": [],
                                 "sort": None, "desc": False, "page": 0, "page_size": 25}
#: number columns offered for a range
RANGE_COLUMNS = ("latency", "ttft", "tokens_per_s", "cost", "total_tokens", "input_tokens", "output_tokens",
                 "thoughts_tokens", "response_tokens", "turn", "n_tool_calls", "text_chars", "thinking_chars")
SEARCHED = ("trace_id", "model", "status", "finish_reason", "error_type", "error_message")
FACETS = {"model": "model", "status": "status", "finish": "finish_reason"}
SORT_KEY = {"error": "error_type"}
_SECONDS = {"latency", "ttft"}
_BAD_ARGS = r"ToolCallArgumentParseError|Invalid streamed tool call arguments"
_TERM = re.compile(r"^([A-Za-z_][\w.]*)(>=|<=|!=|>|<|=|:)(.+)$")


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _ref(col: str) -> str:
    return f"turns[{_js(col)}]"


#: quick filter -> its pandas code, one part per column it reads, joined by ``|``: a frame without a
#: column leaves out its part (as :meth:`TurnQuery.flag` does), and one without any matches no row
_QUICK_CODE: dict[str, tuple[tuple[str, str], ...]] = {
    "errors": (("status", '(turns["status"].astype("string") != "complete").fillna(False)'),
               ("error_type", 'turns["error_type"].notna()')),
    "truncated": (("finish_reason", '(turns["finish_reason"] == "length").fillna(False)'),
                  ("status", '(turns["status"] == "incomplete").fillna(False)')),
    "bad_args": tuple((c, f'turns["{c}"].astype("string").str.contains({_js(_BAD_ARGS)}).fillna(False)')
                      for c in ("error_type", "error_message")),
    "tool_errors": (("n_tool_errors", '(turns["n_tool_errors"].fillna(0) > 0)'),),
    "slow_ttft": (("ttft", 'turns["ttft"].notna()'),),
    "long_thinking": (("thoughts_tokens", '(turns["thoughts_tokens"].fillna(0) > 0)'),
                      ("thinking_chars", '(turns["thinking_chars"].fillna(0) > 0)')),
}


def quick_code(name: str, df: pd.DataFrame) -> str:
    """A quick filter as pandas code on ``turns``, reading only the columns ``df`` has."""
    parts = [code for col, code in _QUICK_CODE[name] if col in df]
    if not parts:
        return "turns.index.isin([])"  # (no row: nothing is known of it)
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"


class TurnQuery:
    """A query over one turns frame (positions into it), with what it caches between questions.

    ``flags`` computes quick filters elsewhere: name -> (callable returning a mask, the filter as
    pandas code), e.g. ``tool_errors`` for a frame without the ``n_tool_errors`` column.
    """

    def __init__(self, df: pd.DataFrame, flags: dict[str, tuple[Callable[[], np.ndarray], str]] | None = None,
                 page_size: int = 25) -> None:
        self.df = df
        self.query: dict[str, Any] = {**DEFAULT_QUERY, "page_size": page_size_of(page_size)}
        self.order = np.arange(len(df))
        self.code = ""
        self.took_ms = 0.0
        self._extra = dict(flags or {})
        self._mask_key: str | None = None
        self._order_key: str | None = None
        self._keys: dict[str, np.ndarray] = {}
        self._flags: dict[str, np.ndarray] = {}
        self.counts = {name: int(self.flag(name).sum()) for name in QUICK if name not in self._extra}
        self.update({})

    # ------------------------------------------------------------------ columns
    def key(self, name: str) -> np.ndarray:
        """A column as sort and compare values (floats; text columns ranked), NaN for missing."""
        found = self._keys.get(name)
        if found is None:
            if name not in self.df:
                raise OptionError(f"no column {name!r} in the turns frame")
            col = self.df[name]
            if isinstance(col.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(col.dtype):
                found = col.astype("string").rank(method="dense").to_numpy(dtype=float, na_value=np.nan)
            else:
                found = col.to_numpy(dtype=float, na_value=np.nan)
            self._keys[name] = found
        return found

    def flag(self, name: str) -> np.ndarray:
        """The rows a quick filter keeps."""
        found = self._flags.get(name)
        if found is not None:
            return found
        df, n = self.df, len(self.df)
        if name in self._extra:
            mask = self._extra[name][0]()
            self.counts[name] = int(mask.sum())
        elif name == "errors":
            mask = _eq(df, "status", "complete", negate=True) | (df["error_type"].notna().to_numpy()
                                                                if "error_type" in df else False)
        elif name == "truncated":
            mask = _eq(df, "finish_reason", "length") | _eq(df, "status", "incomplete")
        elif name == "bad_args":
            mask = np.zeros(n, dtype=bool)
            for col in ("error_type", "error_message"):
                if col in df:
                    mask |= contains(df[col], _BAD_ARGS, regex=True)
        elif name == "tool_errors":
            mask = np.nan_to_num(self.key("n_tool_errors")) > 0 if "n_tool_errors" in df else np.zeros(n, dtype=bool)
        elif name == "slow_ttft":
            mask = ~np.isnan(self.key("ttft")) if "ttft" in df else np.zeros(n, dtype=bool)
        elif name == "long_thinking":
            mask = np.zeros(n, dtype=bool)
            for col in ("thoughts_tokens", "thinking_chars"):
                if col in df:
                    mask |= np.nan_to_num(self.key(col)) > 0
        else:
            raise OptionError(f"no quick filter {name!r} (one of {', '.join(QUICK)})")
        self._flags[name] = np.asarray(mask, dtype=bool)
        return self._flags[name]

    # ------------------------------------------------------------------ answering
    def _conditions(self) -> tuple[list[np.ndarray], list[str]]:
        q, df = self.query, self.df
        masks: list[np.ndarray] = []
        code: list[str] = []
        for word in terms(q["text"]):
            m = _TERM.match(word)
            if m and m.group(1) in df.columns:
                mask, text = term(df, *m.groups())
            else:
                mask = np.zeros(len(df), dtype=bool)
                for c in SEARCHED:
                    if c in df:
                        mask |= contains(df[c], word)
                text = "(" + " | ".join(f'{_ref(c)}.astype("string").str.contains({_js(word)}, case=False, regex=False)'
                                        f".fillna(False)" for c in SEARCHED if c in df) + ")"
            masks.append(mask)
            code.append(text)
        for facet, col in FACETS.items():
            wanted = [str(v) for v in q[facet]]
            if wanted and col in df:
                masks.append(isin(df[col], wanted))
                code.append(f'{_ref(col)}.astype("string").isin({_js(wanted)}).fillna(False)')
        for col, (lo, hi) in q["ranges"].items():
            values = self.key(col)
            with np.errstate(invalid="ignore"):
                if lo is not None:
                    masks.append(values >= lo)
                    code.append(f"({_ref(col)} >= {_num(lo)}).fillna(False)")
                if hi is not None:
                    masks.append(values <= hi)
                    code.append(f"({_ref(col)} <= {_num(hi)}).fillna(False)")
        for name in q["quick"]:
            masks.append(self.flag(name))
            code.append(self._extra[name][1] if name in self._extra else quick_code(name, df))
        return masks, code

    def update(self, patch: dict[str, Any]) -> float:
        """Apply a change of the query (checked whole first: a wrong field changes nothing) and answer
        it; returns the milliseconds it took. Turning on a quick filter of :data:`QUICK_SORT` sorts by
        its column, most first."""
        t0 = time.perf_counter()
        before = list(self.query["quick"])
        q = checked({**self.query, **patch}, self.df)
        for name, col in QUICK_SORT.items():
            if name in q["quick"] and name not in before and col in self.df and "sort" not in patch:
                q.update(sort=col, desc=True)
        self.query, was = q, self.query
        try:
            self._answer(q)
        except Exception:  # a query that cannot be answered is not kept: the explorer answers the one before
            self.query, self._mask_key = was, None
            self._answer(was)
            raise
        self.took_ms = (time.perf_counter() - t0) * 1000.0
        return self.took_ms

    def _answer(self, q: dict[str, Any]) -> None:
        key = _js([q["text"], q["model"], q["status"], q["finish"], sorted(q["ranges"].items()), sorted(q["quick"])])
        if key != self._mask_key:
            masks, code = self._conditions()
            self._mask = np.logical_and.reduce(masks) if masks else None
            self.code = " & ".join(code)
            self._mask_key, self._order_key = key, None
        sort = SORT_KEY.get(q["sort"], q["sort"])
        order_key = _js([key, sort, q["desc"]])
        if order_key != self._order_key:
            rows = np.flatnonzero(self._mask) if self._mask is not None else np.arange(len(self.df))
            if sort:
                values = self.key(sort)[rows]
                rows = rows[np.argsort(-values if q["desc"] else values, kind="stable")]  # NaN last either way
            self.order, self._order_key = rows, order_key
        q["page"] = min(max(0, q["page"]), self.pages - 1)

    @property
    def pages(self) -> int:
        return max(1, math.ceil(len(self.order) / self.query["page_size"]))

    def page(self) -> np.ndarray:
        """The positions of the rows on the current page."""
        start = self.query["page"] * self.query["page_size"]
        return self.order[start:start + self.query["page_size"]]

    @property
    def pandas(self) -> str:
        """The query as pandas code on ``turns``."""
        out = f"turns[{self.code}]" if self.code else "turns"
        sort = SORT_KEY.get(self.query["sort"], self.query["sort"])
        if sort:
            out += f'.sort_values({_js(sort)}, ascending={not self.query["desc"]}, na_position="last", kind="stable")'
        return out


# ---------------------------------------------------------------------------------------------- terms
def terms(text: str) -> list[str]:
    """The search terms of a text (quotes group words)."""
    try:
        return [t for t in shlex.split(text or "") if t]
    except ValueError:  # an unclosed quote: words as typed
        return (text or "").split()


def isin(col: pd.Series, values: list[str]) -> np.ndarray:
    """Rows whose value, as text, is one of ``values`` (a category column: on its categories)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        hit = np.asarray(col.cat.categories.astype("string").isin(values), dtype=bool)
        codes = np.asarray(col.cat.codes)
        return np.where(codes >= 0, np.append(hit, False)[codes], False)
    return np.asarray(col.astype("string").isin(values).fillna(False), dtype=bool)


def _eq(df: pd.DataFrame, col: str, value: str, negate: bool = False) -> np.ndarray:
    if col not in df:  # nothing is known of it: no row matches, either way
        return np.zeros(len(df), dtype=bool)
    eq = isin(df[col], [value])
    return ~eq & np.asarray(df[col].notna()) if negate else eq


def contains(col: pd.Series, needle: str, regex: bool = False) -> np.ndarray:
    """Rows whose text holds ``needle``, case-insensitively (a category column: on its categories)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        hit = np.asarray(col.cat.categories.astype("string").str.contains(needle, case=False, regex=regex).fillna(False),
                         dtype=bool)
        codes = np.asarray(col.cat.codes)
        return np.where(codes >= 0, np.append(hit, False)[codes], False)
    return np.asarray(col.astype("string").str.contains(needle, case=False, regex=regex).fillna(False), dtype=bool)


def term(df: pd.DataFrame, col: str, op: str, raw: str) -> tuple[np.ndarray, str]:
    """A ``column<op>value`` search term: its mask and its pandas code."""
    series = df[col]
    if op != ":" and pd.api.types.is_bool_dtype(series.dtype) and not isinstance(series.dtype, pd.CategoricalDtype):
        return _bool_term(series, col, op, raw)
    if op != ":" and pd.api.types.is_datetime64_any_dtype(series.dtype):
        return _time_term(series, col, op, raw)
    numeric = pd.api.types.is_numeric_dtype(series.dtype) and not isinstance(series.dtype, pd.CategoricalDtype)
    if numeric and op != ":":
        value = number(raw, col)
        ops = {">": "__gt__", ">=": "__ge__", "<": "__lt__", "<=": "__le__", "=": "__eq__", "!=": "__ne__"}
        with np.errstate(invalid="ignore"):
            mask = getattr(series.to_numpy(dtype=float, na_value=np.nan), ops[op])(value)
        if op == "!=":  # a missing value is not "other than" the value: left out, as by the other ops
            mask &= series.notna().to_numpy()
            return np.asarray(mask, dtype=bool), f"(({_ref(col)} != {_num(value)}) & {_ref(col)}.notna()).fillna(False)"
        sym = "==" if op == "=" else op
        return np.asarray(mask, dtype=bool), f"({_ref(col)} {sym} {_num(value)}).fillna(False)"
    if op == ":":
        return contains(series, raw), (f'{_ref(col)}.astype("string").str.contains({_js(raw)}, case=False, '
                                       "regex=False).fillna(False)")
    if op in ("=", "!="):
        eq = np.asarray((series.astype("string") == raw).fillna(False), dtype=bool)
        if op == "=":
            return eq, f'({_ref(col)}.astype("string") == {_js(raw)}).fillna(False)'
        return ~eq & series.notna().to_numpy(), f'({_ref(col)}.astype("string") != {_js(raw)}).fillna(False)'
    raise OptionError(f"{col}{op}{raw}: {col} is not a number column (use {col}:text or {col}=text)")


def _time_term(series: pd.Series, col: str, op: str, raw: str) -> tuple[np.ndarray, str]:
    """``started>2026-01-01``, ``ended<=2026-03-02T10:30``, ``started=2026-01-31`` (that day): a
    date and time as pandas reads it, in UTC unless it names its offset; a missing time is left out."""
    try:
        when = pd.Timestamp(raw)
    except (ValueError, TypeError, OverflowError):
        when = pd.NaT
    if when is pd.NaT:
        raise OptionError(f"{col}{op}{raw}: {raw!r} is not a date or time (e.g. {col}{op}2026-01-31 or "
                          f"{col}{op}2026-01-31T09:30)")
    when = when.tz_localize("UTC") if when.tzinfo is None else when.tz_convert("UTC")
    if not isinstance(series.dtype, pd.DatetimeTZDtype):  # (a hand-made frame's times without a zone: taken as UTC)
        when = when.tz_localize(None)
    ref = _ref(col)
    if op in ("=", "!="):  # a date alone is that day; a time, that instant
        day = re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", raw) is not None
        end = when + pd.Timedelta(days=1) if day else None
        hit = ((series >= when) & (series < end)) if end is not None else (series == when)
        test = (f"({ref} >= {_js(when.isoformat())}) & ({ref} < {_js(end.isoformat())})" if end is not None
                else f"{ref} == {_js(when.isoformat())}")
        if op == "=":
            return np.asarray(hit.fillna(False), dtype=bool), f"({test}).fillna(False)"
        mask = ~np.asarray(hit.fillna(False), dtype=bool) & series.notna().to_numpy()
        return mask, f"(~({test}).fillna(False) & {ref}.notna())"
    ops = {">": "__gt__", ">=": "__ge__", "<": "__lt__", "<=": "__le__"}
    mask = np.asarray(getattr(series, ops[op])(when).fillna(False), dtype=bool)
    return mask, f"({ref} {op} {_js(when.isoformat())}).fillna(False)"


def _bool_term(series: pd.Series, col: str, op: str, raw: str) -> tuple[np.ndarray, str]:
    """A ``column=value`` / ``column!=value`` term on a true/false column (``cost_missing=true``):
    its mask and its pandas code. A missing value (a nullable column's) is neither."""
    if op not in ("=", "!="):
        raise OptionError(f"{col}{op}{raw}: {col} is true or false, not ordered: use {col}=true or {col}=false")
    value = truth(raw, col)
    eq = np.asarray((series == value).fillna(False), dtype=bool)
    if op == "=":
        return eq, f"({_ref(col)} == {value!r}).fillna(False)"
    return (~eq & series.notna().to_numpy(),
            f"(({_ref(col)} != {value!r}) & {_ref(col)}.notna()).fillna(False)")


def truth(raw: str, col: str) -> bool:
    """The value of a term on a true/false column: ``true`` / ``false`` in any case, or 1 / 0."""
    text = raw.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if value in (0.0, 1.0):
        return value == 1.0
    raise OptionError(f"{col}: {raw!r} is not true or false ({col} is a true/false column: {col}=true or {col}=false)")


def _num(value: Any) -> str:
    """A number as Python code that ``eval`` reads back (``float('inf')`` where repr says ``inf``)."""
    v = float(value)
    return repr(v) if math.isfinite(v) else f"float({str(v)!r})"


def number(raw: str, col: str) -> float:
    """A number of a search term; seconds columns take ``ms``, ``s`` and ``m``."""
    text = raw.strip().lower()
    scale = 1.0
    if col in _SECONDS and text.endswith("ms"):
        text, scale = text[:-2], 0.001
    elif col in _SECONDS and text.endswith(("s", "m")):
        text, scale = text[:-1], (60.0 if text.endswith("m") else 1.0)
    try:
        return float(text.replace(",", "").replace("_", "")) * scale
    except ValueError:
        raise OptionError(f"{col}: {raw!r} is not a number") from None


def page_size_of(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 1 <= value <= 500:
        raise OptionError(f"page_size must be an integer from 1 to 500, not {value!r}")
    return int(value)  # (a NumPy integer too)


def _bound(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise OptionError(f"a range bound must be a number, not {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"a range bound must be a number, not {value!r}") from None
    if math.isnan(out):
        raise OptionError("a range bound must be a number, not NaN")
    return out


def checked(q: dict[str, Any], df: pd.DataFrame) -> dict[str, Any]:
    """A query with every field of the right type; an OptionError names a wrong one."""
    out = {k: q.get(k, v) for k, v in DEFAULT_QUERY.items()}
    if not isinstance(out["text"], str):
        raise OptionError(f"text must be a string, not {type(out['text']).__name__}")
    for facet in FACETS:
        value = out[facet]
        out[facet] = [value] if isinstance(value, str) else [str(v) for v in value or []]
    for name, text in (("text", out["text"]), *((f, v) for f in FACETS for v in out[f])):
        refuse_lone_surrogate(name, text)  # (a file's bad bytes decoded with surrogateescape): no page could carry it
    ranges = {}
    if not isinstance(out["ranges"], dict):
        raise OptionError("ranges must be a mapping {column: (min, max)}")
    for col, bounds in out["ranges"].items():
        if col not in df or isinstance(df[col].dtype, pd.CategoricalDtype) \
                or not pd.api.types.is_numeric_dtype(df[col].dtype):
            raise OptionError(f"ranges: {col!r} is not a number column of the turns frame")
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
            raise OptionError(f"ranges: {col!r} takes (min, max), either None, not {bounds!r}")
        lo, hi = _bound(bounds[0]), _bound(bounds[1])
        if lo is not None or hi is not None:
            ranges[str(col)] = (lo, hi)
    out["ranges"] = ranges
    quick = [str(n) for n in ([out["quick"]] if isinstance(out["quick"], str) else out["quick"] or [])]
    for name in quick:
        if name not in QUICK:
            raise OptionError(f"no quick filter {name!r} (one of {', '.join(QUICK)})")
    out["quick"] = list(dict.fromkeys(quick))
    sort = out["sort"]
    if sort is not None and SORT_KEY.get(sort, sort) not in df:
        raise OptionError(f"cannot sort by {sort!r}: no such column")
    out["desc"] = bool(out["desc"])
    out["page_size"] = page_size_of(out["page_size"])
    page = out["page"]
    number = isinstance(page, (int, float, np.integer, np.floating)) and not isinstance(page, (bool, np.bool_))
    out["page"] = int(page) if number and math.isfinite(page) else 0  # (a NumPy number too)
    for word in terms(out["text"]):  # a term that cannot be answered is said now, before anything changes
        m = _TERM.match(word)
        if m and m.group(1) in df.columns:
            term(df.iloc[:0], *m.groups())
    return out
