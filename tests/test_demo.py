"""The demo model server, through real HTTP and the real mmsp clients."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import string
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from helpers import run_with_timeout
from hypothesis import given
from hypothesis import strategies as st
from mmsp import IncompleteStreamError, ToolCallArgumentParseError, UpstreamError
from mmsp.abort_signal import AbortSignal

from mmsp_notebook._errors import DemoServerError
from mmsp_notebook.demo import DEMO_MODELS, PCM_MIME_TYPE, XSS_PAYLOADS, DemoServer, parse_model
from mmsp_notebook.demo._scenario import tokenize
from mmsp_notebook.wire.sse import detect_protocol, split_frames

CLIENTS = ["mmsp", "openai-chat", "openai-responses", "ant-messages"]

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1},
        },
        "required": ["location"],
    },
}
CLOCK = {
    "name": "get_local_time",
    "description": "Local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content_items": [{"type": "text.done", "text": text}]}


async def aclose(client: Any) -> None:
    """Close the HTTP client under an mmsp client on the loop it ran on (its finalizer would use another)."""
    inner = client._client._client
    await (inner.aclose() if isinstance(inner, httpx.AsyncClient) else inner.close())


async def collect(
    server: DemoServer,
    client_type: str,
    model: str,
    messages: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Every event the client yields, and the exception that ended the stream, if any."""
    client = server.client(model, client_type)
    events: list[dict[str, Any]] = []
    try:
        async for event in client.streaming_response(messages, dict(config or {})):
            events.append(event)
    except Exception as exc:
        return events, exc
    finally:
        await aclose(client)
    return events, None


def stream(server: DemoServer, client_type: str, model: str, messages: list, config: dict | None = None) -> list[dict]:
    """The events of a stream that must succeed, checked against the grammar."""
    events, error = asyncio.run(collect(server, client_type, model, messages, config))
    assert error is None, f"{client_type} raised {type(error).__name__}: {error}"
    check_grammar(events)
    return events


GROWING = {"text": "text", "thinking": "thinking", "tool_call": "arguments", "inline_data": "data", "inline_thinking": "data", "embedding": "embedding"}


def check_grammar(events: list[dict[str, Any]], complete: bool = True) -> list[dict[str, Any]]:
    """Check the UniEvent grammar; returns the done items in order.

    stream := delta_event* stop_event; group := K.delta+ K.done, groups never interleave; one item
    per delta event; the done item is the join of its deltas; a call's first delta names it.
    """
    assert events, "no events"
    stops = [index for index, event in enumerate(events) if event["event_type"] == "stop"]
    if complete:
        assert stops == [len(events) - 1], f"stop events at {stops} of {len(events)}"
    else:
        assert stops == []
    done_items: list[dict[str, Any]] = []
    group: str | None = None
    deltas: list[dict[str, Any]] = []
    for event in events[: len(events) - len(stops)]:
        assert event["role"] == "assistant"
        assert event["event_type"] == "delta"
        assert event["usage_metadata"] is None and event["finish_reason"] is None
        assert isinstance(event["created_at"], int)
        assert len(event["content_items"]) == 1, event
        item = event["content_items"][0]
        kind, _, phase = item["type"].partition(".")
        assert kind in GROWING, item["type"]
        if phase == "delta":
            if group is None:
                group = kind
                if kind == "tool_call":
                    assert item["name"] and item["tool_call_id"], item
            else:
                assert kind == group, f"{item['type']} inside an open {group} group"
                if kind == "tool_call":
                    assert item["name"] == "" and item["tool_call_id"] == "", item
            deltas.append(item)
        else:
            assert phase == "done", item["type"]
            assert group == kind, f"{item['type']} closes {group}"
            field = GROWING[kind]
            pieces = [delta[field] for delta in deltas]
            if kind == "tool_call":
                assert item["arguments"] == json.loads("".join(pieces))
                assert item["name"] == deltas[0]["name"] and item["tool_call_id"] == deltas[0]["tool_call_id"]
            elif kind == "embedding":
                assert item[field] == [value for piece in pieces for value in piece]
            elif kind in ("inline_data", "inline_thinking"):
                assert item[field] == b"".join(pieces)
                assert all(delta["mime_type"] == item["mime_type"] for delta in deltas)
            else:
                assert item[field] == "".join(pieces)
            fidelities = [delta["fidelity"] for delta in deltas if delta.get("fidelity")]
            assert len(fidelities) <= 1
            if fidelities:
                assert item["fidelity"] == fidelities[0]
            done_items.append(item)
            group, deltas = None, []
    if complete:
        assert group is None, f"the {group} group was never closed"
        stop = events[-1]
        assert stop["content_items"] == []
        assert set(stop["usage_metadata"]) == {"cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"}
        assert stop["finish_reason"] in ("stop", "length", "tool_call", "unknown")
    return done_items


def done(events: list[dict], kind: str) -> list[dict]:
    return [event["content_items"][0] for event in events if event["content_items"] and event["content_items"][0]["type"] == f"{kind}.done"]


def deltas(events: list[dict], kind: str) -> list[dict]:
    return [event["content_items"][0] for event in events if event["content_items"] and event["content_items"][0]["type"] == f"{kind}.delta"]


def check_usage(events: list[dict]) -> None:
    """Thoughts are the thinking fragments, response every other fragment, cached 0."""
    usage = events[-1]["usage_metadata"]
    assert usage["prompt_tokens"] > 0
    assert usage["cached_tokens"] == 0
    thinking = [item for item in deltas(events, "thinking") if item["thinking"]]
    assert usage["thoughts_tokens"] == len(thinking)
    response = [item for item in deltas(events, "text") if item["text"]]
    response += [item for item in deltas(events, "tool_call") if item["arguments"]]
    response += deltas(events, "inline_data")
    assert usage["response_tokens"] == len(response)


# ---------------------------------------------------------------------------------------------
# scenarios through every client


@pytest.mark.parametrize("client_type", CLIENTS)
def test_plain_text_and_thinking(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("Tell me about Python generators")])
    [thinking] = done(events, "thinking")
    [text] = done(events, "text")
    assert "Python generators" in thinking["thinking"]
    assert thinking["fidelity"], "the thinking carries its signature-like fidelity"
    body = text["text"]
    assert body.startswith("## ") and "\n- **First**" in body and "| Word |" in body and "```python" in body
    assert "Python generators" in body
    assert len(deltas(events, "text")) > 20
    assert events[-1]["finish_reason"] == "stop"
    check_usage(events)


def test_same_answer_on_every_protocol(demo_server: DemoServer) -> None:
    answers = {}
    for client_type in CLIENTS:
        events = stream(demo_server, client_type, "demo", [user("Compare tea and coffee")])
        answers[client_type] = (done(events, "thinking")[0]["thinking"], done(events, "text")[0]["text"], events[-1]["usage_metadata"])
    assert len({json.dumps(answer, sort_keys=True) for answer in answers.values()}) == 1


def test_thinking_fidelity_per_protocol(demo_server: DemoServer) -> None:
    fidelity = {
        client_type: done(stream(demo_server, client_type, "demo", [user("hello there")]), "thinking")[0]["fidelity"]
        for client_type in CLIENTS
    }
    assert set(fidelity["mmsp"]) == {"signature"}
    assert set(fidelity["ant-messages"]) == {"signature"}
    assert fidelity["openai-chat"]["format"] == "demo-v1" and fidelity["openai-chat"]["encrypted_content"]
    assert fidelity["openai-responses"]["channel"] == "summary" and fidelity["openai-responses"]["encrypted_content"]


@pytest.mark.parametrize("client_type", ["mmsp", "openai-responses", "ant-messages"])
def test_thinking_level_none(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("hello")], {"thinking_level": "none"})
    assert done(events, "thinking") == []
    assert events[-1]["usage_metadata"]["thoughts_tokens"] in (0, None)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_tool_call(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("What's the weather in Paris?")], {"tools": [WEATHER]})
    [call] = done(events, "tool_call")
    assert call["name"] == "get_weather"
    assert call["arguments"] == {"location": "Paris", "unit": "celsius", "days": 3}
    assert len([item for item in deltas(events, "tool_call") if item["arguments"]]) >= 3
    # the Responses protocol has no tool-call status: mmsp maps "completed" to "stop"
    assert events[-1]["finish_reason"] == ("stop" if client_type == "openai-responses" else "tool_call")
    check_usage(events)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_parallel_calls(demo_server: DemoServer, client_type: str) -> None:
    prompt = "What's the weather and the local time in Paris and London?"
    events = stream(demo_server, client_type, "demo", [user(prompt)], {"tools": [WEATHER, CLOCK]})
    calls = done(events, "tool_call")
    assert [(call["name"], list(call["arguments"].values())[0]) for call in calls] == [
        ("get_weather", "Paris"),
        ("get_weather", "London"),
        ("get_local_time", "Paris"),
        ("get_local_time", "London"),
    ]
    assert len({call["tool_call_id"] for call in calls}) == 4
    check_usage(events)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_tool_result_follow_up(demo_server: DemoServer, client_type: str) -> None:
    first = [user("What's the weather in Paris?")]
    config = {"tools": [WEATHER]}
    events = stream(demo_server, client_type, "demo", first, config)
    client = demo_server.client("demo", client_type)
    assistant = client.concat_uni_events_to_uni_message(events)
    [call] = done(events, "tool_call")
    result = {"type": "tool_result.done", "text": "18°C and sunny in Paris", "tool_call_id": call["tool_call_id"]}
    follow = stream(demo_server, client_type, "demo", [*first, assistant, {"role": "user", "content_items": [result]}], config)
    [text] = done(follow, "text")
    assert "18°C and sunny in Paris" in text["text"] and "get_weather" in text["text"]
    assert follow[-1]["finish_reason"] == "stop"
    assert done(follow, "tool_call") == []
    check_usage(follow)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_max_tokens_cuts_with_length(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("Explain recursion")], {"max_tokens": 5})
    [text] = done(events, "text")
    assert len(tokenize(text["text"])) == 5
    assert events[-1]["finish_reason"] == "length"
    assert events[-1]["usage_metadata"]["response_tokens"] == 5


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, {}
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        payload = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert zlib.crc32(kind + payload) & 0xFFFFFFFF == crc
        chunks[kind] = chunks.get(kind, b"") + payload
        offset += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    assert len(zlib.decompress(chunks[b"IDAT"])) == height * (1 + 3 * width)
    assert b"IEND" in chunks
    return width, height


@pytest.mark.parametrize("client_type", CLIENTS)
def test_draw_image(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("Please draw a lighthouse")])
    [caption] = done(events, "text")
    assert caption["text"].startswith("Here is a picture of a lighthouse")
    images = done(events, "inline_data")
    if client_type == "mmsp":
        [image] = images
        assert image["mime_type"] == "image/png"
        assert _png_size(image["data"]) == (160, 100)
        assert len(deltas(events, "inline_data")) == 1
    else:
        assert images == [] and "MMSP endpoint" in caption["text"]
    check_usage(events)


@pytest.mark.parametrize("client_type", CLIENTS)
def test_speak_audio(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo", [user("Say good morning")])
    [text] = done(events, "text")
    assert "good morning" in text["text"]
    audio = done(events, "inline_data")
    if client_type == "mmsp":
        [clip] = audio
        assert clip["mime_type"] == PCM_MIME_TYPE == "audio/L16;codec=pcm;rate=24000"
        assert len(deltas(events, "inline_data")) >= 5
        samples = len(clip["data"]) // 2
        assert len(clip["data"]) % 2 == 0 and 0.3 < samples / 24000 < 2
        peak = max(abs(value) for value in struct.unpack(f"<{samples}h", clip["data"]))
        assert 1000 < peak < 32767
    else:
        assert audio == []
    check_usage(events)


def test_embeddings_on_the_mmsp_wire(demo_server: DemoServer) -> None:
    messages = [user("first text"), user("second text")]
    events = stream(demo_server, "mmsp", "demo-embed", messages)
    vectors = [item["embedding"] for item in done(events, "embedding")]
    assert len(vectors) == 2 and len(deltas(events, "embedding")) == 2
    assert all(len(vector) == 64 and math.isclose(math.sqrt(sum(v * v for v in vector)), 1, abs_tol=1e-4) for vector in vectors)
    assert vectors[0] != vectors[1]
    assert events[-1]["finish_reason"] == "stop" and events[-1]["usage_metadata"]["prompt_tokens"] == 4
    smaller = stream(demo_server, "mmsp", "demo-embed", messages[:1], {"embedding_config": {"dimensions": 16}})
    assert len(done(smaller, "embedding")[0]["embedding"]) == 16
    # the openai-embedding client reads /v1/embeddings: the same vectors
    over_http = stream(demo_server, "openai-embedding", "demo-embed", messages)
    for ours, theirs in zip(vectors, [item["embedding"] for item in done(over_http, "embedding")], strict=True):
        assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(ours, theirs, strict=True))


def test_embedding_model_on_a_chat_protocol_is_refused(demo_server: DemoServer) -> None:
    events, error = asyncio.run(collect(demo_server, "openai-chat", "demo-embed", [user("x")]))
    assert isinstance(error, openai.APIError) and events == []


@pytest.mark.parametrize("client_type", CLIENTS)
def test_xss_payloads(demo_server: DemoServer, client_type: str) -> None:
    events = stream(demo_server, client_type, "demo+xss", [user("Describe the page")])
    [thinking] = done(events, "thinking")
    [text] = done(events, "text")
    for payload in XSS_PAYLOADS:
        assert payload in thinking["thinking"] and payload in text["text"]
    # with a tool offered, the call names that valid tool and carries the payloads in its arguments
    called = stream(demo_server, client_type, "demo+xss", [user("Describe the page")], {"tools": [WEATHER]})
    [call] = done(called, "tool_call")
    assert call["name"] == "get_weather"
    assert all(payload in call["arguments"]["location"] for payload in XSS_PAYLOADS)
    # a tool whose own name is markup is the one called
    marked = {"name": "<img src=x onerror=alert(1)>", "description": "x", "parameters": {"type": "object", "properties": {}}}
    named = stream(demo_server, client_type, "demo+xss", [user("Describe the page")], {"tools": [WEATHER, marked]})
    [call] = done(named, "tool_call")
    assert call["name"] == marked["name"] and XSS_PAYLOADS[0] in call["arguments"]["note"]


def test_long_text_for_benchmarks(demo_server: DemoServer) -> None:
    events = stream(demo_server, "mmsp", "demo+tokens=3000+nothink", [user("benchmark")])
    assert len(deltas(events, "text")) == 3000 == events[-1]["usage_metadata"]["response_tokens"]
    assert done(events, "thinking") == []


def test_a_table_of_n_rows_for_benchmarks(demo_server: DemoServer) -> None:
    from markdown_it import MarkdownIt

    events = stream(demo_server, "mmsp", "demo+rows=250+nothink", [user("Words of the demo")])
    [text] = done(events, "text")
    html = MarkdownIt("commonmark").enable("table").render(text["text"])
    assert html.count("<table>") == 1 and html.count("<tr>") == 251  # the header and 250 rows
    assert '<td style="text-align:right">250</td>' in html and events[-1]["finish_reason"] == "stop"
    assert len(deltas(events, "text")) == events[-1]["usage_metadata"]["response_tokens"]
    assert "Model not found" not in str(asyncio.run(collect(demo_server, "mmsp", "demo+rows=1", [user("hi")]))[1])


# ---------------------------------------------------------------------------------------------
# faults

EXPECTED: dict[str, dict[str, type[BaseException]]] = {
    "cut-text": {
        "mmsp": httpx.RemoteProtocolError,
        "openai-chat": openai.APIConnectionError,
        "openai-responses": openai.APIConnectionError,
        "ant-messages": httpx2.RemoteProtocolError,
    },
    "cut-args": {
        "mmsp": httpx.RemoteProtocolError,
        "openai-chat": openai.APIConnectionError,
        "openai-responses": openai.APIConnectionError,
        "ant-messages": httpx2.RemoteProtocolError,
    },
    "error": {
        "mmsp": UpstreamError,
        "openai-chat": openai.APIError,
        "openai-responses": IncompleteStreamError,
        "ant-messages": anthropic.APIStatusError,
    },
    "nostop": dict.fromkeys(CLIENTS, IncompleteStreamError),
    "bad-args": {
        "mmsp": UpstreamError,
        "openai-chat": ToolCallArgumentParseError,
        "openai-responses": ToolCallArgumentParseError,
        "ant-messages": ToolCallArgumentParseError,
    },
    "401": {
        "mmsp": UpstreamError,
        "openai-chat": openai.AuthenticationError,
        "openai-responses": openai.AuthenticationError,
        "ant-messages": anthropic.AuthenticationError,
    },
    "429": {
        "mmsp": UpstreamError,
        "openai-chat": openai.RateLimitError,
        "openai-responses": openai.RateLimitError,
        "ant-messages": anthropic.RateLimitError,
    },
}


@pytest.mark.serial  # each fault must end within 5 s
@pytest.mark.parametrize("client_type", CLIENTS)
@pytest.mark.parametrize("fault", list(EXPECTED))
def test_fault(demo_server: DemoServer, client_type: str, fault: str) -> None:
    config = {"tools": [WEATHER]} if fault in ("cut-args", "bad-args") else {}
    started = time.monotonic()
    events, error = asyncio.run(collect(demo_server, client_type, f"demo+{fault}", [user("Tell me about the weather in Paris")], config))
    assert time.monotonic() - started < 5, "no SDK retry behind the caller"
    expected = EXPECTED[fault][client_type]
    assert type(error) is expected, f"{client_type} +{fault}: {type(error).__module__}.{type(error).__name__}: {error}"
    if fault in ("401", "429"):
        assert events == []
        status = int(fault)
        if client_type == "mmsp":
            assert error.status == status
        else:
            assert error.status_code == status
            if fault == "429":
                assert error.response.headers["retry-after"] == "1"
        return
    assert all(event["event_type"] == "delta" for event in events), "no stop event after a fault"
    check_grammar(events, complete=False)
    assert done(events, "thinking"), "the thinking arrived before the fault"
    if fault == "cut-text":
        assert deltas(events, "text") and not done(events, "text")
    elif fault == "cut-args":
        assert deltas(events, "tool_call")[0]["name"] == "get_weather" and not done(events, "tool_call")
    elif fault == "error":
        assert len(deltas(events, "text")) == 3
        if client_type == "mmsp":
            assert error.error["code"] == "model_not_found"
        elif client_type == "openai-chat":
            assert error.code == "model_not_found"
        elif client_type == "ant-messages":
            assert error.body["error"]["type"] == "not_found_error"
    elif fault == "nostop":
        check_grammar(events, complete=False)
        assert done(events, "text")
        assert set(error.missing) <= {"usage_metadata", "finish_reason"}
    elif fault == "bad-args":
        assert deltas(events, "tool_call")
        if client_type == "mmsp":
            assert error.error_type == "ToolCallArgumentParseError" and error.error["tool_name"] == "get_weather"
        else:
            assert error.tool_name == "get_weather"


def test_cut_args_without_tools_calls_the_pseudo_tool(demo_server: DemoServer) -> None:
    events, error = asyncio.run(collect(demo_server, "mmsp", "demo+cut-args", [user("hi")]))
    assert isinstance(error, httpx.RemoteProtocolError)
    assert deltas(events, "tool_call")[0]["name"] == "demo_lookup"


@pytest.mark.parametrize("client_type", CLIENTS)
def test_unknown_model(demo_server: DemoServer, client_type: str) -> None:
    # refused with HTTP 404 before anything streams, as an MMSP server and the providers' APIs refuse it:
    # every client says "model not found" (an in-stream error reached the Responses client as a bare
    # IncompleteStreamError)
    events, error = asyncio.run(collect(demo_server, client_type, "no-such-model", [user("hi")]))
    assert events == [] and demo_server.transcripts[-1].status == 404
    assert "Model not found: no-such-model" in str(error)
    if client_type == "mmsp":
        assert isinstance(error, UpstreamError) and error.status == 404 and error.error_type == "NotFoundError"
    elif client_type == "ant-messages":
        assert isinstance(error, anthropic.NotFoundError) and error.body["error"]["type"] == "not_found_error"
    else:
        assert isinstance(error, openai.NotFoundError) and error.code == "model_not_found"
    # so is an embedding model on a chat protocol, and a model option the demo does not know
    if client_type != "mmsp":
        events, error = asyncio.run(collect(demo_server, client_type, "demo-embed", [user("hi")]))
        assert events == [] and error.status_code == 404 and "embedding model" in str(error)
    events, error = asyncio.run(collect(demo_server, client_type, "demo+turbo", [user("hi")]))
    assert events == [] and "unknown option +turbo" in str(error)


HEARTBEATS = {"mmsp": b": keep-alive\n\n", "openai-chat": b": heartbeat\n\n", "openai-responses": b": heartbeat\n\n", "ant-messages": b'event: ping\ndata: {"type":"ping"}\n\n'}


@pytest.mark.serial  # two 0.1 s heartbeats within a 0.35 s silence
@pytest.mark.parametrize("client_type", CLIENTS)
def test_silence_sends_heartbeats_then_answers(demo_server: DemoServer, client_type: str) -> None:
    started = time.monotonic()
    events = stream(demo_server, client_type, "demo+silence=0.35", [user("hello")])
    assert time.monotonic() - started >= 0.35
    assert done(events, "text")
    record = demo_server.transcripts[-1]
    assert record.response.count(HEARTBEATS[client_type]) >= 2
    first_content = {"mmsp": b"thinking.delta", "openai-chat": b"reasoning_details", "openai-responses": b"reasoning_summary_text.delta", "ant-messages": b"thinking_delta"}
    assert record.response.index(HEARTBEATS[client_type]) < record.response.index(first_content[client_type])


@pytest.mark.serial  # the abort must end the stream within 1 s
@pytest.mark.parametrize("client_type", CLIENTS)
def test_stall_is_aborted_within_a_second(demo_server: DemoServer, client_type: str) -> None:
    async def run() -> tuple[list[dict], float, BaseException | None]:
        client = demo_server.client("demo+stall", client_type)
        signal = AbortSignal()
        events: list[dict] = []
        first = asyncio.Event()

        async def consume() -> None:
            async for event in client.streaming_response([user("hello")], {}, signal=signal):
                events.append(event)
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 5)
        await asyncio.sleep(0.2)  # the stream is stalled now
        assert not task.done()
        aborted = time.monotonic()
        signal.abort("user pressed stop")
        try:
            await asyncio.wait_for(task, 5)
        except BaseException as exc:
            return events, time.monotonic() - aborted, exc
        finally:
            await aclose(client)
        return events, time.monotonic() - aborted, None

    events, elapsed, error = asyncio.run(run())
    assert elapsed < 1.0
    assert isinstance(error, asyncio.CancelledError)
    assert len(events) >= 1 and events[0]["content_items"][0]["type"] == "thinking.delta"


# ---------------------------------------------------------------------------------------------
# the wire, seen raw


def test_wire_shapes(demo_server: DemoServer) -> None:
    with httpx.Client(base_url=demo_server.base_url, timeout=10) as http:
        chat = http.post("/chat/completions", json={"model": "demo", "messages": [{"role": "user", "content": "hi"}], "stream": True})
        frames = [frame for frame in split_frames(chat.content)]
        assert all(frame.startswith(b"data: ") for frame in frames)
        assert frames[-1] == b"data: [DONE]\n\n"
        usage = json.loads(frames[-2][6:])
        assert usage["choices"] == [] and usage["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
        assert json.loads(frames[-3][6:])["choices"][0]["finish_reason"] == "stop"
        assert chat.headers["x-demo-request-id"] and chat.headers["content-type"].startswith("text/event-stream")

        responses = http.post("/responses", json={"model": "demo", "input": "hi", "stream": True})
        names = [frame.split(b"\n")[0] for frame in split_frames(responses.content)]
        assert names[:3] == [b"event: response.created", b"event: response.in_progress", b"event: response.output_item.added"]
        assert names[-2:] == [b"event: response.completed", b"data: [DONE]"]
        assert b"event: response.reasoning_summary_text.delta" in names and b"event: response.output_text.delta" in names

        messages = http.post("/messages", json={"model": "demo", "max_tokens": 100, "stream": True,
                                                "messages": [{"role": "user", "content": "hi"}]})
        names = [frame.split(b"\n")[0] for frame in split_frames(messages.content)]
        assert names[0] == b"event: message_start" and names[-2:] == [b"event: message_delta", b"event: message_stop"]
        assert b"[DONE]" not in messages.content and b"signature_delta" in messages.content

        wire = http.post("/stream", json={"model": "demo", "messages": [user("hi")], "config": {}})
        frames = split_frames(wire.content)
        assert frames[-1] == b"data: [DONE]\n\n" and json.loads(frames[-2][6:])["event_type"] == "stop"

        bad = http.post("/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        bad = http.post("/messages", json={"model": "demo", "messages": "nope"})
        assert bad.status_code == 400 and bad.json()["type"] == "error"
        missing = http.get("/nowhere")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFoundError"


def test_a_responses_message_cut_by_max_output_tokens_is_incomplete(demo_server: DemoServer) -> None:
    # as OpenAI's Responses API marks it: the message cut short and the response that ends with it
    with httpx.Client(base_url=demo_server.base_url, timeout=10) as http:
        raw = http.post("/responses", json={"model": "demo", "input": "hi", "stream": True, "max_output_tokens": 5}).content
        whole = http.post("/responses", json={"model": "demo", "input": "hi", "stream": True}).content

    def events(content: bytes) -> list[dict[str, Any]]:
        return [json.loads(frame.split(b"data: ", 1)[1]) for frame in split_frames(content) if frame.startswith(b"event: ")]

    cut = events(raw)
    messages = [event["item"] for event in cut if event["type"] == "response.output_item.done" and event["item"]["type"] == "message"]
    assert [message["status"] for message in messages] == ["incomplete"]
    final = cut[-1]
    assert final["type"] == "response.incomplete" and final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["status"] for item in final["response"]["output"] if item["type"] == "message"] == ["incomplete"]
    done = [event["item"]["status"] for event in events(whole) if event["type"] == "response.output_item.done" and event["item"]["type"] == "message"]
    assert done == ["completed"]


def test_models(demo_server: DemoServer) -> None:
    async def listing(client_type: str) -> list[str]:
        client = demo_server.client("demo", client_type)
        try:
            return await client.list_models()
        finally:
            await aclose(client)

    for client_type in CLIENTS:
        assert asyncio.run(listing(client_type)) == list(DEMO_MODELS) == ["demo", "demo-embed"]
    with httpx.Client(base_url=demo_server.base_url) as http:
        assert http.get("/models/demo+tps=5").status_code == 200
        unknown = http.get("/models/gpt-9")
        assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "NotFoundError"


def test_transcripts_keep_no_key(demo_server: DemoServer) -> None:
    stream(demo_server, "openai-chat", "demo", [user("secret-free")])
    record = demo_server.transcripts[-1]
    assert record.protocol == "chat" and record.endpoint == "/v1/chat/completions" and record.model == "demo"
    assert record.request["messages"][0]["content"][0]["text"] == "secret-free"
    assert len(record.chunk_times_ms) == len(record.chunks) > 10
    assert record.chunk_times_ms == sorted(record.chunk_times_ms)
    assert record.outcome == "complete"
    with httpx.Client(base_url=demo_server.base_url) as http:
        raw = http.get(f"/_demo/transcripts/{record.id}")
        assert raw.content == record.response
        reply = http.post(
            "/stream",
            json={"model": "demo", "messages": [user("x")], "api_key": "sk-live-123"},
            headers={"Authorization": "Bearer sk-live-123", "x-api-key": "sk-live-123"},
        )
        record = demo_server.transcript(reply.headers["x-demo-request-id"])
    assert "api_key" not in record.request
    everything = repr(demo_server.transcripts)
    assert "sk-live-123" not in everything and "demo-key" not in everything


# ---------------------------------------------------------------------------------------------
# replay


def _strip(events: list[dict]) -> list[dict]:
    return [{key: value for key, value in event.items() if key != "created_at"} for event in events]


@pytest.mark.parametrize(("client_type", "protocol"), [("mmsp", "mmsp"), ("openai-chat", "chat"), ("openai-responses", "responses"), ("ant-messages", "messages")])
def test_replay_gives_the_same_events(demo_server: DemoServer, tmp_path: Path, client_type: str, protocol: str) -> None:
    messages = [user("What's the weather in Paris?")]
    live = stream(demo_server, client_type, "demo", messages, {"tools": [WEATHER]})
    record = demo_server.transcripts[-1]
    path = demo_server.save_transcript(record.id, tmp_path / f"{protocol}.sse")
    assert detect_protocol(path.read_bytes()) == protocol
    with DemoServer(instant=True, replay=path) as replaying:
        replayed = stream(replaying, client_type, "any-model-name", [user("something else")])
        assert replaying.transcripts[-1].response == path.read_bytes()
        # the other endpoints keep serving the live demo
        if client_type != "mmsp":
            assert done(stream(replaying, "mmsp", "demo", [user("hi")]), "text")
    assert _strip(replayed) == _strip(live)


def test_a_stream_read_to_its_end_has_a_final_record(monkeypatch: pytest.MonkeyPatch) -> None:
    # the record says "complete" before the stream's last byte goes out: a client that reads its
    # record as soon as the stream ended finds it final, never still "streaming" (the server's
    # bookkeeping after the stream is slowed down here, to make the window wide)
    from mmsp_notebook.demo import _server

    real = _server.until_disconnect

    async def slow_after(*args: Any) -> Any:
        task = await real(*args)
        await asyncio.sleep(0.3)
        return task

    monkeypatch.setattr(_server, "until_disconnect", slow_after)
    with DemoServer(instant=True) as server, httpx.Client(base_url=server.base_url) as http:
        with http.stream("POST", "/stream", json={"model": "demo", "messages": [user("hi")]}) as answer:
            body = answer.read()
            record = server.transcript(answer.headers["x-demo-request-id"])
            assert record.outcome == "complete"
    assert b"stop" in body


def test_a_transcript_saved_with_a_byte_order_mark_replays_its_first_event(demo_server: DemoServer, tmp_path: Path) -> None:
    live = stream(demo_server, "mmsp", "demo+nothink+tokens=5", [user("hi")])
    path = demo_server.save_transcript(demo_server.transcripts[-1].id, tmp_path / "bom.sse")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as an editor on Windows saves it
    with DemoServer(instant=True, replay=path) as replaying:
        assert _strip(stream(replaying, "mmsp", "x", [user("hi")])) == _strip(live)
        assert replaying.transcripts[-1].response == path.read_bytes()[3:]


def test_a_transcript_re_saved_as_utf16_replays_as_the_utf8_it_was(demo_server: DemoServer, tmp_path: Path) -> None:
    live = stream(demo_server, "openai-chat", "demo+nothink+tokens=5", [user("hi")])
    sent = demo_server.transcripts[-1].response
    path = tmp_path / "utf16.sse"
    for encoding in ("utf-16", "utf-16-be"):  # as Windows PowerShell's > redirect writes it (with its BOM)
        path.write_bytes((b"\xfe\xff" if encoding == "utf-16-be" else b"") + sent.decode().encode(encoding))
        with DemoServer(instant=True, replay=path) as replaying:
            assert _strip(stream(replaying, "openai-chat", "x", [user("hi")])) == _strip(live)
            assert replaying.transcripts[-1].response == sent


def test_a_transcript_whose_answer_quotes_another_protocol_replays_on_its_own(demo_server: DemoServer,
                                                                             tmp_path: Path) -> None:
    # an answer about SSE may well quote "event: message_start" or "chat.completion.chunk": the
    # transcript is still recognised by its own fields and served on its own endpoint
    quoted = "Anthropic streams `event: message_start`, OpenAI `event: response.created` and chat.completion.chunk"
    for client_type, protocol in (("mmsp", "mmsp"), ("openai-chat", "chat"), ("openai-responses", "responses")):
        live = stream(demo_server, client_type, "demo+nothink+tokens=6", [user("hi")])
        raw = demo_server.transcripts[-1].response
        assert "".join(d["text"] for d in deltas(live, "text")).startswith("## ")
        edited = raw.replace(b'":"##', f'":"{quoted}##'.encode())  # every string the answer begins: deltas, done
        assert edited.count(quoted.encode()) >= 1
        path = tmp_path / f"{protocol}.sse"
        path.write_bytes(edited)
        assert detect_protocol(edited) == protocol
        with DemoServer(instant=True, replay=path) as replaying:
            replayed = stream(replaying, client_type, "any", [user("something else")])
            assert replaying.transcripts[-1].response == edited  # the capture, not a live demo answer
        assert "".join(d["text"] for d in deltas(replayed, "text")).startswith(quoted)


def test_replay_file_errors(tmp_path: Path) -> None:
    unknown = tmp_path / "x.sse"
    unknown.write_bytes(b"data: hello\n\n")
    with pytest.raises(DemoServerError, match="replay_protocol"):
        DemoServer(replay=unknown)
    with pytest.raises(DemoServerError, match="cannot read"):
        DemoServer(replay=tmp_path / "missing.sse")
    for body in (b'{"object": "chat.completion.chunk", "choices": []}', b'[{"event_type": "delta"}]', b": only a comment\n\n"):
        unknown.write_bytes(body)  # JSON, or no data line at all: not a stream, whatever protocol is named
        with pytest.raises(DemoServerError, match="no SSE 'data:' line"):
            DemoServer(replay=unknown, replay_protocol="chat")
    unknown.write_bytes(b"\xef\xbb\xbf\n\n")
    with pytest.raises(DemoServerError, match="empty"):
        DemoServer(replay=unknown)
    unknown.write_bytes(b"data: hello\n\n")
    with DemoServer(replay=unknown, replay_protocol="chat", instant=True) as named:  # served as Chat, as named
        with httpx.Client(base_url=named.base_url) as http:
            asked = {"model": "x", "messages": [], "stream": True}
            assert http.post("/chat/completions", json=asked).content == b"data: hello\n\n"
            # without a stream it is folded, and "hello" is no Chat event: a 502 that says so, not a success
            plain = http.post("/chat/completions", json={"model": "x", "messages": []})
            assert plain.status_code == 502 and "frame 1 is not an event" in plain.json()["error"]["message"]
            assert http.post("/stream", json={"model": "demo", "messages": [user("hi")]}).content != b"data: hello\n\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_replay_file_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    """A FIFO blocked DemoServer(replay=...) forever and /dev/zero filled the memory: both are
    refused before they are opened, as the trace loaders refuse them."""
    fifo = tmp_path / "capture.sse"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(DemoServerError, match="cannot read the replay file .*: (not a regular file|a directory)"):
            run_with_timeout(lambda path=path: DemoServer(replay=path), 10)
    with pytest.raises(DemoServerError, match="missing.sse: no such file"):
        DemoServer(replay=tmp_path / "missing.sse")


# ---------------------------------------------------------------------------------------------
# server life cycle


@pytest.mark.serial  # five paced streams at once within 3 s
def test_concurrent_streams_complete(demo_server: DemoServer) -> None:
    async def run() -> tuple[list[list[dict]], float]:
        # the clients are made first: the first of each kind imports its provider's SDK
        clients = [demo_server.client("demo+tokens=40+tps=40+delay=0.05+nothink", CLIENTS[index % 4])
                   for index in range(5)]

        async def one(index: int) -> list[dict]:
            return [event async for event in clients[index].streaming_response([user(f"topic number {index}")], {})]

        try:
            started = time.monotonic()
            results = await asyncio.gather(*(one(index) for index in range(5)))
            return results, time.monotonic() - started
        finally:
            for client in clients:
                await aclose(client)

    results, elapsed = asyncio.run(run())
    for events in results:
        check_grammar(events)
        assert events[-1]["finish_reason"] == "stop"
    # paced at 40 tokens/s, each stream of 40 tokens takes ~1 s (little of it CPU, so a busy machine
    # changes it little); five in sequence would take ~5 s
    assert elapsed < 3.0, elapsed


@pytest.mark.serial  # three 0.1 s heartbeats within 0.6 s of stall
@pytest.mark.parametrize("client_type", CLIENTS)
def test_a_stalled_stream_keeps_sending_heartbeats(demo_server: DemoServer, client_type: str) -> None:
    # a server writes a heartbeat while its model says nothing (MMSP's keep-alive, a gateway's every
    # 15 s): a stalled stream is silent, not dead, and no proxy on the way times it out
    paths = {"mmsp": "/stream", "openai-chat": "/chat/completions", "openai-responses": "/responses", "ant-messages": "/messages"}
    bodies = {
        "mmsp": {"model": "demo+stall", "messages": [user("hello")], "config": {}},
        "openai-chat": {"model": "demo+stall", "messages": [{"role": "user", "content": "hello"}], "stream": True},
        "openai-responses": {"model": "demo+stall", "input": "hello", "stream": True},
        "ant-messages": {"model": "demo+stall", "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}], "stream": True},
    }
    received = b""
    with httpx.Client(base_url=demo_server.base_url, timeout=httpx.Timeout(10, read=2)) as http:
        with http.stream("POST", paths[client_type], json=bodies[client_type]) as response:
            started = time.monotonic()
            for chunk in response.iter_raw():
                received += chunk
                if time.monotonic() - started > 0.6:
                    break
    first_content = {"mmsp": b"thinking.delta", "openai-chat": b"reasoning_details", "openai-responses": b"reasoning_summary_text.delta", "ant-messages": b"thinking_delta"}
    after_first = received[received.index(first_content[client_type]):]
    assert after_first.count(HEARTBEATS[client_type]) >= 3, received[-300:]


@pytest.mark.serial  # heartbeats and pacing measured in ms
def test_pacing_first_token_delay_and_heartbeats() -> None:
    with DemoServer(tokens_per_second=200, first_token_delay=0.25, heartbeat=0.07) as server:
        events = stream(server, "mmsp", "demo+tokens=40+nothink", [user("paced")])
        record = server.transcripts[-1]
    assert len(deltas(events, "text")) == 40
    frames = split_frames(record.response)
    times = record.chunk_times_ms
    assert len(frames) == len(times)
    heartbeats = [index for index, frame in enumerate(frames) if frame == b": keep-alive\n\n"]
    assert len(heartbeats) >= 2, "heartbeats while the first token is delayed"
    content = [index for index, frame in enumerate(frames) if b"text.delta" in frame]
    assert heartbeats[-1] < content[0]
    assert times[content[0]] >= 240
    # 39 more fragments at 200 per second: about 195 ms
    assert 150 <= times[content[-1]] - times[content[0]] < 1500


@pytest.mark.serial  # the stop must return within 2 s
def test_stop_closes_a_stalled_stream_promptly() -> None:
    server = DemoServer(instant=True).start()
    received: list[bytes] = []
    outcome: dict[str, BaseException | None] = {}

    async def stalled() -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as http:
            try:
                async with http.stream("POST", f"{server.base_url}/stream", json={"model": "demo+stall", "messages": [user("x")]}) as response:
                    async for chunk in response.aiter_raw():
                        received.append(chunk)
            except Exception as exc:
                outcome["error"] = exc
            else:
                outcome["error"] = None

    import threading

    thread = threading.Thread(target=lambda: asyncio.run(stalled()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not received and time.monotonic() < deadline:
        time.sleep(0.02)
    assert received, "the stalled stream sent its first delta"
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2.0
    thread.join(2)
    assert not thread.is_alive()
    assert isinstance(outcome["error"], httpx.RemoteProtocolError)
    assert not server.running
    with pytest.raises(DemoServerError):
        _ = server.base_url


def test_loopback_only_by_default() -> None:
    for host in ("0.0.0.0", "192.0.2.10", "example.com"):
        with pytest.raises(DemoServerError, match="allow_remote"):
            DemoServer(host)
    with DemoServer("localhost", instant=True) as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.root_url + "/v1" == server.base_url
    with DemoServer("0.0.0.0", allow_remote=True, instant=True) as server:
        assert done(stream(server, "mmsp", "demo", [user("hi")]), "text")
    server = DemoServer(instant=True)
    server.start()
    server.stop()
    server.stop()  # idempotent


def test_cli(demo_server: DemoServer, tmp_path: Path) -> None:
    live = stream(demo_server, "mmsp", "demo", [user("captured once")])
    replay = demo_server.save_transcript(demo_server.transcripts[-1].id, tmp_path / "capture.sse")
    _cli_round_trip(["--port", "0", "--instant"], "hi from the CLI test", lambda events: "hi from the CLI test" in done(events, "text")[0]["text"])
    _cli_round_trip(["--port", "0", "--replay", str(replay), "--tokens-per-second", "500", "--first-token-delay", "0.01"], "anything", lambda events: _strip(events) == _strip(live))
    refused = subprocess.run(
        [sys.executable, "-m", "mmsp_notebook.demo", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 2 and "--allow-remote" in refused.stderr


def _cli_round_trip(arguments: list[str], prompt: str, check: Any) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "mmsp_notebook.demo", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("mmsp demo server listening on http://127.0.0.1:"), line
        base_url = line.split(" on ", 1)[1].strip()
        assert base_url.endswith("/v1")

        async def once() -> list[dict]:
            from mmsp import AutoLLMClient

            client = AutoLLMClient(model="demo", base_url=base_url, client_type="mmsp")
            try:
                return [event async for event in client.streaming_response([user(prompt)], {})]
            finally:
                await aclose(client)

        events = asyncio.run(once())
        check_grammar(events)
        assert check(events)
    finally:
        process.terminate()
        assert process.wait(5) == 0


# ---------------------------------------------------------------------------------------------
# pure pieces


def test_parse_model() -> None:
    spec = parse_model("demo+tps=200+tokens=500+nothink+cut-text+silence")
    assert (spec.base, spec.tps, spec.tokens, spec.thinking, spec.fault, spec.silence) == ("demo", 200, 500, False, "cut-text", 3.0)
    spec = parse_model("demo+instant+rows=5+xss+silence=1")
    assert (spec.instant, spec.rows, spec.xss, spec.silence) == (True, 5, True, 1.0)
    assert parse_model("demo+429=7").retry_after == 7
    assert parse_model("demo-embed+dim=8").dimensions == 8
    for bad in ("gpt-4o", "demo+nope", "demo+tps", "demo+tps=x", "demo+error+stall", "demo+stall=3"):
        with pytest.raises(DemoServerError):
            parse_model(bad)
    # an option that is on when named takes no value: +xss=0 and +instant=no turned it on
    for bad in ("demo+xss=0", "demo+instant=no", "demo+nothink=false", "demo+nothink="):
        with pytest.raises(DemoServerError, match=r"takes no value; write \+(xss|instant|nothink) to turn it on"):
            parse_model(bad)


@pytest.mark.parametrize(("bad", "said"), [
    # an option given twice: the last one silently won (demo+tps=200+tps=10 ran at 10 tokens/s)
    ("demo+tps=200+tps=10", r"\+tps given twice \(\+tps=200, then \+tps=10\): give it once"),
    ("demo+xss+nothink+xss", r"\+xss given twice: give it once"),
    ("demo+silence+silence=2", r"\+silence given twice \(\+silence, then \+silence=2\)"),
    ("demo+cut-text+cut-text", r"\+cut-text given twice: give it once"),
    ("demo+429=3+429=5", r"\+429 given twice \(\+429=3, then \+429=5\)"),
    ("demo-embed+dim=8+dim=16", r"\+dim given twice"),
    # options that undo each other: one of them was silently dropped
    ("demo+rows=5+tokens=5", r"choose \+tokens=N \(a text\) or \+rows=N \(a table\), not both"),
    ("demo+instant+tps=3", r"\+instant is no pacing at all and \+tps paces; choose one"),
    ("demo+delay=1+instant", r"\+instant is no pacing at all and \+delay paces; choose one"),
])
def test_a_demo_model_option_given_twice_or_against_another_is_refused(bad, said) -> None:
    with pytest.raises(DemoServerError, match=rf"^model '{re.escape(bad)}': {said}"):
        parse_model(bad)


@pytest.mark.serial  # Hypothesis' 200 ms deadline per example
@given(st.text())
def test_tokenize_joins_back(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_deterministic(demo_server: DemoServer) -> None:
    first = stream(demo_server, "mmsp", "demo", [user("Same question twice")])
    second = stream(demo_server, "mmsp", "demo", [user("Same question twice")])
    assert _strip(first) == _strip(second)
    other = stream(demo_server, "mmsp", "demo", [user("A different question")])
    assert done(other, "text")[0]["text"] != done(first, "text")[0]["text"]


# ---------------------------------------------------------------------------------------------
# what the demo says and does at its edges


@pytest.mark.serial  # the reset must land before the server writes the whole stream
def test_a_client_gone_stops_an_instant_stream_at_once(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import socket

    caplog.set_level(logging.WARNING)
    body = json.dumps({"model": "demo+tokens=20000+nothink", "messages": [user("long")]}).encode()
    with DemoServer(instant=True) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"POST /v1/stream HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert sock.recv(4096)  # the stream began
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # gone at once (a reset), mid-stream
        record = server.transcripts[-1]
        deadline = time.monotonic() + 5
        while record.outcome == "streaming" and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
    # the server noticed and stopped: not the whole 20,000 fragments written into a dead socket
    assert record.outcome == "client_gone"
    assert record.response.count(b"text.delta") < 20000
    assert "socket.send() raised exception" not in caplog.text


@pytest.mark.serial  # one heartbeat a second of silence
def test_silence_keeps_a_heartbeat_whatever_the_servers_interval() -> None:
    with DemoServer(instant=True) as server:  # the kernel's interval: a heartbeat every 15 s
        started = time.monotonic()
        events = stream(server, "openai-chat", "demo+silence=1.3", [user("hello")])
        record = server.transcripts[-1]
    assert time.monotonic() - started >= 1.3 and done(events, "text")
    assert record.response.count(b": heartbeat\n\n") == 1  # one a second of silence


@pytest.mark.parametrize("client_type", CLIENTS)
def test_fault_errors_say_which_fault_they_are(demo_server: DemoServer, client_type: str) -> None:
    _, error = asyncio.run(collect(demo_server, client_type, "demo+error", [user("Tell me about Paris")]))
    record = demo_server.transcripts[-1]
    assert b"Injected fault +error of demo+error" in record.response and b"Model not found" not in record.response
    assert b'"demo_fault":"error"' in record.response  # the error object names the fault
    if client_type != "openai-responses":  # (mmsp's Responses client does not read the error event)
        assert "Injected fault +error" in str(error)
    for fault in ("401", "429"):
        _, error = asyncio.run(collect(demo_server, client_type, f"demo+{fault}", [user("hi")]))
        assert f"injected fault +{fault}" in str(error)
        assert json.loads(demo_server.transcripts[-1].response)["error"]["demo_fault"] == fault
    assert "checks no key" in json.loads(httpx.post(demo_server.base_url + "/embeddings", json={
        "model": "demo-embed+401", "input": "x"}).content)["error"]["message"]


def test_the_proxy_banner_names_the_upstream_as_a_client_is_given_it() -> None:
    process = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--proxy", "http://127.0.0.1:9/v1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first, second = process.stdout.readline(), process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    proxy_url = first.split()[5]
    assert proxy_url.endswith("/v1") and first.rstrip().endswith("-> http://127.0.0.1:9/v1")
    assert f"hand the client {proxy_url} in place of http://127.0.0.1:9/v1" in second


def test_an_embedding_model_in_a_conversation_embeds_the_new_input_only(demo_server: DemoServer) -> None:
    first = stream(demo_server, "mmsp", "demo-embed", [user("The quick brown fox jumps over the lazy dog.")])
    client = demo_server.client("demo-embed")
    answer = client.concat_uni_events_to_uni_message(first)
    history = [user("The quick brown fox jumps over the lazy dog."), answer]
    for sentence in ("A second sentence.", "A third one."):
        events = stream(demo_server, "mmsp", "demo-embed", [*history, user(sentence)])
        [vector] = [item["embedding"] for item in done(events, "embedding")]
        alone = stream(demo_server, "mmsp", "demo-embed", [user(sentence)])
        assert vector == done(alone, "embedding")[0]["embedding"]  # the new input's vector, as on its own
        assert events[-1]["usage_metadata"]["prompt_tokens"] == len(tokenize(sentence))
        history += [user(sentence), client.concat_uni_events_to_uni_message(events)]
    # several inputs at once are still each embedded; nothing new to embed is refused
    assert len(done(stream(demo_server, "mmsp", "demo-embed", [user("one"), user("two")]), "embedding")) == 2
    _, error = asyncio.run(collect(demo_server, "mmsp", "demo-embed", history))
    assert isinstance(error, UpstreamError) and error.status == 400 and "Nothing to embed" in str(error)


FIX_PROMPT = ("This notebook cell failed. Correct it.\n\nIn [3]:\n```python\n{code}\n```\n\nIt raised:\n```\n"
              "Traceback (most recent call last):\n  Cell In[3], line 1\n----> 1 {first}\n\n{raised}\n```")


@pytest.mark.parametrize(("code", "raised", "caught"), [
    ("1/0", "ZeroDivisionError: division by zero", "ZeroDivisionError"),
    ("total = 0\nfor x in [1, 2]:\n    total += x\nprint(total, missing)", "NameError: name 'missing' is not defined",
     "NameError"),
    ("import json\njson.loads('{')", "json.decoder.JSONDecodeError: Expecting property name (char 1)", "Exception"),
])
@pytest.mark.parametrize("client_type", ["mmsp", "ant-messages"])
def test_a_failing_cell_gets_a_corrected_cell(demo_server: DemoServer, client_type: str, code: str, raised: str,
                                              caught: str) -> None:
    import contextlib
    import io
    import re

    prompt = FIX_PROMPT.format(code=code, first=code.splitlines()[0], raised=raised)
    events = stream(demo_server, client_type, "demo", [user(prompt)])
    [text] = done(events, "text")
    blocks = re.findall(r"```python\n(.*?)```", text["text"], re.DOTALL)
    assert len(blocks) == 1 and text["text"].startswith("```python\n")
    fixed = blocks[0]
    assert f"except {caught} as exc:" in fixed and all(f"    {line}" in fixed for line in code.splitlines() if line)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(fixed, "<fixed cell>", "exec"), {})  # the corrected cell runs
    assert printed.getvalue().startswith("Note: the cell raised ")
    sentence = text["text"].split("```")[-1].strip()
    assert sentence.count(". ") == 0 and sentence.endswith(".") and raised.split(":")[0] in sentence
    assert done(events, "thinking")[0]["thinking"].startswith("The cell failed with ")
    # a prompt with code but no traceback is answered as before
    plain = stream(demo_server, client_type, "demo", [user("What does this do?\n```python\n1/0\n```")])
    assert "except" not in done(plain, "text")[0]["text"]


@pytest.mark.parametrize(("ask", "raised", "described"), [
    ("This notebook cell failed. Explain why, briefly, and how to fix it.", "KeyError: 'banana'",
     "Python describes KeyError as “Mapping key not found.”"),
    ("In one sentence, what does this error mean?", "ZeroDivisionError: division by zero",
     "Python describes ZeroDivisionError as “Second argument to a division or modulo operation was zero.”"),
    ("Why?", "json.decoder.JSONDecodeError: Expecting value", "is not a builtin exception"),
])
def test_a_failing_cell_asked_about_gets_an_explanation_not_a_fix(demo_server: DemoServer, ask: str, raised: str,
                                                                  described: str) -> None:
    code = 'prices = {"apple": 3}\nprices["banana"] * 2'
    prompt = FIX_PROMPT.replace("This notebook cell failed. Correct it.", ask).format(
        code=code, first=code.splitlines()[0], raised=raised)
    events = stream(demo_server, "mmsp", "demo", [user(prompt)])
    [text] = done(events, "text")
    assert "```" not in text["text"] and "try:" not in text["text"]
    assert text["text"].startswith(f"The cell stopped at the line that raised {raised};") and described in text["text"]
    assert done(events, "thinking")[0]["thinking"].endswith("I will say what it means in one sentence.")


# ---------------------------------------------------------------------------------------------
# traces on the MMSP endpoint


def _trace_json(cache: Path, trace_id: str) -> dict[str, Any]:
    return json.loads((cache / f"{trace_id}.json").read_text(encoding="utf-8"))


def test_the_mmsp_endpoint_traces_a_plain_mmsp_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsp import AutoLLMClient

    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    with DemoServer(instant=True) as server:
        async def run() -> list[dict[str, Any]]:
            client = AutoLLMClient(model="demo", base_url=server.base_url, client_type="mmsp")
            try:
                first = [e async for e in client.streaming_response_stateful(
                    user("What's the weather in Paris?"), {"tools": [WEATHER], "trace_id": "prog/run_1"})]
                follow = [e async for e in client.streaming_response_stateful(
                    user("And in Rome?"), {"trace_id": "prog/run_1"})]
                return first + follow
            finally:
                await aclose(client)

        asyncio.run(run())
        saved = _trace_json(tmp_path / "cache", "prog/run_1")
        assert (tmp_path / "cache" / "prog" / "run_1.txt").exists()  # mmsp's Tracer wrote both files
        history = saved["history"]
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        assert history[2]["content_items"][0]["text"] == "And in Rome?"
        assert history[1]["content_items"][-1]["type"] == "tool_call.done" and history[1]["finish_reason"] == "tool_call"
        assert saved["config"]["model"] == "demo" and saved["config"]["trace_id"] == "prog/run_1"
        # no trace id, no trace; a trace id outside the trace directory is refused before streaming
        stream(server, "mmsp", "demo", [user("untraced")])
        assert sorted(p.name for p in (tmp_path / "cache").rglob("*.json")) == ["run_1.json"]
        for bad in ("../escape", "/abs/path", "a//b", "a/./b", 7):
            events, error = asyncio.run(collect(server, "mmsp", "demo", [user("x")], {"trace_id": bad}))
            assert isinstance(error, UpstreamError) and error.status == 400 and "trace_id" in str(error), bad
        assert not (tmp_path / "escape.json").exists()
        # a fault ends the stream before its stop: nothing is traced, as mmsp's clients do
        asyncio.run(collect(server, "mmsp", "demo+cut-text", [user("x")], {"trace_id": "prog/cut"}))
        assert not (tmp_path / "cache" / "prog" / "cut.json").exists()


def test_a_notebook_turn_through_the_embedded_demo_writes_one_trace_with_one_history(fresh_session, tmp_path,
                                                                                     monkeypatch) -> None:
    """The demo server traces what it is asked to (as an MMSP server does) and the engine saves the trace of
    mmsp-wire turns: a file both write is written by the demo first, then with the same history and config."""
    from mmsp.integration.tracer import Tracer

    from mmsp_notebook.engine.launch import launch

    writes: list[tuple[str, str, str, str]] = []
    original = Tracer.save_history

    def spy(self: Any, model: str, history: list, file_id: str, config: dict) -> None:
        import threading

        original(self, model, history, file_id, config)
        body = json.dumps(self._serialize_for_json(history), sort_keys=True)
        writes.append((threading.current_thread().name, model, file_id, body + json.dumps(config, sort_keys=True)))

    monkeypatch.setattr(Tracer, "save_history", spy)

    def weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    turn = launch("What's the weather in Paris?", sess=fresh_session, tools=[weather], chat="t")[1].result(timeout=30)
    assert turn.status == "complete" and len(turn.steps) == 2
    second = launch("Draw a lighthouse", sess=fresh_session, chat="t")[1].result(timeout=30)  # an image: bytes
    assert second.status == "complete" and second.images
    # three responses, each saved by the engine; one the server saved too (it is handed the trace id) is
    # saved by the server first, then by the engine: the same model, file, history and config
    engine = [k for k, write in enumerate(writes) if write[0] != "mmsp-demo-server"]
    assert len(engine) == 3
    for k, write in enumerate(writes):
        if write[0] == "mmsp-demo-server":
            assert k + 1 in engine and writes[k + 1][1:] == write[1:]
    for one in (turn, second):  # the file holds the last history written to it
        last = [write for write in writes if write[2] == one.trace_id][-1]
        saved = _trace_json(tmp_path / "cache", one.trace_id)["history"]
        assert last[3].startswith(json.dumps(saved, sort_keys=True))


@pytest.mark.serial  # the refusals must take under 10 s
def test_a_request_too_big_to_plan_is_refused_at_once_and_the_server_goes_on(demo_server: DemoServer) -> None:
    # a plan is built whole before it streams: 10**9 tokens would fill the serving process's memory
    started = time.monotonic()
    for model, said in (("demo+tokens=1000000000", "+tokens must be at most 1,000,000"),
                        ("demo+rows=1000000", "+rows must be at most 100,000"),
                        ("demo+tps=nan", "+tps=nan is not a finite number"),
                        ("demo+delay=inf", "+delay=inf is not a finite number"),
                        ("demo-embed+dim=1000000000", "+dim must be at most 65,536")):
        events, error = asyncio.run(collect(demo_server, "mmsp", model, [user("hi")]))
        assert events == [] and demo_server.transcripts[-1].status == 404 and said in str(error), model
    with httpx.Client(base_url=demo_server.base_url, timeout=10) as http:
        for dimensions in (10**9, 0, -3):
            answer = http.post("/embeddings", json={"model": "demo-embed", "input": "hi", "dimensions": dimensions})
            assert answer.status_code == 400 and "between 1 and 65,536" in answer.text
    assert time.monotonic() - started < 10
    events, error = asyncio.run(collect(demo_server, "mmsp", "demo+tokens=50", [user("hi")]))
    assert error is None and events[-1]["event_type"] == "stop"


@pytest.mark.serial  # the answer must take under 5 s
def test_a_long_prompt_of_distinct_words_is_answered_at_once(demo_server: DemoServer) -> None:
    # a pasted list of names or ids: picking the prompt's keywords must not hold the server (and
    # every other stream it serves) for a time that grows with the square of the prompt's words
    names = ["W" + "".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=4)][:30000]
    prompt = "Check the weather for " + " ".join(names)
    started = time.monotonic()
    events = stream(demo_server, "mmsp", "demo+nothink", [user(prompt)], {"tools": [WEATHER]})
    assert time.monotonic() - started < 5
    assert done(events, "tool_call")[0]["arguments"]["location"] == "Waaaa"


def test_a_pace_that_is_not_a_number_is_refused() -> None:
    # NaN passed every "<= 0" check and paced every stream at random; an infinite delay never answered
    for setting, value, said in (("tokens_per_second", math.nan, "tokens_per_second must be a positive number"),
                                 ("tokens_per_second", math.inf, "tokens_per_second must be a positive number"),
                                 ("first_token_delay", math.nan, "first_token_delay must be a number of seconds"),
                                 ("first_token_delay", math.inf, "first_token_delay must be a number of seconds"),
                                 ("heartbeat", math.nan, "heartbeat must be a positive number")):
        with pytest.raises(DemoServerError, match=said):
            DemoServer(**{setting: value})
    refused = subprocess.run([sys.executable, "-m", "mmsp_notebook.demo", "--tokens-per-second", "nan"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "tokens_per_second must be a positive number, not nan" in refused.stderr


def _unwritable_directory(tmp_path: Path) -> Path:
    """A directory in which no file can be made: one without write permission, or, for root (who
    writes anywhere permissions say no), one of the kernel's own."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    for candidate in (locked, Path("/sys")):
        try:
            (candidate / ".probe").touch()
        except OSError:
            return candidate
        (candidate / ".probe").unlink()
    pytest.fail("no directory here refuses a new file (the test needs one)")


def test_a_save_dir_the_proxy_cannot_write_in_is_refused_in_one_line_before_it_starts(tmp_path: Path, capsys) -> None:
    from mmsp_notebook.demo.__main__ import main

    a_file = tmp_path / "capture.sse"
    a_file.write_text("data: {}\n\n")
    refused = subprocess.run([sys.executable, "-m", "mmsp_notebook.demo", "--proxy", "http://127.0.0.1:9/v1",
                              "--save-dir", str(a_file)], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == f"error: --save-dir {a_file}: a file is there, not a directory\n"
    for save_dir, said in ((a_file / "sub", "a part of the path is a file, not a directory"),
                           (_unwritable_directory(tmp_path), "cannot make it or write a file in it: "),
                           ("", None)):
        assert main(["--proxy", "http://127.0.0.1:9/v1", "--save-dir", str(save_dir)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith(f"error: --save-dir {save_dir}: {said}" if said else
                              "error: --save-dir takes a directory, not an empty path")
    assert a_file.read_text() == "data: {}\n\n"
    # without --proxy there is nothing to save: said, and no server started (was: ignored)
    assert main(["--save-dir", str(tmp_path / "captures"), "--tokens-per-second", "nan"]) == 2  # (nan: no server either way)
    out, err = capsys.readouterr()
    assert out == "" and err == "error: --save-dir goes with --proxy UPSTREAM_URL: it saves the streams the proxy forwards\n"
    assert not (tmp_path / "captures").exists()


def test_a_stream_the_proxy_cannot_save_is_said_on_its_line_and_the_proxy_goes_on(
        demo_server: DemoServer, tmp_path: Path) -> None:
    save_dir = tmp_path / "captures"
    process = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--proxy", demo_server.base_url,
                                "--save-dir", str(save_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base_url = process.stdout.readline().split()[5]
        process.stdout.readline()
        body = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        save_dir.rmdir()  # (removed while the proxy runs)
        assert httpx.post(base_url + "/chat/completions", json=body, timeout=30).status_code == 200
        line = process.stdout.readline()
        assert "POST /v1/chat/completions -> 200 chat" in line and " not saved: No such file or directory (" in line
        save_dir.mkdir()
        assert httpx.post(base_url + "/chat/completions", json=body, timeout=30).status_code == 200
        line = process.stdout.readline()
        assert "-> 200 chat" in line and " saved " in line and "not saved" not in line
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert len(list(save_dir.glob("*.sse"))) == 1 and "Traceback" not in err
