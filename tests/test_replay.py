"""replay(): a recorded turn streams again with its original timing and ends in the same state."""

from __future__ import annotations

import io
import json
import math
import time

import pytest

import mmsp_notebook as mn
from mmsp_notebook import ask, traces
from mmsp_notebook._html import render_html
from mmsp_notebook._replay import load_recorded, replay_plan, strip_timings
from mmsp_notebook._sidecar import sidecar_path



def _items(turn):
    return [(i.kind, i.status, i.content(), i.done, i.name, i.tool_call_id, i.mime_type) for i in turn.items]


def _same_state(replayed, original):
    assert replayed.status == original.status == "complete"
    assert replayed.finish_reason == original.finish_reason
    assert replayed.usage == original.usage
    assert replayed.message["content_items"] == original.message["content_items"]
    assert replayed.message["usage_metadata"] == original.message["usage_metadata"]
    assert strip_timings(render_html(replayed)) == strip_timings(render_html(original))


@pytest.fixture
def recorded(fresh_session):
    """A one-second paced turn (50 fragments/s, no thinking, ~45 fragments), traced."""
    turn = ask("Tell me about lighthouses", model="demo+tps=50+nothink", max_tokens=45, stream=io.StringIO())
    assert turn.status == "complete" and turn.trace_id
    return turn


def test_replay_reproduces_state_rendering_and_timing(recorded):
    original = recorded
    recorded_total = original.steps[0].total
    assert 0.7 < recorded_total < 1.6
    started = time.monotonic()
    replayed = mn.replay(original.trace_id, display=False)
    took = time.monotonic() - started
    _same_state(replayed, original)
    # the deltas are the original fragments: same count, same sizes, same types, in order
    assert [e["content_items"][0]["type"] if e["content_items"] else "stop" for e in replayed.events] == \
        [e["content_items"][0]["type"] if e["content_items"] else "stop" for e in original.events]
    assert _items(replayed) == _items(original)
    assert replayed.replayed_from["timed"] is True
    # timing within 10 % at speed 1: the whole replay and the time of every event
    assert abs(replayed.steps[0].total - recorded_total) / recorded_total < 0.10, (replayed.steps[0].total, recorded_total)
    assert abs(took - recorded_total) / recorded_total < 0.10
    original_ms = [row[0] for row in original.steps[0].sidecar_events()]
    replayed_ms = [row[0] for row in replayed.steps[0].sidecar_events()]
    assert max(abs(a - b) for a, b in zip(original_ms, replayed_ms)) < 0.10 * recorded_total * 1000


def test_replay_speed_ten_is_ten_times_faster(recorded):
    started = time.monotonic()
    fast = mn.replay(recorded.trace_id, speed=10, display=False)
    took = time.monotonic() - started
    _same_state(fast, recorded)
    expected = recorded.steps[0].total / 10
    assert took < expected * 1.5 + 0.05 and fast.steps[0].total == pytest.approx(expected, rel=0.25, abs=0.02)
    instant = mn.replay(recorded.trace_id, speed=math.inf, display=False)
    _same_state(instant, recorded)
    assert instant.steps[0].total < 0.05


def test_replay_without_a_sidecar_is_instant_and_equal(recorded):
    sidecar_path(recorded.trace_id).unlink()
    started = time.monotonic()
    replayed = mn.replay(recorded.trace_id, display=False)
    assert time.monotonic() - started < 0.5
    assert replayed.replayed_from["timed"] is False
    _same_state(replayed, recorded)


def test_replay_takes_a_path_or_a_load_turns_row_and_shows_text(recorded, tmp_path, capsys):
    path = sidecar_path(recorded.trace_id).with_name(sidecar_path(recorded.trace_id).name.replace(".timing.jsonl", ".json"))
    by_path = mn.replay(path, turn=0, speed=math.inf, display=False)
    _same_state(by_path, recorded)
    turns = traces.load_turns(tmp_path / "cache")
    row = turns.iloc[-1]
    shown = mn.replay(row, speed=20, root=tmp_path / "cache")  # display=True outside Jupyter: text on stdout
    _same_state(shown, recorded)
    assert recorded.text[:40] in capsys.readouterr().out
    with pytest.raises(ValueError):
        mn.replay(recorded.trace_id, turn=5, display=False)
    with pytest.raises(FileNotFoundError):
        mn.replay("no/such/trace", display=False)
    with pytest.raises(ValueError):
        mn.replay(recorded.trace_id, speed=0, display=False)


def test_replay_of_thinking_tool_calls_and_media(fresh_session):
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"19 degrees in {city}"

    tool_turn = ask("What's the weather in Paris and Rome?", tools=[get_weather], chat="tools", stream=io.StringIO())
    first_step = load_recorded(tool_turn.trace_id, turn=-2)
    assert first_step["message"]["finish_reason"] == "tool_call" and first_step["record"] is not None
    replayed = mn.replay(tool_turn.trace_id, turn=-2, speed=math.inf, display=False)
    calls = replayed.tool_calls
    assert [c["arguments"] for c in calls] == [c["arguments"] for c in tool_turn.tool_calls]
    assert [c["output"] for c in calls] == ["19 degrees in Paris", "19 degrees in Rome"]
    assert replayed.steps[0].message()["content_items"] == tool_turn.steps[0].message()["content_items"]
    assert replayed.thinking == tool_turn.steps[0].thinking and replayed.items[0].fidelity
    last = mn.replay(tool_turn.trace_id, speed=math.inf, display=False)
    assert last.text == tool_turn.text

    for prompt, chat in (("draw a lighthouse", "img"), ("say good morning", "audio")):
        media = ask(prompt, chat=chat, stream=io.StringIO())
        again = mn.replay(media.trace_id, speed=math.inf, display=False)
        assert again.message["content_items"] == media.message["content_items"]
        assert strip_timings(render_html(again)) == strip_timings(render_html(media))
    embed = ask("embed this", model="demo-embed", chat="vec", stream=io.StringIO())
    again = mn.replay(embed.trace_id, speed=math.inf, display=False)
    assert again.embeddings == embed.embeddings


def test_replay_plan_splits_done_content_into_the_recorded_sizes():
    message = {"role": "assistant", "content_items": [
        {"type": "thinking.done", "thinking": "Hmm.", "fidelity": {"signature": "sig"}},
        {"type": "text.done", "text": "Hello world"},
        {"type": "tool_call.done", "name": "f", "tool_call_id": "c1", "arguments": {"a": 1}}],
        "usage_metadata": {"response_tokens": 3}, "finish_reason": "tool_call", "created_at": 1}
    timing = [[10, "thinking.delta", 2], [20, "thinking.delta", 2], [20, "thinking.delta", 0], [30, "thinking.done", 4],
              [30, "text.delta", 5], [40, "text.delta", 6], [45, "text.done", 11],
              [50, "tool_call.delta", 4], [60, "tool_call.delta", 4], [70, "tool_call.done", 8], [71, "stop", 0]]
    plan = replay_plan(message, timing)
    assert [ms for ms, _ in plan] == [row[0] for row in timing]
    pieces = [e["content_items"][0] for _, e in plan[:-1]]
    assert [p.get("thinking") for p in pieces[:3]] == ["Hm", "m.", ""]
    assert [p.get("text") for p in pieces[4:6]] == ["Hello", " world"]
    assert pieces[7]["name"] == "f" and pieces[7]["arguments"] + pieces[8]["arguments"] == json.dumps({"a": 1})
    assert plan[-1][1]["event_type"] == "stop" and plan[-1][1]["finish_reason"] == "tool_call"
    # a sidecar that does not describe the message: each item at once
    assert all(ms is None for ms, _ in replay_plan(message, [[1, "text.delta", 3], [2, "stop", 0]]))
