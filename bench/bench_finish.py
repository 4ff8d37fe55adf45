"""What finishing a very long turn costs: its final renderings, and its timing sidecar on the worker loop.

``.venv/bin/python bench/bench_finish.py``: a 10 MB non-ASCII answer (100,000 deltas through the
turn state, three configured keys in the environment) shown as a value (``turn_bundle``: text/plain
and the static HTML) and finished by the text view; then the loop's longest stall while that turn's
sidecar record (100,002 events) is written as the engine writes it, in a thread.
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

from mmsp_notebook.core.turn import Turn  # noqa: E402
from mmsp_notebook.engine.stream import _write_sidecar  # noqa: E402
from mmsp_notebook.views.live import TextLive  # noqa: E402
from mmsp_notebook.views.static import turn_bundle  # noqa: E402

PARA = "Ünïcödé **bold** text — with `code`, a [link](https://example.com) and $x^2$ here. " * 4 + "\n\n"


def long_turn(chars: int = 10_000_000, chunk: int = 100) -> Turn:
    text = (PARA * (chars // len(PARA) + 1))[:chars]
    turn = Turn({"role": "user", "content": "hi"}, model="demo")
    state = turn.new_step()
    state.mark_request_sent()

    def event(items: list, kind: str = "delta", **extra: object) -> dict:
        return {"role": "assistant", "event_type": kind, "content_items": items, "usage_metadata": None,
                "finish_reason": None, "created_at": 1, **extra}

    for i in range(0, len(text), chunk):
        state.feed(event([{"type": "text.delta", "text": text[i:i + chunk]}]))
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


def main() -> None:
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
