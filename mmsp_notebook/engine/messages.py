"""UniMessages given by hand (a chat's history, a prompt message): checked before anything is sent,
each fault named by its place (``history[1].content_items[0]: text.done needs its 'text'``)."""

from __future__ import annotations

import base64
import re
from typing import Any

from .._errors import OptionError
from ..core.chars import refuse_lone_surrogate
from ..core.redact import redact

__all__ = ["check_history", "check_prompt_message", "data_url_item", "sniff_image"]

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
        url = item.get("image_url") if item["type"] == "image_url.done" else None
        if isinstance(url, str) and url[:5].lower() == "data:":
            try:
                data_url_item(url)  # an image a provider would refuse, with every later turn of the chat
            except OptionError as exc:
                raise OptionError(f"{where}.content_items[{k}]: {exc}") from None


_DATA_URL = re.compile(r"data:([^,;]*)((?:;[^,;]*)*),(.*)", re.S | re.I)


def data_url_item(url: str) -> dict[str, Any]:
    """The ``image_url.done`` item of an image's ``data:`` URL, checked as a provider would check it:
    base64 that decodes to an image, labelled with the type its bytes are when they are PNG, JPEG,
    GIF or WebP (a PNG called ``image/jpeg`` is refused by some providers), else as it is labelled
    (HEIC, AVIF… some providers take); damaged base64, no bytes, SVG or other markup, a URL that is
    not base64 or not of an image is an :class:`OptionError` before sending."""
    match = _DATA_URL.match(url)
    said = redact(repr(url[:60] + ("…" if len(url) > 60 else "")))
    if not match:
        raise OptionError(f"not an image: {said} is not a data URL (data:image/png;base64,...)")
    declared = match.group(1).strip().lower() or "text/plain"
    if not declared.startswith("image/"):
        raise OptionError(f"not an image: a data URL of type {declared}, not an image ({said})")
    if ";base64" not in match.group(2).lower():
        raise OptionError(f"not an image: the data URL {said} is not base64 (data:{declared};base64,...)")
    payload = re.sub(r"\s+", "", match.group(3))
    try:
        data = base64.b64decode(payload, validate=True)
    except ValueError:  # binascii.Error: a character out of the alphabet, or cut short
        raise OptionError(f"not an image: the data URL {said} holds damaged base64 "
                          f"({len(payload):,} characters)") from None
    mime = sniff_image(data)
    if mime is None and (not data or declared == "image/svg+xml" or data.lstrip()[:1] == b"<"):  # (markup: SVG)
        raise OptionError(f"not an image: the {len(data):,} bytes of the data URL {said} are not PNG, JPEG, GIF "
                          "or WebP data")
    if mime is None:  # another image type (HEIC, AVIF…), which some providers take: sent as it is labelled
        mime = declared
    return {"type": "image_url.done", "image_url": f"data:{mime};base64,{payload}"}


def sniff_image(data: bytes) -> str | None:
    """The image type ``data`` is (PNG, JPEG, GIF or WebP, the types every provider takes), else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
