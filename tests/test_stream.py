"""The engine's turn: an idle timeout for servers that go silent, through every door."""

from __future__ import annotations

import io
import json
import math
import time

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython
from sse_scripts import HOLD, chat_chunk, mmsp_event, mmsp_text, script_server

import mmsp_notebook as mn
from mmsp_notebook import OptionError
from mmsp_notebook.core.store import read_sidecar, sidecar_path
from mmsp_notebook.engine.launch import launch
from mmsp_notebook.engine.options import DEFAULT_TIMEOUT, Settings, TurnOptions, check_option, idle_limit
from mmsp_notebook.engine.stream import IdleTimeoutError


def _goes_silent(request, auth):
    """Two fragments of text, then nothing: the connection stays open."""
    return [mmsp_event({"type": "text.delta", "text": "Hello"}), mmsp_event({"type": "text.delta", "text": " wor"}),
            HOLD]


def _answer(*pieces):
    return [*mmsp_text(*pieces), mmsp_event(stop=True)]


@pytest.fixture
def silent_url():
    with script_server(_goes_silent) as url:
        yield url


@pytest.mark.serial  # the idle timeout measured: 0.5 s <= took < 3 s
def test_a_server_that_goes_silent_ends_the_turn_after_the_idle_timeout(fresh_session, silent_url):
    run, future = launch("hi", model="m", client_type="mmsp", base_url=silent_url, timeout=0.5)
    started = time.monotonic()
    turn = future.result(timeout=15)  # without an idle timeout this waited forever
    took = time.monotonic() - started
    assert 0.5 <= took < 3, took
    assert turn.status == "incomplete"  # events had arrived: a stream cut short, its content kept
    assert turn.text == "Hello wor"
    assert isinstance(turn.error, IdleTimeoutError) and turn.error.seconds == 0.5
    assert turn.error_message.startswith("no data for 0.5 s") and "--timeout" in turn.error_message
    assert fresh_session.conversation(None).history() == []  # nothing recorded
    [record] = list(read_sidecar(sidecar_path(turn.trace_id)))
    assert record["status"] == "incomplete" and record["error"]["message"].startswith("no data for 0.5 s")
    assert run.waiting_since is None and run.waiting_for() is None  # no request is open any more


@pytest.mark.serial  # the 0.5 s idle timeout within 5 s
def test_the_provider_sdk_path_times_out_too(fresh_session, monkeypatch):
    """openai-chat goes through the OpenAI SDK (its own httpx client, read timeout 600 s, retries)."""
    def script(request, auth):
        return [chat_chunk("Partial"), chat_chunk(" answer"), HOLD]

    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    with script_server(script) as url:
        started = time.monotonic()
        turn = mn.ask("hi", model="m", client_type="openai-chat", base_url=url, api_key_env="LOOPBACK_API_KEY",
                      timeout=0.5, stream=io.StringIO())
        assert time.monotonic() - started < 5
    assert turn.status == "incomplete" and turn.text == "Partial answer"
    assert "no data for 0.5 s" in turn.error_message


def test_a_silence_before_any_event_is_an_error(fresh_session):
    with script_server(lambda request, auth: [HOLD]) as url:
        turn = mn.ask("hi", model="m", client_type="mmsp", base_url=url, timeout=0.4, stream=io.StringIO())
    assert turn.status == "error" and turn.text == "" and "no data for 0.4 s" in turn.error_message


@pytest.mark.serial  # the silence measured within 0.12 s
def test_the_silence_is_counted_from_the_last_data(fresh_session):
    """Data right after the response's head, then silence: the turn ends about the limit after that
    data (not up to a quarter of it later, as when a sign of life was dated by the next look)."""
    with script_server(lambda request, auth: [mmsp_event({"type": "text.delta", "text": "Hi"}), HOLD]) as url:
        turn = mn.ask("hi", model="m", client_type="mmsp", base_url=url, timeout=1.0, stream=io.StringIO())
        ended = time.monotonic()
    assert turn.status == "incomplete" and turn.text == "Hi"
    silence = ended - turn.steps[0].event_times[-1]
    assert 0.99 <= silence < 1.12, silence


@pytest.mark.serial  # 0.15 s heartbeats under a 0.5 s idle limit
@pytest.mark.parametrize("client_type", ["mmsp", "openai-chat"])
def test_heartbeats_are_signs_of_life_a_silent_but_alive_stream_completes(fresh_session, monkeypatch, client_type):
    """Bytes count, not only events: keep-alive comments every 0.15 s for 1.2 s under a 0.5 s limit
    (through the MMSP wire client's httpx and through the OpenAI SDK's)."""
    def script(request, auth):
        beats = [step for _ in range(8) for step in (0.15, b": keep-alive\n\n")]
        if client_type == "openai-chat":
            return [chat_chunk("Thinking"), *beats, chat_chunk(" it over"), chat_chunk(finish="stop"),
                    chat_chunk(usage=True), b"data: [DONE]\n\n"]
        first = mmsp_text("Thinking it over")
        return [first[0], *beats, *first[1:], mmsp_event(stop=True)]

    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    with script_server(script) as url:
        run, future = launch("hi", model="m", client_type=client_type, base_url=url, timeout=0.5,
                             api_key_env="LOOPBACK_API_KEY" if client_type != "mmsp" else None)
        seen = []
        while not future.done():
            waited = run.waiting_for()
            if waited is not None:
                seen.append(waited)
            time.sleep(0.02)
        turn = future.result()
    assert turn.status == "complete", turn.error_message
    assert turn.text == "Thinking it over"
    assert seen and max(seen) < 0.5  # a view showing "waiting… N s" never saw the limit reached


@pytest.mark.serial  # 0.5 s < the longest wait seen < 1.5 s
def test_the_waiting_time_a_view_shows_grows_while_the_server_is_silent(fresh_session):
    with script_server(lambda request, auth: [*_answer("x")[:1], 0.8, *_answer("x")[1:]]) as url:
        run, future = launch("hi", model="m", client_type="mmsp", base_url=url, timeout=5)
        assert run.idle_timeout == 5
        longest = 0.0
        while not future.done():
            longest = max(longest, run.waiting_for() or 0.0)
            time.sleep(0.02)
    assert future.result().status == "complete"
    assert 0.5 < longest < 1.5
    assert run.waiting_for() is None


@pytest.mark.serial  # the first event must arrive within a 0.3 s limit
def test_no_limit_waits_past_the_default(fresh_session):
    """timeout=none: a 0.6 s pause is fine when the kernel's default is 0.3 s."""
    fresh_session.settings.set("timeout", "0.3")
    with script_server(lambda request, auth: [*_answer("x")[:1], 0.6, *_answer("x")[1:]]) as url:
        limited = mn.ask("hi", model="m", client_type="mmsp", base_url=url, stream=io.StringIO())
        unlimited = mn.ask("hi", model="m", client_type="mmsp", base_url=url, timeout="none", stream=io.StringIO())
    assert limited.status == "incomplete" and "no data for 0.3 s" in limited.error_message
    assert unlimited.status == "complete"


@pytest.mark.serial  # the first data must arrive within a 0.3 s limit
def test_the_timeout_is_an_option_of_every_door(fresh_session, silent_url):
    start_ipython()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mmsp_notebook")
    ip.run_cell_magic("mmsp", f"-m m --client-type mmsp --base-url {silent_url} --timeout 0.4 -o t", "hi")
    turn = ip.user_ns["t"]
    assert turn.status == "incomplete" and "no data for 0.4 s" in turn.error_message
    ip.run_line_magic("mmsp", "config timeout=0.3")
    assert fresh_session.settings.timeout == 0.3
    turn = mn.ask("hi", model="m", client_type="mmsp", base_url=silent_url, stream=io.StringIO())
    assert "no data for 0.3 s" in turn.error_message
    from mmsp_notebook import Chat

    chat = Chat(model="m", client_type="mmsp", base_url=silent_url, timeout=0.35)
    turn = chat.send("hi")
    assert turn.status == "incomplete" and "no data for 0.35 s" in turn.error_message
    for bad in ("0", "-2", "soon", "nan"):
        with pytest.raises(UsageError, match="timeout takes a number of seconds above 0, or none"):
            ip.run_line_magic("mmsp", f"config timeout={bad}")
        with pytest.raises(UsageError, match="timeout takes a number of seconds"):
            ip.run_cell_magic("mmsp", f"--timeout {bad}", "hi")
        with pytest.raises(OptionError, match="timeout takes a number of seconds"):
            mn.ask("hi", timeout=bad, stream=io.StringIO())
        with pytest.raises(OptionError, match="timeout takes a number of seconds"):
            Chat(timeout=bad)
    assert fresh_session.settings.timeout == 0.3  # a refused value changed nothing


def test_timeout_values():
    assert Settings().timeout == DEFAULT_TIMEOUT == 120.0
    assert check_option("timeout", "30") == 30.0 and check_option("timeout", "2.5s") == 2.5
    assert check_option("timeout", 7) == 7.0 and math.isinf(check_option("timeout", "none"))
    assert check_option("timeout", "none", text=True) is None  # %mmsp config timeout=none: no limit
    assert idle_limit(None) is None and idle_limit(math.inf) is None and idle_limit(4.0) == 4.0
    for bad in (True, 0, -1, "", "x", math.nan):
        with pytest.raises(OptionError, match="timeout"):
            check_option("timeout", bad)
    assert TurnOptions(timeout="45").timeout == 45.0
    assert "timeout" not in TurnOptions(timeout=45).config()  # not a UniConfig field
    settings = Settings()
    settings.set("timeout", "off")
    assert math.isinf(settings.timeout)
    settings.set("timeout", "none")
    assert settings.timeout is None


def test_two_conversations_share_a_client_and_stream_at_once(fresh_session):
    """One client per endpoint serves both; each request carries its own conversation's history."""
    seen = []

    def script(request, auth):
        seen.append([m["content_items"][0].get("text") for m in request["messages"] if m["role"] == "user"])
        return [*_answer("one", " two")[:1], 0.3, *_answer("one", " two")[1:]]

    with script_server(script) as url:
        opts = {"model": "m", "client_type": "mmsp", "base_url": url}
        mn.ask("first of a", chat="a", stream=io.StringIO(), **opts)
        runs = [launch("second of a", chat="a", **opts), launch("first of b", chat="b", **opts)]
        a, b = (future.result(10) for _, future in runs)
    assert a.status == b.status == "complete"
    assert len(fresh_session.clients) == 1
    assert sorted(seen[1:]) == [["first of a", "second of a"], ["first of b"]]
    assert [json.dumps(m["content_items"]) for m in fresh_session.conversation("b").history()][0] == \
        json.dumps([{"type": "text.done", "text": "first of b"}])


def test_a_silent_server_gets_its_own_hint():
    from mmsp_notebook import IdleTimeoutError as Exported
    from mmsp_notebook.views.hints import error_hint

    assert Exported is IdleTimeoutError
    assert "--timeout" in error_hint(IdleTimeoutError(5)) and "went silent" in error_hint(IdleTimeoutError(5))


def _wait_for_words(turn, future, prefix, limit=10.0):
    from mmsp_notebook.views.model import waiting_text

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not future.done():
        text = waiting_text(turn)
        if text.startswith(prefix):
            return text
        time.sleep(0.05)
    return None


@pytest.mark.serial  # the view must be read within its first second of waiting
def test_what_a_view_says_while_the_server_is_silent(fresh_session, silent_url, monkeypatch):
    from mmsp_notebook.views import model

    monkeypatch.setattr(model, "WAIT_SHOWN_AFTER", 0.3)
    run, future = launch("hi", model="m", client_type="mmsp", base_url=silent_url, timeout=125)
    words = _wait_for_words(run.turn, future, "no data from the server")
    assert words == "no data from the server… 0 s (gives up after 2 min 05 s)"
    assert model.waiting_text(run.turn, now=run.waiting_since + 61) == "no data from the server… 1 min 01 s (gives up after 2 min 05 s)"
    assert model.waiting_text(run.turn, now=run.waiting_since + 0.1) == ""  # data flowed a moment ago: nothing to say
    run.abort()
    turn = future.result(timeout=10)
    assert turn.status == "cancelled" and model.waiting_text(turn) == ""  # no request is open any more


@pytest.mark.serial  # the view must be read within its first second of waiting
def test_a_view_says_a_provider_sdk_is_retrying_after_a_429(fresh_session, monkeypatch):
    """The OpenAI SDK answers a 429 by waiting out its Retry-After and asking again: meanwhile the
    view says so, then the answer streams."""
    from sse_scripts import Reply

    from mmsp_notebook.views import model

    monkeypatch.setattr(model, "WAIT_SHOWN_AFTER", 0.3)
    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    asked = []

    def script(request, auth):
        asked.append(time.monotonic())
        if len(asked) == 1:
            return Reply(429, {"retry-after": "1.5", "content-type": "application/json"})
        return [chat_chunk("Here"), chat_chunk(finish="stop"), chat_chunk(usage=True), b"data: [DONE]\n\n"]

    with script_server(script) as url:
        run, future = launch("hi", model="m", client_type="openai-chat", base_url=url, timeout=30,
                             api_key_env="LOOPBACK_API_KEY")
        words = _wait_for_words(run.turn, future, "retrying after HTTP 429")
        turn = future.result(timeout=15)
    assert words == "retrying after HTTP 429… 0 s"
    assert turn.status == "complete" and turn.text == "Here" and len(asked) == 2
    assert turn.retrying_after is None and model.waiting_text(turn) == ""


def test_a_stream_cut_after_its_stop_event_completes_and_is_recorded(fresh_session):
    """An MMSP server that sends the stop event, then loses the connection inside its closing
    ``[DONE]``: the answer is whole, so the turn completes, the conversation keeps it and the
    sidecar says so (it was ``incomplete``, "ended without a stop event", and left out of the history)."""
    seen: list[int] = []

    def script(request, auth):
        seen.append(len(request["messages"]))
        return mmsp_text("Whole", " answer") + [mmsp_event(stop=True), b"data: [DO"]

    with script_server(script) as url:
        out = io.StringIO()
        turn = mn.ask("hi", model="m", client_type="mmsp", base_url=url, chat="after-stop", stream=out)
        assert turn.status == "complete" and turn.text == "Whole answer" and turn.error is None
        assert "incomplete" not in out.getvalue() and "without a stop event" not in out.getvalue()
        [record] = list(read_sidecar(sidecar_path(turn.trace_id)))
        assert record["status"] == "complete" and record["error"] is None
        mn.ask("and?", model="m", client_type="mmsp", base_url=url, chat="after-stop", stream=io.StringIO())
    assert seen == [1, 3]  # the second request carries the first turn


@pytest.mark.parametrize("client_type", ["mmsp", "openai-chat", "openai-responses", "ant-messages"])
def test_a_200_page_that_is_no_event_stream_is_an_error_that_says_so(fresh_session, monkeypatch, client_type):
    """A --base-url that answers with a web page (HTTP 200, text/html): no event came of it, and the
    error says what came instead, not "cut short before its stop event; worth retrying"."""
    from sse_scripts import Reply

    from mmsp_notebook import NotAnEventStreamError

    page = Reply(200, {"content-type": "text/html; charset=utf-8"}, b"<html><body>Sign in</body></html>")
    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    with script_server(lambda request, auth: page) as url:
        base = url.removesuffix("/v1") if client_type == "ant-messages" else url
        out = io.StringIO()
        turn = mn.ask("hi", model="m", client_type=client_type, base_url=base, api_key_env="LOOPBACK_API_KEY",
                      timeout="none", stream=out)
    assert turn.status == "error" and isinstance(turn.error, NotAnEventStreamError), (turn.status, turn.error)
    assert type(turn.error.__cause__).__name__ == "IncompleteStreamError"
    assert "HTTP 200 with text/html; charset=utf-8, not an event stream" in turn.error_message
    assert "check --base-url" in out.getvalue() and "worth retrying" not in out.getvalue()


def _responses_frame(**event) -> bytes:
    """One Responses stream frame: its ``event:`` line and its data."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


_RESPONSES_START = [
    _responses_frame(type="response.created", sequence_number=0,
                     response={"id": "r", "object": "response", "created_at": 1, "status": "in_progress",
                               "model": "m", "output": []}),
    _responses_frame(type="response.output_item.added", output_index=0, sequence_number=1,
                     item={"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant",
                           "content": []}),
    _responses_frame(type="response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
                     delta="Partial", sequence_number=2),
]


@pytest.mark.parametrize("reported", [
    _responses_frame(type="error", code="context_length_exceeded", message="Your input exceeds the context window",
                     param=None, sequence_number=3),
    _responses_frame(type="response.failed", sequence_number=3,
                     response={"id": "r", "object": "response", "created_at": 1, "status": "failed", "model": "m",
                               "output": [], "error": {"code": "server_error",
                                                       "message": "Your input exceeds the context window"}}),
], ids=["error", "response.failed"])
def test_an_error_a_responses_stream_reports_is_the_turn_s_error(fresh_session, monkeypatch, reported):
    """mmsp's Responses client passes over a stream's ``error`` and ``response.failed`` events and then
    finds no stop event: the server's message was lost, the turn "incomplete, worth retrying"."""
    from mmsp import UpstreamError

    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    with script_server(lambda request, auth: [*_RESPONSES_START, reported, b"data: [DONE]\n\n"]) as url:
        out = io.StringIO()
        turn = mn.ask("hi", model="m", client_type="openai-responses", base_url=url, api_key_env="LOOPBACK_API_KEY",
                      stream=out)
    assert turn.status == "error" and turn.text == "Partial", (turn.status, turn.error)
    assert isinstance(turn.error, UpstreamError) and type(turn.error.__cause__).__name__ == "IncompleteStreamError"
    assert turn.error_message == "Your input exceeds the context window"
    assert "Your input exceeds the context window" in out.getvalue() and "worth retrying" not in out.getvalue()


def test_a_timeout_while_the_sdk_waits_out_a_429_says_rate_limited_not_silent(fresh_session, monkeypatch):
    """The OpenAI SDK waits out a 429's Retry-After before retrying; the turn's --timeout ending that
    wait said the server "sent nothing" and "went silent", when it had answered: rate limited."""
    from sse_scripts import Reply

    from mmsp_notebook import IdleTimeoutError

    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    with script_server(lambda request, auth: Reply(429, {"retry-after": "5", "content-type": "application/json"})) as url:
        out = io.StringIO()
        turn = mn.ask("hi", model="m", client_type="openai-chat", base_url=url, api_key_env="LOOPBACK_API_KEY",
                      timeout=0.5, stream=out)
    assert turn.status == "error" and isinstance(turn.error, IdleTimeoutError) and turn.error.status == 429
    assert turn.error_message.startswith("HTTP 429 (rate limited): the server refused the request")
    assert "sent nothing" not in out.getvalue() and "went silent" not in out.getvalue()
    assert "Refused with HTTP 429: wait a moment" in out.getvalue()


def _on_a_loop() -> bool:
    """Whether the calling thread runs an event loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_the_trace_is_saved_off_the_worker_loop_and_before_the_turn_is_over(fresh_session, monkeypatch):
    """The trace (the whole conversation, rewritten at each turn: seconds for a long one) is saved in
    a thread where no loop runs, so it stalls no other stream; a turn cancelled while it is saved
    ends only once it is on disk."""
    import threading

    from mmsp_notebook.core.store import tracer_path
    from mmsp_notebook.engine import stream

    seen: list[tuple[str, bool]] = []
    saving, release, saved = threading.Event(), threading.Event(), threading.Event()
    save = stream.save_trace

    def slow_save(*args, **kwargs):
        seen.append((threading.current_thread().name, _on_a_loop()))
        saving.set()
        release.wait(5)
        path = save(*args, **kwargs)
        saved.set()
        return path

    monkeypatch.setattr(stream, "save_trace", slow_save)
    with script_server(lambda request, auth: _answer("Hello", " world")) as url:
        run, future = launch("hi", model="m", client_type="mmsp", base_url=url)
        assert saving.wait(15)
        future.cancel()  # (the turn's task, cancelled while its trace is written)
        time.sleep(0.2)
        assert not run.finished.is_set()  # the save is waited for
        release.set()
        assert run.finished.wait(15)
    assert saved.is_set() and tracer_path(run.turn.trace_id).exists()  # on disk before the turn was over
    assert seen and not any(on_loop for _, on_loop in seen), seen
    assert json.loads(tracer_path(run.turn.trace_id).read_text())["history"][1]["content_items"][0]["text"] == "Hello world"


def test_the_timing_sidecar_is_built_and_written_off_the_worker_loop(fresh_session, monkeypatch):
    """A long turn's sidecar record (100,000 events: ~0.6 s to list, encode and write) would stall
    every stream on the worker loop: it is built and appended in a thread where no loop runs."""
    import threading

    from mmsp_notebook.engine import stream

    seen: list[tuple[str, str, bool]] = []

    def where(name, fn):
        def wrapped(*args, **kwargs):
            seen.append((name, threading.current_thread().name, _on_a_loop()))
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(stream, "append_sidecar", where("append", stream.append_sidecar))
    monkeypatch.setattr(stream, "sidecar_record", where("record", stream.sidecar_record))
    with script_server(lambda request, auth: _answer("Hello", " world")) as url:
        _, future = launch("hi", model="m", client_type="mmsp", base_url=url)
        turn = future.result(timeout=15)
    assert turn.status == "complete" and turn.text == "Hello world"
    assert [name for name, _, _ in seen] == ["record", "append"]
    assert not any(on_loop for _, _, on_loop in seen), seen  # neither ran on the worker loop
    [record] = list(read_sidecar(sidecar_path(turn.trace_id)))
    assert record["status"] == "complete" and len(record["events"]) == turn.steps[0].n_events
