"""Runtime context and the store reach tools; streaming modes work on the deep agent."""

from __future__ import annotations

from dataclasses import dataclass

from langchain.tools import ToolRuntime, tool
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call


@dataclass
class Context:
    user_id: str


@tool
def whoami(runtime: ToolRuntime[Context]) -> str:
    """Say which user is asking, and remember them in the store."""
    runtime.store.put(("users",), runtime.context.user_id, {"seen": True})
    return f"user {runtime.context.user_id}"


def test_context_schema_and_store_reach_the_tools():
    store = InMemoryStore()
    model = ScriptedModel(replies=[ai("", tool_call("whoami", {})), ai("done")])
    agent = create_deep_agent(model, [whoami], context_schema=Context, store=store)
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "who am I?"}]}, context=Context("ada")
    )
    assert result["messages"][2].content == "user ada"
    assert store.get(("users",), "ada").value == {"seen": True}
    assert "runtime" not in str(model.requests[0].tools)


def test_updates_and_messages_stream_modes():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/s.md", "content": "s"})),
            ai("streamed answer"),
        ]
    )
    agent = create_deep_agent(model)
    nodes, tokens = [], []
    for mode, chunk in agent.stream(
        {"messages": [{"role": "user", "content": "go"}]}, stream_mode=["updates", "messages"]
    ):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            message, metadata = chunk
            if message.type == "AIMessageChunk":
                tokens.append(message.content)
                assert metadata["langgraph_node"] == "model"
    assert "model" in nodes and "tools" in nodes
    assert "".join(tokens) == "streamed answer"


async def test_astream_gives_the_same_final_state_as_invoke():
    replies = [
        ai("", tool_call("write_file", {"file_path": "/a.md", "content": "a"})),
        ai("done"),
    ]
    sync_state = create_deep_agent(ScriptedModel(replies=list(replies))).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    final = None
    async for state in create_deep_agent(ScriptedModel(replies=list(replies))).astream(
        {"messages": [{"role": "user", "content": "go"}]}, stream_mode="values"
    ):
        final = state
    assert final["files"]["/a.md"]["content"] == sync_state["files"]["/a.md"]["content"]
    assert final["messages"][-1].content == sync_state["messages"][-1].content == "done"
