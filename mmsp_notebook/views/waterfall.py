"""The timing waterfall of one recorded turn: bars on a common axis from its timing sidecar records.

Each step (assistant message) of the turn: the wait for the first token, each item from its first
delta to its ``.done`` (one cut off mid-stream ends where the stream did); between two steps, the
tools that ran. :func:`waterfall` is its view model (every number written out, bar positions in
percent); the explorer's front end (``js/src/explore.js``) and :func:`waterfall_html` draw it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from ..core.fields import record_status
from ..core.redact import held_secrets, redact
from . import format as fmt

__all__ = ["waterfall", "waterfall_html", "number", "stop_ms"]


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def number(value: Any) -> float | None:
    """A finite number as a float, else None."""
    return float(value) if fmt.is_number(value) else None


def stop_ms(record: Mapping[str, Any]) -> float | None:
    """When a sidecar record's stream stopped (ms since its request): its stop event, else its total."""
    for event in fmt.listed(record.get("events")):
        if isinstance(event, list) and len(event) >= 2 and event[1] == "stop" and fmt.is_number(event[0]):
            return float(event[0])
    return number(record.get("total_ms"))


def waterfall(conversation: Mapping[str, Any], key: str, index: int | None = None) -> dict[str, Any] | None:
    """The timing of one turn, as bars on a common axis (ms since its first request), from its
    sidecar records: for each step (assistant message), waiting for the first token, each item from
    its first delta to its ``.done`` (one cut off mid-stream ends where the stream did); between
    steps, the tools that ran. Bars of the message at history ``index`` are marked ``selected``;
    each bar has the ``step`` it belongs to (0-based; the tools run after a step count with it).
    None when no step has a sidecar record."""
    turn, records = conversation.get("turns", {}).get(key, (None, []))
    timed = [(i, r) for i, r in records if r and number(r.get("started_at")) is not None]
    if not timed and len(records) == 1 and records[0][1]:
        timed = [records[0]]  # a failed response without a start time: its own axis
    if not timed:
        return None
    origin = number(timed[0][1].get("started_at")) or 0.0
    names = iter(it.name for it in turn.items if it.kind == "tool_call") if turn is not None else iter(())
    runs = {it.tool_call_id: it for it in turn.items if it.kind == "tool_call"} if turn is not None else {}
    bars: list[dict[str, Any]] = []
    steps = len(records) > 1
    status = ""
    end = 0.0
    for k, (index_k, rec) in enumerate(records):
        if not rec:
            continue
        base = (number(rec.get("started_at")) or origin) - origin
        mark = index is not None and index_k == index
        first_bar = len(bars)
        prefix = f"step {k + 1} · " if steps else ""
        events = [(float(e[0]), e[1]) for e in fmt.listed(rec.get("events")) if isinstance(e, list) and len(e) >= 2
                  and fmt.is_number(e[0]) and isinstance(e[1], str)]
        total = number(rec.get("total_ms")) or (max((ms for ms, _ in events), default=0.0))
        first = next((ms for ms, kind in events if kind.endswith(".delta")), number(rec.get("ttft_ms")))
        if first is not None:
            bars.append(_bar("wait", f"{prefix}waiting for the first token", base, base + first, mark))
        open_: tuple[str, float] | None = None
        for ms, kind in events:
            item, _, phase = kind.rpartition(".")
            if phase == "delta" and open_ is None:
                open_ = (item, ms)
            elif phase == "done" and open_ is not None:
                label = f"tool call {fmt.isolate(next(names, ''))}".rstrip() if item == "tool_call" else fmt.isolate(item)
                bars.append(_bar(item, prefix + label, base + open_[1], base + ms, mark))
                open_ = None
        status = record_status(rec)  # (as the loaders' status column says it)
        if open_ is not None:
            bars.append(_bar(open_[0], f"{prefix}{fmt.isolate(open_[0])} (cut off: {fmt.isolate(status)})", base + open_[1],
                             base + max(total, open_[1]), mark))
        end = max(end, base + total)
        if k + 1 < len(records) and records[k + 1][1] and turn is not None:
            nxt = (number(records[k + 1][1].get("started_at")) or origin) - origin
            ran = [it.name for it in turn.steps[k].items if it.kind == "tool_call" and runs.get(it.tool_call_id)
                   and runs[it.tool_call_id].tool_run is not None] if k < len(turn.steps) else []
            if ran and nxt >= base + total:
                bars.append(_bar("tool_run", f"tool runs: {', '.join(map(fmt.isolate, ran))}", base + total, nxt, mark))
        for b in bars[first_bar:]:  # (the tools run after a step count with it)
            b["step"] = k
    scale = max([end] + [b["end"] for b in bars]) or 1.0
    for b in bars:
        b["left"] = round(100.0 * b["start"] / scale, 2)
        b["width"] = round(max(100.0 * (b["end"] - b["start"]) / scale, 0.4), 2)
    ticks = [{"left": round(100.0 * t / scale, 2), "text": fmt.seconds(t / 1000.0)} for t in _ticks(scale)]
    summary = [f"total {fmt.seconds(end / 1000.0)}" if end else "", status if status != "complete" else "",
               f"{len(records)} steps" if steps else ""]
    with held_secrets():  # (a tool's name or a status as a sidecar holds it: redacted as the turn view redacts them)
        for b in bars:
            b["label"] = redact(b["label"])
        return {"key": key, "status": redact(status), "bars": bars, "ticks": ticks,
                "summary": redact(" · ".join(s for s in summary if s))}


def _bar(kind: str, label: str, start: float, end: float, selected: bool = False) -> dict[str, Any]:
    end = max(end, start)
    return {"kind": kind if re.fullmatch(r"[a-z_]+", kind) else "data", "label": label, "start": start, "end": end,
            "selected": selected,
            "text": f"{fmt.seconds(start / 1000.0)} → {fmt.seconds(end / 1000.0)} ({fmt.seconds((end - start) / 1000.0)})"}


def _ticks(end: float) -> list[float]:
    step = 10 ** max(0, len(str(int(end / 4))) - 1) if end >= 4 else 1.0
    for mult in (1, 2, 5, 10):
        if end / (step * mult) <= 6:
            step *= mult
            break
    return [k * step for k in range(int(end // step) + 1)]


def waterfall_html(wf: Mapping[str, Any] | None) -> str:
    """The waterfall as static HTML: the same elements the explorer draws."""
    if not wf:
        return ('<div class="mmsp-x-waterfall mmsp-x-empty">no timing sidecar for this response: mmsp\'s Tracer '
                "records no timing</div>")
    rows = []
    for b in wf.get("bars") or []:
        selected = " mmsp-x-wf-selected" if b.get("selected") else ""
        rows.append(f'<div class="mmsp-x-wf-row mmsp-x-wf-{_e(b["kind"])}{selected}"><span class="mmsp-x-wf-label" dir="auto">'
                    f'{_e(b["label"])}</span><span class="mmsp-x-wf-track"><span class="mmsp-x-wf-bar" '
                    f'style="left:{float(b["left"])}%;width:{float(b["width"])}%" title="{_e(b["text"])}"></span>'
                    f'</span><span class="mmsp-x-wf-time">{_e(b["text"])}</span></div>')
    ticks = "".join(f'<span class="mmsp-x-wf-tick" style="left:{float(t["left"])}%">{_e(t["text"])}</span>'
                    for t in wf.get("ticks") or [])
    return (f'<div class="mmsp-x-waterfall" data-status="{_e(wf.get("status"))}"><div class="mmsp-x-wf-head">timing'
            f' <span class="mmsp-meta">{_e(wf.get("summary"))}</span></div>{"".join(rows)}'
            f'<div class="mmsp-x-wf-row mmsp-x-wf-axis"><span class="mmsp-x-wf-label"></span>'
            f'<span class="mmsp-x-wf-track">{ticks}</span><span class="mmsp-x-wf-time"></span></div></div>')
