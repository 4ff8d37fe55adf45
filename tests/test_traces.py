"""mmsp_notebook.traces: traces written by mmsp's real Tracer (and through the real clients against
the demo server), timing sidecars, damaged files, concurrency, cost, exports, plots, the benchmark
script and the traces notebook."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mmsp.integration.tracer import Tracer
from mmsp.registry import list_supported_models

from mmsp_notebook import OptionError, OptionTypeError, traces
from mmsp_notebook.core.store import append_sidecar, read_sidecar

ROOT = Path(__file__).resolve().parent.parent
T0 = 1767225600000  # 2026-01-01T00:00:00Z in Unix ms
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
WEATHER = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}
SQL = {"name": "run_sql", "description": "SQL", "parameters": {"type": "object"}}


# --------------------------------------------------------------------------- helpers


def user(text: str, at: int) -> dict[str, Any]:
    return {"role": "user", "content_items": [{"type": "text.done", "text": text}], "created_at": at}


def answer(text: str, at: int, usage: dict[str, Any] | None = None, finish: str = "stop") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content_items": [{"type": "text.done", "text": text}],
        "usage_metadata": usage or {"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": None, "response_tokens": 5},
        "finish_reason": finish,
        "created_at": at,
    }


def rich_history() -> list[dict[str, Any]]:
    """Thinking with a signature, a tool call and its result, images both ways, an embedding,
    usage with None buckets."""
    return [
        {
            "role": "user",
            "content_items": [
                {"type": "text.done", "text": "What's the weather in Paris? Here is a photo."},
                {"type": "image_url.done", "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
            ],
            "created_at": T0,
        },
        {
            "role": "assistant",
            "content_items": [
                {"type": "thinking.done", "thinking": "The user wants the weather.", "fidelity": {"signature": "sig=="}},
                {"type": "tool_call.done", "name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "tool_call_id": "call_1"},
            ],
            "usage_metadata": {"cached_tokens": 100, "prompt_tokens": 412, "thoughts_tokens": 30, "response_tokens": 20},
            "finish_reason": "tool_call",
            "created_at": T0 + 1500,
        },
        {
            "role": "user",
            "content_items": [
                {"type": "tool_result.done", "text": "sunny, 21C", "tool_call_id": "call_1", "images": ["https://example.com/sun.png"]}
            ],
            "created_at": T0 + 1600,
        },
        {
            "role": "assistant",
            "content_items": [
                {"type": "text.done", "text": "It is sunny in Paris (21°C)."},
                {"type": "inline_data.done", "data": PNG, "mime_type": "image/png"},
                {"type": "inline_data.done", "data": b"\x00\x01" * 100, "mime_type": "audio/L16;codec=pcm;rate=24000"},
            ],
            "usage_metadata": {"cached_tokens": None, "prompt_tokens": 480, "thoughts_tokens": None, "response_tokens": 12},
            "finish_reason": "length",
            "created_at": T0 + 4600,
        },
        {"role": "user", "content_items": [{"type": "text.done", "text": "embed this"}], "created_at": T0 + 10_000},
        {
            "role": "assistant",
            "content_items": [{"type": "embedding.done", "embedding": [0.25, -1.5, 3.0, 0.0]}],
            "usage_metadata": {"cached_tokens": None, "prompt_tokens": None, "thoughts_tokens": None, "response_tokens": None},
            "finish_reason": "stop",
            "created_at": T0 + 10_250,
        },
    ]


RICH_CONFIG = {"temperature": 0.3, "max_tokens": 1024, "thinking_level": "high", "tools": [WEATHER, SQL]}


def save(root: Path, trace_id: str, history: list[dict[str, Any]], model: str = "gemini-3.8-flash", config: dict[str, Any] | None = None) -> Path:
    """Write a trace with mmsp's own Tracer, as every mmsp client does."""
    cfg = dict(config if config is not None else RICH_CONFIG)
    cfg["trace_id"] = trace_id
    Tracer(cache_dir=str(root)).save_history(model, history, trace_id, cfg)
    return root / f"{trace_id}.json"


def price(model: str, client: str | None = None) -> dict[str, float]:
    entries = [e for e in list_supported_models() if e["model"] == model and "pricing" in e]
    if client is not None:
        entries = [e for e in entries if e["client"] == client] or entries
    return entries[0]["pricing"]


def expected_cost(usage: dict[str, Any], p: dict[str, float]) -> float:
    cached_price = p.get("cached_tokens", p["prompt_tokens"])
    return (
        (usage.get("cached_tokens") or 0) * cached_price
        + (usage.get("prompt_tokens") or 0) * p["prompt_tokens"]
        + (usage.get("thoughts_tokens") or 0) * p["thoughts_tokens"]
        + (usage.get("response_tokens") or 0) * p["response_tokens"]
    ) / 1e6


def no_warnings_load(fn: Any, *args: Any, **kwargs: Any) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("error", traces.TraceLoadWarning)
        return fn(*args, **kwargs)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# --------------------------------------------------------------------------- golden: Tracer files


def test_turns_golden_from_real_tracer(tmp_path: Path) -> None:
    save(tmp_path, "agent1/conversation_001", rich_history())
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert len(df) == 3
    assert df["trace_id"].tolist() == ["agent1/conversation_001"] * 3
    assert df["turn"].tolist() == [0, 1, 2]
    assert df["message_index"].tolist() == [1, 3, 5]
    assert df["model"].astype(str).tolist() == ["gemini-3.8-flash"] * 3
    assert df["client_type"].isna().all()
    assert df["status"].astype(str).tolist() == ["complete"] * 3
    assert df["source"].astype(str).tolist() == ["trace"] * 3
    assert str(df["started"].dtype) == "datetime64[us, UTC]"
    assert df["started"][0] == pd.Timestamp(T0, unit="ms", tz="UTC")
    assert df["ended"][1] == pd.Timestamp(T0 + 4600, unit="ms", tz="UTC")
    assert df["latency"].tolist() == [1.5, 3.0, 0.25]
    assert df["ttft"].isna().all() and df["tokens_per_s"].isna().all()  # no sidecar, no timing
    assert df["finish_reason"].astype(str).tolist() == ["tool_call", "length", "stop"]
    # usage: recorded buckets as they are, None stays NA (never 0)
    assert df["cached_tokens"].tolist()[0] == 100 and df["cached_tokens"].isna().tolist() == [False, True, True]
    assert df["prompt_tokens"].tolist()[:2] == [412, 480] and pd.isna(df["prompt_tokens"][2])
    assert df["thoughts_tokens"].tolist()[0] == 30 and df["thoughts_tokens"].isna().tolist() == [False, True, True]
    assert df["input_tokens"].tolist()[:2] == [512, 480]
    assert df["output_tokens"].tolist()[:2] == [50, 12]
    assert df["total_tokens"].tolist()[:2] == [562, 492]
    assert df[["input_tokens", "output_tokens", "total_tokens"]].iloc[2].isna().all()
    for col in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens", "input_tokens", "output_tokens", "total_tokens"):
        assert str(df[col].dtype) == "Int64", col
    for col in ("model", "client_type", "finish_reason"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    # content counts
    assert df["n_items"].tolist() == [2, 3, 1]
    assert df["n_text"].tolist() == [0, 1, 0]
    assert df["n_thinking"].tolist() == [1, 0, 0]
    assert df["n_tool_calls"].tolist() == [1, 0, 0]
    assert df["n_images"].tolist() == [0, 1, 0]
    assert df["n_audio"].tolist() == [0, 1, 0]
    assert df["text_chars"].tolist() == [0, len("It is sunny in Paris (21°C)."), 0]
    assert df["thinking_chars"].tolist() == [len("The user wants the weather."), 0, 0]
    # config
    assert df["temperature"].tolist() == [0.3] * 3
    assert df["max_tokens"].tolist() == [1024] * 3
    assert df["thinking_level"].tolist() == ["high"] * 3
    assert df["n_tools"].tolist() == [2] * 3
    assert list(df["tool_names"][0]) == ["get_weather", "run_sql"]
    # cost from the registry's list prices; all-None usage has no cost
    p = price("gemini-3.8-flash")
    history = rich_history()
    assert df["cost"][0] == pytest.approx(expected_cost(history[1]["usage_metadata"], p))
    assert df["cost"][1] == pytest.approx(expected_cost(history[3]["usage_metadata"], p))
    assert np.isnan(df["cost"][2])
    assert not df["cost_missing"].any()
    assert df["error_type"].isna().all()
    assert df.attrs["skipped"] == [] and df.attrs["n_files"] == 1


def test_items_golden_from_real_tracer(tmp_path: Path) -> None:
    save(tmp_path, "agent1/conversation_001", rich_history())
    items = no_warnings_load(traces.load_items, tmp_path)
    assert len(items) == 10
    assert items["role"].astype(str).tolist() == ["user", "user", "assistant", "assistant", "user", "assistant", "assistant", "assistant", "user", "assistant"]
    assert items["turn"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    by = {(r.message_index, r.item_index): r for r in items.itertuples()}
    assert list(by) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1), (3, 2), (4, 0), (5, 0)]
    img_url = by[(0, 1)]
    assert img_url.type == "image_url.done" and img_url.role == "user"
    assert img_url.mime_type == "image/png" and img_url.size == len(PNG) and pd.isna(img_url.image_url)
    thinking = by[(1, 0)]
    assert thinking.thinking == "The user wants the weather." and thinking.has_fidelity and thinking.turn == 0
    call = by[(1, 1)]
    assert json.loads(call.arguments) == {"city": "Paris", "days": 2}
    assert call.name == "get_weather" and call.tool_call_id == "call_1"
    result = by[(2, 0)]
    assert result.type == "tool_result.done" and result.text == "sunny, 21C" and result.n_images == 1 and result.turn == 1
    png = by[(3, 1)]
    assert png.mime_type == "image/png" and png.size == len(PNG) and not png.has_fidelity
    audio = by[(3, 2)]
    assert audio.size == 200 and audio.mime_type.startswith("audio/L16")
    emb = by[(5, 0)]
    assert emb.embedding_dims == 4 and emb.size == 4
    assert items["created_at"][0] == pd.Timestamp(T0, unit="ms", tz="UTC")
    assert items["model"].astype(str).unique().tolist() == ["gemini-3.8-flash"]
    assert items["extra"].isna().all()


def test_unknown_item_types_load_as_they_are(tmp_path: Path) -> None:
    history = [
        user("make a video", T0),
        {
            "role": "assistant",
            "content_items": [
                {"type": "video.done", "uri": "gs://bucket/v.mp4", "duration_s": 3.5},
                {"type": "text.done", "text": "done"},
                {"type": "hologram.delta", "text": "odd", "fidelity": {"x": 1}},
            ],
            "usage_metadata": {"cached_tokens": None, "prompt_tokens": 5, "thoughts_tokens": None, "response_tokens": 9},
            "finish_reason": "stop",
            "created_at": T0 + 900,
        },
    ]
    save(tmp_path, "video", history)
    turns = no_warnings_load(traces.load_turns, tmp_path)
    assert turns["n_items"].tolist() == [3] and turns["n_text"].tolist() == [1]
    items = traces.load_items(tmp_path)
    assert items["type"].astype(str).tolist() == ["text.done", "video.done", "text.done", "hologram.delta"]
    video = items.iloc[1]
    assert json.loads(video["extra"]) == {"uri": "gs://bucket/v.mp4", "duration_s": 3.5}
    assert items.iloc[3]["text"] == "odd" and items.iloc[3]["has_fidelity"]


def test_legacy_item_types_and_nan_values(tmp_path: Path) -> None:
    # a pre-0.5 trace (item types without .done) with NaN, which Python's json writes and orjson refuses
    data = {
        "history": [
            user("hi", T0),
            {
                "role": "assistant",
                "content_items": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "hello"}, {"type": "tool_call", "name": "f", "arguments": {}, "tool_call_id": "1"}],
                "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 3, "thoughts_tokens": 1, "response_tokens": 2},
                "finish_reason": "stop",
                "created_at": T0 + 10,
            },
        ],
        "config": {"model": "old-model", "temperature": float("nan")},
        "timestamp": "2026-01-01T00:00:00",
    }
    (tmp_path / "old.json").write_text(json.dumps(data, indent=2))
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert (df["n_text"][0], df["n_thinking"][0], df["n_tool_calls"][0]) == (1, 1, 1)
    assert np.isnan(df["temperature"][0])
    items = traces.load_items(tmp_path)
    assert items["type"].astype(str).tolist() == ["text.done", "thinking", "text", "tool_call"]


# --------------------------------------------------------------------------- damaged files


def test_damaged_files_are_skipped_with_one_warning(tmp_path: Path) -> None:
    good = save(tmp_path, "good/one", rich_history())
    text = good.read_text()
    damaged = {
        "truncated.json": text[: len(text) // 2],
        "empty.json": "",
        "blank.json": "  \n",
        "list.json": "[1, 2]",
        "foreign.json": '{"foo": 1}',
        "history_dict.json": '{"history": {"a": 1}, "config": {}}',
        "history_items.json": '{"history": [1, 2], "config": {}}',
        "string.json": '"hello"',
    }
    for name, body in damaged.items():
        (tmp_path / name).write_text(body)
    (tmp_path / "garbage.json").write_bytes(bytes((i * 97 + 13) % 256 for i in range(3000)))
    (tmp_path / "notes.txt").write_text("not a trace")  # Tracer companions are not candidates
    before = snapshot(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = traces.load_turns(tmp_path)
    ours = [w for w in caught if issubclass(w.category, traces.TraceLoadWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "skipped 9 of 10 trace files" in message and "attrs['skipped']" in message
    assert len(df) == 3 and set(df["trace_id"]) == {"good/one"}
    skipped = {Path(s["path"]).name: s["reason"] for s in df.attrs["skipped"]}
    assert set(skipped) == set(damaged) | {"garbage.json"}
    assert df.attrs["n_skipped"] == 9 and df.attrs["n_files"] == 1
    assert skipped["empty.json"] == "empty file" and skipped["blank.json"] == "empty file"
    assert skipped["truncated.json"].startswith("not valid JSON")
    assert skipped["garbage.json"].startswith("not valid JSON")
    assert "top level is a JSON list" in skipped["list.json"]
    assert "no 'history' key" in skipped["foreign.json"]
    assert "'history' is a dict" in skipped["history_dict.json"]
    assert "history[0] is a int, not a message object" in skipped["history_items.json"]
    # the same for items and events; nothing was written
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = traces.load_items(tmp_path)
    assert len([w for w in caught if issubclass(w.category, traces.TraceLoadWarning)]) == 1
    assert items.attrs["n_skipped"] == 9
    assert snapshot(tmp_path) == before


def test_a_skipped_trace_file_takes_its_sidecar_out_of_every_loader(tmp_path: Path) -> None:
    """A damaged trace file next to a valid sidecar: no loader keeps rows of that trace."""
    events = [[200.0, "text.delta", 1], [1000.0, "stop", 0]]
    for tid in ("app/ok", "app/broken"):
        save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000)])
        append_sidecar(sidecar_record(tid, 0, 1, started_at=T0 + 2.5, ttft_ms=200.0, total_ms=1000.0, events=events),
                       base=tmp_path)
    broken = tmp_path / "app" / "broken.json"
    broken.write_text(broken.read_text()[:40])  # cut short
    frames = {}
    for name, loader in (("turns", traces.load_turns), ("items", traces.load_items), ("events", traces.load_events)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frames[name] = df = loader(tmp_path)
        assert set(df["trace_id"]) == {"app/ok"}, name
        assert [Path(s["path"]).name for s in df.attrs["skipped"]] == ["broken.json"], name
        assert df.attrs["skipped"][0]["reason"].startswith("not valid JSON"), name
        assert df.attrs["n_files"] == 1 and df.attrs["n_skipped"] == 1, name
        [warning] = [w for w in caught if issubclass(w.category, traces.TraceLoadWarning)]
        assert "skipped 1 of 2 trace files" in str(warning.message), name
    assert len(frames["events"]) == 2 and len(frames["turns"]) == 1
    # the frames join on the same traces
    joined = frames["events"].merge(frames["turns"], on=["trace_id", "turn"], how="left", indicator=True)
    assert (joined["_merge"] == "both").all()


def test_created_at_in_seconds_is_told_from_milliseconds_value_by_value(tmp_path: Path) -> None:
    """Producers other than mmsp's Tracer write created_at in seconds; a trace may mix the units."""
    from mmsp_notebook.core.stamps import created_ms

    s0 = T0 // 1000  # 2026-01-01T00:00:00Z in Unix seconds
    assert created_ms(s0) == T0 and created_ms(s0 + 0.5) == T0 + 500 and created_ms(T0) == T0
    assert created_ms(99_999_999_999) == 99_999_999_999_000 and created_ms(100_000_000_000) == 100_000_000_000
    for no_time in (0, -5, True, float("nan"), "1767225600", None, 253_402_300_800_000):
        assert created_ms(no_time) is None, no_time
    seconds = [user("q0", s0), answer("a0", s0 + 2), user("q1", s0 + 10), answer("a1", s0 + 12)]
    seconds[1]["created_at"] = s0 + 2.5  # a float of seconds
    mixed = [user("m0", T0 + 20_000), answer("b0", s0 + 22), user("m1", s0 + 30), answer("b1", T0 + 33_000)]
    save(tmp_path, "other/seconds", seconds)
    save(tmp_path, "other/mixed", mixed)
    day = pd.Timestamp("2026-01-01", tz="UTC")
    turns = no_warnings_load(traces.load_turns, tmp_path).set_index(["trace_id", "turn"])
    assert turns.loc[("other/seconds", 0), "started"] == day
    assert turns.loc[("other/seconds", 0), "ended"] == day + pd.Timedelta(seconds=2.5)
    assert turns.loc[("other/seconds", 1), "ended"] == day + pd.Timedelta(seconds=12)
    assert turns.loc[("other/mixed", 0), "started"] == day + pd.Timedelta(seconds=20)
    assert turns.loc[("other/mixed", 0), "ended"] == day + pd.Timedelta(seconds=22)
    assert turns.loc[("other/mixed", 1), "started"] == day + pd.Timedelta(seconds=30)
    assert turns.loc[("other/mixed", 1), "ended"] == day + pd.Timedelta(seconds=33)
    assert (turns["started"].dt.year == 2026).all() and (turns["ended"].dt.year == 2026).all()
    items = no_warnings_load(traces.load_items, tmp_path)
    for tid, want in (("other/seconds", [0, 2.5, 10, 12]), ("other/mixed", [20, 22, 30, 33])):
        got = items[items["trace_id"] == tid]["created_at"].tolist()
        assert got == [day + pd.Timedelta(seconds=x) for x in want], tid
    # the events' times come from the sidecar, in ms by its format, next to a seconds-based trace
    append_sidecar(sidecar_record("other/seconds", 0, 1, started_at=T0 + 100.0, ttft_ms=200.0, total_ms=2400.0,
                                  events=[[200.0, "text.delta", 2], [2400.0, "stop", 0]]), base=tmp_path)
    events = no_warnings_load(traces.load_events, tmp_path)
    assert events["at"].tolist() == [day + pd.Timedelta(milliseconds=300), day + pd.Timedelta(milliseconds=2500)]
    started = no_warnings_load(traces.load_turns, tmp_path).set_index(["trace_id", "turn"])["started"]
    assert started[("other/seconds", 0)] == day + pd.Timedelta(milliseconds=100)


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        traces.load_turns(tmp_path / "nope")


@pytest.mark.serial  # more than 3 loads within 2 s
def test_concurrent_rewrite_never_crashes(tmp_path: Path) -> None:
    """A Tracer rewriting the trace after every turn (truncate, then write) while we load it."""
    stop = threading.Event()
    written = []

    def writer() -> None:
        tracer = Tracer(cache_dir=str(tmp_path))
        history: list[dict[str, Any]] = []
        k = 0
        while not stop.is_set():
            history.append(user("question " * 200, T0 + k * 1000))
            history.append(answer("answer " * 500, T0 + k * 1000 + 500))
            tracer.save_history("gemini-3.8-flash", history, "live/conv", {"trace_id": "live/conv"})
            written.append(k)
            k += 1
            if k > 60:
                history = []
                k = 0

    save(tmp_path, "steady", rich_history())
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    while not written:
        time.sleep(0.001)
    try:
        deadline = time.monotonic() + 2.0
        loads = 0
        while time.monotonic() < deadline:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", traces.TraceLoadWarning)
                df = traces.load_turns(tmp_path)
                items = traces.load_items(tmp_path)
            loads += 1
            assert (df["trace_id"] == "steady").sum() == 3
            live = df[df["trace_id"] == "live/conv"]
            if len(live):
                assert live["turn"].tolist() == list(range(len(live)))
            else:
                reasons = [s["reason"] for s in df.attrs["skipped"]]
                assert len(reasons) == 1 and (reasons[0].startswith("not valid JSON") or reasons[0] == "empty file" or "vanished" in reasons[0])
            assert len(items) >= 10
    finally:
        stop.set()
        thread.join(5)
    assert loads > 3 and written


# --------------------------------------------------------------------------- sidecars


def sidecar_record(trace_id: str, turn: int, message_index: int | None, status: str = "complete", **kw: Any) -> dict[str, Any]:
    record = {
        "trace_id": trace_id,
        "turn": turn,
        "message_index": message_index,
        "model": kw.pop("model", "gemini-3.8-flash"),
        "client_type": kw.pop("client_type", "openai-chat"),
        "status": status,
        "error": None if status == "complete" else {"type": "UpstreamError", "message": "503 upstream"},
        "started_at": kw.pop("started_at", None),
        "ttft_ms": kw.pop("ttft_ms", None),
        "total_ms": kw.pop("total_ms", None),
        "usage": kw.pop("usage", None),
        "finish_reason": kw.pop("finish_reason", None),
        "events": kw.pop("events", []),
    }
    record.update(kw)
    return record


def test_a_record_naming_a_message_without_completing_is_a_failed_attempt(tmp_path: Path) -> None:
    """A foreign writer's record that names a message but did not complete times nothing: it is a
    failed attempt in every loader (no message index, its status), the message stays untimed, and
    it goes back to no turn (the records of the run the trace file holds stay)."""
    tid = "app/foreign"
    save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000), user("q1", T0 + 5000), answer("a1", T0 + 9000)])
    events = [[200.0, "text.delta", 1], [900.0, "stop", 0]]
    append_sidecar(sidecar_record(tid, 0, 1, started_at=T0 + 2.0, ttft_ms=200.0, total_ms=900.0, events=events), base=tmp_path)
    append_sidecar(sidecar_record(tid, 1, 3, started_at=T0 + 5002.0, ttft_ms=100.0, total_ms=800.0), base=tmp_path)
    append_sidecar(sidecar_record(tid, 0, 1, "cancelled", started_at=T0 + 20_000.0, total_ms=50.0, events=events),
                   base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["turn"].tolist() == [0, 0, 1]
    assert df["source"].astype(str).tolist() == ["sidecar", "trace+sidecar", "trace+sidecar"]
    assert df["status"].astype(str).tolist() == ["cancelled", "complete", "complete"]
    assert df["message_index"].isna().tolist() == [True, False, False]
    assert df["latency"].tolist() == [0.05, 0.9, 0.8]
    ev = no_warnings_load(traces.load_events, tmp_path)
    assert ev.groupby("status", observed=True)["message_index"].apply(lambda s: s.isna().all()).to_dict() == {
        "cancelled": True, "complete": False}


def test_sidecar_join_with_failed_turns(tmp_path: Path) -> None:
    tid = "app/chat_1"
    history = [user("q0", T0), answer("a0", T0 + 1000), user("q1", T0 + 5000), answer("a1", T0 + 9000)]
    save(tmp_path, tid, history)
    events = [[200.0, "text.delta", 1], [210.0, "text.delta", 1], [220.0, "text.done", 2], [1000.0, "stop", 0]]
    append_sidecar(sidecar_record(tid, 0, 1, started_at=T0 + 2.5, ttft_ms=200.0, total_ms=1000.0, events=events), base=tmp_path)
    append_sidecar(sidecar_record(tid, 1, None, "error", started_at=T0 + 5001, total_ms=300.0), base=tmp_path)
    append_sidecar(sidecar_record(tid, 1, 3, started_at=T0 + 6000, ttft_ms=500.0, total_ms=3000.0), base=tmp_path)
    append_sidecar(sidecar_record(tid, 2, None, "cancelled", started_at=T0 + 20_000, ttft_ms=100.0, total_ms=700.0), base=tmp_path)
    # a conversation whose only turn failed: a sidecar and no trace file
    append_sidecar(sidecar_record("app/chat_2", 0, None, "incomplete", started_at=T0 + 30_000, total_ms=50.0, client_type="ant-messages"), base=tmp_path)
    with open(tmp_path / "app" / "chat_1.timing.jsonl", "a") as fh:
        fh.write('{"trace_id": "app/chat_1", "turn": 9, "mess')  # a line being written
    before = snapshot(tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert snapshot(tmp_path) == before
    assert df["trace_id"].tolist() == [tid] * 4 + ["app/chat_2"]
    assert df["turn"].tolist() == [0, 1, 1, 2, 0]
    assert df["status"].astype(str).tolist() == ["complete", "error", "complete", "cancelled", "incomplete"]
    assert df["source"].astype(str).tolist() == ["trace+sidecar", "sidecar", "trace+sidecar", "sidecar", "sidecar"]
    assert df["client_type"].astype(str).tolist() == ["openai-chat"] * 4 + ["ant-messages"]
    assert df["message_index"].isna().tolist() == [False, True, False, True, True]
    assert df["ttft"].tolist()[0] == 0.2 and df["latency"].tolist()[:3] == [1.0, 0.3, 3.0]
    assert df["started"][0] == pd.Timestamp(T0 + 2.5, unit="ms", tz="UTC")  # the sidecar's request time
    assert df["ended"][1] == pd.Timestamp(T0 + 5301, unit="ms", tz="UTC")
    assert df["tokens_per_s"][0] == pytest.approx(5 / 0.8)  # output tokens over the decode window
    assert df["tokens_per_s"][2] == pytest.approx(5 / 2.5)
    failed = df[df["status"] != "complete"]
    for col in ("prompt_tokens", "output_tokens", "n_items", "n_text"):
        assert failed[col].isna().all(), col
    assert failed["cost"].isna().all()
    assert failed["error_type"].tolist() == ["UpstreamError"] * 3
    assert failed["error_message"].tolist() == ["503 upstream"] * 3
    s = traces.summary(df)
    assert s.loc["gemini-3.8-flash", "count"] == 5
    assert s.loc["gemini-3.8-flash", "error_rate"] == pytest.approx(3 / 5)
    events = no_warnings_load(traces.load_events, tmp_path)
    assert len(events) == 4
    assert events["type"].astype(str).tolist() == ["text.delta", "text.delta", "text.done", "stop"]
    assert events["kind"].astype(str).tolist() == ["text", "text", "text", "stop"]
    assert events["phase"].astype(str).tolist() == ["delta", "delta", "done", "stop"]
    assert events["t"].tolist() == [0.2, 0.21, 0.22, 1.0]
    assert events["at"][3] == pd.Timestamp(T0 + 1002.5, unit="ms", tz="UTC")
    assert events["size"].tolist() == [1, 1, 2, 0]


def test_a_message_index_is_read_as_one_integer_by_every_reader(tmp_path: Path) -> None:
    """The column took ``3.0`` as 3 but the join took only an int (a record of message 5.0 timed
    message 3), and a message index that is no integer made a record complete for the join but
    not for the column. Now every reader takes ``3.0`` as 3 and ``"x"`` as absent: that record did
    not complete (a failed row of its own, the turn untimed), in the turns, events and ``show``."""
    tid = "app/floats"
    save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000), user("q1", T0 + 5000), answer("a1", T0 + 9000),
                         user("q2", T0 + 10000), answer("a2", T0 + 12000)])
    stop = [[1000.0, "stop", 0]]
    append_sidecar(sidecar_record(tid, 0, 1.0, started_at=T0 + 2.5, total_ms=1000.0, events=stop), base=tmp_path)  # type: ignore[arg-type]
    append_sidecar(sidecar_record(tid, 1, 5.0, started_at=T0 + 6000, total_ms=3000.0, events=stop), base=tmp_path)  # type: ignore[arg-type]
    append_sidecar(sidecar_record(tid, 2, "x", started_at=T0 + 11000, total_ms=1000.0, events=stop), base=tmp_path)  # type: ignore[arg-type]
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["source"].astype(str).tolist() == ["trace+sidecar", "trace", "sidecar", "trace"]
    assert df["message_index"].tolist() == [1, 3, pd.NA, 5] and df["turn"].tolist() == [0, 1, 2, 2]
    assert df["latency"].tolist() == [1.0, 4.0, 1.0, 2.0]  # the records' times where they join, else the trace's
    events = no_warnings_load(traces.load_events, tmp_path)  # message 5.0's events left out with its record
    assert events["turn"].tolist() == [0, 2] and events["message_index"].tolist() == [1, pd.NA]
    entries = traces.show(tid, root=tmp_path).entries
    assert [e["kind"] for e in entries if e["kind"] != "user"] == ["assistant", "assistant", "failed", "assistant"]
    labels = [e["label"] for e in entries if e["kind"] == "assistant"]
    assert [label.endswith("no timing") for label in labels] == [False, True, True]
    assert traces.show(df.iloc[2], root=tmp_path).selected == next(e["key"] for e in entries if e["kind"] == "failed")


def test_the_events_of_a_failed_attempt_naming_another_message_are_kept(tmp_path: Path) -> None:
    """Only a completed record times a message: a failed attempt naming a message index that is not
    its turn's lost its events (as a record of another message), while its turns row was kept."""
    tid = "app/retry"
    save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000)])
    append_sidecar(sidecar_record(tid, 0, 7, "error", started_at=T0 + 2.5, events=[[100.0, "stop", 0]]), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["source"].astype(str).tolist() == ["sidecar", "trace"] and df["message_index"].tolist() == [pd.NA, 1]
    events = traces.load_events(tmp_path)
    assert events["turn"].tolist() == [0] and events["status"].astype(str).tolist() == ["error"]
    assert events["message_index"].tolist() == [pd.NA]


def test_a_key_in_a_sidecar_error_type_is_redacted_in_the_frame(tmp_path: Path) -> None:
    """The error message was redacted, its type was not (a provider's error class quoting the key)."""
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    append_sidecar(sidecar_record("leak", 0, None, "error", started_at=T0 + 2.5,
                                  error={"type": f"AuthenticationError {key}", "message": f"Incorrect API key: {key}"}),
                   base=tmp_path)
    df = traces.load_turns(tmp_path)
    assert df["error_type"].tolist() == ["AuthenticationError [redacted]"]
    assert df["error_message"].tolist() == ["Incorrect API key: [redacted]"]
    assert key[:12] not in df.to_string()


def test_a_sidecar_record_of_another_message_is_not_joined(tmp_path: Path) -> None:
    # the conversation was edited since: turn 1 is now message 3, the sidecar still times the
    # message 5 of its earlier version (another model, another client)
    tid = "app/edited"
    save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000), user("q1", T0 + 5000), answer("a1", T0 + 9000)])
    append_sidecar(sidecar_record(tid, 0, 1, started_at=T0 + 2.5, ttft_ms=200.0, total_ms=1000.0,
                                  events=[[200.0, "text.delta", 2], [1000.0, "stop", 0]]), base=tmp_path)
    append_sidecar(sidecar_record(tid, 1, 5, model="other-model", client_type="ant-messages", started_at=T0 + 6000,
                                  ttft_ms=500.0, total_ms=3000.0, events=[[500.0, "text.delta", 2], [3000.0, "stop", 0]]),
                   base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["message_index"].tolist() == [1, 3]  # and no row of its own for the record left out
    assert df["source"].astype(str).tolist() == ["trace+sidecar", "trace"]
    assert df["model"].astype(str).tolist() == ["gemini-3.8-flash"] * 2
    assert df["client_type"].isna().tolist() == [False, True]
    assert df["latency"].tolist() == [1.0, 4.0] and np.isnan(df["ttft"][1])  # the trace's own times
    assert df["started"][1] == pd.Timestamp(T0 + 5000, unit="ms", tz="UTC")
    # as the conversation view draws it: the turn without timing
    labels = [e["label"] for e in traces.show(tid, root=tmp_path).entries if e["kind"] == "assistant"]
    assert not labels[0].endswith("no timing") and labels[1].endswith("no timing")
    items = no_warnings_load(traces.load_items, tmp_path)
    assert items["model"].astype(str).unique().tolist() == ["gemini-3.8-flash"]
    events = no_warnings_load(traces.load_events, tmp_path)  # the record's events are left out with it
    assert events["message_index"].tolist() == [1, 1] and events["t"].tolist() == [0.2, 1.0]


def test_sidecar_reader_matches_read_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "t.timing.jsonl"
    lines = [
        json.dumps(sidecar_record("t", 0, 1, events=[[1.0, "text.delta", 3], [2.0, "stop", 0]])),
        "",
        "[1, 2]",
        '{"no_trace_id": 1}',
        json.dumps({"trace_id": "t", "turn": 1, "events": [[1, "text.delta", 1]], "status": "complete"}),
        json.dumps({"trace_id": "t", "turn": 3, "events": [], "note": "events not last"}),
        json.dumps({"trace_id": "t", "events": [], "note": "no turn"}),
        '{"trace_id": "t", "turn": 2, "events": [[1, "te',
    ]
    path.write_text("\n".join(lines))
    reference = [json.loads(lines[i]) for i in (0, 4, 5)]  # objects with a trace_id and a turn; not the half-written last
    records = read_sidecar(path)
    assert list(records) == reference and records.damaged == 3  # "[1, 2]", the objects without a trace_id, a turn
    assert read_sidecar(str(path)) == reference
    without = read_sidecar(str(path), events=False)
    assert [{k: v for k, v in r.items() if k != "events"} for r in without] == [
        {k: v for k, v in r.items() if k != "events"} for r in reference
    ]


def test_filters_since_until_models(tmp_path: Path) -> None:
    save(tmp_path, "a", [user("q", T0), answer("x", T0 + 100), user("q", T0 + 60_000), answer("y", T0 + 60_100)])
    save(tmp_path, "b", [user("q", T0 + 30_000), answer("z", T0 + 30_100)], model="local-model")
    all_ = no_warnings_load(traces.load_turns, tmp_path)
    assert len(all_) == 3
    since = traces.load_turns(tmp_path, since=pd.Timestamp(T0 + 30_000, unit="ms", tz="UTC"))
    assert since["trace_id"].tolist() == ["a", "b"] and since["turn"].tolist() == [1, 0]
    until = traces.load_turns(tmp_path, until="2026-01-01 00:00:30")  # naive = UTC
    assert until["trace_id"].tolist() == ["a"] and until["turn"].tolist() == [0]
    only = traces.load_turns(tmp_path, models="local-model")
    assert only["trace_id"].tolist() == ["b"]
    items = traces.load_items(tmp_path, models=["local-model"])
    assert set(items["trace_id"]) == {"b"} and len(items) == 2
    items = traces.load_items(tmp_path, since="2026-01-01 00:00:59")
    assert items["message_index"].tolist() == [2, 3]
    # any year pandas takes; a missing or unreadable time is refused, naming the option
    assert len(traces.load_turns(tmp_path, since="1600-01-01", until="9999-12-31")) == 3
    for kw, said in ((dict(until=pd.NaT), "until takes a time, not NaT"), (dict(until=""), "until takes a time"),
                     (dict(since=float("nan")), "since takes a time"), (dict(since="soon"), "since takes a time")):
        with pytest.raises(OptionError, match=said):
            traces.load_events(tmp_path, **kw)


def category_values(df: pd.DataFrame) -> dict[str, tuple[list[str], list[str]]]:
    """Each category column but ``source`` (fixed three): (its categories, the values its rows hold, sorted)."""
    return {c: (list(df[c].cat.categories), sorted(df[c].dropna().astype(str).unique()))
            for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype) and c != "source"}


def test_a_filtered_frame_holds_only_the_categories_of_its_rows(tmp_path: Path) -> None:
    """A filter (``since`` / ``until`` / ``models``) or a copy left out leaves no category that no
    row has, as an unfiltered load has none: ``groupby(observed=False)`` and ``value_counts`` show
    no empty group."""
    events = [[10.0, "text.delta", 1], [20.0, "stop", 0]]
    save(tmp_path, "a", [user("q", T0), answer("x", T0 + 100, finish="length"), user("q", T0 + 60_000), answer("y", T0 + 60_100)])
    append_sidecar(sidecar_record("a", 0, 1, started_at=T0 + 1, total_ms=99.0, events=events), base=tmp_path)
    save(tmp_path, "b", [user("q", T0 + 30_000), answer("z", T0 + 30_100, finish="tool_call")], model="local-model")
    append_sidecar(sidecar_record("b", 0, 1, model="local-model", client_type="ant-messages", started_at=T0 + 30_001,
                                  total_ms=99.0, events=[[10.0, "thinking.delta", 1], [20.0, "stop", 0]]), base=tmp_path)
    filters: list[dict[str, Any]] = [dict(models="local-model"), dict(since="2026-01-01 00:00:59"),
                                     dict(until="2026-01-01 00:00:20"), dict(since="2027-01-01")]
    for load in (traces.load_turns, traces.load_items, traces.load_events):
        for kw in [{}, *filters]:
            df = no_warnings_load(load, tmp_path, **kw)
            for col, (cats, values) in category_values(df).items():
                assert cats == values, (load.__name__, kw, col)
    only = traces.load_turns(tmp_path, models="local-model")
    assert only["model"].value_counts().to_dict() == {"local-model": 1}
    assert only.groupby("finish_reason", observed=False).size().to_dict() == {"tool_call": 1}
    assert list(only["client_type"].cat.categories) == ["ant-messages"]
    assert list(only["source"].cat.categories) == ["trace", "trace+sidecar", "sidecar"]  # fixed, filter or not
    none = traces.load_turns(tmp_path, since="2027-01-01")
    assert len(none) == 0 and none["model"].dtype == pd.CategoricalDtype(pd.Index([""])[:0])  # no category, of text
    # a copy left out (another file, of another model, holds the same answer timed by its sidecar)
    copies = tmp_path / "copies"
    save(copies, "c/1", [user("q", T0), answer("x", T0 + 100, finish="length")], model="old-model")
    save(copies, "c/2", [user("q", T0), answer("x", T0 + 100, finish="length")], model="new-model")
    append_sidecar(sidecar_record("c/2", 0, 1, model="new-model", started_at=T0 + 1, total_ms=99.0), base=copies)
    for load in (traces.load_turns, traces.load_items):
        df = no_warnings_load(load, copies)
        assert df.attrs["duplicates"] and set(df["trace_id"]) == {"c/2"}, load.__name__
        assert list(df["model"].cat.categories) == ["new-model"], load.__name__
        assert all(cats == values for cats, values in category_values(df).values()), load.__name__


def test_since_until_numbers_are_unix_seconds_or_ms(tmp_path: Path) -> None:
    save(tmp_path, "a", [user("q", T0), answer("x", T0 + 100), user("q", T0 + 60_000), answer("y", T0 + 60_100)])
    # a number is a Unix time (as time.time() gives, or in ms as traces store it), not pandas' nanoseconds
    for since in (T0 + 30_000, (T0 + 30_000) / 1000, np.int64(T0 + 30_000), np.float64((T0 + 30_000) / 1000)):
        assert traces.load_turns(tmp_path, since=since)["turn"].tolist() == [1], since
        assert traces.load_turns(tmp_path, until=since)["turn"].tolist() == [0], since
    for bad in (0, -5, float("inf")):
        with pytest.raises(OptionError, match="since takes a time: a number is Unix seconds or milliseconds"):
            traces.load_turns(tmp_path, since=bad)


def test_a_leading_tilde_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "cwd"
    elsewhere.mkdir()
    save(home / "cache", "a", [user("q", T0), answer("x", T0 + 100)])
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    for path in ("~/cache", Path("~/cache"), ["~/cache"], "~/cache/a.json"):
        assert no_warnings_load(traces.load_turns, path)["trace_id"].tolist() == ["a"], path
    assert len(no_warnings_load(traces.load_items, "~/cache")) == 2
    assert traces.show("a", root="~/cache").turns and traces.show("~/cache/a.json").turns
    out = traces.to_parquet("~/cache", "~/turns.parquet")
    assert out == home / "turns.parquet" and out.is_file() and not (elsewhere / "~").exists()


def test_show_refuses_a_turn_it_does_not_have_and_says_where_a_row_is_looked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save(tmp_path, "a", [user("q", T0), answer("x", T0 + 100), user("q", T0 + 200), answer("y", T0 + 300)])
    assert traces.show("a", root=tmp_path, turn=np.int64(-1)).selected_index == 3
    for turn in (2, -3):  # was: nothing selected, silently
        with pytest.raises(OptionError, match=f"turn={turn}: a has 2 assistant turns \\(give 0 to 1, or -1 for the last\\)"):
            traces.show("a", root=tmp_path, turn=turn)
    for turn in (1.5, "1", True):  # was: int(turn), silently
        with pytest.raises(OptionTypeError, match="turn takes the index of an assistant turn"):
            traces.show("a", root=tmp_path, turn=turn)  # type: ignore[arg-type]
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "elsewhere"))
    row = no_warnings_load(traces.load_turns, tmp_path).iloc[0]
    with pytest.raises(FileNotFoundError, match="give root= the directory the row was loaded from"):
        traces.show(row)


def test_odd_arguments_get_a_clear_error(tmp_path: Path) -> None:
    save(tmp_path, "a", [user("q", T0), answer("x", T0 + 100)])
    assert len(no_warnings_load(traces.load_turns, os.fsencode(tmp_path))) == 1  # a path as bytes
    turns = no_warnings_load(traces.load_turns, tmp_path)
    for call, said in ((lambda: traces.load_turns(""), "an empty path"),
                       (lambda: traces.load_items(tmp_path, pattern=None), "pattern takes a glob"),
                       (lambda: traces.load_turns(tmp_path, pattern=["**/*.json"]), "pattern takes a glob"),
                       (lambda: traces.summary(turns, by="bogus"), "no column 'bogus' to group by"),
                       (lambda: traces.load_turns(tmp_path, prices={"m": {"prompt_tokens": 10**400, "response_tokens": 1}}),
                        "must be a finite number")):
        with pytest.raises(OptionError, match=said):
            call()
    # arguments of the wrong type: an OptionTypeError (a TypeError too) saying what is expected
    for call, said in ((lambda: traces.load_turns(None), "give a trace directory or file .* not NoneType"),
                       (lambda: traces.load_events(5), "not int 5"),
                       (lambda: traces.load_items([tmp_path, None]), "a path in the list is NoneType None"),
                       (lambda: traces.load_turns(tmp_path, models=5), "models takes a model id or a list of them"),
                       (lambda: traces.load_events(tmp_path, models=["demo", None]), "models takes a model id")):
        with pytest.raises(OptionTypeError, match=said):
            call()
    assert len(no_warnings_load(traces.load_turns, tmp_path, models=(m for m in ["gemini-3.8-flash"]))) == 1


def test_a_tree_given_several_ways_is_read_once(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    save(root, "runs/v1.5", [user("q", T0), answer("x", T0 + 100)])  # a dotted id: runs/v1.json
    append_sidecar({"v": 1, "trace_id": "runs/v1.5", "turn": 0, "message_index": 1, "status": "complete",
                    "started_at": float(T0 + 5), "ttft_ms": 50.0, "total_ms": 90.0}, base=root)
    append_sidecar({"v": 1, "trace_id": "runs/v1.5", "turn": 1, "message_index": None, "status": "error",
                    "started_at": float(T0 + 500), "total_ms": 10.0, "error": {"type": "X", "message": "m"}}, base=root)
    os.symlink(root, tmp_path / "link")
    once = no_warnings_load(traces.load_turns, root)
    assert once["status"].tolist() == ["complete", "error"] and once.attrs["n_files"] == 1
    for paths in ([root, root], [root / "runs", root], [root, tmp_path / "link"]):
        again = no_warnings_load(traces.load_turns, paths)
        assert again["status"].tolist() == ["complete", "error"] and again.attrs["n_files"] == 1, paths
        assert len(no_warnings_load(traces.load_events, paths)) == len(no_warnings_load(traces.load_events, root))


def test_paths_files_lists_and_trace_ids(tmp_path: Path) -> None:
    path = save(tmp_path / "cache", "agent1/conversation_001", rich_history())
    save(tmp_path / "cache", "agent2/conversation_009", [user("q", T0), answer("a", T0 + 1)])
    # a file given alone: the config's trace id when the path ends with it
    assert no_warnings_load(traces.load_turns, path)["trace_id"].unique().tolist() == ["agent1/conversation_001"]
    other = tmp_path / "elsewhere.json"
    other.write_bytes(path.read_bytes())
    assert traces.load_turns(other)["trace_id"].unique().tolist() == ["elsewhere"]
    both = traces.load_turns([tmp_path / "cache" / "agent2", path])
    assert both["trace_id"].unique().tolist() == ["conversation_009", "agent1/conversation_001"]
    only1 = traces.load_turns(tmp_path / "cache", pattern="agent1/*.json")
    assert only1["trace_id"].unique().tolist() == ["agent1/conversation_001"]


def test_repeated_histories_are_counted_once(tmp_path: Path) -> None:
    # one trace id per call: each file holds the conversation so far
    h = [user("q0", T0), answer("a0", T0 + 100), user("q1", T0 + 200), answer("a1", T0 + 300), user("q2", T0 + 400), answer("a2", T0 + 500)]
    for k in range(3):
        save(tmp_path, f"agent/{k:05d}", h[: 2 * k + 2])
        append_sidecar(sidecar_record(f"agent/{k:05d}", k, 2 * k + 1, started_at=T0 + 200 * k + 1, ttft_ms=10.0, total_ms=90.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["trace_id"].tolist() == ["agent/00000", "agent/00001", "agent/00002"]
    assert df["turn"].tolist() == [0, 1, 2]
    assert df["source"].astype(str).tolist() == ["trace+sidecar"] * 3
    assert df.attrs["duplicates"] == 3
    assert len(traces.load_turns(tmp_path, dedupe=False)) == 6
    items = traces.load_items(tmp_path)
    assert len(items) == 6 and items.attrs["duplicates"] == 6


# --------------------------------------------------------------------------- cost


def test_cost_unknown_model_is_na_and_flagged(tmp_path: Path) -> None:
    save(tmp_path, "x", [user("q", T0), answer("a", T0 + 10)], model="my-local-llm")
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert np.isnan(df["cost"][0]) and bool(df["cost_missing"][0])
    priced = traces.load_turns(tmp_path, prices={"my-local-llm": {"prompt_tokens": 2.0, "response_tokens": 8.0}})
    assert priced["cost"][0] == pytest.approx((10 * 2.0 + 5 * 8.0) / 1e6) and not priced["cost_missing"][0]
    s = traces.summary(df)
    assert np.isnan(s.loc["my-local-llm", "cost_total"]) and s.loc["my-local-llm", "cost_missing"] == 1


def test_cost_by_model_and_client_type(tmp_path: Path) -> None:
    # a model whose price depends on the platform: the sidecar's client type picks the entry
    by_model: dict[str, list[dict[str, Any]]] = {}
    for e in list_supported_models():
        if "pricing" in e:
            by_model.setdefault(e["model"], []).append(e)

    def first_for(es: list[dict[str, Any]], client: str) -> dict[str, Any]:
        return next(e for e in es if e["client"] == client)

    model, entries, other = next(
        (m, es, first_for(es, e["client"]))
        for m, es in by_model.items()
        for e in es
        if first_for(es, e["client"])["pricing"] != es[0]["pricing"]
    )
    usage = {"cached_tokens": 1000, "prompt_tokens": 20_000, "thoughts_tokens": 3000, "response_tokens": 4000}
    save(tmp_path, "with_client", [user("q", T0), answer("a", T0 + 10, usage)], model=model)
    save(tmp_path, "without_client", [user("q", T0), answer("a", T0 + 20, usage)], model=model)
    append_sidecar(sidecar_record("with_client", 0, 1, model=model, client_type=other["client"], started_at=T0 + 1, total_ms=9.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path).set_index("trace_id")
    assert df.loc["with_client", "cost"] == pytest.approx(expected_cost(usage, other["pricing"]))
    assert df.loc["without_client", "cost"] == pytest.approx(expected_cost(usage, entries[0]["pricing"]))


# --------------------------------------------------------------------------- items rebuild (property)

_ITEM_COLS = ("text", "thinking", "name", "tool_call_id", "mime_type", "image_url")


def rebuild_messages(items: pd.DataFrame, payloads: bool) -> dict[int, list[dict[str, Any]]]:
    """content_items per message index, from the items frame."""
    out: dict[int, list[dict[str, Any]]] = {}
    for _, row in items.sort_values(["message_index", "item_index"]).iterrows():
        item: dict[str, Any] = {"type": row["type"]}
        for col in _ITEM_COLS:
            if col == "mime_type" and row["type"] == "image_url.done":
                continue  # derived from the data URL
            if not pd.isna(row[col]):
                item[col] = row[col]
        if not pd.isna(row["arguments"]):
            item["arguments"] = json.loads(row["arguments"])
        if not pd.isna(row["extra"]):
            item.update(json.loads(row["extra"]))
        if payloads:
            if not pd.isna(row["data"]):  # (a string column)
                item["data"] = row["data"]
            for col in ("embedding", "images"):
                if row[col] is not None:
                    item[col] = row[col]
            if not pd.isna(row["fidelity"]):
                item["fidelity"] = json.loads(row["fidelity"])
        out.setdefault(int(row["message_index"]), []).append(item)
    return out


def strip_payloads(item: dict[str, Any]) -> dict[str, Any]:
    item = {k: v for k, v in item.items() if k not in ("data", "embedding", "images", "fidelity")}
    if isinstance(item.get("image_url"), str) and item["image_url"].startswith("data:"):
        del item["image_url"]
    return item


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text
_json = st.recursive(_json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(_text, c, max_size=3), max_leaves=8)
_fidelity = st.dictionaries(st.sampled_from(["signature", "phase", "id"]), _text, min_size=1, max_size=2)


def _with_fidelity(item: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(item, st.none() | _fidelity).map(lambda t: {**t[0], **({"fidelity": t[1]} if t[1] else {})})


_assistant_item = st.one_of(
    _with_fidelity(st.builds(lambda t: {"type": "text.done", "text": t}, _text)),
    _with_fidelity(st.builds(lambda t: {"type": "thinking.done", "thinking": t}, _text)),
    _with_fidelity(
        st.builds(
            lambda n, a, i: {"type": "tool_call.done", "name": n, "arguments": a, "tool_call_id": i},
            _text, st.dictionaries(_text, _json, max_size=4), _text,
        )
    ),
    st.builds(lambda d, m: {"type": "inline_data.done", "data": d, "mime_type": m}, st.binary(max_size=64), st.sampled_from(["image/png", "audio/wav", "application/pdf"])),
    st.builds(lambda d: {"type": "inline_thinking.done", "data": d, "mime_type": "image/png"}, st.binary(max_size=32)),
    st.builds(lambda e: {"type": "embedding.done", "embedding": e}, st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=8)),
    st.builds(
        lambda t, extra: {"type": t, **extra},
        st.sampled_from(["video.done", "citation.done", "x-custom"]),
        st.dictionaries(st.sampled_from(["uri", "span", "score", "meta"]), _json, max_size=3),
    ),
)
_user_item = st.one_of(
    st.builds(lambda t: {"type": "text.done", "text": t}, _text),
    st.builds(lambda b: {"type": "image_url.done", "image_url": "data:image/png;base64," + base64.b64encode(b).decode()}, st.binary(max_size=48)),
    st.builds(lambda u: {"type": "image_url.done", "image_url": "https://example.com/" + u}, st.text("abc", max_size=5)),
    st.builds(
        lambda t, i, imgs: {"type": "tool_result.done", "text": t, "tool_call_id": i, **({"images": imgs} if imgs else {})},
        _text, _text, st.lists(st.just("https://example.com/i.png"), max_size=2),
    ),
)
_bucket = st.none() | st.integers(0, 10**6)
_usage = st.none() | st.fixed_dictionaries({k: _bucket for k in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")})


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 4))
    out: list[dict[str, Any]] = []
    at = T0
    for _ in range(n):
        out.append({"role": "user", "content_items": draw(st.lists(_user_item, min_size=1, max_size=3)), "created_at": at})
        at += draw(st.integers(1, 10_000))
        out.append(
            {
                "role": "assistant",
                "content_items": draw(st.lists(_assistant_item, max_size=5)),
                "usage_metadata": draw(_usage),
                "finish_reason": draw(st.sampled_from(["stop", "length", "tool_call", "unknown", None])),
                "created_at": at,
            }
        )
        at += draw(st.integers(1, 10_000))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_items_rebuild_every_message_exactly(history: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = save(Path(tmp), "prop/trace", history, model="gemini-3.8-flash", config={})
        source = json.loads(path.read_text(encoding="utf-8"))["history"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", traces.TraceLoadWarning)
            full = traces.load_items(tmp, payloads=True)
            light = traces.load_items(tmp)
            turns = traces.load_turns(tmp)
    rebuilt = rebuild_messages(full, payloads=True)
    for i, message in enumerate(source):
        assert rebuilt.get(i, []) == message["content_items"], i
    rebuilt_light = rebuild_messages(light, payloads=False)
    for i, message in enumerate(source):
        assert rebuilt_light.get(i, []) == [strip_payloads(it) for it in message["content_items"]], i
    # the turns frame agrees with the source messages
    assistants = [m for m in source if m["role"] == "assistant"]
    assert len(turns) == len(assistants)
    for (_, row), m in zip(turns.iterrows(), assistants):
        assert row["n_items"] == len(m["content_items"])
        assert row["n_tool_calls"] == sum(it["type"] == "tool_call.done" for it in m["content_items"])
        u = m["usage_metadata"] or {}
        for k in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"):
            assert (pd.isna(row[k]) and u.get(k) is None) or row[k] == u.get(k)
        finish = row["finish_reason"]
        assert (pd.isna(finish) and m["finish_reason"] is None) or finish == m["finish_reason"]


# --------------------------------------------------------------------------- summary, otel, export


def test_summary_percentiles_and_rates(tmp_path: Path) -> None:
    latencies = list(range(1, 41))
    history: list[dict[str, Any]] = []
    at = T0
    for k, lat in enumerate(latencies):
        history.append(user(f"q{k}", at))
        history.append(answer("a", at + lat * 1000, finish="length" if k % 10 == 0 else "stop"))
        at += lat * 1000 + 1000
    save(tmp_path, "fast", history[:40], model="gemini-3.8-flash")
    save(tmp_path, "slow", history[40:], model="gemini-4-argon")
    for k in range(20):
        started = T0 + k
        append_sidecar(sidecar_record("fast", k, 2 * k + 1, started_at=started, ttft_ms=100.0 * (k + 1), total_ms=1000.0 * latencies[k]), base=tmp_path)
    append_sidecar(sidecar_record("fast", 20, None, "error", started_at=T0 + 999_999, total_ms=10.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    s = traces.summary(df)
    assert s.index.tolist() == ["gemini-3.8-flash", "gemini-4-argon"]
    fast = s.loc["gemini-3.8-flash"]
    lat_fast = np.array(latencies[:20] + [0.01], dtype=float)
    for q in (50, 90, 99):
        assert fast[f"latency_p{q}"] == pytest.approx(np.percentile(lat_fast, q))
        assert fast[f"ttft_p{q}"] == pytest.approx(np.percentile(np.arange(1, 21) * 0.1, q))
    tps = np.array([5 / (lat - 0.1 * (k + 1)) for k, lat in enumerate(latencies[:20])])
    assert fast["tokens_per_s_p50"] == pytest.approx(np.percentile(tps, 50))
    assert fast["count"] == 21 and fast["error_rate"] == pytest.approx(1 / 21)
    assert fast["truncation_rate"] == pytest.approx(2 / 20)
    slow = s.loc["gemini-4-argon"]
    assert slow["latency_p90"] == pytest.approx(np.percentile(np.array(latencies[20:], dtype=float), 90))
    assert np.isnan(slow["ttft_p50"]) and slow["error_rate"] == 0
    assert fast["cost_total"] == pytest.approx(df.loc[df["model"] == "gemini-3.8-flash", "cost"].sum())
    overall = traces.summary(df, by=None)
    assert overall.index.tolist() == ["all"] and overall["count"].iloc[0] == 41
    multi = traces.summary(df, by=["model", "status"])
    assert multi.loc[("gemini-3.8-flash", "error"), "count"] == 1


def test_otel_renaming(tmp_path: Path) -> None:
    save(tmp_path, "t", rich_history())
    append_sidecar(sidecar_record("t", 0, 1, started_at=T0 + 1, ttft_ms=100.0, total_ms=1000.0), base=tmp_path)
    plain = no_warnings_load(traces.load_turns, tmp_path)
    otel = traces.load_turns(tmp_path, otel=True)
    for col, name in traces.OTEL_COLUMNS.items():
        if col in plain.columns:
            assert name in otel.columns and col not in otel.columns
            pd.testing.assert_series_equal(otel[name], plain[col], check_names=False)
    for name in ("gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                 "gen_ai.response.finish_reasons", "gen_ai.provider.name", "gen_ai.request.temperature",
                 "gen_ai.request.max_tokens", "gen_ai.conversation.id"):
        assert name in otel.columns
    pd.testing.assert_frame_equal(traces.summary(otel, by="gen_ai.request.model"), traces.summary(plain))
    items = traces.load_items(tmp_path, otel=True)
    assert "gen_ai.conversation.id" in items.columns and "gen_ai.request.model" in items.columns


def test_parquet_round_trip_and_duckdb(tmp_path: Path) -> None:
    import duckdb

    cache = tmp_path / "cache"
    save(cache, "a", rich_history())
    save(cache, "b", [user("q", T0), answer("a", T0 + 10)], model="my-local-llm", config={})
    append_sidecar(sidecar_record("a", 1, None, "error", started_at=T0 + 1601, total_ms=5.0), base=cache)
    df = no_warnings_load(traces.load_turns, cache)
    out = traces.to_parquet(df, tmp_path / "turns.parquet")
    back = pd.read_parquet(out)
    assert list(back.columns) == list(df.columns) and len(back) == len(df)
    for col in df.columns:
        if col == "tool_names":
            assert [None if v is None else list(v) for v in back[col]] == [None if v is None else list(v) for v in df[col]]
        else:
            left, right = df[col], back[col]
            if isinstance(left.dtype, pd.CategoricalDtype):
                left, right = left.astype(object), right.astype(object)
            pd.testing.assert_series_equal(right, left, check_dtype=False, check_categorical=False, obj=col)
    assert back.attrs.get("n_files") == 2
    table = traces.to_arrow(df)
    assert str(table.schema.field("tool_names").type) == "list<item: string>"
    assert str(table.schema.field("prompt_tokens").type) == "int64"
    # straight from a path, then DuckDB
    out2 = traces.to_parquet(cache, tmp_path / "turns2.parquet")
    res = duckdb.sql(f"SELECT model, count(*) AS n, sum(cost) AS cost FROM '{out2}' GROUP BY model ORDER BY model").fetchall()
    assert [(m, n) for m, n, _ in res] == [("gemini-3.8-flash", 4), ("my-local-llm", 1)]
    assert res[1][2] is None
    items_out = traces.to_parquet(traces.load_items(cache, payloads=True), tmp_path / "items.parquet")
    assert len(pd.read_parquet(items_out)) == 12


def test_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for k in range(3):
        save(tmp_path, f"t{k}", [user("q", T0), answer("a", T0 + 10)])
    traces.load_turns(tmp_path)
    assert "loading turns" not in capsys.readouterr().err
    from mmsp_notebook.traces import _load

    monkeypatch.setattr(_load, "PROGRESS_THRESHOLD", 2)
    traces.load_turns(tmp_path)
    assert "loading turns" in capsys.readouterr().err
    traces.load_turns(tmp_path, progress=False)
    assert "loading turns" not in capsys.readouterr().err


def test_plots(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    save(tmp_path, "a", rich_history())
    save(tmp_path, "b", [user("q", T0 + 50_000), answer("a", T0 + 53_000)], model="gemini-4-argon")
    append_sidecar(sidecar_record("a", 0, 1, started_at=T0 + 1, ttft_ms=300.0, total_ms=1400.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    fig = traces.plot_latency(df)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    fig2 = traces.plot_usage_over_time(df)
    assert isinstance(fig2, Figure) and len(fig2.axes) >= 2
    fig3 = traces.plot_usage_over_time(traces.load_turns(tmp_path, otel=True), freq="10s", by="model")
    assert isinstance(fig3, Figure)
    assert traces.plot_latency(df.iloc[0:0]) is not None
    # all turns as one group; a wrong argument is named, never a KeyError or AttributeError from inside
    assert [t.get_text() for t in traces.plot_latency(df, by=None, metrics="latency").axes[0].get_yticklabels()] == ["all"]
    for call, error, said in (
            (lambda: traces.plot_latency(df, by="nope"), OptionError, "plot_latency: no column 'nope' to group by; columns: trace_id"),
            (lambda: traces.plot_usage_over_time(df, by="nope"), OptionError, "no column 'nope' to group by"),
            (lambda: traces.plot_usage_over_time(str(tmp_path)), OptionTypeError, "takes a turns frame .* not str"),
            (lambda: traces.plot_latency(None), OptionTypeError, "takes a turns frame .* not NoneType"),
            (lambda: traces.plot_usage_over_time(traces.load_items(tmp_path)), OptionError,
             "takes a turns frame .*; this one has no 'started', 'ended', 'input_tokens'")):
        with pytest.raises(error, match=said):
            call()


def test_wrong_plot_and_summary_arguments_are_named(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    save(tmp_path, "a", [user("q", T0), answer("a", T0 + 3000)])
    df = no_warnings_load(traces.load_turns, tmp_path)
    for call, error, said in (
            # a metric that is no column: named, never an empty panel titled after it
            (lambda: traces.plot_latency(df, metrics="latncy"), OptionError, "no column 'latncy' to plot"),
            (lambda: traces.plot_latency(df, metrics=["latency", "tfft"]), OptionError, "no column 'tfft' to plot"),
            # a bin width that is none: never a ZeroDivisionError or pandas' own TypeError
            (lambda: traces.plot_usage_over_time(df, freq="0s"), OptionError, "freq '0s' is no positive fixed width"),
            (lambda: traces.plot_usage_over_time(df, freq="-1h"), OptionError, "freq '-1h' is no positive"),
            (lambda: traces.plot_usage_over_time(df, freq="bogus"), OptionError, "freq 'bogus' is no positive"),
            (lambda: traces.plot_usage_over_time(df, freq="1M"), OptionError, "freq '1M' is no positive fixed"),
            (lambda: traces.plot_usage_over_time(df, freq=5), OptionTypeError, "freq takes a pandas frequency .* not int"),
            # a group key that is no column name: never "'int' object is not iterable"
            (lambda: traces.summary(df, by=3), OptionTypeError, "by takes a column name or a list of them .* not int 3"),
            (lambda: traces.summary(df, by=["model", None]), OptionTypeError, "by takes a column name")):
        with pytest.raises(error, match=said):
            call()
    assert traces.plot_usage_over_time(df, freq="1h") is not None
    assert list(traces.summary(df, by=("model", "status")).index.names) == ["model", "status"]
    assert list(traces.summary(df, by=[]).index) == ["all"]


def test_core_import_pulls_no_ipython() -> None:
    code = "import sys; from mmsp_notebook import traces; traces.load_turns; print('IPython' in sys.modules, 'ipywidgets' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False", "False"]


# --------------------------------------------------------------------------- through the real clients


CLIENTS = ["openai-chat", "openai-responses", "ant-messages"]


async def _stream(server: Any, client_type: str, messages: list[dict[str, Any]], config: dict[str, Any]) -> list[dict[str, Any]]:
    import httpx

    client = server.client("demo", client_type)
    events: list[dict[str, Any]] = []
    try:
        async for event in client.streaming_response(messages, dict(config)):
            events.append(event)
    finally:
        inner = client._client._client
        await (inner.aclose() if isinstance(inner, httpx.AsyncClient) else inner.close())
    return events


@pytest.mark.parametrize("client_type", CLIENTS)
def test_golden_through_real_clients(demo_server: Any, client_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path))
    trace_id = f"golden/{client_type}"
    config = {"trace_id": trace_id, "tools": [WEATHER], "max_tokens": 4000, "temperature": 0.5}
    messages: list[dict[str, Any]] = [{"role": "user", "content_items": [{"type": "text.done", "text": "What is the weather in Paris?"}]}]
    first = asyncio.run(_stream(demo_server, client_type, messages, config))
    done1 = [i for e in first for i in e["content_items"] if i["type"].endswith(".done")]
    call = next(i for i in done1 if i["type"] == "tool_call.done")
    messages.append({"role": "assistant", "content_items": done1, "usage_metadata": first[-1]["usage_metadata"],
                     "finish_reason": first[-1]["finish_reason"], "created_at": first[-1]["created_at"]})
    messages.append({"role": "user", "content_items": [{"type": "tool_result.done", "text": "sunny, 21C", "tool_call_id": call["tool_call_id"]}]})
    second = asyncio.run(_stream(demo_server, client_type, messages, config))
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["trace_id"].tolist() == [trace_id] * 2
    assert df["model"].astype(str).tolist() == ["demo", "demo"]
    stops = [first[-1], second[-1]]
    for k, stop in enumerate(stops):
        for bucket, value in stop["usage_metadata"].items():
            assert (pd.isna(df[bucket][k]) and value is None) or df[bucket][k] == value, (k, bucket)
        assert df["finish_reason"].astype(str)[k] == stop["finish_reason"]
        assert df["ended"][k] == pd.Timestamp(stop["created_at"], unit="ms", tz="UTC")
    assert df["n_tool_calls"].tolist()[0] == 1 and df["n_text"].tolist()[1] >= 1
    assert (df["latency"] >= 0).all() and df["cost_missing"].all()
    assert df["temperature"].tolist() == [0.5, 0.5] and list(df["tool_names"][0]) == ["get_weather"]
    items = traces.load_items(tmp_path)
    calls = items[items["type"] == "tool_call.done"]
    assert len(calls) == 1 and json.loads(calls["arguments"].iloc[0]) == call["arguments"]
    text = items[(items["role"] == "assistant") & (items["type"] == "text.done") & (items["message_index"] == 3)]
    done2 = [i for e in second for i in e["content_items"] if i["type"] == "text.done"]
    assert text["text"].tolist() == [i["text"] for i in done2]


# --------------------------------------------------------------------------- bench smoke, notebook


def test_bench_script_smoke(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_traces.py"), "--corpus", str(tmp_path / "corpus"), "--files", "200",
         "--repeat", "1", "--no-results", "--shape-scale", "0.002"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "load_turns" in out.stdout and "naive" in out.stdout and "floor" in out.stdout
    for shape in ("agent", "tiny", "large", "images"):
        assert f"shape {shape}" in out.stdout
    assert "2000 rows" in out.stdout or "turns" in out.stdout
    df = traces.load_turns(tmp_path / "corpus")
    assert len(df) >= 2000 and df["cost_missing"].any() and (df["source"] == "trace+sidecar").any()


def test_traces_notebook_runs(traces_notebook: tuple[Any, Path]) -> None:
    nb, tmp_path = traces_notebook
    assert nb.metadata["kernelspec"]["name"] == "python3"
    outputs = "\n".join(
        o.get("text", "") + json.dumps(o.get("data", {}))
        for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert "duckdb result" in outputs.lower()
    for model in ("demo+tps=400+delay=0.1", "demo+tps=100+delay=0.8"):
        assert model in outputs
    assert "image/png" in outputs  # the plots rendered
    assert list(tmp_path.iterdir()) == [] or all(p.suffix != ".json" for p in tmp_path.iterdir())


def test_traces_notebook_dataset_section(traces_notebook: tuple[Any, Path]) -> None:
    nb, tmp_path = traces_notebook
    assert nb.cells[-1].cell_type == "markdown" and "## Try this" in nb.cells[-1].source
    cells = [c for c in nb.cells if c.cell_type == "code"]

    def out(needle: str) -> str:
        cell = next(c for c in cells if needle in c.source)
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        assert not errors, errors
        return "\n".join(o.get("text", "") + json.dumps(o.get("data", {})) for o in cell.outputs)

    first = out("first = traces.sync(")
    assert "0 removed, 0 unchanged" in first and "month=" in first and "model=demo" in first
    again = out("again = traces.sync(")
    assert "1 traces converted" in again and "0 removed" in again
    table = out("FROM turns")
    assert "demo+tps=400" in table and "latency_p99" in table
    assert "summary in DuckDB over the dataset == summary in pandas over the frame" in out("in_duckdb = traces.summary(")


def test_traces_notebook_ranks_completed_turns(traces_notebook: tuple[Any, Path]) -> None:
    from helpers import html_of, text_of

    nb, _ = traces_notebook
    cells = [c for c in nb.cells if c.cell_type == "code"]

    def find(needle: str) -> Any:
        return next(c for c in cells if needle in c.source)

    # the failing endpoint answers its first token as fast as any: only completed turns are ranked
    assert "fastest to first token: demo+tps=400+delay=0.1" in text_of(find("fastest = "))
    assert "demo+tps=150+error" not in html_of(find("stats = traces.summary("))
    assert "costs the most: demo+tps=100+delay=0.8" in text_of(find("PRETEND_PRICES = {"))
    assert "1 traces converted" in text_of(find("And in one word?"))


def test_dotted_trace_id_pairs_with_its_sidecar(tmp_path: Path) -> None:
    # mmsp's Tracer writes Path(trace_id).with_suffix(".json"): "runs/v1.5" lands in "runs/v1.json",
    # while the sidecar keeps the full id
    save(tmp_path, "runs/v1.5", [user("q", T0), answer("a", T0 + 100)])
    assert (tmp_path / "runs" / "v1.json").exists()
    append_sidecar(sidecar_record("runs/v1.5", 0, 1, started_at=T0 + 1, ttft_ms=20.0, total_ms=99.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert len(df) == 1 and df["source"].astype(str).tolist() == ["trace+sidecar"]
    assert df["trace_id"].tolist() == ["runs/v1"] and df["ttft"].tolist() == [0.02]


# --------------------------------------------------------------------------- hostile values


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))  # json.dumps escapes lone surrogates and keeps huge ints
    return path


def test_integers_beyond_int64_become_na(tmp_path: Path) -> None:
    h = [user("q", T0), answer("a", T0 + 100, usage={"cached_tokens": 1, "prompt_tokens": 10**20, "thoughts_tokens": -(2**63), "response_tokens": 5})]
    write_json(tmp_path / "big.json", {"history": h, "config": {"model": "demo", "max_tokens": 10**20, "temperature": 10**400}})
    write_json(tmp_path / "huge_time.json", {"history": [user("q", 10**400), answer("b", 10**400)], "config": {"model": "demo"}})
    fail = sidecar_record("big", 1, None, "error", started_at=T0 + 200, total_ms=10.0, usage={"prompt_tokens": 10**20, "response_tokens": 3},
                          events=[[1.0, "text.delta", 10**20], [2.0, "stop", 0]])
    append_sidecar(fail, base=tmp_path)
    append_sidecar(sidecar_record("big", 10**20, 10**20, "error", started_at=T0 + 300), base=tmp_path)
    with pytest.warns(traces.TraceLoadWarning, match="1 damaged timing sidecars"):
        df = traces.load_turns(tmp_path)  # a record of turn 10**20 belongs to no turn: a damaged line, named
    assert [s["reason"] for s in df.attrs["skipped"]] == ["damaged sidecar: 1 unreadable lines (1 records read)"]
    assert df["trace_id"].tolist() == ["big", "big", "huge_time"]
    row = df.iloc[0]
    assert row["cached_tokens"] == 1 and row["response_tokens"] == 5
    assert pd.isna(row["prompt_tokens"]) and pd.isna(row["thoughts_tokens"]) and pd.isna(row["max_tokens"])
    assert row["input_tokens"] == 1 and np.isnan(row["temperature"])
    assert pd.isna(df["prompt_tokens"][1]) and df["response_tokens"][1] == 3
    assert df["started"].isna().tolist() == [False, False, True] and np.isnan(df["latency"][2])
    with pytest.warns(traces.TraceLoadWarning, match="1 damaged timing sidecars"):
        events = traces.load_events(tmp_path)
    assert events["size"].isna().tolist() == [True, False] and events["t"].tolist() == [0.001, 0.002]
    with pytest.warns(traces.TraceLoadWarning, match="1 damaged timing sidecars"):
        items = traces.load_items(tmp_path)
    assert len(items) == 4 and items["created_at"].isna().sum() == 2


def test_token_sums_beyond_int64_are_na_not_wrapped_around(tmp_path: Path) -> None:
    big = 2**62 + 5  # each bucket fits an int64, their sums do not
    h = [user("q", T0), answer("a", T0 + 100, usage={"cached_tokens": big, "prompt_tokens": big, "thoughts_tokens": big,
                                                     "response_tokens": 7}),
         user("q", T0 + 200), answer("b", T0 + 300, usage={"cached_tokens": None, "prompt_tokens": 2**63 - 1,
                                                           "thoughts_tokens": 1, "response_tokens": None})]
    save(tmp_path, "big", h)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["input_tokens"].isna().tolist() == [True, False]
    assert df["output_tokens"].tolist() == [big + 7, 1]
    assert df["total_tokens"].isna().tolist() == [True, True]
    assert df["input_tokens"][1] == 2**63 - 1
    for col in ("input_tokens", "output_tokens", "total_tokens"):
        assert (df[col].dropna() > 0).all()


def test_negative_token_counts_are_na_in_traces_and_sidecars(tmp_path: Path, decode_path: str) -> None:
    # a foreign producer's -1 for "unknown": not a count to add to sums and costs
    usage = {"cached_tokens": -1, "prompt_tokens": 1000, "thoughts_tokens": -5, "response_tokens": 200}
    save(tmp_path, "neg", [user("q", T0), answer("a", T0 + 1000, usage)])
    append_sidecar(sidecar_record("neg", 1, None, "error", started_at=T0 + 2000, total_ms=10.0,
                                  usage={"prompt_tokens": -1, "response_tokens": 3}), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["status"].astype(str).tolist() == ["complete", "error"]
    first, failed = df.iloc[0], df.iloc[1]
    assert first["cached_tokens"] is pd.NA and first["thoughts_tokens"] is pd.NA
    assert first["input_tokens"] == 1000 and first["output_tokens"] == 200 and first["total_tokens"] == 1200
    assert first["cost"] == pytest.approx(expected_cost({"prompt_tokens": 1000, "response_tokens": 200},
                                                        price("gemini-3.8-flash")))
    assert failed["prompt_tokens"] is pd.NA and failed["response_tokens"] == 3
    assert (df[["cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"]].fillna(0) >= 0).all().all()


def test_lone_surrogates_and_undecodable_file_names(tmp_path: Path) -> None:
    h = [user("q \ud83d", T0), answer("a\udcff", T0 + 100)]
    write_json(tmp_path / "s.json", {"history": h, "config": {"model": "demo\ud800"}})
    append_sidecar(sidecar_record("s", 1, None, "error", started_at=T0 + 200, total_ms=5.0), base=tmp_path)
    side = tmp_path / "s.timing.jsonl"
    side.write_text(side.read_text().replace("503 upstream", "\\udcff").replace('"openai-chat"', '"x\\ud83d"'))
    raw_name = bytes(tmp_path) + b"/caf\xe9.json"
    with open(raw_name, "wb") as fh:  # a file name that is not UTF-8
        fh.write(json.dumps({"history": [user("q", T0 + 5), answer("b", T0 + 9)], "config": {"model": "demo"}}).encode())
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert sorted(df["trace_id"]) == ["caf\ufffd", "s", "s"]
    assert "demo\ufffd" in set(df["model"].astype(str))
    assert df.loc[df["status"] == "error", "error_message"].tolist() == ["\ufffd"]
    assert "x\ufffd" in df["client_type"].astype(str).tolist()
    items = no_warnings_load(traces.load_items, tmp_path)
    assert "a\ufffd" in items["text"].tolist() and "q \ufffd" in items["text"].tolist()
    traces.to_parquet(df, tmp_path / "t.parquet")
    traces.to_parquet(items, tmp_path / "i.parquet")
    assert len(no_warnings_load(traces.load_events, tmp_path)) == 0


def test_impossible_timestamps_give_na_without_numpy_warnings(tmp_path: Path) -> None:
    save(tmp_path, "a", [user("q", T0), answer("x", 10**20), user("q", T0), answer("y", 1e300), user("q", -1000), answer("z", T0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = traces.load_turns(tmp_path)
        items = traces.load_items(tmp_path)
    assert df["ended"].isna().tolist() == [True, True, False]
    assert df["started"].isna().tolist() == [False, False, True]
    assert df["latency"].isna().all()
    assert items["created_at"].isna().sum() == 3


def test_negative_and_inconsistent_durations_are_na(tmp_path: Path) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 1000), user("q", T0 + 2000), answer("b", T0 + 5000), user("q", T0 + 6000), answer("c", T0 + 5500)])
    append_sidecar(sidecar_record("t", 0, 1, started_at=T0 + 1, ttft_ms=-50.0, total_ms=-200.0), base=tmp_path)
    append_sidecar(sidecar_record("t", 1, 3, started_at=-1000, ttft_ms=900.0, total_ms=800.0), base=tmp_path)
    append_sidecar(sidecar_record("t", 3, None, "error", started_at=0, ttft_ms=-1.0, total_ms=-5.0, events=[[-3.0, "stop", 0]]), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["turn"].tolist() == [0, 1, 2, 3]
    assert df["ttft"].isna().all()
    assert df["latency"].tolist()[:2] == [pytest.approx(0.999), 0.8]  # a negative total falls back to the trace's times
    assert np.isnan(df["latency"][2]) and np.isnan(df["latency"][3])  # answered "before" the question; nothing valid
    assert df["started"][1] == pd.Timestamp(T0 + 2000, unit="ms", tz="UTC")  # started_at -1000 is no time
    assert df["started"].isna().tolist() == [False, False, False, True]
    assert (df["started"].dropna() > pd.Timestamp("2000-01-01", tz="UTC")).all()
    events = no_warnings_load(traces.load_events, tmp_path)
    assert events["t"].isna().all() and events["started"].isna().all()


def test_repeated_sidecar_lines_count_once(tmp_path: Path) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 1000)])
    ok = sidecar_record("t", 0, 1, started_at=T0 + 1, ttft_ms=10.0, total_ms=900.0, events=[[10.0, "text.delta", 1], [900.0, "stop", 0]])
    fail = sidecar_record("t", 0, None, "error", started_at=T0 + 0.5, total_ms=3.0, events=[[3.0, "stop", 0]])
    for rec in (fail, fail, ok, ok):
        append_sidecar(rec, base=tmp_path)
    append_sidecar(fail | {"trace_id": "f"}, base=tmp_path)
    append_sidecar(fail | {"trace_id": "f"}, base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["trace_id"].tolist() == ["f", "t", "t"]
    assert df["status"].astype(str).tolist() == ["error", "error", "complete"]
    assert traces.summary(df, by="trace_id")["error_rate"].tolist() == [1.0, 0.5]
    events = no_warnings_load(traces.load_events, tmp_path)
    assert events.groupby("trace_id").size().to_dict() == {"f": 1, "t": 3}


def test_rerun_into_the_same_cache_keeps_the_latest_run(tmp_path: Path) -> None:
    def ev(ms: float) -> list[list[Any]]:
        return [[ms / 2, "text.delta", 1], [ms, "stop", 0]]

    # first run: turn 0, a failed then a successful turn 1
    run1 = [
        sidecar_record("nb/chat", 0, 1, started_at=T0, total_ms=100.0, events=ev(100.0)),
        sidecar_record("nb/chat", 1, None, "error", started_at=T0 + 1000, total_ms=10.0, events=ev(10.0)),
        sidecar_record("nb/chat", 1, 3, started_at=T0 + 2000, total_ms=100.0, events=ev(100.0)),
    ]
    # second run overwrites the trace file: turn 0 fails once, then succeeds; that is all
    run2 = [
        sidecar_record("nb/chat", 0, None, "error", started_at=T0 + 60_000, total_ms=20.0, events=ev(20.0)),
        sidecar_record("nb/chat", 0, 1, started_at=T0 + 61_000, total_ms=200.0, events=ev(200.0)),
    ]
    for rec in run1 + run2:
        append_sidecar(rec, base=tmp_path)
    save(tmp_path, "nb/chat", [user("q", T0 + 60_999), answer("a", T0 + 61_200)])
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["status"].astype(str).tolist() == ["error", "complete"]
    assert df["latency"].tolist() == [0.02, 0.2]
    assert traces.summary(df)["error_rate"].tolist() == [0.5]
    events = no_warnings_load(traces.load_events, tmp_path)
    assert len(events) == 4 and (events["started"] >= pd.Timestamp(T0 + 60_000, unit="ms", tz="UTC")).all()
    # a run that is still going on: one run, nothing dropped
    for rec in run1:
        append_sidecar(rec | {"trace_id": "nb/other"}, base=tmp_path)
    assert len(traces.load_events(tmp_path / "nb" / "other.timing.jsonl")) == 6
    # turn 1 answered again (the history went back one turn): turn 0 keeps its timing
    for rec in run1 + [sidecar_record("nb/again", 1, 3, started_at=T0 + 9000, total_ms=300.0, events=ev(300.0))]:
        append_sidecar(rec | {"trace_id": "nb/again"}, base=tmp_path)
    save(tmp_path, "nb/again", [user("q", T0 - 1), answer("a", T0 + 100), user("q", T0 + 8999), answer("b", T0 + 9300)])
    again = no_warnings_load(traces.load_turns, tmp_path / "nb" / "again.json")
    assert again["source"].astype(str).tolist() == ["trace+sidecar", "trace+sidecar"]
    assert again["latency"].tolist() == [0.1, 0.3] and again["status"].astype(str).tolist() == ["complete"] * 2


def test_a_rerun_whose_first_turn_failed_keeps_the_run_the_trace_file_holds(tmp_path: Path) -> None:
    # the Tracer writes no trace file for a failed turn: after a re-run whose first turn failed, the
    # file still holds the run before, whose turns keep their timing; the failure shows as its own row
    def ev(ms: float) -> list[list[Any]]:
        return [[ms / 2, "text.delta", 1], [ms, "stop", 0]]

    run1 = [sidecar_record("nb/chat", k, 2 * k + 1, started_at=T0 + 1000 * k, total_ms=100.0 + k, events=ev(100.0 + k))
            for k in range(3)]
    for rec in run1 + [sidecar_record("nb/chat", 0, None, "error", started_at=T0 + 60_000, total_ms=20.0, events=ev(20.0))]:
        append_sidecar(rec, base=tmp_path)
    save(tmp_path, "nb/chat", [m for k in range(3) for m in (user("q", T0 + 1000 * k - 1), answer("a", T0 + 1000 * k + 100))])
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["status"].astype(str).tolist() == ["error", "complete", "complete", "complete"]
    assert df["source"].astype(str).tolist() == ["sidecar"] + ["trace+sidecar"] * 3
    assert df["latency"].tolist() == [0.02, 0.1, 0.101, 0.102]
    # a turn answered again whose first new attempt failed: the failure is the new run's, the old
    # answer of that turn is dropped
    for rec in run1 + [sidecar_record("nb/again", 1, None, "error", started_at=T0 + 9000, total_ms=30.0, events=ev(30.0)),
                       sidecar_record("nb/again", 1, 3, started_at=T0 + 9500, total_ms=300.0, events=ev(300.0))]:
        append_sidecar(rec | {"trace_id": "nb/again"}, base=tmp_path)
    save(tmp_path, "nb/again", [user("q", T0 - 1), answer("a", T0 + 100), user("q", T0 + 9499), answer("b", T0 + 9800)])
    again = no_warnings_load(traces.load_turns, tmp_path / "nb" / "again.json")
    assert again["status"].astype(str).tolist() == ["complete", "error", "complete"]
    assert again["latency"].tolist() == [0.1, 0.03, 0.3]


def test_damaged_sidecars_are_reported_and_their_good_lines_used(tmp_path: Path) -> None:
    for k, tid in enumerate(("bom", "middle", "array", "noise", "tail")):
        save(tmp_path, tid, [user("q", T0), answer(tid, T0 + 1000 + k), user("q", T0 + 2000), answer(tid, T0 + 3000 + k)])
    line0 = json.dumps(sidecar_record("bom", 0, 1, started_at=T0 + 1, ttft_ms=5.0, total_ms=999.0))
    (tmp_path / "bom.timing.jsonl").write_bytes(b"\xef\xbb\xbf" + line0.encode() + b"\n")
    rec = lambda tid, k: json.dumps(sidecar_record(tid, k, 2 * k + 1, started_at=T0 + 2000 * k + 1, ttft_ms=5.0, total_ms=999.0))  # noqa: E731
    (tmp_path / "middle.timing.jsonl").write_text(rec("middle", 0) + "\n" + '{"trace_id": "middle", "tu\n' + rec("middle", 1) + "\n")
    (tmp_path / "array.timing.jsonl").write_text(rec("array", 0) + "\n[1, 2]\n" + rec("array", 1) + "\n")
    (tmp_path / "noise.timing.jsonl").write_bytes(bytes((i * 97 + 13) % 256 for i in range(3000)))
    (tmp_path / "tail.timing.jsonl").write_text(rec("tail", 0) + "\n" + rec("tail", 1)[:30])  # being written: normal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = traces.load_turns(tmp_path)
    ours = [w for w in caught if issubclass(w.category, traces.TraceLoadWarning)]
    assert len(ours) == 1 and "3 damaged timing sidecars" in str(ours[0].message)
    assert "skipped" not in str(ours[0].message).split(";")[0].split(":")[1]  # no trace file was skipped
    reported = {Path(s["path"]).name: s["reason"] for s in df.attrs["skipped"]}
    assert set(reported) == {"middle.timing.jsonl", "array.timing.jsonl", "noise.timing.jsonl"}
    assert all(r.startswith("damaged sidecar") for r in reported.values())
    assert df.attrs["n_files"] == 5
    timed = df.groupby("trace_id")["ttft"].count().to_dict()
    assert timed == {"array": 2, "bom": 1, "middle": 2, "noise": 0, "tail": 1}


def test_a_sidecar_record_without_a_turn_is_a_damaged_line_in_every_loader(tmp_path: Path) -> None:
    """A failed turn's record whose ``turn`` is no integer (null, text) was left out of the turns
    frame without a word while the events frame kept its events: it is a damaged line for all."""
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 1000)])
    good = sidecar_record("t", 0, 1, started_at=T0 + 1, total_ms=900.0, events=[[5.0, "text.delta", 1], [900.0, "stop", 0]])
    lines = [good] + [sidecar_record("t", 1, None, "error", started_at=T0 + 2000, total_ms=10.0,
                                     events=[[10.0, "stop", 0]]) | {"turn": bad} for bad in (None, "1", 1.5, True)]
    (tmp_path / "t.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    frames = {}
    for name, load in (("turns", traces.load_turns), ("events", traces.load_events)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            frames[name] = load(tmp_path)
        assert [(Path(s["path"]).name, s["reason"]) for s in frames[name].attrs["skipped"]] == [
            ("t.timing.jsonl", "damaged sidecar: 4 unreadable lines (1 records read)")]
    assert frames["turns"]["status"].astype(str).tolist() == ["complete"]
    assert frames["events"]["turn"].tolist() == [0, 0]
    assert len(read_sidecar(tmp_path / "t.timing.jsonl")) == 1


def test_summary_of_an_empty_frame_has_the_usual_columns(tmp_path: Path) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 1000)])
    full = traces.summary(traces.load_turns(tmp_path))
    for by in ("model", None, ["model", "status"]):
        empty = traces.summary(traces.load_turns(tmp_path, models="nope"), by=by)
        assert list(empty.columns) == list(full.columns) and len(empty) == (1 if by is None else 0)
        assert empty.dtypes.to_dict() == full.dtypes.to_dict()


def test_plots_of_a_frame_read_back_from_csv_or_of_objects_draw_what_the_frame_s_draw(tmp_path: Path) -> None:
    """A turns frame saved as CSV and read back holds its times as ISO texts; one cast to object holds
    NA among its counts: both raised TypeError from inside pandas, where they draw the same bins.
    Times held as numbers (JSON's epoch) have no unit to read them in: a clear error."""
    import matplotlib

    matplotlib.use("Agg")
    save(tmp_path, "a", rich_history())
    save(tmp_path, "b", [user("q", T0 + 50_000), answer("a", T0 + 53_000)], model="gemini-4-argon")
    append_sidecar(sidecar_record("a", 0, 1, started_at=T0 + 1, ttft_ms=300.0, total_ms=1400.0), base=tmp_path)
    df = no_warnings_load(traces.load_turns, tmp_path)

    def drawn(frame: pd.DataFrame) -> list[list[float]]:
        fig = traces.plot_usage_over_time(frame, freq="10s")
        boxes = traces.plot_latency(frame, by=None).axes
        return ([list(line.get_ydata()) for ax in fig.axes for line in ax.get_lines()]
                + [list(line.get_xdata()) for ax in boxes for line in ax.get_lines()])

    expected = drawn(df)
    for frame in (pd.read_csv(io.StringIO(df.to_csv(index=False))), df.astype(object)):
        assert drawn(frame) == expected
    with pytest.raises(OptionError, match="'started' holds numbers, not times"):
        traces.plot_usage_over_time(df.assign(started=np.arange(len(df)) * 1000))


def test_summary_of_a_frame_read_back_from_parquet_or_json_equals_the_frame_s(tmp_path: Path) -> None:
    """``to_parquet(turns)`` read back with pandas holds numpy arrays in ``tool_names`` (JSON lists),
    which ``by="tool_names"`` could not group (TypeError: unhashable); a cost read as text was summed
    as texts joined (ValueError)."""
    with_tools = {"tools": [{"name": "get_weather", "description": "", "parameters": {"type": "object"}}]}
    save(tmp_path, "a", [user("q", T0), answer("a", T0 + 1000)], config=with_tools)
    save(tmp_path, "b", [user("q", T0 + 5000), answer("b", T0 + 6000)])
    turns = traces.load_turns(tmp_path, prices={"gemini-3.8-flash": {"prompt_tokens": 1.0, "response_tokens": 2.0}})
    traces.to_parquet(turns, tmp_path / "t.parquet")
    expected = traces.summary(turns, by="tool_names")
    read_back = pd.read_parquet(tmp_path / "t.parquet")
    as_json = pd.read_json(io.StringIO(turns.to_json(orient="records", date_format="iso")))
    for df in (read_back, as_json):
        pd.testing.assert_frame_equal(traces.summary(df, by="tool_names"), expected)
    texts = turns.assign(cost=turns["cost"].astype(str))
    pd.testing.assert_frame_equal(traces.summary(texts), traces.summary(turns))


def test_every_kind_sorts_its_categories_whatever_order_they_are_met_in(tmp_path: Path) -> None:
    """The items and events give their categories sorted, as the turns do (and as a dataset's query
    reads them back), not in the order the traces happened to be read."""
    events = [[200.0, "text.delta", 1], [220.0, "text.done", 2], [1000.0, "stop", 0]]
    for k, (tid, model, client, status) in enumerate((("a", "zeta-9", "zai-official", "error"),
                                                      ("b", "alpha-1", "anthropic-official", "complete"))):
        at = T0 + 60_000 * k  # (two conversations, not one repeated)
        save(tmp_path, tid, [user(f"q {tid}", at), answer(f"a {tid}", at + 1000)], model=model)
        append_sidecar(sidecar_record(tid, 0, 1, status, model=model, client_type=client, started_at=at + 2.0,
                                      total_ms=1000.0, events=events), base=tmp_path)
    for load in (traces.load_turns, traces.load_items, traces.load_events):
        df = no_warnings_load(load, tmp_path)
        cats = {c: df[c].cat.categories for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)}
        assert "model" in cats and (load is traces.load_items or "status" in cats), load.__name__
        for col, categories in cats.items():
            if col != "source":  # (the turns' fixed three, in their own order)
                assert list(categories) == sorted(categories), (load.__name__, col, list(categories))
                # (a column of no value, comparison here: no category, of text all the same)
                assert categories.dtype == df["model"].cat.categories.dtype, (load.__name__, col)
        assert list(cats["model"]) == ["alpha-1", "zeta-9"]


def assert_same_dtypes(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """The columns and dtypes of ``want``; a category column's categories of text (``.str`` works)."""
    assert list(got.columns) == list(want.columns)
    for col in want.columns:
        dtype = got[col].dtype
        if isinstance(want[col].dtype, pd.CategoricalDtype) and len(want[col].cat.categories):
            assert isinstance(dtype, pd.CategoricalDtype), col
            assert dtype.categories.dtype == want[col].cat.categories.dtype, (col, dtype.categories.dtype)
            assert got[col].str.startswith("x").sum() == 0, col
        else:
            assert dtype == want[col].dtype, (col, dtype, want[col].dtype)


def test_an_empty_frame_of_every_kind_has_the_dtypes_of_a_loaded_one(tmp_path: Path) -> None:
    """An empty folder, a folder whose only trace is damaged, and filters matching nothing give the
    columns and dtypes of a frame of rows: category columns with categories of text, never float64."""
    full_dir, empty_dir, damaged_dir = tmp_path / "full", tmp_path / "empty", tmp_path / "damaged"
    save(full_dir, "t", [user("q", T0), answer("a", T0 + 1000)])
    append_sidecar(sidecar_record("t", 0, 1, started_at=T0 + 2.0, total_ms=1000.0,
                                  events=[[200.0, "text.delta", 1], [1000.0, "stop", 0]]), base=full_dir)
    empty_dir.mkdir()
    damaged_dir.mkdir()
    (damaged_dir / "a.json").write_text('{"history": [\n')
    for load in (traces.load_turns, traces.load_items, traces.load_events):
        want = no_warnings_load(load, full_dir)
        assert len(want) and all(len(want[c].cat.categories) for c in ("model", "status" if load is not traces.load_items
                                                                       else "role"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            damaged = load(damaged_dir)
        assert damaged.attrs["n_skipped"] == 1
        for got in (load(empty_dir), damaged, load(full_dir, models="nope"), load(full_dir, since="2099-01-01")):
            assert len(got) == 0, load.__name__
            assert_same_dtypes(got, want)
            assert got[got["model"].str.startswith("gemini")].empty


def test_parquet_category_columns_are_always_strings(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    save(tmp_path / "a", "t", [user("q", T0), answer("a", T0 + 1000)])  # no sidecar: client_type all NA
    append_sidecar(sidecar_record("f", 0, None, "error", started_at=T0), base=tmp_path / "b")  # sidecar only: no finish_reason
    schemas = []
    for sub in ("a", "b"):
        df = no_warnings_load(traces.load_turns, tmp_path / sub)
        out = traces.to_parquet(df, tmp_path / f"{sub}.parquet")
        schemas.append(pq.read_schema(out).remove_metadata())
        back = pd.read_parquet(out)
        for col in ("client_type", "finish_reason", "model", "status"):
            assert isinstance(back[col].dtype, pd.CategoricalDtype), (sub, col)
    for col in ("client_type", "finish_reason", "model", "status", "source"):
        assert schemas[0].field(col).type == schemas[1].field(col).type, col
        assert str(schemas[0].field(col).type.value_type) == "string", col


def test_directory_links_are_not_followed_into_loops(tmp_path: Path) -> None:
    import os

    save(tmp_path, "a/one", [user("q", T0), answer("a", T0 + 1000)])
    append_sidecar(sidecar_record("a/one", 1, None, "error", started_at=T0 + 2000), base=tmp_path)
    (tmp_path / "a" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "gone.json").symlink_to(tmp_path / "nowhere.json")
    reads: list[str] = []
    real_open = os.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:  # the trace store opens files with os.open
        if str(file).endswith((".json", ".jsonl")):
            reads.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    os.open = counting_open
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = traces.load_turns(tmp_path)
    finally:
        os.open = real_open
    assert len(reads) == 2  # the trace and its sidecar, once each (the broken link is refused from its stat)
    assert df["trace_id"].tolist() == ["a/one", "a/one"] and df.attrs["duplicates"] == 0
    assert df.attrs["n_files"] == 1
    assert [s["reason"].split(":")[0] for s in df.attrs["skipped"]] == ["broken symbolic link"]
    assert [str(w.message).count("broken symbolic link") for w in caught] == [1]
    assert sorted(reads) == sorted({*reads}), "a file was read more than once"


def test_filters_apply_after_de_duplication(tmp_path: Path) -> None:
    # the same turn in two files; the copy with a sidecar (started 5 s after the user's message) wins
    h = [user("q", T0), answer("a", T0 + 9000)]
    save(tmp_path, "a/1", h)
    save(tmp_path, "b/1", h)
    append_sidecar(sidecar_record("b/1", 0, 1, started_at=T0 + 5000, total_ms=4000.0), base=tmp_path)
    cut = pd.Timestamp(T0 + 1000, unit="ms", tz="UTC")
    assert no_warnings_load(traces.load_turns, tmp_path)["trace_id"].tolist() == ["b/1"]
    assert len(traces.load_turns(tmp_path, until=cut)) == 0
    since = traces.load_turns(tmp_path, since=cut)
    assert since["trace_id"].tolist() == ["b/1"] and since.attrs["duplicates"] == 1


def test_directories_matched_by_the_pattern_are_ignored(tmp_path: Path) -> None:
    save(tmp_path, "agent/one", [user("q", T0), answer("a", T0 + 1000)])
    (tmp_path / "odd.json").mkdir()
    df = no_warnings_load(traces.load_turns, tmp_path, pattern="**/*")
    assert df["trace_id"].tolist() == ["agent/one"] and df.attrs["skipped"] == []
    assert no_warnings_load(traces.load_turns, tmp_path).attrs["skipped"] == []


# --------------------------------------------------------------------------- the loader never stops


def load_in_child(path: Path | str, code: str = "traces.load_turns(p, progress=False)", timeout: float = 60.0) -> dict[str, Any]:
    """Run a load in a fresh process with a time limit (a hang fails the test instead of the run)
    and a 2 GiB address-space limit; returns rows, skipped entries and n_files."""
    script = (
        "import json, resource, sys, warnings\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "warnings.simplefilter('ignore')\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from mmsp_notebook import traces\n"
        "p = sys.argv[1]\n"
        f"df = {code}\n"
        "print(json.dumps({'rows': len(df), 'skipped': df.attrs['skipped'], 'n_files': df.attrs['n_files'],"
        " 'trace_ids': sorted(set(df['trace_id'])) if 'trace_id' in df else []}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(params=["fast", "plain"])
def decode_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the typed decoding of load_turns (msgspec) and without it (dicts)."""
    if request.param == "plain":
        from mmsp_notebook.traces import _load

        monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    return str(request.param)


def test_item_types_that_are_not_strings_are_unknown_items(tmp_path: Path, decode_path: str) -> None:
    odd = answer("a", T0 + 1000)
    odd["content_items"] += [{"type": ["text.done"], "text": "xx"}, {"type": {"kind": "text"}}, {"type": 5}, {"text": "no type"}]
    write_json(tmp_path / "odd.json", {"history": [user("q", T0), odd], "config": {"model": "demo"}})
    df = no_warnings_load(traces.load_turns, tmp_path)
    row = df.iloc[0]
    assert (row["n_items"], row["n_text"], row["text_chars"]) == (5, 1, 1)
    items = no_warnings_load(traces.load_items, tmp_path)
    assert [t if isinstance(t, str) else None for t in items["type"]][1:] == ["text.done", "['text.done']", "{'kind': 'text'}", "5", None]


def test_lone_surrogates_in_config_tool_names_export(tmp_path: Path, decode_path: str) -> None:
    tools = [{"name": "get_weather\ud800"}, {"name": "run_\udcffsql"}, "raw\ud83d"]
    write_json(tmp_path / "t.json", {"history": [user("q", T0), answer("a", T0 + 1000)],
                                     "config": {"model": "demo", "tools": tools, "thinking_level": "hi\ud800"}})
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["tool_names"][0] == ("get_weather\ufffd", "run_\ufffdsql", "raw\ufffd")
    assert df["thinking_level"][0] == "hi\ufffd"
    table = traces.to_arrow(df)
    assert table.column("tool_names").to_pylist() == [["get_weather\ufffd", "run_\ufffdsql", "raw\ufffd"]]
    out = traces.to_parquet(df, tmp_path / "t.parquet")
    assert pd.read_parquet(out)["tool_names"][0].tolist() == ["get_weather\ufffd", "run_\ufffdsql", "raw\ufffd"]


@pytest.mark.serial  # the load must take under 30 s
def test_two_symlink_loops_in_one_directory_load_at_once(tmp_path: Path) -> None:
    import os

    root = tmp_path / "t"
    save(root, "sub/one", [user("q", T0), answer("a", T0 + 1000)])
    save(root, "two", [user("q", T0 + 5), answer("b", T0 + 2000)])
    os.symlink("..", root / "sub" / "loop")  # ln -s .. t/sub/loop
    os.symlink(".", root / "self")  # ln -s . t/self
    os.symlink("self", root / "selfish")
    os.symlink("knot.json", root / "knot.json")  # a link to itself (ELOOP)
    started = time.monotonic()
    got = load_in_child(root, timeout=60)
    assert time.monotonic() - started < 30
    assert got["trace_ids"] == ["sub/one", "two"] and got["rows"] == 2
    assert [(Path(s["path"]).name, s["reason"].split(":")[0]) for s in got["skipped"]] == [("knot.json", "unreadable")]
    # each file once, under its shortest path, also through a link into another tree
    other = tmp_path / "other"
    save(other, "three", [user("q", T0 + 9), answer("c", T0 + 3000)])
    os.symlink(other, root / "sub" / "elsewhere")
    with pytest.warns(traces.TraceLoadWarning, match="1 unreadable"):
        df = traces.load_turns(root)
    assert sorted(df["trace_id"]) == ["sub/elsewhere/three", "sub/one", "two"]


@pytest.mark.skipif(not hasattr(os_module := __import__("os"), "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_devices_and_huge_files_never_block_and_are_named(tmp_path: Path) -> None:
    import os

    from mmsp_notebook.core import store

    save(tmp_path, "good", [user("q", T0), answer("a", T0 + 1000)])
    save(tmp_path, "timed", [user("q", T0), answer("b", T0 + 1001)])
    os.mkfifo(tmp_path / "x.json")
    os.mkfifo(tmp_path / "x.timing.jsonl")
    os.mkfifo(tmp_path / "timed.timing.jsonl")  # the sidecar of a good trace
    os.symlink("/dev/zero", tmp_path / "zero.json")
    os.symlink("/dev/urandom", tmp_path / "urandom.timing.jsonl")
    (tmp_path / "big.json").write_bytes(json.dumps({"history": [user("q" * 5000, T0)], "config": {}}).encode())
    got = load_in_child(tmp_path, "traces.load_turns(p, progress=False, max_size=4000)", timeout=60)
    assert got["trace_ids"] == ["good", "timed"] and got["n_files"] == 2
    reasons = {Path(s["path"]).name: s["reason"] for s in got["skipped"]}
    assert reasons == {
        "big.json": f"too large: {(tmp_path / 'big.json').stat().st_size:,} bytes (max_size is 4,000)",
        "timed.timing.jsonl": "sidecar not read: not a regular file",
        "urandom.timing.jsonl": "not a regular file",
        "x.json": "not a regular file",
        "zero.json": "not a regular file",
    }
    assert store.MAX_FILE_SIZE == 256 * 2**20 and "256 MiB" in (store.__doc__ or "")
    with pytest.warns(traces.TraceLoadWarning, match=r"skipped 4 of 6 trace files \(3 not a regular file; 1 too large\); 1 timing sidecars not read"):
        df = traces.load_turns(tmp_path, max_size=4000)
    assert len(df) == 2
    assert len(traces.load_turns(tmp_path / "big.json")) == 0  # under the default limit it is a trace
    with pytest.raises(traces_errors().OptionError):
        traces.load_turns(tmp_path, max_size=-1)


def traces_errors() -> Any:
    import mmsp_notebook

    return mmsp_notebook


def test_a_device_given_directly_is_named_for_what_it_is(tmp_path: Path) -> None:
    with pytest.warns(traces.TraceLoadWarning, match="not a regular file"):
        df = traces.load_turns("/dev/null")
    assert df.attrs["skipped"] == [{"path": "/dev/null", "reason": "not a regular file"}] and len(df) == 0
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(FileNotFoundError, match="broken symbolic link"):
        traces.load_turns(tmp_path / "dangling.json")


def test_patterns_follow_glob_rules(tmp_path: Path) -> None:
    for tid in ("top", "a/mid", "a/b/deep", ".hidden/h", "a/.dot", "x.txt/inner"):
        save(tmp_path, tid, [user("q", T0), answer(tid, T0 + 1000)])
    (tmp_path / "notes.txt").write_text("x")
    ids = lambda pattern: sorted(set(traces.load_turns(tmp_path, pattern=pattern)["trace_id"]))  # noqa: E731
    assert ids("**/*.json") == ["a/b/deep", "a/mid", "top", "x.txt/inner"]
    assert ids("*.json") == ["top"]
    assert ids("*/*.json") == ["a/mid", "x.txt/inner"]
    assert ids("a/**/*.json") == ["a/b/deep", "a/mid"]
    assert ids(".hidden/*.json") == [".hidden/h"]
    assert ids("a/.*.json") == ["a/.dot"]
    assert ids("[at]*.json") == ["top"] and ids("?op.json") == ["top"]
    for bad in ("../*.json", "/abs/*.json", ""):
        with pytest.raises(ValueError, match="relative to the directory"):
            traces.load_turns(tmp_path, pattern=bad)


def test_a_pattern_matching_nothing_where_subfolders_hold_traces_warns_with_the_recursive_one(tmp_path: Path) -> None:
    for tid in ("exp/a", "exp/deep/b"):
        save(tmp_path, tid, [user("q", T0), answer(tid, T0 + 1000)])
    with pytest.warns(traces.TraceLoadWarning, match=r"pattern '\*\.json' matched no trace file, but there are "
                                                     r"some in subfolders: pass pattern='\*\*/\*\.json'") as caught:
        df = traces.load_turns(tmp_path, pattern="*.json")
    assert len(df) == 0 and caught[0].filename == __file__  # (it points at the caller's line)
    with pytest.warns(traces.TraceLoadWarning, match=r"pass pattern='\*\*/b\.json'"):
        traces.load_items(tmp_path, pattern="b.json")
    # a pattern that matched a trace, or nothing anywhere, stays quiet
    assert len(no_warnings_load(traces.load_turns, tmp_path / "exp", pattern="*.json")) == 1
    assert len(no_warnings_load(traces.load_turns, tmp_path, pattern="*.jsonl")) == 0
    (tmp_path / "empty").mkdir()
    assert len(no_warnings_load(traces.load_turns, tmp_path / "empty", pattern="*.json")) == 0


def test_bytes_that_are_not_utf8_become_replacement_characters(tmp_path: Path, decode_path: str) -> None:
    body = json.dumps({"history": [user("q", T0), answer("caf\u00e9 ok", T0 + 1000)], "config": {"model": "demo"}}).encode()
    body = body.replace(b"caf\\u00e9", b"caf\xe9")  # Latin-1 in a UTF-8 file
    (tmp_path / "latin.json").write_bytes(body)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["text_chars"].tolist() == [len("caf\ufffd ok")]
    assert no_warnings_load(traces.load_items, tmp_path)["text"].tolist()[1] == "caf\ufffd ok"


def test_typed_decoding_gives_the_same_frame_as_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import gen_corpus

    from mmsp_notebook.traces import _fast, _load

    for shape, files in (("mixed", 30), ("agent", 3), ("tiny", 40), ("large", 3), ("images", 3)):
        gen_corpus.generate(tmp_path / shape, files=files, turns=4, seed=3, shape=shape)
    save(tmp_path / "mixed", "rich", rich_history())
    write_json(tmp_path / "mixed" / "odd.json", {"history": [{"role": "system", "content_items": []}, user("q", T0),
                                                             answer("a", T0 + 5)], "config": [1]})
    decoded = [_fast.decode_trace(p.read_bytes()) for p in sorted(tmp_path.rglob("*.json"))]
    assert sum(d is not None for d in decoded) >= len(decoded) - 2  # the rich trace (bytes) and the system role
    fast = no_warnings_load(traces.load_turns, tmp_path)
    monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    plain = no_warnings_load(traces.load_turns, tmp_path)
    pd.testing.assert_frame_equal(fast, plain)
    assert len(fast) > 300 and fast["n_tool_calls"].sum() > 50 and fast["n_images"].sum() > 0


@pytest.mark.parametrize(("bucket", "want"), [(5.0, 5), (2.5, None), (True, None), ("5", None), (2**63, None), (2**64, None),
                                             (-(2**63), None), (-(2**63) + 1, None), (-1, None), (2**63 - 1, 2**63 - 1),
                                             (0, 0), (None, None)])
def test_usage_buckets_the_typed_decoding_refuses_give_the_plain_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       bucket: Any, want: int | None) -> None:
    """A usage bucket is decoded as an int64 >= 0 (or null); any other value (an integral float, a
    bool, a string, a negative count, an integer beyond int64 or the missing-value sentinel
    itself) sends the file the plain way, which coerces it: the frame is the same either way."""
    from mmsp_notebook.traces import _fast, _load

    usage = {"cached_tokens": bucket, "prompt_tokens": 10, "thoughts_tokens": bucket, "response_tokens": 5}
    raw = write_json(tmp_path / "u.json", {"history": [user("q", T0), answer("a", T0 + 1000, usage)],
                                           "config": {"model": "demo"}}).read_bytes()
    typed = _fast.decode_trace(raw)
    assert (typed is not None) == (bucket is None or (bucket.__class__ is int and 0 <= bucket < 2**63))
    fast = no_warnings_load(traces.load_turns, tmp_path)
    monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    plain = no_warnings_load(traces.load_turns, tmp_path)
    pd.testing.assert_frame_equal(fast, plain)
    for column in ("cached_tokens", "thoughts_tokens"):
        got = fast[column][0]
        assert got is pd.NA if want is None else got == want


@pytest.mark.parametrize(("field", "value", "typed"), [
    ("temperature", 1, True), ("temperature", -0.0, True), ("temperature", 10**30, True), ("temperature", True, False),
    ("temperature", "0.2", False), ("max_tokens", 512, True), ("max_tokens", 512.0, False), ("max_tokens", True, False),
    ("max_tokens", 2**63, False), ("thinking_level", "", True), ("thinking_level", 3, False), ("thinking_level", ["a"], False),
    ("model", "", True), ("model", 7, False), ("model", None, True),
])
def test_config_values_the_typed_decoding_refuses_give_the_plain_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       field: str, value: Any, typed: bool) -> None:
    """The config's scalars are decoded as the frame keeps them (a string model and thinking level,
    a float temperature, an int64 max_tokens); another value sends the file the plain way, which
    coerces it: the frame is the same either way."""
    from mmsp_notebook.traces import _fast, _load

    config = {"model": "demo", "temperature": 0.2, "max_tokens": 100, "thinking_level": "low", field: value}
    raw = write_json(tmp_path / "c.json", {"history": [user("q", T0), answer("a", T0 + 1000)], "config": config}).read_bytes()
    assert (_fast.decode_trace(raw) is not None) == typed
    fast = no_warnings_load(traces.load_turns, tmp_path)
    monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    plain = no_warnings_load(traces.load_turns, tmp_path)
    pd.testing.assert_frame_equal(fast, plain)


def _image_trace(payload: str, key: str = "image_url", text: str = "a", pad: int = 0) -> dict[str, Any]:
    url = "data:image/png;base64," + payload
    first = {"role": "user", "content_items": [{"type": "text.done", "text": "x" * pad}, {"type": "image_url.done", key: url}],
             "created_at": T0}
    later = {"role": "user", "content_items": [{"type": "image_url.done", key: url}, {"type": "text.done", "text": "and?"}],
             "created_at": T0 + 2000}
    return {"history": [first, answer(text, T0 + 1000), later, answer(url, T0 + 3000)], "config": {"model": "demo"}}


B64 = "iVBORw0KGgo" * 400  # 4,400 characters of base64 text


@pytest.mark.parametrize(("case", "cut"), [
    ("plain", True), ("blanks around the colon", True), ("short", False), ("escaped slashes", False), ("another key", False),
    ("late", False), ("control character", False), ("unterminated", False), ("semicolon outside strings", True),
])
def test_data_urls_cut_before_decoding_give_the_plain_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str,
                                                           cut: bool) -> None:
    """The base64 text of a user's image data URL is cut out of the bytes before the typed
    decoding (the frame uses nothing of it); an assistant text that is a data URL keeps its
    length; anything that would not be a plain JSON string's content is left whole, and a file
    that is not JSON stays so."""
    from mmsp_notebook.traces import _fast, _load

    payload = "iVBOR" if case == "short" else B64
    data = _image_trace(payload, key="url" if case == "another key" else "image_url", pad=20_000 if case == "late" else 0)
    raw = json.dumps(data).encode()
    if case == "blanks around the colon":
        raw = raw.replace(b'"image_url": "', b'"image_url" :\n  "')
    elif case == "escaped slashes":
        raw = raw.replace(b"iVBORw0KGgo", b"iVBOR\\/0KGgo")
    elif case == "control character":
        raw = raw.replace(b"0KGgoiVBOR", b"0KGgo\x01iVBOR", 1)
    elif case == "unterminated":
        raw = raw[: raw.index(b"iVBOR") + 2000]  # in the first data URL
    elif case == "semicolon outside strings":
        raw = raw.replace(b'"created_at": %d' % T0, b'"created_at"; %d' % T0, 1)
    (tmp_path / "t.json").write_bytes(raw)
    assert (len(_fast._without_payloads(raw)) < len(raw) - 8000) == cut
    fast = _fast.decode_trace(raw)
    got = traces.load_turns(tmp_path, progress=False)
    monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    plain = traces.load_turns(tmp_path, progress=False)
    pd.testing.assert_frame_equal(got, plain)
    assert got.attrs["skipped"] == plain.attrs["skipped"]
    if case in ("plain", "blanks around the colon", "late", "escaped slashes", "short", "another key"):
        assert fast is not None
        assert got["text_chars"].tolist() == [1, len("data:image/png;base64," + payload)]
    elif case in ("control character", "unterminated", "semicolon outside strings"):
        assert fast is None and len(got) == 0 and len(plain.attrs["skipped"]) == 1


TOOL_RESULT_TEXTS = [
    "error: RuntimeError: down", "ERROR: shouting", "  error: after blanks", "\n\terror: after an escaped newline",
    "\u00a0error: after a no-break space", "\u2003Error: after an em space", "err\u006fr: spelled with an escape",
    "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: bad", "error", "errors: not one",
    "The error: not at the start", "Tomorrow", "everything fine", "", "e", 42, None, ["error: in a list"],
    "\u00e9rror: not ASCII", "Traceback (most recent call first)", "x" * 200 + "error:",
    # an escape right after the words, inside them, or after other words (decided from the bytes before it)
    "error:\nat the first line end", "Traceback (most recent call last)\n  File \"x\"\nKeyError: k", "error\n: split",
    "Err\tor: a tab inside", "Trace\nback (most recent call last)", "everything \"quoted\"", "Tests:\n3 passed",
    'ERROR:"quoted"',
]


def test_tool_errors_are_counted_per_turn_the_same_from_bytes_and_from_dicts(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``n_tool_errors``: the results answering a turn's tool calls that report an error, by
    :func:`tool_error`'s rule, counted from raw bytes (the typed decoding) exactly as from dicts."""
    from mmsp_notebook.core.store import tool_error
    from mmsp_notebook.traces import _fast, _load

    history = [user("q", T0)]
    for k, text in enumerate(TOOL_RESULT_TEXTS):
        history.append({"role": "assistant", "content_items": [
            {"type": "tool_call.done", "name": "f", "arguments": "{}", "tool_call_id": f"c{k}"}],
            "finish_reason": "tool_call", "created_at": T0 + 10 * k + 1})
        history.append({"role": "user", "content_items": [
            {"type": "tool_result.done", "text": text, "tool_call_id": f"c{k}"},
            {"type": "tool_result", "text": "error: a second one, in the old item name", "tool_call_id": "x"}
            if k == 0 else {"type": "text.done", "text": "error: a prompt is not a tool result"}],
            "created_at": T0 + 10 * k + 2})
    history.append(answer("done", T0 + 1000))  # no calls: a result after it answers none of its calls
    history.append({"role": "user", "content_items": [{"type": "tool_result.done", "text": "error: stray", "tool_call_id": "s"}],
                    "created_at": T0 + 1001})
    history.append(answer("ok", T0 + 1002))
    save(tmp_path, "tools", history)
    path = tmp_path / "tools.json"
    raw = path.read_bytes()
    if b"\\u00a0" in raw:  # written escaped: make one opening blank raw UTF-8 bytes, as other writers do
        raw = raw.replace(b"\\u00a0error", "\u00a0error".encode(), 1)
    raw = raw.replace(b'"err' + b'or: spelled', b'"err\\u006fr: spelled', 1)  # an escape inside the word
    assert b"\xc2\xa0error" in raw and b"err\\u006fr: spelled" in raw
    path.write_bytes(raw)
    expected = [int(tool_error(t) is not None) + (k == 0) for k, t in enumerate(TOOL_RESULT_TEXTS)] + [0, 0]
    assert sum(expected) == 12  # the rule finds what it should (and nothing else)
    assert _fast.decode_trace(path.read_bytes()) is not None  # the typed way is taken
    fast = no_warnings_load(traces.load_turns, tmp_path)
    assert fast["n_tool_errors"].tolist() == expected
    monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    plain = no_warnings_load(traces.load_turns, tmp_path)
    pd.testing.assert_frame_equal(fast, plain)


def test_sources_found_a_directory_at_a_time_are_those_found_at_once(tmp_path: Path) -> None:
    # sync lists a tree one directory at a time (its memory is a directory's entries): the same
    # traces, paired with the same sidecars, as the loaders' listing of the whole tree
    from mmsp_notebook.traces._io import find_sources, iter_sources

    save(tmp_path, "runs/v1.5", [user("q", T0), answer("a", T0 + 100)])  # dotted id, its sidecar by the full id
    append_sidecar(sidecar_record("runs/v1.5", 0, 1, started_at=T0 + 1, ttft_ms=20.0, total_ms=99.0), base=tmp_path)
    for tid in ("a/one", "a/two", "a/b/three", "top", "runs/v2"):
        save(tmp_path, tid, [user("q", T0), answer("a", T0 + 100)])
    append_sidecar(sidecar_record("a/one", 1, None, "error", started_at=T0 + 2000), base=tmp_path)
    append_sidecar(sidecar_record("a/b/failed_only", 0, None, "error", started_at=T0), base=tmp_path)  # no trace file
    (tmp_path / "a" / "notes.txt").write_text("companion")
    (tmp_path / "a" / "b" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / ".hidden").mkdir()
    save(tmp_path, ".hidden/x", [user("q", T0), answer("a", T0 + 100)])
    for pattern in ("**/*.json", "a/**/*.json", "*.json"):
        at_once = find_sources(tmp_path, pattern)[0]
        by_dir = [s for found in iter_sources(str(tmp_path), pattern) for s in found]
        assert sorted(by_dir, key=lambda s: s.trace_id) == at_once, pattern
    assert {s.trace_id: s.sidecar is not None for s in find_sources(tmp_path)[0]} == {
        "a/b/failed_only": True, "a/one": True, "a/two": False, "a/b/three": False, "runs/v1": True, "runs/v2": False, "top": False}


def test_items_data_is_a_string_column_as_the_datasets(tmp_path: Path) -> None:
    """``data`` has the dtype of the other text columns (and of a synced dataset's): base64 text as
    stored, a value that is no string as its JSON text."""
    history = [{"role": "user", "created_at": T0, "content_items": [
        {"type": "inline_data.done", "mime_type": "image/png", "data": "iVBORw0KGgo="},
        {"type": "inline_data.done", "mime_type": "image/png", "data": {"a": [1]}},
        {"type": "inline_data.done", "mime_type": "image/png", "data": 12},
        {"type": "text.done", "text": "q"}]}, answer("a", T0 + 1000)]
    (tmp_path / "t.json").write_text(json.dumps({"config": {"model": "m"}, "history": history}))  # (Tracer takes no such data)
    items = traces.load_items(tmp_path, payloads=True)
    assert items["data"].dtype == items["text"].dtype
    assert items["data"].tolist()[:3] == ["iVBORw0KGgo=", '{"a":[1]}', "12"] and items["data"].isna().tolist()[3:] == [True, True]


def test_a_prompt_sent_to_several_models_stays_in_each_trace(tmp_path: Path) -> None:
    # a comparison: one prompt (one created_at) sent to two models, each traced on its own
    prompt = user("Tell me about rivers", T0)
    save(tmp_path, "cmp/a", [prompt, answer("Rivers flow.", T0 + 900)], model="demo")
    save(tmp_path, "cmp/b", [prompt, answer("Rivers flow!", T0 + 1200)], model="demo+tps=200")
    turns = no_warnings_load(traces.load_turns, tmp_path)
    items = no_warnings_load(traces.load_items, tmp_path)
    assert turns.attrs["duplicates"] == 0 and items.attrs["duplicates"] == 0
    prompts = items[items["role"] == "user"]
    assert prompts["trace_id"].tolist() == ["cmp/a", "cmp/b"]
    assert prompts["model"].astype(str).tolist() == ["demo", "demo+tps=200"]
    # a history repeated in a later file is still counted once
    save(tmp_path, "cmp/a2", [prompt, answer("Rivers flow.", T0 + 900), user("more", T0 + 2000), answer("Deltas.", T0 + 2500)],
         model="demo")
    items = traces.load_items(tmp_path)
    assert items.attrs["duplicates"] == 2
    assert items.groupby("trace_id")["role"].apply(list).to_dict() == {
        "cmp/a": ["user", "assistant"], "cmp/a2": ["user", "assistant"], "cmp/b": ["user", "assistant"]}


def test_arguments_nested_deeper_than_the_encoders_go_load(tmp_path: Path) -> None:
    # orjson reads 1,000 levels of nesting; orjson and Python's recursive encoders cannot write them back
    depth = 500  # {"k": [ ... ]}: 1,000 levels
    args = '{"a":' + '{"k":[' * depth + "1" + "]}" * depth + "}"
    raw = ('{"history":[{"role":"user","content_items":[{"type":"text.done","text":"q"}],"created_at":' + str(T0) + '},'
           '{"role":"assistant","content_items":[{"type":"tool_call.done","name":"f","tool_call_id":"c1","arguments":'
           + args + ',"extra_field":' + args + '}],"usage_metadata":null,"finish_reason":"tool_call","created_at":'
           + str(T0 + 1000) + '}],"config":{"model":"demo"}}')
    path = tmp_path / "deep.json"
    path.write_text(raw)
    items = no_warnings_load(traces.load_items, path, payloads=True)
    call = items[items["type"] == "tool_call.done"].iloc[0]
    assert call["arguments"] == args and call["size"] == len(args)
    assert call["extra"] == '{"extra_field":' + args + "}"
    assert len(no_warnings_load(traces.load_turns, path)) == 1


@pytest.mark.serial  # the plot must take under 20 s
def test_usage_plot_of_turns_spanning_millennia_has_few_bins(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")

    # a foreign producer's stray created_at (year 3000) next to a turn of today
    save(tmp_path, "today", [user("q", T0), answer("a", T0 + 1000)])
    far = 32_503_680_000_000
    save(tmp_path, "stray", [user("q", far), answer("a", far + 1000)])
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert df["started"].notna().all()
    started = time.monotonic()
    fig = traces.plot_usage_over_time(df)
    assert time.monotonic() - started < 20
    assert 2 <= len(fig.axes[1].patches) <= 61  # one bar per bin


def test_items_keep_the_copy_of_a_turn_the_turns_frame_keeps(tmp_path: Path) -> None:
    # the same conversation in two files; the later one's sidecar times the turn: both frames keep that copy
    h = [user("q", T0), answer("a", T0 + 9000)]
    save(tmp_path, "a/1", h)
    save(tmp_path, "b/1", h)
    append_sidecar(sidecar_record("b/1", 0, 1, started_at=T0 + 5000, total_ms=4000.0), base=tmp_path)
    turns = no_warnings_load(traces.load_turns, tmp_path)
    items = no_warnings_load(traces.load_items, tmp_path)
    assert turns["trace_id"].tolist() == ["b/1"]
    assert items["trace_id"].tolist() == ["b/1", "b/1"] and items["role"].astype(str).tolist() == ["user", "assistant"]
    assert items.attrs["duplicates"] == 2 and turns.attrs["duplicates"] == 1
    joined = turns.merge(items[items["role"] == "assistant"], on=["trace_id", "message_index"])
    assert len(joined) == 1
    # a filter applies to the copy kept: the turn started (sidecar) after the cut, its items too
    cut = pd.Timestamp(T0 + 1000, unit="ms", tz="UTC")
    since = traces.load_items(tmp_path, since=cut)
    assert since["trace_id"].tolist() == ["b/1", "b/1"] and since.attrs["duplicates"] == 2
    assert len(traces.load_items(tmp_path, until=cut)) == 0 == len(traces.load_turns(tmp_path, until=cut))
    assert len(traces.load_items(tmp_path, dedupe=False)) == 4


@pytest.mark.parametrize("bad", [{"dedupe": "no"}, {"otel": "yes"}, {"progress": "x"}, {"otel": None}, {"dedupe": 2}])
def test_a_switch_that_is_no_bool_is_refused_by_every_loader(tmp_path: Path, bad: dict[str, Any]) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 100)])
    loaders = [traces.load_turns, traces.load_items] + ([traces.load_events] if "dedupe" not in bad else [])
    for load in loaders:
        with pytest.raises(OptionTypeError, match=f"{next(iter(bad))} takes True or False"):
            load(tmp_path, **bad)
    assert len(traces.load_turns(tmp_path, dedupe=np.bool_(False), otel=0, progress=None)) == 1


def test_a_sidecar_record_without_a_model_takes_the_trace_s_in_events_as_in_turns(tmp_path: Path) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 100)], model="cfg-model")
    append_sidecar(sidecar_record("t", 0, 1, model=None, started_at=T0 + 1, ttft_ms=20.0, total_ms=99.0,
                                  events=[[20.0, "text.delta", 1], [99.0, "stop", 0]]), base=tmp_path)
    turns = no_warnings_load(traces.load_turns, tmp_path)
    events = no_warnings_load(traces.load_events, tmp_path)
    assert turns["model"].tolist() == ["cfg-model"] and set(events["model"]) == {"cfg-model"} and len(events) == 2
    assert len(traces.load_events(tmp_path, models="cfg-model")) == 2  # the filter sees the same model
    ds = tmp_path.parent / (tmp_path.name + "_ds")
    traces.sync(tmp_path, ds, kind="events", progress=False)
    assert set(traces.query("SELECT model FROM events", ds)["model"]) == {"cfg-model"}


def test_since_after_until_is_refused_by_every_loader(tmp_path: Path) -> None:
    save(tmp_path, "t", [user("q", T0), answer("a", T0 + 100)])
    for load in (traces.load_turns, traces.load_items, traces.load_events):
        with pytest.raises(OptionError, match="since .* is after until .*: no turn is in between; swap them"):
            load(tmp_path, since="2026-02-01", until="2026-01-01")
    assert len(traces.load_turns(tmp_path, since=T0 / 1000, until=T0 / 1000 + 1)) == 1  # one instant apart: kept


@pytest.mark.parametrize("fast", [True, False])
def test_an_upper_case_media_type_is_counted_as_an_image_or_audio(tmp_path, monkeypatch, fast):
    """MIME types are case-insensitive: IMAGE/PNG and Audio/WAV were counted as neither (turn.images has them)."""
    from mmsp_notebook.traces import _load

    reply = answer("here", T0 + 5)
    reply["content_items"] += [{"type": "inline_data.done", "data": PNG, "mime_type": mime}
                               for mime in ("IMAGE/PNG", "image/png", "Audio/WAV", "application/pdf")]
    save(tmp_path, "media", [user("draw", T0), reply])
    if not fast:
        monkeypatch.setattr(_load, "decode_trace", lambda raw: None)
    df = no_warnings_load(traces.load_turns, tmp_path)
    assert (df["n_images"].tolist(), df["n_audio"].tolist()) == ([2], [1])


def test_sidecar_durations_of_a_day_or_more_are_not_taken(tmp_path: Path) -> None:
    """A sidecar's ``total_ms`` of 1e15 (31,000 years) is damage, not a latency to weigh in percentiles:
    the turn's latency is the trace's own, as for a record without one; an hour is a latency."""
    tid = "app/slow"
    save(tmp_path, tid, [user("q0", T0), answer("a0", T0 + 1000), user("q1", T0 + 5000), answer("a1", T0 + 9000),
                         user("q2", T0 + 20_000), answer("a2", T0 + 30_000)])
    append_sidecar(sidecar_record(tid, 0, 1, started_at=T0 + 2.5, ttft_ms=1e12, total_ms=1e15), base=tmp_path)
    append_sidecar(sidecar_record(tid, 1, 3, started_at=T0 + 6000, ttft_ms=200.0, total_ms=3_600_000.0), base=tmp_path)
    append_sidecar(sidecar_record(tid, 2, 5, started_at=T0 + 21_000, ttft_ms=200.0, total_ms=86_400_000.0), base=tmp_path)
    df = traces.load_turns(tmp_path, progress=False)
    assert df["ttft"].isna().tolist() == [True, False, False]
    assert df["latency"][0] == pytest.approx(0.9975)  # (the answer's created_at after the sidecar's start)
    assert df["latency"][1] == 3600.0
    assert df["latency"].max() == 3600.0
