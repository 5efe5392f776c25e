"""A step whose tasks all saved their writes, but whose checkpoint was not saved, is finished.

The state, produced without a kill or any timing: a checkpointer whose `put` raises (a
stand-in for `kill -9`) when the checkpoint of one step is to be saved, after LangGraph has
saved every task's writes of that step with `put_writes`. In that state LangGraph's
`snapshot.next` is empty (it lists only the tasks without saved writes), `snapshot.tasks`
still holds the step's tasks with their results, and new input would drop those writes.
`has_unfinished_step` must read it as unfinished, and `finish_pending_step` must keep the
writes: `invoke(None)` applies them and goes on, running no task twice.

Savers: the real SQLite savers (sync and async) and `InMemorySaver`.
"""

from __future__ import annotations

import operator
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict, cast

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from fathom import create_deep_agent
from fathom.runs import afinish_pending_step, finish_pending_step, has_unfinished_step
from fathom.testing import ScriptedModel, ai, tool_call

THREAD: Any = {"configurable": {"thread_id": "t"}}
FAN_OUT_STEP = 1  # step 0 is `__start__`; step 1 runs `a` and `b` in parallel


class SimulatedKill(Exception):
    """Raised by a dying saver instead of saving a checkpoint: the process 'died' there."""


class _Dying:
    """Mixin for a real saver: refuses to save one checkpoint, as if the process died first.

    `die_at` names the step whose checkpoint is refused; `armed` refuses the next one.
    Everything else (put_writes included) goes to the real saver.
    """

    die_at: int | None = None
    armed = False

    def _dies(self, metadata: Any) -> bool:
        if self.armed or metadata.get("step") == self.die_at:
            self.armed, self.die_at = False, None
            return True
        return False

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self._dies(metadata):
            raise SimulatedKill
        return super().put(config, checkpoint, metadata, new_versions)  # pyright: ignore[reportAttributeAccessIssue]

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self._dies(metadata):
            raise SimulatedKill
        return await super().aput(config, checkpoint, metadata, new_versions)  # pyright: ignore[reportAttributeAccessIssue]


class DyingSqliteSaver(_Dying, SqliteSaver):
    """`SqliteSaver` that can refuse one checkpoint."""


class DyingAsyncSqliteSaver(_Dying, AsyncSqliteSaver):
    """`AsyncSqliteSaver` that can refuse one checkpoint."""


class DyingMemorySaver(_Dying, InMemorySaver):
    """`InMemorySaver` that can refuse one checkpoint."""


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def _fan_out(saver: Any, calls: Counter[str], *, ask_in_b: bool = False) -> Any:
    """START -> `a` and `b` in parallel -> `c`; each node counts its calls and logs its name.

    With `ask_in_b`, `b` waits on an approval (`interrupt`) before it logs.
    """

    def node(name: str) -> Any:  # a node function, typed loosely for `add_node`
        def run(state: Log) -> dict[str, list[str]]:
            calls[name] += 1
            if ask_in_b and name == "b":
                interrupt("approve b?")
            return {"log": [name]}

        return run

    graph = StateGraph(Log)
    for name in "abc":
        graph.add_node(name, node(name))
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    graph.add_edge(["a", "b"], "c")
    graph.add_edge("c", END)
    return graph.compile(checkpointer=saver)


@pytest.fixture(params=["sqlite", "memory"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Dying]:
    if request.param == "memory":
        yield DyingMemorySaver()
        return
    conn = sqlite3.connect(tmp_path / "threads.db", check_same_thread=False)
    try:
        yield DyingSqliteSaver(conn)
    finally:
        conn.close()


@pytest.fixture(params=["sqlite", "memory"])
async def asaver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[_Dying]:
    if request.param == "memory":
        yield DyingMemorySaver()
        return
    async with DyingAsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.db")) as real:
        yield cast("DyingAsyncSqliteSaver", real)  # `from_conn_string` builds this class


def _kill_after_fan_out(graph: Any, saver: _Dying, calls: Counter[str]) -> None:
    saver.die_at = FAN_OUT_STEP
    with pytest.raises(SimulatedKill):
        graph.invoke({"log": ["in"]}, THREAD, durability="sync")
    assert calls == Counter(a=1, b=1)  # both tasks ran and returned; `c` never started


def _assert_all_written_but_not_checkpointed(snapshot: Any) -> None:
    """The exact state of the bug: every task has its result, `next` is empty."""
    assert snapshot.metadata["step"] == FAN_OUT_STEP - 1  # the step's checkpoint is missing
    assert snapshot.next == ()  # what the old rule read: "nothing to finish"
    assert sorted((t.name, t.result) for t in snapshot.tasks) == [
        ("a", {"log": ["a"]}),
        ("b", {"log": ["b"]}),
    ]
    assert all(not t.interrupts and t.error is None for t in snapshot.tasks)
    assert has_unfinished_step(snapshot)


def test_every_task_written_step_not_saved_is_finished_keeping_the_writes(saver: _Dying) -> None:
    calls: Counter[str] = Counter()
    graph = _fan_out(saver, calls)
    _kill_after_fan_out(graph, saver, calls)
    _assert_all_written_but_not_checkpointed(graph.get_state(THREAD))

    assert finish_pending_step(graph, THREAD, durability="sync") is True

    assert calls == Counter(a=1, b=1, c=1)  # the saved writes were used, not re-run
    after = graph.get_state(THREAD)
    assert after.values["log"] == ["in", "a", "b", "c"]
    assert not has_unfinished_step(after) and after.tasks == ()
    # the next message sees the finished step
    out = graph.invoke({"log": ["next"]}, THREAD, durability="sync")
    assert out["log"][:5] == ["in", "a", "b", "c", "next"]


def test_new_input_without_finishing_drops_the_written_tasks(saver: _Dying) -> None:
    """Why the state matters: LangGraph discards the step's saved writes on new input."""
    calls: Counter[str] = Counter()
    graph = _fan_out(saver, calls)
    _kill_after_fan_out(graph, saver, calls)

    out = graph.invoke({"log": ["next"]}, THREAD, durability="sync")

    assert out["log"][:2] == ["in", "next"]  # the first `a` and `b` are gone


async def test_async_finish_keeps_the_writes(asaver: _Dying) -> None:
    calls: Counter[str] = Counter()
    graph = _fan_out(asaver, calls)
    asaver.die_at = FAN_OUT_STEP
    with pytest.raises(SimulatedKill):
        await graph.ainvoke({"log": ["in"]}, THREAD, durability="sync")
    assert calls == Counter(a=1, b=1)
    _assert_all_written_but_not_checkpointed(await graph.aget_state(THREAD))

    assert await afinish_pending_step(graph, THREAD, durability="sync") is True

    assert calls == Counter(a=1, b=1, c=1)
    after = await graph.aget_state(THREAD)
    assert after.values["log"] == ["in", "a", "b", "c"]
    assert not has_unfinished_step(after)


def test_a_task_waiting_on_an_interrupt_is_not_unfinished(saver: _Dying) -> None:
    """`a` finished and `b` waits for an approval: answer it, do not re-run the step."""
    calls: Counter[str] = Counter()
    graph = _fan_out(saver, calls, ask_in_b=True)
    graph.invoke({"log": ["in"]}, THREAD, durability="sync")
    snapshot = graph.get_state(THREAD)
    waiting = {t.name: bool(t.interrupts) for t in snapshot.tasks}
    assert waiting == {"a": False, "b": True}
    assert snapshot.next == ("b",)

    assert not has_unfinished_step(snapshot)
    assert finish_pending_step(graph, THREAD) is False  # waits for the approval
    assert calls == Counter(a=1, b=1)  # nothing was run again


async def test_async_a_task_waiting_on_an_interrupt_is_not_unfinished(asaver: _Dying) -> None:
    calls: Counter[str] = Counter()
    graph = _fan_out(asaver, calls, ask_in_b=True)
    await graph.ainvoke({"log": ["in"]}, THREAD, durability="sync")

    assert not has_unfinished_step(await graph.aget_state(THREAD))
    assert await afinish_pending_step(graph, THREAD) is False
    assert calls == Counter(a=1, b=1)


def test_a_finished_run_and_a_new_thread_have_nothing_to_finish(saver: _Dying) -> None:
    calls: Counter[str] = Counter()
    graph = _fan_out(saver, calls)
    assert not has_unfinished_step(graph.get_state(THREAD))  # no checkpoint yet
    assert finish_pending_step(graph, THREAD) is True
    graph.invoke({"log": ["in"]}, THREAD, durability="sync")

    assert not has_unfinished_step(graph.get_state(THREAD))
    assert finish_pending_step(graph, THREAD) is True
    assert calls == Counter(a=1, b=1, c=1)


def test_deep_agent_keeps_a_written_file_when_every_tool_saved_its_result(
    tmp_path: Path,
) -> None:
    """The `fathom` case: both tools of a step returned, the step's checkpoint was lost."""
    conn = sqlite3.connect(tmp_path / "threads.db", check_same_thread=False)
    saver = DyingSqliteSaver(conn)
    counted: list[str] = []

    @tool
    def count() -> str:
        """Record one call."""
        counted.append("x")
        saver.armed = True  # the step's checkpoint, saved after both tools return, is lost
        return "counted"

    def policy(request: Any) -> Any:
        if request.last_human_text == "go" and not request.turn_results:
            return ai(
                "",
                tool_call("write_file", {"file_path": "/done.txt", "content": "kept"}),
                tool_call("count", {}),
            )
        return "ok: " + request.last_human_text

    agent = create_deep_agent(ScriptedModel(policy=policy), tools=[count], checkpointer=saver)
    try:
        with pytest.raises(SimulatedKill):
            agent.invoke(
                {"messages": [{"role": "user", "content": "go"}]}, THREAD, durability="sync"
            )
        snapshot = agent.get_state(THREAD)
        assert snapshot.next == ()
        assert {t.name for t in snapshot.tasks} == {"tools"}
        assert all(t.result is not None for t in snapshot.tasks)
        assert has_unfinished_step(snapshot)

        assert finish_pending_step(agent, THREAD, durability="sync") is True
        out = agent.invoke(
            {"messages": [{"role": "user", "content": "next"}]}, THREAD, durability="sync"
        )
    finally:
        conn.close()

    assert out["files"]["/done.txt"]["content"] == "kept"
    results = {m.name: m.text for m in out["messages"] if m.type == "tool"}
    assert results == {"write_file": "Updated file /done.txt", "count": "counted"}
    assert [m.text for m in out["messages"] if m.type == "human"] == ["go", "next"]
    assert out["messages"][-1].text == "ok: next"
    assert counted == ["x"]  # the tool that had saved its result did not run again
