"""The wire view: the raw SSE frames of a turn next to the UniEvents they became, below the turn.

A :class:`~mmsp_notebook.wire.capture.Wire` is data; this module draws it: an HTML table
(``ms | raw SSE frame | → UniEvent(s)``, every server or model string escaped) or plain text, each
event shown as a row of the events table (:func:`~mmsp_notebook.views.model.event_row`).
:func:`show_wire` shows a turn's wire below its live view. Jupyter shows a wire (``turn.wire`` as a
cell's value) through the formatters this module registers with the running IPython shell when it
is loaded (every front door that captures a wire loads it), so the wire package never imports a view.
"""

from __future__ import annotations

import html
import sys
from typing import Any, TextIO

from ..core.turn import Turn
from ..wire.capture import Exchange, Wire
from .model import event_row

__all__ = ["render_wire_html", "render_wire_text", "show_wire", "register_formatters"]

LINE_LIMIT = 400  # characters of one raw line shown before it is cut with a note

# The wire's own stylesheet, scoped under .mmsp-wire (a turn's static view has the widget's).
_WIRE_CSS = (
    ".mmsp-wire{font-family:var(--jp-content-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,inherit);"
    "line-height:1.5;max-width:100%}"
    ".mmsp-wire pre{background:var(--jp-layout-color2,#f5f5f5);padding:.4em;overflow:auto;white-space:pre-wrap}"
    ".mmsp-wire table{border-collapse:collapse}.mmsp-wire td,.mmsp-wire th{border:1px solid "
    "var(--jp-border-color2,#ccc);padding:2px 6px}"
    ".mmsp-wire .mmsp-warn{background:var(--jp-warn-color3,#fff3cd);padding:.3em .6em;border-radius:4px}"
    ".mmsp-wire .mmsp-muted{color:var(--jp-ui-font-color2,#666)}"
    ".mmsp-wire table{font-size:.85em;width:100%}.mmsp-wire td{vertical-align:top}"
    ".mmsp-wire pre{margin:0;max-height:12em}.mmsp-wire .mmsp-ev{white-space:nowrap}"
    ".mmsp-wire tr.mmsp-quiet td{color:var(--jp-ui-font-color2,#888)}"
)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cut(raw: str, limit: int = LINE_LIMIT) -> str:
    """The frame's text with each over-long line (base64 media) cut, saying how much was left out."""
    out = []
    for line in raw.rstrip("\r\n").split("\n"):
        if len(line) > limit:
            keep = limit // 2
            line = f"{line[:keep]}… [{len(line):,} characters, {len(line) - keep - 40:,} not shown] …{line[-40:]}"
        out.append(line)
    return "\n".join(out)


def _event_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a wire row as rows of the events table (``type``, ``event_type``, ``preview``)."""
    return [event_row(ev["n"], ev["ms"], ev["event"]) for ev in row["events"]]


def _head(exchange: Exchange) -> str:
    record = exchange.record
    return (f"step {exchange.step + 1} · {record.method} {record.endpoint} · HTTP {record.status} · "
            f"{record.protocol} · {len(record.response):,} bytes · {len(exchange.frames)} frames · "
            f"{len(exchange.events)} UniEvents · {record.outcome}")


def render_wire_html(wire: Wire) -> str:
    """The wire as a sanitized HTML table (every model or server string escaped)."""
    parts = [f'<div class="mmsp-static mmsp-wire"><style>{_WIRE_CSS}</style>']
    if not wire.exchanges:
        parts.append('<div class="mmsp-warn">no request went through the wire proxy for this turn</div></div>')
        return "".join(parts)
    for exchange in wire.exchanges:
        head = _head(exchange)
        if exchange.events:
            head += f" · paired by {exchange.rule}"
        parts.append(f'<div class="mmsp-muted"><b>wire</b> {_e(head)}</div>')
        parts.append("<table><thead><tr><th>ms</th><th>raw SSE frame</th><th>→ UniEvent(s)</th></tr></thead><tbody>")
        for row in wire:
            if row["request"] != exchange.record.id:
                continue
            quiet = ' class="mmsp-quiet"' if not row["events"] else ""
            ms = "" if row["ms"] is None else f"{row['ms']:.1f}"
            events = "<br/>".join(
                f'<span class="mmsp-ev"><b>{_e(ev["type"] or ev["event_type"])}</b></span> '
                f'<code>{_e(ev["preview"])}</code>' for ev in _event_rows(row))
            parts.append(f"<tr{quiet}><td>{_e(ms)}</td><td><pre>{_e(_cut(row['raw']))}</pre></td>"
                         f"<td>{events}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)


def render_wire_text(wire: Wire, width: int = 100) -> str:
    """The wire as plain text: one line per frame, its events below it."""
    lines = []
    for exchange in wire.exchanges:
        record = exchange.record
        lines.append(f"-- step {exchange.step + 1}: {record.method} {record.endpoint} HTTP {record.status} "
                     f"{record.protocol} {len(record.response)} bytes, {len(exchange.frames)} frames, "
                     f"{len(exchange.events)} UniEvents ({exchange.rule or 'not paired'})")
        for row in wire:
            if row["request"] != record.id:
                continue
            raw = _cut(row["raw"], width).replace("\n", " ⏎ ")
            ms = "" if row["ms"] is None else f"{row['ms']:8.1f}"
            lines.append(f"{ms:>8}  {raw[:width]}")
            for ev in _event_rows(row):
                lines.append(f"{'':>8}    → {ev['type'] or ev['event_type']} {ev['preview'][:width - 20]}")
    return "\n".join(lines) if lines else "<Wire: no request captured>"


def _pretty(wire: Wire, printer: Any, cycle: bool) -> None:
    printer.text(render_wire_text(wire))


def register_formatters(shell: Any = None) -> bool:
    """Have IPython show a :class:`Wire` as its HTML table (and its text); returns whether a shell took them."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters:
        return False
    formatters["text/html"].for_type(Wire, render_wire_html)
    formatters["text/plain"].for_type(Wire, _pretty)
    return True


def show_wire(turn: Turn, html_output: bool, stream: TextIO | None = None) -> None:
    """Show ``turn.wire`` below the live view: an HTML table in Jupyter, text otherwise.

    The engine captures the wire before the turn's future resolves, so it is there once the turn
    has ended; a turn stopped before it could end has none, and nothing is shown.
    """
    wire = turn.wire
    if wire is None:
        return
    if html_output:
        from IPython.display import display

        register_formatters()
        display({"text/html": render_wire_html(wire), "text/plain": render_wire_text(wire)}, raw=True)
    else:
        out = stream or sys.stdout
        out.write(render_wire_text(wire) + "\n")
        out.flush()


register_formatters()
