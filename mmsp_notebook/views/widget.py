"""The anywidgets: :class:`TurnView` (the live view of ``%%mmsp``) and the bundled front end files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

__all__ = ["TurnView", "CompareView", "STATIC"]

STATIC = Path(__file__).resolve().parent.parent / "static"


class TurnView(anywidget.AnyWidget):
    """One assistant turn drawn live: Python sends only what changed (``ops``), coalesced.

    A view that appears mid-stream says ``hello`` and is answered with a snapshot of the turn so
    far; :meth:`reset` starts every view over for the next turn (see ``js/PROTOCOL.md``).
    """

    _esm = STATIC / "turn.js"
    _css = STATIC / "widget.css"

    def __init__(self, source: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._source = source  # the Turn, for snapshots
        self.sent_bytes = 0
        self.on_msg(self._on_front_end_msg)

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "hello" and self._source is not None:
            from .model import view_model

            self.send({"type": "snapshot", "turn": view_model(self._source)})

    def reset(self, source: Any) -> None:
        """Show another turn: views still on the page start over from its (empty) snapshot."""
        from .model import view_model

        self._source = source
        self.send({"type": "snapshot", "turn": view_model(source)})

    def push(self, ops: list[Any]) -> None:
        if ops:
            self.send({"type": "ops", "ops": ops})


class CompareView(anywidget.AnyWidget):
    """Several turns drawn live side by side (a comparison): one message per repaint for every column.

    ``source`` is the comparison (``labels`` and ``turns``); a view that appears mid-stream says
    ``hello`` and gets a snapshot of every column.
    """

    _esm = STATIC / "compare.js"
    _css = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("widget.css", "compare.css"))

    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, source: Any = None, **kwargs: Any) -> None:
        super().__init__(labels=list(getattr(source, "labels", []) or []), **kwargs)
        self._source = source
        self.sent_bytes = 0
        self.on_msg(self._on_front_end_msg)

    def _snapshot(self) -> dict[str, Any]:
        from .model import view_model

        source = self._source
        return {"type": "snapshot", "labels": list(source.labels), "turns": [view_model(t) for t in source.turns]}

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "hello" and self._source is not None:
            self.send(self._snapshot())

    def push(self, cols: list[Any]) -> None:
        """The ops of the columns that changed, ``[[column, ops], ...]``, in one message."""
        if cols:
            self.send({"type": "ops", "cols": cols})
