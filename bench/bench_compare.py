"""Benchmark of a comparison, measured in one run: four paced demo models at once vs the slowest alone.

1. Wall time of ``compare()`` of four paced demo models (different speeds, one without thinking)
   against the slowest of them alone (``ask``), side by side, several rounds (median).
2. What the front end gets: messages a second in total (not per column), and each delta once (the
   text sent in the ops of each column equals the model's answer).

Run: ``.venv/bin/python bench/bench_compare.py [--rounds 3]``
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmsp_notebook.engine import session as _session  # noqa: E402
from mmsp_notebook.front.ask import ask  # noqa: E402
from mmsp_notebook.front.compare import start  # noqa: E402
from mmsp_notebook.views.live import LiveView, drive  # noqa: E402
from mmsp_notebook.views.model import OpsTracker  # noqa: E402

MODELS = ["demo+tps=120", "demo+tps=200", "demo+tps=300+nothink", "demo+tps=160"]
SLOWEST = "demo+tps=120"
PROMPT = "Tell me about rivers"


class Counting(LiveView):
    """The live comparison's repaints, counted as ColumnsLive would send them (one message per repaint)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.trackers: list[OpsTracker] = []
        self.sent_text: list[str] = []

    def start(self, comparison: Any) -> None:
        self.trackers = [OpsTracker() for _ in comparison.turns]
        self.sent_text = ["" for _ in comparison.turns]

    def update(self, comparison: Any) -> None:
        cols = [[i, ops] for i, (tracker, turn) in enumerate(zip(self.trackers, comparison.turns))
                if (ops := tracker.ops(turn))]
        if cols:
            self.times.append(time.monotonic())
            for i, ops in cols:
                for op in ops:
                    if op[0] == "append" and comparison.turns[i].items[op[1]].kind == "text":
                        self.sent_text[i] += op[2]

    def finish(self, comparison: Any) -> None:
        self.update(comparison)


def most_in_one_second(times: list[float]) -> int:
    return max(sum(1 for t in times if s <= t < s + 1.0) for s in times) if times else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sess = _session.Session()
    sess.settings.trace = False
    _session._session = sess
    ask("warm up", model="demo+instant", stream=io.StringIO())
    alone, together, rates, once = [], [], [], True
    for r in range(args.rounds):
        t0 = time.monotonic()
        turn = ask(PROMPT, model=SLOWEST, chat=f"alone-{r}", stream=io.StringIO())
        alone.append(time.monotonic() - t0)
        assert turn.status == "complete"
        t0 = time.monotonic()
        group, future = start(PROMPT, MODELS, chat=f"cmp-{r}")
        live = Counting()
        comparison = drive(group, future, live)
        together.append(time.monotonic() - t0)
        assert comparison.status == "complete", [t.status for t in comparison.turns]
        rates.append(most_in_one_second(live.times))
        once = once and all(sent == t.text for sent, t in zip(live.sent_text, comparison.turns))
    a, b = statistics.median(alone), statistics.median(together)
    print(f"models: {', '.join(MODELS)}; slowest alone: {SLOWEST}")
    print(f"slowest alone: median {a:.2f} s; all four at once: median {b:.2f} s ({args.rounds} rounds)")
    print(f"  comparison / slowest alone: {b / a:.3f}x (goal <= 1.2x)")
    print(f"front end: most messages in any 1 s window, all columns together: {max(rates)} (goal <= 25 + final)")
    print(f"each delta once (text sent in ops == answer, every column, every round): {once}")
    sess.close()


if __name__ == "__main__":
    main()
