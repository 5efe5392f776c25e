"""Estimated prices of model calls: `/cost`'s estimates and `Budget(max_usd=...)`.

A small table of public list prices (US dollars per million tokens, standard tier, no
caching or batch discounts) for a few well-known models. They are estimates: providers
change prices, and cached or discounted tokens cost less. A project sets its own in
`fathom.toml` (or `~/.fathom/config.toml`), which wins over the table:

```toml
[prices."openai:gpt-4.1"]
input = 2.0     # USD per million input tokens
output = 8.0    # USD per million output tokens
```

A `fathom.Budget(prices={...})` overrides the table the same way for one agent.

Layer: core; it imports nothing of fathom.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_PRICES", "PRICES_AS_OF", "Price", "find_price", "model_key"]

PRICES_AS_OF = "2025-11"
"""When the default table was read off the providers' public price pages."""


@dataclass(frozen=True)
class Price:
    """US dollars per million input and output tokens."""

    input: float
    output: float
    source: str = "default table"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The estimated price of that many tokens, in US dollars."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4.1-nano": Price(0.10, 0.40),
    "openai:gpt-4o": Price(2.50, 10.00),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:gpt-5": Price(1.25, 10.00),
    "openai:gpt-5-mini": Price(0.25, 2.00),
    "anthropic:claude-sonnet-4-5": Price(3.00, 15.00),
    "anthropic:claude-haiku-4-5": Price(1.00, 5.00),
    "anthropic:claude-opus-4-1": Price(15.00, 75.00),
}
"""Public list prices as of `PRICES_AS_OF`; estimates, see the module docstring."""


def find_price(
    model: str, configured: Mapping[str, Mapping[str, float] | Price], source: str = "fathom.toml"
) -> Price | None:
    """The price of "provider:model": the configured one, else the table's, else None.

    `configured` maps "provider:model" to `{"input": ..., "output": ...}` (USD per million
    tokens) or to a `Price`; `source` names where those came from. A dated snapshot
    ("anthropic:claude-sonnet-4-5-20250929") takes the price of the longest table entry it
    extends.
    """
    if model in configured:
        entry = configured[model]
        if isinstance(entry, Price):
            return entry
        return Price(float(entry["input"]), float(entry["output"]), source=source)
    if model in DEFAULT_PRICES:
        return DEFAULT_PRICES[model]
    extended = [name for name in DEFAULT_PRICES if model.startswith(name + "-")]
    return DEFAULT_PRICES[max(extended, key=len)] if extended else None


def model_key(ls_params: Mapping[str, Any]) -> str | None:
    """The "provider:model" of a chat model from its LangSmith parameters (`ls_provider`,
    `ls_model_name`, which its calls' callback metadata carries); None when unnamed."""
    provider, name = ls_params.get("ls_provider"), ls_params.get("ls_model_name")
    if not name:
        return None
    return f"{provider}:{name}" if provider else str(name)
