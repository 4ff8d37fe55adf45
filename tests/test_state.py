"""The pure turn-state core: grammar checks, statuses, timings, and equality with mmsp's own concat."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mmsp import IncompleteStreamError, UpstreamError
from mmsp.base_client import LLMClient

from mmsp_notebook import ProtocolError
from mmsp_notebook.core.state import TurnState


def delta(item):
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None, "created_at": 1}


def stop(reason="stop", usage=None):
    usage = usage or {"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": 3, "response_tokens": 5}
    return {"role": "assistant", "event_type": "stop", "content_items": [], "usage_metadata": usage,
            "finish_reason": reason, "created_at": 2}


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def weather_stream():
    return [
        delta({"type": "thinking.delta", "thinking": "Let me"}),
        delta({"type": "thinking.delta", "thinking": " check"}),
        delta({"type": "thinking.delta", "thinking": "", "fidelity": {"signature": "sig"}}),
        delta({"type": "thinking.done", "thinking": "Let me check", "fidelity": {"signature": "sig"}}),
        delta({"type": "tool_call.delta", "name": "get_weather", "tool_call_id": "toolu_1", "arguments": ""}),
        delta({"type": "tool_call.delta", "name": "", "tool_call_id": "", "arguments": '{"location": '}),
        delta({"type": "tool_call.delta", "name": "", "tool_call_id": "", "arguments": '"Paris"}'}),
        delta({"type": "tool_call.done", "name": "get_weather", "tool_call_id": "toolu_1",
               "arguments": {"location": "Paris"}}),
        stop("tool_call"),
    ]


def test_seed_example_builds_items_usage_and_message():
    state = TurnState()
    for event in weather_stream():
        state.feed(event)
    assert state.status == "complete"
    assert [i.kind for i in state.items] == ["thinking", "tool_call"]
    thinking, call = state.items
    assert thinking.content() == "Let me check" and thinking.fidelity == {"signature": "sig"}
    assert call.name == "get_weather" and call.tool_call_id == "toolu_1"
    assert call.content() == '{"location": "Paris"}' and call.arguments == {"location": "Paris"}
    assert state.finish_reason == "tool_call" and state.usage["prompt_tokens"] == 10
    assert state.message() == LLMClient.concat_uni_events_to_uni_message(None, state.events)


def test_partial_content_is_readable_while_streaming():
    state = TurnState()
    state.feed(delta({"type": "text.delta", "text": "Hel"}))
    state.feed(delta({"type": "text.delta", "text": "lo"}))
    assert state.status == "streaming"
    assert state.items[0].status == "streaming" and state.items[0].content() == "Hello"
    assert state.open_item is state.items[0]
    assert state.message()["content_items"] == []


@pytest.mark.parametrize(
    "events, index, words",
    [
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "thinking.delta", "thinking": "b"})], 1, "interleaved"),
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "thinking.done", "thinking": "a"})], 1, "another kind"),
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "text.done", "text": "a"}), stop(), stop()], 3, "second stop"),
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "text.done", "text": "a"}), stop(),
          delta({"type": "text.delta", "text": "b"})], 3, "after the stop"),
        ([{**delta({"type": "text.delta", "text": "a"}), "usage_metadata": {"prompt_tokens": 1}}], 0, "usage_metadata"),
        ([{**delta({"type": "text.delta", "text": "a"}), "finish_reason": "stop"}], 0, "finish_reason"),
        ([delta({"type": "tool_call.delta", "name": "", "tool_call_id": "", "arguments": "{"})], 0, "name and tool_call_id"),
        ([delta({"type": "tool_call.delta", "name": "f", "tool_call_id": "", "arguments": "{"})], 0, "name and tool_call_id"),
        ([delta({"type": "text.done", "text": "a"})], 0, "without any text.delta"),
        ([{**delta({"type": "text.delta", "text": "a"}), "content_items": []}], 0, "exactly one"),
        ([delta({"type": "text.delta", "text": "a"}), stop()], 1, "open"),
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "text.done", "text": "b"})], 1, "concatenation"),
        # a lone half is itself: not the other half, not U+FFFD, not the whole character
        ([delta({"type": "text.delta", "text": "a\ud83d"}), delta({"type": "text.done", "text": "a\ude00"})], 1, "concatenation"),
        ([delta({"type": "text.delta", "text": "a\ud83d"}), delta({"type": "text.done", "text": "a\ufffd"})], 1, "concatenation"),
        ([delta({"type": "text.delta", "text": "a\ud83d"}), delta({"type": "text.done", "text": "a\U0001F600"})], 1, "concatenation"),
        ([delta({"type": "text.delta", "text": "a"}), delta({"type": "text.done", "text": "a"}),
          {**stop(), "usage_metadata": None}], 2, "usage_metadata"),
        ([delta({"type": "tool_call.delta", "name": "f", "tool_call_id": "1", "arguments": "{}"}),
          delta({"type": "tool_call.delta", "name": "g", "tool_call_id": "2", "arguments": "{}"})], 1, "not closed"),
        ([delta({"type": "text.delta", "text": "a", "fidelity": {"x": 1}}),
          delta({"type": "text.delta", "text": "b", "fidelity": {"x": 2}})], 1, "two different fidelity"),
        ([{"event_type": "banana", "content_items": []}], 0, "unknown event_type"),
    ],
)
def test_grammar_violations_name_index_and_reason(events, index, words):
    state = TurnState()
    with pytest.raises(ProtocolError) as info:
        for event in events:
            state.feed(event)
    assert info.value.index == index
    assert words in info.value.reason
    assert f"event {index}" in str(info.value)
    assert state.status == "error" and state.error is info.value
    # what arrived before stays readable
    assert state.events == [e for e in events[:index]]
    if state.items:
        first = events[0]["content_items"][0]
        assert state.items[0].content() == first.get("text", first.get("arguments"))


def test_timings_ttft_item_durations_tokens_per_second():
    clock = FakeClock()
    state = TurnState(clock=clock, wall=lambda: 1_700_000_000.0)
    state.mark_request_sent()
    clock.now += 0.5
    state.feed(delta({"type": "thinking.delta", "thinking": "hmm"}))
    clock.now += 3.2
    state.feed(delta({"type": "thinking.done", "thinking": "hmm"}))
    clock.now += 0.1
    state.feed(delta({"type": "text.delta", "text": "Hi"}))
    clock.now += 1.2
    state.feed(delta({"type": "text.done", "text": "Hi"}))
    state.feed(stop(usage={"cached_tokens": 0, "prompt_tokens": 4, "thoughts_tokens": 30, "response_tokens": 15}))
    assert state.ttft == pytest.approx(0.5)
    assert state.items[0].duration == pytest.approx(3.2)
    assert state.items[1].duration == pytest.approx(1.2)
    assert state.total == pytest.approx(5.0)
    assert state.tokens_per_second == pytest.approx(45 / 4.5)
    t = state.timings()
    assert t["items"][1]["start"] == pytest.approx(3.8)
    side = state.sidecar_events()
    assert side[0] == [500.0, "thinking.delta", 3] and side[-1][1] == "stop"
    assert state.started_at == 1_700_000_000.0


def test_statuses_incomplete_error_cancelled_keep_partial_content():
    s = TurnState()
    s.feed(delta({"type": "text.delta", "text": "part"}))
    assert s.finish() == "incomplete" and s.items[0].content() == "part"

    s = TurnState()
    s.feed(delta({"type": "text.delta", "text": "part"}))
    err = IncompleteStreamError("X", ("usage_metadata",), "stop", None)
    assert s.fail(err) == "incomplete" and s.error_type == "IncompleteStreamError"
    assert s.finish_reason == "stop"

    s = TurnState()
    assert s.fail(UpstreamError("MmspClient", 401, "AuthenticationError", "bad key")) == "error"
    assert s.error_message == "bad key"

    s = TurnState()
    s.feed(delta({"type": "text.delta", "text": "x"}))
    assert s.cancel() == "cancelled" and s.items[0].content() == "x"
    assert isinstance(s.error, asyncio.CancelledError)


def test_transport_error_after_events_is_incomplete_before_events_is_error():
    import httpx

    s = TurnState()
    assert s.fail(httpx.ConnectError("refused")) == "error"
    s = TurnState()
    s.feed(delta({"type": "text.delta", "text": "x"}))
    assert s.fail(httpx.RemoteProtocolError("peer closed")) == "incomplete"


# ---------------------------------------------------------------- property test

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
fidelities = st.one_of(st.none(), st.dictionaries(st.sampled_from(["signature", "id", "encrypted"]),
                                                  st.text(max_size=20), min_size=1, max_size=2))


@st.composite
def groups(draw):
    kind = draw(st.sampled_from(["text", "thinking", "tool_call", "inline_data", "inline_thinking", "embedding"]))
    fidelity = draw(fidelities) if kind != "embedding" else None
    if kind in ("text", "thinking"):
        frags = draw(st.lists(texts, min_size=1, max_size=8))
        if draw(st.booleans()):  # a large payload
            frags.append("長" * draw(st.integers(1000, 20000)))
        items = [{"type": f"{kind}.delta", kind: f} for f in frags]
        done = {"type": f"{kind}.done", kind: "".join(frags)}
    elif kind == "tool_call":
        args = draw(st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), texts, st.booleans(), st.none()),
                                    max_size=5))
        raw = json.dumps(args, ensure_ascii=draw(st.booleans()))
        cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=5)))
        parts = [raw[a:b] for a, b in zip([0] + cuts, cuts + [len(raw)])]
        name = draw(st.text(min_size=1, max_size=12))
        call_id = draw(st.text(min_size=1, max_size=12))
        items = [{"type": "tool_call.delta", "name": name if i == 0 else "", "tool_call_id": call_id if i == 0 else "",
                  "arguments": p} for i, p in enumerate(parts)]
        done = {"type": "tool_call.done", "name": name, "tool_call_id": call_id, "arguments": args}
    elif kind in ("inline_data", "inline_thinking"):
        mime = draw(st.sampled_from(["image/png", "audio/L16;codec=pcm;rate=24000", "application/octet-stream"]))
        chunks = draw(st.lists(st.binary(max_size=64), min_size=1, max_size=6))
        if draw(st.booleans()):
            chunks.append(bytes(range(256)) * draw(st.integers(1, 400)))
        items = [{"type": f"{kind}.delta", "data": c, "mime_type": mime} for c in chunks]
        done = {"type": f"{kind}.done", "data": b"".join(chunks), "mime_type": mime}
    else:
        vec = draw(st.lists(st.floats(allow_nan=False, width=32), max_size=64))
        items = [{"type": "embedding.delta", "embedding": vec}]
        done = {"type": "embedding.done", "embedding": vec}
    if fidelity:
        at = draw(st.integers(0, len(items) - 1))
        items[at]["fidelity"] = fidelity
        done["fidelity"] = fidelity
    return items + [done]


@st.composite
def streams(draw):
    gs = draw(st.lists(groups(), max_size=6))
    usage = {k: draw(st.one_of(st.none(), st.integers(0, 10**6)))
             for k in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")}
    reason = draw(st.sampled_from(["stop", "length", "tool_call", "unknown"]))
    events = [delta(item) for g in gs for item in g]
    events.append(stop(reason, usage))
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(streams())
def test_message_equals_mmsp_concat_on_every_valid_stream(events):
    state = TurnState()
    for event in events:
        state.feed(event)
    assert state.status == "complete"
    assert state.message() == LLMClient.concat_uni_events_to_uni_message(None, events)
    # content so far of each item equals its done item's growing field
    for item in state.items:
        field = {"text": "text", "thinking": "thinking", "inline_data": "data", "inline_thinking": "data",
                 "embedding": "embedding"}.get(item.kind)
        if field:
            assert item.content() == item.done[field]
        else:
            assert json.loads(item.content()) == item.done["arguments"]


def test_events_read_back_equal_to_what_arrived_even_with_extra_fields():
    odd = {**delta({"type": "text.delta", "text": "b"}), "x_gateway": {"id": 7}}
    no_stamp = {k: v for k, v in delta({"type": "text.delta", "text": "c"}).items() if k != "created_at"}
    events = [delta({"type": "text.delta", "text": "a"}), odd, no_stamp,
              delta({"type": "text.done", "text": "abc"}), stop()]
    state = TurnState()
    for event in events:
        state.feed(event)
    assert state.events == events
    assert state.events[1] is odd and "created_at" not in state.events[2]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(streams(), st.integers(1, 70))
def test_feeding_in_batches_equals_feeding_one_by_one(events, batch):
    one, many = TurnState(), TurnState()
    stamps = [float(i) for i in range(len(events))]
    for event, at in zip(events, stamps):
        one.feed(event, at)
    snapshots = []
    for start in range(0, len(events), batch):
        many.feed_many(events[start:start + batch], stamps[start:start + batch])
        # read while it streams: what is read back, and what is read later, grow from there
        assert many.events == events[:many.n_events]
        snapshots.append([i.content() for i in many.items])
    for snapshot in snapshots:
        for seen, item in zip(snapshot, many.items):
            assert item.content()[:len(seen)] == seen
    assert many.events == one.events == events
    expected_sidecar = []
    for event, at in zip(events, stamps):
        item = event["content_items"][0] if event["content_items"] else None
        size = 0 if item is None else len(next((v for k, v in item.items() if k in
                                                ("text", "thinking", "arguments", "data", "embedding")), ""))
        expected_sidecar.append([round(at * 1000.0, 3), "stop" if item is None else item["type"], size])
    assert many.sidecar_events() == expected_sidecar
    assert list(many.event_times) == list(one.event_times) == stamps
    assert many.message() == one.message()
    assert [(i.kind, i.content(), i.size, i.status) for i in many.items] == \
           [(i.kind, i.content(), i.size, i.status) for i in one.items]
    assert many.status == one.status == "complete" and many.created_at == one.created_at


def test_text_read_while_it_grows_and_a_fragment_that_is_not_text():
    state = TurnState()
    state.feed(delta({"type": "text.delta", "text": "Hel"}))
    assert state.items[0].content() == "Hel"
    state.feed_many([delta({"type": "text.delta", "text": "lo"}), delta({"type": "text.delta", "text": " you"})],
                    [1.0, 2.0])
    assert state.items[0].content() == "Hello you" and state.items[0].size == 9
    state.feed(delta({"type": "text.delta", "text": None}))  # no fragment: nothing added
    assert state.items[0].content() == "Hello you" and state.n_events == 4
    # not a str: refused where it came (it was kept, and Turn.text and every view then raised)
    with pytest.raises(ProtocolError, match="^event 4: text.delta carries text of type int, not a str"):
        state.feed_many([delta({"type": "text.delta", "text": 7})], [3.0])
    assert state.status == "error" and state.text == "Hello you" and state.n_events == 4


@pytest.mark.parametrize(("item", "said"), [
    ({"type": "text.delta", "text": 5}, "text.delta carries text of type int, not a str"),
    ({"type": "thinking.delta", "thinking": ["a"]}, "thinking.delta carries thinking of type list, not a str"),
    ({"type": "tool_call.delta", "name": "f", "tool_call_id": "c", "arguments": {"a": 1}},
     "tool_call.delta carries arguments of type dict, not a str"),
])
def test_a_text_fragment_that_is_not_a_str_is_a_protocol_error_at_its_event(item, said):
    state = TurnState()
    state.feed(delta({"type": "thinking.delta", "thinking": "hm"}))
    state.feed(delta({"type": "thinking.done", "thinking": "hm"}))
    with pytest.raises(ProtocolError, match=f"^event 2: {said}"):
        state.feed(delta(item))
    assert state.status == "error" and state.thinking == "hm" and state.text == ""


def test_feed_many_stops_at_a_violation_with_what_came_before_consumed():
    events = [delta({"type": "text.delta", "text": "a"}), delta({"type": "text.delta", "text": "b"}),
              delta({"type": "thinking.delta", "thinking": "x"}), delta({"type": "text.delta", "text": "c"})]
    state = TurnState()
    with pytest.raises(ProtocolError) as info:
        state.feed_many(events, [0.0, 1.0, 2.0, 3.0])
    assert info.value.index == 2 and state.n_events == 2 and state.text == "ab"


@pytest.mark.parametrize("kind", ["text", "thinking"])
def test_a_surrogate_pair_split_across_two_deltas_equals_its_done(kind):
    # a server slicing UTF-16 text sends the halves of an emoji in two deltas (JSON "\\ud83d" and
    # "\\ude00"); its .done holds the whole character
    state = TurnState()
    for event in (delta({"type": f"{kind}.delta", kind: "smile \ud83d"}), delta({"type": f"{kind}.delta", kind: "\ude00 done"}),
                  delta({"type": f"{kind}.done", kind: "smile \U0001F600 done"}), stop()):
        state.feed(event)
    assert state.status == "complete" and state.error is None


def test_a_usage_bucket_that_is_no_count_is_unknown_and_the_message_keeps_what_was_sent():
    """A server's usage of strings, lists, booleans, NaN, negative or absurd numbers: each such bucket
    is unknown (None), so the turn's sums, tokens/s, cost, views and frames take it (they raised);
    the stop event, and so the message and the trace, keep what was sent."""
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.engine.session import usage_row
    from mmsp_notebook.views.static import turn_bundle

    sent = {"cached_tokens": "<b>1</b>", "prompt_tokens": float("nan"), "thoughts_tokens": [3], "response_tokens": 5.0,
            "other": True}
    for usage, counts in ((sent, {"cached_tokens": None, "prompt_tokens": None, "thoughts_tokens": None,
                                  "response_tokens": 5, "other": None}),
                          ({"cached_tokens": -1, "prompt_tokens": 1e300, "thoughts_tokens": 2**53, "response_tokens": 7},
                           {"cached_tokens": None, "prompt_tokens": None, "thoughts_tokens": None, "response_tokens": 7})):
        clock = FakeClock()
        state = TurnState(clock=clock)
        state.feed(delta({"type": "text.delta", "text": "hi"}))
        clock.now += 1.0
        state.feed(delta({"type": "text.done", "text": "hi"}))
        state.feed(stop(usage=usage))
        assert state.status == "complete" and state.usage == counts
        assert state.message()["usage_metadata"] is usage and state.tokens_per_second == counts["response_tokens"]
        turn = Turn(None, model="demo")
        turn.steps.append(state)
        assert turn.usage == {k: v for k, v in counts.items() if k != "other"}
        assert turn.cost_at({"demo": {"prompt_tokens": 1.0, "response_tokens": 2.0}}) is not None
        assert usage_row(turn)["response_tokens"] == counts["response_tokens"]
        assert f"response {counts['response_tokens']}" in turn_bundle(turn)["text/html"]


def test_a_connection_lost_after_the_stop_event_leaves_the_turn_complete():
    # an MMSP server's stream cut after its stop event, before its closing [DONE] (or inside it):
    # the answer is whole; a ProtocolError or an error the server reports after it still counts
    import httpx

    for exc in (httpx.ReadError(""), json.JSONDecodeError("Expecting value", "[", 1)):
        s = TurnState()
        s.feed(delta({"type": "text.delta", "text": "x"}))
        s.feed(delta({"type": "text.done", "text": "x"}))
        s.feed(stop())
        assert s.fail(exc) == "complete" and s.error is None and s.finish_reason == "stop", exc
    s = TurnState()
    s.feed(stop())
    assert s.fail(UpstreamError("MmspClient", None, "ServerError", "late")) == "error"


@pytest.mark.parametrize(("item", "said"), [
    ({"type": "inline_data.delta", "data": 12, "mime_type": "image/png"}, "inline_data.delta carries data of type int, not bytes"),
    ({"type": "inline_data.delta", "data": "iVBORw0KGgo=", "mime_type": "image/png"}, "inline_data.delta carries data of type str, not bytes"),
    ({"type": "inline_thinking.delta", "data": ["x"]}, "inline_thinking.delta carries data of type list, not bytes"),
    ({"type": "embedding.delta", "embedding": 0.5}, "embedding.delta carries embedding of type float, not a list of numbers"),
])
def test_media_of_the_wrong_type_is_a_protocol_error_not_a_crash_later(item, said):
    """Such data was kept, and reading the turn (turn.images, its view) raised TypeError from bytes.join."""
    state = TurnState()
    with pytest.raises(ProtocolError, match=f"^event 0: {said}"):
        state.feed(delta(item))
    assert state.items == [] and state.status == "error"


@pytest.mark.parametrize(("vector", "said"), [
    ([None, 1.0], "value 0 is null"),  # a JS gateway writes NaN as null
    ([0.5, [1, 2]], "value 1 is a list"),
    ([1.0, 2.0, 10**400], "value 2 is an int too large for a float"),
    ([0.25, True], "value 1 is a bool"),
    (["1.5"], "value 0 is a str"),
])
def test_an_embedding_value_that_is_no_number_is_a_protocol_error_at_its_event(vector, said):
    """Such a vector was accepted, the turn ended complete, and every view then raised (float(None))."""
    state = TurnState()
    state.feed(delta({"type": "text.delta", "text": "a"}))
    state.feed(delta({"type": "text.done", "text": "a"}))
    with pytest.raises(ProtocolError, match=f"^event 2: embedding.delta carries an embedding whose {said}, not a number"):
        state.feed(delta({"type": "embedding.delta", "embedding": vector}))
    assert state.status == "error" and state.text == "a" and [i.kind for i in state.items] == ["text"]


def test_an_embedding_of_ints_nan_and_large_floats_is_taken():
    for vector in ([0, 1.5, -2, float("nan"), float("inf")], [1e308, 1e308], [3, 4], [], [float("-inf"), float("inf")]):
        state = TurnState()
        for event in (delta({"type": "embedding.delta", "embedding": vector}),
                      delta({"type": "embedding.done", "embedding": vector}), stop()):
            state.feed(event)
        assert state.status == "complete", vector
    assert state.items[0].norm == float("inf")
    state = TurnState()
    state.feed(delta({"type": "embedding.delta", "embedding": [3, 4.0]}))
    assert state.items[0].norm == 5.0


def test_the_norm_of_a_vector_that_is_not_all_numbers_is_none_not_an_exception():
    from mmsp_notebook.core.items import ItemState

    for vector in ([None, 1.0], [[1, 2]], [10**400], ["x"]):
        assert ItemState(index=0, kind="embedding", started=0.0, chunks=[vector]).norm is None, vector
    assert ItemState(index=0, kind="embedding", started=0.0, chunks=[[1e200, 1e200]]).norm == pytest.approx(2**0.5 * 1e200)


def _call(raw_parts, done):
    first = {"type": "tool_call.delta", "name": "rm", "tool_call_id": "c1", "arguments": raw_parts[0]}
    rest = [{"type": "tool_call.delta", "name": "", "tool_call_id": "", "arguments": p} for p in raw_parts[1:]]
    return [delta(i) for i in [first, *rest]] + [delta({"type": "tool_call.done", **done})]


@pytest.mark.parametrize(("parts", "done", "said"), [
    (['{"path": ', '"/tmp/x"}'], {"name": "rm", "tool_call_id": "c1", "arguments": {"path": "/"}},
     "tool_call.done: its arguments differ from those its deltas streamed"),
    (['{"path": "/tmp/x"'], {"name": "rm", "tool_call_id": "c1", "arguments": {"path": "/tmp/x"}},
     "tool_call.done: the arguments its deltas streamed are not JSON"),
    (['{}'], {"name": "rm", "tool_call_id": "OTHER", "arguments": {}},
     "tool_call.done carries another tool_call_id than its first delta"),
    (['{}'], {"name": "ls", "tool_call_id": "c1", "arguments": {}}, "tool_call.done names another tool than its first delta"),
])
def test_a_tool_call_done_that_is_not_what_its_deltas_streamed_is_a_protocol_error(parts, done, said):
    """The tool would have run with arguments (or under an id) the user never saw stream."""
    state = TurnState()
    events = _call(parts, done)
    with pytest.raises(ProtocolError, match=f"^event {len(events) - 1}: {said}"):
        for event in events:
            state.feed(event)
    assert state.status == "error" and state.items[0].done is None and state.items[0].tool_call_id == "c1"


def test_a_tool_call_done_equal_in_value_to_its_raw_arguments_is_taken():
    for parts, arguments in ((['{"q": "caf\\u00', 'e9", "n": 1.0}'], {"n": 1, "q": "café"}),
                             (['{"x": [NaN', ']}'], {"x": [float("nan")]}),
                             ([""], {}), (["", ""], {"anything": "unchecked: no raw arguments streamed"})):
        state = TurnState()
        for event in [*_call(parts, {"tool_call_id": "c1", "arguments": arguments}), stop("tool_call")]:
            state.feed(event)
        assert state.status == "complete" and state.items[0].name == "rm", parts


@pytest.mark.parametrize(("first", "done"), [
    ({"type": "text.delta", "text": "Hello"}, {"type": "text.done"}),
    ({"type": "thinking.delta", "thinking": "x"}, {"type": "thinking.done", "thinking": None}),
    ({"type": "inline_data.delta", "data": b"x", "mime_type": "audio/wav"}, {"type": "inline_data.done", "mime_type": "audio/wav"}),
    ({"type": "inline_thinking.delta", "data": b"x"}, {"type": "inline_thinking.done"}),
    ({"type": "embedding.delta", "embedding": [1.0]}, {"type": "embedding.done"}),
])
def test_a_done_without_its_content_is_a_protocol_error(first, done):
    """It was taken, and the message recorded with it broke the next turn's request (KeyError 'text')."""
    state = TurnState()
    state.feed(delta(first))
    growing = {"inline_data": "data", "inline_thinking": "data"}.get(first["type"][:-6], first["type"][:-6])
    with pytest.raises(ProtocolError, match=f"^event 1: {done['type']} without its {growing}"):
        state.feed(delta(done))
    assert state.status == "error" and state.message()["content_items"] == [] and state.items[0].content()


def test_a_signature_only_thinking_done_carries_its_empty_thinking_and_is_taken():
    state = TurnState()
    for event in (delta({"type": "thinking.delta", "thinking": "", "fidelity": {"signature": "s"}}),
                  delta({"type": "thinking.done", "thinking": "", "fidelity": {"signature": "s"}}), stop()):
        state.feed(event)
    assert state.status == "complete" and state.items[0].fidelity == {"signature": "s"}


@pytest.mark.parametrize("end", ["finish", "cancel", "fail", "violation"])
def test_an_event_after_the_step_ended_is_refused_and_the_step_keeps_how_it_ended(end):
    """feed_many's fast path still took fragments after finish, fail or cancel, and a later .done
    turned a cancelled step into an error; a reader's last batch may arrive after the user stopped."""
    state = TurnState()
    state.feed(delta({"type": "text.delta", "text": "partial"}))
    if end == "finish":
        state.finish()
    elif end == "cancel":
        state.cancel()
    elif end == "fail":
        state.fail(ConnectionError("reset"))
    else:
        with pytest.raises(ProtocolError):
            state.feed(delta({"type": "thinking.delta", "thinking": "x"}))
    before = (state.status, state.error, state.ended, state.version, state.n_events)
    for late in ([delta({"type": "text.delta", "text": " more"}), delta({"type": "text.delta", "text": "!"})],
                 [delta({"type": "text.done", "text": "partial more!"})], [stop()]):
        with pytest.raises(ProtocolError, match=r"^event 1: an event after the stream ended") as info:
            state.feed_many(late, [1.0] * len(late))
        assert (state.status, state.error, state.ended, state.version, state.n_events) == before
        assert state.fail(info.value) == before[0] and state.error is before[1]  # (as a reader's loop reports it)
    assert state.text == "partial" and len(state.events) == 1 and state.items[0].status == "streaming"
