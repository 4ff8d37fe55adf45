"""Names the parts of :mod:`mmsp_notebook.traces` share: the OpenTelemetry column names, the load
warning and the argument types. No pandas import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

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
