"""Static renderings of a turn: sanitized ``text/html`` and ``text/plain``.

The HTML is what a saved notebook shows with no kernel (GitHub, nbviewer, nbconvert). It has the
DOM structure and CSS classes that ``js/src/render.js`` draws for a finished turn, and embeds the
widget's own stylesheet (``static/widget.css``, every rule scoped under ``.mmsp-root``), so the
output does not change look when the live view is replaced by it. It has no script and no controls
(the widget's copy buttons are left out). Model text is Markdown rendered by markdown-it-py with
raw HTML disabled, then cleaned by nh3; every other model string is escaped. Images and audio are
``data:`` URLs built here from bytes of an allowed MIME type, never from a URL the model sent.
"""

from __future__ import annotations

import html
import json
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.pricing import format_cost
from .model import view_model

__all__ = ["render_markdown", "render_html", "render_text", "render_events", "footer_line", "CSS"]


def _read_widget_css() -> str:
    try:
        return (Path(__file__).resolve().parent.parent / "static" / "widget.css").read_text(encoding="utf-8").strip()
    except OSError:  # pragma: no cover - the bundle is part of the package
        return ""


#: The widget's own stylesheet, ``static/widget.css`` (every rule scoped under ``.mmsp-root``).
WIDGET_CSS = _read_widget_css()

# An HTML output sits in the host page's rendered-HTML container (JupyterLab's and nbconvert's
# .jp-RenderedHTMLCommon, absent around widgets), whose rules style tables, code, links... with
# selectors up to (0,2,2). So the static view embeds the widget's rules with one more class
# (.mmsp-root.mmsp-static, at least (0,3,0): they win wherever the widget sets a property), after
# resets of what those rules set and the widget leaves to the browser ("revert": the browser's
# default, as in the live view). Then: separators (between footer stats, before the "signed" badge)
# that keep words apart where no stylesheet applies (GitHub strips <style>) and are not drawn where
# it does, and no right padding or last-child margin of JupyterLab's container around this view.
_R = ".mmsp-root.mmsp-static "
_RESETS = (
    f"{_R}p,{_R}a,{_R}h1,{_R}h2,{_R}h3,{_R}h4,{_R}h5,{_R}h6{{text-align:revert;text-decoration:revert;"
    "font-style:revert;scroll-margin-top:revert}"
    f"{_R}table{{font-size:revert;color:revert;table-layout:revert;border-spacing:revert}}"
    f"{_R}thead,{_R}tbody,{_R}tr,{_R}td,{_R}th{{border:revert;vertical-align:revert;padding:revert;"
    "line-height:revert;white-space:revert;max-width:revert;text-align:revert;background:revert}"
    f"{_R}tbody tr:nth-child(n),{_R}tbody tr:hover{{background:revert}}"
    f"{_R}pre,{_R}code,{_R}:not(pre)>code{{border:revert;background-color:revert;color:revert;"
    "padding:revert;white-space:revert;table-layout:revert;margin:revert}"
    f"{_R}code{{font-size:var(--jp-code-font-size,inherit)}}"  # JupyterLab's size of code, outside HTML outputs too
    f"{_R}blockquote{{margin:revert;padding:revert;border:revert}}"
    f"{_R}img{{display:revert;margin:revert}}"
)
_STATIC_CSS = (".mmsp-root .mmsp-sep{display:none}"
               ".mmsp-root.mmsp-static{margin:0}"
               ".jp-RenderedHTMLCommon:has(>.mmsp-root.mmsp-static){padding-right:0}")

#: What the static view embeds in its ``<style>``: resets, the widget's rules, the static extras.
CSS = (_RESETS + re.sub(r"\.mmsp-root(?![\w-])", ".mmsp-root.mmsp-static", WIDGET_CSS)
       + _STATIC_CSS).replace("</", "<\\/")  # never closes its <style> element


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


# Every tag of nh3's output: its text has no raw "<" (escaped), and its attribute values are always
# double-quoted with '"' escaped, so this finds tags only, never a "<pre>" inside a link title.
_TAG = re.compile(r'<(?:[^>"]|"[^"]*")*>')
_CODE_CLASS = re.compile(r'<code class="([^"]*)">')
_LANG = re.compile(r"(?:^|\s)language-(\S+)")


def _decorate_code(markup: str) -> str:
    """Sanitized Markdown HTML with each ``<pre>`` in the widget's code frame (``mmsp-code``), no copy button."""
    if "<pre>" not in markup:
        return markup

    def tag(m: re.Match) -> str:
        t = m.group(0)
        if t == "</pre>":
            return "</pre></div>"
        if t != "<pre>":
            return t
        lang = ""
        code = _CODE_CLASS.match(markup, m.end())
        if code:
            found = _LANG.search(html.unescape(code.group(1)))
            lang = found.group(1) if found else ""
        return f'<div class="mmsp-code"><div class="mmsp-code-bar"><span class="mmsp-code-lang">{_e(lang)}</span></div><pre>'

    return _TAG.sub(tag, markup)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _round(x: float) -> int:
    return math.floor(x + 0.5)  # JavaScript's Math.round


def _fixed(x: float, digits: int) -> str:
    """JavaScript's ``x.toFixed(digits)``: the exact binary value, ties rounded away from zero."""
    if x == 0:
        x = 0.0  # no "-0.0"
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _fmt_s(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f} s"


def fmt_seconds(s: Any) -> str:
    """A duration as the widget shows it (util.js ``fmtSeconds``): ``4 ms``, ``1.25 s``, ``12.5 s``, ``2 min 5 s``."""
    if not _num(s) or not math.isfinite(s):
        return ""
    if s < 1:
        return f"{_round(s * 1000)} ms"
    if s < 60:
        return f"{_fixed(s, 2 if s < 10 else 1)} s"
    m = math.floor(s / 60)
    return f"{m} min {_round(s - m * 60)} s"


def _fmt_bytes(n: Any) -> str:
    if not _num(n) or not math.isfinite(n):
        return ""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{_fixed(n / 1024, 1)} KB"
    return f"{_fixed(n / 1024 / 1024, 1)} MB"


def _fmt_int(n: Any) -> str:
    return f"{_round(n):,}" if _num(n) and math.isfinite(n) else ""


def _str(v: Any) -> str:
    """util.js ``str``: a string as it is, anything else as indented JSON."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(v)


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


# ---------------------------------------------------------------------------------------------- items
# Each function draws what render.js draws for the same item of a finished turn (same elements,
# classes and text). Whitespace between elements of a flex row is not rendered; it only keeps the
# parts apart where no stylesheet applies (GitHub strips <style>).

_IMAGE_SRC = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*")
_AUDIO_SRC = re.compile(r"data:audio/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]*", re.I)


def _open(cls: str, item: dict[str, Any]) -> str:
    return f'<div class="mmsp-item {cls}" data-status="{_e(item.get("status") or "")}">'


def _fidelity_keys(item: dict[str, Any]) -> list[str]:
    fid = item.get("fidelity")
    if isinstance(fid, dict):
        return [str(k) for k in fid]
    if isinstance(fid, (list, tuple)):
        return [str(k) for k in fid]
    return []


_SPACE = '<span class="mmsp-sep"> </span>'  # a space only where no stylesheet applies


def _details(item: dict[str, Any], cls: str, summary: str, body: str, open_: bool) -> str:
    keys = _fidelity_keys(item)
    badge = (f'{_SPACE}<span class="mmsp-badge" title="{_e("fidelity: " + ", ".join(keys))}">signed</span>'
             if keys else "")
    return (_open(f"mmsp-thinking{' ' + cls if cls else ''}", item)
            + f'<details class="mmsp-details"{" open" if open_ else ""}><summary class="mmsp-summary">'
            f'<span class="mmsp-summary-label">{_e(summary)}</span><span class="mmsp-badge-slot">{badge}</span>'
            f'</summary><div class="mmsp-thinking-body">{body}</div></details></div>')


def _thinking(item: dict[str, Any], turn_status: str | None, open_: bool) -> str:
    if item.get("status") == "streaming":
        label = "Thinking (stopped)" if turn_status and turn_status != "streaming" else "Thinking…"
    else:
        label = f"Thought for {_fixed(item['duration'], 1)} s" if _num(item.get("duration")) else "Thought"
    return _details(item, "", label, _e(item.get("text")), open_)


def _inline_thinking(item: dict[str, Any], open_: bool) -> str:
    size = item.get("bytes")
    if item.get("status") == "streaming":
        label = "Thinking (opaque)…"
    else:
        label = " · ".join(["Thinking (opaque)"] + ([_fmt_bytes(size)] if _num(size) else []))
    info = " · ".join(x for x in (item.get("mime_type") or "", f"{_fmt_int(size)} bytes" if _num(size) else "") if x)
    return _details(item, "mmsp-inline-thinking", label, f'<div class="mmsp-meta">{_e(info)}</div>', open_)


def _text(item: dict[str, Any]) -> str:
    return _open("mmsp-text mmsp-md", item) + _decorate_code(render_markdown(item.get("text") or "")) + "</div>"


def _tool(item: dict[str, Any], turn_status: str | None) -> str:
    ident = item.get("tool_call_id")
    title = f' title="{_e(f"id {ident}")}"' if ident else ""
    r = item.get("result")
    stopped = bool(turn_status and turn_status != "streaming")
    state = ""
    if item.get("status") == "streaming":
        state = "stopped" if stopped else "…"
    elif (not r or r.get("running")) and not stopped:
        state = "running…"
    elif r and r.get("running"):
        state = "stopped"
    parsed = item.get("status") != "streaming" and item.get("arguments") is not None
    if parsed:
        args = json.dumps(item["arguments"], indent=2, ensure_ascii=False, default=str)
    else:
        args = item.get("text") or ""
    out = [_open("mmsp-tool", item),
           '<div class="mmsp-tool-head"><span class="mmsp-tool-icon" aria-hidden="true">⚙</span> '
           f'<span class="mmsp-tool-label">tool call</span> <code class="mmsp-tool-name"{title}>{_e(item.get("name"))}</code> '
           f'<span class="mmsp-tool-state">{_e(state)}</span></div>',
           f'<pre class="mmsp-tool-args{" mmsp-parsed" if parsed else ""}" aria-label="arguments">{_e(args)}</pre>']
    if isinstance(r, dict) and r.get("running"):
        out.append('<div class="mmsp-tool-result mmsp-running"><div class="mmsp-tool-result-head">'
                   '<span class="mmsp-tool-result-label mmsp-meta">running…</span></div></div>')
    elif isinstance(r, dict):
        ok = r.get("ok") is not False and r.get("error") is None
        took = fmt_seconds(r.get("duration"))
        took = f' <span class="mmsp-meta">{_e(took)}</span>' if took else ""
        shown = _str(r.get("output")) if ok else _str(r.get("error") if r.get("error") is not None else r.get("output"))
        out.append(f'<div class="mmsp-tool-result {"mmsp-ok" if ok else "mmsp-err"}"><div class="mmsp-tool-result-head">'
                   f'<span class="mmsp-tool-result-label">{"result" if ok else "error"}</span>{took}</div>'
                   f'<pre class="mmsp-tool-output">{_e(shown)}</pre></div>')
    else:
        out.append('<div class="mmsp-tool-result"></div>')
    out.append("</div>")
    return "".join(out)


def _image(item: dict[str, Any]) -> str:
    src = item.get("src")
    mime = item.get("mime_type") or "image"
    if isinstance(src, str) and _IMAGE_SRC.fullmatch(src):
        alt = item.get("alt") or f"generated image ({mime})"
        inner = f'<img class="mmsp-img" src="{_e(src)}" alt="{_e(alt)}" loading="lazy"/>'
    elif not src:
        inner = f'<div class="mmsp-meta">{_e(f"image ({mime})" + ("…" if item.get("status") == "streaming" else ""))}</div>'
    else:
        inner = (f'<div class="mmsp-meta mmsp-rejected">image ({_e(mime)}) not shown: '
                 "only PNG, JPEG, GIF or WebP data URLs are displayed</div>")
    return _open("mmsp-image", item) + inner + "</div>"


def _audio(item: dict[str, Any]) -> str:
    src = item.get("src")
    mime = item.get("mime_type") or "audio"
    seconds = item.get("seconds")
    caption = " · ".join(x for x in ("audio", mime, f"{_fixed(seconds, 1)} s" if _num(seconds) else "") if x)
    if isinstance(src, str) and _AUDIO_SRC.fullmatch(src):
        inner = (f'<audio class="mmsp-audio-player" controls src="{_e(src)}" aria-label="{_e(caption)}" '
                 f'preload="metadata"></audio><div class="mmsp-meta">{_e(caption)}</div>')
    elif isinstance(src, str) and src:
        inner = f'<div class="mmsp-meta mmsp-rejected">{_e(caption)} — not shown: not a base64 audio data URL</div>'
    else:
        inner = f'<div class="mmsp-meta">{_e(caption + ("…" if item.get("status") == "streaming" else ""))}</div>'
    return _open("mmsp-audio", item) + inner + "</div>"


def _embedding(item: dict[str, Any]) -> str:
    parts = ["embedding"]
    dims, norm = item.get("dims"), item.get("norm")
    if _num(dims):
        parts.append(f"{dims} dims")
    if _num(norm):
        parts.append(f"norm {_fixed(norm, 3)}")
    full = item.get("preview") if isinstance(item.get("preview"), list) else None
    p = (full or [])[:8]
    more = dims > len(p) if _num(dims) else full is not None and len(full) > len(p)
    shown = ""
    if p:
        values = ", ".join(_fixed(x, 3) if _num(x) else ("null" if x is None else str(x)) for x in p)
        shown = f"[{values}{', …' if more else ''}]"
    return (_open("mmsp-embedding", item) + f'<div class="mmsp-meta">{_e(" · ".join(parts))}</div>'
            f'<code class="mmsp-embedding-preview">{_e(shown)}</code></div>')


def _data(item: dict[str, Any]) -> str:
    kind = item.get("kind")
    kind = "data" if kind in ("data", "inline_data") or not kind else str(kind)
    size = item.get("bytes")
    line = " · ".join(x for x in (kind, item.get("mime_type") or "", _fmt_bytes(size) if _num(size) else "") if x)
    line += "…" if item.get("status") == "streaming" else ""
    return _open("mmsp-data", item) + f'<div class="mmsp-meta">{_e(line)}</div></div>'


def _item_html(item: dict[str, Any], turn_status: str | None = "complete", last: bool = False) -> str:
    kind = item.get("kind")
    if kind == "text":
        return _text(item)
    if kind == "thinking":
        return _thinking(item, turn_status, last)
    if kind == "inline_thinking":
        return _inline_thinking(item, last)
    if kind == "tool_call":
        return _tool(item, turn_status)
    if kind == "image":
        return _image(item)
    if kind == "audio":
        return _audio(item)
    if kind == "embedding":
        return _embedding(item)
    return _data(item)


# ---------------------------------------------------------------------------------------------- turn
def _status_html(vm: dict[str, Any]) -> str:
    s = vm.get("status")
    status_text = vm.get("status_text") or ""
    err = vm.get("error") if isinstance(vm.get("error"), dict) else None
    attrs = 'role="status" aria-live="polite"'
    if s == "streaming":
        return (f'<div class="mmsp-status" {attrs}><span class="mmsp-streaming"><span class="mmsp-dot" aria-hidden="true">'
                '</span><span class="mmsp-streaming-label">streaming…</span></span></div>')
    if s == "incomplete":
        body = f"<strong>Incomplete: </strong><span>{_e(status_text or 'the answer may be cut off')}</span>"
        if err and (err.get("type") or err.get("message")):
            detail = ": ".join(str(x) for x in (err.get("type"), err.get("message")) if x)
            body += f'<div class="mmsp-error-detail">{_e(detail)}</div>'
        if err and err.get("hint"):
            body += f'<div class="mmsp-hint">{_e(err["hint"])}</div>'
        return f'<div class="mmsp-status mmsp-banner mmsp-warn" {attrs}>{body}</div>'
    if s == "error":
        e = err if err is not None else {"message": _str(vm.get("error"))}
        body = (f'<strong class="mmsp-error-type">{_e((e.get("type") or "Error") + ": ")}</strong>'
                f'<span class="mmsp-error-message">{_e(e.get("message") or status_text)}</span>')
        if e.get("hint"):
            body += f'<div class="mmsp-hint">{_e(e["hint"])}</div>'
        return f'<div class="mmsp-status mmsp-banner mmsp-error" {attrs}>{body}</div>'
    if s == "cancelled":
        # Python's status_text for a cancelled turn already reads "cancelled — …": do not say it twice
        if not status_text:
            text = "cancelled — partial output kept"
        elif re.match(r"cancelled\b", status_text, re.I):
            text = status_text
        else:
            text = f"cancelled — {status_text}"
        return f'<div class="mmsp-status mmsp-banner mmsp-muted" {attrs}><span>{_e(text)}</span></div>'
    if status_text:
        return f'<div class="mmsp-status mmsp-banner mmsp-muted" {attrs}><span>{_e(status_text)}</span></div>'
    return ""


_SEP = '<span class="mmsp-sep"> · </span>'


def _footer_html(f: Any) -> str:
    """The footer as render.js draws it: one ``mmsp-stat`` span per fact."""
    if not isinstance(f, dict):
        return ""
    stats = []

    def add(cls: str, text: str, title: str | None = None) -> None:
        if text:
            t = f' title="{_e(title)}"' if title else ""
            stats.append(f'<span class="{"mmsp-stat " + cls if cls else "mmsp-stat"}"{t}>{_e(text)}</span>')

    u = f.get("usage") or {}
    buckets = [(k, u.get(key)) for k, key in (("cached", "cached_tokens"), ("prompt", "prompt_tokens"),
                                             ("thoughts", "thoughts_tokens"), ("response", "response_tokens"))]
    buckets = [(k, n) for k, n in buckets if _num(n)]
    if buckets:
        add("mmsp-tokens", "tokens " + " · ".join(f"{k} {_fmt_int(n)}" for k, n in buckets), "token usage per bucket")
    fr = f.get("finish_reason")
    if fr == "length":
        add("mmsp-truncated", "⚠ truncated (length)", "the model stopped at its output token limit")
    elif fr in ("tool_call", "tool_calls"):
        add("mmsp-finish", "finish: tool call")
    elif fr:
        add("mmsp-finish", f"finish: {fr}")
    if _num(f.get("ttft")):
        add("", f"TTFT {fmt_seconds(f['ttft'])}", "time to first token")
    if _num(f.get("total")):
        add("", f"total {fmt_seconds(f['total'])}", "total time")
    if _num(f.get("tokens_per_second")):
        add("", f"{_fixed(f['tokens_per_second'], 1)} tok/s", "response tokens per second")
    if f.get("cost_text"):
        add("mmsp-cost", str(f["cost_text"]), "cost")
    if _num(f.get("steps")) and f["steps"] > 1:
        add("", f"{f['steps']} steps", "model calls in this turn")
    return f'<div class="mmsp-footer">{_SEP.join(stats)}</div>'


def render_html(turn: Any, vm: dict[str, Any] | None = None, events: bool = False) -> str:
    """The static view of a turn as sanitized HTML: the live widget's DOM and stylesheet, no script.

    ``events`` adds the turn's UniEvents table inside the view, where the live view draws it.
    """
    vm = vm or view_model(turn)
    status = vm.get("status")
    items = sorted(vm["items"], key=lambda it: it.get("i", 0))
    parts = [f'<style>{CSS}</style><div class="mmsp-root mmsp-turn mmsp-static" data-status="{_e(status or "")}">'
             '<div class="mmsp-items">']
    for k, item in enumerate(items):
        # a thinking block is open only while nothing follows it (render.js syncThinkingOpen)
        parts.append(_item_html(item, status, last=k == len(items) - 1))
    parts.append("</div>")
    parts.append(_status_html(vm))
    parts.append(_footer_html(vm.get("footer")))
    if events:
        parts.append(_events_details(turn))
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


def _events_details(turn: Any, limit: int = 500) -> str:
    """The events table as render.js draws it (``details.mmsp-events``), at most ``limit`` rows."""
    from .model import event_row

    rows = []
    n = 0
    for step in turn.steps:
        base = step.request_sent
        for event, at in zip(step.events, step.event_times):
            if n < limit:
                row = event_row(n, None if base is None else (at - base) * 1000.0, event)
                ms = "" if row["ms"] is None else f"{row['ms']:.1f}"
                cells = (row["n"], ms, row["event_type"], row["type"], row["preview"])
                rows.append("<tr>" + "".join(f"<td>{_e(_str(c))}</td>" for c in cells) + "</tr>")
            n += 1
    more = f'<div class="mmsp-meta">… {n - limit:,} more events</div>' if n > limit else ""
    head = "".join(f'<th scope="col">{c}</th>' for c in ("n", "ms", "event_type", "type", "preview"))
    return ('<details class="mmsp-events" open><summary class="mmsp-summary"><span>events </span>'
            f'<span class="mmsp-meta">({n:,})</span></summary>'
            '<div class="mmsp-events-scroll" tabindex="0" role="region" aria-label="stream events">'
            f'<table class="mmsp-events-table"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + f"</tbody></table></div>{more}</details>")


def render_events(turn: Any, limit: int = 500) -> str:
    """The UniEvents of a turn as a static table (``%%mmsp --events``), at most ``limit`` rows.

    The same table :func:`render_html` puts inside the turn with ``events=True``, here on its own.
    """
    return (f'<style>{CSS}</style><div class="mmsp-root mmsp-static">'
            f"{_events_details(turn, limit)}</div>")
