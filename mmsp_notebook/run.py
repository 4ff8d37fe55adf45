"""Execute notebooks headless and export them: ``python -m mmsp_notebook.run NOTEBOOK... [--out DIR]``.

Each notebook runs top to bottom in a real kernel (nbclient), offline on the demo model; the
executed notebook and an HTML export are written to ``--out`` and their paths printed. The exit
status is non-zero when a cell fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["execute", "main"]


def execute(path: str | os.PathLike[str], out_dir: str | os.PathLike[str] = "out", timeout: int = 300,
            kernel_name: str = "python3") -> tuple[Path, Path, object]:
    """Run one notebook; returns the executed notebook's path, its HTML export's path, and the notebook."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    src = Path(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(src, as_version=4)
    # traces of the run go next to its outputs, unless the caller chose a cache directory
    os.environ.setdefault("MMSP_CACHE_DIR", str((out / "cache").absolute()))
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(src.parent.absolute())}})
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
        try:
            executed, html, _ = execute(name, args.out, args.timeout)
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
