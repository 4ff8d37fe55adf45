"""The first ``%%mmsp`` cell of a fresh kernel: how long it takes when it is run right after
``%load_ext mmsp_notebook`` and when the user pauses first (as when reading the notebook).

    .venv/bin/python bench/bench_first_cell.py [--rounds N]

Each round starts two fresh kernels, one per case, alternating which goes first; the cell's time is
the kernel's (``shell.execute_reply`` minus ``iopub.execute_input``). Prints medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
from datetime import datetime

import nbformat
from nbclient import NotebookClient

CELL = "%%mmsp --model demo+tps=100000+delay=0\nhello"


def first_cell(pause: float) -> float:
    """Seconds the first ``%%mmsp`` cell took in a fresh kernel, ``pause`` s after ``%load_ext``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext mmsp_notebook"),
                nbformat.v4.new_code_cell(f"import time; time.sleep({pause})"),
                nbformat.v4.new_code_cell(CELL)]
    NotebookClient(nb, kernel_name="python3", timeout=120, record_timing=True).execute()
    cell = nb.cells[2]
    assert not [o for o in cell.outputs if o.get("output_type") == "error"], cell.outputs
    timing = cell.metadata["execution"]

    def at(key: str) -> datetime:
        return datetime.fromisoformat(timing[key].replace("Z", "+00:00"))
    return (at("shell.execute_reply") - at("iopub.execute_input")).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times: dict[float, list[float]] = {0.0: [], 3.0: []}
    for r in range(args.rounds):
        for pause in (0.0, 3.0) if r % 2 == 0 else (3.0, 0.0):
            times[pause].append(first_cell(pause))
    now, later = (statistics.median(times[p]) for p in (0.0, 3.0))
    print(f"first %%mmsp cell, median of {args.rounds} fresh kernels each: "
          f"right after %load_ext {now * 1000:.0f} ms, after a 3 s pause {later * 1000:.0f} ms "
          f"({now / later:.2f}x); second cells not measured")
    for p in (0.0, 3.0):
        print(f"  pause {p:.0f} s: " + ", ".join(f"{t * 1000:.0f}" for t in times[p]) + " ms")


if __name__ == "__main__":
    main()
