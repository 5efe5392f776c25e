"""A2A task records kept in the fathom server's own storage, so they survive a restart.

``ServerTaskStore`` is an a2a-sdk ``TaskStore`` over the server's LangGraph ``BaseStore``
(in memory, SQLite by default, PostgreSQL when configured): the same store that keeps the
server's thread and run records (``fathom.server.records``), under its reserved namespace
``("fathom_server", "a2a_tasks")``, which the ``/store/*`` routes refuse and hide. A server
built over the same storage after a restart answers ``GetTask``/``tasks/get`` and
``ListTasks`` for every task an earlier one recorded, and a task left ``input-required``
(an approval) can still be answered.

Each record is the task as protobuf JSON, with the assistant it belongs to and its owner
(a2a-sdk's ``resolve_user_scope``: the authenticated user, if any): a task is only seen
through the assistant and by the owner that created it. Records never expire. The record
also keeps the task's state, so that a new server finds the tasks an earlier one left
``submitted`` or ``working`` (``unfinished``) and settles them from their runs
(:meth:`fathom.protocols.a2a.executor.FathomAgentExecutor.recover`).
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from langgraph.store.base import BaseStore

from fathom.server.records import RESERVED_PREFIX

__all__ = ["A2A_TASKS", "ServerTaskStore"]

A2A_TASKS = (RESERVED_PREFIX, "a2a_tasks")
"""The store namespace of A2A task records (key: the task id)."""

_PAGE = 1000
_UNFINISHED = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


def _sort_key(task: Task) -> tuple[bool, int, str]:
    """Newest status first, then by id (the order a2a-sdk's own stores list in)."""
    stamped = task.HasField("status") and task.status.HasField("timestamp")
    return (stamped, task.status.timestamp.ToNanoseconds() if stamped else 0, task.id)


class ServerTaskStore(TaskStore):
    """The A2A tasks of one assistant, in a fathom server's ``BaseStore``."""

    def __init__(
        self,
        store: BaseStore,
        assistant_id: str,
        owner_resolver: OwnerResolver = resolve_user_scope,
    ) -> None:
        self.store = store
        self.assistant_id = assistant_id
        self.owner_resolver = owner_resolver

    def _mine(self, value: dict[str, Any], context: ServerCallContext) -> bool:
        return value.get("assistant_id") == self.assistant_id and value.get(
            "owner"
        ) == self.owner_resolver(context)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Write the task (replacing its earlier record)."""
        value = {
            "assistant_id": self.assistant_id,
            "owner": self.owner_resolver(context),
            "context_id": task.context_id,
            "state": TaskState.Name(task.status.state),
            "task": MessageToDict(task),
        }
        await self.store.aput(A2A_TASKS, task.id, value, index=False, ttl=None)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, if this assistant and owner have one with that id."""
        item = await self.store.aget(A2A_TASKS, task_id)
        if item is None or not self._mine(item.value, context):
            return None
        return ParseDict(item.value["task"], Task(), ignore_unknown_fields=True)

    async def unfinished(self) -> list[tuple[Task, str]]:
        """This assistant's ``submitted`` and ``working`` tasks, of every owner, with their
        owners: the tasks a server that stopped may have left behind."""
        found: list[tuple[Task, str]] = []
        for state in _UNFINISHED:
            flt = {"assistant_id": self.assistant_id, "state": TaskState.Name(state)}
            offset = 0
            while True:
                page = await self.store.asearch(A2A_TASKS, filter=flt, limit=_PAGE, offset=offset)
                found.extend(
                    (ParseDict(item.value["task"], Task(), ignore_unknown_fields=True),
                     str(item.value["owner"]))
                    for item in page
                )  # fmt: skip
                if len(page) < _PAGE:
                    break
                offset += _PAGE
        return found

    def of_owner(self, owner: str) -> ServerTaskStore:
        """This store, acting for ``owner`` whatever the call context (a server's own writes
        to a task that no request is open for)."""
        return ServerTaskStore(self.store, self.assistant_id, lambda _context: owner)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the task's record (nothing if it is not this assistant's and owner's)."""
        if await self.get(task_id, context) is not None:
            await self.store.adelete(A2A_TASKS, task_id)

    async def _all(self, context: ServerCallContext, context_id: str) -> list[Task]:
        flt: dict[str, Any] = {
            "assistant_id": self.assistant_id,
            "owner": self.owner_resolver(context),
        }
        if context_id:
            flt["context_id"] = context_id
        found: list[Task] = []
        offset = 0
        while True:
            page = await self.store.asearch(A2A_TASKS, filter=flt, limit=_PAGE, offset=offset)
            found.extend(
                ParseDict(item.value["task"], Task(), ignore_unknown_fields=True)
                for item in page
            )
            if len(page) < _PAGE:
                return found
            offset += _PAGE

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """A page of this owner's tasks, newest first, filtered as ``params`` asks."""
        tasks = await self._all(context, params.context_id)
        if params.status:
            tasks = [task for task in tasks if task.status.state == params.status]
        if params.HasField("status_timestamp_after"):
            after_ns = params.status_timestamp_after.ToNanoseconds()
            tasks = [
                task
                for task in tasks
                if task.status.HasField("timestamp")
                and task.status.timestamp.ToNanoseconds() >= after_ns
            ]
        tasks.sort(key=_sort_key, reverse=True)
        start = 0
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None:
                raise InvalidParamsError(f"Invalid page token: {params.page_token}")
            after = cursor.sort_key()
            start = next(
                (i for i, task in enumerate(tasks) if _sort_key(task) < after), len(tasks)
            )
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        end = start + size
        next_token = None
        if end < len(tasks):
            stamped, stamp, task_id = _sort_key(tasks[end - 1])
            next_token = encode_list_tasks_cursor(
                ListTasksCursor(timestamp_ns=stamp if stamped else None, task_id=task_id)
            )
        return ListTasksResponse(
            next_page_token=next_token,
            tasks=tasks[start:end],
            total_size=len(tasks),
            page_size=size,
        )
