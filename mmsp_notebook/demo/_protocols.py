"""The four SSE protocols the demo speaks, as encoders of a :class:`~._scenario.Plan`.

An encoder turns the steps of a stream (open, begin a block, one fragment, end a block, finish,
an in-stream error, a heartbeat) into the bytes of that protocol's server-sent events; each call
returns whole SSE frames, each frame sent as one chunk. The JSON bodies of a request answered
without a stream are built in ``_bodies`` (a refusal, embeddings) and ``_whole`` (an answer to a
request without ``"stream": true``, folded from these frames).

============  ==========================  =========================================================
protocol      endpoint                    shape
============  ==========================  =========================================================
mmsp          ``POST /v1/stream``         ``data: <UniEvent>`` (deltas and ``.done`` items, then the
                                          stop event), ``data: [DONE]``; keepalive ``: keep-alive``
chat          ``POST /v1/chat/completions``  ``data:`` chunks only; reasoning in
                                          ``delta.reasoning_details[]``; finish chunk, usage chunk
                                          with ``choices: []``, ``data: [DONE]``; ``: heartbeat``
responses     ``POST /v1/responses``      ``event:`` + ``data:``; ``response.created`` ...
                                          ``response.completed``/``incomplete``, ``data: [DONE]``;
                                          ``: heartbeat``
messages      ``POST /v1/messages``       Anthropic events, ``message_start`` ... ``message_stop``;
                                          ``event: ping`` heartbeats
============  ==========================  =========================================================
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from mmsp.errors import ToolCallArgumentParseError, parse_tool_call_arguments
from mmsp.wire import to_wire_error

from ._bodies import faulted as _faulted
from ._scenario import Block, Plan

__all__ = [
    "ENCODERS",
    "ChatEncoder",
    "Encoder",
    "MessagesEncoder",
    "MmspEncoder",
    "ResponsesEncoder",
    "StreamEnds",
]


class StreamEnds(Exception):
    """Raised by an encoder whose stream must end here, cleanly, after sending ``frames``."""

    def __init__(self, frames: list[bytes]) -> None:
        super().__init__("stream ends")
        self.frames = frames


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _data(value: Any) -> bytes:
    return f"data: {_json(value)}\n\n".encode()


def _event(name: str, value: Any) -> bytes:
    return f"event: {name}\ndata: {_json(value)}\n\n".encode()


DONE = b"data: [DONE]\n\n"

class Encoder:
    """The steps of one stream, as the bytes of one protocol. Subclasses fill in each step."""

    protocol = ""
    # whether images and audio travel on this protocol
    media = False

    def __init__(self, plan: Plan, model: str, request_id: str) -> None:
        self.plan = plan
        self.model = model
        self.request_id = request_id
        self.created = int(time.time())

    def open(self) -> list[bytes]:
        """The frames that open the stream, before any content."""
        return []

    def begin(self, index: int, block: Block) -> list[bytes]:
        """The frames that open block `index`."""
        return []

    def fragment(self, index: int, block: Block, position: int) -> list[bytes]:
        """The frames of fragment `position` of block `index`."""
        raise NotImplementedError

    def end(self, index: int, block: Block) -> list[bytes]:
        """The frames that close block `index`."""
        return []

    def finish(self) -> list[bytes]:
        """The frames of a normal end: finish reason, usage, end marker."""
        raise NotImplementedError

    def unterminated(self) -> list[bytes]:
        """The frames of a stream that ends cleanly without its finish reason and usage."""
        return [DONE]

    def error(self, code: str, message: str, fault: str | None = None) -> list[bytes]:
        """The frames of an in-stream error, the last ones of the stream (``fault``: see :func:`http_error`)."""
        raise NotImplementedError

    def heartbeat(self) -> bytes:
        """One heartbeat: a frame a reader skips."""
        return b": heartbeat\n\n"


# ---------------------------------------------------------------------------------------------
# MMSP


class MmspEncoder(Encoder):
    """MMSP's wire: the public stream of UniEvents, as mmsp/wire.py documents."""

    protocol = "mmsp"
    media = True

    def __init__(self, plan: Plan, model: str, request_id: str) -> None:
        super().__init__(plan, model, request_id)
        #: The done items sent so far, and the stop event once sent (as on the wire), for the trace.
        self.done_items: list[dict[str, Any]] = []
        self.stop_event: dict[str, Any] | None = None

    def _delta(self, item: dict[str, Any]) -> bytes:
        event = {
            "role": "assistant",
            "event_type": "delta",
            "content_items": [item],
            "usage_metadata": None,
            "finish_reason": None,
            "created_at": int(time.time() * 1000),
        }
        if item["type"].endswith(".done"):
            self.done_items.append(item)
        return _data(event)

    def _call_id(self, block: Block) -> str:
        return f"call_{block.call_id}"

    def fragment(self, index: int, block: Block, position: int) -> list[bytes]:
        value = block.fragments[position]
        if block.kind == "thinking":
            return [self._delta({"type": "thinking.delta", "thinking": value})]
        if block.kind == "text":
            return [self._delta({"type": "text.delta", "text": value})]
        if block.kind == "tool_call":
            frames = []
            if position == 0:
                # the first delta of a call carries its name and id
                frames.append(
                    self._delta(
                        {"type": "tool_call.delta", "name": block.name, "arguments": "", "tool_call_id": self._call_id(block)}
                    )
                )
            frames.append(self._delta({"type": "tool_call.delta", "name": "", "arguments": value, "tool_call_id": ""}))
            return frames
        if block.kind in ("image", "audio"):
            data = base64.b64encode(value).decode("ascii")
            return [self._delta({"type": "inline_data.delta", "data": data, "mime_type": block.mime_type})]
        if block.kind == "embedding":
            return [self._delta({"type": "embedding.delta", "embedding": value})]
        raise ValueError(block.kind)

    def end(self, index: int, block: Block) -> list[bytes]:
        if block.kind == "thinking":
            fidelity = {"signature": block.signature}
            return [
                self._delta({"type": "thinking.delta", "thinking": "", "fidelity": fidelity}),
                self._delta({"type": "thinking.done", "thinking": block.joined, "fidelity": fidelity}),
            ]
        if block.kind == "text":
            return [self._delta({"type": "text.done", "text": block.joined})]
        if block.kind == "tool_call":
            try:
                arguments = parse_tool_call_arguments(block.joined, "DemoModel", block.name, self._call_id(block))
            except ToolCallArgumentParseError as exc:
                # what an MMSP server reports when its upstream's arguments do not parse
                raise StreamEnds([_data({"error": to_wire_error(exc)}), DONE]) from exc
            done = {"type": "tool_call.done", "name": block.name, "arguments": arguments, "tool_call_id": self._call_id(block)}
            return [self._delta(done)]
        if block.kind in ("image", "audio"):
            data = base64.b64encode(block.joined).decode("ascii")
            return [self._delta({"type": "inline_data.done", "data": data, "mime_type": block.mime_type})]
        if block.kind == "embedding":
            return [self._delta({"type": "embedding.done", "embedding": block.joined})]
        return []

    def finish(self) -> list[bytes]:
        stop = {
            "role": "assistant",
            "event_type": "stop",
            "content_items": [],
            "usage_metadata": self.plan.usage.as_uni(),
            "finish_reason": self.plan.finish_reason,
            "created_at": int(time.time() * 1000),
        }
        self.stop_event = stop
        return [_data(stop), DONE]

    def error(self, code: str, message: str, fault: str | None = None) -> list[bytes]:
        return [_data({"error": _faulted({"type": "NotFoundError", "message": message, "code": code}, fault)}), DONE]

    def heartbeat(self) -> bytes:
        return b": keep-alive\n\n"


# ---------------------------------------------------------------------------------------------
# Chat Completions


_CHAT_FINISH = {"stop": "stop", "length": "length", "tool_call": "tool_calls"}


class ChatEncoder(Encoder):
    """OpenAI Chat Completions chunks, as a gateway streams them."""

    protocol = "chat"

    def __init__(self, plan: Plan, model: str, request_id: str) -> None:
        super().__init__(plan, model, request_id)
        self._calls = 0

    def _chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> bytes:
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-{self.plan.seed[:24]}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        chunk.update(extra)
        return _data(chunk)

    def open(self) -> list[bytes]:
        return [self._chunk({"role": "assistant"})]

    def fragment(self, index: int, block: Block, position: int) -> list[bytes]:
        value = block.fragments[position]
        if block.kind == "thinking":
            return [self._chunk({"reasoning_details": [{"type": "reasoning.text", "text": value, "index": 0}]})]
        if block.kind == "text":
            return [self._chunk({"content": value})]
        if block.kind == "tool_call":
            frames = []
            if position == 0:
                call = {
                    "index": self._calls,
                    "id": f"call_{block.call_id}",
                    "type": "function",
                    "function": {"name": block.name, "arguments": ""},
                }
                self._calls += 1
                frames.append(self._chunk({"tool_calls": [call]}))
            frames.append(self._chunk({"tool_calls": [{"index": self._calls - 1, "function": {"arguments": value}}]}))
            return frames
        return []

    def end(self, index: int, block: Block) -> list[bytes]:
        if block.kind == "thinking":
            encrypted = {
                "type": "reasoning.encrypted",
                "data": block.signature,
                "format": "demo-v1",
                "id": f"rs_{self.plan.seed[:16]}",
                "index": 0,
            }
            return [self._chunk({"reasoning_details": [encrypted]})]
        return []

    def finish(self) -> list[bytes]:
        usage = self.plan.usage
        return [
            self._chunk({}, _CHAT_FINISH[self.plan.finish_reason]),
            self._chunk(
                None,
                usage={
                    "prompt_tokens": usage.prompt,
                    "completion_tokens": usage.thoughts + usage.response,
                    "total_tokens": usage.prompt + usage.thoughts + usage.response,
                    "prompt_tokens_details": {"cached_tokens": usage.cached},
                    "completion_tokens_details": {"reasoning_tokens": usage.thoughts},
                },
            ),
            DONE,
        ]

    def error(self, code: str, message: str, fault: str | None = None) -> list[bytes]:
        error = {"code": code, "message": message, "param": None, "type": "invalid_request_error"}
        return [_data({"error": _faulted(error, fault)}), DONE]


# ---------------------------------------------------------------------------------------------
# Responses


class ResponsesEncoder(Encoder):
    """OpenAI Responses events, as a gateway streams them."""

    protocol = "responses"

    def __init__(self, plan: Plan, model: str, request_id: str) -> None:
        super().__init__(plan, model, request_id)
        self._sequence = 0
        self._output: list[dict[str, Any]] = []

    def _emit(self, name: str, payload: dict[str, Any]) -> bytes:
        body = {"type": name, **payload, "sequence_number": self._sequence}
        self._sequence += 1
        return _event(name, body)

    def _item_id(self, index: int, block: Block) -> str:
        prefix = {"thinking": "rs", "text": "msg", "tool_call": "fc"}.get(block.kind, "item")
        return f"{prefix}_{self.plan.seed[:12]}{index:03d}"

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": f"resp_{self.plan.seed[:24]}",
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": list(self._output),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": None,
            **extra,
        }

    def _item(self, index: int, block: Block, done: bool) -> dict[str, Any]:
        item_id = self._item_id(index, block)
        if block.kind == "thinking":
            summary = [{"type": "summary_text", "text": block.joined}] if done else []
            item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": summary}
            if done:
                item["encrypted_content"] = block.signature
            return item
        if block.kind == "text":
            content = [{"type": "output_text", "text": block.joined, "annotations": []}] if done else []
            # the message max_output_tokens cut short is incomplete, as the response that ends with it is
            cut = self.plan.finish_reason == "length" and index == len(self.plan.blocks) - 1
            return {
                "id": item_id,
                "type": "message",
                "status": ("incomplete" if cut else "completed") if done else "in_progress",
                "role": "assistant",
                "content": content,
            }
        return {
            "id": item_id,
            "type": "function_call",
            "status": "completed" if done else "in_progress",
            "call_id": f"call_{block.call_id}",
            "name": block.name,
            "arguments": block.joined if done else "",
        }

    def open(self) -> list[bytes]:
        return [
            self._emit("response.created", {"response": self._response("in_progress")}),
            self._emit("response.in_progress", {"response": self._response("in_progress")}),
        ]

    def begin(self, index: int, block: Block) -> list[bytes]:
        if block.kind not in ("thinking", "text", "tool_call"):
            return []
        frames = [self._emit("response.output_item.added", {"output_index": index, "item": self._item(index, block, False)})]
        item_id = self._item_id(index, block)
        if block.kind == "thinking":
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            frames.append(
                self._emit(
                    "response.reasoning_summary_part.added",
                    {"item_id": item_id, "output_index": index, "summary_index": 0, "part": part},
                )
            )
        elif block.kind == "text":
            part = {"type": "output_text", "text": "", "annotations": []}
            frames.append(
                self._emit(
                    "response.content_part.added",
                    {"item_id": item_id, "output_index": index, "content_index": 0, "part": part},
                )
            )
        return frames

    def fragment(self, index: int, block: Block, position: int) -> list[bytes]:
        value = block.fragments[position]
        item_id = self._item_id(index, block)
        if block.kind == "thinking":
            payload = {"item_id": item_id, "output_index": index, "summary_index": 0, "delta": value}
            return [self._emit("response.reasoning_summary_text.delta", payload)]
        if block.kind == "text":
            payload = {"item_id": item_id, "output_index": index, "content_index": 0, "delta": value, "logprobs": []}
            return [self._emit("response.output_text.delta", payload)]
        if block.kind == "tool_call":
            payload = {"item_id": item_id, "output_index": index, "delta": value}
            return [self._emit("response.function_call_arguments.delta", payload)]
        return []

    def end(self, index: int, block: Block) -> list[bytes]:
        if block.kind not in ("thinking", "text", "tool_call"):
            return []
        item_id = self._item_id(index, block)
        frames = []
        if block.kind == "thinking":
            text = block.joined
            frames.append(
                self._emit(
                    "response.reasoning_summary_text.done",
                    {"item_id": item_id, "output_index": index, "summary_index": 0, "text": text},
                )
            )
            frames.append(
                self._emit(
                    "response.reasoning_summary_part.done",
                    {"item_id": item_id, "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": text}},
                )
            )
        elif block.kind == "text":
            text = block.joined
            frames.append(
                self._emit(
                    "response.output_text.done",
                    {"item_id": item_id, "output_index": index, "content_index": 0, "text": text, "logprobs": []},
                )
            )
            frames.append(
                self._emit(
                    "response.content_part.done",
                    {
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "part": {"type": "output_text", "text": text, "annotations": []},
                    },
                )
            )
        else:
            frames.append(
                self._emit(
                    "response.function_call_arguments.done",
                    {"item_id": item_id, "output_index": index, "name": block.name, "arguments": block.joined},
                )
            )
        item = self._item(index, block, True)
        self._output.append(item)
        frames.append(self._emit("response.output_item.done", {"output_index": index, "item": item}))
        return frames

    def finish(self) -> list[bytes]:
        usage = self.plan.usage
        body = {
            "input_tokens": usage.prompt,
            "input_tokens_details": {"cached_tokens": usage.cached, "cache_write_tokens": 0},
            "output_tokens": usage.thoughts + usage.response,
            "output_tokens_details": {"reasoning_tokens": usage.thoughts},
            "total_tokens": usage.prompt + usage.thoughts + usage.response,
        }
        if self.plan.finish_reason == "length":
            response = self._response("incomplete", usage=body, incomplete_details={"reason": "max_output_tokens"})
            return [self._emit("response.incomplete", {"response": response}), DONE]
        response = self._response("completed", usage=body)
        return [self._emit("response.completed", {"response": response}), DONE]

    def error(self, code: str, message: str, fault: str | None = None) -> list[bytes]:
        error = self._emit("error", _faulted({"code": code, "message": message, "param": None}, fault))
        failed = self._emit(
            "response.failed",
            {"response": self._response("failed", error=_faulted({"code": code, "message": message}, fault))},
        )
        return [error, failed, DONE]


# ---------------------------------------------------------------------------------------------
# Messages


_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_call": "tool_use"}


class MessagesEncoder(Encoder):
    """Anthropic Messages events; no ``[DONE]``."""

    protocol = "messages"

    def _usage(self, output_tokens: int, final: bool) -> dict[str, Any]:
        usage = self.plan.usage
        body: dict[str, Any] = {
            "input_tokens": usage.prompt,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.cached,
        }
        if final:
            body["output_tokens_details"] = {"thinking_tokens": usage.thoughts}
        return body

    def open(self) -> list[bytes]:
        message: dict[str, Any] = {
            "id": f"msg_{self.plan.seed[:24]}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(1, False),
        }
        return [_event("message_start", {"type": "message_start", "message": message})]

    def begin(self, index: int, block: Block) -> list[bytes]:
        content: dict[str, Any]
        if block.kind == "thinking":
            content = {"type": "thinking", "thinking": "", "signature": ""}
        elif block.kind == "text":
            content = {"type": "text", "text": ""}
        elif block.kind == "tool_call":
            content = {"type": "tool_use", "id": f"toolu_{block.call_id}", "name": block.name, "input": {}}
        else:
            return []
        return [_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": content})]

    def _block_delta(self, index: int, delta: dict[str, Any]) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})

    def fragment(self, index: int, block: Block, position: int) -> list[bytes]:
        value = block.fragments[position]
        if block.kind == "thinking":
            return [self._block_delta(index, {"type": "thinking_delta", "thinking": value})]
        if block.kind == "text":
            return [self._block_delta(index, {"type": "text_delta", "text": value})]
        if block.kind == "tool_call":
            return [self._block_delta(index, {"type": "input_json_delta", "partial_json": value})]
        return []

    def end(self, index: int, block: Block) -> list[bytes]:
        if block.kind not in ("thinking", "text", "tool_call"):
            return []
        frames = []
        if block.kind == "thinking":
            frames.append(self._block_delta(index, {"type": "signature_delta", "signature": block.signature}))
        frames.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        return frames

    def finish(self) -> list[bytes]:
        usage = self.plan.usage
        delta = {"stop_reason": _STOP_REASONS[self.plan.finish_reason], "stop_sequence": None}
        return [
            _event(
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": self._usage(usage.thoughts + usage.response, True)},
            ),
            _event("message_stop", {"type": "message_stop"}),
        ]

    def unterminated(self) -> list[bytes]:
        return []

    def error(self, code: str, message: str, fault: str | None = None) -> list[bytes]:
        error = _faulted({"type": "not_found_error", "message": message}, fault)
        return [_event("error", {"type": "error", "error": error})]

    def heartbeat(self) -> bytes:
        return _event("ping", {"type": "ping"})


ENCODERS: dict[str, type[Encoder]] = {
    "mmsp": MmspEncoder,
    "chat": ChatEncoder,
    "responses": ResponsesEncoder,
    "messages": MessagesEncoder,
}
