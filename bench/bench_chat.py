"""Benchmarks of the chat widget, measured in one run.

1. Bytes over the comm and front-end update rate for a 20,000-token turn (as for the magic): the
   coalesced ops, plus the turn's two transcript entries (its message and the finished turn).
2. Front-end bundle sizes (raw and gzip).
3. Saved state of one Chat instance holding 20 finished turns (what a notebook stores per widget),
   and the bytes over the comm of its 21st turn beside those of a short chat's 2nd: the transcript
   goes as its changes, never whole, so they should be about the same.

Run: ``.venv/bin/python bench/bench_chat.py [--tokens 20000]``
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jupyter_client.session import json_packer as pack  # noqa: E402

from mmsp_notebook import Chat  # noqa: E402
from mmsp_notebook.engine import session as _session  # noqa: E402


class CommCounter:
    """Counts what the widget sends over its comm (state updates and custom messages), as packed."""

    def __init__(self, widget: Any) -> None:
        self.custom_bytes = self.state_bytes = 0
        self.custom_times: list[float] = []
        original = widget.comm.send

        def send(data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
            size = len(pack(data))
            if isinstance(data, dict) and data.get("method") == "custom":
                self.custom_bytes += size
                self.custom_times.append(time.monotonic())
            else:
                self.state_bytes += size
            return original(data=data, metadata=metadata, buffers=buffers)

        widget.comm.send = send


def shown(chat: Chat) -> Chat:
    """A view of the chat says hello, as one does when it is shown (its transcript then goes as changes)."""
    chat.comm.handle_msg({"content": {"data": {"method": "custom", "content": {"type": "hello"}}}, "buffers": []})
    return chat


def most_in_one_second(times: list[float]) -> int:
    return max(sum(1 for t in times if s <= t < s + 1.0) for s in times) if times else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20000)
    args = parser.parse_args()
    sess = _session.Session()
    sess.settings.demo_instant = True
    _session._session = sess

    # 1. a 20,000-token turn, instant and paced; the chat shown in a notebook (its saved view updated too)
    import IPython.display

    saved: list[int] = []
    IPython.display.update_display = lambda obj, **kw: saved.append(len(pack(obj)))  # what the kernel would send
    for label, model in (("instant", f"demo+tokens={args.tokens}"),
                         ("paced 3000 tok/s", f"demo+tokens={args.tokens // 2}+tps=3000")):
        chat = shown(Chat(model=model))
        chat._displayed = True
        saved.clear()
        counter = CommCounter(chat)
        started = time.monotonic()
        turn = chat.send("Tell me a long story")
        elapsed = time.monotonic() - started
        answer = len(turn.text.encode()) + len(turn.thinking.encode())
        total = counter.custom_bytes + counter.state_bytes
        print(f"{label}: answer {answer:,} bytes; messages (ops, transcript) {counter.custom_bytes:,} bytes in"
              f" {len(counter.custom_times)}"
              f" messages + synced state {counter.state_bytes:,} bytes = {total / answer:.2f}x the answer;"
              f" + the saved view {sum(saved):,} bytes in {len(saved)} update(s) = {(total + sum(saved)) / answer:.2f}x;"
              f" {elapsed:.2f} s, most messages in any 1 s window: {most_in_one_second(counter.custom_times)}")
        chat.close()

    # 2. bundle sizes
    for name in ("turn.js", "chat.js", "widget.css"):
        data = (ROOT / "mmsp_notebook" / "static" / name).read_bytes()
        print(f"bundle {name}: {len(data):,} bytes, {len(gzip.compress(data, 9)):,} gzipped")

    # 3. saved state of one instance with 20 finished turns (the front end's model holds the same
    # transcript, set from the kernel's messages), then the comm bytes of a 21st turn
    def turn_bytes(chat: Chat, i: int) -> int:
        counter = CommCounter(chat)
        chat.send(f"Question {i}: tell me about topic {i}")
        return counter.custom_bytes + counter.state_bytes

    chat = shown(Chat(model="demo"))
    for i in range(20):
        chat.send(f"Question {i}: tell me about topic {i}")
    state = chat.get_state()
    total = len(pack(state))
    esm = len(pack(state.get("_esm", ""))) + len(pack(state.get("_css", "")))
    transcript = len(pack(state["transcript"]))
    print(f"saved state with 20 turns: {total:,} bytes ({transcript:,} transcript, {esm:,} front-end code),"
          f" {transcript / 20:,.0f} bytes per turn")
    late = turn_bytes(chat, 20)
    short = shown(Chat(model="demo"))
    short.send("Question 0: tell me about topic 0")
    early = turn_bytes(short, 1)
    print(f"comm bytes of one turn: {early:,} for the 2nd of a chat, {late:,} for the 21st"
          f" (the transcript before it: {transcript:,})")
    sess.stop_demo()


if __name__ == "__main__":
    main()
