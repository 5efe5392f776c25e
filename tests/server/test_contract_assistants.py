"""Assistants and server info over HTTP, on both servers: one assistant per deployed graph."""

from __future__ import annotations

import httpx
from langgraph_sdk.client import LangGraphClient
from tests.server.servers import ServerProcess

GRAPHS = {
    "agent",
    "slow_agent",
    "weather",
    "interrupting",
    "nested",
    "forecast",
    "custom",
    "failing",
    "gated",
    "whoami",
}


async def test_ok_and_info_answer(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        ok = await http.get("/ok")
        info = await http.get("/info")

    assert ok.status_code == 200
    assert ok.json()["ok"] is True
    assert info.status_code == 200
    assert isinstance(info.json(), dict)


async def test_search_lists_one_assistant_per_graph_in_the_deployment(
    client: LangGraphClient,
) -> None:
    assistants = await client.assistants.search(limit=100)

    system = [a for a in assistants if a["metadata"].get("created_by") == "system"]
    assert {a["graph_id"] for a in system} == GRAPHS
    assert len(system) == len(GRAPHS)


async def _system_assistant(client: LangGraphClient, graph_id: str) -> str:
    found = await client.assistants.search(graph_id=graph_id, limit=100)
    return next(a["assistant_id"] for a in found if a["metadata"].get("created_by") == "system")


async def test_an_assistant_is_fetched_by_its_id_with_its_graph(
    client: LangGraphClient,
) -> None:
    assistant_id = await _system_assistant(client, "interrupting")

    assistant = await client.assistants.get(assistant_id)
    graph = await client.assistants.get_graph(assistant_id)

    assert assistant["graph_id"] == "interrupting"
    assert {node["id"] for node in graph["nodes"]} >= {"__start__", "ask", "__end__"}


async def test_assistant_schemas_describe_the_state(client: LangGraphClient) -> None:
    assistant_id = await _system_assistant(client, "interrupting")

    schemas = await client.assistants.get_schemas(assistant_id)

    assert schemas["graph_id"] == "interrupting"
    assert {"messages", "answer"} <= set(schemas["state_schema"]["properties"])


async def test_created_assistant_carries_its_config_into_runs(client: LangGraphClient) -> None:
    created = await client.assistants.create(
        "agent", config={"configurable": {"flavour": "contract"}}, name="contract-agent"
    )

    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], created["assistant_id"], input={"messages": [
            {"role": "user", "content": "via created"}
        ]},
    )  # fmt: skip
    await client.runs.join(thread["thread_id"], run["run_id"])

    stored = await client.runs.get(thread["thread_id"], run["run_id"])
    assert stored["assistant_id"] == created["assistant_id"]
    assert created["graph_id"] == "agent"
    assert created["config"]["configurable"]["flavour"] == "contract"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["messages"][-1]["content"] == "echo: via created"
