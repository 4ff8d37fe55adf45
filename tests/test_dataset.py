"""mmsp_notebook.traces.sync / dataset / query: traces written by mmsp's own Tracer (plus timing
sidecars) converted into a partitioned Parquet dataset, incrementally, on a process pool, a thread
pool and a Dask cluster, and read back with pyarrow, DuckDB and Dask."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mmsp
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from mmsp.integration.tracer import Tracer

from mmsp_notebook import ManifestError, OptionError, SyncBusyError, TraceNotFoundError, traces
from mmsp_notebook.core import pricing
from mmsp_notebook.core.store import append_sidecar
from mmsp_notebook.traces import _dataset, _manifest, _runner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gen_corpus  # noqa: E402

T0 = 1767225600000  # 2026-01-01T00:00:00Z in Unix ms
DAY = 86_400_000
TOOLS = [{"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}]
LOADERS = {"turns": traces.load_turns, "items": traces.load_items, "events": traces.load_events}


# --------------------------------------------------------------------------- a corpus


def user(text: str, at: int | None) -> dict[str, Any]:
    return {"role": "user", "content_items": [{"type": "text.done", "text": text}], "created_at": at}


def answer(text: str, at: int | None, finish: str = "stop", response: int = 5) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content_items": [{"type": "thinking.done", "thinking": "hm " + text}, {"type": "text.done", "text": text}],
        "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": 3, "response_tokens": response},
        "finish_reason": finish,
        "created_at": at,
    }


def save(root: Path, trace_id: str, history: list[dict[str, Any]], model: Any = "glm-5.3", **config: Any) -> Path:
    """Write a trace with mmsp's own Tracer, as every mmsp client does."""
    cfg = {"temperature": 0.2, "max_tokens": 512, "tools": TOOLS, "trace_id": trace_id, **config}
    Tracer(cache_dir=str(root)).save_history(model, history, trace_id, cfg)
    return root / f"{trace_id}.json"


def record(tid: str, turn: int, mi: int | None, status: str = "complete", *, started: float, total: float = 900.0,
           model: str = "glm-5.3", events: list[list[Any]] | None = None) -> dict[str, Any]:
    return {
        "trace_id": tid, "turn": turn, "message_index": mi, "model": model, "client_type": "zai-official",
        "status": status, "error": None if status == "complete" else {"type": "UpstreamError", "message": "503"},
        "started_at": started, "ttft_ms": 120.0 if status == "complete" else None, "total_ms": total,
        "usage": None, "finish_reason": "stop" if status == "complete" else None,
        "events": events if events is not None else [[120.0, "text.delta", 4], [total, "stop", 0]],
    }


def conversation(n: int, t0: int, prefix: str = "q") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n):
        out += [user(f"{prefix}{k}", t0 + 10_000 * k), answer(f"{prefix}-a{k}", t0 + 10_000 * k + 900, "length" if k == 2 else "stop", 5 + k)]
    return out


def make_corpus(root: Path) -> Path:
    """Traces of every shape the dataset must carry: sidecars (failed and cancelled attempts), a
    sidecar-only trace, a conversation traced call by call (its history repeated in every file),
    a dotted trace id, models with odd names or none, turns without time, a damaged file and a few
    dozen generated conversations over several days."""
    root.mkdir(parents=True, exist_ok=True)
    save(root, "app/chat_1", conversation(3, T0))
    append_sidecar(record("app/chat_1", 0, 1, started=T0 + 5.0), base=root)
    append_sidecar(record("app/chat_1", 1, None, "error", started=T0 + 10_001.0, total=300.0), base=root)
    append_sidecar(record("app/chat_1", 1, 3, started=T0 + 10_400.0), base=root)
    append_sidecar(record("app/chat_1", 3, None, "cancelled", started=T0 + 40_000.0, total=50.0), base=root)
    append_sidecar(record("app/chat_2", 0, None, "incomplete", started=T0 + DAY + 1.0, total=70.0), base=root)
    # call by call: each file holds the conversation so far; 00002 carries the timing of turn 1
    history = conversation(3, T0 + 2 * DAY, "agent")
    for k in range(3):
        save(root, f"agent/{k + 1:05d}", history[: 2 * k + 2], model="gemini-3.8-flash")
    append_sidecar(record("agent/00002", 1, 3, started=T0 + 2 * DAY + 10_010.0, model="gemini-3.8-flash"), base=root)
    save(root, "runs/v1.5", conversation(2, T0 + 3 * DAY, "dot"), model="org/model v2%")
    append_sidecar(record("runs/v1.5", 0, 1, started=T0 + 3 * DAY + 3.0, model="org/model v2%"), base=root)
    save(root, "odd/no_model", conversation(1, T0 + 4 * DAY, "nm"), model=None)
    save(root, "odd/no_time", [user("when?", None), answer("never", None)], model="local-x")
    bad = root / "bad" / "broken.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"history": [{"role": "user", "content_ite')
    old = time.time() - 60
    os.utime(bad, (old, old))
    gen_corpus.generate(root / "gen", files=24, turns=3, seed=3, shard_size=8)
    return root


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "cache")


def quiet_sync(*args: Any, **kwargs: Any) -> traces.SyncResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        return traces.sync(*args, **kwargs)


def expected(src: Path, kind: str = "turns", **kwargs: Any) -> pa.Table:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        df = LOADERS[kind](src, progress=False, **kwargs)
    table = traces.to_arrow(df).replace_schema_metadata(None)
    # the dataset's model comes from its partition directories as a string column (null where missing)
    return table.set_column(table.schema.get_field_index("model"), "model", table["model"].cast(pa.string()))


def stored(ds_dir: Path, kind: str = "turns") -> pa.Table:
    table = traces.dataset(ds_dir, kind).to_table()
    return table.drop_columns(["month"]).replace_schema_metadata(None)


def _sorted(table: pa.Table) -> pa.Table:
    order = [c for c in ("trace_id", "turn", "message_index", "item_index", "event_index", "started", "status") if c in table.column_names]
    # dictionary columns decoded: files written apart have dictionaries of their own
    table = pa.table({c: table[c].cast(pa.string()) if pa.types.is_dictionary(table[c].type) else table[c] for c in table.column_names})
    return table.take(pc.sort_indices(table.select(order), [(c, "ascending") for c in order]))


def assert_same(ds_dir: Path, src: Path, kind: str = "turns", **kwargs: Any) -> None:
    got, want = stored(ds_dir, kind), expected(src, kind, **kwargs)
    assert got.schema == want.schema
    got, want = _sorted(got), _sorted(want)
    assert got.num_rows == want.num_rows
    if not got.equals(want):
        g, w = got.to_pandas(), want.to_pandas()
        pd.testing.assert_frame_equal(g, w)  # names the first difference
        raise AssertionError("tables differ")


def mtimes(ds_dir: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in ds_dir.rglob("*.parquet")}


# --------------------------------------------------------------------------- equal to the loaders


@pytest.mark.parametrize("kind", ["turns", "items", "events"])
def test_sync_gives_the_loaders_rows(corpus: Path, tmp_path: Path, kind: str) -> None:
    ds_dir = tmp_path / "ds"
    with ThreadPoolExecutor(2) as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = traces.sync(corpus, ds_dir, kind=kind, executor=pool, chunk_files=4)
    # every kind reads the trace files, as every loader does: the damaged one is skipped by all
    assert [str(w.message) for w in caught if w.category is traces.TraceLoadWarning] == [
        f"mmsp_notebook.traces.sync: skipped 1 of {res.converted} trace files (1 not valid JSON (truncated, "
        "partially written or corrupt)); "
        "see the result's .skipped for paths and reasons"
    ]
    assert res.converted == res.traces + 1  # the damaged file is counted, not loaded
    assert [s["path"] for s in res.skipped] == [str(corpus / "bad" / "broken.json")]
    assert "not valid JSON" in res.skipped[0]["reason"]
    assert res.rows > 0 and res.files > 1
    assert_same(ds_dir, corpus, kind)
    with warnings.catch_warnings(record=True) as caught:  # the first sync has finished: no warning says otherwise
        warnings.simplefilter("always")
        frame = traces.dataset(ds_dir, kind).to_table().to_pandas()  # a model-less trace's null partition too
    assert not [w for w in caught if w.category is traces.TraceLoadWarning], [str(w.message) for w in caught]
    assert len(frame) == res.rows and frame["model"].isna().any() == (kind != "events")
    # partitions: UTC month of the start and the model; odd model names round-trip, missing ones are null
    parts = {p.relative_to(ds_dir / kind).parts[:2] for p in (ds_dir / kind).rglob("*.parquet")}
    assert ("month=2026-01", "model=glm-5.3") in parts
    if kind != "events":
        assert ("month=2026-01", "model=org%2Fmodel%20v2%25") in parts
        assert any(d == "month=__HIVE_DEFAULT_PARTITION__" for d, _ in parts)


def test_a_damaged_trace_file_takes_its_sidecar_out_of_every_kind(tmp_path: Path) -> None:
    src = tmp_path / "src"
    events = [[200.0, "text.delta", 1], [1000.0, "stop", 0]]
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": T0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a"}], "finish_reason": "stop",
                "usage_metadata": {"prompt_tokens": 3, "response_tokens": 1}, "created_at": T0 + 1000}]
    for tid in ("app/ok", "app/broken"):
        Tracer(cache_dir=str(src)).save_history("demo", history, tid, {"trace_id": tid})
        append_sidecar({"v": 1, "trace_id": tid, "turn": 0, "message_index": 1, "model": "demo", "client_type": "mmsp",
                        "status": "complete", "error": None, "started_at": T0 + 2.5, "ttft_ms": 200.0,
                        "total_ms": 1000.0, "usage": None, "finish_reason": "stop", "events": events}, base=src)
    broken = src / "app" / "broken.json"
    broken.write_text(broken.read_text()[:40])
    for kind in ("turns", "items", "events"):
        res = quiet_sync(src, tmp_path / "ds", kind=kind)
        assert [Path(s["path"]).name for s in res.skipped] == ["broken.json"], kind
        rows = traces.dataset(tmp_path / "ds", kind).to_table().to_pandas()
        assert set(rows["trace_id"]) == {"app/ok"}, kind
    assert len(traces.dataset(tmp_path / "ds", "events").to_table()) == 2


def test_created_at_in_seconds_gives_the_partition_month_of_its_time(tmp_path: Path) -> None:
    src = tmp_path / "src"
    s0 = T0 // 1000  # 2026-01-01 in Unix seconds, as producers other than mmsp's Tracer write it
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": s0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a"}], "finish_reason": "stop",
                "usage_metadata": {"prompt_tokens": 3, "response_tokens": 1}, "created_at": s0 + 2.5},
               {"role": "user", "content_items": [{"type": "text.done", "text": "q2"}], "created_at": T0 + 40 * 86_400_000},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a2"}], "finish_reason": "stop",
                "usage_metadata": {"prompt_tokens": 3, "response_tokens": 1}, "created_at": s0 + 40 * 86_400 + 2}]
    Tracer(cache_dir=str(src)).save_history("demo", history, "other/seconds", {"trace_id": "other/seconds"})
    for kind in ("turns", "items"):
        quiet_sync(src, tmp_path / "ds", kind=kind)
        parts = sorted(p.relative_to(tmp_path / "ds" / kind).parts[0] for p in (tmp_path / "ds" / kind).rglob("*.parquet"))
        assert set(parts) == {"month=2026-01", "month=2026-02"}, (kind, parts)
        assert_same(tmp_path / "ds", src, kind)


def test_models_no_partition_directory_can_hold_are_skipped_by_name(tmp_path: Path) -> None:
    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    odd = ["a/b=c%20d", "..", ".hidden", "month=2020-01", "emoji🙂", "semi;colon?q#h", "sp ace", "a\\b"]
    for k, model in enumerate(odd):
        save(src, f"odd/{k}", conversation(1, T0 + k * 60_000, f"o{k}"), model=model)
    save(src, "none", conversation(1, T0 + DAY, "n"), model=None)
    long = {"long/ascii": "x" * 300, "long/cjk": "模型" * 30, "long/hive": "__HIVE_DEFAULT_PARTITION__"}
    for k, (tid, model) in enumerate(long.items()):
        save(src, tid, conversation(1, T0 + 2 * DAY + k * 60_000, f"l{k}"), model=model)
    with pytest.warns(traces.TraceLoadWarning, match="skipped 3 of 12 trace files"):
        res = traces.sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    reasons = {Path(s["path"]).stem: s["reason"] for s in res.skipped}
    assert set(reasons) == {"ascii", "cjk", "hive"}
    assert reasons["ascii"].startswith("model id too long for a partition directory: 300 bytes URI-encoded")
    assert reasons["cjk"].startswith("model id too long for a partition directory: 540 bytes URI-encoded")
    assert "Hive's name for a missing value" in reasons["hive"]
    # the others round-trip through every reader, the missing model as null
    frame = traces.dataset(ds_dir).to_table().to_pandas()
    assert sorted(frame["model"].dropna()) == sorted(odd) and frame["model"].isna().sum() == 1
    q = traces.query("SELECT model, count(*) AS n FROM turns GROUP BY model", ds_dir)
    assert sorted(q["model"].dropna()) == sorted(odd) and q["n"].sum() == 9
    # moved under directories named as partitions are: DuckDB would take those for the partitions
    whole = "SELECT * FROM turns ORDER BY trace_id"
    before = traces.query(whole, ds_dir)
    moved = tmp_path / "snapshots" / "month=2024-01" / "model=all" / "ds"
    shutil.move(str(ds_dir), str(moved))
    after = traces.query(whole, moved)
    pd.testing.assert_frame_equal(after, before)
    assert sorted(after["model"].dropna()) == sorted(odd) and "2024-01" not in set(after["month"].astype(str))
    assert traces.summary(moved, by="model")["count"].sum() == 9
    shutil.move(str(moved), str(ds_dir))
    want = expected(src)
    assert set(want["trace_id"].to_pylist()) - set(frame["trace_id"]) == set(long)
    # skipped until they change, as any unreadable file
    again = quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert again.converted == 0 and len(again.skipped) == 3 and again.new_skipped == []


def test_models_differing_only_in_case_get_partition_directories_of_their_own(tmp_path: Path) -> None:
    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    models = {"upper": "GLM-5", "lower": "glm-5", "mixed": "Glm-5", "slash": "Org/Model%2F", "slash_lower": "org/model%2f"}
    for k, (tid, model) in enumerate(models.items()):
        save(src, tid, conversation(1, T0 + k * 60_000, tid), model=model)
        append_sidecar(record(tid, 0, 1, started=T0 + k * 60_000 + 1.0, model=model), base=src)
    res = quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert res.skipped == [] and res.converted == len(models)
    root = ds_dir / "turns"
    dirs = {p.name for p in root.glob("month=*/model=*")}
    # no two directory names are one on a file system that ignores case
    assert len(dirs) == len({d.lower() for d in dirs}) == len(models)
    # readers give every trace its exact model id, on this tree and on one whose names were folded to
    # lower case, as a case-insensitive file system may hand them back
    folded = tmp_path / "folded"
    for f in root.rglob("*.parquet"):
        target = folded / str(f.relative_to(root)).lower()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
    import duckdb
    import pyarrow.dataset as pads

    for tree in (root, folded):
        table = pads.dataset(tree, format="parquet", partitioning="hive").to_table(columns=["trace_id", "model"])
        assert dict(zip(table["trace_id"].to_pylist(), table["model"].to_pylist())) == models, tree
        rows = duckdb.sql(f"SELECT DISTINCT trace_id, model FROM read_parquet('{tree}/*/*/*.parquet', hive_partitioning = true)").fetchall()
        assert dict(rows) == models, tree
    got = traces.query("SELECT DISTINCT trace_id, model FROM turns", ds_dir)
    assert dict(zip(got["trace_id"], got["model"].astype(str))) == models
    moved = tmp_path / "month=2024-01" / "model=all" / "ds"  # the query's views then decode the path themselves
    shutil.move(str(ds_dir), str(moved))
    got = traces.query("SELECT DISTINCT trace_id, model FROM turns", moved)
    assert dict(zip(got["trace_id"], got["model"].astype(str))) == models
    shutil.move(str(moved), str(ds_dir))
    assert dict(zip(*traces.dataset(ds_dir).to_table(columns=["trace_id", "model"]).to_pydict().values())) == models
    assert_same(ds_dir, src)
    # the files' own names give their model back (for recomputing costs), folded or not
    from mmsp_notebook.traces._files import partition_model

    for name in traces.dataset(ds_dir).files:
        part = os.path.relpath(name, root)
        model = models[pq.read_table(name, columns=["trace_id"])["trace_id"][0].as_py()]
        assert partition_model(part) == partition_model(part.lower()) == model
    assert quiet_sync(src, ds_dir, prices={"GLM-5": {"prompt_tokens": 1.0, "response_tokens": 2.0}}).repriced == 1
    assert_same(ds_dir, src, prices={"GLM-5": {"prompt_tokens": 1.0, "response_tokens": 2.0}})


def test_file_names_that_are_not_utf8_are_skipped_by_name(tmp_path: Path) -> None:
    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    save(src, "ok", conversation(1, T0, "ok"))
    latin = save(src, "latin", conversation(1, T0 + 60_000, "la"))
    os.rename(latin, os.path.join(os.fsencode(src), b"caf\xe9.json"))  # a name written on another system
    odd_dir = os.path.join(os.fsencode(src), b"d\xff")
    os.mkdir(odd_dir)
    shutil.move(str(save(src, "x", conversation(1, T0 + 120_000, "x"))), os.path.join(odd_dir, b"t.json"))
    assert len(traces.load_turns(src, progress=False)) == 3  # the loaders read them
    with pytest.warns(traces.TraceLoadWarning, match=r"skipped 2 of 3 trace files \(2 file name is not valid UTF-8"):
        res = traces.sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert sorted(s["path"] for s in res.skipped) == [f"{src}/caf\\xe9.json", f"{src}/d\\xff/t.json"]
    assert res.traces == 1 and stored(ds_dir)["trace_id"].to_pylist() == ["ok"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing new to report
        again = traces.sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert again.converted == 0 and again.skipped == res.skipped
    os.rename(os.path.join(os.fsencode(src), b"caf\xe9.json"), src / "cafe.json")  # renamed: taken
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # listed again: the other one stays out, reported before
        third = traces.sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert third.converted == 1 and [s["path"] for s in third.skipped] == [f"{src}/d\\xff/t.json"]
    assert sorted(stored(ds_dir)["trace_id"].to_pylist()) == ["cafe", "ok"]
    # a directory with such a name keeps no mtime: the folder is listed every time, changes in it are seen
    old = time.time() - 60
    for d in (os.fsencode(src), odd_dir):
        os.utime(d, (old, old))  # (out of the window where a directory's mtime is not trusted)
    quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    elsewhere = tmp_path / "elsewhere"  # (written there, so that only the odd directory changes)
    shutil.move(str(save(elsewhere, "y", conversation(1, T0 + 180_000, "y"))), os.path.join(odd_dir, b"u.json"))
    with pytest.warns(traces.TraceLoadWarning, match="skipped 1 of 1 trace files"):
        fourth = traces.sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert sorted(s["path"] for s in fourth.skipped) == [f"{src}/d\\xff/t.json", f"{src}/d\\xff/u.json"]
    # a link to it by a UTF-8 name the listing meets first (as the loaders do): its traces are taken
    os.symlink(odd_dir, os.path.join(os.fsencode(src), b"a_link"))
    fifth = quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    assert fifth.converted == 2 and fifth.skipped == []
    assert sorted(stored(ds_dir)["trace_id"].to_pylist()) == ["a_link/t", "a_link/u", "cafe", "ok"]
    shutil.move(str(save(elsewhere, "z", conversation(1, T0 + 240_000, "z"))), os.path.join(odd_dir, b"v.json"))
    assert quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1)).converted == 1
    assert "a_link/v" in stored(ds_dir)["trace_id"].to_pylist()


def test_repeated_histories_are_shown_once_like_the_loader(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, chunk_files=1, executor=ThreadPoolExecutor(2))  # every copy in its own chunk
    got = stored(ds_dir)
    agent = got.filter(pc.starts_with(got["trace_id"], "agent/"))
    assert agent.num_rows == 3  # 1 + 2 + 3 copies of three turns
    # the copy timed by a sidecar wins: turn 1 comes from agent/00002
    rows = {(r["trace_id"], r["turn"]): r["source"] for r in agent.to_pylist()}
    assert rows == {("agent/00001", 0): "trace", ("agent/00002", 1): "trace+sidecar", ("agent/00003", 2): "trace"}
    assert_same(ds_dir, corpus)
    assert_same(ds_dir, corpus, "turns", dedupe=True)
    items_dir = tmp_path / "ds_items"
    quiet_sync(corpus, items_dir, kind="items", chunk_files=2, executor=ThreadPoolExecutor(2))
    assert_same(items_dir, corpus, "items")
    # dedupe=False keeps every copy, as the loader does
    quiet_sync(corpus, tmp_path / "all", dedupe=False)
    assert_same(tmp_path / "all", corpus, "turns", dedupe=False)


@pytest.mark.parametrize("chunk_files", [1, 100])
def test_items_keep_the_copies_the_loaders_keep(tmp_path: Path, chunk_files: int) -> None:
    """A comparison's prompt (one trace per model, the same prompt) stays in every model's items;
    of a repeated history the copy whose sidecar times its turn is kept, as in the turns."""
    src = tmp_path / "src"
    prompt = user("compare us", T0)
    save(src, "cmp/a", [prompt, answer("I am a", T0 + 900)], model="glm-5.3")
    save(src, "cmp/b", [prompt, answer("I am b, longer", T0 + 950, response=9)], model="gemini-3.8-flash")
    history = conversation(2, T0 + DAY, "rep")
    save(src, "rep/1", history)
    save(src, "rep/2", history + conversation(1, T0 + DAY + 50_000, "more"))
    for turn in range(2):
        append_sidecar(record("rep/2", turn, 2 * turn + 1, started=(T0 + DAY + 10_000 * turn) / 1000 + 0.1), base=src)
    for kind in ("items", "turns"):
        quiet_sync(src, tmp_path / "ds", kind=kind, chunk_files=chunk_files)
        assert_same(tmp_path / "ds", src, kind)
    items = stored(tmp_path / "ds", "items")
    prompts = items.filter(pc.equal(items["role"].cast(pa.string()), "user"))
    assert sorted(set(prompts.filter(pc.starts_with(prompts["trace_id"], "cmp/"))["trace_id"].to_pylist())) == ["cmp/a", "cmp/b"]
    assert set(items.filter(pc.starts_with(items["trace_id"], "rep/"))["trace_id"].to_pylist()) == {"rep/2"}


@pytest.mark.parametrize("chunk_files", [1, 100])
def test_a_sidecar_record_of_another_message_times_no_copy(tmp_path: Path, chunk_files: int) -> None:
    """A repeated history whose second file's sidecar times messages of another version of the
    conversation (message indexes that are not its turns'): no copy is timed, so the first is
    kept, in the turns and the items, by the loaders and the dataset alike."""
    src = tmp_path / "src"
    history = conversation(2, T0 + DAY, "rep")
    save(src, "rep/1", history)
    save(src, "rep/2", history)
    for turn in range(2):
        append_sidecar(record("rep/2", turn, 2 * turn + 3, started=T0 + DAY + 10_000 * turn + 5.0), base=src)
    turns = traces.load_turns(src)
    assert turns["trace_id"].tolist() == ["rep/1"] * 2 and turns["source"].astype(str).tolist() == ["trace"] * 2
    assert set(traces.load_items(src)["trace_id"]) == {"rep/1"} and traces.load_events(src).empty
    for kind in ("items", "turns", "events"):
        quiet_sync(src, tmp_path / kind, kind=kind, chunk_files=chunk_files)
        assert_same(tmp_path / kind, src, kind)


def test_a_record_that_did_not_complete_times_no_message_in_the_dataset_either(tmp_path: Path) -> None:
    """A record naming a message without having completed is a failed attempt (no message index,
    the message untimed), and a completed one beyond the trace file a row of its own: the same
    rows from the loaders and the dataset."""
    src = tmp_path / "src"
    save(src, "fx/1", conversation(2, T0 + DAY, "fx"))
    append_sidecar(record("fx/1", 0, 1, started=T0 + DAY + 5.0), base=src)
    append_sidecar(record("fx/1", 1, 3, "incomplete", started=T0 + DAY + 10_005.0), base=src)
    append_sidecar(record("fx/1", 2, 5, started=T0 + DAY + 20_005.0), base=src)
    turns = traces.load_turns(src)
    assert [(str(s), st) for s, st in zip(turns["source"], turns["status"])] == [
        ("trace+sidecar", "complete"), ("sidecar", "incomplete"), ("trace", "complete"), ("sidecar", "complete")]
    assert turns["message_index"].tolist() == [1, pd.NA, 3, 5]
    for kind in ("turns", "items", "events"):
        quiet_sync(src, tmp_path / kind, kind=kind)
        assert_same(tmp_path / kind, src, kind)


def test_a_message_index_is_read_as_one_integer_in_the_dataset_too(tmp_path: Path) -> None:
    """A message index of ``3.0`` is 3 (here another message's: the turn untimed), one that is no
    integer is absent (the record a failed row of its own): the loaders' rows, in the dataset."""
    src = tmp_path / "src"
    save(src, "fl/1", conversation(3, T0 + DAY, "fl"))
    append_sidecar(record("fl/1", 0, 1.0, started=T0 + DAY + 5.0), base=src)  # type: ignore[arg-type]
    append_sidecar(record("fl/1", 1, 5.0, started=T0 + DAY + 10_005.0), base=src)  # type: ignore[arg-type]
    append_sidecar(record("fl/1", 2, "x", started=T0 + DAY + 20_005.0), base=src)  # type: ignore[arg-type]
    turns = traces.load_turns(src)
    assert turns["source"].astype(str).tolist() == ["trace+sidecar", "trace", "sidecar", "trace"]
    assert turns["message_index"].tolist() == [1, 3, pd.NA, 5]
    for kind in ("turns", "items", "events"):
        quiet_sync(src, tmp_path / kind, kind=kind)
        assert_same(tmp_path / kind, src, kind)


def test_a_key_in_a_sidecar_error_type_is_redacted_in_the_dataset(tmp_path: Path) -> None:
    """The error type of a turns row is redacted as its message is, in the dataset as in the loaders."""
    src = tmp_path / "src"
    key = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    failed = record("ky/1", 0, None, "error", started=T0 + DAY + 5.0)
    failed["error"] = {"type": f"AuthenticationError {key}", "message": f"Incorrect API key: {key}"}
    append_sidecar(failed, base=src)  # type: ignore[arg-type]
    quiet_sync(src, tmp_path / "ds")
    rows = stored(tmp_path / "ds", "turns")
    assert rows["error_type"].to_pylist() == ["AuthenticationError [redacted]"]
    assert rows["error_message"].to_pylist() == ["Incorrect API key: [redacted]"]
    assert_same(tmp_path / "ds", src, "turns")


def test_default_process_pool_and_progress(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = quiet_sync(corpus, tmp_path / "ds", chunk_files=5, progress=True)
    assert res.converted > 5
    assert "syncing turns" in capsys.readouterr().err
    assert_same(tmp_path / "ds", corpus)


# --------------------------------------------------------------------------- incremental


def test_resync_with_nothing_changed_touches_nothing(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    first = quiet_sync(corpus, ds_dir, chunk_files=8)
    before = mtimes(ds_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error", traces.TraceLoadWarning)  # the damaged file is not reported again
        again = traces.sync(corpus, ds_dir)
    assert (again.converted, again.removed, again.unchanged) == (0, 0, first.converted)
    assert again.skipped == first.skipped  # still named in the result
    assert mtimes(ds_dir) == before
    assert (again.rows, again.files) == (first.rows, first.files)


def test_a_later_sync_writes_with_the_schema_of_the_files_already_there(corpus: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A small sync learns the data files' schema from one of them (no empty frame built): the same
    schema as the first sync's, and the files it writes carry it."""
    import pyarrow.parquet as pq

    from mmsp_notebook.traces import _convert

    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, chunk_files=8)
    save(corpus, "app/chat_9", conversation(2, T0 + 5 * DAY, "new"))  # one new trace

    def no_empty_frame(*args: Any) -> Any:
        raise AssertionError("the schema was built again")

    monkeypatch.setattr(_convert, "file_schema", no_empty_frame)
    again = traces.sync(corpus, ds_dir, progress=False)
    assert again.converted == 1
    monkeypatch.undo()
    files = list((ds_dir / "turns").rglob("*.parquet"))
    schemas = {pq.read_schema(p).remove_metadata() for p in files}
    assert len(files) > 1 and len(schemas) == 1  # the new file's as the first sync's
    assert schemas.pop().names == _convert.file_schema("turns").names


def test_new_changed_deleted_and_damaged_files(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, chunk_files=6)
    # the Tracer rewrites a conversation after each turn: chat_1 gets a fourth turn
    save(corpus, "app/chat_1", conversation(4, T0))
    append_sidecar(record("app/chat_1", 3, 7, started=T0 + 30_002.0), base=corpus)
    save(corpus, "new/one", conversation(2, T0 + 5 * DAY, "new"))
    (corpus / "gen" / "shard_00" / "agent1" / "conversation_00001.json").unlink()
    damaged = corpus / "gen" / "shard_01" / "agent2" / "conversation_00009.json"
    damaged.write_bytes(damaged.read_bytes()[:100])
    with pytest.warns(traces.TraceLoadWarning, match="skipped 1 of 3 trace files"):
        res = traces.sync(corpus, ds_dir)
    assert (res.converted, res.removed) == (3, 1)
    assert {s["path"] for s in res.new_skipped} == {str(damaged)}
    assert {s["path"] for s in res.skipped} == {str(damaged), str(corpus / "bad" / "broken.json")}
    got = stored(ds_dir)
    chat = got.filter(pc.equal(got["trace_id"], "app/chat_1"))
    assert chat.num_rows == 6  # 4 turns + the failed and cancelled attempts, never the old rows again
    assert not pc.any(pc.equal(got["trace_id"], "gen/shard_00/agent1/conversation_00001")).as_py()
    assert not pc.any(pc.equal(got["trace_id"], "gen/shard_01/agent2/conversation_00009")).as_py()
    assert_same(ds_dir, corpus)
    # the damaged file written again in full comes back
    gen_corpus.generate(tmp_path / "regen", files=24, turns=3, seed=3, shard_size=8)
    shutil.copy(tmp_path / "regen" / "shard_01" / "agent2" / "conversation_00009.json", damaged)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 1 and str(damaged) not in {s["path"] for s in res.skipped}
    assert_same(ds_dir, corpus)


def test_copies_follow_their_winner(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    # the shown copy of turn 0 lives in agent/00001: delete it, the copy in agent/00002 is shown
    (corpus / "agent" / "00001.json").unlink()
    quiet_sync(corpus, ds_dir)
    assert_same(ds_dir, corpus)
    got = stored(ds_dir)
    assert ("agent/00002", 0) in {(r["trace_id"], r["turn"]) for r in got.select(["trace_id", "turn"]).to_pylist()}
    # a sidecar now times turn 0 in agent/00003: that copy wins over agent/00002's
    append_sidecar(record("agent/00003", 0, 1, started=T0 + 2 * DAY + 7.0, model="gemini-3.8-flash"), base=corpus)
    quiet_sync(corpus, ds_dir)
    assert_same(ds_dir, corpus)
    rows = stored(ds_dir).filter(pc.starts_with(stored(ds_dir)["trace_id"], "agent/")).to_pylist()
    assert sorted((r["trace_id"], r["turn"]) for r in rows) == [("agent/00002", 1), ("agent/00003", 0), ("agent/00003", 2)]
    # a file touched without a change is not converted again (content hash of recent files)
    again = quiet_sync(corpus, ds_dir)
    assert again.converted == 0


# --------------------------------------------------------------------------- interrupted syncs


class FailingExecutor(ThreadPoolExecutor):
    """A thread pool whose conversion tasks fail after ``ok`` of them, as a cluster losing its workers."""

    def __init__(self, ok: int) -> None:
        super().__init__(2)
        self.ok = ok

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if fn.__name__ == "convert":
            if self.ok <= 0:
                def lost(*_a: Any, **_k: Any) -> Any:
                    raise RuntimeError("worker lost")

                return super().submit(lost)
            self.ok -= 1
        return super().submit(fn, *args, **kwargs)


def test_an_interrupted_sync_leaves_a_readable_dataset_and_the_next_finishes(corpus: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="worker lost"), warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        traces.sync(corpus, ds_dir, chunk_files=3, executor=FailingExecutor(ok=4))
    want = _sorted(expected(corpus))
    with pytest.warns(traces.TraceLoadWarning, match="first traces.sync into .* has not finished"):
        part = stored(ds_dir)  # readable, a part of the rows, never a row twice
    with pytest.warns(traces.TraceLoadWarning, match="sync again to finish it"):
        assert traces.query("SELECT count(*) AS n FROM turns", ds_dir)["n"][0] == part.num_rows
    assert 0 < part.num_rows < want.num_rows
    keys = ["trace_id", "turn", "message_index", "started", "status"]
    assert len(part.to_pandas()[keys].drop_duplicates()) == part.num_rows
    res = quiet_sync(corpus, ds_dir, chunk_files=3)
    assert 0 < res.converted < res.converted + res.unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # finished: read without a warning
        assert_same(ds_dir, corpus)
    # a re-sync that dies after dropping a replaced trace's old rows, before its new rows (written
    # under a hidden name) are put in their place, is finished by the next
    save(corpus, "app/chat_1", conversation(4, T0))  # grew by a turn: its new rows are added
    save(corpus, "agent/00001", conversation(1, T0 + 2 * DAY, "agent-changed"), model="gemini-3.8-flash")  # replaced

    def dies(path: str) -> str:
        raise RuntimeError("process killed")

    with monkeypatch.context() as mp:
        mp.setattr(_dataset, "held_path", dies)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(corpus, ds_dir, chunk_files=1, executor=ThreadPoolExecutor(2))
    held = [p for p in (ds_dir / "turns").rglob(".*.held")]
    assert len(held) == 1  # the new rows, which no reader sees
    assert not new_rows(ds_dir, T0 + 2 * DAY) and "app/chat_1" in set(stored(ds_dir)["trace_id"].to_pylist())
    quiet_sync(corpus, ds_dir)
    assert_same(ds_dir, corpus)
    assert not [p for p in (ds_dir / "turns").rglob(".*")]
    # ... and one that dies after those files are renamed into place, before the manifest lists
    # them: readers of the manifest see the trace's old rows or none (a file emptied of them is
    # removed only once the manifest no longer lists it), never the new ones besides
    save(corpus, "agent/00001", conversation(2, T0 + 3 * DAY, "agent-again"), model="gemini-3.8-flash")
    with monkeypatch.context() as mp:
        mp.setattr(_manifest.Manifest, "swap_units", lambda *a, **k: dies(""))
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(corpus, ds_dir)
    assert not new_rows(ds_dir, T0 + 3 * DAY)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 1
    assert_same(ds_dir, corpus)
    assert new_rows(ds_dir, T0 + 3 * DAY) == 2  # (the check above would have seen them)
    assert not [p for p in (ds_dir / "turns").rglob(".*")]


def killed(*_args: Any) -> Any:
    """A step of the sync whose process is killed right there."""
    raise RuntimeError("process killed")


def test_a_sync_stopped_after_removing_rows_loses_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows leave the data files only after the manifest says so: a sync stopped after removing a
    changed trace's rows, or a repeated message's losing copy, loses none of them for good."""
    src, ds_dir = tmp_path / "src", tmp_path / "ds"
    save(src, "t0", conversation(2, T0))
    save(src, "t1", conversation(2, T0 + 100_000, "other"))
    save(src, "t2", conversation(1, T0 + 200_000, "third"))  # (in t1's file: it is rewritten, not emptied)
    quiet_sync(src, ds_dir)
    real_drop = _dataset._Sync._drop

    def drop_then_die(self: Any, ids: list[str]) -> Any:
        real_drop(self, ids)
        killed()

    # caught half-written by the sync (not an extension of its rows: replaced), which stops once
    # the rows are gone; then the Tracer finishes the file, one turn longer than the dataset's
    path = save(src, "t0", conversation(3, T0))
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "_drop", drop_then_die)
        with pytest.raises(RuntimeError, match="process killed"), warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            traces.sync(src, ds_dir)
    path.write_bytes(whole)
    os.utime(path, ns=(time.time_ns() - 5 * 10**9,) * 2)  # (past the racy window: the signature decides)
    assert quiet_sync(src, ds_dir).converted == 1
    assert_same(ds_dir, src)
    assert len(stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "t0"))) == 3
    assert quiet_sync(src, ds_dir).converted == 0
    # a copy of t1 that sorts first wins: the sync stops once t1's copy is removed from its file,
    # before the manifest says it is hidden; then the winning copy is deleted: t1's rows come back
    save(src, "a/copy", conversation(2, T0 + 100_000, "other"))
    real_kept = _manifest.Manifest.set_kept

    def kept_then_die(self: Any, db: Any, units: Any, kept: int) -> None:
        if kept == 0:
            killed()
        real_kept(self, db, units, kept)

    with monkeypatch.context() as mp:
        mp.setattr(_manifest.Manifest, "set_kept", kept_then_die)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    assert len(stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "t1"))) == 0  # (the copy was removed)
    (src / "a" / "copy.json").unlink()
    quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    assert len(stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "t1"))) == 2
    # stopped the same way with the winning copy kept, the next sync finishes hiding t1's copy
    save(src, "a/copy", conversation(2, T0 + 100_000, "other"))
    with monkeypatch.context() as mp:
        mp.setattr(_manifest.Manifest, "set_kept", kept_then_die)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    assert sorted(set(stored(ds_dir)["trace_id"].to_pylist())) == ["a/copy", "t0", "t2"]
    # copies that win (sorting first) and lose (last) are settled as their chunk is committed: a
    # sync stopped right after shows each message once, as the loaders do
    save(src, "0/first", conversation(1, T0 + 200_000, "third"))
    save(src, "z/last", conversation(3, T0))

    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "resolve", killed)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    assert sorted(set(stored(ds_dir)["trace_id"].to_pylist())) == ["0/first", "a/copy", "t0"]
    quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    # stopped after marking the dataset's copy as being hidden, before removing its rows: the next
    # sync counts that copy as one that may be shown, and hides it with its chunk
    save(src, "c", conversation(2, T0 + 300_000, "fourth"))
    quiet_sync(src, ds_dir)
    save(src, "0/c", conversation(2, T0 + 300_000, "fourth"))

    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "_rewrite", killed)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "resolve", killed)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    assert "c" not in set(stored(ds_dir)["trace_id"].to_pylist())


def test_replaced_traces_settle_their_copies_before_their_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace whose rows are all replaced (a new config) and that now repeats messages of other
    traces is settled as its commit happens: a sync stopped right after shows each message once."""
    src, ds_dir = tmp_path / "src", tmp_path / "ds"
    save(src, "m/wins", conversation(2, T0, "one"))
    save(src, "m/loses", conversation(2, T0 + 100_000, "two"))
    save(src, "z/shown", conversation(2, T0 + 200_000, "three"))
    save(src, "a/shown", conversation(2, T0 + 300_000, "four"))
    for name in ("p/one", "p/two"):
        save(src, name, conversation(1, T0 + 400_000, name))
    quiet_sync(src, ds_dir, chunk_files=1)
    # m/wins now repeats z/shown's turns (and sorts first: z/shown's copies are hidden); m/loses
    # repeats a/shown's (a/shown keeps them); p/one and p/two, in chunks of their own, repeat
    # each other's
    save(src, "m/wins", conversation(2, T0 + 200_000, "three"), temperature=0.9)
    save(src, "m/loses", conversation(2, T0 + 300_000, "four"), temperature=0.9)
    for name in ("p/one", "p/two"):
        save(src, name, conversation(1, T0 + 500_000, "five"), temperature=0.9)
    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "resolve", killed)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir, chunk_files=1)
    assert_same(ds_dir, src)
    ids = stored(ds_dir)["trace_id"].to_pylist()
    assert sorted(set(ids)) == ["a/shown", "m/wins", "p/one"]
    assert quiet_sync(src, ds_dir, chunk_files=1).converted == 0
    assert_same(ds_dir, src)


def test_a_replaced_trace_that_empties_a_file_hides_a_copy_half_hidden_there(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A file left with none of its rows by a replaced trace is removed, not rewritten, when the
    copy its new rows hide was in that file (hidden half-way by a stopped sync)."""
    src, ds_dir = tmp_path / "src", tmp_path / "ds"
    save(src, "a/t", conversation(1, T0, "t"))
    save(src, "b/u", conversation(1, T0 + 1000, "u"))  # (in a/t's file)
    quiet_sync(src, ds_dir)
    real_rewrite = _dataset._Sync._rewrite

    def rewrite_then_die(self: Any, by_file: Any) -> Any:
        real_rewrite(self, by_file)
        killed()

    # a copy that sorts first: b/u's rows leave the file, then the sync stops
    save(src, "0/w", conversation(1, T0 + 1000, "u"))
    with monkeypatch.context() as mp:
        mp.setattr(_dataset._Sync, "_rewrite", rewrite_then_die)
        with pytest.raises(RuntimeError, match="process killed"):
            quiet_sync(src, ds_dir)
    (src / "0" / "w.json").unlink()
    # a/t now repeats b/u's turn with another config: its rows are replaced, its file emptied
    save(src, "a/t", conversation(1, T0 + 1000, "u"), temperature=0.9)
    quiet_sync(src, ds_dir)
    assert_same(ds_dir, src)
    assert stored(ds_dir)["trace_id"].to_pylist() == ["a/t"]
    # a reader that globs the folder sees what the manifest lists: the emptied file is gone
    assert {str(p) for p in (ds_dir / "turns").rglob("*.parquet")} == set(traces.dataset(ds_dir).files)


@pytest.mark.serial  # enough reads and syncs must overlap within 90 s
def test_queries_run_while_syncs_change_the_files(tmp_path: Path) -> None:
    """``query`` and ``summary`` read again when a sync rewrites, merges or removes a file they
    listed; ``dataset`` lists again when one goes before it is made. Syncs grow conversations
    (their rows added in new files, merged every few syncs) while another thread reads."""
    src, ds_dir = tmp_path / "src", tmp_path / "ds"
    for i in range(30):
        save(src, f"t{i}", conversation(1, T0 + i * 60_000, f"c{i}"), model=f"m{i % 3}")
    with pytest.raises(TraceNotFoundError):
        traces.query("SELECT 1", ds_dir)
    quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1))
    stop = threading.Event()
    syncs = []

    def grow() -> None:
        k = 1
        while not stop.is_set():
            k += 1
            for i in range(0, 30, 3):
                save(src, f"t{i}", conversation(k, T0 + i * 60_000, f"c{i}"), model=f"m{i % 3}")
            syncs.append(quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(1)))

    writer = threading.Thread(target=grow)
    writer.start()
    reads = 0
    try:
        until = time.monotonic() + 90  # (enough reads and syncs overlap however busy the machine)
        while (reads < 25 or len(syncs) < 6) and time.monotonic() < until and writer.is_alive():
            n = traces.query("SELECT count(*) AS n FROM turns", ds_dir)["n"][0]
            assert n >= 30
            assert traces.summary(ds_dir, by="model")["count"].sum() >= 30
            traces.dataset(ds_dir)  # (reading it is a snapshot's: a later sync may remove its files)
            reads += 1
    finally:
        stop.set()
        writer.join()
    assert reads >= 25 and len(syncs) >= 6
    assert any(p.name.endswith("-m.parquet") for p in (ds_dir / "turns").rglob("*.parquet"))  # (merges happened)
    assert_same(ds_dir, src)


def new_rows(ds_dir: Path, since: int) -> int:
    """Rows of agent/00001 that started at ``since`` (ms) or later, as a reader of the manifest sees them."""
    got = stored(ds_dir)
    mine = got.filter(pc.equal(got["trace_id"], "agent/00001"))
    return sum(1 for t in mine["started"].to_pylist() if t is not None and t.timestamp() * 1000 >= since)


def test_a_trace_that_grew_gets_only_its_new_rows(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    before = mtimes(ds_dir)
    save(corpus, "app/chat_1", conversation(4, T0))  # the Tracer rewrites the file with one more turn
    append_sidecar(record("app/chat_1", 3, 7, started=T0 + 30_002.0), base=corpus)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 1
    after = mtimes(ds_dir)
    assert {f: after[f] for f in before} == before  # no file rewritten
    added = set(after) - set(before)
    assert len(added) == 1
    assert pq_rows(added.pop()) == 1
    assert_same(ds_dir, corpus)
    # a changed config changes every row of the trace (they carry the latest config): replaced
    save(corpus, "app/chat_1", conversation(4, T0), temperature=0.9)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 1
    assert_same(ds_dir, corpus)
    chat = stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "app/chat_1"))
    assert set(chat["temperature"].to_pylist()) == {0.9}


def test_a_copy_keeping_size_and_mtime_is_seen_changed(tmp_path: Path) -> None:
    """A trace file replaced by other content of the same size with the old mtime kept (``cp -p``,
    ``rsync -a``, a synced folder) is converted again: its ctime changed."""
    ds_dir, corpus = tmp_path / "ds", tmp_path / "cache"
    path = save(corpus, "plain/one", conversation(3, T0), temperature=0.2)
    old = time.time() - 600
    os.utime(path, (old, old))
    quiet_sync(corpus, ds_dir)
    size, mtime = path.stat().st_size, path.stat().st_mtime_ns
    copy = save(tmp_path / "elsewhere", "plain/one", conversation(3, T0), temperature=0.3)  # the same length
    assert copy.stat().st_size == size
    os.utime(copy, (old, old))
    shutil.copy2(copy, path)  # as cp -p does: the content and the mtime
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (size, mtime)
    assert quiet_sync(corpus, ds_dir).converted == 1
    assert_same(ds_dir, corpus)
    chat = stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "plain/one"))
    assert set(chat["temperature"].to_pylist()) == {0.3}


def test_a_replaced_trace_keeps_its_manifest_records_where_they_are(corpus: Path, tmp_path: Path) -> None:
    """A trace replaced for its config keeps its messages: its units are left as they were (none
    written again, no copy to decide again) and its source row is updated in place; a trace
    replaced with fewer messages loses the units of the others."""
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    db = sqlite3.connect(ds_dir / "turns" / "_manifest.sqlite")

    def records(tid: str) -> tuple[Any, ...]:
        units = db.execute("SELECT fp, mi, pref, kept FROM units WHERE trace_id = ? ORDER BY mi", (tid,)).fetchall()
        rowid = db.execute("SELECT rowid FROM sources WHERE trace_id = ?", (tid,)).fetchone()
        return rowid, units

    rowid, units = records("agent/00003")
    assert units and not db.execute("SELECT count(*) FROM pending").fetchone()[0]
    history = conversation(3, T0 + 2 * DAY, "agent")
    save(corpus, "agent/00003", history, model="gemini-3.8-flash", temperature=0.9)
    calls: list[list[Any]] = []
    real = _manifest.Manifest.put_units

    def put_units(self: Any, db_: Any, rows: list[Any], pending: bool = True) -> None:
        calls.append(rows)
        real(self, db_, rows, pending)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_manifest.Manifest, "put_units", put_units)
        assert quiet_sync(corpus, ds_dir).converted == 1
    assert_same(ds_dir, corpus)
    assert records("agent/00003") == (rowid, units)
    assert not [rows for rows in calls if rows]  # no unit written again
    # other messages: the old units go, the new ones come, and the dataset still equals the loaders'
    save(corpus, "agent/00003", conversation(2, T0 + 2 * DAY, "other"), model="gemini-3.8-flash", temperature=0.9)
    assert quiet_sync(corpus, ds_dir).converted == 1
    assert_same(ds_dir, corpus)
    rowid2, units2 = records("agent/00003")
    assert rowid2 == rowid and len(units) == 3 and [u[1] for u in units2] == [1, 3]


@pytest.fixture
def list_prices_restored() -> Iterator[None]:
    """mmsp's list prices as installed again after a test that changes them."""
    yield
    pricing._registry.cache_clear()


def test_new_prices_recompute_the_cost_columns_in_place(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         list_prices_restored: None) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    before = mtimes(ds_dir)
    listed_cost = stored(ds_dir).to_pandas().set_index(["trace_id", "turn", "message_index"])["cost"]
    # the user's prices for two models: the files of their partitions get their cost columns
    # recomputed; no trace is read again, no other file is touched
    mine = {"glm-5.3": {"prompt_tokens": 7.0, "response_tokens": 11.0}, "local-x": {"prompt_tokens": 1.0, "response_tokens": 2.0},
            "org/model v2%": {"prompt_tokens": 3.0, "response_tokens": 4.0}}  # (its directory name URI-encoded)
    res = quiet_sync(corpus, ds_dir, prices=mine)
    after = mtimes(ds_dir)
    changed = {f for f in before if after[f] != before[f]}
    # (a file whose rows have no usage has no cost under any price: it is left as it is)
    assert changed and changed == {f for f in before if any(f"/model={m}/" in f for m in ("glm-5.3", "local-x", "org%2Fmodel%20v2%25"))
                                   and pq.read_table(f, columns=["total_tokens"])["total_tokens"].null_count < pq_rows(f)}
    assert set(after) == set(before)
    assert res.converted == 0 and res.repriced == len(changed) and f"{len(changed)} files repriced" in repr(res)
    assert_same(ds_dir, corpus, prices=mine)
    assert stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "odd/no_time"))["cost_missing"].to_pylist() == [False]
    # the same prices again: nothing to do
    res = quiet_sync(corpus, ds_dir, prices=mine)
    assert res.repriced == 0 and mtimes(ds_dir) == after
    # a trace that grows keeps its rows (a row's hash leaves out what prices make of it)
    save(corpus, "app/chat_1", conversation(4, T0))
    res = quiet_sync(corpus, ds_dir, prices=mine)
    assert res.converted == 1 and res.repriced == 0
    grown = mtimes(ds_dir)
    assert {f: grown[f] for f in after} == after and len(set(grown) - set(after)) == 1
    assert_same(ds_dir, corpus, prices=mine)
    # mmsp's list prices change (an upgrade of mmsp): the next sync without prices= uses them
    installed = mmsp.list_supported_models

    def dearer(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [{**e, "pricing": {k: v * 2 if isinstance(v, float) else v for k, v in e["pricing"].items()}}
                if e.get("pricing") else e for e in installed(*args, **kwargs)]

    monkeypatch.setattr(mmsp, "list_supported_models", dearer)
    pricing._registry.cache_clear()
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 0 and res.repriced > 0
    assert_same(ds_dir, corpus)
    now = stored(ds_dir).to_pandas().set_index(["trace_id", "turn", "message_index"])["cost"]
    gemini = now.index.get_level_values("trace_id").str.startswith("agent/")
    assert gemini.any() and (now[gemini].notna()).all()
    np.testing.assert_allclose(now[gemini].to_numpy(), 2 * listed_cost.reindex(now[gemini].index).to_numpy())
    # interrupted once a file holds the new costs, the files hold costs of either prices: the next
    # sync reprices them all, whichever prices it has (here the ones before)
    real, done = _dataset.reprice, []

    def fail_after_one(*args: Any) -> Any:
        if done:
            raise RuntimeError("interrupted")
        changed = real(*args)
        if changed is True:
            done.append(args)
        return changed

    monkeypatch.setattr(_dataset, "reprice", fail_after_one)
    with pytest.raises(RuntimeError, match="interrupted"):
        quiet_sync(corpus, ds_dir, prices=mine)
    monkeypatch.setattr(_dataset, "reprice", real)
    assert done
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 0 and res.repriced > 0
    assert_same(ds_dir, corpus)
    # a data file damaged (cut short): removed and its traces converted again
    victim = max((ds_dir / "turns").rglob("*.parquet"), key=lambda f: f.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:100])
    res = quiet_sync(corpus, ds_dir, prices=mine)
    assert res.converted > 0 and not victim.exists()
    assert_same(ds_dir, corpus, prices=mine)
    assert quiet_sync(corpus, ds_dir, prices=mine).converted == 0


def test_workers_price_as_the_calling_process(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             list_prices_restored: None) -> None:
    """The list prices of the process that syncs are those of every row, whatever mmsp the pool's
    workers import (mmsp upgraded under a running kernel)."""
    installed = mmsp.list_supported_models

    def cheaper(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [{**e, "pricing": {k: v / 4 if isinstance(v, float) else v for k, v in e["pricing"].items()}}
                if e.get("pricing") else e for e in installed(*args, **kwargs)]

    monkeypatch.setattr(mmsp, "list_supported_models", cheaper)
    pricing._registry.cache_clear()
    ds_dir = tmp_path / "ds"
    res = quiet_sync(corpus, ds_dir, chunk_files=8)  # several chunks: the default process pool
    assert res.converted > 8
    assert_same(ds_dir, corpus)


def pq_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


_KILLED = """
import sys, warnings
sys.path.insert(0, {root!r})
from mmsp_notebook import TraceNotFoundError, traces
if __name__ == "__main__":
    warnings.simplefilter("ignore")
    traces.sync({src!r}, {ds!r}, chunk_files=1)
"""


@pytest.mark.serial  # polls every 20 ms to kill the sync midway
def test_a_killed_sync_is_resumed(tmp_path: Path) -> None:
    src = tmp_path / "cache"
    gen_corpus.generate(src, files=150, turns=2, seed=5, shard_size=50)
    ds_dir = tmp_path / "ds"
    script = tmp_path / "run_sync.py"
    script.write_text(textwrap.dedent(_KILLED.format(root=str(ROOT), src=str(src), ds=str(ds_dir))))
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    manifest = ds_dir / "turns" / "_manifest.sqlite"
    done = 0
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(manifest) as db:
                done = db.execute("SELECT count(*) FROM sources").fetchone()[0]
        except sqlite3.Error:
            done = 0
        if done >= 10:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 10 <= done < 150, "the sync was not caught midway"
    part = stored(ds_dir)
    assert 0 < part.num_rows < 300
    res = quiet_sync(src, ds_dir)
    assert res.unchanged >= 10 and res.converted + res.unchanged == 150
    assert_same(ds_dir, src)


_INTERRUPTED = """
import multiprocessing as mp, os, signal, sys, threading, time, warnings
sys.path.insert(0, {root!r})
from multiprocessing import forkserver, popen_forkserver
from mmsp_notebook import traces
from mmsp_notebook.traces import _dataset

def ctrl_c():
    print("interrupting", flush=True)
    if {group!r}:
        os.killpg(0, signal.SIGINT)  # a terminal's Ctrl-C, Jupyter's interrupt: every process of the group
    else:
        os.kill(os.getpid(), signal.SIGINT)

def once(fn):
    done = []
    def run():
        if not done:
            done.append(1)
            fn()
    return run

moment = {moment!r}
if moment == "fork server":  # while the fork server starts (it imports the converter)
    start = forkserver.ForkServer.ensure_running
    later = once(lambda: threading.Timer(0.3, ctrl_c).start())
    def ensure_running(self):
        start(self)
        later()
    forkserver.ForkServer.ensure_running = ensure_running
elif moment == "worker":  # the moment a worker is forked, before it is known to the pool
    launch = popen_forkserver.Popen._launch
    now = once(ctrl_c)
    def _launch(self, process_obj):
        launch(self, process_obj)
        now()
    popen_forkserver.Popen._launch = _launch
else:  # mid-conversion: some chunks committed, others running in the workers
    commit = _dataset._Sync._commit
    n = []
    def _commit(self, *args):
        out = commit(self, *args)
        n.append(1)
        if len(n) == 3:
            ctrl_c()
        return out
    _dataset._Sync._commit = _commit

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    try:
        traces.sync({src!r}, {ds!r}, chunk_files=10)
    except KeyboardInterrupt:
        time.sleep(0.5)  # (a second KeyboardInterrupt would come here)
        print("interrupted; workers left:", len(mp.active_children()), flush=True)
    else:
        print("not interrupted", flush=True)
"""


def _group_processes(pgid: int) -> list[str]:
    """The command lines of the processes still in a process group."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue
    return out


@pytest.mark.parametrize("moment, group", [("fork server", True), ("worker", True), ("converting", True),
                                           ("converting", False)])
def test_ctrl_c_ends_a_sync_cleanly_at_any_moment(tmp_path: Path, moment: str, group: bool) -> None:
    """A SIGINT while the pool starts (its fork server importing, a worker just forked) or mid-conversion,
    sent to the whole process group as a terminal sends Ctrl-C (or to the calling process alone): one
    KeyboardInterrupt reaches the caller, no process of the pool prints a traceback or outlives the
    sync, and the next sync finishes the work."""
    src = tmp_path / "cache"
    gen_corpus.generate(src, files=100, turns=2, seed=5, shard_size=50)
    ds_dir = tmp_path / "ds"
    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent(_INTERRUPTED.format(root=str(ROOT), src=str(src), ds=str(ds_dir), moment=moment,
                                                          group=group)))
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "interrupting" in out and "interrupted; workers left: 0" in out, (out, err)
    assert err == "", err  # no traceback, from the workers, the fork server or a second KeyboardInterrupt
    deadline = time.time() + 10  # the fork server ends once its parent has
    while _group_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert _group_processes(proc.pid) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)  # (the first sync has not finished)
        part = stored(ds_dir) if (ds_dir / "turns" / "_manifest.sqlite").exists() else None
    assert part is None or part.num_rows < 200
    res = quiet_sync(src, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=10)
    assert res.converted + res.unchanged == 100
    assert_same(ds_dir, src)


def test_a_lost_data_file_is_named_by_readers_and_restored_by_the_next_sync(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    files = sorted((ds_dir / "turns").rglob("*.parquet"))
    lost = max(files, key=lambda p: p.stat().st_size)
    lost_rows = pq.ParquetFile(lost).metadata.num_rows
    lost.unlink()  # removed by hand, or lost to a disk
    with pytest.raises(TraceNotFoundError, match=r"1 of the \d+ data files the manifest .* lists are missing"):
        traces.dataset(ds_dir)
    with pytest.raises(TraceNotFoundError, match="the next traces.sync into this dataset converts their traces again"):
        traces.query("SELECT count(*) FROM turns", ds_dir)
    res = quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    assert res.converted >= 1 and res.rows >= lost_rows
    assert_same(ds_dir, corpus)
    assert quiet_sync(corpus, ds_dir).converted == 0
    # a partition kept elsewhere behind a link is not lost
    part = next((ds_dir / "turns").glob("month=*"))
    shutil.move(str(part), str(tmp_path / "cold"))
    os.symlink(tmp_path / "cold", part)
    before = mtimes(tmp_path / "cold")
    assert quiet_sync(corpus, ds_dir).converted == 0
    assert mtimes(tmp_path / "cold") == before
    assert_same(ds_dir, corpus)


def test_a_damaged_data_file_is_replaced_by_the_next_sync(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    files = sorted((ds_dir / "turns").rglob("*.parquet"))
    damaged = max(files, key=lambda p: p.stat().st_size)
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])  # cut short (a full disk, a copy cut)
    with pytest.raises(Exception, match=re.escape(damaged.name)):  # readers name the file
        traces.dataset(ds_dir).to_table()
    res = quiet_sync(corpus, ds_dir)
    assert res.converted >= 1 and not damaged.exists()
    assert_same(ds_dir, corpus)
    assert quiet_sync(corpus, ds_dir).converted == 0
    # a file of another size that is still Parquet (written again by another tool) is kept
    other = max((ds_dir / "turns").rglob("*.parquet"), key=lambda p: p.stat().st_size)
    size = other.stat().st_size
    pq.write_table(pq.read_table(other), other, compression="none")
    assert other.stat().st_size != size
    assert quiet_sync(corpus, ds_dir).converted == 0 and other.exists()
    assert_same(ds_dir, corpus)


def test_a_data_file_damaged_in_place_is_named_with_the_way_to_mend_it(corpus: Path, tmp_path: Path) -> None:
    """A file whose footer was overwritten at its own size: query and summary name it and say to
    remove it and sync; the next sync finds it itself (changed since it left it) and gives back
    every row."""
    import duckdb

    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    files = sorted((ds_dir / "turns").rglob("*.parquet"))
    damaged = max(files, key=lambda p: p.stat().st_size)
    raw = bytearray(damaged.read_bytes())
    raw[-60:-10] = bytes(b ^ 0x5A for b in raw[-60:-10])
    damaged.write_bytes(bytes(raw))
    for read in (lambda: traces.query("SELECT count(*) FROM turns", ds_dir), lambda: traces.summary(ds_dir)):
        with pytest.raises((duckdb.IOException, duckdb.InvalidInputException)) as caught:
            read()
        assert f"data file {damaged} cannot be read" in str(caught.value), caught.value
        assert "remove it and run traces.sync again" in str(caught.value)
    res = quiet_sync(corpus, ds_dir)  # changed since the last sync: read whole, found damaged, rebuilt
    assert res.converted >= 1 and res.rebuilt == [damaged.relative_to(ds_dir / "turns").as_posix()]
    assert_same(ds_dir, corpus)
    # a query that fails on the values of sound files is not taken for a damaged file
    with pytest.raises(duckdb.ConversionException) as caught:
        traces.query("SELECT CAST(model AS INTEGER) FROM turns", ds_dir)
    assert "cannot be read" not in str(caught.value)


def damage_page(path: Path, column: str = "latency") -> None:
    """Overwrite a few bytes inside a data page of ``column`` (row group 0), the file's size, footer
    and page headers kept: what bit rot or a stray write does."""
    meta = pq.read_metadata(path).row_group(0)
    chunk = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == column)
    at = chunk.data_page_offset + chunk.total_compressed_size * 3 // 4
    raw = bytearray(path.read_bytes())
    raw[at:at + 4] = bytes(b ^ 0x5A for b in raw[at:at + 4])
    path.write_bytes(bytes(raw))


def test_a_data_file_damaged_in_its_pages_is_an_error_and_rebuilt_by_the_next_sync(corpus: Path, tmp_path: Path) -> None:
    """Bytes overwritten inside a page, at the file's own size: its pages' checksums fail. pyarrow's
    reads say so (never other numbers); the next sync reads the files changed since it left them
    whole, finds it, and converts its traces again, saying so."""
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    damaged = max((ds_dir / "turns").rglob("*.parquet"), key=lambda p: p.stat().st_size)
    assert pq.ParquetFile(damaged).metadata.row_group(0).column(0).to_dict()["total_compressed_size"] > 0
    size = damaged.stat().st_size
    damage_page(damaged)
    assert damaged.stat().st_size == size
    with pytest.raises(OSError, match="CRC checksum verification failed"):
        traces.dataset(ds_dir).to_table()
    name = damaged.relative_to(ds_dir / "turns").as_posix()
    with pytest.warns(traces.TraceLoadWarning, match=rf"data files of .* were missing or damaged \({re.escape(name)}\): "
                      "removed, and the traces with rows in them converted again from their trace files"):
        res = traces.sync(corpus, ds_dir)
    assert res.rebuilt == [name] and res.converted >= 1 and not damaged.exists()
    assert "1 damaged or missing files rebuilt" in repr(res)
    assert_same(ds_dir, corpus)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing more to rebuild, nothing said
        res = traces.sync(corpus, ds_dir)
    assert res.converted == 0 and res.rebuilt == []


def test_a_damaged_data_file_the_sync_reads_is_rebuilt_and_verify_finds_the_rest(corpus: Path, tmp_path: Path) -> None:
    """Damage that leaves a file's size and time as they were (bit rot) is not looked for by a sync;
    a sync that reads the file to rewrite it finds it there, and a sync with ``verify=True`` finds
    it whichever file it is in; either converts its traces again in the same run."""
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=4)
    root = ds_dir / "turns"

    def rot(path: Path) -> str:
        st = path.stat()
        damage_page(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return path.relative_to(root).as_posix()

    # a file holding the rows of several traces, rewritten without those of one whose file is removed
    with sqlite3.connect(root / "_manifest.sqlite") as db:
        where = [(json.loads(files), path) for path, files in db.execute("SELECT path, files FROM sources")]
    shared = {}
    for files, path in where:
        for f in files:
            shared.setdefault(f, []).append(path)
    name, paths = max(shared.items(), key=lambda kv: len(kv[1]))
    assert len(paths) > 1
    rot(root / name)
    assert quiet_sync(corpus, ds_dir).rebuilt == []  # (not read: not seen)
    Path(paths[0]).unlink()
    res = quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2))
    assert res.rebuilt == [name] and res.removed == 1 and not (root / name).exists()
    assert_same(ds_dir, corpus)
    # a file no sync reads: verify=True reads every file whole
    other = rot(max(root.rglob("*.parquet"), key=lambda p: p.stat().st_size))
    assert quiet_sync(corpus, ds_dir).rebuilt == []
    res = quiet_sync(corpus, ds_dir, verify=True)
    assert res.rebuilt == [other] and res.converted >= 1
    assert_same(ds_dir, corpus)


def test_a_merge_of_a_damaged_file_writes_nothing_and_names_it(corpus: Path, tmp_path: Path) -> None:
    from mmsp_notebook.traces._compact import merge

    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, executor=ThreadPoolExecutor(2), chunk_files=2)
    root = ds_dir / "turns"
    part = max((p.parent for p in root.rglob("*.parquet")), key=lambda d: len(list(d.glob("*.parquet"))))
    names = sorted(p.relative_to(root).as_posix() for p in part.glob("*.parquet"))
    assert len(names) > 1
    new, rows, tids, damaged = merge(str(root), names, "turns", False)
    assert rows == sum(pq.ParquetFile(root / n).metadata.num_rows for n in names) and damaged == []
    (root / new).unlink()
    damage_page(root / names[-1])
    new, rows, tids, damaged = merge(str(root), names, "turns", False)
    assert damaged == [names[-1]] and rows == 0 and tids == [] and not (root / new).exists()
    assert not [p for p in part.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_script_without_a_main_guard_is_told_why_its_pool_broke(corpus: Path, tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(f"""
        import sys, warnings
        sys.path.insert(0, {str(ROOT)!r})
        from mmsp_notebook import traces
        warnings.simplefilter("ignore")
        traces.sync({str(corpus)!r}, {str(tmp_path / "ds")!r}, chunk_files=4)  # at the top level: every worker runs it
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    # each worker says why it will not sync; the script is told what broke its pool and what to do
    assert "traces.sync was called while a worker process imported the main module" in proc.stderr
    assert "RuntimeError: a worker process of traces.sync's pool ended abruptly" in proc.stderr.splitlines()[-1]
    assert "if __name__ == '__main__':" in proc.stderr.splitlines()[-1]


def _dies_on_one(i: int) -> int:
    """A task of the runner's test: the second kills its worker (as the OOM killer would)."""
    if i == 1:
        time.sleep(0.3)
        os._exit(1)
    if i > 1:
        time.sleep(2)
    return i


@pytest.mark.serial  # a 0.3 s task must die before 2 s tasks end
def test_a_broken_pool_is_explained_however_it_is_met() -> None:
    # the worker dies while the first result is being handled: met on submitting the next task
    runner = _runner.Runner(None)
    n = 2 * max(2, os.cpu_count() or 1) + 5
    got = []
    with pytest.raises(RuntimeError, match="a worker process of traces.sync's pool ended abruptly"):
        try:
            for _task, res in runner.run(_dies_on_one, [(i,) for i in range(n)], n):
                got.append(res)
                time.sleep(1.0)
        finally:
            runner.close()
    assert got in ([], [0])


def test_leftovers_of_a_crash_are_removed(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    orphan_dir = ds_dir / "turns" / "month=2026-01" / "model=glm-5.3"
    shutil.copy(next(orphan_dir.glob("*.parquet")), orphan_dir / "part-orphan-0.parquet")  # data not committed
    (orphan_dir / ".part-x.parquet.tmp").write_bytes(b"half")
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 0
    assert not (orphan_dir / "part-orphan-0.parquet").exists() and not (orphan_dir / ".part-x.parquet.tmp").exists()
    assert_same(ds_dir, corpus)


# --------------------------------------------------------------------------- on a Dask cluster


def test_dask_cluster_executor_and_dask_reader(corpus: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    dd = pytest.importorskip("dask.dataframe")
    ds_dir = tmp_path / "ds"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            # the client itself is no executor: refused, naming the one to give, before anything is written
            with pytest.raises(OptionError, match=r"executor takes a concurrent\.futures\.Executor .* not Client .*: "
                                                  r"give client\.get_executor\(\)"):
                traces.sync(corpus, ds_dir, executor=client, chunk_files=4)
            assert not ds_dir.exists()
            res = quiet_sync(corpus, ds_dir, executor=client.get_executor(), chunk_files=4)
    assert res.converted > 4
    assert_same(ds_dir, corpus)
    # as the README shows it: the partition columns' types given (a directory of nulls has none to infer)
    partitioning = {"flavor": "hive", "schema": pa.schema([("month", pa.string()), ("model", pa.string())])}
    ddf = dd.read_parquet(str(ds_dir / "turns"), dataset={"partitioning": partitioning})
    want = expected(corpus)
    assert len(ddf) == want.num_rows
    assert set(want.column_names) | {"month"} == set(ddf.columns)
    by_model = ddf.groupby("model", dropna=False)["latency"].count().compute()
    assert int(by_model.sum()) == pc.count(want["latency"]).as_py()


# --------------------------------------------------------------------------- DuckDB


@pytest.mark.parametrize("by", ["model", None, ["model", "status"], "client_type", "source", ["source", "model"], "comparison",
                                "finish_reason", "tool_names", ["model", "tool_names"]])
def test_summary_in_duckdb_equals_pandas(corpus: Path, tmp_path: Path, by: Any) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        frame = traces.load_turns(corpus)
    want = traces.summary(frame, by=by)
    for source in (ds_dir, ds_dir / "turns", traces.dataset(ds_dir)):
        got = traces.summary(source, by=by)
        assert len(got) == len(want) > 0
        pd.testing.assert_frame_equal(got, want, check_index_type=False, check_categorical=False, rtol=1e-9)
        assert [str(i) for i in got.index] == [str(i) for i in want.index]
    if by == "model":
        assert want["cost_missing"].sum() > 0 and want["error_rate"].max() > 0 and want["truncation_rate"].max() > 0
    if by == "tool_names":  # keyed by the tuples of tool names, as the frame holds them; also when every turn has tools
        assert {type(k) for k in want.index} == {tuple, type(None)} and len(want) > 2
        tooled = frame[frame["tool_names"].notna()]
        pd.testing.assert_frame_equal(traces.summary(tooled, by=by), want.loc[[k is not None for k in want.index]])


def test_query_views(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    quiet_sync(corpus, ds_dir, kind="events")
    frame = expected(corpus)
    cols = traces.query("SELECT * FROM turns LIMIT 0", ds_dir).columns.tolist()
    assert cols == [*frame.column_names, "month"]
    n = traces.query("SELECT count(*) AS n FROM turns WHERE model = 'org/model v2%'", ds_dir)["n"][0]
    assert n == pc.sum(pc.equal(frame["model"].cast(pa.string()), "org/model v2%")).as_py() == 2
    joined = traces.query(
        "SELECT count(*) AS n FROM events e JOIN turns t USING (trace_id, turn) WHERE e.type = 'stop' AND t.status = 'complete'",
        ds_dir,
    )["n"][0]
    assert joined > 0
    with pytest.raises(Exception, match="items"):
        traces.query("SELECT * FROM items", ds_dir)  # not synced: no view
    # a kind directory stands for its dataset, as summary takes it; sync takes it too (for its kind)
    assert quiet_sync(corpus, ds_dir / "turns").converted == 0
    assert not (ds_dir / "turns" / "turns").exists()
    with pytest.raises(ValueError, match="is the events directory of the dataset"):
        traces.sync(corpus, ds_dir / "events", kind="turns")
    assert not (ds_dir / "events" / "turns").exists()
    for given in (ds_dir / "turns", ds_dir / "events"):
        assert traces.query("SELECT count(*) AS n FROM turns", given)["n"][0] == frame.num_rows
        assert traces.connect(given).execute("SELECT count(*) FROM events").fetchone()[0] > 0
    assert traces.dataset(ds_dir / "turns").count_rows() == frame.num_rows
    assert traces.dataset(ds_dir / "events", "events").count_rows() == traces.dataset(ds_dir, "events").count_rows()
    # SQL that is no statement is said to be so; DuckDB's own errors name what is wrong
    for blank in ("", "  \n", "-- a comment"):
        with pytest.raises(OptionError, match="no SQL statement to run"):
            traces.query(blank, ds_dir)
    with pytest.raises(TypeError, match="query takes SQL text, not int"):
        traces.query(42, ds_dir)  # type: ignore[arg-type]
    import duckdb

    with pytest.raises(duckdb.ParserException, match="syntax error"):
        traces.query("SELEC * FROM turns", ds_dir)
    assert traces.query("SET threads = 1", ds_dir).empty


def test_sql_over_a_dataset_takes_times_in_utc_as_its_months(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    save(src, "a", conversation(2, T0))  # 2026-01-01T00:00Z: the evening of December 31 in New York
    traces.sync(src, ds_dir)
    monkeypatch.setenv("TZ", "America/New_York")  # a machine's local time zone
    time.tzset()
    try:
        sql = ("SELECT started::DATE AS day, strftime(started, '%Y-%m') AS m, month FROM turns "
               "WHERE started >= '2026-01-01' ORDER BY started")
        for got in (traces.query(sql, ds_dir), traces.connect(ds_dir).sql(sql).df()):
            assert len(got) == 2
            assert [str(d)[:10] for d in got["day"]] == ["2026-01-01"] * 2
            assert got["m"].tolist() == got["month"].tolist() == ["2026-01"] * 2
    finally:
        monkeypatch.undo()
        time.tzset()


def test_query_and_summary_errors_name_what_the_dataset_has(tmp_path: Path) -> None:
    import duckdb

    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    save(src, "a", conversation(2, T0))
    quiet_sync(src, ds_dir)
    # a kind not synced has no view: the error names the views there are and how to make the others
    with pytest.raises(duckdb.CatalogException, match=r"(?s)items does not exist.*views of the trace dataset .* are: "
                       r"turns \(items and events are not synced: traces\.sync\(src, dataset_dir, kind='items'\)"):
        traces.query("SELECT * FROM items", ds_dir)
    quiet_sync(src, ds_dir, kind="items")
    with pytest.raises(duckdb.CatalogException, match=r"are: turns, items \(events is not synced"):
        traces.query("SELECT * FROM turnz", ds_dir / "turns")
    # summary over a dataset refuses as over a frame: an option error naming the columns, never a KeyError
    with pytest.raises(OptionError, match="no column 'nope' to group by in the dataset's turns; columns: trace_id, "):
        traces.summary(ds_dir, by="nope")
    with pytest.raises(OptionError, match="summary takes a dataset of turns; this one has no 'latency'"):
        traces.summary(traces.dataset(ds_dir, "items"))
    # a dataset of other kinds only: summary names the views it has, as query does
    quiet_sync(src, tmp_path / "events_ds", kind="events")
    for given in (tmp_path / "events_ds", tmp_path / "events_ds" / "events"):
        with pytest.raises(OptionError, match=r"summary takes a dataset of turns; the views of the trace dataset "
                           r".*events_ds are: events \(turns and items are not synced: traces\.sync\(src, dataset_dir, "
                           r"kind='turns'\)"):
            traces.summary(given)
    for wrong in (None, 42):
        with pytest.raises(TypeError, match=f"summary takes a turns frame .* not {type(wrong).__name__}"):
            traces.summary(wrong)


def test_readers_take_one_dataset_path_and_name_what_else_they_were_given(tmp_path: Path) -> None:
    src, ds_dir = tmp_path / "cache", tmp_path / "ds"
    save(src, "a", conversation(2, T0))
    quiet_sync(src, ds_dir)
    assert traces.query("SELECT count(*) AS n FROM turns", os.fsencode(ds_dir))["n"][0] == 2  # bytes, as sync takes
    assert traces.summary(os.fsencode(ds_dir), by=None)["count"].tolist() == [2]
    readers = (lambda d: traces.query("SELECT 1", d), traces.dataset, traces.connect)
    for read in readers:  # was a TypeError from pathlib, or "no trace dataset at turns" for ""
        with pytest.raises(TypeError, match=r"one dataset at a time: query each and pd.concat the frames\), not list"):
            read([ds_dir, ds_dir])
        with pytest.raises(TypeError, match="give the directory of a trace dataset .*, not NoneType None"):
            read(None)
        with pytest.raises(OptionError, match="an empty dataset path"):
            read("")


def test_a_leading_tilde_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "cwd"
    elsewhere.mkdir()
    save(home / "cache", "a", conversation(2, T0))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    assert quiet_sync("~/cache", Path("~/ds")).converted == 1
    assert (home / "ds" / "turns").is_dir() and not (elsewhere / "~").exists()
    assert quiet_sync("~/cache", "~/ds/turns").converted == 0
    assert traces.query("SELECT count(*) AS n FROM turns", "~/ds")["n"][0] == 2
    assert traces.summary("~/ds", by=None)["count"].tolist() == [2]
    assert traces.dataset("~/ds/turns").count_rows() == 2
    assert traces.connect(Path("~/ds")).execute("SELECT count(*) FROM turns").fetchone() == (2,)


def test_connecting_a_second_dataset_to_a_connection_warns_that_its_views_now_read_it(tmp_path: Path) -> None:
    save(tmp_path / "c1", "a", conversation(2, T0))
    save(tmp_path / "c2", "b", conversation(3, T0))
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    quiet_sync(tmp_path / "c1", d1)
    quiet_sync(tmp_path / "c2", d2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        con = traces.connect(d1)
        traces.connect(d1, con=con)  # the same dataset again (after a sync): its views, quietly
    with pytest.warns(traces.TraceLoadWarning, match=r"the views turns now read .*d2, no longer .*d1 .*connect each "
                                                     r"to its own connection, or .*read_parquet\(\[.*hive_partitioning"):
        traces.connect(d2, con=con)
    assert con.execute("SELECT count(*) FROM turns").fetchone() == (3,)
    import duckdb

    other = duckdb.connect()
    other.execute("CREATE VIEW turns AS SELECT 1 AS x")  # a view of the user's own is replaced as before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert traces.connect(d1, con=other).execute("SELECT count(*) FROM turns").fetchone() == (2,)


def test_query_gives_the_loaders_dtypes(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    payload = {"role": "user", "created_at": T0 + 5 * DAY, "content_items": [
        {"type": "embedding.done", "embedding": [0.5, 2.0, -1.25]},
        {"type": "tool_result.done", "tool_call_id": "c1", "text": "two", "images": ["aGk=", "b2s="]}]}
    save(corpus, "payloads/lists", [payload, answer("seen", T0 + 5 * DAY + 900)])
    quiet_sync(corpus, ds_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        want = traces.load_turns(corpus, progress=False)
    got = traces.query("SELECT * FROM turns", ds_dir)
    assert pd.api.types.is_string_dtype(got["month"].dtype)
    order = ["trace_id", "turn", "message_index", "started", "status"]
    got = got.drop(columns="month").sort_values(order).reset_index(drop=True)
    want = want.sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)  # values, dtypes, categories (source's fixed ones too), tuples of tool names
    # computed columns keep DuckDB's dtypes; a column named as a loader's but of another type is left as it is
    agg = traces.query("SELECT model, count(*) AS n, avg(latency) AS mean, sum(total_tokens) AS tokens, "
                       "trace_id AS turn, max(started) AS started FROM turns GROUP BY model, trace_id", ds_dir)
    assert isinstance(agg["model"].dtype, pd.CategoricalDtype)
    assert sorted(agg["model"].cat.categories) == sorted(want["model"].cat.categories)
    assert agg["n"].dtype == np.int64 and agg["mean"].dtype == np.float64 and agg["tokens"].dtype == np.float64
    assert pd.api.types.is_string_dtype(agg["turn"].dtype) and agg["started"].dtype == want["started"].dtype
    # a value the loaders' fixed categories do not hold keeps it, in categories of the values
    odd = traces.query("SELECT 'elsewhere' AS source UNION ALL SELECT 'trace'", ds_dir)
    assert sorted(odd["source"].astype(str)) == ["elsewhere", "trace"]
    # items (with their payloads' lists) and events too, categories and their order included
    quiet_sync(corpus, ds_dir, kind="items", payloads=True)
    quiet_sync(corpus, ds_dir, kind="events")
    keys = {"items": ["trace_id", "message_index", "item_index"], "events": ["trace_id", "turn", "started", "event_index", "status"]}
    for kind, order in keys.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            want = LOADERS[kind](corpus, progress=False, **({"payloads": True} if kind == "items" else {}))
        got = traces.query(f"SELECT * FROM {kind}", ds_dir).drop(columns="month")
        got, want = (f.sort_values(order).reset_index(drop=True) for f in (got, want))
        pd.testing.assert_frame_equal(got, want)
        if kind == "items":
            assert got["embedding"].dropna().tolist() == [[0.5, 2.0, -1.25]]
            assert got["images"].dropna().tolist() == [["aGk=", "b2s="]]
        cats = [c for c in want.columns if isinstance(want[c].dtype, pd.CategoricalDtype)]
        assert cats and [c for c in got.columns if isinstance(got[c].dtype, pd.CategoricalDtype)] == cats


# --------------------------------------------------------------------------- options and errors


def test_options_errors_and_lock(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    # other prices: the cost columns are recomputed, no trace converted again
    prices = {"local-x": {"prompt_tokens": 1.0, "response_tokens": 2.0}}
    res = quiet_sync(corpus, ds_dir, prices=prices)
    assert res.unchanged == res.traces + 1 and res.converted == 0 and res.repriced == 1
    assert_same(ds_dir, corpus, prices=prices)
    # prices as NumPy numbers or by non-text keys, which the loaders take: the same dataset
    odd = {"local-x": {"prompt_tokens": np.float32(1.0), "response_tokens": np.int64(2)}, ("tuple",): {"prompt_tokens": 1, "response_tokens": 1}}
    assert quiet_sync(corpus, ds_dir, prices=odd).converted == 0  # type: ignore[arg-type]
    assert_same(ds_dir, corpus, prices=odd)
    # another option makes other rows: the dataset is rebuilt with it
    res = quiet_sync(corpus, ds_dir, prices=prices, dedupe=False)
    assert res.unchanged == 0 and res.converted > 0
    assert_same(ds_dir, corpus, prices=prices, dedupe=False)
    with pytest.raises(ValueError, match="sync into another dataset_dir"):
        quiet_sync(corpus / "gen", ds_dir)
    link = tmp_path / "link"
    link.symlink_to(corpus)  # the same directory by another path: taken
    assert quiet_sync(link, ds_dir, prices=prices, dedupe=False).converted == 0
    # the dataset inside the traces' directory, with a pattern that would match its files
    inner = corpus / "_ds"
    first = quiet_sync(corpus, inner, pattern="**/*")
    assert not [s for s in first.skipped if s["path"].startswith(str(inner))]
    assert quiet_sync(corpus, inner, pattern="**/*").converted == 0
    shutil.rmtree(inner)
    with pytest.raises(FileNotFoundError):
        traces.sync(tmp_path / "nowhere", tmp_path / "x")
    # an empty path would be the working directory: refused as the loaders refuse it; bytes are taken
    monkeypatch.chdir(corpus)
    for args in (("", tmp_path / "x"), (corpus, "")):
        with pytest.raises(OptionError, match="is an empty path"):
            traces.sync(*args)
    assert not (corpus / "turns").exists() and not (tmp_path / "x").exists()
    with pytest.raises(TypeError, match="src takes a directory path, not int"):
        traces.sync(3, tmp_path / "x")  # type: ignore[arg-type]
    assert quiet_sync(os.fsencode(corpus), os.fsencode(ds_dir), prices=prices, dedupe=False).converted == 0  # type: ignore[arg-type]
    # bad options are refused before anything changes (another pattern would rebuild the dataset)
    before = mtimes(ds_dir)
    for bad in ("/abs/*.json", "../*.json", "", 5):
        with pytest.raises(OptionError, match="pattern"):
            traces.sync(corpus, ds_dir, pattern=bad, prices=prices, dedupe=False)  # type: ignore[arg-type]
    assert mtimes(ds_dir) == before
    assert_same(ds_dir, corpus, prices=prices, dedupe=False)
    with pytest.raises(TypeError, match="chunk_files takes a number of traces, not str"):
        traces.sync(corpus, ds_dir, chunk_files="3")  # type: ignore[arg-type]
    for bad in ("x", 4, ThreadPoolExecutor):  # (the class, not a pool of it)
        with pytest.raises(TypeError, match=r"executor takes a concurrent\.futures\.Executor \(a process or thread "
                                            r"pool, Dask's client\.get_executor\(\)\), not "):
            traces.sync(corpus, tmp_path / "z", executor=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind must be one of"):
        traces.sync(corpus, ds_dir, kind="messages")
    for name, bad in (("dedupe", "no"), ("payloads", "false"), ("verify", "yes"), ("progress", "x")):  # (a string is truthy)
        with pytest.raises(TypeError, match=f"{name} takes True or False, not str"):
            traces.sync(corpus, ds_dir, **{name: bad})
    assert mtimes(ds_dir) == before
    # a bad price is refused before anything is written
    with pytest.raises(OptionError, match="prompt_tokens must be a finite number"):
        traces.sync(corpus, tmp_path / "z", prices={"m": {"prompt_tokens": -1, "response_tokens": 1}})
    with pytest.raises(OptionError, match="prices map model ids"):
        traces.sync(corpus, tmp_path / "z", prices=[1, 2])  # type: ignore[arg-type]
    assert not (tmp_path / "z").exists()
    with pytest.raises(ValueError, match="not a file"):
        traces.sync(corpus / "app" / "chat_1.json", tmp_path / "y")
    with pytest.raises(FileNotFoundError, match="traces.sync"):
        traces.dataset(tmp_path / "empty")
    import fcntl

    with open(ds_dir / "turns" / "_sync.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        before = mtimes(ds_dir)
        with pytest.raises(SyncBusyError, match="another sync") as busy:
            traces.sync(corpus, ds_dir)
        assert isinstance(busy.value, RuntimeError) and busy.value.path == str(ds_dir / "turns")
        assert mtimes(ds_dir) == before
    assert_same(ds_dir, corpus, prices=prices, dedupe=False)  # nothing lost by the refused calls


@pytest.mark.parametrize("kind", ["items", "events"])
def test_prices_are_refused_for_the_kinds_without_cost_columns(corpus: Path, tmp_path: Path, kind: str) -> None:
    """Only the turns have cost columns: prices for items or events, which would change nothing in
    them, are refused before anything is written, good prices or bad (even an empty mapping)."""
    for prices in ({"GLM-5": {"prompt_tokens": 1.0, "response_tokens": 2.0}}, {},
                   {"m": {"prompt_tokens": -1, "response_tokens": 1}}):
        with pytest.raises(OptionError, match=f"prices apply to the turns' cost columns only; the {kind} have none"):
            traces.sync(corpus, tmp_path / "z", kind=kind, prices=prices)
    assert not (tmp_path / "z").exists()
    assert quiet_sync(corpus, tmp_path / "z", kind=kind, prices=None).converted  # (without prices: synced)
    assert_same(tmp_path / "z", corpus, kind)


def test_empty_corpus_gives_empty_views(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    res = traces.sync(tmp_path / "none", tmp_path / "ds")
    assert (res.converted, res.rows, res.files) == (0, 0, 0)
    assert traces.dataset(tmp_path / "ds").to_table().num_rows == 0
    assert traces.query("SELECT count(*) AS n FROM turns", tmp_path / "ds")["n"][0] == 0
    assert traces.summary(tmp_path / "ds", by="model").empty


def test_a_dataset_given_to_a_loader_or_the_explorer_is_named_with_what_reads_it(corpus: Path, tmp_path: Path) -> None:
    """A dataset folder holds no trace: a loader given one warns, saying it is a dataset, what reads it
    and the trace folder it was synced from (an empty folder of traces stays quiet, as before)."""
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    quiet_sync(corpus, ds_dir, kind="items")

    def dataset_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
        return [str(w.message) for w in caught if "is a trace dataset" in str(w.message)
                and issubclass(w.category, traces.TraceLoadWarning)]

    for kind, load in LOADERS.items():
        for given in (ds_dir, ds_dir / "turns", str(ds_dir / "items") + os.sep):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                df = load(given)
            said = dataset_warnings(caught)
            assert len(df) == 0 and len(said) == 1, (kind, given, [str(w.message) for w in caught])
            assert said[0].startswith(f"mmsp_notebook.traces: {given} is a trace dataset made by traces.sync")
            view = kind if kind != "events" else "turns"  # (no events synced: the views it has)
            assert f'traces.query("SELECT * FROM {view}", {str(ds_dir)!r})' in said[0]
            assert f"traces.summary({str(ds_dir)!r})" in said[0] and f"traces.dataset({str(ds_dir)!r}" in said[0]
            assert said[0].endswith(f"traces.load_{kind}({str(corpus)!r})")
            assert [w.filename for w in caught if str(w.message) == said[0]] == [__file__]  # the caller's line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        explorer = traces.explore(ds_dir)
    assert len(explorer.turns) == 0 and len(dataset_warnings(caught)) == 1
    # given with a trace folder: named, the traces loaded
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        both = traces.load_turns(iter([corpus, ds_dir]))
    assert len(both) and len(dataset_warnings(caught)) == 1
    (tmp_path / "none").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(traces.load_turns(tmp_path / "none")) == 0


def test_a_query_of_no_row_has_the_loaders_dtypes(corpus: Path, tmp_path: Path) -> None:
    """A query of an empty dataset, or one whose rows a WHERE leaves out, gives every column the
    dtype the loader gives it: category columns with categories of text (``.str`` works)."""
    (tmp_path / "none").mkdir()
    for kind in LOADERS:
        quiet_sync(tmp_path / "none", tmp_path / "empty", kind=kind)
        quiet_sync(corpus, tmp_path / "full", kind=kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            want = LOADERS[kind](corpus, progress=False)
        for got in (traces.query(f"SELECT * FROM {kind}", tmp_path / "empty"),
                    traces.query(f"SELECT * FROM {kind} WHERE false", tmp_path / "full")):
            got = got.drop(columns="month")
            assert len(got) == 0 and list(got.columns) == list(want.columns)
            for col in want.columns:
                if isinstance(want[col].dtype, pd.CategoricalDtype) and col != "source":
                    assert isinstance(got[col].dtype, pd.CategoricalDtype), (kind, col)
                    assert got[col].cat.categories.dtype == want[col].cat.categories.dtype, (kind, col)
                else:
                    assert got[col].dtype == want[col].dtype, (kind, col)
            assert got[got["model"].str.startswith("glm")].empty


def test_a_corpus_of_no_turn_or_of_no_model_and_finish_reads_back_with_the_loaders_frames(tmp_path: Path) -> None:
    """A dataset of a corpus without turns, or whose ``model``, ``client_type`` and ``finish_reason``
    are all missing, reads back as each loader's frame: dtypes, category columns holding no
    category (of text) included."""
    (tmp_path / "none").mkdir()
    nulls = tmp_path / "nulls"
    history = [user("q", T0), answer("a", T0 + 900), user("q2", T0 + 5_000), answer("b", T0 + 5_900)]
    for message in history:
        message.pop("finish_reason", None)
    save(nulls, "n/1", history, model=None)
    rec = record("n/1", 0, 1, started=T0 + 3.0)
    rec.update(model=None, client_type=None, finish_reason=None)
    append_sidecar(rec, base=nulls)
    orders = {"turns": ["trace_id", "turn", "message_index", "started", "status"],
              "items": ["trace_id", "message_index", "item_index"], "events": ["trace_id", "turn", "started", "event_index"]}
    for src in (tmp_path / "none", nulls):
        ds_dir = tmp_path / f"ds_{src.name}"
        for kind, order in orders.items():
            with ThreadPoolExecutor(1) as pool:
                quiet_sync(src, ds_dir, kind=kind, executor=pool)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", traces.TraceLoadWarning)
                want = LOADERS[kind](src, progress=False)
            assert (len(want) == 0) == (src.name == "none"), (src.name, kind)
            got = traces.query(f"SELECT * FROM {kind}", ds_dir).drop(columns="month")
            got, want = (f.sort_values(order).reset_index(drop=True) for f in (got, want))
            pd.testing.assert_frame_equal(got, want, obj=f"{kind} of {src.name}")
            for col in [c for c in ("model", "client_type", "finish_reason") if c in want.columns]:
                assert want[col].isna().all() and got[col].dtype == want[col].dtype, (src.name, kind, col)
                assert len(got[col].cat.categories) == 0 and pd.api.types.is_string_dtype(got[col].cat.categories.dtype)
        assert_same(ds_dir, src)  # the files hold what to_arrow makes of the loader's frame
        assert traces.summary(ds_dir).equals(traces.summary(traces.load_turns(src, progress=False)))


def test_summary_of_an_empty_dataset_equals_that_of_an_empty_frame(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    traces.sync(tmp_path / "none", tmp_path / "ds")
    frame = traces.load_turns(tmp_path / "none")
    for by in ("model", None, ["model", "status"]):
        want = traces.summary(frame, by=by)  # by=None: one row, "all", of no turns
        for source in (tmp_path / "ds", traces.dataset(tmp_path / "ds")):
            got = traces.summary(source, by=by)
            pd.testing.assert_frame_equal(got, want, check_index_type=False)


def test_hidden_files_are_not_data(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    names = [os.path.basename(f) for f in traces.dataset(ds_dir).files]
    assert names and all(n.startswith("part-") and n.endswith(".parquet") for n in names)
    meta = json.loads(sqlite3.connect(ds_dir / "turns" / "_manifest.sqlite").execute(
        "SELECT value FROM meta WHERE key = 'src'").fetchone()[0])
    assert meta == str(corpus)


def test_items_with_payloads(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir, kind="items", payloads=True, chunk_files=6)
    assert_same(ds_dir, corpus, "items", payloads=True)
    got = stored(ds_dir, "items")
    assert "data" in got.column_names and pc.count(got["data"]).as_py() > 0  # base64 images kept
    # a trace that grew keeps its earlier rows, payloads included
    save(corpus, "app/chat_1", conversation(4, T0))
    res = quiet_sync(corpus, ds_dir, kind="items", payloads=True)
    assert res.converted == 1
    assert_same(ds_dir, corpus, "items", payloads=True)
    # a foreign file's payload its column's type cannot hold (a number as data, text as an
    # embedding) is written as the loaders export it
    odd = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": T0},
           {"role": "assistant", "content_items": [{"type": "inline_data.done", "mime_type": "image/png", "data": 12345},
                                                   {"type": "embedding.done", "embedding": "not numbers"}],
            "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1}, "finish_reason": "stop", "created_at": T0 + 10}]
    (corpus / "foreign").mkdir()  # (mmsp's Tracer refuses such an item: written as a foreign file would be)
    (corpus / "foreign" / "payloads.json").write_text(json.dumps({"history": odd, "config": {"model": "glm-5.3"}}))
    quiet_sync(corpus, ds_dir, kind="items", payloads=True)
    assert_same(ds_dir, corpus, "items", payloads=True)
    # valid payloads of nested values (an embedding's numbers), in a trace that then grows (in a
    # month of its own: the other partition has collected enough small files to be merged)
    t = T0 + 40 * DAY
    embed = [user("embed this", t), {"role": "assistant", "content_items": [{"type": "embedding.done", "embedding": [0.1, 0.2, 0.3]}],
             "usage_metadata": {"prompt_tokens": 3, "response_tokens": 0}, "finish_reason": "stop", "created_at": t + 50}]
    save(corpus, "emb/one", embed)
    res = quiet_sync(corpus, ds_dir, kind="items", payloads=True)
    assert res.converted == 1 and not res.new_skipped
    assert_same(ds_dir, corpus, "items", payloads=True)
    save(corpus, "emb/one", embed + [user("and this", t + 60), {**embed[1], "created_at": t + 90}])
    before = mtimes(ds_dir)
    assert quiet_sync(corpus, ds_dir, kind="items", payloads=True).converted == 1
    assert {f: t for f, t in mtimes(ds_dir).items() if f in before} == before  # its earlier rows kept, not replaced
    assert_same(ds_dir, corpus, "items", payloads=True)


@pytest.mark.serial  # the sync must take under 30 s
def test_a_fifo_is_skipped_as_the_loaders_skip_it_and_never_waited_on(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    os.mkfifo(corpus / "app" / "pipe.json")  # just made: the scan hashes recent files
    save(corpus, "fifo/t", conversation(1, T0))
    os.mkfifo(corpus / "fifo" / "t.timing.jsonl")
    started = time.monotonic()
    res = quiet_sync(corpus, ds_dir)
    assert time.monotonic() - started < 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", traces.TraceLoadWarning)
        loaded = traces.load_turns(corpus, progress=False).attrs["skipped"]
    fifos = ("pipe.json", "t.timing.jsonl")
    fifo_notes = sorted((n["path"], n["reason"]) for n in loaded if Path(n["path"]).name in fifos)
    assert len(fifo_notes) == 2
    assert sorted((n["path"], n["reason"]) for n in res.skipped if Path(n["path"]).name in fifos) == fifo_notes
    assert_same(ds_dir, corpus)


def test_a_dataset_inside_its_source_folder(corpus: Path) -> None:
    ds_dir = corpus / "ds"
    first = quiet_sync(corpus, ds_dir)
    again = quiet_sync(corpus, ds_dir)
    assert again.converted == 0 and again.unchanged == first.converted
    with sqlite3.connect(ds_dir / "turns" / "_manifest.sqlite") as db:
        dirs = [r[0] for r in db.execute("SELECT path FROM dirs")]
    assert str(corpus) in dirs and not any(d.startswith(str(ds_dir / "turns")) for d in dirs)
    assert_same(ds_dir, corpus)


def test_a_dataset_of_an_earlier_layout_is_rebuilt_without_its_files(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    root = ds_dir / "turns"
    old = root / "date=2026-01-01" / "model=glm-5.3"  # the partitions of an earlier version (by day)
    old.mkdir(parents=True)
    shutil.copy(next(root.rglob("*.parquet")), old / "part-old-0.parquet")
    with sqlite3.connect(root / "_manifest.sqlite") as db:
        db.execute("UPDATE meta SET value = '\"7\"' WHERE key = 'version'")
    res = quiet_sync(corpus, ds_dir)
    assert res.unchanged == 0 and res.converted > 20  # rebuilt
    assert not (root / "date=2026-01-01").exists()
    assert {str(p) for p in root.rglob("*.parquet")} == set(traces.dataset(ds_dir).files)  # what a glob reader reads
    assert_same(ds_dir, corpus)


def test_a_source_folder_inside_the_dataset_folder_or_the_same(corpus: Path, tmp_path: Path) -> None:
    # the traces in a folder of the dataset's, or the dataset in the traces' folder itself: only
    # the dataset's kind directories are left out of the scan, never the traces
    work = tmp_path / "work"
    shutil.copytree(corpus, work / "cache")
    res = quiet_sync(work / "cache", work)
    assert res.converted > 20 and res.traces > 20
    assert_same(work, work / "cache")
    assert quiet_sync(work / "cache", work).converted == 0
    quiet_sync(corpus, corpus, kind="events")
    res = quiet_sync(corpus, corpus)
    assert res.traces > 20
    assert_same(corpus, corpus)
    assert_same(corpus, corpus, "events")
    assert quiet_sync(corpus, corpus, pattern="**/*").traces == res.traces  # (a pattern the data files match)
    (corpus / "linked").symlink_to(corpus / "turns")  # the dataset by another path: still its own
    assert quiet_sync(corpus, corpus).traces == res.traces
    with pytest.raises(ValueError, match="inside the dataset's own"):
        traces.sync(corpus / "turns", corpus)


def test_a_kind_directory_of_someone_elses_files_is_refused_and_kept(corpus: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    mine = {project / "events" / "notes" / "important.txt": "mine", project / "events" / "top.txt": "mine too",
            project / "turns" / "month=2024-01" / "part-0.parquet": "another tool's table"}
    for path, text in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for kind in ("events", "turns"):
        with pytest.raises(ValueError, match=r"is not a trace dataset .* which a sync would remove"):
            traces.sync(corpus, project, kind=kind)
    assert {p: p.read_text() for p in mine} == mine
    # a kind directory a sync made: only its partitions are its own
    quiet_sync(corpus, project, kind="items")
    (project / "items" / "mine" / "deep").mkdir(parents=True)
    (project / "items" / "mine" / "deep" / "keep.txt").write_text("mine")
    save(corpus, "app/new", conversation(1, T0))
    assert quiet_sync(corpus, project, kind="items").converted == 1
    assert (project / "items" / "mine" / "deep" / "keep.txt").read_text() == "mine"
    assert_same(project, corpus, "items")
    # left by a sync stopped before it made its manifest: taken
    (tmp_path / "stopped" / "turns").mkdir(parents=True)
    (tmp_path / "stopped" / "turns" / "_sync.lock").write_bytes(b"")
    quiet_sync(corpus, tmp_path / "stopped")
    assert_same(tmp_path / "stopped", corpus)


def test_a_directory_that_cannot_be_listed_is_reported_and_taken_again_once_it_can(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    old = time.time() - 60
    for d, _dirs, _files in os.walk(corpus):
        os.utime(d, (old, old))  # (a folder written a while ago: a scan may trust its listing)
    locked = str(corpus / "gen" / "shard_01")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)  # (as root, a chmod would not stop a listing)
    with pytest.warns(traces.TraceLoadWarning, match="unreadable directory"):
        res = traces.sync(corpus, ds_dir)
    note = {"path": locked, "reason": "unreadable directory: PermissionError: Permission denied"}
    assert res.new_skipped == [note] and note in res.skipped and res.removed == 8
    assert_same(ds_dir, corpus)  # as the loader reads the folder now
    again = quiet_sync(corpus, ds_dir)
    assert note in again.skipped and again.converted == again.removed == 0
    monkeypatch.setattr(os, "scandir", real_scandir)  # readable again (its mtime unchanged)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 8 and note not in res.skipped
    assert_same(ds_dir, corpus)


def test_a_file_that_cannot_be_read_is_read_again_once_it_can(corpus: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    locked = {str(corpus / "app" / "chat_1.json"), str(corpus / "runs" / "v1.5.timing.jsonl")}
    real_open = os.open

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) in locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)  # (as root, a chmod would not stop a read)
    res = quiet_sync(corpus, ds_dir)
    reasons = {s["path"]: s["reason"] for s in res.skipped}
    assert reasons[str(corpus / "app" / "chat_1.json")] == "unreadable: PermissionError: Permission denied"
    assert "unreadable: PermissionError" in reasons[str(corpus / "runs" / "v1.5.timing.jsonl")]
    assert_same(ds_dir, corpus)  # as the loader reads the folder now
    old = time.time() - 60
    for p in corpus.rglob("*"):
        os.utime(p, (old, old))  # (written a while ago: a scan may trust size and mtime)
    os.utime(corpus, (old, old))
    quiet_sync(corpus, ds_dir)
    monkeypatch.setattr(os, "open", real_open)  # readable again (size and mtime unchanged)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 2 and not [s for s in res.skipped if "unreadable" in s["reason"]]
    assert_same(ds_dir, corpus)
    assert quiet_sync(corpus, ds_dir).converted == 0


def test_a_damaged_manifest_is_named_and_nothing_is_touched(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    before = mtimes(ds_dir)
    manifest = ds_dir / "turns" / "_manifest.sqlite"
    for extra in ("-wal", "-shm"):
        Path(str(manifest) + extra).unlink(missing_ok=True)
    manifest.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ManifestError, match="sync into a new dataset_dir") as info:
        traces.sync(corpus, ds_dir)
    assert isinstance(info.value, RuntimeError) and info.value.path == str(manifest)
    assert mtimes(ds_dir) == before  # no data file removed
    # the way to rebuild it says what to remove: the manifest alone would leave a folder a sync refuses
    assert f"remove the folder {ds_dir / 'turns'} (the manifest with its data files" in str(info.value)
    for extra in ("", "-wal", "-shm"):
        Path(str(manifest) + extra).unlink(missing_ok=True)
    with pytest.raises(ValueError, match="a dataset whose manifest was removed: remove the folder to rebuild it"):
        traces.sync(corpus, ds_dir)
    assert mtimes(ds_dir) == before
    shutil.rmtree(ds_dir / "turns")
    quiet_sync(corpus, ds_dir)
    assert_same(ds_dir, corpus)
    with pytest.raises(ValueError, match="is a file"):
        traces.sync(corpus, manifest)


_FULL_DISK = """
import resource, signal, sys, warnings
sys.path.insert(0, {root!r})
from mmsp_notebook import traces
if __name__ == "__main__":
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    try:
        traces.sync({src!r}, {ds!r})
    except Exception as exc:
        print(type(exc).__name__, exc)
"""


def test_a_full_disk_is_named_not_taken_for_a_damaged_manifest(corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("resource")
    script = tmp_path / "full.py"
    script.write_text(_FULL_DISK.format(root=str(ROOT), src=str(corpus), ds=str(tmp_path / "ds")))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("OSError cannot open the manifest") and "full disk" in out and "remove" not in out
    res = quiet_sync(corpus, tmp_path / "ds")  # with room again
    assert res.converted > 20
    assert_same(tmp_path / "ds", corpus)
    # a transaction SQLite ended itself (as it does on a full disk) raises its own error, not ROLLBACK's
    with _manifest.Manifest(str(tmp_path / "ds" / "turns")) as m:
        with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            with m.transaction() as db:
                db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")


def test_small_files_of_many_syncs_are_merged(corpus: Path, tmp_path: Path) -> None:
    from mmsp_notebook.traces._compact import COMPACT_FILES

    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    part = ds_dir / "turns" / "month=2026-01" / "model=glm-5.3"
    counts = []
    for n in range(4, 4 + COMPACT_FILES + 2):  # a conversation going on, synced after every turn
        save(corpus, "app/chat_1", conversation(n, T0))
        time.sleep(0.01)
        res = quiet_sync(corpus, ds_dir)
        assert res.converted == 1
        counts.append(len(list(part.glob("*.parquet"))))
    assert max(counts) <= COMPACT_FILES and counts[-1] < max(counts)  # merged, not growing
    # what a glob reader sees is what the manifest lists: no file twice, none left behind
    on_disk = {str(p) for p in (ds_dir / "turns").rglob("*.parquet")}
    assert on_disk == set(traces.dataset(ds_dir).files)
    assert_same(ds_dir, corpus)
    partitioning = {"flavor": "hive", "schema": pa.schema([("month", pa.string()), ("model", pa.string())])}
    import pyarrow.dataset as pads

    globbed = pads.dataset(str(ds_dir / "turns"), partitioning=pads.partitioning(partitioning["schema"], flavor="hive"))
    assert globbed.count_rows() == stored(ds_dir).num_rows


def test_merges_take_small_files_by_size_tiers() -> None:
    """The few rows each sync writes are merged among themselves, not into the partition's large
    file, until their merged file is of a comparable size."""
    from mmsp_notebook.traces._compact import COMPACT_FILES, SMALL_ROWS, TIER_RATIO, plan

    big = SMALL_ROWS - 100  # a partition's file just under the size that is never merged
    part = "month=2026-01/model=glm-5.3"
    files = {f"{part}/part-big.parquet": big, "month=2026-01/model=other/part-x.parquet": 3}
    files.update({f"{part}/part-{k:02d}.parquet": 20 + k for k in range(COMPACT_FILES)})
    assert plan(files, [part]) == [sorted(n for n in files if n.startswith(part) and "big" not in n)]
    assert plan(files, ["month=2026-01/model=other"]) == []  # (one small file there)
    # once they add up to a comparable size, each larger file joins them
    files = {f"{part}/part-big.parquet": big, f"{part}/part-m.parquet": 6000}
    files.update({f"{part}/part-{k:02d}.parquet": 600 for k in range(COMPACT_FILES - 2)})
    assert plan(files, [part]) == [sorted(n for n in files if "big" not in n)]  # 6 x 600 = 3,600: 6,000 joins, not big
    assert TIER_RATIO * (3600 + 6000) < big
    files.update({f"{part}/part-{k:02d}.parquet": 700 for k in range(COMPACT_FILES - 2)})  # 4,200 + 6,000
    assert plan(files, [part]) == [sorted(files)]
    # one file far smaller than the others (the last chunk of a first sync) holds none back
    files = {f"{part}/part-a.parquet": 5, f"{part}/part-big.parquet": big}
    files.update({f"{part}/part-{k:02d}.parquet": 1000 + k for k in range(COMPACT_FILES)})
    assert plan(files, [part]) == [sorted(n for n in files if "big" not in n)]


def test_a_first_sync_of_many_chunks_leaves_few_files_a_partition(tmp_path: Path) -> None:
    """Each chunk writes a file into every partition it has rows for; the first sync's merges take
    them all, the last chunk's smaller files included."""
    from mmsp_notebook.traces._compact import COMPACT_FILES

    corpus, ds_dir = tmp_path / "cache", tmp_path / "ds"
    gen_corpus.generate(corpus, files=8 * 40 + 1, turns=4, seed=5, shard_size=100)  # 8 chunks, and one trace
    quiet_sync(corpus, ds_dir, chunk_files=40, executor=ThreadPoolExecutor(2))
    counts = {d: len(list(d.glob("*.parquet"))) for d in (ds_dir / "turns").glob("month=*/model=*")}
    assert counts and max(counts.values()) < COMPACT_FILES, counts
    assert_same(ds_dir, corpus)


def test_files_are_merged_rewritten_and_repriced_a_row_group_at_a_time(corpus: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         list_prices_restored: None) -> None:
    # a merge, a rewrite without a trace's rows and a repricing each hold one row group, not the
    # file: with row groups of 3 rows every one of them goes through several
    from mmsp_notebook.traces import _compact, _files

    monkeypatch.setattr(_files, "ROW_GROUP", 3)
    monkeypatch.setattr(_compact, "ROW_GROUP", 3)
    monkeypatch.setattr(_compact, "COMPACT_FILES", 2)  # the first sync's files are merged already,
    monkeypatch.setattr(_compact, "TIER_RATIO", 10**9)  # all of them
    ds_dir, pool = tmp_path / "ds", ThreadPoolExecutor(2)

    def row_groups() -> list[int]:
        return [pq.ParquetFile(f).metadata.row_group(i).num_rows
                for f in traces.dataset(ds_dir).files for i in range(pq.ParquetFile(f).metadata.num_row_groups)]

    quiet_sync(corpus, ds_dir, chunk_files=2, executor=pool)
    merged = [f for f in traces.dataset(ds_dir).files if f.endswith("-m.parquet")]
    assert merged and max(pq.ParquetFile(f).metadata.num_row_groups for f in merged) > 1
    assert max(row_groups()) <= 3
    assert_same(ds_dir, corpus)
    # a changed config: the trace's rows leave the merged file it was in, a row group at a time
    save(corpus, "app/chat_1", conversation(3, T0), temperature=0.25)
    assert quiet_sync(corpus, ds_dir, executor=pool).converted == 1
    assert_same(ds_dir, corpus)
    assert set(stored(ds_dir).filter(pc.equal(stored(ds_dir)["trace_id"], "app/chat_1"))["temperature"].to_pylist()) == {0.25}
    # new prices: the cost columns recomputed a row group at a time, each row with its own cost
    mine = {"glm-5.3": {"prompt_tokens": 7.0, "response_tokens": 11.0}}
    res = quiet_sync(corpus, ds_dir, prices=mine, executor=pool)
    assert res.repriced >= 1
    assert_same(ds_dir, corpus, prices=mine)
    assert max(row_groups()) <= 3


def test_a_dataset_given_by_a_relative_path_reads(tmp_path, monkeypatch):
    from mmsp_notebook import ask, traces

    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    import io

    from mmsp_notebook.engine import session as _session

    sess = _session.Session()
    sess.settings.demo_instant = True
    monkeypatch.setattr(_session, "_session", sess)
    try:
        ask("hello", stream=io.StringIO())
        traces.sync("cache", "ds", progress=False)
        assert len(traces.query("SELECT * FROM turns", "ds")) == 1
    finally:
        sess.close()


def test_a_relative_dataset_path_is_the_callers_on_workers_started_elsewhere(corpus: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the workers of a cluster run in directories of their own: a relative path means the caller's
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    with ProcessPoolExecutor(2, initializer=os.chdir, initargs=(str(elsewhere),)) as pool:
        res = quiet_sync(corpus, "ds", executor=pool, chunk_files=4)
    assert res.files > 0 and not list(elsewhere.iterdir())
    assert_same(tmp_path / "ds", corpus)


# --------------------------------------------------------------------------- memory of the main process


def _syncs(src: Path, ds_dir: Path) -> None:
    """A first sync and a re-sync after the directories changed (a full listing), chunks converted
    on threads of this process."""
    with ThreadPoolExecutor(1) as ex:
        quiet_sync(src, ds_dir, chunk_files=50, executor=ex)
        (src / f"added-{ds_dir.name}").mkdir()
        quiet_sync(src, ds_dir, chunk_files=50, executor=ex)


def _main_peak(src: Path, ds_dir: Path) -> int:
    """tracemalloc's peak over :func:`_syncs`."""
    import tracemalloc

    tracemalloc.start()
    try:
        _syncs(src, ds_dir)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_main_process_holds_a_window_of_traces_not_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the scan and the conversion read the traces a window at a time: four times the traces, the
    # same peak (before, ~830 bytes a trace file were kept: 1.5 MB more here)
    from mmsp_notebook.traces import _scan

    monkeypatch.setattr(_scan, "WINDOW", 100)
    monkeypatch.setattr(_dataset, "WINDOW", 100)
    monkeypatch.setattr(_runner, "IN_FLIGHT", 4)  # chunks in flight (the main process holds their traces)
    small, large = tmp_path / "small", tmp_path / "large"
    gen_corpus.generate(small, files=600, seed=5, shape="tiny", shard_size=150)
    gen_corpus.generate(large, files=2400, seed=5, shape="tiny", shard_size=150)
    _syncs(small, tmp_path / "warm")  # imports and caches, once (untraced: what it allocates is not measured)
    peak_small = _main_peak(small, tmp_path / "ds_small")
    peak_large = _main_peak(large, tmp_path / "ds_large")
    assert peak_large < peak_small + 600_000, (peak_small, peak_large)
    assert traces.dataset(tmp_path / "ds_large").count_rows() == len(traces.load_turns(large, progress=False))


@pytest.mark.parametrize("kind", ["turns", "events"])
def test_max_size_skips_as_the_loaders_do_and_another_one_rebuilds(corpus: Path, tmp_path: Path, kind: str) -> None:
    sizes = sorted(p.stat().st_size for p in corpus.rglob("*.json*"))
    limit = sizes[len(sizes) // 2]  # about half the files over it
    ds_dir = tmp_path / "ds"
    small = quiet_sync(corpus, ds_dir, kind=kind, max_size=limit, progress=False)
    assert sum(s["reason"].startswith("too large") for s in small.skipped) > 5
    assert_same(ds_dir, corpus, kind, max_size=limit)
    whole = quiet_sync(corpus, ds_dir, kind=kind, progress=False)  # the default again: rebuilt, all in
    assert not any(s["reason"].startswith("too large") for s in whole.skipped) and whole.unchanged == 0
    assert_same(ds_dir, corpus, kind)
    assert quiet_sync(corpus, ds_dir, kind=kind, progress=False).converted == 0  # (the default is no change)
    none = quiet_sync(corpus, ds_dir, kind=kind, max_size=0, progress=False)  # 0 is a limit too: every file over it
    assert none.rows == 0 and sum(s["reason"].startswith("too large") for s in none.skipped) >= len(sizes) // 2
    assert_same(ds_dir, corpus, kind, max_size=0)
    for bad in (-1, "1 MB", 2.5, True):
        with pytest.raises(OptionError, match="max_size must be a number of bytes"):
            traces.sync(corpus, ds_dir, kind=kind, max_size=bad)  # type: ignore[arg-type]
