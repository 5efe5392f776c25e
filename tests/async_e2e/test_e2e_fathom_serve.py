"""Async subagents end to end on `fathom serve` subprocesses, through the real SDK over HTTP.

One server: the supervisor and its children (specs without `url`) on one `fathom serve`,
so children reach the supervisor in process and wake it when they end. Split: the
supervisor on one `fathom serve`, its children on a second one reached by `url`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests.async_e2e.flow import supervisor_flow
from tests.async_e2e.support import Conversation, Gates, copy_e2e_deployment
from tests.server.servers import ServerProcess, fathom_serve_available

pytestmark = pytest.mark.skipif(not fathom_serve_available(), reason="no `fathom serve`")


@pytest.fixture
def no_api_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Servers without auth, clients without keys."""
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "FATHOM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FATHOM_E2E_CHILD_URL", raising=False)
    yield


async def test_supervisor_flow_on_one_fathom_serve(
    tmp_path: Path, gates: Gates, no_api_keys: None
) -> None:
    server = ServerProcess(kind="fathom", workdir=copy_e2e_deployment(tmp_path / "deploy"))
    server.start()
    try:
        client = get_client(url=server.url)
        user = await Conversation.open(client)
        await supervisor_flow(user, client, gates, woken=True)
    finally:
        server.stop()


async def test_supervisor_flow_with_children_on_a_second_fathom_serve(
    tmp_path: Path, gates: Gates, no_api_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    children = ServerProcess(kind="fathom", workdir=copy_e2e_deployment(tmp_path / "children"))
    children.start()
    monkeypatch.setenv("FATHOM_E2E_CHILD_URL", children.url)
    parent = ServerProcess(kind="fathom", workdir=copy_e2e_deployment(tmp_path / "parent"))
    parent.start()
    try:
        child_client = get_client(url=children.url)
        user = await Conversation.open(get_client(url=parent.url))
        await supervisor_flow(user, child_client, gates, woken=False)
        # the children really ran on the second server, not on the supervisor's
        tasks = await user.tasks()
        for task_id in tasks:
            thread = await child_client.threads.get(task_id)
            assert (thread["metadata"] or {})["subagent_name"] == tasks[task_id]["agent_name"]
        assert not await get_client(url=parent.url).threads.search(
            metadata={"subagent_name": "researcher"}
        )
    finally:
        parent.stop()
        children.stop()
