"""replay(): a recorded turn streams again with its original timing and ends in the same state."""

from __future__ import annotations

import io
import json
import math
import time

import pytest
from helpers import run_with_timeout

import mmsp_notebook as mn
from mmsp_notebook import MMSPNotebookError, OptionError, OptionTypeError, TraceError, TraceNotFoundError, ask, traces
from mmsp_notebook.core.store import sidecar_path
from mmsp_notebook.front.replay import replay_plan, strip_timings
from mmsp_notebook.traces.recorded import load_recorded
from mmsp_notebook.views.html import render_html
from mmsp_notebook.views.model import view_model


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


@pytest.mark.serial  # replayed timing within 10 %
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


@pytest.mark.serial  # replay time against the recorded time
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


@pytest.mark.serial  # the replay within 0.5 s
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
    with pytest.raises(TraceError, match="holds 1 assistant message; there is no turn 5"):
        mn.replay(recorded.trace_id, turn=5, display=False)
    with pytest.raises(TraceNotFoundError, match="no trace file") as missing:
        mn.replay("no/such/trace", display=False)
    assert isinstance(missing.value, FileNotFoundError) and missing.value.path.endswith("no/such/trace.json")
    with pytest.raises(OptionError):
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
    # a replayed step whose calls carry their recorded results is over, not waiting for a next step
    assert 'data-status="complete"' in render_html(replayed) and view_model(replayed)["status"] == "complete"
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


# ---------------------------------------------------------------------------------------------- damaged input
@pytest.fixture
def quick(fresh_session):
    """An instant traced turn with a few dozen fragments."""
    turn = ask("Tell me about lighthouses", max_tokens=40, stream=io.StringIO())
    assert turn.status == "complete" and turn.trace_id and len(turn.text) > 40
    return turn


def _trace_file(turn):
    return sidecar_path(turn.trace_id).with_name(sidecar_path(turn.trace_id).name.replace(".timing.jsonl", ".json"))


def test_replay_finds_a_dotted_trace_id_where_mmsps_tracer_put_it(quick, tmp_path):
    from mmsp.integration.tracer import Tracer

    cache = tmp_path / "cache"
    data = json.loads(_trace_file(quick).read_text(encoding="utf-8"))
    config = dict(data["config"], trace_id="runs/v1.5")
    model = config.pop("model")
    Tracer(cache_dir=cache).save_history(model, data["history"], "runs/v1.5", config)  # as any mmsp program would
    assert (cache / "runs" / "v1.json").is_file() and not (cache / "runs" / "v1.5.json").exists()
    record = json.loads(sidecar_path(quick.trace_id).read_text(encoding="utf-8").splitlines()[-1])
    (cache / "runs" / "v1.5.timing.jsonl").write_text(json.dumps(dict(record, trace_id="runs/v1.5")) + "\n")

    by_id = mn.replay("runs/v1.5", speed=math.inf, display=False)
    _same_state(by_id, quick)
    assert by_id.replayed_from["timed"] is True and by_id.replayed_from["path"] == str(cache / "runs" / "v1.json")
    by_path = mn.replay(cache / "runs" / "v1.json", speed=math.inf, display=False)
    assert by_path.replayed_from["timed"] is True and by_path.trace_id == "runs/v1.5"
    assert by_path.replayed_from["sidecar"] == str(cache / "runs" / "v1.5.timing.jsonl")
    row = traces.load_turns(cache).set_index("trace_id").loc["runs/v1"]
    row["trace_id"] = "runs/v1"
    by_row = mn.replay(row, speed=math.inf, display=False, root=cache)
    _same_state(by_row, quick)
    assert by_row.replayed_from["timed"] is True
    # another sidecar the Tracer would pair with this file times it when its records name the trace
    (cache / "runs" / "v1.5.timing.jsonl").unlink()
    other = cache / "runs" / "v1.7.timing.jsonl"
    other.write_text(json.dumps(dict(record, trace_id="runs/v1.7")) + "\n")
    assert mn.replay(cache / "runs" / "v1.json", speed=math.inf, display=False).replayed_from["timed"] is False
    other.write_text(json.dumps(dict(record, trace_id="runs/v1.5")) + "\n")
    assert mn.replay(cache / "runs" / "v1.json", speed=math.inf, display=False).replayed_from["timed"] is True
    # once trace id runs/v1 is saved, the Tracer's file holds it: runs/v1.5 is no longer there
    Tracer(cache_dir=cache).save_history(model, data["history"], "runs/v1", dict(config, trace_id="runs/v1"))
    with pytest.raises(TraceNotFoundError, match="runs/v1.5"):
        mn.replay("runs/v1.5", display=False)
    assert mn.replay("runs/v1", speed=math.inf, display=False).text == quick.text


_DAMAGE = {
    "null ms": lambda ev: [[None, e[1], e[2]] for e in ev],
    "string size": lambda ev: [[e[0], e[1], "x"] for e in ev],
    "null size": lambda ev: [[e[0], e[1], None if e[1].endswith(".delta") else e[2]] for e in ev],
    "negative size": lambda ev: [[e[0], e[1], -1 if e[1].endswith(".delta") else e[2]] for e in ev],
    "bool size": lambda ev: [[e[0], e[1], True] for e in ev],
    "infinite first ms": lambda ev: [[math.inf, *ev[0][1:]]] + ev[1:],
    "infinite stop ms": lambda ev: ev[:-1] + [[math.inf, "stop", 0]],
    "NaN ms": lambda ev: [[math.nan, *ev[0][1:]]] + ev[1:],
    "negative ms": lambda ev: [[-5, *ev[0][1:]]] + ev[1:],
    "absurd ms": lambda ev: ev[:-1] + [[1e15, "stop", 0]],
    "string ms": lambda ev: [["12", *ev[0][1:]]] + ev[1:],
    "short row": lambda ev: [ev[0][:2]] + ev[1:],
    "row not a list": lambda ev: ev[:1] + [7] + ev[1:],
    "type not a string": lambda ev: [[ev[0][0], 3, ev[0][2]]] + ev[1:],
    "events not a list": lambda ev: 5,
    "events an object": lambda ev: {"a": 1},
}


@pytest.mark.serial  # the replay within 5 s
@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_sidecar_record_plays_the_whole_message_untimed(quick, damage):
    side = sidecar_path(quick.trace_id)
    record = json.loads(side.read_text(encoding="utf-8").splitlines()[-1])
    side.write_text(json.dumps(dict(record, events=_DAMAGE[damage](record["events"]))) + "\n")  # writes Infinity / NaN
    started = time.monotonic()
    replayed = run_with_timeout(lambda: mn.replay(quick.trace_id, speed=1000, display=False), 20.0)
    assert time.monotonic() - started < 5
    _same_state(replayed, quick)
    assert replayed.text == quick.text and replayed.error is None
    assert replayed.replayed_from["timed"] is False


def test_replay_plan_never_times_unusable_events():
    message = {"role": "assistant", "content_items": [{"type": "text.done", "text": "Hello world"}],
               "usage_metadata": "damaged", "finish_reason": 5, "created_at": 1}
    good = [[10, "text.delta", 5], [20, "text.delta", 6], [21, "text.done", 11], [22, "stop", 0]]
    assert [ms for ms, _ in replay_plan(message, good)] == [10, 20, 21, 22]
    for bad in ([[10, "text.delta", -3], [20, "text.delta", 14], [21, "text.done", 11], [22, "stop", 0]],
                [[10, "text.delta", 5], [20, "text.delta", 6], [21, "text.done", 11], [math.inf, "stop", 0]],
                [[10, "text.delta", 5.5], [20, "text.delta", 6], [21, "text.done", 11], [22, "stop", 0]],
                [[10, "text.delta", 500], [20, "text.delta", 6], [21, "text.done", 11], [22, "stop", 0]]):
        plan = replay_plan(message, bad)
        assert all(ms is None for ms, _ in plan)
        assert "".join(e["content_items"][0].get("text", "") for _, e in plan[:1]) == "Hello world"
    stop = replay_plan(message, None)[-1][1]
    assert stop["usage_metadata"] == {} and stop["finish_reason"] == "stop"


@pytest.mark.serial  # 0.25 s < the replay < 3 s
def test_no_single_wait_is_longer_than_max_wait(quick, monkeypatch):
    from mmsp_notebook.front import replay as _replay
    side = sidecar_path(quick.trace_id)
    record = json.loads(side.read_text(encoding="utf-8").splitlines()[-1])
    events = record["events"][:-1] + [[20 * 60 * 1000.0, "stop", 0]]  # a 20-minute pause before the stop
    side.write_text(json.dumps(dict(record, events=events)) + "\n")
    monkeypatch.setattr(_replay, "MAX_WAIT", 0.3)
    started = time.monotonic()
    replayed = run_with_timeout(lambda: mn.replay(quick.trace_id, display=False), 20.0)
    took = time.monotonic() - started
    assert replayed.replayed_from["timed"] is True and replayed.text == quick.text
    assert 0.25 < took < 3


def test_replay_reads_a_bom_trace_and_names_what_is_wrong_with_a_damaged_one(quick, tmp_path):
    path = _trace_file(quick)
    raw = path.read_bytes()
    path.write_bytes(b"\xef\xbb\xbf" + raw)  # some editors and tools write one
    assert len(traces.load_turns(path)) == 1
    _same_state(mn.replay(quick.trace_id, speed=math.inf, display=False), quick)

    data = json.loads(raw)
    assistant = next(i for i, m in enumerate(data["history"]) if m["role"] == "assistant")

    def with_items(items):
        history = [dict(m) for m in data["history"]]
        history[assistant]["content_items"] = items
        return json.dumps(dict(data, history=history)).encode()

    damaged = {
        "top_list.json": (b"[1, 2]", "top level is a JSON list"),
        "history_str.json": (b'{"history": "abc"}', "'history' is a str"),
        "no_history.json": (b'{"foo": 1}', "no 'history'"),
        "history_ints.json": (b'{"history": [1]}', r"history\[0\] is a int"),
        "truncated.json": (raw[: len(raw) // 2], "not valid JSON"),
        "binary.json": (b"\xff\xfe\x00{", "not valid JSON"),
        "items_str.json": (with_items("abc"), "content_items are a str"),
        "item_untyped.json": (with_items([{"text": "hi"}]), "content item 0 is not an object with a 'type'"),
        "bad_base64.json": (with_items([{"type": "inline_data.done", "mime_type": "image/png", "data": "abcde"}]),
                            "is damaged"),
        "empty.json": (b" \n", "empty file"),
        "text_int.json": (with_items([{"type": "text.done", "text": 5}]),
                          r"item 0 \(text.done\) has a text that is a int"),
        "call_unnamed.json": (with_items([{"type": "tool_call.done", "tool_call_id": "c1", "arguments": {}}]),
                              "has no name"),
        "call_args.json": (with_items([{"type": "tool_call.done", "name": "f", "tool_call_id": "c1",
                                         "arguments": "{}"}]), "arguments that are a str"),
        "embedding_strs.json": (with_items([{"type": "embedding.done", "embedding": "abc"}]),
                                "embedding that is a str"),
        "fidelity_str.json": (with_items([{"type": "thinking.done", "thinking": "hm", "fidelity": "sig"}]),
                              "fidelity that is a str"),
    }
    for name, (content, reason) in damaged.items():
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(TraceError, match=reason) as info:
            mn.replay(bad, speed=math.inf, display=False)
        assert name in str(info.value) and info.value.path == str(bad) and name not in info.value.reason
        assert isinstance(info.value, ValueError)  # what replay raised before its errors had a class


def test_replay_takes_any_load_turns_row_and_refuses_unclear_arguments(quick, tmp_path):
    cache = tmp_path / "cache"
    for otel in (False, True):
        row = traces.load_turns(cache, otel=otel).iloc[-1]
        for given in (row, row.to_dict()):
            _same_state(mn.replay(given, speed=math.inf, display=False, root=cache), quick)
    with pytest.raises(OptionTypeError, match="one of its rows"):
        mn.replay(traces.load_turns(cache), display=False)
    with pytest.raises(OptionError, match="no trace id"):
        mn.replay({"message_index": 1}, display=False)

    failed = ask("hello", model="demo+error", chat="failing", stream=io.StringIO())
    assert failed.status == "error" and failed.trace_id and sidecar_path(failed.trace_id).is_file()
    with pytest.raises(TraceError, match="did not complete .*never recorded"):
        mn.replay(failed.trace_id, display=False)
    failed_row = traces.load_turns(cache).set_index("trace_id").loc[failed.trace_id]
    with pytest.raises(TraceError, match="did not complete"):
        mn.replay(failed_row.to_dict() | {"trace_id": failed.trace_id}, display=False)

    for speed in ("2", None, b"2", [2]):
        with pytest.raises(OptionTypeError, match="speed must be a number"):
            mn.replay(quick.trace_id, speed=speed, display=False)
    for speed in (-1, 0, math.nan, -math.inf):
        with pytest.raises(OptionError, match="speed must be a positive number"):
            mn.replay(quick.trace_id, speed=speed, display=False)
    with pytest.raises(OptionTypeError, match="turn must be an integer"):
        mn.replay(quick.trace_id, turn="0", display=False)
    with pytest.raises(OptionTypeError, match="trace must be") as info:
        mn.replay(5, display=False)
    assert isinstance(info.value, TypeError) and isinstance(info.value, MMSPNotebookError)
    assert mn.replay(quick.trace_id, speed=4.0, turn=0, display=False).text == quick.text


@pytest.mark.serial  # the stop must end the replay within 2 s
def test_a_stopped_replay_ends_during_a_long_pause(fresh_session):
    from mmsp_notebook.core.run import TurnRun
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.engine import worker as _worker
    from mmsp_notebook.front.replay import _play

    message = {"role": "assistant", "content_items": [{"type": "text.done", "text": "Hello world"}],
               "usage_metadata": {}, "finish_reason": "stop", "created_at": 1}
    plan = replay_plan(message, [[10, "text.delta", 5], [20_000, "text.delta", 6], [20_001, "text.done", 11],
                                 [20_002, "stop", 0]])
    run = TurnRun(Turn(None, model="demo"))
    started = time.monotonic()
    future = _worker.submit(_play(run, plan, 1.0, {}))
    time.sleep(0.3)
    run.abort("stopped")
    turn = future.result(timeout=5)
    assert time.monotonic() - started < 2
    assert turn.status == "cancelled" and turn.text == "Hello"


def test_locating_a_recorded_message_needs_no_front_door_views_or_pandas(quick):
    import subprocess
    import sys

    code = ("import sys; from mmsp_notebook.traces.recorded import load_recorded; "
            f"r = load_recorded({quick.trace_id!r}); "
            "print(r['record'] is not None, sorted(m for m in sys.modules if m.startswith(('pandas', "
            "'mmsp_notebook.front', 'mmsp_notebook.views', 'IPython'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "[]"]


def test_arguments_nested_too_deeply_are_named_not_raised(tmp_path):
    # orjson reads 1,000 levels of nesting; Python's recursive JSON encoders cannot write them back
    depth = 1000
    args = '{"a":' + '{"k":' * depth + "1" + "}" * depth + "}"
    raw = ('{"history":[{"role":"user","content_items":[{"type":"text.done","text":"q"}],"created_at":1767225600000},'
           '{"role":"assistant","content_items":[{"type":"tool_call.done","name":"f","tool_call_id":"c1","arguments":'
           + args + '}],"usage_metadata":null,"finish_reason":"tool_call","created_at":1767225601000}],'
           '"config":{"model":"demo"}}')
    path = tmp_path / "deep.json"
    path.write_text(raw)
    with pytest.raises(TraceError, match=r"item 0 \(tool_call.done\) has arguments nested too deeply") as info:
        load_recorded(path, turn=0)
    assert info.value.path == str(path)


def test_a_trace_stamped_in_seconds_replays_with_its_times_in_milliseconds(fresh_session, tmp_path):
    from mmsp.integration.tracer import Tracer

    t0 = 1767225600  # 2026-01-01T00:00:00Z in Unix seconds, as producers other than mmsp's Tracer write it
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": t0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "an answer"}],
                "finish_reason": "stop", "usage_metadata": {"prompt_tokens": 3, "response_tokens": 2},
                "created_at": t0 + 2.5},
               {"role": "user", "content_items": [{"type": "text.done", "text": "q2"}], "created_at": t0 * 1000 + 9000},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "another"}],
                "finish_reason": "stop", "usage_metadata": {"prompt_tokens": 3, "response_tokens": 1},
                "created_at": t0 * 1000 + 10_000}]  # a trace may mix the units, message by message
    Tracer(cache_dir=str(tmp_path)).save_history("demo", history, "other/seconds", {"trace_id": "other/seconds"})
    first = mn.replay("other/seconds", turn=0, root=tmp_path, display=False)
    assert first.text == "an answer" and first.message["created_at"] == t0 * 1000 + 2500
    second = mn.replay("other/seconds", turn=1, root=tmp_path, display=False)
    assert second.message["created_at"] == t0 * 1000 + 10_000


def test_a_trace_id_too_long_for_a_file_name_is_not_found_not_an_os_error(tmp_path):
    (tmp_path / "nb").mkdir()
    with pytest.raises(TraceNotFoundError):
        mn.replay("nb/" + "m" * 300 + "-abc", root=tmp_path, display=False)


def test_an_integer_speed_beyond_any_float_plays_at_once(quick):
    replayed = mn.replay(quick.trace_id, speed=10**400, display=False)  # faster than any float: at once
    assert replayed.status == "complete" and replayed.text == quick.text
    with pytest.raises(OptionError, match="speed must be a positive number"):
        mn.replay(quick.trace_id, speed=-10**400, display=False)


def test_a_bool_turn_is_refused_not_read_as_turn_one(quick):
    for turn in (True, False):
        with pytest.raises(OptionTypeError, match="turn must be an integer .* not bool"):
            mn.replay(quick.trace_id, turn=turn, display=False)



@pytest.mark.serial  # the interrupt must land while the replay plays
def test_an_interrupted_replay_is_drawn_then_the_interrupt_goes_on_up(recorded):
    import contextlib

    from test_api import interrupt_main_once

    from mmsp_notebook.front.finish import Interrupted

    out = io.StringIO()
    interrupt_main_once(lambda: len(out.getvalue()) > 40, after=0.2)
    with contextlib.redirect_stdout(out), pytest.raises(Interrupted) as info:
        mn.replay(recorded.trace_id)  # (as recorded: about a second)
    turn = info.value.turn
    assert turn.status == "cancelled" and 0 < len(turn.text) < len(recorded.text)
    assert "cancelled — partial output kept" in out.getvalue()


def test_a_timing_sidecar_given_replays_the_trace_it_times(quick, tmp_path):
    """show takes a sidecar path; replay given one looked for ``x.timing.json`` ("no trace file"),
    even when the sidecar said that every turn failed. It now finds the trace beside it."""
    side = sidecar_path(quick.trace_id)
    replayed = mn.replay(side, speed=math.inf, display=False)
    _same_state(replayed, quick)
    assert replayed.replayed_from["timed"] and replayed.replayed_from["sidecar"] == str(side)
    failed = tmp_path / "gone.timing.jsonl"
    failed.write_text(json.dumps({"v": 1, "trace_id": "gone", "turn": 0, "message_index": None, "status": "error",
                                  "error": {"type": "X", "message": "boom"}}) + "\n")
    with pytest.raises(TraceError, match="turn 0 of gone did not complete .*boom"):
        mn.replay(failed, speed=math.inf, display=False)
    with pytest.raises(TraceNotFoundError, match=r"no trace file .*lone\.json"):
        (tmp_path / "lone.timing.jsonl").write_text("")
        mn.replay(tmp_path / "lone.timing.jsonl", speed=math.inf, display=False)


def test_replay_counts_a_failed_record_by_the_loaders_rule(tmp_path):
    """A record marked complete without an integer message index recorded nothing (the loaders
    make it a failed row): replay says that turn did not complete, not that a file is missing; a
    turn written 1.0 is turn 1."""
    side = tmp_path / "odd.timing.jsonl"
    records = [{"v": 1, "trace_id": "odd", "turn": 0, "message_index": "x", "status": "complete"},
               {"v": 1, "trace_id": "odd", "turn": 1.0, "message_index": None, "status": "error",
                "error": {"type": "X", "message": "boom"}}]
    side.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(TraceError, match=r"turn 1 of odd did not complete \(error: X: boom; no turn of it completed"):
        mn.replay(side, speed=math.inf, display=False)
    with pytest.raises(TraceError, match="turn 0 of odd did not complete"):
        mn.replay(side, turn=0, speed=math.inf, display=False)
    with pytest.raises(TraceError, match=r"turn 1 of odd did not complete \(error: X: boom"):
        mn.replay(side, turn=1, speed=math.inf, display=False)
    key = "sk-proj-" + "A1b2C3d4" * 6
    side.write_text(json.dumps({**records[1], "error": {"type": "X", "message": f"bad key {key}"}}) + "\n")
    with pytest.raises(TraceError) as info:
        mn.replay(side, speed=math.inf, display=False)
    assert key not in str(info.value) and "bad key" in str(info.value)


def test_a_message_recorded_without_its_stop_replays_without_one(fresh_session, tmp_path):
    from mmsp.integration.tracer import Tracer

    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.views.text import render_text

    cut = {"role": "assistant", "content_items": [{"type": "text.done", "text": "cut off mid-"}],
           "usage_metadata": None, "finish_reason": None, "created_at": 1}
    for timing in (None, [[10, "text.delta", 6], [20, "text.delta", 6], [21, "text.done", 12]]):
        plan = replay_plan(cut, timing)
        assert all(e["event_type"] == "delta" for _, e in plan)  # no stop made up
        assert [ms for ms, _ in plan] == ([None, None] if timing is None else [10, 20, 21])
        turn = Turn(model="m")
        step = turn.new_step()
        for _, event in plan:
            step.feed(event)
        step.finish()
        assert turn.status == "incomplete" and turn.finish_reason is None and turn.usage is None
        assert "[incomplete] ended without a stop event" in render_text(turn)
    # either one recorded: the stop is rebuilt as before
    only_usage = replay_plan({**cut, "usage_metadata": {"response_tokens": 2}}, None)[-1][1]
    assert only_usage["event_type"] == "stop" and only_usage["finish_reason"] == "stop"
    only_reason = replay_plan({**cut, "finish_reason": "length"}, None)[-1][1]
    assert only_reason["event_type"] == "stop" and only_reason["usage_metadata"] == {}
    assert only_reason["finish_reason"] == "length"
    # the whole replay: the turn ends incomplete, as the recorded stream did
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": 1},
               {**cut, "created_at": 2}]
    Tracer(cache_dir=str(tmp_path)).save_history("demo", history, "other/nostop", {"trace_id": "other/nostop"})
    replayed = mn.replay("other/nostop", root=tmp_path, display=False)
    assert replayed.status == "incomplete" and replayed.text == "cut off mid-" and replayed.finish_reason is None
    assert "ended without a stop event" in render_html(replayed)
