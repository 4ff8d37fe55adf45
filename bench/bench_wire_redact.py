"""The wire's redaction (build_wire's: frames redacted, keys split across deltas cut) on a synthetic
Chat Completions stream of N one-word frames, two keys configured.

    .venv/bin/python bench/bench_wire_redact.py 20000 80000
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

os.environ["BENCH_ONE_API_KEY"] = "sk-bench-7f3a9c2e1b4d6f8a0c2e4b6d8f0a1c3e"
os.environ["BENCH_TWO_TOKEN"] = "tok-91ab23cd45ef67ab89cd01ef23ab45cd"

from mmsp_notebook.core.redact import held_secrets, secret_values
from mmsp_notebook.wire import capture
from mmsp_notebook.wire.sse import split_timed_frames

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", "\n"]


def stream(n: int) -> tuple[list, list, list]:
    frames, events = [], []
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        frames.append(b"data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                                              "model": "m", "choices": [{"index": 0, "delta": {"content": word},
                                                                         "finish_reason": None}]}).encode() + b"\n\n")
        events.append({"event_type": "delta", "content_items": [{"type": "text.delta", "text": word}]})
    data = b"".join(frames)
    return split_timed_frames(data, [len(f) for f in frames], [0.0] * n), events, list(range(n))


def main() -> None:
    print("keys configured:", len(secret_values()))
    for n in map(int, sys.argv[1:] or ["20000"]):
        received, events, pairs = stream(n)
        best = float("inf")
        for _ in range(3):
            gc.collect()
            with held_secrets():
                t = time.perf_counter()
                capture._redacted_frames(received)
                capture._split_keys(received, events, pairs)
                best = min(best, time.perf_counter() - t)
        size = sum(len(f.raw) for f in received) / 1e6
        print(f"{n} frames, {size:.1f} MB: redaction {best * 1000:.0f} ms ({best / n * 1e6:.1f} us/frame)")


if __name__ == "__main__":
    main()
