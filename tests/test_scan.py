"""The scan of a trace folder (``traces/_scan.py``): after files were added, removed or renamed in
some directories, only those are listed again, and the dataset is the one a full listing makes;
any other change of the folder's directories (one added, removed, linked to) lists it whole."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_dataset import DAY, T0, assert_same, conversation, make_corpus, quiet_sync, record, save

from mmsp_notebook import traces
from mmsp_notebook.core.store import append_sidecar
from mmsp_notebook.traces import _scan

#: the racy window in these tests (the real one is ``_manifest.RACY_S``, 2 s): a directory changed
#: within it is listed again by every scan until it is older
RACY_S = 0.25


class Spy:
    """How each scan went: "copy" (no directory changed), "partial" (the changed ones listed),
    "full"; and the directories ``os.scandir`` listed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ways: list[str] = []
        self.listed: list[str] = []
        real_partial, real_scandir = _scan._partial, os.scandir

        def partial(*args: Any, **kwargs: Any) -> Any:
            got = real_partial(*args, **kwargs)
            self.ways.append("partial" if got is not None else "full")
            return got

        def walk(*args: Any, **kwargs: Any) -> Any:
            if self.ways[-1:] != ["full"]:
                self.ways.append("full")
            return real_walk(*args, **kwargs)

        def scandir(path: Any = ".") -> Any:
            if not isinstance(path, int):  # (shutil.rmtree lists by descriptor)
                self.listed.append(os.fspath(path))
            return real_scandir(path)

        real_walk = _scan._walk_dirs
        monkeypatch.setattr(_scan, "_partial", partial)
        monkeypatch.setattr(_scan, "_walk_dirs", walk)
        monkeypatch.setattr(os, "scandir", scandir)

    def sync(self, src: Path, ds_dir: Path, **kwargs: Any) -> tuple[traces.SyncResult, str, list[str]]:
        """A sync once the changes are past the racy window: its result, how its scan went, the
        directories of the folder it listed."""
        time.sleep(RACY_S + 0.1)
        self.ways.clear()
        self.listed.clear()
        res = quiet_sync(src, ds_dir, **kwargs)
        way = self.ways[0] if self.ways else "copy"
        return res, way, sorted({d for d in self.listed if d == str(src) or d.startswith(f"{src}{os.sep}")})


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    monkeypatch.setattr(_scan, "RACY_S", RACY_S)
    yield Spy(monkeypatch)


@pytest.fixture
def synced(tmp_path: Path, spy: Spy) -> tuple[Path, Path]:
    """A corpus synced twice (the second sync writes the scan's copy of the records)."""
    src = make_corpus(tmp_path / "cache")
    ds_dir = tmp_path / "ds"
    quiet_sync(src, ds_dir)
    spy.sync(src, ds_dir)
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (0, 0, "copy")
    return src, ds_dir


def test_files_added_removed_and_renamed_list_only_their_directories(synced: tuple[Path, Path], spy: Spy) -> None:
    src, ds_dir = synced
    agent = src / "gen" / "shard_00" / "agent1"
    # a new conversation in a directory of others
    save(src, "gen/shard_00/agent1/new_one", conversation(2, T0 + 6 * DAY, "new"))
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (1, 0, "partial")
    assert listed == [str(agent)]
    assert_same(ds_dir, src)
    # one removed, one renamed (its trace id is its name: one removed, one new)
    victim = sorted(agent.glob("conversation_*.json"))[0]
    victim.unlink()
    (src / "odd" / "no_model.json").rename(src / "odd" / "renamed.json")
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (1, 2, "partial")
    assert listed == [str(agent), str(src / "odd")]
    assert_same(ds_dir, src)
    # a sidecar for a trace that had none, one removed, a sidecar without its trace file
    append_sidecar(record("gen/shard_00/agent1/new_one", 0, 1, started=T0 + 6 * DAY + 5.0), base=src)
    (src / "runs" / "v1.5.timing.jsonl").unlink()
    append_sidecar(record("runs/lost", 0, None, "error", started=T0 + 7 * DAY, total=10.0), base=src)
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (3, 0, "partial")
    assert listed == [str(agent), str(src / "runs")]
    assert_same(ds_dir, src)
    # a file at the top of the folder
    save(src, "top", conversation(1, T0 + 8 * DAY, "top"))
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, way, listed) == (1, "partial", [str(src)])
    assert_same(ds_dir, src)
    # and nothing more: no listing at all
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way, listed) == (0, 0, "copy", [])


def test_a_new_hidden_file_and_a_name_that_is_not_utf8_are_what_a_full_listing_makes_of_them(
        synced: tuple[Path, Path], spy: Spy) -> None:
    src, ds_dir = synced
    hidden = src / "app" / ".drafts"
    hidden.mkdir()
    res, way, _ = spy.sync(src, ds_dir)  # a new directory: listed whole
    assert (res.converted, way) == (0, "full")
    save(src, "app/.drafts/secret", conversation(1, T0, "h"))  # the loaders do not look in hidden directories
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, way) == (0, "partial")
    assert str(hidden) not in listed
    assert_same(ds_dir, src)
    if sys.platform == "darwin":  # (APFS takes only UTF-8 names)
        return
    odd = os.path.join(os.fsencode(src / "app"), b"caf\xe9.json")
    with open(odd, "wb") as fh:
        fh.write((src / "app" / "chat_1.json").read_bytes())
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.converted, way) == (0, "partial")
    assert [n["reason"] for n in res.new_skipped] == [_scan.NOT_UTF8]
    assert any(n["reason"] == _scan.NOT_UTF8 for n in res.skipped)
    os.remove(odd)
    res, way, _ = spy.sync(src, ds_dir)
    assert way == "partial"
    assert not any(n["reason"] == _scan.NOT_UTF8 for n in res.skipped)


def test_a_directory_added_removed_or_linked_to_lists_the_folder_whole(synced: tuple[Path, Path], spy: Spy) -> None:
    src, ds_dir = synced
    save(src, "later/day_2/one", conversation(1, T0 + 9 * DAY, "l"))
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.converted, way) == (1, "full")
    assert_same(ds_dir, src)
    shutil.rmtree(src / "later")
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.removed, way) == (1, "full")
    assert_same(ds_dir, src)
    # a link to a directory: which way in the loaders take decides trace ids; every listing is whole
    os.symlink(src / "gen" / "shard_01", src / "app" / "shard_link")
    res, way, _ = spy.sync(src, ds_dir)
    assert way == "full"
    assert_same(ds_dir, src)
    save(src, "odd/after_link", conversation(1, T0 + 10 * DAY, "k"))
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.converted, way) == (1, "full")
    assert_same(ds_dir, src)


def test_the_changed_directories_holding_more_than_a_quarter_of_the_traces_are_listed_whole(
        synced: tuple[Path, Path], spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    src, ds_dir = synced
    monkeypatch.setattr(_scan, "PARTIAL", 1)  # (the bound on what is held of the directories listed)
    save(src, "gen/shard_00/agent1/new_two", conversation(1, T0 + 6 * DAY, "n"))
    res, way, _ = spy.sync(src, ds_dir)
    assert (res.converted, way) == (1, "full")
    assert_same(ds_dir, src)
