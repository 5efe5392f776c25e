"""Interoperability: fathom's `AsyncSubAgentMiddleware` drives children hosted on `langgraph dev`.

The supervisor runs on `fathom serve`; its `researcher` and `coder` specs point by `url`
at `langgraph dev` (LangGraph's own server, from its own virtualenv), which hosts the same
scripted child graphs. The whole flow (launch, answer while running, check, interrupt and
enqueue updates, cancel, list, refresh) must read the same from the other server. Then the
whole deployment on `langgraph dev` alone: url-less specs, a child waking its supervisor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests.async_e2e.flow import supervisor_flow
from tests.async_e2e.support import Conversation, copy_e2e_deployment, use_gates
from tests.server.servers import ServerProcess, fathom_serve_available, langgraph_dev_binary
from tests.system_requirements import needs

pytestmark = [
    pytest.mark.skipif(not fathom_serve_available(), reason="no `fathom serve`"),
    pytest.mark.skipif(langgraph_dev_binary() is None, reason=needs("langgraph dev")),
]


async def test_fathom_supervisor_drives_children_on_langgraph_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = use_gates(tmp_path / "gates", monkeypatch)
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "FATHOM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FATHOM_E2E_CHILD_URL", raising=False)
    children = ServerProcess(
        kind="langgraph-dev", workdir=copy_e2e_deployment(tmp_path / "children")
    )
    children.start()
    monkeypatch.setenv("FATHOM_E2E_CHILD_URL", children.url)
    parent = ServerProcess(kind="fathom", workdir=copy_e2e_deployment(tmp_path / "parent"))
    parent.start()
    try:
        child_client = get_client(url=children.url)
        user = await Conversation.open(get_client(url=parent.url))
        await supervisor_flow(user, child_client, gates, woken=False)
        # the child threads live on langgraph dev, tagged with the supervisor's thread
        for task_id, task in (await user.tasks()).items():
            metadata = (await child_client.threads.get(task_id))["metadata"] or {}
            assert metadata["subagent_name"] == task["agent_name"]
            assert metadata["parent_thread_id"] == user.thread_id
    finally:
        parent.stop()
        children.stop()


async def test_fathom_supervisor_on_langgraph_dev_with_children_on_the_same_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Url-less specs on `langgraph dev`: the tools use langgraph-sdk's own in-process
    transport, and a finished child wakes the idle supervisor there too."""
    gates = use_gates(tmp_path / "gates", monkeypatch)
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "FATHOM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FATHOM_E2E_CHILD_URL", raising=False)
    server = ServerProcess(kind="langgraph-dev", workdir=copy_e2e_deployment(tmp_path / "deploy"))
    server.start()
    try:
        client = get_client(url=server.url)
        user = await Conversation.open(client)
        await supervisor_flow(user, client, gates, woken=True)
    finally:
        server.stop()
