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
{prelude}
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
watched = {watched!r}
before = [m for m in watched if m in sys.modules]
ip.run_line_magic("load_ext", "mmsp_notebook")
now = [m for m in watched if m in sys.modules]
warming = [t for t in threading.enumerate() if t.name == "mmsp-warm-up"]  # (none when it already ended)
assert len(warming) <= 1 and all(t.daemon for t in warming)
for thread in warming:
    thread.join(60)
print(json.dumps({{"before": before, "now": now, "alive": any(t.is_alive() for t in warming),
                  "after": [m for m in watched if m in sys.modules]}}))
"""
WATCHED = ["mmsp.mmsp.client", "openai", "mmsp_notebook.demo._server", "mmsp.integration.tracer", "markdown_it",
           "mmsp_notebook.wire.proxy", "mmsp.openai_official", "anywidget", "ipywidgets"]


def loaded(model: str | None, prelude: str = "") -> tuple[dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MMSP_NOTEBOOK_MODEL", "CLIENT_TYPE")}
    if model is not None:
        env["MMSP_NOTEBOOK_MODEL"] = model
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(watched=WATCHED, prelude=prelude)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    *printed, last = out.stdout.strip().splitlines()
    return json.loads(last), "\n".join(printed) + out.stderr


def test_loading_the_extension_imports_what_a_demo_models_first_turn_needs() -> None:
    result, printed = loaded(None)
    assert result["before"] == [] and result["alive"] is False
    assert set(result["after"]) == {"mmsp.mmsp.client", "openai", "mmsp_notebook.demo._server", "mmsp.integration.tracer",
                                    "markdown_it", "mmsp_notebook.wire.proxy", "anywidget", "ipywidgets"}
    assert {"anywidget", "ipywidgets"} <= set(result["now"])  # the widgets by the main thread, as %load_ext runs
    assert "Traceback" not in printed


@pytest.mark.parametrize(("model", "client"), [("gpt-5", "mmsp.openai_official"), ("no-such-model-xyz", None)])
def test_another_default_model_warms_its_own_client_and_an_unknown_one_nothing_more(model: str, client: str | None) -> None:
    result, printed = loaded(model)
    assert result["alive"] is False
    after = set(result["after"])
    assert "mmsp_notebook.demo._server" not in after and {"markdown_it", "mmsp_notebook.wire.proxy"} <= after
    assert (client in after) if client else not {"mmsp.mmsp.client", "mmsp.openai_official"} & after
    assert "Traceback" not in printed and "Error" not in printed


#: an mmsp whose private helper ``auto_client._client_class`` has another name (AutoLLMClient uses the new one)
RENAMED = """
import inspect, mmsp, mmsp.auto_client as ac
source = inspect.getsource(ac).replace("_client_class", "_class_of_client_type")
del ac._client_class
exec(compile(source, ac.__file__, "exec"), ac.__dict__)
mmsp.AutoLLMClient = ac.AutoLLMClient
"""
#: the private name gone and nothing in its place: AutoLLMClient itself fails (NameError)
MISSING = "import mmsp.auto_client as ac; del ac._client_class"


def _failing(error: str) -> str:
    """An mmsp whose AutoLLMClient raises ``error`` when made."""
    return f"""
import mmsp
class AutoLLMClient:
    def __init__(self, *args, **kwargs):
        raise {error}("changed")
mmsp.AutoLLMClient = AutoLLMClient
"""


@pytest.mark.parametrize("model", [None, "gpt-5"])
def test_the_client_is_warmed_whatever_mmsps_private_names(model: str | None) -> None:
    # mmsp renamed its private helper: the warm-up, through the public AutoLLMClient, still warms the client
    result, printed = loaded(model, RENAMED)
    client = "mmsp.openai_official" if model else "mmsp.mmsp.client"
    assert result["alive"] is False and client in result["after"] and client not in result["before"]
    assert printed == ""


@pytest.mark.parametrize("prelude", [MISSING, _failing("ImportError"), _failing("AttributeError"),
                                     _failing("TypeError"), _failing("RuntimeError")])
def test_a_warm_up_that_cannot_make_the_client_says_nothing_and_warms_the_rest(prelude: str) -> None:
    result, printed = loaded(None, prelude)
    assert result["alive"] is False and printed == ""
    assert "mmsp.mmsp.client" not in result["after"]
    assert {"markdown_it", "mmsp_notebook.wire.proxy", "mmsp_notebook.demo._server"} <= set(result["after"])


#: a fresh kernel's first turn, the modules its main thread imports recorded (an import hook)
FIRST_TURN = [
    "%load_ext mmsp_notebook",
    "import sys, threading\n"
    "class _Spy:\n"
    "    seen = []\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if threading.current_thread() is threading.main_thread():\n"
    "            _Spy.seen.append(name)\n"
    "spy = _Spy()\n"
    "sys.meta_path.insert(0, spy)",
    "%%mmsp -m demo+instant -o t\nhello",
    "sys.meta_path.remove(spy)\nprint(t.status, sorted(set(_Spy.seen)))",
]


def test_a_fresh_kernels_first_turn_imports_nothing_on_the_main_thread() -> None:
    # so that an interrupt of it never lands inside an import (which can leave import locks held)
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in FIRST_TURN]
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    assert nb.cells[-1].outputs[0]["text"].strip() == "complete []"
