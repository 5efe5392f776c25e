"""The subagents pattern: a supervisor that calls agents as tools (`fathom.patterns.supervisor`).

Every model here is a `ScriptedModel` whose policy decides from what it is sent (its
tools, the messages since the last user message), so call counts follow from the
architecture, not from a script.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from fathom.patterns.supervisor import (
    Subagent,
    agent_as_tool,
    context_request,
    create_supervisor,
    task_tool,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

from .conftest import load_example

ROOT = Path(__file__).resolve().parents[2]
COFFEE_PROMPT = "You are the coffee agent. Order with buy_coffee, then confirm the order."


def coffee_policy(request: ScriptRequest) -> AIMessage | str:
    """Coffee agent: buy, then confirm. Supervisor: delegate, then reply from the result."""
    results = request.turn_results
    if request.has_tool("buy_coffee"):
        if not results:
            return ai("", tool_call("buy_coffee"))
        return f"Confirmed: {results[-1].text}"
    if results:
        last = results[-1]
        if last.text.startswith("Error: there is no agent"):
            return f"I cannot do that. {last.text}"
        return f"Your coffee is on its way ({last.text})."
    text = request.last_human_text
    if request.has_tool("coffee_agent"):
        return ai("", tool_call("coffee_agent", {"request": text}))
    wanted = "coffee" if "coffee" in text.lower() else text.split()[-1].lower()
    return ai("", tool_call("task", {"agent_name": wanted, "description": text}))


def coffee_setup(
    *, mode: str = "tools", checkpointer: Any = None, subagent_name: str | None = "barista"
) -> tuple[Any, ScriptedModel, list[str]]:
    orders: list[str] = []

    @tool
    def buy_coffee() -> str:
        """Order one coffee."""
        orders.append(f"C-{len(orders) + 1:03d}")
        return f"Coffee ordered: order #{orders[-1]}"

    model = ScriptedModel(policy=coffee_policy)
    coffee = create_agent(
        model, tools=[buy_coffee], system_prompt=COFFEE_PROMPT, name=subagent_name
    )
    name = "coffee_agent" if mode == "tools" else "coffee"
    supervisor = create_supervisor(
        model,
        [Subagent(name, "Buys coffee for the user. Input: what to order.", coffee)],
        mode=mode,  # type: ignore[arg-type]
        checkpointer=checkpointer,
    )
    return supervisor, model, orders


def role(request: Any) -> str:
    return "coffee" if "buy_coffee" in request.tool_names else "supervisor"


def ask(agent: Any, text: str, thread: str = "t1", **config: Any) -> dict[str, Any]:
    return agent.invoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}, **config}
    )


# --------------------------------------------------------------------------- call counts


def test_buy_coffee_one_shot_costs_four_calls_supervisor_first_and_last() -> None:
    supervisor, model, orders = coffee_setup()
    usage = AgentUsage()

    result = ask(supervisor, "Buy coffee", callbacks=[usage])

    assert [role(r) for r in model.requests] == ["supervisor", "coffee", "coffee", "supervisor"]
    assert {n: t.calls for n, t in usage.totals().items()} == {"supervisor": 2, "barista": 2}
    assert orders == ["C-001"]
    assert result["messages"][-1].text == (
        "Your coffee is on its way (Confirmed: Coffee ordered: order #C-001)."
    )


async def test_buy_coffee_one_shot_on_the_async_path() -> None:
    supervisor, model, orders = coffee_setup()

    result = await supervisor.ainvoke({"messages": [HumanMessage("Buy coffee")]})

    assert [role(r) for r in model.requests] == ["supervisor", "coffee", "coffee", "supervisor"]
    assert orders == ["C-001"]
    assert result["messages"][2].text == "Confirmed: Coffee ordered: order #C-001"


def test_repeated_request_reruns_the_whole_chain_eight_calls_and_a_fresh_subagent(
    tmp_path: Path,
) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "threads.db")) as saver:
        supervisor, model, orders = coffee_setup(checkpointer=saver)
        ask(supervisor, "Buy coffee", thread="t2")
        assert model.calls == 4
        ask(supervisor, "Buy coffee again", thread="t2")

    assert model.calls == 8
    assert orders == ["C-001", "C-002"]
    coffee_firsts = [r for r in model.requests if role(r) == "coffee" and len(r.messages) == 2]
    assert len(coffee_firsts) == 2
    # Turn 2's subagent starts from scratch: its system prompt and the new request only.
    second = coffee_firsts[1].messages
    assert isinstance(second[0], SystemMessage)
    assert second[0].text == COFFEE_PROMPT
    assert isinstance(second[1], HumanMessage)
    assert second[1].text == "Buy coffee again"
    # The supervisor remembers turn 1 (it is checkpointed); the subagent does not.
    last_supervisor = model.requests[-1]
    assert [m.type for m in last_supervisor.messages] == [
        "system", "human", "ai", "tool", "ai", "human", "ai", "tool"
    ]


# --------------------------------------------------------------------------- mechanics


def test_supervisor_sees_only_wrapper_tools_and_only_the_subagents_answer() -> None:
    supervisor, model, _ = coffee_setup()

    result = ask(supervisor, "Buy coffee")

    supervisor_requests = [r for r in model.requests if role(r) == "supervisor"]
    assert all(r.tool_names == ["coffee_agent"] for r in supervisor_requests)
    first_reply = supervisor_requests[0].response
    assert first_reply.text == "" and [tc["name"] for tc in first_reply.tool_calls] == [
        "coffee_agent"
    ]
    # Final call's input: system, user, the dispatch, and the subagent's answer, nothing else.
    final_input = supervisor_requests[1].messages
    assert [m.type for m in final_input] == ["system", "human", "ai", "tool"]
    assert final_input[-1].text == "Confirmed: Coffee ordered: order #C-001"
    assert final_input[-1].tool_call_id == first_reply.tool_calls[0]["id"]
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    # The subagent's first call has exactly its system prompt and the forwarded request.
    coffee_first = next(r for r in model.requests if role(r) == "coffee")
    assert [m.type for m in coffee_first.messages] == ["system", "human"]
    assert coffee_first.messages[1].text == "Buy coffee"


def test_answer_is_the_last_non_empty_ai_text_of_the_subagent() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.has_tool("log_note"):
            if not results:
                return ai("The answer is 42.", tool_call("log_note", {"note": "42"}))
            return ai("")  # a trailing empty message must not become the answer
        if not results:
            return ai("", tool_call("ask_oracle", {"request": request.last_human_text}))
        return f"Oracle said: {results[-1].text}"

    @tool
    def log_note(note: str) -> str:
        """Write a note."""
        return "noted"

    model = ScriptedModel(policy=policy)
    oracle = create_agent(model, tools=[log_note], name="oracle")
    supervisor = create_supervisor(model, [Subagent("ask_oracle", "Answers anything.", oracle)])

    result = ask(supervisor, "What is the answer?")

    assert result["messages"][2].text == "The answer is 42."
    assert result["messages"][-1].text == "Oracle said: The answer is 42."


def test_subagent_without_any_text_gives_a_clear_placeholder() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        if request.system_prompt == "mute":
            return ai("")
        results = request.turn_results
        if not results:
            return ai("", tool_call("mute_agent", {"request": "hello"}))
        return results[-1].text

    model = ScriptedModel(policy=policy)
    mute = create_agent(model, system_prompt="mute")
    supervisor = create_supervisor(model, [Subagent("mute_agent", "Says nothing.", mute)])

    result = ask(supervisor, "hi")

    assert result["messages"][-1].text == "(The subagent finished without writing an answer.)"


def test_with_context_prefixes_the_users_first_message() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.system_prompt == "calendar":
            return f"got: {request.last_human_text}"
        if not results:
            return ai("", tool_call("schedule_event", {"request": "Same time tomorrow"}))
        return results[-1].text

    model = ScriptedModel(policy=policy)
    calendar = create_agent(model, system_prompt="calendar")
    tool_with = agent_as_tool(calendar, "schedule_event", "Schedules.", with_context=True)
    supervisor = create_agent(model, tools=[tool_with])

    result = ask(supervisor, "Book the dentist at 3pm today")

    expected = (
        "You are assisting with this user request:\n\nBook the dentist at 3pm today\n\n"
        "Your specific subtask:\n\nSame time tomorrow"
    )
    assert result["messages"][-1].text == f"got: {expected}"
    assert context_request({"messages": []}, "x") == "x"


def test_without_context_the_subagent_sees_only_the_request() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        if request.system_prompt == "calendar":
            return f"got: {request.last_human_text}"
        results = request.turn_results
        if not results:
            return ai("", tool_call("schedule_event", {"request": "Same time tomorrow"}))
        return results[-1].text

    model = ScriptedModel(policy=policy)
    calendar = create_agent(model, system_prompt="calendar")
    supervisor = create_agent(model, tools=[agent_as_tool(calendar, "schedule_event", "S.")])

    assert ask(supervisor, "Book the dentist")["messages"][-1].text == "got: Same time tomorrow"


def test_subagent_calls_are_counted_under_its_own_name_or_the_tool_name() -> None:
    supervisor, _, _ = coffee_setup(subagent_name=None)
    usage = AgentUsage()

    ask(supervisor, "Buy coffee", callbacks=[usage])

    assert {n: t.calls for n, t in usage.totals().items()} == {
        "supervisor": 2, "coffee_agent": 2
    }


def test_a_failing_subagent_becomes_an_error_result_for_the_supervisor() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.has_tool("explode"):
            return ai("", tool_call("explode"))
        if not results:
            return ai("", tool_call("fragile", {"request": "go"}))
        return f"Report: {results[-1].text}"

    @tool
    def explode() -> str:
        """Fail."""
        raise OSError("disk on fire")

    model = ScriptedModel(policy=policy)
    fragile = create_agent(model, tools=[explode], name="fragile_agent")
    supervisor = create_supervisor(model, [Subagent("fragile", "Breaks.", fragile)])

    result = ask(supervisor, "go")

    error = result["messages"][2]
    assert isinstance(error, ToolMessage) and error.status == "error"
    assert "agent 'fragile_agent' failed: OSError: disk on fire" in error.text
    assert result["messages"][-1].text.startswith("Report: Error: agent 'fragile_agent' failed")


# --------------------------------------------------------------------------- task mode


def test_task_mode_schema_lists_agents_as_an_enum_and_dispatches_by_name() -> None:
    supervisor, model, orders = coffee_setup(mode="task")
    usage = AgentUsage()

    result = ask(supervisor, "Buy coffee", callbacks=[usage])

    task_schema = model.requests[0].tools[0]["function"]
    assert task_schema["name"] == "task"
    properties = task_schema["parameters"]["properties"]
    assert properties["agent_name"]["enum"] == ["coffee"]
    assert set(properties) == {"agent_name", "description"}
    assert "- coffee: Buys coffee for the user." in task_schema["description"]
    assert orders == ["C-001"]
    assert model.calls == 4
    assert {n: t.calls for n, t in usage.totals().items()} == {"supervisor": 2, "barista": 2}
    assert result["messages"][2].text == "Confirmed: Coffee ordered: order #C-001"


def test_task_mode_answers_an_unknown_agent_with_the_list() -> None:
    supervisor, model, orders = coffee_setup(mode="task")

    result = ask(supervisor, "Buy juice")

    answer = result["messages"][2]
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.text == "Error: there is no agent called 'juice'. Use one of: coffee."
    assert orders == [] and model.calls == 2  # the subagent never ran


def test_task_tool_with_several_agents_lists_each_once() -> None:
    agent = create_agent(ScriptedModel(policy=lambda r: "x"))
    task = task_tool(
        [Subagent("research", "Finds facts.", agent), Subagent("writer", "Writes prose.", agent)]
    )
    schema = task.tool_call_schema.model_json_schema()
    assert schema["properties"]["agent_name"]["enum"] == ["research", "writer"]
    assert task.description.count("- research: Finds facts.") == 1
    assert "- writer: Writes prose." in task.description


# --------------------------------------------------------------------------- concurrency


def test_parallel_tool_calls_run_subagents_at_the_same_time() -> None:
    barrier = threading.Barrier(2, timeout=60)  # bounds a hang only

    @tool
    def meet() -> str:
        """Wait for the other agent."""
        barrier.wait()  # raises BrokenBarrierError unless both run at once
        return "met"

    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.has_tool("meet"):
            return ai("", tool_call("meet")) if not results else f"ok: {results[-1].text}"
        if not results:
            return ai("", tool_call("left", {"request": "a"}), tool_call("right", {"request": "b"}))
        return " | ".join(r.text for r in results)

    model = ScriptedModel(policy=policy)
    left = create_agent(model, tools=[meet], name="left_agent")
    right = create_agent(model, tools=[meet], name="right_agent")
    supervisor = create_supervisor(
        model, [Subagent("left", "Left.", left), Subagent("right", "Right.", right)]
    )

    result = ask(supervisor, "both")

    assert result["messages"][-1].text == "ok: met | ok: met"


async def test_parallel_tool_calls_run_concurrently_on_the_async_path_too() -> None:
    barrier = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Wait for the other agent."""
        await asyncio.wait_for(barrier.wait(), timeout=60)  # bounds a hang only
        return "met"

    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.has_tool("meet"):
            return ai("", tool_call("meet")) if not results else f"ok: {results[-1].text}"
        if not results:
            return ai(
                "",
                tool_call("task", {"agent_name": "left", "description": "a"}),
                tool_call("task", {"agent_name": "right", "description": "b"}),
            )
        return " | ".join(r.text for r in results)

    model = ScriptedModel(policy=policy)
    agents = [
        Subagent("left", "Left.", create_agent(model, tools=[meet], name="left")),
        Subagent("right", "Right.", create_agent(model, tools=[meet], name="right")),
    ]
    supervisor = create_supervisor(model, agents, mode="task")
    usage = AgentUsage()

    result = await supervisor.ainvoke(
        {"messages": [HumanMessage("both")]}, {"callbacks": [usage]}
    )

    assert result["messages"][-1].text == "ok: met | ok: met"
    assert {n: t.calls for n, t in usage.totals().items()} == {
        "supervisor": 2, "left": 2, "right": 2
    }


# --------------------------------------------------------------------------- interrupts


def mail_setup(checkpointer: Any) -> tuple[Any, list[dict[str, Any]]]:
    outbox: list[dict[str, Any]] = []

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        outbox.append({"to": to, "subject": subject})
        return f"Email sent to {to} - Subject: {subject}"

    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if request.has_tool("send_email"):
            if not results:
                return ai("", tool_call("send_email", {"to": "ops@example.com",
                                                       "subject": request.last_human_text}))
            return f"Email agent: {results[-1].text}"
        if not results:
            return ai("", tool_call("manage_email", {"request": "Deploy done"}))
        return f"Summary: {results[-1].text}"

    model = ScriptedModel(policy=policy)
    email = create_agent(
        model,
        tools=[send_email],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
        name="email_agent",
    )
    supervisor = create_supervisor(
        model, [Subagent("manage_email", "Sends emails.", email)], checkpointer=checkpointer
    )
    return supervisor, outbox


def test_subagent_interrupt_pauses_the_supervisor_and_resumes_from_sqlite(
    tmp_path: Path,
) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "hitl.db")) as saver:
        supervisor, outbox = mail_setup(saver)
        config = {"configurable": {"thread_id": "mail"}}
        paused = supervisor.invoke({"messages": [HumanMessage("send it")]}, config)

        assert outbox == []  # nothing is sent before a decision
        (interrupt,) = paused["__interrupt__"]
        action = interrupt.value["action_requests"][0]
        assert action["name"] == "send_email"
        assert action["args"] == {"to": "ops@example.com", "subject": "Deploy done"}

        edited = {"name": "send_email", "args": {**action["args"], "subject": "Edited"}}
        done = supervisor.invoke(
            Command(resume={interrupt.id: {"decisions": [{"type": "edit",
                                                           "edited_action": edited}]}}),
            config,
        )

    assert outbox == [{"to": "ops@example.com", "subject": "Edited"}]
    assert "__interrupt__" not in done
    assert done["messages"][-1].text.startswith("Summary: Email agent:")
    assert done["messages"][-1].text.endswith("Email sent to ops@example.com - Subject: Edited")


async def test_subagent_interrupt_round_trip_on_the_async_path() -> None:
    supervisor, outbox = mail_setup(InMemorySaver())
    config = {"configurable": {"thread_id": "mail"}}
    paused = await supervisor.ainvoke({"messages": [HumanMessage("send it")]}, config)
    (interrupt,) = paused["__interrupt__"]
    assert outbox == []

    done = await supervisor.ainvoke(
        Command(resume={interrupt.id: {"decisions": [{"type": "approve"}]}}), config
    )

    assert outbox == [{"to": "ops@example.com", "subject": "Deploy done"}]
    assert done["messages"][-1].text.endswith("Subject: Deploy done")


async def test_interrupt_without_checkpointer_raises_on_the_async_path_too() -> None:
    supervisor, outbox = mail_setup(None)

    with pytest.raises(RuntimeError, match="supervisor has no checkpointer"):
        await supervisor.ainvoke({"messages": [HumanMessage("send it")]})
    assert outbox == []


def test_rejected_action_is_not_executed() -> None:
    supervisor, outbox = mail_setup(InMemorySaver())
    config = {"configurable": {"thread_id": "mail"}}
    paused = supervisor.invoke({"messages": [HumanMessage("send it")]}, config)
    (interrupt,) = paused["__interrupt__"]

    done = supervisor.invoke(
        Command(resume={interrupt.id: {"decisions": [{"type": "reject",
                                                       "message": "Not today."}]}}),
        config,
    )

    assert outbox == []
    assert done["messages"][-1].text.startswith("Summary: Email agent:")
    assert "Not today." in done["messages"][-1].text


def test_interrupt_without_any_checkpointer_raises_a_clear_error() -> None:
    supervisor, outbox = mail_setup(None)

    with pytest.raises(RuntimeError, match="supervisor has no checkpointer") as caught:
        supervisor.invoke({"messages": [HumanMessage("send it")]})

    assert "email_agent" in str(caught.value)
    assert outbox == []


# --------------------------------------------------------------------------- bad input


def _agent() -> Any:
    return create_agent(ScriptedModel(policy=lambda r: "x"))


class _NoMessages(TypedDict):
    count: int


def _graph_without_messages() -> Any:
    graph = StateGraph(_NoMessages)
    graph.add_node("step", lambda state: {"count": state["count"] + 1})
    graph.add_edge(START, "step")
    return graph.compile()


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: Subagent("do stuff", "d", _agent()), ValueError, "not a valid tool name"),
        (lambda: Subagent("ok", "  ", _agent()), ValueError, "needs a description"),
        (lambda: Subagent("ok", "d", object()), TypeError, "must be a compiled graph"),
        (lambda: Subagent("ok", "d", _graph_without_messages()), ValueError, "no 'messages'"),
        (lambda: create_supervisor(ScriptedModel(), []), ValueError, "at least one subagent"),
        (
            lambda: create_supervisor(
                ScriptedModel(), [Subagent("a", "d", _agent()), Subagent("a", "e", _agent())]
            ),
            ValueError,
            "unique; 'a'",
        ),
        (
            lambda: create_supervisor(
                ScriptedModel(), [Subagent("a", "d", _agent())], mode="dispatch"  # type: ignore[arg-type]
            ),
            ValueError,
            "mode must be 'tools' or 'task'",
        ),
        (lambda: create_supervisor(ScriptedModel(), [_agent()]), TypeError, "Subagent(name"),
        (lambda: agent_as_tool(_agent(), "", "d"), ValueError, "not a valid tool name"),
    ],
)
def test_bad_configuration_is_refused_with_the_fix(build: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        build()


# --------------------------------------------------------------------------- the example


def _load_example(name: str) -> ModuleType:
    return load_example(name)


def test_personal_assistant_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, "examples/patterns/personal_assistant.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=100, check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in [
        "supervisor tool calls: [['schedule_event']]",
        "supervisor tool calls: [['schedule_event', 'manage_email']]",
        "interrupted: True (2 interrupts)",
        "before any decision: calendar=[] outbox=[]",
        "outbox subjects: ['Mockups reminder']",
        "'start_time': '2024-06-18T14:00:00', 'end_time': '2024-06-18T15:00:00'",
    ]:
        assert line in done.stdout


def test_personal_assistant_example_main_reports_what_happened() -> None:
    report = _load_example("personal_assistant").main()

    single = report["single"]
    assert single["dispatch_messages"] == [["schedule_event"]]
    assert single["calls"] == {"supervisor": 2, "calendar_agent": 2}  # email agent: 0 calls
    assert single["outbox"] == []
    assert single["calendar"][0]["start_time"] == "2024-06-13T09:00:00"

    cross = report["cross"]
    assert cross["dispatch_messages"] == [["schedule_event", "manage_email"]]  # one message
    assert cross["calls"] == {"supervisor": 2, "calendar_agent": 3, "email_agent": 2}
    assert [(e["start_time"], e["end_time"]) for e in cross["calendar"]] == [
        ("2024-06-18T14:00:00", "2024-06-18T15:00:00")
    ]
    assert cross["outbox"][0]["to"] == ["design-team@example.com"]

    approvals = report["approvals"]
    assert approvals["interrupts"] == 2
    (calendar_name, calendar_args), (email_name, email_args) = approvals["pending"]
    assert calendar_name == "create_calendar_event"
    assert {"title", "start_time", "end_time", "attendees"} <= set(calendar_args)
    assert calendar_args["start_time"] == "2024-06-18T14:00:00"
    assert email_name == "send_email"
    assert {"to", "subject", "body"} <= set(email_args)
    assert [e["title"] for e in approvals["calendar"]] == ["Meeting with the design team"]
    assert [m["subject"] for m in approvals["outbox"]] == ["Mockups reminder"]
    assert "Subject: Mockups reminder" in approvals["answer"]
