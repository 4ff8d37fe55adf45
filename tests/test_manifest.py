"""The dataset manifest (``traces._manifest``): what a sync asks of it at its end reads indexes,
not the whole table of traces, and gives the same figures as counting the table would."""

from __future__ import annotations

import json
from pathlib import Path

from mmsp_notebook.traces._manifest import Manifest


def _fill(m: Manifest, n: int, skipped: set[int], noted: set[int]) -> None:
    rows = []
    for i in range(n):
        notes = json.dumps([{"path": f"t{i:04d}.json", "reason": "not JSON"}]) if i in noted else None
        rows.append((f"t{i:04d}", 10, 1, -1, -1, None, notes, int(i not in skipped), 3, "d", f"/src/t{i:04d}.json", None, "[]"))
    with m.transaction() as db:
        m.put_sources(db, rows)


def _plans(m: Manifest, sql: str) -> str:
    return " ".join(str(r[-1]) for r in m.db.execute(f"EXPLAIN QUERY PLAN {sql}"))


def test_the_counts_and_notes_of_a_sync_read_indexes_and_equal_the_tables_figures(tmp_path: Path) -> None:
    with Manifest(str(tmp_path)) as m:
        _fill(m, 500, skipped={3, 70, 499}, noted={3, 70, 499, 12})
        assert m.counts() == (497, 3)
        # the table counted row by row says the same
        loaded, every = m.db.execute("SELECT sum(loaded), count(*) FROM sources").fetchone()
        assert m.counts() == (loaded, every - loaded)
        assert [n["path"] for n in m.notes()] == ["t0003.json", "t0012.json", "t0070.json", "t0499.json"]
        # neither reads the wide rows of every trace
        for sql in ("SELECT count(*) FROM sources", "SELECT count(*) FROM sources WHERE loaded = 0",
                    "SELECT notes FROM sources WHERE notes IS NOT NULL ORDER BY trace_id"):
            plan = _plans(m, sql)
            assert "INDEX" in plan, (sql, plan)
        # a trace loaded again, its notes gone: both follow
        with m.transaction() as db:
            db.execute("UPDATE sources SET loaded = 1, notes = NULL WHERE trace_id = 't0070'")
        assert m.counts() == (498, 2)
        assert [n["path"] for n in m.notes()] == ["t0003.json", "t0012.json", "t0499.json"]


def test_a_manifest_written_before_the_indexes_gets_them_when_opened(tmp_path: Path) -> None:
    with Manifest(str(tmp_path)) as m:
        _fill(m, 20, skipped={5}, noted={5})
        m.db.execute("DROP INDEX sources_noted")
        m.db.execute("DROP INDEX sources_unloaded")
    with Manifest(str(tmp_path)) as m:
        names = {r[0] for r in m.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"sources_noted", "sources_unloaded"} <= names
        assert m.counts() == (19, 1)
        assert [n["path"] for n in m.notes()] == ["t0005.json"]
