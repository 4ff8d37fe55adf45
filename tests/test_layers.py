"""The package's layers, read from its own imports: one-way, no circle, and a face with a true ``__all__``.

Every ``import`` of every module counts, also those inside functions (a lazy import is still a
dependency). The few edges that run up on purpose are listed in ``BACK_EDGES`` with their reason.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import mmsp_notebook

PKG = Path(mmsp_notebook.__file__).parent
NAME = "mmsp_notebook"

# (importer, imported): edges that run up a layer on purpose. A Turn or a Wire shown as a cell's value
# needs none: it goes through formatters the views register with IPython.
BACK_EDGES = {
    # the trace explorer's Replay button plays the selected turn as mmsp_notebook.replay does, taken when pressed
    ("mmsp_notebook.traces._explore", "mmsp_notebook.front.replay"),
}

HEAVY = ("IPython", "anywidget", "ipywidgets", "pandas")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from . import x`` gives the submodule when it is one)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            for alias in node.names:  # `from . import worker` names a module
                candidate = f"{target}.{alias.name}"
                if candidate.startswith(NAME) and _is_module(candidate):
                    out.add(candidate)
    return out


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (PKG / rel).with_suffix(".py").exists() or (PKG / rel / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in PKG.rglob("*.py"):
        graph[_module_name(path)] = _imports(path)
    return graph


GRAPH = _graph()


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _internal(targets: set[str]) -> set[str]:
    return {t for t in targets if t == NAME or t.startswith(NAME + ".")}


# layer -> layers it must never import (the package's own), and whether the heavy front-end libraries are barred
RULES: dict[str, tuple[set[str], bool]] = {
    "core": ({"engine", "views", "front", "wire", "traces", "demo"}, True),
    "engine": ({"views", "front", "traces", "demo"}, True),
    "views": ({"engine", "front", "traces", "demo"}, False),
    "wire": ({"engine", "views", "front", "traces", "demo"}, True),
    "demo": ({"engine", "views", "front", "traces"}, True),
    "traces": ({"engine", "front", "demo", "views"}, False),
}
# plotting and the explorer (its detail pane and pickers too) may draw with the views' look; everything
# else in traces stays below the views
TRACES_MAY_USE_VIEWS = {"mmsp_notebook.traces._plot", "mmsp_notebook.traces._show", "mmsp_notebook.traces._explore",
                        "mmsp_notebook.traces._detail", "mmsp_notebook.traces._facets"}


def test_the_graph_was_read():
    assert len(GRAPH) > 30
    assert "mmsp_notebook.core.state" in GRAPH and "mmsp_notebook.front.magic" in GRAPH
    assert "mmsp_notebook.core.state" in GRAPH["mmsp_notebook.engine.stream"] or any(
        t.startswith("mmsp_notebook.core") for t in GRAPH["mmsp_notebook.engine.stream"])


@pytest.mark.parametrize("layer", sorted(RULES))
def test_each_layer_imports_only_what_it_may(layer):
    barred, no_heavy = RULES[layer]
    broken = []
    for module, targets in sorted(GRAPH.items()):
        if _layer(module) != layer:
            continue
        for target in sorted(targets):
            if (module, target) in BACK_EDGES:
                continue
            if target.startswith(NAME + ".") and _layer(target) in barred:
                if layer == "traces" and _layer(target) == "views" and module in TRACES_MAY_USE_VIEWS:
                    continue
                broken.append(f"{module} -> {target}")
            if no_heavy and target.split(".")[0] in HEAVY:
                broken.append(f"{module} -> {target}")
    assert not broken, "layer rule broken:\n" + "\n".join(broken)


def test_the_core_does_not_load_front_end_libraries_when_imported():
    import subprocess
    import sys

    code = ("import sys, mmsp_notebook, mmsp_notebook.core.turn, mmsp_notebook.core.state, mmsp_notebook.engine.launch;"
            "print(sorted(m for m in ('IPython','anywidget','ipywidgets','pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    graph = {m: {t for t in _internal(ts) if (m, t) not in BACK_EDGES and t != NAME} for m, ts in GRAPH.items()}
    # a package's face re-exports its modules: an edge into an __init__ is an edge into that package
    assert _cycles(graph) == []


def test_the_rule_checker_finds_a_break():
    graph = {"mmsp_notebook.core.a": {"mmsp_notebook.views.b"}, "mmsp_notebook.views.b": {"mmsp_notebook.core.a"}}
    assert _cycles(graph) == [["mmsp_notebook.core.a", "mmsp_notebook.views.b"]]
    barred, _ = RULES["core"]
    assert _layer("mmsp_notebook.views.b") in barred


def test_every_module_imports():
    for info in pkgutil.walk_packages(mmsp_notebook.__path__, NAME + "."):
        importlib.import_module(info.name)


def test_the_public_face():
    assert sorted(mmsp_notebook.__all__) == sorted(set(mmsp_notebook.__all__)), "duplicates in __all__"
    for name in mmsp_notebook.__all__:
        assert getattr(mmsp_notebook, name) is not None, name
        assert name in dir(mmsp_notebook), name
    for lazy in ("Chat", "TurnView", "replay", "ask", "aask", "usage_frame"):
        assert lazy in mmsp_notebook.__all__ and lazy in dir(mmsp_notebook)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mmsp_notebook.nope  # noqa: B018
    from mmsp_notebook import _errors

    for name in _errors.__all__:
        error = getattr(_errors, name)
        assert issubclass(error, _errors.MMSPNotebookError) and name in mmsp_notebook.__all__
        # and each has its place in the hierarchy the module's docstring draws
        assert re.search(rf"(?m)^[ │├└─]*{name}\s", _errors.__doc__ or ""), f"{name} is not in _errors' hierarchy"
    # the trace datasets' errors are there too, RuntimeErrors as they were before they had classes of their own
    from mmsp_notebook.traces import _folder, _manifest

    for name in ("ManifestError", "SyncBusyError"):
        assert name in mmsp_notebook.__all__ and issubclass(getattr(mmsp_notebook, name), RuntimeError)
    assert _manifest.ManifestError is mmsp_notebook.ManifestError and _folder.SyncBusyError is mmsp_notebook.SyncBusyError


def test_modules_stay_small_or_say_why():
    big = []
    for path in PKG.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > 650:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            if "long because" not in doc.lower():
                big.append(f"{path.relative_to(PKG)}: {lines} lines")
    assert not big, big
