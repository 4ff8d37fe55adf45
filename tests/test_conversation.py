"""A recorded conversation's views: the timing line of each step."""

from __future__ import annotations

from mmsp_notebook.core.turn import Turn
from mmsp_notebook.views.conversation import step_lines


def _event(event_type, items, finish=None):
    return {"role": "assistant", "event_type": event_type, "content_items": items, "finish_reason": finish,
            "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1} if event_type == "stop" else None}


def test_the_timing_line_names_audio_and_other_data_as_what_they_are():
    """Every inline_data item was called an image there: 'image 0 ms' for a clip of audio or a PDF."""
    turn = Turn(model="demo")
    step = turn.new_step()
    for mime in ("image/png", "audio/L16;rate=24000", "application/pdf"):
        item = {"type": "inline_data.delta", "data": b"\x00\x00", "mime_type": mime}
        step.feed(_event("delta", [item]))
        step.feed(_event("delta", [{**item, "type": "inline_data.done"}]))
    step.feed(_event("stop", [], "stop"))
    assert step_lines(turn) == ["timing: image 0 ms · audio 0 ms · data 0 ms"]


T0 = 1_767_225_600_000


def _trace(root, history, records):
    import json

    (root / "t.json").write_text(json.dumps({"history": history, "config": {"model": "m", "trace_id": "t"},
                                             "timestamp": "2026-01-01T00:00:00"}))
    (root / "t.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root / "t.json"


def _record(**changes):
    record = {"v": 1, "trace_id": "t", "turn": 0, "message_index": 1, "model": "m", "client_type": "mmsp",
              "status": "complete", "error": None, "started_at": T0 + 10, "ttft_ms": 100.0, "total_ms": 400.0,
              "usage": None, "finish_reason": "stop", "events": [[100.0, "text.delta", 2], [400.0, "stop", 0]]}
    return {**record, **changes}


_ANSWER = {"role": "assistant", "content_items": [{"type": "text.done", "text": "hi"}], "finish_reason": "stop",
           "created_at": T0 + 500}


def test_a_user_message_whose_items_or_images_are_not_lists_is_drawn_with_a_note(tmp_path):
    """``content_items: true`` (or a number) in a user message, ``images: 1.5`` in a tool result: a
    TypeError from deep inside the view, where show names the damage and draws the rest."""
    from mmsp_notebook import traces

    for items in (True, 7, 1.5):
        path = _trace(tmp_path, [{"role": "user", "content_items": items, "created_at": T0}, _ANSWER], [_record()])
        conversation = traces.show(path)
        assert "content_items is damaged: a " in conversation.text and "hi" in conversation.text, items
        assert "content_items is damaged" in conversation.html
    results = {"role": "user", "content_items": [{"type": "tool_result.done", "text": "ok", "tool_call_id": "c1",
                                                  "images": 1.5}]}
    call = {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": "f", "arguments": {},
                                                    "tool_call_id": "c1"}], "finish_reason": "tool_call"}
    path = _trace(tmp_path, [{"role": "user", "content_items": [{"type": "text.done", "text": "go"}]}, call, results,
                             _ANSWER], [])
    assert "hi" in traces.show(path).text
    # an answer's items given as a text: one note, not one per character
    path = _trace(tmp_path, [{"role": "user", "content_items": [{"type": "text.done", "text": "go"}]},
                             {**_ANSWER, "content_items": "9" * 400}], [])
    shown = traces.show(path).text
    assert "content_items is damaged: a str, not a list" in shown and "is not an item" not in shown


def test_a_sidecar_record_whose_events_or_times_are_damaged_still_draws_its_turn(tmp_path):
    """``events: 3`` broke the waterfall of a selected turn (TypeError), a time of -1e400 (JSON holds
    any integer) every number check of the view (OverflowError): both are read as absent."""
    from mmsp_notebook import traces

    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "go"}], "created_at": T0}, _ANSWER]
    huge = -(10**400)
    for record in (_record(events=3), _record(events=True), _record(total_ms=huge), _record(ttft_ms=huge),
                   _record(started_at=huge), _record(events=[[huge, "text.delta", 2]]),
                   _record(message_index=None, status="error", events=7)):
        conversation = traces.show(_trace(tmp_path, history, [record]), turn=0)
        assert "hi" in conversation.text and "mmsp-conv" in conversation.html, record


def test_a_key_in_an_image_url_or_a_tool_call_id_is_redacted_in_the_drawn_conversation(tmp_path, monkeypatch):
    """An image given by URL (Gemini's file URLs carry ``?key=``) is named in a note, and a tool
    result's image by its call id: both were shown with a configured key in them."""
    from mmsp_notebook import traces

    key = "zq-Proj" + "X7kd92LmQ0pz11Vb88cc"
    monkeypatch.setenv("MYPROVIDER_API_KEY", key)
    png = "data:image/png;base64," + "AIza" * 10  # an image's base64 is never searched for key shapes
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "look"},
                                                  {"type": "image_url.done", "image_url": f"https://x.test/a.png?key={key}"},
                                                  {"type": "image_url.done", "image_url": png}], "created_at": T0},
               {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": "f", "arguments": {},
                                                        "tool_call_id": key}], "finish_reason": "tool_call"},
               {"role": "user", "content_items": [{"type": "tool_result.done", "text": "ok", "tool_call_id": key,
                                                   "images": [f"https://x.test/b.png?key={key}"]}]},
               {"role": "user", "content_items": [{"type": "tool_result.done", "text": "ok", "tool_call_id": key,
                                                   "images": [png]}]},
               _ANSWER]
    conversation = traces.show(_trace(tmp_path, history, []))
    for shown in (conversation.html, conversation.text):
        assert key not in shown and "[redacted]" in shown
    assert f'src="{png}"' in conversation.html


def test_a_user_message_longer_than_an_answer_is_drawn_is_cut_as_an_answer_is(tmp_path):
    """A prompt of whole documents (a long-context question) went whole into the conversation's HTML,
    where an answer's text is cut at HTML_TEXT_LIMIT characters with a note saying so."""
    from mmsp_notebook import traces
    from mmsp_notebook.views.text import HTML_TEXT_LIMIT

    prompt = "doc " * (HTML_TEXT_LIMIT // 4) + "y" * 5000
    path = _trace(tmp_path, [{"role": "user", "content_items": [{"type": "text.done", "text": prompt}], "created_at": T0},
                             _ANSWER], [_record()])
    conversation = traces.show(path)
    page = conversation.html
    assert "5,000 characters not shown: the trace file has all" in page and "y" * 10 not in page
    assert len(page) < HTML_TEXT_LIMIT + 100_000
    assert "5,000 characters not shown" in conversation.text


def test_an_answer_item_without_its_content_or_with_a_huge_number_is_named_and_the_rest_drawn(tmp_path):
    """The turn state refuses a done item without its content and an embedding value no float holds;
    show names such an item as damaged and draws the answer's other items, instead of failing."""
    from mmsp_notebook import traces

    for bad, said in (({"type": "text.done"}, "a text item without its text"),
                      ({"type": "thinking.done", "thinking": None}, "a thinking item without its thinking"),
                      ({"type": "embedding.done", "embedding": [1.0, 10**400]}, "an embedding that is not a list")):
        answer = {**_ANSWER, "content_items": [bad, {"type": "text.done", "text": "still here"}]}
        path = _trace(tmp_path, [{"role": "user", "content_items": [{"type": "text.done", "text": "go"}], "created_at": T0},
                                 answer], [_record()])
        shown = traces.show(path)
        assert said in shown.text and "still here" in shown.text, shown.text
