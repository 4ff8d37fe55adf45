"""The files of a trace dataset's kind directory (:func:`mmsp_notebook.traces.sync`): the lock that
keeps one sync at a time, the check that a directory is one a sync may write into, and the removal
of what an interrupted sync left.

A data file changed since the last sync left it (its modification time later than the latest
that sync left, :data:`CHECKED` in the manifest's meta) is read whole, its pages checked against
their checksums: bytes overwritten at the file's own size are found so, without reading the
files no one touched.

A sync writes only ``_``- and ``.``-names at the top of the kind's directory (the manifest, its
journal, the lock) and its partitions, ``month=.../model=.../`` directories; it removes nothing
elsewhere but in partition directories (``key=value``: also an earlier version's ``date=...``,
whose files a rebuild leaves unlisted). A directory that exists without a manifest and holds anything else is someone else's,
and is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._errors import SyncBusyError
from ._files import verify
from ._manifest import LOCK_NAME, MANIFEST_NAME
from ._readers import is_missing

__all__ = ["locked", "check_kind_dir", "clean", "stat_of", "CHECKED"]

#: the manifest's meta key of the latest modification time (ns) of the data files a sync left
CHECKED = "files_mtime"


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """One sync of a dataset kind at a time (an advisory lock; none where fcntl is missing): a
    second raises :class:`~mmsp_notebook.SyncBusyError`."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(root / LOCK_NAME, "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SyncBusyError(f"another sync of {root} is running: wait for it to end, then sync again",
                                path=str(root)) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_kind_dir(root: Path) -> None:
    """Refuse a kind directory that exists without a manifest and holds files of its own (a folder
    of traces, another tool's Parquet files): a sync would take them for leftovers and remove them.
    An empty one, or one holding only what a sync stopped before its manifest leaves (the lock),
    is taken."""
    if (root / MANIFEST_NAME).exists():
        return
    try:
        names = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return
    foreign = [n for n in names if not n.startswith(("_", "."))]
    if foreign:
        raise ValueError(
            f"{root} is not a trace dataset (it has no {MANIFEST_NAME}) and holds files a sync did not write "
            f"({foreign[0]!r}{', ...' if len(foreign) > 1 else ''}), which a sync would remove: sync into another "
            "dataset_dir, or move them away (a dataset whose manifest was removed: remove the folder to rebuild it)")


def _partitions(root: Path) -> list[str]:
    """The partition directories at the top of a kind directory: Hive's ``key=value`` names (this
    version's ``month=``, an earlier one's ``date=``), links not followed."""
    try:
        return sorted(e.path for e in os.scandir(root) if "=" in e.name and not e.name.startswith(("_", "."))
                      and e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _data_files(root: Path) -> Iterator[tuple[str, str]]:
    """(relative name, path) of every file below the partition directories."""
    for top in _partitions(root):
        for dirpath, _dirs, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                yield os.path.relpath(p, root).replace(os.sep, "/"), p


def clean(root: Path, known: dict[str, int | None], since: int | None = None) -> set[str]:
    """Remove what an interrupted sync left: temporary files, data files the manifest does not
    list (written by a chunk whose commit never happened), empty partition directories. Returns
    the files the manifest lists that are missing (removed by hand, or lost; one the walk did not
    find, under a linked or unreadable directory, is looked for by name) or damaged, which are
    removed: found with another size than the last sync left (``known``) and no Parquet file any
    more (cut short, overwritten), or modified after ``since`` (ns; None: not checked) and failing
    to read whole (a page failing its checksum). Nothing outside the partition directories is
    touched."""
    found = set()
    damaged = set()
    for name, path in list(_data_files(root)):
        if name not in known:
            os.remove(path)
            continue
        found.add(name)
        size = known[name]
        st = stat_of(path) if size is not None or since is not None else None
        if st is None:
            continue
        if (size is not None and st.st_size != size and not _is_parquet(path)) or \
                (since is not None and st.st_mtime_ns > since and not verify(path)):
            os.remove(path)
            damaged.add(name)
    walks = [w for top in _partitions(root) for w in os.walk(top, topdown=False)]
    for dirpath, _dirs, files in sorted(walks, key=lambda w: -len(w[0])):  # (deepest first)
        if not files:
            try:
                os.rmdir(dirpath)  # (refused while it holds anything)
            except OSError:
                pass
    return damaged | {name for name in known.keys() - found if is_missing(str(root / name))}


def stat_of(path: str | Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _is_parquet(path: str) -> bool:
    """Whether a file's Parquet footer reads (a file rewritten meanwhile, by an interrupted sync
    or another tool, still does)."""
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except PermissionError:
        return True  # (not for this check to say; a reader or the next rewrite will)
    except (OSError, ValueError):  # (ArrowInvalid is a ValueError)
        return False
    return True
