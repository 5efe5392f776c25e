"""`fathom tasks`: a supervisor thread's async subagent tasks with their live status, and a
child thread opened by (a prefix of) its task id, read from a real server over HTTP.

The server is fathom's own app under uvicorn on a free port, in a thread of the test; the
command is the real `fathom` console script in a subprocess. The supervisor's recorded
statuses are stale on purpose (`running`): the command must show what the server says now.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.tools import tool
from langgraph.types import interrupt
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from fathom import create_deep_agent
from fathom.middleware.async_subagents.tasks import AsyncSubAgentState, AsyncTask, now_iso
from fathom.server import create_app
from fathom.testing import ScriptedModel, ai, tool_call

from .conftest import FathomProject

DEADLINE_S = 60.0  # bounds a hang; the conditions hold within milliseconds


class _TasksChannel(AgentMiddleware[Any, Any, Any]):
    """The supervisor's `async_tasks` channel, as the async subagent middleware adds it."""

    state_schema = AsyncSubAgentState


@tool
async def wait_long() -> str:
    """Wait until cancelled."""
    await asyncio.sleep(3600)
    return "never"


@tool
def ask_human(question: str) -> str:
    """Ask a person and wait for the answer."""
    return str(interrupt({"question": question}))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    app = create_app({
        "supervisor": create_deep_agent(ScriptedModel(policy=lambda r: "ok"),
                                        middleware=[_TasksChannel()], name="supervisor"),
        "researcher": create_deep_agent(ScriptedModel(policy=lambda r: "Found: 42"),
                                        name="researcher"),
        "asker": create_deep_agent(
            ScriptedModel(replies=[ai("", tool_call("ask_human", {"question": "deploy now?"}))],
                          policy=lambda r: "done"),
            tools=[ask_human], name="asker"),
        "slow": create_deep_agent(
            ScriptedModel(replies=[ai("", tool_call("wait_long", {}))], policy=lambda r: "done"),
            tools=[wait_long], name="slow"),
    })
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    _until(lambda: server.started, "the server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=DEADLINE_S)


def _launch(client: SyncLangGraphClient, graph: str, parent: str) -> AsyncTask:
    thread = client.threads.create(metadata={"subagent_name": graph})
    run = client.runs.create(
        thread["thread_id"], graph, input={"messages": [{"role": "user", "content": "go"}]},
        config={"configurable": {"deepagents_parent": {"thread_id": parent}}},
    )
    stamp = now_iso()
    return {"task_id": thread["thread_id"], "agent_name": graph, "thread_id": thread["thread_id"],
            "run_id": run["run_id"], "status": "running", "created_at": stamp,
            "last_checked_at": stamp, "last_updated_at": stamp}


@pytest.fixture(scope="module")
def supervisor(server_url: str) -> tuple[str, dict[str, AsyncTask]]:
    """A supervisor thread that launched a researcher (finishes) and an asker (waits)."""
    client = get_sync_client(url=server_url, api_key=None)
    parent = client.threads.create(metadata={"graph_id": "supervisor"})["thread_id"]
    tasks = {t["task_id"]: t for t in (_launch(client, "researcher", parent),
                                       _launch(client, "asker", parent))}
    run = client.runs.create(parent, "supervisor", input={
        "messages": [{"role": "user", "content": "hi"}], "async_tasks": tasks})
    client.runs.join(parent, run["run_id"])

    def settled() -> bool:
        threads = [client.threads.get(t) for t in tasks]
        return all("fathom_usage" in t["metadata"] and t["status"] != "busy" for t in threads)

    _until(settled, "both children to end their runs")
    return parent, tasks


def _task_of(tasks: dict[str, AsyncTask], name: str) -> AsyncTask:
    return next(t for t in tasks.values() if t["agent_name"] == name)


def test_tasks_lists_each_task_with_its_live_status_and_usage(
    bare_project: FathomProject, server_url: str, supervisor: tuple[str, dict[str, AsyncTask]]
) -> None:
    parent, tasks = supervisor
    done = bare_project.run("tasks", "--server", server_url, "--thread", parent)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    researcher, asker = _task_of(tasks, "researcher"), _task_of(tasks, "asker")
    assert set(lines) == {researcher["task_id"], asker["task_id"]}
    assert "researcher" in lines[researcher["task_id"]]
    assert "success (was running)" in lines[researcher["task_id"]]
    assert "waiting (was running)" in lines[asker["task_id"]]
    assert lines[researcher["task_id"]].split()[5] == "1"  # model calls the child recorded


def test_tasks_open_shows_a_child_thread_by_id_prefix(
    bare_project: FathomProject, server_url: str, supervisor: tuple[str, dict[str, AsyncTask]]
) -> None:
    parent, tasks = supervisor
    asker = _task_of(tasks, "asker")
    done = bare_project.run("tasks", "--server", server_url, "--thread", parent,
                            "--open", asker["task_id"][:8])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"task {asker['task_id']} · asker · waiting")
    assert "user: go" in done.stdout
    assert 'ask_human({"question": "deploy now?"})' in done.stdout
    assert 'waiting for a person: {"question": "deploy now?"}' in done.stdout

    researcher = _task_of(tasks, "researcher")
    done = bare_project.run("tasks", "--server", server_url, "--thread", parent,
                            "--open", researcher["task_id"])
    assert done.returncode == 0, done.stderr
    assert "assistant: Found: 42" in done.stdout


@pytest.mark.timeout(240)  # three starts of the command: a hang bound, sized for a loaded machine
def test_tasks_bad_references_get_clear_messages(
    bare_project: FathomProject, server_url: str, supervisor: tuple[str, dict[str, AsyncTask]]
) -> None:
    parent, _ = supervisor
    done = bare_project.run("tasks", "--server", server_url, "--thread", parent,
                            "--open", "zzzz")
    assert done.returncode == 2
    assert "no async task 'zzzz' on this thread" in done.stderr
    assert "researcher" in done.stderr and "asker" in done.stderr

    missing = "00000000-0000-4000-8000-000000000000"
    done = bare_project.run("tasks", "--server", server_url, "--thread", missing)
    assert done.returncode == 1
    assert f"thread {missing} was not found on {server_url}" in done.stderr

    done = bare_project.run("tasks", "--server", f"http://127.0.0.1:{_free_port()}",
                            "--thread", parent)
    assert done.returncode == 1
    assert f"cannot read thread {parent}" in done.stderr
    assert "Traceback" not in done.stderr


def test_slash_tasks_reads_the_local_thread_and_refreshes_from_the_server(
    tmp_path: Any, server_url: str, supervisor: tuple[str, dict[str, AsyncTask]]
) -> None:
    import asyncio

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from fathom.cli.tasks import local_async_tasks, server_client, tasks_report

    _, tasks = supervisor
    db = tmp_path / "threads.sqlite"

    async def scenario() -> str:
        # a local supervisor thread (as the command keeps them) that launched the tasks
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            agent = create_deep_agent(ScriptedModel(policy=lambda r: "ok"),
                                      middleware=[_TasksChannel()], checkpointer=saver)
            await agent.ainvoke({"messages": [{"role": "user", "content": "hi"}],
                                 "async_tasks": tasks},
                                {"configurable": {"thread_id": "local1"}})
        kept = await local_async_tasks(db, "local1")
        assert kept == tasks
        assert await local_async_tasks(db, "no-such-thread") == {}
        return await tasks_report(server_client(server_url), kept, None)

    table = asyncio.run(scenario())
    assert "success (was running)" in table and "waiting (was running)" in table


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
@pytest.mark.timeout(180)
def test_slash_tasks_lists_checks_and_cancels_in_the_command(
    fathom_project: FathomProject, server_url: str,
    supervisor: tuple[str, dict[str, AsyncTask]],
) -> None:
    """`/tasks`, `/tasks check ID` and `/tasks cancel ID` in the real command, on a local
    supervisor thread whose tasks run on a server; the status line counts the pending ones."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from fathom.project.threads import threads_db_path

    parent, tasks = supervisor
    client = get_sync_client(url=server_url, api_key=None)
    slow = _launch(client, "slow", parent)
    _until(lambda: client.runs.get(slow["thread_id"], slow["run_id"])["status"] == "running",
           "the slow task to run")
    fp = fathom_project
    db = threads_db_path(fp.project, fp.home)
    db.parent.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(str(db)) as saver:  # the thread as a supervisor left it
        agent = create_deep_agent(ScriptedModel(policy=lambda r: "ok"),
                                  middleware=[_TasksChannel()], checkpointer=saver)
        agent.invoke({"messages": [{"role": "user", "content": "hi"}],
                      "async_tasks": {**tasks, slow["task_id"]: slow}},
                     {"configurable": {"thread_id": "local1"}})

    child = fp.spawn("--thread", "local1", "--plain",
                     env={**fp.env, "FATHOM_SERVER": server_url})
    fp.prompt(child)
    child.sendline("/tasks")
    child.expect(r"success \(was running\)")  # in launch order: researcher, asker, slow
    child.expect(re.escape(slow["task_id"]) + r"\s+slow\s+running")
    fp.prompt(child)
    asker = _task_of(tasks, "asker")
    child.sendline(f"/tasks check {asker['task_id'][:8]}")
    child.expect_exact(f"task {asker['task_id']} · asker · waiting")
    child.expect_exact('waiting for a person: {"question": "deploy now?"}')
    child.sendline(f"/tasks cancel {asker['task_id']}")
    child.expect_exact("is waiting for a person and runs nothing")
    child.sendline(f"/tasks cancel {slow['task_id'][:8]}")
    child.expect_exact(f"cancelled task {slow['task_id']} (slow)")
    _until(lambda: client.runs.get(slow["thread_id"], slow["run_id"])["status"] != "running",
           "the server to stop the slow run")
    assert client.runs.get(slow["thread_id"], slow["run_id"])["status"] == "interrupted"
    child.sendline("/tasks")
    child.expect(re.escape(slow["task_id"]) + r"\s+slow\s+cancelled \(was running\)")
    child.sendline("/tasks cancel zzzz")
    child.expect_exact("no async task 'zzzz' on this thread")
    assert fp.leave(child) == 0
