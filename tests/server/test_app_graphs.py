"""Graph sources: compiled graphs and factories (sync, async, with or without the config)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from tests.server.app_support import State

from fathom.server import create_app, in_process_client


def _graph(answer: str) -> Any:
    def say(state: State) -> State:
        return {"answer": answer}

    g = StateGraph(State)
    g.add_node("say", say)
    g.add_edge(START, "say")
    g.add_edge("say", END)
    return g.compile()


async def test_factories_are_built_per_run_from_the_runs_config() -> None:
    seen: list[Any] = []

    def from_config(config: RunnableConfig) -> Any:
        seen.append(config.get("configurable", {}).get("flavour"))
        return _graph(f"built for {seen[-1]}")

    async def async_factory() -> Any:
        return _graph("async")

    app = create_app({"cfg": from_config, "plain": lambda: _graph("plain"), "async": async_factory})
    client = in_process_client(app)
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "cfg", input={}, config={"configurable": {"flavour": "fig"}})
    assert out["answer"] == "built for fig" and "fig" in seen
    for name in ("plain", "async"):
        other = (await client.threads.create())["thread_id"]
        assert (await client.runs.wait(other, name, input={}))["answer"] == name
        # The server injected its own checkpointer: the state is readable afterwards.
        assert (await client.threads.get_state(other))["values"]["answer"] == name


def test_create_app_refuses_bad_graphs() -> None:
    with pytest.raises(ValueError, match="at least one graph"):
        create_app({})
    with pytest.raises(TypeError, match="neither a compiled graph nor a factory"):
        create_app({"x": 3})  # pyright: ignore[reportArgumentType]
