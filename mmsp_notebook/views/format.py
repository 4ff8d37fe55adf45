"""Numbers as every view shows them: durations, sizes, counts, fixed decimals; and labels isolated.

The one place numbers become text. The view model (:mod:`.model`) carries these strings to the
widget, the static HTML and the text views alike, so no renderer formats a number of its own.
Each function takes anything and gives ``""`` for what is not a finite number.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

__all__ = ["is_number", "seconds", "whole_seconds", "size", "integer", "fixed", "isolate", "BIDI_CONTROLS"]


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fixed(value: Any, digits: int) -> str:
    """``value`` with ``digits`` decimals: ``fixed(0.1234, 3) == "0.123"``."""
    if not is_number(value):
        return ""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.000"


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


#: The characters that change the direction of the text around them (embeddings, overrides,
#: isolates, marks): in a name a model or a trace gives, U+202E would show the rest of a line reversed.
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_FSI, _PDI = "\u2068", "\u2069"


def isolate(value: Any) -> str:
    """``value`` as text that cannot reorder the text around it, where it holds a bidi control.

    A label joined into a longer line (``assistant · turn 3 · <model>``) is wrapped in FSI … PDI
    (First Strong Isolate, Pop Directional Isolate), with a PDI of its own that would close the
    wrapper early dropped and the isolates it opens closed: what it overrides ends with it. Text
    without a bidi control is returned as it is. (A label drawn in an element of its own is
    isolated by the element: ``dir="auto"``.)
    """
    text = "" if value is None else str(value)
    if not BIDI_CONTROLS.search(text):
        return text
    out, depth = [], 0
    for ch in text:
        if ch in "\u2066\u2067\u2068":
            depth += 1
        elif ch == _PDI:
            if not depth:
                continue
            depth -= 1
        out.append(ch)
    return _FSI + "".join(out) + _PDI * depth + _PDI
