"""mmsp_notebook.core.fields: a sidecar record's fields as every reader takes them."""

from __future__ import annotations

import numpy as np

from mmsp_notebook.core.fields import as_num, attempt_order
from mmsp_notebook.traces._build import split_sidecar
from mmsp_notebook.views.conversation import build_conversation

T0 = 1_767_225_600_000


def _failed(turn, started, name):
    return {"trace_id": "t", "turn": turn, "message_index": None, "status": "error", "started_at": started,
            "error": {"type": "E", "message": name}, "events": []}


def test_as_num_takes_finite_json_numbers_only():
    assert as_num(3) == 3.0 and as_num(2.5) == 2.5
    assert [as_num(v) for v in (True, "1", None, float("nan"), float("inf"), 10**400)] == [None] * 6


def test_the_loaders_and_show_order_the_failed_attempts_of_a_turn_alike():
    """The loaders sorted them by one number reader (a float's class), show by another (anything
    float-like): a start time of another float type (a record built from numpy values) put them in
    two orders, so the nth failed row and the nth failed entry were not the same attempt."""
    records = [_failed(0, T0 + 20.0, "late"), _failed(0, np.float64(T0 + 10.0), "numpy"), _failed(0, T0 + 15.0, "mid"),
               _failed(1, None, "next turn"), _failed(0, "x", "no time")]
    _, failed = split_sidecar(records)
    view = build_conversation([{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}], {"model": "m"},
                              records, trace_id="t")
    shown = [view["turns"][e["key"]][1][0][1]["error"]["message"] for e in view["entries"] if e["kind"] == "failed"]
    assert shown == [r["error"]["message"] for r in failed] == [r["error"]["message"] for r in sorted(records, key=attempt_order)]
    assert shown[:2] == ["numpy", "no time"]  # (neither has a start time a JSON reader takes: first, in file order)
