"""`fathom tasks`: a supervisor thread's async subagent tasks, with their live status.

A supervisor keeps the tasks it launched in its `async_tasks` state channel (task id,
subagent name, the child's thread and newest run, the status it last saw). That status
can be stale: the command asks the server for each task's newest run and thread, and
shows what the task is now (running, waiting for a person, success, error, cancelled),
with the model calls and tokens the child recorded on its thread. `--open TASK` shows one
child thread: its conversation, and what it is waiting for. A task may be named by a
unique prefix of its id.

The supervisor's thread is read from the server (`--server`, default `$FATHOM_SERVER`,
else fathom serve's `http://127.0.0.1:2024`); the interactive command's `/tasks` reads it
from the local thread store and refreshes the tasks from that server.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.errors import FathomError

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

__all__ = [
    "DEFAULT_SERVER",
    "TaskLookupError",
    "TaskRow",
    "find_task",
    "format_tasks",
    "live_rows",
    "local_async_tasks",
    "render_child",
    "server_async_tasks",
    "server_client",
    "tasks_report",
]

DEFAULT_SERVER = "http://127.0.0.1:2024"
"""Where `fathom serve` listens by default."""

_MAX_MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class TaskRow:
    """One task as the command shows it."""

    task_id: str
    agent_name: str
    status: str
    recorded: str
    """The status the supervisor last saw (in its `async_tasks`)."""
    calls: int | None
    tokens: int | None
    updated: str
    note: str = ""
    """Why the status could not be refreshed, if it could not."""


class TaskLookupError(FathomError, LookupError):
    """A task reference that names no task, or several."""


def server_client(url: str | None) -> LangGraphClient:
    """A langgraph-sdk client for `url` (default `$FATHOM_SERVER`, else `DEFAULT_SERVER`);
    `$FATHOM_API_KEY` is sent as `x-api-key` when set."""
    from langgraph_sdk import get_client

    key = os.environ.get("FATHOM_API_KEY")
    return get_client(url=url or os.environ.get("FATHOM_SERVER") or DEFAULT_SERVER,
                      headers={"x-api-key": key} if key else None)


def _error_text(error: BaseException) -> str:
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 404:
        return "not found on the server"
    return f"{type(error).__name__}: {error}".strip().rstrip(":")


async def _live(client: LangGraphClient, task: Mapping[str, Any]) -> TaskRow:
    from fathom.middleware.async_subagents.tasks import task_status
    from fathom.middleware.async_subagents.transport import REMOTE_ERRORS
    from fathom.usage import task_usage

    task_id = str(task["task_id"])
    thread_id = str(task.get("thread_id") or task_id)
    recorded = str(task.get("status", "?"))
    base = {"task_id": task_id, "agent_name": str(task.get("agent_name", "?")),
            "recorded": recorded, "updated": str(task.get("last_updated_at", ""))}
    try:
        thread = await client.threads.get(thread_id)
        run = await client.runs.get(thread_id, str(task["run_id"]))
        if run.get("status") == "interrupted" and recorded != "cancelled":
            newest = await client.runs.list(thread_id, limit=1)  # a newer run replaced it
            run = newest[0] if newest else run
        elif run.get("status") == "success" and thread.get("status") in ("busy", "error"):
            newest = await client.runs.list(thread_id, limit=1)
            run = newest[0] if newest else run
    except REMOTE_ERRORS as error:  # the server cannot say: show what is known
        return TaskRow(status=recorded, calls=None, tokens=None,
                       note=f"not refreshed: {_error_text(error)}", **base)
    status = task_status(run, thread)
    if recorded == "cancelled" and status == "waiting":
        status = "cancelled"  # a task cancelled while paused keeps its old pause
    usage = task_usage(thread)
    return TaskRow(status=status, calls=usage.calls if usage else None,
                   tokens=usage.total_tokens if usage else None, **base)


async def live_rows(
    client: LangGraphClient, tasks: Mapping[str, Mapping[str, Any]]
) -> list[TaskRow]:
    """Each task with its status as the server reports it now, in launch order."""
    ordered = sorted(tasks.values(), key=lambda t: str(t.get("created_at", "")))
    return list(await asyncio.gather(*(_live(client, task) for task in ordered)))


def format_tasks(rows: list[TaskRow]) -> str:
    """A plain table: task id, subagent, live status (and the stale one it replaces),
    calls and tokens, last update."""
    if not rows:
        return "no async tasks on this thread"
    width = max(len("task"), *(len(r.task_id) for r in rows))
    agent_width = max(len("agent"), *(len(r.agent_name) for r in rows))
    lines = [f"{'task':<{width}}  {'agent':<{agent_width}}  {'status':<22}  {'calls':>5}  "
             f"{'tokens':>8}  updated"]
    for row in rows:
        status = row.status if row.status == row.recorded else f"{row.status} (was {row.recorded})"
        calls = "-" if row.calls is None else str(row.calls)
        tokens = "-" if row.tokens is None else f"{row.tokens:,}"
        line = (f"{row.task_id:<{width}}  {row.agent_name:<{agent_width}}  {status:<22}  "
                f"{calls:>5}  {tokens:>8}  {row.updated}")
        lines.append(line + (f"  ({row.note})" if row.note else ""))
    return "\n".join(lines)


def find_task(tasks: Mapping[str, Mapping[str, Any]], ref: str) -> Mapping[str, Any]:
    """The task whose id is `ref`, or the only one whose id starts with it.

    Raises:
        TaskLookupError: no task matches, or several do (the message lists them).
    """
    ref = ref.strip()
    if ref in tasks:
        return tasks[ref]
    matches = [task_id for task_id in tasks if ref and task_id.startswith(ref)]
    if len(matches) == 1:
        return tasks[matches[0]]
    known = ", ".join(f"{t} ({tasks[t].get('agent_name', '?')})" for t in tasks) or "none"
    if matches:
        raise TaskLookupError(f"{ref!r} matches several tasks: {', '.join(matches)}; "
                              "give more of the id")
    raise TaskLookupError(f"no async task {ref!r} on this thread; its tasks: {known}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else str(b.get("text", f"[{b.get('type', '?')}]"))
                 for b in content if isinstance(b, (str, dict))]
        return "".join(parts)
    return str(content)


def _message_line(message: Mapping[str, Any]) -> str:
    kind = str(message.get("type") or message.get("role") or "?")
    role = {"human": "user", "ai": "assistant"}.get(kind, kind)
    text = " ".join(_text(message.get("content", "")).split())
    if len(text) > _MAX_MESSAGE_CHARS:
        text = text[:_MAX_MESSAGE_CHARS] + "…"
    if role == "tool":
        role = f"tool {message.get('name', '')}".strip()
    calls = message.get("tool_calls") or []
    if calls:
        text = (text + " " if text else "") + " ".join(
            f"→ {c.get('name')}({json.dumps(c.get('args', {}), ensure_ascii=False)})"
            for c in calls
        )
    return f"{role}: {text}"


async def render_child(client: LangGraphClient, task: Mapping[str, Any]) -> str:
    """One child thread: a header with its live status, its conversation, and what it waits
    for when a person is needed."""
    row = (await live_rows(client, {str(task["task_id"]): task}))[0]
    thread_id = str(task.get("thread_id") or task["task_id"])
    header = f"task {row.task_id} · {row.agent_name} · {row.status}"
    if row.calls is not None:
        header += f" · {row.calls} model calls, {row.tokens:,} tokens"
    if row.note:
        return f"{header}\n({row.note})"
    thread = await client.threads.get(thread_id)
    values = thread.get("values")
    messages = values.get("messages", []) if isinstance(values, Mapping) else []
    lines = [header, f"thread {thread_id}", ""]
    lines += [_message_line(m) for m in messages if isinstance(m, Mapping)]
    pending = [item for items in (thread.get("interrupts") or {}).values() for item in items]
    for item in pending:
        value = json.dumps(item.get("value"), ensure_ascii=False, default=str)
        lines.append(f"waiting for a person: {value}")
    if pending:
        lines.append(f"(answer it by resuming thread {thread_id} on the server with a command)")
    return "\n".join(lines)


async def server_async_tasks(client: LangGraphClient, thread_id: str) -> dict[str, Any]:
    """The `async_tasks` channel of a thread on the server (empty when it has none)."""
    thread = await client.threads.get(thread_id)
    values = thread.get("values")
    if not isinstance(values, Mapping):  # a server that does not return values
        values = (await client.threads.get_state(thread_id)).get("values")
    tasks = values.get("async_tasks") if isinstance(values, Mapping) else None
    return dict(tasks) if isinstance(tasks, Mapping) else {}


async def local_async_tasks(db_path: Path, thread_id: str) -> dict[str, Any]:
    """The `async_tasks` channel of a thread in the command's local thread store."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(db_path)) as checkpointer:
        saved = await checkpointer.aget_tuple({"configurable": {"thread_id": thread_id}})
    if saved is None:
        return {}
    tasks = saved.checkpoint.get("channel_values", {}).get("async_tasks")
    return dict(tasks) if isinstance(tasks, Mapping) else {}


async def tasks_report(client: LangGraphClient, tasks: Mapping[str, Any],
                       open_ref: str | None) -> str:
    """What `fathom tasks` prints: the table, or one child thread for `open_ref`."""
    if open_ref:
        return await render_child(client, find_task(tasks, open_ref))
    return format_tasks(await live_rows(client, tasks))
