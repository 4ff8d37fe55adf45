"""The view model and the ops that keep a front end up to date, on real demo streams."""

from __future__ import annotations

import json

import pytest
from helpers import apply_ops

from mmsp_notebook.engine.launch import launch
from mmsp_notebook.views.model import OpsTracker, view_model


def get_weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def run_with_tracker(prompt, events=False, every=1, **kw):
    """Stream a turn, collecting ops after every `every` events as a front end would receive them."""
    tracker = OpsTracker(events=events)
    batches = []
    counter = {"n": 0}

    def listener(_event):
        counter["n"] += 1
        if counter["n"] % every == 0:
            batches.append(tracker.ops(run.turn))

    run, future = launch(prompt, listeners=[listener], **kw)
    turn = future.result(timeout=30)
    batches.append(tracker.ops(turn))
    return turn, batches


@pytest.mark.parametrize("prompt, kw", [
    ("Tell me about streams", {}),
    ("What's the weather in Paris and Rome?", {"tools": [get_weather]}),
    ("draw a boat", {}),
    ("say hi", {}),
    ("embed", {"model": "demo-embed", "chat": "e"}),
    ("hello", {"model": "demo+cut-text"}),
])
@pytest.mark.parametrize("every", [1, 7])
def test_ops_rebuild_the_view_model(fresh_session, prompt, kw, every):
    turn, batches = run_with_tracker(prompt, every=every, **kw)
    vm = apply_ops({"id": turn.id, "model": turn.model, "items": []}, [op for b in batches for op in b])
    assert vm == view_model(turn)
    json.dumps(vm)  # JSON-serialisable for the comm


def test_text_crosses_once_not_per_update(fresh_session):
    turn, batches = run_with_tracker("Tell me a long story", model="demo+tokens=2000")
    appended = sum(len(op[2]) for b in batches for op in b if op[0] == "append")
    total_text = sum(len(item.content()) for item in turn.items if item.kind in ("text", "thinking", "tool_call"))
    assert appended == total_text
    assert len(batches) > 100  # many updates, each carrying only its delta


def test_events_table_rows(fresh_session):
    turn, batches = run_with_tracker("hi", events=True)
    rows = [op[1] for b in batches for op in b if op[0] == "event"]
    assert [r["n"] for r in rows] == list(range(len(turn.events)))
    assert rows[-1]["event_type"] == "stop" and "finish_reason" in rows[-1]["preview"]
    assert rows[0]["type"] == "thinking.delta"


def test_footer_and_error_fields(fresh_session):
    turn, _ = run_with_tracker("hi", model="demo+401")
    vm = view_model(turn)
    assert vm["status"] == "error" and vm["error"]["type"] == "UpstreamError"
    assert vm["error"]["hint"]
    turn, _ = run_with_tracker("hi", max_tokens=5)
    vm = view_model(turn)
    assert vm["footer"]["finish_reason"] == "length" and vm["footer"]["cost_text"] == "price unknown"


def test_a_huge_tool_result_is_shown_cut_and_kept_whole(fresh_session):
    from mmsp_notebook.views.model import TOOL_OUTPUT_LIMIT

    def dump(city: str) -> str:
        """Everything about a city."""
        return "x" * (TOOL_OUTPUT_LIMIT * 5)

    run, future = launch("Use dump for Paris", tools=[dump])
    turn = future.result(30)
    [call] = turn.tool_calls
    assert len(call["output"]) == TOOL_OUTPUT_LIMIT * 5  # the model and the Turn get it whole
    [shown] = [i for i in view_model(turn)["items"] if i["kind"] == "tool_call"]
    output = shown["result"]["output"]
    assert len(output) < TOOL_OUTPUT_LIMIT + 200 and output.endswith("(turn.tool_calls has them all)")
    assert f"{TOOL_OUTPUT_LIMIT * 4:,} more characters not shown" in output


def test_a_tool_without_a_usable_name_is_refused_clearly():
    from mmsp_notebook._errors import OptionError
    from mmsp_notebook.engine.tools import ToolSet

    with pytest.raises(OptionError, match="tools=\\{'name': func\\}"):
        ToolSet([lambda city: city])
    assert list(ToolSet({"lookup": lambda city: city}).funcs) == ["lookup"]
