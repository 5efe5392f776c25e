"""One run per thread at a time: a second run on a busy thread is refused, none is lost.

Concurrency is proven with events, not timing: the first run blocks inside a tool until
the test releases it, and the second run is started while it is blocked.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from fathom import ThreadBusyError, create_deep_agent
from fathom.runs import thread_file_lock
from fathom.testing import ScriptedModel, ai, tool_call


def _blocking_agent(entered: threading.Event, release: threading.Event):
    @tool
    def block() -> str:
        """Wait until the test lets the run go on."""
        entered.set()
        assert release.wait(120), "the test never released the first run"  # bounds a hang
        return "unblocked"

    def policy(request):
        if request.last_human_text == "first" and not request.turn_results:
            return ai("", tool_call("block", {}))
        return "answer to " + request.last_human_text

    return create_deep_agent(ScriptedModel(policy=policy), tools=[block],
                             checkpointer=InMemorySaver())


def _say(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def _texts(agent, thread: str) -> list[str]:
    config = {"configurable": {"thread_id": thread}}
    return [m.text for m in agent.get_state(config).values["messages"]]


def test_second_run_on_a_busy_thread_is_refused_and_no_turn_is_lost() -> None:
    entered, release = threading.Event(), threading.Event()
    agent = _blocking_agent(entered, release)
    assert isinstance(agent, CompiledStateGraph)
    config = {"configurable": {"thread_id": "shared"}}
    failures: list[BaseException] = []

    def first_run() -> None:
        try:
            agent.invoke(_say("first"), config)
        except BaseException as error:  # reported by the assertion below
            failures.append(error)

    runner = threading.Thread(target=first_run)
    runner.start()
    try:
        assert entered.wait(60), "the first run never reached its tool"
        with pytest.raises(ThreadBusyError) as refused:
            agent.invoke(_say("second"), config)
        assert refused.value.thread_id == "shared"
        assert "busy" in str(refused.value) and "another thread_id" in str(refused.value)
        # streaming is refused the same way; another thread runs meanwhile
        with pytest.raises(ThreadBusyError):
            list(agent.stream(_say("second"), config))
        other = agent.invoke(_say("elsewhere"), {"configurable": {"thread_id": "other"}})
        assert other["messages"][-1].text == "answer to elsewhere"
    finally:
        release.set()
        runner.join(120)  # bounds a hang only
    assert not failures
    # the refused run wrote nothing; once the thread is free, the retry goes through
    assert _texts(agent, "shared") == ["first", "", "unblocked", "answer to first"]
    agent.invoke(_say("second"), config)
    assert _texts(agent, "shared")[-2:] == ["second", "answer to second"]


def test_async_runs_are_guarded_too() -> None:
    entered, release = threading.Event(), threading.Event()
    agent = _blocking_agent(entered, release)
    config = {"configurable": {"thread_id": "shared"}}

    async def scenario() -> None:
        first = asyncio.ensure_future(agent.ainvoke(_say("first"), config))
        assert await asyncio.to_thread(entered.wait, 60)
        with pytest.raises(ThreadBusyError):
            await agent.ainvoke(_say("second"), config)
        release.set()
        await first
        await agent.ainvoke(_say("second"), config)

    asyncio.run(scenario())
    assert _texts(agent, "shared") == [
        "first", "", "unblocked", "answer to first", "second", "answer to second"
    ]


def test_a_finished_or_failed_run_frees_its_thread() -> None:
    def policy(request):
        if request.last_human_text == "boom":
            raise RuntimeError("model down")
        return "ok " + request.last_human_text

    agent = create_deep_agent(ScriptedModel(policy=policy), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError, match="model down"):
        agent.invoke(_say("boom"), config)
    assert agent.invoke(_say("again"), config)["messages"][-1].text == "ok again"
    stream = agent.stream(_say("abandoned"), config)
    next(stream)
    stream.close()  # an abandoned stream releases the thread when closed
    assert agent.invoke(_say("last"), config)["messages"][-1].text == "ok last"


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fathom.runs import thread_file_lock
    with thread_file_lock(sys.argv[1], "t1"):
        Path(sys.argv[2]).write_text("held")
        time.sleep(600)
    """
)


def test_thread_file_lock_refuses_a_second_holder_and_dies_with_its_process(
    tmp_path: Path,
) -> None:
    locks = tmp_path / "locks"
    with thread_file_lock(locks, "t1"):
        with pytest.raises(ThreadBusyError, match="in another process"), thread_file_lock(
            locks, "t1"
        ):
            pass
        with thread_file_lock(locks, "t2"):  # another thread is free
            pass
    with thread_file_lock(locks, "t1"):  # released on exit
        pass

    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(locks), str(ready)])
    try:
        while not ready.exists():
            assert holder.poll() is None, "the lock holder exited early"
            threading.Event().wait(0.02)
        with pytest.raises(ThreadBusyError), thread_file_lock(locks, "t1"):
            pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    with thread_file_lock(locks, "t1"):  # a killed holder leaves no stale lock
        pass
    with thread_file_lock(locks, "../odd id/"):  # any id maps to a file inside locks/
        pass
    assert all(p.parent == locks for p in locks.iterdir())
