"""The imports a kernel's first turn waits for, done ahead on a daemon thread when the extension loads.

A fresh kernel's first ``%%mmsp`` cell imported, while the user waited, the model's mmsp client
(mmsp's MMSP client brings ``openai`` and ``pydantic``: ~0.8 s), the demo server (``uvicorn``,
``starlette``), mmsp's Tracer (``flask``) and the Markdown renderer: ~1 s of its ~1.3 s. They are
imported here as soon as ``%load_ext mmsp_notebook`` runs, so that a first cell run a moment later
finds them loaded (``bench/bench_first_cell.py``). A cell run at once waits for no more than before:
Python's import locks make it wait for a module being imported, not import it twice.

The widget modules (``anywidget``, ``ipywidgets``) are imported by the kernel's main thread, as
the extension loads (``front/magic.py``): importing ``ipywidgets`` registers its comm target with
the kernel. So the first turn's main thread imports nothing: an interrupt (■) during a fresh
kernel's first turn lands in its wait, never inside an import, where it would leave Python's
import locks held and the kernel's other threads (its output's among them) waiting for ever.
Nothing here is needed: whatever fails to import is left for the turn that needs it, which
imports it again and reports why it cannot.
"""

from __future__ import annotations

import importlib
import threading

from ..engine.session import import_client_class, is_demo_model

__all__ = ["warm_up"]

#: what the first cell imports whatever the model: the HTML view, the wire proxy
ALWAYS = ("mmsp_notebook.views.html", "mmsp_notebook.wire.proxy")
#: what a demo model's first cell imports too: the demo server, and mmsp's Tracer it saves traces with
DEMO = ("mmsp_notebook.demo._server", "mmsp.integration.tracer")


def warm_up(model: str, client_type: str | None = None, base_url: str | None = None) -> threading.Thread:
    """Import, on a daemon thread, what the first turn of ``model`` (the kernel's default, with
    its client type and base URL) needs."""
    thread = threading.Thread(target=_imports, args=(model, client_type, base_url), name="mmsp-warm-up", daemon=True)
    thread.start()
    return thread


def _imports(model: str, client_type: str | None, base_url: str | None) -> None:
    demo = is_demo_model(model) and not base_url  # (as the turn routes it: engine/launch.py)
    for name in ALWAYS + (DEMO if demo else ()):
        try:
            importlib.import_module(name)
        except Exception:  # (the turn that needs it says why)
            continue
    try:  # the Markdown renderer, built once (markdown-it and its rules)
        from ..views.markdown import render_markdown

        render_markdown("")
    except Exception:  # (the turn's view says why)
        pass
    # the model's client class, which mmsp.AutoLLMClient imports when it makes a client of its type
    import_client_class(model, client_type, base_url)
