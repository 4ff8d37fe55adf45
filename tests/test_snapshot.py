"""The scan's copy of the manifest's records (``traces/_snapshot.py``): exact after every kind of
change, trusted only when the sync that wrote it ended, and what spares a scan the manifest's
records of the traces that did not change."""

from __future__ import annotations

import json
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_dataset import DAY, T0, append_sidecar, assert_same, conversation, make_corpus, quiet_sync, record, save

from mmsp_notebook import traces
from mmsp_notebook.traces import _dataset, _manifest, _scan, _snapshot


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "cache")


def copy_rows(ds_dir: Path) -> list[tuple[Any, ...]]:
    with pa.memory_map(str(ds_dir / "turns" / _snapshot.SNAPSHOT_NAME)) as src:
        table = pa.ipc.open_file(src).read_all()
    return sorted(tuple(r.values()) for r in table.to_pylist())


def manifest_rows(ds_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(ds_dir / "turns" / "_manifest.sqlite") as db:
        rows = db.execute("SELECT trace_id, path, sidecar, coalesce(t_size, -9), coalesce(t_mtime, -9),"
                          " coalesce(s_size, -9), coalesce(s_mtime, -9), hash IS NOT NULL FROM sources").fetchall()
    return sorted((*r[:7], bool(r[7])) for r in rows)


def token(ds_dir: Path) -> str | None:
    with sqlite3.connect(ds_dir / "turns" / "_manifest.sqlite") as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'scan_token'").fetchone()
    return None if row is None else json.loads(row[0])


#: the racy window in these tests: what a scan trusts is decided by the same comparison, with a
#: window short enough to wait past (the real one is ``_manifest.RACY_S``, 2 s)
RACY_S = 0.25


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_scan, "RACY_S", RACY_S)


def age() -> None:
    """Wait until what was written is out of the racy window, so that a scan trusts the listing and
    the signatures (and takes the copy). (``os.utime`` would not do: it sets the ctime, which the
    signature takes, to now.)"""
    time.sleep(RACY_S + 0.1)


class Spy:
    """Which records a sync read from the manifest: all of them (``known_pages``), or those of some
    traces (``known``, ``records``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pages = 0
        self.asked: list[str] = []
        real_pages, real_known, real_records = (_manifest.Manifest.known_pages, _manifest.Manifest.known,
                                                _manifest.Manifest.records)

        def known_pages(m: Any, size: int) -> Any:
            self.pages += 1
            return real_pages(m, size)

        def known(m: Any, ids: list[str]) -> Any:
            self.asked += ids
            return real_known(m, ids)

        def records(m: Any, ids: list[str]) -> Any:
            self.asked += ids
            return real_records(m, ids)

        monkeypatch.setattr(_manifest.Manifest, "known_pages", known_pages)
        monkeypatch.setattr(_manifest.Manifest, "known", known)
        monkeypatch.setattr(_manifest.Manifest, "records", records)


def settled(corpus: Path, ds_dir: Path) -> None:
    """Synced, with the listing trusted, every content hash settled and the copy written."""
    quiet_sync(corpus, ds_dir)
    age()
    quiet_sync(corpus, ds_dir)  # (lists the folder, whose mtimes are now trusted; writes the copy)
    quiet_sync(corpus, ds_dir)  # (settles the hashes of the files written within the window)
    assert token(ds_dir) and copy_rows(ds_dir) == manifest_rows(ds_dir)


@pytest.mark.serial  # the second sync must start within the 2 s racy window of the corpus's writes
def test_the_copy_is_the_manifest_after_every_kind_of_change(corpus: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    with monkeypatch.context() as mp:  # the real window for the first two scans: the corpus is still in it
        mp.setattr(_scan, "RACY_S", _manifest.RACY_S)
        quiet_sync(corpus, ds_dir)  # (every trace new: no copy, the next scan writes it)
        assert token(ds_dir) is None and not (ds_dir / "turns" / _snapshot.SNAPSHOT_NAME).exists()
        quiet_sync(corpus, ds_dir)
    assert token(ds_dir) and copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert any(r[7] for r in copy_rows(ds_dir))  # files written within the window keep a hash
    # a trace grown, one added, one removed, one damaged; a config changed (rows replaced)
    save(corpus, "app/chat_1", conversation(4, T0))
    save(corpus, "new/one", conversation(2, T0 + 5 * DAY, "new"))
    (corpus / "gen" / "shard_00" / "agent1" / "conversation_00001.json").unlink()
    damaged = corpus / "gen" / "shard_01" / "agent2" / "conversation_00009.json"
    damaged.write_bytes(damaged.read_bytes()[:100])
    save(corpus, "runs/v1.5", conversation(2, T0 + 3 * DAY, "dot"), model="org/model v2%", temperature=0.9)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 4 and res.removed == 1
    assert copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert_same(ds_dir, corpus)
    # the hashes settled once the files are out of the window
    age()
    quiet_sync(corpus, ds_dir)
    quiet_sync(corpus, ds_dir)
    assert copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert not any(r[7] for r in copy_rows(ds_dir))


def test_a_scan_with_the_copy_reads_the_records_of_the_changed_traces_only(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    spy = Spy(monkeypatch)
    assert quiet_sync(corpus, ds_dir).converted == 0
    assert spy.pages == 0 and spy.asked == []
    save(corpus, "app/chat_1", conversation(4, T0))  # the Tracer's rewrite, in place
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == 1 and res.unchanged == len(manifest_rows(ds_dir)) - 1
    assert spy.pages == 0 and spy.asked == ["app/chat_1"]
    assert_same(ds_dir, corpus)
    assert copy_rows(ds_dir) == manifest_rows(ds_dir)


def test_a_sync_stopped_midway_leaves_no_copy_to_trust(corpus: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    before = token(ds_dir)
    save(corpus, "app/chat_1", conversation(4, T0))

    def stop(self: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:  # stopped after the conversion's commit, before the end
        mp.setattr(_dataset._Sync, "compact", stop)
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            warnings.simplefilter("ignore", traces.TraceLoadWarning)
            traces.sync(corpus, ds_dir)
    assert token(ds_dir) is None  # the copy (still the one before the commit) is trusted by no scan
    left = ds_dir / "turns" / f"{_snapshot.SNAPSHOT_NAME}.0123.draft"
    left.write_bytes(b"a draft a stopped sync left")
    spy = Spy(monkeypatch)
    save(corpus, "app/chat_1", conversation(5, T0))
    assert quiet_sync(corpus, ds_dir).converted == 1
    assert spy.pages == 1  # the manifest's own records
    assert_same(ds_dir, corpus)
    assert token(ds_dir) not in (None, before) and copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert sorted(p.name for p in (ds_dir / "turns").glob("_scan*")) == [_snapshot.SNAPSHOT_NAME]
    spy.pages = 0
    assert quiet_sync(corpus, ds_dir).converted == 0 and spy.pages == 0  # trusted again


@pytest.mark.parametrize("damage", ["garbage", "cut", "another token", "removed"])
def test_a_damaged_or_foreign_copy_is_not_trusted(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  damage: str) -> None:
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    path = ds_dir / "turns" / _snapshot.SNAPSHOT_NAME
    if damage == "garbage":
        path.write_bytes(b"\x00" * path.stat().st_size)
    elif damage == "cut":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "another token":  # another dataset's copy: not this manifest's
        other = tmp_path / "other"
        quiet_sync(corpus, other)
        quiet_sync(corpus, other)
        path.write_bytes((other / "turns" / _snapshot.SNAPSHOT_NAME).read_bytes())
    else:
        path.unlink()
    save(corpus, "app/chat_1", conversation(4, T0))
    spy = Spy(monkeypatch)
    assert quiet_sync(corpus, ds_dir).converted == 1
    assert spy.pages == 1
    assert_same(ds_dir, corpus)
    assert copy_rows(ds_dir) == manifest_rows(ds_dir)


@pytest.mark.parametrize("where", ["no directory changed", "a file added"])
@pytest.mark.parametrize("damage", ["another trace's file", "no UTF-8"])
def test_a_copy_damaged_past_its_structure_is_found_and_not_trusted(corpus: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     damage: str, where: str) -> None:
    # bytes of the copy changed on disk where its structure still reads: a trace's file named as
    # another's of the same length, or a byte that is no UTF-8
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    path = ds_dir / "turns" / _snapshot.SNAPSHOT_NAME
    raw = path.read_bytes()
    files = [r[1] for r in copy_rows(ds_dir) if r[1] and "/gen/" in r[1] and raw.count(r[1].encode()) == 1]
    victim, other = next((a, b) for a in files for b in files if a != b and len(a) == len(b))
    if damage == "another trace's file":
        raw = raw.replace(victim.encode(), other.encode())
    else:
        at = raw.index(victim.encode()) + len(victim) - len("x.json")
        raw = raw[:at] + b"\xff" + raw[at + 1:]
    path.write_bytes(raw)
    save(corpus, "app/chat_1", conversation(4, T0))  # the Tracer's rewrite, in place
    if where == "a file added":  # (its directory is listed again; the other traces come from the copy)
        save(corpus, "app/chat_new", conversation(2, T0 + DAY, "new"))
    spy = Spy(monkeypatch)
    res = quiet_sync(corpus, ds_dir)
    assert res.converted == (1 if where == "no directory changed" else 2) and res.removed == 0
    assert_same(ds_dir, corpus)  # the victim keeps its own rows
    assert spy.pages == (1 if where == "no directory changed" else 0)  # the manifest's records, or a full listing
    assert token(ds_dir) is None and not path.exists()  # the damaged copy is not mended from
    assert quiet_sync(corpus, ds_dir).converted == 0  # (which writes the copy again from the manifest)
    assert token(ds_dir) and copy_rows(ds_dir) == manifest_rows(ds_dir)
    spy.pages = 0
    assert quiet_sync(corpus, ds_dir).converted == 0 and spy.pages == 0  # trusted again
    assert_same(ds_dir, corpus)


def test_more_touched_traces_than_the_mend_takes_leave_the_copy_to_the_next_scan(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    monkeypatch.setattr(_snapshot, "MEND", 2)
    monkeypatch.setattr(_dataset, "WINDOW", 5)  # (written and read 5 traces at a time)
    for k in range(3):
        save(corpus, f"gen/shard_00/agent0/conversation_0000{k}", conversation(2, T0 + k * DAY, f"g{k}"))
    age()  # (out of the window: no content hash kept for them, which a later scan would settle, touching them)
    assert quiet_sync(corpus, ds_dir).converted >= 3
    assert token(ds_dir) is None and not (ds_dir / "turns" / _snapshot.SNAPSHOT_NAME).exists()
    spy = Spy(monkeypatch)
    save(corpus, "app/chat_1", conversation(4, T0))
    assert quiet_sync(corpus, ds_dir).converted == 1  # (the manifest's records read, as the copy's draft)
    assert token(ds_dir) and copy_rows(ds_dir) == manifest_rows(ds_dir)
    with pa.memory_map(str(ds_dir / "turns" / _snapshot.SNAPSHOT_NAME)) as src:
        reader = pa.ipc.open_file(src)
        assert {reader.get_batch(i).num_rows for i in range(reader.num_record_batches - 1)} == {5}
    # a mend (two touched: within the limit)
    spy.pages = 0
    save(corpus, "app/chat_1", conversation(5, T0))
    save(corpus, "runs/v1.5", conversation(3, T0 + 3 * DAY, "dot"), model="org/model v2%")
    assert quiet_sync(corpus, ds_dir).converted == 2
    assert spy.pages == 0 and token(ds_dir) and copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert_same(ds_dir, corpus)


def test_readers_leave_the_copy_out(corpus: Path, tmp_path: Path) -> None:
    ds_dir = tmp_path / "ds"
    quiet_sync(corpus, ds_dir)
    quiet_sync(corpus, ds_dir)
    assert (ds_dir / "turns" / _snapshot.SNAPSHOT_NAME).exists()
    assert traces.dataset(ds_dir).count_rows() == len(traces.load_turns(corpus, progress=False))
    assert int(traces.query("SELECT count(*) AS n FROM turns", ds_dir)["n"][0]) == traces.dataset(ds_dir).count_rows()


def test_the_tracers_change_mends_the_copy_in_place_and_other_changes_rewrite_it(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds_dir = tmp_path / "ds"
    settled(corpus, ds_dir)
    path = ds_dir / "turns" / _snapshot.SNAPSHOT_NAME
    rewrites: list[int] = []
    real = _snapshot._mended

    def mended(*a: Any) -> Any:
        rewrites.append(1)
        return real(*a)

    monkeypatch.setattr(_snapshot, "_mended", mended)
    before, inode = token(ds_dir), path.stat().st_ino
    # two traces grown (one with a sidecar), as the Tracer rewrites them: only their numbers change
    save(corpus, "app/chat_1", conversation(4, T0))
    save(corpus, "runs/v1.5", conversation(3, T0 + 3 * DAY, "dot"), model="org/model v2%")
    assert quiet_sync(corpus, ds_dir).converted == 2
    assert rewrites == [] and token(ds_dir) == before and path.stat().st_ino == inode
    assert copy_rows(ds_dir) == manifest_rows(ds_dir)
    assert any(r[7] for r in copy_rows(ds_dir))  # (written within the racy window: a hash kept)
    age()
    quiet_sync(corpus, ds_dir)  # the hashes settled: the flags cleared in place
    assert rewrites == [] and path.stat().st_ino == inode
    assert copy_rows(ds_dir) == manifest_rows(ds_dir) and not any(r[7] for r in copy_rows(ds_dir))
    spy = Spy(monkeypatch)
    assert quiet_sync(corpus, ds_dir).converted == 0 and spy.pages == 0 and spy.asked == []
    # a trace added, a sidecar added to a trace that had none, a trace removed: the copy is
    # written again (a new token)
    for change in ("add", "sidecar", "remove"):
        if change == "add":
            save(corpus, "new/one", conversation(2, T0 + 5 * DAY, "new"))
        elif change == "sidecar":
            append_sidecar(record("new/one", 0, 1, started=T0 + 5 * DAY + 5.0), base=corpus)  # (added above)
        else:
            (corpus / "gen" / "shard_00" / "agent1" / "conversation_00001.json").unlink()
        old = token(ds_dir)
        quiet_sync(corpus, ds_dir)
        assert rewrites and token(ds_dir) not in (None, old)
        assert copy_rows(ds_dir) == manifest_rows(ds_dir)
        rewrites.clear()
        age()
        quiet_sync(corpus, ds_dir)
    assert_same(ds_dir, corpus)
