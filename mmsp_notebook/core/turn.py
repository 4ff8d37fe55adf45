"""The result object of one turn: a prompt, the model's streamed steps, and the tools it ran.

A turn with tools has several *steps*: each is one streamed model response (one
:class:`~mmsp_notebook.TurnState`), and between steps the tool calls of the previous one run as
Python functions whose results go back as ``tool_result.done`` items. :class:`Turn` is what the
magic, ``ask``/``aask`` and ``Chat.send`` return; it renders its static view in Jupyter.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from .chars import isolate, mend_surrogates, printable
from .pricing import LIST_PRICES, Prices, PriceTable, format_cost
from .redact import redact, redact_exception, redact_value
from .state import ItemState, Status, TurnState

__all__ = ["Turn", "media_kind", "STATUS_TEXT"]

_ids = itertools.count(1)

#: What a turn that did not simply complete says about how it ended.
STATUS_TEXT = {
    "incomplete": "ended without a stop event — the answer may be cut off",
    "cancelled": "cancelled — partial output kept",
    "error": "failed — partial output kept",
    "streaming": "streaming…",
    "complete": "",
}

_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def media_kind(item: ItemState) -> str:
    """How an inline_data item is shown: ``image``, ``audio`` or ``data``."""
    mime = (item.mime_type or "").split(";")[0].strip().lower()
    if mime in _IMAGE_TYPES:
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "data"


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
        comparison: str | None = None,
    ) -> None:
        self.id = f"t{next(_ids)}"
        self.prompt = prompt
        self.model = model
        self.client_type = client_type
        self.chat = chat
        self.trace_id = trace_id
        self.config = dict(config or {})
        self.api_key_env = api_key_env
        self.comparison = comparison  # the comparison this turn is a column of (compare, -m a,b)
        self.steps: list[TurnState] = []
        self.tool_messages: list[dict[str, Any]] = []
        self.lock = threading.RLock()
        self.max_steps_reached = False
        self._status: Status | None = None  # set when a turn ends without a step (e.g. refused config)
        self._error: BaseException | None = None
        # set by the front doors: the execution count of the cell whose live view drew this turn
        self.drawn_in_cell: int | None = None
        # set by the engine while a request is open (see TurnRun): the ``time.monotonic()`` of the
        # server's last sign of life, the HTTP status a client is retrying after, and the idle limit
        self.waiting_since: float | None = None
        self.retrying_after: int | None = None
        self.idle_timeout: float | None = None
        # set by the front door's pacer while the worker loop is blocked (a core.run.Stall), else None
        self.loop_blocked: Any = None
        # set by the wire inspector: the raw SSE frames of the turn next to their UniEvents
        self.wire: Any = None
        # set by replay: which trace, turn and sidecar this turn was played from
        self.replayed_from: dict[str, Any] | None = None

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

    def end_blocked(self, exc: BaseException, cancelled: bool) -> None:
        """The front door ended the turn while the worker loop was blocked (``exc`` a
        :class:`~mmsp_notebook.LoopBlockedError`): ``cancelled`` on an interrupt, else ``error``; what
        arrived is kept. A turn that already failed or was cancelled keeps how it ended."""
        with self.lock:
            self.loop_blocked = None
            if self.status in ("error", "incomplete", "cancelled"):
                return
            for step in self.steps:
                step.cancel(str(exc))
            self._status = "cancelled" if cancelled else "error"
            self._error = exc

    def fail_before_stream(self, exc: BaseException) -> None:
        with self.lock:
            self._error = redact_exception(exc)
            from .state import classify_exception

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
        """The answer's text: its text items' deltas joined, a surrogate pair split across two of
        them joined into its character and a lone half replaced by U+FFFD (as the views and the
        trace file have it: printable, and writable as UTF-8)."""
        return mend_surrogates("".join(item.content() for item in self.items if item.kind == "text"))

    @property
    def thinking(self) -> str:
        """The thinking's text, mended as :attr:`text` is."""
        return mend_surrogates("".join(item.content() for item in self.items if item.kind == "thinking"))

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
        # every image/* or audio/* item, as the traces count them: those a page does not show (SVG, BMP,
        # AVIF...) are the user's to save or convert all the same
        return [
            {"mime_type": item.mime_type, "data": item.content(), "done": item.status == "done"}
            for item in self.items
            if item.kind == "inline_data" and (item.mime_type or "").strip().lower().startswith(kind + "/")
        ]

    @property
    def images(self) -> list[dict[str, Any]]:
        """Each image (every ``image/*`` type, also one the views do not draw): ``{"mime_type", "data" (bytes), "done"}``."""
        return self._media("image")

    @property
    def audio(self) -> list[dict[str, Any]]:
        """Each audio clip (every ``audio/*`` type): ``{"mime_type", "data" (bytes as streamed), "done"}``."""
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
            values = [int(v) for u in usages if (v := u.get(key)) is not None]
            out[key] = sum(values) if values else None
        return out

    @property
    def finish_reason(self) -> str | None:
        return self.steps[-1].finish_reason if self.steps else None

    @property
    def cost(self) -> float | None:
        """Cost in USD at mmsp's list prices; ``None`` when the price of the model is unknown."""
        return self.cost_at(None)

    def cost_at(self, prices: Prices | None) -> float | None:
        """Cost in USD with ``prices`` (by model id, USD per million tokens per usage bucket, the shape
        ``traces.load_turns(prices=...)`` takes) before mmsp's list prices; ``None`` when unknown.

        The sum of the steps' costs, each priced as :mod:`mmsp_notebook.core.pricing` says (the
        same numbers as the ``cost`` column of ``traces.load_turns``).
        """
        table = PriceTable(prices) if prices else LIST_PRICES
        costs = [table.cost(step.usage, self.model, self.client_type) for step in self.steps if step.usage]
        if not costs or any(c is None for c in costs):
            return None
        return sum(c for c in costs if c is not None)

    @property
    def timings(self) -> dict[str, Any]:
        """ttft (first step), total (first request to last end), tokens/s over decode windows, per step."""
        steps = [s for s in self.steps if s.request_sent is not None]
        if not steps:
            return {"ttft": None, "total": None, "tokens_per_second": None, "steps": []}
        first, last = steps[0], steps[-1]
        start = first.request_sent
        total = None if last.ended is None or start is None else last.ended - start
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
        """How the turn ended, in words (empty for a turn that simply completed)."""
        if self.status == "complete" and self.max_steps_reached:
            return "stopped after --max-steps with tool calls still pending"
        stall = getattr(self._error, "stall", None)  # ended while the worker loop was blocked
        if self.status == "cancelled" and stall is not None:
            return f"cancelled while {stall.who} blocked the worker loop (it runs on until it returns) — partial output kept"
        if self.status in ("error", "cancelled") and not self.items:
            return "failed before any output" if self.status == "error" else "cancelled before any output"
        return STATUS_TEXT.get(self.status, "")

    def summary(self) -> str:
        """One line: model, status, tokens, time, cost."""
        usage = self.usage or {}
        tokens = sum(v or 0 for v in usage.values()) if usage else None
        t = self.timings
        parts = [isolate(self.model or "?"), self.status]  # (names a server gives: see core.chars)
        if self.finish_reason:
            parts.append(f"finish={isolate(redact_value(self.finish_reason))}")
        if tokens is not None:
            parts.append(f"{tokens} tokens")
        if t["total"] is not None:
            parts.append(f"{t['total']:.2f} s")
        parts.append(format_cost(self.cost))
        return printable(f"<Turn {' · '.join(parts)}>")  # (a terminal shows a repr: no control character acts there)

    def __repr__(self) -> str:
        return self.summary()

    def save_wire(self, path: Any, step: int = -1) -> Any:
        """Write the raw response bytes of a step captured with ``--wire`` (``DemoServer(replay=path)`` plays them)."""
        if self.wire is None:
            from .._errors import OptionError

            raise OptionError("this turn has no wire capture: run it with --wire (ask(..., wire=True))")
        return self.wire.save(path, step)
