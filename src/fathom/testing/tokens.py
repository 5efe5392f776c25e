"""A cheap, deterministic token estimate for offline tests and benchmarks."""

from __future__ import annotations

__all__ = ["approx_tokens"]

_CHARS_PER_TOKEN = 4


def approx_tokens(text: str) -> int:
    """Estimate the number of tokens in `text` as one token per four characters.

    The estimate is `ceil(len(text) / 4)`, so any non-empty text counts for at least one
    token and the empty string counts for none. It is not a tokenizer: it exists so that
    scripted models can report stable, provider-independent usage numbers.

    Args:
        text: The text to measure.

    Returns:
        The approximate token count.
    """
    return -(-len(text) // _CHARS_PER_TOKEN)
