"""An A2A task whose run is in flight when `fathom serve` stops ends correctly after a restart.

Each test runs `fathom serve` in a subprocess over real storage (a SQLite file in `.fathom/`,
or PostgreSQL), starts a task through a2a-sdk's own client, holds its run at a gate (a
directory the graph waits on), stops the server, starts a new one on the same storage, and
reads the task back with `GetTask`:

- killed (SIGKILL) on SQLite: the new server resumes the run from its checkpoint, and the task
  follows it: `working` while it runs, then `completed` with its answer;
- stopped cleanly (SIGTERM) on SQLite: the run was interrupted and is not resumed, so the task
  is `failed`, with a message saying why and how to continue, never left `working`;
- stopped cleanly on PostgreSQL: the server handed the run back to the shared queue, the new
  one resumes it, and the task ends `completed`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
from a2a.types import GetTaskRequest, Task, TaskState
from langgraph_sdk import get_client
from tests.postgres import postgres_uri
from tests.protocols.a2a.support import a2a_client, eventually, user_message
from tests.server.servers import ServerProcess, fathom_serve_available

__all__ = ["postgres_uri"]  # the fixture, imported for this module's tests

DEPLOY = Path(__file__).resolve().parent / "deploy"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    return Path(shutil.copytree(DEPLOY, tmp_path / "deploy",
                                ignore=shutil.ignore_patterns("__pycache__")))  # fmt: skip


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Servers a test starts; each is stopped at the end, whatever happened."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.stop()


def _start(servers: list[ServerProcess], workdir: Path, *args: str) -> ServerProcess:
    server = ServerProcess(kind="fathom", workdir=workdir, name=f"-{len(servers)}",
                           extra_args=args)  # fmt: skip
    servers.append(server)
    server.start()
    return server


async def _get(server: ServerProcess, task_id: str) -> Task:
    async with a2a_client(f"{server.url}/a2a/gated") as client:
        return await client.get_task(GetTaskRequest(id=task_id))


async def _start_held_task(server: ServerProcess, gate: Path) -> Task:
    """Send a task whose run waits at ``gate``; return once its checkpoint is saved."""
    async with a2a_client(f"{server.url}/a2a/gated", polling=True) as client:
        events = [e async for e in client.send_message(user_message(str(gate)))]
    task = events[-1].task
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)

    await eventually((gate / "started").exists, "the task's run to reach the gate")
    api = get_client(url=server.url, api_key=None)

    async def checkpointed() -> bool:
        # LangGraph saves the checkpoint in the background while the node starts, so the
        # test waits until the server reads it back before stopping it.
        return (await api.threads.get_state(task.context_id))["next"] == ["wait_at_gate"]

    await eventually(checkpointed, "the held run's checkpoint to be saved")
    assert (await _get(server, task.id)).status.state == TaskState.TASK_STATE_WORKING
    await api.http.client.aclose()
    return task


async def _completed(server: ServerProcess, task: Task, gate: Path) -> None:
    """The task, resumed by ``server``, ends ``completed`` once its gate opens."""
    assert (await _get(server, task.id)).status.state == TaskState.TASK_STATE_WORKING
    (gate / "release").touch()

    async def ended() -> bool:
        return (await _get(server, task.id)).status.state == TaskState.TASK_STATE_COMPLETED

    await eventually(ended, "the resumed task to complete")
    final = await _get(server, task.id)
    assert get_artifact_text(final.artifacts[0]) == f"released: {gate.name}"
    assert get_message_text(final.status.message) == f"released: {gate.name}"
    assert final.context_id == task.context_id


async def test_a_task_working_when_the_server_is_killed_completes_after_the_restart(
    workdir: Path, servers: list[ServerProcess]
) -> None:
    gate = workdir / "gate-killed"
    first = _start(servers, workdir)
    task = await _start_held_task(first, gate)
    first.kill()
    (gate / "started").unlink()  # the resumed run creates it again when its node re-runs

    second = _start(servers, workdir)
    await eventually((gate / "started").exists, "the resumed run to reach the gate")
    await _completed(second, task, gate)


async def test_a_task_working_at_a_clean_shutdown_fails_with_a_message_after_the_restart(
    workdir: Path, servers: list[ServerProcess]
) -> None:
    gate = workdir / "gate-stopped"
    first = _start(servers, workdir)
    task = await _start_held_task(first, gate)
    first.stop()  # SIGTERM: the server interrupts its runs (recorded `interrupted`)

    second = _start(servers, workdir)
    ended = await _get(second, task.id)
    assert ended.status.state == TaskState.TASK_STATE_FAILED
    text = get_message_text(ended.status.message)
    assert "server stopped" in text
    assert task.context_id in text  # says where to continue
    assert not (gate / "release").exists()  # the run was not resumed: nothing else ended it

    # The context continues: a new task in it runs to the end.
    other = workdir / "gate-after"
    other.mkdir()
    (other / "release").touch()
    async with a2a_client(f"{second.url}/a2a/gated") as client:
        message = user_message(str(other), context_id=task.context_id)
        events = [e async for e in client.send_message(message)]
    assert get_message_text(events[-1].task.status.message) == "released: gate-after"


async def test_a_task_working_at_a_clean_shutdown_on_postgres_completes_after_the_restart(
    workdir: Path, servers: list[ServerProcess], postgres_uri: str
) -> None:
    gate = workdir / "gate-postgres"
    first = _start(servers, workdir, "--database", postgres_uri)
    task = await _start_held_task(first, gate)
    first.stop()  # a PostgreSQL server hands its runs back to the shared queue
    assert not (workdir / ".fathom" / "fathom.sqlite").exists()  # the tasks are in PostgreSQL
    (gate / "started").unlink()

    second = _start(servers, workdir, "--database", postgres_uri)
    await eventually((gate / "started").exists, "the resumed run to reach the gate")
    await _completed(second, task, gate)
