"""Fields of a sidecar record as every reader takes them: the trace loaders, a dataset, ``show`` and
the trace explorer read a record's ``turn`` with :func:`as_int` and its ``status`` with
:func:`record_status`, and order the responses the trace file does not hold by
:func:`attempt_order`, so a row of ``load_turns`` and the entry ``show`` draws for it agree.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["as_int", "as_num", "record_status", "attempt_order", "INT_LO", "INT_HI"]

#: integers strictly between these fit an int64 column (``INT_LO`` itself, the smallest int64, is
#: the loaders' missing-value sentinel)
INT_LO, INT_HI = -(2**63), 2**63


def as_int(v: Any) -> int | None:
    """An integer count from JSON, or None (bools, strings, non-integral floats and integers
    beyond int64 are not counts; a whole-number float such as ``3.0`` is one)."""
    c = v.__class__
    if c is int:
        return v if INT_LO < v < INT_HI else None
    if c is float and v == v and v not in (math.inf, -math.inf) and v.is_integer():
        return int(v) if INT_LO < v < INT_HI else None
    return None


def as_num(v: Any) -> float | None:
    """A finite number from JSON, or None (bools, strings and integers beyond a float's range are
    not numbers)."""
    c = v.__class__
    if c is int or c is float:
        try:
            f = float(v)
        except OverflowError:  # an integer beyond float range
            return None
        return f if f == f and f not in (math.inf, -math.inf) else None
    return None


def attempt_order(record: Any) -> tuple[int, float]:
    """The sort key of a sidecar record among the responses the trace file does not hold: its turn,
    then its ``started_at`` (a record without either first). The loaders' rows and ``show``'s
    entries of those responses come in this one order."""
    return as_int(record.get("turn")) or 0, as_num(record.get("started_at")) or 0.0


def record_status(record: Any) -> str:
    """A sidecar record's ``status`` as written (a foreign producer's own word kept), or
    ``"unknown"`` when it has none (missing, empty or not a string)."""
    status = record.get("status")
    return status if isinstance(status, str) and status else "unknown"
