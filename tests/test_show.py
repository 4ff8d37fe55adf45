"""mmsp_notebook.traces.show: the entry a row of ``load_turns`` stands for."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mmsp_notebook import traces

T0 = 1_767_225_600_000


def _record(turn, message_index, status="complete", started=T0 + 10.0):
    return {"v": 1, "trace_id": "t", "turn": turn, "message_index": message_index, "model": "m", "client_type": "mmsp",
            "status": status, "error": None if status == "complete" else {"type": "E", "message": "503"},
            "started_at": started, "ttft_ms": 100.0, "total_ms": 400.0, "usage": None, "finish_reason": None,
            "events": []}


def test_a_sidecar_only_row_is_matched_by_its_message_index_before_its_start_time(tmp_path: Path) -> None:
    """Turn 1 failed once and completed once, beyond the trace file, both started at the same
    millisecond: matched by start time alone, both rows selected the failed attempt."""
    history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": T0},
               {"role": "assistant", "content_items": [{"type": "text.done", "text": "a"}], "created_at": T0 + 500}]
    (tmp_path / "t.json").write_text(json.dumps({"history": history, "config": {"model": "m", "trace_id": "t"}}))
    records = [_record(0, 1), _record(1, 3, started=T0 + 1000.0), _record(1, None, "error", started=T0 + 1000.0)]
    (tmp_path / "t.timing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    df = traces.load_turns(tmp_path)
    assert df["source"].astype(str).tolist() == ["trace+sidecar", "sidecar", "sidecar"]
    assert df["status"].tolist() == ["complete", "error", "complete"] and df["message_index"].tolist() == [1, pd.NA, 3]
    entries = traces.show("t", root=tmp_path).entries
    kinds = {e["key"]: e["kind"] for e in entries}
    chosen = [traces.show(df.iloc[k], root=tmp_path).selected for k in range(3)]
    assert chosen[0] == "m1" and [kinds[key] for key in chosen[1:]] == ["failed", "sidecar"]
