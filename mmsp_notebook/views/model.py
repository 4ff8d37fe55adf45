"""The view model of a turn: everything a view shows, decided once, and the ops that keep a view current.

See ``js/PROTOCOL.md``. A turn's *facts* (statuses, sizes, durations, tool results, usage: what the
turn state says) become its *view* in :func:`present_item` and :func:`present_turn`: each item's
tag, label, state and lines, the turn's banner, the footer's stats, every number already written
out (:mod:`.format`). The live widget (``js/src/render.js``), the static HTML (:mod:`.html`) and the
text views (:mod:`.text`) are templates of this view: they place its strings and states into
markup or lines, and decide no wording of their own.

:func:`view_model` draws a whole :class:`~mmsp_notebook.Turn`; :class:`OpsTracker` remembers what a
front end has been sent of one turn and yields only what changed (new items, appended text, the
fields of an item's view that changed, the turn's status, banner and footer), so a 20,000-token
answer crosses the comm about once, never the whole text per update.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from ..core.chars import is_high_surrogate, mend_surrogates
from ..core.items import ItemState
from ..core.pricing import format_cost
from ..core.redact import (
    GrowingRedaction,
    redact,
    redact_data,
    redact_secrets,
    redact_value,
    secret_values,
)
from ..core.turn import STATUS_TEXT, Turn, media_kind
from . import format as fmt
from .events import event_row, event_view, events_label, turn_events
from .hints import error_hint
from .media import media_src
from .unusual import NO_ANSWER, finish_stat, has_answer, item_excerpt, item_text, item_type

__all__ = ["status_text", "shown_status", "waiting_text", "WAIT_SHOWN_AFTER", "view_model", "present_item", "present_turn", "present_view", "OpsTracker",
           "event_row", "event_view", "events_label", "turn_events", "TOOL_OUTPUT_LIMIT", "SIGNATURE_KEYS", "REDACTED_THINKING", "redacted_blocks"]

_TEXT_KINDS = ("text", "thinking", "tool_call")

def status_text(turn: Turn) -> str:
    """The line a view shows under a turn that did not simply complete (the turn's own words)."""
    return turn.status_text


# ---------------------------------------------------------------------------------------------- facts
def _kind(item: ItemState) -> str:
    if item.kind == "inline_data":
        return media_kind(item)
    if item.kind in ("text", "thinking", "tool_call", "embedding", "inline_thinking"):
        return item.kind
    return "data"


def _header_facts(i: int, item: ItemState) -> dict[str, Any]:
    """What is known of an item when it starts."""
    out: dict[str, Any] = {"i": i, "kind": _kind(item), "status": "streaming"}
    if item.kind == "tool_call":
        out["name"] = redact_value(item.name)
        out["tool_call_id"] = redact_value(item.tool_call_id)
    if item.kind in ("thinking", "inline_thinking", "text"):
        out["fidelity"] = sorted(item.fidelity) if item.fidelity else []
    if item.mime_type:
        out["mime_type"] = item.mime_type
    if item.kind in ("inline_data", "inline_thinking"):
        out["bytes"] = item.size
    elif out["kind"] == "data":  # a kind a newer mmsp may send (citation…): its own type shown
        out["type"] = item_type(item)
    return out


def _done_facts(item: ItemState) -> dict[str, Any]:
    """What an item's ``.done`` adds."""
    out: dict[str, Any] = {"status": "done", "duration": item.duration}
    if item.fidelity:
        out["fidelity"] = sorted(item.fidelity)
    kind = _kind(item)
    if item.kind == "tool_call":
        out["arguments"] = redact_data(item.arguments)  # keys echoed in arguments are not shown
        out["name"] = redact_value(item.name)
    elif kind in ("image", "audio"):
        out["mime_type"] = item.mime_type
        out["bytes"] = item.size
        if item.size:  # (empty data is no image: said, not drawn as a broken one)
            src, secs = media_src(item)
            out["src"] = src
            if secs is not None:
                out["seconds"] = secs
    elif item.kind == "embedding":
        vector = item.content()
        out["dims"] = len(vector)
        out["norm"] = item.norm  # (None for a vector of what is no number)
        out["preview"] = list(vector[:8])
    elif item.kind in ("inline_data", "inline_thinking"):
        out["bytes"] = item.size
    elif kind == "data":
        out["excerpt"] = item_excerpt(item)
    return out


TOOL_OUTPUT_LIMIT = 20_000  # characters of a tool's result shown (the model gets it whole)
ERROR_LIMIT = 2_000  # characters of an error message in a banner (a server's whole HTML error page...)


def _shown(text: str | None, limit: int = TOOL_OUTPUT_LIMIT, whole: str = "turn.tool_calls has them all") -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit:,} more characters not shown ({whole})"


def _tool_result_facts(item: ItemState) -> dict[str, Any] | None:
    run = item.tool_run
    if run is None:
        return None
    return {
        "ok": run.ok,
        "output": _shown(redact(run.output)) if run.ended is not None else None,
        "error": _shown(redact(run.error)) if run.error else None,
        "duration": run.duration,
        "running": run.ended is None,
    }


def _footer_facts(turn: Turn) -> dict[str, Any] | None:
    if turn.status == "streaming" or not turn.steps:
        return None
    timings = turn.timings
    cost = turn.cost
    return {
        "usage": turn.usage,
        "finish_reason": redact_value(turn.finish_reason),
        "ttft": timings["ttft"],
        "total": timings["total"],
        "tokens_per_second": timings["tokens_per_second"],
        "cost": cost,
        "cost_text": format_cost(cost),
        "steps": len(turn.steps),
    }


def shown_status(turn: Turn, final: bool = True) -> str:
    """The turn's status as the views show it.

    Between two steps of a tool-using turn the turn state reads ``complete`` (its last step is)
    until the next step starts. A turn whose last step's tool calls have run always goes on to
    another step (one that stops there was cancelled), so while the turn is live (``final=False``)
    it is shown streaming: no footer yet, its running tools shown running; so is a last step that
    ended with calls no tool has run yet, tools offered and the step limit not reached. Once the
    turn is over (``final=True``) its status is its state's.
    """
    status = turn.status
    if final or status != "complete" or not turn.steps:
        return status  # a turn that is over is what its state says (a replayed step keeps its tool results)
    calls = [item for item in turn.steps[-1].items if item.kind == "tool_call"]
    if any(item.tool_run is not None for item in calls) or (calls and turn.config.get("tools") and not turn.max_steps_reached):
        return "streaming"
    return status


#: Seconds of silence from the server after which a live view says what it is waiting for.
WAIT_SHOWN_AFTER = 2.0


def waiting_text(turn: Turn, now: float | None = None) -> str:
    """What a live turn is waiting for, once its server has been silent :data:`WAIT_SHOWN_AFTER`
    seconds: "waiting for the first token… 12 s", "no data from the server… 40 s (gives up after
    2 min 00 s)", "retrying after HTTP 429… 20 s"; ``""`` while data flows or no request is open.

    The seconds count from the server's last sign of life (a byte, an event, a response's head), in
    whole seconds, so a view repainted while nothing arrives changes once a second.
    """
    blocked = turn.loop_blocked
    if blocked is not None:
        return blocked_text(turn, blocked)
    since = turn.waiting_since
    if since is None:
        return ""
    waited = (time.monotonic() if now is None else now) - since
    if waited < WAIT_SHOWN_AFTER:
        return ""
    step = turn.steps[-1] if turn.steps else None
    if turn.retrying_after is not None:
        lead = f"retrying after HTTP {turn.retrying_after}"
    elif step is None or step.n_events == 0:
        lead = "waiting for the first token"
    else:
        lead = "no data from the server"
    text = f"{lead}… {fmt.whole_seconds(waited)}"
    limit = turn.idle_timeout
    if limit is not None and turn.retrying_after is None and limit >= 1:
        text += f" (gives up after {fmt.whole_seconds(limit)})"
    return text


def blocked_text(turn: Turn, stall: Any) -> str:
    """What a live turn says while the worker loop is blocked (a :class:`~mmsp_notebook.core.run.Stall`)."""
    text = f"{stall.who} is blocking the event loop… {fmt.whole_seconds(stall.seconds)}: every stream waits for it."
    limit = turn.idle_timeout
    ends = f"interrupt (■) ends the turn{'' if limit is None else f', or it ends after {fmt.whole_seconds(limit)}'}"
    return f"{text} {stall.advice} The {ends}."


def _turn_facts(turn: Turn, final: bool = True) -> dict[str, Any]:
    status = shown_status(turn, final)
    if status == "streaming":
        return {"status": status, "status_text": "" if final else waiting_text(turn), "error": None, "footer": None}
    exc = turn.error
    error = None
    if exc is not None and (turn.status in ("error", "incomplete") or getattr(exc, "stall", None) is not None):
        error = {
            "type": type(exc).__name__,
            "message": turn.error_message,
            "hint": error_hint(exc, turn.api_key_env, turn.client_type),
        }
    facts = {"status": status, "status_text": status_text(turn), "error": error, "footer": _footer_facts(turn)}
    if status == "complete" and not has_answer(turn.items):
        facts["no_answer"] = True
    return facts


# ---------------------------------------------------------------------------------------------- the view


def _join(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


def _raw(value: Any, digits: int) -> Any:
    """A raw number as the view carries it: rounded (a tenth of a millisecond for times), None if not finite."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return round(value, digits) if math.isfinite(value) else None


def _fidelity(facts: Mapping[str, Any]) -> list[str]:
    fid = facts.get("fidelity")
    return [str(k) for k in fid] if isinstance(fid, (dict, list, tuple)) else []


#: Fidelity keys that carry a provider's signature of the thinking (Anthropic's and Gemini's
#: ``signature``, OpenAI Responses' ``encrypted_content``); other keys (``item_id``, DeepSeek-style
#: ``reasoning_field``, ``channel``…) only say where the text came from.
SIGNATURE_KEYS = ("signature", "encrypted_content")

#: mmsp's placeholder text for a thinking block the provider sent redacted (Anthropic's redacted_thinking).
REDACTED_THINKING = "_REDACTED_THINKING"


def redacted_blocks(text: Any) -> int:
    """How many redacted thinking blocks ``text`` is made of (0 when it holds any real thinking)."""
    if not isinstance(text, str) or REDACTED_THINKING not in text:
        return 0
    n = text.count(REDACTED_THINKING)
    return n if not text.replace(REDACTED_THINKING, "").strip() else 0


def _badge(facts: Mapping[str, Any]) -> dict[str, str] | None:
    keys = _fidelity(facts)
    if not any(key in SIGNATURE_KEYS for key in keys):
        return None
    return {"text": "signed", "title": "fidelity: " + ", ".join(keys)}


TOOL_STATE_TEXT = {"streaming": "…", "queued": "queued", "running": "running…", "stopped": "stopped",
                   "not_run": "not run", "done": "returned", "raised": "raised"}


def _tool_state(facts: Mapping[str, Any], stopped: bool) -> str:
    """Where a tool call stands: streaming → queued → running → done | raised; stopped or not run if
    the turn ended first. A call is queued from its end until its tool starts: tools run once the
    model's step has ended, so while the model still streams (the next call, its text) it is not running."""
    result = facts.get("result")
    if facts.get("status") == "streaming":
        return "stopped" if stopped else "streaming"
    if not isinstance(result, Mapping):
        return "not_run" if stopped else "queued"
    if result.get("running"):
        return "stopped" if stopped else "running"
    return "done" if result.get("ok") is not False and result.get("error") is None else "raised"


def _result_view(result: Any, state: str) -> dict[str, Any] | None:
    if not isinstance(result, Mapping):
        return None
    if state in ("running", "stopped"):
        return {"state": state, "label": TOOL_STATE_TEXT[state]}
    ok = state == "done"
    error = result.get("error")
    return {"state": "ok" if ok else "err", "label": "result" if ok else "error",
            "took": fmt.seconds(result.get("duration")),
            "text": fmt.as_text(result.get("output") if ok or error is None else error)}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _preview(facts: Mapping[str, Any]) -> str:
    values = facts.get("preview") if isinstance(facts.get("preview"), list) else None
    shown = (values or [])[:8]
    if not shown:
        return ""
    dims = facts.get("dims")
    more = dims > len(shown) if fmt.is_number(dims) else values is not None and len(values) > len(shown)
    cells = ", ".join(fmt.isolate(_cut(fmt.component(x), 40)) for x in shown)  # (a value that is no number, bounded)
    return f"[{cells}{', …' if more else ''}]"


def present_item(facts: Mapping[str, Any], turn_status: str | None = "complete") -> dict[str, Any]:
    """An item's view from its facts: its tag, labels, state and lines, as every view shows them.

    ``turn_status`` matters once the turn has ended: what was still streaming or running then is
    shown as stopped. ``text`` is carried over from the facts when they have it.
    """
    kind = str(facts.get("kind") or "data")
    status = str(facts.get("status") or "streaming")
    streaming = status == "streaming"
    stopped = turn_status is not None and turn_status != "streaming"
    out: dict[str, Any] = {"i": facts.get("i"), "kind": kind, "status": status}
    for key in ("name", "tool_call_id", "mime_type", "bytes", "src", "dims"):
        if key in facts:
            out[key] = facts[key]
    for key in ("seconds", "duration"):
        if key in facts:
            out[key] = _raw(facts[key], 4)
    if kind in _TEXT_KINDS and "text" in facts:
        out["text"] = facts["text"]
    mime = fmt.isolate(facts.get("mime_type") or "")
    size = "" if streaming else fmt.size(facts.get("bytes"))
    dots = "…" if streaming else ""

    if kind == "text":  # its text is all it shows
        return out
    redacted = facts.get("redacted")
    if kind == "thinking" and isinstance(redacted, int) and redacted > 0:
        out["tag"] = "thinking"
        blocks = "1 block" if redacted == 1 else f"{redacted} blocks"
        out["label"] = f"redacted thinking ({blocks}, kept for the next turn)"
        out["text"] = ""  # the placeholder is not thinking: nothing to read
        out["redacted"] = redacted
        out["badge"] = _badge(facts)
    elif kind == "thinking":
        out["tag"] = "thinking"
        if streaming:
            out["label"] = "Thinking (stopped)" if stopped else "Thinking…"
        else:
            duration = facts.get("duration")
            out["label"] = f"Thought for {fmt.fixed(duration, 1)} s" if fmt.is_number(duration) else "Thought"
        out["badge"] = _badge(facts)
    elif kind == "inline_thinking":
        out["tag"] = "thinking (opaque)"
        out["label"] = "Thinking (opaque)…" if streaming else _join("Thinking (opaque)", fmt.size(facts.get("bytes")))
        count = fmt.integer(facts.get("bytes"))
        out["meta"] = _join(mime, f"{count} bytes" if count else "")
        out["badge"] = _badge(facts)
    elif kind == "tool_call":
        state = _tool_state(facts, stopped)
        ident = facts.get("tool_call_id")
        arguments = facts.get("arguments")
        out.update(tag="tool call", title=f"id {fmt.isolate(ident)}" if ident else None, state=state,
                   state_text=TOOL_STATE_TEXT[state],
                   args=None if streaming or arguments is None else fmt.as_text(arguments),
                   result=_result_view(facts.get("result"), state))
    elif kind == "image":
        out["tag"] = "image"
        out["meta"] = _join(mime, "empty image" if facts.get("bytes") == 0 and not streaming else size) + dots
        if "src" in facts:
            out["alt"] = f"generated image ({mime or 'image'})"
            out["rejected"] = f"{_join('image', mime)} — not shown: only PNG, JPEG, GIF or WebP data URLs are displayed"
    elif kind == "audio":
        secs = facts.get("seconds")
        out["tag"] = "audio"
        empty = "empty audio" if facts.get("bytes") == 0 and not streaming else ""
        out["meta"] = _join(mime, f"{fmt.fixed(secs, 1)} s" if fmt.is_number(secs) else "", empty) + dots
        if "src" in facts:
            out["rejected"] = f"{_join('audio', out['meta'])} — not shown: not a base64 audio data URL"
    elif kind == "embedding":
        dims, norm = facts.get("dims"), facts.get("norm")
        out["norm"] = norm if fmt.is_number(norm) else None
        out["tag"] = "embedding"
        out["meta"] = _join(f"{dims} dims" if fmt.is_number(dims) else "",
                            f"norm {fmt.fixed(norm, 3)}" if fmt.is_number(norm) else "")
        out["preview"] = _preview(facts)
    else:
        own = facts.get("type")
        out["tag"] = own if isinstance(own, str) and own else "data" if kind in ("data", "inline_data") else kind
        excerpt = facts.get("excerpt")
        out["meta"] = _join(mime, size, excerpt if isinstance(excerpt, str) else "") + dots
    return out


def _stat(key: str, text: str, title: str | None = None) -> list[str]:
    """A footer stat: ``[key, text]`` or ``[key, text, tooltip]`` (the key names its class)."""
    return [key, text, title] if title else [key, text]


def _footer_view(facts: Any) -> dict[str, Any] | None:
    if not isinstance(facts, Mapping):
        return None
    raw_usage = facts.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    stats = []
    buckets = [f"{name} {fmt.integer(usage.get(key))}" for name, key in (
        ("cached", "cached_tokens"), ("prompt", "prompt_tokens"), ("thoughts", "thoughts_tokens"),
        ("response", "response_tokens")) if fmt.is_number(usage.get(key))]
    if buckets:
        stats.append(_stat("tokens", "tokens " + " · ".join(buckets), "token usage per bucket"))
    reason = redact_value(facts.get("finish_reason"))  # (a server's string, as a trace or sidecar holds it)
    if reason:  # (a reason that is not a normal end is a warning: see .unusual)
        stats.append(_stat(*finish_stat(reason)))
    if fmt.is_number(facts.get("ttft")):
        stats.append(_stat("ttft", f"TTFT {fmt.seconds(facts['ttft'])}", "time to first token"))
    if fmt.is_number(facts.get("total")):
        stats.append(_stat("total", f"total {fmt.seconds(facts['total'])}"))
    if fmt.is_number(facts.get("tokens_per_second")):
        stats.append(_stat("speed", f"{fmt.fixed(facts['tokens_per_second'], 1)} tok/s", "response tokens per second"))
    cost = facts.get("cost_text") or (format_cost(facts["cost"]) if "cost" in facts else "")
    if cost:
        stats.append(_stat("cost", str(cost)))
    steps = facts.get("steps")
    if fmt.is_number(steps) and steps > 1:
        stats.append(_stat("steps", f"{steps} steps", "model calls in this turn"))
    raw = {"usage": facts.get("usage"), "finish_reason": reason, "ttft": _raw(facts.get("ttft"), 4),
           "total": _raw(facts.get("total"), 4), "tokens_per_second": _raw(facts.get("tokens_per_second"), 2),
           "cost": facts.get("cost"), "steps": steps}
    return {**raw, "stats": stats}


def _banner(status: str | None, text: str, error: Any, no_answer: bool = False) -> dict[str, str] | None:
    err: Mapping[str, Any] = error if isinstance(error, Mapping) else {"message": fmt.as_text(error)} if error else {}
    if isinstance(err.get("message"), str):
        err = {**err, "message": _shown(err["message"], ERROR_LIMIT, "the error itself has them all")}
    hint = str(err.get("hint") or "")
    if status == "streaming":
        return {"kind": "streaming", "text": text or STATUS_TEXT["streaming"]}
    if status == "error":
        kind = err.get("type") or "Error"
        message = err.get("message")  # (an exception with no message gives its name: said once, in the lead)
        message = "it came with no message" if message == kind else message
        banner = {"kind": "error", "lead": f"{fmt.isolate(kind)}: ", "text": str(message or text or STATUS_TEXT["error"])}
    elif status == "incomplete":
        banner = {"kind": "warn", "text": text or STATUS_TEXT["incomplete"]}
        detail = ": ".join(str(x) for x in (fmt.isolate(err.get("type")), err.get("message")) if x)
        if detail:
            banner["detail"] = detail
    elif status == "cancelled":
        banner = {"kind": "muted", "text": text or STATUS_TEXT["cancelled"]}
    elif status == "complete" and no_answer:
        banner = {"kind": "warn", "text": NO_ANSWER}
    elif text:
        banner = {"kind": "muted", "text": text}
    else:
        return None
    if hint:
        banner["hint"] = hint
    return banner


def present_turn(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's own view: its status, banner (kind, lead, text, detail, hint) and footer (raw + stats)."""
    status = facts.get("status")
    return {"status": status, "banner": _banner(status, str(facts.get("status_text") or ""), facts.get("error"),
                                                facts.get("no_answer") is True),
            "footer": _footer_view(facts.get("footer"))}


def present_view(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A whole view model from a turn's facts (``items`` as item facts, with their text)."""
    status = facts.get("status")
    items = [present_item(it, status) for it in facts.get("items") or []]
    return {"id": facts.get("id"), "model": redact_value(facts.get("model")), "items": items, **present_turn(facts)}


def view_model(turn: Turn) -> dict[str, Any]:
    """The whole turn as every view draws it."""
    with turn.lock:
        facts = _turn_facts(turn)
        items = []
        for i, item in enumerate(turn.items):
            f = _header_facts(i, item)
            if item.kind in _TEXT_KINDS:
                f["text"] = redact_secrets(item_text(item))  # (the Turn keeps it as received)
                if item.kind == "thinking" and redacted_blocks(f["text"]):
                    f["redacted"] = redacted_blocks(f["text"])
            if item.status == "done":
                f.update(_done_facts(item))
            if item.kind == "tool_call":
                f["result"] = _tool_result_facts(item)
            items.append(present_item(f, facts["status"]))
        # (a lone surrogate a model sent, which no page, comm message or terminal can carry: U+FFFD)
        return mend_surrogates({"id": turn.id, "model": redact_value(turn.model), "items": items, **present_turn(facts)})


# ---------------------------------------------------------------------------------------------- ops
_MISSING = object()


class OpsTracker:
    """What one front end has been sent of one turn; :meth:`ops` yields only the difference."""

    def __init__(self, events: bool = False) -> None:
        self.events = events
        self._facts: list[dict[str, Any]] = []
        self._views: list[dict[str, Any]] = []
        self._text_len: list[int] = []  # characters of each item's shown (redacted) text sent
        self._redacted: list[GrowingRedaction] = []  # each item's text redacted as it grows
        self._streamed: dict[str, str] = {}  # the events table's redaction state (event_row)
        self._raw_len: list[int] = []  # the item's size when its text was last read
        self._held: list[bool] = []  # whether the end of the item's text was held back (not settled)
        self._status: str | None = None
        self._turn: dict[str, Any] = {}
        self._events_sent = 0

    def view(self, turn: Turn) -> dict[str, Any]:
        """The view model of ``turn`` as far as this front end has been sent it, for a snapshot that
        the ops to come continue: the items it was sent, each text as far as it was sent (the
        end of a text held back until it settles is sent with the ops, not twice)."""
        vm = view_model(turn)
        vm["items"] = vm["items"][:len(self._text_len)]
        for item, sent in zip(vm["items"], self._text_len):
            if isinstance(item.get("text"), str):
                item["text"] = item["text"][:sent]
        return vm

    def ops(self, turn: Turn, final: bool = False) -> list[list[Any]]:
        """The ops that bring the front end to ``turn`` as it is now; ``final`` once the turn is over."""
        out: list[list[Any]] = []
        secrets = secret_values()
        with turn.lock:
            facts_of_turn = _turn_facts(turn, final)
            status = facts_of_turn["status"]
            restyle = status != self._status  # labels that say "stopped" follow the turn's status
            self._status = status
            for i, item in enumerate(turn.items):
                new = i >= len(self._facts)
                if new:
                    self._facts.append(_header_facts(i, item))
                    self._views.append({})
                    self._text_len.append(0)
                    self._redacted.append(GrowingRedaction())
                    self._held.append(False)
                    self._raw_len.append(0)
                facts = self._facts[i]
                changed = new
                if item.status == "done" and facts["status"] != "done":
                    facts.update(_done_facts(item))
                    changed = True
                kind = _kind(item)  # an inline-data item's MIME type may come with a later delta or its .done
                if kind != facts["kind"] or (item.mime_type and item.mime_type != facts.get("mime_type")):
                    facts["kind"], facts["mime_type"] = kind, item.mime_type
                    changed = True
                if item.kind == "tool_call":
                    result = _tool_result_facts(item)
                    if result != facts.get("result", _MISSING):
                        facts["result"] = result
                        changed = True
                appended = None
                if item.kind in _TEXT_KINDS and (item.size != self._raw_len[i] or (self._held[i] and (final or item.status == "done"))):
                    self._raw_len[i] = item.size
                    growing = self._redacted[i]
                    text = growing(item_text(item), secrets)  # (what is new redacted)
                    # what follows the settled part may yet become a key or stop being one: sent once it
                    # settles, or whole when the item or the turn is over (text is only ever appended)
                    self._held[i] = isinstance(text, str) and not final and item.status != "done" and growing.settled < len(text)
                    end = growing.settled if self._held[i] else len(text)
                    if end and not final and is_high_surrogate(text[end - 1]):  # half a pair, whose other half may open the next delta: sent with it, joined
                        end -= 1
                        self._raw_len[i] = -1  # (read again at the next repaint, the final one included)
                    blocks = redacted_blocks(text) if item.kind == "thinking" else 0
                    if blocks:  # mmsp's placeholder is not shown: the label says what it is
                        if facts.get("redacted") != blocks:
                            facts["redacted"] = blocks
                            changed = True
                    elif end > self._text_len[i]:  # (what is new, its surrogates mended: see view_model)
                        appended = mend_surrogates(text[self._text_len[i]:end])
                    self._text_len[i] = end
                if new:
                    self._views[i] = view = present_item(facts, status)
                    out.append(["item", i, view])
                if appended:
                    out.append(["append", i, appended])
                if not new and (changed or restyle):
                    view = present_item(facts, status)
                    old = self._views[i]
                    diff = {k: v for k, v in view.items() if old.get(k, _MISSING) != v}
                    if view["kind"] != old.get("kind"):  # drawn anew as its kind: the whole view, null for what it has no more
                        diff = {**dict.fromkeys(old), **view}
                    if diff:
                        out.append(["set", i, diff])
                        self._views[i] = view
            if self.events:
                last = None
                for n, ms, event in turn_events(turn, self._events_sent):  # (only the events not sent yet)
                    last = ["event", event_view(event_row(n, ms, event, self._streamed, secrets=secrets))]
                    out.append(last)
                    self._events_sent = n + 1
                if last is not None:
                    last.append(events_label(self._events_sent))
            # id and model once (a view that gets them covers the finished turn: no redraw at the end)
            fields = {"id": turn.id, "model": redact_value(turn.model), **present_turn(facts_of_turn)}
            changed_fields = {k: v for k, v in fields.items() if self._turn.get(k, _MISSING) != v}
            if changed_fields:
                out.append(["turn", changed_fields])
                self._turn.update(changed_fields)
        return mend_surrogates(out)  # (names, arguments, events: a lone surrogate as U+FFFD, as in view_model)
