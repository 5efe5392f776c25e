"""`eval` under a plain sync `invoke`, and `ptc` naming the agent's built-in tools."""

from __future__ import annotations

import json
import threading

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.testing import ScriptedModel

from .support import agent, eval_call, eval_results, user


def test_a_sync_invoke_runs_eval_and_returns_its_value():
    graph, _ = agent(["print('hi')\n40 + 2"])
    (message,) = eval_results(graph.invoke(user()))
    assert message.status != "error"
    assert message.text == "hi\n42"


def test_a_sync_invoke_runs_the_codes_subagents():
    code = ("import asyncio\n"
            "r = await asyncio.gather(task('a', 'worker'), task('b', 'worker'))\nr")
    graph, _ = agent([code])
    (message,) = eval_results(graph.invoke(user()))
    assert json.loads(message.text) == ["done: a", "done: b"]


def test_sync_eval_keeps_its_variables_across_turns_of_a_checkpointed_thread():
    main = ScriptedModel(replies=[eval_call("x = 5\nx", id="e1"), "ok",
                                  eval_call("x * 2", id="e2"), "ok"])
    graph = create_deep_agent(main, code_interpreter=True, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke(user("one"), config)
    result = graph.invoke(user("two"), config)
    assert [m.text for m in eval_results(result)] == ["5", "10"]


def test_sync_eval_runs_on_the_worker_loop_not_the_callers_thread():
    seen: list[str] = []

    @tool
    def where() -> str:
        """Names the thread the tool runs on."""
        seen.append(threading.current_thread().name)
        return "here"

    graph, _ = agent(["await tools.where()"], tools=[where], code_interpreter={"ptc": ["where"]})
    (message,) = eval_results(graph.invoke(user()))
    assert message.text == "here"
    assert seen and seen[0] != threading.current_thread().name


def test_ptc_may_name_built_in_tools_and_the_code_reads_a_file():
    main = ScriptedModel(replies=[
        eval_call("await tools.write_file(file_path='/a.txt', content='alpha')", id="w"),
        eval_call("await tools.read_file(file_path='/a.txt')", id="r"),
    ], policy=lambda req: "end")
    graph = create_deep_agent(main, code_interpreter={"ptc": ["read_file", "write_file"]})
    result = graph.invoke(user())
    written, read = eval_results(result)
    assert written.status != "error" and read.status != "error"
    assert "alpha" in read.text


def test_ptc_naming_an_unknown_tool_lists_the_tools_the_agent_has():
    with pytest.raises(ValueError) as raised:
        create_deep_agent(ScriptedModel(replies=["x"]), code_interpreter={"ptc": ["nope"]})
    text = str(raised.value)
    assert "'nope'" in text and "(none)" not in text
    for name in ("read_file", "write_file", "ls", "write_todos", "task"):
        assert name in text
