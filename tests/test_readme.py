"""The README's Python blocks run, in order, in a real kernel on the demo model, and say what they promise."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from helpers import html_of, text_of
from nbclient import NotebookClient

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    # blocks fenced ```python run here; those fenced ```py need what a laptop lacks (a cluster, Spark)
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    blocks = python_blocks()
    assert len(blocks) >= 6 and blocks[0].strip() == "%load_ext mmsp_notebook"
    monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", "cache")  # relative to the notebook, where the README reads traces
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(block) for block in blocks]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = {block.strip().splitlines()[0]: cell for block, cell in zip(blocks, nb.cells)}
    assert 'data-status="complete"' in html_of(shown["%%mmsp -o answer"])
    compare = html_of(shown["%%mmsp -m demo,demo+tps=200,demo+nothink,demo+error -o cmp"])
    assert compare.count('<section class="mmsp-column" aria-label=') == 4
    assert "<table" in html_of(shown["from mmsp_notebook import traces"]) or text_of(shown["from mmsp_notebook import traces"])
    assert (tmp_path / "turns.parquet").stat().st_size > 0
