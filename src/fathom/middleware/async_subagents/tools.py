"""The five async subagent tools: start, check, update, cancel and list background tasks.

Every failure (an unknown subagent type, an unknown or truncated task id, a server that
is down or answers 404/409, sync invocation where only the async path can work) comes
back as a tool answer with `status="error"`; nothing raises out of a tool (the unexpected
is logged and answered too), and the `async_tasks` records change only when the server
confirmed the change.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from langgraph_sdk.client import LangGraphClient
from pydantic import BaseModel, Field

from fathom.middleware.async_subagents.tasks import (
    FOLLOWS_RUN_KEY,
    PARENT_KEY,
    UNFINISHED,
    AsyncSubAgent,
    AsyncTask,
    context_data,
    final_blocks,
    now_iso,
    result_content,
    task_status,
)
from fathom.middleware.async_subagents.transport import (
    REMOTE_ERRORS,
    ClientPool,
    create_run,
    describe_error,
    read_thread,
    status_code,
)
from fathom.middleware.subagents import fork_messages
from fathom.tool_answers import Failure, aattempt, exception_text, tool_error
from fathom.tracing.settings import trace_metadata

__all__ = [
    "CANCEL_ASYNC_TASK_TOOL",
    "CHECK_ASYNC_TASK_TOOL",
    "LIST_ASYNC_TASKS_TOOL",
    "START_ASYNC_TASK_TOOL",
    "UPDATE_ASYNC_TASK_TOOL",
    "TaskTracker",
    "build_async_tools",
    "check_report",
    "observe",
    "observed_record",
]

START_ASYNC_TASK_TOOL = "start_async_task"
CHECK_ASYNC_TASK_TOOL = "check_async_task"
UPDATE_ASYNC_TASK_TOOL = "update_async_task"
CANCEL_ASYNC_TASK_TOOL = "cancel_async_task"
LIST_ASYNC_TASKS_TOOL = "list_async_tasks"
"""The names of the five async subagent tools."""

logger = logging.getLogger(__name__)


_TASK_ID = "The exact task_id that start_async_task returned. Pass it whole, unchanged."

StatusFilter = Literal["running", "pending", "waiting", "success", "error", "cancelled", "all"]


class StartAsyncTaskSchema(BaseModel):
    """Arguments of `start_async_task`."""

    description: str = Field(description="The task for the async subagent, in full detail.")
    subagent_type: str = Field(
        description="Which async subagent to start: one of the types listed in the tool "
        "description."
    )


class CheckAsyncTaskSchema(BaseModel):
    """Arguments of `check_async_task`."""

    task_id: str = Field(description=_TASK_ID)


class UpdateAsyncTaskSchema(BaseModel):
    """Arguments of `update_async_task`."""

    task_id: str = Field(description=_TASK_ID)
    message: str = Field(description="The follow-up instructions or context for the subagent.")


class CancelAsyncTaskSchema(BaseModel):
    """Arguments of `cancel_async_task`."""

    task_id: str = Field(description=_TASK_ID)


class ListAsyncTasksSchema(BaseModel):
    """Arguments of `list_async_tasks`."""

    status_filter: StatusFilter | None = Field(
        default=None,
        description="Only tasks with this status: 'running', 'pending', 'waiting', 'success', "
        "'error', 'cancelled' or 'all' (the default).",
    )


START_DESCRIPTION = """Start an async subagent: it works in the background on its server, and this tool returns a task id at once.

Async subagent types:
{available_agents}

How to use it:
1. Launch, then say briefly what you delegated and whether you go on with other work or wait. Keep task ids out of replies to the user unless they ask or need one to troubleshoot. Do NOT check the status right after launching.
2. You are usually told when a task finishes, fails or needs input. Do not poll: call `check_async_task` only when the user asks, or a notification tells you to.
3. `update_async_task` sends new instructions to a task that is running.
4. Several async subagents can run at once: launch them all and let them work.
5. A subagent runs on its own server with its own tools.
6. A task that is `waiting` needs a human (an approval or an answer). The user answers it on the subagent's own thread; you cannot answer or approve it. Keep working, and tell the user it waits if they ask."""  # noqa: E501

CHECK_DESCRIPTION = (
    "Check one async subagent task: its current status and, once it finished, its result; "
    "for a `waiting` task, what it asks the user. Statuses seen earlier in the conversation "
    "are stale: call this to get the current one instead of repeating an old answer. Do not "
    "call it repeatedly to wait for a task; you are told when it ends."
)

UPDATE_DESCRIPTION = (
    "Send new instructions to an async subagent task. The current run is interrupted and a "
    "new one starts on the same thread, so the subagent sees its whole conversation plus "
    "your message; the task_id stays the same. Send at most one update per task per turn; "
    "put several instructions into one message."
)

UPDATE_ENQUEUE_NOTE = (
    "\n\nFor {agents}, a follow-up waits in a queue behind the current run instead of "
    "interrupting it; while it waits the task is `pending`, and earlier work may still be "
    "running. If the current run stops to ask the user something, the queued follow-up "
    "starts anyway and that question is dropped."
)

CANCEL_DESCRIPTION = (
    "Cancel an async subagent task that is running, pending or waiting, when its work is "
    "no longer needed."
)

LIST_DESCRIPTION = (
    "List the async subagent tasks you started, with their current statuses (all of them, "
    "or those with `status_filter`). Use `check_async_task` for a finished task's result or "
    "what a `waiting` task asks. Statuses seen earlier in the conversation are stale: call "
    "this instead of repeating one."
)


def _error(text: str, runtime: ToolRuntime) -> ToolMessage:
    return tool_error(text, tool_call_id=runtime.tool_call_id or "")


def _answer(text: Any, runtime: ToolRuntime, records: Mapping[str, AsyncTask]) -> Command:
    return Command(
        update={
            "messages": [ToolMessage(text, tool_call_id=runtime.tool_call_id or "")],
            "async_tasks": dict(records),
        }
    )


def observed_record(task: AsyncTask, status: str, run_id: str) -> AsyncTask:
    """`task` as a read of the server found it (`last_updated_at` moves on a change)."""
    now = now_iso()
    changed = status != task["status"] or run_id != task["run_id"]
    return {
        **task,
        "status": status,
        "run_id": run_id,
        "last_checked_at": now,
        "last_updated_at": now if changed else task["last_updated_at"],
    }


async def _latest_run(client: LangGraphClient, thread_id: str, fallback: Any) -> Any:
    runs = await client.runs.list(thread_id, limit=1)
    return runs[0] if runs else fallback


async def observe(
    client: LangGraphClient, task: AsyncTask
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The task's newest run and, when that run succeeded, its thread.

    A tracked run that another run replaced (interrupted) hands over to the thread's
    newest run, unless the parent itself cancelled the task; a succeeded run whose thread
    is busy or failed afterwards does too (someone resumed it elsewhere).
    """
    run = dict(await client.runs.get(task["thread_id"], task["run_id"]))
    if run.get("status") == "interrupted" and task["status"] != "cancelled":
        run = dict(await _latest_run(client, task["thread_id"], run))
    if run.get("status") != "success":
        return run, None
    thread = await read_thread(client, task["thread_id"])
    if thread.get("status") in ("busy", "error"):
        run = dict(await _latest_run(client, task["thread_id"], run))
    return run, thread


def check_report(
    task: AsyncTask, run: Mapping[str, Any], thread: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What `check_async_task` answers about a task's newest run."""
    status = task_status(run, thread)
    report: dict[str, Any] = {"status": status, "thread_id": task["thread_id"]}
    if status == "pending":
        report["note"] = (
            "The newest run has not started yet; if it is a queued follow-up, earlier work "
            "may still be running."
        )
    elif status == "success":
        values = thread.get("values") if thread else None
        report["result"] = final_blocks(values if isinstance(values, Mapping) else None)
    elif status == "error":
        detail = run.get("error")
        report["error"] = str(detail) if detail else "The async subagent failed."
    elif status == "waiting":
        pending = ((thread or {}).get("interrupts") or {}).values()
        interrupts = [i for items in pending for i in items]
        report["interrupts"] = [{"id": i.get("id"), "value": i.get("value")} for i in interrupts]
        report["note"] = (
            "It waits for a human: the user answers it on its own thread; you cannot answer "
            "or approve it. Keep working."
        )
    return report


async def _failure_detail(client: LangGraphClient, run: Mapping[str, Any]) -> str | None:
    """Why a failed run failed, from its output (`{"__error__": {...}}` on Agent Protocol
    servers that keep it); `None` when the server does not say."""
    try:
        output = await asyncio.wait_for(client.runs.join(run["thread_id"], run["run_id"]), 5)
    except REMOTE_ERRORS:
        logger.debug("reading why run %s failed failed", run.get("run_id"), exc_info=True)
        return None
    error = output.get("__error__") if isinstance(output, Mapping) else None
    if isinstance(error, Mapping):
        return ": ".join(str(error[k]) for k in ("error", "message") if error.get(k))
    return None


def _budget_grant() -> dict[str, Any] | None:
    """`{fathom_budget_grant: what is left}` when this runs under a budget, else `None`.

    `fathom.budget` is loaded only by agents that have a budget: while it is not, none is
    active and there is nothing to hand on."""
    budget = sys.modules.get("fathom.budget")
    grant = budget.current_grant() if budget is not None else None
    return {budget.GRANT_KEY: grant} if budget is not None and grant is not None else None


class TaskTracker:
    """The specs, their clients, and the steps each tool takes against a server."""

    def __init__(self, specs: Sequence[AsyncSubAgent]) -> None:
        self.specs: dict[str, AsyncSubAgent] = {spec["name"]: spec for spec in specs}
        self.clients = ClientPool()

    # ------------------------------------------------------------------ lookups
    def resolve(self, task_id: str, runtime: ToolRuntime) -> AsyncTask | str:
        """The tracked task for `task_id`, or why there is none (with the known ids).

        A task id is matched exactly (after trimming whitespace): a truncated id is
        refused, and the answer lists the tracked ids so the model can retry with one.
        """
        tasks: Mapping[str, AsyncTask] = runtime.state.get("async_tasks") or {}
        wanted = str(task_id).strip()
        if wanted in tasks:
            return tasks[wanted]
        if not tasks:
            return f"No task has id {task_id!r}: no async subagent task has been started yet."
        known = "\n".join(
            f"- {t['task_id']} ({t['agent_name']}, {t['status']})" for t in tasks.values()
        )
        hint = ""
        if wanted and any(t.startswith(wanted) or wanted.startswith(t) for t in tasks):
            hint = " It looks truncated or altered: task ids must be passed whole."
        return f"No tracked task has id {task_id!r}.{hint} The tracked tasks are:\n{known}"

    def _unknown_type(self, subagent_type: str) -> str:
        allowed = ", ".join(f"`{name}`" for name in self.specs)
        return f"Unknown async subagent type `{subagent_type}`. The available types are: {allowed}."

    # ------------------------------------------------------------------ what runs carry
    def parent_reference(self, spec: AsyncSubAgent, runtime: ToolRuntime) -> dict[str, str]:
        """The parent's thread (and, when the child may wake it, its assistant)."""
        config = runtime.config or {}
        configurable = config.get("configurable") or {}
        reference: dict[str, str] = {}
        if thread_id := configurable.get("thread_id"):
            reference["thread_id"] = str(thread_id)
        assistant = (config.get("metadata") or {}).get("assistant_id") or configurable.get(
            "assistant_id"
        )
        # only a child on this server with notifications on wakes its parent
        if assistant and not spec.get("url") and spec.get("notify_parent", True):
            reference["assistant_id"] = str(assistant)
        return reference

    def thread_metadata(self, spec: AsyncSubAgent, runtime: ToolRuntime) -> dict[str, str]:
        reference = self.parent_reference(spec, runtime)
        metadata = {"subagent_name": spec["name"]}
        if "thread_id" in reference:
            metadata["parent_thread_id"] = reference["thread_id"]
        if "assistant_id" in reference:
            metadata["parent_assistant_id"] = reference["assistant_id"]
        return metadata

    def run_options(self, spec: AsyncSubAgent, runtime: ToolRuntime) -> dict[str, Any]:
        """`runs.create` keywords: the webhook, and the parent's context (a child on this
        server) or the parent reference in `configurable` (a server takes one or the other)."""
        options: dict[str, Any] = {}
        if webhook := spec.get("webhook"):
            options["webhook"] = webhook
        context = None if spec.get("url") else context_data(runtime.context)
        if context is not None:
            options["context"] = context
        elif reference := self.parent_reference(spec, runtime):
            options["config"] = {"configurable": {PARENT_KEY: reference}}
        # the child's run continues the trace of this tool call
        if trace := trace_metadata(runtime.config, runtime.tool_call_id):
            options["metadata"] = trace
        # under a budget, the child may spend at most what is left of it (docs/budgets.md)
        if (grant := _budget_grant()) is not None:
            options["metadata"] = {**options.get("metadata", {}), **grant}
        return options

    # ------------------------------------------------------------------ the tools
    async def start(self, description: str, subagent_type: str, runtime: ToolRuntime) -> Any:
        spec = self.specs.get(subagent_type)
        if spec is None:
            return _error(self._unknown_type(subagent_type), runtime)
        if spec.get("mode") == "fork":
            messages: list[Any] = [
                m.model_dump(exclude={"artifact"}) if hasattr(m, "model_dump") else m
                for m in fork_messages(runtime.state.get("messages") or [], description)
            ]
        else:
            messages = [{"role": "user", "content": description}]
        try:
            client = self.clients.get(spec)
            thread = await client.threads.create(metadata=self.thread_metadata(spec, runtime))
            run = await client.runs.create(
                thread["thread_id"], spec["graph_id"], input={"messages": messages},
                **self.run_options(spec, runtime),
            )
        except REMOTE_ERRORS as error:
            logger.warning("launching async subagent %r failed", subagent_type, exc_info=True)
            return _error(
                f"Could not launch async subagent `{subagent_type}`: "
                f"{describe_error(error, spec)}. No task was started.",
                runtime,
            )
        task_id = str(thread["thread_id"])
        now = now_iso()
        task: AsyncTask = {
            "task_id": task_id, "agent_name": subagent_type, "thread_id": task_id,
            "run_id": str(run["run_id"]), "status": "running",
            "created_at": now, "last_checked_at": now, "last_updated_at": now,
        }  # fmt: skip
        return _answer(f"Launched async subagent. task_id: {task_id}", runtime, {task_id: task})

    async def check(self, task_id: str, runtime: ToolRuntime) -> Any:
        task = self.resolve(task_id, runtime)
        if isinstance(task, str):
            return _error(task, runtime)
        if task["status"] == "cancelled":
            # the parent cancelled it: its thread may still show an old pause or result
            report = {"status": "cancelled", "thread_id": task["thread_id"],
                      "note": "You cancelled this task. Start a new one if the work is still "
                              "needed."}
            return _answer(result_content(report), runtime, {task["task_id"]: task})
        spec = self.specs.get(task["agent_name"])
        if spec is None:
            return _error(f"Task {task['task_id']} belongs to `{task['agent_name']}`, which "
                          "this agent no longer has.", runtime)
        try:
            run, thread = await observe(self.clients.get(spec), task)
        except REMOTE_ERRORS as error:
            return _error(f"Could not get the status of task {task['task_id']}: "
                          f"{describe_error(error, spec)}. Its last known status is "
                          f"{task['status']!r}.", runtime)
        report = check_report(task, run, thread)
        if report["status"] == "error" and not run.get("error"):
            report["error"] = await _failure_detail(self.clients.get(spec), run) or report["error"]
        updated = observed_record(task, report["status"], str(run.get("run_id", task["run_id"])))
        return _answer(result_content(report), runtime, {task["task_id"]: updated})

    def _second_update(self, task: AsyncTask, runtime: ToolRuntime) -> str | None:
        """Refuse every update to a task after the first in one model turn: parallel
        calls see the same state, so each would record its run as the only follow-up."""
        messages = runtime.state.get("messages") or []
        turn = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        ids = [
            call.get("id") for call in (turn.tool_calls if turn else [])
            if call["name"] == UPDATE_ASYNC_TASK_TOOL
            and str(call["args"].get("task_id", "")).strip() == task["task_id"]
        ]  # fmt: skip
        if runtime.tool_call_id not in ids[1:]:
            return None
        return (
            f"Not sent: an earlier update_async_task call in this turn already updates task "
            f"{task['task_id']}. Send this follow-up in a later turn, or put both into one message."
        )

    async def update(self, task_id: str, message: str, runtime: ToolRuntime) -> Any:
        task = self.resolve(task_id, runtime)
        if isinstance(task, str):
            return _error(task, runtime)
        spec = self.specs.get(task["agent_name"])
        if spec is None:
            return _error(f"Task {task['task_id']} belongs to `{task['agent_name']}`, which "
                          "this agent no longer has.", runtime)
        if refusal := self._second_update(task, runtime):
            return _error(refusal, runtime)
        strategy = spec.get("update_strategy", "interrupt")
        options = self.run_options(spec, runtime)
        options["metadata"] = {**options.get("metadata", {}), FOLLOWS_RUN_KEY: task["run_id"]}
        try:
            run = await create_run(
                self.clients.get(spec), thread_id=task["thread_id"], assistant_id=spec["graph_id"],
                input={"messages": [{"role": "user", "content": message}]},
                multitask_strategy=strategy, active_run_id=task["run_id"], **options,
            )
        except REMOTE_ERRORS as error:
            logger.warning("updating task %s failed", task["task_id"], exc_info=True)
            return _error(f"Could not update task {task['task_id']}: "
                          f"{describe_error(error, spec)}. Nothing was sent.", runtime)
        updated: AsyncTask = {**task, "run_id": str(run["run_id"]), "status": "running",
                              "last_updated_at": now_iso()}
        if strategy == "enqueue":
            earlier = task.get("superseded_run_ids", []) if task["status"] in UNFINISHED else []
            updated["status"] = str(run.get("status") or "pending")
            updated["superseded_run_ids"] = [*earlier, task["run_id"]]
        if strategy == "enqueue" and task["status"] in ("running", "pending"):
            text = f"Queued the follow-up behind the current run. task_id: {task['task_id']}"
        else:
            text = f"Updated async subagent. task_id: {task['task_id']}"
            if task["status"] == "waiting":
                text += ". It was waiting for a human; that request was dropped."
        return _answer(text, runtime, {task["task_id"]: updated})

    async def cancel(self, task_id: str, runtime: ToolRuntime) -> Any:
        task = self.resolve(task_id, runtime)
        if isinstance(task, str):
            return _error(task, runtime)
        if task["status"] == "cancelled":
            return _answer(f"Task {task['task_id']} was already cancelled.", runtime, {})
        spec = self.specs.get(task["agent_name"])
        if spec is None:
            return _error(f"Task {task['task_id']} belongs to `{task['agent_name']}`, which "
                          "this agent no longer has.", runtime)
        # a waiting subagent has no active run: marking the task is enough
        if task["status"] != "waiting":
            client = None
            try:
                client = self.clients.get(spec)
                await client.runs.cancel(task["thread_id"], task["run_id"])
            except REMOTE_ERRORS as error:
                return await self._cancel_failed(client, spec, task, error, runtime)
            await self._cancel_earlier(client, task)
        now = now_iso()
        updated: AsyncTask = {**task, "status": "cancelled", "last_checked_at": now,
                              "last_updated_at": now}
        return _answer(f"Cancelled async subagent task: {task['task_id']}", runtime,
                       {task["task_id"]: updated})

    async def _cancel_failed(self, client: LangGraphClient | None, spec: AsyncSubAgent,
                             task: AsyncTask, error: BaseException, runtime: ToolRuntime) -> Any:
        """A cancel the server refused: a run that already ended is reported as it ended."""
        if client is not None and status_code(error) in (404, 409):
            try:
                run, thread = await observe(client, task)
            except REMOTE_ERRORS:
                logger.debug("reading task %s after a failed cancel failed", task["task_id"],
                             exc_info=True)
            else:
                status = task_status(run, thread)
                if status not in UNFINISHED:
                    updated = observed_record(task, status, str(run.get("run_id", task["run_id"])))
                    return _answer(f"Task {task['task_id']} had already ended ({status}); "
                                   "nothing to cancel.", runtime, {task["task_id"]: updated})
        return _error(f"Could not cancel task {task['task_id']}: "
                      f"{describe_error(error, spec)}. It may still be running.", runtime)

    @staticmethod
    async def _cancel_earlier(client: LangGraphClient, task: AsyncTask) -> None:
        """Cancel the earlier runs still active, newest first (so none queued behind
        another starts); one that cannot be read or cancelled is skipped."""
        for run_id in reversed(task.get("superseded_run_ids", [])):
            try:
                run = await client.runs.get(task["thread_id"], run_id)
                if run["status"] in ("pending", "running"):
                    await client.runs.cancel(task["thread_id"], run_id)
            except REMOTE_ERRORS:
                logger.warning("cancelling earlier run %s of task %s failed", run_id,
                               task["task_id"], exc_info=True)

    async def live_status(
        self, task: AsyncTask, timeout: float | None = None
    ) -> tuple[str, str, dict[str, Any] | None, Any] | None:
        """`(status, run_id, run, thread)` read from the server, or `None` when it could
        not be read (within `timeout` seconds)."""
        spec = self.specs.get(task["agent_name"])
        if spec is None:
            return None

        async def read() -> tuple[dict[str, Any], dict[str, Any] | None]:
            return await asyncio.wait_for(observe(self.clients.get(spec), task), timeout)

        # the server may host the subagent in process and raise anything through the SDK:
        # a refresh (before a model call, or for a tool) is a boundary that never fails
        # the run
        found = await aattempt(read(), f"reading the status of task {task['task_id']}")
        if isinstance(found, Failure):
            logger.warning("reading the status of task %s failed", task["task_id"],
                           exc_info=found.error)  # fmt: skip
            return None
        run, thread = found
        return task_status(run, thread), str(run.get("run_id", task["run_id"])), run, thread

    async def list(self, runtime: ToolRuntime, status_filter: str | None = None) -> Any:
        tasks: Mapping[str, AsyncTask] = runtime.state.get("async_tasks") or {}
        chosen = [t for t in tasks.values()
                  if not status_filter or status_filter == "all" or t["status"] == status_filter]
        if not chosen:
            which = "" if not status_filter or status_filter == "all" else f" {status_filter}"
            return _answer(f"No{which} async subagent tasks tracked.", runtime, {})
        live = await asyncio.gather(*(
            self.live_status(t) if t["status"] in UNFINISHED else _none() for t in chosen
        ))
        lines, records = [], {}
        for task, found in zip(chosen, live, strict=True):
            if found is None:
                status = task["status"]
                note = " (last known; the server did not answer)" if status in UNFINISHED else ""
            else:
                status, run_id, _, _ = found
                records[task["task_id"]] = observed_record(task, status, run_id)
                note = ""
            lines.append(f"- task_id: {task['task_id']}  agent: {task['agent_name']}  "
                         f"status: {status}{note}")
        return _answer(f"{len(lines)} tracked task(s):\n" + "\n".join(lines), runtime, records)


async def _none() -> None:
    return None


def _sync(
    tracker: TaskTracker, name: str, method: Callable[..., Coroutine[Any, Any, Any]]
) -> Callable[..., Any]:
    """The sync face of a tool: the async steps in a loop of their own; a spec without a
    url needs the async path (the hosting server's loop), so it is answered with an error."""

    def call(*args: Any, runtime: ToolRuntime, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return _error(f"{name} was called synchronously inside a running event loop; "
                          "invoke the agent with ainvoke/astream.", runtime)
        local = [spec["name"] for spec in tracker.specs.values() if not spec.get("url")]
        if local:
            return _error(
                f"{name} needs async invocation (ainvoke/astream, as `fathom serve` runs "
                f"agents): async subagents without a url ({', '.join(local)}) run on the "
                "server hosting this agent, in its event loop.",
                runtime,
            )
        return asyncio.run(method(*args, runtime=runtime, **kwargs))

    return call


def build_async_tools(tracker: TaskTracker) -> list[StructuredTool]:
    """The five tools over `tracker`'s specs."""
    agents = "\n".join(
        f"- {spec['name']}: {spec['description']}"
        + (" (sees your conversation at launch; has its own prompt and tools)"
           if spec.get("mode") == "fork" else "")
        for spec in tracker.specs.values()
    )
    queued = ", ".join(f"`{n}`" for n, s in tracker.specs.items()
                       if s.get("update_strategy") == "enqueue")
    update_description = UPDATE_DESCRIPTION + (
        UPDATE_ENQUEUE_NOTE.format(agents=queued) if queued else ""
    )

    table = [
        (START_ASYNC_TASK_TOOL, tracker.start, START_DESCRIPTION.format(available_agents=agents),
         StartAsyncTaskSchema),
        (CHECK_ASYNC_TASK_TOOL, tracker.check, CHECK_DESCRIPTION, CheckAsyncTaskSchema),
        (UPDATE_ASYNC_TASK_TOOL, tracker.update, update_description, UpdateAsyncTaskSchema),
        (CANCEL_ASYNC_TASK_TOOL, tracker.cancel, CANCEL_DESCRIPTION, CancelAsyncTaskSchema),
        (LIST_ASYNC_TASKS_TOOL, tracker.list, LIST_DESCRIPTION, ListAsyncTasksSchema),
    ]
    return [_tool(tracker, *row) for row in table]


def _tool(
    tracker: TaskTracker, name: str, step: Callable[..., Coroutine[Any, Any, Any]],
    description: str, schema: type[BaseModel],
) -> StructuredTool:
    """The tool `name` over one of `tracker`'s steps; whatever else the step raises (a bug
    in a server that hosts the subagent in process, raised through the SDK) is answered."""

    @functools.wraps(step)
    async def coroutine(*args: Any, runtime: ToolRuntime, **kwargs: Any) -> Any:
        try:
            return await step(*args, runtime=runtime, **kwargs)
        except Exception as error:  # boundary: a tool call never raises into the run
            logger.exception("%s failed", name)
            return _error(f"{name} failed: {exception_text(error)}", runtime)

    return StructuredTool.from_function(
        name=name, func=_sync(tracker, name, coroutine), coroutine=coroutine,
        description=description, args_schema=schema, infer_schema=False,
    )
