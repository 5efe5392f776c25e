"""In-process tests of fathom's server core through the real langgraph-sdk client."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from fathom.server import create_app, in_process_client


class State(TypedDict, total=False):
    x: int
    answer: str


def _counter(state: State) -> State:
    return {"x": state.get("x", 0) + 1}


def _ask(state: State) -> State:
    return {"answer": str(interrupt({"question": "ok?"}))}


def counter_graph() -> Any:
    g = StateGraph(State)
    g.add_node("inc", _counter)
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile()


def ask_graph() -> Any:
    g = StateGraph(State)
    g.add_node("inc", _counter)
    g.add_node("ask", _ask)
    g.add_edge(START, "inc")
    g.add_edge("inc", "ask")
    g.add_edge("ask", END)
    return g.compile()


async def test_background_run_join_then_state() -> None:
    client = in_process_client(create_app({"counter": counter_graph()}))
    thread = await client.threads.create(metadata={"owner": "t"})
    run = await client.runs.create(thread["thread_id"], "counter", input={"x": 41})
    assert run["status"] in ("pending", "running", "success")
    joined = await client.runs.join(thread["thread_id"], run["run_id"])
    assert joined == {"x": 42}
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"] == {"x": 42}
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle" and got["values"] == {"x": 42}
    assert got["metadata"]["owner"] == "t"


async def test_stream_values_and_updates() -> None:
    client = in_process_client(create_app({"counter": counter_graph()}))
    thread = await client.threads.create()
    parts = [
        p
        async for p in client.runs.stream(
            thread["thread_id"], "counter", input={"x": 1}, stream_mode=["values", "updates"]
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    assert ("updates", {"inc": {"x": 2}}) in [(p.event, p.data) for p in parts]
    assert parts[-1].event == "values" and parts[-1].data == {"x": 2}


async def test_interrupt_then_resume_with_command() -> None:
    client = in_process_client(create_app({"ask": ask_graph()}))
    thread = await client.threads.create()
    out = await client.runs.wait(thread["thread_id"], "ask", input={"x": 0})
    assert out["__interrupt__"][0]["value"] == {"question": "ok?"}
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "interrupted"
    [pending] = got["interrupts"].values()
    assert pending[0]["value"] == {"question": "ok?"}
    out = await client.runs.wait(thread["thread_id"], "ask", command={"resume": "yes"})
    assert out == {"x": 1, "answer": "yes"}
    assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"


async def test_a_run_sees_its_threads_metadata_in_its_config() -> None:
    def whoami(state: State, config: RunnableConfig) -> State:
        meta = config.get("metadata") or {}
        return {"answer": f"{meta.get('parent_thread_id')}/{meta.get('owner')}"}

    g = StateGraph(State)
    g.add_node("whoami", whoami)
    g.add_edge(START, "whoami")
    g.add_edge("whoami", END)
    client = in_process_client(create_app({"who": g.compile()}))
    thread = await client.threads.create(metadata={"parent_thread_id": "p-1", "owner": "thread"})
    out = await client.runs.wait(
        thread["thread_id"], "who", input={"x": 0}, metadata={"owner": "run"}
    )
    assert out["answer"] == "p-1/run"


async def test_a_run_started_from_inside_another_run_streams_only_to_its_own_thread() -> None:
    from fathom import create_deep_agent
    from fathom.hosting.loopback import hosting_app
    from fathom.testing import ScriptedModel, ai

    child = create_deep_agent(ScriptedModel(replies=[ai("child words")]))

    async def launch(state: State) -> State:
        app = hosting_app()
        assert app is not None
        client = in_process_client(app)
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "child", input={"messages": [
            {"role": "user", "content": "go"}]})  # fmt: skip
        out = await client.runs.join(thread["thread_id"], run["run_id"])
        assert "messages" in out, out
        return {"answer": out["messages"][-1]["content"]}

    g = StateGraph(State)
    g.add_node("launch", launch)
    g.add_edge(START, "launch")
    g.add_edge("launch", END)
    client = in_process_client(create_app({"parent": g.compile(), "child": child}))
    thread = await client.threads.create()
    parts = [p async for p in client.runs.stream(
        thread["thread_id"], "parent", input={"x": 0}, stream_mode=["messages-tuple", "values"],
        stream_subgraphs=True)]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["answer"] == "child words", [(p.event, p.data) for p in parts]
    threads = {p.data[1].get("thread_id") for p in parts if p.event == "messages"}
    assert threads <= {thread["thread_id"]}, "the child's model chunks leaked into this stream"
