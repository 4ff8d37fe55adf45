"""What the hints say about each failure, from real mmsp clients streaming real-shaped provider responses.

Each response is served by the demo server's replay (``DemoServer(replay=...)``) or by the live demo
with an injected fault, over real HTTP; the hint and the status come from the exception the client
raised, as a turn keeps it.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from mmsp.errors import EmptyResponseError, IncompleteStreamError, StreamProtocolError, parse_tool_call_arguments
from mmsp.wire import to_wire_error

from mmsp_notebook.core.state import classify_exception
from mmsp_notebook.demo import DemoServer
from mmsp_notebook.views.hints import error_hint

USER = [{"role": "user", "content_items": [{"type": "text.done", "text": "What's the weather in Paris?"}]}]
CLIENTS = ("mmsp", "openai-chat", "openai-responses", "ant-messages")


def _event(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n"


def _data(payload: Any) -> str:
    return f"data: {json.dumps(payload)}\n\n"


async def _stream(server: DemoServer, model: str, client_type: str) -> tuple[list[dict[str, Any]], BaseException]:
    client = server.client(model, client_type)
    events: list[dict[str, Any]] = []
    try:
        async for event in client.streaming_response(USER, {}):
            events.append(event)
    except Exception as exc:
        return events, exc
    finally:
        inner = client._client._client
        await (inner.aclose() if hasattr(inner, "aclose") else inner.close())
    raise AssertionError("the stream did not fail")


def _replayed(tmp_path: Path, client_type: str, frames: list[str]) -> tuple[list[dict[str, Any]], BaseException]:
    path = tmp_path / "capture.sse"
    path.write_text("".join(frames), encoding="utf-8")
    with DemoServer(replay=path, instant=True) as server:
        return asyncio.run(_stream(server, "captured", client_type))


# ------------------------------------------------------------------------------------------ tool arguments cut off
def _messages_tool_call(stop_reason: str | None) -> list[str]:
    """Anthropic Messages: a tool_use block whose arguments stop mid-way, then the provider's stop reason (or none)."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
    frames = [
        _event("message_start", {"type": "message_start", "message": message}),
        _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        _event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": '{"city": "Pa'}}),
    ]
    if stop_reason is not None:
        frames += [
            _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                     "usage": {"output_tokens": 16}}),
            _event("message_stop", {"type": "message_stop"}),
        ]
    return frames


def _chat_tool_call(finish_reason: str | None) -> list[str]:
    """Chat Completions: a tool call whose arguments stop mid-way, then the finish reason (or the stream just ends)."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    frames = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                          "function": {"name": "get_weather", "arguments": ""}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]})]
    if finish_reason is not None:
        frames += [chunk({}, finish_reason),
                   _data({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt", "choices": [],
                          "usage": {"prompt_tokens": 9, "completion_tokens": 8, "total_tokens": 17}}),
                   "data: [DONE]\n\n"]
    return frames


@pytest.mark.parametrize(("client_type", "frames"), [("ant-messages", _messages_tool_call("max_tokens")),
                                                     ("openai-chat", _chat_tool_call("length"))],
                         ids=["messages", "chat"])
def test_arguments_cut_by_the_token_limit_say_raise_max_tokens(tmp_path, client_type, frames):
    events, error = _replayed(tmp_path, client_type, frames)
    assert type(error).__name__ == "ToolCallArgumentParseError" and events
    hint = error_hint(error, None, client_type)
    assert "token limit" in hint and "--max-tokens" in hint and "not a JSON object" not in hint
    assert classify_exception(error, len(events)) == "error"  # the provider ended the response itself


@pytest.mark.parametrize(("client_type", "frames"), [("ant-messages", _messages_tool_call(None)),
                                                     ("openai-chat", _chat_tool_call(None))],
                         ids=["messages", "chat"])
def test_arguments_cut_with_the_connection_say_retry_and_the_turn_is_incomplete(tmp_path, client_type, frames):
    events, error = _replayed(tmp_path, client_type, frames)
    assert type(error).__name__ == "ToolCallArgumentParseError" and events  # mmsp parsed what came, at the end
    hint = error_hint(error, None, client_type)
    assert "connection was lost" in hint and "retrying" in hint and "not a JSON object" not in hint
    assert classify_exception(error, len(events)) == "incomplete"


def test_a_turn_whose_connection_went_in_the_arguments_is_incomplete_in_the_notebook(fresh_session, tmp_path,
                                                                                    monkeypatch):
    from mmsp_notebook import ask

    monkeypatch.setenv("HINTS_TEST_KEY", "hints-test-key-123456")
    path = tmp_path / "cut.sse"
    path.write_text("".join(_messages_tool_call(None)), encoding="utf-8")
    with DemoServer(replay=path, instant=True) as server:
        out = io.StringIO()
        turn = ask("weather?", model="captured", client_type="ant-messages", base_url=server.root_url,
                   api_key_env="HINTS_TEST_KEY", stream=out)
    assert turn.status == "incomplete" and "connection was lost" in out.getvalue()
    [call] = turn.tool_calls  # what arrived is kept, unparsed
    assert call["arguments"] is None and call["raw_arguments"] == '{"city": "Pa'


def test_malformed_arguments_say_rephrase_on_every_protocol(demo_server):
    tools = {"tools": [{"name": "get_weather", "description": "x", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}]}

    async def one(client_type: str) -> BaseException:
        client = demo_server.client("demo+bad-args", client_type)
        try:
            async for _ in client.streaming_response(USER, tools):
                pass
        except Exception as exc:
            return exc
        raise AssertionError("no error")

    for client_type in CLIENTS:
        error = asyncio.run(one(client_type))
        # on MMSP's wire the server's ToolCallArgumentParseError arrives as an UpstreamError naming it
        assert "ToolCallArgumentParseError" in (type(error).__name__, getattr(error, "error_type", None))
        hint = error_hint(error, None, client_type)
        assert "not a JSON object (malformed, not cut off)" in hint and "rephrase" in hint, client_type


def _mmsp_wire_error(exc: BaseException) -> list[str]:
    """An MMSP server's stream: a few deltas, then the error its client raised, as mmsp's server sends it."""
    delta = {"role": "assistant", "event_type": "delta", "usage_metadata": None, "finish_reason": None,
             "created_at": 1, "content_items": [{"type": "tool_call.delta", "name": "get_weather", "arguments": "",
                                                 "tool_call_id": "call_1"}]}
    return [_data(delta), _data({"error": to_wire_error(exc)}), "data: [DONE]\n\n"]


def test_errors_over_the_mmsp_wire_get_the_hint_of_the_error_they_name(tmp_path):
    try:
        parse_tool_call_arguments('{"city": "Pa', "AntMessagesClient", "get_weather", "toolu_1")
    except Exception as exc:
        cut = exc
    events, error = _replayed(tmp_path, "mmsp", _mmsp_wire_error(cut))
    assert type(error).__name__ == "UpstreamError" and error.error_type == "ToolCallArgumentParseError"
    hint = error_hint(error, None, "mmsp")
    assert "cut off" in hint and "--max-tokens" in hint and "retry" in hint  # why stayed on the server

    _, error = _replayed(tmp_path, "mmsp", _mmsp_wire_error(
        IncompleteStreamError("OpenaiChatClient", ("finish_reason",), None, None)))
    assert error_hint(error, None, "mmsp").startswith("The stream was cut short")
    assert classify_exception(error, 1) == "incomplete"

    _, error = _replayed(tmp_path, "mmsp", _mmsp_wire_error(StreamProtocolError("OpenaiChatClient", "two fidelities")))
    assert "mmsp's client broke its own streaming protocol" in error_hint(error, None, "mmsp")

    _, error = _replayed(tmp_path, "mmsp", _mmsp_wire_error(EmptyResponseError("AntMessagesClient", "unknown")))
    assert error_hint(error, None, "mmsp").startswith("The model refused")


def test_a_stream_protocol_error_of_mmsps_own_client_gets_its_hint(tmp_path):
    # a tool call whose first delta has neither a name nor an id: mmsp's client cannot open the item
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt",
             "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
                          "finish_reason": None}]}
    _, error = _replayed(tmp_path, "openai-chat", [_data(chunk), "data: [DONE]\n\n"])
    assert type(error).__name__ == "StreamProtocolError"
    assert "a bug in mmsp, not in your prompt" in error_hint(error, None, "openai-chat")


# ------------------------------------------------------------------------------------------ refusals
def test_an_empty_refusal_says_the_model_refused(tmp_path):
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
    frames = [_event("message_start", {"type": "message_start", "message": message}),
              _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": None},
                                       "usage": {"output_tokens": 1}}),
              _event("message_stop", {"type": "message_stop"})]
    events, error = _replayed(tmp_path, "ant-messages", frames)
    # mmsp maps Anthropic's "refusal" to "unknown", and its message speaks of thinking that never came
    assert isinstance(error, EmptyResponseError) and error.finish_reason == "unknown" and events == []
    hint = error_hint(error, None, "ant-messages")
    assert hint.startswith("The model refused") and "--wire" in hint
    # an empty answer for a reason mmsp does name is not called a refusal
    other = EmptyResponseError("OpenaiChatClient", "stop")
    assert not error_hint(other, None, "openai-chat").startswith("The model refused")


# ------------------------------------------------------------------------------------------ the demo's faults
@pytest.mark.parametrize("client_type", CLIENTS)
def test_the_demos_injected_faults_say_so_not_check_your_key(demo_server, client_type):
    _, error = asyncio.run(_stream(demo_server, "demo+401", client_type))
    hint = error_hint(error, None, client_type)
    assert hint.startswith("The server refused the key: this is the demo's injected +401 fault")
    assert "API_KEY" not in hint and "without +401" in hint
    _, error = asyncio.run(_stream(demo_server, "demo+429", client_type))
    assert "injected +429 fault" in error_hint(error, None, client_type)
    if client_type != "openai-responses":  # (mmsp's Responses client does not read the error event)
        _, error = asyncio.run(_stream(demo_server, "demo+error", client_type))
        assert error_hint(error, None, client_type).startswith("This is the demo's injected +error fault")


# ------------------------------------------------------------------------------------------ unknown models
def _routing_error(model: str, client_type: str | None = None) -> BaseException | None:
    """The error mmsp's client raises for a model it has no client for (None: it has one)."""
    from mmsp import AutoLLMClient
    from mmsp.errors import RoutingError

    try:
        AutoLLMClient(model=model, client_type=client_type)
    except RoutingError as exc:
        return exc
    return None


def test_a_model_no_client_is_known_for_gets_the_nearest_name():
    from mmsp import list_supported_models

    hint = error_hint(_routing_error("dem"), None, None)
    assert hint.startswith("Did you mean 'demo'? %mmsp models lists") and "--client-type" in hint
    # a listed model with its first letter dropped, where that leaves a family mmsp does not know
    listed = sorted({m["model"] for m in list_supported_models()})
    typo, near = next((m[1:], m) for m in listed if m[1:] not in listed and _routing_error(m[1:]) is not None)
    assert error_hint(_routing_error(typo), None, None).startswith(f"Did you mean {near!r}?")
    far = error_hint(_routing_error("zzqx-unknown"), None, None)
    assert far.startswith("%mmsp models lists") and "Did you mean" not in far
    assert error_hint(_routing_error("dem", "nope-client"), None, "nope-client").startswith("Name one of the client types")


@pytest.mark.parametrize("client_type", ["mmsp", "openai-chat"])
def test_a_frame_that_is_not_json_is_not_called_a_dropped_connection(tmp_path, client_type):
    # "Expecting property name enclosed in double quotes" holds "closed", which is no closed connection
    path = tmp_path / "garbage.sse"
    path.write_text("data: {not json\n\ndata: [DONE]\n\n", encoding="utf-8")
    protocol = {"mmsp": "mmsp", "openai-chat": "chat"}[client_type]
    with DemoServer(replay=path, replay_protocol=protocol, instant=True) as server:
        events, error = asyncio.run(_stream(server, "captured", client_type))
    assert type(error).__name__ == "JSONDecodeError" and not events
    hint = error_hint(error, None, client_type)
    assert "connection" not in hint and "not JSON" in hint and "--client-type" in hint


def test_a_stream_cut_inside_its_last_frame_is_incomplete_and_says_retry_not_check_the_client(tmp_path):
    delta = {"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.delta", "text": "Hello"}],
             "usage_metadata": None, "finish_reason": None}
    cut = _data(delta) + _data({**delta, "content_items": [{"type": "text.delta", "text": " world"}]})[:60]
    events, error = _replayed(tmp_path, "mmsp", [cut])
    assert type(error).__name__ == "JSONDecodeError" and len(events) == 1
    hint = error_hint(error, None, "mmsp")
    assert "cut off inside a frame" in hint and "retrying" in hint and "--client-type" not in hint
    assert classify_exception(error, len(events)) == "incomplete"


def test_a_key_refused_inside_a_stream_says_the_server_refused_it_not_that_none_is_set(fresh_session, monkeypatch,
                                                                                      key_echoing_server):
    """A provider that refuses the key in an error event of a stream begun with HTTP 200 (no status):
    the key was set and sent, so "No API key: set MY_SECRET_VAR" sent the user looking for nothing."""
    from mmsp_notebook import ask

    monkeypatch.setenv("MY_SECRET_VAR", "canary-key-9876543")
    out = io.StringIO()
    turn = ask("hello", model="stream-refusal", client_type="openai-chat", base_url=key_echoing_server,
               api_key_env="MY_SECRET_VAR", stream=out, trace=False)
    assert turn.status == "error" and "Incorrect API key" in turn.error_message
    assert error_hint(turn.error, "MY_SECRET_VAR", "openai-chat") == "The server refused the key: check MY_SECRET_VAR."
    assert "The server refused the key: check MY_SECRET_VAR." in out.getvalue() and "No API key" not in out.getvalue()


@pytest.mark.parametrize("client_type", ["mmsp", "openai-chat"])
def test_an_upstream_the_wire_proxy_cannot_reach_says_could_not_connect(fresh_session, monkeypatch, client_type):
    # through --wire the client gets the proxy's 502, not a connection error: its hint was "Run %mmsp error"
    monkeypatch.setenv("LOOPBACK_API_KEY", "loopback-key-0000")
    import socket

    import mmsp_notebook as mn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # (closed: nothing listens there)
    turn = mn.ask("hi", model="m", client_type=client_type, base_url=f"http://127.0.0.1:{port}/v1",
                  api_key_env="LOOPBACK_API_KEY", wire=True, stream=io.StringIO())
    assert turn.status == "error" and "the wire proxy could not reach the upstream" in turn.error_message
    assert error_hint(turn.error).startswith("Could not connect (the wire proxy could not reach it)")


@pytest.mark.parametrize("data", ["iVBORw0KGgoAAAANSU", "QUJDRA"])
def test_media_of_damaged_base64_says_the_server_sent_it(data):
    """It said only "Error: Incorrect padding" and "Run %mmsp error for the full detail"."""
    from sse_scripts import mmsp_event, mmsp_text, script_server

    import mmsp_notebook as mn

    def script(request, authorization):
        item = {"type": "inline_data.delta", "data": data, "mime_type": "image/png"}
        return mmsp_text("hi") + [mmsp_event(item), mmsp_event({**item, "type": "inline_data.done"}),
                                  mmsp_event(stop=True)]

    with script_server(script) as url:
        turn = mn.ask("draw", model="x", client_type="mmsp", base_url=url, trace=False, stream=io.StringIO())
    assert turn.status == "error" and turn.text == "hi"
    assert error_hint(turn.error).startswith("The server sent an image or audio whose base64 is damaged")
