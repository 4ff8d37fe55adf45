"""The wire inspector: the raw server-sent events of a turn, each next to the UniEvents it became.

``%%mmsp --wire`` (``ask(..., wire=True)``, ``Chat(wire=True)``) sends the turn through a
recording loopback proxy (:class:`~mmsp_notebook.demo.WireProxy`, one per kernel and upstream) in
front of the real endpoint — for the demo models, in front of the kernel's demo server — so the
same code path serves every endpoint. The proxy keeps the response bytes with the monotonic time
each chunk arrived; the engine records when each UniEvent was fed (``TurnState.event_times``, the
same clock). After the turn, :func:`capture_wire` cuts the bytes into SSE frames (an event block
and its blank line, comments and heartbeats included) and pairs every UniEvent with the frame that
produced it. The result is ``turn.wire``, a :class:`Wire` (a list of rows, one per frame) that
renders as an HTML table (``ms | raw SSE frame | → UniEvent(s)``); ``turn.save_wire(path)`` writes
the raw bytes of a step's response, which ``DemoServer(replay=path)`` plays back.

Pairing rule
    * MMSP wire (``/v1/stream``): the n-th ``data:`` frame holding a JSON event is the n-th
      UniEvent — exact, one to one (an MMSP server sends the public stream itself). It is checked:
      each pair must agree on ``event_type`` and item type, else the general rule applies.
    * The vendor protocols (Chat Completions, Responses, Messages, anything else): an event that
      carries a fragment (a ``text.delta``, ``thinking.delta``, the arguments or the name of a
      ``tool_call.delta``) is paired with the first frame, not before the previous event's frame,
      whose JSON holds that fragment as a string value. Any other event (``.done`` items, the stop
      event, media, a fragment the client rewrote) is paired with the latest frame that had arrived
      at the proxy before the client yielded the event, but never after the next fragment-anchored
      event's frame and never before the previous event's frame. A ``.done`` is emitted when the
      next item begins or the stream ends, so this names the frame that closed the item.
    * Limits: arrival times are taken at the proxy, just before the bytes go on to the client. When
      frames arrive faster than the client parses them (an instant demo server, a proxy or network
      that coalesces frames), "arrived before" cannot tell frames of one burst apart: an
      unanchored event is then pinned to its neighbours' frames, which is right for ``.done``
      items and the stop event in practice, but a client that merges or splits fragments can be
      paired with a neighbouring frame. Frames that produced no event (heartbeats, ``event:
      ping``, ``[DONE]``, bookkeeping events of the vendor protocols) show with no UniEvent.

Keys never reach a record: see :mod:`mmsp_notebook.wire.proxy`.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.redact import redact
from ..views.model import event_row

__all__ = ["Wire", "Exchange", "Frame", "split_timed_frames", "pair_events", "render_wire_html",
           "render_wire_text", "wire_client", "capture_wire", "session_proxy", "stop_proxies"]

LINE_LIMIT = 400  # characters of one raw line shown before it is cut with a note


@dataclass
class Frame:
    """One SSE frame as it arrived: its bytes (blank line included) and when its end arrived."""

    index: int
    t: float  # time.monotonic() when the chunk that completed it arrived at the proxy
    raw: bytes
    kind: str  # "data" (a data payload), "done" ([DONE]), "comment" (only ':' lines), "other"
    event: str | None = None  # the "event:" field
    data: str | None = None  # the joined "data:" lines

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    def json(self) -> Any:
        if self.data is None:
            return None
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def _parse_frame(index: int, t: float, raw: bytes) -> Frame:
    text = raw.decode("utf-8", errors="replace")
    lines = [line.rstrip("\r") for line in re.split(r"\r\n|\n|\r", text) if line.rstrip("\r") != ""]
    data = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
    event = next((line[6:].strip() for line in lines if line.startswith("event:")), None)
    if data:
        joined = "\n".join(data)
        return Frame(index, t, raw, "done" if joined.strip() == "[DONE]" else "data", event, joined)
    if lines and all(line.startswith(":") for line in lines):
        return Frame(index, t, raw, "comment", event)
    return Frame(index, t, raw, "other", event)


def redact_bytes(data: bytes) -> bytes:
    """``data`` with every API key in it replaced by ``[redacted]`` (see :func:`~mmsp_notebook._redact.redact`)."""
    text = data.decode("utf-8", errors="surrogateescape")
    clean = redact(text)
    return data if clean == text else clean.encode("utf-8", errors="surrogateescape")


def _redacted_frame(frame: Frame) -> Frame:
    """A frame as shown and saved: an upstream that quotes a key back (a 401 body) shows ``[redacted]``."""
    raw = redact_bytes(frame.raw)
    return frame if raw is frame.raw else _parse_frame(frame.index, frame.t, raw)


def split_timed_frames(data: bytes, sizes: list[int], times: list[float]) -> list[Frame]:
    """Cut a response into SSE frames, each timed by the chunk that completed it.

    Args:
        data: The response bytes (``b"".join`` of the chunks).
        sizes: The size of each chunk, in order.
        times: When each chunk arrived (``time.monotonic()``).
    """
    from ..demo._replay import split_frames  # the demo's replay serves frames cut the same way

    ends: list[int] = []
    total = 0
    for size in sizes:
        total += size
        ends.append(total)
    frames: list[Frame] = []
    end = 0
    chunk = 0
    for raw in split_frames(data):
        end += len(raw)
        while chunk < len(ends) - 1 and ends[chunk] < end:
            chunk += 1
        frames.append(_parse_frame(len(frames), times[chunk] if times else 0.0, raw))
    return frames


def _strings(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    return out


def _fragment(event: dict[str, Any]) -> str | None:
    """The string a delta event carries, as a vendor frame would hold it."""
    items = event.get("content_items") or []
    if event.get("event_type") != "delta" or not items:
        return None
    item = items[0]
    kind = str(item.get("type", ""))
    if kind == "text.delta":
        value = item.get("text")
    elif kind == "thinking.delta":
        value = item.get("thinking")
    elif kind == "tool_call.delta":
        value = item.get("arguments") or item.get("name")
    else:
        return None
    if isinstance(value, str) and value.strip():
        return value
    fidelity = item.get("fidelity")  # a signature or an encrypted block arrives in a frame of its own
    if isinstance(fidelity, dict):
        return next((v for v in fidelity.values() if isinstance(v, str) and len(v) >= 8), None)
    return None


def _mmsp_pairs(frames: list[Frame], events: list[dict[str, Any]]) -> list[int | None] | None:
    data = []
    for frame in frames:
        payload = frame.json() if frame.kind == "data" else None
        if isinstance(payload, dict) and "event_type" in payload:
            data.append((frame.index, payload))
    if len(data) < len(events):
        return None
    pairs: list[int | None] = []
    for event, (index, payload) in zip(events, data):
        if payload.get("event_type") != event.get("event_type"):
            return None
        wire_items = payload.get("content_items") or []
        items = event.get("content_items") or []
        if [i.get("type") for i in wire_items] != [i.get("type") for i in items]:
            return None
        pairs.append(index)
    return pairs


def pair_events(frames: list[Frame], events: list[dict[str, Any]], times: list[float],
                protocol: str) -> tuple[list[int | None], str]:
    """The frame index of each event, and the rule that paired them (see the module docstring).

    Args:
        frames: The response's frames, in order.
        events: The UniEvents the client yielded, in order.
        times: When each event was fed (``time.monotonic()``).
        protocol: ``mmsp``, ``chat``, ``responses``, ``messages`` or anything else.

    Returns:
        ``(pairs, rule)``: ``pairs[k]`` is the frame index of event ``k`` (``None`` when there is no
        frame at all); ``rule`` is ``"mmsp 1:1"`` or ``"fragment + arrival time"``.
    """
    if not frames:
        return [None] * len(events), "no frames"
    if protocol == "mmsp":
        exact = _mmsp_pairs(frames, events)
        if exact is not None:
            return exact, "mmsp 1:1"
    strings = [_strings(frame.json(), set()) if frame.kind == "data" else set() for frame in frames]
    # fragment anchors, in order
    anchors: list[int | None] = []
    cursor = 0
    for event in events:
        fragment = _fragment(event)
        found = None
        if fragment is not None:
            for i in range(cursor, len(frames)):
                if fragment in strings[i]:
                    found = i
                    break
            if found is None:  # a fragment inside a longer string (a client that split one)
                for i in range(cursor, len(frames)):
                    if any(fragment in s for s in strings[i]):
                        found = i
                        break
        anchors.append(found)
        if found is not None:
            cursor = found
    # arrival time: the latest frame that had arrived when the event was fed
    arrived: list[int] = []
    j = -1
    for t in times:
        while j + 1 < len(frames) and frames[j + 1].t <= t:
            j += 1
        arrived.append(max(j, 0))
    pairs: list[int | None] = []
    previous = 0
    for k, event in enumerate(events):
        if anchors[k] is not None:
            index = max(anchors[k], previous)  # type: ignore[type-var]
        else:
            index = max(arrived[k] if k < len(arrived) else len(frames) - 1, previous)
            upcoming = next((a for a in anchors[k + 1:] if a is not None), None)
            if upcoming is not None:
                index = max(min(index, upcoming), previous)
        pairs.append(index)
        previous = index
    return pairs, "fragment + arrival time"


@dataclass
class Exchange:
    """One request of a turn through the proxy and what came back.

    Attributes:
        step: The step of the turn (0-based) the request belongs to.
        record: The proxy's :class:`~mmsp_notebook.demo.WireTranscript` of the request.
        frames: The response cut into SSE frames.
        events: The UniEvents of the step (only on the step's last request, the one that streamed).
        event_times: When each event was fed.
        pairs: The frame index of each event.
        rule: The pairing rule applied.
        t0: The step's request time (``time.monotonic()``), the origin of every ``ms``.
    """

    step: int
    record: Any
    frames: list[Frame]
    events: list[dict[str, Any]] = field(default_factory=list)
    event_times: list[float] = field(default_factory=list)
    pairs: list[int | None] = field(default_factory=list)
    rule: str = ""
    t0: float = 0.0

    def ms(self, t: float) -> float:
        return round((t - self.t0) * 1000.0, 1)


class Wire(list):
    """The wire of a turn: a list of rows, one per SSE frame, in order.

    Each row is a dict: ``step``, ``request`` (the proxy's request id), ``frame`` (index in the
    response), ``ms`` (arrival at the proxy, ms since the step's request was sent), ``kind``
    (``data``, ``comment``, ``done``, ``other``), ``raw`` (the frame's text, untruncated) and
    ``events`` (the UniEvents it produced: ``n``, ``ms``, ``event_type``, ``type``, ``preview``).
    :attr:`exchanges` keeps the requests themselves. Jupyter shows it as an HTML table.
    """

    def __init__(self, exchanges: list[Exchange]) -> None:
        super().__init__()
        self.exchanges = exchanges
        n = 0
        for exchange in exchanges:
            by_frame: dict[int | None, list[dict[str, Any]]] = {}
            for k, (event, index) in enumerate(zip(exchange.events, exchange.pairs)):
                t = exchange.event_times[k] if k < len(exchange.event_times) else None
                row = event_row(n + k, None if t is None else (t - exchange.t0) * 1000.0, event)
                by_frame.setdefault(index, []).append(row)
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
        """Every paired event row, in order."""
        return [event for row in self for event in row["events"]]

    def save(self, path: str | Path, step: int = -1) -> Path:
        """Write the raw response bytes of a step's request to ``path`` (``DemoServer(replay=path)`` serves it).

        Raises:
            ValueError: No request was captured for that step, or it was refused (not HTTP 200).
        """
        streamed = [e for e in self.exchanges if e.events] or list(self.exchanges)
        if not streamed:
            raise ValueError("no request was captured for this turn")
        steps = sorted({e.step for e in streamed})
        wanted = steps[step]
        exchange = [e for e in streamed if e.step == wanted][-1]
        status = getattr(exchange.record, "status", 200)
        if status is not None and status != 200:
            raise ValueError(f"the request was answered HTTP {status}, not with a stream: there is nothing to replay "
                             "(the wire view shows the response)")
        target = Path(path)
        target.write_bytes(redact_bytes(exchange.record.response))
        return target

    def _repr_html_(self) -> str:
        return render_wire_html(self)

    def __repr__(self) -> str:
        return render_wire_text(self)


# ---------------------------------------------------------------------------------------------- rendering
def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cut(raw: str, limit: int = LINE_LIMIT) -> str:
    """The frame's text with each over-long line (base64 media) cut, saying how much was left out."""
    out = []
    for line in raw.rstrip("\r\n").split("\n"):
        if len(line) > limit:
            keep = limit // 2
            line = f"{line[:keep]}… [{len(line):,} characters, {len(line) - keep - 40:,} not shown] …{line[-40:]}"
        out.append(line)
    return "\n".join(out)


# The wire's own stylesheet, scoped under .mmsp-wire (a turn's static view has the widget's).
_WIRE_CSS = (
    ".mmsp-wire{font-family:var(--jp-content-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,inherit);"
    "line-height:1.5;max-width:100%}"
    ".mmsp-wire pre{background:var(--jp-layout-color2,#f5f5f5);padding:.4em;overflow:auto;white-space:pre-wrap}"
    ".mmsp-wire table{border-collapse:collapse}.mmsp-wire td,.mmsp-wire th{border:1px solid "
    "var(--jp-border-color2,#ccc);padding:2px 6px}"
    ".mmsp-wire .mmsp-warn{background:var(--jp-warn-color3,#fff3cd);padding:.3em .6em;border-radius:4px}"
    ".mmsp-wire .mmsp-muted{color:var(--jp-ui-font-color2,#666)}"
    ".mmsp-wire table{font-size:.85em;width:100%}.mmsp-wire td{vertical-align:top}"
    ".mmsp-wire pre{margin:0;max-height:12em}.mmsp-wire .mmsp-ev{white-space:nowrap}"
    ".mmsp-wire tr.mmsp-quiet td{color:var(--jp-ui-font-color2,#888)}"
)


def render_wire_html(wire: Wire) -> str:
    """The wire as a sanitized HTML table (every model or server string escaped)."""
    parts = [f'<div class="mmsp-static mmsp-wire"><style>{_WIRE_CSS}</style>']
    if not wire.exchanges:
        parts.append('<div class="mmsp-warn">no request went through the wire proxy for this turn</div></div>')
        return "".join(parts)
    for exchange in wire.exchanges:
        record = exchange.record
        head = (f"step {exchange.step + 1} · {record.method} {record.endpoint} · HTTP {record.status} · "
                f"{record.protocol} · {len(record.response):,} bytes · {len(exchange.frames)} frames · "
                f"{len(exchange.events)} UniEvents · {record.outcome}")
        if exchange.events:
            head += f" · paired by {exchange.rule}"
        parts.append(f'<div class="mmsp-muted"><b>wire</b> {_e(head)}</div>')
        parts.append("<table><thead><tr><th>ms</th><th>raw SSE frame</th><th>→ UniEvent(s)</th></tr></thead><tbody>")
        rows = [row for row in wire if row["request"] == record.id]
        for row in rows:
            quiet = ' class="mmsp-quiet"' if not row["events"] else ""
            ms = "" if row["ms"] is None else f"{row['ms']:.1f}"
            events = "<br/>".join(
                f'<span class="mmsp-ev"><b>{_e(ev["type"] or ev["event_type"])}</b></span> '
                f'<code>{_e(ev["preview"])}</code>' for ev in row["events"])
            parts.append(f"<tr{quiet}><td>{_e(ms)}</td><td><pre>{_e(_cut(row['raw']))}</pre></td>"
                         f"<td>{events}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</div>")
    return "".join(parts)


def render_wire_text(wire: Wire, width: int = 100) -> str:
    """The wire as plain text: one line per frame, its events below it."""
    lines = []
    for exchange in wire.exchanges:
        record = exchange.record
        lines.append(f"-- step {exchange.step + 1}: {record.method} {record.endpoint} HTTP {record.status} "
                     f"{record.protocol} {len(record.response)} bytes, {len(exchange.frames)} frames, "
                     f"{len(exchange.events)} UniEvents ({exchange.rule or 'not paired'})")
        for row in (r for r in wire if r["request"] == record.id):
            raw = _cut(row["raw"], width).replace("\n", " ⏎ ")
            ms = "" if row["ms"] is None else f"{row['ms']:8.1f}"
            lines.append(f"{ms:>8}  {raw[:width]}")
            for ev in row["events"]:
                lines.append(f"{'':>8}    → {ev['type'] or ev['event_type']} {ev['preview'][:width - 20]}")
    return "\n".join(lines) if lines else "<Wire: no request captured>"


# ---------------------------------------------------------------------------------------------- proxies
_proxies: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()
_taps: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _stop_all(proxies: dict[str, Any]) -> None:
    for proxy in list(proxies.values()):
        try:
            proxy.stop()
        except Exception:
            pass
    proxies.clear()


def session_proxy(sess: Any, upstream: str) -> Any:
    """The session's running :class:`~mmsp_notebook.demo.WireProxy` in front of ``upstream`` (started on first use)."""
    from .proxy import WireProxy

    with _lock:
        proxies = _proxies.get(sess)
        if proxies is None:
            proxies = {}
            _proxies[sess] = proxies
            weakref.finalize(sess, _stop_all, proxies)
        proxy = proxies.get(upstream)
        if proxy is None or not proxy.running:
            proxy = WireProxy(upstream).start()
            proxies[upstream] = proxy
        return proxy


def stop_proxies(sess: Any) -> None:
    """Stop the session's wire proxies."""
    with _lock:
        proxies = _proxies.get(sess)
    if proxies:
        _stop_all(proxies)


def _tap_of(conv: Any) -> str:
    with _lock:
        tap = _taps.get(conv)
        if tap is None:
            tap = re.sub(r"[^A-Za-z0-9_.~-]+", "_", conv.name)[:40] + "-" + uuid.uuid4().hex[:8]
            _taps[conv] = tap
        return tap


_ROOT_TYPES = ("ant-messages", "anthropic-official")


async def wire_client(sess: Any, conv: Any, turn: Any, model: str, client_type: str | None, base_url: str | None,
                      api_key_env: str | None) -> Any:
    """The conversation's client for this endpoint, through the session's wire proxy (on the worker loop).

    Demo models without a base URL go through a proxy in front of the kernel's demo server; any
    other endpoint through a proxy in front of ``base_url`` (else the client type's default
    endpoint). The key is resolved as the client would resolve it for the upstream (mmsp's
    ``resolve_credentials``) and handed to the client, which sends it to the proxy, which forwards
    it and forgets it. Notes on ``turn`` what :func:`capture_wire` needs.
    """
    import mmsp
    from mmsp.credentials import CLIENT_CREDENTIALS, routed_client_type
    from mmsp.utils import resolve_credentials

    from .._errors import OptionError
    from ..engine.session import api_key_from_env, is_demo_model

    if is_demo_model(model) and not base_url:
        kind = client_type or "mmsp"
        upstream = (await asyncio.to_thread(sess.demo_server)).base_url
        api_key = None if kind == "mmsp" else "demo-key"
    else:
        kind = routed_client_type(model, client_type) or client_type or ""
        if kind not in CLIENT_CREDENTIALS:
            raise OptionError(f"--wire: cannot tell which endpoint {model!r} goes to; give --client-type and --base-url")
        api_key, resolved = resolve_credentials("WireProxy", kind, api_key_from_env(api_key_env), base_url)
        upstream = resolved or CLIENT_CREDENTIALS[kind].default_base_url
    proxy = await asyncio.to_thread(session_proxy, sess, upstream)
    tap = _tap_of(conv)
    root = kind in _ROOT_TYPES and proxy.base_url.endswith("/v1")
    url = proxy.tap_url(tap, root=root)
    endpoint = (model, client_type, base_url, api_key_env, "wire", url)
    if conv.client is None or conv.endpoint != endpoint:
        history = conv.history()
        client = mmsp.AutoLLMClient(model=model, api_key=api_key, base_url=url, client_type=client_type or kind)
        if history:
            client.set_history(history)
        conv.client, conv.endpoint, conv.pending_history = client, endpoint, None
    turn._wire_source = (proxy, tap, time.monotonic())
    return conv.client


async def capture_wire(turn: Any, settle: float = 1.0) -> Wire:
    """Pair the proxy's records of a finished turn with its steps' events; sets ``turn.wire`` and ``turn.save_wire``."""
    source = getattr(turn, "_wire_source", None)
    if source is None:
        wire = Wire([])
    else:
        proxy, tap, since = source
        deadline = time.monotonic() + settle
        while True:
            records = [r for r in proxy.records(tap) if r.started >= since]
            if all(r.outcome != "streaming" for r in records) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        wire = build_wire(turn, records)
    turn.wire = wire
    turn.save_wire = wire.save
    return wire


def build_wire(turn: Any, records: list[Any]) -> Wire:
    """The :class:`Wire` of a turn from the proxy's records of its requests (oldest first)."""
    with turn.lock:
        steps = [(s, list(s.events), list(s.event_times)) for s in turn.steps if s.request_sent is not None]
    exchanges: list[Exchange] = []
    for i, (state, events, times) in enumerate(steps):
        start = state.request_sent
        end = steps[i + 1][0].request_sent if i + 1 < len(steps) else float("inf")
        mine = [r for r in records if start <= r.started < end]
        for j, record in enumerate(mine):
            frames = [_redacted_frame(f) for f in split_timed_frames(record.response, list(record.chunks),
                                                                       list(record.times))]
            exchange = Exchange(i, record, frames, t0=start)
            if j == len(mine) - 1:
                exchange.events, exchange.event_times = events, times
                exchange.pairs, exchange.rule = pair_events(frames, events, times, record.protocol)
            exchanges.append(exchange)
    return Wire(exchanges)
