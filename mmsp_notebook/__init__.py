"""mmsp_notebook: the Jupyter integration of MMSP, the Model Message Stream Protocol."""

from ._errors import DemoServerError, MMSPNotebookError, OptionError, ProtocolError, TurnError
from ._state import ItemState, ToolRun, TurnState

__version__ = "0.1.0"

__all__ = [
    "DemoServerError",
    "ItemState",
    "MMSPNotebookError",
    "OptionError",
    "ProtocolError",
    "ToolRun",
    "TurnError",
    "TurnState",
    "__version__",
]
