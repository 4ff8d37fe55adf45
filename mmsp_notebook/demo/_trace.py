"""Tracing on the demo's MMSP endpoint, as a real MMSP server traces: with mmsp's own Tracer.

mmsp's wire client leaves tracing to its server: a request's ``config.trace_id`` travels to the
server, whose upstream client saves the conversation when its stream stops (``Tracer.save_history``
into the server's ``MMSP_CACHE_DIR``: the request's messages, then the answer). The demo does the
same on ``POST /v1/stream``, so a plain mmsp program with ``client_type="mmsp"`` gets its trace.

The trace is saved before the stop event is sent, with what a real server's client would save:
the request's messages as they arrived (inline data decoded, legacy items normalised, a message
without ``created_at`` stamped now), then the answer of every done item sent with the stop
event's usage, finish reason and time, under the model name requested. A client that saves the
same conversation itself (the notebook saves the trace of its mmsp-wire turns, as it cannot know
where a server writes) and hands the embedded demo server the trace id too writes the same file in
the same ``MMSP_CACHE_DIR``, after this save (made before the stop event goes out): with the same
history and config, as ``tests/test_demo.py`` checks.

A ``trace_id`` that is not a relative path inside the cache (``..``, an absolute path, an empty
part, a backslash or a control character) is refused with HTTP 400 before anything streams.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from ._protocols import DONE
from ._requests import BadRequest

__all__ = ["RequestTrace", "trace_request"]

_BAD_PART = re.compile(r"[\x00-\x1f\x7f\\:]")


def _check_trace_id(trace_id: Any) -> str:
    if not isinstance(trace_id, str) or not trace_id.strip():
        raise BadRequest("config.trace_id must be a non-empty string.")
    parts = trace_id.split("/")
    if trace_id.startswith("/") or any(part in ("", ".", "..") or _BAD_PART.search(part) for part in parts):
        raise BadRequest(
            f"config.trace_id {trace_id!r} must be a relative path inside the trace directory: parts separated "
            "by '/', none empty, '.' or '..', without backslashes, colons or control characters."
        )
    return trace_id


@dataclass
class RequestTrace:
    """What a traced request saves at its stop: the model, the messages, the trace id and the config."""

    model: str
    messages: list[dict[str, Any]]
    trace_id: str
    config: dict[str, Any]

    def save(self, done_items: list[dict[str, Any]], stop: dict[str, Any] | None) -> list[bytes] | None:
        """Save the conversation with its answer; the error frames to send instead when that fails."""
        from mmsp.integration.tracer import Tracer
        from mmsp.wire import decode_wire, to_wire_error

        if stop is None:
            return None
        answer = decode_wire({
            "role": "assistant",
            "content_items": list(done_items),
            "usage_metadata": stop["usage_metadata"],
            "finish_reason": stop["finish_reason"],
            "created_at": stop["created_at"],
        })
        try:
            Tracer().save_history(self.model, [*self.messages, answer], self.trace_id, self.config)
        except (OSError, TypeError, ValueError) as exc:
            # mmsp's client raises where its trace cannot be saved, which a server sends as an error event
            error = json.dumps({"error": to_wire_error(exc)}, ensure_ascii=False)
            return [f"data: {error}\n\n".encode(), DONE]
        return None


def trace_request(body: dict[str, Any], model: str) -> RequestTrace | None:
    """The trace a ``POST /v1/stream`` body asks for (``config.trace_id``), or None.

    Raises:
        BadRequest: The trace id is not a relative path inside the trace directory.
    """
    from mmsp.legacy import normalize_legacy_messages
    from mmsp.wire import decode_wire

    config = body.get("config") or {}
    if not isinstance(config, dict) or config.get("trace_id") is None:
        return None
    trace_id = _check_trace_id(config["trace_id"])
    try:
        messages = [decode_wire(message) for message in body.get("messages") or []]
    except (KeyError, AttributeError, TypeError, ValueError) as exc:  # an item without a type, bad base64
        raise BadRequest(f"messages cannot be traced as sent: {type(exc).__name__}: {exc}") from exc
    now = int(time.time() * 1000)
    for message in messages:
        if message.get("created_at") is None:
            message["created_at"] = now
    return RequestTrace(model, normalize_legacy_messages(messages), trace_id, dict(config))
