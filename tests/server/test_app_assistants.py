"""Assistants: one per graph (by name or LangGraph's uuid5 id) and created ones with config."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph_sdk.errors import ConflictError, NotFoundError
from tests.server.app_support import State

from fathom.server import create_app, in_process_client


def _flavour(state: State, config: RunnableConfig) -> State:
    return {"answer": str(config.get("configurable", {}).get("flavour"))}


def flavour_graph() -> Any:
    g = StateGraph(State)
    g.add_node("say", _flavour)
    g.add_edge(START, "say")
    g.add_edge("say", END)
    return g.compile()


async def test_graph_assistant_by_name_and_by_langgraph_uuid() -> None:
    client = in_process_client(create_app({"agent": flavour_graph()}))
    [found] = await client.assistants.search()
    assert found["assistant_id"] == "agent" and found["graph_id"] == "agent"
    lg_id = str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "agent"))
    assert (await client.assistants.get(lg_id))["graph_id"] == "agent"
    schemas = await client.assistants.get_schemas("agent")
    assert {"x", "answer", "seen"} <= set(schemas["state_schema"]["properties"])
    drawn = await client.assistants.get_graph("agent")
    assert {n["id"] for n in drawn["nodes"]} >= {"__start__", "say", "__end__"}
    with pytest.raises(NotFoundError):
        await client.assistants.get("nope")


async def test_created_assistant_config_reaches_its_runs_and_run_config_wins() -> None:
    client = in_process_client(create_app({"agent": flavour_graph()}))
    made = await client.assistants.create(
        "agent", config={"configurable": {"flavour": "mint"}}, name="minty"
    )
    assert made["graph_id"] == "agent" and made["name"] == "minty"
    tid = (await client.threads.create())["thread_id"]
    assert (await client.runs.wait(tid, made["assistant_id"], input={}))["answer"] == "mint"
    override = {"configurable": {"flavour": "lemon"}}
    out = await client.runs.wait(tid, made["assistant_id"], input={}, config=override)
    assert out["answer"] == "lemon"
    assert [a["name"] for a in await client.assistants.search(graph_id="agent")] == [
        "agent",
        "minty",
    ]
    updated = await client.assistants.update(made["assistant_id"], name="mintier")
    assert updated["name"] == "mintier" and updated["version"] == 2
    with pytest.raises(ConflictError):
        await client.assistants.delete("agent")
    await client.assistants.delete(made["assistant_id"])
    with pytest.raises(NotFoundError):
        await client.assistants.get(made["assistant_id"])
