"""Host-side behaviour of the code's calls: the concurrency cap, the subagent stream
events, programmatic tool calls (off unless allowed), and the missing-package error."""

from __future__ import annotations

import asyncio
import builtins
import json

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from tests.middleware.code_interpreter.support import agent, eval_results, user


def counting_subagent(cap_reached_at: int, stats: dict[str, int]) -> RunnableLambda:
    """A subagent that records how many of its runs overlap; each run waits until
    `cap_reached_at` runs are in flight (or, later, goes straight through)."""
    reached = asyncio.Event()

    async def run(payload, config=None):
        stats["active"] += 1
        stats["peak"] = max(stats["peak"], stats["active"])
        if stats["active"] >= cap_reached_at:
            reached.set()
        await asyncio.wait_for(reached.wait(), 60)  # bounds a hang only
        for _ in range(5):
            await asyncio.sleep(0)  # let any other started run count itself
        stats["active"] -= 1
        text = payload["messages"][-1].content
        if text == "fail":
            raise RuntimeError("the tool broke")
        return {"messages": [AIMessage(f"ok {text}")]}

    return RunnableLambda(run)


GATHER9 = ("import asyncio\n"
           "await asyncio.gather(*(task(str(i), 'counter') for i in range(9)))")


async def test_the_host_caps_how_many_subagents_run_at_once():
    stats = {"active": 0, "peak": 0}
    specs = [{"name": "counter", "description": "c", "runnable": counting_subagent(3, stats)}]
    graph, _ = agent([GATHER9], subagents=specs,
                     code_interpreter={"limits": {"max_concurrency": 3}})
    (message,) = eval_results(await graph.ainvoke(user()))
    assert json.loads(message.text) == [f"ok {i}" for i in range(9)]
    assert stats["peak"] == 3


async def test_subagent_start_complete_and_error_stream_as_custom_events():
    stats = {"active": 0, "peak": 0}
    specs = [{"name": "counter", "description": "c", "runnable": counting_subagent(1, stats)}]
    code = ("try:\n    await task('fail', 'counter', label='bad')\nexcept RuntimeError as e:\n"
            "    err = str(e)\nok = await task('fine', 'counter', label='good')\n[ok, err]")
    graph, _ = agent([code], subagents=specs)
    events = [chunk async for chunk in graph.astream(user(), stream_mode="custom")]
    seen = [(e["event"], e["label"], e["subagent_type"]) for e in events
            if isinstance(e, dict) and e.get("type") == "subagent"]
    assert seen == [("start", "bad", "counter"), ("error", "bad", "counter"),
                    ("start", "good", "counter"), ("complete", "good", "counter")]
    error = next(e for e in events if e.get("event") == "error")
    assert "the tool broke" in error["error"] and error["tool_call_id"] == "eval_0"


@tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


async def test_allowed_tools_are_callable_from_code_and_others_are_not():
    code = ("a = await tools.lookup(key='k1')\n"
            "try:\n    tools.other\n    b = 'reachable'\nexcept AttributeError:\n"
            "    b = 'not allowed'\n[a, b]")
    graph, _ = agent([code], tools=[lookup], code_interpreter={"ptc": ["lookup"]})
    (message,) = eval_results(await graph.ainvoke(user()))
    assert json.loads(message.text) == ["value of k1", "not allowed"]


async def test_tools_are_off_by_default():
    graph, _ = agent(["await tools.lookup(key='k1')"], tools=[lookup])
    (message,) = eval_results(await graph.ainvoke(user()))
    assert message.status == "error" and "NameError" in message.text


def test_ptc_naming_a_tool_the_agent_lacks_is_refused():
    with pytest.raises(ValueError, match="'nope'"):
        agent(["1"], tools=[lookup], code_interpreter={"ptc": ["nope"]})


def test_code_interpreter_without_pydantic_monty_names_the_install_command(monkeypatch):
    real_import = builtins.__import__

    def no_monty(name, *args, **kwargs):
        if name.startswith("pydantic_monty"):
            raise ImportError("No module named 'pydantic_monty'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_monty)
    with pytest.raises(ImportError, match=r"pip install 'fathom\[code\]'"):
        agent(["1"])


async def test_the_cli_shows_the_codes_subagents_as_task_calls():
    from fathom.project.events import EventTranslator, ToolFinished, ToolStarted

    stats = {"active": 0, "peak": 0}
    specs = [{"name": "counter", "description": "c", "runnable": counting_subagent(1, stats)}]
    code = ("try:\n    await task('fail', 'counter', label='bad')\nexcept RuntimeError:\n"
            "    pass\nawait task('fine', 'counter', label='good')")
    graph, _ = agent([code], subagents=specs)
    translator = EventTranslator()
    events = [event async for namespace, mode, data in graph.astream(
        user(), stream_mode=["updates", "custom"], subgraphs=True)
        for event in translator.translate(namespace, mode, data)]  # fmt: skip
    started = [e for e in events if isinstance(e, ToolStarted) and e.name == "task"]
    finished = [e for e in events if isinstance(e, ToolFinished) and e.name == "task"]
    assert [(e.args["description"], e.args["subagent_type"]) for e in started] == [
        ("bad", "counter"), ("good", "counter")]
    assert [(e.call_id, e.is_error) for e in finished] == [
        (started[0].call_id, True), (started[1].call_id, False)]
    assert started[0].call_id != started[1].call_id
