"""The orchestrator's scheduling, escalation and measurement rules, on real graphs.

Approval tasks wait in a wave of their own (and are not capped); tasks without dependency
information run in series and the plan's `depends_on` is only a hint; a failing last round
escalates to a person, whose answer is resumed with `Command(resume=...)` on an
`InMemorySaver` thread; and every run reports its wave widths, dependency violations,
subtask count and cost per subtask, in its state and in its spans.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import fathom.tracing
from fathom.patterns.workflow import (
    Action,
    ActionRegistry,
    PlanOrderError,
    SubTask,
    TaskResult,
    WorkItem,
    compute_waves,
    order_tasks,
    workflow_metrics,
)
from fathom.testing import Rendezvous, ScriptedModel, ScriptRequest

from .test_workflow import (
    ACTIONS,
    build,
    custom_events,
    fixed_planner,
    plan,
    reporter,
    task,
    task_id_of,
    thread,
    verdict,
)


def sub(task_id: str, *deps: str, action: str = "lookup") -> SubTask:
    return SubTask(id=task_id, agent="w", action=action, depends_on=list(deps))


def interrupts(state: dict[str, Any]) -> list[Any]:
    return list(state.get("__interrupt__") or [])


# --------------------------------------------------------------------------- approvals

APPROVALS = ActionRegistry(
    [
        Action(name="lookup", description="Look something up.", requires=()),
        Action(name="pay", description="Pay the supplier.", requires=(), needs_approval=True),
        Action(
            name="refund",
            description="Refund the customer.",
            requires=(),
            side_effect=True,
            needs_approval=True,
        ),
    ]
)


def test_approval_tasks_wait_in_their_own_wave_after_unrelated_work_and_are_not_capped() -> None:
    tasks = [
        sub("pay1", action="pay"),
        sub("b"),
        sub("pay2", action="pay"),
        sub("c"),
        sub("after", "pay1"),
    ]
    assert compute_waves(tasks, registry=APPROVALS, max_parallel=1) == [
        ["b"],
        ["c"],
        ["pay1", "pay2"],  # two approvals in one wave although the cap is 1
        ["after"],
    ]
    # An approval with side effects still runs alone.
    tasks = [sub("r1", action="refund"), sub("r2", action="refund"), sub("x")]
    assert compute_waves(tasks, registry=APPROVALS) == [["x"], ["r1"], ["r2"]]


class Counted:
    """A callable worker that counts which tasks ran; `b` and `c` must meet each other."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: list[str] = []
        self.meet = Rendezvous(2)

    def __call__(self, item: WorkItem) -> str:
        if item.task.id in ("b", "c"):
            self.meet.arrive()  # both unrelated tasks are running at once
        with self.lock:
            self.ran.append(item.task.id)
        return f"done {item.task.id} with {item.task.inputs}"


def approval_flow(worker: Counted) -> Any:
    planner = fixed_planner(
        task("pay", action="pay", inputs={"amount": 100}),
        task("b"),
        task("c"),
        task("receipt", depends_on=["pay"]),
    )
    return build(
        planner,
        workers={"w": worker},
        actions=APPROVALS,
        max_parallel=2,
        checkpointer=InMemorySaver(),
    )


def test_unrelated_tasks_finish_while_an_approval_is_pending() -> None:
    worker = Counted()
    flow = approval_flow(worker)
    config = thread("approve")

    paused = flow.invoke({"request": "pay the supplier and look two things up"}, config)

    # The run is paused on the approval, and both unrelated tasks have already finished.
    [pending] = interrupts(paused)
    assert pending.value["type"] == "approval"
    assert pending.value["task_id"] == "pay"
    assert pending.value["task"]["inputs"] == {"amount": 100}
    assert sorted(worker.ran) == ["b", "c"]
    assert {k: r.status for k, r in paused["results"].items()} == {"b": "ok", "c": "ok"}
    assert paused["waves"] == [["b", "c"], ["pay"], ["receipt"]]

    state = flow.invoke(Command(resume={"type": "edit", "inputs": {"amount": 90}}), config)
    assert state["status"] == "passed"
    assert worker.ran[2:] == ["pay", "receipt"]
    assert state["results"]["pay"].output == "done pay with {'amount': 90}"


def test_a_rejected_approval_skips_its_dependants_only() -> None:
    worker = Counted()
    flow = approval_flow(worker)
    config = thread("reject")
    flow.invoke({"request": "go"}, config)

    state = flow.invoke(Command(resume={"type": "reject", "message": "too much"}), config)

    results = state["results"]
    assert (results["pay"].status, results["pay"].error) == (
        "rejected",
        "rejected by a person: too much",
    )
    assert results["receipt"].status == "skipped"
    assert sorted(worker.ran) == ["b", "c"]


def test_several_approvals_of_one_wave_are_answered_together() -> None:
    worker = Counted()
    planner = fixed_planner(task("p1", action="pay"), task("p2", action="pay"))
    flow = build(
        planner, workers={"w": worker}, actions=APPROVALS, max_parallel=1,
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    config = thread("two")
    paused = flow.invoke({"request": "pay twice"}, config)
    pending = {i.value["task_id"]: i.id for i in interrupts(paused)}
    assert set(pending) == {"p1", "p2"}
    assert worker.ran == []

    answers = {pending["p1"]: "approve", pending["p2"]: "reject"}
    state = flow.invoke(Command(resume=answers), config)
    assert {k: r.status for k, r in state["results"].items()} == {"p1": "ok", "p2": "rejected"}


def test_a_bad_approval_answer_is_a_clear_error() -> None:
    flow = approval_flow(Counted())
    flow.invoke({"request": "go"}, thread("bad"))
    with pytest.raises(ValueError, match="Resume a task approval with 'approve', 'reject'"):
        flow.invoke(Command(resume="maybe"), thread("bad"))


# --------------------------------------------------------------------------- no dependency info


def test_without_dependency_information_tasks_run_in_series() -> None:
    # No registry: nothing says the tasks are independent, so none run together.
    assert compute_waves([sub("a"), sub("b"), sub("c")]) == [["a"], ["b"], ["c"]]
    registry = ActionRegistry(
        [
            Action(name="lookup", description="", requires=()),
            Action(name="guess", description="states neither requires nor produces"),
        ]
    )
    # Declared tasks run together; one without a contract is a barrier between them.
    declared = [sub("x"), sub("y"), sub("z")]
    assert compute_waves(declared, registry=registry) == [["x", "y", "z"]]
    mixed = [sub("x"), sub("g", action="guess"), sub("y"), sub("z")]
    assert compute_waves(mixed, registry=registry) == [["x"], ["g"], ["y", "z"]]
    assert order_tasks(mixed, registry=registry).serial == ["g"]


def test_the_plans_dependencies_are_hints_that_add_order_but_never_overrule_the_contracts() -> None:
    registry = ActionRegistry(
        [
            Action(name="recall", description="", produces=("products",)),
            Action(name="copy", description="", requires=("products",), produces=("copy",)),
            Action(name="rules", description="", produces=("rules",)),
        ]
    )
    # The model says recall waits for copy: the contracts say the opposite, and win.
    tasks = [
        SubTask(id="copy", agent="w", action="copy"),
        SubTask(id="recall", agent="w", action="recall", depends_on=["copy"]),
        SubTask(id="rules", agent="w", action="rules", depends_on=["recall"]),
    ]
    order = order_tasks(tasks, registry=registry)
    assert order.dropped_hints == {"recall": ["copy"]}
    assert order.deps == {"copy": {"recall"}, "recall": set(), "rules": {"recall"}}
    # ...while the hint that rules waits for recall, which no contract implies, is kept.
    assert compute_waves(tasks, registry=registry) == [["recall"], ["copy", "rules"]]
    # A cycle among hints alone is still the plan's mistake, not something to guess at.
    with pytest.raises(PlanOrderError, match="cycle"):
        compute_waves([sub("a", "b"), sub("b", "a")], registry=ACTIONS)


def test_a_plan_of_undeclared_actions_runs_one_task_at_a_time() -> None:
    registry = ActionRegistry([Action(name="lookup", description="no contract")])
    lock = threading.Lock()
    busy = {"now": 0, "most": 0}

    def worker(item: WorkItem) -> str:
        with lock:
            busy["now"] += 1
            busy["most"] = max(busy["most"], busy["now"])
        with lock:
            busy["now"] -= 1
        return "ok"

    flow = build(
        fixed_planner(task("a"), task("b"), task("c")), workers={"w": worker}, actions=registry
    )
    events = custom_events(flow, {"request": "three lookups"})
    plan_done = next(e for e in events if e["event"] == "plan_done")
    assert plan_done["data"]["waves"] == [["a"], ["b"], ["c"]]
    assert plan_done["data"]["serial"] == ["a", "b", "c"]
    assert busy["most"] == 1
    assert events[-1]["data"]["metrics"]["wave_widths"] == [1, 1, 1]


def test_a_dropped_hint_does_not_block_the_task_that_stated_it() -> None:
    registry = ActionRegistry(
        [
            Action(name="recall", description="", produces=("products",)),
            Action(name="copy", description="", requires=("products",)),
        ]
    )
    flow = build(
        fixed_planner(
            task("copy", action="copy"), task("recall", action="recall", depends_on=["copy"])
        ),
        actions=registry,
    )
    events = custom_events(flow, {"request": "go"})
    plan_done = next(e for e in events if e["event"] == "plan_done")
    assert plan_done["data"]["waves"] == [["recall"], ["copy"]]
    assert plan_done["data"]["dropped_hints"] == {"recall": ["copy"]}
    assert events[-1]["data"]["status"] == "passed"


# --------------------------------------------------------------------------- escalation


def failing_on(task_ids: set[str]) -> Any:
    def work(item: WorkItem) -> str:
        if item.task.id in task_ids:
            raise RuntimeError(f"{item.task.id} cannot be done here")
        return f"done {item.task.id}"

    return work


def strict_checker(request: ScriptRequest) -> AIMessage:
    bad = re.findall(r"^\[([\w-]+)\] \S+ by \S+: (?!ok)", request.last_human_text, re.MULTILINE)
    return verdict(not bad, "some tasks failed" if bad else "", bad)


def escalating_planner(request: ScriptRequest) -> AIMessage:
    if "asked for a simpler plan" in request.last_human_text:
        note = re.search(r"Their note: (.*)", request.last_human_text)
        return plan(task("a-lite", inputs={"note": note.group(1) if note else ""}))
    return plan(task("a"), task("b"))


class Escalating:
    """A workflow whose task `a` fails on worker `w` (and succeeds on `backup`)."""

    def __init__(self) -> None:
        self.planner = ScriptedModel(policy=escalating_planner)
        self.checker = ScriptedModel(policy=strict_checker)
        self.reporter = reporter()
        self.flow = build(
            self.planner,
            workers={"w": failing_on({"a"}), "backup": failing_on(set())},
            checker=self.checker,
            reporter=self.reporter,
            max_rounds=1,
            escalate=True,
            checkpointer=InMemorySaver(),
        )
        self.config = thread("escalate")
        self.paused = self.flow.invoke({"request": "do a and b"}, self.config)

    def resume(self, answer: Any) -> dict[str, Any]:
        return self.flow.invoke(Command(resume=answer), self.config)


def test_the_last_failed_round_escalates_with_the_failed_tasks_and_what_was_tried() -> None:
    run = Escalating()
    [pending] = interrupts(run.paused)
    value = pending.value
    assert value["type"] == "escalation"
    assert value["feedback"] == "some tasks failed"
    assert value["choices"] == ["switch", "degrade", "skip", "abort"]
    assert value["workers"] == ["w", "backup"]
    [failed] = value["failed"]
    assert (failed["task_id"], failed["status"]) == ("a", "failed")
    assert failed["tried"] == [
        {
            "round": 1,
            "wave": 1,
            "agent": "w",
            "status": "failed",
            "attempts": 1,
            "error": "RuntimeError: a cannot be done here",
        }
    ]
    assert run.flow.get_state(run.config).next == ("escalate",)
    assert run.reporter.requests == []


def test_switch_runs_the_failed_tasks_again_on_another_worker() -> None:
    run = Escalating()
    state = run.resume({"action": "switch", "worker": "backup"})
    assert state["status"] == "passed"
    assert (state["results"]["a"].agent, state["results"]["a"].status) == ("backup", "ok")
    assert state["results"]["b"].round == 1  # kept, not run again
    assert [e.action for e in state["escalations"]] == ["switch"]
    assert state["metrics"].cost["a"].agents == ["w", "backup"]
    assert len(run.planner.requests) == 1  # a switch needs no new plan
    assert len(run.checker.requests) == 2


def test_the_answer_streams_as_an_event_with_the_choice() -> None:
    run = Escalating()
    answer = Command(resume={"action": "switch", "worker": "backup"})
    events = list(run.flow.stream(answer, run.config, stream_mode="custom"))
    [answered] = [e for e in events if e["event"] == "escalation_answered"]
    assert answered["msg"] == "a person chose switch"
    assert answered["data"] == {"action": "switch", "worker": "backup", "note": "",
                                "task_ids": ["a"]}


def test_a_switch_that_fails_again_escalates_again() -> None:
    run = Escalating()
    again = run.resume({"action": "switch", "worker": "w"})
    [pending] = interrupts(again)
    assert [t["agent"] for t in pending.value["failed"][0]["tried"]] == ["w", "w"]
    assert run.resume("abort")["status"] == "aborted"


def test_degrade_asks_the_planner_for_a_simpler_plan() -> None:
    run = Escalating()
    state = run.resume({"action": "degrade", "note": "leave out the hard part"})
    assert state["status"] == "passed"
    assert set(state["results"]) == {"b", "a-lite"}
    assert state["results"]["a-lite"].output == "done a-lite"
    asked = run.planner.requests[-1].last_human_text
    assert "Round 2 of 2." in asked
    assert "Their note: leave out the hard part" in asked


def test_skip_ends_the_run_with_the_failed_tasks_annotated() -> None:
    run = Escalating()
    state = run.resume({"action": "skip", "note": "not needed this week"})
    assert state["status"] == "partial"
    result = state["results"]["a"]
    assert (result.status, result.error) == ("skipped", "skipped by a person: not needed this week")
    told = run.reporter.requests[0].last_human_text
    assert "Status: partial" in told
    assert "[a] lookup by w: skipped\n  skipped by a person: not needed this week" in told


def test_abort_ends_the_run_without_another_model_call() -> None:
    run = Escalating()
    state = run.resume({"action": "abort", "note": "out of budget"})
    assert state["status"] == "aborted"
    assert state["report"] == (
        "Stopped by a person after 1 round(s): out of budget. Completed: b. Not completed: a."
    )
    assert run.reporter.requests == []
    assert state["messages"][-1].text == state["report"]
    assert state["metrics"].subtasks == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"action": "switch"}, "'switch' needs a 'worker', one of"),
        ({"action": "switch", "worker": "ghost"}, "not 'ghost'"),
        ({"action": "retry"}, "Resume the escalation with 'switch', 'degrade'"),
        ({"action": "skip", "task_ids": ["b"]}, r"task_ids \['b'\] are not failed tasks"),
        (42, "Resume the escalation with"),
    ],
)
def test_a_bad_escalation_answer_is_a_clear_error(answer: Any, message: str) -> None:
    run = Escalating()
    with pytest.raises(ValueError, match=message):
        run.resume(answer)


def test_without_escalate_the_last_failed_round_is_reported() -> None:
    flow = build(
        fixed_planner(task("a")),
        workers={"w": failing_on({"a"})},
        checker=ScriptedModel(policy=strict_checker),
        max_rounds=1,
    )
    assert flow.invoke({"request": "go"})["status"] == "max_rounds"


# --------------------------------------------------------------------------- metrics


def metered_worker() -> ScriptedModel:
    """Answers each task with usage that depends on the task: `a` 10+1, `b` 20+2, ..."""

    def policy(request: ScriptRequest) -> AIMessage:
        task_id = task_id_of(request)
        n = "abc".index(task_id) + 1
        usage = {"input_tokens": 10 * n, "output_tokens": n, "total_tokens": 11 * n}
        return AIMessage(content=f"done {task_id}", usage_metadata=usage)  # type: ignore[arg-type]

    return ScriptedModel(policy=policy)


def three_task_flow(**kwargs: Any) -> Any:
    return build(
        fixed_planner(task("a"), task("b"), task("c", depends_on=["a"])),
        workers={"w": metered_worker()},
        **kwargs,
    )


def test_the_run_reports_wave_width_violations_subtask_count_and_cost_per_subtask() -> None:
    events = custom_events(three_task_flow(checkpointer=InMemorySaver()), {"request": "go"})
    metrics = events[-1]["data"]["metrics"]
    assert metrics["subtasks"] == 3
    assert metrics["wave_widths"] == [2, 1]
    assert (metrics["max_wave_width"], metrics["mean_wave_width"]) == (2, 1.5)
    assert (metrics["downstream_runs"], metrics["dependency_violations"]) == (1, 0)
    assert metrics["dependency_violation_rate"] == 0.0
    assert {k: (c["model_calls"], c["input_tokens"], c["output_tokens"])
            for k, c in metrics["cost"].items()} == {
        "a": (1, 10, 1), "b": (1, 20, 2), "c": (1, 30, 3),
    }  # fmt: skip
    assert metrics["worker_tokens"] == 66
    work_done = [e["data"] for e in events if e["event"] == "work_done"]
    assert {d["task_id"]: d["input_tokens"] for d in work_done} == {"a": 10, "b": 20, "c": 30}
    assert set(work_done[0]) == {"task_id", "status", "attempts", "error", "model_calls",
                                 "input_tokens", "output_tokens"}


def result(task_id: str, round_: int, wave: int, status: str = "ok") -> TaskResult:
    return TaskResult(
        task_id=task_id, agent="w", action="lookup", status=status,  # type: ignore[arg-type]
        round=round_, wave=wave,
    )  # fmt: skip


def test_the_violation_rate_counts_downstream_runs_that_ran_before_their_dependency() -> None:
    tasks = {t.id: t for t in [sub("a"), sub("b", "a"), sub("c", "a"), sub("d", "x"), sub("x")]}
    history = [
        result("a", 1, 1),
        result("b", 1, 2),  # after a: fine
        result("c", 1, 1),  # in a's wave: ran before its input existed
        result("x", 1, 1, status="failed"),
        result("d", 1, 2, status="skipped"),  # not run: the scheduler kept the rule
    ]
    metrics = workflow_metrics(tasks, history)
    assert (metrics.downstream_runs, metrics.dependency_violations) == (2, 1)
    assert metrics.dependency_violation_rate == 0.5
    assert metrics.wave_widths == [3, 2]
    assert metrics.failures_by_agent == {"w": 1}


# --------------------------------------------------------------------------- spans


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    fathom.tracing.enable(span_processor=SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        fathom.tracing.disable()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_each_subtask_is_a_span_and_the_run_span_carries_the_metrics(
    spans: InMemorySpanExporter, use_async: bool
) -> None:
    import asyncio

    flow = three_task_flow(checkpointer=InMemorySaver())  # built with tracing on
    config = thread("traced")
    if use_async:
        state = asyncio.run(flow.ainvoke({"request": "go"}, config))
    else:
        state = flow.invoke({"request": "go"}, config)
    assert state["status"] == "passed"

    finished = spans.get_finished_spans()
    [root] = [s for s in finished if s.parent is None]
    assert root.name == "plan_work_check_report"
    run_id = attrs(root)["fathom.run_id"]
    assert attrs(root)["fathom.workflow.subtasks"] == 3
    assert attrs(root)["fathom.workflow.wave_widths"] == (2, 1)
    assert attrs(root)["fathom.workflow.dependency_violation_rate"] == 0.0
    assert attrs(root)["fathom.workflow.worker_tokens"] == 66
    assert '"c": {"agents": ["w"]' in attrs(root)["fathom.workflow.cost"]

    subtasks = {attrs(s)["fathom.subtask.id"]: s for s in finished if s.name.startswith("subtask:")}
    assert set(subtasks) == {"a", "b", "c"}
    for task_id, span in subtasks.items():
        a = attrs(span)
        assert span.name == f"subtask:{task_id}"
        assert a["openinference.span.kind"] == "CHAIN"
        assert a["session.id"] == "traced"
        assert a["fathom.run_id"] == run_id
        assert span.parent is not None and root.context is not None
        assert span.parent.span_id == root.context.span_id
        assert a["fathom.subtask.status"] == "ok"
        assert a["fathom.subtask.dependency_violation"] is False
    assert (attrs(subtasks["c"])["fathom.subtask.wave"], attrs(subtasks["c"])["fathom.subtask.depends_on"]) == (2, ("a",))  # noqa: E501
    assert [attrs(subtasks[t])["fathom.subtask.total_tokens"] for t in "abc"] == [11, 22, 33]
    # The worker's model call hangs under its subtask's span.
    c_context = subtasks["c"].context
    assert c_context is not None
    [worker_call] = [
        s for s in finished
        if s.parent is not None and s.parent.span_id == c_context.span_id
    ]  # fmt: skip
    assert attrs(worker_call)["openinference.span.kind"] == "LLM"
    assert attrs(worker_call)["llm.token_count.prompt"] == 30
