"""The one check of an on/off option, for every door (the magic's functions, the chat, the trace
loaders and ``sync``): a string such as ``"false"`` would be taken as true."""

from __future__ import annotations

from typing import Any

from .._errors import OptionTypeError
from .redact import redact

__all__ = ["check_flag", "is_flag"]


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
