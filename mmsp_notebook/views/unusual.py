"""What the views say of the unusual: a finish reason that is not a normal end, a complete turn with
no answer, an item of a kind this package does not know, content the turn state accepts that no
view expects (a text fragment that is no string, a vector of things that are no numbers).

The view model (:mod:`.model`) takes these words as it takes every other; the widget, the static HTML
and the text views place them. Each string a server chose (a finish reason, an item's type, a
string an unknown item carries) is redacted, cut to a bounded length, its control characters made
visible and its bidi controls isolated: never markup (the HTML escapes it), never able to reorder
the line it sits in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.chars import printable
from ..core.items import GROWING_FIELD, ItemState
from ..core.redact import redact
from . import format as fmt

__all__ = ["NORMAL_FINISH", "FINISH_MEANINGS", "finish_stat", "NO_ANSWER", "has_answer", "item_type", "item_excerpt",
           "EXCERPT_LIMIT", "item_text"]

#: The finish reasons of an answer that ended as it should: mmsp's ``stop`` and ``tool_call`` (of
#: :data:`~mmsp_notebook.core.state.FINISH_REASONS`, mmsp's own: the other two are ``length`` and
#: ``unknown``), and the spellings a trace of
#: another producer may hold for them.
NORMAL_FINISH = frozenset({"stop", "tool_call", "tool_calls", "end_turn", "tool_use", "stop_sequence", "function_call"})

#: What a finish reason that is not a normal end means, where it is known (the footer says it).
FINISH_MEANINGS = {
    "content_filter": "the provider withheld or cut the answer",
    "safety": "the provider withheld or cut the answer",
    "recitation": "the provider withheld or cut the answer",
    "refusal": "the model refused to answer",
    "unknown": "the provider ended the answer for a reason mmsp does not know: it may be cut short",
}

#: Characters of a server's string a view shows in one line (a finish reason, an item's type or what it carries).
EXCERPT_LIMIT = 120


def _one_line(value: str, limit: int = EXCERPT_LIMIT) -> str:
    """A server's string on one bounded line: redacted, its whitespace runs as one space, cut at
    ``limit`` characters with "…", control characters visible, bidi controls isolated."""
    text = " ".join(redact(value).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return fmt.isolate(printable(text))


def finish_stat(reason: Any) -> tuple[str, str, str | None]:
    """The footer stat of a finish reason: ``(key, text, tooltip)``; a warning (``⚠``) for every
    reason that is not a normal end, saying what it means where known."""
    key = reason if isinstance(reason, str) else fmt.as_text(reason)
    said = _one_line(key, 60)
    if key in NORMAL_FINISH:
        return "finish", f"finish: {'tool call' if key in ('tool_call', 'tool_calls') else said}", None
    if key == "length":
        return "truncated", "⚠ truncated (length)", "the model stopped at its output token limit"
    meaning = FINISH_MEANINGS.get(key)
    if meaning:
        return "warning", f"⚠ finish: {said} — {meaning}", None
    return "warning", f"⚠ finish: {said}", "not a normal end (stop or tool call): the answer may be cut short or withheld"


#: What a complete turn with no answer says (mmsp itself raises ``EmptyResponseError`` for one).
NO_ANSWER = "(no answer) the model sent no answer: no text, tool call, media or embedding"


def has_answer(items: Iterable[ItemState]) -> bool:
    """Whether ``items`` hold an answer: text that is not blank, a tool call, media or an embedding
    that is not empty, an item of a kind not known here (what a newer mmsp sends). Thinking is not one."""
    for item in items:
        if item.kind in ("thinking", "inline_thinking"):
            continue
        if item.kind == "text":
            if item_text(item).strip():
                return True
        elif item.kind in ("inline_data", "embedding"):
            if item.size:
                return True
        else:
            return True
    return False


def item_type(item: ItemState) -> str:
    """The type of an item of a kind not known here, as its tag shows it (``citation``)."""
    return _one_line(item.kind, 40) or "data"


def item_excerpt(item: ItemState) -> str:
    """A short preview of what an item of an unknown kind carries: its ``text`` when it has one,
    else its first other string as ``key: value``; ``""`` when it carries none. From its ``.done``,
    or while it streams from its deltas (each key's strings joined)."""
    if item.kind in GROWING_FIELD:
        return ""
    fields: dict[str, str] = {}
    if isinstance(item.done, Mapping):
        fields = {k: v for k, v in item.done.items() if isinstance(k, str) and isinstance(v, str)}
    else:
        for chunk in item.chunks:
            for k, v in (chunk.items() if isinstance(chunk, Mapping) else ()):
                if isinstance(k, str) and isinstance(v, str):
                    fields[k] = fields.get(k, "") + v
    fields = {k: v for k, v in fields.items() if k not in ("type", "mime_type") and v.strip()}
    if not fields:
        return ""
    if "text" in fields:
        return _one_line(fields["text"])
    key = next(iter(fields))
    return _one_line(f"{key}: {fields[key]}")


def _fragment(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def item_text(item: ItemState) -> str:
    """The text of a text, thinking or tool call item as a view shows it: a fragment the state took
    that is no string (``5``, a list: the item's content is then a list) as its JSON, ``None`` as nothing."""
    content = item.content()
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_fragment(x) for x in content)
    return _fragment(content)
