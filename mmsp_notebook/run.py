"""Execute notebooks headless and export them: ``python -m mmsp_notebook.run NOTEBOOK... [--out DIR]``.

Each notebook runs top to bottom in a real kernel (nbclient), offline on the demo model, with a line
per cell as it completes; the executed notebook and an HTML export are written to ``--out`` and their
paths printed. Traces are named after the notebook (``quickstart/default/turn_001`` for
``quickstart.ipynb``), as in JupyterLab. The exit status is non-zero when a cell fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["execute", "main"]


def _first_line(source: str, width: int = 60) -> str:
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def execute(path: str | os.PathLike[str], out_dir: str | os.PathLike[str] = "out", timeout: int = 300,
            kernel_name: str = "python3", progress: TextIO | None = None) -> tuple[Path, Path, object]:
    """Run one notebook; returns the executed notebook's path, its HTML export's path, and the notebook.

    ``progress`` gets a line per code cell as it completes (cell number, seconds, its first line).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    src = Path(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(src, as_version=4)
    # traces of the run go next to its outputs, unless the caller chose a cache directory
    os.environ.setdefault("MMSP_CACHE_DIR", str((out / "cache").absolute()))
    # the kernel names its traces after the notebook, as a notebook server tells it (JPY_SESSION_NAME)
    os.environ["JPY_SESSION_NAME"] = str(src.absolute())
    cells = [c for c in nb.cells if c.cell_type == "code"]
    started: dict[int, float] = {}

    def on_start(cell: Any, cell_index: int) -> None:
        started[cell_index] = time.monotonic()

    def on_executed(cell: Any, cell_index: int, execute_reply: Any = None) -> None:
        if progress is None or cell.cell_type != "code":
            return
        n = cells.index(cell) + 1 if cell in cells else cell_index + 1
        took = time.monotonic() - started.get(cell_index, time.monotonic())
        width = len(str(len(cells)))
        progress.write(f"  [{n:>{width}}/{len(cells)}] {took:5.1f} s  {_first_line(cell.source)}\n")
        progress.flush()

    # the kernel's log at ERROR: its warning about loopback TCP without encryption is noise here
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            resources={"metadata": {"path": str(src.parent.absolute())}},
                            on_cell_start=on_start, on_cell_executed=on_executed)
    client.execute()
    executed = out / src.name
    nbformat.write(nb, executed)
    html, _ = HTMLExporter().from_notebook_node(nb)
    html_path = out / f"{src.stem}.html"
    html_path.write_text(html, encoding="utf-8")
    return executed, html_path, nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmsp_notebook.run", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", help="notebooks to execute")
    parser.add_argument("--out", default="out", help="directory for the executed notebooks and HTML (default: out)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a cell may take (default: 300)")
    args = parser.parse_args(argv)
    status = 0
    for name in args.notebooks:
        started = time.monotonic()
        print(f"running {name}", flush=True)
        try:
            executed, html, _ = execute(name, args.out, args.timeout, progress=sys.stdout)
        except Exception as exc:  # a failing cell: say which notebook and why, go on with the rest
            print(f"FAILED {name}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            status = 1
            continue
        print(f"executed {name} in {time.monotonic() - started:.1f} s")
        print(f"  notebook: {executed}")
        print(f"  HTML:     {html}")
    return status


if __name__ == "__main__":
    sys.exit(main())
