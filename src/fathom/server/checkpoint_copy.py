"""Copying a thread's checkpoints to a new thread id, for ``POST /threads/{id}/copy``.

Checkpointers that implement ``acopy_thread`` (SQLite, Postgres) do it themselves; for the
rest (``InMemorySaver``) every checkpoint, oldest first, is written again under the new
thread id with its parent link and pending writes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["copy_thread"]


async def copy_thread(saver: BaseCheckpointSaver[Any], source: str, target: str) -> None:
    """Copy every checkpoint (all namespaces) of thread ``source`` to thread ``target``."""
    try:
        await saver.acopy_thread(source, target)
        return
    except NotImplementedError:
        pass
    tuples = [t async for t in saver.alist(RunnableConfig(configurable={"thread_id": source}))]
    for tup in reversed(tuples):
        conf = tup.config.get("configurable", {})
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        dest = RunnableConfig(configurable={
            "thread_id": target,
            "checkpoint_ns": conf.get("checkpoint_ns", ""),
            **({"checkpoint_id": parent} if parent else {}),
        })  # fmt: skip
        saved = await saver.aput(
            dest, tup.checkpoint, tup.metadata, dict(tup.checkpoint["channel_versions"])
        )
        by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        for task_id, channel, value in tup.pending_writes or []:
            by_task[task_id].append((channel, value))
        for task_id, writes in by_task.items():
            await saver.aput_writes(saved, writes, task_id)
