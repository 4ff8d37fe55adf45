"""Coercions and column kinds of :mod:`mmsp_notebook.traces`' frames.

A trace is untrusted JSON: every value is coerced to what its column can hold, or to missing.
Columns are built in plain Python containers (``array.array`` for numbers, lists for strings) and
converted once at the end. Integers use ``INT_NA`` (the smallest int64) as the missing-value
sentinel while building; it turns into a nullable ``Int64`` mask when the frame is made, so a
missing usage bucket stays ``<NA>`` and never becomes 0. Floats use NaN. Category columns are
built as codes (``-1`` = missing). Strings with lone surrogates become U+FFFD so every frame can
be written as UTF-8 (Arrow, Parquet).
"""

from __future__ import annotations

import base64
import json
import math
import re
from array import array
from typing import Any

import numpy as np
import pandas as pd

from ..core.fields import INT_LO, as_int, as_num
from ..core.stamps import MS_HI, MS_LO

#: the missing-value sentinel of an int64 column (``INT_LO``: integers strictly between ``INT_LO``
#: and ``INT_HI`` fit one)
INT_NA = INT_LO
#: timestamps are Unix ms strictly between MS_LO and MS_HI (1970-01-01 excluded, year 10000 excluded)
NAN = math.nan
#: durations are ms in ``0 <= ms < DUR_HI``, a day: one request's times beyond are damage, as a
#: replay takes them (``front.replay.MAX_EVENT_MS``), not a latency to weigh in percentiles (a finite
#: float bound, so huge integers compare safely)
DUR_HI = 86_400_000.0
_NAN, _DUR_HI = NAN, DUR_HI


# --------------------------------------------------------------------------- coercions


def int_or_na(v: Any) -> int:
    """:func:`as_int` with ``INT_NA`` for None (the value an int64 column is built from)."""
    v = as_int(v)
    return INT_NA if v is None else v


def count_or_na(v: Any) -> int:
    """A token count (an :func:`as_int` not below 0), else ``INT_NA``: a negative count, a foreign
    producer's ``-1`` for "unknown" among them, is missing, not subtracted from sums and costs."""
    v = as_int(v)
    return INT_NA if v is None or v < 0 else v


def as_ms(v: Any) -> float | int | None:
    """A plausible Unix-ms timestamp (after 1970-01-01, before year 10000), or None: a sidecar's
    ``started_at``, always in ms. A message's ``created_at`` is read by
    :func:`~mmsp_notebook.core.stamps.created_ms` (seconds or ms)."""
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
    total: Any = rec.get("total_ms")
    c = total.__class__
    lat = total / 1000.0 if (c is float or c is int) and 0 <= total < _DUR_HI else _NAN  # NaN compares False
    ttft: Any = rec.get("ttft_ms")
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


def data_url_info(url: str) -> tuple[str | None, int | None]:
    # "data:image/png;base64,AAAA" -> ("image/png", decoded size)
    head, sep, body = url.partition(",")
    if not sep:
        return None, None
    meta = head[5:]
    mime = meta.split(";", 1)[0] or None
    return mime, (b64_size(body) if meta.endswith(";base64") else len(body))


def _dumps(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:  # nested deeper than the recursive encoders go (a parser may take ~1000 levels)
        return _dumps_deep(v)


class _Text(str):
    """JSON text already written, on :func:`_dumps_deep`'s stack."""


def _dumps_deep(v: Any) -> str:
    """The text :func:`_dumps` gives, built with a stack instead of recursion (any depth)."""
    out: list[str] = []
    stack: list[Any] = [v]
    while stack:
        x = stack.pop()
        if x.__class__ is _Text:
            out.append(x)
        elif isinstance(x, dict):
            out.append("{")
            stack.append(_Text("}"))
            pairs = list(x.items())
            for i in range(len(pairs) - 1, -1, -1):
                k, value = pairs[i]
                stack.append(value)
                stack.append(_Text(("," if i else "") + json.dumps(k if isinstance(k, str) else _dumps(k),
                                                                   ensure_ascii=False) + ":"))
        elif isinstance(x, (list, tuple)):
            out.append("[")
            stack.append(_Text("]"))
            for i in range(len(x) - 1, -1, -1):
                stack.append(x[i])
                if i:
                    stack.append(_Text(","))
        else:
            out.append(json.dumps(x, ensure_ascii=False))
    return "".join(out)


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
    """A categorical column built as codes, its categories sorted when it is built (as
    :func:`cat_col` sorts them: the frames of every kind, and ``query`` reading them back, give one
    order, whatever order the values were met in)."""

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
        if not cats:  # all missing (or no row): as cat_col makes it
            return pd.Categorical.from_codes(codes, categories=no_categories())
        try:
            order = sorted(range(len(cats)), key=cats.__getitem__)
        except TypeError:  # values of several types (foreign traces): the order met
            return pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object))
        rank = np.empty(len(cats) + 1, dtype=np.int32)
        rank[order] = np.arange(len(cats), dtype=np.int32)
        rank[-1] = -1  # (a missing value's code)
        return pd.Categorical.from_codes(rank[codes], categories=pd.Index([cats[i] for i in order]))


def int_col(a: array | np.ndarray) -> pd.arrays.IntegerArray:
    """A nullable Int64 array from an ``array('q')`` holding ``INT_NA`` for missing values."""
    v = np.array(a, dtype=np.int64)
    mask = v == INT_NA
    v[mask] = 0
    return pd.arrays.IntegerArray(v, mask)


def float_col(a: array | np.ndarray) -> np.ndarray:
    """A float64 array (NaN = missing)."""
    return np.array(a, dtype=np.float64)


def time_col(a: array | np.ndarray) -> pd.DatetimeIndex:
    """Tz-aware UTC timestamps (microsecond resolution) from Unix milliseconds (NaN and values
    outside ``MS_LO < ms < MS_HI`` = NaT)."""
    ms = np.array(a, dtype=np.float64)
    us = np.full(ms.shape, np.iinfo(np.int64).min, dtype=np.int64)
    ok = (ms > MS_LO) & (ms < MS_HI)
    us[ok] = np.round(ms[ok] * 1000.0).astype(np.int64)
    return pd.DatetimeIndex(us.view("M8[us]")).tz_localize("UTC")


def obj_col(values: list[Any]) -> np.ndarray:
    """An object array holding the values as they are (tuples and lists are not unpacked)."""
    return np.fromiter(values, dtype=object, count=len(values))


def obj_series(values: np.ndarray) -> pd.Series:
    """An object-dtype column (pandas would otherwise infer its string dtype from the values)."""
    return pd.Series(values, dtype=object, copy=False)


def as_text(v: Any) -> str | None:
    """A value as a UTF-8-safe string: strings as they are, bytes as base64, anything else as its
    JSON text (None stays None)."""
    if v is None:
        return None
    if isinstance(v, str):
        return utf8_safe(v)
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    return utf8_safe(dumps(v))


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


def no_categories() -> pd.Index:
    """The categories of a category column holding no value: none, of the dtype pandas gives text
    (``str``, or ``object`` before pandas 3), so that an empty frame, or a column all missing, has
    the dtypes of any other (``df.model.str``, ``pd.concat`` with a frame of values), not the
    ``float64`` categories ``pd.Categorical([])`` would make."""
    return pd.Index([""])[:0]


def cat_col(values: Any) -> pd.Categorical:
    """A categorical column of strings (None = missing), categories sorted as ``pd.Categorical``
    sorts them; lone surrogates become U+FFFD. Factorized from an object array (several times
    faster than ``pd.Categorical(list)``, which infers the values first)."""
    arr = values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
    codes, uniques = pd.factorize(arr, sort=True)
    if not len(uniques):  # all missing (or no row): no category, of text as the others are
        return pd.Categorical.from_codes(codes, categories=no_categories())
    try:
        return pd.Categorical.from_codes(codes, categories=pd.Index(uniques.tolist()))
    except UnicodeEncodeError:
        return pd.Categorical([utf8_safe(v) if v.__class__ is str else v for v in arr])


def keep_rows(df: pd.DataFrame, keep: np.ndarray, fixed: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of ``df`` where ``keep`` is True, reindexed, each category column holding only the
    categories its rows still have (as a frame built from those rows alone has them: a filter, or
    copies left out, leave no empty group in ``groupby`` / ``value_counts``); the columns named in
    ``fixed`` keep all theirs (``source``'s fixed three)."""
    out = df.loc[keep].reset_index(drop=True)
    for i, (name, dtype) in enumerate(out.dtypes.items()):
        if isinstance(dtype, pd.CategoricalDtype) and name not in fixed and len(dtype.categories):
            col = out.iloc[:, i]
            used = np.zeros(len(dtype.categories) + 1, dtype=bool)
            used[col.cat.codes.to_numpy()] = True  # (a missing value's -1 marks the last place)
            if not used[:-1].all():
                out.isetitem(i, col.cat.remove_unused_categories())
    return out
