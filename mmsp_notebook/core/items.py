"""What a turn state accumulates: one :class:`ItemState` per content item, and the :class:`ToolRun` of a call.

This module imports nothing from IPython, widgets or pandas.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import chain
from operator import countOf
from typing import Any, Literal

__all__ = ["ItemState", "ToolRun", "GROWING_FIELD", "chunk_problem", "not_a_number", "arguments_problem"]

# the field each kind's deltas grow
GROWING_FIELD = {
    "text": "text",
    "thinking": "thinking",
    "tool_call": "arguments",
    "inline_data": "data",
    "inline_thinking": "data",
    "embedding": "embedding",
}

# what a fragment of each growing field is (text, thinking and arguments: a str): its types, and how a
# refusal names them
_CHUNK_TYPES: dict[str, tuple[Any, str]] = {
    "data": ((bytes, bytearray), "bytes"),
    "embedding": (list, "a list of numbers"),
}


def chunk_problem(field: str, chunk: Any) -> str | None:
    """Why ``chunk`` cannot be a delta's fragment of ``field`` (``"carries ..."``), or None."""
    types, said = _CHUNK_TYPES.get(field, (str, "a str"))
    if not isinstance(chunk, types):
        return f"carries {field} of type {type(chunk).__name__}, not {said}"
    if field == "embedding":
        n = not_a_number(chunk)
        if n is not None:
            value = chunk[n]
            what = ("an int too large for a float" if type(value) is int
                    else "null" if value is None else f"a {type(value).__name__}")
            return f"carries an embedding whose value {n} is {what}, not a number"
    return None


def arguments_problem(raw: str, arguments: dict[str, Any]) -> str | None:
    """Why a ``tool_call.done``'s parsed ``arguments`` are not the ``raw`` JSON its deltas streamed, or
    None (also when they streamed none). mmsp builds the done from its deltas (``json.loads`` of their
    join), so the two are compared as values: a done that differs would have the tool run with
    arguments the user never saw stream."""
    if not raw:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        return f"the arguments its deltas streamed are not JSON ({exc})"
    except RecursionError:
        return "the arguments its deltas streamed are nested too deeply to read"
    try:
        if parsed == arguments or json.dumps(parsed, sort_keys=True) == json.dumps(arguments, sort_keys=True):
            return None  # (dumped: a NaN in them is unequal to itself)
    except (TypeError, ValueError, RecursionError):
        pass
    return "its arguments differ from those its deltas streamed"


def not_a_number(vector: list[Any]) -> int | None:
    """The index of the first value of ``vector`` that is no number a float holds (not an int or a
    float, a bool, an int too large for a float), or None. A JS gateway writes NaN as ``null``.

    A vector of floats costs one pass over its types in C (2 to 3 ms for 100,000 dimensions); one
    with ints among them, two more (their types, and each value as a float)."""
    if countOf(map(type, vector), float) == len(vector):
        return None
    types = set(map(type, vector))
    if types <= {float, int}:
        try:
            math.fsum(vector)  # (an int too large for a float raises, as does a sum too large: walked below)
            return None
        except (OverflowError, ValueError):
            pass
    for n, value in enumerate(vector):
        if type(value) is float:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return n
        try:
            float(value)
        except OverflowError:
            return n
    return None


@dataclass
class ToolRun:
    """What running a tool call's Python function gave: a value or an exception, and how long."""

    name: str
    tool_call_id: str
    arguments: dict[str, Any]
    output: str = ""
    error: str | None = None  # "TypeName: message" when the function raised
    started: float = 0.0
    ended: float | None = None
    value: Any = None

    @property
    def duration(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ItemState:
    """One content item of the stream: its group of deltas and, once it arrives, its ``.done``."""

    index: int
    kind: str
    started: float
    status: Literal["streaming", "done"] = "streaming"
    chunks: list[Any] = field(default_factory=list)
    size: int = 0  # characters, bytes or dimensions so far
    name: str = ""
    tool_call_id: str = ""
    mime_type: str = ""
    fidelity: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    ended: float | None = None
    tool_run: ToolRun | None = None
    # what feed's fast path accepts as the next fragment (unset: every fragment takes the full checks)
    delta_type: str = ""
    field: str = ""
    chunk_type: type = type(None)
    _joined: Any = None
    _joined_n: int = -1

    def content(self) -> Any:
        """The content so far: ``str`` (text, thinking, raw tool arguments), ``bytes``, or a vector."""
        n = len(self.chunks)
        if self._joined_n != n:
            if self.kind in ("inline_data", "inline_thinking"):
                self._joined = b"".join(self.chunks)
            elif self.kind == "embedding":
                self._joined = list(chain.from_iterable(self.chunks))
            elif 0 < self._joined_n < n:  # text grows: join only what came since the last read
                self._joined += "".join(self.chunks[self._joined_n:])
            else:
                self._joined = "".join(self.chunks)
            self._joined_n = n
        return self._joined

    @property
    def text(self) -> str:
        return self.content() if self.kind in ("text", "thinking", "tool_call") else ""

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The parsed arguments of a tool call, from its ``.done`` item."""
        return self.done.get("arguments") if self.done is not None and self.kind == "tool_call" else None

    @property
    def duration(self) -> float | None:
        """Seconds from the item's first delta to its ``.done`` (``None`` while it streams)."""
        return None if self.ended is None else self.ended - self.started

    @property
    def norm(self) -> float | None:
        """An embedding's Euclidean norm; None for another kind, or for a vector that is not all
        numbers (the turn state refuses one; an item built otherwise is shown without its norm)."""
        if self.kind != "embedding":
            return None
        try:
            return math.hypot(*self.content())  # (in C, and no overflow of the squares of large values)
        except (TypeError, ValueError, OverflowError):
            return None
