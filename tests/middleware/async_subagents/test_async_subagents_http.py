"""Async subagents on another server reached by `url`: a `fathom serve` subprocess.

The supervisor runs in process; its children run on the subprocess server over real
HTTP, authenticated with the API key from the environment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.middleware.async_subagents.support import Child, supervisor, tool_results, turn
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available, free_port
from tests.server.support import eventually

from fathom.server import create_app, in_process_client

pytestmark = pytest.mark.skipif(not fathom_serve_available(), reason="no `fathom serve`")

API_KEY = "test-key-async-subagents"


@pytest.fixture
def keyed_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`FATHOM_API_KEY` for both the server (it then requires it) and the client."""
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FATHOM_API_KEY", API_KEY)
    yield


async def test_a_server_down_at_launch_is_an_answer_and_a_later_launch_works(
    tmp_path: Path, keyed_env: None
) -> None:
    port = free_port()
    spec = {"name": "echo", "description": "echoes", "graph_id": "agent",
            "url": f"http://127.0.0.1:{port}"}  # fmt: skip
    app = create_app({"supervisor": supervisor([spec])})
    client = in_process_client(app)
    remote = ServerProcess(kind="fathom", workdir=copy_deployment(tmp_path / "deploy"), port=port)
    try:
        thread = (await client.threads.create())["thread_id"]
        values = await turn(client, thread, "start echo")
        [answer] = tool_results(values)
        assert answer["status"] == "error"
        assert "cannot reach the server at http://127.0.0.1" in answer["content"]
        assert "No task was started" in answer["content"]
        state = await client.threads.get_state(thread)
        assert not state["values"].get("async_tasks")  # pyright: ignore[reportAttributeAccessIssue]

        remote.start()
        values = await turn(client, thread, "start echo")
        [answer] = tool_results(values)
        assert answer["content"].startswith("Launched async subagent. task_id: ")
        task_id = answer["content"].split("task_id: ")[1]

        async def reported() -> bool:
            values = await turn(client, thread, f"check {task_id}")
            return json.loads(tool_results(values)[0]["content"])["status"] == "success"

        await eventually(reported, "the remote child to finish")
        values = await turn(client, thread, f"check {task_id}")
        report = json.loads(tool_results(values)[0]["content"])
        assert report["result"] == "echo: task for echo"

        # a follow-up on the same thread, over HTTP, keeps the task id
        values = await turn(client, thread, f"update {task_id} and again")
        assert tool_results(values)[0]["content"] == f"Updated async subagent. task_id: {task_id}"

        async def updated() -> bool:
            values = await turn(client, thread, f"check {task_id}")
            report: dict[str, Any] = json.loads(tool_results(values)[0]["content"])
            return report.get("result") == "echo: and again"

        await eventually(updated, "the follow-up's answer")
        values = await turn(client, thread, "list")
        assert f"task_id: {task_id}  agent: echo  status: success" in (
            tool_results(values)[0]["content"]
        )
        state = await client.threads.get_state(thread)
        assert list(state["values"]["async_tasks"]) == [task_id]  # pyright: ignore[reportCallIssue,reportArgumentType,reportIndexIssue]
    finally:
        remote.stop()
        await app.state.fathom.runs.shutdown()


async def test_one_supervisor_runs_children_in_process_and_over_http_together(
    tmp_path: Path, keyed_env: None
) -> None:
    """One turn starts a child hosted by the supervisor's own app and one on another
    server; each is checked through the same tools, and each answer comes from its host."""
    port = free_port()
    local = Child("researcher")
    specs = [
        {"name": "researcher", "description": "researches", "graph_id": "researcher"},
        {"name": "echo", "description": "echoes", "graph_id": "agent",
         "url": f"http://127.0.0.1:{port}"},
    ]  # fmt: skip
    app = create_app({"supervisor": supervisor(specs), "researcher": local.graph()})
    client = in_process_client(app)
    remote = ServerProcess(kind="fathom", workdir=copy_deployment(tmp_path / "deploy"), port=port)
    remote.start()
    try:
        thread = (await client.threads.create())["thread_id"]
        values = await turn(client, thread, "start researcher echo")
        answers = tool_results(values)
        assert [a["content"].split(" task_id: ")[0] for a in answers] == [
            "Launched async subagent.", "Launched async subagent."]  # fmt: skip
        # the answers come in the order of the calls: researcher, then echo
        launched = [a["content"].split("task_id: ")[1] for a in answers]
        ids = dict(zip(["researcher", "echo"], launched, strict=True))

        async def echo_done() -> bool:
            values = await turn(client, thread, f"check {ids['echo']}")
            return json.loads(tool_results(values)[0]["content"])["status"] == "success"

        # the remote child finishes while the local one is still held by its gate
        await eventually(echo_done, "the remote child to finish")
        values = await turn(client, thread, f"check {ids['researcher']}")
        assert json.loads(tool_results(values)[0]["content"])["status"] == "running"

        local.release.set()

        async def researcher_done() -> bool:
            values = await turn(client, thread, f"check {ids['researcher']}")
            return json.loads(tool_results(values)[0]["content"])["status"] == "success"

        await eventually(researcher_done, "the in-process child to finish")
        values = await turn(client, thread, f"check {ids['researcher']} {ids['echo']}")
        reports = [json.loads(a["content"]) for a in tool_results(values)]
        assert reports[0]["result"] == "researcher answer to: task for researcher"
        assert reports[1]["result"] == "echo: task for echo"
        assert local.seen == [["task for researcher"]]
        state = await client.threads.get_state(thread)
        tracked = state["values"]["async_tasks"]  # pyright: ignore[reportCallIssue,reportArgumentType,reportIndexIssue]
        assert {t["agent_name"] for t in tracked.values()} == {"researcher", "echo"}
    finally:
        local.release.set()
        remote.stop()
        await app.state.fathom.runs.shutdown()
