"""The static HTML of a turn: a template of its view model, sanitized.

The HTML is what a saved notebook shows with no kernel (GitHub, nbviewer, nbconvert). It is the
same template as ``js/src/render.js`` for a finished turn: the same elements and CSS classes, with
the strings and states of the view model (:mod:`.model`) placed in them, nothing worded or
formatted here. It embeds the widget's own stylesheet (``static/widget.css``, every rule scoped
under ``.mmsp-root``), so the output does not change look when the live view is replaced by it. It
has no script and no controls (the widget's copy buttons are left out). Model text is Markdown
rendered by markdown-it-py with raw HTML disabled and TeX math as MathML, then cleaned by nh3
(:mod:`.markdown`); every other string is escaped. Images and audio are shown only from ``data:`` URLs of an allowed MIME type.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.chars import mend_surrogates
from ..core.redact import secret_values
from .markdown import render_markdown
from .model import event_row, event_view, events_label, turn_events, view_model
from .text import HTML_TEXT_LIMIT, WHOLE_IN, cut_text, footer_line, render_text

__all__ = ["render_markdown", "render_html", "render_text", "render_events", "render_transcript_html", "turn_markup",
           "footer_line", "css_for", "CSS", "HTML_TEXT_LIMIT"]


def _read_widget_css() -> str:
    try:
        return (Path(__file__).resolve().parent.parent / "static" / "widget.css").read_text(encoding="utf-8").strip()
    except OSError:  # pragma: no cover - the bundle is part of the package
        return ""


#: The widget's own stylesheet, ``static/widget.css`` (every rule scoped under ``.mmsp-root``).
WIDGET_CSS = _read_widget_css()

# An HTML output sits in the host page's rendered-HTML container (JupyterLab's and nbconvert's
# .jp-RenderedHTMLCommon, absent around widgets), whose rules style tables, code, links... with
# selectors up to (0,2,2). So the static view embeds the widget's rules for a turn (turn_rules:
# not the chat's, not the buttons') with one more class
# (.mmsp-root.mmsp-static, at least (0,3,0): they win wherever the widget sets a property), after
# resets of what those rules set and the widget leaves to the browser ("revert": the browser's
# default, as in the live view). Then: separators (between footer stats, before the "signed" badge)
# that keep words apart where no stylesheet applies (GitHub strips <style>) and are not drawn where
# it does, and no right padding or last-child margin of JupyterLab's container around this view.
_R = ".mmsp-root.mmsp-static "
_RESETS = (
    f"{_R}:is(p,a,h1,h2,h3,h4,h5,h6){{text-align:revert;text-decoration:revert;font-style:revert;"
    "scroll-margin-top:revert}"
    f"{_R}table{{font-size:revert;color:revert;table-layout:revert;border-spacing:revert}}"
    f"{_R}:is(thead,tbody,tr,td,th){{border:revert;vertical-align:revert;padding:revert;line-height:revert;"
    "white-space:revert;max-width:revert;text-align:revert;background:revert}"
    f"{_R}tbody tr:is(:nth-child(n),:hover){{background:revert}}"
    f"{_R}:is(pre,code),{_R}:not(pre)>code{{border:revert;background-color:revert;color:revert;"
    "padding:revert;white-space:revert;table-layout:revert;margin:revert}"
    f"{_R}code{{font-size:var(--jp-code-font-size,inherit)}}"  # JupyterLab's size of code, outside HTML outputs too
    f"{_R}blockquote{{margin:revert;padding:revert;border:revert}}"
    f"{_R}img{{display:revert;margin:revert}}"
)
# A long answer's blocks are laid out only when they come near the screen (content-visibility):
# JupyterLab inserts a finished turn's HTML in one task, and a 20,000-token answer laid out whole
# there blocks the page for longer than a frame budget allows.
_STATIC_CSS = (".mmsp-root .mmsp-sep{display:none}"
               ".mmsp-root.mmsp-static .mmsp-md>*{content-visibility:auto;contain-intrinsic-size:auto 1.5em}"
               ".mmsp-root.mmsp-static{margin:0}"
               ".jp-RenderedHTMLCommon:has(>.mmsp-root.mmsp-static){padding-right:0}")

#: Every class this template writes (``mmsp-{state}``, ``mmsp-{kind}``, ``mmsp-{key}`` included).
TURN_CLASSES = frozenset(f"mmsp-{name}" for name in (
    "root turn static items item text md thinking inline-thinking details summary summary-label badge-slot badge "
    "thinking-body meta rejected tool tool-head tool-icon tool-label tool-name tool-state tool-args parsed "
    "tool-result tool-result-head tool-result-label tool-output ok err running stopped image img audio "
    "audio-player embedding embedding-preview data code code-bar code-lang status streaming dot "
    "streaming-label banner banner-lead banner-text banner-detail hint warn error muted footer stat sep "
    "tokens truncated warning finish ttft total speed cost steps events events-scroll events-table cut math-error").split())
_CLASS = re.compile(r"\.(mmsp-[\w-]+)")


def _split_selectors(head: str) -> list[str]:
    out, depth, start = [], 0, 0
    for k, c in enumerate(head):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            out.append(head[start:k])
            start = k + 1
    return [*out, head[start:]]


def turn_rules(css: str, classes: frozenset[str] | set[str] = TURN_CLASSES) -> str:
    """The rules of a minified stylesheet that can apply to an output using only ``classes``.

    A static turn has no chat (toolbar, composer, messages) and no buttons: a selector is kept when
    every ``mmsp-`` class it names is one of ``classes`` (by default :data:`TURN_CLASSES`), a rule
    when one of its selectors is; ``@media`` blocks are filtered the same way, other at-rules kept whole.
    """
    out, i = [], 0
    while True:
        start = css.find("{", i)
        if start < 0:
            return "".join(out)
        head, depth, end = css[i:start].strip(), 1, start + 1
        while depth and end < len(css):
            depth += (css[end] == "{") - (css[end] == "}")
            end += 1
        body = css[start + 1:end - 1]
        if head.startswith(("@media", "@supports")):
            inner = turn_rules(body, classes)
            if inner:
                out.append(f"{head}{{{inner}}}")
        elif head.startswith("@"):
            out.append(css[i:end].strip())
        else:
            kept = [sel for sel in _split_selectors(head) if set(_CLASS.findall(sel)) <= classes]
            if kept:
                out.append(f"{','.join(kept)}{{{body}}}")
        i = end


#: Every rule a static turn may need: resets, the widget's rules for a turn, the static extras.
CSS = (_RESETS + re.sub(r"\.mmsp-root(?![\w-])", ".mmsp-root.mmsp-static", turn_rules(WIDGET_CSS))
       + _STATIC_CSS).replace("</", "<\\/")  # never closes its <style> element

#: Classes of the chat's static transcript (the chat's messages, without its controls).
TRANSCRIPT_CLASSES = frozenset({"mmsp-chat-static", "mmsp-chat-log", "mmsp-msg", "mmsp-msg-user",
                                "mmsp-msg-assistant", "mmsp-msg-body", "mmsp-bubble", "mmsp-user-text",
                                "mmsp-thumbs", "mmsp-thumb", "mmsp-more"})
#: Classes the copy script adds to code blocks (in a trusted output, where scripts run).
COPY_CLASSES = frozenset({"mmsp-btn", "mmsp-copy-code"})
_CLASS_ATTR = re.compile(r'class="([^"]*)"')


_ROOT = ".mmsp-root.mmsp-static"


def _blocks(css: str) -> list[tuple[str, str]]:
    """The top-level ``(head, body)`` blocks of a minified stylesheet."""
    out, i = [], 0
    while True:
        start = css.find("{", i)
        if start < 0:
            return out
        depth, end = 1, start + 1
        while depth and end < len(css):
            depth += (css[end] == "{") - (css[end] == "}")
            end += 1
        out.append((css[i:start].strip(), css[start + 1:end - 1]))
        i = end


def _nested(selector: str) -> str | None:
    """A selector under the static root written relative to it (``&``), or None when it is not under it."""
    if selector.startswith(_ROOT):
        rest = selector[len(_ROOT):]
        if rest.startswith(" ") and rest[1:2] in (".", ":", "*", "[", ">"):
            return rest[1:]  # a descendant starting with a symbol: nested as it is
        return "&" + rest
    head, sep, tail = selector.rpartition(" " + _ROOT)
    return f"{head} &{tail}" if sep and not tail.strip() else None


def nest(css: str) -> str:
    """A flat stylesheet scoped under ``.mmsp-root.mmsp-static`` as one nested block (CSS nesting):
    the same rules, the scope written once instead of before every selector."""
    inner, outer = [], []
    for head, body in _blocks(css):
        if head.startswith("@keyframes"):
            outer.append(f"{head}{{{body}}}")
        elif head.startswith(("@media", "@supports")):
            rules = [f"{','.join(_nested(x) or x for x in _split_selectors(h))}{{{b}}}" for h, b in _blocks(body)]
            inner.append(f"{head}{{{''.join(rules)}}}")
        else:
            selectors = _split_selectors(head)
            nested = [_nested(x) for x in selectors]
            if all(x is not None for x in nested):
                inner.append(f"{','.join(x for x in nested if x)}{{{body}}}")
            else:
                outer.append(f"{head}{{{body}}}")
    return f"{_ROOT}{{{''.join(inner)}}}{''.join(outer)}"


@lru_cache(maxsize=256)
def _css_for(classes: frozenset[str]) -> str:
    rules = turn_rules(WIDGET_CSS, classes | {"mmsp-root", "mmsp-static"})
    return nest(_RESETS + re.sub(r"\.mmsp-root(?![\w-])", ".mmsp-root.mmsp-static", rules)
                + _STATIC_CSS.replace(".mmsp-root .mmsp-sep", ".mmsp-root.mmsp-static .mmsp-sep")).replace("</", "<\\/")


def css_for(markup: str) -> str:
    """The stylesheet an output needs: the rules of :data:`CSS` (or the transcript's) whose classes it uses.

    A text-only answer does not carry the rules of tool cards, media, banners or the events table.
    """
    used = {c for attr in _CLASS_ATTR.findall(markup) for c in attr.split() if c.startswith("mmsp-")}
    if "mmsp-code" in used:
        used |= COPY_CLASSES
    return _css_for(frozenset(used))


# In a trusted output (JupyterLab, Notebook 7, VS Code, nbconvert's page) this adds the live view's
# Copy button to each code block of its own output; where scripts do not run (GitHub, an untrusted
# notebook) it is dropped and the code stays selectable text.
COPY_SCRIPT = (
    "<script data-mmsp-copy>(()=>{const s=document.currentScript,r=s&&s.parentElement;"
    "if(!r||!navigator.clipboard)return;for(const c of r.querySelectorAll('.mmsp-code')){"
    "const bar=c.querySelector('.mmsp-code-bar'),pre=c.querySelector('pre');"
    "if(!bar||!pre||bar.querySelector('.mmsp-copy-code'))continue;"
    "const b=document.createElement('button');b.type='button';b.className='mmsp-btn mmsp-copy-code';"
    "b.textContent='Copy';b.title='Copy code';b.setAttribute('aria-label','Copy code');"
    "b.addEventListener('click',()=>navigator.clipboard.writeText(pre.textContent).then("
    "()=>{b.textContent='Copied';setTimeout(()=>{b.textContent='Copy'},1200)},()=>{b.textContent='Copy failed'}));"
    "bar.appendChild(b)}})()</script>"
)


def styled(body: str) -> str:
    """An output's markup with the stylesheet it needs before it (and the copy script inside its root)."""
    if 'class="mmsp-code"' in body and body.endswith("</div>"):
        body = body[:-6] + COPY_SCRIPT + "</div>"
    return f"<style>{css_for(body)}</style>{body}"


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
    """``value`` escaped for HTML, its surrogates mended (a lone one, which no page can carry, as U+FFFD)."""
    return html.escape(mend_surrogates("" if value is None else str(value)), quote=True)


# ---------------------------------------------------------------------------------------------- items
# Each function places an item's view (model.present_item) into the elements render.js draws for
# it. Whitespace between elements of a flex row is not rendered; it only keeps the parts apart
# where no stylesheet applies (GitHub strips <style>).

_IMAGE_SRC = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*")
_AUDIO_SRC = re.compile(r"data:audio/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]*", re.I)
_SPACE = '<span class="mmsp-sep"> </span>'  # a space only where no stylesheet applies
_SEP = '<span class="mmsp-sep"> · </span>'
_WORD = re.compile(r"[a-z_]+")


def _word(value: Any, allowed: Iterable[str], default: str) -> str:
    """A state or kind from the view model, as a class name: one of ``allowed``, else ``default``."""
    return value if isinstance(value, str) and value in allowed else default


def _line(item: Mapping[str, Any]) -> str:
    """An item's tag and meta, as one line (render.js ``line``)."""
    return " · ".join(str(x) for x in (item.get("tag"), item.get("meta")) if x)


def _open(cls: str, item: Mapping[str, Any], extra: str = "") -> str:
    return f'<div class="mmsp-item {cls}" data-status="{_e(item.get("status") or "")}"{extra}>'


def _details(item: Mapping[str, Any], cls: str, body: str, open_: bool) -> str:
    badge = item.get("badge")
    badge_html = (f'{_SPACE}<span class="mmsp-badge" title="{_e(badge.get("title"))}">{_e(badge.get("text"))}</span>'
                  if isinstance(badge, Mapping) else "")
    return (_open(f"mmsp-thinking{' ' + cls if cls else ''}", item)
            + f'<details class="mmsp-details"{" open" if open_ else ""}><summary class="mmsp-summary">'
            f'<span class="mmsp-summary-label">{_e(item.get("label"))}</span><span class="mmsp-badge-slot">'
            f'{badge_html}</span></summary><div class="mmsp-thinking-body">{body}</div></details></div>')


def _capped(text: str, limit: int | None) -> tuple[str, str]:
    """``text`` cut at ``limit`` characters (:data:`~.text.HTML_TEXT_LIMIT`), and the note that says so
    (``""`` when it is whole)."""
    shown, left = cut_text(text, limit)
    return shown, f"{left:,} characters not shown" if left else ""


def _cut_note(note: str, where: str) -> str:
    return f'<div class="mmsp-meta mmsp-cut">… {_e(note)} — <code>{_e(where)}</code> has all</div>' if note else ""


def _text(item: Mapping[str, Any], limit: int | None = HTML_TEXT_LIMIT) -> str:
    text, note = _capped(item.get("text") or "", limit)
    return (_open("mmsp-text mmsp-md", item) + _decorate_code(render_markdown(text)) + "</div>"
            + _cut_note(note, WHOLE_IN["text"]))


def _tool(item: Mapping[str, Any]) -> str:
    title = f' title="{_e(item["title"])}"' if item.get("title") else ""
    args = item.get("args")
    parsed = isinstance(args, str)
    shown, note = _capped(args if parsed else item.get("text") or "", HTML_TEXT_LIMIT)
    out = [_open("mmsp-tool", item, f' data-state="{_e(item.get("state") or "")}"'),
           '<div class="mmsp-tool-head"><span class="mmsp-tool-icon" aria-hidden="true">⚙</span> '
           f'<span class="mmsp-tool-label">{_e(item.get("tag"))}</span> '
           f'<code class="mmsp-tool-name" dir="auto"{title}>{_e(item.get("name"))}</code> '
           f'<span class="mmsp-tool-state">{_e(item.get("state_text"))}</span></div>',
           f'<pre class="mmsp-tool-args{" mmsp-parsed" if parsed else ""}" aria-label="arguments">'
           f'{_e(shown)}</pre>']
    r = item.get("result")
    if isinstance(r, Mapping):
        state = _word(r.get("state"), ("ok", "err", "running", "stopped"), "ok")
        took = f' <span class="mmsp-meta">{_e(r["took"])}</span>' if r.get("took") else ""
        shown = f'<pre class="mmsp-tool-output">{_e(r["text"])}</pre>' if isinstance(r.get("text"), str) else ""
        out.append(f'<div class="mmsp-tool-result mmsp-{state}"><div class="mmsp-tool-result-head">'
                   f'<span class="mmsp-tool-result-label">{_e(r.get("label"))}</span>{took}</div>{shown}</div>')
    else:
        out.append('<div class="mmsp-tool-result"></div>')
    out.append("</div>")
    return "".join(out) + _cut_note(note, WHOLE_IN["tool_call"])


def _image(item: Mapping[str, Any]) -> str:
    src = item.get("src")
    if isinstance(src, str) and _IMAGE_SRC.fullmatch(src):
        inner = f'<img class="mmsp-img" src="{_e(src)}" alt="{_e(item.get("alt"))}" loading="lazy"/>'
    elif not src:
        inner = f'<div class="mmsp-meta">{_e(_line(item))}</div>'
    else:
        inner = f'<div class="mmsp-meta mmsp-rejected">{_e(item.get("rejected"))}</div>'
    return _open("mmsp-image", item) + inner + "</div>"


def _audio(item: Mapping[str, Any]) -> str:
    src = item.get("src")
    line = _line(item)
    if isinstance(src, str) and _AUDIO_SRC.fullmatch(src):
        inner = (f'<audio class="mmsp-audio-player" controls src="{_e(src)}" aria-label="{_e(line)}" '
                 f'preload="metadata"></audio><div class="mmsp-meta">{_e(line)}</div>')
    elif src:
        inner = f'<div class="mmsp-meta mmsp-rejected">{_e(item.get("rejected"))}</div>'
    else:
        inner = f'<div class="mmsp-meta">{_e(line)}</div>'
    return _open("mmsp-audio", item) + inner + "</div>"


def _embedding(item: Mapping[str, Any]) -> str:
    return (_open("mmsp-embedding", item) + f'<div class="mmsp-meta">{_e(_line(item))}</div>'
            f'<code class="mmsp-embedding-preview">{_e(item.get("preview"))}</code></div>')


def _data(item: Mapping[str, Any]) -> str:
    return _open("mmsp-data", item) + f'<div class="mmsp-meta">{_e(_line(item))}</div></div>'


def _item_html(item: Mapping[str, Any], last: bool = False) -> str:
    kind = item.get("kind")
    if kind == "text":
        return _text(item)
    if kind == "thinking":
        text, note = _capped(item.get("text") or "", HTML_TEXT_LIMIT)
        return _details(item, "", _e(text), last) + _cut_note(note, WHOLE_IN["thinking"])
    if kind == "inline_thinking":
        return _details(item, "mmsp-inline-thinking", f'<div class="mmsp-meta">{_e(item.get("meta"))}</div>', last)
    if kind == "tool_call":
        return _tool(item)
    if kind == "image":
        return _image(item)
    if kind == "audio":
        return _audio(item)
    if kind == "embedding":
        return _embedding(item)
    return _data(item)


# ---------------------------------------------------------------------------------------------- turn
def _status_html(banner: Any) -> str:
    if not isinstance(banner, Mapping):
        return ""
    attrs = 'role="status" aria-live="polite"'
    if banner.get("kind") == "streaming":
        return (f'<div class="mmsp-status" {attrs}><span class="mmsp-streaming"><span class="mmsp-dot" aria-hidden="true">'
                f'</span><span class="mmsp-streaming-label">{_e(banner.get("text"))}</span></span></div>')
    kind = _word(banner.get("kind"), ("warn", "error", "muted"), "muted")
    body = f'<strong class="mmsp-banner-lead">{_e(banner["lead"])}</strong>' if banner.get("lead") else ""
    body += f'<span class="mmsp-banner-text">{_e(banner.get("text"))}</span>'
    if banner.get("detail"):
        body += f'<div class="mmsp-banner-detail">{_e(banner["detail"])}</div>'
    if banner.get("hint"):
        body += f'<div class="mmsp-hint">{_e(banner["hint"])}</div>'
    return f'<div class="mmsp-status mmsp-banner mmsp-{kind}" {attrs}>{body}</div>'


def _footer_html(footer: Any) -> str:
    """The footer: one ``mmsp-stat`` span per stat of the view model."""
    if not isinstance(footer, Mapping):
        return ""
    stats = []
    for stat in footer.get("stats") or []:
        if not isinstance(stat, (list, tuple)) or len(stat) < 2 or not stat[1]:
            continue
        key, text, title = stat[0], stat[1], stat[2] if len(stat) > 2 else None
        cls = f"mmsp-stat mmsp-{key}" if isinstance(key, str) and _WORD.fullmatch(key) else "mmsp-stat"
        tip = f' title="{_e(title)}"' if title else ""
        stats.append(f'<span class="{cls}"{tip}>{_e(text)}</span>')
    return f'<div class="mmsp-footer">{_SEP.join(stats)}</div>'


def turn_markup(vm: Mapping[str, Any], events_html: str = "") -> str:
    """A turn's static view without its stylesheet: the root ``div`` of :func:`render_html`."""
    status = vm.get("status")
    items = sorted(vm.get("items") or [], key=lambda it: it.get("i") or 0)
    parts = [f'<div class="mmsp-root mmsp-turn mmsp-static" data-status="{_e(status or "")}">'
             '<div class="mmsp-items">']
    for k, item in enumerate(items):
        # a thinking block is open only while nothing follows it (render.js syncThinkingOpen)
        parts.append(_item_html(item, last=k == len(items) - 1))
    parts.append("</div>")
    parts.append(_status_html(vm.get("banner")))
    parts.append(_footer_html(vm.get("footer")))
    parts.append(events_html)
    parts.append("</div>")
    return "".join(parts)


def render_html(turn: Any, vm: Mapping[str, Any] | None = None, events: bool = False) -> str:
    """The static view of a turn as sanitized HTML: the live widget's DOM and stylesheet, no script
    of the model's (only the copy buttons' own, where the output is trusted).

    ``vm`` is the turn's view model (:func:`~.model.view_model`, made when not given); ``events``
    adds the turn's UniEvents table inside the view, where the live view draws it. Each text area
    is cut at :data:`HTML_TEXT_LIMIT` characters, saying how many are not shown. The stylesheet
    holds only the rules of the classes the view uses.
    """
    vm = vm or view_model(turn)
    return styled(turn_markup(vm, _events_details(turn) if events else ""))


def _events_details(turn: Any, limit: int = 500) -> str:
    """The events table as render.js draws it (``details.mmsp-events``), at most ``limit`` rows."""
    rows = []
    total = 0
    streamed: dict[str, str] = {}
    secrets = secret_values()
    for n, ms, event in turn_events(turn):
        total += 1
        if n < limit:
            row = event_view(event_row(n, ms, event, streamed, secrets=secrets))
            cells = (row["n"], row["ms"], row["event_type"], row["type"], row["preview"])
            rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    more = f'<div class="mmsp-meta">… {total - limit:,} more events</div>' if total > limit else ""
    head = "".join(f'<th scope="col">{c}</th>' for c in ("n", "ms", "event_type", "type", "preview"))
    return ('<details class="mmsp-events" open><summary class="mmsp-summary"><span>events </span>'
            f'<span class="mmsp-meta">{_e(events_label(total))}</span></summary>'
            '<div class="mmsp-events-scroll" tabindex="0" role="region" aria-label="stream events">'
            f'<table class="mmsp-events-table"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + f"</tbody></table></div>{more}</details>")


def render_events(turn: Any, limit: int = 500) -> str:
    """The UniEvents of a turn as a static table (``%%mmsp --events``), at most ``limit`` rows.

    The same table :func:`render_html` puts inside the turn with ``events=True``, here on its own.
    """
    return styled(f'<div class="mmsp-root mmsp-static">{_events_details(turn, limit)}</div>')


# ---------------------------------------------------------------------------------------------- chat
# The chat's saved view: its messages as the widget draws them, without its controls. It is the
# second output of a chat's cell, after the widget: hidden while the widget beside it is live, and
# the widget's output hidden when its model is gone (a reopened notebook, a new kernel), so the
# page shows the conversation, not "Error displaying widget". Where no stylesheet applies (GitHub)
# or no widget renders (nbconvert, nbviewer), it is what shows.
_CHAT_SWITCH = (
    ".jp-OutputArea-child:has(.mmsp-chat-widget)+.jp-OutputArea-child:has(.mmsp-chat-static){display:none}"
    # (the widget renderer puts jupyter-widgets on the output itself only to say it failed)
    ".jp-OutputArea-child:has(>.jp-OutputArea-output.jupyter-widgets)"
    ":has(+.jp-OutputArea-child .mmsp-chat-static){display:none}"
)


#: A user message longer than this shows its start, the rest behind "Show more" (js/src/chat.js: the same limits).
LONG_LINES, LONG_CHARS = 12, 1200


def split_long(text: str) -> tuple[str, str]:
    """A user message as what shows at once and what waits behind "Show more" (``""`` when it is short)."""
    lines = text.split("\n", LONG_LINES)
    if len(lines) > LONG_LINES:
        head = "\n".join(lines[:LONG_LINES])
        if len(head) <= LONG_CHARS:
            return head, lines[LONG_LINES]
    if len(text) <= LONG_CHARS:
        return text, ""
    cut = text.rfind(" ", LONG_CHARS // 2, LONG_CHARS) + 1 or LONG_CHARS
    return text[:cut], text[cut:]


def _user_html(entry: Mapping[str, Any]) -> str:
    text = entry.get("text") if isinstance(entry.get("text"), str) else ""
    parts = ['<div class="mmsp-msg mmsp-msg-user"><div class="mmsp-bubble">']
    if text:
        head, rest = split_long(text)
        parts.append(f'<div class="mmsp-user-text">{_e(head)}</div>')
        if rest:  # no script here: the rest in a <details>, which needs none
            more = rest.count("\n") + 1
            parts.append(f'<details class="mmsp-more"><summary>Show more ({more:,} more line{"s" if more > 1 else ""})'
                         f'</summary><div class="mmsp-user-text">{_e(rest)}</div></details>')
    images = [src for src in entry.get("images") or [] if isinstance(src, str)]
    if images:
        parts.append('<div class="mmsp-thumbs">')
        for k, src in enumerate(images, 1):
            if _IMAGE_SRC.fullmatch(src):
                parts.append(f'<img class="mmsp-thumb" src="{_e(src)}" alt="attached image {k}"/>')
            else:
                parts.append(f'<span class="mmsp-meta">image {k} not shown</span>')
        parts.append("</div>")
    parts.append("</div></div>")
    return "".join(parts)


def render_transcript_html(transcript: Iterable[Mapping[str, Any]],
                           memo: dict[int, tuple[Mapping[str, Any], str]] | None = None) -> str:
    """A chat's conversation as sanitized static HTML: user messages, then each answer as its turn's static view.

    ``memo`` (a dict the caller keeps between calls) holds each entry's markup by the entry object:
    an entry that is the same object as at the last call is not rendered again (a chat's saved
    view is drawn anew after every answer). It is left holding this transcript's entries only."""
    parts = ['<div class="mmsp-root mmsp-static mmsp-chat-static" aria-label="Conversation">'
             '<div class="mmsp-chat-log">']
    kept: dict[int, tuple[Mapping[str, Any], str]] = {}
    for entry in transcript:
        hit = memo.get(id(entry)) if memo is not None else None
        part = hit[1] if hit is not None and hit[0] is entry else _entry_html(entry)
        kept[id(entry)] = (entry, part)
        parts.append(part)
    if memo is not None:
        memo.clear()
        memo.update(kept)
    parts.append("</div></div>")
    return f"<style>{_CHAT_SWITCH}</style>" + styled("".join(parts))


def _entry_html(entry: Mapping[str, Any]) -> str:
    if entry.get("role") == "user":
        return _user_html(entry)
    if entry.get("role") == "assistant" and isinstance(entry.get("turn"), Mapping):
        return f'<div class="mmsp-msg mmsp-msg-assistant"><div class="mmsp-msg-body">{turn_markup(entry["turn"])}</div></div>'
    return ""
