"""Estimated prices of model calls, for `/cost`: the table of `fathom.pricing`, and how to
give a model a price in `fathom.toml` (`price_help`)."""

from __future__ import annotations

from fathom.pricing import DEFAULT_PRICES, PRICES_AS_OF, Price, find_price

__all__ = ["DEFAULT_PRICES", "PRICES_AS_OF", "Price", "find_price", "price_help"]


def price_help(model: str) -> str:
    """How to give `model` a price."""
    return (f'to price {model}, add to fathom.toml: [prices."{model}"] input = <USD per '
            "million input tokens>, output = <USD per million output tokens>")
