"""`fathom serve` (a subprocess, the shared deployment) answers a2a-sdk's client at /a2a/*.

The same tests run against `langgraph dev` when it is installed, so fathom's A2A endpoint
is checked against the server it follows.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
from a2a.types import TaskState
from tests.protocols.a2a.support import a2a_client, user_message
from tests.server.servers import (
    ServerProcess,
    copy_deployment,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.system_requirements import needs

from fathom.server.graphs import graph_assistant_uuid


@pytest.fixture(scope="module", params=["fathom", "langgraph-dev"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    kind: str = request.param
    if kind == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    if kind == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path_factory.mktemp(f"a2a-{kind}") / "deploy")
    process = ServerProcess(kind=kind, workdir=workdir)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _agent(server: ServerProcess, graph: str) -> str:
    """The A2A URL of ``graph``'s assistant (langgraph dev takes only its uuid5 id)."""
    assistant = graph if server.kind == "fathom" else graph_assistant_uuid(graph)
    return f"{server.url}/a2a/{assistant}"


async def test_served_agent_card_points_at_its_jsonrpc_endpoint(server: ServerProcess) -> None:
    async with httpx.AsyncClient() as http:
        res = await http.get(f"{_agent(server, 'agent')}/.well-known/agent-card.json")
    assert res.status_code == 200, res.text
    card = res.json()
    interface = card["supportedInterfaces"][0]
    assert interface["url"] == _agent(server, "agent")
    assert (interface["protocolBinding"], interface["protocolVersion"]) == ("JSONRPC", "1.0")


async def test_served_agent_completes_a_sent_message(server: ServerProcess) -> None:
    async with a2a_client(_agent(server, "agent")) as client:
        events = [e async for e in client.send_message(user_message("over the wire"))]
    task = events[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(task.artifacts[0]) == "echo: over the wire"


async def test_served_interrupt_is_input_required_and_the_reply_resumes_it(
    server: ServerProcess,
) -> None:
    agent = _agent(server, "interrupting")
    async with a2a_client(agent) as client:
        asked = [e async for e in client.send_message(user_message("it"))][-1].task
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if server.kind == "fathom":
            assert get_message_text(asked.status.message).startswith("approve it?")
        reply = user_message("yes please", context_id=asked.context_id, task_id=asked.id)
        done = [e async for e in client.send_message(reply)][-1].task
    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
