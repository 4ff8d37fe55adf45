"""Small loopback model servers that follow a script: what to send, when to pause, when to go silent.

Each is a real HTTP server on 127.0.0.1 speaking the MMSP wire (``POST /v1/stream``) and the OpenAI
Chat Completions wire (``POST /v1/chat/completions``), so the real mmsp clients talk to it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from helpers import serve_posts


@dataclass
class Reply:
    """A whole non-streaming answer a script gives instead of steps (e.g. a 429 with Retry-After)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"error": {"message": "slow down", "type": "rate_limit"}}'


#: A script step: bytes to send, a number of seconds to pause, or HOLD (stay silent until released).
HOLD = "hold"
Script = Callable[[dict[str, Any], str], list[Any]]


def mmsp_event(item: dict[str, Any] | None = None, stop: bool = False) -> bytes:
    """One MMSP wire frame: a delta event carrying ``item``, or the stop event."""
    event = {"role": "assistant", "event_type": "stop" if stop else "delta",
             "content_items": [] if stop else [item], "finish_reason": "stop" if stop else None,
             "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 3, "thoughts_tokens": 0, "response_tokens": 5}
             if stop else None, "created_at": 1}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def mmsp_text(*pieces: str) -> list[bytes]:
    """Frames of a text item: one delta per piece, then its done item."""
    frames = [mmsp_event({"type": "text.delta", "text": piece}) for piece in pieces]
    return frames + [mmsp_event({"type": "text.done", "text": "".join(pieces)})]


def chat_chunk(content: str | None = None, finish: str | None = None, usage: bool = False) -> bytes:
    """One OpenAI Chat Completions chunk frame."""
    chunk: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                             "choices": [] if usage else [{"index": 0, "delta": {} if content is None else
                                                           {"role": "assistant", "content": content},
                                                           "finish_reason": finish}]}
    if usage:
        chunk["usage"] = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


#: A Chat Completions answer whose text holds half a surrogate pair in each of two deltas (a server
#: slicing UTF-16 text) and half a pair alone, as JSON escapes: "a smile 😀 and half � a **pair**" shown
SPLIT_SURROGATES = [chat_chunk("a smile \ud83d"), chat_chunk("\ude00 and half \udc00 a **pair**"), chat_chunk(finish="stop"),
                    chat_chunk(usage=True), b"data: [DONE]\n\n"]


@contextmanager
def script_server(script: Script) -> Iterator[str]:
    """Serve ``script(request_json, authorization)`` to every POST; yields the base URL (``.../v1``).

    A HOLD step keeps the connection open and silent until the client goes away or the server
    stops (at the end of the ``with``).
    """
    released = threading.Event()

    def do_post(handler: Any) -> None:
        body = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        steps = script(json.loads(body or b"{}"), handler.headers.get("authorization") or "")
        if isinstance(steps, Reply):
            handler.send_response(steps.status)
            for name, value in steps.headers.items():
                handler.send_header(name, value)
            handler.send_header("content-length", str(len(steps.body)))
            handler.end_headers()
            handler.wfile.write(steps.body)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.end_headers()
        try:
            for step in steps:
                if step == HOLD:
                    released.wait(30)
                    return
                if isinstance(step, (int, float)):
                    time.sleep(step)
                    continue
                handler.wfile.write(step)
                handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    yield from serve_posts(do_post, on_close=released.set)  # held connections let go first
