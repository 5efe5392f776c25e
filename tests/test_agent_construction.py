"""create_deep_agent: signature, model resolution, default tools and middleware, errors."""

from __future__ import annotations

import inspect
from typing import NotRequired

import pytest
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom import ModelNotConfiguredError, create_deep_agent, resolve_model
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hello"}]}


def test_returns_compiled_graph_whose_last_message_is_the_answer():
    model = ScriptedModel(replies=[ai("the answer")])
    result = create_deep_agent(model).invoke(USER)
    assert result["messages"][-1].content == "the answer"
    assert result["messages"][0].content == "hello"


def test_signature_matches_the_reference():
    params = inspect.signature(create_deep_agent).parameters
    assert list(params) == [
        "model", "tools", "system_prompt", "middleware", "subagents", "skills", "memory",
        "permissions", "backend", "interrupt_on", "response_format", "state_schema",
        "context_schema",
        "checkpointer", "store", "debug", "name", "cache",
        # fathom's own additions come after the reference's parameters, keyword-only
        "general_purpose_subagent", "code_interpreter", "budget",
    ]  # fmt: skip
    positional = [p for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == ["model", "tools"]


def test_system_prompt_is_keyword_only():
    model = ScriptedModel(replies=[ai("x")])
    with pytest.raises(TypeError):
        create_deep_agent(model, [], "be nice")  # type: ignore[misc]


def test_default_tools_are_planning_filesystem_and_task_without_execute():
    model = ScriptedModel(replies=[ai("x")])
    create_deep_agent(model).invoke(USER)
    names = model.requests[0].tool_names
    assert names == [
        "delete", "edit_file", "glob", "grep", "ls", "read_file", "task", "write_file",
        "write_todos",
    ]  # fmt: skip
    assert "execute" not in names


def test_user_tools_are_added_next_to_builtins_and_run():
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ScriptedModel(replies=[ai("", tool_call("add", {"a": 2, "b": 3})), ai("5")])
    result = create_deep_agent(model, [add]).invoke(USER)
    assert "add" in model.requests[0].tool_names
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["5"]


def test_plain_function_tools_are_accepted():
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    model = ScriptedModel(replies=[ai("", tool_call("shout", {"text": "hi"})), ai("done")])
    result = create_deep_agent(model, tools=[shout]).invoke(USER)
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["HI"]


def test_user_tool_with_a_builtin_name_replaces_the_builtin():
    @tool
    def read_file(file_path: str) -> str:
        """A custom reader."""
        return "custom"

    model = ScriptedModel(replies=[ai("", tool_call("read_file", {"file_path": "/x"})), ai("ok")])
    result = create_deep_agent(model, tools=[read_file]).invoke(USER)
    schema = [t for t in model.requests[0].tools if t["function"]["name"] == "read_file"]
    assert len(schema) == 1 and schema[0]["function"]["description"] == "A custom reader."
    assert result["messages"][2].content == "custom"


def test_model_none_without_env_raises_a_clear_error(monkeypatch):
    monkeypatch.delenv("FATHOM_MODEL", raising=False)
    with pytest.raises(ModelNotConfiguredError, match="FATHOM_MODEL"):
        create_deep_agent()


def test_model_none_reads_fathom_model(monkeypatch):
    monkeypatch.setenv("FATHOM_MODEL", "openai:gpt-4.1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")
    model = resolve_model(None)
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "gpt-4.1"


def test_provider_string_goes_through_init_chat_model(monkeypatch):
    script = ScriptedModel(replies=[ai("from the string model")])
    with ScriptedOpenAIServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "scripted")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = create_deep_agent("openai:gpt-4.1-mini").invoke(USER)
    assert result["messages"][-1].content == "from the string model"
    assert "write_todos" in script.requests[0].tool_names


def test_unknown_provider_string_names_the_fix():
    with pytest.raises(ValueError, match="provider:model"):
        resolve_model("nosuchprovider:model-x")


def test_instance_is_used_as_is():
    model = ScriptedModel(replies=[ai("x")])
    assert resolve_model(model) is model


def test_permissions_must_be_rules():
    model = ScriptedModel(replies=[ai("x")])
    with pytest.raises(TypeError, match="FilesystemPermission"):
        create_deep_agent(model, permissions=[object()])


def test_interrupt_on_without_checkpointer_warns_at_construction():
    # a warning, not an error: a LangGraph server supplies the checkpointer of a graph
    # compiled without one, and the reference builds such a graph
    model = ScriptedModel(replies=[ai("x")])
    with pytest.warns(UserWarning, match="checkpointer"):
        create_deep_agent(model, interrupt_on={"write_file": True})


def test_interrupt_on_with_only_false_entries_needs_no_checkpointer():
    model = ScriptedModel(replies=[ai("x")])
    create_deep_agent(model, interrupt_on={"write_file": False}).invoke(USER)


def test_bad_interrupt_on_value_is_a_construction_error():
    model = ScriptedModel(replies=[ai("x")])
    with pytest.raises(ValueError, match="allowed_decisions"):
        create_deep_agent(
            model,
            interrupt_on={"write_file": {"allowed_decisions": []}},
            checkpointer=InMemorySaver(),
        )
    with pytest.raises(ValueError, match="unknown decisions"):
        create_deep_agent(
            model,
            interrupt_on={"write_file": {"allowed_decisions": ["maybe"]}},
            checkpointer=InMemorySaver(),
        )


@tool
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed {target}"


def _interrupt_on_error(**kwargs) -> str:
    with pytest.raises(ValueError) as raised:
        create_deep_agent(ScriptedModel(replies=[ai("x")]), checkpointer=InMemorySaver(),
                          **kwargs)
    return str(raised.value)


def test_misspelled_interrupt_on_tool_is_a_construction_error_naming_the_tools():
    # A typo would otherwise leave write_file running without approval, with no sign of it.
    message = _interrupt_on_error(tools=[deploy], interrupt_on={"wrte_file": True})
    assert "'wrte_file' (did you mean 'write_file'?)" in message
    for name in ("deploy", "write_file", "edit_file", "read_file", "ls", "glob", "grep",
                 "write_todos", "task"):
        assert name in message.split("tools are:")[1]
    # False entries too: a typo there is just as silent.
    assert "'dploy'" in _interrupt_on_error(tools=[deploy], interrupt_on={"dploy": False})


def test_interrupt_on_execute_needs_a_backend_that_runs_commands(tmp_path):
    from fathom.backends import LocalShellBackend

    message = _interrupt_on_error(interrupt_on={"execute": True})
    assert "'execute'" in message and "backend that runs commands" in message
    backend = LocalShellBackend(tmp_path, virtual_mode=True)
    create_deep_agent(ScriptedModel(replies=[ai("x")]), backend=backend,
                      interrupt_on={"execute": True}, checkpointer=InMemorySaver())


def test_interrupt_on_accepts_every_real_tool_including_middleware_tools():
    class Ticketing(AgentMiddleware):
        tools = (deploy,)

    agent = create_deep_agent(
        ScriptedModel(replies=[ai("", tool_call("deploy", {"target": "prod"})), ai("x")]),
        middleware=[Ticketing()],
        interrupt_on={"deploy": True, "task": True, "write_todos": False},
        checkpointer=InMemorySaver(),
    )
    agent.invoke(USER, {"configurable": {"thread_id": "t"}})
    state = agent.get_state({"configurable": {"thread_id": "t"}})
    [pending] = state.interrupts
    assert [r["name"] for r in pending.value["action_requests"]] == ["deploy"]


def test_subagent_interrupt_on_is_checked_against_the_subagents_own_tools():
    reader = {"name": "reader", "description": "reads", "system_prompt": "Read.",
              "tools": [], "interrupt_on": {"deploy": True}}
    message = _interrupt_on_error(tools=[deploy], subagents=[reader])
    assert message.startswith("interrupt_on of subagent 'reader' names an unknown tool: "
                              "'deploy'")
    assert "task" not in message.split("tools are:")[1]  # a subagent has no `task`
    # Inherited entries may name tools only the parent has.
    create_deep_agent(
        ScriptedModel(replies=[ai("x")]), tools=[deploy], checkpointer=InMemorySaver(),
        interrupt_on={"deploy": True, "task": True},
        subagents=[{**reader, "interrupt_on": {"read_file": True}}],
    )


def test_name_is_the_graph_name_and_lc_agent_name():
    seen = {}

    @tool
    def whoami() -> str:
        """Report the calling agent's name."""
        from langgraph.config import get_config

        seen["name"] = get_config()["metadata"].get("lc_agent_name")
        return "ok"

    model = ScriptedModel(replies=[ai("", tool_call("whoami", {})), ai("done")])
    agent = create_deep_agent(model, [whoami], name="researcher")
    agent.invoke(USER)
    assert agent.name == "researcher"
    assert seen["name"] == "researcher"


def test_files_are_thread_scoped_with_the_default_backend():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "x"})),
            ai("written"),
            ai("", tool_call("read_file", {"file_path": "/a.md"})),
            ai("read"),
            ai("", tool_call("read_file", {"file_path": "/a.md"})),
            ai("read again"),
        ]
    )
    agent = create_deep_agent(model, checkpointer=InMemorySaver())
    one = {"configurable": {"thread_id": "one"}}
    agent.invoke(USER, one)
    same = agent.invoke(USER, one)
    assert same["messages"][-2].content.endswith("x")
    other = agent.invoke(USER, {"configurable": {"thread_id": "two"}})
    assert other["messages"][-2].status == "error"
    assert "not found" in other["messages"][-2].content


def test_before_agent_state_update_from_custom_middleware_is_applied_per_thread():
    class CounterState(AgentState):
        runs: NotRequired[int]

    class CountRuns(AgentMiddleware):
        state_schema = CounterState

        def before_agent(self, state, runtime):
            return {"runs": state.get("runs", 0) + 1}

    model = ScriptedModel(policy=lambda request: ai("ok"))
    agent = create_deep_agent(model, middleware=[CountRuns()], checkpointer=InMemorySaver())
    a = {"configurable": {"thread_id": "a"}}
    agent.invoke(USER, a)
    assert agent.invoke(USER, a)["runs"] == 2
    assert agent.invoke(USER, {"configurable": {"thread_id": "b"}})["runs"] == 1


def test_the_parent_notifier_adds_no_node_to_the_graph():
    agent = create_deep_agent(ScriptedModel())
    assert not [node for node in agent.get_graph().nodes if "ParentNotifier" in node]
