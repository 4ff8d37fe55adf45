"""The demo model's answer planner (``mmsp_notebook.demo._answer``): the helpers that read the
prompt read only as far as the answer needs."""

from __future__ import annotations

import re
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmsp_notebook.demo import _answer
from mmsp_notebook.demo._scenario import DemoRequest, Plan, ToolSpec, Turn, parse_model, request_seed, tokenize

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


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(1, 7))
def test_the_token_count_is_that_of_the_tokens(text: str, step: int) -> None:
    assert _answer._count_tokens(text, step) == len(tokenize(text)) == _answer._count_tokens(text)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(1, 40))
def test_the_head_is_the_prompt_up_to_a_word_boundary(text: str, limit: int) -> None:
    head = _answer._head(text, limit)
    cut = len(text) > limit and not text[limit].isspace() and not text[limit - 1].isspace()
    if cut and len(text[:limit].split()) > 1:  # the word the limit cuts is left out, those before it kept
        assert text.startswith(head) and head.split() == text[:limit].split()[:-1]
    else:  # (no word cut, or the only one: cut where the limit falls)
        assert head == text[:limit]


#: a tool for each kind of parameter the planner fills in, and one with markup in its name
_TOOLS = [
    ToolSpec("get_weather", "The weather in a city", {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}),
    ToolSpec("search_docs", "Search the docs", {"type": "object", "properties": {"query": {"type": "string"}}}),
    ToolSpec("<b>bold</b>", "", {"type": "object", "properties": {"n": {"type": "integer"}}}),
]
_PROMPTS = [
    "hello",
    "",
    "Tell me about lighthouses and harbours in Brittany",
    "What's the weather in Paris and Lyon, in fahrenheit?",
    "search the docs for streaming",
    "Please draw a lighthouse at dusk",
    "say good morning to everyone",
    "This notebook cell failed. Correct it.\n\nIn [3]:\n```python\nx = 1 / 0\n```\n\nIt raised:\n```\n"
    "Traceback (most recent call last):\n  File \"<cell>\", line 1\nZeroDivisionError: division by zero\n```",
    "What does this error mean?\n```python\nint('x')\n```\nValueError: invalid literal for int() with base 10: 'x'",
    "word " * 20_000,  # (longer than most prompts, shorter than PLAN_CHARS)
]


def _plans(monkeypatch: pytest.MonkeyPatch, plan_chars: int) -> list[Plan]:
    monkeypatch.setattr(_answer, "PLAN_CHARS", plan_chars)
    plans = []
    for model in ("demo", "demo+xss", "demo+tokens=40", "demo+cut-args", "demo+nothink"):
        for tools in ([], _TOOLS):
            for prompt in _PROMPTS:
                request = DemoRequest(model, [Turn("system", ["be brief"]), Turn("user", [prompt])], tools=tools)
                plans.append(_answer.build_plan(request, parse_model(model), media=True, seed=request_seed(prompt)))
    return plans


def test_prompts_under_the_bound_are_planned_as_when_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _plans(monkeypatch, sys.maxsize)
    assert _plans(monkeypatch, _answer.PLAN_CHARS) == whole
    # the bound is what changes nothing: read as far as the first words, the plans differ
    assert _plans(monkeypatch, 12) != whole


@pytest.mark.serial  # a bound on the time taken
def test_a_prompt_of_20_mb_is_planned_promptly() -> None:
    """The planner reads the first PLAN_CHARS characters of the prompt: the answer to a prompt of
    20 MB is planned as that of its start, in well under a second (read whole by the planner's
    searches for a tool's name, "draw" and "say", several seconds), its usage counting every token."""
    start = "Tell me about lighthouses and harbours, then mention the weather "
    words = " ".join(f"w{index}" for index in range(20 * 1024 * 1024 // 8))
    fix = ("```python\nx = 1 / 0\n```\nTraceback (most recent call last):\n"
           "ZeroDivisionError: division by zero\n")
    for prompt, kind in ((start + words, "tool_call"), (fix + words, "text"), (words, "text")):
        request = DemoRequest("demo+nothink", [Turn("user", [prompt])], tools=_TOOLS)
        seed = request_seed(prompt[:100])
        started = time.perf_counter()
        plan = _answer.build_plan(request, parse_model("demo+nothink"), media=True, seed=seed)
        took = time.perf_counter() - started
        assert took < 2.0, took  # (about 0.3 s here; read whole, over 5 s)
        assert [block.kind for block in plan.blocks][0] == kind
        head = DemoRequest("demo+nothink", [Turn("user", [prompt[:1000].rsplit(None, 1)[0]])], tools=_TOOLS)
        assert plan.blocks == _answer.build_plan(head, parse_model("demo+nothink"), media=True, seed=seed).blocks
    # every token is counted (the tools', the role's and the prompt's)
    assert plan.usage.prompt == _answer._prompt_tokens(DemoRequest("m", [], _TOOLS)) + 3 + len(tokenize(words))
