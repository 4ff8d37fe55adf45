"""Names the parts of :mod:`mmsp_notebook.traces` share: the OpenTelemetry column names, the load
warning, the argument types, and the check that a row's trace id names one conversation. No pandas
import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from .._errors import OptionError, OptionTypeError, TraceError
from ..core.flags import check_flag
from ..core.redact import redact
from ..core.store import MAX_FILE_SIZE

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PathLike: TypeAlias = "str | os.PathLike[str]"
Paths: TypeAlias = "PathLike | Iterable[PathLike]"
#: anything ``pandas.Timestamp`` accepts (naive means UTC)
TimeLike: TypeAlias = "str | int | float | pd.Timestamp | Any"


#: Column name -> OpenTelemetry GenAI semantic-convention attribute name (``otel=True``).
OTEL_COLUMNS: dict[str, str] = {
    "trace_id": "gen_ai.conversation.id",
    "model": "gen_ai.request.model",
    "client_type": "gen_ai.provider.name",
    "finish_reason": "gen_ai.response.finish_reasons",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "thoughts_tokens": "gen_ai.usage.reasoning.output_tokens",
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "error_type": "error.type",
    "latency": "gen_ai.client.operation.duration",
    "ttft": "gen_ai.server.time_to_first_token",
}

FROM_OTEL = {v: k for k, v in OTEL_COLUMNS.items()}


class TraceLoadWarning(UserWarning):
    """Some files could not be loaded; ``df.attrs["skipped"]`` names them with the reason."""


def plain(turns: Any) -> Any:
    """A frame with this package's column names (undoes ``otel=True``)."""
    if any(c in FROM_OTEL for c in turns.columns):
        return turns.rename(columns=FROM_OTEL)
    return turns


def check_unique(trace_id: str, attrs: Mapping[str, Any]) -> None:
    """Raise TraceError when a frame's ``attrs`` say ``trace_id`` names several conversations (the
    same trace id under several directories loaded at once): which one a row is, the frame cannot say."""
    where = (attrs.get("repeated_trace_ids") or {}).get(trace_id)
    if where:
        raise TraceError(redact(f"trace id {trace_id} names several conversations ({', '.join(map(str, where))}): load, "
                                "show, replay or explore each directory on its own"), path=str(where[0]),
                         reason="a trace id of several conversations")


def check_flags(**flags: Any) -> None:
    """Refuse a switch that is not True or False (``progress`` may be None: tqdm's own choice):
    ``dedupe="no"`` or ``otel="false"`` would be taken as true."""
    for name, value in flags.items():
        check_flag(name, value, none="" if name == "progress" else None)


def check_max_size(max_size: Any) -> None:
    """Refuse a ``max_size`` that is not a number of bytes (an int >= 0)."""
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 0:
        raise OptionError(f"max_size must be a number of bytes (an int >= 0), not {max_size!r}")


def max_size_of(options: Mapping[str, Any]) -> int:
    """The ``max_size`` a dataset's options hold (None stands for the default; 0 is a limit too)."""
    size = options.get("max_size")
    return MAX_FILE_SIZE if size is None else int(size)


def dir_path(value: Any, name: str) -> str:
    """A directory argument as text (bytes decoded as the loaders decode them, ``~`` expanded); an
    empty one, which would be the working directory, is refused as the loaders refuse it."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise OptionTypeError(f"{name} takes a directory path, not {type(value).__name__} {value!r}")
    path = os.fsdecode(os.fspath(value))
    if not path:
        raise OptionError(f"{name} is an empty path: give a directory (\".\" for the working directory)")
    return os.path.expanduser(path)  # (a leading ~ is the home directory, as the loaders take it)
