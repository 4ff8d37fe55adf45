"""Cost from mmsp's list prices: known models priced per bucket, unknown ones NA, never 0; one price table
and one fallback rule for ``Turn.cost`` and the trace loaders, which give equal numbers."""

from __future__ import annotations

import io
import math

import mmsp
import pytest

from mmsp_notebook import OptionError, ask, traces
from mmsp_notebook.core.pricing import PriceTable, cost_of, format_cost, price_for
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
    turn = _streamed_turn(model, client, [{"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": None,
                                           "response_tokens": n} for n in (100, 50)])
    expected = (20 * pricing["prompt_tokens"] + 150 * pricing["response_tokens"]) / 1_000_000
    assert turn.cost == pytest.approx(expected)
    assert turn.usage == {"cached_tokens": 0, "prompt_tokens": 20, "thoughts_tokens": None, "response_tokens": 150}


# ---------------------------------------------------------------------------------------------- one table, one rule
def test_one_fallback_rule_cached_at_prompt_thoughts_at_response():
    table = PriceTable({"my-model": {"prompt_tokens": 2.0, "response_tokens": 8.0}})
    assert table.lookup("my-model") == (2.0 / 1e6, 2.0 / 1e6, 8.0 / 1e6, 8.0 / 1e6)
    usage = {"cached_tokens": 100, "prompt_tokens": 10, "thoughts_tokens": 50, "response_tokens": 5}
    assert table.cost(usage, "my-model") == pytest.approx((110 * 2.0 + 55 * 8.0) / 1e6)
    assert price_for("my-model", prices={"my-model": {"prompt_tokens": 2.0, "response_tokens": 8.0}}) == {
        "cached_tokens": 2.0, "prompt_tokens": 2.0, "thoughts_tokens": 8.0, "response_tokens": 8.0}
    # a registry entry without a thoughts price (there are some) bills thoughts as output
    entry = next((e for e in mmsp.list_supported_models() if e.get("pricing") and "thoughts_tokens" not in e["pricing"]),
                 None)
    if entry is not None:
        found = price_for(entry["model"], entry["client"])
        assert found is not None and found["thoughts_tokens"] == entry["pricing"]["response_tokens"]
        assert cost_of({"thoughts_tokens": 1000}, entry["model"], entry["client"]) is not None
    # user prices come first; a bucket-less usage has no cost, never 0
    model, client, pricing = priced_model()
    assert table.cost({"prompt_tokens": 1}, model, client) == pytest.approx(pricing["prompt_tokens"] / 1e6)
    assert PriceTable({model: {"prompt_tokens": 0, "response_tokens": 0}}).cost({"prompt_tokens": 5}, model) == 0
    assert table.cost({"prompt_tokens": None, "response_tokens": None}, "my-model") is None


@pytest.mark.parametrize("bad", [{"prompt_tokens": 1.0}, {"response_tokens": 1.0}, {"prompt_tokens": "1", "response_tokens": 2},
                                 {"prompt_tokens": -1, "response_tokens": 2}, {"prompt_tokens": True, "response_tokens": 2},
                                 {"prompt_tokens": 1, "response_tokens": 2, "cached_tokens": math.nan}, 5,
                                 {"prompt_tokens": 1, "response_tokens": 2, "cache_tokens": 0.1},
                                 {"prompt_tokens": 1, "response_tokens": 2, "currency": "CNY"}])
def test_a_bad_price_is_an_option_error_on_both_paths(bad, tmp_path):
    with pytest.raises(OptionError):
        PriceTable({"m": bad})
    turn = Turn(None, model="m")
    with pytest.raises(OptionError):
        turn.cost_at({"m": bad})
    with pytest.raises(ValueError):  # OptionError is a ValueError, as the loaders raised before
        traces.load_turns(tmp_path, prices={"m": bad})


def test_a_misspelled_bucket_is_named_not_priced_by_the_fallback_rule():
    # a typo would otherwise be left out, and the cached tokens cost the prompt price without a word
    with pytest.raises(OptionError, match="no bucket 'cache_tokens' \\(did you mean 'cached_tokens'\\?\\)"):
        PriceTable({"m": {"prompt_tokens": 1, "response_tokens": 2, "cache_tokens": 0.1}})
    # the registry's own shape, its currency included, is taken as it is
    table = PriceTable({"m": {"currency": "USD", "prompt_tokens": 1, "response_tokens": 2, "cached_tokens": 0.5,
                              "thoughts_tokens": 3}})
    assert table.cost({"cached_tokens": 1_000_000}, "m") == pytest.approx(0.5)


def _streamed_turn(model: str, client: str | None, usages: list[dict]) -> Turn:
    """A turn whose steps stream through a real TurnState, one response per usage."""
    turn = Turn(None, model=model, client_type=client)
    for usage in usages:
        state = turn.new_step()
        state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.delta", "text": "x"}],
                    "usage_metadata": None, "finish_reason": None})
        state.feed({"role": "assistant", "event_type": "delta", "content_items": [{"type": "text.done", "text": "x"}],
                    "usage_metadata": None, "finish_reason": None})
        state.feed({"role": "assistant", "event_type": "stop", "content_items": [], "finish_reason": "stop",
                    "usage_metadata": usage})
    return turn


def test_turn_cost_and_the_loaders_give_equal_numbers_at_list_prices(tmp_path):
    from mmsp.integration.tracer import Tracer

    from mmsp_notebook.core.store import append_sidecar, sidecar_record

    usages = [{"cached_tokens": 1200, "prompt_tokens": 3456, "thoughts_tokens": 789, "response_tokens": 1011},
              {"cached_tokens": None, "prompt_tokens": 77, "thoughts_tokens": None, "response_tokens": 13}]
    pairs = sorted({(e["model"], e["client"]) for e in mmsp.list_supported_models() if e.get("pricing")})
    turns = {}
    for n, (model, client) in enumerate(pairs):  # every priced entry of the registry
        turn = turns[f"t{n:03d}"] = _streamed_turn(model, client, usages)
        history = [{"role": "user", "content_items": [{"type": "text.done", "text": "q"}], "created_at": 1_764_441_600_000}]
        for k, step in enumerate(turn.steps):
            history.append(dict(step.message(), created_at=1_764_441_601_000 + n * 10 + k))
            history.append({"role": "user", "content_items": [{"type": "text.done", "text": "more"}],
                            "created_at": 1_764_441_602_000 + k})
        Tracer(cache_dir=tmp_path).save_history(model, history, f"t{n:03d}", {"trace_id": f"t{n:03d}"})
        for k, usage in enumerate(usages):
            append_sidecar(sidecar_record(trace_id=f"t{n:03d}", turn=k, message_index=1 + 2 * k, model=model,
                                          client_type=client, status="complete", error=None, started_at=None,
                                          ttft_ms=None, total_ms=None, usage=usage, finish_reason="stop", events=[]),
                           base=tmp_path)
    df = traces.load_turns(tmp_path)
    assert len(df) == 2 * len(pairs) > 100 and not df["cost_missing"].any()
    for tid, rows in df.groupby("trace_id", sort=True):
        turn = turns[tid]
        assert rows["client_type"].astype(str).tolist() == [turn.client_type] * 2
        assert turn.cost is not None and turn.cost == sum(rows["cost"].tolist()), tid  # equal, not close
        assert [cost_of(u, turn.model, turn.client_type) for u in usages] == rows["cost"].tolist()


def test_a_streamed_turn_and_its_trace_cost_the_same_with_user_prices(fresh_session):
    from tools import get_weather

    prices = {"demo": {"prompt_tokens": 1.25, "response_tokens": 10.0}}  # no cache or thoughts price: the rule
    for turn in (ask("Tell me about pandas", stream=io.StringIO()),
                 ask("What's the weather in Paris?", tools=[get_weather], chat="tools", stream=io.StringIO())):
        assert turn.status == "complete" and turn.cost is None  # the demo model has no list price
        usage = turn.usage
        assert usage["thoughts_tokens"] and usage["response_tokens"]
        df = traces.load_turns(fresh_session_cache(), prices=prices)
        rows = df[df["trace_id"] == turn.trace_id]
        assert len(rows) == len(turn.steps) and not rows["cost_missing"].any()
        assert turn.cost_at(prices) == sum(rows["cost"].tolist())  # equal, not close
        expected = ((usage["cached_tokens"] or 0) * 1.25 + usage["prompt_tokens"] * 1.25
                    + usage["thoughts_tokens"] * 10.0 + usage["response_tokens"] * 10.0) / 1e6
        assert turn.cost_at(prices) == pytest.approx(expected)
        listed = traces.load_turns(fresh_session_cache())
        assert listed[listed["trace_id"] == turn.trace_id]["cost_missing"].all()


def fresh_session_cache():
    import os
    from pathlib import Path

    return Path(os.environ["MMSP_CACHE_DIR"])


def test_a_snapshot_keeps_the_list_prices_and_the_digest_follows_every_price(monkeypatch):
    import pickle

    from mmsp_notebook.core import pricing

    model, client, _ = priced_model()
    usage = {"prompt_tokens": 1000, "response_tokens": 500}
    live = PriceTable()
    snap = pickle.loads(pickle.dumps(PriceTable({"mine": {"prompt_tokens": 1.0, "response_tokens": 2.0}}).snapshot()))
    before = live.cost(usage, model, client)
    assert snap.cost(usage, model, client) == before and snap.cost(usage, "mine") == (1000 * 1.0 + 500 * 2.0) / 1e6
    digest = live.digest()
    assert PriceTable({"mine": {"prompt_tokens": 1.0, "response_tokens": 2.0}}).digest() != digest
    assert PriceTable().snapshot().digest() == digest
    snap_digest = snap.digest()
    installed = mmsp.list_supported_models  # new list prices (an upgrade of mmsp)
    monkeypatch.setattr(mmsp, "list_supported_models", lambda *a, **k: [
        {**e, "pricing": {b: v * 3 if isinstance(v, float) else v for b, v in e["pricing"].items()}}
        if e.get("pricing") else e for e in installed(*a, **k)])
    pricing._registry.cache_clear()
    try:
        assert live.cost(usage, model, client) == pytest.approx(3 * before)
        assert snap.cost(usage, model, client) == before  # kept
        assert live.digest() != digest and snap.digest() == snap_digest
    finally:
        monkeypatch.undo()
        pricing._registry.cache_clear()
