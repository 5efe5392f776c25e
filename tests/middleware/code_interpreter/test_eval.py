"""The `eval` tool: values, printed output, subagents through `task()`, and bad code."""

from __future__ import annotations

import json

import pytest
from tests.middleware.code_interpreter.support import agent, echo_model, eval_results, user


async def test_eval_returns_the_last_expression_and_the_printed_output():
    graph, _ = agent(["x = 6 * 7\nprint('working')\n{'answer': x}"])
    result = await graph.ainvoke(user())
    (message,) = eval_results(result)
    assert message.status != "error"
    assert message.text == 'working\n{"answer": 42}'


async def test_gathered_tasks_run_the_real_subagents_in_one_eval():
    code = (
        "import asyncio\n"
        "items = ['a', 'b', 'c']\n"
        "answers = await asyncio.gather(*(task(f'item {i}', 'worker', label=i) for i in items))\n"
        "answers"
    )
    graph, main = agent([code])
    result = await graph.ainvoke(user())
    (message,) = eval_results(result)
    assert json.loads(message.text) == ["done: item a", "done: item b", "done: item c"]
    assert len(main.requests) == 2  # one eval, one final answer


async def test_an_unknown_subagent_type_raises_inside_the_code_where_it_can_be_caught():
    code = (
        "try:\n    await task('x', 'nobody')\n    r = 'no error'\n"
        "except ValueError as e:\n    r = 'caught: ' + str(e)\nr"
    )
    graph, _ = agent([code])
    (message,) = eval_results(await graph.ainvoke(user()))
    assert message.text.startswith("caught: task(): there is no subagent called 'nobody'")
    assert "worker" in message.text


async def test_response_schema_gives_a_validated_object():
    from fathom.testing import ScriptedModel

    sub = ScriptedModel(policy=lambda req: '{"label": "spam", "score": 0.9}'
                        if "spam" in req.last_human_text else '{"label": 3}')
    schema = {"type": "object", "required": ["label"],
              "properties": {"label": {"type": "string"}, "score": {"type": "number"}}}
    code = (
        f"schema = {schema!r}\n"
        "good = await task('is this spam?', 'worker', response_schema=schema)\n"
        "try:\n    await task('other', 'worker', response_schema=schema)\n    bad = None\n"
        "except ValueError as e:\n    bad = str(e)\n"
        "[good['label'], good['score'], bad]"
    )
    graph, _ = agent([code], sub=sub)
    (message,) = eval_results(await graph.ainvoke(user()))
    label, score, bad = json.loads(message.text)
    assert (label, score) == ("spam", 0.9)
    assert "does not match response_schema" in bad and "$.label" in bad


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        ("def broken(:\n  pass", "SyntaxError"),
        ("1 / 0", "ZeroDivisionError"),
        ("while True:\n    pass", "TimeoutError"),
        ("x = [0] * 10_000_000", "MemoryError"),
        ("import os\nos.listdir('/')", "PermissionError"),
        ("import socket", "ModuleNotFoundError"),
        ("import subprocess", "ModuleNotFoundError"),
        ("open('/etc/passwd').read()", "PermissionError"),
        ("__import__('os')", "NameError"),
        ("getattr(print, '__globals__')", "AttributeError"),
        ("().__class__.__bases__[0].__subclasses__()", "AttributeError"),
        ("globals()", "NameError"),
        ("import asyncio\nawait asyncio.gather(*(task(str(i), 'worker') for i in range(10_000)))",
         "HostCallLimitError"),
    ],
)
async def test_bad_code_is_a_tool_error_naming_the_cause_and_the_run_goes_on(code, cause):
    # Only the endless loop gets a short time limit: code that must fail for another cause
    # (or run) gets one that merely bounds a hang, so a loaded machine cannot turn its error
    # into a TimeoutError.
    timeout_s = 0.5 if cause == "TimeoutError" else 60
    graph, main = agent(
        [code, "'still alive'"],
        code_interpreter={"limits": {"timeout_s": timeout_s, "max_memory_bytes": 5_000_000,
                                     "max_host_calls": 100}},
    )
    result = await graph.ainvoke(user())
    first, second = eval_results(result)
    assert first.status == "error"
    assert cause in first.text, first.text
    assert second.text == "still alive"
    assert result["messages"][-1].text == "final: still alive"
    assert len(main.requests) == 3


async def test_the_codes_subagents_are_counted_in_the_usage_under_their_own_names():
    from fathom.usage import AgentUsage

    code = "import asyncio\nawait asyncio.gather(*(task(str(i), 'worker') for i in range(3)))"
    graph, _ = agent([code])
    usage = AgentUsage()
    await graph.ainvoke(user(), {"callbacks": [usage]})
    calls = {name: t.calls for name, t in usage.totals().items()}
    assert calls == {"(unnamed agent)": 2, "worker": 3}


async def test_files_written_by_the_codes_subagents_come_back_to_the_agent():
    from fathom.testing import ScriptedModel, ai, tool_call

    def policy(req):
        if not req.tool_results:
            name = req.last_human_text
            return ai("", tool_call("write_file", {"file_path": f"/{name}.md", "content": name}))
        return "written"

    code = "import asyncio\nawait asyncio.gather(task('a', 'worker'), task('b', 'worker'))"
    graph, _ = agent([code], sub=ScriptedModel(policy=policy))
    result = await graph.ainvoke(user())
    assert {p: f["content"] for p, f in result["files"].items()} == {"/a.md": "a", "/b.md": "b"}


async def test_ten_thousand_task_calls_stop_at_the_default_host_call_limit_before_any_runs():
    sub = echo_model()
    code = "import asyncio\nawait asyncio.gather(*(task(str(i), 'worker') for i in range(10_000)))"
    graph, _ = agent([code, "'after'"], sub=sub)
    first, second = eval_results(await graph.ainvoke(user()))
    assert first.status == "error" and "more than 1000 task()/tools calls" in first.text
    assert second.text == "after"
    assert sub.requests == []  # refused before dispatching: no subagent ran
