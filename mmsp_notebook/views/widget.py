"""The anywidgets: :class:`TurnView` (the live view of ``%%mmsp``) and the bundled front end files."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import anywidget
import traitlets

__all__ = ["TurnView", "CompareView", "MarkdownWidget", "STATIC", "KATEX_JS", "math_code"]

STATIC = Path(__file__).resolve().parent.parent / "static"
#: The math renderer (KaTeX, built from js/src/katex.js): not in the widget bundles, sent on request
KATEX_JS = STATIC / "katex.js"

# what may open a formula, in text a turn streams (a price too: it only makes the offer early)
_MATH_OPENER = re.compile(r"\$[^\s$]|\\[(\[]")


@lru_cache(maxsize=1)
def math_code() -> bytes:
    """The bytes of ``static/katex.js``."""
    return KATEX_JS.read_bytes()


class MarkdownWidget(anywidget.AnyWidget):
    """An anywidget whose front end draws Markdown: it serves the math renderer to the page.

    The front end asks ``{"type": "math_code"}`` the first time it draws a formula and gets
    ``{"type": "math_code", "bytes": n}`` with ``static/katex.js`` in a binary buffer (or an
    ``error`` and no buffer). It is a message, never a synced trait, so a saved notebook's widget
    state does not carry it. The page keeps the module, so it is asked for once per page (see
    ``js/src/math.js``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._math_offered = False
        self.on_msg(self._answer_math_code)

    def _answer_math_code(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "math_code":
            self.send_math_code()

    def send_math_code(self) -> None:
        """Send ``static/katex.js`` to the front end (``Widget.send``: ``Chat.send`` is a chat message)."""
        try:
            code = math_code()
        except OSError as exc:
            anywidget.AnyWidget.send(self, {"type": "math_code", "error": f"{type(exc).__name__}: {exc}"})
            return
        self._math_offered = True
        anywidget.AnyWidget.send(self, {"type": "math_code", "bytes": len(code)}, buffers=[code])

    def _offer_math_code(self, ops: Any) -> None:
        """Send the math renderer unasked the first time streamed text may hold a formula.

        While a cell runs (the ``%%mmsp`` magic, a comparison) the kernel reads no message from the
        front end, so a request would be answered only when the turn is over; it sends it with the
        ops instead, once for this widget.
        """
        if not self._math_offered and _has_opener(ops):
            self.send_math_code()


def _has_opener(ops: Any) -> bool:
    if isinstance(ops, str):
        return _MATH_OPENER.search(ops) is not None
    if isinstance(ops, (list, tuple)):
        return any(_has_opener(op) for op in ops)
    if isinstance(ops, dict):
        return any(_has_opener(v) for v in ops.values())
    return False


class TurnView(MarkdownWidget):
    """One assistant turn drawn live: Python sends only what changed (``ops``), coalesced.

    A view that appears mid-stream says ``hello`` and is answered with a snapshot of the turn so
    far; :meth:`reset` starts every view over for the next turn (see ``js/PROTOCOL.md``).
    """

    _esm = STATIC / "turn.js"
    _css = STATIC / "widget.css"

    def __init__(self, source: Any = None, tracker: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._source = source  # the Turn, for snapshots
        self._tracker = tracker  # what the views have been sent of it (the OpsTracker of the ops pushed)
        self.sent_bytes = 0
        self.on_msg(self._on_front_end_msg)

    def _snapshot(self) -> dict[str, Any]:
        """The turn as far as the ops pushed have drawn it: the ops to come continue it."""
        from .model import view_model

        source = self._source
        return {"type": "snapshot", "turn": self._tracker.view(source) if self._tracker is not None else view_model(source)}

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "hello" and self._source is not None:
            self.send(self._snapshot())

    def reset(self, source: Any, tracker: Any = None) -> None:
        """Show another turn (``tracker``: the OpsTracker of the ops pushed for it): views still on
        the page start over from its (empty) snapshot."""
        self._source, self._tracker = source, tracker
        self.send(self._snapshot())

    def push(self, ops: list[Any]) -> None:
        if ops:
            self._offer_math_code(ops)
            self.send({"type": "ops", "ops": ops})


class CompareView(MarkdownWidget):
    """Several turns drawn live side by side (a comparison): one message per repaint for every column.

    ``source`` is the comparison (``labels`` and ``turns``); a view that appears mid-stream says
    ``hello`` and gets a snapshot of every column.
    """

    _esm = STATIC / "compare.js"
    _css = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("widget.css", "compare.css"))

    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, source: Any = None, trackers: Any = None, **kwargs: Any) -> None:
        super().__init__(labels=list(getattr(source, "labels", []) or []), **kwargs)
        self._source = source
        self._trackers = trackers  # the OpsTracker of each column's ops pushed, when they stream
        self.sent_bytes = 0
        self.on_msg(self._on_front_end_msg)

    def _snapshot(self) -> dict[str, Any]:
        """Every column as far as the ops pushed have drawn it: the ops to come continue it."""
        from .model import view_model

        source, trackers = self._source, self._trackers
        turns = [trackers[i].view(t) if trackers else view_model(t) for i, t in enumerate(source.turns)]
        return {"type": "snapshot", "labels": list(source.labels), "turns": turns}

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "hello" and self._source is not None:
            self.send(self._snapshot())

    def push(self, cols: list[Any]) -> None:
        """The ops of the columns that changed, ``[[column, ops], ...]``, in one message."""
        if cols:
            self._offer_math_code(cols)
            self.send({"type": "ops", "cols": cols})
