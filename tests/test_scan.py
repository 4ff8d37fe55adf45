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

import pandas as pd
import pyarrow.compute as pc
import pytest
from test_dataset import (
    DAY,
    T0,
    _sorted,
    assert_same,
    conversation,
    expected,
    make_corpus,
    quiet_sync,
    record,
    save,
    stored,
)
from test_snapshot import copy_rows, manifest_rows, token

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
    res, way, listed = spy.sync(src, ds_dir)  # a new directory: its parent listed again, not it (hidden)
    assert (res.converted, way, listed) == (0, "partial", [str(src / "app")])
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


def test_a_directory_added_or_removed_lists_only_what_changed(synced: tuple[Path, Path], spy: Spy) -> None:
    """A directory added (with directories in it) is listed with its parent; one removed, or
    renamed, has its traces removed; a link to a directory, or a second way into one, lists the
    folder whole (which way in the loaders take decides trace ids), and so does every listing
    while one is there."""
    src, ds_dir = synced
    save(src, "later/day_2/one", conversation(1, T0 + 9 * DAY, "l"))
    save(src, "later/two", conversation(1, T0 + 9 * DAY, "m"))
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, way) == (2, "partial")
    assert listed == [str(src), str(src / "later"), str(src / "later" / "day_2")]
    assert_same(ds_dir, src)
    save(src, "later/day_2/three", conversation(1, T0 + 10 * DAY, "n"))  # (the new directories are recorded)
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, way, listed) == (1, "partial", [str(src / "later" / "day_2")])
    os.rename(src / "later" / "day_2", src / "odd" / "day_3")  # (renamed: its traces are other ids)
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (2, 2, "partial")
    assert listed == [str(src / "later"), str(src / "odd"), str(src / "odd" / "day_3")]
    assert_same(ds_dir, src)
    shutil.rmtree(src / "later")
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.removed, way, listed) == (1, "partial", [str(src)])
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


def test_a_directory_gone_is_taken_for_deleted_even_when_no_directory_changed(
        synced: tuple[Path, Path], spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The traces of a directory gone are removed, and every other trace compared, when no directory
    still there is seen changed (its parent's change time taken within the racy window, say)."""
    src, ds_dir = synced
    before, _, _ = spy.sync(src, ds_dir)
    leaf = src / "gen" / "shard_00" / "agent1"
    n = len(list(leaf.glob("*.json")))
    shutil.rmtree(leaf)
    real = _scan._changed_dirs

    def changed_dirs(dirs: dict[str, int]) -> Any:
        got = real(dirs)
        return None if got is None else ({}, got[1], got[2])

    monkeypatch.setattr(_scan, "_changed_dirs", changed_dirs)
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.removed, way, listed) == (n, "partial", [])
    assert res.unchanged == before.unchanged - n
    assert_same(ds_dir, src)


def test_a_second_way_into_a_directory_lists_the_folder_whole(synced: tuple[Path, Path], spy: Spy,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A new directory that is one the listing knows (a bind mount, say: its device and inode) is
    what a full listing makes of it."""
    src, ds_dir = synced
    mount = src / "app" / "mount"
    mount.mkdir()
    known = os.stat(src / "gen" / "shard_01")
    real_list_dir = _scan.list_dir

    class Mounted:  # (a directory entry whose stat is another directory's, as a bind mount's is)
        def __init__(self, e: os.DirEntry[str]) -> None:
            self.path, self.name = e.path, e.name

        def is_symlink(self) -> bool:
            return False

        def stat(self) -> os.stat_result:
            return known

    def list_dir(d: str) -> Any:
        files, regular, dirs = real_list_dir(d)
        return files, regular, [Mounted(e) if e.path == str(mount) else e for e in dirs]

    monkeypatch.setattr(_scan, "list_dir", list_dir)
    res, way, _ = spy.sync(src, ds_dir)
    assert way == "full"
    assert_same(ds_dir, src)


@pytest.mark.parametrize("partial", [_scan.PARTIAL, 5, 1])
def test_new_conversations_in_every_directory_list_them_again_and_read_only_the_new_records(
        synced: tuple[Path, Path], spy: Spy, monkeypatch: pytest.MonkeyPatch, partial: int) -> None:
    """Every directory listed again (more than a quarter of the traces, all of them): the traces
    still there with the same files are compared with the copy, not read from the manifest; a
    trace rewritten in place in such a directory is still seen, one removed is removed. So too when
    the directories are listed a few at a time (``partial``: traces held at most)."""
    src, ds_dir = synced
    monkeypatch.setattr(_scan, "PARTIAL", partial)
    dirs = sorted({p.parent for p in src.rglob("*.json") if not any(x.startswith(".") for x in p.relative_to(src).parts)})
    assert len(dirs) > 4
    asked: list[str] = []
    real_known, real_records = _scan.Manifest.known, _scan.Manifest.records

    def known(self: Any, trace_ids: list[str]) -> Any:
        asked.extend(trace_ids)
        return real_known(self, trace_ids)

    def records(self: Any, trace_ids: list[str]) -> Any:
        asked.extend(trace_ids)
        return real_records(self, trace_ids)

    monkeypatch.setattr(_scan.Manifest, "known", known)
    monkeypatch.setattr(_scan.Manifest, "records", records)
    before = len(traces.load_turns(src, progress=False).drop_duplicates("trace_id"))
    for k, d in enumerate(dirs):
        save(src, f"{d.relative_to(src)}/spread_{k}", conversation(1, T0 + (8 + k) * DAY, f"s{k}"))
    grown = sorted((src / "gen").rglob("conversation_*.json"))[3]
    save(src, str(grown.relative_to(src))[:-5], conversation(3, T0 + 30 * DAY, "grown"))  # (in place: same name)
    gone = [p for p in sorted((src / "gen").rglob("conversation_*.json"))
            if p != grown and not p.with_suffix(".timing.jsonl").exists()][0]  # (no sidecar left behind)
    gone.unlink()
    res, way, listed = spy.sync(src, ds_dir)
    assert way == "partial"
    assert set(listed) >= {str(d) for d in dirs}
    assert (res.converted, res.removed) == (len(dirs) + 1, 1)
    grown_id, gone_id = str(grown.relative_to(src))[:-5], str(gone.relative_to(src))[:-5]
    # the manifest's records read: the new traces' (none found) and the rewritten one's
    new_ids = {f"{d.relative_to(src)}/spread_{k}".removeprefix("./") for k, d in enumerate(dirs)}
    assert grown_id in asked and gone_id not in asked
    assert set(asked) <= new_ids | {grown_id}, sorted(set(asked) - new_ids)
    assert len(set(asked)) < before
    assert_same(ds_dir, src)


def test_the_changed_directories_are_listed_a_batch_at_a_time_each_batch_compared_with_the_copy(
        synced: tuple[Path, Path], spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a scan holds of the directories listed again is bounded (``PARTIAL``): past it, the
    batch listed is compared with the copy and the listing goes on, never the whole folder listed."""
    src, ds_dir = synced
    monkeypatch.setattr(_scan, "PARTIAL", 1)  # (every directory listed is a batch)
    passes: list[int] = []
    real_windows = _scan.Snapshot.windows

    def windows(self: Any, *args: Any) -> Any:
        passes.append(1)
        return real_windows(self, *args)

    monkeypatch.setattr(_scan.Snapshot, "windows", windows)
    save(src, "gen/shard_00/agent1/new_two", conversation(1, T0 + 6 * DAY, "n"))
    save(src, "gen/shard_01/agent0/new_three", conversation(2, T0 + 7 * DAY, "m"))
    (src / "odd" / "no_model.json").unlink()
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way) == (2, 1, "partial")
    assert listed == sorted(str(src / d) for d in ("gen/shard_00/agent1", "gen/shard_01/agent0", "odd"))
    mine = [d for d in spy.listed if d.startswith(f"{src}{os.sep}")]
    assert len(mine) == len(set(mine)) == 3  # (each directory listed once)
    assert len(passes) == 3
    assert_same(ds_dir, src)


# --------------------------------------------------------------------------- random changes of the folder

#: the patterns the random sequences sync with (each seed one, as a dataset keeps its pattern)
PATTERNS = ["**/*.json", "*.json", "*/*.json", "app/**/*.json", "**/.hidden/*.json", "**/*"]
#: directories of traces the changes leave alone (one for each pattern)
BULK = ("gen", "app/bulk", "x/.hidden")
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0  # (root lists a directory whatever its mode)


def small_corpus(root: Path) -> Path:
    """A few traces of every shape in a few directories, hidden ones included."""
    save(root, "app/chat_1", conversation(2, T0))
    append_sidecar(record("app/chat_1", 0, 1, started=T0 + 5.0), base=root)
    append_sidecar(record("app/lost", 0, None, "error", started=T0 + DAY, total=70.0), base=root)
    save(root, "runs/v1.5", conversation(1, T0 + 2 * DAY, "dot"))
    append_sidecar(record("runs/v1.5", 0, 1, started=T0 + 2 * DAY + 3.0), base=root)
    save(root, "app/deep/inner/t", conversation(1, T0 + 3 * DAY, "in"))
    save(root, "app/.hidden/h", conversation(1, T0 + 4 * DAY, "h"))
    save(root, ".hidden/top", conversation(1, T0 + 5 * DAY, "ht"))
    save(root, "top", conversation(1, T0 + 6 * DAY, "t"))
    save(root, "odd/x", conversation(1, T0 + 7 * DAY, "x"))
    for k in range(8):  # (traces no change touches: the directories changed hold few of the traces)
        for bulk in BULK:
            save(root, f"{bulk}/b{k}", conversation(1, T0 + k * DAY, "b"))
    return root


class Changes:
    """Random changes of a trace folder (``src``), one operation a step; ``out``: a directory
    below ``src`` never changed (the dataset's, when it lies there)."""

    def __init__(self, src: Path, seed: int, out: Path | None) -> None:
        import random

        self.src, self.out, self.rng, self.n = src, out, random.Random(seed), 0
        self.ops = [getattr(self, name) for name in sorted(vars(Changes)) if name.startswith("op_")]
        #: changes of files more often than of directories (a new directory, a link: a whole listing)
        self.weights = [1 if name.endswith(("_dir", "link", "to_file", "to_dir", "unreadable")) else 4
                        for name in sorted(vars(Changes)) if name.startswith("op_")]

    def entries(self, dirs: bool) -> list[Path]:
        """The directories (or the other entries) below ``src``, links not followed."""
        got: list[Path] = [self.src] if dirs else []
        for d, subdirs, files in os.walk(self.src):
            here = Path(d)
            if (self.out is not None and (here == self.out or self.out in here.parents)) or (
                    here != self.src and str(here.relative_to(self.src)) in BULK):
                subdirs[:] = []
                continue
            got += [here / n for n in (subdirs if dirs else files) if not (dirs and (here / n).is_symlink())]
            if not dirs:
                got += [here / n for n in subdirs if (here / n).is_symlink()]
        return sorted(p for p in got if p != self.out and str(p.relative_to(self.src)) not in BULK)

    def pick(self, dirs: bool, suffix: str = "") -> Path | None:
        got = [p for p in self.entries(dirs) if p.name.endswith(suffix)]
        return self.rng.choice(got) if got else None

    def name(self) -> str:
        self.n += 1
        return self.rng.choice(["c", "v2.", ".h", "z"]) + str(self.n)

    def tid(self, d: Path, name: str) -> str:
        return str(d.relative_to(self.src) / name) if d != self.src else name

    def made(self) -> Path:
        """A trace file of a conversation of its own (the loaders keep one of repeated ones, which the
        dataset may not hold when its name is not UTF-8), written outside ``src`` (to be moved in by
        a name its Tracer does not write)."""
        self.n += 1
        return save(self.src.parent / "made", f"m{self.n}", conversation(1, T0 + 500 * DAY + self.n * 60_000, f"m{self.n}"))

    def op_add_trace(self) -> str:
        d = self.pick(True)
        assert d is not None
        tid = self.tid(d, self.name())
        save(self.src, tid, conversation(self.rng.randint(1, 2), T0 + self.n * DAY, tid))
        if self.rng.random() < 0.5:
            append_sidecar(record(tid, 0, 1, started=T0 + self.n * DAY + 1.0), base=self.src)
        return f"add {tid}"

    def op_add_sidecar_only(self) -> str:
        d = self.pick(True)
        assert d is not None
        tid = self.tid(d, self.name())
        append_sidecar(record(tid, 0, None, "error", started=T0 + self.n * DAY, total=50.0), base=self.src)
        return f"sidecar-only {tid}"

    def op_remove_file(self) -> str:
        f = self.pick(False)
        if f is None:
            return "nothing to remove"
        f.unlink()
        return f"remove {f}"

    def op_rename_file(self) -> str:
        f, d = self.pick(False), self.pick(True)
        if f is None or d is None:
            return "nothing to rename"
        to = d / (self.name() + self.rng.choice([".json", ".timing.jsonl", ""]))
        os.rename(f, to)
        return f"rename {f} -> {to}"

    def op_move_trace(self) -> str:
        """A trace file and its sidecar moved to another directory, same names."""
        f, d = self.pick(False, ".json"), self.pick(True)
        if f is None or d is None or (d / f.name).exists():
            return "nothing to move"
        side = f.with_name(f.name[:-5] + ".timing.jsonl")
        os.rename(f, d / f.name)
        if side.exists():
            os.rename(side, d / side.name)
        return f"move {f} -> {d}"

    def op_append_sidecar(self) -> str:
        f = self.pick(False, ".json")
        if f is None:
            return "no trace"
        tid = self.tid(f.parent, f.name[:-5] + self.rng.choice(["", "", ".7"]))
        append_sidecar(record(tid, 1, None, "cancelled", started=T0 + self.n * DAY, total=20.0), base=self.src)
        return f"append sidecar {tid}"

    def op_damage(self) -> str:
        f = self.pick(False)
        if f is None or f.is_symlink():
            return "nothing to damage"
        f.write_text('{"history": [{"role": "us')
        return f"damage {f}"

    def op_not_utf8(self) -> str:
        if sys.platform == "darwin":  # (APFS takes only UTF-8 names)
            return "no odd name"
        d = self.pick(True)
        assert d is not None
        self.n += 1
        os.rename(self.made(), os.path.join(os.fsencode(d), b"caf\xe9%d.json" % self.n))
        return f"odd name in {d}"

    def op_new_dir(self) -> str:
        d = self.pick(True)
        assert d is not None
        new = d / self.rng.choice(["n", ".hidden", "app"]) if self.rng.random() < 0.5 else d / self.name()
        if new.exists() or new.is_symlink():
            return "dir there"
        new.mkdir()
        if self.rng.random() < 0.7:
            tid = self.tid(new, self.name())
            save(self.src, tid, conversation(1, T0 + self.n * DAY, tid))
        return f"mkdir {new}"

    def op_remove_dir(self) -> str:
        d = self.pick(True)
        if d is None or d == self.src or (self.out is not None and self.out.is_relative_to(d)):
            return "no dir to remove"
        shutil.rmtree(d)
        return f"rmtree {d}"

    def op_rename_dir(self) -> str:
        d, to = self.pick(True), self.pick(True)
        if d is None or to is None or d == self.src or (self.out is not None and self.out.is_relative_to(d)):
            return "no dir to rename"
        if to == d or d in to.parents:
            return "no dir to rename"
        new = to / self.name()
        os.rename(d, new)
        return f"rename dir {d} -> {new}"

    def op_link(self) -> str:
        d = self.pick(True)
        target = self.pick(self.rng.random() < 0.5)
        if d is None or target is None:
            return "nothing to link"
        link = d / (self.name() + self.rng.choice([".json", ""]))
        os.symlink(target, link)
        return f"link {link} -> {target}"

    def op_dir_to_file(self) -> str:
        d = self.pick(True)
        if d is None or d == self.src or (self.out is not None and self.out.is_relative_to(d)):
            return "no dir"
        shutil.rmtree(d)
        d.write_bytes((self.src / "top.json").read_bytes() if (self.src / "top.json").exists() else b"{}")
        return f"dir to file {d}"

    def op_file_to_dir(self) -> str:
        f = self.pick(False)
        if f is None:
            return "no file"
        f.unlink()
        f.mkdir()
        os.rename(self.made(), f / "inside.json")  # (its name may not be UTF-8)
        return f"file to dir {f}"

    def op_unreadable(self) -> str:
        d = self.pick(True)
        if ROOT_USER or d is None or d == self.src:  # (root lists it all the same)
            return "no unreadable dir"
        d.chmod(0)
        return f"chmod 000 {d}"

    def step(self) -> str:
        return self.rng.choices(self.ops, self.weights)[0]()


def readable(src: Path) -> None:
    """Every directory below ``src`` readable again (so that it can be removed)."""
    for d, subdirs, _ in os.walk(src):
        for n in subdirs:
            p = Path(d) / n
            if not p.is_symlink():
                p.chmod(0o755)


def assert_loaders(ds_dir: Path, src: Path, pattern: str) -> None:
    """The dataset holds the loaders' rows, but those of traces whose names are not UTF-8 (the
    loaders read them with U+FFFD in their ids, the dataset leaves them out)."""
    want = expected(src, pattern=pattern)
    want = want.filter(pc.invert(pc.match_substring(want["trace_id"], "\ufffd")))
    got = stored(ds_dir)
    assert got.schema == want.schema
    got, want = _sorted(got), _sorted(want)
    if not got.equals(want):
        pd.testing.assert_frame_equal(got.to_pandas(), want.to_pandas())  # names the first difference
        raise AssertionError("tables differ")


def notes(res: traces.SyncResult) -> tuple[list[Any], list[Any]]:
    return (sorted((n["path"], n["reason"]) for n in res.skipped), sorted((n["path"], n["reason"]) for n in res.new_skipped))


@pytest.mark.parametrize("seed", range(6))
def test_random_changes_sync_as_a_full_listing_does(tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch,
                                                     seed: int) -> None:
    """Random sequences of changes: after each, the dataset synced incrementally holds the loaders'
    rows, and its sync reports what a sync listing the whole folder every time reports."""
    from concurrent.futures import ThreadPoolExecutor

    pattern = PATTERNS[seed % len(PATTERNS)]
    src = small_corpus(tmp_path / "cache")
    inside = seed % 3 == 1
    ds_inc = src / "out" if inside else tmp_path / "inc"
    ds_full = tmp_path / "full"
    changes = Changes(src, 1000 + seed, ds_inc if inside else None)
    whole = {"on": False}
    if seed % 2:  # the directories listed again a few at a time
        monkeypatch.setattr(_scan, "PARTIAL", 1 + seed // 2)
    real_partial = _scan._partial
    monkeypatch.setattr(_scan, "_partial", lambda *a, **k: None if whole["on"] else real_partial(*a, **k))
    ways: list[str] = []
    done: list[str] = []
    try:
        for step in range(13):
            if step > 0:
                done.append(changes.step())
            racy = changes.rng.random() < 0.25
            if not racy:
                time.sleep(RACY_S + 0.05)
            spy.ways.clear()
            with ThreadPoolExecutor(2) as pool:
                got = quiet_sync(src, ds_inc, pattern=pattern, executor=pool)
                ways.append(spy.ways[0] if spy.ways else "copy")
                whole["on"] = True
                want = quiet_sync(src, ds_full, pattern=pattern, executor=pool)
                whole["on"] = False
            where = f"seed {seed}, pattern {pattern!r}, after {done}"
            assert notes(got) == notes(want), where
            if not racy:
                assert (got.converted, got.removed, got.unchanged) == (want.converted, want.removed, want.unchanged), where
            assert got.traces == want.traces, where
            if token(ds_inc):  # the scan's copy, written again or mended in place, is the manifest's records
                assert copy_rows(ds_inc) == manifest_rows(ds_inc), where
            assert_loaders(ds_inc, src, pattern)
    finally:
        readable(src)
    assert "partial" in ways or pattern == "*.json", ways  # (the partial scan was tried)


def test_a_directory_whose_mode_changed_is_listed_again(synced: tuple[Path, Path], spy: Spy) -> None:
    """A ``chmod`` changes a directory's ctime, not its mtime: made unreadable (for anyone but root),
    its traces are not there for the loaders, which report the directory instead: the scan lists it
    again (were it unreadable, the listing would fail and a full one report it)."""
    src, ds_dir = synced
    leaf = src / "gen" / "shard_00" / "agent1"
    assert not [p for p in leaf.iterdir() if p.is_dir()]  # (its traces are stat'ed only through it)
    mtime = leaf.stat().st_mtime_ns
    leaf.chmod(0o700 if leaf.stat().st_mode & 0o777 != 0o700 else 0o750)
    assert leaf.stat().st_mtime_ns == mtime
    res, way, listed = spy.sync(src, ds_dir)
    assert (res.converted, res.removed, way, listed) == (0, 0, "partial", [str(leaf)])
    assert_same(ds_dir, src)


def test_a_file_system_root_is_listed_whole() -> None:
    """Below a file system's root a path is not the root, a separator and a name ("/top.json",
    "D:\\\\top.json"): the traces at its top would be taken both from the copy and from the
    listing of the root; a scan of it always lists it whole."""
    root = os.path.abspath(os.sep)
    assert _scan._partial(root, "**/*.json", None, None, None, {root: 1}, {root: 2}, set(), set(), set()) is None  # type: ignore[arg-type]
