"""The explorer's detail pane in windows (``traces._detail``): a long conversation is sent around the
selected turn, its outline whole, and the rest block by block as the front end asks for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_explore import T0, capture, inject, save

from mmsp_notebook import traces

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gen_corpus  # noqa: E402


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """Agent traces of 50 to 80 steps (tool calls with long results, thinking), sidecars for even ones."""
    return gen_corpus.generate(tmp_path_factory.mktemp("agent") / "c", files=2, seed=5, shape="agent")


def lean(item: dict[str, Any]) -> dict[str, Any]:
    """An item as the detail sends it: a tool call's raw argument text only where no parsed arguments are."""
    drop = item.get("kind") == "tool_call" and isinstance(item.get("args"), str)
    return {k: v for k, v in item.items() if not (drop and k == "text")}


def size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False).encode("utf-8"))


def walk(explorer: Any, detail: dict[str, Any]) -> list[dict[str, Any]]:
    """Every piece of the conversation, asking for the blocks before the window, then after it."""
    lo, hi = detail["window"]
    before: list[list[dict[str, Any]]] = []
    after: list[dict[str, Any]] = []
    while lo > 0:
        answer = inject(explorer, {"type": "more", "row": detail["row"], "before": lo})
        assert answer["type"] == "more" and answer["window"][1] == lo and answer["window"][0] < lo
        lo = answer["window"][0]
        before.insert(0, answer["entries"])
    while hi < detail["blocks"]:
        answer = inject(explorer, {"type": "more", "row": detail["row"], "after": hi})
        assert answer["window"][0] == hi and answer["window"][1] > hi
        hi = answer["window"][1]
        after.extend(answer["entries"])
    return [p for chunk in before for p in chunk] + detail["entries"] + after


def merged(pieces: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The pieces put back together by entry key: items (by ``i``) and lines, in order."""
    out: dict[str, dict[str, Any]] = {}
    for p in pieces:
        entry = out.setdefault(p["key"], {"items": [], "lines": [], "steps": []})
        entry["items"].extend((p.get("vm") or {}).get("items") or [])
        entry["lines"].extend(p.get("lines") or [])
        if "steps" in p:
            entry["steps"].append(p["steps"][:2])
    return out


def test_an_agent_turn_is_sent_around_the_selected_step_and_the_rest_on_request(agent):
    explorer = traces.explore(agent)
    capture(explorer)
    tid = explorer.turns["trace_id"].iloc[0]
    rows = [int(i) for i in explorer.turns.index[explorer.turns["trace_id"] == tid]]
    assert len(rows) >= 50
    pos = rows[len(rows) // 2]
    detail = inject(explorer, {"type": "select", "row": pos})
    conversation = explorer.conversation
    assert conversation is not None
    whole = {"entries": conversation.entries, "waterfall": conversation.waterfall()}
    assert size(whole) > 300_000  # what a detail used to carry
    assert size(detail) < 64_000, size(detail)
    # what the conversation holds in a line; the selected turn's step is in the window, a few steps around it
    steps = len(conversation.entries[1]["indices"])
    assert detail["outline"] == f"1 user message · 1 assistant turn ({steps} steps)"
    key, index = detail["selected"], detail["index"]
    turn = next(e for e in conversation.entries if e["key"] == key)
    step = turn["indices"].index(index)
    assert detail["selected_step"] == step
    piece = next(p for p in detail["entries"] if p["key"] == key)
    lo, hi, n = piece["steps"]
    assert lo <= step < hi < n and n == len(turn["indices"]) and hi - lo >= 2
    assert {it["step"] for it in piece["vm"]["items"]} == set(range(lo, hi))
    assert any(it["step"] == step for it in piece["vm"]["items"])
    # the selected step's waterfall bars, not the other steps'
    bars = detail["waterfall"]["bars"]
    assert bars and {b["step"] for b in bars} <= set(range(lo, hi)) and any(b["selected"] for b in bars)
    assert f"of {n} shown" in detail["waterfall"]["summary"]
    assert len(conversation.waterfall()["bars"]) > 3 * len(bars)
    # asked for, the blocks before and after come in windows of about the same size, and put back
    # together they are the whole conversation: every item once, in order, every timing line
    pieces = walk(explorer, detail)
    back = merged(pieces)
    for entry in conversation.entries:
        got = back[entry["key"]]
        if "vm" in entry:
            assert [{k: v for k, v in it.items() if k != "step"} for it in got["items"]] == [
                lean(it) for it in entry["vm"]["items"]]
        if entry.get("lines"):
            assert got["lines"] == entry["lines"]
    # a tool call's raw argument text is left out where its parsed arguments are drawn
    calls = [it for it in back[key]["items"] if it["kind"] == "tool_call"]
    assert calls and all("text" not in it for it in calls if isinstance(it.get("args"), str))


def test_a_long_conversation_of_many_messages_is_sent_around_the_selected_turn(tmp_path):
    history = []
    for k in range(150):
        history.append({"role": "user", "content_items": [{"type": "text.done", "text": f"question {k} " * 40}],
                        "created_at": T0 + k * 10_000})
        history.append({"role": "assistant", "content_items": [{"type": "text.done", "text": f"answer {k} " * 200}],
                        "finish_reason": "stop", "usage_metadata": {"prompt_tokens": 3, "response_tokens": 200},
                        "created_at": T0 + k * 10_000 + 900})
    save(tmp_path, "long", history)
    explorer = traces.explore(tmp_path)
    capture(explorer)
    explorer.filter(text="turn>99").select(0)  # turn 100: message 201
    detail = explorer.comm.sent[-1]
    assert detail["selected"] == "m201" and detail["blocks"] == 300
    assert detail["outline"] == "150 user messages · 150 assistant turns"
    keys = [p["key"] for p in detail["entries"]]
    assert "m201" in keys and 4 < len(keys) < 60 and size(detail) < 64_000
    lo, hi = detail["window"]
    assert keys == [f"m{k}" for k in range(lo, hi)] and lo < 201 < hi
    assert sum(1 for k in keys if int(k[1:]) < 201) < sum(1 for k in keys if int(k[1:]) > 201)  # more after it
    pieces = walk(explorer, detail)
    assert [p["key"] for p in pieces] == [f"m{k}" for k in range(300)]
    assert all("steps" not in p for p in pieces)
    assert not any(k in p for p in pieces for k in ("index", "indices", "turns"))  # the kernel's own fields
    # the whole conversation in one message when the budget allows it
    explorer.detail_budget = float("inf")
    explorer.select(0)
    assert explorer.comm.sent[-1]["window"] == [0, 300]


def test_a_request_for_more_that_names_nothing_is_not_answered(tmp_path):
    save(tmp_path, "one", [{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]},
                           {"role": "assistant", "content_items": [{"type": "text.done", "text": "hello"}]}])
    explorer = traces.explore(tmp_path)
    capture(explorer)
    explorer.select(0)
    for bad in ({"type": "more"}, {"type": "more", "row": 0}, {"type": "more", "row": 5, "after": 0},
                {"type": "more", "row": "0", "after": 0}, {"type": "more", "row": 0, "after": "1"},
                {"type": "more", "row": True, "after": 0}):
        assert inject(explorer, bad) == {}, bad
    # an edge out of the conversation gives nothing new
    assert inject(explorer, {"type": "more", "row": 0, "after": 99})["entries"] == []
    assert inject(explorer, {"type": "more", "row": 0, "before": -3})["entries"] == []
    assert [p["key"] for p in inject(explorer, {"type": "more", "row": 0, "before": 2})["entries"]] == ["m0", "m1"]


def test_an_answer_longer_than_the_html_views_draw_is_sent_cut_with_a_line_that_says_so(tmp_path):
    """A 1,000,000-character answer (a model that did not stop) is not sent to the page whole: its text
    is cut as the conversation's HTML cuts it, the rest counted."""
    from mmsp_notebook.views.text import HTML_TEXT_LIMIT

    long = "all work and no play " * 50_000
    save(tmp_path, "long", [{"role": "user", "content_items": [{"type": "text.done", "text": "go on"}], "created_at": T0},
                            {"role": "assistant", "content_items": [{"type": "text.done", "text": long}],
                             "finish_reason": "length", "created_at": T0 + 900}])
    explorer = traces.explore(tmp_path)
    capture(explorer)
    explorer.select(0)
    detail = explorer.comm.sent[-1]
    assert size(detail) < 2 * HTML_TEXT_LIMIT
    [answer] = [p for p in detail["entries"] if p["key"] == "m1"]
    [item] = [it for it in answer["vm"]["items"] if it.get("kind") == "text"]
    assert item["text"].startswith(long[:HTML_TEXT_LIMIT])
    assert item["text"].endswith(f"… {len(long) - HTML_TEXT_LIMIT:,} characters not shown: the trace file has all")
