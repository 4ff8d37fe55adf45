"""Cost of a turn from the list prices of ``mmsp.list_supported_models``."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

__all__ = ["price_for", "cost_of", "format_cost"]

BUCKETS = ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")


@lru_cache(maxsize=1)
def _price_table() -> dict[tuple[str, str | None], dict[str, Any]]:
    import mmsp

    table: dict[tuple[str, str | None], dict[str, Any]] = {}
    for entry in mmsp.list_supported_models():
        pricing = entry.get("pricing")
        if not pricing:
            continue
        table.setdefault((entry["model"], entry.get("client")), dict(pricing))
        table.setdefault((entry["model"], None), dict(pricing))
    return table


def price_for(model: str, client_type: str | None = None) -> dict[str, Any] | None:
    """The per-million-token prices of a model (for that client type when listed), or ``None``."""
    table = _price_table()
    return table.get((model, client_type)) or table.get((model, None))


def cost_of(usage: Mapping[str, Any] | None, model: str, client_type: str | None = None) -> float | None:
    """The cost of one response's usage, or ``None`` when the price or the usage is unknown.

    Cached tokens without a published cache price are charged at the prompt price.
    """
    if not usage:
        return None
    pricing = price_for(model, client_type)
    if pricing is None:
        return None
    total = 0.0
    for bucket in BUCKETS:
        tokens = usage.get(bucket)
        if not tokens:
            continue
        price = pricing.get(bucket)
        if price is None and bucket == "cached_tokens":
            price = pricing.get("prompt_tokens")
        if price is None:
            return None
        total += tokens * float(price) / 1_000_000
    return total


def format_cost(cost: float | None, currency: str = "USD") -> str:
    if cost is None:
        return "price unknown"
    symbol = "$" if currency == "USD" else "¥" if currency == "CNY" else f"{currency} "
    if cost == 0:
        return f"{symbol}0"
    if cost < 0.01:
        return f"{symbol}{cost:.6f}".rstrip("0")
    return f"{symbol}{cost:.4f}"
