"""The state of the plan → work → check → report workflow, and its progress events.

The state holds typed pydantic objects (plans, tasks, results, verdicts); parallel
workers' results merge by task id through `merge_results`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.config import get_stream_writer
from langgraph.graph.message import add_messages
from pydantic import BaseModel

from fathom.patterns.workflow.contracts import (
    CheckVerdict,
    Clarification,
    Escalation,
    Plan,
    SubTask,
    TaskResult,
)
from fathom.patterns.workflow.metrics import TaskCost, WorkflowMetrics
from fathom.patterns.workflow.workers import Emit
from fathom.state import merge_update

__all__ = [
    "CHECKPOINT_TYPES",
    "WorkflowInput",
    "WorkflowState",
    "WorkflowStatus",
    "append_history",
    "emitter",
    "kept_results",
    "merge_results",
]

WorkflowStatus = Literal[
    "running", "passed", "chat", "max_rounds", "failed", "partial", "aborted"
]
"""`running` until the reporter; then `passed`, `chat` (nothing to do), `max_rounds` (the
check never passed), `failed` (a model gave no valid answer, or nothing could run),
`partial` (after an escalation, a person chose to skip the failed tasks) or `aborted` (a
person ended the run at an escalation)."""

CHECKPOINT_TYPES: tuple[type[BaseModel], ...] = (
    CheckVerdict,
    Clarification,
    Escalation,
    Plan,
    SubTask,
    TaskCost,
    TaskResult,
    WorkflowMetrics,
)
"""The pydantic types the workflow keeps in its state. LangGraph allows them in strict
mode (they are in the state schema) and otherwise logs a one-time warning per type; to
allow them explicitly, build the checkpointer with
`serde=JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)`."""


def merge_results(
    left: dict[str, TaskResult] | None, right: dict[str, TaskResult | None] | None
) -> dict[str, TaskResult]:
    """Reducer for `results`: parallel workers' results merge by task id; `None` removes one."""
    return merge_update(left, right)


def append_history(
    left: list[TaskResult] | None, right: list[TaskResult] | None
) -> list[TaskResult]:
    """Reducer for `history`: every result, in the order they came (parallel ones too)."""
    return [*(left or []), *(right or [])]


class WorkflowInput(TypedDict, total=False):
    """What the workflow is invoked with: a `request`, or `messages` ending in the user's."""

    request: str
    messages: list[AnyMessage]


class WorkflowState(TypedDict, total=False):
    """The workflow's state (its channels); every field is reset when a new request starts.

    Attributes:
        messages: The conversation: each request and each report.
        request: The request being worked on.
        clarifications: Questions asked of the user and the answers.
        plan: The planner's latest plan, as it answered.
        tasks: Every task planned in this run, by id, with the dependencies code added.
        waves: The current round's tasks in waves; `wave` is the next one to run.
        wave: Index into `waves`.
        results: The current result of every task, by id (completed ones kept across
            rounds; those the checker rejected are removed).
        history: Every result of the run, in order, those later redone included (what
            the metrics are computed from).
        redo: The results the last check rejected.
        round: Checks done so far.
        extra_rounds: Rounds a person granted at escalations (beyond `max_rounds`).
        verdict: The last check's verdict.
        escalations: The answers given at escalations, in order.
        degrade: Set by a `degrade` answer: the note the next planner call is given.
        status: See `WorkflowStatus`.
        errors: Why work was rejected, skipped or not done.
        report: The reporter's answer.
        metrics: The run's wave widths, dependency violations, subtask count and cost per
            subtask, set when the run ends.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    request: str
    clarifications: list[Clarification]
    plan: Plan | None
    tasks: dict[str, SubTask]
    waves: list[list[str]]
    wave: int
    results: Annotated[dict[str, TaskResult], merge_results]
    history: Annotated[list[TaskResult], append_history]
    redo: list[TaskResult]
    round: int
    extra_rounds: int
    verdict: CheckVerdict | None
    escalations: list[Escalation]
    degrade: str | None
    status: WorkflowStatus
    errors: list[str]
    report: str
    metrics: WorkflowMetrics | None


def kept_results(state: Mapping[str, Any]) -> dict[str, TaskResult]:
    """The results that succeeded and were not rejected by a check: kept across rounds."""
    return {k: r for k, r in (state.get("results") or {}).items() if r.status == "ok"}


def emitter() -> Emit:
    """An `Emit` that writes `{"event", "msg", "data"}` to the graph's custom stream."""
    writer = get_stream_writer()

    def emit(event: str, msg: str, **data: Any) -> None:
        writer({"event": event, "msg": msg, "data": data})

    return emit
