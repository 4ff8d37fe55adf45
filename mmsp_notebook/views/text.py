"""The text views of a turn: ``text/plain`` and the terminal, templates of the view model.

Every label, state, banner and footer string comes from the view model (:mod:`.model`); here they
are only laid out as lines: an item as ``[tag] …``, a tool's result under its call, the banner
under the items, the footer's stats joined by ``|``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.chars import printable
from .format import isolate
from .model import view_model

__all__ = ["printable", "render_text", "render_transcript_text", "footer_line", "banner_lines", "banner_line", "item_head", "item_tail",
           "result_line", "cut_text", "not_shown", "PLAIN_TEXT_LIMIT", "HTML_TEXT_LIMIT", "WHOLE_IN"]

#: Characters of one text or thinking item a static view's ``text/plain`` shows (a turn's finished
#: output, a turn or a comparison shown as a value, a chat's saved view): never more than its HTML.
PLAIN_TEXT_LIMIT = 8_000
#: Characters of one text, thinking or arguments area the static HTML draws.
HTML_TEXT_LIMIT = 200_000
#: Where a turn keeps the whole of an area a view cuts (what the note under a cut one names).
WHOLE_IN = {"text": "turn.text", "thinking": "turn.thinking", "tool_call": "turn.tool_calls"}


def cut_text(text: str, limit: int | None) -> tuple[str, int]:
    """``text`` cut at ``limit`` characters (``None``: not cut), and how many are not shown."""
    if limit is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def not_shown(left: int) -> str:
    """The line that says a text from a trace file was cut (``left`` characters are not shown)."""
    return f"… {left:,} characters not shown: the trace file has all"


def footer_line(footer: Mapping[str, Any] | None) -> str:
    """The footer's stats as one line."""
    if not isinstance(footer, Mapping):
        return ""
    return " | ".join(str(s[1]) for s in footer.get("stats") or [] if isinstance(s, (list, tuple)) and len(s) > 1 and s[1])


def banner_lines(banner: Mapping[str, Any] | None) -> list[str]:
    """The banner as lines: its lead and text, then its detail and its hint when it has them."""
    if not isinstance(banner, Mapping) or banner.get("kind") == "streaming":
        return []
    first = f"{banner.get('lead') or ''}{banner.get('text') or ''}"
    return [line for line in (first, banner.get("detail"), banner.get("hint")) if line]


def banner_line(banner: Mapping[str, Any] | None) -> str:
    """The banner on one line (a chat's error banner): its parts joined by dashes, each isolated (a
    server's message may hold a bidi control)."""
    return " — ".join(isolate(line) for line in banner_lines(banner))


def item_head(item: Mapping[str, Any]) -> str:
    """What starts an item in text: ``[tag] `` (and a tool's name, isolated: its arguments follow it);
    nothing for answer text."""
    if item.get("kind") == "text":
        return ""
    if item.get("kind") == "tool_call":
        return f"[{item.get('tag')}] {isolate(item.get('name') or '')} "
    return f"[{item.get('tag')}] "


def item_tail(item: Mapping[str, Any]) -> str:
    """What a finished item that is not text shows after its tag: its meta line (and a preview)."""
    return " ".join(str(x) for x in (item.get("meta"), item.get("preview")) if x)


def result_line(item: Mapping[str, Any]) -> str:
    """A tool call's outcome under it: ``returned …`` / ``raised …``, or its state (``not run``)."""
    result = item.get("result")
    if isinstance(result, Mapping) and isinstance(result.get("text"), str):
        return f"  {item.get('state_text')} {result['text']}"
    return f"  ({item['state_text']})" if item.get("state_text") else ""


def _cap(text: str, limit: int | None, kind: str) -> str:
    shown, left = cut_text(text, limit)
    return shown + (f"… [{left:,} characters not shown — {WHOLE_IN[kind]} has all]" if left else "")  # (as the HTML says)


def render_text(turn: Any, vm: Mapping[str, Any] | None = None, limit: int | None = None) -> str:
    """The static view of a turn as plain text; ``limit`` caps each text, thinking and arguments area,
    a note naming where the turn keeps it whole."""
    if vm is None:
        vm = view_model(turn)
    out = []
    for item in vm.get("items") or []:
        kind = item.get("kind")
        if kind == "text":
            out.append(_cap(item.get("text") or "", limit, "text"))
        elif kind == "thinking":
            out.append(f"[{item.get('label')}] {_cap(item.get('text') or '', limit, 'thinking')}")
        elif kind == "tool_call":
            args = item.get("args") if isinstance(item.get("args"), str) else item.get("text") or ""
            tail = result_line(item)
            out.append(item_head(item) + _cap(args, limit, "tool_call") + ("\n" + tail if tail else ""))
        elif kind == "inline_thinking":
            out.append(f"[{item.get('label')}] {item_tail(item)}")
        else:
            out.append(item_head(item) + item_tail(item))
    lines = banner_lines(vm.get("banner"))
    if lines:
        out.append(f"[{vm.get('status')}] {lines[0]}")
        out.extend(lines[1:])
    footer = footer_line(vm.get("footer"))
    if footer:
        out.append(footer)
    return printable("\n".join(out))


def render_transcript_text(transcript: Any, limit: int | None = PLAIN_TEXT_LIMIT) -> str:
    """A chat's conversation as plain text: ``user:`` and ``assistant:`` paragraphs, each answer as
    :func:`render_text` writes a turn (``limit`` caps each text, thinking and arguments area)."""
    out = []
    for entry in transcript or []:
        if not isinstance(entry, Mapping):
            continue
        if entry.get("role") == "user":
            images = len(entry.get("images") or [])
            said = str(entry.get("text") or "") + (f" [{images} image{'s' if images > 1 else ''}]" if images else "")
            out.append(f"user: {said}")
        elif entry.get("role") == "assistant" and isinstance(entry.get("turn"), Mapping):
            out.append("assistant: " + render_text(None, entry["turn"], limit=limit))
    return printable("\n\n".join(out)) if out else "(an empty chat)"
