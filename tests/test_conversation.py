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
