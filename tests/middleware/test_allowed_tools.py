"""`AllowedToolsMiddleware`: an agent limited to named tools sees and runs only those."""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from fathom import create_deep_agent
from fathom.backends.utils import create_file_data
from fathom.middleware.allowed_tools import AllowedToolsMiddleware
from fathom.testing import ScriptedModel, ai, tool_call


def test_model_sees_only_allowed_tools_and_other_calls_are_refused() -> None:
    model = ScriptedModel(
        replies=[
            ai("", tool_call("read_file", {"file_path": "/a.md"}),
               tool_call("write_file", {"file_path": "/b.md", "content": "x"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(
        model,
        middleware=[AllowedToolsMiddleware(["read_file", "ls"])],
        general_purpose_subagent=False,
    )
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "go"}],
         "files": {"/a.md": create_file_data("hello")}}
    )
    assert sorted(model.requests[0].tool_names) == ["ls", "read_file"]
    answers = {m.name: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert "hello" in answers["read_file"].text
    refused = answers["write_file"]
    assert refused.status == "error"
    assert "not available to this agent" in refused.text and "ls, read_file" in refused.text
    assert "/b.md" not in result.get("files", {})


async def test_async_path_filters_too() -> None:
    model = ScriptedModel(replies=[ai("", tool_call("grep", {"pattern": "x"})), ai("ok")])
    agent = create_deep_agent(
        model, middleware=[AllowedToolsMiddleware(["write_todos"])],
        general_purpose_subagent=False,
    )
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
    assert model.requests[0].tool_names == ["write_todos"]
    refusal = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error" and "'grep' is not available" in refusal.text
