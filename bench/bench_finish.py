"""What a very long turn costs: its live repaints, its final renderings, its timing sidecar and trace.

``.venv/bin/python bench/bench_finish.py [live] [finish] [trace]`` (all three when none is named): a
10 MB non-ASCII answer (100,000 deltas through the turn state, three configured keys in the
environment).

* ``live``: the live view's repaints while it streams (``OpsTracker.ops`` after every 1,000 deltas,
  with and without the events table), side by side with each repaint redacting the whole text so
  far and walking the events from the first (as before).
* ``finish``: the turn shown as a value (``turn_bundle``: text/plain and the static HTML) and
  finished by the text view; then the loop's longest stall while that turn's sidecar record
  (100,002 events) is written as the engine writes it, in a thread.
* ``trace``: the loop's longest stall while the trace of a conversation holding that answer is
  saved, on the loop (as before) and in a thread (as the engine saves it).
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import time

os.environ["MMSP_CACHE_DIR"] = tempfile.mkdtemp()
for name, value in (("OPENAI_API_KEY", "sk-proj-abc123DEF456ghi789JKL0"), ("ANTHROPIC_API_KEY", "sk-ant-api03-zz9Yy8Xx7Ww6"),
                    ("GEMINI_API_KEY", "AIzaSyA1b2C3d4E5f6G7h8I9j0")):
    os.environ[name] = value

import sys  # noqa: E402

from mmsp_notebook.core.redact import redact_secrets  # noqa: E402
from mmsp_notebook.core.turn import Turn  # noqa: E402
from mmsp_notebook.engine.stream import _off_loop, _save_trace, _write_sidecar  # noqa: E402
from mmsp_notebook.views import model  # noqa: E402
from mmsp_notebook.views.live import TextLive  # noqa: E402
from mmsp_notebook.views.static import turn_bundle  # noqa: E402

PARA = "Ünïcödé **bold** text — with `code`, a [link](https://example.com) and $x^2$ here. " * 4 + "\n\n"


def event(items: list, kind: str = "delta", **extra: object) -> dict:
    return {"role": "assistant", "event_type": kind, "content_items": items, "usage_metadata": None,
            "finish_reason": None, "created_at": 1, **extra}


def long_turn(chars: int = 10_000_000, chunk: int = 100, repaint=None, every: int = 1000) -> Turn:
    """The turn of a ``chars``-character answer in deltas of ``chunk``; ``repaint(turn)`` after every ``every``."""
    text = (PARA * (chars // len(PARA) + 1))[:chars]
    turn = Turn({"role": "user", "content": "hi"}, model="demo")
    state = turn.new_step()
    state.mark_request_sent()
    for n, i in enumerate(range(0, len(text), chunk), 1):
        state.feed(event([{"type": "text.delta", "text": text[i:i + chunk]}]))
        if repaint is not None and n % every == 0:
            repaint(turn)
    state.feed(event([{"type": "text.done", "text": text}]))
    state.feed(event([], "stop", usage_metadata={"cached_tokens": 0, "prompt_tokens": 3, "thoughts_tokens": 0,
                                                  "response_tokens": 100_000}, finish_reason="stop"))
    return turn


async def stall_while(work) -> float:
    """The longest the loop went without turning while ``work`` (a coroutine) ran."""
    worst, done = 0.0, False

    async def probe() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now

    task = asyncio.create_task(probe())
    await asyncio.sleep(0.01)
    await work
    done = True
    await task
    return worst


class _Whole:
    """Each whole text redacted at each repaint, all of it sent (as before)."""

    settled = 0

    def __call__(self, text: str, secrets: list[str]) -> str:
        shown = redact_secrets(text, secrets)
        self.settled = len(shown)
        return shown


def live(events: bool, before: bool) -> tuple[list[float], float]:
    """Each repaint's seconds while the 10 MB answer streams (100 repaints), and the final one's."""
    tracker = model.OpsTracker(events=events)
    took: list[float] = []
    grown, walk = model.GrowingRedaction, model.turn_events
    if before:  # each repaint redacts each whole text, and walks the events from the first
        model.GrowingRedaction = _Whole  # type: ignore[assignment,misc]
        model.turn_events = lambda turn, start=0: (e for e in walk(turn) if e[0] >= start)  # type: ignore[assignment]

    def repaint(turn: Turn, final: bool = False) -> None:
        started = time.perf_counter()
        tracker.ops(turn, final)
        took.append(time.perf_counter() - started)

    try:
        turn = long_turn(repaint=repaint)
        repaint(turn, final=True)
    finally:
        model.GrowingRedaction, model.turn_events = grown, walk
    return took[:-1], took[-1]


def main_live() -> None:
    print("live view repaints of a 10 MB answer, 100,000 deltas, a repaint every 1,000:")
    for events in (False, True):
        for before in (True, False):
            took, final = live(events, before)
            name = ("before: whole text redacted, events walked from the first" if before
                    else "now: what is new redacted, only new events walked")
            print(f"  events table {'shown' if events else 'hidden'}, {name}: {len(took)} repaints {sum(took):.2f} s, "
                  f"first 10 {sum(took[:10]) / 10 * 1000:.0f} ms each, last 10 {sum(took[-10:]) / 10 * 1000:.0f} ms each, "
                  f"final {final * 1000:.0f} ms")


def main_trace() -> None:
    turn = long_turn()
    answer = turn.steps[0].message()
    history = [message for n in range(3) for message in ({"role": "user", "content_items": [
        {"type": "text.done", "text": f"question {n}"}]}, answer)]  # three turns of 10 MB answers
    config = {"trace_id": "bench/trace", "model": "demo"}

    async def on_loop() -> None:
        _save_trace(history, turn, config)

    async def in_thread() -> None:
        await _off_loop(_save_trace, history, turn, config)

    for name, work in (("trace saved on the loop (before)", on_loop), ("trace saved in a thread (now)", in_thread)):
        print(f"{name}: loop stalled at most {asyncio.run(stall_while(work())) * 1000:.0f} ms (30 MB conversation)")


def main() -> None:
    parts = sys.argv[1:] or ["live", "finish", "trace"]
    if "live" in parts:
        main_live()
    if "trace" in parts:
        main_trace()
    if "finish" in parts:
        main_finish()


def main_finish() -> None:
    turn = long_turn()
    state = turn.steps[0]
    print(f"answer: {len(turn.text):,} characters, {state.n_events:,} events")
    for name, fn in (("turn_bundle (text/plain + static HTML)", lambda: turn_bundle(turn)),
                     ("text view finish", lambda: TextLive(io.StringIO()).finish(turn))):
        took = []
        for _ in range(3):
            started = time.perf_counter()
            fn()
            took.append(time.perf_counter() - started)
        print(f"{name}: best of 3 {min(took):.2f} s")

    async def on_loop() -> None:
        _write_sidecar(turn, state, "bench/on-loop", 0, 1)

    async def in_thread() -> None:
        await asyncio.to_thread(_write_sidecar, turn, state, "bench/thread", 0, 1)

    for name, work in (("sidecar written on the loop (before)", on_loop), ("sidecar written in a thread (now)", in_thread)):
        print(f"{name}: loop stalled at most {asyncio.run(stall_while(work())) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
