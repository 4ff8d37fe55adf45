"""Turn state: a pure accumulator of one streamed model response.

:class:`TurnState` consumes the UniEvents an ``mmsp`` client yields, one at a time, and keeps
everything a view or an analysis needs: the items in stream order (kind, status, content so far,
the ``.done`` item, fidelity), usage and finish reason from the stop event, a status, and timing
marks from a monotonic clock. It checks the streaming grammar as it goes::

    stream := delta_event* stop_event
    items  := group*            one content item per delta event, in order
    group  := K.delta+ K.done   K = text | thinking | tool_call | inline_data | inline_thinking | embedding

A violation raises :class:`~mmsp_notebook.ProtocolError` naming the event's index and what was
wrong; the state then has status ``"error"`` and everything that arrived before stays readable.
An event after the stop event is one. An event after a step ended without one (``finish``,
``fail``, ``cancel``, a violation: say a batch a reader held when the user stopped the turn) is
refused with a ``ProtocolError`` that changes nothing: the step keeps how it ended (a cancelled
one stays ``cancelled``), and ``fail`` given that refusal keeps it too.

This module imports nothing from IPython, widgets or pandas.
"""

from __future__ import annotations

import math
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, Literal

from .._errors import ProtocolError
from .items import GROWING_FIELD, ItemState, ToolRun, arguments_problem, chunk_problem

#: a token count at or above this is no count (a float64 holds every integer below it, and a sum of
#: a turn's steps stays within int64, which the frames hold)
MAX_COUNT = 2**53


def usage_counts(usage: dict[str, Any]) -> dict[str, int | None]:
    """A server's usage as token counts: each bucket an ``int``, ``None`` where the server sent no
    count (a string, a list, ``true``, NaN, a negative number such as a producer's -1 for unknown, as
    the trace loaders read it, or one of :data:`MAX_COUNT` or more): nothing a sum, a price, a frame
    or a view could not take. The stop event itself, and so the message and the trace, keep what was sent."""
    out: dict[str, int | None] = {}
    for key, value in usage.items():
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        out[key] = value if type(value) is int and 0 <= value < MAX_COUNT else None
    return out


__all__ = ["TurnState", "ItemState", "ToolRun", "Status", "classify_exception", "GROWING_FIELD", "usage_counts",
           "MAX_COUNT"]

Status = Literal["streaming", "complete", "incomplete", "error", "cancelled"]

FINISH_REASONS = ("stop", "length", "tool_call", "unknown")
_MISSING = object()
_NO_STAMP = -(2**63)  # no created_at, in the int64 array of stamps
_USAGE_KEYS = ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")


def classify_exception(exc: BaseException, events_seen: int) -> Status:
    """The status a stream that raised ``exc`` ends in.

    A stream that ended without its stop event is ``incomplete``: mmsp's ``IncompleteStreamError``
    (also as an MMSP server reports it), or a connection lost once events had begun to arrive (also
    when mmsp then finds the last tool call's arguments cut off, see :mod:`.endings`). A
    stream cut inside a frame (its JSON stops mid-way) once events had arrived is ``incomplete`` too. A
    cancellation (an abort, an interrupt) is ``cancelled``. Anything else is ``error``.
    """
    import asyncio

    from .endings import error_type, frame_cut_off, tool_arguments_ending

    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
        return "cancelled"
    names = {cls.__name__ for cls in type(exc).__mro__} | {error_type(exc)}
    if "IncompleteStreamError" in names or (events_seen and tool_arguments_ending(exc) == "lost"):
        return "incomplete"
    if events_seen and frame_cut_off(exc):  # the stream was cut inside its last frame
        return "incomplete"
    transport = {"TransportError", "APIConnectionError", "RemoteProtocolError", "ReadError", "ConnectionError"}
    if events_seen and names & transport:
        return "incomplete"
    return "error"


class TurnState:
    """The state of one streamed response, built one UniEvent at a time.

    Args:
        clock: A monotonic clock in seconds (``time.monotonic`` by default); injectable for tests.
        wall: A wall clock in seconds since the epoch, used for ``started_at`` only.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._wall = wall
        self.items: list[ItemState] = []
        # events are rebuilt when read (see ``events``): a plain fragment (a standard delta event whose
        # item has only its type and its chunk) is kept as its chunk, which its item holds anyway, in a
        # run of consecutive fragments of one item; any other event as its content item. A turn of
        # 20,000 fragments then holds no container per event for the garbage collector to scan while
        # it streams, and feeding one costs a few appends.
        self._n = 0  # events accepted
        self._runs: list[list[int]] = []  # [first event, item index, first chunk, count] per run of plain fragments
        self._ev_items: dict[int, Any] = {}  # every other event: its content item (None for the stop event)
        self._ev_created = array("q")  # created_at of each event, or _NO_STAMP
        self._ev_raw: dict[int, dict[str, Any]] = {}  # events with other fields, kept as they came
        self._events: list[dict[str, Any]] = []
        self.event_times = array("d")  # monotonic arrival time of each event
        self.status: Status = "streaming"
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.created_at: int | None = None
        self.stop_event: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.request_sent: float | None = None
        self.started_at: float | None = None  # wall clock, seconds
        self.first_event: float | None = None
        self.first_delta: float | None = None
        self.stopped: float | None = None
        self.ended: float | None = None
        self.version = 0  # bumped on every change, for views that poll
        self._open: ItemState | None = None  # the open group, for feed's fast path (None once the step ended)
        self._late: ProtocolError | None = None  # the refusal of an event after the step ended

    # ------------------------------------------------------------------ feeding
    def mark_request_sent(self) -> None:
        """Record the moment the request goes out (time to first token counts from here)."""
        self.request_sent = self._clock()
        self.started_at = self._wall()

    @property
    def open_item(self) -> ItemState | None:
        """The item whose group is open (its ``.done`` not yet arrived)."""
        if self.items and self.items[-1].status == "streaming":
            return self.items[-1]
        return None

    def _violation(self, index: int, reason: str, event: Any) -> ProtocolError:
        self._open = None
        error = ProtocolError(index, reason, event)
        self.status = "error"
        self.error = error
        self.ended = self._clock()
        self.version += 1
        return error

    def feed(self, event: dict[str, Any], at: float | None = None) -> ItemState | None:
        """Consume one UniEvent; returns the item it touched (``None`` for the stop event).

        ``at`` is when the event arrived (the monotonic clock), for a caller that feeds events in
        batches; by default, now.

        Raises:
            ProtocolError: The event breaks the grammar; the state is then ``"error"``.
        """
        return self.feed_many([event], [self._clock() if at is None else at])

    def feed_many(self, events: list[dict[str, Any]], stamps: list[float]) -> ItemState | None:
        """Consume events that arrived at ``stamps`` (monotonic); returns the item the last one touched.

        A run of plain fragments of the open group (a standard delta event whose item has only its
        type and its chunk), which is most of any stream, is taken in one tight loop; any other
        event gets every check of the grammar one by one.

        Raises:
            ProtocolError: An event breaks the grammar; those before it were consumed (``n_events``).
        """
        touched = None
        n, total = 0, len(events)
        while n < total:
            current = self._open
            if current is not None:
                start = n
                delta_type, field, chunk_type = current.delta_type, current.field, current.chunk_type
                add_chunk, add_created = current.chunks.append, self._ev_created.append
                size = current.size
                try:
                    for event in events[start:] if start else events:
                        if type(event) is not dict or len(event) != 6:
                            break
                        items = event["content_items"]  # six keys, so a missing standard one is a KeyError
                        if type(items) is not list or len(items) != 1:
                            break
                        item = items[0]
                        if type(item) is not dict or len(item) != 2 or item["type"] != delta_type:
                            break
                        chunk = item[field]
                        created = event["created_at"]
                        if (
                            type(chunk) is not chunk_type
                            or type(created) is not int
                            or created == _NO_STAMP
                            or event["event_type"] != "delta"
                            or event["role"] != "assistant"
                            or event["usage_metadata"] is not None
                            or event["finish_reason"] is not None
                        ):
                            break
                        add_chunk(chunk)
                        size += len(chunk)  # type: ignore[arg-type]  # a str or bytes: the type was checked above
                        add_created(created)
                        n += 1
                except KeyError:  # not a standard event: feed takes it below
                    pass
                if n > start:
                    current.size = size
                    self._add_run(current, n - start)
                    self.event_times.extend(stamps[start:n])
                    self.created_at = events[n - 1]["created_at"]
                    self.version += n - start
                    touched = current
                    continue
            touched = self._feed(events[n], stamps[n])
            n += 1
        return touched

    def _add_run(self, item: ItemState, count: int) -> None:
        """Record that the last ``count`` chunks of ``item`` came as the next ``count`` plain fragments."""
        n, chunk = self._n, len(item.chunks) - count
        self._n = n + count
        runs = self._runs
        if runs:
            last = runs[-1]
            if last[1] == item.index and last[0] + last[3] == n and last[2] + last[3] == chunk:
                last[3] += count
                return
        runs.append([n, item.index, chunk, count])

    @property
    def n_events(self) -> int:
        """How many events were accepted."""
        return self._n

    def _feed(self, event: dict[str, Any], at: float | None) -> ItemState | None:
        index = self._n
        now = self._clock() if at is None else at
        if self.request_sent is None:
            self.request_sent = now
            self.started_at = self._wall()
        if self.status != "streaming":
            if self.stop_event is not None:
                what = "a second stop event" if _is(event, "event_type", "stop") else "an event after the stop event"
                raise self._violation(index, f"{what}: the stop event is always the last", event)
            self._late = ProtocolError(index, f"an event after the stream ended ({self.status})", event)
            raise self._late  # (refused, the state unchanged: see the module's docstring)
        if not isinstance(event, dict):
            raise self._violation(index, f"an event must be a dict, not {type(event).__name__}", event)
        event_type = event.get("event_type")
        items = event.get("content_items")
        if not isinstance(items, list):
            raise self._violation(index, "content_items must be a list", event)
        if self.first_event is None:
            self.first_event = now

        if event_type == "stop":
            self._stop(index, event, items, now)
            return None
        if event_type != "delta":
            raise self._violation(index, f"unknown event_type {event_type!r} (expected 'delta' or 'stop')", event)
        if event.get("usage_metadata") is not None:
            raise self._violation(index, "a delta event carries usage_metadata (usage comes on the stop event only)", event)
        if event.get("finish_reason") is not None:
            raise self._violation(index, "a delta event carries a finish_reason (it comes on the stop event only)", event)
        if len(items) != 1:
            raise self._violation(index, f"a delta event carries exactly one content item, not {len(items)}", event)
        item = items[0]
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise self._violation(index, "a content item must be a dict with a 'type'", event)
        kind, dot, phase = item["type"].rpartition(".")
        if not dot or phase not in ("delta", "done") or not kind:
            raise self._violation(index, f"item type {item['type']!r} is neither K.delta nor K.done", event)

        current = self.open_item
        if phase == "delta":
            touched = self._delta(index, event, item, kind, current, now)
        else:
            touched = self._done(index, event, item, kind, current, now)
        self._record(event, item)
        self.event_times.append(now)
        if event.get("created_at") is not None:
            self.created_at = event["created_at"]
        self.version += 1
        return touched

    def _delta(self, index: int, event: dict, item: dict, kind: str, current: ItemState | None, now: float) -> ItemState:
        fidelity = item.get("fidelity")
        if current is not None and current.kind != kind:
            what = "interleaved groups" if kind in GROWING_FIELD else f"an item of unknown kind {kind!r}"
            raise self._violation(
                index,
                f"{what}: {item['type']} arrived while the {current.kind} item {current.index} is open "
                f"(a group ends with its {current.kind}.done before the next begins)",
                event,
            )
        if kind == "tool_call":
            name = item.get("name") or ""
            call_id = item.get("tool_call_id") or ""
            if current is None and not (name and call_id):
                raise self._violation(
                    index, "the first tool_call.delta of a call must carry its name and tool_call_id", event
                )
            if current is not None and (name or call_id):
                raise self._violation(
                    index,
                    f"tool_call.delta with a name or id inside the open call {current.index}: "
                    "the previous call was not closed by its tool_call.done",
                    event,
                )
        growing = GROWING_FIELD.get(kind)
        chunk = item.get(growing) if growing else {k: v for k, v in item.items() if k not in ("type", "fidelity")}
        if growing and chunk is None:
            chunk = b"" if kind in ("inline_data", "inline_thinking") else ([] if kind == "embedding" else "")
        elif growing and (problem := chunk_problem(growing, chunk)):
            raise self._violation(index, f"{item['type']} {problem}", event)
        if current is None:
            if self.first_delta is None:
                self.first_delta = now
            current = ItemState(index=len(self.items), kind=kind, started=now)
            current.name = item.get("name") or ""
            current.tool_call_id = item.get("tool_call_id") or ""
            current.mime_type = item.get("mime_type") or ""
            self.items.append(current)
            if growing in ("text", "thinking", "arguments"):
                current.delta_type, current.field, current.chunk_type = item["type"], growing, str
            elif growing == "data":
                current.delta_type, current.field, current.chunk_type = item["type"], growing, bytes
            self._open = current
        elif fidelity and current.fidelity is not None and fidelity != current.fidelity:
            raise self._violation(index, f"item {current.index} carried two different fidelity payloads", event)
        if fidelity:
            current.fidelity = dict(fidelity)
        if not current.mime_type and item.get("mime_type"):
            current.mime_type = item["mime_type"]
        current.chunks.append(chunk)
        current.size += _size(chunk)
        return current

    def _done(self, index: int, event: dict, item: dict, kind: str, current: ItemState | None, now: float) -> ItemState:
        if current is None:
            raise self._violation(index, f"{item['type']} without any {kind}.delta before it", event)
        if current.kind != kind:
            raise self._violation(
                index, f"{item['type']} closes the open {current.kind} item {current.index} (a .done of another kind)", event
            )
        growing = GROWING_FIELD.get(kind)
        if growing in ("text", "thinking", "data", "embedding") and item.get(growing) is None:
            # (mmsp's done always has it: the message recorded without it breaks the next request)
            raise self._violation(index, f"{item['type']} without its {growing} (a .done carries it whole)", event)
        if growing in ("text", "thinking", "data"):
            joined = current.content()
            if item[growing] != joined and not _same_text(item[growing], joined):
                raise self._violation(
                    index, f"{item['type']} does not equal the concatenation of its {kind}.delta fragments", event
                )
        elif kind == "embedding" and list(item["embedding"]) != current.content():
            raise self._violation(index, "embedding.done does not equal its embedding.delta", event)
        if kind == "tool_call":
            if not isinstance(item.get("arguments"), dict):
                raise self._violation(index, "tool_call.done must carry its arguments parsed into an object", event)
            if item.get("name") and item["name"] != current.name:
                raise self._violation(index, "tool_call.done names another tool than its first delta", event)
            if item.get("tool_call_id") and item["tool_call_id"] != current.tool_call_id:
                raise self._violation(index, "tool_call.done carries another tool_call_id than its first delta", event)
            problem = arguments_problem(current.content(), item["arguments"])
            if problem:
                raise self._violation(index, f"tool_call.done: {problem}", event)
        if current.fidelity is not None and item.get("fidelity") not in (None, current.fidelity):
            raise self._violation(index, f"{item['type']} carries another fidelity than its deltas", event)
        self._open = None
        current.done = item
        current.status = "done"
        current.ended = now
        if item.get("fidelity"):
            current.fidelity = dict(item["fidelity"])
        if item.get("mime_type"):
            current.mime_type = item["mime_type"]
        return current

    def _stop(self, index: int, event: dict, items: list, now: float) -> None:
        if items:
            raise self._violation(index, "the stop event carries no content items", event)
        current = self.open_item
        if current is not None:
            raise self._violation(
                index, f"the stop event arrived while the {current.kind} item {current.index} is open (no .done)", event
            )
        usage = event.get("usage_metadata")
        if not isinstance(usage, dict):
            raise self._violation(index, "the stop event must carry usage_metadata", event)
        reason = event.get("finish_reason")
        if not isinstance(reason, str) or not reason:
            raise self._violation(index, "the stop event must carry a finish_reason", event)
        self.usage = usage_counts(usage)
        self.finish_reason = reason
        self.stop_event = event
        self.created_at = event.get("created_at")
        self.stopped = self.ended = now
        self.status = "complete"
        self._record(event, None)
        self.event_times.append(now)
        self.version += 1
        return None

    _STANDARD_KEYS = frozenset(("role", "event_type", "content_items", "usage_metadata", "finish_reason", "created_at"))

    def _record(self, event: dict[str, Any], item: dict[str, Any] | None) -> None:
        """Keep an accepted event that is not a plain fragment (see ``events``)."""
        n = self._n
        self._n = n + 1
        self._ev_items[n] = item
        created = event.get("created_at", _MISSING)
        self._ev_created.append(created if type(created) is int and created != _NO_STAMP else _NO_STAMP)
        standard = (
            item is not None
            and len(event) >= 5
            and self._STANDARD_KEYS.issuperset(event)
            and event.get("role") == "assistant"
            and (created is _MISSING or (type(created) is int and created != _NO_STAMP))
        )
        if not standard:
            self._ev_raw[n] = event

    def _sources(self, start: int):
        """``(n, run, item)`` for each event from ``start``: a plain fragment's run, or the kept item."""
        runs, kept = self._runs, self._ev_items
        r = bisect_right(runs, start, key=_run_start) - 1
        n = start
        while n < self._n:
            if r >= 0 and n < runs[r][0] + runs[r][3]:
                run = runs[r]
                end = run[0] + run[3]
                while n < end:
                    yield n, run, None
                    n += 1
            elif n in kept:
                yield n, None, kept[n]
                n += 1
            else:
                r += 1
        return

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every accepted UniEvent, in order (equal to the events as they arrived).

        A turn of 20,000 fragments would otherwise hold 60,000 containers for the garbage collector
        to scan while it streams; each event is kept as its item (a plain fragment as its chunk,
        which its item holds anyway) and rebuilt, once, when read.
        """
        cache = self._events
        created_at = self._ev_created
        for n, run, item in self._sources(len(cache)):
            raw = self._ev_raw.get(n)
            if raw is None:
                if run is not None:
                    source = self.items[run[1]]
                    item = {"type": source.delta_type, source.field: source.chunks[run[2] + n - run[0]]}
                raw = {"role": "assistant", "event_type": "delta", "content_items": [item],
                       "usage_metadata": None, "finish_reason": None}
                if created_at[n] != _NO_STAMP:
                    raw["created_at"] = created_at[n]
            cache.append(raw)
        return cache

    # ------------------------------------------------------------------ ending
    def finish(self) -> Status:
        """The stream iterator ended: ``complete`` after a stop event, ``incomplete`` otherwise."""
        self._open = None
        if self.status == "streaming":
            self.status = "incomplete"
            self.ended = self._clock()
            self.version += 1
        return self.status

    def fail(self, exc: BaseException) -> Status:
        """The stream raised ``exc``: record it and end in ``incomplete``, ``cancelled`` or ``error``."""
        self._open = None
        if self.status != "streaming" and (exc is self.error or exc is self._late):
            return self.status
        status = classify_exception(exc, self._n)
        if self.status == "complete" and status == "incomplete":
            # the connection was lost, or its last frame cut, after the stop event (before an MMSP
            # server's closing ``[DONE]``): the answer is whole, its stop event arrived
            return self.status
        self.error = exc
        self.status = status
        usage = getattr(exc, "usage_metadata", None)
        if self.usage is None and isinstance(usage, dict):
            self.usage = usage_counts(usage)
        reason = getattr(exc, "finish_reason", None)
        if self.finish_reason is None and isinstance(reason, str):
            self.finish_reason = reason
        self.ended = self._clock()
        self.version += 1
        return self.status

    def cancel(self, reason: str = "cancelled") -> Status:
        """The user stopped the turn."""
        if self.status == "streaming":
            import asyncio

            return self.fail(asyncio.CancelledError(reason))
        return self.status

    # ------------------------------------------------------------------ reading
    @property
    def done(self) -> bool:
        return self.status != "streaming"

    def message(self) -> dict[str, Any]:
        """The assistant message: every ``.done`` item in order with the stop event's usage.

        Equal to what ``mmsp``'s ``concat_uni_events_to_uni_message`` builds from the same events.
        """
        stop = self.stop_event
        return {
            "role": "assistant",
            "content_items": [item.done for item in self.items if item.done is not None],
            "usage_metadata": stop["usage_metadata"] if stop else None,
            "finish_reason": stop["finish_reason"] if stop else None,
            "created_at": stop.get("created_at") if stop else None,
        }

    def items_of(self, *kinds: str) -> list[ItemState]:
        return [item for item in self.items if item.kind in kinds]

    @property
    def text(self) -> str:
        return "".join(item.content() for item in self.items_of("text"))

    @property
    def thinking(self) -> str:
        return "".join(item.content() for item in self.items_of("thinking"))

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else type(self.error).__name__

    @property
    def error_message(self) -> str | None:
        return None if self.error is None else (str(self.error) or type(self.error).__name__)

    @property
    def ttft(self) -> float | None:
        """Seconds from the request to the first content delta."""
        if self.first_delta is None or self.request_sent is None:
            return None
        return self.first_delta - self.request_sent

    @property
    def total(self) -> float | None:
        """Seconds from the request to the stop event (or to the end, for a stream that failed)."""
        if self.request_sent is None:
            return None
        end = self.ended if self.ended is not None else self._clock()
        return end - self.request_sent

    @property
    def output_tokens(self) -> int | None:
        if not self.usage:
            return None
        values = [self.usage.get(k) for k in ("thoughts_tokens", "response_tokens")]
        if all(v is None for v in values):
            return None
        return sum(v or 0 for v in values)

    @property
    def tokens_per_second(self) -> float | None:
        """Output tokens over the decode window (first delta to stop)."""
        tokens = self.output_tokens
        if tokens is None or self.first_delta is None or self.ended is None:
            return None
        window = self.ended - self.first_delta
        return tokens / window if window > 0 else None

    def timings(self) -> dict[str, Any]:
        """Derived timings in seconds: ttft, total, tokens/s and each item's duration."""
        return {
            "ttft": self.ttft,
            "total": self.total,
            "tokens_per_second": self.tokens_per_second,
            "items": [
                {
                    "index": item.index,
                    "kind": item.kind,
                    "start": None if self.request_sent is None else item.started - self.request_sent,
                    "duration": item.duration,
                }
                for item in self.items
            ],
        }

    def sidecar_events(self) -> list[list[Any]]:
        """``[ms since request, item type or "stop", size]`` per event, for the timing sidecar."""
        times = self.event_times
        base = self.request_sent if self.request_sent is not None else (times[0] if times else 0.0)
        out: list[list[Any]] = []
        add = out.append
        for n, run, item in self._sources(0):
            ms = round((times[n] - base) * 1000.0, 3)
            if run is not None:
                source = self.items[run[1]]
                add([ms, source.delta_type, len(source.chunks[run[2] + n - run[0]])])
            elif item is None:
                add([ms, "stop", 0])
            else:
                kind = item["type"].rpartition(".")[0]
                add([ms, item["type"], _size(item.get(GROWING_FIELD.get(kind, ""), ""))])
        return out


def _run_start(run: list[int]) -> int:
    return run[0]


def _is(event: Any, key: str, value: Any) -> bool:
    return isinstance(event, dict) and event.get(key) == value


def _size(chunk: Any) -> int:
    if isinstance(chunk, (str, bytes, bytearray, list)):
        return len(chunk)
    if isinstance(chunk, dict):
        return len(chunk)
    return 0


def _same_text(done: Any, joined: Any) -> bool:
    """Whether a ``.done`` text is its deltas' text as UTF-16 code units: a server slicing UTF-16
    text may send the halves of a surrogate pair in two deltas (two characters here, each a JSON
    ``"\\ud83d"`` escape), which its ``.done`` holds as one (the escapes of a pair decode to one
    character). A lone half stays what it is: unequal to another, or to U+FFFD."""
    if not (isinstance(done, str) and isinstance(joined, str)):
        return False
    return done.encode("utf-16-le", "surrogatepass") == joined.encode("utf-16-le", "surrogatepass")

