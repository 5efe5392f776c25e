"""Spans of the other kinds of subagent and of server runs.

Dynamic subagents (the code interpreter's `task()`) hang under the `eval` tool call; a
`fathom serve` run (real app in process, real langgraph-sdk client) is a CHAIN span above
its graph's spans; an async subagent's server run continues the trace of the supervisor's
`start_async_task` call.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.server.support import eventually
from tests.tracing.conftest import tree

from fathom import create_deep_agent
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ai, tool_call


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_dynamic_subagents_of_the_code_interpreter_hang_under_the_eval_call(
    spans: InMemorySpanExporter,
) -> None:
    code = "a = await task('one', 'worker')\nb = await task('two', 'worker')\n[a, b]"
    main = ScriptedModel(replies=[ai("", tool_call("eval", {"code": code})), "both done"])
    worker = ScriptedModel(policy=lambda req: f"did {req.last_human_text}")
    agent = create_deep_agent(
        main, name="main", general_purpose_subagent=False, code_interpreter=True,
        subagents=[{"name": "worker", "description": "works", "system_prompt": "Work.",
                    "model": worker}],
    )
    await agent.ainvoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "ci-1"}})
    assert tree(spans.get_finished_spans()) == [
        ("main", "AGENT", [
            ("scripted", "LLM", []),
            ("eval", "TOOL", [("worker", "AGENT", [("scripted", "LLM", [])]),
                              ("worker", "AGENT", [("scripted", "LLM", [])])]),
            ("scripted", "LLM", []),
        ]),
    ]
    workers = [s for s in spans.get_finished_spans() if s.name == "worker"]
    assert {_attributes(s)["fathom.agent_name"] for s in workers} == {"worker"}


async def test_a_server_run_is_a_span_above_its_graph_with_thread_and_run_ids(
    spans: InMemorySpanExporter,
) -> None:
    app = create_app({"main": create_deep_agent(ScriptedModel(replies=["hi"]), name="main")})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "main", input={
            "messages": [{"role": "user", "content": "hello"}]})
        await client.runs.join(thread, run["run_id"])
    finally:
        await app.state.fathom.runs.shutdown()
    finished = spans.get_finished_spans()
    assert tree(finished) == [
        ("fathom serve run", "CHAIN", [("main", "AGENT", [("scripted", "LLM", [])])]),
    ]
    assert {_attributes(s)["session.id"] for s in finished} == {thread}
    assert {_attributes(s)["fathom.run_id"] for s in finished} == {run["run_id"]}
    [server] = [s for s in finished if s.name == "fathom serve run"]
    assert _attributes(server)["fathom.graph_id"] == "main"


async def test_an_async_subagent_run_continues_the_trace_of_the_call_that_started_it(
    spans: InMemorySpanExporter,
) -> None:
    start = tool_call("start_async_task", {"description": "dig", "subagent_type": "researcher"})
    supervisor = create_deep_agent(
        ScriptedModel(replies=[ai("", start), "launched"], policy=lambda req: "noted"),
        name="supervisor",
        subagents=[{"name": "researcher", "description": "digs", "graph_id": "researcher"}],
    )
    researcher = create_deep_agent(ScriptedModel(policy=lambda req: "found it"),
                                   name="researcher")
    app = create_app({"supervisor": supervisor, "researcher": researcher})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "supervisor", input={
            "messages": [{"role": "user", "content": "research"}]})
        await client.runs.join(thread, run["run_id"])

        async def both_done() -> bool:  # the supervisor's run and the child's
            return sum(s.name == "fathom serve run" for s in spans.get_finished_spans()) == 2

        await eventually(both_done, "the async subagent's server run to end")
    finally:
        await app.state.fathom.runs.shutdown()
    finished = spans.get_finished_spans()
    server_runs = [s for s in finished if s.name == "fathom serve run"]
    [parent_run] = [s for s in server_runs
                    if _attributes(s)["fathom.run_id"] == run["run_id"]]
    [child_run] = [s for s in server_runs if _attributes(s)["session.id"] != thread]
    [launch] = [s for s in finished if s.name == "start_async_task"]
    assert child_run.parent is not None and launch.context is not None
    assert child_run.parent.span_id == launch.context.span_id
    assert parent_run.context is not None and child_run.context is not None
    assert child_run.context.trace_id == parent_run.context.trace_id
    child_thread = _attributes(child_run)["session.id"]
    assert child_thread != thread
    [child_agent] = [s for s in finished if s.name == "researcher"]
    assert child_agent.parent is not None and child_run.context is not None
    assert child_agent.parent.span_id == child_run.context.span_id
    assert _attributes(child_agent)["session.id"] == child_thread
    assert _attributes(child_agent)["output.value"] == "found it"
