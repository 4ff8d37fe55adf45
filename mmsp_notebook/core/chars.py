"""Characters text must not carry as it is: a bidi control in a name joined into a line of text
(:func:`isolate` keeps it from reordering the line), a lone surrogate in text to send or show
(no UTF-8 body or page can carry it: :func:`refuse_lone_surrogate` refuses a user's,
:func:`mend_surrogates` mends a model's for the views and the files written)."""

from __future__ import annotations

import re
from typing import Any

from .._errors import OptionError

__all__ = ["BIDI_CONTROLS", "LONE_SURROGATE", "isolate", "refuse_lone_surrogate", "mend_surrogates", "is_high_surrogate",
           "printable"]

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


def mend_surrogates(value: Any) -> Any:
    """``value`` (a string, or a JSON-like value of dicts, lists and tuples) with its surrogates
    mended: two halves of a pair joined into their character (a server slicing UTF-16 text may send
    them in two deltas, each a JSON ``"\\ud83d"`` escape), a lone one replaced by U+FFFD, so that a
    page, a terminal, a comm message or a UTF-8 file can carry it. ``value`` itself when nothing in
    it changed (the common case costs a scan of each string)."""
    if isinstance(value, str):
        if value.isascii() or not LONE_SURROGATE.search(value):  # (isascii: no scan)
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        pairs = [(mend_surrogates(k), mend_surrogates(v)) for k, v in value.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items())):
            return value
        return dict(pairs)
    if isinstance(value, (list, tuple)):
        items = [mend_surrogates(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def is_high_surrogate(ch: str) -> bool:
    """Whether ``ch`` (one character) is the first half of a surrogate pair (its second may come next)."""
    return "\ud800" <= ch <= "\udbff"


# C0 controls but tab and newline, DEL and the C1 controls: a terminal acts on them (colours, cursor
# moves, a carriage return writing over a line, a window title, OSC 8 links, clipboard writes), so a
# model's text never carries them there; each is shown as its Control Picture (ESC as ␛), a C1 as �;
# a lone surrogate (a model's JSON may escape half a pair) as �, as no UTF-8 output can carry it
_UNPRINTABLE = {c: 0x2400 + c for c in range(32) if c not in (9, 10)} | {0x7F: 0x2421} | dict.fromkeys(range(0x80, 0xA0), 0xFFFD) \
    | dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)


_UNPRINTABLE_CHAR = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` safe to write to a terminal or a ``text/plain`` output: control characters made visible.

    (Text with none is returned as it is: one scan, where translating a long non-ASCII text is slow.)"""
    if not _UNPRINTABLE_CHAR.search(text):
        return text
    return text.translate(_UNPRINTABLE)
