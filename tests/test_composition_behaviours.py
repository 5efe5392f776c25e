"""Composition behaviours users rely on that had no test of their own: a subagent spec's
middleware merged with the built-in stack by name, subagent runs tagged
`ls_agent_type="subagent"`, and a model chosen per call by `wrap_model_call`."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, wrap_model_call
from langsmith.run_helpers import get_tracing_context

from fathom import create_deep_agent
from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "go"}]}


def _delegating_parent() -> ScriptedModel:
    return ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "list the root", "subagent_type": "helper"})),
            ai("done"),
        ]
    )


class _Marker(AgentMiddleware):
    """A middleware of a name the built-in stack does not have: it must be appended."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.calls += 1
        return handler(request)


def test_a_subagent_spec_middleware_replaces_the_built_in_one_of_the_same_name() -> None:
    helper_model = ScriptedModel(replies=[ai("listed")])
    marker = _Marker()
    spec = {
        "name": "helper",
        "description": "Lists files.",
        "system_prompt": "You list files.",
        "model": helper_model,
        "middleware": [
            FilesystemMiddleware(custom_tool_descriptions={"ls": "LIST MARKER"}),
            marker,
        ],
    }
    agent = create_deep_agent(_delegating_parent(), subagents=[spec])
    result = agent.invoke(USER)

    assert result["messages"][-1].content == "done"
    (request,) = helper_model.requests
    # one `ls`, carrying the spec's description: the spec's filesystem middleware took the
    # built-in one's place instead of adding a second (create_agent refuses duplicates)
    assert request.tool_names.count("ls") == 1
    (ls,) = [t for t in request.tools if t["function"]["name"] == "ls"]
    assert ls["function"]["description"] == "LIST MARKER"
    # the other file tools are still there, and the new-named middleware ran
    assert {"read_file", "write_file", "edit_file"} <= set(request.tool_names)
    assert marker.calls == 1


def test_subagent_runs_are_tagged_as_subagents_and_the_main_run_is_not() -> None:
    # the tag lives in LangSmith's tracing context, which its tracer reads for every run
    # started inside it; each model records what that context says when it is called
    seen: dict[str, Any] = {}

    def recording(who: str, reply: Any) -> ScriptedModel:
        def policy(request: Any) -> Any:
            seen.setdefault(who, []).append(get_tracing_context().get("metadata") or {})
            return reply(request)

        return ScriptedModel(policy=policy)

    parent = recording(
        "main",
        lambda r: ai("done") if any(m.type == "tool" for m in r.messages)
        else ai("", tool_call("task", {"description": "list", "subagent_type": "helper"})),
    )
    spec = {
        "name": "helper",
        "description": "Lists files.",
        "system_prompt": "You list files.",
        "model": recording("helper", lambda r: ai("listed")),
    }
    create_deep_agent(parent, subagents=[spec]).invoke(USER)

    assert [m.get("ls_agent_type") for m in seen["helper"]] == ["subagent"]
    assert all(m.get("ls_agent_type") != "subagent" for m in seen["main"])
    assert len(seen["main"]) == 2


def test_wrap_model_call_can_pick_the_model_for_each_call() -> None:
    configured = ScriptedModel(replies=[ai("from the configured model")])
    chosen = ScriptedModel(
        replies=[ai("", tool_call("write_todos", {"todos": []})), ai("from the chosen model")]
    )

    @wrap_model_call
    def pick_model(request: ModelRequest, handler: Any) -> Any:
        # the choice is made per call, at run time, over the model the agent was built with
        return handler(request.override(model=chosen))

    agent = create_deep_agent(configured, middleware=[pick_model])
    result = agent.invoke(USER)

    assert result["messages"][-1].content == "from the chosen model"
    assert configured.requests == []
    assert len(chosen.requests) == 2
    # the override keeps the request the harness built: its tools and system prompt
    assert "write_todos" in chosen.requests[0].tool_names
    assert chosen.requests[0].system_prompt
