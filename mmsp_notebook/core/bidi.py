"""Names a model or a trace gives, joined into a line of text, kept from reordering the line around them."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["BIDI_CONTROLS", "isolate"]

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
