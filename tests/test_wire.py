"""The wire inspector and its recording proxy: byte-for-byte forwarding, keys never kept, %%mmsp --wire."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import nbformat
import pytest
from helpers import serve_posts
from nbclient import NotebookClient

from mmsp_notebook import DemoServerError, ask
from mmsp_notebook.demo import DemoServer, WireProxy
from mmsp_notebook.engine.launch import launch
from mmsp_notebook.engine.session import Session
from mmsp_notebook.views.static import turn_bundle
from mmsp_notebook.views.wire import render_wire_html, render_wire_text
from mmsp_notebook.wire.pairing import pair_events
from mmsp_notebook.wire.proxy import accept_encoding
from mmsp_notebook.wire.sse import Frame, detect_protocol, split_frames, split_timed_frames

CANARY = "sk-canary-9f3e1c0d7b2a4e6f8a1b3c5d7e9f0a2b"
PROTOCOLS = ("mmsp", "openai-chat", "openai-responses", "ant-messages")
USER = [{"role": "user", "content_items": [{"type": "text.done", "text": "What's the weather in Paris and Rome?"}]}]
TOOLS = [{"name": "get_weather", "description": "The weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def _plain(events):
    """Events without their arrival stamps (created_at differs between two runs)."""
    out = []
    for event in events:
        event = dict(event)
        event.pop("created_at", None)
        out.append(event)
    return out


async def _collect(client, config=None):
    return [e async for e in client.streaming_response(USER, dict(config or {"max_tokens": 12, "tools": TOOLS}))]


# ------------------------------------------------------------------------------------------ the proxy
def test_proxy_forwards_all_four_protocols_byte_for_byte(demo_server):
    with WireProxy(demo_server.base_url) as proxy:
        assert proxy.root_url.startswith("http://127.0.0.1:")
        for client_type in PROTOCOLS:
            key = None if client_type == "mmsp" else CANARY
            direct = asyncio.run(_collect(demo_server.client("demo", client_type)))
            through = asyncio.run(_collect(proxy.client("demo", client_type, api_key=key)))
            assert _plain(through) == _plain(direct), client_type  # the same UniEvents either way
            assert proxy.settle()
            record = proxy.transcripts[-1]
            sent = demo_server.transcript(record.upstream_request_id)  # found by x-demo-request-id
            assert record.status == 200 and record.outcome == "complete"
            assert record.response == sent.response and len(record.response) > 1000  # proxy copy == what the demo sent
            assert record.request == sent.request  # the body went up unchanged
            assert record.protocol == sent.protocol
            assert len(record.times) == len(record.chunks) and record.times == sorted(record.times)

        # what a client receives through the proxy is what the demo sent, byte for byte
        body = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
        with httpx.Client() as http:
            with http.stream("POST", proxy.base_url + "/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {CANARY}"}) as response:
                received = b"".join(response.iter_raw())
                assert response.headers["content-type"].startswith("text/event-stream")
                request_id = response.headers["x-demo-request-id"]
        assert received == demo_server.transcript(request_id).response
        assert proxy.settle()
        assert proxy.transcripts[-1].response == received
        assert CANARY not in repr([vars(r) for r in proxy.transcripts])


class _Echo(BaseHTTPRequestHandler):
    """An upstream that answers with what it received."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        payload = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                   "body": body.decode()}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("set-cookie", "session=secret-cookie")
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET = do_PUT = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@contextlib.contextmanager
def _echo_server():
    """An upstream answering with what it received (:class:`_Echo`), on a loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()


def test_proxy_forwards_method_path_query_body_and_headers_but_keeps_no_key(caplog, capfd):
    caplog.set_level(logging.DEBUG)
    with _echo_server() as server:
        with WireProxy(f"http://127.0.0.1:{server.server_port}/api/v1") as proxy:
            assert proxy.base_url.endswith("/api/v1")
            with httpx.Client() as http:
                response = http.put(
                    proxy.base_url + f"/things/7?key={CANARY}&page=2",
                    content=json.dumps({"api_key": CANARY, "x": [1, 2]}).encode(),
                    headers={"Authorization": f"Bearer {CANARY}", "x-api-key": CANARY, "api-key": CANARY,
                             "x-custom": "kept", "Connection": "keep-alive, x-hop", "x-hop": "dropped",
                             "content-type": "application/json"},
                )
                tapped = http.get(proxy.tap_url("conv-1") + "/models")
        echo = response.json()
        assert echo["method"] == "PUT"
        assert echo["path"] == f"/api/v1/things/7?key={CANARY}&page=2"  # path and query unchanged
        assert json.loads(echo["body"]) == {"api_key": CANARY, "x": [1, 2]}  # body unchanged
        headers = echo["headers"]
        assert headers["authorization"] == f"Bearer {CANARY}" and headers["x-api-key"] == CANARY
        assert headers["api-key"] == CANARY and headers["x-custom"] == "kept"
        assert "x-hop" not in headers and headers["host"] == f"127.0.0.1:{server.server_port}"
        assert tapped.json()["path"] == "/api/v1/models"  # the tap prefix is not forwarded
        records = proxy.transcripts
        assert [r.tap for r in records] == ["", "conv-1"]
        assert records[0].request == {"x": [1, 2]} and records[0].endpoint == "/api/v1/things/7"
        stored = repr([{k: v for k, v in vars(r).items() if k != "_body"} for r in records])
        assert CANARY not in stored and "secret-cookie" not in stored
    out, err = capfd.readouterr()
    assert CANARY not in out + err + caplog.text


def test_the_proxy_asks_only_for_codings_it_can_undo_and_keeps_a_raw_deflate_stream_decoded():
    # a client with brotli or zstandard installed asks for br / zstd: the copy kept would be
    # compressed bytes; and some servers send "deflate" without its zlib header
    frames = b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated = raw.compress(frames) + raw.flush()

    def answer(handler):
        handler.rfile.read(int(handler.headers.get("content-length") or 0))
        asked = handler.headers.get("accept-encoding") or ""
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("x-asked", asked)
        if "deflate" in asked:
            handler.send_header("content-encoding", "deflate")
        handler.end_headers()
        handler.wfile.write(deflated if "deflate" in asked else frames)

    with contextlib.contextmanager(serve_posts)(answer) as upstream, WireProxy(upstream) as proxy, httpx.Client() as http:
        asked = [http.post(proxy.base_url + "/chat/completions", content=b"{}", headers={"accept-encoding": sent})
                 .headers["x-asked"] for sent in ("br, zstd, gzip;q=0.8, deflate", "br", "zstd, identity")]
        records = proxy.transcripts
    assert asked == ["gzip;q=0.8, deflate", "identity", "identity"]
    assert [r.response for r in records] == [frames] * 3  # the first one decoded from raw deflate
    assert accept_encoding("gzip, deflate, br") == "gzip, deflate"


def test_a_key_in_the_upstream_url_s_user_info_is_sent_but_never_logged(caplog, capfd):
    # an upstream behind Basic auth is given as http://user:KEY@host/v1: httpx sends the key as
    # Authorization and logs each request's URL, which must not show it
    caplog.set_level(logging.DEBUG)
    with _echo_server() as server, WireProxy(f"http://user:{CANARY}@127.0.0.1:{server.server_port}/v1") as proxy:
        echo = httpx.post(proxy.base_url + "/chat/completions", json={}).json()
        assert echo["headers"]["authorization"].startswith("Basic ")  # forwarded as the client's URL asks
        assert CANARY not in repr(proxy) + proxy.upstream_display + repr(proxy.transcripts)
    assert "HTTP Request: POST http://user:[redacted]@127.0.0.1:" in caplog.text
    out, err = capfd.readouterr()
    assert CANARY not in out + err + caplog.text


def test_proxy_is_loopback_only_and_reports_an_unreachable_upstream():
    with pytest.raises(DemoServerError, match="loopback"):
        WireProxy("http://127.0.0.1:9/v1", host="0.0.0.0")
    with pytest.raises(DemoServerError):
        WireProxy("ftp://example.com")
    with WireProxy("http://127.0.0.1:9/v1") as proxy:  # nothing listens on port 9
        response = httpx.post(proxy.base_url + f"/chat/completions?key={CANARY}", json={})
        assert response.status_code == 502 and response.json()["error"]["type"] == "ProxyError"
        assert CANARY not in response.text and proxy.transcripts[-1].outcome == "upstream_error"


def test_proxy_passes_a_cut_on_to_the_client(demo_server):
    with WireProxy(demo_server.base_url) as proxy:
        with pytest.raises(Exception) as info:
            asyncio.run(_collect(proxy.client("demo+cut-text", "openai-chat", api_key="demo-key"), {}))
        assert type(info.value).__name__ == "APIConnectionError"
        proxy.settle()
        assert proxy.transcripts[-1].outcome == "cut"


@pytest.mark.serial  # the stop must return within 2 s
def test_stopping_the_proxy_ends_a_stalled_stream_at_once(demo_server, capfd):
    proxy = WireProxy(demo_server.base_url).start()
    first = threading.Event()
    ended: dict[str, BaseException | None] = {}

    def stalled() -> None:
        try:
            with httpx.stream("POST", proxy.base_url + "/stream", timeout=httpx.Timeout(10, read=None),
                              json={"model": "demo+stall", "messages": USER}) as response:
                for _ in response.iter_raw():
                    first.set()
        except Exception as exc:
            ended["error"] = exc
        else:
            ended["error"] = None

    reader = threading.Thread(target=stalled, daemon=True)
    reader.start()
    assert first.wait(5), "the stalled stream sent its first fragment through the proxy"
    started = time.monotonic()
    proxy.stop()
    assert time.monotonic() - started < 2.0 and not proxy.running
    reader.join(2)
    assert not reader.is_alive() and isinstance(ended["error"], httpx.RemoteProtocolError)  # closed mid-body
    assert proxy.transcripts[-1].outcome == "stopped" and proxy.transcripts[-1].protocol == "mmsp"
    assert "ASGI" not in capfd.readouterr().err  # a close on purpose, not reported as a server error
    with pytest.raises(DemoServerError, match="not running"):
        _ = proxy.base_url
    with proxy:  # it starts again, on a new port if need be
        assert httpx.get(proxy.base_url + "/models").status_code == 200


# ------------------------------------------------------------------------------------------ frames and pairing
def test_frames_are_cut_at_blank_lines_and_timed_by_the_chunk_that_completed_them():
    data = b": keep-alive\n\ndata: {\"a\": 1}\n\nevent: ping\ndata: {}\r\n\r\ndata: [DONE]\n\npartial"
    sizes = [5, 20, 30, len(data) - 55]
    frames = split_timed_frames(data, sizes, [1.0, 2.0, 3.0, 4.0])
    assert b"".join(f.raw for f in frames) == data and len(frames) == len(split_frames(data))
    assert [f.kind for f in frames] == ["comment", "data", "data", "done", "other"]
    assert [f.t for f in frames] == [2.0, 3.0, 3.0, 4.0, 4.0]  # frame ends at 14, 30, 54, 68, end
    assert frames[2].event == "ping" and frames[1].json() == {"a": 1}


def test_a_blank_line_ends_a_frame_whatever_mix_of_line_endings_makes_it():
    # SSE ends a line with CRLF, LF or CR, and a blank line is any of them after a line's end: an
    # LF line then a CRLF blank line, a CR line then a CRLF blank line are two events for every
    # client (mmsp's reads lines as httpx splits them), so two frames in the wire view
    for data in (b"data: a\n\r\ndata: b\n\n", b"data: a\r\r\ndata: b\r\n\r\n", b"data: a\r\n\ndata: b\r\r"):
        frames = split_timed_frames(data, [len(data)], [1.0])
        assert b"".join(f.raw for f in frames) == data
        assert [(f.kind, f.data) for f in frames] == [("data", "a"), ("data", "b")], data
        assert frames[1].raw.startswith(b"data: b")
    # a CRLF is one line end, never a line ended by CR and a blank line made of the LF
    assert [f.data for f in split_timed_frames(b"data: a\r\ndata: b\r\n\r\n", [1], [1.0])] == ["a\nb"]


def test_a_stream_is_recognised_by_its_fields_never_by_what_its_text_says():
    def mmsp(text):
        event = {"role": "assistant", "event_type": "delta", "finish_reason": None,
                 "content_items": [{"type": "text.delta", "text": text}], "usage_metadata": None}
        return f"data: {json.dumps(event)}\n\n".encode()

    def chat(text):
        return f"data: {json.dumps({'object': 'chat.completion.chunk', 'choices': [{'delta': {'content': text}}]})}\n\n"

    quoting = "OpenAI sends chat.completion.chunk objects; Anthropic sends\nevent: message_start\nfirst"
    assert detect_protocol(b": keep-alive\n\n" + mmsp(quoting) + b"data: [DONE]\n\n") == "mmsp"
    assert detect_protocol((chat("the Responses API says event: response.created") + "data: [DONE]\n\n").encode()) == "chat"
    assert detect_protocol(b'event: message_start\ndata: {"type": "message_start"}\n\n') == "messages"
    assert detect_protocol(b'data: {"type": "response.created", "response": {}}\n\n') == "responses"  # no event: lines
    assert detect_protocol(b"data: hello\n\n") is None and detect_protocol(b"") is None


def test_vendor_pairing_anchors_fragments_even_when_every_frame_arrived_at_once():
    def frame(i, payload):
        return Frame(i, 0.0, f"data: {json.dumps(payload)}\n\n".encode(), "data", None, json.dumps(payload))

    frames = [frame(0, {"delta": {"role": "assistant"}}), frame(1, {"delta": {"content": "Hel"}}),
              frame(2, {"delta": {"content": "lo"}}), frame(3, {"delta": {}, "finish_reason": "stop"}),
              frame(4, {"usage": {"prompt_tokens": 1}})]

    def delta(kind, text):
        return {"event_type": "delta", "content_items": [{"type": kind, "text": text}]}

    events = [delta("text.delta", "Hel"), delta("text.delta", "lo"), delta("text.done", "Hello"),
              {"event_type": "stop", "content_items": []}]
    pairs, rule = pair_events(frames, events, [1.0] * 4, "chat")  # a burst: all frames arrived first
    assert rule == "fragment + arrival time" and pairs == [1, 2, 4, 4]


def test_pairing_reads_frames_whose_fields_have_the_wrong_shape_as_carrying_nothing():
    """A frame from a buggy upstream, a proxy in between or an edited capture (``content_block`` a
    string, ``choices`` a number, MMSP ``content_items`` a number) raised out of the wire view."""
    def frame(i, payload):
        return Frame(i, 0.1 * i, f"data: {json.dumps(payload)}\n\n".encode(), "data", None, json.dumps(payload))

    text = {"event_type": "delta", "content_items": [{"type": "text.delta", "text": "hi"}]}
    stop = {"event_type": "stop", "content_items": []}
    odd = {
        "messages": [{"type": "content_block_start", "index": 0, "content_block": "x"},
                     {"type": "content_block_delta", "index": 0, "delta": 5}, {"type": "message_delta", "usage": {}}],
        "chat": [{"object": "chat.completion.chunk", "choices": 5},
                 {"object": "chat.completion.chunk", "choices": [{"delta": {"tool_calls": 5, "content": "hi"}}]},
                 {"object": "chat.completion.chunk", "choices": 7, "usage": {"prompt_tokens": 1}}],
        "mmsp": [{"event_type": "delta", "content_items": 5}, {"event_type": "delta", "content_items": [5, None]}, stop],
    }
    for protocol, payloads in odd.items():
        frames = [frame(i, p) for i, p in enumerate(payloads)]
        pairs, _ = pair_events(frames, [text, stop], [0.05, 0.3], protocol)
        assert len(pairs) == 2 and all(p is not None and 0 <= p < len(frames) for p in pairs), (protocol, pairs)


class _Capture:
    """A provider's SSE response built frame by frame, with the delta mmsp yields for each frame (if any)."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.expected: list[tuple[int, str, str]] = []  # (frame, kind, value) of each delta mmsp yields

    def add(self, payload: dict, event: str | None = None, yields: tuple[str, str] | None = None) -> None:
        if yields is not None:
            self.expected.append((len(self.frames), *yields))
        self.frames.append((f"event: {event}\n" if event else "") + f"data: {json.dumps(payload)}\n\n")

    def raw(self, text: str) -> None:
        self.frames.append(text)

    def save(self, path) -> None:
        path.write_text("".join(self.frames), encoding="utf-8")


# fragments as reasoning models stream them: whitespace-only ones among the words
THOUGHT = ["Let", " me", " think", "\n\n", "The", " user", " ", "asks", ".", "\n\n", "Fine", "."]
ANSWER = ["Hello", "\n\n", " ", "world", "\n", "!"]


def _chat_capture() -> _Capture:
    """DeepSeek-style Chat Completions: reasoning_content, then content, each field null in the other's chunks."""
    cap = _Capture()

    def chunk(delta, finish=None, **extra):
        return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-reasoner",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

    cap.add(chunk({"role": "assistant", "content": None, "reasoning_content": ""}))
    for piece in THOUGHT:
        cap.add(chunk({"content": None, "reasoning_content": piece}), yields=("thinking", piece))
    for piece in ANSWER:
        cap.add(chunk({"content": piece, "reasoning_content": None}), yields=("text", piece))
    cap.raw(": keep-alive\n\n")
    cap.add(chunk({"content": "", "reasoning_content": None}, "stop"))
    cap.add({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-reasoner", "choices": [],
             "usage": {"prompt_tokens": 9, "completion_tokens": 18, "total_tokens": 27,
                       "completion_tokens_details": {"reasoning_tokens": 12}}})
    cap.raw("data: [DONE]\n\n")
    return cap


def _messages_capture() -> _Capture:
    """Anthropic Messages: a redacted thinking block, a thinking block, text, a tool call, pings between."""
    cap = _Capture()
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    cap.add({"type": "message_start", "message": message}, "message_start")
    cap.add({"type": "content_block_start", "index": 0,
             "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}},
            "content_block_start", yields=("thinking", "_REDACTED_THINKING"))
    cap.add({"type": "content_block_stop", "index": 0}, "content_block_stop")
    cap.add({"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": "",
                                                                          "signature": ""}}, "content_block_start")
    for piece in THOUGHT:
        cap.add({"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta", "thinking": piece}},
                "content_block_delta", yields=("thinking", piece))
    cap.add({"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "EqQB" * 8}},
            "content_block_delta", yields=("thinking", ""))
    cap.add({"type": "content_block_stop", "index": 1}, "content_block_stop")
    cap.add({"type": "ping"}, "ping")
    cap.add({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
            "content_block_start")
    for piece in ANSWER:
        cap.add({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": piece}},
                "content_block_delta", yields=("text", piece))
    cap.add({"type": "content_block_stop", "index": 2}, "content_block_stop")
    cap.add({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                          "name": "get_weather", "input": {}}},
            "content_block_start", yields=("tool_call", ""))
    for piece in ("", '{"city":', " ", '"Paris"}'):
        cap.add({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": piece}},
                "content_block_delta", yields=("tool_call", piece) if piece else None)
    cap.add({"type": "content_block_stop", "index": 3}, "content_block_stop")
    cap.add({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
             "usage": {"output_tokens": 30}}, "message_delta")
    cap.add({"type": "message_stop"}, "message_stop")
    return cap


def _responses_capture() -> _Capture:
    """OpenAI Responses: a reasoning summary, a message, a function call, items told apart by their ids."""
    cap = _Capture()
    seq = iter(range(1000))

    def emit(name, yields=None, **payload):
        cap.add({"type": name, **payload, "sequence_number": next(seq)}, name, yields)

    response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": "o4",
                "output": [], "usage": None, "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    emit("response.created", response=response)
    emit("response.in_progress", response=response)
    emit("response.output_item.added", output_index=0, item={"id": "rs_1", "type": "reasoning", "summary": []})
    emit("response.reasoning_summary_part.added", item_id="rs_1", output_index=0, summary_index=0,
         part={"type": "summary_text", "text": ""})
    for piece in THOUGHT:
        emit("response.reasoning_summary_text.delta", ("thinking", piece), item_id="rs_1", output_index=0,
             summary_index=0, delta=piece)
    thought = "".join(THOUGHT)
    emit("response.reasoning_summary_text.done", item_id="rs_1", output_index=0, summary_index=0, text=thought)
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": thought}],
                 "encrypted_content": "gAAAAAB" * 6}
    emit("response.output_item.done", ("thinking", ""), output_index=0, item=reasoning)
    message = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    emit("response.output_item.added", output_index=1, item=message)
    emit("response.content_part.added", item_id="msg_1", output_index=1, content_index=0,
         part={"type": "output_text", "text": "", "annotations": []})
    for piece in ANSWER:
        emit("response.output_text.delta", ("text", piece), item_id="msg_1", output_index=1, content_index=0,
             delta=piece, logprobs=[])
    emit("response.output_text.done", item_id="msg_1", output_index=1, content_index=0, text="".join(ANSWER),
         logprobs=[])
    call = {"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "call_1",
            "name": "get_weather", "arguments": ""}
    emit("response.output_item.added", ("tool_call", ""), output_index=2, item=call)
    for piece in ('{"city":', " ", '"Rome"}'):
        emit("response.function_call_arguments.delta", ("tool_call", piece), item_id="fc_1", output_index=2,
             delta=piece)
    emit("response.function_call_arguments.done", item_id="fc_1", output_index=2, arguments='{"city": "Rome"}')
    emit("response.completed", response={**response, "status": "completed", "usage": {
        "input_tokens": 9, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 39}})
    return cap


@pytest.mark.serial  # every frame must arrive within 0.5 s
@pytest.mark.parametrize(("client_type", "build"), [("openai-chat", _chat_capture), ("ant-messages", _messages_capture),
                                                    ("openai-responses", _responses_capture)],
                         ids=["chat", "messages", "responses"])
def test_a_burst_of_real_shaped_frames_pairs_every_delta_with_its_own_frame(tmp_path, client_type, build):
    """Whitespace-only fragments and redacted thinking pair with the frame that carried them, when every
    frame arrived at once (an instant replay): the protocol's structure pairs them, not their text."""
    capture = build()
    capture.save(tmp_path / "capture.sse")

    async def run(client):
        events, times = [], []
        async for event in client.streaming_response(USER, {}):
            events.append(event)
            times.append(time.monotonic())
        return events, times

    with DemoServer(replay=tmp_path / "capture.sse", instant=True) as replayer:
        upstream = replayer.root_url if client_type == "ant-messages" else replayer.base_url
        with WireProxy(upstream) as proxy:
            events, times = asyncio.run(run(proxy.client("captured", client_type, api_key=CANARY)))
            assert proxy.settle()
            record = proxy.transcripts[-1]
    frames = split_timed_frames(record.response, list(record.chunks), list(record.times))
    assert len(frames) == len(capture.frames) and frames[-1].t <= times[0] + 0.5  # every frame came in one burst
    pairs, rule = pair_events(frames, events, times, record.protocol)
    assert rule == "fragment + arrival time"
    deltas = [k for k, event in enumerate(events)
              if event["event_type"] == "delta" and event["content_items"][0]["type"].endswith(".delta")]
    yielded = []
    for k in deltas:
        item = events[k]["content_items"][0]
        kind = item["type"].split(".")[0]
        yielded.append((kind, item[{"thinking": "thinking", "text": "text", "tool_call": "arguments"}[kind]]))
    assert yielded == [(kind, value) for _, kind, value in capture.expected]  # the capture says what mmsp yields
    assert [pairs[k] for k in deltas] == [frame for frame, _, _ in capture.expected]
    # the stop with the last frame that carried a finish reason or usage; every pair in stream order
    stop_frame = max(i for i, frame in enumerate(frames)
                     if '"usage": {' in frame.text or "message_delta" in frame.text or "response.completed" in frame.text)
    assert pairs[-1] == stop_frame and pairs == sorted(pairs)


# ------------------------------------------------------------------------------------------ ask(wire=True)
def test_keys_sent_through_the_wire_reach_no_file_output_log_or_record(fresh_session, tmp_path, monkeypatch, caplog,
                                                                     capfd):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("WIRE_TEST_KEY", CANARY)
    srv = fresh_session.demo_server()
    turns = []
    for client_type, base_url in (("openai-chat", srv.base_url), ("ant-messages", srv.root_url)):
        out = io.StringIO()
        turn = ask("What's the weather in Paris?", model="demo", client_type=client_type, base_url=base_url,
                   api_key_env="WIRE_TEST_KEY", wire=True, stream=out, chat=client_type, max_tokens=10)
        assert turn.status == "complete", turn.error
        assert turn.wire.exchanges and turn.wire.events, client_type
        saved = turn.save_wire(tmp_path / f"{client_type}.sse")
        assert saved.read_bytes() == turn.wire.exchanges[-1].record.response
        html = render_wire_html(turn.wire)
        assert "raw SSE frame" in html and "text.delta" in html
        assert CANARY not in html + out.getvalue() + repr(turn.wire) + turn_bundle(turn)["text/html"]
        turns.append(turn)
    proxies = fresh_session.wire_proxies.running()
    assert {proxy.upstream for proxy in proxies} == {srv.base_url, srv.root_url}  # one per upstream
    for proxy in proxies:
        assert CANARY not in repr([{k: v for k, v in vars(r).items() if k != "_body"} for r in proxy.transcripts])
        assert all(CANARY.encode() not in r.response for r in proxy.transcripts)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    assert list((tmp_path / "cache").rglob("*.json"))  # the turns were traced there
    out, err = capfd.readouterr()
    assert CANARY not in out + err + caplog.text
    fresh_session.close()
    assert not fresh_session.wire_proxies.running() and not any(proxy.running for proxy in proxies)
    assert not srv.running


def test_saved_wire_replays_through_the_demo_server_to_the_same_events(fresh_session, tmp_path):
    def weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    for client_type in PROTOCOLS:
        turn = ask("What's the weather in Lisbon?", client_type=client_type, tools=[weather], max_steps=1,
                   wire=True, stream=io.StringIO(), chat=f"replay-{client_type}")
        assert turn.status == "complete"
        wire = turn.wire
        if client_type == "mmsp":
            exchange = wire.exchanges[-1]
            assert exchange.rule == "mmsp 1:1"
            data = [f for f in exchange.frames if f.kind == "data" and '"event_type"' in (f.data or "")]
            assert exchange.pairs == [f.index for f in data]  # exact: the n-th data frame is the n-th event
            for event, frame in zip(exchange.events, data):
                assert frame.json()["content_items"][:1] and frame.json()["event_type"] == event["event_type"] or \
                    event["event_type"] == "stop"
        path = turn.save_wire(tmp_path / f"{client_type}.sse")
        with DemoServer(replay=path, instant=True) as replayer:
            replayed = asyncio.run(_collect(replayer.client("anything", client_type), {}))
        assert _plain(replayed) == _plain(turn.events), client_type


def test_the_wire_is_captured_before_the_turn_future_resolves(fresh_session):
    run, future = launch("What's the weather in Paris?", wire=True, sess=fresh_session, max_tokens=8, chat="f")
    turn = future.result(timeout=30)  # no view drove it: nothing but the launch coroutine captured it
    assert turn.status == "complete" and turn.wire is not None
    wire = turn.wire
    assert [row["event"] for row in wire.events] == turn.events  # every UniEvent, once, in order
    assert [row["n"] for row in wire.events] == list(range(len(turn.events)))
    assert all(row["ms"] is not None and row["ms"] >= 0 for row in wire.events)
    assert repr(wire) == f"<Wire: 1 request, {len(wire)} frames, {len(turn.events)} UniEvents, paired by mmsp 1:1>"
    # the conversation's next turn goes through the same tap, and captures only its own request
    second = launch("And in Rome?", wire=True, sess=fresh_session, max_tokens=8, chat="f")[1].result(timeout=30)
    assert len(second.wire.exchanges) == 1 and second.wire.exchanges[0].record.id != wire.exchanges[0].record.id
    assert len(fresh_session.wire_proxies.running()) == 1


def test_a_session_serves_demo_models_from_the_server_it_was_given(tmp_path, monkeypatch):
    from mmsp_notebook.engine import session as session_module

    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    started: list[DemoServer] = []

    def own_server(instant: bool) -> DemoServer:
        started.append(DemoServer(instant=instant, heartbeat=0.05).start())
        return started[-1]

    sess = Session(local_server=own_server)
    sess.settings.demo_instant = True
    try:
        turn = launch("hello", sess=sess, max_tokens=5)[1].result(timeout=30)
        wired = launch("hello", sess=sess, max_tokens=5, wire=True, chat="w")[1].result(timeout=30)
        assert turn.status == wired.status == "complete" and len(started) == 1
        assert len(started[0].transcripts) == 2  # both went to it, the second through the proxy
        assert sess.wire_proxies.running()[0].upstream == started[0].base_url
    finally:
        sess.close()
    assert not started[0].running and not sess.wire_proxies.running()

    monkeypatch.setattr(session_module, "_local_server", None)  # nothing provided at all
    bare = Session()
    refused = launch("hello", sess=bare)[1].result(timeout=30)
    assert refused.status == "error" and isinstance(refused.error, DemoServerError)
    assert "--base-url" in str(refused.error)


# ------------------------------------------------------------------------------------------ %%mmsp --wire
def test_magic_wire_shows_raw_sse_next_to_unievents_in_a_real_kernel(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "%load_ext mmsp_notebook",
        "%%mmsp --wire -o a --max-tokens 8\nhello there",
        "%%mmsp --wire --client-type openai-chat -o b --chat c --max-tokens 8\nhello there",
        "print(len(a.wire), a.wire.exchanges[0].rule, b.wire.exchanges[0].rule, a.save_wire('a.sse').stat().st_size > 0)",
        "a.wire",
        "from mmsp_notebook.engine.session import session\nproxies = session().wire_proxies.running()\n"
        "%unload_ext mmsp_notebook\nprint(len(proxies), [p.running for p in proxies])",
    )]
    monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    def html_of(cell):
        return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs
                       if o.output_type in ("display_data", "execute_result"))

    mmsp_html, chat_html = html_of(nb.cells[1]), html_of(nb.cells[2])
    for html in (mmsp_html, chat_html):
        assert "raw SSE frame" in html and "→ UniEvent(s)" in html
        assert "thinking.delta" in html and "text.delta" in html and "text.done" in html and "<b>stop</b>" in html
    assert "data: {&quot;role&quot;:&quot;assistant&quot;,&quot;event_type&quot;:&quot;delta&quot;" in mmsp_html
    assert "paired by mmsp 1:1" in mmsp_html and "/v1/stream" in mmsp_html
    assert "chat.completion.chunk" in chat_html and "/v1/chat/completions" in chat_html
    assert "data: [DONE]" in chat_html
    printed = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "mmsp 1:1 fragment + arrival time True" in printed
    value = nb.cells[4].outputs[0]["data"]  # a wire as a cell's value: the same table
    assert "raw SSE frame" in value["text/html"] and "/v1/stream" in value["text/html"]
    assert value["text/plain"].startswith("-- step 1: POST /v1/stream HTTP 200 mmsp")
    assert "".join(o.get("text", "") for o in nb.cells[5].outputs).strip() == "1 [False]"  # %unload_ext stops it
    assert (tmp_path / "a.sse").read_bytes().startswith(b"data: {")


def test_chat_wire_and_the_proxy_command_line(fresh_session, capsys, tmp_path):
    import os
    import subprocess
    import sys

    from mmsp_notebook import Chat
    chat = Chat(wire=True, name="wired", max_tokens=6)
    turn = chat.send("hello")
    assert turn.status == "complete" and turn.wire.exchanges[0].rule == "mmsp 1:1"
    assert "POST /v1/stream HTTP 200" in capsys.readouterr().out  # shown below the cell (text outside Jupyter)
    fresh_session.close()

    srv = fresh_session.demo_server()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--proxy", srv.base_url, "--save-dir",
                             str(tmp_path / "captures")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith("mmsp wire proxy listening on http://127.0.0.1:")
        base_url = first.split()[5]
        proc.stdout.readline()
        body = {"model": "demo", "stream": True, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        with httpx.stream("POST", base_url + "/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {CANARY}"}) as response:
            received = b"".join(response.iter_raw())
        line = proc.stdout.readline()
        assert "POST /v1/chat/completions -> 200 chat" in line and "saved" in line
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    saved = list((tmp_path / "captures").glob("*.sse"))
    assert len(saved) == 1 and saved[0].read_bytes() == received
    assert CANARY not in first + line + out + err


def test_a_key_quoted_back_in_a_response_is_redacted_in_the_wire_view_and_its_saved_file(
        fresh_session, monkeypatch, key_echoing_server, tmp_path):
    import mmsp_notebook as m

    monkeypatch.setenv("MY_SECRET_VAR", "canary-key-9876543")
    for model in ("custom-model", "stream-refusal"):  # refused with HTTP 401, and inside an HTTP 200 stream
        turn = m.ask("hello", model=model, client_type="openai-chat", base_url=key_echoing_server,
                     api_key_env="MY_SECRET_VAR", wire=True, stream=io.StringIO())
        assert turn.status == "error" and turn.wire.exchanges
        shown = [render_wire_html(turn.wire), render_wire_text(turn.wire)]
        if model == "custom-model":
            with pytest.raises(ValueError, match="HTTP 401"):
                turn.wire.save(tmp_path / "refused.sse")
        else:
            shown.append(turn.wire.save(tmp_path / "refused.sse").read_bytes().decode())
        assert all("Incorrect API key" in text for text in shown)
        assert all("canary-key-9876543" not in text for text in [*shown, repr(turn.wire)])
        assert model != "custom-model" or repr(turn.wire) == f"<Wire: 1 request, {len(turn.wire)} frames, 0 UniEvents>"
        assert "[redacted]" in shown[0]  # (the text view cuts long lines before it)
        assert model == "custom-model" or "[redacted]" in shown[-1]  # the saved stream


def test_a_long_answer_shows_its_first_frames_and_keeps_them_all(fresh_session):
    from mmsp_notebook.views.wire import FRAME_LIMIT

    run, future = launch("Tell me everything", model="demo+tokens=3000+nothink", wire=True)
    turn = future.result(60)
    frames = len(turn.wire)
    assert turn.status == "complete" and frames > 2 * FRAME_LIMIT  # the Wire keeps every frame
    said = f"… {frames - FRAME_LIMIT:,} more frames not shown (turn.wire has them all"
    html, text = render_wire_html(turn.wire), render_wire_text(turn.wire)
    assert said in html and html.count("<tr") == FRAME_LIMIT + 1  # the head's row too
    assert said in text and len(text.splitlines()) < 3 * FRAME_LIMIT


def _answering(text: str) -> list[bytes]:
    """A Chat Completions stream answering ``text``, its JSON as a server writes it (non-ASCII escaped)."""
    from sse_scripts import chat_chunk

    return [chat_chunk(text), chat_chunk(finish="stop"), chat_chunk(usage=True), b"data: [DONE]\n\n"]


def test_a_lone_surrogate_in_a_stream_is_shown_as_u_fffd_in_the_wire_view_and_the_terminal(fresh_session, monkeypatch):
    from sse_scripts import script_server

    monkeypatch.setenv("WIRE_TEST_KEY", CANARY)
    # a model's JSON escaping half a surrogate pair, which no UTF-8 page or terminal can carry
    with script_server(lambda _request, _auth: _answering("half \ud83d pair")) as base_url:
        out = io.StringIO()
        turn = ask("hi", model="m", client_type="openai-chat", base_url=base_url, api_key_env="WIRE_TEST_KEY",
                   wire=True, stream=out)
    assert turn.status == "complete" and turn.text == "half \ufffd pair"  # (printable)
    assert "\\ud83d" in turn.wire[0]["raw"]  # the frame as it came
    shown = [render_wire_html(turn.wire), render_wire_text(turn.wire), out.getvalue()]
    for text in shown:
        text.encode("utf-8")  # a page or a terminal takes it
    assert "half \ufffd pair" in shown[0] and "half \ufffd pair" in shown[1] and "half \ufffd pair" in shown[2]


def test_saving_a_step_the_wire_does_not_hold_says_which_steps_it_holds(fresh_session, tmp_path):
    from mmsp_notebook import OptionError, OptionTypeError

    turn = ask("hello", wire=True, stream=io.StringIO(), max_tokens=5)
    assert turn.save_wire(tmp_path / "last.sse", 0).read_bytes() == turn.save_wire(tmp_path / "first.sse", -1).read_bytes()
    for step in (1, -2, 5):
        with pytest.raises(OptionError, match=rf"no step {step}: this turn's wire holds 1 step \(step=0, or -1 for the last\)"):
            turn.save_wire(tmp_path / "x.sse", step)
    for step in (True, 1.0, "0", None):
        with pytest.raises(OptionTypeError, match="step must be an integer"):
            turn.save_wire(tmp_path / "x.sse", step)
    assert not (tmp_path / "x.sse").exists()


def test_a_key_in_the_endpoint_s_path_is_never_shown(fresh_session, monkeypatch):
    """A gateway that takes its key in the URL path (``https://host/<key>/v1``): the wire's records,
    its views and the saved stream's record never show it."""
    from sse_scripts import script_server

    monkeypatch.setenv("WIRE_TEST_KEY", CANARY)
    with script_server(lambda _request, _auth: _answering("fine")) as base_url:
        keyed = base_url.removesuffix("/v1") + f"/{CANARY}/v1"
        turn = ask("hi", model="m", client_type="openai-chat", base_url=keyed, api_key_env="WIRE_TEST_KEY",
                   wire=True, stream=io.StringIO())
    assert turn.status == "complete" and turn.text == "fine"
    shown = [render_wire_html(turn.wire), render_wire_text(turn.wire), repr(turn.wire), json.dumps(turn.wire, default=str)]
    assert "/chat/completions" in shown[0]
    for text in shown:
        assert CANARY not in text


@pytest.mark.parametrize("client_type", ["openai-chat", "mmsp"])
def test_an_endpoint_with_a_query_gets_the_same_request_through_the_wire_and_its_key_is_never_shown(
        fresh_session, monkeypatch, caplog, capfd, client_type):
    """An Azure-style base URL (``...?api-version=...``, a gateway's ``&key=...``): the client appends
    its path after the query, and the upstream gets that same request line with ``--wire``; the key
    in the query shows in no wire view, record or log line."""
    from sse_scripts import mmsp_event, mmsp_text

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("WIRE_TEST_KEY", "k-local-123456")
    paths: list[str] = []

    def answer(handler):
        handler.rfile.read(int(handler.headers.get("content-length") or 0))
        paths.append(handler.path)
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()
        frames = (mmsp_text("fine") + [mmsp_event(stop=True)] if client_type == "mmsp"
                  else _answering("fine"))
        handler.wfile.write(b"".join(frames))

    with contextlib.contextmanager(serve_posts)(answer) as base_url:
        keyed = f"{base_url}?api-version=2024-06-01&key={CANARY}"
        turns = [ask("hi", model="m", client_type=client_type, base_url=keyed, api_key_env="WIRE_TEST_KEY",
                     wire=wire, stream=io.StringIO()) for wire in (False, True)]
    assert [t.status for t in turns] == ["complete", "complete"] and turns[1].text == "fine"
    assert len(paths) == 2 and paths[0] == paths[1]  # the same request line, query and all
    assert f"key={CANARY}" in paths[0] and "api-version=2024-06-01" in paths[0]
    wire = turns[1].wire
    assert wire.exchanges and wire.exchanges[0].record.status == 200
    shown = [render_wire_html(wire), render_wire_text(wire), repr(wire), json.dumps(wire, default=str),
             repr([vars(e.record) for e in wire.exchanges]), repr(fresh_session.wire_proxies.running())]
    out, err = capfd.readouterr()
    for text in [*shown, caplog.text, out, err]:
        assert CANARY not in text
    assert "key=[redacted]" in caplog.text  # the request to the proxy's tap, and the proxy's upstream request


def test_an_upstream_with_a_fragment_is_refused_saying_what_to_do():
    with pytest.raises(DemoServerError, match="without its #fragment"):
        WireProxy(f"http://127.0.0.1:9/v1?key={CANARY}#part")
    with WireProxy(f"http://127.0.0.1:9/v1?api-version=1&key={CANARY}") as proxy:
        assert proxy.base_url == f"{proxy.root_url}/v1?api-version=1&key={CANARY}"
        assert proxy.tap_url("t") == f"{proxy.root_url}/_tap/t/v1?api-version=1&key={CANARY}"
        assert CANARY not in repr(proxy) + proxy.upstream_display


def test_a_frame_s_fields_are_read_as_an_event_source_reads_them() -> None:
    """The last ``event`` line names a frame (an empty one, none); one space after a colon is not the
    value's; ``data`` with no colon is an empty data line."""
    from mmsp_notebook.wire.sse import parse_frame

    f = parse_frame(0, 0.0, b"event: ping\nevent: content_block_delta\ndata: {\"a\": 1}\n\n")
    assert (f.kind, f.event, f.data) == ("data", "content_block_delta", '{"a": 1}')
    f = parse_frame(1, 0.0, b"event:message_stop\ndata:  two spaces\ndata\n\n")
    assert (f.event, f.data) == ("message_stop", " two spaces\n")
    f = parse_frame(2, 0.0, b"event: x\nevent:\ndata: [DONE]\n\n")
    assert (f.kind, f.event) == ("done", None)
