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
import json
import sys
from typing import Any, TextIO

from ..core.chars import mend_surrogates
from ..core.redact import cut_from_frame, secret_values
from ..core.turn import Turn
from ..wire.capture import Exchange, Wire
from .model import event_row
from .text import printable

__all__ = ["render_wire_html", "render_wire_text", "frame_payload", "show_wire", "register_formatters"]

LINE_LIMIT = 400  # characters of one raw line shown before it is cut with a note
FRAME_LIMIT = 500  # frames of one request shown (a long answer has tens of thousands), as the events table


def _more(n: int) -> str:
    return f"… {n:,} more frames not shown (turn.wire has them all; turn.save_wire(path) writes the stream)"

# The wire's own stylesheet, scoped under .mmsp-wire, one class more specific than JupyterLab's
# rendered-HTML rules (right-aligned cells, padding, borders): a compact monospaced table of fixed
# columns (ms narrow, the frame and its events sharing the rest) in a box that scrolls, each raw
# frame on its own lines (never wrapped mid-token: it scrolls sideways), colours from the theme.
_W = ".mmsp-wire.mmsp-static"
_WIRE_CSS = (
    f"{_W}{{--w-fg:var(--jp-ui-font-color1,#1f1f1f);--w-muted:color-mix(in srgb,var(--w-fg) 76%,transparent);"
    "--w-bg2:var(--jp-layout-color2,#f0f0f0);--w-border:var(--jp-border-color1,#bdbdbd);"
    "font-family:var(--jp-content-font-family,system-ui,sans-serif);color:var(--w-fg);"
    "font-size:12px;line-height:1.4;max-width:100%;margin:0}"
    f"@media (prefers-color-scheme:dark){{{_W}{{--w-fg:var(--jp-ui-font-color1,#e6e6e6);"
    "--w-bg2:var(--jp-layout-color2,#2a2a2a);--w-border:var(--jp-border-color1,#555)}}"
    f"[data-jp-theme-light=true] {_W}{{--w-fg:var(--jp-ui-font-color1,#1f1f1f);--w-bg2:var(--jp-layout-color2,#f0f0f0)}}"
    f"[data-jp-theme-light=false] {_W}{{--w-fg:var(--jp-ui-font-color1,#e6e6e6);--w-bg2:var(--jp-layout-color2,#2a2a2a)}}"
    f"{_W} .mmsp-wire-head{{color:var(--w-muted);margin:4px 0 2px;overflow-wrap:anywhere}}"
    f"{_W} .mmsp-wire-scroll{{max-height:420px;overflow:auto;border:1px solid var(--w-border);border-radius:4px}}"
    f"{_W} table{{border-collapse:collapse;table-layout:fixed;width:100%;min-width:36em;margin:0;font-size:inherit;"
    "color:inherit}"
    f"{_W} :is(th,td){{text-align:left;vertical-align:top;padding:1px 6px;border:0;"
    "border-bottom:1px solid var(--w-border);max-width:none;line-height:inherit;white-space:normal;background:none}"
    f"{_W} thead th{{position:sticky;top:0;z-index:1;background:var(--w-bg2);font-weight:600}}"
    f"{_W} tbody tr:is(:nth-child(n),:hover){{background:none}}"
    f"{_W} :is(pre,code){{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:inherit;"
    "background:none;color:inherit;padding:0;margin:0;border:0}"
    f"{_W} pre{{white-space:pre;overflow:auto;max-height:8.5em}}"
    f"{_W} .mmsp-ms{{font-family:var(--jp-code-font-family,ui-monospace,monospace);text-align:right;"
    "white-space:nowrap;color:var(--w-muted)}"
    f"{_W} .mmsp-ev{{display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}}"
    f"{_W} .mmsp-ev b{{font-weight:600}}"
    f"{_W} tr.mmsp-quiet td{{color:var(--w-muted)}}"
    f"{_W} .mmsp-warn{{background:color-mix(in srgb,var(--jp-warn-color0,#e65100) 12%,transparent);"
    "border-left:4px solid var(--jp-warn-color0,#e65100);padding:.3em .6em;border-radius:4px}"
)


def _e(value: Any) -> str:
    """``value`` escaped for HTML, each lone surrogate (which no page can carry) as U+FFFD."""
    return html.escape(mend_surrogates("" if value is None else str(value)), quote=True)


def _cut(raw: str, limit: int = LINE_LIMIT) -> str:
    """The frame's text with each over-long line (base64 media) cut, saying how much was left out."""
    out = []
    for line in raw.rstrip("\r\n").split("\n"):
        if len(line) > limit:
            keep = limit // 2
            line = f"{line[:keep]}… [{len(line):,} characters, {len(line) - keep - 40:,} not shown] …{line[-40:]}"
        out.append(line)
    return "\n".join(out)


#: what a raw frame shows when it carries part of a configured key that could not be cut out of it
HIDDEN_FRAME = "[this frame carries part of a configured key: not shown]"


def _shown_row(row: dict[str, Any], streamed: dict[str, str], secrets: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """A wire row as shown: its raw frame and its events as rows of the events table (``type``,
    ``event_type``, ``preview``), configured keys redacted. ``streamed``: the redaction state of
    the exchange's events, shown in order (see ``event_row``): a key split across frames is
    redacted in each event, and the piece of it a frame's JSON carries is cut out of the frame
    (the whole frame is hidden where the piece is not found as written). ``secrets``: read once per
    rendering (:func:`~mmsp_notebook.core.redact.secret_values`)."""
    changed: list[tuple[str, str]] = []
    rows = [event_row(ev["n"], ev["ms"], ev["event"], streamed, changed, secrets) for ev in row["events"]]
    raw = cut_from_frame(row["raw"], changed)
    return (HIDDEN_FRAME, rows) if raw is None else (raw, rows)


def _head(exchange: Exchange) -> str:
    record = exchange.record
    return (f"step {exchange.step + 1} · {record.method} {record.endpoint} · HTTP {record.status} · "
            f"{record.protocol} · {len(record.response):,} bytes · {len(exchange.frames)} frames · "
            f"{len(exchange.events)} UniEvents · {record.outcome}")


def render_wire_html(wire: Wire) -> str:
    """The wire as a sanitized HTML table (every model or server string escaped)."""
    parts = [f'<div class="mmsp-static mmsp-wire"><style>{_WIRE_CSS}</style>']
    secrets = secret_values()
    if not wire.exchanges:
        parts.append('<div class="mmsp-warn">no request went through the wire proxy for this turn</div></div>')
        return "".join(parts)
    for exchange in wire.exchanges:
        head = _head(exchange)
        if exchange.events:
            head += f" · paired by {exchange.rule}"
        parts.append(f'<div class="mmsp-wire-head"><b>wire</b> {_e(head)}</div>')
        parts.append('<div class="mmsp-wire-scroll" tabindex="0" role="region" aria-label="wire frames">'
                     '<table><colgroup><col style="width:5.5em"/><col style="width:55%"/><col/></colgroup>'
                     '<thead><tr><th scope="col">ms</th><th scope="col">raw SSE frame</th>'
                     '<th scope="col">→ UniEvent(s)</th></tr></thead><tbody>')
        streamed: dict[str, str] = {}
        count = 0
        for row in wire:
            if row["request"] != exchange.record.id:
                continue
            count += 1
            if count > FRAME_LIMIT:
                continue
            quiet = ' class="mmsp-quiet"' if not row["events"] else ""
            ms = "" if row["ms"] is None else f"{row['ms']:.1f}"
            raw, rows = _shown_row(row, streamed, secrets)
            events = "".join(
                f'<span class="mmsp-ev" title="{_e(ev["preview"])}"><b>{_e(ev["type"] or ev["event_type"])}</b> '
                f'<code>{_e(ev["preview"])}</code></span>' for ev in rows)
            parts.append(f'<tr{quiet}><td class="mmsp-ms">{_e(ms)}</td><td><pre>{_e(_cut(raw))}</pre></td>'
                         f"<td>{events}</td></tr>")
        parts.append("</tbody></table></div>")
        if count > FRAME_LIMIT:
            parts.append(f'<div class="mmsp-wire-head">{_e(_more(count - FRAME_LIMIT))}</div>')
    parts.append("</div>")
    return "".join(parts)


def _leaves(value: Any, path: str = "", depth: int = 0) -> list[tuple[int, str, str]]:
    """The non-empty leaves of a JSON value as ``(depth, dotted path, value as JSON)``."""
    if isinstance(value, dict):
        return [leaf for key, v in value.items() for leaf in _leaves(v, f"{path}.{key}" if path else str(key), depth + 1)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v, path, depth + 1)]
    if value is None or value == "":
        return []
    return [(depth, path or "data", json.dumps(value, ensure_ascii=False))]


def frame_payload(raw: str) -> str:
    """What a frame carries, for one line of text: its ``event:`` name, then its ``data:`` payload.

    A JSON payload is shown as its non-empty leaves, the deepest first (``delta.content="Hi"``
    before the envelope's ``id``, ``model``, ``created``), so the content of every provider's frame
    shows within a line's width; anything else as it came.
    """
    event, data = "", []
    for line in raw.rstrip("\r\n").split("\n"):
        line = line.rstrip("\r")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif not line.startswith(("id:", "retry:")):
            data.append(line)  # a comment, or a body that is not SSE (an error's JSON)
    payload = "\n".join(data)
    try:
        parsed = json.loads(payload) if payload[:1] in ("{", "[") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, (dict, list)):
        # deepest first, a "type" after its siblings (stable: the rest keeps its order)
        leaves = sorted(_leaves(parsed), key=lambda leaf: (-leaf[0], leaf[1].rsplit(".", 1)[-1] == "type"))
        payload = " ".join(f"{path}={value}" for _, path, value in leaves) or payload
    payload = payload.replace("\n", " ⏎ ")
    return f"[{event}] {payload}" if event else payload


def render_wire_text(wire: Wire, width: int = 100) -> str:
    """The wire as plain text: one line per frame (its payload, content first), its events below it."""
    lines = []
    secrets = secret_values()
    for exchange in wire.exchanges:
        record = exchange.record
        lines.append(f"-- step {exchange.step + 1}: {record.method} {record.endpoint} HTTP {record.status} "
                     f"{record.protocol} {len(record.response)} bytes, {len(exchange.frames)} frames, "
                     f"{len(exchange.events)} UniEvents ({exchange.rule or 'not paired'})")
        streamed: dict[str, str] = {}
        count = 0
        for row in wire:
            if row["request"] != record.id:
                continue
            count += 1
            if count > FRAME_LIMIT:
                continue
            raw, rows = _shown_row(row, streamed, secrets)
            shown = frame_payload(raw)
            if len(shown) > width:
                shown = shown[:width - 1] + "…"
            ms = "" if row["ms"] is None else f"{row['ms']:8.1f}"
            lines.append(f"{ms:>8}  {shown}")
            for ev in rows:
                lines.append(f"{'':>8}    → {ev['type'] or ev['event_type']} {ev['preview'][:width - 20]}")
        if count > FRAME_LIMIT:
            lines.append(_more(count - FRAME_LIMIT))
    return printable("\n".join(lines)) if lines else "<Wire: no request captured>"


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
