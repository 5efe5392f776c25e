"""An approval inside a subagent that the code started pauses the code durably: after the
decision the code continues from its snapshot, without replaying itself or re-running
the subagents that had finished."""

from __future__ import annotations

import json

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from tests.middleware.code_interpreter.support import echo_model, eval_call, eval_results, user

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

CODE = """import asyncio
await tools.tick()
first = await asyncio.gather(task('one', 'worker'), task('two', 'worker'),
                             task('write the report', 'writer', label='report'))
second = await task('three', 'worker')
[first, second]
"""


def writer_model() -> ScriptedModel:
    def policy(req):
        if not req.tool_results:
            return ai("", tool_call("write_file", {"file_path": "/report.md", "content": "R"}))
        return "report written"

    return ScriptedModel(policy=policy)


def build(worker: ScriptedModel, writer: ScriptedModel, ticks: list[int], **options):
    @tool
    def tick() -> str:
        """Counts how often the code reaches its first line."""
        ticks.append(1)
        return "tick"

    main = ScriptedModel(replies=[eval_call(CODE)],
                         policy=lambda req: f"final: {req.tool_results[-1].text}")
    graph = create_deep_agent(
        main,
        tools=[tick],
        subagents=[
            {"name": "worker", "description": "w", "system_prompt": "w", "model": worker},
            {"name": "writer", "description": "r", "system_prompt": "r", "model": writer,
             "interrupt_on": {"write_file": True}},
        ],
        general_purpose_subagent=False,
        checkpointer=InMemorySaver(),
        code_interpreter={"ptc": ["tick"], **options},
    )
    return graph, main


@pytest.mark.parametrize("options", [{}, {"snapshot_signing_key": "k"}], ids=["plain", "signed"])
async def test_an_approval_in_a_code_subagent_resumes_the_code_without_replaying_it(options):
    worker, writer, ticks = echo_model(), writer_model(), []
    graph, main = build(worker, writer, ticks, **options)
    config = {"configurable": {"thread_id": "t"}}

    paused = await graph.ainvoke(user(), config, version="v2")
    (pending,) = paused.interrupts
    (request,) = pending.value["action_requests"]
    assert request["name"] == "write_file"
    assert (len(worker.requests), len(writer.requests), len(ticks)) == (2, 1, 1)

    done = (await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config,
                                version="v2")).value
    (message,) = eval_results(done)
    assert json.loads(message.text) == [
        ["done: one", "done: two", "report written"], "done: three"]
    # finished subagents were not run again, the code was not replayed: one more worker
    # call (task 'three'), one more writer call (after the approval), no second tick
    assert (len(worker.requests), len(writer.requests), len(ticks)) == (3, 2, 1)
    assert done["files"]["/report.md"]["content"] == "R"
    assert len(main.requests) == 2
