"""A remote A2A agent as an async subagent: started, checked, updated and cancelled in the
background by the five async task tools, like a subagent on an Agent Protocol server.

:func:`a2a_async_subagent` returns an ``AsyncSubAgent`` spec whose ``client`` is an
:class:`A2ATaskClient`: the part of ``langgraph_sdk``'s client surface the async task tools
use (``threads.create/get/get_state``, ``runs.create/get/list/cancel/join``), answered with
A2A calls through a2a-sdk's client:

* a *thread* is an A2A context, a *run* is an A2A task (``run_id`` is the task id);
* ``start_async_task`` sends the description as a message with ``returnImmediately``, so the
  tool returns while the remote task works; the remote agent starts the context (no
  ``contextId`` is invented, so agents that refuse unknown contexts accept it);
* ``check_async_task`` and the refresh before each model call read the task (``GetTask``):
  ``submitted`` is ``pending``, ``working`` ``running``, ``completed`` ``success`` (the
  answer is the task's artifacts, else its status message), ``input-required`` and
  ``auth-required`` ``waiting`` (the question is the status message), ``failed`` and
  ``rejected`` ``error``, ``canceled`` ``cancelled``;
* ``update_async_task`` sends a message in the same context: to a task waiting for input it
  is the reply (it carries the task id, so it answers, for instance, an approval); a running
  task is cancelled first (``update_strategy="interrupt"``, the default), then a new task
  starts in the context;
* ``cancel_async_task`` is ``CancelTask``.

The contexts and newest task of each thread are remembered by the spec's client object (one
per spec, shared by every run of the supervisor); the task records in the ``async_tasks``
channel hold the task ids, and reading a task fills the memory in again, so a supervisor
restored from its checkpoint checks, lists and cancels its tasks as before. An update names
the task it follows (its record's ``run_id``, as run metadata ``follows_run_id``), so even an
update that is the restored supervisor's first call continues the task's context.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import A2AClientError, A2AClientTimeoutError, ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.helpers.proto_helpers import get_text_parts, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotCancelableError, TaskNotFoundError

from fathom.middleware.async_subagents import AsyncSubAgent
from fathom.middleware.async_subagents.tasks import FOLLOWS_RUN_KEY

__all__ = ["A2ATaskClient", "a2a_async_subagent"]

_RUN_STATUS = {
    TaskState.TASK_STATE_SUBMITTED: "pending",
    TaskState.TASK_STATE_WORKING: "running",
    TaskState.TASK_STATE_COMPLETED: "success",
    TaskState.TASK_STATE_INPUT_REQUIRED: "success",
    TaskState.TASK_STATE_AUTH_REQUIRED: "success",
    TaskState.TASK_STATE_FAILED: "error",
    TaskState.TASK_STATE_REJECTED: "error",
    TaskState.TASK_STATE_CANCELED: "interrupted",
}
"""A2A task state -> the run status the async task tools read (``success`` + an
``interrupted`` thread is ``waiting``; an ``interrupted`` run is ``cancelled``)."""

_WAITING = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)
_ACTIVE = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


def _status_text(task: Task) -> str:
    if task.status.HasField("message"):
        return "\n".join(get_text_parts(task.status.message.parts))
    return ""


def _answer(task: Task) -> str:
    texts = [t for artifact in task.artifacts for t in get_text_parts(artifact.parts)]
    return "\n".join(texts) if texts else _status_text(task)


def _http_error(url: str, code: int, detail: str) -> httpx.HTTPStatusError:
    """An A2A error as the HTTP status error the async task tools answer (404, 409...)."""
    request = httpx.Request("POST", url)
    response = httpx.Response(code, json={"detail": detail}, request=request)
    return httpx.HTTPStatusError(detail, request=request, response=response)


class _Threads:
    def __init__(self, owner: A2ATaskClient) -> None:
        self._owner = owner

    async def create(
        self, *, metadata: Mapping[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        """A new local thread id; its A2A context starts with its first message."""
        return {"thread_id": str(uuid.uuid4()), "metadata": dict(metadata or {}),
                "status": "idle", "values": None}  # fmt: skip

    async def get(self, thread_id: str, **_: Any) -> dict[str, Any]:
        """The thread as the tools read it: status, the answer as ``values``, the question
        as ``interrupts``."""
        task = await self._owner.latest_task(thread_id)
        state = task.status.state
        status = "interrupted" if state in _WAITING else "busy" if state in _ACTIVE else (
            "error" if _RUN_STATUS.get(state) == "error" else "idle"
        )
        interrupts: dict[str, list[dict[str, Any]]] = {}
        if state in _WAITING:
            interrupts[task.id] = [{"id": task.id, "value": _status_text(task)}]
        values = {"messages": [{"type": "ai", "content": _answer(task)}]}
        metadata = {"a2a_context_id": task.context_id}
        return {"thread_id": thread_id, "status": status, "values": values,
                "interrupts": interrupts, "metadata": metadata}  # fmt: skip

    async def get_state(self, thread_id: str, **_: Any) -> dict[str, Any]:
        thread = await self.get(thread_id)
        return {"values": thread["values"], "tasks": []}


class _Runs:
    def __init__(self, owner: A2ATaskClient) -> None:
        self._owner = owner

    async def create(
        self,
        thread_id: str,
        assistant_id: str,
        *,
        input: Mapping[str, Any] | None = None,
        multitask_strategy: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Send the input's last message to the remote agent; return at once. A follow-up
        names the task it follows (``metadata[FOLLOWS_RUN_KEY]``, from the supervisor's task
        record), so its context is found even by a client that remembers nothing."""
        messages = list((input or {}).get("messages") or [])
        text = str(messages[-1].get("content", "")) if messages else ""
        follows = (metadata or {}).get(FOLLOWS_RUN_KEY)
        task = await self._owner.send(
            thread_id, text, multitask_strategy, str(follows) if follows else None
        )
        return self._owner.run_record(thread_id, task)

    async def get(self, thread_id: str, run_id: str, **_: Any) -> dict[str, Any]:
        return self._owner.run_record(thread_id, await self._owner.get_task(thread_id, run_id))

    async def list(self, thread_id: str, limit: int = 10, **_: Any) -> list[dict[str, Any]]:
        return [self._owner.run_record(thread_id, await self._owner.latest_task(thread_id))]

    async def cancel(self, thread_id: str, run_id: str, **_: Any) -> None:
        await self._owner.cancel(run_id)

    async def join(self, thread_id: str, run_id: str, **_: Any) -> dict[str, Any]:
        task = await self._owner.get_task(thread_id, run_id)
        if _RUN_STATUS.get(task.status.state) == "error":
            return {"__error__": {"error": "A2ATaskFailed", "message": _status_text(task)}}
        return {"messages": [{"type": "ai", "content": _answer(task)}]}


class A2ATaskClient:
    """The async task tools' server client, speaking A2A to the agent at ``url``.

    ``headers`` go with every request; ``timeout`` bounds each. A fresh HTTP client is made
    for every call (a sync ``invoke`` runs each tool call in its own event loop); the agent's
    card is read once.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.transport = transport
        self.threads = _Threads(self)
        self.runs = _Runs(self)
        self._card: AgentCard | None = None
        self._contexts: dict[str, str] = {}  # thread id -> A2A context id
        self._latest: dict[str, str] = {}  # thread id -> its newest A2A task id

    async def _call(self, step: Any) -> Any:
        async with httpx.AsyncClient(
            headers=self.headers, timeout=self.timeout, transport=self.transport
        ) as http:
            try:
                if self._card is None:
                    self._card = await A2ACardResolver(http, self.url).get_agent_card()
                client = await create_client(
                    self._card, ClientConfig(httpx_client=http, streaming=False)
                )
                async with client:
                    return await step(client)
            except TaskNotFoundError as error:
                raise _http_error(self.url, 404, error.message) from error
            except TaskNotCancelableError as error:
                raise _http_error(self.url, 409, error.message) from error
            except A2AClientTimeoutError as error:
                raise httpx.ReadTimeout(str(error)) from error
            except A2AClientError as error:
                raise httpx.ConnectError(str(error)) from error
            except A2AError as error:
                raise _http_error(self.url, 400, error.message) from error

    def run_record(self, thread_id: str, task: Task) -> dict[str, Any]:
        """The task as a run record; remembers it as the thread's newest."""
        self._latest.setdefault(thread_id, task.id)
        if task.context_id:
            self._contexts.setdefault(thread_id, task.context_id)
        record: dict[str, Any] = {
            "run_id": task.id,
            "thread_id": thread_id,
            "status": _RUN_STATUS.get(task.status.state, "pending"),
        }
        if record["status"] == "error":
            record["error"] = _status_text(task) or "The remote A2A task failed."
        return record

    async def get_task(self, thread_id: str, task_id: str) -> Task:
        async def read(client: Any) -> Task:
            return await client.get_task(GetTaskRequest(id=task_id))

        task = await self._call(read)
        self._latest.setdefault(thread_id, task.id)
        if task.context_id:
            self._contexts.setdefault(thread_id, task.context_id)
        return task

    async def latest_task(self, thread_id: str) -> Task:
        task_id = self._latest.get(thread_id)
        if task_id is None:
            raise _http_error(self.url, 404, f"No A2A task is known for thread {thread_id}")
        return await self.get_task(thread_id, task_id)

    async def send(
        self, thread_id: str, text: str, strategy: str | None, follows: str | None = None
    ) -> Task:
        """A message in the thread's context: the reply to a waiting task, else a new task
        (after cancelling a running one, unless ``strategy`` is ``enqueue``). ``follows``,
        the task the message follows, restores the context of a thread this client has not
        seen (a supervisor restored from its checkpoint)."""
        if follows and thread_id not in self._latest:
            self._latest[thread_id] = follows
        answering = None
        if thread_id in self._latest:
            current = await self.latest_task(thread_id)  # also learns the thread's context
            if current.status.state in _WAITING:
                answering = current.id
            elif current.status.state in _ACTIVE and strategy != "enqueue":
                await self.cancel(current.id)
        context_id = self._contexts.get(thread_id)
        message = new_text_message(
            text, context_id=context_id, task_id=answering, role=Role.ROLE_USER
        )
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )

        async def send(client: Any) -> Task:
            task: Task | None = None
            async for event in client.send_message(request):
                if event.HasField("task"):
                    task = event.task
            if task is None:
                raise _http_error(self.url, 502, "The A2A agent answered with no task")
            return task

        task = await self._call(send)
        self._latest[thread_id] = task.id
        self._contexts[thread_id] = task.context_id
        return task

    async def cancel(self, task_id: str) -> None:
        async def cancel(client: Any) -> None:
            await client.cancel_task(CancelTaskRequest(id=task_id))

        await self._call(cancel)


def a2a_async_subagent(
    url: str,
    *,
    name: str,
    description: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    update_strategy: str = "interrupt",
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncSubAgent:
    """An ``AsyncSubAgent`` spec for the A2A agent at ``url`` (``create_deep_agent(
    subagents=[...])``): the model starts, checks, updates, cancels and lists its tasks with
    the five async task tools. ``update_strategy="enqueue"`` sends a follow-up to a busy
    task's context without cancelling the task."""
    client = A2ATaskClient(url, headers=headers, timeout=timeout, transport=transport)
    spec: dict[str, Any] = {
        "name": name,
        "description": description,
        "graph_id": name,
        "url": url,
        "client": client,
        "update_strategy": update_strategy,
        "notify_parent": False,
    }
    return spec  # type: ignore[return-value]
