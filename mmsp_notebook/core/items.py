"""What a turn state accumulates: one :class:`ItemState` per content item, and the :class:`ToolRun` of a call.

This module imports nothing from IPython, widgets or pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ItemState", "ToolRun", "GROWING_FIELD"]

# the field each kind's deltas grow
GROWING_FIELD = {
    "text": "text",
    "thinking": "thinking",
    "tool_call": "arguments",
    "inline_data": "data",
    "inline_thinking": "data",
    "embedding": "embedding",
}


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
    mixed: bool = False  # a text-like item got a fragment that is not a str (its content is then a list)
    _joined: Any = None
    _joined_n: int = -1

    def content(self) -> Any:
        """The content so far: ``str`` (text, thinking, raw tool arguments), ``bytes``, or a vector."""
        n = len(self.chunks)
        if self._joined_n != n:
            if self.kind in ("inline_data", "inline_thinking"):
                self._joined = b"".join(self.chunks)
            elif self.kind == "embedding":
                self._joined = [value for chunk in self.chunks for value in chunk]
            elif self.mixed:
                self._joined = list(self.chunks)
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
        if self.kind != "embedding":
            return None
        return math.sqrt(sum(float(v) * float(v) for v in self.content()))
