"""Static renderings of a turn: sanitized ``text/html`` and ``text/plain``.

The HTML is what a saved notebook shows with no kernel (GitHub, nbviewer, nbconvert). Model text
is Markdown rendered by markdown-it-py with raw HTML disabled, then cleaned by nh3; every other
model string is escaped. Images and audio are ``data:`` URLs built here from bytes of an allowed
MIME type, never from a URL the model sent.
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from typing import Any

from ._pricing import format_cost
from ._view import view_model

__all__ = ["render_markdown", "render_html", "render_text", "footer_line", "CSS"]

CSS = """
.mmsp-static{font-family:var(--jp-content-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,inherit);
line-height:1.5;max-width:100%}
.mmsp-static .mmsp-item{margin:.4em 0}
.mmsp-static details.mmsp-thinking{color:var(--jp-ui-font-color2,#666);font-size:.92em;border-left:3px solid
var(--jp-border-color2,#ccc);padding-left:.6em}
.mmsp-static .mmsp-tool{border:1px solid var(--jp-border-color2,#ccc);border-radius:6px;padding:.4em .6em}
.mmsp-static pre{background:var(--jp-layout-color2,#f5f5f5);padding:.4em;overflow:auto;white-space:pre-wrap}
.mmsp-static table{border-collapse:collapse}.mmsp-static td,.mmsp-static th{border:1px solid
var(--jp-border-color2,#ccc);padding:2px 6px}
.mmsp-static .mmsp-footer{color:var(--jp-ui-font-color2,#666);font-size:.85em;border-top:1px solid
var(--jp-border-color2,#ddd);margin-top:.5em;padding-top:.3em}
.mmsp-static .mmsp-warn{background:var(--jp-warn-color3,#fff3cd);padding:.3em .6em;border-radius:4px}
.mmsp-static .mmsp-error{background:var(--jp-error-color3,#f8d7da);padding:.3em .6em;border-radius:4px}
.mmsp-static .mmsp-muted{color:var(--jp-ui-font-color2,#666)}
""".replace("\n", " ")

_ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "code", "pre",
    "blockquote", "table", "thead", "tbody", "tr", "th", "td", "a", "del", "s", "sup", "sub", "span",
}


@lru_cache(maxsize=1)
def _md():
    from markdown_it import MarkdownIt

    # "commonmark" with tables and strikethrough; html=False renders raw HTML as text
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Markdown → sanitized HTML (no raw HTML, no script, no event handlers, http(s)/mailto links only)."""
    import nh3

    raw = _md().render(text or "")
    return nh3.clean(
        raw,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "code": {"class"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt_s(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f} s"


def footer_line(fields: dict[str, Any] | None) -> str:
    """The usage footer as one line of text."""
    if not fields:
        return ""
    usage = fields.get("usage") or {}
    parts = []
    if usage:
        def n(key: str) -> str:
            v = usage.get(key)
            return "–" if v is None else f"{v:,}"

        parts.append(
            f"tokens: cached {n('cached_tokens')} · prompt {n('prompt_tokens')} · "
            f"thoughts {n('thoughts_tokens')} · response {n('response_tokens')}"
        )
    else:
        parts.append("usage unknown")
    reason = fields.get("finish_reason")
    if reason == "length":
        parts.append("finish: length (truncated)")
    elif reason:
        parts.append(f"finish: {reason}")
    parts.append(f"ttft {_fmt_s(fields.get('ttft'))}")
    parts.append(f"total {_fmt_s(fields.get('total'))}")
    tps = fields.get("tokens_per_second")
    if tps:
        parts.append(f"{tps:.1f} tok/s")
    parts.append(fields.get("cost_text") or format_cost(fields.get("cost")))
    if (fields.get("steps") or 1) > 1:
        parts.append(f"{fields['steps']} steps")
    return " | ".join(parts)


def _item_html(item: dict[str, Any]) -> str:
    kind = item["kind"]
    if kind == "thinking":
        label = "Thinking…" if item["status"] != "done" else (
            f"Thought for {item['duration']:.1f} s" if item.get("duration") is not None else "Thought")
        signed = " · signed" if item.get("fidelity") else ""
        return (f'<details class="mmsp-item mmsp-thinking"><summary>{_e(label)}{_e(signed)}</summary>'
                f'<div style="white-space:pre-wrap">{_e(item.get("text"))}</div></details>')
    if kind == "text":
        return f'<div class="mmsp-item mmsp-text">{render_markdown(item.get("text", ""))}</div>'
    if kind == "tool_call":
        body = [f'<div class="mmsp-item mmsp-tool"><div><span class="mmsp-muted">tool call</span> <code>{_e(item.get("name"))}</code>'
                f' <span class="mmsp-muted">{_e(item.get("tool_call_id"))}</span></div>']
        if item.get("arguments") is not None:
            args = json.dumps(item["arguments"], indent=2, ensure_ascii=False)
        else:
            args = item.get("text", "")
        body.append(f"<pre>{_e(args)}</pre>")
        result = item.get("result")
        if result and not result.get("running"):
            took = f' <span class="mmsp-muted">({_fmt_s(result.get("duration"))})</span>'
            if result.get("ok"):
                body.append(f'<div>→ result{took}</div><pre>{_e(result.get("output"))}</pre>')
            else:
                body.append(f'<div class="mmsp-error">→ raised{took}: {_e(result.get("error"))}</div>')
        body.append("</div>")
        return "".join(body)
    if kind == "image":
        if item.get("src"):
            return f'<div class="mmsp-item"><img alt="image from the model" src="{_e(item["src"])}"/></div>'
        return '<div class="mmsp-item mmsp-muted">receiving image…</div>'
    if kind == "audio":
        if item.get("src"):
            secs = f" ({item['seconds']:.1f} s)" if item.get("seconds") else ""
            return (f'<div class="mmsp-item">🔊 audio{_e(secs)}<br/><audio controls src="{_e(item["src"])}">'
                    "</audio></div>")
        return f'<div class="mmsp-item mmsp-muted">receiving audio… {_e(item.get("bytes"))} bytes</div>'
    if kind == "embedding":
        if item.get("dims") is None:
            return '<div class="mmsp-item mmsp-muted">embedding…</div>'
        preview = ", ".join("nan" if v is None else f"{v:.4f}" for v in item.get("preview") or [])
        norm = item.get("norm")
        return (f'<div class="mmsp-item">embedding · {_e(item["dims"])} dims · norm '
                f'{_e("–" if norm is None else f"{norm:.4f}")} · <code>[{_e(preview)}{", …" if item["dims"] > 8 else ""}]'
                "</code></div>")
    signed = " · signed" if item.get("fidelity") else ""
    return (f'<div class="mmsp-item mmsp-muted">{_e(kind)} · {_e(item.get("mime_type"))} · '
            f'{_e(item.get("bytes"))} bytes{_e(signed)}</div>')


def render_html(turn: Any, vm: dict[str, Any] | None = None) -> str:
    """The static view of a turn as sanitized HTML."""
    vm = vm or view_model(turn)
    parts = [f'<div class="mmsp-static"><style>{CSS}</style>']
    for item in vm["items"]:
        parts.append(_item_html(item))
    status = vm["status"]
    if status == "streaming":
        parts.append('<div class="mmsp-muted">● streaming…</div>')
    elif status in ("incomplete", "cancelled"):
        parts.append(f'<div class="mmsp-warn">⚠ {_e(vm.get("status_text"))}</div>')
    if vm.get("error") and status in ("error", "incomplete"):
        err = vm["error"]
        parts.append(f'<div class="mmsp-error"><b>{_e(err["type"])}</b>: {_e(err["message"])}'
                     f'<br/><span class="mmsp-muted">{_e(err["hint"])}</span></div>')
    elif vm.get("status_text") and status == "complete":
        parts.append(f'<div class="mmsp-warn">⚠ {_e(vm["status_text"])}</div>')
    footer = vm.get("footer")
    if footer:
        parts.append(f'<div class="mmsp-footer">{_e(footer_line(footer))}</div>')
    parts.append("</div>")
    return "".join(parts)


def _cap(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit:,} more characters: the whole text is in the HTML and in the Turn]"


def render_text(turn: Any, vm: dict[str, Any] | None = None, limit: int | None = None) -> str:
    """The static view of a turn as plain text; ``limit`` caps each text and thinking item."""
    vm = vm or view_model(turn)
    out = []
    for item in vm["items"]:
        kind = item["kind"]
        if kind == "thinking":
            out.append(f"[thinking] {_cap(item.get('text', ''), limit)}")
        elif kind == "text":
            out.append(_cap(item.get("text", ""), limit))
        elif kind == "tool_call":
            args = json.dumps(item["arguments"], ensure_ascii=False) if item.get("arguments") is not None else item.get("text", "")
            line = f"[tool call] {item.get('name')}({args})"
            result = item.get("result")
            if result and not result.get("running"):
                line += f" -> {result.get('output')}" if result.get("ok") else f" raised {result.get('error')}"
            out.append(line)
        elif kind in ("image", "audio"):
            out.append(f"[{kind}] {item.get('mime_type')} {item.get('bytes')} bytes")
        elif kind == "embedding":
            out.append(f"[embedding] {item.get('dims')} dims, norm {item.get('norm')}")
        else:
            out.append(f"[{kind}] {item.get('mime_type')} {item.get('bytes')} bytes")
    if vm["status"] != "complete" and vm.get("status_text"):
        out.append(f"[{vm['status']}] {vm['status_text']}")
    if vm.get("error"):
        out.append(f"[{vm['error']['type']}] {vm['error']['message']}")
    if vm.get("footer"):
        out.append(footer_line(vm["footer"]))
    return "\n".join(out)


def render_events(turn: Any, limit: int = 500) -> str:
    """The UniEvents of a turn as a static table (``%%mmsp --events``), at most ``limit`` rows."""
    from ._view import event_row

    rows = []
    n = 0
    for step in turn.steps:
        base = step.request_sent
        for event, at in zip(step.events, step.event_times):
            if n < limit:
                row = event_row(n, None if base is None else (at - base) * 1000.0, event)
                ms = "" if row["ms"] is None else f"{row['ms']:.1f}"
                rows.append(
                    f"<tr><td>{row['n']}</td><td>{_e(ms)}</td>"
                    f"<td>{_e(row['event_type'])}</td><td><code>{_e(row['type'])}</code></td>"
                    f"<td><code>{_e(row['preview'])}</code></td></tr>"
                )
            n += 1
    more = f'<div class="mmsp-muted">… {n - limit} more events</div>' if n > limit else ""
    return (f'<div class="mmsp-static"><details open><summary>{n} UniEvents</summary><table class="mmsp-events">'
            "<thead><tr><th>#</th><th>ms</th><th>event</th><th>item</th><th>content</th></tr></thead><tbody>"
            + "".join(rows) + f"</tbody></table>{more}</details></div>")
