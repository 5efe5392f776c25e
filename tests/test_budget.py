"""A budget caps the whole agent tree: the parent, its parallel `task` subagents, and the
subagents of an `eval`; at the cap the run ends with a final answer, and a later run on
the thread with a raised budget continues from what the thread spent.

Real agents (`create_deep_agent`) with scripted models whose every call reports the same
number of tokens, a real checkpointer, and a barrier tool that proves the subagents run at
the same time (each waits there until all three have arrived).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from fathom import create_deep_agent
from fathom.budget import BUDGET_KEY, Budget, BudgetError
from fathom.middleware.budget import BudgetGate, BudgetMiddleware
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.scripted import ScriptRequest

SRC = str(Path(__file__).resolve().parent.parent / "src")
CALL_TOKENS = 1_000
"""Every scripted call reports this many tokens (900 in, 100 out)."""
SUBAGENTS = 3
CALLS_PER_SUBAGENT = 10
FULL_COST = (2 + SUBAGENTS * CALLS_PER_SUBAGENT) * CALL_TOKENS
"""The parent's fan-out and final answer, and ten calls of each subagent."""


def sized(message: AIMessage | str) -> AIMessage:
    message = AIMessage(content=message) if isinstance(message, str) else message
    message.usage_metadata = {"input_tokens": CALL_TOKENS - 100, "output_tokens": 100,
                              "total_tokens": CALL_TOKENS}
    return message


def after_last_human(request: ScriptRequest) -> list[Any]:
    messages = request.messages
    last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    return messages[last + 1:]


def parent_script(request: ScriptRequest) -> AIMessage:
    """Fan out to three subagents once per user turn, then answer."""
    if not after_last_human(request):
        return sized(ai("", *(tool_call("task", {"description": f"part {k}",
                                                 "subagent_type": "worker"})
                              for k in range(SUBAGENTS))))
    return sized("all done")


def worker_script(request: ScriptRequest) -> AIMessage:
    """Ten calls: meet the others, eight more tool calls, then the answer."""
    made = sum(isinstance(m, AIMessage) for m in request.messages)
    if made == 0:
        return sized(ai("", tool_call("meet", {})))
    if made < CALLS_PER_SUBAGENT - 1:
        return sized(ai(f"note {made}", tool_call("ls", {"path": "/"})))
    return sized("part finished")


def meet_tool(asynchronous: bool) -> Any:
    """A tool the three subagents' first steps wait in until all three have called it."""
    if asynchronous:
        barrier = asyncio.Barrier(SUBAGENTS)

        @tool
        async def meet() -> str:
            """Wait for the other workers."""
            await asyncio.wait_for(barrier.wait(), 30)
            return "met"

        return meet
    sync_barrier = threading.Barrier(SUBAGENTS, timeout=30)

    @tool
    def meet() -> str:
        """Wait for the other workers."""
        sync_barrier.wait()
        return "met"

    return meet


def fan_out_agent(budget: Budget, checkpointer: Any, *, asynchronous: bool) -> Any:
    return create_deep_agent(
        ScriptedModel(policy=parent_script),
        checkpointer=checkpointer,
        subagents=[{"name": "worker", "description": "does one part",
                    "model": ScriptedModel(policy=worker_script),
                    "tools": [meet_tool(asynchronous)]}],
        budget=budget,
    )


def run(agent: Any, text: str, config: dict[str, Any], asynchronous: bool) -> dict[str, Any]:
    inputs = {"messages": [{"role": "user", "content": text}]}
    if asynchronous:
        return asyncio.run(agent.ainvoke(inputs, config))
    return agent.invoke(inputs, config)


def assert_conversation_is_whole(messages: list[Any]) -> None:
    """Every tool call has its answer, and the last message is a final answer."""
    asked = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    assert asked == answered
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_fan_out_stops_at_the_token_cap_and_a_raised_budget_continues_the_thread(
    asynchronous: bool, tmp_path: Any
) -> None:
    cap = FULL_COST // 2
    config = {"configurable": {"thread_id": "fan-out"}}
    # SQLite on the sync path, memory on the async one (SqliteSaver has no async methods)
    with contextlib.ExitStack() as stack:
        saver = (InMemorySaver() if asynchronous else stack.enter_context(
            SqliteSaver.from_conn_string(str(tmp_path / "threads.db"))))
        agent = fan_out_agent(Budget(max_tokens=cap), saver, asynchronous=asynchronous)
        result = run(agent, "do the three parts", config, asynchronous)

        spent = result[BUDGET_KEY]["spent"]
        assert cap <= spent["total_tokens"] <= cap * 1.01 + CALL_TOKENS
        assert spent["calls"] * CALL_TOKENS == spent["total_tokens"]  # every call counted
        assert result[BUDGET_KEY]["reached"] == "max_tokens"
        final = result["messages"][-1]
        assert final.response_metadata["finish_reason"] == "budget"
        assert "token cap is reached" in final.text and "raised budget" in final.text
        assert_conversation_is_whole(result["messages"])
        stopped = [m for m in result["messages"] if isinstance(m, ToolMessage)
                   and m.text.startswith("Stopped before finishing")]
        assert len(stopped) == SUBAGENTS  # each subagent was stopped, none finished
        # the checkpoint holds the same finished conversation and the spend
        saved = agent.get_state(config)
        assert not saved.next
        assert saved.values["messages"] == result["messages"]
        assert saved.values[BUDGET_KEY]["spent"] == spent

        # the same thread, a new agent (nothing in memory) with twice the full cost
        raised = fan_out_agent(Budget(max_tokens=2 * FULL_COST), saver,
                               asynchronous=asynchronous)
        again = run(raised, "go on", config, asynchronous)
        assert again["messages"][-1].text == "all done"
        assert again["messages"][: len(result["messages"])] == result["messages"]
        total = again[BUDGET_KEY]["spent"]["total_tokens"]
        assert total == spent["total_tokens"] + FULL_COST  # counted on from the stored spend
        assert again[BUDGET_KEY]["reached"] is None


def test_the_same_budget_stops_a_later_run_before_any_model_call() -> None:
    parent = ScriptedModel(policy=lambda r: sized("hello"))
    agent = create_deep_agent(parent, checkpointer=InMemorySaver(),
                              budget=Budget(max_model_calls=1))
    config = {"configurable": {"thread_id": "t"}}
    first = agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)
    assert first["messages"][-1].text == "hello"
    second = agent.invoke({"messages": [{"role": "user", "content": "again"}]}, config)
    assert parent.calls == 1
    assert "model-call cap is reached (1 of 1 model calls)" in second["messages"][-1].text


def test_a_runs_configurable_budget_raises_the_cap_of_the_same_agent() -> None:
    parent = ScriptedModel(policy=lambda r: sized("hello"))
    agent = create_deep_agent(parent, checkpointer=InMemorySaver(),
                              budget=Budget(max_model_calls=1))
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)
    config["configurable"][BUDGET_KEY] = {"max_model_calls": 3}
    second = agent.invoke({"messages": [{"role": "user", "content": "again"}]}, config)
    assert second["messages"][-1].text == "hello"
    assert second[BUDGET_KEY]["spent"]["calls"] == 2
    assert second[BUDGET_KEY]["limits"] == {"max_model_calls": 3}


def test_at_the_cap_no_subagent_starts() -> None:
    worker = ScriptedModel(policy=lambda r: sized("part finished"))
    parent = ScriptedModel(replies=[sized(ai("", tool_call(
        "task", {"description": "x", "subagent_type": "worker"})))])
    agent = create_deep_agent(
        parent, subagents=[{"name": "worker", "description": "w", "model": worker}],
        budget=Budget(max_model_calls=1))
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert worker.calls == 0
    refusal = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert refusal.status == "error" and refusal.text.startswith("Not started")
    assert result["messages"][-1].response_metadata["finish_reason"] == "budget"


def test_a_time_cap_of_zero_stops_before_the_first_model_call() -> None:
    parent = ScriptedModel(policy=lambda r: sized("hello"))
    agent = create_deep_agent(parent, budget=Budget(max_wall_s=0))
    result = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert parent.calls == 0
    assert "time cap is reached" in result["messages"][-1].text


def test_the_cost_cap_uses_the_budgets_prices() -> None:
    parent = ScriptedModel(policy=lambda r: sized("hello"))
    # 900 input and 100 output tokens at $10 and $100 per million: $0.019 a call
    budget = Budget(max_usd=0.05, prices={"scriptedmodel:scripted": (10.0, 100.0)})
    agent = create_deep_agent(parent, checkpointer=InMemorySaver(), budget=budget)
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(4):
        result = agent.invoke({"messages": [{"role": "user", "content": f"turn {turn}"}]},
                              config)
    assert parent.calls == 3  # $0.057 after three calls: the fourth is refused
    assert result[BUDGET_KEY]["spent"]["usd"] == pytest.approx(3 * 0.019)
    assert "cost cap is reached" in result["messages"][-1].text


def test_a_cost_cap_on_an_unpriced_model_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(BudgetError, match=r"scriptedmodel:scripted.*prices="):
        create_deep_agent(ScriptedModel(replies=["x"]), budget=Budget(max_usd=1.0))


def test_without_a_budget_nothing_changes_and_an_empty_budget_keeps_the_request() -> None:
    plain_model = ScriptedModel(policy=lambda r: "hello")
    budgeted_model = ScriptedModel(policy=lambda r: "hello")
    plain = create_deep_agent(plain_model)
    budgeted = create_deep_agent(budgeted_model, budget=Budget())
    names = [type(m).__name__ for m in _middleware(plain)]
    assert "BudgetMiddleware" not in names and "BudgetGate" not in names
    assert BUDGET_KEY not in plain.channels
    out = plain.invoke({"messages": [{"role": "user", "content": "hi"}]})
    counted = budgeted.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert BUDGET_KEY not in out
    assert counted[BUDGET_KEY]["spent"]["calls"] == 1
    assert plain_model.requests[0].canonical_json() == budgeted_model.requests[0].canonical_json()


def test_an_agent_without_a_budget_does_not_load_the_budget_modules() -> None:
    code = ("import sys\n"
            "from fathom import create_deep_agent\n"
            "from fathom.testing import ScriptedModel\n"
            "agent = create_deep_agent(ScriptedModel(policy=lambda r: 'x'), subagents=[\n"
            "    {'name': 'a', 'description': 'b', 'graph_id': 'g'}])\n"
            "agent.invoke({'messages': [{'role': 'user', 'content': 'hi'}]})\n"
            "print(sorted(m for m in sys.modules if m.endswith('budget') and 'fathom' in m))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": SRC})
    # the context window's own `budget` module is not this one
    assert done.stdout.split() == ["['fathom.middleware.context.budget']"]


def _middleware(agent: Any) -> list[Any]:
    found = []
    for node in agent.nodes.values():
        bound = getattr(node, "bound", None)
        for attr in ("middleware", "_middleware"):
            found.extend(getattr(bound, attr, None) or [])
    return found


def test_the_main_agent_holds_the_account_and_each_subagent_a_gate() -> None:
    worker = ScriptedModel(policy=lambda r: "done")
    agent = create_deep_agent(
        ScriptedModel(policy=lambda r: "ok"),
        subagents=[{"name": "worker", "description": "w", "model": worker}],
        budget=Budget(max_tokens=10),
    )
    assert BUDGET_KEY in agent.channels
    from langchain.agents.middleware.types import AgentMiddleware

    assert issubclass(BudgetMiddleware, AgentMiddleware) and issubclass(BudgetGate,
                                                                        AgentMiddleware)


pytest.importorskip("pydantic_monty")


def test_eval_subagents_share_the_budget_of_the_tree() -> None:
    code = ("import asyncio\n"
            "answers = await asyncio.gather(*(task(f'part {k}', 'worker') for k in range(3)))\n"
            "answers")
    parent = ScriptedModel(replies=[sized(ai("", tool_call("eval", {"code": code})))],
                           policy=lambda r: sized("all done"))
    cap = FULL_COST // 2
    agent = create_deep_agent(
        parent,
        subagents=[{"name": "worker", "description": "does one part",
                    "model": ScriptedModel(policy=worker_script),
                    "tools": [meet_tool(asynchronous=True)]}],
        code_interpreter=True,
        budget=Budget(max_tokens=cap),
    )
    result = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))
    spent = result[BUDGET_KEY]["spent"]
    assert cap <= spent["total_tokens"] <= cap * 1.01 + CALL_TOKENS
    assert result[BUDGET_KEY]["agents"]["worker"]["calls"] >= SUBAGENTS
    evaluated = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert evaluated.text.count("Stopped before finishing") == SUBAGENTS
    assert result["messages"][-1].response_metadata["finish_reason"] == "budget"
