"""The wire of a turn: the raw server-sent events of each request, each frame next to the UniEvents it became.

``%%mmsp --wire`` (``ask(..., wire=True)``, ``Chat(wire=True)``) sends the turn through a recording
loopback proxy (:class:`~mmsp_notebook.wire.proxy.WireProxy`) in front of the real endpoint — for
the demo models, in front of the kernel's demo server — so the same code path serves every
endpoint. The proxy keeps the response bytes with the monotonic time each chunk arrived; the engine
records when each UniEvent was fed (``TurnState.event_times``, the same clock). After the turn,
:func:`build_wire` cuts the bytes into SSE frames (:mod:`~mmsp_notebook.wire.sse`) and pairs every
UniEvent with the frame that produced it (:mod:`~mmsp_notebook.wire.pairing`). The result is
``turn.wire``, a :class:`Wire`; ``turn.save_wire(path)`` writes the raw bytes of a step's response,
which ``DemoServer(replay=path)`` plays back.

This module holds the data only: :mod:`mmsp_notebook.views.wire` renders a wire (an HTML table
``ms | raw SSE frame | → UniEvent(s)``, or text) and has Jupyter show it that way. Keys never
reach a record (see :mod:`mmsp_notebook.wire.proxy`), and a key an upstream quotes back is
redacted from the frames kept and the bytes saved.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import OptionError, OptionTypeError
from ..core.redact import cut_from_frame, held_secrets, redact_bytes, redact_parts, redact_streamed, secret_values
from .pairing import pair_events
from .sse import Frame, parse_frame, split_timed_frames

if TYPE_CHECKING:
    from ..core.turn import Turn
    from .proxy import WireTranscript

__all__ = ["Exchange", "Frame", "Wire", "build_wire", "redact_bytes"]


def _redacted_frame(frame: Frame) -> Frame:
    """A frame as shown and saved: an upstream that quotes a key back (a 401 body) shows ``[redacted]``."""
    raw = redact_bytes(frame.raw)
    return frame if raw is frame.raw else parse_frame(frame.index, frame.t, raw)


def _redacted_frames(frames: list[Frame]) -> list[Frame]:
    """Every frame of a response as :func:`_redacted_frame` gives it, the response searched once
    (:func:`~mmsp_notebook.core.redact.redact_parts`): a long answer's frames are not redacted one by one."""
    raws = redact_parts([frame.raw for frame in frames])
    return [frame if raw is frame.raw else parse_frame(frame.index, frame.t, raw) for frame, raw in zip(frames, raws)]


#: what a saved or listed frame becomes when it carries a piece of a configured key that could not
#: be cut out of it as its JSON writes it (an SSE comment: a replay skips it)
LEFT_OUT_FRAME = b": [this frame carried part of a configured key: left out]\n\n"


def _split_keys(frames: list[Frame], events: list[dict[str, Any]], pairs: list[int | None]) -> list[Frame]:
    """``frames`` (as received) with each piece of a configured key that a stream split across
    deltas (no frame holds it whole, so :func:`redact_bytes` cannot see it) cut out of the frame
    that carried it, as the events table redacts it
    (:func:`~mmsp_notebook.core.redact.redact_fragment`), and the group's ``.done`` string written
    as its deltas now join (so the stream saved still replays: a done equals its deltas)."""
    secrets = secret_values()
    if not secrets:
        return frames
    streamed: dict[str, str] = {}
    shown_so_far: dict[str, list[str]] = {}
    touched: set[str] = set()
    changed: dict[int, list[tuple[str, str]]] = {}
    for event, index in zip(events, pairs):
        items = event.get("content_items") or []
        item = items[0] if items and isinstance(items[0], dict) else None
        kind = item.get("type") if item is not None else None
        if item is None or not isinstance(kind, str):
            continue
        if not kind.endswith(".delta"):
            for key in touched:  # the group's done: its string as the deltas shown join
                if isinstance(item.get(key), str) and index is not None:
                    changed.setdefault(index, []).append((item[key], "".join(shown_so_far[key])))
            streamed.clear()
            shown_so_far.clear()
            touched.clear()
            continue
        for key, value in item.items():
            if key == "type" or not isinstance(value, str):
                continue
            shown = redact_streamed(streamed, key, value, secrets)
            shown_so_far.setdefault(key, []).append(shown)
            if shown != value:
                touched.add(key)
                if index is not None:
                    changed.setdefault(index, []).append((value, shown))
    if not changed:
        return frames
    out = list(frames)
    for index, pieces in changed.items():
        if 0 <= index < len(out):
            frame = out[index]
            cut = cut_from_frame(frame.raw.decode("utf-8", errors="surrogateescape"), pieces)
            raw = LEFT_OUT_FRAME if cut is None else cut.encode("utf-8", errors="surrogateescape")
            out[index] = parse_frame(frame.index, frame.t, raw)
    return out


@dataclass
class Exchange:
    """One request of a turn through the proxy and what came back.

    Attributes:
        step: The step of the turn (0-based) the request belongs to.
        record: The proxy's :class:`~mmsp_notebook.wire.proxy.WireTranscript` of the request.
        frames: The response cut into SSE frames (keys redacted).
        events: The UniEvents of the step (only on the step's last request, the one that streamed).
        event_times: When each event was fed.
        pairs: The frame index of each event.
        rule: The pairing rule applied.
        t0: The step's request time (``time.monotonic()``), the origin of every ``ms``.
    """

    step: int
    record: WireTranscript
    frames: list[Frame]
    events: list[dict[str, Any]] = field(default_factory=list)
    event_times: list[float] = field(default_factory=list)
    pairs: list[int | None] = field(default_factory=list)
    rule: str = ""
    t0: float = 0.0

    def ms(self, t: float) -> float:
        """Milliseconds from the step's request to ``t``."""
        return round((t - self.t0) * 1000.0, 1)


class Wire(list[dict[str, Any]]):
    """The wire of a turn: a list of rows, one per SSE frame, in order.

    Each row is a dict: ``step``, ``request`` (the proxy's request id), ``frame`` (index in the
    response), ``ms`` (arrival at the proxy, ms since the step's request was sent), ``kind``
    (``data``, ``comment``, ``done``, ``other``), ``raw`` (the frame's text, untruncated) and
    ``events``: the UniEvents it produced, each as ``{"n": its index in the turn, "ms": when it was
    fed, "event": the UniEvent}``. A last row of kind ``none`` holds the events no frame produced.
    :attr:`exchanges` keeps the requests themselves. Jupyter shows a wire as an HTML table
    (:mod:`mmsp_notebook.views.wire`).
    """

    def __init__(self, exchanges: list[Exchange]) -> None:
        super().__init__()
        self.exchanges = exchanges
        n = 0
        for exchange in exchanges:
            by_frame: dict[int | None, list[dict[str, Any]]] = {}
            for k, (event, index) in enumerate(zip(exchange.events, exchange.pairs)):
                t = exchange.event_times[k] if k < len(exchange.event_times) else None
                ms = None if t is None else exchange.ms(t)
                by_frame.setdefault(index, []).append({"n": n + k, "ms": ms, "event": event})
            n += len(exchange.events)
            for frame in exchange.frames:
                self.append({"step": exchange.step, "request": exchange.record.id, "frame": frame.index,
                             "ms": exchange.ms(frame.t), "kind": frame.kind, "raw": frame.text,
                             "events": by_frame.get(frame.index, [])})
            if None in by_frame:
                self.append({"step": exchange.step, "request": exchange.record.id, "frame": None, "ms": None,
                             "kind": "none", "raw": "", "events": by_frame[None]})

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every paired event (``n``, ``ms``, ``event``), in order."""
        return [event for row in self for event in row["events"]]

    def save(self, path: str | Path, step: int = -1) -> Path:
        """Write the raw response bytes of a step's request to ``path`` (``DemoServer(replay=path)`` serves it).

        Args:
            path: The file to write.
            step: Which step of the turn (0-based; negative counts from the last, ``-1``).

        Raises:
            ValueError: No request was captured for that step, or it was refused (not HTTP 200).
            OptionError: No such step (a ``ValueError`` too). OptionTypeError: ``step`` is not an integer.
        """
        try:
            if isinstance(step, bool):
                raise TypeError
            step = operator.index(step)
        except TypeError:
            raise OptionTypeError(f"step must be an integer (0-based; -1 the last), not {type(step).__name__}") from None
        streamed = [e for e in self.exchanges if e.events] or list(self.exchanges)
        if not streamed:
            raise ValueError("no request was captured for this turn")
        steps = sorted({e.step for e in streamed})
        if not -len(steps) <= step < len(steps):
            n = len(steps)
            which = "step=0" if n == 1 else f"step=0 to {n - 1}"
            raise OptionError(f"no step {step}: this turn's wire holds {n} step{'s' if n != 1 else ''} "
                              f"({which}, or -1 for the last)")
        wanted = steps[step]
        exchange = [e for e in streamed if e.step == wanted][-1]
        status = exchange.record.status
        if status != 200:
            raise ValueError(f"the request was answered HTTP {status}, not with a stream: there is nothing to replay "
                             "(the wire view shows the response)")
        target = Path(path)
        # the frames as kept (keys redacted, a key split across frames too): together they are the response
        target.write_bytes(redact_bytes(b"".join(frame.raw for frame in exchange.frames)))
        return target

    def __repr__(self) -> str:
        if not self.exchanges:
            return "<Wire: no request captured>"
        requests = len(self.exchanges)
        rules = sorted({e.rule for e in self.exchanges if e.rule and e.events})  # (a refused request pairs nothing)
        return (f"<Wire: {requests} request{'s' if requests != 1 else ''}, {len(self)} frames, "
                f"{len(self.events)} UniEvents" + (f", paired by {', '.join(rules)}" if rules else "") + ">")


def build_wire(turn: Turn, records: list[WireTranscript]) -> Wire:
    """The :class:`Wire` of a turn from the proxy's records of its requests (oldest first).

    A record belongs to the step whose request was sent last before it began; the last record of a
    step is the one that streamed, and its frames are paired with the step's events.
    """
    steps: list[tuple[float, list[dict[str, Any]], list[float]]] = []
    with turn.lock:
        for state in turn.steps:
            if state.request_sent is not None:
                steps.append((state.request_sent, list(state.events), list(state.event_times)))
    with held_secrets():  # (the environment read once for the whole wire, not twice per frame)
        return Wire(_exchanges(steps, records))


def _exchanges(steps: list[tuple[float, list[dict[str, Any]], list[float]]],
               records: list[WireTranscript]) -> list[Exchange]:
    exchanges: list[Exchange] = []
    for i, (start, events, times) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else float("inf")
        mine = [r for r in records if start <= r.started < end]
        for j, record in enumerate(mine):
            received = split_timed_frames(record.response, list(record.chunks), list(record.times))
            frames = _redacted_frames(received)
            exchange = Exchange(i, record, frames, t0=start)
            if j == len(mine) - 1:
                exchange.events, exchange.event_times = events, times
                exchange.pairs, exchange.rule = pair_events(frames, events, times, record.protocol)
                cut = _split_keys(received, events, exchange.pairs)  # (the frames it left are the same objects)
                exchange.frames = [kept if new is old else _redacted_frame(new)
                                   for new, old, kept in zip(cut, received, frames)]
            exchanges.append(exchange)
    return exchanges
