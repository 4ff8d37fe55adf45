"""Cost from mmsp's list prices: known models priced per bucket, unknown ones NA, never 0."""

from __future__ import annotations

import mmsp
import pytest

from mmsp_notebook.core.pricing import cost_of, format_cost, price_for
from mmsp_notebook.core.turn import Turn


def priced_model():
    entry = next(e for e in mmsp.list_supported_models() if e.get("pricing", {}).get("cached_tokens") is not None)
    return entry["model"], entry["client"], entry["pricing"]


def test_cost_per_bucket_from_the_registry():
    model, client, pricing = priced_model()
    usage = {"cached_tokens": 1000, "prompt_tokens": 2000, "thoughts_tokens": 300, "response_tokens": 700}
    expected = sum(usage[k] * pricing[k] for k in usage) / 1_000_000
    assert cost_of(usage, model, client) == pytest.approx(expected)
    assert price_for(model) is not None


def test_unknown_model_or_usage_is_none_not_zero():
    assert cost_of({"prompt_tokens": 10}, "demo") is None
    assert cost_of(None, priced_model()[0]) is None
    assert format_cost(None) == "price unknown"
    assert format_cost(0.0123) == "$0.0123"


def test_a_turn_sums_the_cost_of_its_steps():
    model, client, pricing = priced_model()
    turn = Turn(None, model=model, client_type=client)
    for response_tokens in (100, 50):
        state = turn.new_step()
        state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.delta", "text": "x"}],
                    "usage_metadata": None, "finish_reason": None})
        state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.done", "text": "x"}],
                    "usage_metadata": None, "finish_reason": None})
        state.feed({"role": "assistant", "event_type": "stop", "content_items": [], "finish_reason": "stop",
                    "usage_metadata": {"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": None,
                                       "response_tokens": response_tokens}})
    expected = (20 * pricing["prompt_tokens"] + 150 * pricing["response_tokens"]) / 1_000_000
    assert turn.cost == pytest.approx(expected)
    assert turn.usage == {"cached_tokens": 0, "prompt_tokens": 20, "thoughts_tokens": None, "response_tokens": 150}
