"""The repaint loop on the main thread (drive) and its live views, on real streams from the demo server."""

from __future__ import annotations

import io
import threading
import time

import pytest

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


@pytest.mark.serial  # the final repaint within 0.6 s of the end
def test_the_final_repaint_follows_the_end_of_the_turn_without_waiting_out_a_tick(fresh_session):
    # a repaint every 2 s at most, and a stream of about 0.8 s: a loop that rested out the tick
    # begun at the first repaint would show the end more than a second late
    run, future = launch("hello", model="demo+tokens=300+tps=2000", trace=False)
    view = Recorder()
    turn = drive(run, future, view, rate=0.5)
    assert turn.status == "complete"
    ended = max(step.ended for step in turn.steps)
    # (well under the second a rested-out tick would cost, with room for a busy machine)
    assert view.finished_at is not None and view.finished_at - ended < 0.6
    # and the rate still holds while it streams: one repaint per 2 s begun
    assert view.updates and len(view.updates) <= 1 + int((ended - view.updates[0]) / 2.0)


def test_text_live_streams_the_answer_then_the_footer(fresh_session):
    run, future = launch("what is a cat?", trace=False)
    out = io.StringIO()
    turn = drive(run, future, TextLive(out))
    printed = out.getvalue()
    assert turn.status == "complete" and turn.text.strip()
    assert turn.text.strip()[:40] in printed
    assert "tok/s" in printed or "tokens" in printed


@pytest.mark.serial  # repaint rate and gaps
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


class Banners(LiveView):
    """Keeps the banner text of every repaint that changed it, as a front end would see it."""

    def __init__(self) -> None:
        from mmsp_notebook.views.model import OpsTracker

        self.tracker = OpsTracker()
        self.texts: list[str] = []

    def update(self, turn) -> None:
        for op in self.tracker.ops(turn):
            if op[0] == "turn" and "banner" in op[1]:
                banner = op[1]["banner"]
                self.texts.append(banner["text"] if banner else None)

    def finish(self, turn) -> None:
        self.update(turn)


def _silent_then_answer(pause):
    from sse_scripts import mmsp_event, mmsp_text

    return lambda request, auth: [pause, *mmsp_text("at last"), mmsp_event(stop=True)]


@pytest.mark.serial  # a repaint in each second of a 2.6 s silence
def test_the_live_banner_counts_the_seconds_a_silent_server_takes(fresh_session, monkeypatch):
    """No event arrives for 2.6 s: the pacer repaints all the same and the banner counts (1 s, 2 s),
    then the answer streams and completes."""
    from sse_scripts import script_server

    from mmsp_notebook.views import model

    monkeypatch.setattr(model, "WAIT_SHOWN_AFTER", 1.0)
    with script_server(_silent_then_answer(2.6)) as url:
        run, future = launch("hi", model="m", client_type="mmsp", base_url=url, timeout=30, trace=False)
        view = Banners()
        turn = drive(run, future, view)
    assert turn.status == "complete" and turn.text == "at last"
    waiting = [t for t in view.texts if t and t.startswith("waiting for the first token")]
    assert waiting[:2] == ["waiting for the first token… 1 s (gives up after 30 s)",
                           "waiting for the first token… 2 s (gives up after 30 s)"], view.texts
    assert view.texts[0] == "streaming…" and view.texts[-1] is None  # then the answer: complete, no banner


@pytest.mark.serial  # a repaint in each second of a 2.3 s silence
def test_the_chat_pacer_counts_the_seconds_too(fresh_session, monkeypatch):
    import asyncio

    from sse_scripts import script_server

    from mmsp_notebook.views import model
    from mmsp_notebook.views.live import adrive

    monkeypatch.setattr(model, "WAIT_SHOWN_AFTER", 1.0)
    with script_server(_silent_then_answer(2.3)) as url:
        run, future = launch("hi", model="m", client_type="mmsp", base_url=url, timeout=None, trace=False)
        view = Banners()
        turn = asyncio.run(adrive(run, future, view))
    assert turn.status == "complete"
    assert view.texts[1:3] == ["waiting for the first token… 1 s (gives up after 2 min 00 s)",  # the default limit
                               "waiting for the first token… 2 s (gives up after 2 min 00 s)"], view.texts


@pytest.mark.serial  # a repaint in each second of a 2.4 s silence
def test_a_terminal_says_what_it_waits_for_on_a_line_it_then_clears(fresh_session, monkeypatch):
    from sse_scripts import script_server

    from mmsp_notebook.views import model

    monkeypatch.setattr(model, "WAIT_SHOWN_AFTER", 1.0)
    out = io.StringIO()
    with script_server(_silent_then_answer(2.4)) as url:
        run, future = launch("hi", model="m", client_type="mmsp", base_url=url, timeout=30, trace=False)
        turn = drive(run, future, TextLive(out, color=True))
    printed = out.getvalue()
    assert turn.status == "complete"
    first, second = (printed.index(f"waiting for the first token… {n} s (gives up after 30 s)") for n in (1, 2))
    answer = printed.index("at last")
    assert first < second < answer
    assert printed[:answer].rstrip("\x1b[0m").endswith(TextLive.CLEAR)  # erased before the answer
    assert printed[second:answer].count(TextLive.CLEAR) == 1
    plain = io.StringIO()  # not a terminal (no colour): no status line, no control characters
    run, future = launch("hi", model="demo+tokens=20", trace=False)
    drive(run, future, TextLive(plain, color=False))
    assert "\x1b" not in plain.getvalue()


def test_control_characters_a_model_sends_never_reach_the_terminal_or_text_plain(fresh_session, tmp_path):
    import json

    from mmsp_notebook.demo import DemoServer
    from mmsp_notebook.views.text import render_text

    # colours, a carriage return over the line, a window title, an OSC 8 link, a clipboard write, a C1 CSI
    hostile = "safe \x1b[31mred\x1b[0m\rover \x1b]0;title\x07 \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b]52;c;aGk=\x07 \x9b2J"

    def event(items, event_type="delta", **extra):
        return "data: " + json.dumps({"role": "assistant", "event_type": event_type, "content_items": items,
                                      "usage_metadata": None, "finish_reason": None, **extra}) + "\n\n"

    call = {"name": "look\x1b[2J", "arguments": {"q": hostile}, "tool_call_id": "c1"}
    path = tmp_path / "hostile.sse"
    path.write_text("".join([
        event([{"type": "thinking.delta", "thinking": hostile}]), event([{"type": "thinking.done", "thinking": hostile}]),
        event([{"type": "text.delta", "text": hostile}]), event([{"type": "text.done", "text": hostile}]),
        event([{"type": "tool_call.delta", **call, "arguments": json.dumps(call["arguments"])}]),
        event([{"type": "tool_call.done", **call}]),
        event([], "stop", usage_metadata={"cached_tokens": 0, "prompt_tokens": 1, "thoughts_tokens": 1,
                                          "response_tokens": 1}, finish_reason="stop\x1b[8m"),
        "data: [DONE]\n\n"]), encoding="utf-8")
    with DemoServer(replay=path, replay_protocol="mmsp", instant=True) as server:
        run, future = launch("hi", model="captured", client_type="mmsp", base_url=server.base_url, trace=False)
        out = io.StringIO()
        turn = drive(run, future, TextLive(out, color=True))
    assert turn.status == "complete" and hostile in turn.text  # the Turn keeps what was sent
    for shown in (out.getvalue(), render_text(turn)):
        model_said = shown.replace(TextLive.DIM, "").replace(TextLive.YELLOW, "").replace(TextLive.RESET, "")
        assert not [c for c in model_said if (ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0], shown
        assert "safe ␛[31mred␛[0m␍over ␛]0;title␇" in shown and "look␛[2J" in shown


def test_text_live_writes_a_tool_calls_arguments_before_its_result_when_both_come_at_once(fresh_session):
    # a fast tool: its call and its result reach the terminal in one repaint
    from mmsp_notebook.engine.tools import ToolSet

    run, future = launch("weather in Paris please", tools=ToolSet({"get_weather": lambda city: f"sunny in {city}"}),
                         trace=False)
    turn = future.result(timeout=30)
    out = io.StringIO()
    view = TextLive(out)
    view.update(turn)
    view.finish(turn)
    args = turn.tool_calls[0]["raw_arguments"]
    assert f"[tool call] get_weather {args}\n  returned sunny in Paris\n" in out.getvalue(), out.getvalue()


class InterruptedAtStart(LiveView):
    """A view the interrupt reaches while it is being shown (the first widget's imports, its comm)."""

    def start(self, turn) -> None:
        raise KeyboardInterrupt


def test_an_interrupt_while_the_view_is_shown_cancels_the_turn_and_frees_its_conversation(fresh_session):
    import pytest

    run, future = launch("hello", model="demo+stall", trace=False)
    with pytest.raises(KeyboardInterrupt):
        drive(run, future, InterruptedAtStart())
    assert future.result(timeout=10).status == "cancelled"  # not streaming on unseen
    run, future = launch("still there?", trace=False)
    assert drive(run, future, Recorder()).status == "complete"


def test_a_view_that_fails_mid_stream_ends_its_turn_instead_of_leaving_it_streaming_unseen(fresh_session, tmp_path):
    import pytest

    (tmp_path / "out.txt").write_text("")
    run, future = launch("hello", model="demo+stall", trace=False)
    with open(tmp_path / "out.txt") as read_only, pytest.raises(io.UnsupportedOperation, match="not writable"):
        drive(run, future, TextLive(read_only))  # (opened without "w": its first write fails)
    assert future.result(timeout=10).status == "cancelled"
    run, future = launch("still there?", trace=False)  # its conversation takes the next turn at once
    assert drive(run, future, Recorder()).status == "complete"


def test_a_turn_stopped_while_its_client_is_made_ends_cancelled(fresh_session, monkeypatch):
    """■ while a first turn's client is still being made (its imports can take seconds) ends the turn
    ``cancelled``: nothing was sent, and it is not left streaming."""
    import asyncio

    from mmsp_notebook.engine.session import Session

    making = threading.Event()

    async def slow_lease(self, *args, **kwargs):
        making.set()
        await asyncio.sleep(60)

    monkeypatch.setattr(Session, "lease_client", slow_lease)
    run, future = launch("hello", trace=False)
    assert making.wait(10)
    future.cancel()
    assert run.finished.wait(10)  # its watchers are told
    assert run.turn.status == "cancelled" and not run.turn.steps


def test_an_interrupt_raised_in_the_task_awaiting_a_turn_cancels_the_turn(fresh_session):
    """A KeyboardInterrupt raised in the awaiting task itself (SIGINT while its code runs, where no
    handler turns it into a cancellation) aborts the turn as a cancellation does."""
    import asyncio

    from mmsp_notebook.views.live import await_turn

    run, future = launch("hello", model="demo+stall", trace=False)
    looks = []

    def stalled():  # (the watch's look at the worker loop: the interrupt lands there, on the third)
        looks.append(1)
        if len(looks) == 3:
            raise KeyboardInterrupt
        return None

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(await_turn(run, future, stalled))
    assert run.signal.aborted
    turn = run.turn
    deadline = time.monotonic() + 10
    while turn.status == "streaming" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert turn.status == "cancelled"  # not streaming on unseen
    run, future = launch("still there?", trace=False)
    assert drive(run, future, Recorder()).status == "complete"


class InterruptedOnce(Recorder):
    """A view the interrupt (Ctrl-C, ■) reaches at its first repaint once the answer has begun."""

    def update(self, turn) -> None:
        super().update(turn)
        if turn.events and not getattr(self, "interrupted", False):
            self.interrupted = True
            raise KeyboardInterrupt


def test_an_interrupted_turn_keeps_its_wire_when_capturing_it_outlasts_the_abort_grace(fresh_session, monkeypatch):
    # the request ends at once; capturing a long stream's wire may take longer than the grace
    # the worker is given to end the turn, and was then cancelled: --wire showed nothing of it
    from mmsp_notebook.engine import wiretap

    real = wiretap.build_wire

    def slow(turn, records):
        time.sleep(1.0)
        return real(turn, records)

    monkeypatch.setattr(wiretap, "build_wire", slow)
    run, future = launch("hello", model="demo+stall", wire=True, trace=False, timeout=10, sess=fresh_session)
    turn = drive(run, future, InterruptedOnce(), abort_grace=0.3)
    assert turn.status == "cancelled" and turn.wire is not None and turn.wire.exchanges
    assert turn.wire.exchanges[0].record.outcome == "client_gone"


def test_a_view_that_says_hello_mid_stream_gets_what_the_ops_sent_and_the_ops_continue_it(monkeypatch):
    """The end of a text held back (a key's first characters, a cut key so far) is in no snapshot:
    the snapshot of the turn view and of the comparison's columns holds what the ops sent, and the
    ops after it, the held text among them, make the whole redacted turn."""
    from types import SimpleNamespace

    from helpers import apply_ops

    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.views.model import OpsTracker, view_model
    from mmsp_notebook.views.widget import CompareView, TurnView

    key = "sk-hello-Ab12Cd34Ef56Gh78"
    monkeypatch.setenv("LIVE_HELLO_API_KEY", key)
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()

    def delta(text):
        state.feed({"role": "assistant", "event_type": "delta", "usage_metadata": None, "finish_reason": None,
                    "content_items": [{"type": "text.delta", "text": text}]})

    tracker, columns = OpsTracker(), [OpsTracker()]
    turn_view = TurnView(source=turn, tracker=tracker)
    compare = CompareView(source=SimpleNamespace(labels=["demo"], turns=[turn]), trackers=columns)
    snapshots = []
    for widget in (turn_view, compare):
        widget.send = lambda msg, buffers=None: snapshots.append(msg) if msg.get("type") == "snapshot" else None
    delta("the key sk-hel")
    first = [tracker.ops(turn), columns[0].ops(turn)]
    delta("lo-Ab12")  # a cut key so far, held back
    first = [first[0] + tracker.ops(turn), first[1] + columns[0].ops(turn)]
    for widget in (turn_view, compare):
        widget._on_front_end_msg(widget, {"type": "hello"}, [])
    shown = [snapshots[0]["turn"], snapshots[1]["turns"][0]]
    assert [vm["items"][0]["text"] for vm in shown] == ["the key "] * 2
    assert [apply_ops({"items": []}, ops)["items"][0]["text"] for ops in first] == ["the key "] * 2
    delta("Cd34Ef56Gh78 and more")
    state.feed({"role": "assistant", "event_type": "delta", "usage_metadata": None, "finish_reason": None,
                "content_items": [{"type": "text.done", "text": "the key " + key + " and more"}]})
    apply_ops(shown[0], tracker.ops(turn))  # (the text is done: sent whole, the turn still streaming)
    apply_ops(shown[1], columns[0].ops(turn))
    assert shown[0]["items"] == shown[1]["items"] == view_model(turn)["items"]
    assert shown[0]["items"][0]["text"] == "the key [redacted] and more" and key[:6] not in str(snapshots)
