"""The chat widget's Python side without a kernel (anywidget's DummyComm), on the real demo server."""

from __future__ import annotations

import asyncio
import io
import json
import time

import pytest
from helpers import apply_ops
from tools import get_weather, weather_in

from mmsp_notebook import Chat, MMSPNotebookError, OptionError
from mmsp_notebook.views.model import view_model


class Capture:
    def __init__(self, chat):
        self.messages = []
        original = chat.comm.send

        def send(data=None, metadata=None, buffers=None):
            if isinstance(data, dict) and data.get("method") == "custom":
                self.messages.append(data["content"])
            return original(data=data, metadata=metadata, buffers=buffers)

        chat.comm.send = send

    def ops_for(self, index):
        return [op for m in self.messages if m.get("type") == "ops" and m.get("turn") == index for op in m["ops"]]


def inbound(chat, content):
    """A message from the front end, as the kernel hands it to the widget."""
    chat.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def wait_for(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def test_send_streams_ops_and_keeps_the_transcript(fresh_session):
    chat = Chat(tools=[get_weather])
    cap = Capture(chat)
    turn = chat.send("What's the weather in Madrid?")
    assert turn.status == "complete" and weather_in("Madrid") in turn.text
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"]
    assert chat.transcript[0]["text"] == "What's the weather in Madrid?"
    final = chat.transcript[1]["turn"]
    assert final == view_model(turn)
    # the ops the front end got rebuild the same turn
    vm = apply_ops({"id": turn.id, "model": turn.model, "items": []}, cap.ops_for(1))
    assert vm == final
    assert not chat.busy and chat.error == ""
    assert [m["role"] for m in chat.history] == ["user", "assistant", "user", "assistant"]
    df = chat.turns
    assert len(df) == 1 and df["steps"].iloc[0] == 2


@pytest.mark.serial  # the stop must end the turn within 1.5 s
def test_front_end_send_runs_on_the_worker_and_stop_aborts(fresh_session):
    chat = Chat(model="demo+tps=30")
    cap = Capture(chat)
    inbound(chat, {"type": "send", "text": "hello"})
    wait_for(lambda: chat.busy)
    wait_for(lambda: len(cap.ops_for(1)) > 3)
    with pytest.raises(MMSPNotebookError):
        chat.send("a second message while the first streams")
    started = time.monotonic()
    inbound(chat, {"type": "stop"})
    wait_for(lambda: not chat.busy, timeout=3)
    assert time.monotonic() - started < 1.5
    entry = chat.transcript[-1]
    assert entry["role"] == "assistant" and entry["turn"]["status"] == "cancelled"
    assert entry["turn"]["items"]  # partial turn kept
    assert chat.history == []  # a stopped turn records nothing


def test_a_message_sent_right_after_stop_follows_the_stopped_turn(fresh_session):
    """stop() returns at once; the turn it stopped winds down on the worker loop. A message sent
    meanwhile waits for it instead of being refused as if the turn still streamed."""
    chat = Chat(model="demo+tps=30", trace=False)
    inbound(chat, {"type": "send", "text": "hello"})
    wait_for(lambda: chat.busy)
    chat.stop()
    turn = chat.send("and now something else")
    assert turn.status == "complete"
    assert [e["turn"]["status"] for e in chat.transcript if e["role"] == "assistant"] == ["cancelled", "complete"]
    assert [m["role"] for m in chat.history] == ["user", "assistant"]
    # a turn that was not stopped still refuses a second message
    inbound(chat, {"type": "send", "text": "a long one"})
    wait_for(lambda: chat.busy)
    with pytest.raises(MMSPNotebookError, match="already streaming"):
        chat.send("too soon")
    chat.stop()
    wait_for(lambda: not chat.busy)


def test_a_message_the_kernel_refuses_is_handed_back_to_the_view_that_sent_it(fresh_session):
    """A send refused before it joined the transcript set only the error: the view that sent it
    had emptied its box, and the message was lost. It is now answered by a refused message naming
    the send's id (js/src/chat.js puts it back in the box); one answered by a failed turn is not."""
    chat = Chat(model="demo+tps=30", trace=False)
    cap = Capture(chat)

    def refusals():
        return [m for m in cap.messages if m.get("type") == "refused"]

    inbound(chat, {"type": "send", "text": "hello", "id": "a-1"})
    wait_for(lambda: chat.busy)
    inbound(chat, {"type": "send", "text": "me too", "id": "b-1"})  # another view, at the same time
    wait_for(refusals)
    assert refusals() == [{"type": "refused", "id": "b-1", "error": chat.error}]
    assert chat.error.startswith("BusyError: a turn is already streaming")
    assert [e.get("text") for e in chat.transcript if e["role"] == "user"] == ["hello"]
    chat.stop()
    wait_for(lambda: not chat.busy)
    inbound(chat, {"type": "send", "text": "half a pair \ud800", "id": "b-2"})  # (pasted text no page can hold)
    wait_for(lambda: len(refusals()) == 2)
    assert refusals()[1]["id"] == "b-2" and refusals()[1]["error"].startswith("OptionError: ")
    inbound(chat, {"type": "send", "text": ["hi"], "id": {"not": "a string"}})  # (only a string is sent back)
    wait_for(lambda: len(refusals()) == 3)
    assert refusals()[2]["id"] is None
    chat.thinking = "very"  # refused when its turn starts: answered in the transcript, with Retry
    inbound(chat, {"type": "send", "text": "hello again", "id": "b-3"})
    wait_for(lambda: chat.transcript[-1]["role"] == "assistant" and chat.transcript[-1]["turn"]["status"] == "error")
    inbound(chat, {"type": "hello"})  # (answered after the send: it has been handled)
    wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))
    assert len(refusals()) == 3 and "thinking takes one of" in chat.error


def test_failing_turn_sets_the_banner_and_retry_sends_again(fresh_session):
    chat = Chat(model="demo+401")
    turn = chat.send("hi")
    assert turn.status == "error"
    assert "UpstreamError" in chat.error and "key" in chat.error
    chat.model = "demo"
    inbound(chat, {"type": "retry"})
    wait_for(lambda: chat.transcript and chat.transcript[-1].get("role") == "assistant"
             and chat.transcript[-1]["turn"]["status"] == "complete")
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"]
    assert chat.error == ""


def test_a_message_refused_before_its_turn_starts_gets_a_failed_answer_with_retry(fresh_session):
    """A thinking level (or model) set by hand that the turn refuses: the message is answered by a
    failed turn saying what to do, as any failed turn is, never left alone in the transcript."""
    from mmsp_notebook import OptionError

    chat = Chat(trace=False)
    chat.thinking = "very"  # (from Python: a pick of it is refused, see test_a_pick_the_chat_does_not_offer...)
    inbound(chat, {"type": "send", "text": "hello"})
    wait_for(lambda: len(chat.transcript) == 2)
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"] and not chat.busy
    failed = chat.transcript[1]["turn"]
    assert failed["status"] == "error" and "thinking takes one of" in failed["banner"]["text"]
    assert "then Retry" in failed["banner"]["hint"] and "thinking takes one of" in chat.error
    chat.thinking = "bogus"
    with pytest.raises(OptionError, match="thinking takes one of"):
        chat.send("hello again")  # from Python too, and it still raises
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"] * 2
    chat.thinking = "low"
    inbound(chat, {"type": "retry"})
    wait_for(lambda: chat.transcript[-1].get("turn", {}).get("status") == "complete")
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"] * 2
    assert chat.transcript[2]["text"] == "hello again" and [m["role"] for m in chat.history] == ["user", "assistant"]


def test_a_retry_when_the_last_answer_did_not_fail_changes_nothing(fresh_session):
    """A second view that has not caught up (or a stale click) may send retry after the answer is in:
    the answer stays, in the transcript and in the history, which never drift apart."""
    chat = Chat(trace=False)
    cap = Capture(chat)
    chat.send("first")
    for _ in range(2):
        inbound(chat, {"type": "retry"})
    inbound(chat, {"type": "hello"})  # (answered after the retries: the worker loop takes them in order)
    wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))
    assert not chat.busy and [e["role"] for e in chat.transcript] == ["user", "assistant"]
    assert [m["role"] for m in chat.history] == ["user", "assistant"]
    chat.new_chat()
    wait_for(lambda: chat.transcript == [])
    inbound(chat, {"type": "retry"})  # nothing to retry in a new chat
    cap.messages.clear()
    inbound(chat, {"type": "hello"})
    wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))
    assert chat.transcript == [] and chat.history == [] and not chat.busy


def test_hello_gets_a_snapshot_and_pickers_choose_the_next_turns_model(fresh_session):
    chat = Chat(models=["demo", "demo-embed"])
    cap = Capture(chat)
    chat.send("first")
    inbound(chat, {"type": "hello"})
    wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))
    snap = [m for m in cap.messages if m.get("type") == "chat_snapshot"][-1]
    assert snap["chat"]["transcript"] == chat.transcript and snap["chat"]["live"] is None
    # the pickers set the model and thinking traits
    inbound(chat, {"type": "pick", "model": "demo-embed"})
    inbound(chat, {"type": "pick", "thinking": "low"})
    wait_for(lambda: chat.model == "demo-embed" and chat.thinking == "low")
    turn = chat.send("embed this")
    assert turn.model == "demo-embed" and turn.config.get("thinking_level") == "low"
    assert turn.embeddings


def test_a_view_that_opens_mid_reply_gets_a_snapshot_the_later_ops_continue(fresh_session):
    """A second view (or a page reloaded) says hello while a reply streams: every view draws the
    snapshot, then the ops that follow it, and neither repeats nor loses a word of the reply."""
    chat = Chat(model="demo+tps=200+tokens=600", trace=False)
    cap = Capture(chat)
    inbound(chat, {"type": "send", "text": "tell me about rivers"})
    wait_for(lambda: len(cap.ops_for(1)) > 2)
    for k in range(6):
        time.sleep(0.011 * k)
        inbound(chat, {"type": "hello"})
    wait_for(lambda: not chat.busy, timeout=60)
    final = chat.transcript[1]["turn"]
    snapshots = [n for n, m in enumerate(cap.messages) if m.get("type") == "chat_snapshot" and m["chat"]["live"]]
    assert len(snapshots) >= 3
    for n in snapshots:
        after = [op for m in cap.messages[n + 1:] if m.get("type") == "ops" and m.get("turn") == 1 for op in m["ops"]]
        vm = apply_ops(json.loads(json.dumps(cap.messages[n]["chat"]["live"])), after)
        assert [i.get("text") for i in vm["items"]] == [i.get("text") for i in final["items"]]
        assert vm == final


def test_history_is_settable_and_new_chat_clears(fresh_session):
    chat = Chat()
    chat.send("remember the word kiwi")
    saved = chat.history
    other = Chat()
    other.history = saved
    assert [e["role"] for e in other.transcript] == ["user", "assistant"]
    turn = other.send("what was the word?")
    assert turn.status == "complete"
    assert len(other.history) == 4
    other.new_chat()
    wait_for(lambda: other.transcript == [])
    assert other.history == []


def test_images_from_the_front_end_and_on_event(fresh_session):
    seen = []
    chat = Chat()
    chat.on_event(seen.append)
    png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    inbound(chat, {"type": "send", "text": "what is this?",
                                                                               "images": [png]})
    wait_for(lambda: len(chat.transcript) == 2)
    assert chat.transcript[0]["images"] == [png]
    assert seen and seen[-1]["event_type"] == "stop"


def test_a_malformed_send_from_the_front_end_is_refused_in_the_banner_and_sends_nothing(fresh_session, tmp_path):
    from PIL import Image

    local = tmp_path / "secret.png"
    Image.new("RGB", (2, 2)).save(local)
    chat = Chat(trace=False)
    cap = Capture(chat)
    for bad in ({"type": "send", "text": {"a": 1}}, {"type": "send", "text": ["hi"]},
                {"type": "send", "text": "hi", "images": "data:image/png;base64,AAAA"},
                {"type": "send", "text": "hi", "images": [None]},
                {"type": "send", "text": "hi", "images": [str(local)]}):  # (no file of the kernel's is read)
        chat.error = ""
        inbound(chat, bad)
        wait_for(lambda: chat.error)
        assert chat.error.startswith("OptionError: a message from the chat takes text and images as data:image/"), bad
    inbound(chat, {"type": "hello"})
    wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))
    assert chat.transcript == [] and chat.history == [] and not chat.busy
    assert not fresh_session.turns


def test_asend_and_two_chats_at_once(fresh_session):
    a, b = Chat(model="demo+tps=400"), Chat(model="demo+tps=400")

    async def both():
        return await asyncio.gather(a.asend("one"), b.asend("two"))

    ta, tb = asyncio.run(both())
    assert ta.status == tb.status == "complete"
    assert a.history[0]["content_items"][0]["text"] == "one" and b.history[0]["content_items"][0]["text"] == "two"


@pytest.mark.serial  # counts messages against elapsed time
def test_update_rate_is_bounded(fresh_session):
    chat = Chat(model="demo+tokens=3000+tps=3000")
    cap = Capture(chat)
    started = time.monotonic()
    turn = chat.send("long answer")
    elapsed = time.monotonic() - started
    n = len([m for m in cap.messages if m.get("type") == "ops"])
    assert n <= 30 * elapsed + 2, (n, elapsed)
    text = json.dumps(chat.transcript[-1]["turn"])
    assert turn.text[-50:].replace("\n", "\\n")[:20] in text


@pytest.mark.serial  # another cell must run within 2 s
def test_kernel_stays_usable_while_a_chat_streams(kernel):
    """A real kernel: the front end's send arrives as a comm message; other cells run meanwhile."""
    kc = kernel.kc
    comm_id = kernel.printed("from mmsp_notebook import Chat\nc = Chat(model='demo+tps=40')\nprint(c.model_id)").strip()
    message = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
        "method": "custom", "content": {"type": "send", "text": "Tell me about rivers"}}})
    kc.shell_channel.send(message)
    time.sleep(1.0)
    started = time.monotonic()
    assert kernel.printed("print(1 + 1, c.busy)").strip() == "2 True"  # another cell runs while it streams
    assert time.monotonic() - started < 2.0
    deadline = time.monotonic() + 60
    while kernel.printed("print(c.busy)").strip() != "False":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    summary = kernel.printed("print([e['role'] for e in c.transcript], c.transcript[-1]['turn']['status'])")
    assert summary.strip() == "['user', 'assistant'] complete"


def test_a_bad_history_is_refused_whole_and_changes_nothing(fresh_session):
    from mmsp_notebook import OptionError
    chat = Chat()
    chat.send("remember the word kiwi")
    before, transcript = chat.history, list(chat.transcript)
    bad_values = ["hello", {"role": "user"}, [{"role": "assistant", "content_items": [{"text": "x"}]}],
                  [{"role": "robot", "content_items": []}],
                  [{"role": "assistant", "content_items": [{"type": "text.done", "text": 5}]}]]
    for bad in bad_values:
        with pytest.raises(OptionError, match="history"):
            chat.history = bad
        assert chat.history == before and chat.transcript == transcript
    # an item missing what mmsp's type says it carries is named, never sent to the model
    for item, said in (({"type": "text.done"}, r"text.done needs its 'text' \(text\), not None"),
                       ({"type": "image_url.done"}, "image_url.done needs its 'image_url'"),
                       ({"type": "tool_result.done", "text": "x"}, "tool_result.done needs its 'tool_call_id'"),
                       ({"type": "bogus.done"}, r"'bogus.done' is not a UniMessage item \(text.done, ")):
        with pytest.raises(OptionError, match=r"^history\[1\]\.content_items\[0\]: " + said):
            chat.history = [before[0], {"role": "user", "content_items": [item]}]
        assert chat.history == before and chat.transcript == transcript
    chat.history = iter(before)  # any iterable of messages, read once
    assert chat.history == before and [e["role"] for e in chat.transcript] == ["user", "assistant"]
    with pytest.raises(OptionError, match="model id"):
        Chat(model="")


def test_a_raising_on_event_callback_changes_nothing_but_is_reported_once(fresh_session, caplog):
    seen, calls = [], []
    chat = Chat(model="demo+tokens=200")

    def broken(event):
        calls.append(event)
        raise ValueError("callback bug")

    chat.on_event(broken)
    chat.on_event(seen.append)
    turn = chat.send("tell me something")
    assert turn.status == "complete" and chat.error == ""
    assert len(seen) == len(calls) == len(turn.events)  # every event reached every listener
    reports = [r for r in caplog.records if "callback bug" in r.getMessage()]
    assert len(reports) == 1 and "broken" in reports[0].getMessage()


def test_a_tool_that_exits_is_an_error_the_model_sees_and_other_chats_go_on(fresh_session):
    import sys

    def quitter(city: str) -> str:
        """Look something up, then give up."""
        sys.exit(2)

    slow = Chat(model="demo+tps=200")
    future = slow.asend("say something long")
    runner = asyncio.run_coroutine_threadsafe(future, __import__("mmsp_notebook.engine.worker", fromlist=["loop"]).loop())
    chat = Chat(tools=[quitter])
    turn = chat.send("Use quitter for Paris")
    [call] = turn.tool_calls
    assert call["error"] == "SystemExit: 2" and turn.status == "complete"
    assert runner.result(30).status == "complete"  # the other chat streaming meanwhile finished too


def test_the_chat_shows_a_saved_view_of_its_conversation_kept_current(fresh_session, monkeypatch):
    """Two outputs: the widget, then the conversation as static HTML, updated once each answer is in."""
    import IPython.display

    shown, updates = [], []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append((a, kw)))
    monkeypatch.setattr(IPython.display, "update_display", lambda obj, **kw: updates.append((obj, kw)))
    chat = Chat(tools=[get_weather])
    assert chat.models == ["demo"]  # no embedding model offered in a chat
    chat._ipython_display_()
    (widget, _), (saved, how) = [(a[0], kw) for a, kw in shown]
    assert "application/vnd.jupyter.widget-view+json" in widget and "object at 0x" not in widget["text/plain"]
    assert how["display_id"] and how["raw"] and saved["text/plain"] == "(an empty chat)"
    chat.send("What's the weather in Rome?")
    assert len(updates) == 1  # when the answer is in, not for the message alone
    bundle, how2 = updates[0]
    assert how2["display_id"] == how["display_id"]
    html = bundle["text/html"]
    assert html.count('<div class="mmsp-msg mmsp-msg-user">') == 1 and 'class="mmsp-chat-static"' not in html
    assert "mmsp-chat-static" in html and weather_in("Rome") in html and 'class="mmsp-tool-name"' in html
    assert "<style>" in html and "mmsp-footer" in html and "<script>" not in html
    assert bundle["text/plain"].startswith("user: What's the weather in Rome?\n\nassistant: ")
    chat.new_chat()
    wait_for(lambda: len(updates) == 2)
    assert updates[-1][0]["text/plain"] == "(an empty chat)"


def test_a_chat_starts_from_a_history(fresh_session):
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]},
               {"role": "assistant", "content_items": [
                   {"type": "thinking.done", "thinking": "_REDACTED_THINKING", "fidelity": {"signature": "s"}},
                   {"type": "text.done", "text": "hello"}]}]
    chat = Chat(history=history)
    assert [e["role"] for e in chat.transcript] == ["user", "assistant"]
    thinking = chat.transcript[1]["turn"]["items"][0]
    assert thinking["label"] == "redacted thinking (1 block, kept for the next turn)" and thinking["text"] == ""
    with pytest.raises(MMSPNotebookError):
        Chat(history=[{"role": "tool"}])


def test_a_history_with_tool_calls_shows_each_turn_as_it_streamed_with_no_made_up_timing(fresh_session):
    """A tool-using turn is one answer whose call shows its result, as in the chat that streamed it;
    the history holds no timing, so its turns show none (no "TTFT 0 ms", no absurd tokens/s)."""
    chat = Chat(tools=[get_weather])
    chat.send("What's the weather in Madrid?")
    chat.send("What's the weather in Rome?")
    other = Chat(history=chat.history)
    assert [e["role"] for e in other.transcript] == [e["role"] for e in chat.transcript] == ["user", "assistant"] * 2
    for streamed, restored in zip(chat.transcript[1::2], other.transcript[1::2]):
        calls = [i for i in restored["turn"]["items"] if i["kind"] == "tool_call"]
        assert [c["state"] for c in calls] == ["done"] and calls[0]["result"]["state"] == "ok"
        assert [c["result"]["text"] for c in calls] == [
            i["result"]["text"] for i in streamed["turn"]["items"] if i["kind"] == "tool_call"]
        assert [i["kind"] for i in restored["turn"]["items"]] == [i["kind"] for i in streamed["turn"]["items"]]
        footer = restored["turn"]["footer"]
        assert footer["steps"] == 2 and footer["ttft"] is None and footer["tokens_per_second"] is None
        assert [s[0] for s in footer["stats"]] == ["tokens", "finish", "cost", "steps"]
    assert weather_in("Rome") in json.dumps(other.transcript[3])


@pytest.mark.serial  # heartbeat gaps against HEARTBEAT
def test_a_reply_with_nothing_to_show_sends_heartbeats_from_the_worker_thread(fresh_session):
    """While its tool works for 5 s the reply has nothing new to draw: the front end (which cuts a
    reply after 10 s without a word, js/src/chat.js) still hears from the kernel every ~2 s, from
    the worker thread, which a cell running on the shell thread does not hold up."""
    import threading

    from mmsp_notebook.front.chat import HEARTBEAT

    async def ponder(topic: str) -> str:
        """Think a topic over, for a while."""
        await asyncio.sleep(5)
        return f"{topic}: pondered"

    chat = Chat(tools=[ponder], trace=False)
    sent: list[tuple[float, str, str]] = []
    original = chat.comm.send

    def send(data=None, metadata=None, buffers=None):
        if isinstance(data, dict) and data.get("method") == "custom":
            sent.append((time.monotonic(), data["content"]["type"], threading.current_thread().name))
        return original(data=data, metadata=metadata, buffers=buffers)

    chat.comm.send = send
    turn = chat.send("Use ponder on lighthouses")
    assert turn.status == "complete" and turn.tool_calls[0]["name"] == "ponder"
    beats = [m for m in sent if m[1] == "heartbeat"]
    assert len(beats) >= 2, sent
    assert {thread for _, _, thread in beats} == {"mmsp-notebook-worker"}
    # from the first message to the last, never silent much longer than a heartbeat
    gaps = [b[0] - a[0] for a, b in zip(sent, sent[1:])]
    assert max(gaps) < HEARTBEAT + 1.0, gaps
    conversation = sum(1 for m in sent if m[1] in ("ops", "transcript"))
    assert chat.message_count == conversation  # heartbeats are not counted with the conversation's messages
    # none once the reply has ended
    count = len(sent)
    time.sleep(HEARTBEAT + 0.5)
    assert len(sent) == count


def test_a_trace_id_given_to_the_chat_names_its_trace_and_a_bad_one_is_refused(fresh_session, tmp_path):
    import os
    from pathlib import Path

    from mmsp_notebook import OptionError, OptionTypeError, traces

    cache = Path(os.environ["MMSP_CACHE_DIR"])
    chat = Chat(trace="nb/x")
    first = chat.send("hello")
    second = chat.send("and again")
    assert first.trace_id == second.trace_id == "nb/x"
    assert (cache / "nb" / "x.json").is_file() and (cache / "nb" / "x.timing.jsonl").is_file()
    turns = traces.load_turns(cache)
    assert turns["trace_id"].tolist() == ["nb/x", "nb/x"] and turns["turn"].tolist() == [0, 1]
    # the default: the conversation's own trace id; False: none
    assert Chat(name="mine").send("hi").trace_id == "tests/mine"
    assert Chat(trace=False).send("hi").trace_id is None
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    for bad, said in (("../x", "use parts of letters"), ("/abs", "use parts of letters"), ("", "no empty part"),
                      ("nb/x.1", "no dot in its last part"), ("a/" + "b" * 250, "too long for a file name")):
        with pytest.raises(OptionError, match=said):
            Chat(trace=bad)
    with pytest.raises(OptionTypeError, match="trace takes True, False or a trace id"):
        Chat(trace=1)
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before  # nothing made, nothing traced


def test_a_chat_takes_the_kernels_defaults_and_an_option_given_wins(fresh_session, monkeypatch):
    """Chat() takes every default ask() and the magic take (%mmsp config, the environment...): its
    pickers start at the kernel's model and thinking level, the other options are the kernel's at
    each turn; an option given to the chat wins over each."""
    from mmsp_notebook import ask
    from mmsp_notebook.engine.options import Settings

    settings = fresh_session.settings
    settings.update({"model": "demo+nothink", "thinking": "low", "system": "Be brief", "max_tokens": "20",
                     "temperature": "0.5", "trace": "false"})
    chat = Chat()
    assert (chat.model, chat.thinking) == ("demo+nothink", "low") and chat.models == ["demo+nothink", "demo"]
    turn = chat.send("hi")
    asked = ask("hi", stream=io.StringIO())
    assert (turn.model, turn.config, turn.trace_id) == (asked.model, asked.config, asked.trace_id)
    assert turn.model == "demo+nothink" and turn.trace_id is None and turn.usage["response_tokens"] == 20
    assert turn.config == {"system_prompt": "Be brief", "thinking_level": "low", "max_tokens": 20, "temperature": 0.5}
    # an option given wins over the kernel's (trace=True too, over trace=false)
    chat = Chat("demo", thinking="high", system="Be long", max_tokens=30, temperature=0.0, trace=True)
    assert (chat.model, chat.thinking) == ("demo", "high")
    turn = chat.send("hi")
    assert turn.model == "demo" and turn.trace_id == f"tests/{chat.name}"
    assert turn.config == {"system_prompt": "Be long", "thinking_level": "high", "max_tokens": 30, "temperature": 0.0,
                           "trace_id": turn.trace_id}
    # a default model that is an alias: the picker names it, the turn takes the alias's options
    settings.add_alias("brief", "demo+tps=900 --thinking medium --max-tokens 12")
    settings.update({"model": "brief"})
    chat = Chat()
    assert (chat.model, chat.thinking) == ("brief", "medium")
    turn = chat.send("hi")
    assert turn.model == "demo+tps=900" and turn.config["max_tokens"] == 12 and turn.config["thinking_level"] == "medium"
    # the environment's model, when nothing else sets one (a new kernel's settings)
    monkeypatch.setenv("MMSP_NOTEBOOK_MODEL", "demo+tps=700")
    fresh_session.settings = Settings(demo_instant=True)
    chat = Chat()
    assert (chat.model, chat.thinking) == ("demo+tps=700", "")
    assert chat.send("hi").model == "demo+tps=700"
    with pytest.raises(MMSPNotebookError, match="Chat needs a model id"):
        Chat("  ")


def test_the_chats_tools_are_checked_as_it_is_made_and_may_be_named_by_a_dict(fresh_session):
    from mmsp_notebook import OptionError

    for bad in (get_weather, "get_weather", [5]):  # refused here, not at the first message
        with pytest.raises(OptionError, match="tools takes a list of functions|5 is not callable"):
            Chat(tools=bad)
    turn = Chat(tools={"get_weather": lambda city: f"sunny in {city}"}).send("weather in Paris please")
    assert turn.tool_calls[0]["name"] == "get_weather" and turn.tool_calls[0]["output"] == "sunny in Paris"


@pytest.mark.serial  # the watchdog's 2 s, the 3 s timeout, took < 10 s
def test_send_returns_when_an_async_tool_blocks_the_loop_past_the_timeout(fresh_session):
    import threading

    from mmsp_notebook import LoopBlockedError

    release = threading.Event()

    async def slow_lookup(city: str) -> str:
        """Look up a city, blocking."""
        deadline = time.monotonic() + 30
        while not release.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)  # no await: the worker loop stops turning
        return f"found {city}"

    chat = Chat(tools=[slow_lookup], timeout=3, trace=False)
    began = time.monotonic()
    try:
        turn = chat.send("Look up Paris with slow_lookup")
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 10
    assert turn.status == "error" and isinstance(turn.error, LoopBlockedError) and turn.error.stall.tool == "slow_lookup"
    assert turn.tool_calls[0]["name"] == "slow_lookup"  # what arrived is kept
    deadline = time.monotonic() + 10
    while chat.busy and time.monotonic() < deadline:  # the transcript catches up once the loop turns
        time.sleep(0.05)
    assert not chat.busy and "LoopBlockedError" in json.dumps(chat.transcript[-1])
    assert chat.send("hello").status == "complete"


@pytest.mark.serial  # the interrupt must end the turn within 2 s
def test_an_interrupt_ends_a_chat_turn_whose_async_tool_blocks_the_loop(kernel, tmp_path):
    from test_magic import BLOCKING_TOOL

    kernel.execute("import os\nos.environ['MMSP_NOTEBOOK_DEMO_INSTANT'] = '1'\nfrom mmsp_notebook import Chat\n"
                   + BLOCKING_TOOL + "\nchat = Chat(tools=[slow_lookup])")
    # interrupted once the worker's watchdog has seen the tool hold the loop (it logs it once)
    reply, took = kernel.interrupted("t = chat.send('Look up Paris with slow_lookup')",
                                     until="the worker event loop has not turned", any_output=True, after=0.3)
    # the interrupt goes on up once the turn is kept: the cell fails, the turn is the interrupt's
    assert took < 2.0 and reply["content"]["status"] == "error" and reply["content"]["ename"] == "Interrupted"
    said = kernel.printed("import sys\nt = sys.last_value.turn\nprint(t.status, type(t.error).__name__, t.error.stall.tool)")
    assert said.split() == ["cancelled", "LoopBlockedError", "slow_lookup"], said
    kernel.execute("release.set()\nimport time\nwhile chat.busy: time.sleep(0.05)")  # the loop winds the turn down
    assert kernel.printed("print(chat.send('hello').status)").strip() == "complete"


@pytest.mark.serial  # the watchdog's 2 s, the 3 s timeout, took < 8 s
def test_asend_ends_a_turn_whose_async_tool_blocks_the_loop_at_its_timeout(fresh_session):
    """As ``aask`` (tests/test_ask.py): the watch on the worker loop ends the turn, not the tool."""
    import threading

    from test_ask import blocking_tool

    from mmsp_notebook import LoopBlockedError

    release = threading.Event()
    chat = Chat(tools=[blocking_tool(release)], timeout=3, trace=False)
    began = time.monotonic()
    try:
        turn = asyncio.run(chat.asend("Look up Paris with slow_lookup"))
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 8, f"asend waited {took:.1f} s for a blocked loop"
    assert turn.status == "error" and isinstance(turn.error, LoopBlockedError) and not turn.error.interrupted
    assert turn.error.stall.tool == "slow_lookup" and "after 3 s" in str(turn.error)
    assert turn.tool_calls and turn.tool_calls[0]["name"] == "slow_lookup" and turn.thinking  # what arrived is kept
    assert turn.loop_blocked is None
    wait_for(lambda: not chat.busy)  # the transcript catches up once the loop turns again
    assert chat.transcript[-1]["turn"]["status"] == "error" and "LoopBlockedError" in json.dumps(chat.transcript[-1])
    again = asyncio.run(chat.asend("hello"))
    assert again.status == "complete" and [e["role"] for e in chat.transcript] == ["user", "assistant"] * 2


@pytest.mark.serial  # the cancel must end the turn within 1 s
def test_cancelling_asend_while_the_loop_is_blocked_ends_the_turn_at_once(fresh_session):
    import threading

    from test_ask import assert_cancelled_while_blocked, blocking_tool, cancel_while_blocked

    release = threading.Event()
    chat = Chat(tools=[blocking_tool(release)], timeout=60, trace=False)
    took = cancel_while_blocked(lambda: chat.asend("Look up Paris with slow_lookup"), release)
    assert took < 1.0
    assert_cancelled_while_blocked(fresh_session.turns[-1])
    wait_for(lambda: not chat.busy)  # the chat's view of the turn ends once the loop turns again
    assert chat.transcript[-1]["turn"]["status"] == "cancelled"
    assert asyncio.run(chat.asend("hello")).status == "complete"


@pytest.mark.serial  # a turn's bytes grow with the repaints its time allows
def test_a_turn_costs_the_same_bytes_early_and_late_in_a_long_chat(fresh_session):
    """Once a view has said hello, the transcript goes to the front end as its changes (a turn's own
    two entries), never whole: the 21st turn of a long chat sends what the 2nd of a short one does."""
    from jupyter_client.session import json_packer

    def turn_bytes(chat, n):
        sizes, original = [], chat.comm.send

        def send(data=None, metadata=None, buffers=None):
            sizes.append(len(json_packer(data)))
            return original(data=data, metadata=metadata, buffers=buffers)

        chat.comm.send = send
        try:
            assert chat.send(f"Question {n}: tell me about topic {n}").status == "complete"
        finally:
            chat.comm.send = original
        return sum(sizes)

    def hello(chat):
        cap = Capture(chat)
        inbound(chat, {"type": "hello"})
        wait_for(lambda: any(m.get("type") == "chat_snapshot" for m in cap.messages))

    short, long = Chat(trace=False), Chat(trace=False)
    hello(short)
    short.send("Question 0: tell me about topic 0")
    second = turn_bytes(short, 1)
    states, changes = [], []
    original = long.comm.send

    def record(data=None, metadata=None, buffers=None):
        if data.get("method") in ("update", "echo_update"):
            states.append(data["state"])
        elif data.get("method") == "custom" and data["content"].get("type") == "transcript":
            changes.append(data["content"])
        return original(data=data, metadata=metadata, buffers=buffers)

    long.comm.send = record
    # before any view listens (its messages would be dropped), the transcript goes as state
    long.send("Question 0: tell me about topic 0")
    assert [len(s["transcript"]) for s in states if "transcript" in s] == [1, 2] and changes == []
    states.clear()
    hello(long)
    for n in range(1, 20):
        long.send(f"Question {n}: tell me about topic {n}")
    whole = len(json.dumps(long.transcript))
    twenty_first = turn_bytes(long, 20)
    assert twenty_first < 1.5 * second, (twenty_first, second, whole)
    assert twenty_first < whole / 4  # (the transcript alone is ten times the turn)
    # then no state update carried the transcript; its changes rebuild it, as the front end's model does
    assert states and not any("transcript" in state for state in states)
    rebuilt = long.transcript[:2]  # (what the view's hello got)
    for change in changes:
        rebuilt = rebuilt[: change["at"]] + change["entries"]
    assert rebuilt == long.transcript and len(changes) == 40  # (two a turn)
    # a front end that opens the widget (or reloads the page) gets it whole, from the widget's state
    assert long.get_state()["transcript"] == long.transcript and len(long.transcript) == 42
    # and a copy coming back from a front end never replaces it
    long.set_state({"transcript": [], "thinking": "low"})
    assert len(long.transcript) == 42 and long.thinking == "low"


def test_a_mistyped_option_is_refused_naming_chat_not_passed_to_the_widget(fresh_session):
    with pytest.raises(TypeError, match=r"^Chat\(\) got an unexpected keyword argument 'sytem' \(did you mean "
                                        r"'system'\?\); it takes model, tools, system, .*and the widget's traits"):
        Chat(sytem="Be brief")
    chat = Chat(layout={"width": "300px"})  # the widget's own traits are still taken
    assert chat.layout.width == "300px"


class States:
    """The state updates the kernel sends the front end (``update`` and ``echo_update``)."""

    def __init__(self, chat):
        self.sent = []
        original = chat.comm.send

        def send(data=None, metadata=None, buffers=None):
            if isinstance(data, dict) and data.get("method") in ("update", "echo_update"):
                self.sent.append((data["method"], data["state"]))
            return original(data=data, metadata=metadata, buffers=buffers)

        chat.comm.send = send

    def updates(self):
        return {key: value for method, state in self.sent if method == "update" for key, value in state.items()}


def test_a_front_end_sets_only_the_pickers_and_gets_the_kernels_state_back(fresh_session):
    """A front end (or a hostile saved widget state) sends the whole state: only the pickers' traits
    are taken; the kernel's traits keep their values, which go back so the front end shows them."""
    chat = Chat(trace=False)
    chat.send("hello")
    kernels = {name: chat.get_state()[name] for name in ("transcript", "busy", "error", "models", "thinking_levels",
                                                         "_esm", "_css")}
    states = States(chat)
    chat.set_state({"busy": True, "error": "<img src=x onerror=alert(1)>", "models": ["evil"],
                    "thinking_levels": ["x"], "transcript": [], "_esm": "alert(1)", "_css": "* {display: none}",
                    "model": "demo", "thinking": "low"})
    assert chat.thinking == "low" and chat.model == "demo"
    assert {name: chat.get_state()[name] for name in kernels} == kernels
    # the kernel's values went back, in one update; the pickers' values were echoed, not overridden
    assert states.updates() == kernels
    assert [method for method, _ in states.sent] == ["echo_update", "update"]
    assert set(states.sent[0][1]) == {"model", "thinking"}
    # and the chat goes on with them
    inbound(chat, {"type": "send", "text": "again"})
    wait_for(lambda: len(chat.transcript) == 4 and not chat.busy)
    assert chat.transcript[-1]["turn"]["status"] == "complete" and chat.error == ""


def test_a_pick_the_chat_does_not_offer_is_refused_in_the_error_line(fresh_session):
    chat = Chat(models=["demo", "demo+nothink"], trace=False)
    states = States(chat)
    # in the state, as a front end that saved it sends it
    chat.set_state({"model": "gpt-evil", "thinking": "very"})
    assert (chat.model, chat.thinking) == ("demo", "")
    assert states.updates() == {"model": "demo", "thinking": "", "error": chat.error}
    assert chat.error.startswith("thinking level 'very' is not one this chat offers (the model's default, 'none', "
                                 "'low', ") and chat.error.endswith("pick one of them: the chat keeps the model's default")
    # (the last refused is said; each names the choices and what the chat keeps)
    chat.set_state({"model": "gpt-evil"})
    assert chat.error == ("model 'gpt-evil' is not one this chat offers ('demo', 'demo+nothink'); pick one of them, "
                          "or offer it with Chat(models=[...]): the chat keeps 'demo'")
    # a good pick is taken and clears the refusal
    chat.set_state({"model": "demo+nothink"})
    assert chat.model == "demo+nothink" and chat.error == ""
    # in a pick message, as the pickers send it: refused alike, and the front end is told the kernel's value
    states.sent.clear()
    inbound(chat, {"type": "pick", "model": ["demo"]})
    wait_for(lambda: chat.error)
    assert chat.model == "demo+nothink" and "model ['demo'] is not one this chat offers" in chat.error
    assert states.updates()["model"] == "demo+nothink"
    inbound(chat, {"type": "pick", "thinking": "x" * 10_000})
    wait_for(lambda: "thinking level" in chat.error)
    assert chat.thinking == "" and len(chat.error) < 300  # (a value of any size is cut in the message)
    inbound(chat, {"type": "pick", "thinking": "low"})
    wait_for(lambda: chat.thinking == "low")
    assert chat.error == ""
    turn = chat.send("hello")
    assert turn.status == "complete" and turn.model == "demo+nothink"
    # the kernel's own Python is not a front end: it sets what it likes (and the turn says if it is wrong)
    chat.model = "demo-embed"
    assert chat.model == "demo-embed" and chat.error == ""


def test_models_given_as_one_string_and_a_wire_flag_that_is_no_bool_are_refused_when_the_chat_is_made(fresh_session):
    """Chat(models="demo") offered 'd', 'e', 'm', 'o' in the picker; Chat(wire="false") captured every turn."""
    from mmsp_notebook import OptionTypeError

    with pytest.raises(OptionTypeError, match=r"^models takes a list of model ids .*not 'demo'"):
        Chat(models="demo")
    with pytest.raises(OptionTypeError, match=r"^models takes a list of model ids .*not \['demo', 3\]"):
        Chat(models=["demo", 3])
    with pytest.raises(OptionTypeError, match=r"^wire takes True or False, not str 'false'"):
        Chat(wire="false")
    assert Chat(models=("demo", "demo+nothink"), trace=False).models == ["demo", "demo+nothink"]
    assert Chat(models=iter(["demo+nothink"]), trace=False).models == ["demo", "demo+nothink"]
    assert fresh_session.turns == []


def _interrupt_asend(chat, text, when):
    """Await ``chat.asend(text)`` and cancel the await, as the kernel does on an interrupt, once
    ``when(task)`` (run on the kernel's loop, which it may hold) returns; the await must end cancelled."""

    async def main():
        task = asyncio.ensure_future(chat.asend(text))
        await when(task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def _assert_cancelled_with_the_chat_free(fresh_session, chat):
    wait_for(lambda: not chat.busy and len(chat.transcript) == 2)  # (the start may be finishing as the caller ends)
    [entry] = [e for e in chat.transcript if e["role"] == "assistant"]
    assert entry["turn"]["status"] == "cancelled" and entry["turn"]["banner"]  # kept, and marked
    assert fresh_session.turns[-1].status == "cancelled"
    again = asyncio.run(chat.asend("hello"))  # the chat takes the next turn
    assert again.status == "complete" and [e["role"] for e in chat.transcript] == ["user", "assistant"] * 2


@pytest.mark.serial  # the interrupt must land while the turn streams
def test_an_interrupt_of_send_mid_reply_keeps_the_turn_then_goes_on_up(fresh_session):
    """As ``ask``: the turn is stopped and kept (drawn in the chat, marked cancelled), then the
    KeyboardInterrupt goes on up with it, so a loop of ``send`` stops."""
    from test_api import interrupt_main_once

    chat = Chat(model="demo+tps=20", trace=False)
    interrupt_main_once(lambda: chat._run is not None and bool(chat._run.turn.thinking), after=0.3)
    with pytest.raises(KeyboardInterrupt) as info:
        chat.send("Tell me about lighthouses")
    assert info.value.turn.status == "cancelled" and info.value.turn.thinking
    assert fresh_session.last_turn is info.value.turn
    _assert_cancelled_with_the_chat_free(fresh_session, chat)


def test_an_interrupt_of_asend_mid_reply_cancels_the_turn_and_keeps_what_arrived(fresh_session):
    chat = Chat(model="demo+tps=40", trace=False)
    cap = Capture(chat)

    async def streaming(task):
        while not [op for m in cap.messages if m.get("type") == "ops" for op in m["ops"]][3:]:
            await asyncio.sleep(0.02)

    _interrupt_asend(chat, "Tell me about lighthouses", streaming)
    _assert_cancelled_with_the_chat_free(fresh_session, chat)
    assert fresh_session.turns[0].status == "cancelled" and fresh_session.turns[0].thinking  # what arrived is kept


def test_an_interrupt_of_asend_while_its_turn_starts_stops_the_turn_started(fresh_session, monkeypatch):
    """The interrupt comes as the worker launches the turn, before asend has it: the turn launched
    is stopped on the worker loop all the same (it streamed on, unseen, to its end)."""
    import threading

    from mmsp_notebook.front import chat as chat_module

    launched = threading.Event()
    real_launch = chat_module.launch

    def launch(*args, **kwargs):
        started = real_launch(*args, **kwargs)
        launched.set()
        return started

    monkeypatch.setattr(chat_module, "launch", launch)
    chat = Chat(model="demo+tps=40", trace=False)

    async def launching(task):
        await asyncio.sleep(0)  # (asend hands the start to the worker)
        assert launched.wait(10)  # the kernel's loop held as the turn is launched: the start's result waits

    _interrupt_asend(chat, "Tell me about lighthouses", launching)
    _assert_cancelled_with_the_chat_free(fresh_session, chat)


def test_an_interrupt_of_asend_before_its_start_ran_sends_nothing(fresh_session):
    from mmsp_notebook.engine import worker

    chat = Chat(model="demo+tps=40", trace=False)
    release = asyncio.run(_hold_worker())

    async def queued(task):
        await asyncio.sleep(0.05)  # (asend handed the start to the held worker loop)

    try:
        _interrupt_asend(chat, "never sent", queued)
    finally:
        release.set()
    worker.run_sync(asyncio.sleep(0), timeout=10)  # the worker loop ran what was queued
    assert chat.transcript == [] and fresh_session.turns == [] and not chat.busy
    assert asyncio.run(chat.asend("hello")).status == "complete"


async def _hold_worker():
    """Hold the worker loop (a blocking callback on it) until the event returned is set."""
    import threading

    from mmsp_notebook.engine import worker

    release, held = threading.Event(), threading.Event()

    def hold():
        held.set()
        release.wait(30)

    worker.loop().call_soon_threadsafe(hold)
    assert held.wait(10)
    return release


@pytest.mark.parametrize("door", ["send", "asend"])
def test_an_interrupt_as_the_start_is_submitted_stops_the_turn(fresh_session, monkeypatch, door):
    """The interrupt lands just after the start went to the worker loop, before it is awaited."""
    from mmsp_notebook.front import chat as chat_module

    real_submit = chat_module._worker.submit

    def submit(coro):
        monkeypatch.setattr(chat_module._worker, "submit", real_submit)  # (once: the start itself submits too)
        started = real_submit(coro)
        wait_for(lambda: chat.busy or started.done())  # the worker launched the turn before this thread went on
        raise KeyboardInterrupt

    chat = Chat(model="demo+tps=40", trace=False)
    monkeypatch.setattr(chat_module._worker, "submit", submit)
    with pytest.raises(KeyboardInterrupt):
        chat.send("Tell me about lighthouses") if door == "send" else asyncio.run(chat.asend("Tell me about lighthouses"))
    _assert_cancelled_with_the_chat_free(fresh_session, chat)


def test_an_interrupt_of_send_while_its_turn_starts_stops_the_turn_started(fresh_session, monkeypatch):
    """As for asend: the KeyboardInterrupt comes as the worker launches the turn, before send has it."""
    import signal
    import threading

    from mmsp_notebook.front import chat as chat_module

    real_launch = chat_module.launch
    main = threading.main_thread().ident
    assert main is not None and signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def launch(*args, **kwargs):
        started = real_launch(*args, **kwargs)
        signal.pthread_kill(main, signal.SIGINT)  # (the kernel's interrupt, while send waits for the start)
        time.sleep(0.3)
        return started

    monkeypatch.setattr(chat_module, "launch", launch)
    chat = Chat(model="demo+tps=40", trace=False)
    with pytest.raises(KeyboardInterrupt):
        chat.send("Tell me about lighthouses")
    monkeypatch.setattr(chat_module, "launch", real_launch)
    _assert_cancelled_with_the_chat_free(fresh_session, chat)


@pytest.mark.parametrize(("url", "why"), [
    ("data:image/png;base64,!!!not-base64!!!", r"holds damaged base64"),
    ("data:image/png;base64,iVBORw0KGgoAAAANSU", r"holds damaged base64"),  # cut inside a 4-character group
    ("data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+", r"are not PNG, JPEG, GIF or WebP data"),
    ("data:image/png;base64,", r"the 0 bytes of the data URL"),
    ("data:image/png,rawbytes", r"is not base64"),
    ("data:text/plain;base64,aGk=", r"a data URL of type text/plain, not an image"),
    ("data:image/", r"is not a data URL"),
])
def test_a_pasted_image_that_is_no_image_is_refused_and_kept_out_of_the_history(fresh_session, url, why):
    """Such a URL went into the history as it was: the demo answered, a provider refused every later turn."""
    chat = Chat(trace=False, model="demo+tps=5000")
    with pytest.raises(OptionError, match=r"^not an image: .*" + why):
        chat.send("what is this?", images=[url])
    assert chat.history == [] and chat.transcript == [] and not fresh_session.turns


def test_a_pasted_image_of_another_type_is_sent_as_it_is_labelled(fresh_session):
    import base64

    heic = base64.b64encode(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64)).decode()
    chat = Chat(trace=False, model="demo+tps=5000")
    assert chat.send("what is this?", images=[f"data:image/heic;base64,{heic}"]).status == "complete"
    assert chat.history[0]["content_items"][1]["image_url"] == f"data:image/heic;base64,{heic}"
    svg = base64.b64encode(b"  <svg xmlns='http://www.w3.org/2000/svg'/>").decode()
    with pytest.raises(OptionError, match="are not PNG, JPEG, GIF or WebP data"):  # markup, whatever its label
        chat.send("and this?", images=[f"data:image/png;base64,{svg}"])


def test_a_pasted_image_is_labelled_with_the_type_its_bytes_are(fresh_session):
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2)).save(buf, format="JPEG")
    payload = base64.b64encode(buf.getvalue()).decode()
    chat = Chat(trace=False, model="demo+tps=5000")
    turn = chat.send("what is this?", images=[f"DATA:image/png;base64,{payload[:20]}\n{payload[20:]}"])
    assert turn.status == "complete"
    assert chat.history[0]["content_items"][1]["image_url"] == f"data:image/jpeg;base64,{payload}"
