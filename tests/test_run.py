"""Headless runs (``make demo``, ``python -m mmsp_notebook.run``): progress per cell, clean output, traces
named after the notebook."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat


def test_a_headless_run_shows_each_cell_and_names_traces_after_the_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "%load_ext mmsp_notebook", "%%mmsp\nhello", "%%mmsp\nand again", "x = 1")]
    path = tmp_path / "tour.ipynb"
    nbformat.write(nb, path)
    env = {**os.environ, "MMSP_NOTEBOOK_DEMO_INSTANT": "1"}
    env.pop("MMSP_CACHE_DIR", None)
    env.pop("JPY_SESSION_NAME", None)
    done = subprocess.run([sys.executable, "-m", "mmsp_notebook.run", str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"running {path}"
    assert [ln.split("]")[0].strip() for ln in lines[1:5]] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert "%%mmsp" in lines[2] and " s " in lines[2]
    assert "TCP" not in done.stderr and "WARNING" not in done.stderr, done.stderr
    traces = sorted(p.name for p in (tmp_path / "out" / "cache" / "tour").glob("*.json"))
    assert traces == ["default.json"]  # one trace per conversation, both turns in it
    assert (tmp_path / "out" / "tour.html").stat().st_size > 0


def test_a_failing_cell_fails_the_run_and_says_which_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("1 / 0")]
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, "-m", "mmsp_notebook.run", str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 1
    assert f"FAILED {path}: CellExecutionError" in done.stderr and "ZeroDivisionError" in done.stderr
