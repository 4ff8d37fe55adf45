"""The suite's own split: ``make test`` runs the tests that can share the machine on two pytest-xdist
workers, then the browser tests and those marked ``serial`` in one process. Every test must be in
exactly one of the two runs, and no browser test in the first."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parent.parent


def _selections() -> dict[str, str]:
    """The Makefile's two ``-m`` selections, by variable name."""
    found = dict(re.findall(r"^(PARALLEL|SERIAL) := (.+)$", (ROOT / "Makefile").read_text(), re.M))
    assert set(found) == {"PARALLEL", "SERIAL"}, found
    return found


def _selects(expression: Expression, carried: tuple[str, ...]) -> bool:
    """Whether ``-m expression`` selects a test that carries the markers ``carried``."""
    return expression.evaluate(lambda name, /, **_: name in carried)


def test_every_test_is_in_exactly_one_of_the_two_runs() -> None:
    selections = _selections()
    parallel, serial = (Expression.compile(selections[name]) for name in ("PARALLEL", "SERIAL"))
    markers = ("browser", "serial", "parametrize", "timeout")  # (and any other marker a test carries)
    for k in range(len(markers) + 1):
        for carried in itertools.combinations(markers, k):
            assert _selects(parallel, carried) != _selects(serial, carried), carried
    target = re.search(r"^test:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.M | re.S)
    assert target is not None
    recipe = target.group(0)
    assert '-m "$(PARALLEL)"' in recipe and '-m "$(SERIAL)"' in recipe and "-n 2" in recipe


def test_both_markers_are_registered() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert {line.split(":")[0] for line in config["markers"]} >= {"browser", "serial"}


def test_a_test_on_the_shared_browser_is_marked_browser(request: pytest.FixtureRequest) -> None:
    """The browser fixtures (tests/test_browser.py) share one JupyterLab and one Chromium per process:
    a test that asks for them without the marker would run beside the others."""
    unmarked = [item.nodeid for item in request.session.items
                if "sync_playwright_mod" in getattr(item, "fixturenames", ()) and item.get_closest_marker("browser") is None]
    assert unmarked == []


def test_the_executed_traces_notebook_is_used_in_one_module(request: pytest.FixtureRequest) -> None:
    """``--dist loadfile`` gives each module to one worker: the session fixture that executes
    notebooks/traces.ipynb (~40 s) runs once only while the tests using it share a module."""
    using = {item.path.name for item in request.session.items if "traces_notebook" in getattr(item, "fixturenames", ())}
    assert len(using) <= 1, using


def test_a_notebook_whose_kernel_lost_its_port_starts_it_again_and_nothing_else_is_retried():
    import conftest

    calls = []

    class Client:
        owns_km = True
        km = kc = "the first kernel's"

    def execute(self, fail=("lost",)):
        calls.append((self.km, self.kc))
        if len(calls) <= len(fail):
            raise RuntimeError(conftest.KERNEL_LOST_ITS_PORT if fail[len(calls) - 1] == "lost" else "a cell failed")
        return "executed"

    assert conftest._start_retried(execute)(Client()) == "executed"
    assert calls == [("the first kernel's", "the first kernel's"), (None, None)]  # a new kernel manager: new ports
    calls.clear()
    with pytest.raises(RuntimeError, match="a cell failed"):
        conftest._start_retried(execute)(Client(), fail=("other",))
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(RuntimeError, match=conftest.KERNEL_LOST_ITS_PORT):
        conftest._start_retried(execute)(Client(), fail=("lost",) * 3)
    assert len(calls) == 3
