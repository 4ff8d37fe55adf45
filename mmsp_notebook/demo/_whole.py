"""A request that does not ask for a stream: the same answer, as the protocol's one JSON body.

The Chat Completions and Responses APIs stream only a request with ``"stream": true``, the
Messages API only one with ``"stream": true`` too; any other request is answered with one JSON
object once the answer is complete. The demo builds that object from the very frames its stream
would carry: the stream is driven as for a streamed request (paced alike, faults included), and
each frame is folded into the whole answer instead of being sent, so that both answers always say
the same thing:

=========  ================================================================================
protocol   body of a 200
=========  ================================================================================
chat       ``chat.completion``: ``choices[0].message`` (``content``, ``tool_calls``,
           ``reasoning_details``), ``finish_reason``, ``usage`` (the usage chunk's; null for a
           replayed stream captured without one, which ends at its ``[DONE]``)
responses  the ``response`` of the terminal event (``response.completed`` or
           ``response.incomplete``): ``status``, ``output`` items, ``usage``
messages   ``message``: the content blocks (``thinking`` with its signature, ``text``,
           ``tool_use`` with its parsed ``input``), ``stop_reason``, ``usage`` (the final one)
=========  ================================================================================

An in-stream error (the ``+error`` fault) becomes an HTTP error with the same error object:
404 for ``model_not_found`` / ``not_found_error``, 500 for any other. A stream that ends without
its finish (``+nostop``), or Messages tool input that does not parse (``+bad-args``), is a 502: a
cut-short answer is never reported as a success. A stream cut mid-body (``+cut-text``,
``+cut-args``) closes the connection half way through the JSON body; ``+stall`` sends nothing
until the client goes away; ``+silence`` delays the answer.

A replayed transcript (``DemoServer(replay=...)``) is folded alike, frame by frame as captured: its
in-stream error is the same HTTP error (and so is a Responses ``response.failed`` without an
``error`` event before it), and a transcript that ends before its protocol's end, or holds a frame
that is not one of its protocol's events (a capture cut mid-frame, say), is a 502 that names the file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from .._loopback import AbruptClose, Transcript, until_disconnect
from ..wire.sse import parse_frame
from ._bodies import faulted

__all__ = ["WholeResponse", "wants_stream"]


def wants_stream(protocol: str, body: Any) -> bool:
    """Whether a request is answered with a stream: always on MMSP's wire, else with ``"stream": true``."""
    return protocol == "mmsp" or (isinstance(body, dict) and body.get("stream") is True)


#: what :func:`_read` makes of Chat Completions' closing ``data: [DONE]``
DONE = ("[DONE]", None)


def _read(frame: bytes) -> tuple[str, Any] | None:
    """A frame's event name (``""`` without an ``event:`` line) and JSON data; :data:`DONE` for
    ``[DONE]``, None for a comment. Its lines are cut as the stream's frames are (``\\r\\n``, ``\\n``
    or ``\\r``), its text must be UTF-8."""
    frame.decode("utf-8")  # (a transcript that is no UTF-8 is named as such, not read with U+FFFD)
    parsed = parse_frame(0, 0.0, frame)
    if parsed.data is None:
        return None
    if parsed.kind == "done":
        return DONE
    return parsed.event or "", json.loads(parsed.data)


def _status(code: Any) -> int:
    return 404 if code in ("model_not_found", "not_found_error", "NotFoundError") else 500


def _openai_error(code: Any, error: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of an OpenAI-style error ``error`` (its ``type`` by the status, as
    the demo's own errors are typed)."""
    status = _status(code)
    return status, {"error": {"type": "invalid_request_error" if status == 404 else "server_error", **error}}


class _Fold:
    """The whole answer of one protocol, folded from its stream's frames."""

    def __init__(self, model: str, fault: str | None, replay: str | None = None) -> None:
        self.model = model
        self.fault = fault
        #: the transcript file folded, when a replay is
        self.replay = replay
        #: the error that ended the stream: (status, body)
        self.failed: tuple[int, dict[str, Any]] | None = None
        #: the stream's ``[DONE]`` was read (Chat Completions' end of a stream)
        self.ended = False

    def said(self, message: str) -> str:
        """`message`, saying first which injected fault caused it, as every fault's error does (or which
        replayed transcript)."""
        if self.replay is not None:
            return f"Replayed transcript {self.replay}: {message}"
        return f"Injected fault +{self.fault} of {self.model}: {message}" if self.fault else message[:1].upper() + message[1:]

    def add(self, name: str, data: Any) -> None:
        raise NotImplementedError

    def draft(self) -> dict[str, Any]:
        """The body as folded so far (what a cut connection sends the head of)."""
        raise NotImplementedError

    def finished(self) -> bool:
        raise NotImplementedError

    def unfinished(self, message: str) -> dict[str, Any]:
        """The 502 error body of an answer that did not finish, in the protocol's shape."""
        error = {"message": message, "type": "server_error", "param": None, "code": "incomplete_response"}
        return {"error": faulted(error, self.fault)}

    def unreadable(self, number: int, problem: Exception) -> None:
        """Frame `number` (from 1) of a replayed transcript cannot be folded: the answer is a 502."""
        message = (f"frame {number} is not an event the answer can be read from ({type(problem).__name__}: "
                   f"{problem}); the transcript is damaged or cut short, and is not answered as a success.")
        self.failed = (502, self.unfinished(self.said(message)))

    def result(self) -> tuple[int, dict[str, Any]]:
        """The status and body to answer with."""
        if self.failed is not None:
            return self.failed
        if not self.finished():
            message = ("the model's answer ended before its finish reason and usage: it is incomplete, "
                       "and is not answered as a success.")
            return 502, self.unfinished(self.said(message))
        return 200, self.draft()


class _ChatFold(_Fold):
    """``chat.completion.chunk`` frames into a ``chat.completion``."""

    def __init__(self, model: str, fault: str | None, replay: str | None = None) -> None:
        super().__init__(model, fault, replay)
        self.head: dict[str, Any] = {}
        self.content: list[str] = []
        self.reasoning: list[dict[str, Any]] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def add(self, name: str, data: Any) -> None:
        if "error" in data:
            error = data["error"]
            self.failed = (_status(error.get("code")), {"error": error})
            return
        if not self.head:
            self.head = {key: data[key] for key in ("id", "created", "model")}
        if data.get("usage") is not None:
            self.usage = data["usage"]
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
            for detail in delta.get("reasoning_details") or []:
                last = self.reasoning[-1] if self.reasoning else None
                if detail.get("type") == "reasoning.text" and last is not None and last.get("type") == "reasoning.text":
                    last["text"] += detail.get("text", "")
                else:
                    self.reasoning.append(dict(detail))
            for call in delta.get("tool_calls") or []:
                known = self.calls.get(call["index"])
                if known is None:
                    function = call.get("function") or {}
                    self.calls[call["index"]] = {
                        "id": call.get("id", ""),
                        "type": "function",
                        "function": {"name": function.get("name", ""), "arguments": function.get("arguments", "")},
                    }
                else:
                    known["function"]["arguments"] += (call.get("function") or {}).get("arguments", "")
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def finished(self) -> bool:
        # a stream asked without ``stream_options.include_usage`` ends at its [DONE] with no
        # usage chunk: its body's usage is then null (the SDKs' type allows it)
        return self.finish_reason is not None and (self.usage is not None or self.ended)

    def draft(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content else None,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [self.calls[index] for index in sorted(self.calls)]
        if self.reasoning:
            message["reasoning_details"] = self.reasoning
        return {
            **self.head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}],
            "usage": self.usage,
        }


class _ResponsesFold(_Fold):
    """Responses events into the ``response`` object of the terminal event."""

    def __init__(self, model: str, fault: str | None, replay: str | None = None) -> None:
        super().__init__(model, fault, replay)
        self.response: dict[str, Any] = {}
        self.output: list[dict[str, Any]] = []
        self.done = False

    def add(self, name: str, data: Any) -> None:
        kind = data.get("type", name)
        if kind == "error":
            if self.failed is None:
                error = {key: value for key, value in data.items() if key not in ("type", "sequence_number")}
                self.failed = _openai_error(error.get("code"), error)
        elif kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
            self.response = data["response"]
            self.done = kind in ("response.completed", "response.incomplete")
        elif kind == "response.failed" and self.failed is None:  # a failure without an error event before it
            error = data["response"].get("error") or {"code": None, "message": "The response failed."}
            self.failed = _openai_error(error.get("code"), {"param": None, **error})
        elif kind == "response.output_item.done":
            self.output.append(data["item"])

    def finished(self) -> bool:
        return self.done

    def draft(self) -> dict[str, Any]:
        return self.response if self.done else {**self.response, "output": self.output}


class _MessagesFold(_Fold):
    """Anthropic Messages events into a ``message``."""

    def __init__(self, model: str, fault: str | None, replay: str | None = None) -> None:
        super().__init__(model, fault, replay)
        self.message: dict[str, Any] = {}
        self.inputs: dict[int, str] = {}
        self.done = False

    def unfinished(self, message: str) -> dict[str, Any]:
        return {"type": "error", "error": faulted({"type": "api_error", "message": message}, self.fault)}

    def _fail(self, message: str) -> None:
        self.failed = (502, self.unfinished(message))

    def add(self, name: str, data: Any) -> None:
        kind = data.get("type", name)
        if kind == "error":
            self.failed = (_status(data["error"].get("type")), data)
        elif kind == "message_start":
            self.message = {**data["message"], "content": []}
        elif kind == "content_block_start":
            block = dict(data["content_block"])
            if block["type"] == "tool_use":
                self.inputs[data["index"]] = ""
            self.message["content"].append(block)
        elif kind == "content_block_delta":
            block, delta = self.message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                self.inputs[data["index"]] += delta["partial_json"]
        elif kind == "content_block_stop" and data["index"] in self.inputs:
            block = self.message["content"][data["index"]]
            try:
                block["input"] = json.loads(self.inputs[data["index"]] or "{}")
            except ValueError:
                self._fail(self.said(f"the arguments of the model's call of {block['name']} are not valid JSON."))
        elif kind == "message_delta":
            self.message.update(data["delta"])
            self.message["usage"] = {**self.message.get("usage", {}), **data["usage"]}
        elif kind == "message_stop":
            self.done = True

    def finished(self) -> bool:
        return self.done

    def draft(self) -> dict[str, Any]:
        return self.message


_FOLDS: dict[str, type[_Fold]] = {"chat": _ChatFold, "responses": _ResponsesFold, "messages": _MessagesFold}


def _dump(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class WholeResponse:
    """An ASGI response that drives a stream's frames to their end and answers with their fold, as JSON.

    It is recorded as sent (one chunk, the JSON body), and ends at once when the client goes away.
    """

    def __init__(self, frames: AsyncIterator[bytes], record: Transcript, protocol: str, model: str,
                 fault: str | None, replay: str | None = None) -> None:
        self._frames = frames
        self._record = record
        self._fold = _FOLDS[protocol](model, fault, replay)

    def _headers(self, **extra: str) -> dict[str, str]:
        return {"x-demo-request-id": self._record.id, **extra}

    async def _cut(self, send: Send) -> None:
        """The head of the body, then (raised by the caller) a closed connection: what a cut stream is here."""
        body = _dump(self._fold.draft())
        head = body[: len(body) // 2]
        headers = [(b"content-type", b"application/json"), (b"x-demo-request-id", self._record.id.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self._record.add(head)
        await send({"type": "http.response.body", "body": head, "more_body": True})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fold = self._fold

        async def pump() -> None:
            try:
                number = 0
                async for frame in self._frames:
                    number += 1
                    try:
                        read = _read(frame)
                        if read is DONE:
                            fold.ended = True
                        elif read is not None:
                            fold.add(*read)
                    except (ValueError, LookupError, TypeError, AttributeError) as exc:
                        if fold.replay is None:
                            raise  # the demo's own frames always fold
                        fold.unreadable(number, exc)
                        break
            except AbruptClose as exc:
                if "stopping" not in str(exc):
                    await self._cut(send)
                raise
            status, body = fold.result()
            response = JSONResponse(body, status_code=status, headers=self._headers())
            self._record.status = status
            self._record.add(bytes(response.body))
            self._record.outcome = "complete" if status == 200 else "error"
            await response(scope, receive, send)

        try:
            pump_task = await until_disconnect(pump(), receive)
        finally:
            await self._frames.aclose()  # type: ignore[attr-defined]
        error = pump_task.exception() if pump_task.done() and not pump_task.cancelled() else None
        if isinstance(error, AbruptClose):
            self._record.outcome = "stopped" if "stopping" in str(error) else "cut"
        elif error is not None:
            self._record.outcome = "error"
        elif not pump_task.done() or pump_task.cancelled():
            self._record.outcome = "client_gone"
        if error is not None:
            raise error
