"""The result object of one turn: a prompt, the model's streamed steps, and the tools it ran.

A turn with tools has several *steps*: each is one streamed model response (one
:class:`~mmsp_notebook.TurnState`), and between steps the tool calls of the previous one run as
Python functions whose results go back as ``tool_result.done`` items. :class:`Turn` is what the
magic, ``ask``/``aask`` and ``Chat.send`` return; it renders its static view in Jupyter.
"""

from __future__ import annotations

import base64
import io
import itertools
import os
import threading
import wave
from typing import Any

from ._pricing import cost_of, format_cost
from ._redact import exception_chain, redact, redact_exception
from ._state import ItemState, Status, TurnState

__all__ = ["Turn", "pcm_to_wav", "error_hint"]

_ids = itertools.count(1)

STATUS_TEXT = {
    "incomplete": "ended without a stop event — the answer may be cut off",
    "cancelled": "cancelled — partial output kept",
    "error": "failed — partial output kept",
    "streaming": "streaming…",
    "complete": "",
}


def pcm_to_wav(data: bytes, mime_type: str) -> bytes:
    """Wrap raw little-endian 16-bit PCM (``audio/L16;rate=24000``, ``audio/pcm``…) as a WAV file."""
    rate, channels = 24000, 1
    for part in mime_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key == "rate" and value.isdigit():
            rate = int(value)
        elif key == "channels" and value.isdigit():
            channels = int(value)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data[: len(data) - len(data) % (2 * channels)])
    return buf.getvalue()


_PLAYABLE_AUDIO = {"audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3", "audio/ogg", "audio/webm", "audio/flac",
                   "audio/aac", "audio/mp4"}
_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def media_kind(item: ItemState) -> str:
    """How an inline_data item is shown: ``image``, ``audio`` or ``data``."""
    mime = (item.mime_type or "").split(";")[0].strip().lower()
    if mime in _IMAGE_TYPES:
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "data"


def media_src(item: ItemState) -> tuple[str, float | None]:
    """A ``data:`` URL for an image or audio item (raw PCM wrapped as WAV), and audio seconds."""
    data = item.content()
    mime = (item.mime_type or "").split(";")[0].strip().lower()
    seconds = None
    if media_kind(item) == "audio":
        if mime not in _PLAYABLE_AUDIO:
            data = pcm_to_wav(data, item.mime_type)
            mime = "audio/wav"
        if mime in ("audio/wav", "audio/x-wav"):
            try:
                with wave.open(io.BytesIO(data)) as w:
                    seconds = w.getnframes() / float(w.getframerate() or 1)
            except (wave.Error, EOFError):
                seconds = None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", seconds


def _key_env(client_type: str | None) -> str | None:
    """The variable mmsp reads a client type's key from."""
    from mmsp.credentials import CLIENT_CREDENTIALS

    credentials = CLIENT_CREDENTIALS.get(client_type or "")
    return credentials.api_key_env if credentials else None


def error_hint(exc: BaseException | None, api_key_env: str | None = None, client_type: str | None = None) -> str:
    """One sentence on what to do about an error."""
    if exc is None:
        return ""
    name = type(exc).__name__
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    text = str(exc).lower()
    set_key = "in the environment (or name another variable with --api-key-env NAME), then run the cell again."
    if name == "ApiKeyRequiredError":
        env = getattr(exc, "api_key_env", None) or api_key_env or "the provider's API key variable"
        if getattr(exc, "base_url", None) and os.environ.get(env):
            # mmsp keeps a provider's key from being sent to another endpoint unless told to
            return (f"{env} is set, but mmsp does not send it to a custom --base-url: "
                    f"add --api-key-env {env} (or the variable holding that server's key).")
        return f"Set {env} {set_key}"
    if status == 401 or name == "AuthenticationError":
        env = api_key_env or _key_env(client_type) or "the API key variable"
        return f"The server refused the key: check {env}."
    if status is None and ("api_key" in text or "api key" in text or "authentication method" in text):
        # a provider SDK that found no key raises before sending anything
        env = api_key_env or _key_env(client_type) or "the provider's API key variable"
        return f"No API key: set {env} {set_key}"
    if status == 429 or name == "RateLimitError":
        return "Rate limited: wait a moment and run the cell again."
    if name == "IncompleteStreamError":
        return "The stream was cut short before its stop event; the request is worth retrying."
    if name == "ToolCallArgumentParseError":
        return "The model produced tool arguments that are not a JSON object; retry or rephrase."
    if name == "ProtocolError":
        return "The stream broke the UniEvent grammar: a bug in the client or the server, not in your prompt."
    if name in ("CancelledError", "KeyboardInterrupt"):
        return ""
    chain = exception_chain(exc)  # what a provider SDK's error wraps says how it failed
    names = {type(e).__name__ for e in chain}
    said = " ".join(str(e).lower() for e in chain)
    if names & {"RemoteProtocolError", "ReadError", "ReadTimeout"} or "closed" in said or "incomplete chunked" in said:
        return "The connection dropped before the stream ended; the request is worth retrying."
    if name in ("ConnectError", "APIConnectionError", "ConnectTimeout"):
        return "Could not connect: check the network, --base-url if you set one, and that the server is reachable."
    return "Run %mmsp error for the full detail."


def _running_cell() -> int | None:
    """The execution count of the cell IPython runs now (``None`` outside IPython)."""
    from IPython import get_ipython

    return getattr(get_ipython(), "execution_count", None)


class Turn:
    """One turn: the prompt, every streamed step, the tools that ran, and how it ended.

    Attributes are safe to read while the turn streams (under :attr:`lock`).
    """

    def __init__(
        self,
        prompt: dict[str, Any] | None = None,
        *,
        model: str = "",
        client_type: str | None = None,
        chat: str | None = None,
        trace_id: str | None = None,
        config: dict[str, Any] | None = None,
        api_key_env: str | None = None,
    ) -> None:
        self.id = f"t{next(_ids)}"
        self.prompt = prompt
        self.model = model
        self.client_type = client_type
        self.chat = chat
        self.trace_id = trace_id
        self.config = dict(config or {})
        self.api_key_env = api_key_env
        self.steps: list[TurnState] = []
        self.tool_messages: list[dict[str, Any]] = []
        self.lock = threading.RLock()
        self.max_steps_reached = False
        self._status: Status | None = None  # set when a turn ends without a step (e.g. refused config)
        self._error: BaseException | None = None
        self._drawn_in_cell: int | None = None  # the execution count of the cell whose live view drew it

    def mark_drawn(self) -> None:
        """The live view drew this turn in the running cell: as that cell's value it is just its summary."""
        self._drawn_in_cell = _running_cell()

    def _drawn_here(self) -> bool:
        return self._drawn_in_cell is not None and _running_cell() == self._drawn_in_cell

    # ----------------------------------------------------------------- engine side
    def new_step(self) -> TurnState:
        state = TurnState()
        with self.lock:
            self.steps.append(state)
        return state

    def mark_cancelled(self, reason: str = "cancelled") -> None:
        """The turn was stopped outside a stream (e.g. while a tool ran): it ends ``cancelled``."""
        import asyncio

        with self.lock:
            for step in self.steps:
                step.cancel(reason)
            if self.status not in ("error", "incomplete", "cancelled"):
                self._status = "cancelled"
                self._error = asyncio.CancelledError(reason)

    def fail_before_stream(self, exc: BaseException) -> None:
        with self.lock:
            self._error = redact_exception(exc)
            from ._state import classify_exception

            self._status = classify_exception(exc, 0)

    # ----------------------------------------------------------------- reading
    @property
    def items(self) -> list[ItemState]:
        return [item for step in self.steps for item in step.items]

    @property
    def status(self) -> Status:
        if self._status is not None:
            return self._status
        if not self.steps:
            return "streaming"
        return self.steps[-1].status

    @property
    def error(self) -> BaseException | None:
        if self._error is not None:
            return self._error
        return self.steps[-1].error if self.steps else None

    @property
    def error_message(self) -> str | None:
        exc = self.error
        if exc is None or self.status == "cancelled":
            return None
        return redact(str(exc) or type(exc).__name__)

    @property
    def text(self) -> str:
        return "".join(item.content() for item in self.items if item.kind == "text")

    @property
    def thinking(self) -> str:
        return "".join(item.content() for item in self.items if item.kind == "thinking")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Each call: name, id, parsed arguments (``None`` until done), and the result when it ran."""
        out = []
        for item in self.items:
            if item.kind != "tool_call":
                continue
            run = item.tool_run
            out.append(
                {
                    "name": item.name,
                    "tool_call_id": item.tool_call_id,
                    "arguments": item.arguments,
                    "raw_arguments": item.content(),
                    "output": run.output if run else None,
                    "error": run.error if run else None,
                    "duration": run.duration if run else None,
                }
            )
        return out

    def _media(self, kind: str) -> list[dict[str, Any]]:
        return [
            {"mime_type": item.mime_type, "data": item.content(), "done": item.status == "done"}
            for item in self.items
            if item.kind == "inline_data" and media_kind(item) == kind
        ]

    @property
    def images(self) -> list[dict[str, Any]]:
        """Each image: ``{"mime_type", "data" (bytes), "done"}``."""
        return self._media("image")

    @property
    def audio(self) -> list[dict[str, Any]]:
        """Each audio clip: ``{"mime_type", "data" (bytes as streamed), "done"}``."""
        return self._media("audio")

    @property
    def embeddings(self) -> list[list[float]]:
        return [item.content() for item in self.items if item.kind == "embedding"]

    @property
    def message(self) -> dict[str, Any] | None:
        """The assistant message of the last step (the UniMessage mmsp records)."""
        return self.steps[-1].message() if self.steps else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every message of the turn in order: the prompt, each step's message, each tool-result message."""
        out = [self.prompt] if self.prompt else []
        for i, step in enumerate(self.steps):
            out.append(step.message())
            if i < len(self.tool_messages):
                out.append(self.tool_messages[i])
        return out

    @property
    def events(self) -> list[dict[str, Any]]:
        return [event for step in self.steps for event in step.events]

    @property
    def usage(self) -> dict[str, int | None] | None:
        """Usage summed over the steps, bucket by bucket (a bucket no step reported stays ``None``)."""
        usages = [step.usage for step in self.steps if step.usage]
        if not usages:
            return None
        out: dict[str, int | None] = {}
        for key in ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens"):
            values = [u.get(key) for u in usages if u.get(key) is not None]
            out[key] = sum(values) if values else None
        return out

    @property
    def finish_reason(self) -> str | None:
        return self.steps[-1].finish_reason if self.steps else None

    @property
    def cost(self) -> float | None:
        """Cost from mmsp's list prices; ``None`` when the price of the model is unknown."""
        costs = [cost_of(step.usage, self.model, self.client_type) for step in self.steps if step.usage]
        if not costs or any(c is None for c in costs):
            return None
        return sum(costs)

    @property
    def timings(self) -> dict[str, Any]:
        """ttft (first step), total (first request to last end), tokens/s over decode windows, per step."""
        steps = [s for s in self.steps if s.request_sent is not None]
        if not steps:
            return {"ttft": None, "total": None, "tokens_per_second": None, "steps": []}
        first, last = steps[0], steps[-1]
        end = last.ended if last.ended is not None else None
        total = None if end is None else end - first.request_sent
        tokens, window = 0, 0.0
        for s in steps:
            if s.output_tokens is not None and s.first_delta is not None and s.ended is not None:
                tokens += s.output_tokens
                window += s.ended - s.first_delta
        return {
            "ttft": first.ttft,
            "total": total,
            "tokens_per_second": tokens / window if window > 0 and tokens else None,
            "steps": [s.timings() for s in steps],
        }

    @property
    def status_text(self) -> str:
        if self.status == "complete" and self.max_steps_reached:
            return "stopped after --max-steps with tool calls still pending"
        if self.status in ("error", "cancelled") and not self.items:
            return "failed before any output" if self.status == "error" else "cancelled before any output"
        return STATUS_TEXT.get(self.status, "")

    def summary(self) -> str:
        """One line: model, status, tokens, time, cost."""
        usage = self.usage or {}
        tokens = sum(v or 0 for v in usage.values()) if usage else None
        t = self.timings
        parts = [self.model or "?", self.status]
        if self.finish_reason:
            parts.append(f"finish={self.finish_reason}")
        if tokens is not None:
            parts.append(f"{tokens} tokens")
        if t["total"] is not None:
            parts.append(f"{t['total']:.2f} s")
        parts.append(format_cost(self.cost))
        return f"<Turn {' · '.join(parts)}>"

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        if self._drawn_here():
            # the live view already drew this turn in this cell; the cell's value is then just its summary
            return {"text/plain": self.summary()}
        from ._html import render_html, render_text

        return {"text/plain": render_text(self), "text/html": render_html(self)}
