"""ask/aask and the turn engine, through the real mmsp clients over real HTTP from the demo server."""

from __future__ import annotations

import asyncio
import io
import json
import time

import pytest
from tools import broken_tool, get_weather

import mmsp_notebook as m
from mmsp_notebook.core.store import read_sidecar
from mmsp_notebook.engine.launch import interpolate, launch, user_message
from mmsp_notebook.views.live import TextLive, drive
from mmsp_notebook.views.model import status_text


def interrupt_main_once(ready, after=0.0):
    """Interrupt the main thread (as the kernel's ■ does) once ``ready()``, then ``after`` seconds."""
    import _thread
    import threading

    def interrupt():
        deadline = time.monotonic() + 10
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(after)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()


def quiet_ask(prompt, **kw):
    out = io.StringIO()
    turn = m.ask(prompt, stream=out, **kw)
    return turn, out.getvalue()


def test_text_and_thinking_stream_with_footer_trace_and_sidecar(fresh_session, tmp_path):
    turn, printed = quiet_ask("Tell me about pandas")
    assert turn.status == "complete" and turn.finish_reason == "stop"
    assert turn.thinking and "##" in turn.text and "|" in turn.text and "```" in turn.text
    assert turn.text in printed and "tokens cached" in printed
    usage = turn.usage
    assert usage["prompt_tokens"] > 0 and usage["response_tokens"] > 0 and usage["thoughts_tokens"] > 0
    assert turn.cost is None and "price unknown" in printed
    assert turn.timings["ttft"] is not None and turn.timings["total"] >= turn.timings["ttft"]
    # mmsp's own trace (saved here for the mmsp wire client) and the timing sidecar beside it
    base = tmp_path / "cache" / "tests"  # one trace per conversation: <notebook>/<chat>
    trace = json.loads((base / "default.json").read_text())
    assert trace["config"]["model"] == "demo"
    assert [msg["role"] for msg in trace["history"]] == ["user", "assistant"]
    assert trace["history"][1]["content_items"] == turn.message["content_items"]
    [record] = list(read_sidecar(base / "default.timing.jsonl"))
    assert record["status"] == "complete" and record["turn"] == 0 and record["message_index"] == 1
    assert record["events"][-1][1] == "stop" and len(record["events"]) == len(turn.events)
    assert record["usage"] == turn.usage


@pytest.mark.parametrize("client_type", ["mmsp", "openai-chat", "openai-responses", "ant-messages"])
def test_tool_loop_runs_the_function_and_answers_with_its_result(fresh_session, client_type):
    turn, printed = quiet_ask("What's the weather in Paris?", tools=[get_weather], client_type=client_type)
    assert turn.status == "complete", turn.error
    assert len(turn.steps) == 2
    [call] = turn.tool_calls
    assert call["name"] == "get_weather" and call["arguments"]["city"] == "Paris"
    assert call["output"] == "18 degrees celsius and sunny in Paris" and call["duration"] >= 0
    assert "18 degrees celsius and sunny in Paris" in turn.text
    result_message = turn.tool_messages[0]
    assert result_message["content_items"][0]["tool_call_id"] == call["tool_call_id"]
    history = fresh_session.conversation(None).history()
    assert [msg["role"] for msg in history] == ["user", "assistant", "user", "assistant"]
    assert history[2]["content_items"][0]["type"] == "tool_result.done"


def test_a_tool_that_raises_is_shown_and_sent_back(fresh_session):
    turn, printed = quiet_ask("please call broken_tool for Oslo", tools=[broken_tool])
    [call] = turn.tool_calls
    assert call["error"] == "RuntimeError: weather service down for Oslo"
    assert "raised RuntimeError" in printed
    assert turn.status == "complete" and "weather service down" in turn.text


def test_max_steps_stops_the_loop(fresh_session):
    turn, _ = quiet_ask("What's the weather in Paris?", tools=[get_weather], max_steps=1)
    assert len(turn.steps) == 1 and turn.max_steps_reached
    assert "max-steps" in status_text(turn)
    # every call is answered in the conversation (providers refuse a call without its result) ...
    history = fresh_session.conversation(None).history()
    [call] = [i for i in history[1]["content_items"] if i["type"] == "tool_call.done"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[2]["content_items"] == [{"type": "tool_result.done", "tool_call_id": call["tool_call_id"],
                                            "text": "not run: the turn reached its step limit (max_steps)"}]
    # ... and the next turn opens with that answer, in one user message
    nxt, _ = quiet_ask("Never mind, say hello")
    assert nxt.status == "complete"
    assert "Here is what the tool returned" not in nxt.text and "not run" not in nxt.text  # the question is answered
    history = fresh_session.conversation(None).history()
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert [i["type"] for i in history[2]["content_items"]] == ["tool_result.done", "text.done"]


@pytest.mark.parametrize(
    "fault, status, error_type",
    [
        ("cut-text", "incomplete", "RemoteProtocolError"),
        ("nostop", "incomplete", "IncompleteStreamError"),
        ("error", "error", "UpstreamError"),
        ("401", "error", "UpstreamError"),
        ("429", "error", "UpstreamError"),
    ],
)
def test_faults_end_in_their_status_and_keep_partial_content(fresh_session, fault, status, error_type):
    turn, printed = quiet_ask("hello there", model=f"demo+{fault}")
    assert turn.status == status
    assert type(turn.error).__name__ == error_type
    assert f"[{status}]" in printed
    if fault in ("cut-text", "nostop"):
        assert turn.text and turn.text in printed  # partial content kept
        assert "ended without a stop event" in printed
    if fault == "401":
        assert turn.error.status == 401
    # a failed turn records nothing in the conversation
    assert fresh_session.conversation(None).history() == []
    assert fresh_session.last_error is turn.error


@pytest.mark.parametrize("client_type", ["openai-chat", "ant-messages"])
def test_malformed_tool_arguments_surface_as_tool_call_argument_parse_error(fresh_session, client_type):
    turn, printed = quiet_ask("What's the weather in Paris?", model="demo+bad-args", tools=[get_weather],
                              client_type=client_type)
    assert turn.status == "error" and type(turn.error).__name__ == "ToolCallArgumentParseError"
    assert "not a JSON object" in printed  # the hint


def test_history_accumulates_only_complete_turns(fresh_session):
    quiet_ask("first question")
    quiet_ask("second", model="demo+cut-text")
    quiet_ask("third question")
    history = fresh_session.conversation(None).history()
    texts = [msg["content_items"][0].get("text") for msg in history if msg["role"] == "user"]
    assert texts == ["first question", "third question"]
    quiet_ask("fresh", new=True)
    assert len(fresh_session.conversation(None).history()) == 2
    assert fresh_session.conversation(None).turns[-1].trace_id.endswith("default~2")


def test_strict_raises_turn_error_with_the_partial_turn(fresh_session):
    with pytest.raises(m.TurnError) as info:
        quiet_ask("hello", model="demo+cut-text", strict=True)
    assert info.value.turn.status == "incomplete" and info.value.turn.text
    assert type(info.value.__cause__).__name__ == "RemoteProtocolError"


@pytest.mark.serial  # the abort must end the turn within 1 s
def test_abort_of_a_stalled_stream_cancels_within_a_second(fresh_session):
    run, future = launch("hello", model="demo+stall")
    time.sleep(0.3)
    started = time.monotonic()
    run.abort()
    turn = future.result(timeout=5)
    assert time.monotonic() - started < 1.0
    assert turn.status == "cancelled"
    assert fresh_session.conversation(None).history() == []


@pytest.mark.serial  # the interrupt must end the turn within 2.5 s
def test_keyboard_interrupt_in_drive_aborts_and_keeps_partial(fresh_session):
    run, future = launch("hello", model="demo+tps=20")
    interrupt_main_once(lambda: run.turn.thinking)
    out = io.StringIO()
    started = time.monotonic()
    turn = drive(run, future, TextLive(out))
    assert time.monotonic() - started < 2.5
    assert turn.status == "cancelled" and turn.thinking
    assert "cancelled — partial output kept" in out.getvalue()


@pytest.mark.serial  # the interrupt must land while the first turn streams
def test_keyboard_interrupt_stops_a_loop_of_ask_once_the_cancelled_turn_is_drawn(fresh_session):
    """Ctrl-C (■) in a loop of ``ask``: the turn streaming is cancelled and drawn, what arrived kept,
    then the KeyboardInterrupt goes on up: the loop stops, no further request is sent."""
    out = io.StringIO()
    interrupt_main_once(lambda: "thinking" in out.getvalue() or len(out.getvalue()) > 40, after=0.3)
    asked = []
    with pytest.raises(KeyboardInterrupt) as info:
        for prompt in ("first", "second", "third"):
            asked.append(prompt)
            m.ask(prompt, model="demo+tps=20", stream=out)
    assert asked == ["first"]
    turn = info.value.turn  # the cancelled turn, as ask would have returned it
    assert turn.status == "cancelled" and (turn.thinking or turn.text)
    assert fresh_session.last_turn is turn
    assert "cancelled — partial output kept" in out.getvalue()
    assert str(info.value) == "the turn was cancelled; its partial answer is kept above"
    assert quiet_ask("hello")[0].status == "complete"  # the next ask runs as ever


def test_aask_from_async_code(fresh_session):
    async def main():
        return await m.aask("what is a cat?")

    turn = asyncio.run(main())
    assert turn.status == "complete" and turn.text


def test_images_audio_and_embeddings(fresh_session):
    turn, printed = quiet_ask("draw a house")
    [image] = turn.images
    assert image["mime_type"] == "image/png" and image["data"].startswith(b"\x89PNG")
    assert "[image] image/png" in printed
    turn, _ = quiet_ask("say hello")
    [audio] = turn.audio
    assert audio["mime_type"].startswith("audio/L16") and len(audio["data"]) > 1000
    turn, printed = quiet_ask("embed me", model="demo-embed", chat="vectors")
    [vector] = turn.embeddings
    assert len(vector) == 64 and "64 dims" in printed


def test_api_key_env_names_a_missing_variable_clearly(fresh_session, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    turn, printed = quiet_ask("hi", model="gpt-5.6-sol", api_key_env="NO_SUCH_KEY_VAR")
    assert turn.status == "error" and "NO_SUCH_KEY_VAR is not set" in printed


def test_missing_key_for_a_real_provider_says_which_variable(fresh_session, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    turn, printed = quiet_ask("hi", model="gpt-5.6-sol", client_type="openai-chat", base_url="http://127.0.0.1:9/v1")
    assert turn.status == "error" and "OPENAI_API_KEY" in printed
    assert status_text(turn) == "failed before any output"
    # set, but mmsp keeps a provider's key from a custom endpoint: the hint says how to send it
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefXYZ")
    turn, printed = quiet_ask("hi", model="gpt-5.6-sol", client_type="openai-chat", base_url="http://127.0.0.1:9/v1",
                              chat="second")
    assert type(turn.error).__name__ == "ApiKeyRequiredError" and "--api-key-env OPENAI_API_KEY" in printed
    assert "sk-test-0123456789abcdefXYZ" not in printed


def test_a_turn_refused_before_any_request_is_a_row_of_its_trace(fresh_session, monkeypatch):
    import os

    from mmsp_notebook import traces

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    turn, _ = quiet_ask("hi", model="gpt-5.6-sol", client_type="openai-chat", chat="refused")
    assert turn.status == "error"
    df = traces.load_turns(os.environ["MMSP_CACHE_DIR"], progress=False)
    [row] = df[df["trace_id"] == turn.trace_id].itertuples()
    assert (row.status, row.model, row.client_type) == ("error", "gpt-5.6-sol", "openai-chat")
    assert row.error_type == type(turn.error).__name__ and "OPENAI_API_KEY" in row.error_message
    # a second attempt in the same conversation is the same turn tried again; then one that answers
    quiet_ask("hi again", model="gpt-5.6-sol", client_type="openai-chat", chat="refused")
    done, _ = quiet_ask("hi", model="demo", chat="refused")
    assert done.status == "complete" and done.trace_id == turn.trace_id
    df = traces.load_turns(os.environ["MMSP_CACHE_DIR"], progress=False)
    rows = df[df["trace_id"] == turn.trace_id]
    assert sorted(rows["status"]) == ["complete", "error", "error"]
    assert list(rows.loc[rows["status"] == "complete", "turn"]) == [0]


def test_interpolation_expressions_escapes_json_and_images(tmp_path):
    ns = {"city": "Paris", "n": 3}
    assert interpolate("Weather in {city} x{n + 1}", ns)[0] == "Weather in Paris x4"
    assert interpolate("literal {{city}}", ns)[0] == "literal {city}"
    payload = '{"a": {"b": [1, 2]}, "c": "{d}"}'
    assert interpolate(payload, ns)[0] == payload
    assert interpolate("{undefined_name} and {", ns)[0] == "{undefined_name} and {"
    code = "if (ok) { print } else { json } {city}"  # pasted code: functions and modules stay as written
    assert interpolate(code, {**ns, "json": json})[0] == "if (ok) { print } else { json } Paris"

    class Unprintable:
        def __str__(self):
            raise RuntimeError("no str")

    with pytest.raises(m.OptionError, match=r"\{thing\} cannot be put in the prompt"):
        interpolate("show {thing}", {"thing": Unprintable()})
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
    path = tmp_path / "pic.png"
    path.write_bytes(png)
    text, images = interpolate("look {img} and {p}", {"img": png, "p": str(path)})
    assert text == "look [image 1] and [image 2]" and len(images) == 2
    assert images[0]["image_url"].startswith("data:image/png;base64,")
    with pytest.raises(m.OptionError):
        user_message("", [])


def test_a_prompt_expands_values_and_never_runs_a_call(recwarn):
    """Code pasted into a prompt is never run: a {...} that calls stays as written, with a warning
    naming it when its names are defined; names, attributes, indexes, slices and arithmetic expand."""
    items = [1, 2, 3]
    ns = {"items": items, "rows": [{"id": 7}], "text": "abcdef", "n": 3, "obj": m}
    pasted = 'print(f"{items.pop()}") and {len(text)} {text[:3]} {rows[0]["id"]} {n * -2} {obj.__name__}'
    text, _ = interpolate(pasted, ns)
    assert items == [1, 2, 3]  # nothing ran
    assert text == 'print(f"{items.pop()}") and {len(text)} abc 7 -6 mmsp_notebook'
    (w,) = recwarn.list
    assert "{items.pop()}, {len(text)}" in str(w.message) and "never a call" in str(w.message)
    recwarn.clear()
    # a call naming what is not defined is other text (JS, a template), left without a word
    assert interpolate("{ render(props) } {lambda: 1} {(x := 5)}", ns)[0] == "{ render(props) } {lambda: 1} {(x := 5)}"
    assert not recwarn.list and "x" not in ns
    side = {"hits": 0}

    class Counter:
        @property
        def value(self):
            side["hits"] += 1
            return side["hits"]

        def bump(self):
            side["hits"] += 100

    assert interpolate("{c.value} {c.bump()}", {"c": Counter()})[0] == "1 {c.bump()}"
    assert side["hits"] == 1


def test_pil_image_is_sent_as_an_image_item(fresh_session):
    from PIL import Image

    img = Image.new("RGB", (4, 4), "red")
    text, images = interpolate("what is in {img}?", {"img": img})
    assert images and images[0]["image_url"].startswith("data:image/png;base64,")
    turn, _ = quiet_ask(text, images=images)
    assert turn.status == "complete"
    assert turn.prompt["content_items"][1]["type"] == "image_url.done"


def test_usage_frame_dtypes(fresh_session):
    quiet_ask("one")
    quiet_ask("two", model="demo+401")
    df = m.usage_frame(fresh_session.turns)
    assert list(df["status"]) == ["complete", "error"]
    assert str(df["prompt_tokens"].dtype) == "Int64" and df["prompt_tokens"].isna().tolist() == [False, True]
    assert str(df["model"].dtype) == "category"
    assert df["cost"].isna().all()


def test_two_turns_of_one_conversation_at_once_are_refused(fresh_session):
    first_run, first = launch("hello", model="demo+tps=200")
    second_run, second = launch("again", model="demo+tps=200")
    a, b = first.result(timeout=30), second.result(timeout=30)
    statuses = sorted([a.status, b.status])
    assert statuses == ["complete", "error"]
    refused = a if a.status == "error" else b
    assert type(refused.error).__name__ == "ConcurrentCallError"
    assert len(fresh_session.conversation(None).history()) == 2


def test_a_registry_model_is_routed_to_its_family_client(fresh_session, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    import mmsp

    model = next(e["model"] for e in mmsp.list_supported_models() if e["client"] == "anthropic-official")
    turn, printed = quiet_ask("hi", model=model)
    assert turn.client_type == "anthropic-official"
    # the SDK raises its own error for a missing key; the hint names mmsp's variable for the client
    assert turn.status == "error" and "No API key: set ANTHROPIC_API_KEY" in printed


def test_a_stream_that_breaks_the_grammar_ends_in_a_protocol_error(fresh_session, tmp_path):
    """A captured MMSP-wire stream with interleaved groups, replayed through the real mmsp client."""
    import json as _json

    from mmsp_notebook.demo import DemoServer

    def frame(item):
        return "data: " + _json.dumps({"role": "assistant", "event_type": "delta", "content_items": [item],
                                       "usage_metadata": None, "finish_reason": None, "created_at": 1}) + "\n\n"

    transcript = tmp_path / "broken.sse"
    transcript.write_text(frame({"type": "text.delta", "text": "Hello"})
                          + frame({"type": "thinking.delta", "thinking": "interleaved"})
                          + frame({"type": "thinking.done", "thinking": "interleaved"})
                          + "data: [DONE]\n\n")
    with DemoServer(instant=True, replay=transcript, replay_protocol="mmsp") as srv:
        turn, printed = quiet_ask("hi", model="demo", client_type="mmsp", base_url=srv.base_url)
    assert turn.status == "error"
    assert type(turn.error).__name__ == "ProtocolError" and turn.error.index == 1
    assert "interleaved groups" in printed and turn.text == "Hello"  # partial content kept


@pytest.mark.serial  # the interrupt must end the turn within 2.5 s
def test_keyboard_interrupt_while_a_slow_tool_runs_cancels_the_turn_at_once(fresh_session):
    def slow_lookup(city: str) -> str:
        """Look something up, slowly."""
        time.sleep(4)
        return f"found {city}"

    run, future = launch("Use slow_lookup for Paris", tools=[slow_lookup])
    interrupt_main_once(lambda: any(i.tool_run for i in run.turn.items), after=0.2)
    out = io.StringIO()
    started = time.monotonic()
    turn = drive(run, future, TextLive(out))
    assert time.monotonic() - started < 2.5  # neither the tool's 4 s nor the abort grace waited out
    assert turn.status == "cancelled"
    [call] = turn.tool_calls
    assert call["name"] == "slow_lookup" and call["error"].startswith("cancelled")
    assert fresh_session.conversation(None).history() == []  # nothing recorded
    # the kernel goes on: the next turn of the same chat runs normally
    assert quiet_ask("hello")[0].status == "complete"


def test_a_key_quoted_back_by_the_provider_is_redacted_everywhere_even_under_strict(fresh_session, monkeypatch,
                                                                                   key_echoing_server):
    import traceback

    monkeypatch.setenv("MY_SECRET_VAR", "canary-key-9876543")
    with pytest.raises(m.TurnError) as info:
        m.ask("hello", model="custom-model", client_type="openai-chat", base_url=key_echoing_server,
              api_key_env="MY_SECRET_VAR", strict=True, stream=io.StringIO())
    shown = "".join(traceback.format_exception(info.value))
    turn = info.value.turn
    assert turn.status == "error" and "Incorrect API key provided" in shown
    for text in (shown, str(turn.error), repr(turn.error), repr(turn.error.args), turn.error_message):
        assert "canary-key-9876543" not in text and "[redacted]" in text


@pytest.mark.parametrize("client_type", ["openai-chat", "openai-responses", "ant-messages", "mmsp"])
def test_a_connection_cut_mid_stream_says_so_on_every_protocol(fresh_session, client_type):
    from mmsp_notebook.views.hints import error_hint

    turn, printed = quiet_ask("hello there", model="demo+cut-text", client_type=client_type)
    assert turn.status == "incomplete" and turn.text
    hint = error_hint(turn.error, None, client_type)
    assert "dropped before the stream ended" in hint or "cut short" in hint, hint
    assert "check --base-url" not in printed


def test_unknown_client_types_and_unusable_settings_are_refused_before_anything_runs(fresh_session):
    from mmsp_notebook import OptionError
    with pytest.raises(OptionError, match="unknown client type 'bogus'; mmsp has .*openai-chat"):
        launch("hi", client_type="bogus")
    with pytest.raises(OptionError, match="client type"):
        fresh_session.settings.set("client_type", "bogus")
    for bad in (float("nan"), -0.5, "hot"):
        with pytest.raises(OptionError, match="temperature"):
            launch("hi", temperature=bad)
    with pytest.raises(OptionError, match="prompt is empty"):
        launch("   ")
    # text decoded with surrogateescape (a file's bad bytes): named before a request, never a UnicodeEncodeError
    with pytest.raises(OptionError, match=r"lone surrogate \('\\udcff'\) at character 6, .*errors='replace'"):
        launch("file x\udcff")
    assert fresh_session.turns == []
