"""`RubricMiddleware` as a reference user drives it: a rubric in the input state, a grader
model that answers with a `GraderResponse` tool call, the verdicts read back from the
checkpointed state, the callback and the custom stream."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from fathom import create_deep_agent
from fathom.middleware import (
    GRADER_SYSTEM_PROMPT,
    RUBRIC_GRADER_MESSAGE_SOURCE,
    GraderResponse,
    RubricEvaluation,
    RubricMiddleware,
    RubricState,
)
from fathom.testing import ScriptedModel, ai, tool_call

pytestmark = pytest.mark.filterwarnings("ignore:The middleware `RubricMiddleware` is in beta")


def verdict(
    result: str, explanation: str, criteria: list[dict[str, Any]] | None = None
) -> AIMessage:
    """The grader's answer: a call of the `GraderResponse` structured-output tool."""
    args = {"result": result, "explanation": explanation, "criteria": criteria or []}
    return ai("", tool_call("GraderResponse", args))


NO_TESTS = {"name": "tests", "passed": False, "gap": "no tests"}


def graded_agent(main: list[Any], grader: ScriptedModel, **options: Any) -> Any:
    return create_deep_agent(
        model=ScriptedModel(replies=main),
        middleware=[RubricMiddleware(model=grader, **options)],
        checkpointer=InMemorySaver(),
    )


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_a_satisfied_grader_ends_the_run_with_the_first_answer() -> None:
    grader = ScriptedModel(
        replies=[verdict("satisfied", "looks good", [{"name": "built", "passed": True}])]
    )
    agent = graded_agent(["here is my draft"], grader, max_iterations=3)
    config = thread("satisfied")

    result = agent.invoke(
        {"messages": [HumanMessage("do it")], "rubric": "- The thing is built"}, config
    )

    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    state = agent.get_state(config).values
    assert state["_rubric_status"] == "satisfied"
    assert state["_rubric_iterations"] == 1
    [evaluation] = state["_rubric_evaluations"]
    assert evaluation["result"] == "satisfied"
    assert evaluation["criteria"] == [{"name": "built", "passed": True}]
    assert evaluation["iteration"] == 0
    assert evaluation["unverified"] is False


def test_needs_revision_sends_the_feedback_back_to_the_model() -> None:
    grader = ScriptedModel(
        replies=[
            verdict("needs_revision", "add tests", [NO_TESTS]),
            verdict("satisfied", "ok now", [{"name": "tests", "passed": True}]),
        ]
    )
    agent = graded_agent(["first attempt", "second attempt with fix"], grader, max_iterations=5)
    config = thread("revise")

    result = agent.invoke({"messages": [HumanMessage("do it")], "rubric": "- tests pass"}, config)

    kinds = [type(m).__name__ for m in result["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    feedback = result["messages"][2]
    assert feedback.name == RUBRIC_GRADER_MESSAGE_SOURCE == "rubric_grader"
    assert feedback.additional_kwargs["lc_source"] == RUBRIC_GRADER_MESSAGE_SOURCE
    assert "add tests" in feedback.content
    assert "no tests" in feedback.content
    assert result["messages"][-1].content == "second attempt with fix"
    state = agent.get_state(config).values
    assert state["_rubric_status"] == "satisfied"
    assert state["_rubric_iterations"] == 2
    assert [e["result"] for e in state["_rubric_evaluations"]] == ["needs_revision", "satisfied"]
    assert state["_rubric_criteria"] == ["tests"]


def test_the_second_grading_is_shown_the_rubric_criteria_and_transcript() -> None:
    grader = ScriptedModel(
        replies=[
            verdict(
                "needs_revision", "add tests", [{"name": "tests", "passed": False, "gap": "none"}]
            ),
            verdict("satisfied", "ok", [{"name": "tests", "passed": True}]),
        ]
    )
    agent = graded_agent(["first", "second"], grader)

    agent.invoke({"messages": [HumanMessage("do it")], "rubric": "- tests pass"}, thread("seen"))

    payload = grader.requests[1].messages[-1].content
    assert "- tests pass" in payload
    assert "[user] do it" in payload
    assert "[assistant] second" in payload
    assert "1. tests" in payload


def test_the_last_allowed_grading_reports_max_iterations_reached() -> None:
    failing = [{"name": "x", "passed": False, "gap": "y"}]
    grader = ScriptedModel(
        replies=[verdict("needs_revision", "still missing", failing)] * 2
    )
    agent = graded_agent(["attempt 1", "attempt 2"], grader, max_iterations=2)
    config = thread("max")

    result = agent.invoke({"messages": [HumanMessage("do it")], "rubric": "- thing"}, config)

    assert result["messages"][-1].content == "attempt 2"
    state = agent.get_state(config).values
    assert state["_rubric_status"] == "max_iterations_reached"
    assert state["_rubric_iterations"] == 2
    results = [e["result"] for e in state["_rubric_evaluations"]]
    assert results == ["needs_revision", "max_iterations_reached"]


def test_without_a_rubric_the_grader_is_never_called() -> None:
    grader = ScriptedModel()
    agent = graded_agent(["hello"], grader)
    config = thread("no-rubric")

    result = agent.invoke({"messages": [HumanMessage("say hi")]}, config)

    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert grader.requests == []
    state = agent.get_state(config).values
    assert state.get("_rubric_status") is None
    assert state.get("_rubric_evaluations", []) == []


def test_a_grader_that_raises_ends_grading_with_grader_error() -> None:
    def overloaded(_request: Any) -> AIMessage:
        raise RuntimeError("grader exploded")

    agent = graded_agent(["draft"], ScriptedModel(replies=[overloaded]))
    config = thread("grader-error")

    result = agent.invoke({"messages": [HumanMessage("do it")], "rubric": "- thing"}, config)

    assert result["messages"][-1].content == "draft"
    state = agent.get_state(config).values
    assert state["_rubric_status"] == "grader_error"
    [evaluation] = state["_rubric_evaluations"]
    assert evaluation["result"] == "grader_error"
    assert evaluation["explanation"].startswith("Grader raised RuntimeError")
    assert "grader exploded" in evaluation["explanation"]
    assert evaluation["criteria"] == []


def test_a_failed_verdict_ends_grading_without_feedback() -> None:
    grader = ScriptedModel(replies=[verdict("failed", "The rubric contradicts itself.")])
    agent = graded_agent(["draft"], grader)
    config = thread("failed")

    rubric = "- be long\n- be short"
    result = agent.invoke({"messages": [HumanMessage("go")], "rubric": rubric}, config)

    assert len(result["messages"]) == 2
    assert agent.get_state(config).values["_rubric_status"] == "failed"


def test_a_satisfied_verdict_without_criteria_is_not_trusted() -> None:
    grader = ScriptedModel(
        replies=[
            verdict("satisfied", "fine"),
            verdict("satisfied", "fine"),  # asked again: still no criteria
            verdict("satisfied", "all good", [{"name": "short", "passed": True}]),
        ]
    )
    agent = graded_agent(["draft", "checked draft"], grader)
    config = thread("unverified")

    result = agent.invoke({"messages": [HumanMessage("go")], "rubric": "- short"}, config)

    evaluations = agent.get_state(config).values["_rubric_evaluations"]
    assert [(e["result"], e["unverified"]) for e in evaluations] == [
        ("needs_revision", True),
        ("satisfied", False),
    ]
    assert result["messages"][-1].content == "checked draft"
    assert len(grader.requests) == 3


def test_on_evaluation_and_the_custom_stream_see_every_grading() -> None:
    seen: list[RubricEvaluation] = []
    grader = ScriptedModel(replies=[verdict("satisfied", "ok", [{"name": "a", "passed": True}])])
    agent = graded_agent(["done"], grader, on_evaluation=seen.append)

    events = [
        chunk
        for chunk in agent.stream(
            {"messages": [HumanMessage("go")], "rubric": "- a"},
            thread("events"),
            stream_mode="custom",
        )
        if isinstance(chunk, dict) and str(chunk.get("type", "")).startswith("rubric_")
    ]

    assert [e["type"] for e in events] == ["rubric_evaluation_start", "rubric_evaluation_end"]
    assert events[0]["grading_run_id"] == events[1]["grading_run_id"]
    assert events[0]["iteration"] == 0
    assert events[1]["result"] == "satisfied"
    assert events[1]["criteria"] == [{"name": "a", "passed": True}]
    assert events[1]["unverified"] is False
    assert [e["result"] for e in seen] == ["satisfied"]


def test_the_rubric_sticks_to_the_thread_and_each_invocation_is_a_new_run() -> None:
    ok = verdict("satisfied", "ok", [{"name": "terse", "passed": True}])
    agent = graded_agent(["first", "second"], ScriptedModel(replies=[ok, ok]))
    config = thread("sticky")

    agent.invoke({"messages": [HumanMessage("do it")], "rubric": "- be terse"}, config)
    agent.invoke({"messages": [HumanMessage("again")]}, config)

    evaluations = agent.get_state(config).values["_rubric_evaluations"]
    assert len(evaluations) == 2
    assert evaluations[0]["grading_run_id"] != evaluations[1]["grading_run_id"]
    assert evaluations[1]["iteration"] == 0


def test_a_custom_grader_prompt_reaches_the_grader() -> None:
    grader = ScriptedModel(replies=[verdict("satisfied", "ok", [{"name": "a", "passed": True}])])
    agent = graded_agent(["draft"], grader, system_prompt="CUSTOM_GRADER_MARKER: be strict.")

    agent.invoke({"messages": [HumanMessage("go")], "rubric": "- a"}, thread("prompt"))

    assert grader.requests[0].system_prompt is not None
    assert "CUSTOM_GRADER_MARKER" in grader.requests[0].system_prompt


def test_the_default_grader_prompt_is_the_exported_one() -> None:
    grader = ScriptedModel(replies=[verdict("satisfied", "ok", [{"name": "a", "passed": True}])])
    agent = graded_agent(["draft"], grader)

    agent.invoke({"messages": [HumanMessage("go")], "rubric": "- a"}, thread("default-prompt"))

    assert grader.requests[0].system_prompt == GRADER_SYSTEM_PROMPT
    assert "adversarial" in GRADER_SYSTEM_PROMPT


async def test_the_async_path_loops_the_same_way() -> None:
    grader = ScriptedModel(
        replies=[
            verdict("needs_revision", "more", [{"name": "long", "passed": False, "gap": "short"}]),
            verdict("satisfied", "ok", [{"name": "long", "passed": True}]),
        ]
    )
    agent = graded_agent(["short", "long enough"], grader)
    config = thread("async")

    result = await agent.ainvoke({"messages": [HumanMessage("go")], "rubric": "- long"}, config)

    assert result["messages"][-1].content == "long enough"
    state = (await agent.aget_state(config)).values
    assert [e["result"] for e in state["_rubric_evaluations"]] == ["needs_revision", "satisfied"]


def test_it_composes_with_plain_create_agent() -> None:
    grader = ScriptedModel(replies=[verdict("satisfied", "ok", [{"name": "a", "passed": True}])])
    agent = create_agent(
        model=ScriptedModel(replies=["answer"]),
        middleware=[RubricMiddleware(model=grader)],
        checkpointer=InMemorySaver(),
    )
    config = thread("create-agent")

    agent.invoke({"messages": [HumanMessage("go")], "rubric": "- a"}, config)

    assert agent.get_state(config).values["_rubric_status"] == "satisfied"


def test_the_state_schema_and_defaults() -> None:
    middleware = RubricMiddleware(model="openai:gpt-4.1")
    assert middleware.state_schema is RubricState
    assert middleware.max_iterations == 3
    assert "rubric" in RubricState.__annotations__


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"model": ""}, ValueError),
        ({"model": None}, ValueError),
        ({"model": "openai:gpt-4.1", "max_iterations": 0}, ValueError),
        ({"model": "openai:gpt-4.1", "max_iterations": True}, TypeError),
        ({"model": "openai:gpt-4.1", "max_iterations": "3"}, TypeError),
        ({"model": "openai:gpt-4.1", "build_grader_state": lambda s, i: {}}, ValueError),
        (
            {"model": "openai:gpt-4.1", "grader_state_schema": RubricState,
             "build_grader_state": "not callable"},
            TypeError,
        ),
    ],
)
def test_bad_constructor_arguments_are_refused(options: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        RubricMiddleware(**options)


def test_grader_responses_that_contradict_themselves_are_refused() -> None:
    with pytest.raises(ValidationError, match="satisfied"):
        GraderResponse.model_validate(
            {"result": "satisfied", "explanation": "ok",
             "criteria": [{"name": "x", "passed": False, "gap": "wrong"}]}
        )
    with pytest.raises(ValidationError, match="needs_revision"):
        GraderResponse.model_validate(
            {"result": "needs_revision", "explanation": "?",
             "criteria": [{"name": "x", "passed": True}]}
        )
    with pytest.raises(ValidationError):  # a failing criterion needs its gap
        GraderResponse.model_validate(
            {"result": "needs_revision", "explanation": "?",
             "criteria": [{"name": "x", "passed": False}]}
        )


def test_a_passing_criterion_loses_a_stray_gap() -> None:
    graded = GraderResponse.model_validate(
        {"result": "satisfied", "explanation": "ok",
         "criteria": [{"name": "x", "passed": True, "gap": "ignored"}]}
    )
    assert graded.criteria == [{"name": "x", "passed": True}]
