"""traces.show and traces.explore: whole conversations drawn with the turn view, and the explorer's
filtering, paging, selection and replay driven through its comm (no kernel: a DummyComm)."""

from __future__ import annotations

import base64
import html.parser
import io
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mmsp.integration.tracer import Tracer
from tools import get_weather, weather_in

import mmsp_notebook as mn
from mmsp_notebook import OptionError, OptionTypeError, TraceError, TraceNotFoundError, traces
from mmsp_notebook.demo import XSS_PAYLOADS
from mmsp_notebook.front.ask import ask

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
T0 = 1_767_225_600_000  # 2026-01-01, ms


def save(root: Path, trace_id: str, history: list[dict[str, Any]], model: str = "gemini-3.8-flash",
         config: dict[str, Any] | None = None) -> Path:
    """A trace written by mmsp's own Tracer, as every mmsp program writes it (no sidecar)."""
    Tracer(cache_dir=str(root)).save_history(model, history, trace_id, {**(config or {}), "trace_id": trace_id})
    return root / f"{trace_id}.json"


def rich_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content_items": [{"type": "text.done", "text": "Weather in Paris? And draw it."},
                                           {"type": "inline_data.done", "data": PNG, "mime_type": "image/png"}],
         "created_at": T0},
        {"role": "assistant", "content_items": [
            {"type": "thinking.done", "thinking": "I should call the tool.", "fidelity": {"signature": "sig"}},
            {"type": "tool_call.done", "name": "get_weather", "arguments": {"city": "Paris"}, "tool_call_id": "c1"},
            {"type": "tool_call.done", "name": "broken_tool", "arguments": {"city": "Paris"}, "tool_call_id": "c2"}],
         "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 12, "thoughts_tokens": 5, "response_tokens": 9},
         "finish_reason": "tool_call", "created_at": T0 + 900},
        {"role": "user", "content_items": [
            {"type": "tool_result.done", "text": "18 degrees and sunny in Paris", "tool_call_id": "c1"},
            {"type": "tool_result.done", "text": "error: RuntimeError: weather service down", "tool_call_id": "c2"}],
         "created_at": T0 + 1000},
        {"role": "assistant", "content_items": [
            {"type": "text.done", "text": "It is **sunny** in Paris."},
            {"type": "inline_data.done", "data": PNG, "mime_type": "image/png"},
            {"type": "inline_data.done", "data": b"\x00\x01" * 2400, "mime_type": "audio/L16;rate=24000"},
            {"type": "embedding.done", "embedding": [0.6, 0.8]}],
         "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 30, "thoughts_tokens": None, "response_tokens": 20},
         "finish_reason": "stop", "created_at": T0 + 2000},
        {"role": "user", "content_items": [{"type": "text.done", "text": "Thanks, and Rome?"}], "created_at": T0 + 5000},
        {"role": "assistant", "content_items": [{"type": "text.done", "text": "Rome is"}],
         "usage_metadata": {"cached_tokens": None, "prompt_tokens": 40, "thoughts_tokens": None, "response_tokens": 2},
         "finish_reason": "length", "created_at": T0 + 5600},
    ]


def tags(markup: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of an HTML document with its attributes (as a browser's parser sees them)."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class P(html.parser.HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    P().feed(markup)
    return found


def assert_inert(markup: str) -> None:
    """No element or attribute of the markup could run a script (but the static view's own copy buttons)."""
    for tag, attrs in tags(markup):
        if tag == "script" and "data-mmsp-copy" in attrs:
            continue
        assert tag not in ("script", "iframe", "object", "embed", "svg", "math"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("href", "src"):
                assert not (value or "").strip().lower().startswith(("javascript:", "vbscript:", "data:text")), value


# --------------------------------------------------------------------------- show
def test_show_draws_a_plain_mmsp_trace_with_the_turn_view(tmp_path):
    save(tmp_path, "agent/conv", rich_history())
    conv = traces.show("agent/conv", root=tmp_path)
    kinds = [e["kind"] for e in conv.entries]
    # the tool-result message is drawn in the calls it answers: one turn of two steps, then a second turn
    assert kinds == ["user", "assistant", "user", "assistant"], kinds
    assert conv.entries[1]["indices"] == [1, 3] and conv.entries[1]["turns"] == [0, 1]
    page = conv.html
    assert_inert(page)
    assert page.count('class="mmsp-root mmsp-turn mmsp-static"') == 2  # render_html per turn, one stylesheet
    assert page.count("<style>") == 1
    assert '<code class="mmsp-tool-name" dir="auto" title="id c1">get_weather</code>' in page
    assert '<pre class="mmsp-tool-args mmsp-parsed" aria-label="arguments">{\n  &quot;city&quot;: &quot;Paris&quot;\n}</pre>' in page
    assert '<pre class="mmsp-tool-output">18 degrees and sunny in Paris</pre>' in page
    assert '<div class="mmsp-tool-result mmsp-err">' in page and "RuntimeError: weather service down" in page
    assert '<img class="mmsp-img" src="data:image/png;base64,' in page  # the answer's image
    assert '<img class="mmsp-conv-image" src="data:image/png;base64,' in page  # the user's image
    assert '<audio class="mmsp-audio-player" controls src="data:audio/wav;base64,' in page
    assert "embedding · 2 dims · norm 1.000" in page
    assert "<strong>sunny</strong>" in page and "mmsp-badge" in page  # Markdown, the signed thinking
    assert "⚠ truncated (length)" in page  # the last turn
    assert "step 1: tokens cached 0 · prompt 12 · thoughts 5 · response 9 | finish: tool call" in page  # per message
    # no sidecar: usage and finish reason, no time at all
    assert "tokens cached 0 · prompt 42 · thoughts 5 · response 29" in page and "2 steps" in page
    assert "TTFT" not in page and "tok/s" not in page and "Thought for" not in page
    assert "no timing sidecar" in page
    text = conv._repr_mimebundle_()["text/plain"]
    assert "[tool call] get_weather" in text and "returned 18 degrees and sunny in Paris" in text
    assert "raised RuntimeError: weather service down" in text and "Thanks, and Rome?" in text
    # a row-less selection by turn: the turn holding assistant message 1 (history index 3)
    chosen = traces.show(tmp_path / "agent" / "conv.json", turn=1)
    assert (chosen.selected, chosen.selected_index) == ("m1", 3)
    assert 'class="mmsp-conv-msg mmsp-conv-assistant mmsp-conv-selected" data-key="m1"' in chosen.html


def test_show_and_the_explorer_read_created_at_in_seconds_as_milliseconds(tmp_path):
    t0 = 1767225600  # 2026-01-01T00:00:00Z in Unix seconds, as producers other than mmsp's Tracer write it
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": t0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "an answer"}],
                "finish_reason": "stop", "usage_metadata": {"prompt_tokens": 3, "response_tokens": 2},
                "created_at": t0 + 2.5}]
    Tracer(cache_dir=str(tmp_path)).save_history("demo", history, "other/seconds", {"trace_id": "other/seconds"})
    conv = traces.show("other/seconds", root=tmp_path)
    [turn] = conv.turns
    assert turn.message["created_at"] == t0 * 1000 + 2500
    explorer = traces.explore(tmp_path)
    row = explorer.turns.iloc[0]
    assert row["started"] == pd.Timestamp("2026-01-01", tz="UTC")
    assert row["ended"] == pd.Timestamp("2026-01-01 00:00:02.5", tz="UTC")


def test_a_trace_whose_file_name_is_not_utf8_opens_from_its_row(tmp_path):
    """The loaders show the name's undecodable bytes as U+FFFD; show, the explorer and replay find the
    file from that row (they said there was no trace file)."""
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": 1767225600000},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "an answer"}],
                "finish_reason": "stop", "usage_metadata": {"prompt_tokens": 3, "response_tokens": 2},
                "created_at": 1767225601000}]
    folder = bytes(tmp_path) + b"/r\xe9ports"
    (Path(folder.decode("utf-8", "surrogateescape"))).mkdir()
    with open(folder + b"/caf\xe9.json", "wb") as fh:
        fh.write(json.dumps({"history": history, "config": {"model": "demo"}}).encode())
    with open(folder + b"/caf\xe9.timing.jsonl", "wb") as fh:
        fh.write(json.dumps({"v": 1, "trace_id": "r\udce9ports/caf\udce9", "turn": 0, "message_index": 1,
                             "model": "demo", "status": "complete", "started_at": 1767225600500.0, "ttft_ms": 100.0,
                             "total_ms": 500.0, "events": [[100.0, "text.delta", 9], [500.0, "stop", 0]]}).encode() + b"\n")
    turns = traces.load_turns(tmp_path)
    assert turns["trace_id"].tolist() == ["r\ufffdports/caf\ufffd"]
    assert turns["ttft"].tolist() == [0.1]
    conv = traces.show(turns.iloc[0], root=tmp_path)
    assert [t.text for t in conv.turns] == ["an answer"] and conv.sidecar is not None
    explorer = traces.explore(tmp_path)
    explorer.select(0)
    assert explorer.conversation is not None and explorer.detail_message().get("error") is None
    assert mn.replay(turns.iloc[0], root=tmp_path, speed=1e9, display=False).text == "an answer"


def test_a_sidecar_whose_trace_file_is_gone_says_so_where_it_is_opened(tmp_path):
    """Completed responses timed by a sidecar whose trace file was removed (or not copied): the
    explorer said IndexError when one was selected, show that every response had failed."""
    from mmsp_notebook.core.store import append_sidecar, sidecar_record

    for turn, mi in ((0, 1), (1, 3)):
        append_sidecar(sidecar_record(trace_id="nb/chat", turn=turn, message_index=mi, model="demo", client_type="mmsp",
                                      status="complete", error=None, started_at=1767225600000.0 + 10_000 * turn,
                                      ttft_ms=100.0, total_ms=500.0, usage=None, finish_reason="stop",
                                      events=[[100.0, "text.delta", 3], [500.0, "stop", 0]]), base=tmp_path)
    turns = traces.load_turns(tmp_path)
    assert turns["source"].astype(str).tolist() == ["sidecar", "sidecar"]
    conv = traces.show("nb/chat", root=tmp_path)
    assert conv.view["notes"] == ["no trace file: its timing sidecar times 2 completed responses, whose content only "
                                  "the trace file holds (removed, or not copied with the sidecar)"]
    # each is drawn where it happened, from its record, as load_turns holds it: a row of its own
    assert [(e["kind"], e["turns"], e["status"]) for e in conv.entries] == [("sidecar", [0], "complete"),
                                                                           ("sidecar", [1], "complete")]
    assert conv.entries[1]["vm"]["status"] == "complete" and "does not hold" in conv.entries[1]["note"]
    explorer = traces.explore(tmp_path)
    sent = capture(explorer)
    explorer.select(1)
    assert sent[-1]["type"] == "detail" and sent[-1]["notes"] == conv.view["notes"]
    assert sent[-1]["selected"] == conv.entries[1]["key"] and not sent[-1]["replayable"]
    assert "no trace file" in explorer.static_html()


def _rec(turn: int, mi: int | None, status: str, started: float, total: float) -> dict[str, Any]:
    return {"v": 1, "trace_id": "nb/rule", "turn": turn, "message_index": mi, "model": "demo", "client_type": "mmsp",
            "status": status, "error": None if status == "complete" else {"type": "UpstreamError", "message": "503"},
            "started_at": started, "ttft_ms": 100.0, "total_ms": total, "usage": None,
            "finish_reason": "stop" if status == "complete" else None,
            "events": [[100.0, "text.delta", 3], [total, "stop", 0]]}


def test_show_and_load_turns_read_a_sidecar_by_one_rule(tmp_path):
    """A record times the message it names only when it completed: one that names a message but
    did not complete (a foreign writer's) is a failed attempt, and a completed one beyond the
    trace file's messages is a response only the sidecar knows. Every row of load_turns is an
    entry of show with its status and timing, and every entry show draws from the sidecar a row."""
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q0"}], "created_at": T0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a0"}], "created_at": T0 + 900,
                "finish_reason": "stop"},
               {"role": "user", "content_items": [{"type": "text.done", "text": "q1"}], "created_at": T0 + 10_000},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a1"}], "created_at": T0 + 10_900,
                "finish_reason": "stop"}]
    save(tmp_path, "nb/rule", history, model="demo")
    records = [_rec(0, 1, "complete", T0 + 5.0, 800.0),
               _rec(1, 3, "incomplete", T0 + 10_005.0, 700.0),  # names message 3, but was cut off
               _rec(2, 5, "complete", T0 + 20_005.0, 600.0),  # completed: the trace file was saved before it
               _rec(3, None, "error", T0 + 30_005.0, 50.0),
               {**_rec(4, None, "error", T0 + 40_005.0, 40.0), "turn": 4.0},  # a whole-number float is a turn
               _rec(5, None, "<i>throttled</i>", T0 + 50_005.0, 30.0),  # a foreign producer's own status
               {**_rec(6, None, "error", T0 + 60_005.0, 20.0), "status": None}]  # none: "unknown"
    (tmp_path / "nb" / "rule.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    turns = traces.load_turns(tmp_path)
    got = [(int(r.turn), str(r.source), r.status, None if pd.isna(r.message_index) else int(r.message_index),
            round(r.latency, 6)) for r in turns.itertuples()]
    assert got == [(0, "trace+sidecar", "complete", 1, 0.8), (1, "sidecar", "incomplete", None, 0.7),
                   (1, "trace", "complete", 3, 0.9), (2, "sidecar", "complete", 5, 0.6),
                   (3, "sidecar", "error", None, 0.05), (4, "sidecar", "error", None, 0.04),
                   (5, "sidecar", "<i>throttled</i>", None, 0.03), (6, "sidecar", "unknown", None, 0.02)]
    conv = traces.show("nb/rule", root=tmp_path)
    assert [(e["kind"], e.get("turns"), e.get("status")) for e in conv.entries if e["kind"] != "user"] == [
        ("assistant", [0], None), ("failed", [1], "incomplete"), ("assistant", [1], None),
        ("sidecar", [2], "complete"), ("failed", [3], "error"), ("failed", [4], "error"),
        ("failed", [5], "<i>throttled</i>"), ("failed", [6], "unknown")]
    # a status show does not know is said as the loaders say it, never as an error, and drawn escaped
    throttled, unknown = conv.entries[-2], conv.entries[-1]
    assert throttled["vm"]["status"] == "<i>throttled</i>" and "· <i>throttled</i> (sidecar only)" in throttled["label"]
    assert throttled["vm"]["banner"] == {"kind": "muted", "text": "ended with status <i>throttled</i>",
                                         "detail": "UpstreamError: 503"}
    assert unknown["vm"]["status"] == "unknown" and "· unknown (sidecar only)" in unknown["label"]
    assert unknown["vm"]["banner"]["text"] == "its record holds no status"
    assert "<i>throttled" not in conv.html and "&lt;i&gt;throttled&lt;/i&gt;" in conv.html
    assert "no timing" in conv.entries[4]["label"] and "no timing" not in conv.entries[1]["label"]
    keys = set()
    for _, row in turns.iterrows():
        shown = traces.show(row, root=tmp_path)
        entry = next(e for e in shown.entries if e["key"] == shown.selected)
        keys.add(shown.selected)
        assert row["turn"] in entry["turns"], (row.to_dict(), entry)
        if row["source"] == "trace":
            assert shown.waterfall() is None  # no record times it, in either
        else:
            wf = shown.waterfall()
            assert wf["status"] == row["status"] == (entry.get("status") or "complete")
            if entry["kind"] != "assistant":
                assert entry["vm"]["status"] == row["status"]
            vm_total = entry["vm"]["footer"]["total"] if entry["kind"] != "assistant" else None
            assert vm_total in (None, row["latency"])
    drawn = {e["key"] for e in conv.entries if e["kind"] in ("assistant", "failed", "sidecar")}
    assert keys == drawn
    # replay refuses the attempt that did not complete, and the message it named has no timing
    with pytest.raises(TraceError, match="did not complete"):
        mn.replay(turns.iloc[1], root=tmp_path)
    assert mn.traces.load_events(tmp_path).query("turn == 1")["message_index"].isna().all()


def test_show_and_explore_traces_of_the_engine_with_their_sidecar(fresh_session):
    kw = {"stream": io.StringIO(), "chat": "w", "trace": "runs/weather"}
    ask("What's the weather in Paris?", tools=[get_weather], **kw)
    ask("Hello again", model="demo+error", **kw)  # fails: only the sidecar knows
    ask("draw a lighthouse", **kw)
    conv = traces.show("runs/weather")
    kinds = [e["kind"] for e in conv.entries]
    assert kinds == ["user", "assistant", "failed", "user", "assistant"], kinds
    failed = conv.entries[2]
    assert failed["vm"]["status"] == "error" and failed["vm"]["banner"]["lead"] == "UpstreamError: "
    assert "sidecar only" in failed["label"] and "arrived before it ended" in failed["note"]
    page = conv.html
    assert_inert(page)
    assert page.count("TTFT ") >= 3 and "tok/s" in page and "Thought for" in page
    assert weather_in("Paris") in page and '<img class="mmsp-img"' in page
    steps = conv.entries[1]["lines"]
    assert len(steps) == 2 and steps[0].startswith("step 1: ") and "finish: tool call" in steps[0]
    # the waterfall of the tool-using turn: both steps, the tool call and the tool run between them
    wf = conv.waterfall("m1")
    labels = [b["label"] for b in wf["bars"]]
    assert "step 1 · thinking" in labels and "step 1 · tool call get_weather" in labels
    assert "tool runs: get_weather" in labels and "step 2 · text" in labels
    assert all(0 <= b["left"] <= 100 and b["width"] > 0 for b in wf["bars"])
    run = next(b for b in wf["bars"] if b["kind"] == "tool_run")
    assert run["start"] <= run["end"]
    # a row of load_turns selects its entry: the failed one by its turn and start
    turns = traces.load_turns(fresh_session_cache())
    row = turns[turns["status"] == "error"].iloc[0]
    by_row = traces.show(row)
    assert by_row.selected == failed["key"] and by_row.waterfall()["status"] == "error"
    last = turns[turns["status"] == "complete"].iloc[-1]
    assert traces.show(last).selected == "m5"


def fresh_session_cache() -> Path:
    import os

    return Path(os.environ["MMSP_CACHE_DIR"])


def test_show_names_damaged_files_and_draws_what_it_can(tmp_path):
    (tmp_path / "half.json").write_text('{"history": [{"role": "user", "content_items": [')
    with pytest.raises(TraceError, match=r"half\.json: not valid JSON"):
        traces.show(tmp_path / "half.json")
    (tmp_path / "foreign.json").write_text('{"history": {"a": 1}}')
    with pytest.raises(TraceError, match=r"foreign\.json: not an mmsp trace"):
        traces.show(tmp_path / "foreign.json")
    with pytest.raises(TraceNotFoundError, match="no trace file"):
        traces.show("nope/never", root=tmp_path)
    with pytest.raises(TraceError, match="a directory"):
        traces.show(tmp_path)
    with pytest.raises(OptionTypeError, match="whole DataFrame"):
        traces.show(pd.DataFrame({"trace_id": ["x"]}))
    with pytest.raises(OptionTypeError):
        traces.show(42)
    with pytest.raises(OptionError, match="no trace id"):
        traces.show({"turn": 1})
    # damaged messages are named in place; the rest is drawn
    path = save(tmp_path, "broken", rich_history())
    data = json.loads(path.read_text())
    data["history"][3]["content_items"][1]["data"] = "%%% not base64 %%%"
    data["history"][5]["content_items"][0] = {"type": "text.done", "text": 42}
    data["history"].append({"role": "system", "content_items": []})
    path.write_text(json.dumps(data))
    (tmp_path / "broken.timing.jsonl").write_text('{"trace_id": "broken", "turn": 0, "message_index": 1, "status"\nnot json\n')
    conv = traces.show(path)
    page = conv.html
    assert "content item 1 (inline_data.done) is damaged: its data is not base64" in page
    assert "has role &#x27;system&#x27;, neither user nor assistant" in page
    assert "content item 0 is damaged: a text item whose text is a int" in page
    assert "timing sidecar" in page and "damaged lines skipped" in page
    assert "It is <strong>sunny</strong> in Paris." in page and "Thanks, and Rome?" in page


def test_show_keeps_hostile_content_inert(tmp_path, fresh_session):
    evil = " ".join(XSS_PAYLOADS)
    history = [
        {"role": "user", "content_items": [{"type": "text.done", "text": evil},
                                           {"type": "image_url.done", "image_url": "javascript:alert(1)"}],
         "created_at": T0},
        {"role": "assistant", "content_items": [
            {"type": "thinking.done", "thinking": evil},
            {"type": "text.done", "text": evil + "\n\n[x](javascript:alert(1)) <iframe src=x></iframe>"},
            {"type": "tool_call.done", "name": "<img src=x onerror=alert(1)>", "arguments": {"q": evil},
             "tool_call_id": "<script>"},
            {"type": "inline_data.done", "data": PNG, "mime_type": "image/svg+xml"}],
         "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1}, "finish_reason": "tool_call", "created_at": T0 + 1},
        {"role": "user", "content_items": [{"type": "tool_result.done", "text": evil, "tool_call_id": "<script>"}],
         "created_at": T0 + 2},
        {"role": "assistant", "content_items": [{"type": "text.done", "text": "ok"}],
         "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1}, "finish_reason": "stop", "created_at": T0 + 3},
    ]
    save(tmp_path, "evil", history, config={"model": evil})
    page = traces.show("evil", root=tmp_path).html
    assert_inert(page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page
    assert 'href="javascript' not in page and "<p>[x](javascript:alert(1)) " in page  # a link refused: text
    # the demo's hostile model through the engine, its sidecar, the explorer's detail and static view
    ask("Hello", model="demo+xss", tools=[get_weather], chat="x", trace="xss/run", stream=io.StringIO())
    shown = traces.show("xss/run")
    assert_inert(shown.html)
    explorer = traces.explore(fresh_session_cache())
    capture(explorer)
    explorer.filter("xss").select(0)
    assert_inert(explorer.static_html())
    detail = explorer.comm.sent[-1]
    assert detail["type"] == "detail" and any(e["kind"] == "assistant" for e in detail["entries"])
    # a key a provider quoted in its error never reaches a page
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    (tmp_path / "leak.timing.jsonl").write_text(json.dumps({
        "v": 1, "trace_id": "leak", "turn": 0, "message_index": None, "model": "x", "client_type": None,
        "status": "error", "error": {"type": f"AuthenticationError {key}", "message": f"Incorrect API key provided: {key}"},
        "started_at": float(T0), "ttft_ms": None, "total_ms": 5.0, "usage": None, "finish_reason": None,
        "events": []}) + "\n")
    leak = traces.explore(tmp_path)
    capture(leak)
    leak.filter(text="leak").select(0)
    assert key not in json.dumps(leak.comm.sent) and key not in leak.static_html()
    assert "[redacted]" in leak.static_html()


# --------------------------------------------------------------------------- explore
def capture(widget: Any) -> list[dict[str, Any]]:
    """Keep what the widget sends (outside a kernel its comm is a DummyComm)."""
    sent: list[dict[str, Any]] = []

    def send(data=None, buffers=None, **_):
        sent.append(data["content"] if isinstance(data, dict) and data.get("method") == "custom" else data)

    widget.comm.send = send
    widget.comm.sent = sent
    return sent


def inject(widget: Any, message: dict[str, Any]) -> dict[str, Any]:
    """A message from the front end; returns what the widget answered."""
    before = len(widget.comm.sent)
    widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": message}}, "buffers": []})
    return widget.comm.sent[-1] if len(widget.comm.sent) > before else {}


def corpus(root: Path, n: int = 60) -> Path:
    """``n`` conversations of three turns by mmsp's Tracer, with sidecars for even ones, failures and tools."""
    for k in range(n):
        model = ("gemini-3.8-flash", "glm-5.3", "local-llama")[k % 3]
        history: list[dict[str, Any]] = []
        records = []
        t = T0 + k * 60_000
        for turn in range(3):
            history.append({"role": "user", "content_items": [{"type": "text.done", "text": f"question {turn} of {k}"}],
                            "created_at": t})
            items = [{"type": "thinking.done", "thinking": "hm " * (k % 7)}] if k % 7 else []
            items.append({"type": "text.done", "text": f"answer {turn} of conversation {k}"})
            finish = "length" if (k, turn) == (5, 1) else "stop"
            if turn == 0 and k % 10 == 3:
                items.append({"type": "tool_call.done", "name": "lookup", "arguments": {"k": k}, "tool_call_id": f"c{k}"})
                finish = "tool_call"
            latency = 0.5 + (k * 37 + turn * 11) % 90 / 10  # 0.5 .. 9.4 s
            history.append({"role": "assistant", "content_items": items, "finish_reason": finish,
                            "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 10 + k, "thoughts_tokens": k % 7,
                                               "response_tokens": 20 + turn}, "created_at": t + int(latency * 1000)})
            if finish == "tool_call":
                text = "error: LookupError: nothing for k" if k % 20 == 3 else "found it"
                history.append({"role": "user", "content_items": [
                    {"type": "tool_result.done", "text": text, "tool_call_id": f"c{k}"}], "created_at": t + 10_000})
            if k % 2 == 0:
                ttft = 100.0 + k
                total = latency * 1000
                events = [[ttft, "text.delta", 5], [total - 1, "text.done", 5], [total, "stop", 0]]
                if k % 7:
                    events = [[ttft, "thinking.delta", 3], [ttft + 1, "thinking.done", 3]] + events
                if turn == 0 and k % 10 == 3:
                    events[-1:-1] = [[total - 1, "tool_call.delta", 8], [total - 1, "tool_call.done", 8]]
                records.append({"v": 1, "trace_id": f"c/{k:03d}", "turn": turn, "message_index": len(history) - 1,
                                "model": model, "client_type": None, "status": "complete", "error": None,
                                "started_at": float(t), "ttft_ms": ttft, "total_ms": total, "usage": None,
                                "finish_reason": finish, "events": events})
            t += 60_000 // 4
        if k % 2 == 0 and k % 6 == 0:  # a failed attempt before turn 1
            records.insert(1, {"v": 1, "trace_id": f"c/{k:03d}", "turn": 1, "message_index": None, "model": model,
                               "client_type": None, "status": "error", "error": {"type": "UpstreamError",
                                                                                  "message": "503 busy"},
                               "started_at": float(T0 + k * 60_000 + 14_000), "ttft_ms": None, "total_ms": 250.0,
                               "usage": None, "finish_reason": None, "events": []})
        if k == 8:  # bad tool arguments, as mmsp reports them
            records.append({"v": 1, "trace_id": "c/008", "turn": 3, "message_index": None, "model": model,
                            "client_type": None, "status": "error", "error": {
                                "type": "ToolCallArgumentParseError",
                                "message": 'Invalid streamed tool call arguments for tool "lookup"'},
                            "started_at": float(T0 + k * 60_000 + 50_000), "ttft_ms": 90.0, "total_ms": 120.0,
                            "usage": None, "finish_reason": None, "events": [[90.0, "tool_call.delta", 4]]})
        save(root, f"c/{k:03d}", history, model=model)
        if records:
            (root / "c" / f"{k:03d}.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    return corpus(tmp_path_factory.mktemp("corpus"))


def test_explorer_filters_sorts_and_pages_in_the_kernel(big):
    explorer = traces.explore(big, page_size=10)
    sent = capture(explorer)
    state = inject(explorer, {"type": "hello"})
    assert state["type"] == "state" and state["detail"] == {"type": "detail", "row": None}
    first = state["page"]
    turns = explorer.turns
    assert first["total"] == len(turns) == 60 * 3 + 10 + 1 and len(first["rows"]) == 10
    assert first["columns"][0] == ["trace_id", "trace", False] and len(first["rows"][0][3]) == len(first["columns"])
    quick = dict(first["quick"])
    assert quick["errors"] == "errors (11)" and quick["truncated"] == "truncated (1)"
    assert quick["bad_args"] == "bad tool arguments (1)" and quick["tool_errors"] == "tool errors (3)"  # counted at load

    def ask_for(patch):
        answer = inject(explorer, {"type": "query", "patch": patch})
        assert answer["type"] == "page", answer
        shown = eval(answer["code"], {"turns": turns})  # "copy as DataFrame filter" gives the same rows
        assert shown.index.tolist() == explorer.filtered.index.tolist()
        size, start = answer["query"]["page_size"], answer["query"]["page"] * answer["query"]["page_size"]
        assert [r[0] for r in answer["rows"]] == [turns.index.get_loc(i) for i in shown.index[start:start + size]]
        return answer

    errors = ask_for({"quick": ["errors"]})
    assert errors["matched"] == 11 and {r[1] for r in errors["rows"]} == {"error"}
    bad = ask_for({"quick": ["bad_args"]})
    assert bad["matched"] == 1 and "ToolCallArgumentParseError" in bad["rows"][0][3][-1]
    tool = ask_for({"quick": ["tool_errors"]})  # conversations 3, 23, 43 (n_tool_errors, from the loader)
    assert tool["matched"] == 3 and dict(tool["quick"])["tool_errors"] == "tool errors (3)"
    assert sorted(r[3][0] for r in tool["rows"]) == ["c/003", "c/023", "c/043"]
    assert "n_tool_errors" in tool["code"] and turns["n_tool_errors"].sum() == 3
    slow = ask_for({"quick": ["slow_ttft"]})  # sorts by TTFT, most first, rows without one left out
    assert slow["query"]["sort"] == "ttft" and slow["query"]["desc"] and slow["rows"][0][3][0] == "c/058"
    assert slow["matched"] == 91  # 30 sidecars × 3 turns, and the bad arguments record
    ask_for({"quick": ["long_thinking"]})
    text = ask_for({"quick": [], "text": "c/01", "sort": "latency", "desc": True})
    assert text["matched"] == 30 + 2 and all(r[3][0].startswith("c/01") for r in text["rows"])
    terms = ask_for({"text": "latency>5s model:glm"})
    assert terms["matched"] and all(r[3][2] == "glm-5.3" for r in terms["rows"])
    lat = explorer.filtered["latency"]
    assert (lat > 5).all() and lat.is_monotonic_decreasing
    facet = ask_for({"text": "", "model": ["local-llama"], "status": ["complete"], "finish": ["stop"]})
    assert facet["matched"] == 60 - 3 and {r[3][2] for r in facet["rows"]} == {"local-llama"}
    ranged = ask_for({"model": [], "status": [], "finish": [], "ranges": {"ttft": [0.12, 0.13]}, "sort": "ttft",
                      "desc": False})
    assert ranged["matched"] and explorer.filtered["ttft"].between(0.12, 0.13).all()
    # != leaves out the rows without a value (as the other comparisons do), in the code too; unbounded values
    other = ask_for({"ranges": {}, "sort": "turn", "text": "ttft!=0.12"})
    assert other["matched"] and explorer.filtered["ttft"].notna().all()
    ask_for({"text": "latency<inf cost>-inf"})
    ask_for({"text": "", "ranges": {"latency": [float("-inf"), float("inf")]}})
    # paging: a window of rows, the bytes of a page do not grow with the number of rows
    everything = ask_for({"ranges": {}, "sort": "turn", "desc": True, "page_size": 25})
    pages = everything["pages"]
    last = ask_for({"page": pages + 5})  # clamped to the last page
    assert last["query"]["page"] == pages - 1 and len(last["rows"]) == everything["matched"] - 25 * (pages - 1)
    assert everything["page_label"] == f"page 1 of {pages}" and everything["summary"].startswith("191 of 191 turns")
    # a wrong query is said and changes nothing
    before = explorer.query
    for patch in ({"text": "latency>soon"}, {"quick": ["nope"]}, {"ranges": {"model": [1, 2]}}, {"sort": "zzz"},
                  {"page_size": 0}):
        said = inject(explorer, {"type": "query", "patch": patch})
        assert said["type"] == "error" and "OptionError" in said["error"]
        assert explorer.query == before
    assert len(sent) > 10


def test_explorer_bytes_per_page_do_not_depend_on_the_rows(tmp_path):
    small = traces.explore(corpus(tmp_path / "a", 10))
    large = traces.explore(corpus(tmp_path / "b", 90))
    sizes = []
    for explorer in (small, large):
        capture(explorer)
        page = inject(explorer, {"type": "query", "patch": {"page": 1, "page_size": 10}})
        del page["summary"], page["page_label"], page["took_ms"]  # counts are written out
        sizes.append(len(json.dumps(page)))
    assert abs(sizes[0] - sizes[1]) < 300, sizes


def test_explorer_selects_a_row_and_replays_it(big, fresh_session):
    explorer = traces.explore(big)
    capture(explorer)
    explorer.filter(quick=["errors"], text="c/006")
    assert explorer.selection is None and explorer.conversation is None
    explorer.select(0)
    detail = explorer.comm.sent[-1]
    row = explorer.selection
    assert row["status"] == "error" and detail["title"] == "c/006 · turn 1"
    assert detail["selected"].startswith("f") and not detail["replayable"]
    assert [e["kind"] for e in detail["entries"]] == ["user", "assistant", "failed", "user", "assistant", "user",
                                                      "assistant"]
    assert detail["waterfall"]["status"] == "error"
    refused = inject(explorer, {"type": "replay", "speed": 1})
    assert refused["type"] == "error" and "never recorded" in refused["error"]
    # a complete row: its turn marked in the conversation, the waterfall of its turn, Replay plays it here
    explorer.filter(quick=[], text="c/004").sort("turn")
    answer = inject(explorer, {"type": "select", "row": int(explorer.turns.index.get_loc(explorer.filtered.index[1]))})
    assert answer["type"] == "detail" and answer["selected"] == "m3" and answer["index"] == 3 and answer["replayable"]
    assert [b["label"] for b in answer["waterfall"]["bars"]] == ["waiting for the first token", "thinking", "text"]
    assert explorer.selection["turn"] == 1
    inject(explorer, {"type": "replay", "speed": 1e9})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(m.get("phase") == "end" for m in explorer.comm.sent):
        time.sleep(0.02)
    phases = [m["phase"] for m in explorer.comm.sent if m.get("type") == "replay"]
    assert phases[0] == "start" and phases[-1] == "end" and "ops" in phases
    end = explorer.comm.sent[-1]
    assert end["vm"]["status"] == "complete" and end["vm"]["items"][-1]["text"] == "answer 1 of conversation 4"
    # a message with a tool call replays to its end too (its recorded result in the card), not "streaming"
    explorer.filter(text="c/003").sort("turn")
    explorer.select(0)
    explorer.comm.sent.clear()
    explorer.replay(speed=math.inf).result(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(m.get("phase") == "end" for m in explorer.comm.sent):
        time.sleep(0.02)
    end = explorer.comm.sent[-1]["vm"]
    assert end["status"] == "complete" and end["footer"]["finish_reason"] == "tool_call"
    assert end["items"][-1]["result"]["text"] == "error: LookupError: nothing for k"
    # a missing file is said in the detail, the explorer goes on
    (big / "c" / "011.json").rename(big / "c" / "011.json.gone")
    try:
        explorer.filter(text="c/011").select(0)
        assert "no trace file or sidecar for c/011" in explorer.comm.sent[-1]["error"]
    finally:
        (big / "c" / "011.json.gone").rename(big / "c" / "011.json")
    with pytest.raises(OptionError, match="no row 99"):
        explorer.select(99)


def test_explorer_over_a_frame_and_its_static_view(big):
    turns = traces.load_turns(big, otel=True)
    with pytest.raises(OptionError, match="not to a loaded frame"):
        traces.explore(turns, models=["x"])
    with pytest.raises(OptionTypeError):
        traces.explore(42)
    twice = sorted(map(str, turns.columns[:2]))
    with pytest.raises(OptionError, match=re.escape(f"columns named twice ({', '.join(twice)})")):  # (pd.concat(axis=1))
        traces.explore(pd.concat([turns, turns.iloc[:, :2]], axis=1))
    with pytest.raises(TypeError, match=r"^explore\(\) got an unexpected keyword argument 'sinc' \(did you mean 'since'\?\)"):
        traces.explore(big, sinc="2026-01-01")  # a mistyped load option is explore's, not load_turns'
    explorer = traces.explore(turns, root=big)
    capture(explorer)
    explorer.filter(quick=["truncated"]).select(0)
    assert "trace_id" in explorer.turns and "gen_ai.conversation.id" not in explorer.turns
    assert explorer.selection["finish_reason"] == "length"
    bundle = explorer._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data and data["text/plain"] == "<Explorer: 1 of 191 turns>"
    static = data["text/html"]
    assert_inert(static)
    assert "1 of 191 turns · page 1 of 1" in static and "<td>c/005</td>" in static
    assert 'aria-selected="true"' in static and "mmsp-conv-selected" in static and "⚠ truncated (length)" in static
    assert math.isclose(len(explorer.filtered), 1)
    # a frame with few columns: what it lacks matches nothing, what it has still works
    narrow = traces.explore(turns[["gen_ai.conversation.id", "turn", "message_index"]], root=big)
    assert dict(inject_page(narrow)["quick"])["errors"] == "errors (0)"
    narrow.filter(text="c/004").select(1)
    assert narrow.conversation is not None and narrow.conversation.selected == "m3"


def test_facet_labels_isolate_the_names_they_show(big):
    """A model id holding a bidi control (U+202E) reorders nothing of its facet label beyond itself:
    the count stays after it, the value sent back is the id as it is."""
    turns = traces.load_turns(big)
    evil = "gpt\u202e-5"
    turns["model"] = turns["model"].astype(object)
    turns.loc[turns.index[:3], "model"] = evil
    facets = dict(inject_page(traces.explore(turns, root=big))["facets"]["model"])
    assert facets[evil] == "\u2068gpt\u202e-5\u2069 (3)"
    assert all(label.endswith(")") and "\u2068" not in label for value, label in facets.items() if value != evil)


def inject_page(explorer: Any) -> dict[str, Any]:
    capture(explorer)
    return inject(explorer, {"type": "query", "patch": {}})


def test_show_and_explore_in_a_kernel_on_the_magic_s_traces(tmp_path, monkeypatch):
    """%%mmsp cells trace a conversation (a failed turn only in its sidecar); show and explore it in the kernel."""
    import nbformat
    from helpers import html_of, text_of
    from nbclient import NotebookClient
    from tools import WEATHER_SOURCE

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "%load_ext mmsp_notebook\n" + WEATHER_SOURCE,
        "%%mmsp --tools get_weather\nWhat's the weather in Paris?",
        "%%mmsp -m demo+error\nAnd tomorrow?",
        "%%mmsp\nThanks!",
        "import os\nfrom mmsp_notebook import traces\nturns = traces.load_turns(os.environ['MMSP_CACHE_DIR'])\n"
        "print(turns[['trace_id', 'turn', 'status', 'source']].to_string())",
        "traces.show(turns[turns['status'] == 'complete'].iloc[-1])",
        "traces.show(turns[turns['status'] == 'error'].iloc[0])",
        "explorer = traces.explore(turns)\nexplorer.filter(quick=['errors']).select(0)\nexplorer",
    )]
    monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    listed = text_of(nb.cells[4])
    assert listed.count("trace+sidecar") == 3 and listed.count(" sidecar") == 1 and "error" in listed
    whole = html_of(nb.cells[5])
    assert_inert(whole)
    assert whole.count('class="mmsp-conv-msg mmsp-conv-user"') == 2  # the failed turn's prompt was never recorded
    assert '<pre class="mmsp-tool-output">' + weather_in("Paris") + "</pre>" in whole
    assert "TTFT" in whole and "step 2: " in whole and "mmsp-conv-selected" in whole
    failed = html_of(nb.cells[6])
    assert "mmsp-conv-failed mmsp-conv-selected" in failed and "(sidecar only)" in failed
    assert "UpstreamError" in failed and "mmsp-x-wf-bar" in failed and "cut off: error" in failed
    shown = nb.cells[7].outputs[-1]["data"]
    assert "application/vnd.jupyter.widget-view+json" in shown and "1 of 4 turns" in shown["text/html"]
    assert "mmsp-conv-failed mmsp-conv-selected" in shown["text/html"]


def test_a_frame_without_tool_error_counts_is_scanned_from_its_files_when_the_filter_is_used(big):
    """A turns frame saved before the loaders counted tool errors: the filter reads the trace files
    of turns with tool calls, once, and says how many it found."""
    turns = traces.load_turns(big).drop(columns=["n_tool_errors"])
    explorer = traces.explore(turns, root=big)
    capture(explorer)
    first = inject(explorer, {"type": "hello"})["page"]
    assert dict(first["quick"])["tool_errors"] == "tool errors"  # not scanned yet
    answer = inject(explorer, {"type": "query", "patch": {"quick": ["tool_errors"]}})
    assert answer["matched"] == 3 and dict(answer["quick"])["tool_errors"] == "tool errors (3)"
    assert answer["code"] == 'turns[turns["tool_error"]]'
    assert len(eval(answer["code"], {"turns": explorer.turns})) == 3


def test_a_trace_id_that_climbs_out_of_the_root_names_no_file(tmp_path):
    from mmsp_notebook.traces._show import locate

    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.json").write_text("{}")
    (root / "inside.json").write_text("{}")
    assert locate("inside", [root])[0] == root / "inside.json"
    for tid in ("../outside", "a/../../outside", str(tmp_path / "outside")):
        assert locate(tid, [root]) == (None, None)


def test_one_trace_id_under_two_directories_is_never_opened_as_the_other(tmp_path):
    # two caches loaded together, each with its own "nb/default": two conversations, one trace id
    jan = save(tmp_path / "jan", "nb/default", [
        {"role": "user", "content_items": [{"type": "text.done", "text": "a January question"}], "created_at": T0},
        {"role": "assistant", "content_items": [{"type": "text.done", "text": "a January answer"}], "created_at": T0 + 900}])
    feb = save(tmp_path / "feb", "nb/default", [
        {"role": "user", "content_items": [{"type": "text.done", "text": "a February question"}], "created_at": T0 + 10**9},
        {"role": "assistant", "content_items": [{"type": "text.done", "text": "a February answer"}],
         "created_at": T0 + 10**9 + 900}])
    dirs = [tmp_path / "jan", tmp_path / "feb"]
    with pytest.warns(traces.TraceLoadWarning, match="1 trace id names several conversations") as caught:
        turns = traces.load_turns(dirs)
    assert str(jan) in str(caught[0].message) and str(feb) in str(caught[0].message)
    assert turns.attrs["repeated_trace_ids"] == {"nb/default": [str(jan), str(feb)]}
    assert turns.attrs["n_skipped"] == 0 and len(turns) == 2
    with pytest.raises(TraceError, match="names several conversations"):
        traces.show(turns.iloc[1], root=dirs)
    with pytest.raises(TraceError, match="names several conversations"):
        mn.replay(turns.iloc[1], root=dirs[0], display=False)
    with pytest.warns(traces.TraceLoadWarning):
        explorer = traces.explore(dirs)
    explorer.select(1)
    assert "names several conversations" in explorer.detail_message()["error"]
    static = explorer.static_html()
    assert "January answer" not in static and "February answer" not in static
    # each directory on its own is one conversation, shown as it is
    with warnings.catch_warnings():
        warnings.simplefilter("error", traces.TraceLoadWarning)
        alone = traces.load_turns(dirs[1])
    assert "repeated_trace_ids" not in alone.attrs
    assert "February answer" in traces.show(alone.iloc[0], root=dirs[1]).text


def test_a_frame_concatenated_from_two_loads_never_opens_one_directory_s_trace_for_the_other(tmp_path):
    """Two loads concatenated lose the attrs that name a repeated trace id: the roots themselves say
    that two of them hold that trace id, and no conversation is opened for the wrong row."""
    for month in ("jan", "feb"):
        save(tmp_path / month, "nb/default", [
            {"role": "user", "content_items": [{"type": "text.done", "text": f"a {month} question"}], "created_at": T0},
            {"role": "assistant", "content_items": [{"type": "text.done", "text": f"a {month} answer"}],
             "created_at": T0 + 900}])
    dirs = [tmp_path / "jan", tmp_path / "feb"]
    turns = pd.concat([traces.load_turns(d) for d in dirs], ignore_index=True)
    assert "repeated_trace_ids" not in turns.attrs and len(turns) == 2
    with pytest.raises(TraceError, match="under two roots") as caught:
        traces.show(turns.iloc[1], root=dirs)
    assert str(dirs[0]) in str(caught.value) and str(dirs[1]) in str(caught.value) and "give root=" in str(caught.value)
    explorer = traces.explore(turns, root=dirs)
    explorer.select(1)
    assert "under two roots" in explorer.detail_message()["error"]
    assert "jan answer" not in explorer.static_html() and "feb answer" not in explorer.static_html()
    # one root, or the same root twice (by another path), opens it
    assert "feb answer" in traces.show(turns.iloc[1], root=dirs[1]).text
    assert "jan answer" in traces.show(turns.iloc[0], root=[dirs[0], tmp_path / "feb" / ".." / "jan"]).text


def test_a_trace_id_too_long_for_a_file_name_is_not_found_not_an_os_error(tmp_path):
    (tmp_path / "nb").mkdir()
    for trace in ("nb/" + "m" * 300, "nb/" + "m" * 300 + "-abc", tmp_path / "nb" / ("m" * 300 + ".json")):
        with pytest.raises(TraceNotFoundError, match="no trace file"):
            traces.show(trace, root=tmp_path)


def test_cells_of_a_hand_made_frame_never_break_the_page(big):
    """A number column holding text, a dict or an infinity (a frame built by hand) shows it as text, and a
    very long text is cut: the page, the static view and the selection still answer."""
    turns = traces.load_turns(big).head(3)
    turns["prompt_tokens"] = pd.Series([{"a": 1}, "many", float("inf")], index=turns.index, dtype=object)
    turns["model"] = ["m" * 5000, "<b>x</b>", None]
    explorer = traces.explore(turns, root=big)
    state = inject_page(explorer)
    assert state["type"] == "page", state
    cells = {c: [r[3][k] for r in state["rows"]] for k, (c, _, _) in enumerate(state["columns"])}
    assert cells["prompt_tokens"] == ["{'a': 1}", "many", "inf"]
    assert cells["model"] == ["m" * 159 + "…", "<b>x</b>", ""]
    assert "&lt;b&gt;x&lt;/b&gt;" in explorer.static_html()


def test_facet_pickers_offer_the_most_frequent_values_only(big):
    """A model column of 3,000 distinct names does not make every page carry them all: the pickers offer
    the 100 most frequent (labels cut), a rarer one picked by filter() is added, search finds the rest."""
    turns = traces.load_turns(big)
    turns = pd.concat([turns] * 16, ignore_index=True).head(3000)
    turns["model"] = [("x" * 200 if k == 0 else "") + f"model-{k:04d}" for k in range(len(turns))]
    turns.loc[1:4, "model"] = "common"
    explorer = traces.explore(turns, root=big)
    page = inject_page(explorer)
    models = page["facets"]["model"]
    assert len(models) == 100 and models[0] == ["common", "common (4)"]
    assert len(json.dumps(page)) < 20_000
    explorer.filter(model="model-2999")
    page = explorer.comm.sent[-1]
    assert page["matched"] == 1 and page["facets"]["model"][-1] == ["model-2999", "model-2999"]
    long = turns["model"][0]
    # its label cut (the value, 210 characters, crosses as a stand-in: test_facets)
    label = next(it[1] for it in inject_page(explorer.filter(model=long))["facets"]["model"] if it[0].startswith(long[:200]))
    assert label.startswith("x" * 79 + "…") and len(label) <= 90


def test_an_empty_facet_value_is_offered_and_picked_as_itself(big):
    turns = traces.load_turns(big)
    turns["finish_reason"] = turns["finish_reason"].astype(object)
    turns.loc[turns.index[:2], "finish_reason"] = ""
    explorer = traces.explore(turns, root=big)
    assert ["", "(empty) (2)"] in inject_page(explorer)["facets"]["finish"]
    assert len(explorer.filter(finish=[""]).filtered) == 2


def test_a_trace_id_holding_a_bidi_control_is_isolated_in_the_replay_title(tmp_path, fresh_session):
    save(tmp_path, "r\u202eevil", rich_history())
    explorer = traces.explore(tmp_path)
    capture(explorer)
    explorer.filter(finish="stop").select(0)
    explorer.replay(speed=math.inf).result(10)
    start = next(m for m in explorer.comm.sent if m.get("phase") == "start")
    assert start["title"].startswith("replay of \u2068r\u202eevil\u2069 · turn ")
    detail = next(m for m in explorer.comm.sent if m.get("type") == "detail")
    assert detail["title"].startswith("\u2068r\u202eevil\u2069 · turn ")  # as the detail's title


def test_a_true_false_column_is_searched_with_true_and_false(big):
    """``cost_missing=True`` / ``=true`` / ``!=false`` (any case, or 1 / 0) search a true/false column, and the
    pandas code gives the same rows; an ordering (``>``, ``<``) or another value is refused, saying what it takes."""
    explorer = traces.explore(big)
    turns = explorer.turns
    n, missing = len(turns), int(turns["cost_missing"].sum())
    assert turns["cost_missing"].dtype == bool and 0 < missing < n
    priced_glm = int((~turns["cost_missing"] & (turns["model"] == "glm-5.3")).sum())
    for text, want in (("cost_missing=True", missing), ("cost_missing=true", missing), ("cost_missing=TRUE", missing),
                       ("cost_missing=1", missing), ("cost_missing:true", missing), ("cost_missing!=False", missing),
                       ("cost_missing=false", n - missing), ("cost_missing=0", n - missing),
                       ("cost_missing!=true", n - missing), ("cost_missing=False model:glm", priced_glm)):
        explorer.filter(text=text)
        assert len(explorer.filtered) == want, text
        assert eval(explorer.filter_code, {"turns": turns}).index.tolist() == explorer.filtered.index.tolist(), text
    before, code = explorer.query, explorer.filter_code
    for text, said in (("cost_missing>true", "not ordered: use cost_missing=true or cost_missing=false"),
                       ("cost_missing<1", "not ordered"), ("cost_missing>=0", "not ordered"),
                       ("cost_missing=yes", "'yes' is not true or false"), ("cost_missing!=2", "'2' is not true or false")):
        with pytest.raises(OptionError, match=said):
            explorer.filter(text=text)
        assert explorer.query == before and explorer.filter_code == code
    # a nullable column (a query's outer join): a missing value is neither true nor other than true
    frame = turns.assign(cost_missing=turns["cost_missing"].astype("boolean").mask(turns["turn"] == 0))
    nullable = traces.explore(frame)
    known = frame["cost_missing"].notna()
    for text, value in (("cost_missing=true", True), ("cost_missing!=true", False), ("cost_missing=false", False),
                        ("cost_missing!=FALSE", True)):
        nullable.filter(text=text)
        want = frame.index[known & (frame["cost_missing"] == value).fillna(False)]
        assert nullable.filtered.index.tolist() == want.tolist() and 0 < len(want) < known.sum(), text
        assert eval(nullable.filter_code, {"turns": frame}).index.tolist() == nullable.filtered.index.tolist(), text


def test_a_time_column_is_searched_with_dates_and_times(big):
    """``started>2026-01-31``, ``ended<=…T10:30``, ``started=<day>`` (that day): times in UTC unless they name
    their offset, the pandas code giving the same rows; a value that is no date is refused, saying so."""
    explorer = traces.explore(big)
    turns = explorer.turns
    started = turns["started"]
    assert isinstance(started.dtype, pd.DatetimeTZDtype) and started.notna().all()
    middle = started.sort_values().iloc[len(started) // 2]
    day = middle.strftime("%Y-%m-%d")
    on_day = ((started >= pd.Timestamp(day, tz="UTC")) & (started < pd.Timestamp(day, tz="UTC") + pd.Timedelta(days=1)))
    naive = middle.tz_localize(None).isoformat()
    shifted = (middle + pd.Timedelta(hours=2)).tz_localize(None).isoformat() + "+02:00"  # the same instant
    for text, want in ((f"started>{naive}", started > middle), (f"started>={naive}", started >= middle),
                       (f"started<{shifted}", started < middle), (f"started<={naive}Z", started <= middle),
                       (f"started={day}", on_day), (f"started!={day}", ~on_day),
                       (f"started={naive}", started == middle),
                       (f"ended>{naive} model:glm", (turns["ended"] > middle) & (turns["model"] == "glm-5.3"))):
        explorer.filter(text=text)
        assert explorer.filtered.index.tolist() == turns.index[want.fillna(False).to_numpy()].tolist(), text
        assert text in (f"started={day}", f"started!={day}") or 0 < len(explorer.filtered) < len(turns), text
        assert eval(explorer.filter_code, {"turns": turns}).index.tolist() == explorer.filtered.index.tolist(), text
    next_day = (pd.Timestamp(day) + pd.Timedelta(days=1)).strftime("%Y-%m-%d")
    explorer.filter(text=f"started={next_day}")
    assert explorer.filtered.index.tolist() == turns.index[(started.dt.strftime("%Y-%m-%d") == next_day).to_numpy()].tolist()
    before = explorer.query
    with pytest.raises(OptionError, match="'soon' is not a date or time"):
        explorer.filter(text="started>soon")
    assert explorer.query == before
    # a hand-made frame's times without a zone are taken as UTC
    plain = traces.explore(turns.assign(started=started.dt.tz_localize(None)))
    plain.filter(text=f"started>{shifted}")
    assert plain.filtered.index.tolist() == turns.index[(started > middle).to_numpy()].tolist()


def test_a_query_that_cannot_be_answered_leaves_the_explorer_as_it_was(big, monkeypatch):
    explorer = traces.explore(big, page_size=10)
    capture(explorer)
    explorer.filter(text="c/01")
    before, code = explorer.query, explorer.filter_code
    said = inject(explorer, {"type": "query", "patch": {"text": "\ud800", "model": ["glm-5.3"]}})  # a lone surrogate
    assert said["type"] == "error" and "lone surrogate" in said["error"]
    with pytest.raises(OptionError, match="lone surrogate"):
        explorer.filter(model="x\udcff")
    from mmsp_notebook.traces import _query

    def broken(*_args, **_kwargs):
        raise RuntimeError("no answer")

    monkeypatch.setattr(_query, "contains", broken)
    said = inject(explorer, {"type": "query", "patch": {"text": "c/02"}})
    assert said["type"] == "error" and "no answer" in said["error"]
    monkeypatch.undo()
    assert explorer.query == before and explorer.filter_code == code
    page = inject(explorer, {"type": "hello"})["page"]  # the widget still draws
    json.dumps(page, ensure_ascii=False).encode("utf-8")
    assert page["matched"] == len(explorer.filtered) == 32 and page["query"]["text"] == "c/01"


def test_the_table_shows_and_sorts_the_columns_the_frame_has(big):
    turns = traces.load_turns(big)
    narrow = traces.explore(turns[["trace_id", "turn", "model", "error_type", "error_message"]], root=big)
    page = inject_page(narrow)
    assert [c[0] for c in page["columns"]] == ["trace_id", "turn", "model", "error"]
    assert all(len(r[3]) == 4 for r in page["rows"])
    for col, _, _ in page["columns"]:  # every header shown sorts
        assert inject(narrow, {"type": "query", "patch": {"sort": col}})["type"] == "page"
    assert narrow.static_html().count('<th scope="col">') == 4
    assert [c[0] for c in inject_page(traces.explore(turns[["trace_id"]], root=big))["columns"]] == ["trace_id"]


def test_names_holding_a_bidi_control_are_isolated_in_every_line_show_joins_them_into(tmp_path, fresh_session):
    """A tool, a MIME type, an event type, a status or a trace id holding U+202E is wrapped in FSI … PDI
    where traces.show joins it into a line with other text (text/plain and HTML): it reverses nothing after it."""
    from mmsp_notebook.engine.tools import ToolSet

    rlo, fsi, pdi = "\u202e", "\u2068", "\u2069"
    name = f"look{rlo}up"
    ask(f"please {name} Paris", tools=ToolSet({name: lambda city: f"sunny in {city}"}), chat="b", trace="bidi/one",
        stream=io.StringIO())
    conv = traces.show("bidi/one")
    answer = next(e for e in conv.entries if e["kind"] == "assistant")
    steps = answer["lines"]  # the timing line of each step
    assert len(steps) == 2 and f" · {fsi}{name}{pdi} " in steps[0] and name not in steps[0].replace(fsi + name + pdi, "")
    assert all(line in conv.text and line in conv.html for line in steps)
    assert f"\n[tool call] {fsi}{name}{pdi} {{" in conv.text
    assert f"tool runs: {fsi}{name}{pdi}" in [b["label"] for b in conv.waterfall(answer["key"])["bars"]]

    # a trace written elsewhere: its id, an attached file's type, a result its last step left, a failed
    # response's event types and error type
    trace_id = f"r{rlo}evil"
    save(tmp_path, trace_id, [
        {"role": "user", "content_items": [{"type": "text.done", "text": "hi"},
                                           {"type": "inline_data.done", "data": "AAAA", "mime_type": f"text/x{rlo}y"}],
         "created_at": T0},
        {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": name, "arguments": {},
                                                 "tool_call_id": "c1"}], "finish_reason": "tool_call", "created_at": T0 + 1},
        {"role": "user", "content_items": [{"type": "tool_result.done", "text": "found", "tool_call_id": "c1"}],
         "created_at": T0 + 2}])
    (tmp_path / f"{trace_id}.timing.jsonl").write_text(json.dumps({
        "v": 1, "trace_id": trace_id, "turn": 1, "message_index": None, "model": "x", "client_type": None,
        "status": "error", "error": {"type": f"Bad{rlo}Error", "message": "no"}, "started_at": float(T0 + 5),
        "ttft_ms": 1.0, "total_ms": 5.0, "usage": None, "finish_reason": None,
        "events": [[1.0, f"te{rlo}xt.delta", 3]]}) + "\n", encoding="utf-8")
    conv = traces.show(trace_id, root=tmp_path)
    assert repr(conv).startswith(f"<Conversation {fsi}{trace_id}{pdi}: ")
    esc_id = "t\x1b]0;title\x07"  # a file name holding a terminal escape: its repr writes it as Control Pictures
    save(tmp_path, esc_id, [{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}], "created_at": T0}])
    assert repr(traces.show(tmp_path / f"{esc_id}.json")).startswith("<Conversation t\u241b]0;title\u2407: ")
    text = conv.text
    assert text.startswith(f"conversation {fsi}{trace_id}{pdi} (")
    assert f"attached {fsi}text/x{rlo}y{pdi} · 3 B" in text
    assert f"tool result of {fsi}{name}{pdi}: found" in text
    failed = next(e for e in conv.entries if e["kind"] == "failed")
    assert failed["note"] == f"arrived before it ended (not recorded in the trace): {fsi}te{rlo}xt{pdi} 3"
    assert failed["vm"]["banner"]["lead"] == f"{fsi}Bad{rlo}Error{pdi}: "
    assert f"{fsi}te{rlo}xt{pdi} (cut off: error)" in [b["label"] for b in conv.waterfall(failed["key"])["bars"]]


def test_the_code_of_a_quick_filter_reads_only_the_columns_the_frame_has(big):
    """A frame of some of the loaders' columns: each quick filter's code, as Copy filter gives it,
    gives the rows the filter shows (no KeyError on a column the frame lacks)."""
    turns = traces.load_turns(big)
    for cols in (["trace_id", "status"], ["trace_id", "finish_reason", "error_message"],
                 ["trace_id", "thinking_chars", "n_tool_errors"], ["trace_id"]):
        explorer = traces.explore(turns[cols], root=big)
        capture(explorer)
        for name in ("errors", "truncated", "bad_args", "tool_errors", "slow_ttft", "long_thinking"):
            answer = inject(explorer, {"type": "query", "patch": {"quick": [name]}})
            found = eval(answer["code"], {"turns": explorer.turns})
            assert found.index.equals(explorer.filtered.index), (cols, name)
    assert len(explorer.filter(quick=["errors"]).filtered) == 0  # (nothing is known of errors there)
    narrow = traces.explore(turns[["trace_id", "status", "error_message"]], root=big).filter(quick=["errors"])
    assert 0 < len(narrow.filtered) == len(eval(narrow.filter_code, {"turns": narrow.turns}))


def test_replay_of_a_row_whose_trace_file_is_damaged_or_gone_says_so(tmp_path):
    """A completed row whose trace file was damaged or removed since it was loaded: replay names the
    file and what is wrong with it, not a response that was never recorded."""
    turns = traces.load_turns(corpus(tmp_path, n=2))
    path = tmp_path / "c" / "000.json"
    path.write_text('{"history": [')
    explorer = traces.explore(turns, root=tmp_path).select(0)
    assert explorer.selection["status"] == "complete"
    with pytest.raises(TraceError, match=r"cannot be read.*000\.json: not valid JSON"):
        explorer.replay()
    path.unlink()
    explorer = traces.explore(turns, root=tmp_path).select(0)
    with pytest.raises(TraceNotFoundError, match="no trace file of c/000.*only the trace file holds"):
        explorer.replay()
    (tmp_path / "c" / "000.timing.jsonl").unlink()
    explorer = traces.explore(turns, root=tmp_path).select(0)
    with pytest.raises(TraceNotFoundError, match="no trace file or sidecar for c/000"):
        explorer.replay()


def test_rows_pages_and_page_sizes_are_taken_as_numpy_integers_too(big):
    """Positions computed with NumPy or pandas (``np.flatnonzero``, ``len(df) // 25``) are integers:
    the page asked for is shown (not the first), the row asked for selected, the page size kept."""
    import numpy as np

    explorer = traces.explore(big, page_size=np.int64(10))
    assert explorer.query["page_size"] == 10 and type(explorer.query["page_size"]) is int
    assert explorer.go(np.int64(2)).query["page"] == 2
    assert json.dumps(explorer.page_message()["query"])  # (plain numbers, for the front end)
    hit = int(np.flatnonzero(explorer.filtered["model"].astype("string") == "glm-5.3")[0])
    assert explorer.select(np.int64(hit)).selection["model"] == "glm-5.3"
    for bad in (np.True_, np.float64(1.0), -1):
        with pytest.raises(OptionError, match="there is no row"):
            explorer.select(bad)
    with pytest.raises(OptionError, match="page_size must be an integer"):
        traces.explore(big, page_size=np.True_)


def test_a_path_loaded_with_otel_names_is_explored_as_its_frame_is(big):
    """``explore(path, otel=True)`` passes the option on to load_turns and explores the frame as
    ``explore(load_turns(path, otel=True))`` does (it said the frame had no trace_id column)."""
    loaded = traces.explore(traces.load_turns(big, otel=True), root=big)
    explorer = traces.explore(big, otel=True)
    assert list(explorer.turns.columns) == list(loaded.turns.columns) and "trace_id" in explorer.turns
    assert len(explorer.filter(quick=["errors"]).filtered) == len(loaded.filter(quick=["errors"]).filtered) > 0
    assert explorer.select(0).conversation is not None


def test_the_detail_title_shows_a_turn_as_the_table_does(big):
    """A frame whose turn column went float (a missing value, a CSV round trip): the detail's title
    says turn 1, as the table's cell does, not turn 1.0."""
    turns = traces.load_turns(big)
    turns = turns.assign(turn=turns["turn"].astype("float64"))
    explorer = traces.explore(turns, root=big)
    capture(explorer)
    explorer.filter(text="c/004").sort("turn")
    row = int(explorer.turns.index.get_loc(explorer.filtered.index[1]))
    answer = inject(explorer, {"type": "select", "row": row})
    assert answer["title"] == "c/004 · turn 1"
    assert [r[3][1] for r in inject_page(explorer)["rows"]][1] == "1"


def test_the_tool_error_scan_passes_over_a_message_whose_items_are_not_a_list(tmp_path):
    """A frame without ``n_tool_errors`` has its trace files scanned by the tool-errors filter: a
    user message with ``content_items: 7`` after a tool call raised TypeError out of the filter."""
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}], "created_at": T0},
               {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": "f", "arguments": {},
                                                        "tool_call_id": "c1"}], "finish_reason": "tool_call"},
               {"role": "user", "content_items": 7},
               {"role": "assistant", "content_items": [{"type": "tool_call.done", "name": "f", "arguments": {},
                                                        "tool_call_id": "c2"}], "finish_reason": "tool_call"},
               {"role": "user", "content_items": [{"type": "tool_result.done", "text": "error: boom", "tool_call_id": "c2"}]}]
    (tmp_path / "t.json").write_text(json.dumps({"history": history, "config": {"model": "m"}, "timestamp": "x"}))
    turns = traces.load_turns(tmp_path).drop(columns=["n_tool_errors"])
    explorer = traces.explore(turns, root=tmp_path).filter(quick=["tool_errors"])
    assert explorer.filtered["message_index"].tolist() == [3]


def test_a_key_in_a_trace_id_model_or_tool_call_id_is_shown_redacted_and_its_row_still_opens(tmp_path, fresh_session):
    """A trace file not written here may hold a key where an id is (a trace id, a model, a tool call id or
    name): the explorer's table, detail title and source, waterfall, timing lines, replay title and errors,
    its static view, and show's HTML, text and repr, say [redacted] there; rows are opened by position, so
    opening and replaying the row still work."""
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    tid = f"keys/run-{key}"
    history = rich_history()
    history[1]["content_items"][1].update(name=f"lookup_{key}", tool_call_id=f"call_{key}")
    history[2]["content_items"][0]["tool_call_id"] = f"call_{key}"
    save(tmp_path, tid, history, model=f"model-{key}", config={"model": f"model-{key}"})
    events = [[100.0, "thinking.delta", 3], [101.0, "thinking.done", 3], [102.0, "tool_call.delta", 8],
              [103.0, "tool_call.done", 8], [104.0, "tool_call.delta", 8], [105.0, "tool_call.done", 8], [900.0, "stop", 0]]
    records = [{"v": 1, "trace_id": tid, "turn": 0, "message_index": 1, "model": f"model-{key}", "client_type": None,
                "status": "complete", "error": None, "started_at": float(T0), "ttft_ms": 100.0, "total_ms": 900.0,
                "usage": None, "finish_reason": "tool_call", "events": events},
               {"v": 1, "trace_id": tid, "turn": 1, "message_index": 3, "model": f"model-{key}", "client_type": None,
                "status": "complete", "error": None, "started_at": float(T0 + 1000), "ttft_ms": 50.0,
                "total_ms": 1000.0, "usage": None, "finish_reason": "stop",
                "events": [[50.0, "text.delta", 5], [999.0, "text.done", 5], [1000.0, "stop", 0]]},
               {"v": 1, "trace_id": tid, "turn": 2, "message_index": None, "model": f"model-{key}", "client_type": None,
                "status": f"error-{key}", "error": {"type": "UpstreamError", "message": "503 busy"},
                "started_at": float(T0 + 4000), "ttft_ms": None, "total_ms": 250.0, "usage": None,
                "finish_reason": None, "events": []}]
    (tmp_path / "keys" / f"run-{key}.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    turns = traces.load_turns(tmp_path)
    assert set(turns["trace_id"]) == {tid}  # (the frame keeps the id as the file holds it: rows are found by it)

    explorer = traces.explore(tmp_path)
    sent = capture(explorer)
    state = inject(explorer, {"type": "hello"})
    positions = [row[0] for row in state["page"]["rows"]]
    assert len(positions) == 4
    for pos in positions:  # every row opens, by its position
        detail = inject(explorer, {"type": "select", "row": pos})
        assert detail["type"] == "detail" and detail["row"] == pos and "error" not in detail, detail.get("error")
        assert detail["title"].startswith("keys/run-[redacted] · turn ") and detail["entries"]
        assert "[redacted]" in detail["source"]
    assert any("[redacted]" in b["label"] for m in sent if m.get("type") == "detail" and m.get("waterfall")
               for b in m["waterfall"]["bars"])  # the tool's name in a bar
    assert explorer.conversation is not None and explorer.conversation.trace_id == tid
    explorer.filter(finish="stop").select(0)
    explorer.replay(speed=math.inf).result(10)
    start = next(m for m in sent if m.get("phase") == "start")
    assert start["title"].startswith("replay of keys/run-[redacted] · turn ")
    page = explorer.static_html()
    assert "keys/run-[redacted]" in page
    assert key not in json.dumps(sent) and key not in page

    # the row's files gone since it was loaded: the detail's error, the replay's and the static view's
    for path in (tmp_path / "keys").iterdir():
        path.unlink()
    gone = traces.explore(turns, root=tmp_path)
    gone_sent = capture(gone)
    detail = inject(gone, {"type": "select", "row": 0})
    assert "no trace file or sidecar for keys/run-[redacted]" in detail["error"]
    error = inject(gone, {"type": "replay"})
    assert error["type"] == "error" and "keys/run-[redacted]" in error["error"]
    with pytest.raises(TraceNotFoundError) as raised:
        gone.replay()
    assert key not in str(raised.value) and key not in str(raised.value.__cause__)
    assert key not in json.dumps(gone_sent) and key not in gone.static_html()


def test_show_says_a_key_in_a_trace_id_redacted(tmp_path):
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    history = rich_history()
    history[1]["content_items"][1]["tool_call_id"] = f"call_{key}"
    history[2]["content_items"][0]["tool_call_id"] = f"call_{key}"
    save(tmp_path, f"run-{key}", history, config={"model": f"model-{key}"})
    row = traces.load_turns(tmp_path).iloc[0]
    for conv in (traces.show(row, root=tmp_path), traces.show(tmp_path / f"run-{key}.json", turn=0)):
        assert conv.trace_id == f"run-{key}" and conv.selected is not None
        shown = conv._repr_mimebundle_()
        assert "run-[redacted]" in shown["text/html"] and "run-[redacted]" in shown["text/plain"]
        assert "run-[redacted]" in repr(conv)
        assert key not in shown["text/html"] and key not in shown["text/plain"] and key not in repr(conv)
    with pytest.raises(OptionError) as raised:
        traces.show(tmp_path / f"run-{key}.json", turn=7)
    assert "run-[redacted]" in str(raised.value) and key not in str(raised.value)
    (tmp_path / f"run-{key}.json").unlink()
    with pytest.raises(TraceNotFoundError) as missing:
        traces.show(row, root=tmp_path)
    assert "run-[redacted]" in str(missing.value) and key not in str(missing.value)
