"""DataFrames of what a kernel did: turns and their usage, the models on offer, a conversation's history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.chars import isolate
from ..core.redact import redact_secrets, redact_value
from ..core.turn import Turn

__all__ = ["usage_frame", "typed_frame", "models_frame", "history_frame"]


#: the dtype of each column of the turns frames (``%mmsp usage``, ``chat.turns``, ``Comparison.frame``), as
#: ``traces.load_turns`` types its columns: nullable integers, categories of text, strings, and times, speeds
#: and costs as ``float64`` (missing = NaN), as its ``latency``, ``ttft``, ``tokens_per_s`` and ``cost`` are
_TURN_DTYPES = {
    "turn": "str", "chat": "str", "model": "category", "client_type": "category", "status": "category",
    "finish_reason": "category", "steps": "int64", "cached_tokens": "Int64", "prompt_tokens": "Int64",
    "thoughts_tokens": "Int64", "response_tokens": "Int64", "ttft_s": "float64", "total_s": "float64",
    "tokens_per_s": "float64", "cost": "float64", "text_chars": "Int64", "tool_calls": "Int64", "error": "str",
    "trace_id": "str", "comparison": "category",
}


def typed_frame(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Any:
    """A DataFrame of ``rows`` with :data:`_TURN_DTYPES`' dtypes, also when there is no row (a new chat's
    turns): categories sorted and of text as ``traces.load_turns`` makes them (none for a column
    without a value), text in pandas' string dtype (missing = NA)."""
    import pandas as pd

    from ..traces._columns import cat_col, str_col

    data: dict[str, Any] = {}
    for col in columns:
        values = [row.get(col) for row in rows]
        kind = _TURN_DTYPES[col]
        if kind == "category":
            data[col] = cat_col(values)
        elif kind == "str":
            data[col] = str_col(values)
        else:
            data[col] = pd.array(values, dtype=kind)
    return pd.DataFrame(data, columns=list(columns))


def usage_frame(turns: Sequence[Turn | dict[str, Any]]) -> Any:
    """A DataFrame of turns (or of the session's usage rows): tokens per bucket, cost, latency (pandas imported here only)."""
    from ..engine.session import usage_row

    rows = [turn if isinstance(turn, dict) else usage_row(turn) for turn in turns]
    return typed_frame(rows, ["turn", "chat", "model", "client_type", "status", "finish_reason", "steps",
                              "cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens", "ttft_s",
                              "total_s", "tokens_per_s", "cost", "trace_id"])


def models_frame(aliases: Any = None) -> Any:
    """The aliases of this kernel, the demo models and mmsp's registry, with prices per million tokens."""
    import mmsp
    import pandas as pd

    rows = [redact_value({"model": name, "client": alias.client_type or "(by model)",
                             "base_url": alias.base_url or "(default)", "input": "", "output": f"alias for {alias.spec()}"})
            for name, alias in (aliases or {}).items()]
    rows += [
        {"model": "demo", "client": "mmsp (demo server)", "base_url": "(embedded)", "input": "text, image",
         "output": "thinking, text, tool calls, image, audio"},
        {"model": "demo-embed", "client": "mmsp (demo server)", "base_url": "(embedded)", "input": "text",
         "output": "embedding"},
    ]
    for entry in mmsp.list_supported_models():
        pricing = entry.get("pricing") or {}
        rows.append({
            "model": entry["model"], "client": entry["client"], "base_url": entry["base_url"],
            "input": ", ".join(entry.get("input_modalities", [])).lower(),
            "output": ", ".join(entry.get("output_modalities", [])).lower(),
            "prompt_per_M": pricing.get("prompt_tokens"), "cached_per_M": pricing.get("cached_tokens"),
            "output_per_M": pricing.get("response_tokens"), "currency": pricing.get("currency"),
        })
    return pd.DataFrame(rows)


def history_frame(history: list[dict[str, Any]]) -> Any:
    import pandas as pd

    rows = []
    for i, message in enumerate(history):
        for item in message.get("content_items", []):
            kind = item.get("type", "?")
            if "text" in item:
                preview = item["text"]
            elif "thinking" in item:
                preview = item["thinking"]
            elif kind == "tool_call.done":
                preview = f"{isolate(item.get('name'))}({item.get('arguments')})"
            elif "data" in item:
                preview = f"{item.get('mime_type')} {len(item['data'])} bytes"
            elif "image_url" in item:
                preview = "image"
            else:
                preview = ""
            preview = redact_secrets(str(preview))  # (before the cut: a key is never left half shown)
            rows.append({"message": i, "role": message.get("role"), "type": kind,
                         "preview": preview if len(preview) < 200 else preview[:197] + "…"})
    return pd.DataFrame(rows, columns=["message", "role", "type", "preview"])
