"""The trace store: the Tracer path rule, the one read policy for trace files, the typed sidecar record."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import threading
import time

import pytest
from helpers import run_with_timeout
from mmsp.integration.tracer import Tracer

import mmsp_notebook as mn
from mmsp_notebook import OptionError, TraceError, TraceNotFoundError, ask, traces
from mmsp_notebook.core import store
from mmsp_notebook.core.store import (
    IS_A_DIRECTORY,
    SidecarRecord,
    append_sidecar,
    parse_sidecar,
    read_sidecar,
    read_trace,
    save_trace,
    sidecar_path,
    sidecar_record,
    tracer_path,
)
from mmsp_notebook.engine.launch import check_trace_id

T0 = 1_764_441_600_000  # 2025-11-29T18:40:00Z in Unix ms

HISTORY = [
    {"role": "user", "content_items": [{"type": "text.done", "text": "hi"}], "created_at": T0},
    {"role": "assistant", "content_items": [{"type": "text.done", "text": "Hello there"}], "created_at": T0 + 900,
     "usage_metadata": {"cached_tokens": None, "prompt_tokens": 3, "thoughts_tokens": None, "response_tokens": 2},
     "finish_reason": "stop"},
]


# ---------------------------------------------------------------------------------------------- the path rule
@pytest.mark.parametrize("trace_id", ["plain", "agent1/00001", "runs/v1.5", "a.b/c", "exp.1.2", "x/y~z"])
def test_tracer_path_is_where_mmsps_tracer_writes(tmp_path, trace_id):
    Tracer(cache_dir=tmp_path).save_history("demo", HISTORY, trace_id, {"trace_id": trace_id})
    path = tracer_path(trace_id, tmp_path)
    assert path is not None and path.is_file()
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*.json")] == [path.relative_to(tmp_path)]
    assert sidecar_path(trace_id, tmp_path) == tmp_path / f"{trace_id}.timing.jsonl"  # the full id, dots kept


def test_tracer_path_defaults_to_the_cache_dir_and_refuses_an_empty_last_part(tmp_path, monkeypatch):
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path))
    assert tracer_path("runs/v1.5") == tmp_path / "runs" / "v1.json"
    assert tracer_path("") is None


@pytest.mark.parametrize("trace_id", ["plain", "agent1/00001", "a.b/c", "exp.1", "runs/v1.5", "x/exp.1.2"])
def test_check_trace_id_refuses_exactly_the_ids_the_tracer_would_rename(trace_id):
    renamed = tracer_path(trace_id, "").as_posix() != f"{trace_id}.json"
    if renamed:
        with pytest.raises(OptionError, match=f"would save it as {tracer_path(trace_id, '').name}"):
            check_trace_id(trace_id)
    else:
        check_trace_id(trace_id)


def test_save_trace_writes_what_read_trace_reads(tmp_path):
    path = save_trace("demo", HISTORY, "agent/one", {"trace_id": "agent/one", "temperature": 0.2}, base=tmp_path)
    assert path == tracer_path("agent/one", tmp_path) and path.is_file()
    data = read_trace(path)
    assert data["history"] == HISTORY and data["config"] == {"trace_id": "agent/one", "temperature": 0.2,
                                                              "model": "demo"}


def test_a_lone_surrogate_a_model_sent_is_saved_as_u_fffd_and_the_trace_stays_whole(tmp_path):
    # a model's JSON may escape half a surrogate pair ("\\ud83d"): no UTF-8 file can hold it as it is
    path = save_trace("demo", HISTORY, "t/lone", {"trace_id": "t/lone"}, base=tmp_path)
    bad = [*HISTORY, {"role": "user", "content_items": [{"type": "text.done", "text": "again"}]},
           {"role": "assistant", "content_items": [
               {"type": "text.done", "text": "bad \ud83d here"},
               {"type": "tool_call.done", "name": "f", "tool_call_id": "c1", "arguments": {"k\udc00": ["v\ud800"]}}]}]
    assert save_trace("demo", bad, "t/lone", {"trace_id": "t/lone"}, base=tmp_path) == path
    items = read_trace(path)["history"][-1]["content_items"]  # the whole conversation, not a truncated file
    assert items[0]["text"] == "bad \ufffd here" and items[1]["arguments"] == {"k\ufffd": ["v\ufffd"]}
    assert bad[-1]["content_items"][0]["text"] == "bad \ud83d here"  # (the history itself is left as it is)
    record = _record(trace_id="t/lone", status="error", message_index=None, finish_reason=None,
                     error={"type": "UpstreamError", "message": "gone \udcff"})
    append_sidecar(record, base=tmp_path)
    assert read_sidecar(sidecar_path("t/lone", tmp_path))[-1]["error"]["message"] == "gone \ufffd"


# ---------------------------------------------------------------------------------------------- reading traces
def test_read_trace_names_what_is_wrong(tmp_path):
    old = time.time() - 3600  # long written: no reason to wait for a rewrite
    cases = {
        "empty.json": (b"", "empty file"),
        "blank.json": (b" \n", "empty file"),
        "truncated.json": (b'{"history": [{"role": "us', "not valid JSON"),
        "binary.json": (b"\xff\xfe\x00{", "not valid JSON"),
        "list.json": (b"[1, 2]", "not an mmsp trace: top level is a JSON list, not an object"),
        "foreign.json": (b'{"foo": 1}', "not an mmsp trace: no 'history' key"),
        "history_str.json": (b'{"history": "abc"}', "not an mmsp trace: 'history' is a str, not a list"),
        "history_ints.json": (b'{"history": [1]}', "not an mmsp trace: history[0] is a int, not a message object"),
    }
    for name, (content, reason) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        os.utime(path, (old, old))
        with pytest.raises(TraceError) as info:
            read_trace(path)
        assert info.value.reason.startswith(reason), (name, info.value.reason)
        assert info.value.path == str(path) and str(info.value).startswith(f"{path}: ")
        assert isinstance(info.value, ValueError) and not isinstance(info.value, TraceNotFoundError)


def test_read_trace_accepts_a_bom_nan_and_a_config_that_is_not_an_object(tmp_path):
    path = tmp_path / "odd.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"history": [{"role": "user", "score": NaN}], "config": 5}')
    data = read_trace(path)
    assert math.isnan(data["history"][0]["score"]) and data["config"] == {}


def test_a_missing_file_is_trace_not_found_and_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        read_trace(tmp_path / "nope.json")
    assert isinstance(info.value, TraceNotFoundError) and info.value.reason.startswith("vanished")
    (tmp_path / "link.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(TraceNotFoundError, match="broken symbolic link: to .*nowhere.json"):
        read_trace(tmp_path / "link.json")
    assert read_sidecar(tmp_path / "nope.timing.jsonl") == [] and read_sidecar(tmp_path / "nope.timing.jsonl").damaged == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_only_regular_files_are_read_and_a_fifo_never_blocks(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceError) as info:
        run_with_timeout(lambda: read_trace(fifo), 10.0)
    assert info.value.reason == "not a regular file"
    side = tmp_path / "pipe.timing.jsonl"
    os.mkfifo(side)
    assert run_with_timeout(lambda: read_sidecar(side), 10.0) == []
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(TraceError) as info:
        read_trace(tmp_path / "dir.json")
    assert info.value.reason == IS_A_DIRECTORY
    # the loaders skip the FIFO with its reason, and ignore the directory
    Tracer(cache_dir=tmp_path).save_history("demo", HISTORY, "good", {"trace_id": "good"})
    with pytest.warns(traces.TraceLoadWarning):
        df = run_with_timeout(lambda: traces.load_turns(tmp_path), 10.0)
    assert df["trace_id"].tolist() == ["good"]
    assert df.attrs["skipped"] == [{"path": str(fifo), "reason": "not a regular file"}]


@pytest.mark.serial  # the rewrite must land within the 50 ms retry delay
def test_a_trace_caught_half_written_is_read_again(tmp_path):
    path = tmp_path / "live.json"
    full = json.dumps({"history": HISTORY, "config": {}}, indent=2).encode()
    path.write_bytes(full[: len(full) // 3])  # the Tracer truncated the file and is writing it

    def finish_writing():
        time.sleep(store.RETRY_DELAY / 3)
        path.write_bytes(full)

    writer = threading.Thread(target=finish_writing)
    writer.start()
    try:
        assert read_trace(path)["history"] == HISTORY
    finally:
        writer.join()


def test_an_old_damaged_trace_is_refused_at_once(tmp_path, monkeypatch):
    path = tmp_path / "old.json"
    path.write_bytes(b'{"history": [')
    waits = []
    monkeypatch.setattr(store.time, "sleep", waits.append)
    with pytest.raises(TraceError, match="not valid JSON"):
        read_trace(path)
    assert waits == [store.RETRY_DELAY]  # modified just now: read once more after a pause
    old = time.time() - 10 * store.REWRITE_WINDOW
    os.utime(path, (old, old))
    with pytest.raises(TraceError, match="not valid JSON"):
        read_trace(path)
    assert waits == [store.RETRY_DELAY]  # long written: no waiting


# ---------------------------------------------------------------------------------------------- the sidecar record
def _record(**changes) -> SidecarRecord:
    fields = dict(trace_id="t/one", turn=0, message_index=1, model="demo", client_type="mmsp", status="complete",
                  error=None, started_at=store.to_ms(T0 / 1000 + 0.0001), ttft_ms=store.to_ms(0.41234567),
                  total_ms=2210.0, usage={"prompt_tokens": 3, "response_tokens": 2}, finish_reason="stop",
                  events=[[410.0, "text.delta", 5], [900.0, "text.delta", 6], [901.0, "text.done", 11],
                          [2210.0, "stop", 0]])
    fields.update(changes)
    return sidecar_record(**fields)


def test_the_record_has_every_typed_key_in_the_written_order(tmp_path):
    record = _record()
    optional = {"comparison"}  # written only for a turn that is a column of a comparison
    assert list(record) == [k for k in SidecarRecord.__annotations__ if k not in optional]  # the TypedDict is the format
    with_comparison = store.sidecar_record(**{**{k: v for k, v in record.items() if k != "v"}, "comparison": "c1"})
    assert list(with_comparison) == list(SidecarRecord.__annotations__) and list(with_comparison)[-1] == "events"
    assert list(record)[0] == "v" and record["v"] == store.FORMAT_VERSION and list(record)[-1] == "events"
    assert record["ttft_ms"] == 412.346 and store.to_ms(None) is None
    path = append_sidecar(record, base=tmp_path)
    assert path == sidecar_path("t/one", tmp_path)
    line = path.read_bytes()
    assert line.count(b"\n") == 1 and line.startswith(b'{"v":1,"trace_id":"t/one"') and line.endswith(b"]]}\n")
    assert read_sidecar(path) == [record]
    without = read_sidecar(path, events=False)  # the events array is skipped unparsed
    assert without == [{k: v for k, v in record.items() if k != "events"}] and without.damaged == 0


def test_the_engine_writes_the_typed_record_through_the_store(fresh_session):
    turn = ask("Tell me about lighthouses", max_tokens=20, stream=io.StringIO())
    [record] = read_sidecar(sidecar_path(turn.trace_id))
    keys = [k for k in SidecarRecord.__annotations__ if k != "comparison"]  # not a column of a comparison
    assert list(record) == keys
    assert record["status"] == "complete" and record["message_index"] == 1 and record["usage"] == turn.usage
    failed = ask("hello", model="demo+error", chat="failing", stream=io.StringIO())
    [record] = read_sidecar(sidecar_path(failed.trace_id))
    assert record["status"] == "error" and record["message_index"] is None
    assert set(record["error"]) == {"type", "message"} and list(record) == keys


# a record exactly as the previous writer put it (format 1), and one written before versions were stamped
_V1_LINE = (b'{"v":1,"trace_id":"old/conv","turn":0,"message_index":1,"model":"demo","client_type":"mmsp",'
            b'"status":"complete","error":null,"started_at":1764441600123.4,"ttft_ms":412.5,"total_ms":2210.0,'
            b'"usage":{"cached_tokens":null,"prompt_tokens":3,"thoughts_tokens":null,"response_tokens":2},'
            b'"finish_reason":"stop","events":[[412.5,"text.delta",5],[900.0,"text.delta",6],'
            b'[901.0,"text.done",11],[2210.0,"stop",0]]}\n')


@pytest.mark.parametrize("variant", ["v1", "unversioned", "later version"])
def test_sidecars_of_the_previous_format_load_everywhere(tmp_path, variant):
    record = json.loads(_V1_LINE)
    if variant == "unversioned":
        record.pop("v")
    elif variant == "later version":
        record = {"v": 2, **{k: v for k, v in record.items() if k != "v"}, "note": "a field this version ignores"}
    line = _V1_LINE if variant == "v1" else json.dumps(record, separators=(",", ":")).encode() + b"\n"
    Tracer(cache_dir=tmp_path).save_history("demo", HISTORY, "old/conv", {"trace_id": "old/conv"})
    sidecar_path("old/conv", tmp_path).write_bytes(line)
    records = read_sidecar(sidecar_path("old/conv", tmp_path))
    assert records == [record] and records.damaged == 0
    # the loaders: the turn is timed by the record
    df = traces.load_turns(tmp_path)
    assert df["ttft"].tolist() == [0.4125] and df["source"].astype(str).tolist() == ["trace+sidecar"]
    assert len(traces.load_events(tmp_path)) == 4
    # replay: the recorded fragments, at their recorded times
    replayed = mn.replay("old/conv", root=tmp_path, speed=math.inf, display=False)
    assert replayed.replayed_from["timed"] is True and replayed.text == "Hello there"
    assert [e["content_items"][0]["text"] for e in replayed.events[:2]] == ["Hello", " there"]


@pytest.mark.parametrize(("line", "cut"), [
    (_V1_LINE.strip(), True),
    (b'{"trace_id":"t","turn":0,"events":[[1.0,"text.delta",1]],"comparison":"c"}', False),  # a key after events
    (b'{"trace_id":"t","turn":0,"events":[[1.0,"a:b",1]]}', False),  # a colon in an event: parsed whole
    (b'{"trace_id":"t","turn":0,"events":[[1.0,"x",1]],"events":[[2.0,"y",2]]}', False),  # twice (the last counts)
    (b'{"trace_id":"t","note":"a,\\"events\\":[1]","turn":1,"events":[[1.0,"x",1]]}', True),  # quoted in a string
    (b'{"trace_id":"t","turn":0,"events":[[1.0,"x",1]],"usage":{"events":[]}}', False),
    (b'{"trace_id":"t","turn":0,"usage":{"a":1,"events":[[1.0,"x",1]]}}', False),  # nested: not the record's own
])
def test_a_sidecar_line_loses_its_events_unparsed_only_when_that_is_safe(line, cut):
    from mmsp_notebook.core.store import _without_events

    got = _without_events(line)
    assert (got is not None) == cut
    whole = json.loads(line)
    whole.pop("events", None)
    if got is not None:
        assert json.loads(got) == whole
    [record] = parse_sidecar(line + b"\n", events=False)
    assert {k: v for k, v in record.items() if k != "events"} == whole


_A = b'{"trace_id":"t","turn":0,"events":[[1.0,"x",1]]}'
_B = b'{"trace_id":"t","turn":1,"events":[[2.0,"y",2]]}'


@pytest.mark.parametrize("lines", [
    [_A, _B],
    [_A, _B, _A],  # a line repeated
    [_A, _A.replace(b"1.0", b"9.0")],  # the same record, other events
    [_A, b'{"trace_id":"t","turn":2}'],  # no events
    [_A, b'{"trace_id":"t","turn":2,"events":[[1.0,"x",1]],"comparison":"c"}'],  # a key after events
    [_A, b'{"trace_id":"t","turn":2,"x":NaN,"events":[]}'],  # what orjson refuses
    [_A, b'{"turn":2,"events":[]}'],  # not a record
    [_A, b'[1,2]'],
    [_A, b'{"trace_id":"t","turn":2,"events":[[1.0,"x",1]]}, {"trace_id":"u","events":[]}'],  # two on a line
    # lines that are no records alone, but would be inside one array: the same count of records
    [b'{"trace_id":"a","e":[{}', b'{"x":1}]}', b'{"trace_id":"p","events":[]},{"trace_id":"q","events":[]}'],
    [_A, b"", _B],  # a blank line
    [_A, b" " + _B],  # blanks around a line
    [_A + b"\r", _B + b"\r"],  # CRLF
])
@pytest.mark.parametrize("events", [True, False])
def test_a_plain_sidecar_is_read_as_line_by_line(lines, events):
    raw = b"\n".join(lines) + b"\n"
    got = parse_sidecar(raw, events)
    # a BOM takes the file line by line: the way every sidecar was read before
    slow = parse_sidecar(b"\xef\xbb\xbf" + raw, events)
    assert list(got) == list(slow) and got.damaged == slow.damaged
    assert parse_sidecar(raw[:-1], events) == parse_sidecar(b"\xef\xbb\xbf" + raw[:-1], events)  # being written


def test_a_sidecar_as_its_writer_leaves_it_takes_the_quick_way():
    from mmsp_notebook.core.store import _plain_records

    raw = _A + b"\n" + _B + b"\n"
    assert _plain_records(raw, True) == [json.loads(_A), json.loads(_B)]
    assert _plain_records(raw, False) == [{"trace_id": "t", "turn": 0}, {"trace_id": "t", "turn": 1}]
    assert _plain_records(raw[:-1], True) is None  # a line being written


def test_one_parser_counts_damaged_lines_and_passes_over_a_line_being_written():
    good = _V1_LINE
    raw = b"\xef\xbb\xbf" + good + good + b"[1, 2]\n" + b'{"no_trace_id": 1}\n' + b"\n" + b'{"trace_id": "old/conv", "tu'
    records = parse_sidecar(raw)
    assert records == [json.loads(good)] and records.damaged == 2  # a repeated line counts once
    damaged_tail = parse_sidecar(good + b"garbage")
    assert len(damaged_tail) == 1 and damaged_tail.damaged == 1


def test_the_store_imports_no_pandas_or_front_end():
    code = ("import sys, mmsp_notebook.core.store, mmsp_notebook.core.pricing; "
            "print(sorted(m for m in ('pandas', 'numpy', 'IPython', 'anywidget') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_loaders_name_a_missing_path_with_trace_not_found(tmp_path):
    with pytest.raises(TraceNotFoundError, match="no such trace file or directory"):
        traces.load_turns(tmp_path / "nope")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-16-le"])
def test_a_sidecar_saved_as_utf16_is_read_as_a_utf16_trace_is(tmp_path, encoding):
    # a tool that re-saves text as UTF-16 (with its BOM) leaves a trace that reads and a sidecar that must too
    lines = _A.decode() + "\r\n" + _B.decode() + "\r\n"
    bom = "\ufeff" if encoding != "utf-16" else ""
    raw = (bom + lines).encode(encoding)
    got = parse_sidecar(raw)
    assert list(got) == [json.loads(_A), json.loads(_B)] and got.damaged == 0
    trace = tmp_path / "t.json"
    trace.write_bytes(('\ufeff{"history": [], "config": {}}' if bom else '{"history": [], "config": {}}').encode(encoding))
    assert read_trace(trace)["history"] == []


def test_a_record_completed_only_with_an_integer_message_index():
    """``completed`` took any message index but None: ``"x"`` completed a record whose message the
    readers could not name. ``3.0`` is 3 (as_int, as every reader reads it); no integer is none."""
    def done(mi):
        return store.completed({"status": "complete", "message_index": mi})

    assert done(3) and done(3.0) and done(0)
    assert not any(done(mi) for mi in (None, "x", "3", 2.5, True, float("nan"), 2**63))
    assert not store.completed({"status": "error", "message_index": 3})
