"""What a finished turn leaves in a cell: its static rendering, or only its summary where the live
view already drew it.

Jupyter shows a :class:`~mmsp_notebook.Turn` through the formatter :func:`register_formatters` gives
the running IPython shell (every front door loads this module, and the extension registers it when
loaded), so the core's result object never imports a view.
"""

from __future__ import annotations

import sys
from typing import Any

from ..core.turn import Turn

__all__ = ["running_cell", "turn_bundle", "register_formatters"]


def running_cell() -> int | None:
    """The execution count of the cell IPython runs now (``None`` outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return getattr(get_ipython(), "execution_count", None)


def turn_bundle(turn: Turn) -> dict[str, str]:
    """The mime bundle of a turn shown as a value: sanitized HTML and text, or the summary line
    when the live view drew this turn in the running cell."""
    if turn.drawn_in_cell is not None and running_cell() == turn.drawn_in_cell:
        return {"text/plain": turn.summary()}
    from .html import render_html
    from .model import view_model
    from .text import PLAIN_TEXT_LIMIT, render_text

    vm = view_model(turn)  # once for both: it redacts each whole text, a long answer's
    return {"text/plain": render_text(turn, vm, limit=PLAIN_TEXT_LIMIT), "text/html": render_html(turn, vm)}


def register_formatters(shell: Any = None) -> bool:
    """Have IPython show a :class:`Turn` as :func:`turn_bundle` says; returns whether a shell took it."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    formatter = getattr(getattr(shell, "display_formatter", None), "mimebundle_formatter", None)
    if formatter is None:
        return False
    formatter.for_type(Turn, turn_bundle)
    return True
