"""The spans of an agent run: their tree, kinds, ids, tokens, errors and approvals.

Real agents built by `create_deep_agent` over `ScriptedModel`, real OpenTelemetry SDK with
its in-memory exporter.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.tracing.conftest import tree

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call


def _lookup(order: str) -> str:
    """Look an order up."""
    raise ToolException(f"order {order} is not in the database")


LOOKUP = StructuredTool.from_function(_lookup, name="lookup", handle_tool_error=True)
SUBAGENTS = [
    {"name": "researcher", "description": "finds facts", "system_prompt": "Research."},
    {"name": "writer", "description": "writes prose", "system_prompt": "Write."},
]


def _task(agent: str, what: str) -> Any:
    return tool_call("task", {"description": what, "subagent_type": agent})


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _run_with_two_subagents_an_error_and_an_approval() -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(replies=[
        ai("", tool_call("lookup", {"order": "A-1"})),
        ai("", _task("researcher", "find facts")),
        "three facts",  # the researcher
        ai("", _task("writer", "write it up")),
        "a paragraph",  # the writer
        ai("", tool_call("write_file", {"file_path": "/report.md", "content": "report"})),
        "all done",
    ])
    agent = create_deep_agent(
        model, tools=[LOOKUP], name="main", subagents=SUBAGENTS,
        checkpointer=InMemorySaver(), interrupt_on={"write_file": True},
    )
    config = {"configurable": {"thread_id": "thread-7"}}
    paused = agent.invoke({"messages": [("user", "write the report")]}, config)
    assert paused["__interrupt__"]
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["messages"][-1].content == "all done"
    return model, done


def test_a_run_with_two_subagents_an_approval_and_a_tool_error_has_this_span_tree(
    spans: InMemorySpanExporter,
) -> None:
    _run_with_two_subagents_an_error_and_an_approval()
    model = ("scripted", "LLM", [])
    assert tree(spans.get_finished_spans()) == [
        ("main", "AGENT", [
            model,
            ("lookup", "TOOL", []),
            model,
            ("task", "TOOL", [("researcher", "AGENT", [model])]),
            model,
            ("task", "TOOL", [("writer", "AGENT", [model])]),
            model,  # asks for write_file: the run pauses for approval
        ]),
        ("main", "AGENT", [  # the resumed run
            ("write_file", "TOOL", []),
            model,
        ]),
    ]


def test_spans_carry_thread_run_agent_and_token_attributes(spans: InMemorySpanExporter) -> None:
    model, _ = _run_with_two_subagents_an_error_and_an_approval()
    finished = spans.get_finished_spans()
    assert {_attributes(s)["session.id"] for s in finished} == {"thread-7"}
    first, resumed = [s for s in finished if s.parent is None]
    assert first.context is not None and resumed.context is not None
    for root in (first, resumed):
        assert root.context is not None
        run_id = _attributes(root)["fathom.run_id"]
        trace_id = root.context.trace_id
        in_trace = [s for s in finished if s.context and s.context.trace_id == trace_id]
        assert {_attributes(s)["fathom.run_id"] for s in in_trace} == {run_id}
    assert _attributes(first)["fathom.run_id"] != _attributes(resumed)["fathom.run_id"]
    assert _attributes(first)["input.value"] == "write the report"
    assert _attributes(resumed)["output.value"] == "all done"
    assert _attributes(resumed)["fathom.resume"] is True

    llm = sorted((s for s in finished if _attributes(s)["openinference.span.kind"] == "LLM"),
                 key=lambda s: s.start_time or 0)
    assert [_attributes(s)["fathom.agent_name"] for s in llm] == [
        "main", "main", "researcher", "main", "writer", "main", "main"]
    assert [_attributes(s)["llm.token_count.prompt"] for s in llm] == [
        r.input_tokens for r in model.requests]
    assert [_attributes(s)["llm.token_count.completion"] for s in llm] == [
        r.output_tokens for r in model.requests]
    for span in llm:
        a = _attributes(span)
        assert a["llm.token_count.total"] == (a["llm.token_count.prompt"]
                                              + a["llm.token_count.completion"])
        assert a["llm.model_name"] == "scripted"
    assert _attributes(llm[0])["output.value"] == '[{"name":"lookup","args":{"order":"A-1"}}]'
    researcher = next(s for s in finished if s.name == "researcher")
    assert _attributes(researcher)["agent.name"] == "researcher"
    assert _attributes(researcher)["output.value"] == "three facts"


def test_a_failed_tool_call_is_an_error_span_and_the_approval_an_event(
    spans: InMemorySpanExporter,
) -> None:
    _run_with_two_subagents_an_error_and_an_approval()
    finished = spans.get_finished_spans()
    [lookup] = [s for s in finished if s.name == "lookup"]
    assert lookup.status.status_code is StatusCode.ERROR
    assert "order A-1 is not in the database" in (lookup.status.description or "")
    assert [e.name for e in lookup.events] == ["fathom.tool_error"]
    assert _attributes(lookup)["tool.name"] == "lookup"
    assert _attributes(lookup)["input.value"] == '{"order":"A-1"}'
    errors = [s.name for s in finished if s.status.status_code is StatusCode.ERROR]
    assert errors == ["lookup"]  # the pause is no error

    first, resumed = [s for s in finished if s.parent is None]
    assert _attributes(first)["fathom.interrupt"] is True
    [event] = [e for e in first.events if e.name == "fathom.interrupt"]
    assert "write_file" in str((event.attributes or {})["fathom.interrupt.value"])
    assert "fathom.interrupt" not in _attributes(resumed)


def test_an_exception_in_a_tool_marks_tool_and_agent_spans_with_the_exception(
    spans: InMemorySpanExporter,
) -> None:
    def crash(path: str) -> str:
        """Crash."""
        raise RuntimeError(f"disk gone under {path}")

    model = ScriptedModel(replies=[ai("", tool_call("crash", {"path": "/data"}))])
    agent = create_deep_agent(model, tools=[crash], name="main")
    try:
        agent.invoke({"messages": [("user", "go")]})
    except RuntimeError:
        pass
    else:
        raise AssertionError("the tool's exception should end the run")
    finished = {s.name: s for s in spans.get_finished_spans()}
    for name in ("crash", "main"):
        span = finished[name]
        assert span.status.status_code is StatusCode.ERROR, name
        [event] = [e for e in span.events if e.name == "exception"]
        assert (event.attributes or {})["exception.type"] == "RuntimeError"
        assert "disk gone under /data" in str((event.attributes or {})["exception.message"])


def test_model_calls_carry_their_cost_when_prices_are_given() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    import fathom.tracing

    exporter = InMemorySpanExporter()
    fathom.tracing.enable(span_processor=SimpleSpanProcessor(exporter),
                          prices={"scripted": (3.0, 15.0)})
    try:
        model = ScriptedModel(replies=["hello"])
        create_deep_agent(model, name="main").invoke({"messages": [("user", "hi")]})
    finally:
        fathom.tracing.disable()
    [llm] = [s for s in exporter.get_finished_spans() if s.name == "scripted"]
    request = model.requests[0]
    a = _attributes(llm)
    assert a["llm.cost.prompt"] == request.input_tokens * 3.0 / 1e6
    assert a["llm.cost.completion"] == request.output_tokens * 15.0 / 1e6
    assert a["llm.cost.total"] == a["llm.cost.prompt"] + a["llm.cost.completion"]


def test_capture_messages_records_whole_requests_and_answers() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    import fathom.tracing

    exporter = InMemorySpanExporter()
    fathom.tracing.enable(span_processor=SimpleSpanProcessor(exporter), capture_messages=True)
    try:
        model = ScriptedModel(replies=[ai("", tool_call("ls", {"path": "/"})), "empty"])
        create_deep_agent(model, name="main").invoke({"messages": [("user", "list it")]})
    finally:
        fathom.tracing.disable()
    first = min((s for s in exporter.get_finished_spans() if s.name == "scripted"),
                key=lambda s: s.start_time or 0)
    a = _attributes(first)
    assert a["llm.input_messages.0.message.role"] == "system"
    assert a["llm.input_messages.1.message.role"] == "user"
    assert a["llm.input_messages.1.message.content"] == "list it"
    assert a["fathom.input_messages"] == 2
    called = "llm.output_messages.0.message.tool_calls.0.tool_call.function.name"
    assert a[called] == "ls"
    assert '"model_name":"scripted"' in a["llm.invocation_parameters"]
