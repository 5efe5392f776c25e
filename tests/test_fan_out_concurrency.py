"""Subagents started in one message run at the same time, sync and async.

Each subagent's model waits at a `Rendezvous` of N parties: a call goes on only once N
subagent calls are waiting at once, so the run finishes only if all N subagents ran
concurrently (otherwise the rendezvous times out and the run fails). No test times
anything.

The sync `invoke` path uses N = 40, above the largest thread pool LangGraph would use by
default (Python's min(32, cores + 4)), so it fails on any machine unless the agent raises
`max_concurrency` itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import HumanMessage

from fathom import create_deep_agent
from fathom.agent import MAX_CONCURRENCY
from fathom.server import create_app, in_process_client
from fathom.testing import Rendezvous, ScriptedModel, ScriptRequest, ai, tool_call

PROMPT = "Hand every part to a worker."


def _first_human(request: ScriptRequest) -> str:
    return next((str(m.text) for m in request.messages if isinstance(m, HumanMessage)), "")


def _parent(n: int, tool: str) -> ScriptedModel:
    """The parent: N `tool` calls to the worker in one message, then an answer."""

    def policy(request: ScriptRequest) -> Any:
        if _first_human(request) != PROMPT or any(m.type == "ai" for m in request.messages):
            return "done"
        return ai("", *(tool_call(tool, {"description": f"part {k}", "subagent_type": "worker"})
                        for k in range(n)))  # fmt: skip

    return ScriptedModel(policy=policy)


def _worker_model(meet: Rendezvous) -> ScriptedModel:
    return ScriptedModel(policy=lambda req: f"{req.last_human_text} done", rendezvous=meet)


def _task_agent(n: int, meet: Rendezvous) -> Any:
    worker = {"name": "worker", "description": "does one part", "system_prompt": "Do it.",
              "model": _worker_model(meet)}
    return create_deep_agent(_parent(n, "task"), subagents=[worker])


def _answers(result: dict[str, Any]) -> list[str]:
    return sorted(str(m.text) for m in result["messages"] if m.type == "tool")


def test_forty_task_calls_run_their_subagents_at_once_under_invoke() -> None:
    n = 40
    assert n <= MAX_CONCURRENCY
    meet = Rendezvous(n, timeout=60)
    result = _task_agent(n, meet).invoke({"messages": [HumanMessage(PROMPT)]})
    assert _answers(result) == sorted(f"part {k} done" for k in range(n))
    assert meet.max_in_flight == n and meet.groups == 1


async def test_sixteen_task_calls_run_their_subagents_at_once_under_ainvoke() -> None:
    n = 16
    meet = Rendezvous(n, timeout=60)
    result = await _task_agent(n, meet).ainvoke({"messages": [HumanMessage(PROMPT)]})
    assert _answers(result) == sorted(f"part {k} done" for k in range(n))
    assert meet.max_in_flight == n and meet.groups == 1


async def test_sixteen_async_subagents_on_one_server_call_their_models_at_once() -> None:
    n = 16
    meet = Rendezvous(n, timeout=60)
    spec = {"name": "worker", "description": "does one part", "graph_id": "worker"}
    app = create_app({"parent": create_deep_agent(_parent(n, "start_async_task"),
                                                  subagents=[spec]),
                      "worker": create_deep_agent(_worker_model(meet))},
                     jobs=n + 2)  # fmt: skip
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "parent", input={"messages": [
            {"role": "user", "content": PROMPT}]})  # fmt: skip
        async with asyncio.timeout(60):  # bounds a hang only
            while meet.groups < 1:
                await asyncio.sleep(0.01)
        assert meet.max_in_flight == n
    finally:
        await app.state.fathom.runs.shutdown()
