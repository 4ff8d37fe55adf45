"""Numbers as every view shows them: durations, sizes, counts, fixed decimals; and labels isolated.

The one place numbers become text. The view model (:mod:`.model`) carries these strings to the
widget, the static HTML and the text views alike, so no renderer formats a number of its own.
Each function takes anything and gives ``""`` for what is not a finite number.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

from ..core.chars import BIDI_CONTROLS, isolate  # (the views' names for them)

__all__ = ["as_text", "is_number", "component", "seconds", "whole_seconds", "size", "integer", "fixed", "isolate", "BIDI_CONTROLS"]


def as_text(value: Any) -> str:
    """A string as it is, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float (not a bool); an int beyond a float's range (JSON holds any) is not one."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def listed(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one (a field of a trace or a sidecar that is damaged)."""
    return value if isinstance(value, list) else []


def fixed(value: Any, digits: int) -> str:
    """``value`` with ``digits`` decimals: ``fixed(0.1234, 3) == "0.123"``."""
    if not is_number(value):
        return ""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.000"


def component(value: Any) -> str:
    """One number of a vector's preview: 3 decimals, a large one in e-notation, NaN and ±inf by name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if is_number(value):
        return fixed(value, 3) if abs(value) < 1e6 else f"{value:.3e}"
    return "null" if value is None else str(value)


def seconds(value: Any) -> str:
    """A duration: ``4 ms``, ``1.25 s``, ``12.5 s``, ``2 min 5 s``."""
    if not is_number(value) or value < 0:
        return ""
    ms = round(value * 1000)
    if ms < 1000:
        return f"{ms} ms"
    if value < 9.995:
        return f"{value:.2f} s"
    if value < 59.95:
        return f"{value:.1f} s"
    whole = round(value)
    return f"{whole // 60} min {whole % 60} s"


def whole_seconds(value: float) -> str:
    """A count of seconds that ticks once a second: ``12 s``, ``2 min 05 s``."""
    whole = int(value)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


def size(value: Any) -> str:
    """A size in bytes: ``512 B``, ``5.0 KB``, ``1.2 MB``."""
    if not is_number(value):
        return ""
    if value < 1024:
        return f"{int(value)} B"
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KB"
    return f"{value / 1024 / 1024:.1f} MB"


def integer(value: Any) -> str:
    """A count with thousands separators: ``1,200``."""
    return f"{round(value):,}" if is_number(value) else ""


