"""Handoffs (`fathom.patterns.handoffs`): the behaviours of the handoffs pattern, plus stickiness.

Everything runs real LangChain agents and LangGraph graphs with real checkpointers; the
only stand-in is the model, a `ScriptedModel` whose policies decide from what each call is
sent (system prompt, visible tools, messages).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NotRequired
from uuid import uuid4

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END
from langgraph.types import Command

from fathom.patterns.handoffs import (
    Step,
    StepMiddleware,
    build_handoff_graph,
    go_back_tool,
    handoff_tool,
    route_after_agent,
    route_initial,
    transfer_tool,
    transition,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

from .conftest import load_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "patterns" / "customer_support.py"


def _load_example() -> ModuleType:
    return load_example("customer_support")


@pytest.fixture(scope="module")
def cs() -> ModuleType:
    """The customer-support example module (the tutorial's agent, tools and policy)."""
    return _load_example()


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid4())}}


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _is_final(message: Any) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls


def _assert_tool_calls_answered(messages: list[Any]) -> None:
    """Every tool call has exactly one ToolMessage with its id, and no ToolMessage is orphaned."""
    call_ids = [tc["id"] for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls]
    answer_ids = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(call_ids) == sorted(answer_ids)
    assert len(set(call_ids)) == len(call_ids)


# =========================================================================== the tutorial


class SupportRun:
    """One support thread: the agent, its scripted model, and a helper to take turns."""

    def __init__(self, cs: ModuleType, **kwargs: Any) -> None:
        self.model: ScriptedModel = cs.scripted_model()
        self.agent = cs.build_support_agent(self.model, checkpointer=InMemorySaver(), **kwargs)
        self.config = _thread()

    def turn(self, text: str) -> tuple[dict[str, Any], list[Any]]:
        """Send one customer message; return the state and the model requests it caused."""
        before = len(self.model.requests)
        result = self.agent.invoke(_user(text), self.config)
        return result, self.model.requests[before:]


@pytest.fixture
def run(cs: ModuleType) -> SupportRun:
    return SupportRun(cs)


def _step(request: Any) -> str:
    first = (request.system_prompt or "").splitlines()[0]
    return first.removeprefix("CURRENT STEP: ")


def test_tb33_first_turn_sees_only_the_warranty_step(run: SupportRun, cs: ModuleType) -> None:
    result, calls = run.turn("Hi, my phone screen is cracked")

    assert len(calls) == 1
    assert calls[0].tool_names == ["record_warranty_status"]
    assert calls[0].system_prompt == cs.WARRANTY_PROMPT
    assert calls[0].response.tool_calls == []
    assert result.get("current_step") in (None, "warranty_collector")
    assert "issue_type" not in result and "warranty_status" not in result
    assert _is_final(result["messages"][-1])


def test_tb34_warranty_answer_records_status_and_moves_on(run: SupportRun) -> None:
    run.turn("Hi, my phone screen is cracked")
    result, calls = run.turn("Yes, it's still under warranty")

    assert calls[0].response.tool_calls[0]["name"] == "record_warranty_status"
    assert calls[0].response.tool_calls[0]["args"] == {"status": "in_warranty"}
    assert result["warranty_status"] == "in_warranty"
    assert result["current_step"] == "issue_classifier"
    recorded = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert recorded[-1].text == "Warranty status recorded as: in_warranty"


def test_tb35_classifier_prompt_is_rendered_and_tools_are_exact(run: SupportRun) -> None:
    run.turn("Hi, my phone screen is cracked")
    run.turn("Yes, it's still under warranty")
    result, calls = run.turn("I dropped it last week and the screen cracked")

    first = calls[0]
    assert _step(first) == "issue_classifier"
    assert "- Warranty status: in_warranty" in first.system_prompt
    assert "{" not in first.system_prompt and "}" not in first.system_prompt
    assert first.tool_names == ["record_issue_type"]
    assert first.response.tool_calls[0]["args"] == {"issue_type": "hardware"}
    assert result["issue_type"] == "hardware"
    assert result["current_step"] == "resolution_specialist"


RESOLUTION_TOOLS = [
    "provide_solution",
    "escalate_to_human",
    "go_back_to_warranty",
    "go_back_to_classification",
]


@pytest.mark.parametrize(
    ("warranty", "issue", "expected"),
    [
        ("in_warranty", "hardware", "provide_solution"),
        ("out_of_warranty", "hardware", "escalate_to_human"),
        ("in_warranty", "software", "provide_solution"),
        ("out_of_warranty", "software", "provide_solution"),
    ],
)
def test_tb36_resolution_step_follows_the_resolution_rule(
    cs: ModuleType, warranty: str, issue: str, expected: str
) -> None:
    model = cs.scripted_model()
    agent = cs.build_support_agent(model)
    result = agent.invoke(
        {
            **_user("What should I do?"),
            "current_step": "resolution_specialist",
            "warranty_status": warranty,
            "issue_type": issue,
        }
    )

    first = model.requests[0]
    assert first.tool_names == RESOLUTION_TOOLS
    assert f"- Warranty status: {warranty}" in first.system_prompt
    assert f"- Issue type: {issue}" in first.system_prompt
    assert [tc["name"] for tc in first.response.tool_calls] == [expected]
    assert result["current_step"] == "resolution_specialist"
    assert _is_final(result["messages"][-1])


def test_tb36_full_conversation_turn_four_provides_the_warranty_repair(run: SupportRun) -> None:
    for text in ("Hi, my phone screen is cracked", "Yes, it's still under warranty"):
        run.turn(text)
    run.turn("I dropped it last week and the screen cracked")
    result, calls = run.turn("What should I do?")

    assert calls[0].tool_names == RESOLUTION_TOOLS
    assert calls[0].response.tool_calls[0]["name"] == "provide_solution"
    solution = [m for m in result["messages"] if isinstance(m, ToolMessage)][-1]
    assert solution.text.startswith("Solution provided: Book a free warranty screen repair")


def test_tb37_requires_guard(cs: ModuleType) -> None:
    model = cs.scripted_model()
    agent = cs.build_support_agent(model)
    with pytest.raises(ValueError) as missing_warranty:
        agent.invoke({**_user("hello"), "current_step": "issue_classifier"})
    assert missing_warranty.value.args == (
        "warranty_status must be set before reaching issue_classifier",
    )
    with pytest.raises(ValueError) as missing_issue:
        agent.invoke(
            {
                **_user("hello"),
                "current_step": "resolution_specialist",
                "warranty_status": "in_warranty",
            }
        )
    assert missing_issue.value.args == (
        "issue_type must be set before reaching resolution_specialist",
    )
    assert model.calls == 0  # the guard runs before the model is called


async def test_tb37_requires_guard_async(cs: ModuleType) -> None:
    agent = cs.build_support_agent(cs.scripted_model())
    with pytest.raises(ValueError, match="warranty_status must be set before reaching"):
        await agent.ainvoke({**_user("hello"), "current_step": "issue_classifier"})


def test_tb38_every_state_change_is_answered_by_a_matching_tool_message(cs: ModuleType) -> None:
    result = cs.main()
    messages = result["messages"]
    _assert_tool_calls_answered(messages)
    names = {m.name for m in messages if isinstance(m, ToolMessage)}
    assert {"record_warranty_status", "record_issue_type", "go_back_to_warranty"} <= names


def test_tb38_a_command_without_its_tool_message_is_rejected() -> None:
    """The tutorial's go-back tool as written (a `Command`, no `ToolMessage`) fails in LangGraph."""

    @tool
    def go_back_to_start(runtime: ToolRuntime) -> Command:
        """Go back to the start (as in the tutorial: no ToolMessage)."""
        return Command(update={"current_step": "start"})

    def policy(request: ScriptRequest) -> AIMessage | str:
        if request.tool_results:
            return "back at the start"
        return ai("", tool_call(request.tool_names[0]))

    def agent_with(go_back: Any) -> Any:
        steps = StepMiddleware(
            {"start": Step("Start."), "later": Step("Later.", tools=[go_back])},
        )
        return create_agent(ScriptedModel(policy=policy), middleware=[steps])

    broken = agent_with(go_back_to_start)
    with pytest.raises(ValueError, match="Expected to have a matching ToolMessage"):
        broken.invoke({**_user("go back"), "current_step": "later"})

    fixed = agent_with(go_back_tool("start"))
    result = fixed.invoke({**_user("go back"), "current_step": "later"})
    assert result["current_step"] == "start"
    answer = result["messages"][2]
    assert isinstance(answer, ToolMessage)
    assert answer.tool_call_id == result["messages"][1].tool_calls[0]["id"]
    assert answer.text == "Returned to start."


def test_tb39_config_changes_within_a_turn_on_the_next_model_call(run: SupportRun) -> None:
    run.turn("Hi, my phone screen is cracked")
    _, calls = run.turn("Yes, it's still under warranty")

    assert [_step(c) for c in calls] == ["warranty_collector", "issue_classifier"]
    assert [c.tool_names for c in calls] == [["record_warranty_status"], ["record_issue_type"]]
    assert "- Warranty status: in_warranty" in calls[1].system_prompt


def test_tb40_go_back_changes_only_the_step(cs: ModuleType) -> None:
    result = cs.main()

    go_back_turn = result["turns"][4]
    assert go_back_turn["calls"][0]["tool_calls"] == [("go_back_to_warranty", {})]
    assert go_back_turn["calls"][1]["step"] == "warranty_collector"
    # In the checkpoint right after the go-back tool ran, only the step had changed.
    assert result["after_go_back"] == {
        "current_step": "warranty_collector",
        "warranty_status": "in_warranty",
        "issue_type": "hardware",
    }
    # The corrected status is recorded; the old issue_type is still there (stale, not cleared).
    assert result["final_state"] == {
        "current_step": "issue_classifier",
        "warranty_status": "out_of_warranty",
        "issue_type": "hardware",
    }


def _summary_policy(request: ScriptRequest) -> str:
    # The summariser is sent LangChain's summary prompt with the old messages inside it.
    assert "Context Extraction Assistant" in request.last_human_text
    earlier = request.last_human_text.count("(earlier message")
    return f"The customer chatted about {earlier} unrelated things before asking for help."


def _long_history(pairs: int) -> list[Any]:
    filler = "We talked about the weather and about delivery times in some detail. " * 10
    history: list[Any] = []
    for index in range(pairs):
        history.append(HumanMessage(f"(earlier message {index}) {filler}"))
        history.append(AIMessage(f"(earlier message {index}) Noted. {filler}"))
    return history


@pytest.mark.parametrize("pairs", [3, 12])
def test_tb41_summarization_replaces_old_messages_but_keeps_the_flow(
    cs: ModuleType, pairs: int
) -> None:
    summarizer = ScriptedModel(policy=_summary_policy)
    summarization = SummarizationMiddleware(
        model=summarizer, trigger=("tokens", 4000), keep=("messages", 10)
    )
    run = SupportRun(cs, middleware=[summarization])
    flow = {
        "current_step": "resolution_specialist",
        "warranty_status": "out_of_warranty",
        "issue_type": "hardware",
    }
    history = [*_long_history(pairs), HumanMessage("What should I do?")]
    over = count_tokens_approximately(history) > 4000
    assert over == (pairs == 12)  # 12 pairs pass the threshold, 3 do not

    result = run.agent.invoke({"messages": history, **flow}, run.config)

    assert {key: result[key] for key in flow} == flow
    first = run.model.requests[0]
    assert _step(first) == "resolution_specialist"
    assert first.tool_names == RESOLUTION_TOOLS
    assert first.response.tool_calls[0]["name"] == "escalate_to_human"
    if not over:
        assert summarizer.calls == 0
        assert len(result["messages"]) == len(history) + 3
        return
    assert summarizer.calls == 1
    summary = result["messages"][0]
    assert isinstance(summary, HumanMessage)
    # 25 messages arrived, the last 10 are kept: the summariser was sent the first 15.
    assert "chatted about 15 unrelated things" in summary.text
    sent = first.messages[1:]  # after the system prompt: the summary, then what was kept
    kept = sent[1:]
    assert sent[0].text == summary.text
    assert len(kept) == 10
    assert [m.text for m in kept] == [m.text for m in history[-10:]]
    assert len(result["messages"]) == 1 + 10 + 3


def test_tb44_and_full_history_every_turn_ends_with_a_final_ai_message(cs: ModuleType) -> None:
    run = SupportRun(cs)
    total = 0
    for text in cs.TURNS:
        result, calls = run.turn(text)
        total += len(calls)
        assert _is_final(result["messages"][-1])
        # `messages` is the whole thread so far, not only this turn.
        assert [m.text for m in result["messages"] if isinstance(m, HumanMessage)] == (
            cs.TURNS[: cs.TURNS.index(text) + 1]
        )
    assert total == 1 + 2 + 2 + 2 + 3


async def test_the_tutorial_runs_the_same_on_the_async_path(cs: ModuleType) -> None:
    sync_result = cs.main()
    model = cs.scripted_model()
    agent = cs.build_support_agent(model, checkpointer=InMemorySaver())
    config = _thread()
    states = []
    for text in cs.TURNS:
        result = await agent.ainvoke(_user(text), config)
        states.append({key: result.get(key) for key in cs._STATE_KEYS})
        assert _is_final(result["messages"][-1])
    assert states == [turn["state"] for turn in sync_result["turns"]]
    expected_steps = [c["step"] for turn in sync_result["turns"] for c in turn["calls"]]
    assert [_step(r) for r in model.requests] == expected_steps


# =========================================================================== the example


def test_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=100, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    for line in [
        "Turn 1 | customer: Hi, my phone screen is cracked",
        "  call 1: step=warranty_collector tools=[record_warranty_status] tool calls: -",
        "  call 2: step=issue_classifier tools=[record_issue_type] tool calls: -",
        "tool calls: record_issue_type({'issue_type': 'hardware'})",
        "tool calls: provide_solution({'solution': 'Book a free warranty screen repair",
        "  call 1: step=resolution_specialist tools=[provide_solution, escalate_to_human, "
        "go_back_to_warranty, go_back_to_classification] tool calls: go_back_to_warranty({})",
        "tool calls: record_warranty_status({'status': 'out_of_warranty'})",
        "Right after go_back_to_warranty: {'current_step': 'warranty_collector', "
        "'warranty_status': 'in_warranty', 'issue_type': 'hardware'}",
        "Messages in the thread: 20",
    ]:
        assert line in done.stdout


def test_example_main_returns_what_happened(cs: ModuleType) -> None:
    result = cs.main()
    steps = [[c["step"] for c in turn["calls"]] for turn in result["turns"]]
    assert steps == [
        ["warranty_collector"],
        ["warranty_collector", "issue_classifier"],
        ["issue_classifier", "resolution_specialist"],
        ["resolution_specialist", "resolution_specialist"],
        ["resolution_specialist", "warranty_collector", "issue_classifier"],
    ]
    assert [turn["state"]["current_step"] for turn in result["turns"]] == [
        None,
        "issue_classifier",
        "resolution_specialist",
        "resolution_specialist",
        "issue_classifier",
    ]
    assert result["turns"][3]["calls"][0]["tools"] == RESOLUTION_TOOLS
    assert len(result["messages"]) == 20


# =========================================================================== stickiness


@tool
def buy_coffee() -> str:
    """Order a coffee for the user."""
    return "Coffee ordered: order #C-001, ready in five minutes at the counter."


@tool
def book_flight() -> str:
    """Book a flight for the user."""
    return "Flight booked: booking #F-001, confirmation sent by email."


def _coffee_steps() -> StepMiddleware:
    to_coffee = transfer_tool("coffee", description="Hand coffee orders to the coffee step.")
    to_flights = transfer_tool("flights", description="Hand flight bookings to the flights step.")
    return StepMiddleware(
        {
            "triage": Step("Front desk: hand the user to the right desk.", [to_coffee, to_flights]),
            "coffee": Step("Coffee desk: order coffee.", [buy_coffee, to_flights]),
            "flights": Step("Flight desk: book flights.", [book_flight, to_coffee]),
        }
    )


def _desk_policy(request: ScriptRequest) -> AIMessage | str:
    """Do the job if this desk can, hand off if another desk can, answer once work is done."""
    wants = "book_flight" if "flight" in request.last_human_text.lower() else "buy_coffee"
    done = [m.name for m in request.tool_results]
    if wants in done:
        return "All done."
    if request.has_tool(wants):
        return ai("", tool_call(wants))
    desk = "flights" if wants == "book_flight" else "coffee"
    return ai("", tool_call(f"transfer_to_{desk}"))


def _desk_agent(checkpointer: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(policy=_desk_policy)
    agent = create_agent(
        model, middleware=[_coffee_steps()], checkpointer=checkpointer, name="desk"
    )
    return agent, model


def test_handoffs_are_sticky_across_turns_on_one_thread() -> None:
    agent, model = _desk_agent(InMemorySaver())
    config = _thread()
    usage = AgentUsage()
    agent.invoke(_user("Buy coffee"), {**config, "callbacks": [usage]})
    assert model.calls == 3  # hand off, buy, answer
    result = agent.invoke(_user("Buy coffee again"), {**config, "callbacks": [usage]})
    assert model.calls == 5  # turn 2 starts in the coffee step: buy, answer
    assert usage.totals()["desk"].calls == 5
    assert _step_names(model.requests[3:]) == ["Coffee desk", "Coffee desk"]
    assert result["current_step"] == "coffee"


def _step_names(requests: list[Any]) -> list[str]:
    return [r.system_prompt.split(":")[0] for r in requests]


def test_without_a_checkpointer_or_on_a_new_thread_turn_two_starts_over() -> None:
    agent, model = _desk_agent(None)
    agent.invoke(_user("Buy coffee"), _thread())
    agent.invoke(_user("Buy coffee again"), _thread())
    assert model.calls == 6
    assert _step_names(model.requests[3:]) == ["Front desk", "Coffee desk", "Coffee desk"]

    agent, model = _desk_agent(InMemorySaver())
    agent.invoke(_user("Buy coffee"), _thread())
    agent.invoke(_user("Buy coffee again"), _thread())
    assert model.calls == 6


def test_sticky_is_not_locked_the_current_step_can_hand_off_again() -> None:
    agent, model = _desk_agent(InMemorySaver())
    config = _thread()
    agent.invoke(_user("Buy coffee"), config)
    result = agent.invoke(_user("Book a flight"), config)
    assert model.calls == 3 + 3  # transfer, book, answer
    assert _step_names(model.requests[3:]) == ["Coffee desk", "Flight desk", "Flight desk"]
    assert result["current_step"] == "flights"
    _assert_tool_calls_answered(result["messages"])


# =========================================================================== StepMiddleware


def test_steps_register_every_tool_but_show_only_the_current_steps() -> None:
    steps = _coffee_steps()
    assert {t.name for t in steps.tools} == {
        "transfer_to_coffee",
        "transfer_to_flights",
        "buy_coffee",
        "book_flight",
    }
    agent, model = _desk_agent(None)
    assert set(agent.nodes["tools"].bound.tools_by_name) == {t.name for t in steps.tools}
    agent.invoke(_user("Buy coffee"))
    assert model.requests[0].tool_names == ["transfer_to_coffee", "transfer_to_flights"]


def test_the_step_prompt_follows_the_agents_own_system_prompt() -> None:
    model = ScriptedModel(policy=lambda request: "hi")
    agent = create_agent(
        model,
        system_prompt="You work for Acme.",
        middleware=[StepMiddleware({"only": Step("Step for {who}.", requires=["who"])})],
    )
    agent.invoke({**_user("hello"), "who": "Ada"})
    assert model.requests[0].system_prompt == "You work for Acme.\n\nStep for Ada."


def test_a_made_schema_declares_the_keys_the_steps_use() -> None:
    steps = StepMiddleware(
        {
            "start": Step(
                "Start.", [transfer_tool("end", state_key="stage", updates={"reason": "asked"})]
            ),
            "end": Step("End for {user}.", requires=["ticket"]),
        },
        state_key="stage",
    )
    keys = steps.state_schema.__optional_keys__ | steps.state_schema.__required_keys__
    assert {"stage", "ticket", "user", "reason", "messages"} <= keys

    def policy(request: ScriptRequest) -> AIMessage | str:
        return "ok" if request.tool_results else ai("", tool_call("transfer_to_end"))

    agent = create_agent(ScriptedModel(policy=policy), middleware=[steps])
    result = agent.invoke({**_user("hi"), "ticket": 7, "user": "Ada"})
    assert (result["stage"], result["reason"]) == ("end", "asked")


class _Declared(AgentState):
    current_step: NotRequired[str]


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: StepMiddleware({}), "at least one step"),
        (lambda: StepMiddleware({"a": Step("A")}, default="b"), "default step 'b'"),
        (lambda: StepMiddleware({"a": "A"}), "expected a Step"),  # type: ignore[dict-item]
        (
            lambda: StepMiddleware({"a": Step("A", [transfer_tool("nowhere")])}),
            "moves to unknown step 'nowhere'",
        ),
        (
            lambda: StepMiddleware(
                {"a": Step("A", [transfer_tool("a")]), "b": Step("B", [transfer_tool("a")])}
            ),
            "Two different tools are named 'transfer_to_a'",
        ),
        (
            lambda: StepMiddleware(
                {"a": Step("A"), "b": Step("B", requires=["ticket"])}, state_schema=_Declared
            ),
            "does not declare 'ticket' \\(required by step 'b'\\)",
        ),
        (
            lambda: StepMiddleware({"a": Step("A")}, state_key="messages"),
            "other than 'messages'",
        ),
        (lambda: Step("Hello {"), "not a valid str.format template"),
        (lambda: Step("Hello {0}"), "positional placeholder"),
        (lambda: Step("A", requires="ticket"), "not the str 'ticket'"),
        (lambda: Step("A", tools=[lambda: "x"]), "wrap functions with langchain's @tool"),
        (lambda: transfer_tool("a b"), "Tool name 'transfer_to_a b' is not valid"),
        (
            lambda: StepMiddleware({"a": Step("A", [transfer_tool("a")])}, state_key="stage"),
            "sets 'current_step', but this StepMiddleware reads 'stage'",
        ),
    ],
)
def test_bad_configuration_fails_at_construction(build: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        build()


def test_bad_state_fails_with_a_clear_error() -> None:
    steps = StepMiddleware({"a": Step("Hello {name}."), "b": Step("B")})
    agent = create_agent(ScriptedModel(policy=lambda r: "hi"), middleware=[steps])
    with pytest.raises(ValueError, match="current_step='zzz' is not a known step"):
        agent.invoke({**_user("hi"), "current_step": "zzz"})
    with pytest.raises(ValueError, match="uses \\{name\\}, but state has no 'name'"):
        agent.invoke(_user("hi"))


def test_transition_refuses_to_overwrite_what_it_sets() -> None:
    runtime = ToolRuntime(
        state={},
        context=None,
        config={},
        stream_writer=lambda _: None,
        tool_call_id="call-1",
        store=None,
    )
    command = transition(runtime, "b", "moved", updates={"x": 1})
    assert command.update["current_step"] == "b" and command.update["x"] == 1
    (message,) = command.update["messages"]
    assert (message.tool_call_id, message.text) == ("call-1", "moved")
    with pytest.raises(ValueError, match="may not set 'messages'"):
        transition(runtime, "b", "moved", updates={"messages": []})
    no_call = ToolRuntime(
        state={},
        context=None,
        config={},
        stream_writer=lambda _: None,
        tool_call_id=None,
        store=None,
    )
    with pytest.raises(ValueError, match="called by the model"):
        transition(no_call, "b", "moved")


# =========================================================================== multi-agent graph


@tool
def lookup_customer() -> str:
    """Look up the customer's account."""
    return "customer: gold tier since 2021"


SALES_PROMPT = "You are the sales agent. If asked about technical issues, transfer to support."
SUPPORT_PROMPT = "You are the support agent. If asked about pricing, transfer to sales."


def _since_human(request: ScriptRequest) -> list[str]:
    names: list[str] = []
    for message in reversed(request.messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            names.append(str(message.name))
    return names


def _sales_policy(*, parallel: bool) -> Any:
    def policy(request: ScriptRequest) -> AIMessage | str:
        said = request.last_human_text.lower()
        done = _since_human(request)
        if "crash" not in said or "transfer_to_sales_agent" in done:
            return "Sales: our plans start at $10 a month."
        if parallel:
            return ai("", tool_call("lookup_customer"), tool_call("transfer_to_support_agent"))
        if "lookup_customer" not in done:
            return ai("", tool_call("lookup_customer"))
        return ai("", tool_call("transfer_to_support_agent"))

    return policy


def _support_policy(request: ScriptRequest) -> AIMessage | str:
    said = request.last_human_text.lower()
    if ("price" in said or "cost" in said) and "transfer_to_support_agent" not in _since_human(
        request
    ):
        return ai("", tool_call("transfer_to_sales_agent"))
    return "Support: reinstall the app and sign in again."


class Desk:
    """A sales agent and a support agent in one handoff graph."""

    def __init__(self, checkpointer: Any = None, *, parallel: bool = False) -> None:
        self.sales_model = ScriptedModel(policy=_sales_policy(parallel=parallel))
        self.support_model = ScriptedModel(policy=_support_policy)
        sales = create_agent(
            self.sales_model,
            tools=[lookup_customer, handoff_tool("support_agent")],
            system_prompt=SALES_PROMPT,
            name="sales_agent",
        )
        support = create_agent(
            self.support_model,
            tools=[handoff_tool("sales_agent")],
            system_prompt=SUPPORT_PROMPT,
            name="support_agent",
        )
        self.graph = build_handoff_graph(
            {"sales_agent": sales, "support_agent": support}, checkpointer=checkpointer
        )
        self.usage = AgentUsage()

    def calls(self) -> dict[str, int]:
        return {name: totals.calls for name, totals in self.usage.totals().items()}

    def turn(self, text: str, config: dict[str, Any]) -> dict[str, Any]:
        return self.graph.invoke(_user(text), {**config, "callbacks": [self.usage]})


def test_tb42_a_handoff_adds_exactly_the_call_and_its_answer() -> None:
    desk = Desk(InMemorySaver())
    result = desk.turn("My app keeps crashing", _thread())

    human, call, answer, final = result["messages"]
    transfer_id = desk.sales_model.requests[1].response.tool_calls[0]["id"]
    assert isinstance(human, HumanMessage)
    assert isinstance(call, AIMessage)
    assert [(tc["name"], tc["id"]) for tc in call.tool_calls] == [
        ("transfer_to_support_agent", transfer_id)
    ]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.text) == (transfer_id, "Transferred to support_agent")
    assert final.text == "Support: reinstall the app and sign in again."
    assert result["active_agent"] == "support_agent"
    # The sales agent's own lookup stayed behind: the support agent saw only the pair.
    assert desk.calls() == {"sales_agent": 2, "support_agent": 1}
    seen = desk.support_model.requests[0].messages
    assert [m.type for m in seen] == ["system", "human", "ai", "tool"]
    assert "gold tier" not in str([m.content for m in result["messages"]])


def _runtime(messages: list[Any], tool_call_id: str) -> ToolRuntime:
    return ToolRuntime(
        state={"messages": messages},
        context=None,
        config={},
        stream_writer=lambda _: None,
        tool_call_id=tool_call_id,
        store=None,
    )


def _call(name: str, runtime: ToolRuntime) -> dict[str, Any]:
    """A tool call as the tool node sends it, with the runtime injected."""
    return {
        "type": "tool_call",
        "id": runtime.tool_call_id,
        "name": name,
        "args": {"runtime": runtime},
    }


def test_tb42_the_handoff_command_finds_its_own_ai_message_not_the_last() -> None:
    transfer = handoff_tool("sales_agent")
    calling = AIMessage(
        "Let me check, then pass you on.",
        tool_calls=[tool_call("lookup_customer", id="a"), tool_call(transfer.name, id="b")],
    )
    later = AIMessage("", tool_calls=[tool_call("lookup_customer", id="c")])
    messages = [HumanMessage("How much is it?"), calling, later, ToolMessage("x", tool_call_id="a")]

    command = transfer.invoke(_call(transfer.name, _runtime(messages, "b")))

    assert isinstance(command, Command)
    assert command.goto == "sales_agent"
    assert command.graph == Command.PARENT
    assert command.update["active_agent"] == "sales_agent"
    forwarded, answer = command.update["messages"]
    assert forwarded.text == "Let me check, then pass you on."
    assert [tc["id"] for tc in forwarded.tool_calls] == ["b"]  # only the handed-off call
    assert (answer.tool_call_id, answer.text) == ("b", "Transferred to sales_agent")
    with pytest.raises(ValueError, match="No AIMessage in state holds tool call 'zzz'"):
        transfer.invoke(_call(transfer.name, _runtime(messages, "zzz")))


def test_parallel_calls_with_a_handoff_leave_a_valid_parent_history() -> None:
    desk = Desk(InMemorySaver(), parallel=True)
    result = desk.turn("My app keeps crashing", _thread())

    _assert_tool_calls_answered(result["messages"])
    call = result["messages"][1]
    assert [tc["name"] for tc in call.tool_calls] == ["transfer_to_support_agent"]
    assert result["active_agent"] == "support_agent"
    assert _is_final(result["messages"][-1])


def test_tb43_routing_functions() -> None:
    assert route_initial({}, "sales_agent") == "sales_agent"
    assert route_initial({"active_agent": "support_agent"}, "sales_agent") == "support_agent"
    final = {"messages": [HumanMessage("hi"), AIMessage("hello")], "active_agent": "support_agent"}
    assert route_after_agent(final, "sales_agent") == END == "__end__"
    pending = AIMessage("", tool_calls=[tool_call("x", id="1")])
    assert route_after_agent({"messages": [pending]}, "sales_agent") == "sales_agent"
    handed = {"messages": [pending, ToolMessage("ok", tool_call_id="1")], "active_agent": "b"}
    assert route_after_agent(handed, "sales_agent") == "b"
    assert route_after_agent({"messages": []}, "sales_agent") == "sales_agent"


def test_tb43_tb44_turn_two_starts_at_the_active_agent() -> None:
    desk = Desk(InMemorySaver())
    config = _thread()
    desk.turn("My app keeps crashing", config)
    assert desk.calls() == {"sales_agent": 2, "support_agent": 1}

    second = desk.turn("It still crashes after the update", config)
    assert desk.calls() == {"sales_agent": 2, "support_agent": 2}  # no detour through sales
    assert second["active_agent"] == "support_agent"
    assert _is_final(second["messages"][-1])

    third = desk.turn("What does the premium plan cost?", config)  # sticky, not locked
    assert desk.calls() == {"sales_agent": 3, "support_agent": 3}
    assert third["active_agent"] == "sales_agent"
    assert third["messages"][-1].text == "Sales: our plans start at $10 a month."
    _assert_tool_calls_answered(third["messages"])
    assert len(third["messages"]) == 4 + 2 + 4


def test_without_a_checkpointer_every_turn_starts_at_the_default_agent() -> None:
    desk = Desk()
    desk.turn("My app keeps crashing", _thread())
    result = desk.turn("It still crashes after the update", _thread())
    assert desk.calls() == {"sales_agent": 4, "support_agent": 2}
    assert len(result["messages"]) == 4


def test_the_active_agent_survives_a_restart_with_sqlite(tmp_path: Path) -> None:
    config = _thread()
    for turn, text in enumerate(["My app keeps crashing", "It still crashes"]):
        connection = sqlite3.connect(tmp_path / "threads.db", check_same_thread=False)
        try:
            desk = Desk(SqliteSaver(connection))  # a fresh graph, as after a restart
            result = desk.turn(text, config)
        finally:
            connection.close()
        expected = {"sales_agent": 2, "support_agent": 1} if turn == 0 else {"support_agent": 1}
        assert desk.calls() == expected
        assert result["active_agent"] == "support_agent"


async def test_the_multi_agent_graph_runs_async() -> None:
    desk = Desk(InMemorySaver())
    config = {**_thread(), "callbacks": [desk.usage]}
    first = await desk.graph.ainvoke(_user("My app keeps crashing"), config)
    second = await desk.graph.ainvoke(_user("It still crashes"), config)
    assert first["active_agent"] == second["active_agent"] == "support_agent"
    assert desk.calls() == {"sales_agent": 2, "support_agent": 2}
    assert _is_final(second["messages"][-1])


def test_a_handoff_to_an_unknown_agent_fails_clearly() -> None:
    model = ScriptedModel(policy=lambda r: ai("", tool_call("transfer_to_nobody")))
    lost = create_agent(model, tools=[handoff_tool("nobody")], name="lost")
    graph = build_handoff_graph({"lost": lost})
    with pytest.raises(ValueError, match="active_agent='nobody' is not an agent of this graph"):
        graph.invoke(_user("hi"))


class _NoActiveAgent(AgentState):
    pass


def _plain_agent(**kwargs: Any) -> Any:
    return create_agent(ScriptedModel(policy=lambda r: "hi"), **kwargs)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: build_handoff_graph({}), "at least one agent"),
        (lambda: build_handoff_graph({"a": _plain_agent()}, default="b"), "default agent 'b'"),
        (lambda: build_handoff_graph({"__end__": _plain_agent()}), "not START/END"),
        (
            lambda: build_handoff_graph({"a": _plain_agent(checkpointer=InMemorySaver())}),
            "compiled with its own checkpointer",
        ),
        (
            lambda: build_handoff_graph({"a": _plain_agent()}, state_schema=_NoActiveAgent),
            "must declare 'active_agent'",
        ),
    ],
)
def test_bad_graph_configuration_fails_at_construction(build: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        build()


def test_a_forwarded_message_keeps_only_its_own_tool_use_block() -> None:
    """Providers such as Anthropic also put tool calls in `content`; those are reduced too."""
    transfer = handoff_tool("sales_agent")
    calling = AIMessage(
        content=[
            {"type": "text", "text": "Passing you on."},
            {"type": "tool_use", "id": "a", "name": "lookup_customer", "input": {}},
            {"type": "tool_use", "id": "b", "name": transfer.name, "input": {}},
        ],
        tool_calls=[tool_call("lookup_customer", id="a"), tool_call(transfer.name, id="b")],
    )
    command = transfer.invoke(_call(transfer.name, _runtime([HumanMessage("hi"), calling], "b")))
    forwarded, _ = command.update["messages"]
    assert [block.get("id") for block in forwarded.content] == [None, "b"]
    assert [tc["id"] for tc in forwarded.tool_calls] == ["b"]
    assert [tc["id"] for tc in calling.tool_calls] == ["a", "b"]  # the original is untouched
