"""A comparison in columns: several turns side by side, live and static, the best of each figure marked.

Each column is the project's turn view (the same view model, HTML and widget renderer as one
``%%mmsp`` turn); under the columns a table of figures lines the models up — status, TTFT, total
time, tokens/s, tokens per bucket, cost — with the best of each marked. Live, one
:class:`CompareView` widget holds every column and gets one message per repaint for all of them,
so the front end sees at most the pacer's rate in total, whatever the number of models.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ..core.pricing import format_cost
from ..core.turn import Turn
from . import format as fmt
from .html import styled, turn_markup
from .live import LiveView
from .model import OpsTracker, view_model
from .static import running_cell
from .text import PLAIN_TEXT_LIMIT, render_text
from .unusual import finish_stat

__all__ = ["figures", "render_comparison_html", "render_comparison_text", "comparison_bundle", "ColumnsLive",
           "ColumnsText", "COMPARE_CSS"]


def _read_css() -> str:
    from .widget import STATIC

    try:
        return (STATIC / "compare.css").read_text(encoding="utf-8").strip()
    except OSError:  # pragma: no cover - a broken install; the columns still show, unstyled
        return ""


COMPARE_CSS = _read_css()


def _usage(turn: Turn, bucket: str) -> int | None:
    return (turn.usage or {}).get(bucket)


def _finish(reason: Any) -> str:
    """A finish reason in the figures table: as the footer says it (``⚠`` for one that is not a
    normal end), without the footer's ``finish:``."""
    if reason is None:
        return "–"
    key, text, _tooltip = finish_stat(reason)
    return text.removeprefix("finish: ") if key == "finish" else text.replace("⚠ finish: ", "⚠ ", 1)


def _tokens(v: Any) -> str:
    return fmt.integer(v) if v is not None else "–"


# the figures table: label, value of a turn, which is best (min/max/None), how it is written
_FIGURES: list[tuple[str, Callable[[Turn], Any], Callable[..., Any] | None, Callable[[Any], str]]] = [
    ("status", lambda t: t.status, None, str),
    ("finish", lambda t: _finish(t.finish_reason), None, str),
    ("TTFT", lambda t: t.timings["ttft"], min, lambda v: fmt.seconds(v) if v is not None else "–"),
    ("total", lambda t: t.timings["total"], min, lambda v: fmt.seconds(v) if v is not None else "–"),
    ("tokens/s", lambda t: t.timings["tokens_per_second"], max, lambda v: fmt.fixed(v, 1) if v is not None else "–"),
    ("prompt tokens", lambda t: _usage(t, "prompt_tokens"), None, _tokens),
    ("cached tokens", lambda t: _usage(t, "cached_tokens"), None, _tokens),
    ("thoughts tokens", lambda t: _usage(t, "thoughts_tokens"), min, _tokens),
    ("response tokens", lambda t: _usage(t, "response_tokens"), None, _tokens),
    ("cost", lambda t: t.cost, min, format_cost),
]


def figures(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """The rows of the figures table: ``{"label", "cells": [text...], "best": [column...]}``; the best of a
    figure is marked among the models that completed uncut (not at the token limit: ``finish_reason`` ``length``;
    nor stopped at ``--max-steps`` with tool calls pending), only when at least two have it and they differ."""
    rows = []
    for label, value_of, best_of, write in _FIGURES:
        values = [value_of(t) for t in turns]
        best: list[int] = []
        if best_of is not None:
            known = [(v, i) for i, (v, t) in enumerate(zip(values, turns))
                     if v is not None and t.status == "complete" and t.finish_reason != "length"
                     and not t.max_steps_reached]
            if len(known) >= 2 and len({v for v, _ in known}) > 1:
                target = best_of(v for v, _ in known)
                best = [i for v, i in known if v == target]
        rows.append({"label": label, "cells": [write(v) for v in values], "best": best})
    return rows


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def render_comparison_html(labels: Sequence[str], turns: Sequence[Turn]) -> str:
    """The comparison as sanitized HTML: a column per model (each the static turn view), then the figures;
    one stylesheet for all of it."""
    parts = ['<div class="mmsp-root mmsp-static mmsp-compare"><div class="mmsp-columns">']
    for label, turn in zip(labels, turns):
        parts.append(f'<section class="mmsp-column" aria-label="{_e(label)}"><div class="mmsp-column-head" dir="auto">{_e(label)}</div>'
                     f"{turn_markup(view_model(turn))}</section>")
    parts.append('</div><div class="mmsp-compare-figures"><table><thead><tr><th></th>')
    parts.extend(f'<th dir="auto">{_e(label)}</th>' for label in labels)
    parts.append("</tr></thead><tbody>")
    for row in figures(turns):
        parts.append(f"<tr><td>{_e(row['label'])}</td>")
        for i, cell in enumerate(row["cells"]):
            if i in row["best"]:
                parts.append(f'<td class="mmsp-best" title="best">★ {_e(cell)}</td>')
            else:
                parts.append(f"<td>{_e(cell)}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table></div></div>")
    compare_css = COMPARE_CSS.replace(".mmsp-root ", ".mmsp-root.mmsp-static ")
    return f"<style>{compare_css}</style>" + styled("".join(parts))


def render_comparison_text(labels: Sequence[str], turns: Sequence[Turn], limit: int | None = None) -> str:
    """The comparison as text: each model's turn under its name, then the figures (best marked ``*``)."""
    out = []
    for label, turn in zip(labels, turns):
        out.append(f"── {fmt.isolate(label)} " + "─" * max(0, 60 - len(label)))
        out.append(render_text(turn, limit=limit))
    rows = figures(turns)
    width = max(len(r["label"]) for r in rows)
    cols = [max(len(label), *(len(r["cells"][i]) + 2 for r in rows)) for i, label in enumerate(labels)]
    out.append("")
    out.append(" " * width + "  " + "  ".join(fmt.isolate(label).rjust(w) for label, w in zip(labels, cols)))
    for row in rows:
        cells = [("* " if i in row["best"] else "") + cell for i, cell in enumerate(row["cells"])]
        out.append(row["label"].ljust(width) + "  " + "  ".join(c.rjust(w) for c, w in zip(cells, cols)))
    return "\n".join(out)


def comparison_bundle(comparison: Any) -> dict[str, str]:
    """The mime bundle of a comparison shown as a value (only its summary where it was drawn live)."""
    if comparison.drawn_in_cell is not None and running_cell() == comparison.drawn_in_cell:
        return {"text/plain": comparison.summary()}
    return {"text/plain": render_comparison_text(comparison.labels, comparison.turns, limit=PLAIN_TEXT_LIMIT),
            "text/html": render_comparison_html(comparison.labels, comparison.turns)}


class ColumnsLive(LiveView):
    """The live comparison in Jupyter: one widget, one message per repaint for every column, then the
    static rendering in its place."""

    def __init__(self) -> None:
        self.widget: Any = None
        self.handle: Any = None
        self.trackers: list[OpsTracker] = []

    def start(self, comparison: Any) -> None:
        from IPython.display import display

        from .widget import CompareView

        self.trackers = [OpsTracker() for _ in comparison.turns]
        self.widget = CompareView(source=comparison, trackers=self.trackers)
        ref = {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}
        bundle = {"application/vnd.jupyter.widget-view+json": ref, "text/plain": "<mmsp comparison: streaming…>"}
        self.handle = display(bundle, raw=True, display_id=True)

    def update(self, comparison: Any, final: bool = False) -> None:
        cols = [[i, ops] for i, (tracker, turn) in enumerate(zip(self.trackers, comparison.turns))
                if (ops := tracker.ops(turn, final=final))]
        if cols:
            self.widget.push(cols)

    def finish(self, comparison: Any) -> None:
        self.update(comparison, final=True)
        self.handle.update({"text/html": render_comparison_html(comparison.labels, comparison.turns),
                            "text/plain": render_comparison_text(comparison.labels, comparison.turns, limit=PLAIN_TEXT_LIMIT)},
                           raw=True)


class ColumnsText(LiveView):
    """A comparison in a terminal: a line as each model ends, then every answer and the figures."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.reported: set[int] = set()

    def update(self, comparison: Any) -> None:
        for i, (label, turn) in enumerate(zip(comparison.labels, comparison.turns)):
            if i not in self.reported and turn.status != "streaming":
                self.reported.add(i)
                self.stream.write(f"[{fmt.isolate(label)}] {turn.status}\n")
        self.stream.flush()

    def finish(self, comparison: Any) -> None:
        self.update(comparison)
        self.stream.write(render_comparison_text(comparison.labels, comparison.turns) + "\n")
        self.stream.flush()
