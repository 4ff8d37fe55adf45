"""UniMessages given by hand (a chat's history, a prompt message): checked before anything is sent,
each fault named by its place (``history[1].content_items[0]: text.done needs its 'text'``)."""

from __future__ import annotations

from typing import Any

from .._errors import OptionError
from ..core.chars import refuse_lone_surrogate

__all__ = ["check_history", "check_prompt_message"]

_TEXT = ((str,), "text")
#: what each UniMessage item must carry (mmsp.types): a message missing one is refused, not sent
_ITEM_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "text.done": {"text": _TEXT},
    "thinking.done": {"thinking": _TEXT},
    "image_url.done": {"image_url": ((str,), "a URL or data: URL")},
    "inline_data.done": {"data": ((bytes, str), "bytes"), "mime_type": _TEXT},
    "inline_thinking.done": {"data": ((bytes, str), "bytes"), "mime_type": _TEXT},
    "tool_call.done": {"name": _TEXT, "tool_call_id": _TEXT, "arguments": ((dict,), "a dict")},
    "tool_result.done": {"tool_call_id": _TEXT, "text": _TEXT},
    "embedding.done": {"embedding": ((list, tuple), "a list of numbers")},
}


def check_history(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as a list of UniMessages, or an OptionError saying what is wrong."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise OptionError(f"history takes a list of UniMessages (dicts with role and content_items), "
                          f"not {type(messages).__name__}")
    out = list(messages)
    for n, message in enumerate(out):
        _check(message, f"history[{n}]", ("user", "assistant"))
    return out


def check_prompt_message(message: Any) -> dict[str, Any]:
    """A prompt given as a UniMessage: a user's, with at least one item, each as mmsp defines it."""
    _check(message, "the prompt message", ("user",))
    if not message["content_items"]:
        raise OptionError("the prompt message has no content_items: give at least one item (a text.done)")
    for item in message["content_items"]:
        if item["type"] == "text.done":
            refuse_lone_surrogate("the prompt message", item["text"])
    return message


def _check(message: Any, where: str, roles: tuple[str, ...]) -> None:
    if not isinstance(message, dict) or message.get("role") not in roles:
        said = " or ".join(repr(r) for r in roles)
        raise OptionError(f"{where}: a UniMessage is a dict with role {said}"
                          + (f", not {message.get('role')!r:.40}" if isinstance(message, dict) else ""))
    items = message.get("content_items")
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("type"), str)
                                              and i["type"].endswith(".done") for i in items):
        raise OptionError(f"{where}: content_items must be a list of items, each a dict whose 'type' ends in .done")
    for k, item in enumerate(items):
        fields = _ITEM_FIELDS.get(item["type"])
        if fields is None:
            raise OptionError(f"{where}.content_items[{k}]: {item['type']!r} is not a UniMessage item "
                              f"({', '.join(_ITEM_FIELDS)})")
        for field, (kinds, what) in fields.items():
            if not isinstance(item.get(field), kinds):
                raise OptionError(f"{where}.content_items[{k}]: {item['type']} needs its "
                                  f"{field!r} ({what}), not {item.get(field)!r:.60}")
