"""The first turn's imports, done ahead when the extension loads (``front/warm.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: in a fresh process: what is imported once ``%load_ext`` returned and once the warm-up ended
SCRIPT = """
import json, sys, threading
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
watched = {watched!r}
before = [m for m in watched if m in sys.modules]
ip.run_line_magic("load_ext", "mmsp_notebook")
[thread] = [t for t in threading.enumerate() if t.name == "mmsp-warm-up"]
assert thread.daemon
thread.join(60)
print(json.dumps({{"before": before, "alive": thread.is_alive(), "after": [m for m in watched if m in sys.modules]}}))
"""
WATCHED = ["mmsp.mmsp.client", "openai", "mmsp_notebook.demo._server", "mmsp.integration.tracer", "markdown_it",
           "mmsp_notebook.wire.proxy", "mmsp.openai_official", "anywidget", "ipywidgets"]


def loaded(model: str | None) -> tuple[dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if k != "MMSP_NOTEBOOK_MODEL"}
    if model is not None:
        env["MMSP_NOTEBOOK_MODEL"] = model
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(watched=WATCHED)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    *printed, last = out.stdout.strip().splitlines()
    return json.loads(last), "\n".join(printed) + out.stderr


def test_loading_the_extension_imports_what_a_demo_models_first_turn_needs() -> None:
    result, printed = loaded(None)
    assert result["before"] == [] and result["alive"] is False
    assert set(result["after"]) == {"mmsp.mmsp.client", "openai", "mmsp_notebook.demo._server", "mmsp.integration.tracer",
                                    "markdown_it", "mmsp_notebook.wire.proxy"}  # not the widgets: the main thread's
    assert "Traceback" not in printed


@pytest.mark.parametrize(("model", "client"), [("gpt-5", "mmsp.openai_official"), ("no-such-model-xyz", None)])
def test_another_default_model_warms_its_own_client_and_an_unknown_one_nothing_more(model: str, client: str | None) -> None:
    result, printed = loaded(model)
    assert result["alive"] is False
    after = set(result["after"])
    assert "mmsp_notebook.demo._server" not in after and {"markdown_it", "mmsp_notebook.wire.proxy"} <= after
    assert (client in after) if client else not {"mmsp.mmsp.client", "mmsp.openai_official"} & after
    assert "Traceback" not in printed and "Error" not in printed
