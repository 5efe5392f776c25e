"""A whole deep agent driven through ChatOpenAI over real HTTP, with streaming on."""

from __future__ import annotations

from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest, ai, tool_call


def researcher(request: ScriptRequest):
    # OpenAI tool messages carry no tool name, so count the results seen so far.
    step = sum(1 for m in request.messages if m.type == "tool")
    if step == 0:
        todos = [{"content": "write notes", "status": "in_progress"}]
        return ai("Planning.", tool_call("write_todos", {"todos": todos}))
    if step == 1:
        return ai("", tool_call("write_file", {"file_path": "/notes.md", "content": "café ✓"}))
    if step == 2:
        return ai("", tool_call("read_file", {"file_path": "/notes.md"}))
    return ai("Notes say: " + request.last_message.content.split("\t", 1)[1])


def _chat(server: ScriptedOpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(
        model="scripted",
        base_url=server.base_url,
        api_key="scripted",
        streaming=True,
        stream_usage=True,
        max_retries=0,
    )


def test_deep_agent_runs_through_chat_openai_over_http_with_streaming():
    script = ScriptedModel(policy=researcher)
    with ScriptedOpenAIServer(script) as server:
        agent = create_deep_agent(_chat(server), system_prompt="Keep notes.")
        tokens = []
        final = None
        for mode, chunk in agent.stream(
            {"messages": [{"role": "user", "content": "take notes"}]},
            stream_mode=["messages", "values"],
        ):
            if mode == "messages":
                message, _metadata = chunk
                if message.type == "AIMessageChunk" and message.content:
                    tokens.append(message.content)
            else:
                final = chunk
    assert final["files"]["/notes.md"]["content"] == "café ✓"
    assert final["todos"] == [{"content": "write notes", "status": "in_progress"}]
    assert final["messages"][-1].content == "Notes say: café ✓"
    assert "".join(tokens).startswith("Planning.")
    assert script.calls == 4
    sent = script.requests[0]
    assert sent.system_prompt.startswith("Keep notes.")
    assert sent.tool_names == sorted(sent.tool_names)
    usage = final["messages"][-1].usage_metadata
    assert usage and usage["input_tokens"] > 0


async def test_approval_round_trip_through_chat_openai_async():
    def policy(request: ScriptRequest):
        if request.last_message.type == "tool":
            return ai("status: " + request.last_message.content)
        return ai("", tool_call("write_file", {"file_path": "/x.md", "content": "x"}))

    script = ScriptedModel(policy=policy)
    with ScriptedOpenAIServer(script) as server:
        agent = create_deep_agent(
            _chat(server), interrupt_on={"write_file": True}, checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "http"}}
        paused = await agent.ainvoke(
            {"messages": [{"role": "user", "content": "write"}]}, config, version="v2"
        )
        assert paused.interrupts[0].value["action_requests"][0]["name"] == "write_file"
        done = await agent.ainvoke(
            Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}),
            config,
            version="v2",
        )
    assert "not now" in done.value["messages"][-1].content
    assert "/x.md" not in (done.value.get("files") or {})
