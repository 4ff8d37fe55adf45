"""Characters text must not carry as it is: a bidi control in a name joined into a line of text
(:func:`isolate` keeps it from reordering the line), a lone surrogate in text to send or show
(:func:`refuse_lone_surrogate`: no UTF-8 body or page can carry it)."""

from __future__ import annotations

import re
from typing import Any

from .._errors import OptionError

__all__ = ["BIDI_CONTROLS", "LONE_SURROGATE", "isolate", "refuse_lone_surrogate"]

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


#: A lone surrogate: what ``errors="surrogateescape"`` decodes a file's bad bytes to.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogate(what: str, text: str) -> None:
    """Refuse text holding a lone surrogate (decoded with ``errors="surrogateescape"``: a file's bad
    bytes), which no request body or page can carry, before it is sent rather than as a
    UnicodeEncodeError on the way."""
    lone = LONE_SURROGATE.search(text)
    if lone:
        raise OptionError(f"{what} holds a lone surrogate ({lone.group()!a}) at character {lone.start()}, which "
                          "cannot be sent as UTF-8: decode the text with errors='replace' (or 'ignore')")
