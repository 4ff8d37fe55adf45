"""Benchmark of the trace explorer (``traces.explore``) and of ``traces.show``, measured in one run.

1. **Ready**: ``explore(corpus)`` (load the turns, build the explorer, its first page) against
   ``load_turns(corpus)`` alone, alternated round by round on the same warm corpus
   (``bench/gen_corpus.py``); the ratio of the medians.
2. **Answers**: the kernel time of each filter, sort and page the front end can ask for, measured
   around the comm message handler (the query applied, the page formatted), on the full corpus.
3. **Bytes per page**: the JSON of a page message for the first 1 %, 10 % and all of the corpus.
4. **show()**: a conversation of 100 and of 200 messages with an image in every other answer:
   HTML bytes per byte of content, and the render time.
5. **Detail of a long conversation**: rows of the longest agent trace of a ``--shape agent`` corpus
   (one turn of 50 to 80 steps, tool results, thinking) selected; the detail message as it is sent
   now (a window around the selected step) beside the whole conversation in one message (what it
   used to send: every entry and the whole waterfall): bytes, kernel time (the handler, and the
   JSON encoding), and the front end drawing it (``explore.js`` in jsdom, when node is there),
   then every ``more`` message that brings the rest.

Run: ``.venv/bin/python bench/bench_explore.py [--files 10000] [--rounds 3] [--agent-files 20]``
(``--files 200`` for a quick look). Prints the figures; record them in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import gen_corpus  # noqa: E402

from mmsp_notebook import traces  # noqa: E402

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("search a word (conversation_04)", {"text": "conversation_04"}),
    ("search a term (latency>10s)", {"text": "latency>10s"}),
    ("two terms (model:glm ttft>1)", {"text": "model:glm ttft>1"}),
    ("facet: one model", {"text": "", "model": ["deepseek-v4-pro"]}),
    ("facet: status error", {"model": [], "status": ["error"]}),
    ("quick: errors", {"status": [], "quick": ["errors"]}),
    ("quick: truncated", {"quick": ["truncated"]}),
    ("quick: bad tool arguments", {"quick": ["bad_args"]}),
    ("quick: tool errors", {"quick": ["tool_errors"]}),
    ("quick: slowest TTFT (sorts)", {"quick": ["slow_ttft"]}),
    ("quick: longest thinking (sorts)", {"quick": ["long_thinking"]}),
    ("range: cost 0.001..0.01", {"quick": [], "ranges": {"cost": [0.001, 0.01]}}),
    ("sort: latency, most first", {"ranges": {}, "sort": "latency", "desc": True}),
    ("sort: trace id", {"sort": "trace_id", "desc": False}),
    ("sort: error", {"sort": "error", "desc": True}),
    ("page: jump to page 2,000", {"sort": None, "page": 2000}),
    ("page: next", {"page": 2001}),
    ("page size 100", {"page_size": 100, "page": 0}),
    ("everything back", {"page_size": 25}),
]


def ensure(corpus: Path, files: int, turns: int, seed: int) -> None:
    gen_corpus.ensure(corpus, {"files": files, "turns": turns, "seed": seed, "version": 2},
                      files=files, turns=turns, seed=seed, tool_errors=True)  # some conversations' tools fail


def capture(widget: Any) -> list[Any]:
    sent: list[Any] = []
    widget.comm.send = lambda data=None, buffers=None, **_: sent.append(data.get("content") if data else data)
    return sent


def ask(widget: Any, sent: list[Any], message: dict[str, Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": message}}, "buffers": []})
    return (time.perf_counter() - t) * 1000.0, sent[-1]


def ready(corpus: Path, rounds: int) -> dict[str, Any]:
    """Alternated rounds; each explorer but the last is closed, as a kernel would drop it (an open
    widget stays registered, with its frame, until it is closed)."""
    load, explore = [], []
    explorer = None
    for _ in range(rounds):
        if explorer is not None:
            explorer.close()
        explorer = None
        gc.collect()
        t = time.perf_counter()
        turns = traces.load_turns(corpus, progress=False)
        load.append(time.perf_counter() - t)
        del turns
        gc.collect()
        t = time.perf_counter()
        explorer = traces.explore(corpus, progress=False)
        sent = capture(explorer)
        ask(explorer, sent, {"type": "hello"})  # the first page, as a front end asks for it
        explore.append(time.perf_counter() - t)
    return {"rows": len(explorer.turns), "load": statistics.median(load), "explore": statistics.median(explore),
            "ratio": statistics.median(explore) / statistics.median(load), "explorer": explorer}


def conversation(root: Path, messages: int) -> tuple[Path, int]:
    """A trace of ``messages`` messages, an image in every other answer; its content bytes."""
    png = base64.b64encode(bytes(range(256)) * 16).decode()
    history, content = [], 0
    for k in range(messages // 2):
        question = f"Question {k}: what about item {k}? " * 3
        answer = f"Answer {k}: **item {k}** is fine.\n\n- one\n- two\n\n" + "More words here. " * 20
        items: list[dict[str, Any]] = [{"type": "text.done", "text": answer}]
        if k % 2:
            items.append({"type": "inline_data.done", "data": png, "mime_type": "image/png"})
        content += len(question) + len(answer) + (len(png) if k % 2 else 0)
        history.append({"role": "user", "content_items": [{"type": "text.done", "text": question}],
                        "created_at": 1_767_225_600_000 + k * 10_000})
        history.append({"role": "assistant", "content_items": items, "finish_reason": "stop",
                        "usage_metadata": {"prompt_tokens": 10, "response_tokens": 50},
                        "created_at": 1_767_225_600_000 + k * 10_000 + 2_000})
    path = root / f"long_{messages}.json"
    path.write_text(json.dumps({"history": history, "config": {"model": "demo"}, "timestamp": "2026-01-01T00:00:00"}))
    return path, content


DRAW = """
import { JSDOM } from "jsdom";
import { readFileSync } from "node:fs";
const { default: widget } = await import(process.argv[1]);
const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
const win = jsdom.window;
for (const k of ["window", "document", "navigator", "HTMLElement", "Node"]) globalThis[k] ??= k === "window" ? win : win[k];
const handlers = [];
const model = { get: () => undefined, on: (n, fn) => handlers.push(fn), off() {}, send() {}, set() {}, save_changes() {} };
const out = {};
for (const [name, file] of Object.entries(JSON.parse(process.argv[2]))) {
  const times = [];
  for (let k = 0; k < 5; k++) {
    const el = win.document.createElement("div");
    win.document.body.appendChild(el);
    handlers.length = 0;
    const dispose = widget.render({ model, el });
    const raw = readFileSync(file, "utf8");
    const t = performance.now();
    const msg = JSON.parse(raw);
    for (const fn of handlers) fn(msg, []);
    times.push(performance.now() - t);
    dispose();
    el.remove();
  }
  times.sort((a, b) => a - b);
  out[name] = times[2];
}
console.log(JSON.stringify(out));
"""


def draw_ms(messages: dict[str, Any]) -> dict[str, float] | None:
    """The front end's time to parse and draw each message (median of 5, jsdom), or None without node."""
    import shutil
    import subprocess
    import tempfile

    js = ROOT / "js"
    if shutil.which("node") is None or not (js / "node_modules" / "jsdom").exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, msg in messages.items():
            files[name] = str(Path(tmp) / f"{name}.json")
            Path(files[name]).write_text(json.dumps(msg, ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(["node", "--input-type=module", "-e", DRAW, str(js / "src" / "explore.js"), json.dumps(files)],
                              cwd=js, capture_output=True, text=True, timeout=600)
    if done.returncode:
        print(f"  (front end not measured: {done.stderr.strip().splitlines()[-1:]})")
        return None
    return {k: float(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def long_detail(corpus: Path, files: int) -> None:
    """Figure 5: the detail of a long agent conversation, now beside the whole conversation in one message."""
    gen_corpus.ensure(corpus, {"files": files, "seed": 11, "shape": "agent", "version": 1}, files=files, seed=11,
                      shape="agent")
    explorer = traces.explore(corpus, progress=False)
    sent = capture(explorer)
    ask(explorer, sent, {"type": "hello"})
    counts = explorer.turns["trace_id"].value_counts()
    tid = counts.index[0]
    rows = [int(i) for i in explorer.turns.index[explorer.turns["trace_id"] == tid]]
    print(f"detail of a long conversation: {tid}, {len(rows)} assistant messages in one turn "
          f"(`gen_corpus.py --shape agent --files {files}`, its longest trace)")
    for label, pos in (("first step", rows[0]), ("middle step", rows[len(rows) // 2]), ("last step", rows[-1])):
        ask(explorer, sent, {"type": "select", "row": pos})  # the file read once: both measured warm
        conv = explorer.conversation
        assert conv is not None
        old_ms, new_ms, old_enc, new_enc = [], [], [], []
        for _ in range(5):
            t = time.perf_counter()
            wf = conv.waterfall()  # (its bars without the step they belong to, which only the windows need)
            wf = wf and {**wf, "bars": [{k: v for k, v in b.items() if k != "step"} for b in wf["bars"]]}
            old = {"type": "detail", "row": pos, "title": "", "entries": conv.entries, "selected": conv.selected,
                   "index": conv.selected_index, "waterfall": wf, "notes": conv.view["notes"],
                   "source": conv.view["source"], "replayable": True}
            old_ms.append((time.perf_counter() - t) * 1000.0)
            t = time.perf_counter()
            old_raw = json.dumps(old, ensure_ascii=False).encode("utf-8")
            old_enc.append((time.perf_counter() - t) * 1000.0)
            ms, new = ask(explorer, sent, {"type": "select", "row": pos})
            new_ms.append(ms)
            t = time.perf_counter()
            new_raw = json.dumps(new, ensure_ascii=False).encode("utf-8")
            new_enc.append((time.perf_counter() - t) * 1000.0)
        rest, more_bytes, more_ms = new["window"], [], []
        lo, hi = rest
        while lo > 0 or hi < new["blocks"]:
            edge = {"before": lo} if lo > 0 else {"after": hi}
            ms, answer = ask(explorer, sent, {"type": "more", "row": pos, **edge})
            more_ms.append(ms)
            more_bytes.append(len(json.dumps(answer, ensure_ascii=False).encode("utf-8")))
            lo, hi = min(lo, answer["window"][0]), max(hi, answer["window"][1])
        drawn = draw_ms({"whole": old, "window": new})
        front = (f"; drawn in {drawn['whole']:.0f} ms -> {drawn['window']:.0f} ms (jsdom)" if drawn else "")
        print(f"  {label:12} whole {len(old_raw):>9,} B in {statistics.median(old_ms) + statistics.median(old_enc):6.1f} ms"
              f" -> window {len(new_raw):>7,} B in {statistics.median(new_ms) + statistics.median(new_enc):6.1f} ms"
              f" (handler {statistics.median(new_ms):.1f} + JSON {statistics.median(new_enc):.1f}; "
              f"{len(old_raw) / len(new_raw):.0f}x fewer bytes){front}")
        print(f"  {'':12} the rest in {len(more_bytes)} more messages of {min(more_bytes, default=0):,}–"
              f"{max(more_bytes, default=0):,} B, {max(more_ms, default=0):.1f} ms at most")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="/tmp/mmsp_explore_corpus", type=Path)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--agent-corpus", default="/tmp/mmsp_explore_agent", type=Path)
    ap.add_argument("--agent-files", type=int, default=20)
    ap.add_argument("--only-detail", action="store_true", help="figure 5 alone")
    args = ap.parse_args(argv)
    if args.only_detail:
        long_detail(args.agent_corpus, args.agent_files)
        return
    ensure(args.corpus, args.files, args.turns, args.seed)
    traces.load_turns(args.corpus, progress=False)  # warm the page cache

    r = ready(args.corpus, args.rounds)
    print(f"ready on {r['rows']:,} turns: load_turns {r['load']:.2f} s, explore {r['explore']:.2f} s "
          f"(median of {args.rounds}) = {r['ratio']:.2f}x load_turns")

    explorer = r["explorer"]
    sent = capture(explorer)
    print("answers (kernel ms: handler, query alone; page bytes):")
    worst = 0.0
    for label, patch in QUERIES:
        ms, page = ask(explorer, sent, {"type": "query", "patch": patch})
        assert page["type"] == "page", page
        worst = max(worst, ms)
        print(f"  {label:34} {ms:7.1f} ms  {page['took_ms']:7.1f} ms  {page['matched']:>7,} rows  "
              f"{len(json.dumps(page)):>6,} B")
    print(f"  slowest answer: {worst:.1f} ms")
    ask(explorer, sent, {"type": "query", "patch": {"quick": ["errors"]}})
    ms, detail = ask(explorer, sent, {"type": "select", "row": int(explorer.q.order[0])})
    print(f"  select a row: {ms:.1f} ms, detail {len(json.dumps(detail)):,} B")

    sizes = []
    shards = sorted(p for p in args.corpus.iterdir() if p.is_dir())
    for part in ([shards[0] / "agent0"] if shards else []) + shards[:1] + [args.corpus]:
        ex = traces.explore(part, progress=False)
        s = capture(ex)
        _, page = ask(ex, s, {"type": "query", "patch": {"page": 1}})
        size = len(json.dumps({k: v for k, v in page.items() if k not in ("summary", "page_label")}))
        sizes.append((len(ex.turns), size))
    print("bytes per page: " + ", ".join(f"{n:,} rows -> {b:,} B" for n, b in sizes)
          + f" (largest/smallest {max(b for _, b in sizes) / min(b for _, b in sizes):.2f})")

    tmp = Path("/tmp/mmsp_explore_show")
    tmp.mkdir(exist_ok=True)
    rows = []
    for n in (100, 200, 400):
        path, content = conversation(tmp, n)
        times = []
        for _ in range(3):
            t = time.perf_counter()
            html = traces.show(path).html
            times.append(time.perf_counter() - t)
        rows.append((n, content, len(html), min(times)))
    for n, content, size, secs in rows:
        print(f"show() of {n} messages: {content:,} B of content -> {size:,} B of HTML "
              f"({size / content:.2f} per content byte), rendered in {secs * 1000:.0f} ms")
    (_, c1, s1, _), (_, c2, s2, _) = rows[1], rows[2]
    print(f"  from 200 to 400 messages: content x{c2 / c1:.2f}, HTML x{s2 / s1:.2f}")
    long_detail(args.agent_corpus, args.agent_files)


if __name__ == "__main__":
    main()
