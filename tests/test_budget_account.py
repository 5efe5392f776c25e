"""The budget account: what admits a model call, what it counts, and what it keeps.

Real `BudgetAccount`s counting real (scripted) chat-model calls through LangChain's
callbacks; concurrency is shown with threads and tasks, never with timing.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.messages import AIMessage

from fathom.budget import (
    Budget,
    BudgetAccount,
    BudgetError,
    Ticket,
    budget_summary,
    current_grant,
    merge_budget_state,
)
from fathom.testing import ScriptedModel


def sized(tokens: int = 1_000) -> AIMessage:
    message = AIMessage(content="x")
    message.usage_metadata = {"input_tokens": tokens - 100, "output_tokens": 100,
                              "total_tokens": tokens}
    return message


def started(budget: Budget) -> BudgetAccount:
    account = BudgetAccount(budget)
    account.begin_run(object())
    return account


async def call(account: BudgetAccount, ticket: Ticket, model: ScriptedModel) -> None:
    try:
        with account.active(ticket):
            await model.ainvoke("q")
    finally:
        account.release(ticket)


async def test_a_call_waits_while_the_calls_in_flight_could_carry_the_tree_past_the_cap():
    account = started(Budget(max_tokens=2_500))
    model = ScriptedModel(policy=lambda r: sized())
    first = await account.aadmit()
    assert isinstance(first, Ticket)
    await call(account, first, model)  # 1,000 tokens: the largest call so far
    second = await account.aadmit()
    assert isinstance(second, Ticket)
    # 1,000 spent, one call in flight: two more calls of 1,000 could reach 3,000 > 2,500
    waiting = asyncio.create_task(account.aadmit())
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiting.done()
    await call(account, second, model)  # 2,000 spent, nothing in flight: it may start
    third = await waiting
    assert isinstance(third, Ticket)
    await call(account, third, model)
    assert await account.aadmit() == "max_tokens"
    assert account.used()["max_tokens"] == 3_000  # the cap plus one call, not more


def test_parallel_callers_get_exactly_the_model_calls_the_cap_allows():
    account = started(Budget(max_model_calls=5))
    gate = threading.Barrier(8, timeout=30)
    decisions: list[Ticket | str] = []
    lock = threading.Lock()

    def caller() -> None:
        gate.wait()
        decision = account.admit()
        with lock:
            decisions.append(decision)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(d, Ticket) for d in decisions) == 5
    assert decisions.count("max_model_calls") == 3


def test_model_calls_below_an_active_account_are_counted_by_agent_and_priced():
    budget = Budget(prices={"scriptedmodel:scripted": (1.0, 10.0)})
    account = started(budget)
    model = ScriptedModel(policy=lambda r: sized(), model_name="scripted")
    with account.active():
        model.invoke("a", config={"metadata": {"lc_agent_name": "researcher"}})
    model.invoke("b")  # outside: not counted
    snapshot = account.snapshot()
    assert snapshot["spent"]["calls"] == 1 and snapshot["spent"]["total_tokens"] == 1_000
    assert snapshot["agents"]["researcher"]["calls"] == 1
    assert snapshot["spent"]["usd"] == pytest.approx((900 * 1.0 + 100 * 10.0) / 1e6)
    assert snapshot["unpriced"] == []


def test_a_ticket_whose_call_never_happens_is_not_counted():
    account = started(Budget(max_model_calls=1))
    ticket = account.admit()
    assert isinstance(ticket, Ticket)
    account.release(ticket)  # the model was never called (a middleware answered instead)
    assert account.used()["max_model_calls"] == 0
    assert isinstance(account.admit(), Ticket)


def test_a_snapshot_restores_the_spend_and_reported_tasks_are_not_counted_twice():
    account = started(Budget(max_tokens=100_000))
    model = ScriptedModel(policy=lambda r: sized())
    with account.active():
        model.invoke("a")
    account.record_task("task-1", "researcher", 3, 2_000, 400)
    snapshot = account.snapshot()
    assert snapshot["spent"]["calls"] == 4 and snapshot["spent"]["total_tokens"] == 3_400

    restored = BudgetAccount(Budget(max_tokens=100_000), snapshot)
    restored.begin_run(object())
    restored.record_task("task-1", "researcher", 3, 2_000, 400)  # the same report again
    assert restored.snapshot()["spent"]["total_tokens"] == 3_400
    restored.record_task("task-1", "researcher", 5, 3_000, 600)  # the task went on
    assert restored.snapshot()["spent"]["total_tokens"] == 4_600
    assert restored.snapshot()["tasks"]["task-1"]["agent"] == "researcher"


def test_the_channel_keeps_the_larger_figures_of_two_snapshots():
    older = {"spent": {"calls": 3, "input_tokens": 300, "output_tokens": 30, "usd": 0.1,
                       "wall_s": 2.0}, "agents": {"a": {"calls": 3}}, "reached": None,
             "limits": {"max_tokens": 10}}
    newer = {"spent": {"calls": 2, "input_tokens": 400, "output_tokens": 10, "usd": 0.0,
                       "wall_s": 1.0}, "agents": {"b": {"calls": 1}}, "reached": "max_tokens",
             "limits": {"max_tokens": 20}}
    merged = merge_budget_state(older, newer)
    assert merged["spent"] == {"calls": 3, "input_tokens": 400, "output_tokens": 30,
                               "usd": 0.1, "wall_s": 2.0, "total_tokens": 430}
    assert set(merged["agents"]) == {"a", "b"}
    assert merged["reached"] == "max_tokens" and merged["limits"] == {"max_tokens": 20}
    assert merge_budget_state(older, None) is None


def test_the_grant_for_an_async_subagent_is_what_is_left():
    account = started(Budget(max_tokens=5_000, max_model_calls=4))
    model = ScriptedModel(policy=lambda r: sized())
    assert current_grant() is None
    with account.active():
        model.invoke("a")
        assert current_grant() == {"max_tokens": 4_000, "max_model_calls": 3}


@pytest.mark.parametrize("caps, message", [
    ({"max_tokens": -1}, "max_tokens=-1"),
    ({"max_model_calls": 2.5}, "whole"),
    ({"max_usd": True}, "max_usd=True"),
])
def test_a_bad_cap_is_refused_with_its_name(caps: dict[str, object], message: str):
    with pytest.raises(BudgetError, match=message):
        Budget(**caps)  # type: ignore[arg-type]


def test_a_mapping_with_an_unknown_key_is_refused_naming_where_it_came_from():
    with pytest.raises(BudgetError, match=r"fathom.toml \[budget\]: unknown key.*max_token\b"):
        Budget.from_mapping({"max_token": 5}, where="fathom.toml [budget]")


def test_overrides_replace_caps_and_none_turns_one_off():
    budget = Budget(max_tokens=10, max_model_calls=2)
    merged = budget.merged({"max_tokens": 50, "max_model_calls": None})
    assert merged.caps() == {"max_tokens": 50}


def test_the_summary_line_shows_spend_against_each_cap():
    snapshot = {"spent": {"calls": 4, "input_tokens": 900, "output_tokens": 100, "usd": 0.5,
                          "wall_s": 3.0},
                "limits": {"max_tokens": 2_000, "max_usd": 1.0}, "reached": None}
    line = budget_summary(snapshot)
    assert line == ("budget: tokens 1,000 of 2,000 (50%) · model calls 4 (no cap) · "
                    "USD $0.5000 of $1.0000 (50%)")
    assert budget_summary({**snapshot, "reached": "max_usd"}).endswith("reached: cost cap")
    assert budget_summary(None) is None
