"""The events frame of :mod:`mmsp_notebook.traces` (``load_events``): one row per streamed event
recorded in the timing sidecars (``[ms, type, size]`` entries of each record's ``events``).
"""

from __future__ import annotations

from array import array
from typing import Any

import pandas as pd

from ._build import Window, config_fields, other_message
from ._columns import _NAN, INT_NA, Cat, as_dur, as_int, as_ms, as_str, float_col, int_col, str_col, time_col
from ._fast import Decoded


def trace_model(data: Any) -> str | None:
    """The model a trace's config names (``data``: the trace's dict, what ``decode_trace`` made
    of it, or None)."""
    if data.__class__ is Decoded:
        return data.cfg[0]
    config = data.get("config") if isinstance(data, dict) else None
    return config_fields(config)[0] if isinstance(config, dict) else None


def answer_indices(data: Any) -> list[int]:
    """The history index of each assistant message of a trace, by turn (``data`` as for
    :func:`trace_model`; none for None)."""
    if data.__class__ is Decoded:
        return [m[0] for m in data.messages]
    history = data.get("history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        return []
    return [i for i, m in enumerate(history) if m.__class__ is dict and m.get("role") == "assistant"]


class EventBuilder(Window):
    """Collects one row per streamed event recorded in the timing sidecars."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.trace_id: list[str] = []
        self.ints = {k: array("q") for k in ("turn", "message_index", "event_index", "size")}
        self.floats = {k: array("d") for k in ("t", "at", "started")}
        self.cats = {k: Cat() for k in ("model", "client_type", "status", "type", "kind", "phase")}

    def add(self, trace_id: str, records: list[dict[str, Any]], data: Any = None) -> None:
        """Add the events of one trace's sidecar records; ``data`` (the trace as read, or None)
        gives the model of a record that names none, as in the turns frame, and the history index
        of each turn's message: the events of a record of another message are left out, as the
        turns frame leaves the record out (:func:`~._build.other_message`)."""
        default_model = trace_model(data)
        at = answer_indices(data)
        filtered = self.filtered
        N, F, C = self.ints, self.floats, self.cats
        for rec in records:
            events = rec.get("events")
            if events.__class__ is not list:
                continue
            turn = as_int(rec.get("turn"))
            status = as_str(rec.get("status"))
            # an attempt that did not complete recorded no message (the turns frame's row says so too),
            # whatever message_index it names: only a completed record can time another message
            mi = as_int(rec.get("message_index")) if status == "complete" else None
            if mi is not None and turn is not None and 0 <= turn < len(at) and other_message(rec, at[turn]):
                continue
            started = as_ms(rec.get("started_at"))
            model = as_str(rec.get("model")) or default_model
            if filtered and not self._keep(started, model):
                continue
            client = as_str(rec.get("client_type"))
            cm, cc, cs = C["model"].code(model), C["client_type"].code(client), C["status"].code(status)
            phase: str | None  # what follows the dot in an event type, "stop" or None
            for ei, ev in enumerate(events):
                if ev.__class__ is not list or len(ev) < 2:
                    continue
                ms = as_dur(ev[0])
                typ = ev[1] if ev[1].__class__ is str else str(ev[1])
                size = as_int(ev[2]) if len(ev) > 2 else None
                kind, _, phase = typ.partition(".")
                if not phase:
                    phase = "stop" if typ == "stop" else None
                self.trace_id.append(trace_id)
                N["turn"].append(INT_NA if turn is None else turn)
                N["message_index"].append(INT_NA if mi is None else mi)
                N["event_index"].append(ei)
                N["size"].append(INT_NA if size is None else size)
                F["t"].append(_NAN if ms is None else ms / 1000.0)
                F["at"].append(_NAN if ms is None or started is None else started + ms)
                F["started"].append(_NAN if started is None else started)
                C["model"].codes.append(cm)
                C["client_type"].codes.append(cc)
                C["status"].codes.append(cs)
                C["type"].append(typ)
                C["kind"].append(kind)
                C["phase"].append(phase)

    def frame(self) -> pd.DataFrame:
        """Build the events DataFrame."""
        N, F, C = self.ints, self.floats, self.cats
        return pd.DataFrame(
            {
                "trace_id": str_col(self.trace_id),
                "turn": int_col(N["turn"]),
                "message_index": int_col(N["message_index"]),
                "model": C["model"].build(),
                "client_type": C["client_type"].build(),
                "status": C["status"].build(),
                "started": time_col(F["started"]),
                "event_index": int_col(N["event_index"]),
                "t": float_col(F["t"]),
                "at": time_col(F["at"]),
                "type": C["type"].build(),
                "kind": C["kind"].build(),
                "phase": C["phase"].build(),
                "size": int_col(N["size"]),
            },
            copy=False,
        )
