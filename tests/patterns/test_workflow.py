"""The plan → work → check → report workflow, run as a real LangGraph graph.

Every model is a `ScriptedModel` whose policy decides from what it is sent (the task text,
the checker's feedback, the round line), never from how many calls came before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command

from fathom.patterns.workflow import (
    CHECKPOINT_TYPES,
    Action,
    ActionRegistry,
    PlanOrderError,
    SubTask,
    WorkItem,
    compute_waves,
    create_plan_work_check_report,
)
from fathom.testing import (
    RecordedRequest,
    Rendezvous,
    ScriptedModel,
    ScriptRequest,
    ai,
    tool_call,
)
from fathom.usage import AgentUsage

from .conftest import load_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "patterns" / "plan_work_check_report.py"

# Both actions state their data contract (they read nothing other tasks write), so their
# tasks may run in parallel; `depends_on` orders them further.
ACTIONS = ActionRegistry(
    [
        Action(name="lookup", description="Look something up.", requires=()),
        Action(name="summarize", description="Summarize what was looked up.", requires=()),
    ]
)

# --------------------------------------------------------------------------- helpers


def task(task_id: str, *, agent: str = "w", action: str = "lookup", **extra: Any) -> dict:
    return {"id": task_id, "agent": agent, "action": action, **extra}


def plan(*tasks: dict, intent: str = "work", **extra: Any) -> AIMessage:
    return ai("", tool_call("Plan", {"intent": intent, "tasks": list(tasks), **extra}))


def verdict(passed: bool, feedback: str = "", failed: list[str] | None = None) -> AIMessage:
    args = {"passed": passed, "feedback": feedback, "failed_task_ids": failed or []}
    return ai("", tool_call("CheckVerdict", args))


def task_id_of(request: ScriptRequest | RecordedRequest) -> str:
    text = next(str(m.text) for m in reversed(request.messages) if isinstance(m, HumanMessage))
    found = re.search(r"^Task (\S+):", text, re.MULTILINE)
    assert found, text
    return found.group(1)


def echo_worker(latency: float = 0.0) -> ScriptedModel:
    return ScriptedModel(policy=lambda r: f"done {task_id_of(r)}", latency=latency)


def passing_checker() -> ScriptedModel:
    return ScriptedModel(policy=lambda r: verdict(True))


def reporter() -> ScriptedModel:
    return ScriptedModel(policy=lambda r: "REPORT\n" + r.last_human_text)


def fixed_planner(*tasks: dict) -> ScriptedModel:
    return ScriptedModel(policy=lambda r: plan(*tasks))


def build(planner: ScriptedModel, workers: dict | None = None, **kwargs: Any) -> Any:
    return create_plan_work_check_report(
        planner,
        workers or {"w": echo_worker()},
        kwargs.pop("checker", None) or passing_checker(),
        kwargs.pop("reporter", None) or reporter(),
        actions=kwargs.pop("actions", ACTIONS),
        **kwargs,
    )


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def custom_events(flow: Any, inputs: Any, config: dict | None = None) -> list[dict]:
    return list(flow.stream(inputs, config or thread(), stream_mode="custom"))


# --------------------------------------------------------------------------- contracts


def test_subtask_has_exactly_the_contract_fields() -> None:
    assert set(SubTask.model_fields) == {
        "id",
        "agent",
        "action",
        "inputs",
        "depends_on",
        "timeout",
        "retry",
        "success_criteria",
    }


def test_registry_rejects_unknown_actions_and_unpermitted_agents() -> None:
    registry = ActionRegistry([Action(name="review", description="r", agents=("reviewer",))])
    unknown = SubTask(id="a", agent="reviewer", action="teleport")
    wrong_agent = SubTask(id="b", agent="writer", action="review")
    assert registry.problems_with(unknown) == [
        "task 'a': unknown action 'teleport' (known actions: review)"
    ]
    assert "agent 'writer' may not perform 'review'" in registry.problems_with(wrong_agent)[0]
    assert registry.problems_with(SubTask(id="c", agent="reviewer", action="review")) == []
    with pytest.raises(ValueError, match="registered twice"):
        ActionRegistry([Action(name="x", description=""), Action(name="x", description="")])


def test_a_bare_retry_count_means_that_many_attempts() -> None:
    assert SubTask(id="a", agent="w", action="lookup", retry=3).retry.attempts == 3
    with pytest.raises(ValueError, match="less than or equal to 10"):
        SubTask(id="a", agent="w", action="lookup", retry=50)


def test_a_task_cannot_depend_on_itself() -> None:
    with pytest.raises(ValueError, match="cannot depend on itself"):
        SubTask(id="a", agent="w", action="lookup", depends_on=["a"])


# --------------------------------------------------------------------------- waves


def sub(task_id: str, *deps: str, action: str = "lookup") -> SubTask:
    return SubTask(id=task_id, agent="w", action=action, depends_on=list(deps))


def test_waves_group_independent_tasks_and_follow_dependencies() -> None:
    # The campaign example: ③ needs ②, ④ needs ③.
    tasks = [sub("rules"), sub("recall"), sub("copy", "recall"), sub("review", "copy")]
    assert compute_waves(tasks, registry=ACTIONS) == [["rules", "recall"], ["copy"], ["review"]]


def test_waves_add_orderings_implied_by_the_actions() -> None:
    registry = ActionRegistry(
        [
            Action(name="recall", description="", produces=("products",)),
            Action(name="copy", description="", requires=("products",), produces=("copy",)),
            Action(name="publish", description="", requires=("copy",), side_effect=True),
            Action(name="notify", description="", side_effect=True),
        ]
    )
    # The plan states no dependencies at all; the registry still orders it.
    tasks = [
        sub("p", action="publish"),
        sub("c", action="copy"),
        sub("r", action="recall"),
        sub("n", action="notify"),
    ]
    assert compute_waves(tasks, registry=registry) == [["r"], ["c"], ["p"], ["n"]]


def test_waves_respect_the_parallel_cap_and_completed_tasks() -> None:
    tasks = [sub("a"), sub("b"), sub("c"), sub("d", "old")]
    waves = compute_waves(tasks, done=["old"], registry=ACTIONS, max_parallel=2)
    assert waves == [["a", "b"], ["c", "d"]]


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([sub("a", "b"), sub("b", "c"), sub("c", "a")], r"cycle .*: a -> b -> c -> a"),
        ([sub("a", "ghost")], "task 'a' depends on unknown task 'ghost'"),
        ([sub("a"), sub("a")], "task id 'a' is used twice"),
    ],
)
def test_waves_reject_plans_that_cannot_be_ordered(tasks: list, message: str) -> None:
    with pytest.raises(PlanOrderError, match=message):
        compute_waves(tasks)


def test_waves_reject_reusing_a_completed_id() -> None:
    with pytest.raises(PlanOrderError, match="already completed"):
        compute_waves([sub("a")], done=["a"])


# --------------------------------------------------------------------------- construction


def test_bad_configuration_is_a_clear_error() -> None:
    planner = fixed_planner(task("a"))
    with pytest.raises(ValueError, match="non-empty mapping"):
        create_plan_work_check_report(planner, {}, actions=ACTIONS)
    with pytest.raises(ValueError, match="max_rounds must be at least 1"):
        build(planner, max_rounds=0)
    with pytest.raises(ValueError, match="allows unknown worker"):
        build(planner, actions=[Action(name="lookup", description="", agents=("ghost",))])
    with pytest.raises(TypeError, match="expected a compiled graph"):
        build(planner, workers={"w": 42})


def test_a_request_is_required() -> None:
    flow = build(fixed_planner(task("a")))
    with pytest.raises(ValueError, match="needs a request"):
        flow.invoke({})


# --------------------------------------------------------------------------- parallel work


THREE_INDEPENDENT = (task("a"), task("b"), task("c"))


def counted_run(max_parallel: int | None, *, use_async: bool) -> int:
    """Run three independent tasks; return the most workers that were busy at once.

    Each worker waits at a rendezvous of as many parties as may run at once, so a wave
    that did not run its three tasks together fails the run instead of only being slow.
    """
    meet = Rendezvous(1 if max_parallel == 1 else 3)
    lock = threading.Lock()
    busy = {"now": 0, "most": 0}

    def enter() -> None:
        with lock:
            busy["now"] += 1
            busy["most"] = max(busy["most"], busy["now"])

    def leave() -> None:
        with lock:
            busy["now"] -= 1

    def worker(item: WorkItem) -> str:
        enter()
        try:
            meet.arrive()
            time.sleep(0.02)  # room for an overlap to show if max_parallel were ignored
        finally:
            leave()
        return f"done {item.task.id}"

    async def aworker(item: WorkItem) -> str:
        enter()
        try:
            await meet.arrive_async()
            await asyncio.sleep(0.02)
        finally:
            leave()
        return f"done {item.task.id}"

    flow = build(
        fixed_planner(*THREE_INDEPENDENT),
        workers={"w": aworker if use_async else worker},
        max_parallel=max_parallel,
    )
    if use_async:
        state = asyncio.run(flow.ainvoke({"request": "three lookups"}))
    else:
        state = flow.invoke({"request": "three lookups"})
    assert state["status"] == "passed"
    assert {k: r.output for k, r in state["results"].items()} == {
        "a": "done a",
        "b": "done b",
        "c": "done c",
    }
    return busy["most"]


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_tasks_of_one_wave_run_in_parallel(use_async: bool) -> None:
    assert counted_run(1, use_async=use_async) == 1
    assert counted_run(None, use_async=use_async) == 3


def test_dependent_tasks_wait_and_receive_their_dependencies_outputs() -> None:
    def policy(request: ScriptRequest) -> str:
        seen = re.findall(r"^\[(\w+)\] (.*)$", request.last_human_text, re.MULTILINE)
        return f"{task_id_of(request)}<-" + ",".join(f"{dep}={out}" for dep, out in seen)

    worker = ScriptedModel(policy=policy)
    flow = build(
        fixed_planner(task("a"), task("b"), task("c", action="summarize", depends_on=["a"])),
        workers={"w": worker},
    )
    events = custom_events(flow, {"request": "go"})
    plan_done = next(e for e in events if e["event"] == "plan_done")
    assert plan_done["data"]["waves"] == [["a", "b"], ["c"]]
    outputs = {task_id_of(r): r.response.text for r in worker.requests}
    assert outputs == {"a": "a<-", "b": "b<-", "c": "c<-a=a<-"}


# --------------------------------------------------------------------------- isolation


def test_a_worker_sees_only_its_own_task() -> None:
    worker = echo_worker()
    flow = build(
        fixed_planner(
            task("a", inputs={"topic": "alpha-topic"}),
            task("b", inputs={"topic": "beta-topic"}),
            task("c", action="summarize", depends_on=["a"], inputs={"style": "gamma-style"}),
        ),
        workers={"w": worker},
    )
    state = flow.invoke({"request": "SECRET-REQUEST: research three things"})
    assert state["status"] == "passed"
    seen = {task_id_of(r): "\n".join(str(m.text) for m in r.messages) for r in worker.requests}
    assert set(seen) == {"a", "b", "c"}
    assert "alpha-topic" in seen["a"] and "beta-topic" not in seen["a"]
    assert "beta-topic" in seen["b"] and "alpha-topic" not in seen["b"]
    assert "[a] done a" in seen["c"] and "done b" not in seen["c"]
    assert "alpha-topic" not in seen["c"] and "beta-topic" not in seen["c"]
    for text in seen.values():
        assert "SECRET-REQUEST" not in text
    # A chat-model worker gets a fixed system prompt and its task, nothing else.
    assert all(len(r.messages) == 2 for r in worker.requests)


# --------------------------------------------------------------------------- clarification


def asking_planner(request: ScriptRequest) -> AIMessage:
    answered = re.search(r"A: (.+)", request.last_human_text)
    if answered is None:
        return plan(intent="clarify", question="Which city?")
    return plan(task("trip", inputs={"city": answered.group(1)}))


@pytest.mark.parametrize("resume", ["Paris", {"answer": "Paris"}], ids=["text", "dict"])
def test_missing_information_interrupts_and_resumes(resume: Any) -> None:
    worker = echo_worker()
    planner = ScriptedModel(policy=asking_planner)
    flow = build(planner, workers={"w": worker}, checkpointer=InMemorySaver())
    config = thread("trip")

    paused = flow.invoke({"request": "Plan me a weekend trip"}, config)
    assert paused["__interrupt__"][0].value == {
        "type": "clarify",
        "question": "Which city?",
        "request": "Plan me a weekend trip",
    }
    assert flow.get_state(config).next == ("ask",)
    assert worker.requests == []

    state = flow.invoke(Command(resume=resume), config)
    assert state["status"] == "passed"
    assert [(c.question, c.answer) for c in state["clarifications"]] == [("Which city?", "Paris")]
    assert '"city": "Paris"' in worker.requests[0].messages[-1].text
    assert len(planner.requests) == 2


def test_resuming_without_an_answer_is_a_clear_error() -> None:
    flow = build(ScriptedModel(policy=asking_planner), checkpointer=InMemorySaver())
    flow.invoke({"request": "Plan me a trip"}, thread("x"))
    with pytest.raises(ValueError, match="Resume the workflow with the user's answer"):
        flow.invoke(Command(resume=42), thread("x"))


# --------------------------------------------------------------------------- check and re-plan


def replanning_planner(request: ScriptRequest) -> AIMessage:
    if "The checker rejected" in request.last_human_text:
        return plan(task("b2", inputs={"quality": "high"}, depends_on=["a"]))
    return plan(task("a"), task("b", inputs={"quality": "low"}))


def quality_checker(request: ScriptRequest) -> AIMessage:
    low = re.findall(r"\[(\w+)\][^\n]*\n  \w+:low", request.last_human_text)
    if low:
        return verdict(False, "Result quality is too low; redo it with high quality.", low)
    return verdict(True)


def recording_worker(calls: list[WorkItem]) -> Any:
    lock = threading.Lock()

    def work(item: WorkItem) -> str:
        with lock:
            calls.append(item)
        return f"{item.task.id}:{item.task.inputs.get('quality', '-')}"

    return work


def test_a_failed_check_replans_incrementally_and_keeps_completed_tasks() -> None:
    calls: list[WorkItem] = []
    planner = ScriptedModel(policy=replanning_planner)
    checker = ScriptedModel(policy=quality_checker)
    flow = build(planner, workers={"w": recording_worker(calls)}, checker=checker)
    usage = AgentUsage()

    state = flow.invoke({"request": "two lookups"}, {"callbacks": [usage]})

    assert state["status"] == "passed"
    assert state["round"] == 2
    assert sorted(item.task.id for item in calls) == ["a", "b", "b2"]  # a ran once
    assert set(state["results"]) == {"a", "b2"}
    assert state["results"]["a"].round == 1
    assert state["results"]["b2"].round == 2
    assert next(i for i in calls if i.task.id == "b2").upstream == {"a": "a:-"}

    replan = planner.requests[1].messages[-1].text
    assert "Round 2 of 3. The checker rejected the previous round: Result quality" in replan
    assert "Completed tasks (kept; do not redo them):\n[a] lookup by w: ok" in replan
    assert "Tasks to redo:\n[b] lookup by w: ok" in replan
    # Stable first: every planner call shares the same system prompt.
    assert planner.requests[0].system_prompt == planner.requests[1].system_prompt

    totals = usage.totals()
    assert set(totals) == {"planner", "checker", "reporter"}  # callable workers: no model
    assert (totals["planner"].calls, totals["checker"].calls, totals["reporter"].calls) == (
        2,
        2,
        1,
    )


def test_model_calls_are_named_after_their_role() -> None:
    usage = AgentUsage()
    flow = build(
        fixed_planner(task("a"), task("b", agent="v")),
        workers={
            "w": echo_worker(),
            "v": create_agent(echo_worker(), name="own-name"),
        },
    )
    flow.invoke({"request": "go"}, {"callbacks": [usage]})
    assert {name: t.calls for name, t in usage.totals().items()} == {
        "planner": 1,
        "worker:w": 1,
        "worker:v": 1,
        "checker": 1,
        "reporter": 1,
    }


def test_the_round_limit_ends_the_retry_loop() -> None:
    def planner_policy(request: ScriptRequest) -> AIMessage:
        round_line = re.search(r"Round (\d+) of", request.last_human_text)
        return plan(task(f"t{round_line.group(1) if round_line else 1}"))

    def never_satisfied(request: ScriptRequest) -> AIMessage:
        ids = re.findall(r"^\[(\w+)\]", request.last_human_text, re.MULTILINE)
        return verdict(False, "still not good enough", ids)

    planner = ScriptedModel(policy=planner_policy)
    checker = ScriptedModel(policy=never_satisfied)
    report = reporter()
    flow = build(planner, checker=checker, reporter=report, max_rounds=2)

    events = custom_events(flow, {"request": "impossible"})

    assert (len(planner.requests), len(checker.requests), len(report.requests)) == (2, 2, 1)
    assert events[-1]["event"] == "done"
    assert {k: v for k, v in events[-1]["data"].items() if k != "metrics"} == {
        "status": "max_rounds",
        "rounds": 2,
    }
    assert events[-1]["data"]["metrics"]["wave_widths"] == [1, 1]  # one task in each round
    assert "round limit was reached" in report.requests[0].messages[-1].text
    assert "Open checker feedback: still not good enough" in report.requests[0].messages[-1].text


# --------------------------------------------------------------------------- invalid output


def feedback_count(request: ScriptRequest) -> int:
    return sum(
        isinstance(m, HumanMessage) and "was not a valid" in str(m.text) for m in request.messages
    )


def test_invalid_structured_output_is_retried_with_the_problems() -> None:
    bad_json = AIMessage(
        content="",
        additional_kwargs={
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "Plan", "arguments": "{"}}
            ]
        },
    )

    def flaky_planner(request: ScriptRequest) -> AIMessage | str:
        answers = [bad_json, "Sure, here is my plan: look it up.", plan(task("bad id!"))]
        return answers[feedback_count(request)] if feedback_count(request) < 3 else plan(task("a"))

    planner = ScriptedModel(policy=flaky_planner)
    flow = build(planner, output_retries=3)
    events = custom_events(flow, {"request": "go"})

    assert [e["event"] for e in events].count("plan_invalid") == 3
    last = planner.requests[-1].messages
    feedback = [str(m.text) for m in last if "was not a valid" in str(m.text)]
    assert "could not be parsed" in feedback[0] and "not valid JSON" in feedback[0]
    assert "no structured answer: call `Plan`" in feedback[1]
    assert "tasks.0.id: String should match pattern" in feedback[2]
    assert events[-1]["data"]["status"] == "passed"


def test_a_checker_that_never_answers_validly_is_reported_not_passed_on() -> None:
    checker = ScriptedModel(policy=lambda r: ai("", tool_call("CheckVerdict", {"feedback": "?"})))
    report = reporter()
    flow = build(fixed_planner(task("a")), checker=checker, reporter=report, output_retries=1)
    state = flow.invoke({"request": "go"})

    assert len(checker.requests) == 2
    assert state["status"] == "failed"
    assert state["verdict"] is None
    assert state["errors"] == [
        "checker: no valid CheckVerdict after 2 tries: passed: Field required"
    ]
    assert "Errors: checker: no valid CheckVerdict" in report.requests[0].messages[-1].text
    assert state["messages"][-1].text == state["report"]


def test_unknown_actions_are_rejected_and_the_model_is_told_which_exist() -> None:
    def planner_policy(request: ScriptRequest) -> AIMessage:
        if feedback_count(request) == 0:
            return plan(task("a", action="teleport"))
        return plan(task("a"))

    planner = ScriptedModel(policy=planner_policy)
    flow = build(planner)
    state = flow.invoke({"request": "go"})

    assert state["status"] == "passed"
    told = planner.requests[1].messages[-1].text
    assert "task 'a': unknown action 'teleport' (known actions: lookup, summarize)" in told
    schema = json.dumps(planner.requests[0].tools)
    assert '"enum": ["lookup", "summarize"]' in schema  # the model is shown the registry


def test_tasks_still_invalid_after_the_retries_are_dropped_and_the_rest_runs() -> None:
    worker = echo_worker()
    planner = fixed_planner(
        task("a"),
        task("x", action="teleport"),
        task("y", depends_on=["x"]),
        task("z", agent="ghost"),
    )
    flow = build(planner, workers={"w": worker}, output_retries=1)
    state = flow.invoke({"request": "go"})

    assert len(planner.requests) == 2
    assert [task_id_of(r) for r in worker.requests] == ["a"]
    statuses = {k: (r.status, r.error) for k, r in state["results"].items()}
    assert statuses["a"] == ("ok", None)
    assert statuses["x"][0] == "rejected" and "unknown action 'teleport'" in statuses["x"][1]
    assert statuses["y"] == ("skipped", "depends on rejected task 'x'")
    assert statuses["z"][0] == "rejected" and "unknown worker 'ghost'" in statuses["z"][1]
    assert len(state["errors"]) == 3
    assert state["status"] == "passed"


def test_a_planner_that_never_answers_validly_ends_the_run_with_a_report() -> None:
    worker = echo_worker()
    report = reporter()
    flow = build(
        ScriptedModel(policy=lambda r: "I cannot plan."),
        workers={"w": worker},
        reporter=report,
        output_retries=0,
    )
    state = flow.invoke({"request": "go"})
    assert state["status"] == "failed"
    assert worker.requests == []
    assert state["errors"][0].startswith("planner: no valid Plan after 1 tries")
    assert state["report"].startswith("REPORT")


# --------------------------------------------------------------------------- timeouts and retries


async def test_a_timed_out_try_is_retried() -> None:
    async def slow_then_fast(item: WorkItem) -> str:
        if item.attempt == 1:
            await asyncio.Event().wait()  # never set: only the timeout ends this try
        return f"{item.task.id} on try {item.attempt} key={item.idempotency_key}"

    # The timeout is per try, so the quick second try must also finish within it: 2 s, far
    # past what a loaded machine needs for it, is what the first try waits to be cut off.
    flow = build(
        fixed_planner(task("a", timeout=2, retry={"attempts": 2})),
        workers={"w": slow_then_fast},
    )
    events = [e async for e in flow.astream({"request": "go"}, stream_mode="custom")]
    retry = next(e for e in events if e["event"] == "work_retry")
    assert retry["data"]["error"] == "timed out after 2s"
    done = next(e for e in events if e["event"] == "work_done")
    assert done["data"]["status"] == "ok" and done["data"]["attempts"] == 2


def test_a_task_that_keeps_failing_is_reported_and_its_dependants_skipped() -> None:
    tries: list[int] = []

    def broken(item: WorkItem) -> str:
        if item.task.id == "a":
            tries.append(item.attempt)
            raise RuntimeError("service down")
        return "fine"

    release = threading.Event()

    def sleepy(item: WorkItem) -> str:
        release.wait(60)  # held past its timeout: set once the run is over (60 s bounds a hang)
        return "late"

    flow = build(
        fixed_planner(
            task("a", retry={"attempts": 3}),
            task("b", depends_on=["a"]),
            task("s", agent="slow", timeout=0.05),
        ),
        workers={"w": broken, "slow": sleepy},
        checker=ScriptedModel(policy=lambda r: verdict(False, "a failed", ["a"])),
        max_rounds=1,
    )
    try:
        state = flow.invoke({"request": "go"})
    finally:
        release.set()
    results = state["results"]
    assert tries == [1, 2, 3]
    assert (results["a"].status, results["a"].error) == ("failed", "RuntimeError: service down")
    assert results["b"].status == "skipped" and "did not succeed: a" in results["b"].error
    assert (results["s"].status, results["s"].error) == ("timeout", "timed out after 0.05s")
    assert state["status"] == "max_rounds"


# --------------------------------------------------------------------------- events


def lookup_tool(query: str) -> str:
    """Look a query up."""
    return f"found {query}"


def tool_using_agent() -> Any:
    def policy(request: ScriptRequest) -> AIMessage | str:
        if not request.tool_results:
            return ai("", tool_call("lookup_tool", {"query": task_id_of(request)}))
        return str(request.tool_results[-1].text)

    return create_agent(ScriptedModel(policy=policy), tools=[lookup_tool])


async def test_progress_streams_as_ordered_custom_events() -> None:
    flow = build(
        fixed_planner(task("a"), task("b"), task("c", depends_on=["a", "b"])),
        workers={"w": tool_using_agent()},
        checkpointer=InMemorySaver(),
    )
    events = [e async for e in flow.astream({"request": "go"}, thread("ev"), stream_mode="custom")]
    names = [e["event"] for e in events]

    def at(event: str, task_id: str | None = None) -> int:
        return next(
            i
            for i, e in enumerate(events)
            if e["event"] == event and (task_id is None or e["data"].get("task_id") == task_id)
        )

    assert names[:2] == ["plan_thinking", "plan_done"]
    assert names[-5:] == ["check_thinking", "check_done", "report_thinking", "report_done", "done"]
    for task_id in "abc":
        assert (
            at("work_start", task_id)
            < at("work_tool_start", task_id)
            < at("work_tool_end", task_id)
            < at("work_done", task_id)
        )
    assert max(at("work_done", "a"), at("work_done", "b")) < at("work_start", "c")
    assert max(at("work_start", "a"), at("work_start", "b")) < min(
        at("work_done", "a"), at("work_done", "b")
    )  # both of wave 1 start before either finishes
    tool_start = events[at("work_tool_start", "c")]
    assert tool_start["data"]["tool"] == "lookup_tool"
    assert all(set(e) == {"event", "msg", "data"} for e in events)


# --------------------------------------------------------------------------- chat and turns


def test_chit_chat_goes_straight_to_the_reporter_and_each_request_starts_clean() -> None:
    def planner_policy(request: ScriptRequest) -> AIMessage:
        if "hello" in request.last_human_text:
            return plan(intent="chat")
        return plan(task("a"))

    worker = echo_worker()
    flow = build(
        ScriptedModel(policy=planner_policy), workers={"w": worker}, checkpointer=InMemorySaver()
    )
    config = thread("chat")
    first = flow.invoke({"request": "look something up"}, config)
    assert set(first["results"]) == {"a"}

    second = flow.invoke({"messages": [{"role": "user", "content": "hello there"}]}, config)
    assert second["status"] == "chat"
    assert second["request"] == "hello there"
    assert second["results"] == {}
    assert len(worker.requests) == 1
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]


def test_typed_state_survives_a_strict_checkpoint_serializer(caplog: Any) -> None:
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES))
    flow = build(ScriptedModel(policy=asking_planner), checkpointer=saver)
    with caplog.at_level(logging.WARNING):
        flow.invoke({"request": "trip"}, thread("strict"))
        state = flow.invoke(Command(resume="Oslo"), thread("strict"))
    assert state["status"] == "passed"
    assert state["results"]["trip"].output == "done trip"
    assert "unregistered" not in caplog.text


# --------------------------------------------------------------------------- the example


def test_the_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=100, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for line in [
        "planner asks: Which user should I recommend products for (their user id)?",
        "[plan_done] plan: work, 2 wave(s) waves=[['rules', 'products'], ['copy']]",
        "[work_tool_start] calling get_campaign_rules (task rules)",
        "[check_done] check failed: The copy claims a 'guaranteed lowest price'",
        "[plan_done] plan: work, 1 wave(s) waves=[['copy-v2']]",
        "[done] done: passed",
        "status: passed after 2 round(s)",
        'results: {"rules": "ok", "products": "ok", "copy-v2": "ok"}',
        "Promo copy: Spring is here: the Linen Shirt and the Canvas Tote are 20% off",
    ]:
        assert line in out
    assert "Deserializing unregistered" not in done.stderr


def test_the_example_main_returns_the_run() -> None:
    result = load_example("plan_work_check_report").main()
    assert result["status"] == "passed"
    assert result["rounds"] == 2
    assert [w for w in result["waves"] if w] == [[["rules", "products"], ["copy"]], [["copy-v2"]]]
    assert set(result["results"]) == {"rules", "products", "copy-v2"}
    assert "guaranteed" not in result["report"].lower()
    assert result["events"][-1] == "done"
    assert result["model_calls"]["planner"] == 3
