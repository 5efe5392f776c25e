"""`AsyncSubAgentMiddleware`: background subagents on Agent Protocol servers.

A sync subagent (the `task` tool) blocks the parent until it answers; an async one is
launched as a background run on a server and answers with a task id at once, so the
parent goes on talking with its user and can check on the work, steer it mid-flight and
cancel it (`start_async_task`, `check_async_task`, `update_async_task`,
`cancel_async_task`, `list_async_tasks`). The tasks live in the `async_tasks` state
channel, out of the message history, so summarization never loses their ids.

Before each model call (and once more after a final answer) the middleware refreshes the
unfinished tasks from their servers, each within a bounded time, and tells the model
about every new outcome, so it never reports a stale status. That needs the async path
(`ainvoke` / `astream`, which `fathom serve` uses); on the sync path only the tools work,
and only for specs with a `url`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, hook_config
from langchain_core.messages import RemoveMessage
from langgraph.runtime import Runtime

from fathom.middleware.async_subagents.tasks import (
    NOTIFICATION_KEY,
    UNFINISHED,
    AsyncSubAgent,
    AsyncSubAgentState,
    AsyncTask,
    update_message,
    validate_async_subagents,
)
from fathom.middleware.async_subagents.tools import (
    TaskTracker,
    build_async_tools,
    check_report,
    observed_record,
)
from fathom.prompt import PromptSection, SectionPromptMixin

__all__ = [
    "AsyncSubAgent",
    "AsyncSubAgentMiddleware",
    "AsyncSubAgentState",
    "AsyncTask",
]

logger = logging.getLogger(__name__)

REFRESH_TIMEOUT_S = 5.0
"""How long a refresh waits on one task's server before leaving it for the next one."""

_WORTH_TELLING = frozenset({"success", "error", "timeout", "cancelled", "waiting"})


class AsyncSubAgentMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the async subagent tools and keeps the `async_tasks` channel current.

    Args:
        async_subagents: `AsyncSubAgent` specs (`name`, `description`, `graph_id`, and
            optionally `url`, `headers`, `webhook`, `update_strategy`, `notify_parent`,
            `mode`). Names must be unique.
        system_prompt: A prompt section about the async subagents, followed by their list;
            `None` adds none (the `start_async_task` description lists them).
        refresh_timeout: Seconds a refresh waits on one task before skipping it.

    Raises:
        ValueError: no specs, a duplicate name, an unknown key, a missing field, or a bad
            `update_strategy` / `mode`.
    """

    state_schema = AsyncSubAgentState

    def __init__(
        self,
        *,
        async_subagents: Sequence[AsyncSubAgent],
        system_prompt: str | None = None,
        refresh_timeout: float = REFRESH_TIMEOUT_S,
    ) -> None:
        super().__init__()
        validate_async_subagents(async_subagents)
        self.async_subagents = list(async_subagents)
        self.refresh_timeout = refresh_timeout
        self.tracker = TaskTracker(self.async_subagents)
        self.tools = build_async_tools(self.tracker)
        text = ""
        if system_prompt:
            listing = "\n".join(f"- {s['name']}: {s['description']}" for s in async_subagents)
            text = f"{system_prompt}\n\nAvailable async subagent types:\n\n{listing}"
        self.section = PromptSection(
            "async_subagents", text, tools=frozenset(tool.name for tool in self.tools)
        )
        self.system_prompt: str | None = text or system_prompt
        """The section's text (the prompt and the list), or `system_prompt` as given when
        it is empty or `None`: the reference's attribute."""

    # ------------------------------------------------------------------ hooks
    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A run started by a task notification (a child waking this agent) records the
        outcome it reports, so the refresh does not report it a second time. A
        notification of an outcome this agent already knows (its own refresh reported it
        first) is dropped, and the run ends before any model call."""
        return _record_notification(state)

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """`before_agent` on the async path."""
        return _record_notification(state)

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Sync path: no refresh (it needs the server's event loop)."""
        return None

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Refresh the unfinished tasks before the model reads the conversation."""
        return await self.refresh(state.get("async_tasks") or {}) or None

    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Sync path: no refresh."""
        return None

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """After a final answer, refresh once more; a new outcome gives the model a turn
        to tell the user (each extra turn needs a new outcome, so this ends)."""
        messages = state.get("messages") or []
        if not messages or getattr(messages[-1], "tool_calls", None):
            return None
        update = await self.refresh(state.get("async_tasks") or {})
        if not update.get("messages"):
            return update or None
        return {**update, "jump_to": "model"}

    async def refresh(self, tasks: Mapping[str, AsyncTask]) -> dict[str, Any]:
        """Read every unfinished task from its server, concurrently; the changed records,
        and a message for each new outcome. A task whose server does not answer within
        `refresh_timeout` keeps its record until the next refresh."""
        unfinished = [t for t in tasks.values() if t["status"] in UNFINISHED]
        if not unfinished:
            return {}
        found = await asyncio.gather(
            *(self.tracker.live_status(t, self.refresh_timeout) for t in unfinished)
        )
        records: dict[str, AsyncTask] = {}
        messages: list[dict[str, Any]] = []
        for task, live in zip(unfinished, found, strict=True):
            if live is None:
                continue
            status, run_id, run, thread = live
            if status == task["status"] and run_id == task["run_id"]:
                continue
            record = observed_record(task, status, run_id)
            records[task["task_id"]] = record
            if status != task["status"] and status in _WORTH_TELLING:
                report = check_report(record, run or {}, thread)
                details = {k: report[k] for k in ("error", "interrupts") if k in report}
                messages.append(update_message(record, status, report.get("result"), details))
        update: dict[str, Any] = {"async_tasks": records} if records else {}
        if messages:
            update["messages"] = messages
        return update


def _record_notification(state: Mapping[str, Any]) -> dict[str, Any] | None:
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    event = getattr(last, "additional_kwargs", {}).get(NOTIFICATION_KEY) if last else None
    tasks: Mapping[str, AsyncTask] = state.get("async_tasks") or {}
    task = tasks.get(str(event.get("task_id"))) if isinstance(event, Mapping) else None
    if task is None or not isinstance(event, Mapping) or not event.get("status"):
        return None
    if event.get("run_id") == task["run_id"] and event["status"] == task["status"]:
        # told already (a refresh saw the run end before the child's notifier did)
        drop = [RemoveMessage(id=last.id)] if last is not None and last.id else []
        return {"messages": drop, "jump_to": "end"}
    run_id = str(event.get("run_id") or task["run_id"])
    # an earlier run's news (before a queued follow-up) is not the task's outcome; an
    # answer to a pause starts a new run, which still counts while the task is unfinished
    if run_id in task.get("superseded_run_ids", []):
        return None
    if run_id != task["run_id"] and task["status"] not in UNFINISHED:
        return None
    record = observed_record(task, str(event["status"]), run_id)
    return {"async_tasks": {task["task_id"]: record}}
