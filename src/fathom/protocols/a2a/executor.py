"""``FathomAgentExecutor``: A2A tasks executed as runs of one assistant of a fathom server.

* **Contexts are threads.** An A2A ``contextId`` names a fathom thread: a UUID (what the
  a2a-sdk generates) or any id of 1-128 letters, digits, ``_`` or ``-`` is the thread id
  itself; any other string maps to ``uuid5`` of it. The thread is created on first use, and
  every later task in that context continues it.
* **Tasks are runs.** Each message becomes a run submitted to the server's own run manager,
  so it is listed under ``/threads/{id}/runs``, holds a worker slot and follows the thread's
  multitask rules (a second task in a busy context is queued behind the first).
* **Approvals are ``input-required``.** A run that pauses on an interrupt (``interrupt_on``)
  leaves the task ``input-required`` with the pending actions described; the next message on
  that task resumes the run (the reply grammar is in :mod:`fathom.protocols.a2a.approvals`). While a
  context waits on an approval, a new task in it fails with a message naming the waiting
  task; once that task is cancelled (or the server restarted), a new task supersedes the
  pending approval.
* **Cancel stops the run**: its asyncio task is cancelled, and the A2A task ends
  ``canceled``. A run cancelled through the LangGraph API ends its A2A task the same way.
* **A restart in the middle of a task**: a server that stops while a task's run is in flight
  leaves the task ``working`` in storage. The next server's A2A endpoint of that assistant
  settles such tasks from their runs before it answers its first request (``recover``): a run
  the new server resumed (after a crash on SQLite, or after any stop on PostgreSQL, whose
  servers hand their runs back to the shared queue) is followed to its end, and the task ends
  as it would have (``completed`` with its answer, ``input-required``, ``failed``); a run that
  was interrupted by a clean shutdown (SQLite) is not resumed, so its task ends ``failed``
  with a message saying so and how to continue the context; a task whose run never started
  ends ``failed`` too.
* **Results**: the agent's last AI message is the task's ``answer`` artifact and its final
  status message; a graph without ``messages`` answers its final values as a data part.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import TaskManager, TaskUpdater
from a2a.types import Part, Task, TaskState
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict
from langchain_core.runnables import RunnableConfig

from fathom.protocols.a2a.approvals import PendingInterrupt, ReplyError, describe, resume_value
from fathom.protocols.a2a.tasks import ServerTaskStore
from fathom.server.context import FathomServer
from fathom.server.errors import ApiError
from fathom.server.runs import start_run
from fathom.server.serde import to_jsonable
from fathom.server.validation import ID_PATTERN

__all__ = ["FathomAgentExecutor", "thread_for_context"]

logger = logging.getLogger(__name__)

_CONTEXT_NAMESPACE = uuid.UUID("0b6a7e1e-5a0c-4f7e-9d43-8a2f3c1d9e61")


def thread_for_context(context_id: str) -> str:
    """The fathom thread id that an A2A ``contextId`` names."""
    try:
        return str(uuid.UUID(context_id))
    except ValueError:
        pass
    if ID_PATTERN.fullmatch(context_id):
        return context_id
    return str(uuid.uuid5(_CONTEXT_NAMESPACE, context_id))


def _text_part(text: str) -> Part:
    return Part(text=text)


def _data_part(data: Any) -> Part:
    return Part(data=ParseDict(to_jsonable(data), struct_pb2.Value()))


def _message_text(message: Any) -> tuple[str | None, str]:
    """``(type, text)`` of a message given as a dict (JSON) or a LangChain message."""
    if isinstance(message, dict):
        kind, content = message.get("type"), message.get("content")
    else:
        kind, content = getattr(message, "type", None), getattr(message, "content", None)
    if isinstance(content, str):
        return kind, content
    if isinstance(content, list):
        texts = [
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
        return kind, "".join(texts)
    return kind, ""


def _answer(values: Any) -> str | None:
    """The last AI message's text in the run's final values, if it has messages."""
    if not isinstance(values, dict) or not isinstance(values.get("messages"), list):
        return None
    for message in reversed(values["messages"]):
        kind, text = _message_text(message)
        if kind in ("ai", "AIMessageChunk") and text:
            return text
    return ""


class _Recorder(EventQueue):
    """The events of a task no request is open for, applied straight to its stored record."""

    def __init__(self, manager: TaskManager) -> None:
        self.manager = manager

    async def enqueue_event(self, event: Event) -> None:
        await self.manager.process(event)


def _stopped_text(context_id: str) -> str:
    return (
        "The server stopped while this task was working, and its run was interrupted, not "
        f"resumed. Send a new message in context {context_id} to continue from where it stopped."
    )


class FathomAgentExecutor(AgentExecutor):
    """Executes A2A tasks as runs of ``assistant_id`` on a fathom server."""

    def __init__(self, server: FathomServer, assistant_id: str, graph_id: str) -> None:
        self.server = server
        self.assistant_id = assistant_id
        self.graph_id = graph_id
        self._runs: dict[str, str] = {}  # A2A task id -> its current run id
        self._cancelling: set[str] = set()
        self._waiting: dict[str, str] = {}  # thread id -> the A2A task waiting for input
        self._following: set[asyncio.Task[None]] = set()  # runs resumed after a restart

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start (or resume) the task's run and report how it ends."""
        task_id, context_id = context.task_id, context.context_id
        assert task_id is not None and context_id is not None
        message = context.message
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                new_task(
                    task_id,
                    context_id,
                    TaskState.TASK_STATE_SUBMITTED,
                    history=[message] if message is not None else None,
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        parts = list(message.parts) if message is not None else []
        text = "\n".join(get_text_parts(parts))
        data_parts = get_data_parts(parts)
        data = data_parts[0] if data_parts else None
        thread_id = thread_for_context(context_id)
        await self.server.runs.start()

        body: dict[str, Any] = {
            "assistant_id": self.assistant_id,
            "metadata": {"a2a_task_id": task_id, "a2a_context_id": context_id},
        }
        waiting = await self._pending(thread_id)
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            try:
                body["command"] = {"resume": resume_value(waiting, text, data)}
            except ReplyError as exc:
                prompt = f"{exc}\n{describe(waiting)}" if waiting else str(exc)
                await updater.requires_input(updater.new_agent_message([_text_part(prompt)]))
                return
        else:
            if waiting:
                owner = self._waiting.get(thread_id)
                if owner is not None and owner != task_id:
                    await updater.failed(
                        updater.new_agent_message([
                            _text_part(
                                f"Context {context_id} waits for input on task {owner}: "
                                f"reply to that task (taskId {owner}), or cancel it first."
                            )
                        ])
                    )
                    return
                body["multitask_strategy"] = "interrupt"  # supersede an abandoned approval
            content = text if text or data is None else json.dumps(data)
            body["input"] = {"messages": [{"role": "user", "content": content}]}

        await self._ensure_thread(thread_id, context_id)
        try:
            run = await start_run(self.server, body, thread_id)
        except ApiError as exc:
            await updater.failed(updater.new_agent_message([_text_part(exc.detail)]))
            return
        self._runs[task_id] = run["run_id"]
        self._waiting.pop(thread_id, None)
        await updater.start_work()
        try:
            output = await self.server.runs.output(run)
        except asyncio.CancelledError:
            await self.server.runs.cancel(run["run_id"])
            raise
        finally:
            if self._runs.get(task_id) == run["run_id"]:
                self._runs.pop(task_id, None)
        await self._report(updater, run, output, thread_id, task_id)

    async def _report(
        self,
        updater: TaskUpdater,
        run: dict[str, Any],
        output: Any,
        thread_id: str,
        task_id: str,
    ) -> None:
        record = await self.server.records.get_run(run["run_id"])
        status = record["status"] if record else "success"
        if task_id in self._cancelling:
            self._cancelling.discard(task_id)
            return  # ``cancel`` reports the end
        if isinstance(output, dict) and "__error__" in output:
            error = output["__error__"]
            detail = f"{error.get('error')}: {error.get('message')}"
            await updater.failed(updater.new_agent_message([_text_part(detail)]))
            return
        waiting = await self._pending(thread_id)
        if status == "interrupted" and not waiting:
            cancelled = updater.new_agent_message([_text_part("The run was cancelled.")])
            await updater.cancel(cancelled)
            return
        if waiting:
            self._waiting[thread_id] = task_id
            parts = [
                _text_part(describe(waiting)),
                _data_part({"interrupts": [{"id": w.id, "value": w.value} for w in waiting]}),
            ]
            await updater.requires_input(updater.new_agent_message(parts))
            return
        answer = _answer(output)
        parts = [_text_part(answer)] if answer is not None else [_data_part(output)]
        await updater.add_artifact(parts, name="answer")
        await updater.complete(updater.new_agent_message(parts))

    async def recover(self, tasks: ServerTaskStore) -> None:
        """Settle the tasks an earlier server left ``submitted`` or ``working``: each follows
        its run (resumed by this server, or ended). Runs once, before the first request."""
        await self.server.runs.start()  # resumes the runs a dead server left running
        for task, owner in await tasks.unfinished():
            await self._settle(task, tasks.of_owner(owner))

    async def _settle(self, task: Task, store: ServerTaskStore) -> None:
        thread_id = thread_for_context(task.context_id)
        manager = TaskManager(store, ServerCallContext(), task.id, task.context_id, None)
        updater = TaskUpdater(_Recorder(manager), task.id, task.context_id)
        runs = [
            run
            for run in await self.server.records.list_runs(thread_id=thread_id)
            if (run.get("metadata") or {}).get("a2a_task_id") == task.id
        ]
        if not runs:  # the server stopped between the task's creation and its run's
            text = "The server stopped before this task's run started: send the message again."
            await updater.failed(updater.new_agent_message([_text_part(text)]))
            return
        run = runs[0]  # the newest: a task answered after an approval has several
        if await self.server.runs.is_active(run["run_id"]):
            logger.info("A2A task %s follows its run %s, resumed after a restart",
                        task.id, run["run_id"])  # fmt: skip
            self._runs[task.id] = run["run_id"]
            follow = asyncio.create_task(self._follow(updater, run, thread_id, task.id))
            self._following.add(follow)
            follow.add_done_callback(self._following.discard)
            return
        if run["status"] == "interrupted" and not await self._pending(thread_id):
            stopped = _stopped_text(task.context_id)
            await updater.failed(updater.new_agent_message([_text_part(stopped)]))
            return
        await self._report(updater, run, await self.server.runs.output(run), thread_id, task.id)

    async def _follow(
        self, updater: TaskUpdater, run: dict[str, Any], thread_id: str, task_id: str
    ) -> None:
        try:
            output = await self.server.runs.output(run)
        finally:
            if self._runs.get(task_id) == run["run_id"]:
                self._runs.pop(task_id, None)
        await self._report(updater, run, output, thread_id, task_id)

    async def _pending(self, thread_id: str) -> list[PendingInterrupt]:
        """The interrupts the thread's graph waits on (none for a new thread)."""
        graph = await self.server.registry.graph(self.graph_id)
        config = RunnableConfig(configurable={"thread_id": thread_id, "checkpoint_ns": ""})
        state = await graph.aget_state(config)
        return [PendingInterrupt(i.id, to_jsonable(i.value)) for i in state.interrupts]

    async def _ensure_thread(self, thread_id: str, context_id: str) -> None:
        if await self.server.records.get_thread(thread_id) is None:
            await self.server.records.new_thread(thread_id, {"a2a_context_id": context_id})

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run (if one is active), wait for it to stop, end it ``canceled``."""
        task_id, context_id = context.task_id, context.context_id
        assert task_id is not None and context_id is not None
        run_id = self._runs.get(task_id)
        if run_id is not None and await self.server.runs.is_active(run_id):
            self._cancelling.add(task_id)
            await self.server.runs.cancel(run_id)
            await self.server.runs.wait(run_id)
        thread_id = thread_for_context(context_id)
        if self._waiting.get(thread_id) == task_id:
            del self._waiting[thread_id]
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.cancel(updater.new_agent_message([_text_part("Cancelled.")]))
