"""List prices and the cost of a response's usage: one price table for ``Turn.cost`` and the trace loaders.

Prices are USD per million tokens per usage bucket, the shape of ``pricing`` in
``mmsp.list_supported_models()``: ``{"prompt_tokens": 1.25, "response_tokens": 10.0,
"cached_tokens": 0.125, "thoughts_tokens": 10.0}``. User prices (``prices=``, in ``Turn.cost_at``
and ``traces.load_turns``) take the same shape, by model id: ``{"my-model": {"prompt_tokens": 0.5,
"response_tokens": 1.5}}``; a key that is no bucket (a typo such as ``cache_tokens``) or a
``currency`` other than ``"USD"`` is refused, not left out.

Lookup
    A user price for the model id first; then mmsp's registry entry for ``(model, client type)``
    when the client type is known; then the model's first registry entry (a model served by several
    platforms is priced at its vendor's own endpoint, which the registry lists first).

Fallback rule (the one rule of every cost here)
    A price needs ``prompt_tokens`` and ``response_tokens``. Cached tokens without a cache price
    cost the prompt price (the platform publishes no discount); thoughts tokens without a thoughts
    price cost the response price (providers bill reasoning as output).

Cost
    ``cached * p_cached + prompt * p_prompt + thoughts * p_thoughts + response * p_response``
    with a missing bucket counted as 0; ``None`` when the model has no price or the usage has no
    bucket at all — never 0 for "unknown".
"""

from __future__ import annotations

import difflib
import hashlib
import math
from collections.abc import Mapping
from functools import lru_cache
from numbers import Real
from typing import Any

from .._errors import OptionError

__all__ = ["BUCKETS", "Prices", "PerToken", "PriceTable", "LIST_PRICES", "per_token", "price_for", "cost_of",
           "format_cost"]

#: mmsp's usage buckets, in the order of every per-token price tuple here.
BUCKETS = ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")

#: User prices: model id -> USD per million tokens per bucket (the registry's ``pricing`` shape).
Prices = Mapping[str, Mapping[str, Any]]
#: ``(cached, prompt, thoughts, response)`` USD per token, the fallback rule applied.
PerToken = tuple[float, float, float, float]


def per_token(pricing: Mapping[str, Any]) -> PerToken:
    """USD per token of a registry-shaped price (per million tokens), the fallback rule applied.

    Raises:
        OptionError: no ``prompt_tokens`` / ``response_tokens``, or a price that is not a finite
            number of at least 0.
    """
    if not isinstance(pricing, Mapping):
        raise OptionError(f"a price is a mapping of usage buckets to USD per million tokens, not {pricing!r}")

    def number(bucket: str, fallback: float | None = None) -> float:
        value = pricing.get(bucket)
        if value is None:
            if fallback is None:
                raise OptionError(f"a price needs prompt_tokens and response_tokens (USD per million tokens), "
                                  f"got {dict(pricing)!r}")
            return fallback
        try:
            out = float(value) if isinstance(value, Real) and not isinstance(value, bool) else math.nan
        except OverflowError:  # an integer beyond any float
            out = math.inf
        if not (math.isfinite(out) and out >= 0):
            raise OptionError(f"the price of {bucket} must be a finite number of at least 0 (USD per million tokens), "
                              f"not {value!r}")
        return out

    prompt = number("prompt_tokens")
    response = number("response_tokens")
    return (number("cached_tokens", prompt) / 1e6, prompt / 1e6, number("thoughts_tokens", response) / 1e6,
            response / 1e6)


def _known_buckets(pricing: Any) -> Any:
    """A user price whose every key is a usage bucket (or ``currency``, the registry's, ``"USD"``):
    a misspelled bucket (``cache_tokens``) would be left out, its tokens priced by the fallback rule.

    Raises:
        OptionError: another key, named with the nearest bucket; a currency other than USD.
    """
    if not isinstance(pricing, Mapping):
        return pricing  # (per_token says what it should be)
    for key in pricing:
        if key == "currency":
            if pricing[key] != "USD":
                raise OptionError(f"prices are USD per million tokens: currency {pricing[key]!r} is not taken")
        elif key not in BUCKETS:
            near = difflib.get_close_matches(str(key), BUCKETS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise OptionError(f"a price has no bucket {key!r}{hint}: its keys are {', '.join(BUCKETS)} "
                              "(USD per million tokens)")
    return pricing


@lru_cache(maxsize=1)
def _registry() -> tuple[dict[tuple[str, str], PerToken], dict[str, PerToken]]:
    """Per-token list prices from mmsp's registry: ``(by (model, client type), by model)``."""
    import mmsp

    by_pair: dict[tuple[str, str], PerToken] = {}
    by_model: dict[str, PerToken] = {}
    for entry in mmsp.list_supported_models("USD"):
        pricing = entry.get("pricing")
        if not pricing:
            continue
        try:
            prices = per_token(pricing)
        except OptionError:  # an entry without a usable price is a model without a price
            continue
        by_pair.setdefault((entry["model"], entry["client"]), prices)
        by_model.setdefault(entry["model"], prices)
    return by_pair, by_model


class PriceTable:
    """mmsp's list prices, with user ``prices`` (by model id) taking precedence.

    ``PriceTable()`` is the list prices (:data:`LIST_PRICES`). A bad user price raises
    :class:`~mmsp_notebook.OptionError` when the table is made.
    """

    __slots__ = ("_user", "_list")

    def __init__(self, prices: Prices | None = None) -> None:
        if prices is not None and not isinstance(prices, Mapping):
            raise OptionError(f"prices map model ids to prices ({{'my-model': {{'prompt_tokens': 0.5, "
                              f"'response_tokens': 1.5}}}}), not {type(prices).__name__}")
        self._user = {str(model): per_token(_known_buckets(p)) for model, p in (prices or {}).items()}
        #: mmsp's list prices kept by :meth:`snapshot` (None: the registry's, read when needed)
        self._list: tuple[dict[tuple[str, str], PerToken], dict[str, PerToken]] | None = None

    def snapshot(self) -> PriceTable:
        """This table with mmsp's list prices as this process has them now, kept in it: sent to
        other processes (it pickles), it prices there as here, whatever mmsp they import."""
        table = PriceTable()
        table._user = dict(self._user)
        table._list = self._lists()
        return table

    def _lists(self) -> tuple[dict[tuple[str, str], PerToken], dict[str, PerToken]]:
        """mmsp's list prices: the snapshot's, else the registry's."""
        return self._list if self._list is not None else _registry()

    def __getstate__(self) -> tuple[Any, Any]:
        return self._user, self._list

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self._user, self._list = state

    def lookup(self, model: str | None, client_type: str | None = None) -> PerToken | None:
        """``(cached, prompt, thoughts, response)`` USD per token of a model, or ``None`` when unknown."""
        if not model:
            return None
        found = self._user.get(model)
        if found is not None:
            return found
        by_pair, by_model = self._lists()
        if client_type is not None:
            found = by_pair.get((model, client_type))
        return found if found is not None else by_model.get(model)

    def cost(self, usage: Mapping[str, Any] | None, model: str | None, client_type: str | None = None) -> float | None:
        """The cost in USD of one response's usage (see "Cost" above), or ``None`` when unknown."""
        if not usage:
            return None
        prices = self.lookup(model, client_type)
        if prices is None:
            return None
        total = 0.0
        present = False
        for bucket, price in zip(BUCKETS, prices):
            tokens = usage.get(bucket)
            if tokens is None or isinstance(tokens, bool) or not isinstance(tokens, (int, float)):
                continue
            present = True
            total += tokens * price  # the loaders' order and arithmetic: equal numbers, not just close
        return total if present else None

    def digest(self) -> str:
        """A fingerprint of every price this table gives (the user's and mmsp's list prices): it
        changes when a price does, e.g. when an upgrade of mmsp brings new list prices (a trace
        dataset recomputes its ``cost`` column then)."""
        by_pair, by_model = self._lists()
        text = repr((sorted(self._user.items()), sorted(by_pair.items()), sorted(by_model.items())))
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


#: The list prices of mmsp's registry.
LIST_PRICES = PriceTable()


def price_for(model: str, client_type: str | None = None, prices: Prices | None = None) -> dict[str, float] | None:
    """The prices of a model, USD per million tokens per bucket (the fallback rule applied), or ``None``."""
    table = PriceTable(prices) if prices else LIST_PRICES
    found = table.lookup(model, client_type)
    return None if found is None else {bucket: p * 1e6 for bucket, p in zip(BUCKETS, found)}


def cost_of(usage: Mapping[str, Any] | None, model: str, client_type: str | None = None,
            prices: Prices | None = None) -> float | None:
    """The cost in USD of one response's usage, or ``None`` when the price or the usage is unknown."""
    return (PriceTable(prices) if prices else LIST_PRICES).cost(usage, model, client_type)


def format_cost(cost: float | None, currency: str = "USD") -> str:
    if cost is None:
        return "price unknown"
    symbol = "$" if currency == "USD" else "¥" if currency == "CNY" else f"{currency} "
    if cost == 0:
        return f"{symbol}0"
    if cost < 0.01:
        return f"{symbol}{cost:.6f}".rstrip("0")
    return f"{symbol}{cost:.4f}"
