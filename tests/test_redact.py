"""Keys stay out of what the project shows and writes: cut keys in errors, keys echoed in the stream."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from helpers import serve_posts
from sse_scripts import chat_chunk, mmsp_event, mmsp_text, script_server

import mmsp_notebook as mn
from mmsp_notebook.core.redact import (
    MIN_PREFIX,
    REDACTED,
    held_secrets,
    redact,
    redact_bytes,
    redact_data,
    redact_secrets,
)
from mmsp_notebook.core.store import sidecar_path, tracer_path
from mmsp_notebook.demo import DemoServer, WireProxy
from mmsp_notebook.views.static import turn_bundle

KEY = "CNRYq7f3a9cXk2Lm8Qp4Zt6Wv1Bn5Hd0"  # no provider's shape: only known as a configured key
ENV = "LOOPBACK_PROVIDER_API_KEY"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    return KEY


def test_a_configured_key_is_redacted_whole_or_cut(key):
    assert redact(f"x {key} y") == "x [redacted] y"
    assert redact(f"Header: Bearer {key[:11]}") == "Header: Bearer [redacted]"  # cut at the end
    assert redact(f"got {key[:11]}… (truncated)") == "got [redacted]… (truncated)"  # cut before a non-key char
    assert redact(f"'{key[:MIN_PREFIX]}'") == "'[redacted]'"
    assert redact(f"{key[:MIN_PREFIX - 1]}") == key[:MIN_PREFIX - 1]  # too short to tell
    other = key[:8] + "ZZZZ"  # another token that begins like the key: not a cut
    assert redact(other) == other
    assert redact(f"{key}{key[:9]}") == "[redacted][redacted]"
    assert redact_secrets(f"a {key[:20]}") == "a [redacted]"
    assert redact_secrets("sk-abcdefghijklmnopqrstu") == "sk-abcdefghijklmnopqrstu"  # shapes are redact()'s
    assert redact("sk-abcdefghijklmnopqrstu") == "[redacted]"
    assert redact_bytes(f"data: {key}\n\n".encode()) == b"data: [redacted]\n\n"
    clean = {"a": ["b", {"c": b"\x00"}], "n": 1}
    assert redact_data(clean) is clean  # nothing changed: not copied
    assert redact_data({"a": [f"k={key}"], "b": "x"}) == {"a": ["k=[redacted]"], "b": "x"}


@pytest.fixture
def cut_key_server():
    """A provider that refuses with a 401 whose text body quotes the key it got, long enough that mmsp
    cuts the message at 200 characters in the middle of the key."""
    def refuse(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        auth = self.headers.get("authorization") or ""
        lead = "Unauthorized. The request carried the header Authorization: "
        head = f"HTTP 401: {lead}"
        pad = "." * (200 - len(head) - len("Bearer ") - 11)
        body = f"{lead}{pad}{auth} and nothing else matched".encode()
        self.send_response(401)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    yield from serve_posts(refuse)


def test_a_key_cut_by_the_error_message_is_redacted_everywhere(fresh_session, key, cut_key_server):
    out = io.StringIO()
    turn = mn.ask("hi", model="m", client_type="mmsp", base_url=cut_key_server, api_key_env=ENV, stream=out)
    assert turn.status == "error"
    raw = str(turn.error.__dict__) + repr(turn.error.args)
    assert "Bearer [redacted]" in turn.error_message  # the cut was here: mmsp keeps 200 characters
    shown = [turn.error_message, str(turn.error), raw, out.getvalue(), json.dumps(turn_bundle(turn)),
             sidecar_path(turn.trace_id).read_text()]
    for text in shown:
        assert key[:MIN_PREFIX] not in text, text


def _echo(request, auth):
    """A model that echoes the key it was sent in its thinking, its text and a tool call's arguments."""
    sent = auth.split()[-1]
    args = json.dumps({"token": sent})
    return [
        mmsp_event({"type": "thinking.delta", "thinking": f"the key is {sent[:10]}"}),
        mmsp_event({"type": "thinking.delta", "thinking": sent[10:]}),
        mmsp_event({"type": "thinking.done", "thinking": f"the key is {sent}"}),
        *mmsp_text("Your key: ", sent, "."),
        mmsp_event({"type": "tool_call.delta", "name": "save", "tool_call_id": "c1", "arguments": args}),
        mmsp_event({"type": "tool_call.done", "name": "save", "tool_call_id": "c1", "arguments": {"token": sent}}),
        mmsp_event(stop=True),
    ]


def _files_under(root):
    return {p: p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file()}


def test_a_key_echoed_in_the_stream_is_redacted_in_the_trace_and_sidecar(fresh_session, key, tmp_path):
    with script_server(_echo) as url:
        turn = mn.ask("what is my key?", model="m", client_type="mmsp", base_url=url, api_key_env=ENV,
                      stream=io.StringIO())
    assert turn.status == "complete", turn.error_message
    # the Python values are the data as received (documented): the program decides what to print
    assert key in turn.text and key in turn.thinking and turn.tool_calls[0]["arguments"] == {"token": key}
    assert key in json.dumps(fresh_session.conversation(None).history())
    files = _files_under(tmp_path / "cache")
    assert tracer_path(turn.trace_id) in files and sidecar_path(turn.trace_id) in files
    for path, text in files.items():
        assert key[:MIN_PREFIX] not in text, path
    trace = json.loads(files[tracer_path(turn.trace_id)])
    assistant = trace["history"][1]["content_items"]
    assert [item["type"] for item in assistant] == ["thinking.done", "text.done", "tool_call.done"]
    assert assistant[1]["text"] == "Your key: [redacted]." and assistant[2]["arguments"] == {"token": "[redacted]"}


def test_a_trace_mmsp_wrote_itself_before_is_redacted_too(fresh_session, key, tmp_path):
    """openai-chat: mmsp's own client used to save the trace, key and all; the engine saves it now."""
    transcript = tmp_path / "echo.sse"
    transcript.write_bytes(chat_chunk(f"Your key is {KEY}") + chat_chunk(finish="stop") + chat_chunk(usage=True)
                           + b"data: [DONE]\n\n")
    with DemoServer(replay=transcript, instant=True) as server:
        turn = mn.ask("what is my key?", model="m", client_type="openai-chat", base_url=server.base_url,
                      api_key_env=ENV, stream=io.StringIO())
    assert turn.status == "complete" and key in turn.text
    files = _files_under(tmp_path / "cache")
    assert tracer_path(turn.trace_id) in files
    for path, text in files.items():
        assert key[:MIN_PREFIX] not in text, path


def test_the_proxy_saves_an_echoed_key_redacted_as_save_wire_does(fresh_session, key, tmp_path):
    with script_server(_echo) as url, WireProxy(url) as proxy:
        turn = mn.ask("what is my key?", model="m", client_type="mmsp", base_url=proxy.base_url, api_key_env=ENV,
                      stream=io.StringIO())
        assert proxy.settle()
        [record] = proxy.transcripts
        assert key.encode() in record.response  # what crossed the wire
        saved = proxy.save_transcript(record.id, tmp_path / "proxy.sse").read_bytes()
    assert turn.status == "complete"
    assert key[:MIN_PREFIX].encode() not in saved and b"[redacted]" in saved
    assert saved == redact_bytes(record.response)  # the one redaction of every capture file


def test_the_proxy_command_save_dir_writes_no_key(key, tmp_path):
    """``python -m mmsp_notebook.demo --proxy URL --save-dir DIR``, end to end."""
    import asyncio

    import mmsp

    save_dir = tmp_path / "captures"
    with script_server(_echo) as url:
        proc = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--proxy", url, "--port", "0",
                                 "--save-dir", str(save_dir)], stdout=subprocess.PIPE, text=True)
        try:
            base = proc.stdout.readline().split(" on ", 1)[1].split(" -> ")[0].strip()
            client = mmsp.AutoLLMClient("m", api_key=key, base_url=base, client_type="mmsp")

            async def consume():
                return [e async for e in client.streaming_response(
                    messages=[{"role": "user", "content_items": [{"type": "text.done", "text": "key?"}]}], config={})]

            events = asyncio.run(consume())
            assert events[-1]["event_type"] == "stop"
            line = ""
            while "saved" not in line:
                line = proc.stdout.readline()
                assert line, "the proxy ended without saving"
        finally:
            proc.terminate()
            proc.wait(10)
    [saved] = list(save_dir.glob("*.sse"))
    data = saved.read_bytes()
    assert b"[redacted]" in data and key[:MIN_PREFIX].encode() not in data


def _split_echo(request, auth):
    """A model that echoes the key it was sent split across deltas (a piece too short to tell first)."""
    sent = auth.split()[-1]
    return [
        mmsp_event({"type": "thinking.delta", "thinking": f"it is {sent[:4]}"}),
        mmsp_event({"type": "thinking.delta", "thinking": sent[4:15]}),
        mmsp_event({"type": "thinking.delta", "thinking": sent[15:] + " indeed"}),
        mmsp_event({"type": "thinking.done", "thinking": f"it is {sent} indeed"}),
        *mmsp_text("Key: ", sent[:3], sent[3:20], sent[20:], ". Again: " + sent.swapcase()),
        mmsp_event(stop=True),
    ]


def test_a_key_split_across_deltas_shows_in_no_events_row_nor_wire_view_nor_saved_stream(fresh_session, key, tmp_path):
    from mmsp_notebook.views.html import render_events
    from mmsp_notebook.views.model import OpsTracker
    from mmsp_notebook.views.wire import render_wire_html, render_wire_text

    with script_server(_split_echo) as url:
        turn = mn.ask("what is my key?", model="m", client_type="mmsp", base_url=url, api_key_env=ENV,
                      stream=io.StringIO(), wire=True)
    assert turn.status == "complete", turn.error_message
    assert key in turn.text  # the data as received
    ops = json.dumps(OpsTracker(events=True).ops(turn, final=True), ensure_ascii=False)
    saved = turn.save_wire(tmp_path / "split.sse")
    shown = {"events table": render_events(turn), "widget ops": ops, "wire html": render_wire_html(turn.wire),
             "wire text": render_wire_text(turn.wire), "wire rows": "".join(row["raw"] for row in turn.wire),
             "saved stream": saved.read_text()}
    for where, text in shown.items():
        # no piece of the key longer than the first one (4 characters, before anything could tell)
        for k in range(0, len(key) - MIN_PREFIX + 1):
            assert key[k:k + MIN_PREFIX] not in text, (where, key[k:k + MIN_PREFIX])
        assert key.swapcase()[:MIN_PREFIX] not in text, where  # a key echoed in another case too
        assert "[redacted]" in text, where
    # the saved stream still replays: the same answer, the key's pieces redacted
    from mmsp_notebook.demo import DemoServer

    with DemoServer(replay=str(saved)) as srv:
        again = mn.ask("again", model="m", client_type="mmsp", base_url=srv.base_url, stream=io.StringIO())
    assert again.status == "complete", again.error_message
    assert "[redacted]" in again.text and key[:MIN_PREFIX] not in again.text


def test_settings_and_history_shown_keep_keys_out(fresh_session, key, monkeypatch):
    from mmsp_notebook.front.frames import history_frame, models_frame

    settings = fresh_session.settings
    settings.add_alias("fast", f"openai-chat:m --base-url http://u:{key}@127.0.0.1:1/v1")
    settings.add_alias("other", "openai-chat:m --base-url https://user:hunter2secret@example.com/v1")
    shown = json.dumps([settings.as_dict(), models_frame(settings.aliases).head(2).to_dict("records")])
    assert key[:MIN_PREFIX] not in shown and "hunter2secret" not in shown and "[redacted]@" in shown
    assert key in settings.aliases["fast"].base_url  # the alias itself still works with it
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": f"Repeat this: {key}"}]},
               {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": "f", "arguments": {"k": key}}]}]
    assert key[:MIN_PREFIX] not in history_frame(history).to_string()


def _whole_and_escaped(request, auth):
    """A delta holding the whole key (redacted when captured), a delta whose text is also elsewhere in
    its frame, and a text.done."""
    sent = auth.split()[-1]
    return [*mmsp_text("Your key: ", sent, " ok e"), mmsp_event(stop=True)]


def test_the_wire_view_keeps_frames_already_safe_and_mangles_none(fresh_session, key):
    from mmsp_notebook.views.wire import HIDDEN_FRAME, render_wire_text

    with script_server(_whole_and_escaped) as url:
        turn = mn.ask("key?", model="m", client_type="mmsp", base_url=url, api_key_env=ENV, stream=io.StringIO(),
                      wire=True)
    text = render_wire_text(turn.wire, width=400)
    assert HIDDEN_FRAME not in text and key[:MIN_PREFIX] not in text
    assert 'text="[redacted]"' in text and 'type="text.delta"' in text  # no other string touched


def test_redaction_cases_escapes_words_and_urls(monkeypatch, key):
    monkeypatch.setenv("OPENAI_API_KEY", "ollama")  # a word set as a key (Ollama's documented setting)
    monkeypatch.setenv("DB_SECRET", 'Pässw0rd"x\\yz')
    assert redact_secrets(f"İstanbul: {key.upper()}") == "İstanbul: [redacted]"  # any case, whatever else is there
    assert redact_secrets("Run ollama pull, then start Ollama (OLLAMA_HOST)") == \
        "Run [redacted] pull, then start Ollama (OLLAMA_HOST)"  # a word is matched as written only
    frame = ("data: " + json.dumps({"text": 'pw: Pässw0rd"x\\yz ok'}) + "\n").encode()
    assert redact_bytes(frame) == b'data: {"text": "pw: [redacted] ok"}\n'  # as JSON writes it
    assert redact("https://user:p@ss@host/v1 https://u:a/b@h/x") == "https://user:[redacted]@host/v1 https://u:[redacted]@h/x"


def _echo_in_names(request, auth):
    """A model that puts the key it was sent in a tool call's name and id, and in its finish reason."""
    sent = auth.split()[-1]
    stop = json.loads(mmsp_event(stop=True)[len(b"data: "):])
    stop["finish_reason"] = f"stop {sent}"
    return [
        *mmsp_text("ok"),
        mmsp_event({"type": "tool_call.delta", "name": f"lookup_{sent}", "tool_call_id": f"c_{sent}", "arguments": ""}),
        mmsp_event({"type": "tool_call.done", "name": f"lookup_{sent}", "tool_call_id": f"c_{sent}", "arguments": {}}),
        b"data: " + json.dumps(stop).encode() + b"\n\n",
    ]


def test_a_key_in_a_tool_name_id_or_finish_reason_is_shown_nowhere(fresh_session, key, tmp_path):
    from mmsp_notebook.views.model import view_model
    from mmsp_notebook.views.text import render_text

    with script_server(_echo_in_names) as url:
        turn = mn.ask("hi", model="m", client_type="mmsp", base_url=url, api_key_env=ENV, stream=io.StringIO())
    assert key in turn.finish_reason and key in turn.steps[-1].items[-1].name  # (the data as received)
    shown = [turn_bundle(turn)["text/html"], render_text(turn), json.dumps(view_model(turn), default=str),
             json.dumps(fresh_session.usage.rows(), default=str)]
    for text in shown:
        assert key[:MIN_PREFIX] not in text and "[redacted]" in text
    for path, text in _files_under(tmp_path / "cache").items():
        assert key[:MIN_PREFIX] not in text, path


def test_a_key_in_a_finish_reason_is_shown_in_no_repr_comparison_nor_step_line(fresh_session, key, tmp_path):
    """The turn's repr, a comparison's figures (HTML, text, frame) and a recorded turn's step lines
    show a finish reason as the footer does: with the key redacted."""
    from mmsp_notebook import traces
    from mmsp_notebook.views.columns import render_comparison_text

    with script_server(_echo_in_names) as url:
        turn = mn.ask("hi", model="m", client_type="mmsp", base_url=url, api_key_env=ENV, stream=io.StringIO())
        cmp = mn.compare("hi", ["a@mmsp", "b@mmsp"], base_url=url, api_key_env=ENV)
    assert key in turn.finish_reason and all(key in t.finish_reason for t in cmp.turns)  # (the data as received)
    history = [
        {"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]},
        {"role": "assistant", "finish_reason": f"tool_call {key}", "content_items": [
            {"type": "tool_call.done", "name": "f", "arguments": {}, "tool_call_id": "c1"}]},
        {"role": "user", "content_items": [{"type": "tool_result.done", "text": "ok", "tool_call_id": "c1"}]},
        {"role": "assistant", "finish_reason": f"stop {key}", "content_items": [{"type": "text.done", "text": "done"}]},
    ]
    (tmp_path / "t.json").write_text(json.dumps({"config": {"trace_id": "t", "model": "m"}, "history": history}))
    shown = traces.show(tmp_path / "t.json")._repr_mimebundle_()
    explorer = traces.explore(tmp_path / "t.json")
    explorer.select(0)
    cmp.drawn_in_cell = None  # its whole bundle, not the summary of a comparison drawn in the running cell (a
    # shell another test of this process made counts as IPython running one)
    for text in [repr(turn), cmp._repr_mimebundle_()["text/html"], render_comparison_text(cmp.labels, cmp.turns),
                 cmp.frame.to_string(), shown["text/html"], shown["text/plain"], explorer.static_html()]:
        assert key[:MIN_PREFIX] not in text and "[redacted]" in text


def test_a_credential_in_a_urls_query_is_redacted_as_its_password_is(fresh_session, key, monkeypatch):
    """A key given in the base URL's query (``?key=...``, as Google's API takes it) is kept out of the
    error that quotes the URL, and out of the proxy's log lines, as a URL's password is."""
    from mmsp_notebook.views.text import render_text
    from mmsp_notebook.wire.proxy import mask_query

    secret = "qry7Xk2Lm8Qp4Zt6"  # not configured anywhere: only its place in the URL tells it
    assert redact(f"GET https://h/v1/m:stream?alt=sse&key={secret}#x") == "GET https://h/v1/m:stream?alt=sse&key=[redacted]#x"
    assert redact(f"https://h/?api_key={secret}&token={secret}&page=2") == "https://h/?api_key=[redacted]&token=[redacted]&page=2"
    frame = ("data: " + json.dumps({"text": f'see https://h/?key={secret}" ok'}) + "\n").encode()
    assert json.loads(redact_bytes(frame)[6:]) == {"text": 'see https://h/?key=[redacted]" ok'}  # still JSON
    for text in (f"POST https://user:p@ss{secret}@host/v1", f"POST https://host/v1?key={secret} 200"):
        assert secret not in mask_query(text) and mask_query(text) == redact(text)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    srv = fresh_session.demo_server()
    turn = mn.ask("hi", model="demo", client_type="openai-chat", base_url=f"{srv.base_url}?key={secret}",
                  stream=io.StringIO())
    assert turn.status == "error" and "?key=[redacted]" in turn.error_message  # (mmsp's message quotes the URL)
    for text in (turn.error_message, str(turn.error), turn_bundle(turn)["text/html"], render_text(turn)):
        assert secret not in text

def test_keys_a_trace_file_holds_are_redacted_in_its_views_and_frames(key, tmp_path):
    """A trace not written by this package (or before it redacted): user text, the last step's tool
    result, model ids and a sidecar's error message are shown redacted, as the assistant's text is."""
    from mmsp_notebook import traces

    history = [
        {"role": "user", "content_items": [{"type": "text.done", "text": f"my key is {key}"}]},
        {"role": "assistant", "finish_reason": "tool_call", "content_items": [
            {"type": "text.done", "text": f"echo {key}"},
            {"type": "tool_call.done", "name": "lookup", "arguments": {}, "tool_call_id": "c1"}]},
        {"role": "user", "content_items": [{"type": "tool_result.done", "text": f"result {key}", "tool_call_id": "c1"}]},
    ]
    (tmp_path / "t.json").write_text(json.dumps({"config": {"trace_id": "t", "model": f"m-{key}"}, "history": history}))
    record = {"v": 1, "trace_id": "t", "turn": 1, "message_index": None, "model": "m", "client_type": "mmsp",
              "status": "error", "started_at": 1796106396869.3, "total_ms": 10, "events": [],
              "error": {"type": "AuthenticationError", "message": f"bad key {key} at https://u:hunter2pass@host/v1"}}
    (tmp_path / "t.timing.jsonl").write_text(json.dumps(record) + "\n")
    bundle = traces.show(tmp_path / "t.json")._repr_mimebundle_()
    explorer = traces.explore(tmp_path / "t.json")
    explorer.select(0)
    frame = traces.load_turns(tmp_path)
    shown = [bundle["text/html"], bundle["text/plain"], explorer.static_html(),
             json.dumps(explorer.detail_message(), default=str), json.dumps(explorer.get_state(), default=str),
             frame["error_message"].to_string()]  # (an error message often quotes the key it refused)
    for text in shown:
        assert key[:MIN_PREFIX] not in text and "hunter2pass" not in text
    assert "[redacted]" in frame["error_message"].dropna().iloc[0]


@pytest.mark.serial  # each hostile text within 0.5 s
def test_redacting_is_linear_in_the_text():
    import time

    for hostile in ("://a:" * 40_000, "https://" * 25_000, "sk-" * 70_000, "Bearer " * 30_000):
        t = time.perf_counter()
        redact(hostile)
        assert time.perf_counter() - t < 0.5, hostile[:10]
    assert redact("see https://u:pa@ss/w@rd@host/x and http://a:b@c") == (
        "see https://u:[redacted]@host/x and http://a:[redacted]@c")


def test_a_key_is_found_in_any_ascii_case_in_non_ascii_text_and_only_there(key):
    text = f"Ünïcödé — {key.upper()} and {key.lower()[:9]}… then {key[:5]}é ok"
    assert redact_secrets(text) == f"Ünïcödé — [redacted] and [redacted]… then {key[:5]}é ok"


@pytest.mark.serial  # a 10 MB non-ASCII answer redacted within 1.5 s
def test_redacting_a_long_non_ascii_answer_is_cheap(key):
    import time

    text = "Ünïcödé words — and more words here. " * 270_000 + key  # 10 MB, the key at the very end
    started = time.perf_counter()
    shown = redact_secrets(text)
    took = time.perf_counter() - started
    assert shown.endswith(" here. [redacted]") and len(shown) == len(text) - len(key) + len("[redacted]")
    assert took < 1.5, f"{took:.2f} s"  # (it translated the whole text: ~2.5 s on the same machine)


def test_a_key_in_the_users_chat_message_is_kept_out_of_the_saved_transcript(fresh_session, key):
    chat = mn.Chat(model="demo")
    chat.send(f"why is my key {key} refused?")
    saved = json.dumps(chat.get_state(), default=str) + chat._saved_bundle()["text/html"]
    assert key[:MIN_PREFIX] not in saved and "why is my key [redacted] refused?" in saved


def test_held_secrets_reads_the_keys_once_for_a_block_on_its_thread(monkeypatch):
    import threading

    from mmsp_notebook.core.redact import held_secrets, redact

    monkeypatch.setenv("HELD_TEST_API_KEY", "sk-held-first-0123456789")
    with held_secrets():
        assert "sk-held-first" not in redact("key sk-held-first-0123456789 here")
        monkeypatch.setenv("OTHER_HELD_TOKEN", "tok-later-9876543210x")
        # this thread keeps the keys of the block's start; another thread reads the environment
        assert "tok-later-9876543210x" in redact("tok-later-9876543210x")
        seen = []
        t = threading.Thread(target=lambda: seen.append(redact("tok-later-9876543210x")))
        t.start()
        t.join()
        assert seen == ["[redacted]"]
        with held_secrets():  # nested: the outer block's keys
            assert "tok-later-9876543210x" in redact("tok-later-9876543210x")
    assert redact("tok-later-9876543210x") == "[redacted]"  # after the block: read again


def _chat_frames(n: int, pieces: list[str] | None = None) -> list[bytes]:
    """A Chat Completions stream of ``n`` one-word frames (``pieces``, when given, as its deltas)."""
    words = pieces or [("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.")[i % 9]
                       for i in range(n)]
    return [b"data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                    "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}).encode()
            + b"\n\n" for w in words]


@pytest.mark.serial
def test_redacting_a_large_transcript_scales_as_one_search(monkeypatch):
    """A long answer's wire (tens of thousands of small SSE frames) with keys configured: its frames
    are redacted as one search over the stream, not one redaction per frame."""
    import time

    from mmsp_notebook.core.redact import redact_parts
    from mmsp_notebook.wire.sse import split_frames

    monkeypatch.setenv("BENCH_ONE_API_KEY", "sk-bench-7f3a9c2e1b4d6f8a0c2e4b6d8f0a1c3e")
    monkeypatch.setenv("BENCH_TWO_TOKEN", "tok-91ab23cd45ef67ab89cd01ef23ab45cd")

    def best(fn, rounds=3):
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    small, large = _chat_frames(5_000), _chat_frames(20_000)
    large[7_000] = _chat_frames(1, [" sk-bench-7f3a9c2e1b4d6f8a0c2e4b6d8f0a1c3e"])[0]  # one frame to redact
    with held_secrets():
        out = redact_parts(large)
        t_small, t_large = best(lambda: redact_parts(small)), best(lambda: redact_parts(large))
    t_cut = best(lambda: split_frames(b"".join(large)))
    assert b"sk-bench" not in out[7_000] and REDACTED.encode() in out[7_000]
    assert all(a is b for i, (a, b) in enumerate(zip(out, large)) if i != 7_000)  # the clean frames as they were
    assert t_large < 4 * 2.5 * t_small + 0.02, (t_small, t_large)  # linear (4x the frames), with slack
    # about the cost of cutting the stream into frames (a redaction per frame cost 10-20x that)
    assert t_large < 3 * t_cut + 0.02, (t_large, t_cut)


def _growing_pieces(rng, keys):
    """Random pieces of a text holding keys whole, cut and in upper case, words that begin like a
    key (near-keys), separators, non-ASCII and the redaction mark itself."""
    pieces = []
    for _ in range(rng.randrange(5, 40)):
        key = rng.choice(keys)
        pick = rng.randrange(9)
        if pick == 0:
            pieces.append(key)
        elif pick == 1:
            pieces.append(key[:rng.randrange(1, len(key))])  # a prefix, maybe long enough to be a cut
        elif pick == 2:
            pieces.append(key[:rng.randrange(MIN_PREFIX, len(key) + 1)] + rng.choice(["Z", "zz", "_x", "-9"]))
        elif pick == 3:
            pieces.append(key.upper())
        elif pick == 4:
            pieces.append(rng.choice([" ", "\n", ".", ", ", "/", "=", "。", "\t"]))
        elif pick == 5:
            pieces.append(rng.choice(["Ünïcödé", "words", "[redacted]", "x", "-", "_"]))
        else:
            pieces.append("".join(rng.choice("ab .-_/Zk9\n") for _ in range(rng.randrange(1, 12))))
    return pieces


@pytest.mark.parametrize("seed", range(40))
def test_a_growing_text_is_redacted_as_the_whole_text_at_every_read(seed):
    """A streaming area is redacted as it grows (only what came since its last settled point): each
    read, the final one included, is what redacting the whole text so far gives, over random splits
    of texts holding keys (split across deltas, cut at the end, in upper case), near-keys and
    separators, with keys that hold some of the characters a text is settled at."""
    import random

    from mmsp_notebook.core.redact import GrowingRedaction

    rng = random.Random(seed)
    keys = sorted([KEY, "ollama", "Ab3.d/Ef=9gH+2kL", "qq.rr ss-tt_77", "zk9-ab"], key=len, reverse=True)
    secrets = keys[:rng.randrange(1, len(keys) + 1)]
    secrets.sort(key=len, reverse=True)
    text = "".join(_growing_pieces(rng, keys))
    growing = GrowingRedaction()
    at, settled = 0, ""
    while at < len(text):
        at = min(len(text), at + rng.randrange(1, 9))
        shown = growing(text[:at], secrets)
        assert shown == redact_secrets(text[:at], secrets), (seed, text[:at])
        # what is settled stays as it is however the text goes on: a live view may send it
        assert shown.startswith(settled) and growing.settled >= len(settled), (seed, text[:at], settled)
        settled = shown[:growing.settled]
    assert growing(text, secrets) == redact_secrets(text, secrets)
    other = [KEY[::-1]]  # other keys configured meanwhile: redacted from the start again
    assert growing(text, other) == redact_secrets(text, other)


def test_a_growing_text_redacts_only_what_came_since_its_last_settled_point(monkeypatch):
    from mmsp_notebook.core import redact as module

    sizes = []
    whole = module._redact_known
    monkeypatch.setattr(module, "_redact_known", lambda text, secrets: sizes.append(len(text)) or whole(text, secrets))
    line = f"a line of a long answer, then {KEY[:20]}"
    text = "".join(f"{line}{n} and more words.\n" for n in range(2000))  # 150,000 characters
    growing = module.GrowingRedaction()
    for at in range(0, len(text) + 1, 997):
        assert growing(text[:at], [KEY]) == whole(text[:at], [KEY])  # (redact_secrets, not counted)
        assert max(sizes, default=0) < 997 + len(line) + 20, sizes  # the new part and what follows the last settled point
        sizes.clear()


def test_a_growing_text_is_settled_at_every_character_no_key_has():
    """Non-ASCII text (no key has it) and letters no key has settle as they come; a key's first
    characters at the end are not settled (they may yet be a key, or stop being one); with no key
    configured, all of it is."""
    from mmsp_notebook.core.redact import GrowingRedaction

    growing = GrowingRedaction()
    assert growing("漢字かな漢字", [KEY]) == "漢字かな漢字" and growing.settled == 6
    assert growing("漢字かな漢字" + KEY[:8], [KEY]) == "漢字かな漢字[redacted]" and growing.settled == 6
    assert growing("漢字かな漢字" + KEY[:8] + "é", [KEY]) == "漢字かな漢字[redacted]é" and growing.settled == 17
    run = GrowingRedaction()  # a long run of characters keys have (looked for past the last 64 characters)
    assert run("a" * 100, [KEY]) == "a" * 100 and run.settled == 0
    assert run("a" * 100 + "漢" + "a" * 100, [KEY]) == "a" * 100 + "漢" + "a" * 100 and run.settled == 101
    other = GrowingRedaction()
    assert other("say yes", ["zq-secret"]) == "say yes" and other.settled == 5  # (up to the last y: no key has it)
    bare = GrowingRedaction()
    assert bare("any " + KEY[:8], []) == "any " + KEY[:8] and bare.settled == 12
