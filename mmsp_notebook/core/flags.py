"""The one check of an on/off option, for every door (the magic's functions, the chat, the trace
loaders and ``sync``): a string such as ``"false"`` would be taken as true; and the one refusal of
a keyword a door does not take."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from .._errors import OptionTypeError
from .redact import redact

__all__ = ["check_flag", "is_flag", "refuse_unknown"]


def is_flag(value: Any) -> bool:
    """Whether ``value`` is True or False as an option takes it: a bool, 0 or 1, NumPy's bool."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    return isinstance(value, int) and value in (0, 1) or numpy_bool


def check_flag(name: str, value: Any, *, none: str | None = "", door: str = "") -> None:
    """Refuse an option ``name`` that is not True or False. ``none``: None is taken too (what it
    means, said in the error when given; ``None``: None is refused). ``door``: the function the
    error names first (``"ask"``)."""
    if value is None and none is not None or is_flag(value):
        return
    said = f" (None: {none})" if none else ""
    raise OptionTypeError(f"{door + ': ' if door else ''}{name} takes True or False{said}, "
                          f"not {type(value).__name__} {redact(repr(value))[:40]}")


def refuse_unknown(door: str, given: Iterable[str], known: Sequence[str], *, more: str = "") -> None:
    """A ``TypeError`` naming the front door (not :func:`launch`) for a keyword it does not take, with
    the nearest one it does and the list of them."""
    for key in given:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"{door}() got an unexpected keyword argument {key!r}{hint}; it takes "
                            f"{', '.join(known)}{more}")
