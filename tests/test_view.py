"""The view model and the ops that keep a front end up to date, on real demo streams."""

from __future__ import annotations

import contextlib
import json
import re
import time

import pytest
from helpers import apply_ops

from mmsp_notebook.engine.launch import launch
from mmsp_notebook.views.model import OpsTracker, present_item, view_model


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
    batches.append(tracker.ops(turn, final=True))
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
    # the ops alone give the whole view model, id and model included: a view fed with them covers
    # the finished turn (the chat keeps its live view rather than drawing the turn again)
    vm = apply_ops({"items": []}, [op for b in batches for op in b])
    assert vm == view_model(turn)
    json.dumps(vm)  # JSON-serialisable for the comm


def test_text_crosses_once_not_per_update(fresh_session):
    turn, batches = run_with_tracker("Tell me a long story", model="demo+tokens=2000")
    appended = sum(len(op[2]) for b in batches for op in b if op[0] == "append")
    total_text = sum(len(item.content()) for item in turn.items if item.kind in ("text", "thinking", "tool_call"))
    assert appended == total_text
    assert len(batches) > 100  # many updates, each carrying only its delta


def test_events_table_rows(fresh_session):
    turn, batches = run_with_tracker("hi", events=True, every=5)
    events = [op for b in batches for op in b if op[0] == "event"]
    rows = [op[1] for op in events]
    assert [r["n"] for r in rows] == [str(n) for n in range(len(turn.events))]
    assert all(isinstance(v, str) for r in rows for v in r.values())  # cells as shown
    assert rows[-1]["event_type"] == "stop" and "finish_reason" in rows[-1]["preview"]
    assert rows[0]["type"] == "thinking.delta" and re.fullmatch(r"\d+\.\d", rows[0]["ms"])
    # the count beside the table's title comes with the last row of each batch
    counted = [b for b in batches if any(op[0] == "event" for op in b)]
    assert len(counted) > 2
    for batch in counted:
        last = [op for op in batch if op[0] == "event"]
        assert all(len(op) == 2 for op in last[:-1]) and last[-1][2] == f"({int(last[-1][1]['n']) + 1:,})"


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
    output = shown["result"]["text"]
    assert len(output) < TOOL_OUTPUT_LIMIT + 200 and output.endswith("(turn.tool_calls has them all)")
    assert f"{TOOL_OUTPUT_LIMIT * 4:,} more characters not shown" in output


def test_a_huge_error_from_the_server_is_shown_cut_and_kept_whole(fresh_session):
    from helpers import serve_posts

    from mmsp_notebook.views.html import render_html
    from mmsp_notebook.views.model import ERROR_LIMIT
    from mmsp_notebook.views.text import render_text

    said = "the request is refused: " + "this is why. " * 100_000  # 1.3 MB, in the provider's error shape

    def refuse(handler):
        handler.rfile.read(int(handler.headers.get("content-length") or 0))
        body = json.dumps({"error": {"message": said, "type": "invalid_request_error"}}).encode()
        handler.send_response(400)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with contextlib.contextmanager(serve_posts)(refuse) as url:
        run, future = launch("hi", model="any", client_type="mmsp", base_url=url)
        turn = future.result(30)
    assert turn.status == "error" and said in turn.error_message  # the Turn keeps it whole
    banner = view_model(turn)["banner"]
    assert len(banner["text"]) < ERROR_LIMIT + 200 and banner["text"].endswith("(the error itself has them all)")
    assert len(render_text(turn)) < ERROR_LIMIT + 1000 and len(render_html(turn)) < 100_000


def test_a_tool_without_a_usable_name_is_refused_clearly():
    from mmsp_notebook._errors import OptionError
    from mmsp_notebook.engine.tools import ToolSet

    with pytest.raises(OptionError, match="tools=\\{'name': func\\}"):
        ToolSet([lambda city: city])
    assert list(ToolSet({"lookup": lambda city: city}).funcs) == ["lookup"]


# ---------------------------------------------------------------------------------------------- what the model decides
def _item(vm, kind, n=0):
    return [it for it in vm["items"] if it["kind"] == kind][n]


def test_a_tool_card_is_worded_by_the_model_from_call_to_result(fresh_session):
    def broken(city: str) -> str:
        """Always fails."""
        raise RuntimeError(f"service down for {city}")

    turn, batches = run_with_tracker("What's the weather in Paris?", model="demo+tps=500", tools=[get_weather])
    card = _item(view_model(turn), "tool_call")
    assert (card["tag"], card["state"], card["state_text"], card["title"]) == \
        ("tool call", "done", "returned", f"id {card['tool_call_id']}")
    assert card["args"] == '{\n  "city": "Paris"\n}'
    result = card["result"]
    assert (result["state"], result["label"], result["text"]) == ("ok", "result", "sunny in Paris")
    assert result["took"].endswith((" ms", " s")) and result["took"][0].isdigit()
    # the live view saw the card go through its states, each sent once (never "not run": the turn
    # is shown streaming from the end of its first step until its tools ran and the next step ends)
    # and "queued", not "running…", from the end of the call until its tool starts (after the step)
    states = [op[2]["state"] for b in batches for op in b if op[0] in ("item", "set") and "state" in op[2]]
    assert states[0] == "streaming" and states[-1] == "done" and states[1] == "queued", states
    assert set(states) <= {"streaming", "queued", "running", "done"} and len(states) == len(set(states)), states

    turn, _ = run_with_tracker("please call broken for Oslo", tools=[broken])
    card = _item(view_model(turn), "tool_call")
    assert (card["state"], card["state_text"], card["result"]["state"], card["result"]["label"]) == \
        ("raised", "raised", "err", "error")
    assert card["result"]["text"] == "RuntimeError: service down for Oslo"

    turn, _ = run_with_tracker("What's the weather in Paris?", tools=[get_weather], max_steps=1)
    vm = view_model(turn)
    card = _item(vm, "tool_call")
    assert (card["state"], card["state_text"], card["result"]) == ("not_run", "not run", None)
    assert vm["banner"] == {"kind": "muted", "text": "stopped after --max-steps with tool calls still pending"}

    turn, _ = run_with_tracker("What's the weather in Paris?", model="demo+cut-args", tools=[get_weather])
    card = _item(view_model(turn), "tool_call")
    assert turn.status == "incomplete" and (card["state"], card["state_text"], card["args"]) == ("stopped", "stopped", None)


def test_labels_that_depend_on_the_turn_follow_it_in_the_ops(fresh_session):
    """A thinking block still streaming when the turn is stopped is re-labelled by a set op."""
    run, future = launch("hello", model="demo+stall")
    tracker = OpsTracker()
    deadline = time.monotonic() + 10
    while not run.turn.items and time.monotonic() < deadline:
        time.sleep(0.01)
    first = tracker.ops(run.turn)
    [opened] = [op for op in first if op[0] == "item"]
    assert opened[2]["label"] == "Thinking…" and opened[2]["tag"] == "thinking"
    assert [op for op in first if op[0] == "turn"][0][1]["banner"] == {"kind": "streaming", "text": "streaming…"}
    run.abort("stopped by the test")
    turn = future.result(timeout=10)
    last = tracker.ops(turn, final=True)
    assert turn.status == "cancelled"
    assert ["set", 0, {"label": "Thinking (stopped)"}] in last
    assert last[-1][0] == "turn" and last[-1][1]["banner"]["kind"] == "muted"
    assert tracker.ops(turn, final=True) == []  # nothing changed, nothing sent


def test_an_error_with_no_message_is_named_once_and_said_to_have_none():
    import httpx

    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.views.text import render_text

    turn = Turn({"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}, model="demo")
    turn.fail_before_stream(httpx.ReadError(""))  # (a transport error raised with no message)
    banner = view_model(turn)["banner"]
    assert banner["lead"] == "ReadError: " and banner["text"] == "it came with no message"  # was "ReadError: ReadError"
    assert "ReadError: it came with no message" in render_text(turn)
    turn = Turn({"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}, model="demo")
    turn.fail_before_stream(httpx.ReadError("peer closed the connection"))
    assert view_model(turn)["banner"]["text"] == "peer closed the connection"


def test_the_banner_and_footer_are_ready_made_strings(fresh_session):
    turn, _ = run_with_tracker("hi", model="demo+401")
    vm = view_model(turn)
    assert vm["status"] == "error" and vm["banner"]["kind"] == "error"
    assert vm["banner"]["lead"] == "UpstreamError: " and vm["banner"]["text"] == turn.error_message
    assert vm["banner"]["hint"].startswith("The server refused the key")
    assert "error" not in vm and "status_text" not in vm  # the banner says it

    turn, _ = run_with_tracker("hello", model="demo+cut-text")
    banner = view_model(turn)["banner"]
    assert banner["kind"] == "warn" and banner["text"].startswith("ended without a stop event")
    assert banner["detail"].startswith("RemoteProtocolError: ") and banner["hint"]

    turn, _ = run_with_tracker("hi", max_tokens=5)
    footer = view_model(turn)["footer"]
    assert footer["finish_reason"] == "length" and footer["cost"] is None  # the raw numbers, beside ...
    stats = {s[0]: s[1] for s in footer["stats"]}  # ... what is shown
    assert stats["truncated"] == "⚠ truncated (length)" and stats["cost"] == "price unknown"
    usage = turn.usage
    assert stats["tokens"] == (f"tokens cached {usage['cached_tokens']:,} · prompt {usage['prompt_tokens']:,} · "
                               f"thoughts {usage['thoughts_tokens']:,} · response {usage['response_tokens']:,}")
    assert re.fullmatch(r"TTFT \d+ ms|TTFT \d+\.\d\d? s", stats["ttft"]), stats["ttft"]
    assert [s[0] for s in footer["stats"] if len(s) == 3] == ["tokens", "truncated", "ttft", "speed"]  # tooltips where needed


def test_media_and_embedding_lines(fresh_session):
    turn, _ = run_with_tracker("draw a boat")
    image = _item(view_model(turn), "image")
    assert image["tag"] == "image" and image["meta"] == f"image/png · {image['bytes']} B"
    assert image["alt"] == "generated image (image/png)" and image["src"].startswith("data:image/png;base64,")
    turn, _ = run_with_tracker("say hi")
    audio = _item(view_model(turn), "audio")
    # what the model sent (raw PCM, played as WAV), and how long it plays
    assert re.fullmatch(r"audio/L16;codec=pcm;rate=24000 · \d+\.\d s", audio["meta"]), audio["meta"]
    assert audio["src"].startswith("data:audio/wav;base64,")
    turn, _ = run_with_tracker("embed", model="demo-embed", chat="e")
    emb = _item(view_model(turn), "embedding")
    assert emb["meta"] == "64 dims · norm 1.000"
    assert re.fullmatch(r"\[(-?\d\.\d{3}, ){8}…\]", emb["preview"]), emb["preview"]


@pytest.mark.parametrize("late", ["delta", "done"])
def test_an_inline_data_item_whose_mime_type_comes_late_is_drawn_as_its_kind(late):
    """Its first delta carried no MIME type: the live view kept it a data caption until the end."""
    from mmsp_notebook.core.turn import Turn

    def event(event_type, items, finish=None):
        return {"role": "assistant", "event_type": event_type, "content_items": items, "finish_reason": finish,
                "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1} if event_type == "stop" else None}

    turn = Turn(model="demo")
    step, tracker, ops = turn.new_step(), OpsTracker(), []
    data = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
    step.feed(event("delta", [{"type": "inline_data.delta", "data": data[:20]}]))
    ops += tracker.ops(turn)
    assert ops[0][:2] == ["item", 0] and ops[0][2]["kind"] == "data"
    step.feed(event("delta", [{"type": "inline_data.delta", "data": data[20:], **({"mime_type": "image/png"} if late == "delta" else {})}]))
    if late == "delta":
        batch = tracker.ops(turn)
        [kind_set] = [op for op in batch if op[0] == "set"]
        # the whole view of its new kind: a view draws it again as that kind (js/src/render.js)
        assert kind_set[2]["kind"] == "image" and kind_set[2]["tag"] == "image"
        assert kind_set[2]["mime_type"] == "image/png" and kind_set[2]["status"] == "streaming"
        ops += batch
    step.feed(event("delta", [{"type": "inline_data.done", "data": data, "mime_type": "image/png"}]))
    batch = tracker.ops(turn)
    assert any(op[0] == "set" and op[2].get("src", "").startswith("data:image/png;base64,") for op in batch)
    ops += batch
    step.feed(event("stop", [], "stop"))
    ops += tracker.ops(turn, final=True)
    assert apply_ops({"items": []}, ops) == view_model(turn)
    assert tracker.ops(turn, final=True) == []


def test_the_view_fields_cost_little_next_to_the_text(fresh_session):
    """Labels, states and the footer are sent when they change, not with every update."""
    turn, batches = run_with_tracker("Tell me a long story", model="demo+tokens=2000")
    ops = [op for b in batches for op in b]
    rest = sum(len(json.dumps(op, ensure_ascii=False)) for op in ops if op[0] != "append")
    assert rest < 2500, rest
    assert sum(1 for op in ops if op[0] == "set") <= 2 * len(turn.items)
    assert sum(1 for op in ops if op[0] == "turn") <= 3


@pytest.mark.parametrize("facts, status, state, text", [
    ({"status": "streaming"}, "streaming", "streaming", "…"),
    ({"status": "streaming"}, "cancelled", "stopped", "stopped"),
    ({"status": "done", "result": None}, "streaming", "queued", "queued"),
    ({"status": "done", "result": None}, "complete", "not_run", "not run"),
    ({"status": "done", "result": {"running": True}}, "streaming", "running", "running…"),
    ({"status": "done", "result": {"running": True}}, "error", "stopped", "stopped"),
    ({"status": "done", "result": {"ok": True, "output": "x", "error": None, "duration": 0.0042}}, "complete", "done", "returned"),
    ({"status": "done", "result": {"ok": False, "output": None, "error": "E: no", "duration": 75.2}}, "streaming", "raised", "raised"),
])
def test_the_tool_card_state_machine(facts, status, state, text):
    view = present_item({"i": 0, "kind": "tool_call", "name": "f", **facts}, status)
    assert (view["state"], view["state_text"]) == (state, text)
    if state in ("done", "raised"):
        took = {"done": "4 ms", "raised": "1 min 15 s"}[state]
        assert view["result"] == {"state": "ok" if state == "done" else "err", "label": "result" if state == "done" else "error",
                                  "took": took, "text": "x" if state == "done" else "E: no"}


def test_numbers_are_written_once_here():
    from mmsp_notebook.views import format as fmt

    assert [fmt.seconds(s) for s in (0.0042, 0.9996, 1.25, 9.996, 12.54, 59.96, 125.4, None, float("nan"), -1)] == \
        ["4 ms", "1.00 s", "1.25 s", "10.0 s", "12.5 s", "1 min 0 s", "2 min 5 s", "", "", ""]
    assert [fmt.size(n) for n in (512, 5120, 3 * 1024 * 1024, None)] == ["512 B", "5.0 KB", "3.0 MB", ""]
    assert (fmt.integer(1200), fmt.integer(True), fmt.fixed(-0.0001, 3), fmt.fixed("1", 1)) == ("1,200", "", "0.000", "")


def test_a_configured_key_echoed_in_content_is_never_shown(monkeypatch):
    from mmsp_notebook.core.redact import register_secret_env
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.views.html import render_html
    from mmsp_notebook.views.text import render_text

    key = "sk-view-echo-0123456789abcdef"
    monkeypatch.setenv("VIEW_ECHO_KEY", key)
    register_secret_env("VIEW_ECHO_KEY")
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()

    def delta(item):
        return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
                "finish_reason": None}

    tracker = OpsTracker()
    sent = []
    for piece in ("Your key is ", key[:10], key[10:], " — keep it safe."):
        state.feed(delta({"type": "text.delta", "text": piece}))
        sent += tracker.ops(turn)
    text = "Your key is " + key + " — keep it safe."
    args = {"token": key}
    for event in (delta({"type": "text.done", "text": text}),
                  delta({"type": "tool_call.delta", "name": "login", "tool_call_id": "c1",
                         "arguments": json.dumps(args)}),
                  delta({"type": "tool_call.done", "name": "login", "tool_call_id": "c1", "arguments": args}),
                  {"role": "assistant", "event_type": "stop", "content_items": [], "usage_metadata": {},
                   "finish_reason": "tool_call"}):
        state.feed(event)
    sent += tracker.ops(turn, final=True)
    assert key in turn.text  # the Python value is the data as received
    shown = json.dumps(sent) + json.dumps(view_model(turn)) + render_html(turn) + render_text(turn)
    assert key not in shown and key[:10] not in shown and "[redacted]" in shown


def test_the_terminal_wire_view_shows_each_frames_payload_content_first():
    """A line of the text wire view is the frame's payload, deepest fields first: every provider's
    content shows within the line, not the envelope's first 50 characters."""
    from mmsp_notebook.views.wire import frame_payload

    openai = ('data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-mini",'
              '"system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}]}\n\n')
    anthropic = ('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                 '"delta":{"type":"text_delta","text":"Bonjour"}}\n\n')
    mmsp = ('data: {"role":"assistant","event_type":"delta","content_items":[{"type":"thinking.delta",'
            '"thinking":"Let me think"}],"usage_metadata":null,"finish_reason":null}\n\n')
    assert frame_payload(openai).startswith('choices.delta.content="Hello there" choices.index=0 id="chatcmpl-9x"')
    assert frame_payload(anthropic) == ('[content_block_delta] delta.text="Bonjour" delta.type="text_delta" '
                                        'index=0 type="content_block_delta"')
    assert frame_payload(mmsp).startswith('content_items.thinking="Let me think" content_items.type="thinking.delta"')
    assert frame_payload(": heartbeat\n\n") == ": heartbeat"
    assert frame_payload('{"error": {"message": "bad key"}}') == 'error.message="bad key"'  # a body that is not SSE
    assert frame_payload("data: [DONE]\n\n") == "[DONE]"


# --------------------------------------------------------------------------- the math renderer, on request
def _widgets(tmp_path):
    from mmsp_notebook import Chat, traces
    from mmsp_notebook.views.widget import CompareView, TurnView

    return {"TurnView": TurnView(), "CompareView": CompareView(), "Chat": Chat(trace=False),
            "Explorer": traces.explore(tmp_path)}


def _capture(widget):
    sent = []

    def send(data=None, metadata=None, buffers=None, **_):
        if isinstance(data, dict) and data.get("method") == "custom":
            sent.append((data["content"], list(buffers or [])))

    widget.comm.send = send
    return sent


def _from_front_end(widget, content):
    widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def test_every_widget_that_draws_markdown_serves_the_math_renderer(tmp_path):
    """Asked ``math_code``, each widget answers with static/katex.js in a binary buffer, never a trait."""
    from mmsp_notebook.views.widget import KATEX_JS, MarkdownWidget

    code = KATEX_JS.read_bytes()
    assert code and b"KaTeX parse error" in code
    for name, widget in _widgets(tmp_path).items():
        assert isinstance(widget, MarkdownWidget), name
        sent = _capture(widget)
        _from_front_end(widget, {"type": "math_code"})
        answers = [(c, b) for c, b in sent if c.get("type") == "math_code"]
        assert len(answers) == 1, (name, [c for c, _ in sent])
        content, buffers = answers[0]
        assert content == {"type": "math_code", "bytes": len(code)}, name
        assert [bytes(b) for b in buffers] == [code], name
        # not in the widget's state (what a saved notebook keeps)
        state = json.dumps(widget.get_state(), default=str)
        assert "KaTeX parse error" not in state, name
        assert len(state) < 200_000, (name, len(state))
        widget.close()


def test_a_streaming_view_sends_the_math_renderer_with_the_first_formula(tmp_path):
    """While a cell runs the kernel reads no request: the live views send it unasked, once."""
    from mmsp_notebook.views.widget import KATEX_JS, CompareView, TurnView

    view = TurnView()
    sent = _capture(view)
    view.push([["append", 0, "no math here"]])
    assert [c["type"] for c, _ in sent] == ["ops"]
    view.push([["append", 0, "then $x^2$"]])
    view.push([["append", 0, "and \\(y\\)"]])
    assert [c["type"] for c, _ in sent] == ["ops", "math_code", "ops", "ops"]
    assert bytes(sent[1][1][0]) == KATEX_JS.read_bytes()
    columns = CompareView()
    sent = _capture(columns)
    columns.push([[1, [["append", 0, "\\[ a \\]"]]]])
    assert [c["type"] for c, _ in sent] == ["math_code", "ops"]
    view.close()
    columns.close()


def test_surrogates_a_model_sent_are_mended_in_every_view(fresh_session, monkeypatch):
    """A server slicing UTF-16 text may send half a pair in each of two deltas, or half a pair alone
    (JSON ``"\\ud83d"``): no page, comm message or terminal can carry that. The views join the two
    halves into their character (the ops hold the first half back until the next delta) and show a
    lone half as U+FFFD; the Turn keeps the text as received."""
    from jupyter_client.session import json_packer
    from sse_scripts import SPLIT_SURROGATES, script_server

    from mmsp_notebook.views.html import render_html
    from mmsp_notebook.views.text import render_text

    monkeypatch.setenv("VIEW_TEST_KEY", "sk-view-test-0000")
    with script_server(lambda _request, _auth: SPLIT_SURROGATES) as base_url:
        turn, batches = run_with_tracker("hi", events=True, model="m", client_type="openai-chat", base_url=base_url,
                                         api_key_env="VIEW_TEST_KEY")
    shown = "a smile \U0001f600 and half \ufffd a **pair**"
    assert turn.status == "complete" and turn.text == shown  # (the wire capture keeps what arrived)
    vm = view_model(turn)
    assert vm["items"][0]["text"] == shown
    assert apply_ops({"items": []}, [op for b in batches for op in b if op[0] != "event"]) == vm
    for b in batches:
        json_packer(b)  # each comm message can be sent
    html = render_html(turn, events=True)
    html.encode("utf-8")
    assert "a smile \U0001f600 and half \ufffd a <strong>pair</strong>" in html
    assert shown in render_text(turn)


def test_an_embedding_preview_names_nan_and_infinity_and_writes_large_values_short():
    """NaN and ±inf were shown as "null", and 1e308 as its 309 digits."""
    from mmsp_notebook.core.turn import Turn

    turn = Turn(model="demo-embed")
    step = turn.new_step()
    vector = [float("nan"), 1.0, float("-inf"), float("inf"), 1e308, -0.25]
    for kind in ("embedding.delta", "embedding.done"):
        step.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": kind, "embedding": vector}],
                   "usage_metadata": None, "finish_reason": None})
    emb = _item(view_model(turn), "embedding")
    assert emb["preview"] == "[NaN, 1.000, -inf, inf, 1.000e+308, -0.250]"
    assert emb["meta"] == "6 dims"  # no norm of such a vector


def _walk_recorded(turn, start, reads):
    """``turn_events(turn, start)`` over copies of the turn's steps whose events record each index read."""
    from types import SimpleNamespace

    from mmsp_notebook.views.model import turn_events

    class Recorded(list):
        def __getitem__(self, j):
            reads.append((k, j))
            return super().__getitem__(j)

    steps = []
    for k, step in enumerate(turn.steps):
        events = Recorded(step.events)
        events.k = k
        steps.append(SimpleNamespace(event_times=step.event_times, n_events=step.n_events,
                                     request_sent=step.request_sent, events=events))
    reads.clear()
    return list(turn_events(SimpleNamespace(steps=steps), start))


def test_the_events_of_a_turn_are_walked_from_the_first_not_sent(fresh_session):
    """A repaint of the events table walks only the events it has not sent (a turn of 100,000 took
    seconds per repaint to walk from the start): those before are not read, nor a step all before."""
    from mmsp_notebook.views.model import turn_events

    run, future = launch("What's the weather in Paris and Rome?", tools=[get_weather])
    turn = future.result(timeout=30)
    every = list(turn_events(turn))
    first = turn.steps[0].n_events
    assert len(turn.steps) >= 2 and [n for n, _, _ in every] == list(range(len(every)))
    reads: list[tuple[int, int]] = []
    for start in range(len(every) + 2):
        walked = _walk_recorded(turn, start, reads)
        assert walked == every[start:]
        numbers = [k * first + j if k == 0 else first + j for k, j in reads]  # (two steps: the second's numbers)
        assert not reads or min(numbers) >= start, (start, reads)
        assert all(k > 0 for k, _ in reads) or start < first  # a step all before start is not read


def _tracked_ops(events_table):
    """The ops of a manually fed turn whose text holds a configured key, cut and whole, split at
    random across deltas, with a repaint after every few events."""
    import random

    from mmsp_notebook.core.turn import Turn

    rng = random.Random(7)
    key = "sk-live-growing-0123456789abcdef"
    text = "".join(rng.choice([key, key[:9], key[:12] + "Z", " ", "\n", "Ünï", "words, ", "k"]) for _ in range(400))
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()
    state.request_sent = 0.0  # (event times given: the rows' milliseconds are the same in both runs)
    tracker = OpsTracker(events=events_table)
    ops, at = [], 0
    while at < len(text):
        piece = text[at:at + rng.randrange(1, 14)]
        at += len(piece)
        state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.delta", "text": piece}],
                    "usage_metadata": None, "finish_reason": None}, at=at / 1000)
        if rng.random() < 0.4:
            ops.append(tracker.ops(turn))
    state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.done", "text": text}],
                "usage_metadata": None, "finish_reason": None}, at=1.0)
    ops.append(tracker.ops(turn, final=True))
    for batch in ops:  # (each run's turn has its own id)
        for op in batch:
            if op[0] == "turn":
                op[1].pop("id", None)
    return turn, ops


@pytest.mark.parametrize("events_table", [False, True])
def test_a_growing_answer_is_sent_as_when_each_repaint_redacted_it_whole(monkeypatch, events_table):
    """Each repaint redacts only what came since the text's last settled point: the ops (text and
    events table) are those of repaints that redacted the whole text so far, and so is the view."""
    from mmsp_notebook.core.redact import GrowingRedaction, redact_secrets
    from mmsp_notebook.views import model

    monkeypatch.setenv("VIEW_GROWING_API_KEY", "sk-live-growing-0123456789abcdef")
    turn, ops = _tracked_ops(events_table)
    assert turn.steps[0].n_events > 100 and len(ops) > 30

    class Whole:  # each repaint redacts the whole text so far, at once
        def __call__(self, text, secrets):
            at_once = GrowingRedaction()
            shown = at_once(text, secrets)
            self.settled = at_once.settled
            assert shown == redact_secrets(text, secrets)
            return shown

    monkeypatch.setattr(model, "GrowingRedaction", Whole)
    _, whole = _tracked_ops(events_table)
    assert ops == whole
    assert any(op[0] == "event" for batch in ops for op in batch) == events_table
    final = apply_ops({"items": []}, [op for batch in ops for op in batch if op[0] != "event"])
    assert "[redacted]" in final["items"][0]["text"] and "sk-live-growing-0" not in json.dumps(ops)


_PROP_KEYS = ("sk-prop-Ab12Cd34Ef56Gh78", "zq-secret")  # generated-looking (any case) and a word set as a key


def _prop_text(rng):
    """Pieces around configured keys: whole, cut, in upper case, near-keys that start like a key and
    go on otherwise, CJK, punctuation and words; each key-like piece after a separator."""
    out = []
    for _ in range(rng.randrange(4, 30)):
        key = rng.choice(_PROP_KEYS)
        sep = rng.choice([" ", "\n", ", ", "「", "漢"])
        pick = rng.randrange(7)
        if pick == 0:
            out.append(sep + key)
        elif pick == 1:
            out.append(sep + key[:rng.randrange(1, len(key))])  # cut where the next piece's separator follows
        elif pick == 2:
            k = rng.randrange(6, len(key))
            out.append(sep + key[:k] + ("Q" if key[k] != "Q" else "R") + rng.choice(["", "uux", "-9"]))
        elif pick == 3:
            out.append(sep + key.upper())
        elif pick == 4:
            out.append(rng.choice(["漢字かな", "。", "！", "words", ".", ";", "(x)", "ü"]))
        else:
            out.append("".join(rng.choice("ab .-Zk9\n字") for _ in range(rng.randrange(1, 10))))
    return "".join(out)


@pytest.mark.parametrize("seed", range(30))
def test_every_repaint_shows_a_prefix_of_the_redacted_text_so_far(monkeypatch, seed):
    """A repaint that lands inside what may be a key (its first characters, a cut key so far) sends
    none of it until the text settles: what each live view holds of an area is always a prefix of the
    text so far redacted, the final repaint all of it, and no key or cut key is ever sent."""
    import io
    import random

    from mmsp_notebook.core.redact import redact_secrets, secret_values
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.views.live import TextLive

    for n, key in enumerate(_PROP_KEYS):
        monkeypatch.setenv(f"VIEW_PROP_{n}_API_KEY", key)
    secrets = secret_values()
    rng = random.Random(seed)
    areas = [("thinking", _prop_text(rng)), ("text", _prop_text(rng))]
    turn = Turn(None, model="demo")
    state = turn.new_step()
    state.mark_request_sent()
    tracker, terminal = OpsTracker(), TextLive(stream=io.StringIO(), color=False)
    vm, sent, so_far = {"items": []}, [], ["", ""]

    def repaint(final=False):
        ops = tracker.ops(turn, final)
        sent.append(json.dumps(ops, ensure_ascii=False))
        apply_ops(vm, ops)
        terminal.update(turn, final)
        snapshot = tracker.view(turn)  # (a view that says hello: the ops to come continue it)
        assert [item["text"] for item in snapshot["items"]] == [item["text"] for item in vm["items"]]
        for i, item in enumerate(vm["items"]):
            shown, whole = item["text"], redact_secrets(so_far[i], secrets)
            assert whole.startswith(shown), (seed, i, so_far[i], shown)
            assert all(redact_secrets(shown, [key]) == shown for key in secrets), (seed, shown)  # no key, whole or cut

    for i, (kind, text) in enumerate(areas):
        at = 0
        while at < len(text):
            piece = text[at:at + rng.randrange(1, 9)]
            at += len(piece)
            so_far[i] += piece
            state.feed({"role": "assistant", "event_type": "delta", "usage_metadata": None, "finish_reason": None,
                        "content_items": [{"type": f"{kind}.delta", kind: piece}]})
            repaint()
        state.feed({"role": "assistant", "event_type": "delta", "usage_metadata": None, "finish_reason": None,
                    "content_items": [{"type": f"{kind}.done", kind: text}]})
        repaint()  # (a finished area is shown whole, the turn still streaming)
        assert vm["items"][i]["text"] == redact_secrets(text, secrets)
    repaint(final=True)
    assert [item["text"] for item in vm["items"]] == [redact_secrets(text, secrets) for _, text in areas]
    everything = "".join(sent) + terminal.stream.getvalue()
    assert _PROP_KEYS[0].lower() not in everything.lower() and _PROP_KEYS[1] not in everything
    assert redact_secrets(areas[1][1], secrets) in terminal.stream.getvalue()
