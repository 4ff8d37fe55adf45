"""Which copy of a repeated message a trace dataset shows (:func:`mmsp_notebook.traces.sync`).

The rule is the loaders': of the units (turns, or messages for items) sharing a fingerprint, the
first by (preference, trace id, message index) is shown. A chunk applies it to its own units as
it converts them (``_convert._dedupe``); the manifest applies it across chunks and syncs:

* :func:`settle_chunk`, before a chunk of an incremental sync is committed (or the traces whose
  rows a sync replaces, a window of them at a time): of each message it
  shares with the units the dataset shows, the losing copy is hidden there and then — dropped
  from the chunk's own files (no reader of the manifest lists them yet), or, when the dataset's
  copy loses, removed from its files (marked :data:`~._manifest.HIDING` first) and recorded hidden
  in the chunk's transaction. A reader of the manifest never sees such a message twice.
* :func:`resolve`, at the end of every sync: whatever is still wrong (a first sync's copies,
  copies shown again when the copy that won went away, a sync stopped half-way) is set right.
"""

from __future__ import annotations

import os
from typing import Any

from ._files import DamagedFiles, rewrite
from ._manifest import HIDING
from ._scan import AGAIN

__all__ = ["settle_chunk", "resolve", "Settled"]

Unit = tuple[int, str, int, int, int]  # fp, trace id, message index, preference, shown


class Settled:
    """What :func:`settle_chunk` changed: the dataset's units it hid and the rows left in the files
    it rewrote, to record in the chunk's transaction (then ``sync._emptied(left)``)."""

    def __init__(self) -> None:
        self.hidden: list[tuple[str, int]] = []
        self.left: dict[str, int] = {}


def settle_chunk(sync: Any, files: list[tuple[str, int, list[str]]], units: list[Unit], replaced: frozenset[str] = frozenset(),
                 emptied: frozenset[str] = frozenset()) -> tuple[list[tuple[str, int, list[str]]], list[Unit], Settled]:
    """The chunk's files and units once its copies of messages the dataset shows are settled (see
    the module docstring); nothing to do in a first sync, whose copies :func:`resolve` settles.
    ``replaced``: traces whose earlier rows the chunk replaces (their units still in the manifest,
    their rows gone from the files), not copies to settle against; ``emptied``: files left with
    none of their rows (still there until the manifest stops listing them), not rewritten."""
    done = Settled()
    m = sync.m
    if not units or m.meta().get("resolve_all"):
        return files, units, done
    drop: set[tuple[str, int]] = set()  # the chunk's copies that lose
    mine: dict[int, Unit] = {}
    for u in units:  # (the units of chunks put together, as replace() does, may share a message)
        if u[4]:
            other = mine.setdefault(u[0], u)
            if other is not u:
                win, lose = (u, other) if (u[3], u[1], u[2]) < (other[3], other[1], other[2]) else (other, u)
                mine[u[0]] = win
                drop.add((lose[1], lose[2]))
    theirs = m.shown_units(list(mine))
    if replaced:
        theirs = {fp: others for fp, copies in theirs.items() if (others := [c for c in copies if c[0] not in replaced])}
    if not theirs and not drop:
        return files, units, done
    fps: list[int] = []  # (of the dataset's copies that lose)
    for fp, copies in theirs.items():
        u = mine[fp]
        best = min((pref, tid, mi) for tid, mi, pref in copies)
        keep: tuple[Any, ...] | None = None  # the dataset's copy kept shown (None: the chunk's wins)
        if best < (u[3], u[1], u[2]):
            keep = best
            drop.add((u[1], u[2]))
        # every other copy of the dataset whose rows may be in the files (shown, or hidden half-way)
        lost = [(tid, mi) for tid, mi, pref in copies if (pref, tid, mi) != keep]
        if lost:
            done.hidden.extend(lost)
            fps.append(fp)
    if drop:
        units = [(fp, t, mi, p, 0 if (t, mi) in drop else k) for fp, t, mi, p, k in units]
        kind, root = sync.options["kind"], str(sync.root)
        kept_files = []
        for name, n, tids in files:
            mine_here = [key for key in drop if key[0] in tids]
            left = rewrite(root, name, kind, [], mine_here) if mine_here else n
            if isinstance(left, str):  # UNREADABLE (written a moment ago, listed nowhere yet)
                raise DamagedFiles([name])
            if left:
                kept_files.append((name, left, tids))
            else:  # (listed nowhere yet)
                os.remove(os.path.join(root, name))
        files = kept_files
    if done.hidden:  # (stopped before the chunk's commit, the next sync decides again)
        done.left = _hide(sync, done.hidden, fps, emptied)
    return files, units, done


def _hide(sync: Any, units: list[tuple[str, int]], fps: list[int] | None = None, emptied: frozenset[str] = frozenset()
          ) -> dict[str, int]:
    """Remove these units' rows from the files holding them, once the manifest has marked them
    :data:`~._manifest.HIDING` (and their fingerprints pending, when given); file -> rows left, for
    the transaction that records them hidden. Files in ``emptied`` (left with no rows, removed once
    no longer listed) are not read."""
    m = sync.m
    with m.transaction() as db:
        m.set_kept(db, units, HIDING)
        if fps:
            m.add_pending(db, fps)
    by_trace: dict[str, list[tuple[str, int]]] = {}
    for t, mi in units:
        by_trace.setdefault(t, []).append((t, mi))
    return sync._rewrite({name: ([], [u for t in tids for u in by_trace[t]]) for name, tids in m.files_of(by_trace).items()
                          if name not in emptied})


def resolve(sync: Any) -> None:
    """Show one copy of every repeated message: hide the copies that lost, convert again the
    traces holding a copy that now wins (its winner changed or went away)."""
    m = sync.m
    for _ in range(8):  # converges in one or two rounds; the bound guards against a bug
        hide, show = m.flips()
        if not hide and not show:
            break
        if hide:
            left = _hide(sync, hide)  # (stopped before the end, the next sync hides them again)
            with m.transaction() as db:
                m.set_rows(db, left)
                m.set_kept(db, hide, 0)
            sync._emptied(left)
        if show:
            shown = set(show)
            tids = sorted({t for t, _ in show})
            hidden = m.hidden(tids)
            keep_hidden = {t: [mi for mi in hidden.get(t, []) if (t, mi) not in shown] for t in tids}
            m.todo_again(tids, AGAIN)  # as recorded, before they are forgotten
            sync.remove(tids)
            sync.convert(AGAIN, {t: v for t, v in keep_hidden.items() if v})
    with m.transaction() as db:
        m.clear_pending(db)
