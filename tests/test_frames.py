"""The kernel's DataFrames (``%mmsp usage``, ``chat.turns``, ``Comparison.frame``): typed as the traces' frames."""

from __future__ import annotations

import pandas as pd

from mmsp_notebook.front.frames import usage_frame
from mmsp_notebook.traces._columns import no_categories


def test_a_usage_frame_without_turns_has_the_dtypes_of_one_with_turns():
    row = {"turn": "t1", "chat": "default", "model": "demo", "client_type": "mmsp", "status": "complete",
           "finish_reason": "stop", "steps": 1, "cached_tokens": 0, "prompt_tokens": 7, "thoughts_tokens": None,
           "response_tokens": 109, "ttft_s": 0.4, "total_s": 4.2, "tokens_per_s": None, "cost": None,
           "trace_id": "nb/default"}
    full, empty = usage_frame([row]), usage_frame([])
    assert list(empty.columns) == list(full.columns) and len(empty) == 0
    for col in full.columns:  # a new chat's turns concatenate with another's without turning to object
        if isinstance(full[col].dtype, pd.CategoricalDtype):
            assert empty[col].dtype == pd.CategoricalDtype(no_categories()), col
            assert full[col].cat.categories.dtype == no_categories().dtype, col
        else:
            assert empty[col].dtype == full[col].dtype, col
    assert str(full["steps"].dtype) == "int64" and str(full["thoughts_tokens"].dtype) == "Int64"
    assert full["turn"].dtype == pd.Series(["t1"]).dtype  # pandas' text dtype, not object
    both = pd.concat([empty, full], ignore_index=True)
    plain = [c for c in full.columns if not isinstance(full[c].dtype, pd.CategoricalDtype)]
    assert (both[plain].dtypes == full[plain].dtypes).all()


def test_a_column_without_a_value_has_categories_of_text():
    row = {"turn": "t1", "chat": "default", "model": "demo", "client_type": None, "status": "error",
           "finish_reason": None, "steps": 1, "trace_id": None}
    df = usage_frame([row])
    assert df["finish_reason"].dtype == pd.CategoricalDtype(no_categories())
    assert df["finish_reason"].isna().all() and df["trace_id"].isna().all()
