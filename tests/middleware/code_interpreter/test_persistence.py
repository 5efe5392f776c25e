"""How long the code's variables live: `thread`, `turn` and `call`, checkpointed with the
thread (a second agent on the same SQLite file keeps them)."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from tests.middleware.code_interpreter.support import agent, eval_results, user

from fathom.testing import ai

DEFINE = "counter = 41\ndef bump(n):\n    return n + 1\n'defined'"
USE = "try:\n    r = bump(counter)\nexcept NameError:\n    r = 'forgotten'\nr"


@pytest.mark.parametrize(
    ("persistence", "same_turn", "next_turn"),
    [("thread", "42", "42"), ("turn", "42", "forgotten"), ("call", "forgotten", "forgotten")],
)
async def test_persistence_mode_decides_which_evals_see_earlier_variables(
    tmp_path, persistence, same_turn, next_turn
):
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        graph, _ = agent([DEFINE, USE, ai("turn one done"), USE], checkpointer=saver,
                         code_interpreter={"persistence": persistence})
        config = {"configurable": {"thread_id": "t"}}
        # turn 1: define, then use in the same turn (the model calls eval twice)
        first = await graph.ainvoke(user(), config)
        assert [m.text for m in eval_results(first)] == ["defined", same_turn]
        second = await graph.ainvoke(user("again"), config)
        assert eval_results(second)[-1].text == next_turn


async def test_a_resumed_thread_keeps_its_variables_in_a_new_agent_instance(tmp_path):
    path = str(tmp_path / "t.db")
    config = {"configurable": {"thread_id": "t"}}
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        graph, _ = agent([DEFINE], checkpointer=saver)
        await graph.ainvoke(user(), config)
        state = await graph.aget_state(config)
        assert isinstance(state.values.get("code_interpreter_session"), bytes)
    async with AsyncSqliteSaver.from_conn_string(path) as saver:  # a new process's view
        graph, _ = agent([USE], checkpointer=saver)
        result = await graph.ainvoke(user("later"), config)
        assert eval_results(result)[-1].text == "42"
