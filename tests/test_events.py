"""The events table's rows: a long value's preview is worked out from its head, and is the one the whole value gives."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmsp_notebook.core.redact import REDACTED, redact_data, redact_secrets, split_point
from mmsp_notebook.views import events
from mmsp_notebook.views.events import HEAD, PREVIEW, event_row

#: keys as configured: generated ones (matched in any case), a word (matched as written, longer once
#: redacted), one with a quote, a backslash and non-ASCII (JSON escapes them), one holding a space and
#: one holding "redacted" (the marker itself begins like it)
KEYS = ["sk-proj-abc123DEF456ghi789JKL0", "sk-ant-api03-zz9Yy8Xx7Ww6", "AIzaSyA1b2C3d4E5f6G7h8I9j0",
        "ollama", 'Pässw0rd"x\\yz', "my key 12345678", "redacted-4242abc", "tab\tkey-99887766"]
#: what the text around the keys is made of: key characters, spaces, non-ASCII, characters JSON escapes
ALPHABET = "abcxyzSKPROJ0123456789-_ .,é—漢\n\t\x01\"\\]}"


def reference(item: dict[str, Any], secrets: list[str]) -> str:
    """The preview as worked out from the whole value: every string redacted, the JSON written, redacted, cut."""
    shown: dict[str, Any] = {}
    for key, value in item.items():
        if key == "type":
            continue
        if isinstance(value, (bytes, bytearray)):
            value = f"<{len(value)} bytes>"
        elif isinstance(value, list) and len(value) > 4:
            value = f"<{len(value)} values>"
        else:
            value = redact_data(value, secrets)
        shown[key] = value
    preview = redact_secrets(json.dumps(shown, ensure_ascii=False, default=str), secrets)
    return preview if len(preview) <= PREVIEW else preview[:PREVIEW - 3] + "…"


def preview(item: dict[str, Any], secrets: list[str]) -> str:
    return event_row(1, 1.0, {"event_type": "delta", "content_items": [item]}, {}, secrets=secrets)["preview"]


def configured(keys: list[str]) -> list[str]:
    return sorted(set(keys), key=len, reverse=True)  # (as secret_values gives them: longest first)


def shapes(text: str, other: str = "short") -> list[dict[str, Any]]:
    """Items holding ``text``: a done text, and a tool call's arguments nesting it in dicts and lists."""
    return [{"type": "text.done", "text": text},
            {"type": "thinking.done", "thinking": other, "text": text, "signature": text},
            {"type": "tool_call.done", "name": "f", "id": other,
             "arguments": {"path": other, "lines": [other, text, other], "body": {"x": text}, "n": 3}},
            {"type": "tool_result.done", "result": [{"k": text}, text], "data": b"\x00" * 9, "items": [1, 2, 3, 4, 5]}]


def variant(key: str, how: int) -> str:
    """``key`` in another ASCII case (as a model may echo it), or as written."""
    return [key, key.upper(), key.lower(), key.swapcase()][how % 4]


@st.composite
def texts(draw: st.DrawFn) -> str:
    """A text with keys, whole or cut, in any case, alone or run together, among text of every kind."""
    parts = [draw(st.text(ALPHABET, max_size=400))]
    for _ in range(draw(st.integers(0, 8))):
        key = variant(draw(st.sampled_from(KEYS)), draw(st.integers(0, 3)))
        cut = draw(st.integers(1, len(key)))
        parts.append(key[:cut] * draw(st.integers(1, 12)))
        parts.append(draw(st.text(ALPHABET, max_size=draw(st.sampled_from([0, 3, 40, 300])))))
    return "".join(parts)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts(), st.lists(st.sampled_from(KEYS), max_size=5), st.integers(0, 600), st.sampled_from("a é\n—\"0"),
       st.sampled_from([1, 7, 60, 110, 117, 130, HEAD]))
def test_a_preview_is_the_one_the_whole_value_gives(text: str, keys: list[str], lead: int, pad: str, head: int) -> None:
    secrets = configured(keys)
    text = pad * lead + text + "tail " * 100
    with pytest.MonkeyPatch.context() as patch:  # (any head gives the same preview: a short one is cut in the part shown)
        patch.setattr(events, "HEAD", head)
        for item in shapes(text, text[:7]):
            assert preview(item, secrets) == reference(item, secrets)


FILLERS = ["word " * 200, "abcdef0123" * 100, "é—漢字 " * 150, "a\nb\tc\x01\"\\ " * 100, "x" * 1000]


@pytest.mark.parametrize("filler", FILLERS, ids=["words", "key-characters", "non-ascii", "escaped", "one-letter"])
def test_a_key_at_every_place_around_the_head_and_the_preview_cut_is_redacted_as_in_the_whole(filler: str) -> None:
    """A key across the head's end, behind no key (the preview's end far before it) or behind seven
    or eight redacted shorter (the preview's end just about it), and a key across the preview's end."""
    secrets = configured(KEYS)
    for key in ("sk-proj-abc123DEF456ghi789JKL0", "ollama", 'Pässw0rd"x\\yz', "redacted-4242abc"):
        for written in {variant(key, how) for how in range(4)}:
            for size in (6, len(written) - 1, len(written)):
                for before, places in (("", [*range(100, 122), *range(HEAD - 35, HEAD + 5)]),
                                       (variant(KEYS[0] + " ", len(written)) * 7, range(0, 45)),
                                       (variant(KEYS[0] + " ", len(written)) * 8, range(0, 12))):
                    for at in places:
                        text = before + filler[:at] + written[:size] + filler[at:]
                        for item in shapes(text)[:2]:
                            assert preview(item, secrets) == reference(item, secrets), (key, written, size, before, at)


@pytest.mark.parametrize("key", [KEYS[0], "ollama", 'Pässw0rd"x\\yz', "redacted-4242abc"])
def test_a_head_ending_where_the_preview_is_cut_gives_the_preview_the_whole_value_gives(key: str) -> None:
    """Heads of every size about the preview's end (the head alone then about as long as the
    preview), a key (alone configured: its other case's letters are in no other key) in any case
    across the head's end at every place."""
    for head in range(100, 126):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(events, "HEAD", head)
            for written in {variant(key, how) for how in range(4)}:
                for size in (6, len(written)):
                    for at in range(head - size - 2, head + 2):
                        text = "word " * 12 + "w" * (at - 60) + written[:size] + " more" * 60
                        item = {"type": "text.done", "text": text}
                        assert preview(item, [key]) == reference(item, [key]), (head, written, size, at)


def test_a_head_of_keys_redacted_shorter_is_worked_out_longer() -> None:
    secrets = configured(KEYS[:3])
    for text in ((KEYS[0] + " ") * 2_000, KEYS[0] * 2_000 + " end", (KEYS[0].upper() + "\n") * 2_000,
                 ("ollama " * 3_000), ("x" * 5_000) + " " + KEYS[1]):
        for item in shapes(text):
            assert preview(item, secrets) == reference(item, secrets)
    shown = preview({"type": "text.done", "text": (KEYS[0] + " ") * 2_000}, secrets)
    assert shown == ('{"text": "' + (REDACTED + " ") * 10)[:PREVIEW - 3] + "…" and KEYS[0][:6] not in shown


def test_short_values_and_rows_without_a_long_string_are_as_before() -> None:
    secrets = configured(KEYS)
    for text in ("", "hi", KEYS[0], "é" * (PREVIEW - 12), "é" * (PREVIEW - 11), "x" * HEAD, "x" * (HEAD + 1)):
        for item in shapes(text):
            assert preview(item, secrets) == reference(item, secrets)
        assert preview({"type": "text.done", "text": text}, []) == reference({"type": "text.done", "text": text}, [])


def test_a_split_point_is_past_a_character_no_key_has_and_no_control() -> None:
    secrets = ["abc123XYZ789", "k-e y"]
    assert split_point("aBc\n-e y.", 0, secrets) == 9  # (letters in any case, the space, the control, all in keys or escaped)
    assert split_point("ABC123" * 10, 0, secrets) == -1
    assert split_point("q r", 0, secrets) == 1 and split_point("q r", 2, secrets) == 3
    assert split_point("αβ", 1, []) == 1 and split_point("\n\x01x", 0, []) == 3


@pytest.mark.serial  # a 10 MB answer's row within 50 ms
def test_a_long_answers_row_costs_what_its_preview_does() -> None:
    secrets = configured(KEYS[:3])
    para = "Ünïcödé **bold** text — with `code`, a [link](https://example.com) and $x^2$ here. " * 4 + "\n\n"
    text = (para * (10_000_000 // len(para) + 1))[:10_000_000] + KEYS[0]
    for item in ({"type": "text.done", "text": text},
                 {"type": "tool_call.done", "name": "f", "arguments": {"path": "a.md", "body": text}}):
        took = []
        for _ in range(3):
            started = time.perf_counter()
            shown = preview(item, secrets)
            took.append(time.perf_counter() - started)
        assert shown.endswith("…") and len(shown) == PREVIEW - 2 and para[:40] in shown
        assert min(took) < 0.05, f"{min(took):.3f} s"  # (the whole value redacted and written: ~0.8 s)
