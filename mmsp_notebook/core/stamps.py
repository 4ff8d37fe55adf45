"""Message timestamps: a message's ``created_at`` in Unix milliseconds, whatever unit it was written in.

mmsp stamps every message with ``created_at`` in Unix milliseconds (its Tracer writes them so);
other producers write Unix seconds. The unit is told by magnitude, value by value (a trace may mix
them, message by message): a number below :data:`SECONDS_BELOW` (1e11) is in seconds, since as
milliseconds it would be a time before 1973-03-03 and as seconds it is one before the year 5138;
any other number is in milliseconds. A time outside 1970-01-01 (excluded) .. year 10000 (excluded),
a bool, NaN or a value that is no number is no time.

Every reader of ``created_at`` (the trace loaders, a dataset's partition dates, replay, the trace
explorer) goes through :func:`created_ms`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["created_ms", "SECONDS_BELOW", "MS_LO", "MS_HI"]

#: A ``created_at`` below this is in seconds (1e11 ms is 1973-03-03; 1e11 s is in the year 5138).
SECONDS_BELOW = 100_000_000_000
#: Unix-ms timestamps are strictly between these (1970-01-01 excluded, year 10000 excluded).
MS_LO, MS_HI = 0, 253_402_300_800_000


def created_ms(value: Any) -> float | int | None:
    """A message's ``created_at`` as Unix milliseconds (an int stays an int), or None when it is no
    time (see the module docstring for the rule)."""
    c = value.__class__
    if c is int or c is float:
        if 0 < value < SECONDS_BELOW:  # NaN compares False
            value = value * 1000
        if MS_LO < value < MS_HI:
            return value
    return None
