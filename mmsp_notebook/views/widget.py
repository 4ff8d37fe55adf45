"""The anywidgets: :class:`TurnView` (the live view of ``%%mmsp``) and the bundled front end files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget

__all__ = ["TurnView", "STATIC"]

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
