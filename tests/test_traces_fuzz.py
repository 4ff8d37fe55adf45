"""Fuzzing the trace loaders: every field of a trace and of a timing sidecar set to each of a list of
wrong values, structural damage, and filesystem oddities. Every load runs in a child process with
an address-space limit (RLIMIT_AS) and a time limit (an alarm per load, a timeout for the child):
0 crashes, 0 hangs, every unusable file named in ``attrs["skipped"]``, every frame exportable to
Arrow, and ``load_turns``' typed decoding gives the same frame as the plain parse for every file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import run_with_timeout

ROOT = Path(__file__).resolve().parent.parent
T0 = 1767225600000
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
DEEP = "\x00deep\x00"  # replaced by deeply nested arrays when written
VERY_DEEP = "\x00verydeep\x00"

#: wrong values for any field (JSON can hold all of them; NaN and Infinity as Python's json writes them)
WRONG: list[Any] = [
    None, True, False, 0, -1, 2**63, -(2**63) - 1, 10**30, -(10**400), 1.5, -0.0, 1e308, float("nan"), float("inf"),
    float("-inf"), "", "x", "\ud800", "a\udcffb", "\x00\x1f", "💥" * 3, "9" * 400, [], [1, "a", None], {}, {"a": {"b": [None]}},
    DEEP, VERY_DEEP,
]


def base_trace(tid: str) -> dict[str, Any]:
    return {
        "history": [
            {"role": "user", "content_items": [
                {"type": "text.done", "text": "What is in the picture?"},
                {"type": "image_url.done", "image_url": "data:image/png;base64," + PNG_B64},
            ], "created_at": T0},
            {"role": "assistant", "content_items": [
                {"type": "thinking.done", "thinking": "Look first.", "fidelity": {"signature": "c2ln"}},
                {"type": "text.done", "text": "A pixel."},
                {"type": "tool_call.done", "name": "zoom", "arguments": {"factor": 2}, "tool_call_id": "c1"},
                {"type": "inline_data.done", "data": PNG_B64, "mime_type": "image/png"},
                {"type": "embedding.done", "embedding": [0.5, -1.0]},
            ], "usage_metadata": {"cached_tokens": 1, "prompt_tokens": 20, "thoughts_tokens": 3, "response_tokens": 4},
             "finish_reason": "tool_call", "created_at": T0 + 900},
            {"role": "user", "content_items": [
                {"type": "tool_result.done", "text": "zoomed", "tool_call_id": "c1", "images": ["https://x/y.png"]},
            ], "created_at": T0 + 1000},
            {"role": "assistant", "content_items": [{"type": "text.done", "text": "Still a pixel."}],
             "usage_metadata": {"cached_tokens": None, "prompt_tokens": 30, "thoughts_tokens": None, "response_tokens": 5},
             "finish_reason": "stop", "created_at": T0 + 2000},
        ],
        "config": {"model": "gemini-3.8-flash", "temperature": 0.2, "max_tokens": 512, "thinking_level": "low",
                   "tools": [{"name": "zoom", "description": "Zoom", "parameters": {"type": "object"}}], "trace_id": tid},
        "timestamp": "2026-01-01T00:00:02",
    }


def base_records(tid: str) -> list[dict[str, Any]]:
    return [
        {"v": 1, "trace_id": tid, "turn": 0, "message_index": None, "model": "gemini-3.8-flash", "client_type": "google-official",
         "status": "error", "error": {"type": "UpstreamError", "message": "503"}, "started_at": T0 + 10, "ttft_ms": None,
         "total_ms": 40.0, "usage": None, "finish_reason": None, "events": [[40.0, "stop", 0]]},
        {"v": 1, "trace_id": tid, "turn": 0, "message_index": 1, "model": "gemini-3.8-flash", "client_type": "google-official",
         "status": "complete", "error": None, "started_at": T0 + 100, "ttft_ms": 200.5, "total_ms": 800.0,
         "usage": {"cached_tokens": 1, "prompt_tokens": 20, "thoughts_tokens": 3, "response_tokens": 4}, "finish_reason": "tool_call",
         "events": [[200.5, "thinking.delta", 11], [300.0, "text.delta", 8], [400.0, "tool_call.done", 12], [800.0, "stop", 0]]},
    ]


TRACE_PATHS: list[tuple[Any, ...]] = [
    ("history",), ("config",), ("timestamp",), ("history", 0), ("history", 1), ("history", 1, "role"), ("history", 0, "role"),
    ("history", 1, "content_items"), ("history", 0, "content_items"), ("history", 1, "created_at"), ("history", 0, "created_at"),
    ("history", 1, "usage_metadata"), ("history", 1, "finish_reason"), ("history", 1, "content_items", 0),
    *[("history", 1, "usage_metadata", b) for b in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")],
    *[("history", 1, "content_items", 0, k) for k in ("type", "thinking", "fidelity")],
    *[("history", 1, "content_items", 1, k) for k in ("type", "text")],
    *[("history", 1, "content_items", 2, k) for k in ("name", "arguments", "tool_call_id")],
    *[("history", 1, "content_items", 3, k) for k in ("data", "mime_type")],
    ("history", 1, "content_items", 4, "embedding"), ("history", 0, "content_items", 1, "image_url"),
    ("history", 2, "content_items", 0, "images"), ("history", 1, "content_items", 1, "extra_field"),
    *[("config", k) for k in ("model", "temperature", "max_tokens", "thinking_level", "tools", "trace_id")],
    ("config", "tools", 0), ("config", "tools", 0, "name"),
]
SIDECAR_PATHS: list[tuple[Any, ...]] = [
    (1,), (0,), *[(1, k) for k in ("v", "trace_id", "turn", "message_index", "model", "client_type", "status", "error", "started_at",
                                    "ttft_ms", "total_ms", "usage", "finish_reason", "events")],
    (0, "turn"), (0, "error"), (0, "error", "type"), (0, "error", "message"), (1, "usage", "prompt_tokens"),
    (1, "events", 0), (1, "events", 0, 0), (1, "events", 0, 1), (1, "events", 0, 2),
]


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``obj`` (a fresh one: changed in place) with the field at ``path`` set to ``value``."""
    if not path:
        return value
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


_NESTED = {json.dumps(DEEP): "[" * 500 + "]" * 500, json.dumps(VERY_DEEP): "[" * 100_000 + "]" * 100_000}


def _dumps(obj: Any) -> bytes:
    text = json.dumps(obj)  # NaN / Infinity / huge integers as Python writes them, lone surrogates escaped
    for marker, nested in _NESTED.items():
        if marker in text:
            text = text.replace(marker, nested)
    return text.encode()


def _name(path: tuple[Any, ...]) -> str:
    return "_".join(str(p) for p in path) or "root"


def write_value_cases(root: Path) -> int:
    """One directory per field, one file per wrong value (trace fields, then sidecar fields)."""
    n = 0
    for path in TRACE_PATHS:
        d = root / f"trace_{_name(path)}"
        d.mkdir(parents=True)
        for j, value in enumerate(WRONG):
            tid = f"v{j:02d}"
            (d / f"{tid}.json").write_bytes(_dumps(_set(base_trace(tid), path, value)))
            (d / f"{tid}.timing.jsonl").write_bytes(b"".join(_dumps(r) + b"\n" for r in base_records(tid)))
            n += 1
    for path in SIDECAR_PATHS:
        d = root / f"sidecar_{_name(path)}"
        d.mkdir(parents=True)
        for j, value in enumerate(WRONG):
            tid = f"v{j:02d}"
            (d / f"{tid}.json").write_bytes(_dumps(base_trace(tid)))
            records = base_records(tid)
            records[path[0]] = _set(records[path[0]], path[1:], value)
            (d / f"{tid}.timing.jsonl").write_bytes(b"".join(_dumps(r) + b"\n" for r in records))
            n += 1
    return n


def write_damaged_files(d: Path) -> set[str]:
    """Structural damage; returns the names of the trace files that cannot be used."""
    d.mkdir(parents=True)
    good = _dumps(base_trace("good"))
    (d / "good.json").write_bytes(good)
    unusable = {
        "empty.json": b"",
        "blank.json": b" \n\t ",
        "garbage.json": bytes((i * 131 + 7) % 256 for i in range(5000)),
        "nul.json": b"\x00" * 100,
        "bom_truncated.json": b"\xef\xbb\xbf" + good[:200],
        "trailing.json": good + b"}{",
        "array.json": b"[" + good + b"]",
        "string.json": b'"history"',
        "deep.json": b"[" * 200_000,
        "history_null.json": b'{"history": null}',
    }
    for k, cut in enumerate((1, 10, len(good) // 3, len(good) // 2, len(good) - 2)):
        unusable[f"truncated_{k}.json"] = good[:cut]
    for name, body in unusable.items():
        (d / name).write_bytes(body)
    # usable despite appearances: a BOM, UTF-16, bytes that are not UTF-8, CRLF line ends, a huge text
    (d / "bom.json").write_bytes(b"\xef\xbb\xbf" + _dumps(base_trace("bom")))
    (d / "utf16.json").write_bytes(json.dumps(base_trace("utf16")).encode("utf-16"))
    (d / "latin1.json").write_bytes(_dumps(base_trace("latin1")).replace(b"A pixel.", b"A pix\xe9l."))
    (d / "crlf.json").write_bytes(json.dumps(base_trace("crlf"), indent=2).replace("\n", "\r\n").encode())
    (d / "huge_text.json").write_bytes(_dumps(_set(base_trace("huge_text"), ("history", 1, "content_items", 1, "text"), "x\n" * 2_000_000)))
    # damaged sidecars next to good traces: their good lines are used, the files named
    for name, body in {
        "side_garbage": bytes((i * 17 + 3) % 256 for i in range(3000)),
        "side_truncated": _dumps(base_records("side_truncated")[1])[:-20] + b"\n",
        "side_bom": b"\xef\xbb\xbf" + _dumps(base_records("side_bom")[1]) + b"\n",
        "side_empty": b"",
        "side_crlf": b"".join(_dumps(r) + b"\r\n" for r in base_records("side_crlf")),
        "side_nul": b"\x00\x00\n" + _dumps(base_records("side_nul")[1]) + b"\n",
    }.items():
        (d / f"{name}.json").write_bytes(_dumps(base_trace(name)))
        (d / f"{name}.timing.jsonl").write_bytes(body)
    return set(unusable)


def write_filesystem_oddities(d: Path) -> set[str]:
    """FIFOs, links to devices, a dangling link, link loops, an unreadable file; returns the names
    that must be reported."""
    d.mkdir(parents=True)
    (d / "good.json").write_bytes(_dumps(base_trace("good")))
    (d / "sub").mkdir()
    (d / "sub" / "inner.json").write_bytes(_dumps(base_trace("inner")))
    named: set[str] = set()
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "fifo.json")
        os.mkfifo(d / "fifo_only.timing.jsonl")
        os.mkfifo(d / "good.timing.jsonl")  # the sidecar of a good trace
        named |= {"fifo.json", "fifo_only.timing.jsonl", "good.timing.jsonl"}
    for name, target in (("zero.json", "/dev/zero"), ("urandom.json", "/dev/urandom"), ("null.timing.jsonl", "/dev/null"),
                         ("mem.json", "/proc/self/mem")):
        if os.path.exists(target):
            os.symlink(target, d / name)
            named.add(name)
    os.symlink(d / "nowhere.json", d / "dangling.json")
    os.symlink("knot.json", d / "knot.json")  # a link to itself
    os.symlink("..", d / "sub" / "up")  # two loops in one tree
    os.symlink(".", d / "self")
    (d / "sub" / "dir.json").mkdir()  # a directory the pattern matches: not a trace, not reported
    named |= {"dangling.json", "knot.json"}
    if os.geteuid() != 0:  # root reads any file: only an unprivileged run can test permissions
        locked = d / "locked.json"
        locked.write_bytes(_dumps(base_trace("locked")))
        locked.chmod(0)
        closed = d / "closed"
        closed.mkdir()
        closed.chmod(0)
        named |= {"locked.json", "closed"}
    return named


WORKER = r"""
import json, os, resource, signal, sys, traceback, warnings
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
warnings.simplefilter("ignore")
sys.path.insert(0, ROOT)
import pandas as pd
from mmsp_notebook import traces
from mmsp_notebook.traces import _load

class Hang(Exception):
    pass

def alarm(signum, frame):
    raise Hang("no answer within the time limit")

signal.signal(signal.SIGALRM, alarm)

def timed(fn):
    signal.alarm(LOAD_TIMEOUT)
    try:
        return fn()
    finally:
        signal.alarm(0)

def check(path):
    out = {}
    try:
        turns = timed(lambda: traces.load_turns(path, progress=False))
        fast_decode = _load.decode_trace
        _load.decode_trace = lambda raw: None
        try:
            plain = timed(lambda: traces.load_turns(path, progress=False))
        finally:
            _load.decode_trace = fast_decode
        try:
            pd.testing.assert_frame_equal(turns, plain)
            out["same"] = True
        except AssertionError as exc:
            out["same"] = str(exc)[:2000]
        items = timed(lambda: traces.load_items(path, progress=False, payloads=True))
        events = timed(lambda: traces.load_events(path, progress=False))
        for df in (turns, items, events):
            timed(lambda: traces.to_arrow(df))
        out.update(ok=True, rows=len(turns), n_files=turns.attrs["n_files"], skipped=turns.attrs["skipped"],
                   item_skipped=items.attrs["skipped"], event_rows=len(events))
    except BaseException as exc:
        out.update(ok=False, error="".join(traceback.format_exception_only(type(exc), exc))[-2000:],
                   where=traceback.format_exc()[-3000:])
    return out

for line in sys.stdin:  # the paths of one request a line, the results of each on one line
    results = {}
    for name in json.loads(line):
        results[name] = check(name)
        if not results[name]["ok"] and os.path.isdir(name):  # name the file(s) that broke it
            results[name]["culprits"] = [f for f in sorted(os.listdir(name)) if f.endswith(".json")
                                         and not check(os.path.join(name, f))["ok"]]
    print("RESULTS " + json.dumps(results), flush=True)
"""


class Worker:
    """The child process the loads run in (see ``WORKER``), started once for the module and given
    each test's paths in turn; one that fails or hangs is stopped, the next request starting another."""

    def __init__(self, errors: Path) -> None:
        self.errors = errors  # the child's stderr
        self.proc: subprocess.Popen[str] | None = None

    def run(self, paths: list[str], timeout: float = 240.0) -> dict[str, Any]:
        if self.proc is None:
            code = WORKER.replace("MEMORY", str(4 << 30)).replace("LOAD_TIMEOUT", "30").replace("ROOT", repr(str(ROOT)))
            with open(self.errors, "wb") as err:
                self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=err, text=True)
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None

        def answer() -> str:
            proc.stdin.write(json.dumps(paths) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if line.startswith("RESULTS "):
                    return line
            return ""

        try:
            line = run_with_timeout(answer, timeout)
        except BaseException:
            self.stop()
            raise
        if not line:
            self.stop()
            raise AssertionError(f"the worker ended (exit status {proc.returncode}): "
                                 + self.errors.read_text(errors="replace")[-4000:])
        return json.loads(line[len("RESULTS "):])

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # (a broken pipe to a killed child)
                    pass


@pytest.fixture(scope="module")
def worker() -> Any:
    with tempfile.TemporaryDirectory(prefix="mmsp_fuzz_worker_") as tmp:
        child = Worker(Path(tmp) / "stderr")
        try:
            yield child
        finally:
            child.stop()


def _trace_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".json") and not p.is_dir())


def _trace_skips(skipped: list[dict[str, str]]) -> list[dict[str, str]]:
    return [s for s in skipped if not s["reason"].startswith(("damaged sidecar", "sidecar not read", "unreadable directory"))]


@pytest.fixture(scope="module")
def fuzz_root() -> Any:
    with tempfile.TemporaryDirectory(prefix="mmsp_fuzz_") as tmp:
        yield Path(tmp)


def test_every_field_set_to_every_wrong_value(fuzz_root: Path, worker: Worker) -> None:
    root = fuzz_root / "values"
    n = write_value_cases(root)
    assert n == (len(TRACE_PATHS) + len(SIDECAR_PATHS)) * len(WRONG)
    groups = sorted(str(p) for p in root.iterdir())
    results = worker.run([*groups, str(root)])
    crashed = {Path(k).name: (r.get("culprits"), r["error"]) for k, r in results.items() if not r["ok"]}
    assert not crashed, crashed
    differ = {Path(k).name: r["same"] for k, r in results.items() if r["same"] is not True}
    assert not differ, differ
    for group in groups:
        r = results[group]
        files = _trace_files(Path(group))
        skips = _trace_skips(r["skipped"])
        assert r["n_files"] + len(skips) == len(files), (group, r)  # every file loaded or named
        assert all(Path(s["path"]).parent == Path(group) and s["reason"] for s in r["skipped"]), (group, r["skipped"])
        if Path(group).name.startswith("sidecar_"):  # a sidecar never takes its trace down with it
            assert not skips and r["n_files"] == len(files), (group, r["skipped"])
    # the structure of a trace: these values leave nothing to load, and say why
    history = results[str(root / "trace_history")]
    assert history["n_files"] == 1 and len(history["skipped"]) == len(WRONG) - 1  # [] is an empty history
    assert results[str(root)]["n_files"] > 0.9 * n  # all the cases together in one load


def test_structural_damage_is_named(fuzz_root: Path, worker: Worker) -> None:
    d = fuzz_root / "damaged"
    unusable = write_damaged_files(d)
    r = worker.run([str(d)])[str(d)]
    assert r["ok"], r
    assert r["same"] is True, r["same"]
    named = {Path(s["path"]).name for s in _trace_skips(r["skipped"])}
    assert named == unusable, (named ^ unusable, r["skipped"])
    damaged = {Path(s["path"]).name for s in r["skipped"] if s["reason"].startswith("damaged sidecar")}
    assert damaged == {"side_garbage.timing.jsonl", "side_truncated.timing.jsonl", "side_nul.timing.jsonl"}
    assert r["n_files"] == len(_trace_files(d)) - len(unusable)


def test_filesystem_oddities_never_block_and_are_named(fuzz_root: Path, worker: Worker) -> None:
    d = fuzz_root / "fs"
    named = write_filesystem_oddities(d)
    given = [str(d / "fifo.json"), "/dev/null"] if hasattr(os, "mkfifo") else ["/dev/null"]
    results = worker.run([str(d), *given], timeout=120)
    r = results[str(d)]
    assert r["ok"], r
    got = {os.path.relpath(s["path"], d) for s in r["skipped"]}
    assert got == named, (got ^ named, r["skipped"])
    # good.json and sub/inner.json, each read once (the loops are not followed); one history, counted once
    assert r["n_files"] == 2 and r["rows"] == 2
    for path in given:  # a FIFO or a device given directly is named for what it is
        one = results[path]
        assert one["ok"] and one["skipped"] == [{"path": path, "reason": "not a regular file"}], one


def test_the_quick_look_at_a_tool_result_misses_no_error_report():
    """The typed decoding looks at a tool result's first bytes to rule out an error report; on
    random texts made of blanks, escapes, openers and the words themselves, it says what
    :func:`tool_error` says of the decoded text, escaped or not."""
    import random

    import msgspec

    from mmsp_notebook.core.store import tool_error
    from mmsp_notebook.traces._fast import _SUSPECT, _raw_tool_error

    rng = random.Random(5)
    pieces = [" ", "\n", "\t", "\r", "\f", "\u00a0", "\u2003", "\u3000", "error:", "Error:", "ERROR:", "error",
              "Traceback (most recent call last):", "Traceback", "e", "E", "T", "x", "\\", '"', "é", "{", "rr", "or:", "\x01"]
    seen = 0
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        for raw in {json.dumps(text).encode(), json.dumps(text, ensure_ascii=False).encode()}:
            quick = bool(len(raw) > 1 and _SUSPECT[raw[1]] and _raw_tool_error(msgspec.Raw(raw)))
            assert quick == (tool_error(text) is not None), raw
            seen += quick
    assert seen > 1000  # (errors were among them)
