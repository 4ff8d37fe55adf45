"""mmsp_notebook: the Jupyter integration of MMSP, the Model Message Stream Protocol.

``%load_ext mmsp_notebook`` registers ``%%mmsp`` and ``%mmsp``; ``ask``/``aask`` run a turn from
Python; ``Chat`` is the chat widget; ``mmsp_notebook.traces`` loads traces into pandas;
``mmsp_notebook.demo.DemoServer`` is the offline demo model server. The core (turn state, views,
engine) imports without IPython, widgets or pandas.
"""

from typing import Any

from ._errors import (
    BusyError,
    DemoServerError,
    IdleTimeoutError,
    LoopBlockedError,
    ManifestError,
    MMSPNotebookError,
    NotAnEventStreamError,
    OptionError,
    OptionTypeError,
    ProtocolError,
    SyncBusyError,
    TraceError,
    TraceNotFoundError,
    TurnError,
)
from .core.state import ItemState, ToolRun, TurnState
from .core.turn import Turn
from .engine.options import provide_demo_model_check
from .engine.session import provide_local_server

__version__ = "0.1.0"

__all__ = [
    "BusyError",
    "Chat",
    "Comparison",
    "DemoServerError",
    "IdleTimeoutError",
    "ItemState",
    "LoopBlockedError",
    "MMSPNotebookError",
    "ManifestError",
    "NotAnEventStreamError",
    "OptionError",
    "OptionTypeError",
    "ProtocolError",
    "SyncBusyError",
    "ToolRun",
    "TraceError",
    "TraceNotFoundError",
    "Turn",
    "TurnError",
    "TurnState",
    "TurnView",
    "__version__",
    "aask",
    "ask",
    "compare",
    "load_ipython_extension",
    "replay",
    "usage_frame",
]

# the front doors load what they need (IPython, anywidget, pandas) only when asked for
_LAZY = {
    "Chat": ".front.chat",
    "TurnView": ".views.widget",
    "replay": ".front.replay",
    "ask": ".front.ask",
    "aask": ".front.ask",
    "usage_frame": ".front.frames",
    "compare": ".front.compare",
    "Comparison": ".front.compare",
}


EMBEDDED_TRANSCRIPTS = 8


def _start_demo_server(instant: bool) -> Any:
    # the demo models' server; the engine does not import the demo package, so it is handed this
    from .demo import DemoServer

    # a kernel's server keeps the records of its last few requests only (each holds the request's whole
    # history and the bytes sent): its memory does not grow with the turns of a long session
    return DemoServer(instant=instant, max_transcripts=EMBEDDED_TRANSCRIPTS).start()


provide_local_server(_start_demo_server)


def _check_demo_model(name: str) -> None:
    # a demo model's name read as the demo server reads it (a bad one is refused where it is given)
    from .demo import parse_model

    parse_model(name)


provide_demo_model_check(_check_demo_model)


def __getattr__(name: str) -> Any:
    # the widget classes import anywidget; load them only when asked for
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'mmsp_notebook' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext mmsp_notebook``: register ``%%mmsp`` and ``%mmsp``."""
    from .front.magic import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .front.magic import unload_ipython_extension as unload

    unload(ipython)
