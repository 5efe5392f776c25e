"""A2A task records live in the server's storage: a new server over it still answers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
from a2a.types import GetTaskRequest, ListTasksRequest, Task, TaskState
from tests.protocols.a2a.support import (
    a2a_client,
    approval_agent,
    echo_agent,
    serve,
    user_message,
)

from fathom.protocols.a2a.tasks import A2A_TASKS
from fathom.server.storage import open_storage


def _graphs() -> dict[str, Any]:
    return {"echo": echo_agent(), "approver": approval_agent()}


async def _send(url: str, text: str, **ids: str) -> Task:
    async with a2a_client(url) as client:
        events = [e async for e in client.send_message(user_message(text, **ids))]
    return events[-1].task


async def test_tasks_survive_a_restart_and_a_waiting_one_is_answered_after_it(
    tmp_path: Path,
) -> None:
    async with open_storage(None, tmp_path) as storage, serve(
        _graphs(), checkpointer=storage.checkpointer, store=storage.store
    ) as (url, _app):
        done = await _send(f"{url}/a2a/echo", "before")
        waiting = await _send(f"{url}/a2a/approver", "mail bob")
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # The records are in the server's own store (SQLite here), beside its runs.
        for task in (done, waiting):
            assert await storage.store.aget(A2A_TASKS, task.id) is not None

    async with open_storage(None, tmp_path) as storage, serve(
        _graphs(), checkpointer=storage.checkpointer, store=storage.store
    ) as (url, _app):
        async with a2a_client(f"{url}/a2a/echo") as client:
            fetched = await client.get_task(GetTaskRequest(id=done.id))
            listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_artifact_text(fetched.artifacts[0]) == "echo: before"
        assert [t.id for t in listed.tasks] == [done.id]  # each assistant lists its own
        async with a2a_client(f"{url}/a2a/approver") as client:
            still = await client.get_task(GetTaskRequest(id=waiting.id))
        assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "send_email" in get_message_text(still.status.message)

        # The restart came in the middle of the task: its reply resumes it to the end.
        answered = await _send(
            f"{url}/a2a/approver", "approve", task_id=waiting.id, context_id=waiting.context_id
        )
        assert answered.id == waiting.id
        assert answered.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(answered.status.message) == "done: email sent to bob"
        # And the context the restart did not forget continues.
        more = await _send(f"{url}/a2a/echo", "after", context_id=done.context_id)
        assert get_message_text(more.status.message) == "echo: after"

    async with open_storage(None, tmp_path) as storage, serve(
        _graphs(), checkpointer=storage.checkpointer, store=storage.store
    ) as (url, _app):
        async with a2a_client(f"{url}/a2a/approver") as client:
            final = await client.get_task(GetTaskRequest(id=waiting.id))
        assert final.status.state == TaskState.TASK_STATE_COMPLETED
