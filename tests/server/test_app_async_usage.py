"""The parent's usage report counts its async subagents' model calls and tokens, by task id.

Real fathom server app in process, real langgraph-sdk client, scripted models whose
`usage_metadata` the report must add up.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from tests.server.support import eventually

from fathom import create_deep_agent
from fathom.middleware.async_subagents.tasks import AsyncSubAgentState, AsyncTask, now_iso
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.usage import AgentUsage, collect_async_usage


class _TasksChannel(AgentMiddleware[Any, Any, Any]):
    """Gives the supervisor the `async_tasks` channel, as the async subagent middleware does."""

    state_schema = AsyncSubAgentState


def _task(task_id: str, run_id: str, name: str) -> AsyncTask:
    stamp = now_iso()
    return {"task_id": task_id, "agent_name": name, "thread_id": task_id, "run_id": run_id,
            "status": "running", "created_at": stamp, "last_checked_at": stamp,
            "last_updated_at": stamp}


async def test_async_children_usage_is_attributed_to_the_parent_report_by_task_id() -> None:
    researcher = ScriptedModel(
        replies=[ai("", tool_call("write_todos", {"todos": []})), "three facts"],
    )
    coder = ScriptedModel(policy=lambda req: "a patch")
    app = create_app({
        "supervisor": create_deep_agent(ScriptedModel(policy=lambda req: "ok"),
                                        middleware=[_TasksChannel()], name="supervisor"),
        "researcher": create_deep_agent(researcher, name="researcher"),
        "coder": create_deep_agent(coder, name="coder"),
    })
    client = in_process_client(app)
    parent = (await client.threads.create(metadata={"graph_id": "supervisor"}))["thread_id"]
    tasks: dict[str, AsyncTask] = {}
    for graph in ("researcher", "coder"):
        thread = await client.threads.create(metadata={"subagent_name": graph})
        run = await client.runs.create(
            thread["thread_id"], graph,
            input={"messages": [{"role": "user", "content": "work"}]},
            config={"configurable": {"deepagents_parent": {"thread_id": parent}}},
        )
        tasks[thread["thread_id"]] = _task(thread["thread_id"], run["run_id"], graph)
    # the supervisor keeps its tasks in its `async_tasks` channel
    first = await client.runs.create(parent, "supervisor", input={
        "messages": [{"role": "user", "content": "hi"}], "async_tasks": tasks})
    await client.runs.join(parent, first["run_id"])
    kept = (await client.threads.get_state(parent))["values"]["async_tasks"]
    assert set(kept) == set(tasks)

    async def recorded() -> bool:
        threads = [await client.threads.get(t) for t in tasks]
        return all("fathom_usage" in t["metadata"] for t in threads)

    await eventually(recorded, "both children to record their usage")
    usage = AgentUsage()
    assert await collect_async_usage(usage, kept, client) == []

    by_task = usage.task_totals()
    research_id = next(t for t, task in tasks.items() if task["agent_name"] == "researcher")
    coder_id = next(t for t in tasks if t != research_id)
    name, research = by_task[research_id]
    assert name == "researcher" and research.calls == 2
    assert research.input_tokens == sum(r.input_tokens for r in researcher.requests)
    assert research.output_tokens == sum(r.output_tokens for r in researcher.requests)
    assert by_task[coder_id][0] == "coder" and by_task[coder_id][1].calls == 1
    assert usage.total().calls == 3
    report = usage.report()
    assert f"researcher [{research_id}]" in report and f"coder [{coder_id}]" in report


async def test_unreadable_task_is_reported_and_the_others_still_count() -> None:
    app = create_app({"coder": create_deep_agent(ScriptedModel(policy=lambda r: "x"),
                                                 name="coder")})
    client = in_process_client(app)
    usage = AgentUsage()
    missing = "00000000-0000-4000-8000-000000000000"
    unread = await collect_async_usage(usage, {missing: _task(missing, "r", "coder")}, client)
    assert unread == [missing]
    assert usage.task_totals() == {}
