"""How big the context is, and when it is too big: the window, token estimates, triggers.

Owns the default sizes (`TRIGGER_FRACTION`, `OFFLOAD_TOKENS`, ...), `context_window`,
`is_context_overflow`, and the parsing of the reference's `trigger=` / `keep=` sizes
(`ContextSize`, `TriggerClause`). Imports no other fathom module: everything else in
`middleware.context` measures with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages.utils import count_tokens_approximately

__all__ = [
    "CHARS_PER_TOKEN",
    "FALLBACK_KEEP_MESSAGES",
    "FALLBACK_TRIGGER_TOKENS",
    "KEEP_FRACTION",
    "OFFLOAD_TOKENS",
    "TRIGGER_FRACTION",
    "ContextSize",
    "TriggerClause",
    "approx_tokens",
    "context_window",
    "is_context_overflow",
    "parse_size",
    "parse_trigger",
]

TRIGGER_FRACTION = 0.85
KEEP_FRACTION = 0.10
FALLBACK_TRIGGER_TOKENS = 170_000
FALLBACK_KEEP_MESSAGES = 6
OFFLOAD_TOKENS = 20_000
CHARS_PER_TOKEN = 4

ContextSize = tuple[Literal["fraction", "tokens", "messages"], float]
"""A size the reference's way: `("fraction", 0.85)`, `("tokens", 100_000)`, `("messages", 6)`."""
TriggerClause = Mapping[Literal["fraction", "tokens", "messages"], float]
"""Conditions that must all hold, e.g. `{"tokens": 4000, "messages": 10}`."""


def context_window(model: Any, explicit: int | None = None) -> int | None:
    """The model's input window in tokens: `explicit`, else its profile, else `None`."""
    if explicit:
        return explicit
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return window if isinstance(window, int) and window > 0 else None


def approx_tokens(messages: Sequence[Any], tools: Sequence[Any] | None = None) -> int:
    """LangChain's estimate of the tokens of `messages` (and `tools`)."""
    return count_tokens_approximately(list(messages), tools=list(tools or []) or None)


_OVERFLOW_TEXT = re.compile(
    r"context_length_exceeded|maximum context length|prompt is too long|context window|"
    r"too many (input )?tokens",
    re.IGNORECASE,
)


def is_context_overflow(error: BaseException) -> bool:
    """Whether `error` says the prompt did not fit the model's window.

    LangChain raises `ContextOverflowError` for the providers it recognises; OpenAI-
    compatible servers such as vLLM word it differently ("maximum context length"), so
    the message is checked too.
    """
    return isinstance(error, ContextOverflowError) or bool(_OVERFLOW_TEXT.search(str(error)))


def parse_size(value: Any, what: str) -> tuple[str, float]:
    """One `ContextSize` pair, checked; `what` names it in the error."""
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or value[0] not in ("fraction", "tokens", "messages")
        or isinstance(value[1], bool)
        or not isinstance(value[1], int | float)
        or value[1] <= 0
    ):
        raise ValueError(
            f"{what} is a pair such as ('fraction', 0.85), ('tokens', 100000) or "
            f"('messages', 20), not {value!r}"
        )
    if value[0] == "fraction" and not 0 < value[1] <= 1:
        raise ValueError(f"a {what} fraction lies in (0, 1], not {value[1]!r}")
    return value[0], value[1]


def _all_of(clause: Any) -> list[tuple[str, float]]:
    """One trigger clause as the conditions that must all hold: a pair is one condition,
    a dict such as `{"tokens": 4000, "messages": 10}` one per key (LangChain's
    `TriggerClause`)."""
    if not isinstance(clause, Mapping):
        return [parse_size(clause, "trigger")]
    if not clause:
        raise ValueError(
            "a dict trigger names at least one of 'tokens', 'messages' and 'fraction', "
            "e.g. {'tokens': 4000, 'messages': 10}"
        )
    return [parse_size((kind, value), "trigger") for kind, value in clause.items()]


def parse_trigger(trigger: Any) -> list[list[tuple[str, float]]]:
    """`trigger=` as clauses, any of which triggers; each is conditions that must all hold.

    A pair or a dict is one clause; a list holds several (OR across the list, AND within a
    dict), as in LangChain's `SummarizationMiddleware`.
    """
    if trigger is None:
        return []
    if isinstance(trigger, tuple | Mapping):
        return [_all_of(trigger)]
    if isinstance(trigger, str) or not isinstance(trigger, Sequence):
        raise ValueError(
            "trigger is a pair such as ('fraction', 0.85), a dict such as "
            f"{{'tokens': 4000, 'messages': 10}}, or a list of them, not {trigger!r}"
        )
    return [_all_of(item) for item in trigger]
