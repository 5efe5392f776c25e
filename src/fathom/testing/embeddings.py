"""A deterministic local embedding for tests, examples and offline demos: no model, no network.

`hashed_embedding(dims)` returns a function `texts -> vectors` that LangGraph's stores take
as their index's `embed` (`InMemoryStore(index={"embed": embed, "dims": dims})`). Each
lower-cased word is hashed (BLAKE2b, so the vectors are the same in every process) to one
of `dims` buckets with a sign; the counts are L2-normalised. Texts that share words score
higher under cosine similarity, which is enough to rank a handful of documents in a test.
It knows nothing of meaning: synonyms do not match.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence

from fathom.errors import require_at_least_one

__all__ = ["hashed_embedding"]

_WORD = re.compile(r"[a-z0-9]+")


def _bucket(word: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    number = int.from_bytes(digest, "big")
    return number % dims, (1.0 if (number >> 63) & 1 else -1.0)


def hashed_embedding(dims: int = 64) -> Callable[[Sequence[str]], list[list[float]]]:
    """A word-hashing embedding function of `dims` dimensions (see the module docstring).

    Raises:
        ValueError: `dims` is below 1.
    """
    require_at_least_one("dims", dims)

    def embed(texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * dims
            for word in _WORD.findall(text.lower()):
                index, sign = _bucket(word, dims)
                vector[index] += sign
            norm = math.sqrt(sum(v * v for v in vector))
            vectors.append([v / norm for v in vector] if norm else vector)
        return vectors

    return embed
