"""Values holding a key, named in the explorer's copied filter: :func:`held_value`.

The explorer's filter as pandas code (``explorer.filter_code``) holds its values as written; one that
holds a key (a model id with ``?key=...`` in it, a provider URL with a password: what
:func:`~mmsp_notebook.core.redact.redact` changes) must not cross to the browser, and Copy filter
copies in the browser. So the code Copy filter gets (:func:`copy_code`) names such a value by its
redacted form, ``held_value("gpt-x?key=[redacted]")``, which this kernel turns back into the value: the
copied code, run in a cell of the same kernel, selects the same rows, and shows that a value was
redacted. Two values that redact alike get names of their own (``#2``, ``#3``...); a long one is named
by its first characters and its length. After the kernel restarts the names are gone:
:func:`held_value` says so.
"""

from __future__ import annotations

import json
import re
import threading

from .._errors import OptionError
from ..core.redact import redact

__all__ = ["held_value", "copy_code", "NAME_CHARS"]

#: characters of a value's redacted form a name keeps (a longer value: these, then its length)
NAME_CHARS = 200

_names: dict[str, str] = {}  # value -> name
_values: dict[str, str] = {}  # name -> value
_lock = threading.Lock()

# a string literal of the generated code: every one is JSON (double quotes, backslash escapes)
_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
_IMPORT = "from mmsp_notebook.traces import held_value  # held_value(...): a value holding a key, kept by this kernel\n"


def held_value(name: str) -> str:
    """The value a copied filter names ``name`` (its redacted form): kept by this kernel since the
    explorer copied it."""
    found = _values.get(name)
    if found is None:
        raise OptionError(f"held_value({name!r}): this kernel holds no such value. A filter copied from the "
                          "explorer names a value holding a key so, and runs in the kernel it was copied from "
                          "until that kernel restarts: run the explorer's cell again and copy the filter again")
    return found


def _name(value: str) -> str:
    with _lock:
        found = _names.get(value)
        if found is None:
            shown = redact(value)
            base = shown if len(shown) <= NAME_CHARS else f"{shown[:NAME_CHARS]}… ({len(value):,} characters)"
            found, n = base, 1
            while found in _values:  # values alike once redacted or cut
                n += 1
                found = f"{base} #{n}"
            _names[value], _values[found] = found, value
        return found


def copy_code(code: str) -> str:
    """``code`` (pandas code made by the explorer's query) as Copy filter gets it: each string that
    holds a key replaced by ``held_value(name)``, with the import it needs; ``code`` itself when it
    holds none."""
    if redact(code) == code:
        return code
    found = False

    def literal(m: re.Match[str]) -> str:
        nonlocal found
        value = json.loads(m.group(0))
        if redact(value) == value:
            return m.group(0)
        found = True
        return f"held_value({json.dumps(_name(value), ensure_ascii=False)})"

    out = _LITERAL.sub(literal, code)
    if not found or redact(out) != out:  # a key outside a string (no code the query makes): nothing of it
        return "# the filter holds a key that cannot be named here: explorer.filter_code has it, in the kernel"
    return _IMPORT + out
