"""Forked subagents (`mode="fork"`): the parent's conversation, prompt and tools, byte for byte.

A provider's prompt cache serves the part of a request that repeats an earlier one. A fork's
first request must therefore start with the parent's last request (system prompt, tool
schemas, then the conversation) exactly; that is measured here with the prefix tool of
`benchmarks/prefix_stability.py` on `ScriptedModel`'s canonical requests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from tests.benchmarks.conftest import load_benchmark

from fathom import create_deep_agent
from fathom.backends import create_file_data
from fathom.middleware import SubAgentMiddleware, SummarizationMiddleware
from fathom.middleware.subagents import FORK_NOTE, FORK_REFUSAL, FORK_TASK_PREAMBLE
from fathom.prompt import BASE_PROMPT
from fathom.testing import RecordedRequest, ScriptedModel, ai, tool_call

prefix_tool = load_benchmark("prefix_stability")

USER = {"messages": [{"role": "user", "content": "Check order 42, then dig into its delay."}]}
TASK = "Find out why order 42 is late."
FORK = {"name": "forker", "description": "Digs into something already discussed.",
        "mode": "fork"}  # fmt: skip
SKILL = "---\nname: triage\ndescription: How to triage a late order.\n---\n# Triage\nSteps."
FILES = {
    "/AGENTS.md": create_file_data("Always quote the order id."),
    "/skills/triage/SKILL.md": create_file_data(SKILL),
}


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id}: shipped late"


def is_fork_request(request: Any) -> bool:
    return request.last_human_text.startswith(FORK_TASK_PREAMBLE)


def policy(request: Any) -> Any:
    """Main: look the order up, then fork once, then answer. Fork: answer at once."""
    if is_fork_request(request):
        return ai("the carrier lost a day")
    if not request.tool_results:
        return ai("", tool_call("lookup_order", {"order_id": "42"}))
    if request.tool_results[-1].name == "lookup_order":
        return ai("", tool_call("task", {"description": TASK, "subagent_type": "forker"}))
    return ai("done: " + request.tool_results[-1].text)


def fork_agent(model: ScriptedModel, fork: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    return create_deep_agent(
        model,
        [lookup_order],
        system_prompt="You are the order desk.",
        memory=["/AGENTS.md"],
        skills=["/skills/"],
        subagents=[fork or FORK],
        **kwargs,
    )


def parent_and_fork(model: ScriptedModel) -> tuple[RecordedRequest, RecordedRequest]:
    """The parent's request that delegated, and the fork's first request."""
    (first_fork,) = [i for i, r in enumerate(model.requests) if is_fork_request(r)][:1]
    (delegating,) = [
        r for r in model.requests[:first_fork]
        if any(c["name"] == "task" for c in r.response.tool_calls)
    ]  # fmt: skip
    return delegating, model.requests[first_fork]


def assert_extends(parent: RecordedRequest, child: RecordedRequest) -> None:
    earlier, later = parent.canonical_json(), child.canonical_json()
    prefix, fraction = prefix_tool.prefix_kept(earlier, later)
    assert fraction == 1.0, (earlier[prefix : prefix + 120], later[prefix : prefix + 120])
    assert later.startswith(earlier[: -len(prefix_tool.CLOSING)])


def test_a_forks_first_request_starts_with_the_parents_whole_last_request():
    model = ScriptedModel(policy=policy)
    result = fork_agent(model).invoke({**USER, "files": FILES})

    parent, child = parent_and_fork(model)
    assert_extends(parent, child)
    assert child.system_prompt == parent.system_prompt
    assert "Always quote the order id." in (child.system_prompt or "")  # memory
    assert "triage" in (child.system_prompt or "")  # skills
    assert json.dumps(child.tools, sort_keys=True) == json.dumps(parent.tools, sort_keys=True)
    # the conversation without the pending task call, then the task as a new human message
    assert [m.type for m in child.messages] == [m.type for m in parent.messages] + ["human"]
    assert child.messages[-1].content == FORK_TASK_PREAMBLE + TASK
    task_answers = [m.content for m in result["messages"] if m.type == "tool" and m.name == "task"]
    assert task_answers == ["the carrier lost a day"]


async def test_a_fork_extends_the_parents_request_under_ainvoke_too():
    model = ScriptedModel(policy=policy)
    await fork_agent(model).ainvoke({**USER, "files": FILES})
    assert_extends(*parent_and_fork(model))


def test_a_fork_after_summarization_gets_the_summary_not_the_dropped_messages():
    def summarized_policy(request: Any) -> Any:
        if is_fork_request(request):
            return ai("fork answer")
        if request.tool_results and request.tool_results[-1].name == "task":
            return ai("done")
        if any("SUMMARY-TEXT" in str(m.content) for m in request.messages):
            return ai("", tool_call("task", {"description": TASK, "subagent_type": "forker"}))
        return ai("", tool_call("lookup_order", {"order_id": f"DROPPED-{len(request.messages)}"}))

    summarizer = ScriptedModel(policy=lambda request: "SUMMARY-TEXT")
    compaction = SummarizationMiddleware(
        model=summarizer, trigger=("messages", 6), keep=("messages", 2)
    )
    model = ScriptedModel(policy=summarized_policy)
    agent = create_deep_agent(model, [lookup_order], subagents=[FORK], middleware=[compaction])
    agent.invoke(USER)

    assert summarizer.calls == 1
    parent, child = parent_and_fork(model)
    seen = child.canonical_json()
    assert "SUMMARY-TEXT" in seen
    assert "DROPPED-2" not in seen and "DROPPED-4" not in seen  # summarized away
    assert "DROPPED-2" in model.requests[1].canonical_json()  # (they did exist)
    assert_extends(parent, child)


def test_a_fork_cannot_delegate_again():
    def recursive_policy(request: Any) -> Any:
        if is_fork_request(request):
            if not request.turn_results:
                again = {"description": "again", "subagent_type": "forker"}
                return ai("", tool_call("task", again))
            return ai("fork: " + request.turn_results[-1].text)
        if not request.tool_results:
            return ai("", tool_call("task", {"description": TASK, "subagent_type": "forker"}))
        return ai("done")

    model = ScriptedModel(policy=recursive_policy)
    result = create_deep_agent(model, subagents=[FORK]).invoke(USER)
    (answer,) = [m for m in result["messages"] if m.type == "tool"]
    assert answer.content == "fork: " + FORK_REFUSAL
    assert len([r for r in model.requests if is_fork_request(r)]) == 2  # one fork, two calls


def test_a_forks_own_prompt_follows_the_inherited_prompt():
    model = ScriptedModel(policy=policy)
    fork_agent(model, {**FORK, "system_prompt": "FORK ADDENDUM"}).invoke({**USER, "files": FILES})
    parent, child = parent_and_fork(model)
    parent_prompt, child_prompt = parent.system_prompt or "", child.system_prompt or ""
    assert child_prompt.startswith("You are the order desk.")
    assert "FORK ADDENDUM" in child_prompt and "FORK ADDENDUM" not in parent_prompt
    # everything before the addendum is the parent's (the base prompt included)
    head = child_prompt[: child_prompt.index("FORK ADDENDUM")].rstrip()
    assert parent_prompt.startswith(head) and BASE_PROMPT in head
    assert child.tool_names == parent.tool_names


def test_a_fork_takes_over_the_parents_plan_and_gives_back_only_files():
    plan = [{"content": "PARENT-STEP check order", "status": "in_progress"}]
    fork_plan = [{"content": "FORK-STEP", "status": "pending"}]

    def planning_policy(request: Any) -> Any:
        if is_fork_request(request):
            if not request.turn_results:
                return ai("", tool_call("write_todos", {"todos": fork_plan}),
                          tool_call("write_file", {"file_path": "/notes.md", "content": "late"}))
            return ai("noted")
        if not request.tool_results:
            return ai("", tool_call("write_todos", {"todos": plan}))
        if request.tool_results[-1].name == "write_todos":
            return ai("", tool_call("task", {"description": TASK, "subagent_type": "forker"}))
        return ai("done")

    model = ScriptedModel(policy=planning_policy)
    result = create_deep_agent(model, subagents=[FORK]).invoke(USER)
    (child,) = [r for r in model.requests if is_fork_request(r)][:1]
    assert "PARENT-STEP" in child.canonical_json()  # it continues the conversation
    assert result["todos"] == plan  # its own plan stays its own
    assert "/notes.md" in result["files"]  # its files come back


def test_a_compiled_fork_gets_the_conversation_and_keeps_its_own_prompt():
    sub_model = ScriptedModel(policy=lambda request: ai("compiled answer"))
    runnable = create_agent(sub_model, system_prompt="COMPILED PROMPT")
    fork = {"name": "forker", "description": "d", "runnable": runnable, "mode": "fork"}
    model = ScriptedModel(policy=policy)
    result = create_deep_agent(model, [lookup_order], subagents=[fork]).invoke(USER)

    (request,) = sub_model.requests
    assert request.system_prompt == "COMPILED PROMPT"
    assert [m.type for m in request.messages] == ["system", "human", "ai", "tool", "human"]
    assert request.messages[1].content == USER["messages"][0]["content"]
    assert request.messages[-1].content == FORK_TASK_PREAMBLE + TASK
    assert "compiled answer" in result["messages"][-1].content


def test_a_fork_spec_given_to_the_middleware_gets_the_conversation_and_a_refusing_task_tool():
    sub_model = ScriptedModel(policy=lambda request: ai("middleware fork answer"))
    fork = {**FORK, "system_prompt": "Own prompt.", "model": sub_model, "tools": []}
    model = ScriptedModel(policy=policy)
    agent = create_agent(
        model, tools=[lookup_order], middleware=[SubAgentMiddleware(subagents=[fork])]
    )
    result = agent.invoke(USER)
    (request,) = sub_model.requests
    assert isinstance(request.messages[-1], HumanMessage)
    assert request.messages[-1].content == FORK_TASK_PREAMBLE + TASK
    assert "lookup_order" in json.dumps([m.model_dump() for m in request.messages])
    assert request.tool_names == ["task"]
    assert "middleware fork answer" in result["messages"][-1].content


def test_the_task_tool_marks_forked_subagents():
    model = ScriptedModel(replies=[ai("hi")])
    plain = {"name": "plain", "description": "Plain one.", "system_prompt": "p"}
    create_deep_agent(model, subagents=[FORK, plain]).invoke(USER)
    (task,) = [t for t in model.requests[0].tools if t["function"]["name"] == "task"]
    description = task["function"]["description"]
    assert f"- forker: {FORK['description']}{FORK_NOTE}" in description
    assert "- plain: Plain one.\n" in description or description.endswith("- plain: Plain one.")


@pytest.mark.parametrize(
    "spec",
    [
        {**FORK, "mode": "forked"},
        {"name": "g", "description": "d", "runnable": create_agent(ScriptedModel()), "mode": "x"},
    ],
)
def test_an_unknown_mode_is_refused_naming_the_allowed_modes(spec: dict[str, Any]):
    with pytest.raises(ValueError, match=r"mode=.*allowed modes are 'isolated', 'fork'"):
        create_deep_agent(ScriptedModel(), subagents=[spec])
    with pytest.raises(ValueError, match="allowed modes are 'isolated', 'fork'"):
        SubAgentMiddleware(subagents=[{**spec, "model": ScriptedModel(), "tools": []}])


def test_a_fork_with_its_own_skills_is_refused():
    with pytest.raises(ValueError, match=r"mode='fork' and its own 'skills'"):
        create_deep_agent(ScriptedModel(), subagents=[{**FORK, "skills": ["/skills/x/"]}])
