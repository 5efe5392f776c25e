"""`create_deep_agent` the reference's way: `state_schema`, block system prompts, specs."""

from __future__ import annotations

from typing import NotRequired

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.prompt import BASE_PROMPT
from fathom.state import DeepAgentState
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hello"}]}


class TicketState(DeepAgentState):
    ticket: NotRequired[str]
    """A user key: the id of the ticket the run works on."""


@tool
def read_ticket(runtime: ToolRuntime) -> str:
    """Read the current ticket id from the agent state."""
    return f"ticket={runtime.state.get('ticket')}"


@tool
def close_ticket(runtime: ToolRuntime) -> Command:
    """Mark the ticket closed in the agent state."""
    from langchain_core.messages import ToolMessage

    return Command(update={
        "ticket": f"{runtime.state.get('ticket')}:closed",
        "messages": [ToolMessage("closed", tool_call_id=runtime.tool_call_id)],
    })  # fmt: skip


def test_state_schema_keys_are_in_the_graph_state_and_reach_subagents():
    def policy(request: ScriptRequest):
        if "You close tickets." in (request.system_prompt or ""):
            if not request.tool_results:
                return ai("", tool_call("read_ticket"), tool_call("close_ticket"))
            return ai(request.tool_results[0].text)
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "close it", "subagent_type": "closer"}))
        return ai("done: " + request.tool_results[-1].text)

    agent = create_deep_agent(
        ScriptedModel(policy=policy),
        state_schema=TicketState,
        subagents=[{
            "name": "closer", "description": "Closes tickets.",
            "system_prompt": "You close tickets.", "tools": [read_ticket, close_ticket],
        }],
    )
    assert "ticket" in agent.get_input_jsonschema()["properties"]
    result = agent.invoke({**USER, "ticket": "T-7"})
    assert result["messages"][-1].content == "done: ticket=T-7"
    # the subagent's change to the user key comes back to the parent
    assert result["ticket"] == "T-7:closed"


def test_system_message_with_content_blocks_keeps_them_and_appends_fathoms_sections():
    model = ScriptedModel(replies=[ai("ok")])
    blocks = [
        {"type": "text", "text": "You are the release bot."},
        {"type": "text", "text": "No Friday deploys.", "cache_control": {"type": "ephemeral"}},
    ]
    create_deep_agent(model, system_prompt=SystemMessage(content=blocks)).invoke(USER)
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert isinstance(system.content, list)
    assert system.content[:2] == blocks
    tail = system.content[2]
    assert isinstance(tail, dict) and tail["type"] == "text"
    assert tail["text"].startswith("\n\n")
    assert "write_todos" in tail["text"]  # fathom's base prompt and sections follow
    assert len(system.content) == 3


def test_system_message_with_string_content_is_the_first_section():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, system_prompt=SystemMessage(content="Be brief.")).invoke(USER)
    system = model.requests[0].messages[0]
    assert isinstance(system.content, str) and system.content.startswith("Be brief.\n\n")


def _spec_error(spec: dict, exc: type[Exception] = ValueError) -> str:
    with pytest.raises(exc) as caught:
        create_deep_agent(ScriptedModel(replies=[ai("x")]), subagents=[spec])
    return str(caught.value)


def test_unknown_subagent_key_names_it_and_the_allowed_keys():
    text = _spec_error({"name": "r", "description": "d", "sytem_prompt": "typo"})
    assert "'sytem_prompt'" in text and "SubAgent 'r'" in text
    for key in ("system_prompt", "tools", "model", "middleware", "interrupt_on", "skills",
                "permissions", "response_format", "mode"):  # fmt: skip
        assert f"'{key}'" in text


def test_unknown_compiled_subagent_key_names_it_and_the_allowed_keys():
    runnable = create_deep_agent(ScriptedModel(replies=[ai("x")]))
    text = _spec_error({"name": "c", "description": "d", "runnable": runnable, "tools": []})
    assert "CompiledSubAgent 'c'" in text and "['tools']" in text
    assert "['description', 'mode', 'name', 'runnable']" in text


def test_async_subagent_spec_with_an_unknown_key_is_refused_naming_the_allowed_keys():
    text = _spec_error({"name": "remote", "description": "d", "graph_id": "g", "prompt": "x"})
    assert "['prompt']" in text and "'url'" in text and "'headers'" in text


def test_subagent_without_name_or_description_is_refused():
    assert "'description'" in _spec_error({"name": "r", "system_prompt": "p"})
    assert "'name'" in _spec_error({"description": "d", "system_prompt": "p"})


def test_subagent_bad_modes_are_refused():
    # mode="fork" itself works: tests/middleware/test_subagent_fork.py
    assert "'isolated', 'fork'" in _spec_error({"name": "f", "description": "d", "mode": "x"})


def test_subagent_spec_must_be_a_dict():
    assert "must be a dict" in _spec_error(["not", "a", "spec"], TypeError)  # type: ignore[arg-type]


def test_subagent_without_system_prompt_runs_on_the_base_prompt_as_in_the_reference():
    def policy(request: ScriptRequest):
        if request.last_human_text == "sum it":
            return ai("sub answer")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "sum it", "subagent_type": "bare"}))
        return ai("main: " + request.tool_results[-1].text)

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, system_prompt="MAIN ONLY",
                              subagents=[{"name": "bare", "description": "d"}])  # fmt: skip
    assert agent.invoke(USER)["messages"][-1].content == "main: sub answer"
    sub = next(r for r in model.requests if r.last_human_text == "sum it")
    assert "MAIN ONLY" not in (sub.system_prompt or "")
    assert BASE_PROMPT in (sub.system_prompt or "")


def test_subagent_tools_are_its_own_plus_the_builtin_file_tools():
    def policy(request: ScriptRequest):
        if request.last_human_text == "look":
            return ai("seen")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "look", "subagent_type": "t"}))
        return ai("ok")

    model = ScriptedModel(policy=policy)
    create_deep_agent(model, tools=[close_ticket], subagents=[
        {"name": "t", "description": "d", "system_prompt": "p", "tools": [read_ticket]},
    ]).invoke(USER)  # fmt: skip
    sub = next(r for r in model.requests if r.last_human_text == "look")
    assert sub.tool_names == [
        "delete", "edit_file", "glob", "grep", "ls", "read_file", "read_ticket", "write_file",
    ]  # fmt: skip


def test_fathom_graph_is_the_reference_graph_module_alias():
    import fathom
    from fathom import graph

    assert graph.create_deep_agent is fathom.create_deep_agent
    assert graph.DeepAgentState is DeepAgentState


def _delegate_to(subagent: str):
    def policy(request: ScriptRequest):
        if request.last_human_text == "dig":
            return ai("dug")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "dig", "subagent_type": subagent}))
        return ai("ok")

    return policy


def test_general_purpose_subagent_has_its_own_prompt_and_description():
    from fathom.middleware.subagents import GENERAL_PURPOSE_DESCRIPTION, GENERAL_PURPOSE_PROMPT

    model = ScriptedModel(policy=_delegate_to("general-purpose"))
    create_deep_agent(model, system_prompt="MAIN RULES").invoke(USER)
    main = model.requests[0]
    sub = next(r for r in model.requests if r.last_human_text == "dig")
    assert (sub.system_prompt or "").startswith(GENERAL_PURPOSE_PROMPT)
    assert "MAIN RULES" not in (sub.system_prompt or "")
    task = next(t for t in main.tools if t["function"]["name"] == "task")
    assert f"- general-purpose: {GENERAL_PURPOSE_DESCRIPTION}" in task["function"]["description"]


def test_a_general_purpose_spec_replaces_its_prompt_and_description():
    model = ScriptedModel(policy=_delegate_to("general-purpose"))
    create_deep_agent(model, subagents=[{
        "name": "general-purpose", "description": "Digs holes.", "system_prompt": "DIGGER",
    }]).invoke(USER)  # fmt: skip
    sub = next(r for r in model.requests if r.last_human_text == "dig")
    assert (sub.system_prompt or "").startswith("DIGGER\n\n")
    task = next(t for t in model.requests[0].tools if t["function"]["name"] == "task")
    assert "- general-purpose: Digs holes." in task["function"]["description"]


SEEN_CONFIG: list[tuple[object, object]] = []


@tool
def tick() -> str:
    """Count one step, recording the config the subagent's tool runs under."""
    from langgraph.config import get_config

    config = get_config()
    SEEN_CONFIG.append((config.get("recursion_limit"), config["configurable"].get("user")))
    return "tick"


def _looping(request: ScriptRequest):
    if request.last_human_text == "loop":
        return ai("", tool_call("tick"))  # never finishes: only a step limit stops it
    if not request.tool_results:
        return ai("", tool_call("task", {"description": "loop", "subagent_type": "looper"}))
    return ai("main: " + request.tool_results[-1].text)


def _run_looper(subagent: dict, limit: int) -> str:
    SEEN_CONFIG.clear()
    agent = create_deep_agent(ScriptedModel(policy=_looping), subagents=[subagent],
                              general_purpose_subagent=False)  # fmt: skip
    config = {"recursion_limit": limit, "configurable": {"user": "u1"}}
    return agent.invoke(USER, config)["messages"][-1].content


def test_the_runs_recursion_limit_and_config_reach_a_subagent():
    spec = {"name": "looper", "description": "d", "system_prompt": "p", "tools": [tick]}
    answer = _run_looper(spec, limit=12)
    assert "reached the step limit" in answer
    assert SEEN_CONFIG and set(SEEN_CONFIG) == {(12, "u1")}
    assert len(SEEN_CONFIG) < 12


def test_a_subagents_own_recursion_limit_is_kept():
    runnable = create_deep_agent(ScriptedModel(policy=_looping), tools=[tick])
    spec = {"name": "looper", "description": "d",
            "runnable": runnable.with_config(recursion_limit=8)}  # fmt: skip
    answer = _run_looper(spec, limit=100)
    assert "reached the step limit" in answer
    assert set(SEEN_CONFIG) == {(8, "u1")}
    assert len(SEEN_CONFIG) < 8
