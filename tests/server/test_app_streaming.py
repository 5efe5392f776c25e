"""Stream modes of fathom's server, in-process through the real langgraph-sdk client."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

from fathom import create_deep_agent
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hi"}]}


class State(TypedDict, total=False):
    x: int


def _step(state: State) -> State:
    get_stream_writer()({"progress": state.get("x", 0)})
    return {"x": state.get("x", 0) + 1}


def nested_graph() -> Any:
    inner = StateGraph(State)
    inner.add_node("step", _step)
    inner.add_edge(START, "step")
    inner.add_edge("step", END)
    outer = StateGraph(State)
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    return outer.compile()


def deep_agent() -> Any:
    helper = ScriptedModel(model_name="helper", replies=[ai("helped")])
    main = ScriptedModel(
        model_name="main",
        replies=[
            ai("", tool_call("task", {"description": "do it", "subagent_type": "helper"})),
            ai("done"),
        ],
    )
    return create_deep_agent(
        main,
        subagents=[
            {"name": "helper", "description": "helps", "system_prompt": "H", "model": helper}
        ],
    )


async def _collect(client: Any, graph: str, body: Any, **kwargs: Any) -> list[tuple[str, Any]]:
    thread = await client.threads.create()
    stream = client.runs.stream(thread["thread_id"], graph, input=body, **kwargs)
    return [(part.event, part.data) async for part in stream]


async def test_messages_tuple_with_subgraphs_namespaces_the_subagents_tokens() -> None:
    client = in_process_client(create_app({"deep": deep_agent()}))
    parts = await _collect(
        client, "deep", USER, stream_mode=["messages-tuple", "updates"], stream_subgraphs=True
    )
    assert parts[0][0] == "metadata"
    sub = [d for e, d in parts if e.startswith("messages|tools:")]
    root = [d for e, d in parts if e == "messages"]
    assert any(chunk["content"] == "helped" for chunk, _meta in sub)
    assert any(chunk["content"] == "done" for chunk, _meta in root)
    assert all(isinstance(meta, dict) and "langgraph_node" in meta for _c, meta in sub + root)
    assert any(e.startswith("updates|tools:") for e, _ in parts)
    assert any(e == "updates" and "model" in d for e, d in parts)


async def test_messages_mode_sends_metadata_then_accumulated_partials() -> None:
    client = in_process_client(create_app({"deep": deep_agent()}))
    parts = await _collect(client, "deep", USER, stream_mode="messages")
    names = [e for e, _ in parts]
    assert "messages/metadata" in names and "messages/partial" in names
    first_meta = names.index("messages/metadata")
    assert first_meta < names.index("messages/partial")
    contents = [d[0]["content"] for e, d in parts if e == "messages/partial"]
    assert "done" in contents


async def test_custom_and_values_of_a_subgraph_are_namespaced() -> None:
    client = in_process_client(create_app({"nested": nested_graph()}))
    parts = await _collect(
        client, "nested", {"x": 1}, stream_mode=["values", "custom"], stream_subgraphs=True
    )
    assert parts[-1] == ("values", {"x": 2})
    custom = [(e, d) for e, d in parts if e.startswith("custom|inner:")]
    assert [d for _e, d in custom] == [{"progress": 1}]
    assert any(e.startswith("values|inner:") for e, _ in parts)


async def test_events_and_debug_modes_at_once() -> None:
    client = in_process_client(create_app({"nested": nested_graph()}))
    parts = await _collect(client, "nested", {"x": 1}, stream_mode=["events", "debug"])
    kinds = {d["event"] for e, d in parts if e == "events"}
    assert {"on_chain_start", "on_chain_end"} <= kinds
    debug_types = {d["type"] for e, d in parts if e == "debug"}
    assert {"checkpoint", "task", "task_result"} <= debug_types


async def test_join_stream_replays_a_finished_run_filtered_by_mode() -> None:
    client = in_process_client(create_app({"nested": nested_graph()}))
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], "nested", input={"x": 5}, stream_mode=["values", "updates"]
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    parts = [
        (p.event, p.data)
        async for p in client.runs.join_stream(
            thread["thread_id"], run["run_id"], stream_mode="updates"
        )
    ]
    assert parts == [
        ("metadata", {"run_id": run["run_id"], "attempt": 1}),
        ("updates", {"inner": {"x": 6}}),
    ]
