"""What a finished turn leaves in a cell: its static rendering, or only its summary where the live
view already drew it."""

from __future__ import annotations

from ..core.turn import Turn

__all__ = ["running_cell", "turn_bundle"]


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
    from .html import render_html, render_text

    return {"text/plain": render_text(turn), "text/html": render_html(turn)}
