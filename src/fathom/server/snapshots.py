"""JSON shapes of LangGraph state snapshots, as LangGraph's server returns them."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import StateSnapshot

from fathom.server.serde import to_jsonable

__all__ = ["checkpoint_ref", "is_interrupted", "snapshot_json", "thread_interrupts"]


def checkpoint_ref(config: RunnableConfig | None) -> dict[str, Any] | None:
    """``{"checkpoint_id", "thread_id", "checkpoint_ns"}`` of a checkpoint config."""
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {
        "checkpoint_id": conf.get("checkpoint_id"),
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
    }


def snapshot_json(snap: StateSnapshot) -> dict[str, Any]:
    """A ``ThreadState`` dict for ``snap``."""
    tasks = []
    for task in snap.tasks:
        state = task.state
        tasks.append(
            {
                "id": task.id,
                "name": task.name,
                "path": list(task.path),
                "error": repr(task.error) if task.error else None,
                "interrupts": to_jsonable(list(task.interrupts)),
                "checkpoint": checkpoint_ref(state) if isinstance(state, dict) else None,
                "state": snapshot_json(state) if isinstance(state, StateSnapshot) else None,
                "result": to_jsonable(task.result),
            }
        )
    current = checkpoint_ref(snap.config)
    parent = checkpoint_ref(snap.parent_config)
    return {
        "values": to_jsonable(snap.values),
        "next": list(snap.next),
        "tasks": tasks,
        "metadata": to_jsonable(snap.metadata),
        "created_at": snap.created_at,
        "checkpoint": current,
        "parent_checkpoint": parent,
        "interrupts": to_jsonable(list(snap.interrupts)),
        "checkpoint_id": current["checkpoint_id"] if current else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def thread_interrupts(snap: StateSnapshot) -> dict[str, list[Any]]:
    """Pending interrupts by task id, as in a thread record's ``interrupts``."""
    return {task.id: to_jsonable(list(task.interrupts)) for task in snap.tasks if task.interrupts}


def is_interrupted(snap: StateSnapshot) -> bool:
    """Whether the thread reads ``interrupted``: its step after the checkpoint has tasks (a
    pending ``interrupt()``, an ``interrupt_before/after`` pause, or a step a cancelled or
    killed run did not finish, even one whose tasks all saved their writes, which leaves
    ``next`` empty: see ``fathom.runs.has_unfinished_step``)."""
    return bool(snap.tasks) or bool(snap.interrupts)
