"""The result of a turn (core.turn) and a turn in flight (core.run), built from UniEvents without a network."""

from __future__ import annotations

import pytest

from mmsp_notebook import OptionError, Turn
from mmsp_notebook.core.run import TurnRun


def _delta(item):
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None}


def _stop(usage, finish="stop"):
    return {"role": "assistant", "event_type": "stop", "content_items": [], "usage_metadata": usage,
            "finish_reason": finish}


def _step(turn, text, usage):
    state = turn.new_step()
    state.mark_request_sent()
    for event in (_delta({"type": "text.delta", "text": text}), _delta({"type": "text.done", "text": text}),
                  _stop(usage)):
        state.feed(event)
    return state


def test_a_turn_sums_its_steps_bucket_by_bucket():
    turn = Turn({"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}, model="demo")
    assert turn.status == "streaming" and turn.usage is None and turn.timings["total"] is None
    _step(turn, "one ", {"prompt_tokens": 5, "response_tokens": 2, "cached_tokens": None})
    turn.tool_messages.append({"role": "user", "content_items": [{"type": "tool_result.done", "text": "r",
                                                                  "tool_call_id": "c"}]})
    _step(turn, "two", {"prompt_tokens": 9, "response_tokens": 3, "thoughts_tokens": 1})
    assert turn.status == "complete" and turn.text == "one two" and turn.finish_reason == "stop"
    assert turn.usage == {"cached_tokens": None, "prompt_tokens": 14, "thoughts_tokens": 1, "response_tokens": 5}
    assert [m["role"] for m in turn.messages] == ["user", "assistant", "user", "assistant"]
    assert turn.timings["total"] is not None and len(turn.timings["steps"]) == 2
    assert turn.cost is None  # the demo model has no list price
    prices = {"demo": {"prompt_tokens": 1.0, "response_tokens": 2.0, "thoughts_tokens": 2.0}}
    assert turn.cost_at(prices) == pytest.approx((14 * 1.0 + 5 * 2.0 + 1 * 2.0) / 1_000_000)
    assert turn.summary().startswith("<Turn demo · complete · finish=stop")


def test_a_turn_without_a_wire_capture_says_how_to_get_one(tmp_path):
    with pytest.raises(OptionError, match="run it with --wire"):
        Turn(None).save_wire(tmp_path / "x.sse")


def test_cancelling_keeps_what_arrived():
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()
    state.feed(_delta({"type": "text.delta", "text": "partial"}))
    turn.mark_cancelled("stopped")
    assert turn.status == "cancelled" and turn.text == "partial" and turn.error_message is None


def test_a_turn_in_flight_wakes_its_watchers_once_per_change_seen():
    run = TurnRun(Turn(None))
    woken = []
    run.add_waker(lambda: woken.append(1))
    run.notify()
    run.notify()  # not seen yet: no second wake
    assert run.changed.is_set() and woken == [1]
    run.changed.clear()
    run.notify()
    assert woken == [1, 1]
    run.abort("because")
    assert run.signal.aborted


def test_the_repr_isolates_the_names_a_server_gives():
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.front.compare import Comparison

    turn = Turn(None, model="evil\u202eledom")
    said = repr(turn)
    # an override in a name ends with it (FSI ... PDI): the rest of the line reads as written
    assert "<Turn \u2068evil\u202eledom\u2069 · " in said
    assert repr(Turn(None, model="demo")).startswith("<Turn demo ")  # a plain name as it is
    pair = repr(Comparison("c\u202e1", ["evil\u202eledom", "demo"], [turn, Turn(None, model="demo")]))
    assert pair.startswith("<Comparison \u2068c\u202e1\u2069: \u2068evil\u202eledom\u2069 ") and " · demo " in pair



def test_the_repr_writes_no_control_character_a_server_sent():
    """A repr is what a terminal prints for a value: an escape sequence in a finish reason or a model
    name (a window title, colours, a clipboard write) shows as Control Pictures, acting on nothing."""
    from mmsp_notebook.front.compare import Comparison

    esc = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b"
    turn = Turn(None, model=f"m{esc}")
    state = turn.new_step()
    state.mark_request_sent()
    state.feed(_delta({"type": "text.delta", "text": "hi"}))
    state.feed(_delta({"type": "text.done", "text": "hi"}))
    state.feed({"role": "assistant", "event_type": "stop", "content_items": [], "finish_reason": f"stop{esc}",
                "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 1, "thoughts_tokens": 0, "response_tokens": 1}})
    assert turn.finish_reason == f"stop{esc}"  # (the data as received)
    for said in (repr(turn), repr(Comparison(f"c{esc}", [f"a{esc}", "b"], [turn, Turn(None, model="b")]))):
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in said), said
        assert "\u241b]52;c;cHduZWQ=\u2407\u241b[2J\ufffd" in said


def test_text_split_between_the_halves_of_a_surrogate_pair_is_printable():
    # a server slicing UTF-16 text sent an emoji's halves in two deltas; a stream cut after a first
    # half leaves it lone: the text is readable and writable as UTF-8 either way
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()
    for event in (_delta({"type": "thinking.delta", "thinking": "hm \ud83d"}), _delta({"type": "thinking.delta", "thinking": "\ude00"}),
                  _delta({"type": "thinking.done", "thinking": "hm \U0001F600"}),
                  _delta({"type": "text.delta", "text": "smile \ud83d"}), _delta({"type": "text.delta", "text": "\ude00 and \ud83d"})):
        state.feed(event)
    turn.mark_cancelled("stopped")
    assert turn.thinking == "hm \U0001F600"
    assert turn.text == "smile \U0001F600 and \ufffd"
    turn.text.encode("utf-8")  # (raised UnicodeEncodeError: surrogates not allowed)


def test_every_image_and_audio_type_is_in_images_and_audio_also_one_the_views_do_not_draw():
    """An SVG, BMP or AVIF image was in no list of the turn (the traces counted it an image)."""
    turn = Turn(model="demo")
    step = turn.new_step()
    sent = [("image/png", b"\x89PNG"), ("image/svg+xml", b"<svg/>"), ("image/bmp", b"BM"), ("IMAGE/AVIF", b"av"),
            ("audio/L16;rate=24000", b"\x00\x00"), ("audio/flac", b"fLaC"), ("application/pdf", b"%PDF"), (None, b"?")]
    for mime, data in sent:
        item = {"type": "inline_data.delta", "data": data, **({"mime_type": mime} if mime else {})}
        step.feed(_delta(item))
        step.feed(_delta({**item, "type": "inline_data.done"}))
    step.feed(_stop({"prompt_tokens": 1, "response_tokens": 1}))
    assert [(i["mime_type"], i["data"]) for i in turn.images] == sent[:4]
    assert [(a["mime_type"], a["data"]) for a in turn.audio] == sent[4:6]
