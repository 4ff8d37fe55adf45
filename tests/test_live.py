"""The repaint loop on the main thread (drive) and its live views, on real streams from the demo server."""

from __future__ import annotations

import io
import time

from mmsp_notebook.engine.launch import launch
from mmsp_notebook.views.live import LiveView, TextLive, drive


class Recorder(LiveView):
    """Notes when each repaint happens."""

    def __init__(self) -> None:
        self.updates: list[float] = []
        self.finished_at: float | None = None

    def update(self, turn) -> None:
        self.updates.append(time.monotonic())

    def finish(self, turn) -> None:
        self.finished_at = time.monotonic()


def test_the_final_repaint_follows_the_end_of_the_turn_without_waiting_out_a_tick(fresh_session):
    # a repaint every 2 s at most, and a stream of about 0.8 s: a loop that rested out the tick
    # begun at the first repaint would show the end more than a second late
    run, future = launch("hello", model="demo+tokens=300+tps=2000", trace=False)
    view = Recorder()
    turn = drive(run, future, view, rate=0.5)
    assert turn.status == "complete"
    ended = max(step.ended for step in turn.steps)
    assert view.finished_at is not None and view.finished_at - ended < 0.25
    # and the rate still holds while it streams: one repaint in the 2 s
    assert len(view.updates) == 1


def test_text_live_streams_the_answer_then_the_footer(fresh_session):
    run, future = launch("what is a cat?", trace=False)
    out = io.StringIO()
    turn = drive(run, future, TextLive(out))
    printed = out.getvalue()
    assert turn.status == "complete" and turn.text.strip()
    assert turn.text.strip()[:40] in printed
    assert "tok/s" in printed or "tokens" in printed


def test_no_second_carries_more_than_30_messages_with_the_first_and_the_last(fresh_session):
    # the widget's display, every repaint, then the final ops and the static rendering (two messages)
    run, future = launch("tell me a story", model="demo+tokens=2400+tps=1500", trace=False)
    view = Recorder()
    started = time.monotonic()
    turn = drive(run, future, view)
    assert turn.status == "complete" and len(view.updates) > 25  # streamed for more than a second
    messages = [started, *view.updates, view.finished_at, view.finished_at]
    busiest = max(sum(1 for t in messages if s <= t < s + 1.0) for s in messages)
    assert busiest <= 30, busiest
    gaps = [b - a for a, b in zip(view.updates, view.updates[1:])]
    assert min(gaps) >= 1.0 / 25 - 0.002
