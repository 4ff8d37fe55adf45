"""What :func:`mmsp_notebook.traces.sync` did: its :class:`SyncResult`, and the warnings that tell
of the trace files it left out and the data files it rebuilt."""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ._common import TraceLoadWarning
from ._convert import DAMAGED

__all__ = ["SyncResult", "warn"]


@dataclass
class SyncResult:
    """What :func:`sync` did. ``skipped`` names every trace file the dataset leaves out (as
    ``df.attrs["skipped"]`` of the loaders), ``new_skipped`` those found in this run."""

    kind: str
    path: Path
    converted: int = 0
    removed: int = 0
    unchanged: int = 0
    #: data files whose ``cost`` columns were recomputed for new prices (no trace read again)
    repriced: int = 0
    traces: int = 0
    rows: int = 0
    files: int = 0
    seconds: float = 0.0
    skipped: list[dict[str, str]] = field(default_factory=list)
    new_skipped: list[dict[str, str]] = field(default_factory=list)
    #: data files (names in the kind directory) found missing or damaged, whose traces were
    #: converted again from their trace files
    rebuilt: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"<SyncResult {self.kind}: {self.converted} traces converted, {self.removed} removed, "
            f"{self.unchanged} unchanged; {f'{self.repriced} files repriced; ' if self.repriced else ''}"
            f"{f'{len(self.rebuilt)} damaged or missing files rebuilt; ' if self.rebuilt else ''}"
            f"{self.traces} traces, {self.rows:,} rows in {self.files} files; "
            f"{len(self.skipped)} skipped; {self.seconds:.2f} s>"
        )


def warn(result: SyncResult, n: int) -> None:
    """The warnings of a sync's result (``n``: the trace files it read): trace files skipped in
    this run, data files rebuilt."""
    if result.new_skipped:
        _warn_skipped(result.new_skipped, n)
    if result.rebuilt:
        more = f" and {len(result.rebuilt) - 1} more" if len(result.rebuilt) > 1 else ""
        warnings.warn(f"mmsp_notebook.traces.sync: data files of {result.path} were missing or damaged "
                      f"({result.rebuilt[0]}{more}): removed, and the traces with rows in them converted again from "
                      "their trace files; see the result's .rebuilt", TraceLoadWarning, stacklevel=3)


def _warn_skipped(skipped: list[dict[str, str]], n: int) -> None:
    n_damaged = sum(1 for s in skipped if s["reason"].startswith(DAMAGED))
    n_skip = len(skipped) - n_damaged
    kinds = Counter(s["reason"].split(":")[0] for s in skipped if not s["reason"].startswith(DAMAGED))
    detail = "; ".join(f"{k} {r}" for r, k in kinds.most_common())
    parts = [f"skipped {n_skip} of {n} trace files ({detail})"] if n_skip else []
    if n_damaged:
        parts.append(f"{n_damaged} damaged timing sidecars (their readable lines were used)")
    warnings.warn(
        f"mmsp_notebook.traces.sync: {'; '.join(parts)}; see the result's .skipped for paths and reasons",
        TraceLoadWarning,
        stacklevel=4,
    )


