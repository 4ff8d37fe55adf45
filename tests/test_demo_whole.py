"""A Chat Completions, Responses or Messages request that asks for no stream gets the protocol's JSON
body, folded from the very stream the same request with ``"stream": true`` gets; through real HTTP,
checked against the official SDKs' types."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from mmsp_notebook._errors import DemoServerError
from mmsp_notebook.demo import DemoServer
from mmsp_notebook.wire.sse import split_frames

PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}


def request(protocol: str, model: str, prompt: str, tools: bool = False, **extra: Any) -> dict[str, Any]:
    """A request body of `protocol`, without any ``stream`` key."""
    if protocol == "chat":
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
        if tools:
            body["tools"] = [{"type": "function", "function": WEATHER}]
    elif protocol == "responses":
        body = {"model": model, "input": prompt}
        if tools:
            body["tools"] = [{"type": "function", **WEATHER}]
    else:
        body = {"model": model, "max_tokens": 4096, "messages": [{"role": "user", "content": prompt}]}
        if tools:
            body["tools"] = [{"name": WEATHER["name"], "description": WEATHER["description"],
                              "input_schema": WEATHER["parameters"]}]
    return {**body, **extra}


def events(content: bytes) -> list[dict[str, Any]]:
    """The JSON data of every frame of a raw stream (heartbeats and ``[DONE]`` left out)."""
    out = []
    for frame in split_frames(content):
        data = [line[6:] for line in frame.decode().split("\n") if line.startswith("data: ")]
        if data and data != ["[DONE]"]:
            out.append(json.loads("\n".join(data)))
    return out


def streamed(protocol: str, content: bytes) -> dict[str, Any]:
    """What a raw stream says, read from its deltas: text, thinking, calls (name, arguments), finish, usage."""
    said: dict[str, Any] = {"text": "", "thinking": "", "calls": [], "finish": None, "usage": None}
    for event in events(content):
        if protocol == "chat":
            if event.get("usage"):
                said["usage"] = event["usage"]
            for choice in event["choices"]:
                delta = choice["delta"]
                said["text"] += delta.get("content") or ""
                said["thinking"] += "".join(detail.get("text", "") for detail in delta.get("reasoning_details") or []
                                            if detail["type"] == "reasoning.text")
                for call in delta.get("tool_calls") or []:
                    if "id" in call:
                        said["calls"].append([call["function"]["name"], ""])
                    said["calls"][call["index"]][1] += call["function"]["arguments"]
                said["finish"] = choice["finish_reason"] or said["finish"]
        elif protocol == "responses":
            kind = event["type"]
            if kind == "response.output_text.delta":
                said["text"] += event["delta"]
            elif kind == "response.reasoning_summary_text.delta":
                said["thinking"] += event["delta"]
            elif kind == "response.output_item.added" and event["item"]["type"] == "function_call":
                said["calls"].append([event["item"]["name"], ""])
            elif kind == "response.function_call_arguments.delta":
                said["calls"][-1][1] += event["delta"]
            elif kind in ("response.completed", "response.incomplete"):
                said["finish"], said["usage"] = event["response"]["status"], event["response"]["usage"]
        else:
            kind = event["type"]
            if kind == "content_block_start" and event["content_block"]["type"] == "tool_use":
                said["calls"].append([event["content_block"]["name"], ""])
            elif kind == "content_block_delta":
                delta = event["delta"]
                said["text"] += delta.get("text", "")
                said["thinking"] += delta.get("thinking", "")
                if delta["type"] == "input_json_delta":
                    said["calls"][-1][1] += delta["partial_json"]
            elif kind == "message_delta":
                said["finish"], said["usage"] = event["delta"]["stop_reason"], event["usage"]
    return said


def whole(protocol: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a JSON body says, in the terms of :func:`streamed`; parsed with the official SDK's type first."""
    if protocol == "chat":
        completion = ChatCompletion.model_validate(body)
        message = completion.choices[0].message
        details = body["choices"][0]["message"].get("reasoning_details") or []
        return {
            "text": message.content or "",
            "thinking": "".join(detail["text"] for detail in details if detail["type"] == "reasoning.text"),
            "calls": [[call.function.name, call.function.arguments] for call in message.tool_calls or []],
            "finish": completion.choices[0].finish_reason,
            "usage": body["usage"],
        }
    if protocol == "responses":
        response = Response.model_validate(body)
        return {
            "text": response.output_text,
            "thinking": "".join(part.text for item in response.output if item.type == "reasoning" for part in item.summary),
            "calls": [[item.name, item.arguments] for item in response.output if item.type == "function_call"],
            "finish": response.status,
            "usage": body["usage"],
        }
    message = Message.model_validate(body)
    return {
        "text": "".join(block.text for block in message.content if block.type == "text"),
        "thinking": "".join(block.thinking for block in message.content if block.type == "thinking"),
        "calls": [[block.name, block.input] for block in message.content if block.type == "tool_use"],
        "finish": message.stop_reason,
        "usage": body["usage"],
    }


def both(server: DemoServer, protocol: str, body: dict[str, Any], stream: Any = None) -> tuple[httpx.Response, httpx.Response]:
    """The answers to `body` without a stream (``stream`` key set to `stream` unless None) and with one."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        plain = http.post(PATHS[protocol], json=body if stream is None else {**body, "stream": stream})
        flowing = http.post(PATHS[protocol], json={**body, "stream": True})
    return plain, flowing


@pytest.mark.parametrize("stream", [None, False])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_request_without_a_stream_gets_the_streams_answer_as_one_json_body(demo_server: DemoServer, protocol: str,
                                                                             stream: Any) -> None:
    plain, flowing = both(demo_server, protocol, request(protocol, "demo", "Tell me about tides"), stream)
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    assert plain.headers["x-demo-request-id"] and b"data:" not in plain.content
    body = plain.json()
    assert body["object" if protocol != "messages" else "type"] == {"chat": "chat.completion", "responses": "response",
                                                                     "messages": "message"}[protocol]
    said, heard = whole(protocol, body), streamed(protocol, flowing.content)
    assert said == heard
    assert "Tell me about tides" in said["text"] and said["thinking"] and said["calls"] == []
    assert said["finish"] == {"chat": "stop", "responses": "completed", "messages": "end_turn"}[protocol]
    record = demo_server.transcript(plain.headers["x-demo-request-id"])
    assert (record.status, record.outcome, record.response) == (200, "complete", plain.content)


def test_the_bodies_carry_each_protocols_reasoning_fidelity(demo_server: DemoServer) -> None:
    chat, chat_stream = both(demo_server, "chat", request("chat", "demo", "hi"))
    details = chat.json()["choices"][0]["message"]["reasoning_details"]
    assert [detail["type"] for detail in details] == ["reasoning.text", "reasoning.encrypted"]
    encrypted = [detail for event in events(chat_stream.content) for choice in event["choices"]
                 for detail in choice["delta"].get("reasoning_details") or [] if detail["type"] == "reasoning.encrypted"]
    assert details[1] == encrypted[0]
    responses, responses_stream = both(demo_server, "responses", request("responses", "demo", "hi"))
    reasoning = responses.json()["output"][0]
    completed = events(responses_stream.content)[-1]["response"]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"] == completed["output"][0]["encrypted_content"]
    messages, messages_stream = both(demo_server, "messages", request("messages", "demo", "hi"))
    thinking = messages.json()["content"][0]
    signatures = [event["delta"]["signature"] for event in events(messages_stream.content)
                  if event["type"] == "content_block_delta" and event["delta"]["type"] == "signature_delta"]
    assert thinking["type"] == "thinking" and thinking["signature"] == signatures[0] != ""


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_tool_call_answer_gives_its_calls(demo_server: DemoServer, protocol: str) -> None:
    body = request(protocol, "demo", "What is the weather in Paris?", tools=True)
    plain, flowing = both(demo_server, protocol, body)
    assert plain.status_code == 200
    said, heard = whole(protocol, plain.json()), streamed(protocol, flowing.content)
    [(name, arguments)] = said["calls"]
    assert name == "get_weather"
    parsed = arguments if protocol == "messages" else json.loads(arguments)
    assert parsed["location"] == "Paris"
    assert [[name, json.loads(arguments)] for name, arguments in heard["calls"]] == [["get_weather", parsed]]
    assert said["usage"] == heard["usage"] and said["text"] == heard["text"]
    assert said["finish"] == {"chat": "tool_calls", "responses": "completed", "messages": "tool_use"}[protocol]
    if protocol == "chat":
        call = plain.json()["choices"][0]["message"]["tool_calls"][0]
        assert call["id"].startswith("call_") and call["type"] == "function"


@pytest.mark.parametrize("protocol", list(PATHS))
def test_an_answer_cut_by_max_tokens_says_so(demo_server: DemoServer, protocol: str) -> None:
    limit = {"chat": "max_completion_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}[protocol]
    plain, flowing = both(demo_server, protocol, request(protocol, "demo", "hi", **{limit: 5}))
    said = whole(protocol, plain.json())
    assert said == streamed(protocol, flowing.content)
    assert said["finish"] == {"chat": "length", "responses": "incomplete", "messages": "max_tokens"}[protocol]
    if protocol == "responses":
        assert plain.json()["incomplete_details"] == {"reason": "max_output_tokens"}


def test_the_official_sdks_read_the_bodies(demo_server: DemoServer) -> None:
    prompt = [{"role": "user", "content": "What is the weather in Paris?"}]
    with openai.OpenAI(base_url=demo_server.base_url, api_key="demo-key") as oa:
        completion = oa.chat.completions.create(model="demo", messages=prompt)
        response = oa.responses.create(model="demo", input="What is the weather in Paris?",
                                       tools=[{"type": "function", "strict": False, **WEATHER}])
    with anthropic.Anthropic(base_url=demo_server.root_url, api_key="demo-key") as an:
        message = an.messages.create(model="demo", max_tokens=1024, messages=prompt)
    assert completion.object == "chat.completion" and "weather in Paris" in (completion.choices[0].message.content or "")
    assert completion.usage is not None and completion.usage.completion_tokens_details.reasoning_tokens > 0
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments)["location"] == "Paris"
    assert message.type == "message" and message.stop_reason == "end_turn"
    assert message.content[-1].type == "text" and "weather in Paris" in message.content[-1].text
    # the same answer whichever protocol carried it
    assert completion.choices[0].message.content == message.content[-1].text


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_streamed_request_is_streamed_as_before(demo_server: DemoServer, protocol: str) -> None:
    _, flowing = both(demo_server, protocol, request(protocol, "demo", "hi"))
    assert flowing.status_code == 200 and flowing.headers["content-type"].startswith("text/event-stream")
    first = split_frames(flowing.content)[0]
    assert first.startswith({"chat": b"data: {", "responses": b"event: response.created",
                             "messages": b"event: message_start"}[protocol])
    assert streamed(protocol, flowing.content)["usage"] is not None


def test_the_mmsp_wire_streams_whatever_the_body_says(demo_server: DemoServer) -> None:
    message = {"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}
    answer = httpx.post(demo_server.base_url + "/stream", json={"model": "demo", "messages": [message], "config": {}},
                        timeout=30)
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert json.loads(split_frames(answer.content)[-2][6:])["event_type"] == "stop"


@pytest.mark.parametrize("protocol", list(PATHS))
def test_scripted_refusals_keep_their_status_and_error_body(demo_server: DemoServer, protocol: str) -> None:
    plain, flowing = both(demo_server, protocol, request(protocol, "demo+429=7", "hi"))
    assert plain.status_code == flowing.status_code == 429 and plain.json() == flowing.json()
    assert plain.headers["retry-after"] == "7"
    error = plain.json()["error"]
    assert error["demo_fault"] == "429" and "Rate limit" in error["message"]


@pytest.mark.parametrize("protocol", list(PATHS))
def test_an_in_stream_error_is_an_http_error_with_the_same_error_object(demo_server: DemoServer, protocol: str) -> None:
    plain, flowing = both(demo_server, protocol, request(protocol, "demo+error", "hi"))
    assert plain.status_code == 404 and plain.headers["content-type"] == "application/json"
    [sent] = [event for event in events(flowing.content) if "error" in event or event.get("type") == "error"][:1]
    if protocol == "messages":
        assert plain.json() == sent
    elif protocol == "chat":
        assert plain.json() == {"error": sent["error"]}
    else:
        error = plain.json()["error"]
        assert (error["code"], error["message"], error["demo_fault"]) == (sent["code"], sent["message"], "error")
    assert demo_server.transcript(plain.headers["x-demo-request-id"]).status == 404


@pytest.mark.parametrize("protocol", list(PATHS))
def test_an_answer_without_its_finish_is_not_a_success(demo_server: DemoServer, protocol: str) -> None:
    with httpx.Client(base_url=demo_server.base_url, timeout=30) as http:
        plain = http.post(PATHS[protocol], json=request(protocol, "demo+nostop", "hi"))
    assert plain.status_code == 502
    error = plain.json()["error"]
    assert error["demo_fault"] == "nostop" and "Injected fault +nostop of demo+nostop" in error["message"]
    assert error["type"] == ("api_error" if protocol == "messages" else "server_error")


def test_the_sdks_raise_their_own_errors_for_scripted_faults(demo_server: DemoServer) -> None:
    prompt = [{"role": "user", "content": "hi"}]
    with openai.OpenAI(base_url=demo_server.base_url, api_key="demo-key", max_retries=0) as oa:
        with pytest.raises(openai.RateLimitError):
            oa.chat.completions.create(model="demo+429", messages=prompt)
        with pytest.raises(openai.NotFoundError, match=r"Injected fault \+error"):
            oa.responses.create(model="demo+error", input="hi")
        with pytest.raises(openai.APIConnectionError):
            oa.chat.completions.create(model="demo+cut-text", messages=prompt)
    with anthropic.Anthropic(base_url=demo_server.root_url, api_key="demo-key", max_retries=0) as an:
        with pytest.raises(anthropic.InternalServerError, match=r"Injected fault \+nostop"):
            an.messages.create(model="demo+nostop", max_tokens=100, messages=prompt)


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_cut_answer_closes_the_connection_mid_body(demo_server: DemoServer, protocol: str) -> None:
    with httpx.Client(base_url=demo_server.base_url, timeout=30) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            http.post(PATHS[protocol], json=request(protocol, "demo+cut-text", "hi"))
    record = demo_server.transcripts[-1]
    assert record.outcome == "cut" and record.response.startswith(b"{") and record.response[-1:] != b"}"


def test_bad_arguments_travel_as_sent_where_the_protocol_carries_a_string(demo_server: DemoServer) -> None:
    chat, chat_stream = both(demo_server, "chat", request("chat", "demo+bad-args", "hi"))
    said = whole("chat", chat.json())
    assert chat.status_code == 200 and said["calls"] == streamed("chat", chat_stream.content)["calls"]
    with pytest.raises(ValueError):
        json.loads(said["calls"][0][1])
    # Messages carries a call's input as an object: arguments that do not parse are an error
    messages = httpx.post(demo_server.base_url + "/messages", json=request("messages", "demo+bad-args", "hi"), timeout=30)
    assert messages.status_code == 502 and messages.json()["error"]["demo_fault"] == "bad-args"
    assert "not valid JSON" in messages.json()["error"]["message"]


def test_a_stalled_answer_ends_when_its_client_goes_away(demo_server: DemoServer) -> None:
    with httpx.Client(base_url=demo_server.base_url, timeout=0.5) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/chat/completions", json=request("chat", "demo+stall", "hi"))
    record = demo_server.transcripts[-1]
    deadline = time.monotonic() + 5
    while record.outcome != "client_gone":
        assert time.monotonic() < deadline, record.outcome
        time.sleep(0.02)
    assert record.response == b""


def test_a_json_answer_is_not_saved_as_a_replayable_stream(demo_server: DemoServer, tmp_path) -> None:
    plain, flowing = both(demo_server, "chat", request("chat", "demo", "hi"))
    with pytest.raises(DemoServerError, match="not an SSE stream"):
        demo_server.save_transcript(plain.headers["x-demo-request-id"], tmp_path / "plain.sse")
    saved = demo_server.save_transcript(flowing.headers["x-demo-request-id"], tmp_path / "flowing.sse")
    assert saved.read_bytes() == flowing.content


# ---------------------------------------------------------------------------------------------
# a replayed transcript: folded for a request without a stream, verbatim for a streamed one


def captured(server: DemoServer, protocol: str, body: dict[str, Any], path: Any) -> bytes:
    """A transcript of `server`'s stream for `body`, saved at `path` as ``--replay`` reads it; its bytes."""
    flowing = httpx.post(server.base_url + PATHS[protocol], json={**body, "stream": True}, timeout=30)
    assert flowing.status_code == 200
    return server.save_transcript(flowing.headers["x-demo-request-id"], path).read_bytes()


def parsed(said: dict[str, Any]) -> dict[str, Any]:
    """`said` with each call's arguments parsed (Messages carries them as an object, the others as a string)."""
    calls = [[name, json.loads(arguments) if isinstance(arguments, str) else arguments] for name, arguments in said["calls"]]
    return {**said, "calls": calls}


def sdk_answer(server: DemoServer, protocol: str) -> Any:
    """The official SDK's non-streaming call of `protocol` on `server`, over HTTP: its parsed answer."""
    prompt = [{"role": "user", "content": "something else entirely"}]
    if protocol == "messages":
        with anthropic.Anthropic(base_url=server.root_url, api_key="demo-key", max_retries=0) as an:
            return an.messages.create(model="claude-x", max_tokens=1024, messages=prompt)
    with openai.OpenAI(base_url=server.base_url, api_key="demo-key", max_retries=0) as oa:
        if protocol == "chat":
            return oa.chat.completions.create(model="gpt-x", messages=prompt, stream=False)
        return oa.responses.create(model="gpt-x", input="something else entirely")


@pytest.mark.parametrize("tools", [False, True])
@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_replay_answers_a_request_without_a_stream_with_its_transcript_folded(demo_server: DemoServer, tmp_path,
                                                                                protocol: str, tools: bool) -> None:
    prompt = "What is the weather in Paris?" if tools else "Tell me about tides"
    capture = captured(demo_server, protocol, request(protocol, "demo", prompt, tools=tools), tmp_path / "t.sse")
    heard = parsed(streamed(protocol, capture))
    assert heard["thinking"] and heard["usage"] and (heard["calls"] if tools else "Tell me about tides" in heard["text"])
    with DemoServer(instant=True, replay=tmp_path / "t.sse") as replaying:
        plain, flowing = both(replaying, protocol, request(protocol, "any-model", "something else"))
        also, _ = both(replaying, protocol, request(protocol, "any-model", "something else"), stream=False)
        answer = sdk_answer(replaying, protocol)
        record = replaying.transcript(plain.headers["x-demo-request-id"])
    assert plain.status_code == also.status_code == 200 and plain.headers["content-type"] == "application/json"
    assert parsed(whole(protocol, plain.json())) == parsed(whole(protocol, also.json())) == heard
    assert (record.status, record.outcome, record.response) == (200, "complete", plain.content)
    # the SDK's own parse of the body it read says the same (its fields as set from the JSON)
    assert parsed(whole(protocol, answer.model_dump(exclude_unset=True))) == heard
    # a streamed request still gets the transcript byte for byte
    assert flowing.headers["content-type"].startswith("text/event-stream") and flowing.content == capture


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_replay_cut_short_is_not_a_success(demo_server: DemoServer, tmp_path, protocol: str) -> None:
    frames = split_frames(captured(demo_server, protocol, request(protocol, "demo", "hi"), tmp_path / "whole.sse"))
    half = len(frames) // 2
    broken = frames[half][: frames[half].index(b"data:") + 12]  # a capture that stopped mid-frame
    cuts = {"ended": b"".join(frames[:half]), "mid-frame": b"".join(frames[:half]) + broken}
    for cut, data in cuts.items():
        path = tmp_path / f"{cut}.sse"
        path.write_bytes(data)
        with DemoServer(instant=True, replay=path) as replaying:
            plain, flowing = both(replaying, protocol, request(protocol, "any-model", "hi"))
            with pytest.raises((openai.InternalServerError, anthropic.InternalServerError), match="Replayed transcript"):
                sdk_answer(replaying, protocol)
            record = replaying.transcript(plain.headers["x-demo-request-id"])
        assert plain.status_code == 502 and (record.status, record.outcome) == (502, "error")
        error = plain.json()["error"]
        assert error["message"].startswith(f"Replayed transcript {path}: ") and "not answered as a success" in error["message"]
        assert error["type"] == ("api_error" if protocol == "messages" else "server_error") and "demo_fault" not in error
        if cut == "mid-frame":
            assert f"frame {half + 1} is not an event" in error["message"]
        assert flowing.status_code == 200 and flowing.content == data  # streamed as captured, cut and all


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_replays_in_stream_error_is_the_http_error_the_demo_answers(demo_server: DemoServer, tmp_path,
                                                                      protocol: str) -> None:
    body = request(protocol, "demo+error", "hi")
    own, _ = both(demo_server, protocol, body)
    capture = captured(demo_server, protocol, body, tmp_path / "error.sse")
    with DemoServer(instant=True, replay=tmp_path / "error.sse") as replaying:
        plain, flowing = both(replaying, protocol, request(protocol, "any-model", "hi"))
    assert plain.status_code == own.status_code == 404 and plain.json() == own.json()
    assert "Injected fault +error" in json.dumps(plain.json()) and flowing.content == capture


@pytest.mark.parametrize("form", ["error event", "response.failed alone"])
def test_a_replayed_responses_failure_is_an_http_error_typed_by_its_status(demo_server: DemoServer, tmp_path,
                                                                          form: str) -> None:
    body = request("responses", "demo+error", "hi")
    own, _ = both(demo_server, "responses", body)
    capture = captured(demo_server, "responses", body, tmp_path / "error.sse")
    assert b"event: error" in capture and b"response.failed" in capture
    if form == "response.failed alone":  # (no error event before it)
        capture = b"".join(frame for frame in split_frames(capture) if not frame.startswith(b"event: error"))
    for code, status, kind in (("model_not_found", 404, "invalid_request_error"), ("server_error", 500, "server_error")):
        path = tmp_path / f"{code}.sse"
        path.write_bytes(capture.replace(b'"code":"model_not_found"', f'"code":"{code}"'.encode()))
        with DemoServer(instant=True, replay=path) as replaying:
            plain, _ = both(replaying, "responses", request("responses", "any-model", "hi"))
        assert plain.status_code == status
        assert plain.json()["error"] == {**own.json()["error"], "code": code, "type": kind}


def test_a_replayed_chat_stream_captured_without_usage_ends_at_its_done(demo_server: DemoServer, tmp_path) -> None:
    # a Chat stream asked without stream_options.include_usage has no usage chunk: it ends at [DONE]
    capture = captured(demo_server, "chat", request("chat", "demo", "Tell me about tides"), tmp_path / "t.sse")
    kept = []
    for frame in split_frames(capture):
        data = [line[6:] for line in frame.decode().split("\n") if line.startswith("data: ")]
        if data and data != ["[DONE]"]:
            chunk = json.loads("\n".join(data))
            if chunk.get("usage") is not None:
                if not chunk.get("choices"):
                    continue  # the usage chunk
                frame = f"data: {json.dumps({**chunk, 'usage': None})}\n\n".encode()
        kept.append(frame)
    plain_capture = b"".join(kept)
    assert b'"prompt_tokens"' not in plain_capture and plain_capture.rstrip().endswith(b"data: [DONE]")
    heard = streamed("chat", capture)
    (tmp_path / "plain.sse").write_bytes(plain_capture)
    with DemoServer(instant=True, replay=tmp_path / "plain.sse") as replaying:
        plain, flowing = both(replaying, "chat", request("chat", "any-model", "hi"))
        answer = sdk_answer(replaying, "chat")
    assert plain.status_code == 200 and plain.json()["usage"] is None
    assert whole("chat", plain.json()) == {**heard, "usage": None}
    assert isinstance(answer, ChatCompletion) and answer.usage is None and answer.choices[0].finish_reason == "stop"
    assert flowing.content == plain_capture
    # the same capture cut before its [DONE] is unfinished: a 502, as any cut transcript
    cut = plain_capture[: plain_capture.rindex(b"data: [DONE]")]
    (tmp_path / "cut.sse").write_bytes(cut)
    with DemoServer(instant=True, replay=tmp_path / "cut.sse") as replaying:
        plain, _ = both(replaying, "chat", request("chat", "any-model", "hi"))
    assert plain.status_code == 502 and "not answered as a success" in plain.json()["error"]["message"]


@pytest.mark.parametrize("protocol", list(PATHS))
def test_a_transcript_with_crlf_or_cr_line_ends_is_folded_as_with_lf(demo_server: DemoServer, tmp_path, protocol: str) -> None:
    """SSE lets a line end with CRLF, LF or CR; a capture saved on Windows (or by a server that writes
    CRLF) streamed as captured, but without a stream its ``[DONE]`` or JSON read with a CR was a 502."""
    capture = captured(demo_server, protocol, request(protocol, "demo", "What is the weather in Paris?", tools=True),
                       tmp_path / "lf.sse")
    bodies = {}
    for name, data in (("lf", capture), ("crlf", capture.replace(b"\n", b"\r\n")), ("cr", capture.replace(b"\n", b"\r"))):
        (tmp_path / f"{name}.sse").write_bytes(data)
        with DemoServer(instant=True, replay=tmp_path / f"{name}.sse") as replaying:
            plain, flowing = both(replaying, protocol, request(protocol, "any-model", "something else"))
        assert plain.status_code == 200 and flowing.content == data, (name, plain.text[:300])
        bodies[name] = parsed(whole(protocol, plain.json()))
    assert bodies["crlf"] == bodies["cr"] == bodies["lf"]
