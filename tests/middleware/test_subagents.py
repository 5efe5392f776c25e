"""Subagents: the task tool, isolation, inheritance, parallelism, streaming, approval, usage."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from fathom import CompiledSubAgent, create_deep_agent
from fathom.backends import create_file_data
from fathom.middleware import PlanningMiddleware
from fathom.testing import Rendezvous, ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

USER = {"messages": [{"role": "user", "content": "帮我约明天下午 3 点和张三开产品评审会，1 小时"}]}
SUPERVISOR_PROMPT = "你是个人助理主管。遇到日程类请求时，交给日历助手，拿到结果后用一句话回复用户。"
CALENDAR_PROMPT = "你是日历助手。收到日程请求后，调用 create_calendar_event 创建事件，然后确认。"
TASK = "帮我约明天下午 3 点和张三开产品评审会，时长 1 小时"
CREATED = "OK: created '产品评审会' at 2025-06-11T15:00:00 for 60 min"
FILE_TOOLS = ["delete", "edit_file", "glob", "grep", "ls", "read_file", "write_file"]
BUILTINS = [*FILE_TOOLS, "write_todos"]
"""The main agent's built-in tools; a subagent built from a spec has only the file tools."""


@tool
def create_calendar_event(title: str, start_iso: str, duration_minutes: int) -> str:
    """Create a calendar event."""
    return f"OK: created '{title}' at {start_iso} for {duration_minutes} min"


def calendar_policy(request: ScriptRequest) -> AIMessage:
    """The supervisor delegates once; the calendar agent calls its tool once, then confirms."""
    if CALENDAR_PROMPT in (request.system_prompt or ""):
        if not request.tool_results:
            args = {"title": "产品评审会", "start_iso": "2025-06-11T15:00:00"}
            return ai("", tool_call("create_calendar_event", {**args, "duration_minutes": 60}))
        return ai("已为你创建「产品评审会」，明天 15:00，时长 1 小时。")
    if not request.tool_results:
        return ai("", tool_call("task", {"description": TASK, "subagent_type": "calendar-agent"}))
    return ai("已经帮你安排好了：" + request.tool_results[-1].text)


def calendar_agent(model, **kwargs):
    return create_deep_agent(
        model,
        system_prompt=SUPERVISOR_PROMPT,
        subagents=[
            {
                "name": "calendar-agent",
                "description": "Schedules meetings in the calendar.",
                "system_prompt": CALENDAR_PROMPT,
                "tools": [create_calendar_event],
            }
        ],
        **kwargs,
    )


# -- the four-call shape of the reference capture -------------------------------------------


def test_four_calls_supervisor_subagent_subagent_supervisor_with_exact_contexts():
    model = ScriptedModel(policy=calendar_policy)
    result = calendar_agent(model).invoke(USER)
    first, second, third, fourth = model.requests
    assert len(model.requests) == 4

    # 1: the supervisor, its own prompt and the user's words; the task tool, not the calendar's
    assert first.system_prompt.startswith(SUPERVISOR_PROMPT)
    assert [type(m) for m in first.messages] == [SystemMessage, HumanMessage]
    assert first.messages[1].content == USER["messages"][0]["content"]
    assert first.tool_names == sorted([*BUILTINS, "task"])

    # 2: the subagent sees only its own prompt and the task description
    assert second.system_prompt.startswith(CALENDAR_PROMPT)
    assert SUPERVISOR_PROMPT not in second.system_prompt
    assert [type(m) for m in second.messages] == [SystemMessage, HumanMessage]
    assert second.messages[1].content == TASK
    assert second.tool_names == sorted([*FILE_TOOLS, "create_calendar_event"])

    # 3: plus its own call and the tool's result
    assert [type(m) for m in third.messages] == [
        SystemMessage, HumanMessage, AIMessage, ToolMessage
    ]  # fmt: skip
    assert third.messages[2].tool_calls[0]["name"] == "create_calendar_event"
    assert third.messages[3].content == CREATED

    # 4: the supervisor again: its prompt, the user, its task call, the subagent's answer only
    assert fourth.system_prompt == first.system_prompt
    assert [type(m) for m in fourth.messages] == [
        SystemMessage, HumanMessage, AIMessage, ToolMessage
    ]  # fmt: skip
    assert fourth.messages[2].tool_calls[0]["args"] == {
        "description": TASK,
        "subagent_type": "calendar-agent",
    }
    assert fourth.messages[3].content == "已为你创建「产品评审会」，明天 15:00，时长 1 小时。"
    assert fourth.tool_names == first.tool_names
    assert result["messages"][-1].content.startswith("已经帮你安排好了")
    # the parent's history holds none of the subagent's own messages
    assert CREATED not in json.dumps([str(m.content) for m in result["messages"]])


def test_task_tool_schema_and_catalogue():
    model = ScriptedModel(replies=[ai("ok")])
    calendar_agent(model).invoke(USER)
    (task,) = [t for t in model.requests[0].tools if t["function"]["name"] == "task"]
    parameters = task["function"]["parameters"]
    assert sorted(parameters["properties"]) == ["description", "subagent_type"]
    assert sorted(parameters["required"]) == ["description", "subagent_type"]
    description = task["function"]["description"]
    assert "- general-purpose: " in description
    assert "- calendar-agent: Schedules meetings in the calendar." in description


# -- errors -----------------------------------------------------------------------------------


def test_an_unknown_subagent_type_is_an_error_listing_the_valid_names():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "x", "subagent_type": "nobody"})),
            ai("sorry"),
        ]
    )
    result = calendar_agent(model).invoke(USER)
    (answer,) = [m for m in result["messages"] if m.type == "tool"]
    assert answer.status == "error"
    assert "'nobody'" in answer.content
    assert "calendar-agent" in answer.content and "general-purpose" in answer.content
    assert result["messages"][-1].content == "sorry"


def test_a_subagent_that_raises_becomes_a_tool_error_and_the_parent_goes_on():
    @tool
    def flaky(query: str) -> str:
        """Always fails."""
        raise RuntimeError("upstream API is down")

    def policy(request):
        if "You are flaky." in (request.system_prompt or ""):
            return ai("", tool_call("flaky", {"query": "q"}))
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "flaky-agent"}))
        return ai("handled")

    spec = {"name": "flaky-agent", "description": "d", "system_prompt": "You are flaky.",
            "tools": [flaky]}  # fmt: skip
    agent = create_deep_agent(ScriptedModel(policy=policy), subagents=[spec])
    result = agent.invoke(USER)
    (answer,) = [m for m in result["messages"] if m.type == "tool"]
    assert answer.status == "error"
    assert "RuntimeError" in answer.content and "upstream API is down" in answer.content
    assert result["messages"][-1].content == "handled"


def test_a_runaway_subagent_stops_at_the_recursion_limit_with_a_clear_message():
    def policy(request):
        if "You loop." in (request.system_prompt or ""):
            return ai("", tool_call("ls", {"path": "/"}))  # never finishes
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "looper"}))
        return ai("gave up")

    spec = {"name": "looper", "description": "d", "system_prompt": "You loop."}
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, subagents=[spec])
    result = agent.invoke(USER, {"recursion_limit": 12})
    (answer,) = [m for m in result["messages"] if m.type == "tool"]
    assert answer.status == "error" and "step limit" in answer.content
    assert result["messages"][-1].content == "gave up"
    subagent_calls = [r for r in model.requests if "You loop." in (r.system_prompt or "")]
    assert 3 <= len(subagent_calls) <= 12


def test_bad_specs_are_refused_at_construction():
    model = ScriptedModel(replies=[])
    with pytest.raises(ValueError, match="description"):
        create_deep_agent(model, subagents=[{"name": "a", "system_prompt": "p"}])
    with pytest.raises(ValueError, match="unique"):
        spec = {"name": "a", "description": "d", "system_prompt": "p"}
        create_deep_agent(model, subagents=[spec, dict(spec)])
    builder = StateGraph(MessagesState)
    builder.add_node("n", lambda state: {"messages": []})
    builder.add_edge(START, "n")
    with pytest.raises(TypeError, match="compile"):
        create_deep_agent(model, subagents=[{"name": "g", "description": "d", "runnable": builder}])

    class NoMessages(BaseModel):
        value: int = 0

    other = StateGraph(NoMessages)
    other.add_node("n", lambda state: {"value": 1})
    other.add_edge(START, "n")
    with pytest.raises(ValueError, match="messages"):
        create_deep_agent(
            model, subagents=[{"name": "g", "description": "d", "runnable": other.compile()}]
        )
    with pytest.warns(UserWarning, match="checkpointer"):
        create_deep_agent(
            model,
            subagents=[{"name": "a", "description": "d", "system_prompt": "p",
                        "interrupt_on": {"write_file": True}}],
        )  # fmt: skip


# -- isolation and shared files ----------------------------------------------------------------


def test_the_subagent_never_sees_earlier_turns_and_files_flow_both_ways():
    def policy(request):
        if "You are a scribe." in (request.system_prompt or ""):
            done = sum(1 for m in request.messages if m.type == "tool")
            if done == 0:
                return ai("", tool_call("read_file", {"file_path": "/brief.md"}))
            if done == 1:
                return ai("", tool_call("write_file", {"file_path": "/out.md", "content": "done"}))
            return ai("wrote /out.md")
        if request.last_human_text == "second turn" and not request.tool_results:
            return ai("", tool_call("task", {"description": "write it", "subagent_type": "scribe"}))
        return ai("ok")

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model,
        subagents=[{"name": "scribe", "description": "d", "system_prompt": "You are a scribe."}],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [{"role": "user", "content": "first turn SECRET"}],
                  "files": {"/brief.md": create_file_data("the brief")}}, config)  # fmt: skip
    result = agent.invoke({"messages": [{"role": "user", "content": "second turn"}]}, config)
    scribe = [r for r in model.requests if "You are a scribe." in (r.system_prompt or "")]
    assert [m.content for m in scribe[0].messages[1:]] == ["write it"]
    assert "SECRET" not in json.dumps([str(m.content) for r in scribe for m in r.messages])
    assert "the brief" in scribe[1].messages[-1].content  # the parent's file, seen inside
    assert result["files"]["/out.md"]["content"] == "done"  # the subagent's file, seen outside
    assert result["files"]["/brief.md"]["content"] == "the brief"


# -- inheritance -------------------------------------------------------------------------------


def test_inheritance_tools_replace_model_overrides_prompt_and_middleware_do_not_carry():
    @tool
    def parent_tool(x: str) -> str:
        """Parent only."""
        return x

    @tool
    def child_tool(x: str) -> str:
        """Child only."""
        return x

    from langchain.agents.middleware import dynamic_prompt

    @dynamic_prompt
    def parent_note(request):
        return "PARENT-ONLY NOTE"

    child_model = ScriptedModel(replies=[ai("child answer")])

    def parent_policy(request):
        if not request.tool_results:
            return ai(
                "",
                tool_call("task", {"description": "a", "subagent_type": "custom"}),
                tool_call("task", {"description": "b", "subagent_type": "inherits"}),
            )
        return ai("done")

    parent_model = ScriptedModel(
        policy=lambda r: ai("inherited answer") if "I inherit." in r.system_prompt
        else parent_policy(r)
    )
    agent = create_deep_agent(
        parent_model,
        [parent_tool],
        system_prompt="PARENT PROMPT",
        middleware=[parent_note],
        subagents=[
            {"name": "custom", "description": "d", "system_prompt": "I am custom.",
             "tools": [child_tool], "model": child_model},
            {"name": "inherits", "description": "d", "system_prompt": "I inherit."},
        ],
    )  # fmt: skip
    agent.invoke(USER)
    (custom,) = child_model.requests
    assert "child_tool" in custom.tool_names and "parent_tool" not in custom.tool_names
    assert "task" not in custom.tool_names
    assert "PARENT PROMPT" not in custom.system_prompt
    (inherits,) = [r for r in parent_model.requests if "I inherit." in r.system_prompt]
    assert "parent_tool" in inherits.tool_names  # no `tools`: the parent's
    assert "PARENT-ONLY NOTE" not in inherits.system_prompt  # middleware is not inherited


def test_permissions_are_inherited_unless_the_spec_replaces_them():
    from fathom import FilesystemPermission

    deny_all_writes = [FilesystemPermission(["write"], ["/**"], "deny")]

    def policy(request):
        prompt = request.system_prompt or ""
        if "Sub" in prompt:
            if not request.tool_results:
                name = "a" if "SubA" in prompt else "b"
                return ai("", tool_call("write_file", {"file_path": f"/{name}.md", "content": "x"}))
            return ai(request.tool_results[-1].text)
        if not request.tool_results:
            return ai(
                "",
                tool_call("task", {"description": "w", "subagent_type": "inherits"}),
                tool_call("task", {"description": "w", "subagent_type": "own-rules"}),
            )
        return ai("done")

    agent = create_deep_agent(
        ScriptedModel(policy=policy),
        permissions=deny_all_writes,
        subagents=[
            {"name": "inherits", "description": "d", "system_prompt": "SubA"},
            {"name": "own-rules", "description": "d", "system_prompt": "SubB",
             "permissions": [FilesystemPermission(["write"], ["/b.md"])]},
        ],
    )  # fmt: skip
    result = agent.invoke(USER)
    answers = {m.content.split()[0]: m.content for m in result["messages"] if m.type == "tool"}
    assert "permission denied" in answers["Error:"]
    assert set(result["files"]) == {"/b.md"}


def test_the_general_purpose_subagent_has_the_parents_tools_and_can_be_replaced_or_removed():
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return q

    def policy(request):
        if request.last_human_text == "delegated work" and "task" not in request.tool_names:
            return ai("gp answer")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "delegated work",
                                             "subagent_type": "general-purpose"}))  # fmt: skip
        return ai("done")

    model = ScriptedModel(policy=policy)
    result = create_deep_agent(model, [lookup], system_prompt="MAIN PROMPT").invoke(USER)
    gp = model.requests[1]
    # its own instructions, not the parent's (see tests/test_reference_parity.py)
    assert "MAIN PROMPT" not in (gp.system_prompt or "")
    assert "MAIN PROMPT" in (model.requests[0].system_prompt or "")
    assert gp.tool_names == [
        t for t in model.requests[0].tool_names if t not in ("task", "write_todos")
    ]
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["gp answer"]

    replacement = ScriptedModel(replies=[ai("replacement answer")])
    model = ScriptedModel(policy=policy)
    spec = {"name": "general-purpose", "description": "My own GP.", "system_prompt": "Own.",
            "model": replacement}  # fmt: skip
    result = create_deep_agent(model, subagents=[spec]).invoke(USER)
    (task,) = [t for t in model.requests[0].tools if t["function"]["name"] == "task"]
    assert task["function"]["description"].count("- general-purpose:") == 1
    assert "- general-purpose: My own GP." in task["function"]["description"]
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["replacement answer"]

    model = ScriptedModel(replies=[ai("x")])
    create_deep_agent(model, general_purpose_subagent=False).invoke(USER)
    assert "task" not in model.requests[0].tool_names


def test_a_subagents_tools_are_its_own_or_the_parents_plus_the_file_tools_only():
    """As in the reference: `tools=[x]` gives x and the file tools, no `write_todos`; no
    `tools` key (and the general-purpose subagent) gives the parent's tools instead of x."""

    @tool
    def x(q: str) -> str:
        """Tool x."""
        return q

    @tool
    def y(q: str) -> str:
        """Tool y."""
        return q

    names = ["general-purpose", "with-x", "no-tools"]

    def policy(request):
        if request.last_human_text in names:
            return ai("ok")
        if not request.tool_results:
            return ai("", *[tool_call("task", {"description": n, "subagent_type": n})
                            for n in names])  # fmt: skip
        return ai("done")

    model = ScriptedModel(policy=policy)
    create_deep_agent(
        model,
        [y],
        subagents=[
            {"name": "with-x", "description": "d", "system_prompt": "p", "tools": [x]},
            {"name": "no-tools", "description": "d", "system_prompt": "p"},
        ],
    ).invoke(USER)
    seen = {r.last_human_text: set(r.tool_names) for r in model.requests[1:4]}
    assert seen == {
        "with-x": {*FILE_TOOLS, "x"},
        "no-tools": {*FILE_TOOLS, "y"},
        "general-purpose": {*FILE_TOOLS, "y"},
    }
    assert set(model.requests[0].tool_names) == {*BUILTINS, "task", "y"}


# -- parallelism -----------------------------------------------------------------------------

LATENCY = 0.01


def fan_out_policy(request):
    if "You are a worker." in (request.system_prompt or ""):
        if not request.tool_results:
            return ai("", tool_call("ls", {"path": "/"}))
        return ai(f"finished {request.last_human_text}")
    if not request.tool_results:
        return ai("", *[
            tool_call("task", {"description": f"job {i}", "subagent_type": "worker"})
            for i in range(4)
        ])  # fmt: skip
    return ai("all done")


def fan_out_agent():
    # Every worker call waits until four are in flight at once: subagents run one after
    # another would break the rendezvous (a failed test), however fast the machine is.
    meet = Rendezvous(4)
    worker_model = ScriptedModel(policy=fan_out_policy, latency=LATENCY, rendezvous=meet)
    worker = {"name": "worker", "description": "d", "system_prompt": "You are a worker.",
              "model": worker_model}  # fmt: skip
    model = ScriptedModel(policy=fan_out_policy, latency=LATENCY)
    return model, worker_model, meet, create_deep_agent(model, subagents=[worker])


def test_parallel_subagents_run_concurrently_under_invoke():
    model, worker_model, meet, agent = fan_out_agent()
    result = agent.invoke(USER)
    assert (len(model.requests), len(worker_model.requests)) == (2, 8)  # 4 workers x 2 calls
    assert (meet.max_in_flight, meet.groups) == (4, 2)  # both rounds of calls together
    answers = sorted(m.content for m in result["messages"] if m.type == "tool")
    assert answers == [f"finished job {i}" for i in range(4)]


async def test_parallel_subagents_run_concurrently_under_ainvoke():
    model, worker_model, meet, agent = fan_out_agent()
    await agent.ainvoke(USER)
    assert (len(model.requests), len(worker_model.requests)) == (2, 8)
    assert (meet.max_in_flight, meet.groups) == (4, 2)


# -- structured output and compiled subagents ---------------------------------------------------


class ResearchFindings(BaseModel):
    summary: str
    confidence: float
    sources: list[str]


def test_a_subagent_response_format_reaches_the_parent_as_json():
    findings = {"summary": "LangGraph is stable.", "confidence": 0.87,
                "sources": ["https://example.org"]}  # fmt: skip

    def policy(request):
        if "You research." in (request.system_prompt or ""):
            return ai("", tool_call("ResearchFindings", findings))
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "researcher"}))
        return ai("done")

    spec = {"name": "researcher", "description": "d", "system_prompt": "You research.",
            "response_format": ResearchFindings}  # fmt: skip
    result = create_deep_agent(ScriptedModel(policy=policy), subagents=[spec]).invoke(USER)
    (answer,) = [m for m in result["messages"] if m.type == "tool" and m.name == "task"]
    assert json.loads(answer.content) == findings


def test_a_compiled_subagent_from_a_hand_written_graph():
    seen = []

    def analyse(state: MessagesState):
        seen.append([m.content for m in state["messages"]])
        return {"messages": [AIMessage(content=f"analysis of: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("analyse", analyse)
    builder.add_edge(START, "analyse")
    builder.add_edge("analyse", END)
    analyzer = CompiledSubAgent(
        name="data-analyzer", description="Analyzes data.", runnable=builder.compile()
    )
    model = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "sales.csv",
                                      "subagent_type": "data-analyzer"})),
            ai("done"),
        ]
    )
    result = create_deep_agent(model, subagents=[analyzer]).invoke(USER)
    assert seen == [["sales.csv"]]
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["analysis of: sales.csv"]


def test_a_compiled_subagent_from_create_agent_with_a_structured_response():
    inner_model = ScriptedModel(
        replies=[ai("", tool_call("ResearchFindings",
                                  {"summary": "s", "confidence": 0.5, "sources": []}))]
    )  # fmt: skip
    inner = create_agent(inner_model, tools=[], response_format=ResearchFindings)
    model = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "q", "subagent_type": "inner"})),
            ai("done"),
        ]
    )
    spec = CompiledSubAgent(name="inner", description="d", runnable=inner)
    result = create_deep_agent(model, subagents=[spec]).invoke(USER)
    (answer,) = [m for m in result["messages"] if m.type == "tool"]
    assert json.loads(answer.content) == {"summary": "s", "confidence": 0.5, "sources": []}


# -- approval inside subagents --------------------------------------------------------------------


def writer_policy(request):
    if "You are a writer." in (request.system_prompt or ""):
        if not request.tool_results:
            return ai("", tool_call("write_file", {"file_path": "/out.md", "content": "draft"}))
        return ai("writer: " + request.tool_results[-1].text)
    if not request.tool_results:
        return ai("", tool_call("task", {"description": "write it", "subagent_type": "writer"}))
    return ai("parent: " + request.tool_results[-1].text)


def writer_agent(**kwargs):
    spec = {"name": "writer", "description": "d", "system_prompt": "You are a writer."}
    spec.update(kwargs.pop("spec", {}))
    return create_deep_agent(
        ScriptedModel(policy=writer_policy),
        checkpointer=InMemorySaver(),
        subagents=[spec],
        **kwargs,
    )


@pytest.mark.parametrize(
    ("decision", "content", "says"),
    [
        ({"type": "approve"}, "draft", "Updated file /out.md"),
        (
            {"type": "edit", "edited_action": {"name": "write_file",
             "args": {"file_path": "/out.md", "content": "edited"}}},
            "edited",
            "Updated file /out.md",
        ),
        ({"type": "reject", "message": "not now"}, None, "not now"),
    ],
)  # fmt: skip
def test_approval_inside_a_subagent_pauses_the_run_and_resumes_inside(decision, content, says):
    agent = writer_agent(spec={"interrupt_on": {"write_file": True}})
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke(USER, config, version="v2")
    (pending,) = paused.interrupts
    (request,) = pending.value["action_requests"]
    assert request["name"] == "write_file" and request["args"]["content"] == "draft"
    done = agent.invoke(Command(resume={"decisions": [decision]}), config, version="v2").value
    assert done["messages"][-1].content.startswith("parent: writer:")
    assert says in done["messages"][-1].content
    assert done.get("files", {}).get("/out.md", {}).get("content") == content


def test_subagents_inherit_the_parents_interrupt_on_and_can_override_it():
    config = {"configurable": {"thread_id": "t"}}
    inherited = writer_agent(interrupt_on={"write_file": True})
    assert inherited.invoke(USER, config, version="v2").interrupts
    overridden = writer_agent(interrupt_on={"write_file": True},
                              spec={"interrupt_on": {"write_file": False}})  # fmt: skip
    result = overridden.invoke(USER, config, version="v2")
    assert not result.interrupts
    assert result.value["files"]["/out.md"]["content"] == "draft"


def test_an_interrupt_raised_in_a_compiled_subagents_tool_surfaces_and_resumes():
    @tool
    def request_approval(action_description: str) -> str:
        """Ask a person to approve an action."""
        answer = interrupt({"type": "approval_request", "action": action_description})
        return "APPROVED" if answer.get("approved") else "REJECTED"

    inner_model = ScriptedModel(
        replies=[
            ai("", tool_call("request_approval", {"action_description": "deploy"})),
            ai("deploy was approved"),
        ]
    )
    inner = create_agent(inner_model, tools=[request_approval], name="approval-agent")
    model = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "deploy", "subagent_type": "approver"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(
        model,
        subagents=[CompiledSubAgent(name="approver", description="d", runnable=inner)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke(USER, config, version="v2")
    assert paused.interrupts[0].value == {"type": "approval_request", "action": "deploy"}
    done = agent.invoke(Command(resume={"approved": True}), config, version="v2").value
    assert [m.content for m in done["messages"] if m.type == "tool"] == ["deploy was approved"]


# -- streaming, context, usage --------------------------------------------------------------------


def test_streaming_puts_subagent_events_under_their_own_namespace_and_names_the_agent():
    agent = fan_out_agent()[-1]
    namespaces = set()
    for chunk in agent.stream(USER, stream_mode="updates", subgraphs=True, version="v2"):
        assert set(chunk) >= {"type", "ns", "data"}
        namespaces.add(chunk["ns"])
    subagent_namespaces = [ns for ns in namespaces if ns]
    assert () in namespaces and len(subagent_namespaces) == 4
    assert all(len(ns) == 1 and ns[0].startswith("tools:") for ns in subagent_namespaces)

    model = ScriptedModel(policy=calendar_policy)
    agent = calendar_agent(model, name="supervisor")
    sources = set()
    for chunk in agent.stream(USER, stream_mode="messages", subgraphs=True, version="v2"):
        _, metadata = chunk["data"]
        sources.add((bool(chunk["ns"]), metadata.get("lc_agent_name")))
    assert sources == {(False, "supervisor"), (True, "calendar-agent")}


@dataclass
class Context:
    user_id: str


def test_runtime_context_thread_id_and_callbacks_reach_subagent_tools():
    seen = {}

    @tool
    def whoami(note: str, runtime: ToolRuntime[Context]) -> str:
        """Report who is asking."""
        seen["user"] = runtime.context.user_id
        seen["thread"] = runtime.config["configurable"]["thread_id"]
        seen["agent"] = runtime.config["metadata"]["lc_agent_name"]
        return "ok"

    def policy(request):
        if "You check." in (request.system_prompt or ""):
            if not request.tool_results:
                return ai("", tool_call("whoami", {"note": "n"}))
            return ai("checked")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "checker"}))
        return ai("done")

    agent = create_deep_agent(
        ScriptedModel(policy=policy),
        name="main",
        context_schema=Context,
        checkpointer=InMemorySaver(),
        subagents=[{"name": "checker", "description": "d", "system_prompt": "You check.",
                    "tools": [whoami]}],
    )  # fmt: skip
    usage = AgentUsage()
    config = {"configurable": {"thread_id": "thread-7"}, "callbacks": [usage]}
    agent.invoke(USER, config, context=Context(user_id="alice"))
    assert seen == {"user": "alice", "thread": "thread-7", "agent": "checker"}
    totals = usage.totals()
    assert {name: t.calls for name, t in totals.items()} == {"main": 2, "checker": 2}
    assert all(t.input_tokens > 0 and t.output_tokens > 0 for t in totals.values())


async def test_usage_is_counted_per_agent_under_parallel_async_runs():
    agent = fan_out_agent()[-1]
    usage = AgentUsage()
    await agent.ainvoke(USER, {"callbacks": [usage]})
    calls = {name: t.calls for name, t in usage.totals().items()}
    assert calls == {"(unnamed agent)": 2, "worker": 8}


def test_usage_counts_streamed_runs_too():
    model = ScriptedModel(policy=calendar_policy)
    agent = calendar_agent(model, name="supervisor")
    usage = AgentUsage()
    for _ in agent.stream(USER, {"callbacks": [usage]}, stream_mode="messages"):
        pass
    totals = usage.totals()
    assert totals["supervisor"].calls == 2 and totals["calendar-agent"].calls == 2
    expected = sum(r.input_tokens for r in model.requests)
    assert sum(t.input_tokens for t in totals.values()) == expected


def test_the_sync_and_async_paths_agree():
    sync_model = ScriptedModel(policy=calendar_policy)
    async_model = ScriptedModel(policy=calendar_policy)
    sync_result = calendar_agent(sync_model).invoke(USER)
    async_result = asyncio.run(calendar_agent(async_model).ainvoke(USER))
    assert sync_result["messages"][-1].content == async_result["messages"][-1].content
    assert [r.canonical_json() for r in sync_model.requests] == [
        r.canonical_json() for r in async_model.requests
    ]


def test_the_general_purpose_subagent_inherits_skills_and_others_bring_their_own():
    skill = "---\nname: {name}\ndescription: {name} skill\n---\n# {name}\nSteps."
    files = {
        f"/skills/{d}/{name}/SKILL.md": create_file_data(skill.format(name=name))
        for d, name in [("main", "main-skill"), ("research", "research-skill")]
    }

    def policy(request):
        if request.last_human_text == "delegated" or request.last_human_text == "research":
            return ai("sub answer")
        if not request.tool_results:
            return ai(
                "",
                tool_call("task", {"description": "delegated", "subagent_type": "general-purpose"}),
                tool_call("task", {"description": "research", "subagent_type": "researcher"}),
                tool_call("task", {"description": "research", "subagent_type": "plain"}),
            )
        return ai("done")

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model,
        skills=["/skills/main/"],
        subagents=[
            {"name": "researcher", "description": "d", "system_prompt": "Researcher.",
             "skills": ["/skills/research/"]},
            {"name": "plain", "description": "d", "system_prompt": "Plain."},
        ],
    )  # fmt: skip
    agent.invoke({**USER, "files": files})
    prompts = {
        "main": model.requests[0].system_prompt,
        **{
            ("gp" if r.messages[-1].content == "delegated" else
             "researcher" if "Researcher." in r.system_prompt else "plain"): r.system_prompt
            for r in model.requests[1:4]
        },
    }  # fmt: skip
    assert "main-skill" in prompts["main"] and "research-skill" not in prompts["main"]
    assert "main-skill" in prompts["gp"]
    assert "research-skill" in prompts["researcher"] and "main-skill" not in prompts["researcher"]
    assert "skill" not in prompts["plain"].lower()


# -- private state ---------------------------------------------------------------------------


def test_private_keys_are_derived_from_the_state_schemas():
    from fathom.middleware.subagents import _PRIVATE_KEYS

    assert {"messages", "todos", "memory_contents", "memory_notes", "skills_metadata",
            "compact_requested", "structured_response", "jump_to",
            "remaining_steps"} <= _PRIVATE_KEYS  # fmt: skip
    assert "files" not in _PRIVATE_KEYS


def test_a_subagent_neither_sees_nor_overwrites_its_parents_plan():
    parent_plan = [{"content": "PARENT-STEP research", "status": "in_progress"}]
    worker_plan = [{"content": "WORKER-STEP dig", "status": "pending"}]

    def worker_policy(request):
        if not request.tool_results:
            return ai("", tool_call("write_todos", {"todos": worker_plan}))
        return ai("worker finished")

    worker_model = ScriptedModel(policy=worker_policy)
    # a subagent plans only with planning middleware of its own
    worker = {"name": "worker", "description": "d", "system_prompt": "You are a worker.",
              "model": worker_model, "middleware": [PlanningMiddleware()]}  # fmt: skip
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_todos", {"todos": parent_plan})),
            ai("", tool_call("task", {"description": "dig", "subagent_type": "worker"})),
            ai("all done"),
        ]
    )
    result = create_deep_agent(model, subagents=[worker]).invoke(USER)

    assert result["todos"] == parent_plan
    first = worker_model.requests[0]
    seen = first.canonical_json()
    assert "PARENT-STEP" not in seen
    assert [m.type for m in first.messages] == ["system", "human"]
    # The parent's own next request shows its plan, not the worker's.
    assert "WORKER-STEP" not in model.requests[2].canonical_json()
