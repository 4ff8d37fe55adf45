"""Benchmark of the trace explorer (``traces.explore``) and of ``traces.show``, measured in one run.

1. **Ready**: ``explore(corpus)`` (load the turns, build the explorer, its first page) against
   ``load_turns(corpus)`` alone, alternated round by round on the same warm corpus
   (``bench/gen_corpus.py``); the ratio of the medians.
2. **Answers**: the kernel time of each filter, sort and page the front end can ask for, measured
   around the comm message handler (the query applied, the page formatted), on the full corpus.
3. **Bytes per page**: the JSON of a page message for the first 1 %, 10 % and all of the corpus.
4. **show()**: a conversation of 100 and of 200 messages with an image in every other answer:
   HTML bytes per byte of content, and the render time.

Run: ``.venv/bin/python bench/bench_explore.py [--files 10000] [--rounds 3]``
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="/tmp/mmsp_explore_corpus", type=Path)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    main()
