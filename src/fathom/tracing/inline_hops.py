"""Run LangSmith's per-hook bookkeeping on the event loop while LangSmith tracing is off.

LangChain's `create_agent` wraps every middleware's `awrap_model_call` and `awrap_tool_call`
in LangSmith's `traceable`. Each wrapped call hands its run set-up and its run end to a worker
thread (`langsmith._internal._aiter.aio_to_thread`) even when tracing is disabled, where both
are a few dictionary operations: two thread hops per middleware per model call, each waking
the event loop again. In `benchmarks/server.py` they cost `fathom serve` about 8 % of its
create-to-done latency.

`langsmith.set_runtime_overrides(aio_to_thread=...)` is LangSmith's public hook for replacing
that hand-off. `install()` sets one that calls the function inline, inside the context
LangSmith gave it, whenever tracing is off for that context, and otherwise falls back to
LangSmith's own thread hand-off, so traced runs behave exactly as before. The override is
process-wide, so only a process that fathom owns installs it: `fathom serve`. Library users
may call `install()` in their own server.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["install", "uninstall"]

_Default = Callable[..., Awaitable[Any]]


def _tracing_on(ctx: contextvars.Context) -> bool:
    from langsmith import utils

    return bool(ctx.run(utils.tracing_is_enabled))


async def _inline_when_untraced(
    default: _Default, ctx: contextvars.Context, func: Callable[..., Any], /,
    *args: Any, **kwargs: Any,
) -> Any:  # fmt: skip
    """LangSmith's `aio_to_thread` override: inline while untraced, the default otherwise."""
    if _tracing_on(ctx):
        return await default(ctx, func, *args, **kwargs)
    return ctx.run(func, *args, **kwargs)


def install() -> None:
    """Make LangSmith run its untraced bookkeeping inline (see the module docstring)."""
    import langsmith

    langsmith.set_runtime_overrides(aio_to_thread=_inline_when_untraced)


def uninstall() -> None:
    """Restore LangSmith's default thread hand-off."""
    import langsmith

    langsmith.set_runtime_overrides()
