"""The `fathom` command's threads as measurements: their turns and their model calls.

`local_turns` reads each thread's checkpoints from the threads database and makes the
turns of the repeated-request ratio (`fathom.measure.sticky`): a turn per human message,
started when the first checkpoint holding it was saved, labelled by a labelling function
(by default `fathom.patterns.domains.turn_domain`). The checkpoints are read with a graph
that declares only the channels a label needs (the deep agent's `messages` and `files`, as
`fathom.state.DeepAgentState` stores them, and the handoff keys), so no model or agent has
to be built to read them.

`local_calls` reads the call records the command stored for a thread
(`fathom.project.threads.ThreadIndex.calls`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph

from fathom.measure.calls import CallRecord, records_from_json
from fathom.measure.sticky import Labeller, Turn, thread_turns
from fathom.patterns.domains import turn_domain
from fathom.project.threads import ThreadIndex
from fathom.state import DeepAgentState

__all__ = ["local_calls", "local_snapshots", "local_turns", "timestamp"]


class _ReadState(DeepAgentState):
    """The channels a turn's label is read from."""

    active_agent: NotRequired[str]
    current_step: NotRequired[str]


class _QuietPendingSends(logging.Filter):
    """Drops LangGraph's warning about the nodes of the real agent this graph has not got."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Ignoring unknown node name")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("langgraph")
    quiet = _QuietPendingSends()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _reader(checkpointer: Any) -> Any:
    graph = StateGraph(_ReadState)
    graph.add_node("read", lambda state: {})
    graph.add_edge(START, "read")
    graph.add_edge("read", END)
    return graph.compile(checkpointer=checkpointer)


def timestamp(value: Any) -> float:
    """Seconds since the epoch of an ISO 8601 time (a checkpoint's `created_at`), or of a
    number; 0.0 when neither."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


async def local_snapshots(db_path: Path, thread_id: str) -> list[tuple[float, dict[str, Any]]]:
    """The thread's checkpoints as (time, values), oldest first."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(db_path)) as checkpointer:
        reader = _reader(checkpointer)
        with _quiet():
            found = [(timestamp(s.created_at), dict(s.values or {}))
                     async for s in reader.aget_state_history(
                         {"configurable": {"thread_id": thread_id}})]
    return sorted(found, key=lambda s: s[0])


async def local_turns(
    db_path: Path, thread_ids: Iterable[str], label: Labeller | None = None
) -> list[Turn]:
    """The turns of the threads, labelled by `label` (default `turn_domain`)."""
    turns: list[Turn] = []
    for thread_id in thread_ids:
        snapshots = await local_snapshots(db_path, thread_id)
        turns.extend(thread_turns(thread_id, snapshots, label or turn_domain))
    return turns


def local_calls(db_path: Path, thread_id: str) -> list[CallRecord]:
    """The call records the command stored for the thread, oldest first."""
    return records_from_json(ThreadIndex(db_path).calls(thread_id))
