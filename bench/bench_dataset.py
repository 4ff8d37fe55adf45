"""Benchmark ``mmsp_notebook.traces.sync`` (trace corpus -> partitioned Parquet dataset) and DuckDB over it.

For each corpus size (``bench/gen_corpus.py`` conversations of 10 turns, half with timing sidecars)
one fresh process measures, side by side:

* **first sync** into an empty dataset on the default process pool (one worker per CPU): wall
  and CPU time (workers' sampled with psutil), turns per CPU-second, against ``load_turns`` of the
  same corpus in the same process (one core, the loader the sync runs in each worker); peak RSS
  of the main process and of the largest worker (``VmHWM``) — the bound is a chunk per worker, so
  the worker figure must not grow with the corpus;
* **re-sync with nothing changed** (best of ``--repeat``), against the first sync (goal ≥ 20×
  faster);
* **1 % new conversations**, as an agent or a notebook adds them: all in the directory of one of its
  conversations, so that only that directory is listed again, measured against the whole folder
  listed (best of 2, alternating); then spread over every directory (most of them change and
  are listed again, a batch of 65,536 traces at a time); then all in a new directory (a new run's);
* **1 % of the files changed** (five draws of other files, the median reported) as mmsp's Tracer changes them — a turn appended to a conversation
  (its trace file rewritten whole, a record appended to its sidecar) — against the first sync
  (goal ≤ 5 % of its time); and, as the worst case, 1 % of the conversations with a changed
  config (every row of the trace differs, so its old rows are removed from their files first);
  then ``--series`` syncs in a row, each after another 1 % of the files grew (mean and slowest:
  what keeping a dataset up to date costs, the merging of the small files they leave included);
* **the scan's records, side by side**: a re-sync with nothing changed (alternating, best of
  ``--repeat``) and one after 1 % grew, with the scan reading the stat signatures from the copy
  beside the manifest (``_scan.arrow``) and from the manifest's own records (the copy neither read
  nor written, as before it);
* **new prices** for every model (as after an upgrade of mmsp with new list prices): every file's
  cost columns recomputed in place, against the first sync;
* **p50/p90/p99 latency by model**: ``traces.query`` in DuckDB over the dataset (views created
  each time) against pandas ``groupby().quantile()`` on the frame ``load_turns`` returned.

Usage::

    .venv/bin/python bench/bench_dataset.py                         # 100,000 and 1,000,000 turns
    .venv/bin/python bench/bench_dataset.py --sizes 20000 --no-results   # a quick run

The changed files are written back as they were at the end. Results are printed and written as
the "Trace datasets" section of ``bench/RESULTS.md`` (unless ``--no-results``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import gen_corpus  # noqa: E402

SECTION = "## Trace datasets"


def ensure_corpus(corpus: Path, files: int, turns: int, seed: int) -> None:
    """Generate the corpus unless one with the same parameters is there."""
    gen_corpus.ensure(corpus, {"files": files, "turns": turns, "seed": seed, "version": 1},
                      files=files, turns=turns, seed=seed)


# --------------------------------------------------------------------------- the measuring process

_RUNNER = r'''
import gc, json, os, random, shutil, sys, threading, time
sys.path.insert(0, {root!r})
import orjson
import psutil
from mmsp_notebook import traces
import mmsp, mmsp_notebook.traces._dataset  # imports (mmsp, pandas, pyarrow) before the clock starts

SRC, DS, REPEAT, SEED, SERIES = {src!r}, {ds!r}, {repeat!r}, {seed!r}, {series!r}
DRAWS = 5  # draws of 1 % changed files for each kind of change (the median is reported)


def vm(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    """Peak RSS (VmHWM) and CPU time of every process below this one (the pool's workers), read
    every 100 ms, the list of processes once a second (so that sampling costs the main process
    little CPU)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.worker_peak, self.cpu = threading.Event(), 0, {{}}

    def run(self):
        me = psutil.Process()
        kids, listed = [], 0.0
        while not self.stop.wait(0.1):
            if time.monotonic() - listed > 1.0:  # listing processes scans /proc: once a second
                try:
                    kids, listed = me.children(recursive=True), time.monotonic()
                except psutil.Error:
                    continue
            for p in kids:
                try:
                    with open(f"/proc/{{p.pid}}/status") as fh:
                        for line in fh:
                            if line.startswith("VmHWM:"):
                                self.worker_peak = max(self.worker_peak, int(line.split()[1]) * 1024)
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                except (OSError, psutil.Error):
                    pass


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def sidecar_of(path):
    return path[:-5] + ".timing.jsonl"


def change(files, how):
    """Change the files as mmsp's Tracer does: rewrite the conversation whole (a turn appended, or
    the config changed), append the turn's record to the sidecar when there is one."""
    saved = {{}}
    for f in files:
        raw = open(f, "rb").read()
        saved[f] = raw
        sc = sidecar_of(f)
        if os.path.exists(sc):
            saved[sc] = open(sc, "rb").read()
        d = orjson.loads(raw)
        h = d["history"]
        last = h[-1]["created_at"]
        if how == "append":
            h.append({{"role": "user", "content_items": [{{"type": "text.done", "text": "one more question"}}], "created_at": last + 5000}})
            usage = {{"cached_tokens": 0, "prompt_tokens": 40, "thoughts_tokens": None, "response_tokens": 12}}
            h.append({{"role": "assistant", "content_items": [{{"type": "text.done", "text": "one more answer"}}],
                      "usage_metadata": usage, "finish_reason": "stop", "created_at": last + 7000}})
            if sc in saved:
                n_turns = sum(1 for m in h if m["role"] == "assistant")
                rec = {{"v": 1, "trace_id": d["config"].get("trace_id"), "turn": n_turns - 1, "message_index": len(h) - 1,
                       "model": d["config"]["model"], "client_type": None, "status": "complete", "error": None,
                       "started_at": float(last + 5010), "ttft_ms": 300.0, "total_ms": 1990.0, "usage": usage,
                       "finish_reason": "stop", "events": [[300.0, "text.delta", 15], [1990.0, "stop", 0]]}}
                with open(sc, "ab") as fh:
                    fh.write(orjson.dumps(rec) + b"\n")
        else:
            d["config"]["temperature"] = 0.55
        open(f, "wb").write(orjson.dumps(d, option=orjson.OPT_INDENT_2))
    return saved


def add_new(files, into=None):
    """A new conversation beside each file (in its directory, under a new name; or in the new
    directory ``into``): the file's history with its times a second later and its first message
    another text, so that it repeats none of the corpus' messages. Returns the files written."""
    made = []
    if into is not None:
        os.makedirs(into)
    for f in files:
        d = orjson.loads(open(f, "rb").read())
        for m in d["history"]:
            if isinstance(m.get("created_at"), (int, float)):
                m["created_at"] += 1000
        first = d["history"][0]["content_items"][0]
        first["text"] = "a new conversation: " + str(first.get("text", ""))
        d["config"]["trace_id"] = None
        new = f"{{f[:-5]}}_new{{len(made)}}.json" if into is None else os.path.join(into, f"new{{len(made)}}.json")
        first["text"] = f"{{len(made)}}: {{first['text']}}"
        open(new, "wb").write(orjson.dumps(d, option=orjson.OPT_INDENT_2))
        made.append(new)
    return made


if __name__ == "__main__":
    out = {{}}
    shutil.rmtree(DS, ignore_errors=True)
    base_rss = vm("VmRSS")
    sampler = Sampler()
    sampler.start()
    cpu0 = time.process_time()
    out["first"], res = timed(lambda: traces.sync(SRC, DS, progress=False))
    out["main_cpu"] = time.process_time() - cpu0
    sampler.stop.set()
    sampler.join()
    out["worker_cpu"] = sum(sampler.cpu.values())
    out["main_peak"] = vm("VmHWM")
    out["main_base"] = base_rss
    out["worker_peak"] = sampler.worker_peak
    out["rows"], out["files"], out["traces"] = res.rows, res.files, res.traces
    out["workers"] = os.cpu_count()
    out["repeat"] = REPEAT
    out["nothing"] = min(timed(lambda: traces.sync(SRC, DS, progress=False))[0] for _ in range(REPEAT))
    # side by side: the scan reading the manifest's own records (no copy of them trusted, none
    # written: as before the copy) and reading the copy, alternating
    from mmsp_notebook.traces import _snapshot
    real = _snapshot.Snapshot.open, _snapshot.Draft, _snapshot.refresh

    def records(fn):
        _snapshot.Snapshot.open = classmethod(lambda cls, root, token, name=None: None)
        _snapshot.Draft = lambda root: None
        _snapshot.refresh = lambda *a: None
        try:
            return fn()
        finally:
            _snapshot.Snapshot.open, _snapshot.Draft, _snapshot.refresh = real

    side = {{"records": [], "copy": []}}
    for _ in range(REPEAT):
        side["records"].append(records(lambda: timed(lambda: traces.sync(SRC, DS, progress=False)))[0])
        traces.sync(SRC, DS, progress=False)  # (writes the copy again)
        side["copy"].append(timed(lambda: traces.sync(SRC, DS, progress=False))[0])
    out["nothing_records"], out["nothing_copy"] = min(side["records"]), min(side["copy"])
    files = sorted(str(p) for p in __import__("pathlib").Path(SRC).rglob("*.json"))
    rng = random.Random(SEED)
    out["changed_files"] = n = max(1, len(files) // 100)
    # the Tracer's change and a changed config: DRAWS draws each (other files each time), the
    # median kept (one draw's time moves with which files and partitions it hits, and the machine)
    for how in ("append", "config") * DRAWS + ("append_records",):
        chosen = rng.sample(files, n)
        saved = change(chosen, how[:6])
        time.sleep(2.1)  # past the racy window: the stat signature decides, not a content hash
        if how == "append_records":  # the Tracer's change again, the scan reading the manifest's records
            t, r = records(lambda: timed(lambda: traces.sync(SRC, DS, progress=False)))
        else:
            t, r = timed(lambda: traces.sync(SRC, DS, progress=False))
        out.setdefault(how + "_draws", []).append(t)
        out[how] = sorted(out[how + "_draws"])[len(out[how + "_draws"]) // 2]
        out[how + "_converted"] = r.converted
        for f, raw in saved.items():
            open(f, "wb").write(raw)
        time.sleep(2.1)
        traces.sync(SRC, DS, progress=False)  # back to the corpus as generated
    # 1 % new conversations, as an agent or a notebook adds them: all in the directory of one of its
    # conversations (that directory's mtime changes): only it is listed again, against the whole
    # folder listed (as before), alternating; then 1 % new conversations spread over every directory
    from mmsp_notebook.traces import _scan
    real_partial = _scan._partial
    by_dir = {{}}
    for f in files:
        by_dir.setdefault(os.path.dirname(f), []).append(f)
    for label in ("new", "new_full", "new_again", "new_full_again", "new_spread", "new_dir"):
        into = None
        if label == "new_spread":
            picked = rng.sample(files, n)
        else:
            home = by_dir[os.path.dirname(rng.choice(files))]
            picked = [home[i % len(home)] for i in range(n)]
            if label == "new_dir":  # a new directory beside that one (a new run's, say)
                into = os.path.join(os.path.dirname(os.path.dirname(picked[0])), "run_new")
        made = add_new(picked, into)
        time.sleep(2.1)
        if "full" in label:
            _scan._partial = lambda *a, **k: None
        try:
            t, r = timed(lambda: traces.sync(SRC, DS, progress=False))
        finally:
            _scan._partial = real_partial
        key = label.replace("_again", "")
        out[key] = min(out.get(key, t), t)
        out[key + "_converted"] = r.converted
        for f in made:
            os.remove(f)
        if into is not None:
            os.rmdir(into)
        time.sleep(2.1)
        traces.sync(SRC, DS, progress=False)
    # the Tracer's change again, SERIES syncs in a row (other files each time, as a sync run every
    # so often finds them): what a dataset kept up to date costs, the merging of small files included
    series, saved = [], {{}}
    for _ in range(SERIES):
        for f, raw in change(rng.sample(files, n), "append").items():
            saved.setdefault(f, raw)
        time.sleep(2.1)
        series.append(timed(lambda: traces.sync(SRC, DS, progress=False))[0])
    out["series"] = series
    for f, raw in saved.items():
        open(f, "wb").write(raw)
    time.sleep(2.1)
    traces.sync(SRC, DS, progress=False)
    # new prices for every model (as an upgrade of mmsp bringing new list prices would): every
    # file's cost columns are recomputed; then back to the list prices (the same work again)
    models = sorted(traces.query("SELECT DISTINCT model FROM turns WHERE model IS NOT NULL", DS)["model"])
    mine = {{m: {{"prompt_tokens": 1.0 + k, "response_tokens": 2.0 + k}} for k, m in enumerate(models)}}
    t1, r = timed(lambda: traces.sync(SRC, DS, progress=False, prices=mine))
    t2, r2 = timed(lambda: traces.sync(SRC, DS, progress=False))
    out["reprice"], out["repriced"] = min(t1, t2), min(r.repriced, r2.repriced)
    cpu0 = time.process_time()
    out["load_turns"], df = timed(lambda: traces.load_turns(SRC, progress=False))
    out["load_cpu"] = time.process_time() - cpu0
    out["load_rows"] = len(df)
    sql = ("SELECT model, quantile_cont(latency, 0.5) AS p50, quantile_cont(latency, 0.9) AS p90, "
           "quantile_cont(latency, 0.99) AS p99 FROM turns GROUP BY model ORDER BY model")
    out["duckdb"], q = min((timed(lambda: traces.query(sql, DS)) for _ in range(REPEAT)), key=lambda x: x[0])
    out["pandas"], p = min((timed(lambda: df.groupby("model", observed=True)["latency"].quantile([0.5, 0.9, 0.99]).unstack())
                            for _ in range(REPEAT)), key=lambda x: x[0])
    import numpy as np
    out["same_figures"] = bool(np.allclose(q[["p50", "p90", "p99"]].to_numpy(), p.to_numpy(), equal_nan=True))
    out["bytes"] = sum(f.stat().st_size for f in __import__("pathlib").Path(DS).rglob("*.parquet"))
    print("RESULT " + json.dumps(out))
'''


def run_size(corpus: Path, ds: Path, repeat: int, seed: int, series: int) -> dict[str, Any]:
    script = ds.with_name(ds.name + "_runner.py")
    script.write_text(textwrap.dedent(_RUNNER.format(root=str(ROOT), src=str(corpus), ds=str(ds), repeat=repeat, seed=seed,
                                                     series=series)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-4000:])
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def report(n_turns: int, r: dict[str, Any]) -> list[str]:
    w = r["workers"]
    per_core = r["rows"] / r["first"] / w
    loader = r["load_rows"] / r["load_turns"]
    cpu = r["main_cpu"] + r["worker_cpu"]
    return [
        f"{n_turns:,} turns ({r['traces']:,} files): first sync {r['first']:.2f} s on {w} workers = "
        f"{per_core:,.0f} turns/s per worker; load_turns alone {r['load_turns']:.2f} s = {loader:,.0f} turns/s on one core",
        f"  CPU: sync {cpu:.2f} s (workers {r['worker_cpu']:.2f} + main {r['main_cpu']:.2f}) = {r['rows'] / cpu:,.0f} turns per "
        f"CPU-second; load_turns {r['load_cpu']:.2f} s = {r['load_rows'] / r['load_cpu']:,.0f}; "
        f"{r['rows']:,} rows in {r['files']} files, {r['bytes'] / 1e6:.1f} MB",
        f"  peak RSS: main {r['main_peak'] / 1e6:.0f} MB (after imports {r['main_base'] / 1e6:.0f} MB), largest worker "
        f"{r['worker_peak'] / 1e6:.0f} MB",
        f"  re-sync, nothing changed: {r['nothing'] * 1000:.0f} ms = {r['first'] / r['nothing']:.0f}x faster than the first sync",
        f"  re-sync, 1% of files grew by a turn ({r['append_converted']} converted; median of {len(r['append_draws'])} draws: "
        f"{_draws(r['append_draws'])}): {r['append'] * 1000:.0f} ms = {100 * r['append'] / r['first']:.1f}% of the first sync",
        f"  the scan's records side by side (best of {r.get('repeat', 3)}, alternating), from the copy against the manifest's own: "
        f"nothing changed {r['nothing_copy'] * 1000:.0f} vs {r['nothing_records'] * 1000:.0f} ms "
        f"({r['nothing_records'] / r['nothing_copy']:.2f}x); 1% grown {r['append'] * 1000:.0f} vs {r['append_records'] * 1000:.0f} ms "
        f"({r['append_records'] / r['append']:.2f}x; other files each)",
        f"  re-sync, 1% of files grew by a turn, {len(r['series'])} syncs in a row (other files each time, merging of "
        f"small files included): mean {1000 * _mean(r['series']):.0f} ms = {100 * _mean(r['series']) / r['first']:.1f}% of the "
        f"first sync, slowest {1000 * max(r['series']):.0f} ms",
        f"  re-sync, 1% of files with a changed config (rows replaced; median of {len(r['config_draws'])} draws: "
        f"{_draws(r['config_draws'])}): {r['config'] * 1000:.0f} ms = {100 * r['config'] / r['first']:.1f}% of the first sync",
        f"  re-sync, 1% new conversations in one directory, as an agent adds them ({r['new_converted']} converted; best of 2): "
        f"{r['new'] * 1000:.0f} ms = {100 * r['new'] / r['first']:.1f}% of the first sync; that directory listed again, "
        f"against the whole folder listed: {r['new'] * 1000:.0f} vs {r['new_full'] * 1000:.0f} ms ({r['new_full'] / r['new']:.2f}x); "
        f"spread over every directory (each listed again, 65,536 traces a batch): {r['new_spread'] * 1000:.0f} ms = "
        f"{100 * r['new_spread'] / r['first']:.1f}%" + (
            f"; in a new directory (listed with its parent): {r['new_dir'] * 1000:.0f} ms = "
            f"{100 * r['new_dir'] / r['first']:.1f}%" if "new_dir" in r else ""),
        f"  re-sync, new prices for every model ({r['repriced']} files' cost columns recomputed, no trace read): "
        f"{r['reprice'] * 1000:.0f} ms = {100 * r['reprice'] / r['first']:.1f}% of the first sync",
        f"  p50/p90/p99 latency by model: DuckDB over the dataset {r['duckdb'] * 1000:.0f} ms, pandas on the loaded "
        f"frame {r['pandas'] * 1000:.0f} ms ({r['duckdb'] / r['pandas']:.2f}x; load_turns first: {r['load_turns']:.1f} s); "
        f"same figures: {r['same_figures']}",
    ]


def _draws(values: list[float]) -> str:
    return " / ".join(f"{v * 1000:.0f}" for v in values) + " ms"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _goal(percent: float) -> str:
    """A share of the first sync, bold when within the 5 % goal."""
    return f"**{percent:.1f} %**" if percent <= 5 else f"{percent:.1f} %, over 5 %"


def _markdown(cmd: str, lines: list[str], figures: dict[int, dict[str, Any]]) -> str:
    import pandas as pd
    import pyarrow as pa

    sizes = sorted(figures)
    small, big = figures[sizes[0]], figures[sizes[-1]]
    table = [
        "| turns | first sync | turns per CPU-second: sync (load_turns) | peak RSS main / worker | nothing changed | 1 % grew | 1 % grew, in a row (mean) | 1 % replaced | DuckDB vs pandas quantiles |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in sizes:
        r = figures[n]
        table.append(
            f"| {n:,} | {r['first']:.1f} s | {r['rows'] / (r['main_cpu'] + r['worker_cpu']):,.0f} ({r['load_rows'] / r['load_cpu']:,.0f}) | "
            f"{r['main_peak'] / 1e6:.0f} / {r['worker_peak'] / 1e6:.0f} MB | {r['nothing'] * 1000:.0f} ms "
            f"(**{r['first'] / r['nothing']:.0f}×** faster) | {r['append'] * 1000:.0f} ms ({_goal(100 * r['append'] / r['first'])}) | "
            f"{_mean(r['series']) * 1000:.0f} ms ({_goal(100 * _mean(r['series']) / r['first'])}) | "
            f"{r['config'] * 1000:.0f} ms ({_goal(100 * r['config'] / r['first'])}) | {r['duckdb'] * 1000:.0f} vs {r['pandas'] * 1000:.0f} ms |"
        )
    grow = big["worker_peak"] / max(small["worker_peak"], 1)
    return "\n".join(
        [
            f"{SECTION} — `{cmd}`",
            "",
            f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, pandas "
            f"{pd.__version__}, pyarrow {pa.__version__}. Corpus from `bench/gen_corpus.py` (10 turns a conversation, "
            "half with sidecars); one fresh process per size; `traces.sync` on its default process pool.",
            "",
            "```",
            *lines,
            "```",
            "",
            *table,
            "",
            f"* Memory: the largest worker's peak RSS is bounded by a chunk (at most 2,000 traces and 128 MB of files; "
            f"smaller on the default pool to give each worker four), not the corpus: {small['worker_peak'] / 1e6:.0f} MB at "
            f"{sizes[0]:,} turns and {big['worker_peak'] / 1e6:.0f} MB at {sizes[-1]:,} ({grow:.2f}×), about 120 MB of it "
            "the interpreter with pandas and pyarrow. The main process holds no rows (but for a sync of one chunk, run in "
            "it) and nothing per trace file: it reads the folder and the manifest 4,096 traces at a time (the traces to "
            "convert wait in the manifest's work table) and holds the results of the chunks in flight (two per worker). "
            f"Its peak over the imports: {(small['main_peak'] - small['main_base']) / 1e6:.0f} MB at {sizes[0]:,} turns, "
            f"{(big['main_peak'] - big['main_base']) / 1e6:.0f} MB at {sizes[-1]:,} ({big['traces'] / small['traces']:.0f}× the files; "
            f"the chunks are {min(2000, max(1000, -(-small['traces'] // 8))):,} and {min(2000, max(1000, -(-big['traces'] // 8))):,} "
            "traces on this pool).",
            f"* CPU: at {sizes[-1]:,} turns the workers spent {big['worker_cpu'] / big['load_cpu']:.2f}× the CPU time of "
            "`load_turns` (the fork server's imports included; a chunk reads its files as the loader does, then also "
            "builds Arrow tables, writes Parquet and hashes rows for the next sync) and the main process "
            f"{big['main_cpu'] / big['load_cpu']:.2f}× (the manifest). Wall-clock times are on a shared 2-CPU machine: "
            f"`load_turns` itself got {big['load_cpu'] / big['load_turns']:.0%} of a CPU in that run.",
            f"* Goals: nothing changed ≥ 20× faster than the first sync — {small['first'] / small['nothing']:.0f}× and "
            f"{big['first'] / big['nothing']:.0f}×; 1 % of files changed ≤ 5 % of the first sync — the Tracer's change (a "
            f"turn appended) {100 * small['append'] / small['first']:.1f} % and {100 * big['append'] / big['first']:.1f} % (in "
            f"{len(big['series'])} syncs in a row, on average {100 * _mean(small['series']) / small['first']:.1f} % and "
            f"{100 * _mean(big['series']) / big['first']:.1f} %), "
            f"a changed config {100 * small['config'] / small['first']:.1f} % and {100 * big['config'] / big['first']:.1f} % "
            "(over the goal: every file holding one of those traces is rewritten without its rows; plain Parquet has no "
            "deletion vectors).",
            "* Nothing changed: the scan stats the files it knows while no directory's mtime changed since the last full "
            "listing (no file added, removed or renamed), comparing them in NumPy with the copy of their signatures "
            "kept beside the manifest (`_scan.arrow`), and converts nothing.",
            "* New conversations: a file added to a directory changes its mtime; the directories whose mtime changed "
            "are listed again, as the loaders list a directory, and the traces they still hold with the same files "
            "are compared with the copy as every other trace is, a batch of 65,536 traces at a time (the whole folder "
            "is listed when a directory was added, removed or linked to).",
            "* 1 % changed: the Tracer's way — a conversation rewritten with one more turn — converts those files again "
            "and writes only their new rows (the rows a trace still has are recognized by a digest); a changed config "
            "changes every row of the trace: its new rows are written under a hidden name, its old rows removed from "
            "their files (each file holding one is rewritten), then the new files are renamed into place — the slower case "
            "(its manifest records are updated where they are: a trace keeps its units, the messages being the same).",
            f"* New prices (your `prices=`, or mmsp's list prices after an upgrade) for every model: the cost columns of "
            f"every file are recomputed in place (read, two columns replaced, written), no trace file read again — "
            f"{100 * small['reprice'] / small['first']:.1f} % and {100 * big['reprice'] / big['first']:.1f} % of the first sync.",
            "* The shares move with the first sync's speed: a re-sync has costs that a faster first sync does not shrink "
            "in proportion — the scan (~50 ms per 10,000 files, two `stat` calls a trace), and one small file per (month, model) "
            "partition the changed traces touch (a few ms each to write, and to merge later: a partition that collects 8 "
            "such files has them merged by size tiers — the small ones among themselves, a larger file joining once they "
            "add up to half its size — which the syncs in a row include). The changed conversations are drawn at random "
            "from the whole corpus, their new turn dated just after their last one: the worst case for the number of "
            "partitions touched (a conversation continued today writes into this month's).",
            "",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="turns per corpus, comma separated")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--series", type=int, default=10, help="syncs in a row, each after 1%% of the files grew")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mmsp_ds_bench"))
    ap.add_argument("--no-results", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    figures: dict[int, dict[str, Any]] = {}
    lines: list[str] = []
    for n in sizes:
        files = max(1, n // args.turns)
        corpus = args.work / f"corpus_{n}"
        ensure_corpus(corpus, files, args.turns, args.seed)
        r = run_size(corpus, args.work / f"dataset_{n}", args.repeat, args.seed, args.series)
        figures[n] = r
        out = report(n, r)
        lines += out
        print("\n".join(out), flush=True)
    if not args.no_results:
        given = sys.argv[1:] if argv is None else argv
        cmd = " ".join([".venv/bin/python bench/bench_dataset.py", *given])
        path = HERE / "RESULTS.md"
        text = path.read_text(encoding="utf-8")
        section = _markdown(cmd, lines, figures)
        pattern = re.compile(rf"^{re.escape(SECTION)}.*?(?=^## |\Z)", re.S | re.M)
        text = pattern.sub(lambda _m: section, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
        path.write_text(text, encoding="utf-8")
        print(f"wrote the {SECTION!r} section of {path}")
    shutil.rmtree(args.work / "dataset_tmp", ignore_errors=True)


if __name__ == "__main__":
    main()
