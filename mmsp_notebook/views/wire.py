"""The wire view: the raw SSE frames of a turn next to the UniEvents they became, below the turn."""

from __future__ import annotations

import time
from typing import Any

from ..wire.capture import render_wire_html, render_wire_text

__all__ = ["show_wire"]


def show_wire(turn: Any, html_output: bool, stream: Any = None) -> None:
    """Show ``turn.wire`` below the live view: an HTML table in Jupyter, text otherwise."""
    deadline = time.monotonic() + 3.0
    while turn.wire is None and getattr(turn, "_wire_source", None) is not None:
        if time.monotonic() > deadline:  # the capture runs on the worker loop right after the turn
            break
        time.sleep(0.01)
    wire = turn.wire
    if wire is None:
        return
    if html_output:
        from IPython.display import display

        display({"text/html": render_wire_html(wire), "text/plain": render_wire_text(wire)}, raw=True)
    else:
        import sys

        out = stream or sys.stdout
        out.write(render_wire_text(wire) + "\n")
        out.flush()
