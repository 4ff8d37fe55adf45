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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


@contextmanager
def script_server(script: Script) -> Iterator[str]:
    """Serve ``script(request_json, authorization)`` to every POST; yields the base URL (``.../v1``).

    A HOLD step keeps the connection open and silent until the client goes away or the server
    stops (at the end of the ``with``).
    """
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            steps = script(json.loads(body or b"{}"), self.headers.get("authorization") or "")
            if isinstance(steps, Reply):
                self.send_response(steps.status)
                for name, value in steps.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(steps.body)))
                self.end_headers()
                self.wfile.write(steps.body)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            try:
                for step in steps:
                    if step == HOLD:
                        released.wait(30)
                        return
                    if isinstance(step, (int, float)):
                        time.sleep(step)
                        continue
                    self.wfile.write(step)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        released.set()
        server.shutdown()
        server.server_close()
