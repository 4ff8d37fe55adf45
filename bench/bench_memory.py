"""Memory and trace disk of many turns, measured side by side in one run.

1. Resident memory (RSS) of the process per new conversation: ``ask()`` N times, each in a
   conversation of its own (``chat="c<i>"``), and per turn of one conversation: ``ask()`` N times
   in the same conversation (its history grows: that is data the conversation must keep).
2. Trace bytes on disk per turn over one conversation of M turns, with the default trace id (one
   per conversation, mmsp's Tracer rewriting one file) and with a trace id per turn (what the
   default was: every file holds the whole history so far), at M/3, 2M/3 and M turns.

The demo server runs in a process of its own (instant mode), so its request records are not
counted: what is measured is what the project keeps. Each turn is a short demo answer
(``max_tokens=40``), streamed to a string (the terminal view).

Run: ``.venv/bin/python bench/bench_memory.py [--turns 1000] [--trace-turns 300]``
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mmsp_notebook as mn  # noqa: E402
from mmsp_notebook.engine import session as _session  # noqa: E402

TOKENS = 40


def rss_mb() -> float:
    """Resident memory of this process, MB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def demo_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--port", "0", "--instant"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.strip().rsplit(" ", 1)[-1]


def turns(base_url: str, n: int, chat: str | None, **options: object) -> float:
    """Run ``n`` turns (each in a new conversation when ``chat`` is None); returns the seconds taken."""
    started = time.perf_counter()
    for i in range(n):
        turn = mn.ask("Tell me about pandas", model="demo", client_type="mmsp", base_url=base_url, max_tokens=TOKENS,
                      chat=chat or f"c{i}", stream=io.StringIO(), **options)
        assert turn.status == "complete", turn.error_message
    return time.perf_counter() - started


def measured(base_url: str, n: int, chat: str | None) -> tuple[float, float, float]:
    """RSS before and after ``n`` turns (after a warm-up), and the seconds they took."""
    turns(base_url, 20, None if chat is None else chat + "-warm")
    gc.collect()
    before = rss_mb()
    took = turns(base_url, n, chat)
    gc.collect()
    return before, rss_mb(), took


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def trace_growth(base_url: str, m: int, per_turn_ids: bool) -> list[tuple[int, int]]:
    """``(turns, bytes on disk)`` at a third, two thirds and all of an ``m``-turn traced conversation."""
    cache = Path(os.environ["MMSP_CACHE_DIR"]) / ("per-turn" if per_turn_ids else "per-conversation")
    marks, out = {m // 3, 2 * m // 3, m}, []
    chat = "long-per-turn" if per_turn_ids else "long"
    for i in range(1, m + 1):
        trace = f"per-turn/long/turn_{i:04d}" if per_turn_ids else None
        turn = mn.ask("Tell me about pandas", model="demo", client_type="mmsp", base_url=base_url, max_tokens=TOKENS, chat=chat,
                      trace=trace, stream=io.StringIO())
        assert turn.status == "complete", turn.error_message
        if i in marks:
            out.append((i, disk_bytes(cache)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--trace-turns", type=int, default=300)
    args = parser.parse_args()
    os.environ["MMSP_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-memory-")
    sess = _session.Session()
    sess.notebook = "memory"
    _session._session = sess
    proc, base_url = demo_server()
    try:
        n = args.turns
        a0, a1, a_s = measured(base_url, n, None)
        b0, b1, b_s = measured(base_url, n, "one")
        print(f"{n} turns, each in a new conversation: RSS {a0:.1f} -> {a1:.1f} MB, "
              f"{(a1 - a0) * 1000 / n:.1f} KB per conversation ({a_s:.1f} s)")
        print(f"{n} turns in one conversation:        RSS {b0:.1f} -> {b1:.1f} MB, "
              f"{(b1 - b0) * 1000 / n:.1f} KB per turn ({b_s:.1f} s)")
        print(f"kept: {len(sess.turns)} turns whole, {len(sess.usage)} usage rows, {len(sess.conversations)} "
              f"conversations, {len(sess.clients)} open clients ({sess.clients.closed} closed)")
        m = args.trace_turns
        sess.notebook = "per-conversation"
        for per_turn in (False, True):
            growth = trace_growth(base_url, m, per_turn)
            label = "a trace id per turn       " if per_turn else "one trace id per conversation"
            steps = ", ".join(f"{k} turns {b / 1e6:.2f} MB ({b / k / 1000:.1f} KB/turn)" for k, b in growth)
            print(f"trace disk, {label}: {steps}")
    finally:
        sess.close()
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
