"""What the package promises to install: the notebooks run on what the README installs for them."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_notebooks_extra_covers_every_import_of_the_notebooks():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = {_name(r) for r in project["dependencies"]} | {_name(r) for r in project["optional-dependencies"]["notebooks"]}
    installed |= {"mmsp-notebook", "pil"} if "pillow" in installed else {"mmsp-notebook"}
    stdlib = set(sys.stdlib_module_names)
    installed |= {"numpy"} if "pandas" in installed else set()  # pandas requires it
    missing = set()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                m = re.match(r"\s*(?:from|import)\s+([A-Za-z_][\w]*)", line)
                if m:
                    module = m.group(1).lower().replace("_", "-")
                    if module not in stdlib and module not in installed and module != "mmsp":
                        missing.add(f"{path.name}: {m.group(1)}")
    assert not missing, missing
    assert "'.[notebooks]'" in (ROOT / "Makefile").read_text() and ".[notebooks]" in (ROOT / "README.md").read_text()


def test_the_package_says_it_is_typed_and_ships_its_front_end():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = project["tool"]["setuptools"]["package-data"]["mmsp_notebook"]
    assert "py.typed" in data and (ROOT / "mmsp_notebook" / "py.typed").exists()
    for name in ("turn.js", "chat.js", "compare.js", "katex.js", "widget.css"):
        assert (ROOT / "mmsp_notebook" / "static" / name).stat().st_size > 0


@pytest.mark.parametrize("name", ["turn.js", "chat.js", "compare.js", "explore.js"])
def test_the_widget_bundles_leave_katex_out(name):
    """KaTeX is static/katex.js, loaded on first use: a widget's ESM, saved with every widget, stays small."""
    code = (ROOT / "mmsp_notebook" / "static" / name).read_bytes()
    assert b"KaTeX parse error" not in code and b"mathbb" not in code, f"{name} carries KaTeX"
    assert len(code) < 200_000, f"{name}: {len(code):,} bytes"
    assert b"KaTeX parse error" in (ROOT / "mmsp_notebook" / "static" / "katex.js").read_bytes()
