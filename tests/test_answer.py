"""The demo model's answer planner (``mmsp_notebook.demo._answer``): the helpers that read the
prompt read only as far as the answer needs."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmsp_notebook.demo import _answer

#: words, stop words, capitals, punctuation and every kind of white space str.split knows
_TEXT = st.lists(st.sampled_from(
    list("abcXYZ'’-0 \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2003\u3000.,!") + ["the ", "and ", "Word ", "data "]),
    max_size=120).map("".join)


def _significant_whole(text: str) -> list[str]:
    """What the planner's key words were when the whole text was read: every distinct significant word."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[A-Za-z][A-Za-z0-9'’-]*", text):
        lowered = word.lower()
        if len(lowered) > 2 and lowered not in _answer._STOP:
            seen.setdefault(lowered)
    return list(seen)


def _snippet_whole(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(1, 6))
def test_the_key_words_are_the_first_of_all_the_words(text: str, limit: int) -> None:
    assert _answer._significant(text, limit) == _significant_whole(text)[:limit]


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(1, 90))
def test_the_snippet_is_the_start_of_the_whole_flattened_text(text: str, limit: int) -> None:
    assert _answer._snippet(text, limit) == _snippet_whole(text, limit)


@pytest.mark.serial  # a bound on the time taken
def test_a_prompt_of_megabytes_is_read_only_as_far_as_its_first_words() -> None:
    # distinct words: read whole, the costliest text there is (over half a second a megabyte)
    prompt = "Tell me about lighthouses and harbours " + " ".join(f"w{i}" for i in range(1_000_000))
    started = time.perf_counter()
    words = _answer._significant(prompt)
    snippet = _answer._snippet(prompt)
    took = time.perf_counter() - started
    assert words == _significant_whole(prompt[:200])[: _answer.KEY_WORDS] and "lighthouses" in words
    assert snippet.startswith("Tell me about lighthouses") and snippet.endswith("…")
    assert took < 0.05, took  # a few microseconds (read whole: about 4 s for these 7 MB)
