"""The session's status line: model, thread, tokens and cost so far, the prompt-cache
prefix reuse, and the background tasks still pending.

The line editor shows it under the prompt (prompt_toolkit's bottom toolbar); without the
line editor (`--plain`, pipes) the session prints it after each turn. The figures are the
ones `/cost` shows: this session's turns on the thread, priced by `fathom.cli.pricing`
(`+` when a model has no price), and the share of each request that repeated the previous
one (`fathom.cache_metrics`). Pending tasks are the async subagent tasks of the thread
whose last recorded status is pending, running or waiting; `/tasks` asks the server for
their live status (the status line does not, so that drawing it never waits on a server).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any

__all__ = ["pending_tasks", "status_line"]

logger = logging.getLogger(__name__)


def pending_tasks(session: Any, thread_id: str) -> int | None:
    """How many async tasks of the thread are unfinished as last recorded (`None` when the
    session keeps no local threads, e.g. attached to a server)."""
    db_path = getattr(session, "db_path", None)
    if db_path is None or not db_path.is_file():
        return None
    from fathom.cli.tasks import local_async_tasks
    from fathom.middleware.async_subagents.tasks import UNFINISHED

    try:
        tasks = asyncio.run(local_async_tasks(db_path, thread_id))
    except (sqlite3.Error, OSError):  # a status line never stops the session
        logger.debug("reading the async tasks of thread %s failed", thread_id, exc_info=True)
        return None
    return sum(1 for task in tasks.values() if str(task.get("status")) in UNFINISHED)


def _spend(session: Any, thread_id: str) -> tuple[int, str]:
    """Tokens of this session's turns on the thread, and their estimated cost."""
    from fathom.cli.pricing import find_price

    usage = session.usage_of(thread_id) if hasattr(session, "usage_of") else {}
    configured = getattr(getattr(session.setup, "config", None), "prices", None) or {}
    tokens, cost, priced, unpriced = 0, 0.0, False, False
    for (_agent, model), totals in usage.items():
        tokens += totals.input_tokens + totals.output_tokens
        price = find_price(model, configured) if model else None
        if price is None:
            unpriced = unpriced or bool(totals.input_tokens + totals.output_tokens)
            continue
        cost += price.cost(totals.input_tokens, totals.output_tokens)
        priced = True
    shown = f"${cost:.4f}" if priced else "$—"
    return tokens, shown + ("+" if priced and unpriced else "")


def _cache_rate(session: Any, thread_id: str) -> str:
    """The share of the thread's requests (after each agent's first) that repeated the
    previous request's prefix: what a provider's prompt cache can reuse."""
    if not hasattr(session, "prefix_recorder"):
        return "-"
    agents = session.prefix_recorder(thread_id).agents().values()
    sent = sum(a.input_chars for a in agents)
    return f"{sum(a.prefix_chars for a in agents) / sent:.0%}" if sent else "-"


def status_line(session: Any, thread_id: str) -> str:
    """`model · thread ID · N tokens · $cost · cache R · K tasks pending` (the last part only
    when the thread has tasks still pending)."""
    tokens, cost = _spend(session, thread_id)
    parts = [str(session.setup.model_name), f"thread {thread_id}", f"{tokens:,} tokens", cost,
             f"cache {_cache_rate(session, thread_id)}"]
    pending = pending_tasks(session, thread_id)
    if pending:
        parts.append(f"{pending} task{'s' if pending != 1 else ''} pending")
    return " · ".join(parts)
