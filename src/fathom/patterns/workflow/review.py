"""The checker and reporter nodes: judge the round's results, then answer the user.

The checker answers with a validated `CheckVerdict`. A pass goes to the reporter; a fail
with rounds left drops the rejected (and unsuccessful) results and goes back to the
planner; a fail in the last round goes to the `escalate` node when the workflow escalates
to a person, else to the reporter with that status, as does no valid verdict at all. The
reporter writes plain text for the user whatever the outcome, and the run's metrics are
computed as it ends.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from fathom.patterns.workflow.contracts import CheckVerdict
from fathom.patterns.workflow.metrics import WorkflowMetrics, workflow_metrics
from fathom.patterns.workflow.prompts import checker_messages, reporter_messages
from fathom.patterns.workflow.state import WorkflowState, emitter
from fathom.patterns.workflow.structured import (
    StructuredCall,
    StructuredNode,
    StructuredOutputError,
    named_config,
)
from fathom.tracing.keys import SPAN_ATTRIBUTES_EVENT

__all__ = ["CheckerNode", "ReporterNode", "close_run"]


def close_run(
    state: WorkflowState, text: str, status: str
) -> tuple[dict[str, Any], WorkflowMetrics]:
    """The update that ends a run with `text` as its report, and the run's metrics.

    Emits `report_done` and `done` (with the metrics); the caller puts the metrics on the
    run's span (`SPAN_ATTRIBUTES_EVENT`).
    """
    metrics = workflow_metrics(state.get("tasks") or {}, state.get("history") or [])
    emit = emitter()
    emit("report_done", "report written", chars=len(text))
    emit(
        "done",
        f"done: {status}",
        status=status,
        rounds=state.get("round", 0),
        metrics=metrics.model_dump(),
    )
    update = {
        "report": text,
        "status": status,
        "metrics": metrics,
        "messages": [AIMessage(content=text, name="reporter")],
    }
    return update, metrics


class CheckerNode(StructuredNode[CheckVerdict]):
    """The `checker` node and the route after it.

    Args:
        model: The checker model.
        max_rounds: Checks allowed before a failing run ends with status `max_rounds`.
        attempts: Answers to ask for before giving up.
    """

    def __init__(
        self, model: BaseChatModel, *, max_rounds: int, attempts: int, escalate: bool = False
    ) -> None:
        self.max_rounds = max_rounds
        self.escalate = escalate
        self.call = StructuredCall(model, CheckVerdict, agent_name="checker", attempts=attempts)

    def _question(self, state: WorkflowState) -> tuple[list[Any], dict[str, Any]]:
        emit = emitter()
        round_number = state.get("round", 0) + 1
        emit("check_thinking", f"checking round {round_number}", round=round_number)
        results = state.get("results") or {}
        messages = checker_messages(
            request=state.get("request", ""),
            clarifications=state.get("clarifications") or [],
            tasks=state.get("tasks") or {},
            results=results,
        )

        def validate(verdict: CheckVerdict) -> list[str]:
            problems = [
                f"failed_task_ids: unknown task {tid!r}"
                for tid in verdict.failed_task_ids
                if tid not in results
            ]
            if verdict.passed and verdict.failed_task_ids:
                problems.append("passed is true but failed_task_ids is not empty")
            if not verdict.passed and not verdict.feedback.strip():
                problems.append("passed is false but feedback is empty")
            return problems

        def on_invalid(attempt: int, problems: list[str]) -> None:
            emit("check_invalid", f"verdict rejected (try {attempt})", problems=problems)

        return messages, {"validate": validate, "on_invalid": on_invalid}

    def _unanswered(self, state: WorkflowState, error: StructuredOutputError) -> dict[str, Any]:
        emitter()("check_done", "no valid verdict", passed=False, error=str(error))
        return {
            "round": state.get("round", 0) + 1,
            "status": "failed",
            "errors": [*(state.get("errors") or []), f"checker: {error}"],
        }

    def _answered(self, state: WorkflowState, verdict: CheckVerdict) -> dict[str, Any]:
        round_number = state.get("round", 0) + 1
        results = state.get("results") or {}
        update: dict[str, Any] = {"round": round_number, "verdict": verdict}
        if verdict.passed:
            update["status"] = "passed"
        elif round_number >= self.max_rounds + state.get("extra_rounds", 0):
            update["status"] = "max_rounds"
        else:
            drop = set(verdict.failed_task_ids) | {
                tid for tid, result in results.items() if result.status != "ok"
            }
            update.update(
                status="running",
                results=dict.fromkeys(drop),
                redo=[results[tid] for tid in results if tid in drop],
            )
        emitter()(
            "check_done",
            "check passed" if verdict.passed else f"check failed: {verdict.feedback}",
            passed=verdict.passed,
            feedback=verdict.feedback,
            failed_task_ids=verdict.failed_task_ids,
            round=round_number,
            status=update["status"],
        )
        return update

    def route_after_check(self, state: WorkflowState) -> str:
        """A failed check with rounds left goes back to the planner; one without escalates
        (when the workflow does) or reports, as does anything else."""
        status = state.get("status")
        if status == "running":
            return "planner"
        if status == "max_rounds" and self.escalate:
            return "escalate"
        return "reporter"


class ReporterNode:
    """The `reporter` node: one plain-text call, tagged `lc_agent_name="reporter"`."""

    def __init__(self, model: BaseChatModel) -> None:
        self.reporter = model

    def _reporter_call(self, state: WorkflowState) -> tuple[list[Any], str]:
        status = state.get("status", "running")
        if status == "running":
            status = "chat"
        emitter()("report_thinking", "writing the report", status=status)
        verdict = state.get("verdict")
        messages = reporter_messages(
            request=state.get("request", ""),
            clarifications=state.get("clarifications") or [],
            results=state.get("results") or {},
            status=status,
            errors=state.get("errors") or [],
            feedback=verdict.feedback if verdict is not None else "",
        )
        return messages, status

    @staticmethod
    def _text(answer: Any) -> str:
        return str(answer.text) if isinstance(answer, AIMessage) else str(answer)

    def report(self, state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        """Write the answer to the user."""
        messages, status = self._reporter_call(state)
        answer = self.reporter.invoke(messages, named_config(config, "reporter"))
        update, metrics = close_run(state, self._text(answer), status)
        dispatch_custom_event(SPAN_ATTRIBUTES_EVENT, metrics.span_attributes(), config=config)
        return update

    async def areport(self, state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        """Async `report`."""
        messages, status = self._reporter_call(state)
        answer = await self.reporter.ainvoke(messages, named_config(config, "reporter"))
        update, metrics = close_run(state, self._text(answer), status)
        attributes = metrics.span_attributes()
        await adispatch_custom_event(SPAN_ATTRIBUTES_EVENT, attributes, config=config)
        return update
