"""The `escalate` node: after the last round fails its check, a person decides (an interrupt).

The failure ladder runs from the cheapest step to the most expensive: each task's own
retries (`RetryPolicy`, with an idempotency key), re-planning after a failed check (up to
`max_rounds`), then a person. The interrupt's value names the failed tasks and what was
tried for each (every run of it: round, wave, worker, status, tries, error) with the
checker's feedback; the person's answer (`Escalation`) chooses:

- `switch`: run the failed tasks again on another worker (one round more, then the check);
- `degrade`: one round more in which the planner is asked for a simpler plan;
- `skip`: end the run with the failed tasks marked `skipped` and annotated (status
  `partial`; the reporter says what is missing);
- `abort`: end the run now, with a fixed report and no model call (status `aborted`).

A `switch` or `degrade` round that fails its check escalates again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from langchain_core.callbacks.manager import dispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.types import Send, interrupt
from pydantic import ValidationError

from fathom.patterns.workflow.contracts import ActionRegistry, Escalation, TaskResult
from fathom.patterns.workflow.dispatch import Dispatcher
from fathom.patterns.workflow.review import close_run
from fathom.patterns.workflow.state import WorkflowState, emitter
from fathom.patterns.workflow.waves import PlanOrderError, compute_waves
from fathom.tracing.keys import SPAN_ATTRIBUTES_EVENT

__all__ = ["EscalationNode"]

_FORMS = (
    "'switch', 'degrade', 'skip' or 'abort', or a dict such as "
    "{'action': 'switch', 'worker': '...'} (fields: action, worker, note, task_ids)"
)


def _tried(task_id: str, history: Sequence[TaskResult]) -> list[dict[str, Any]]:
    return [
        {
            "round": r.round,
            "wave": r.wave,
            "agent": r.agent,
            "status": r.status,
            "attempts": r.attempts,
            "error": r.error,
        }
        for r in history
        if r.task_id == task_id
    ]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity, as a node's owner
class EscalationNode:
    """The `escalate` node and the route after it.

    Args:
        dispatch: Routes a `switch` round to its workers.
        registry: Checks that a `switch` worker may perform the failed tasks' actions.
        workers: The worker names.
        max_parallel: The most tasks in one wave of a `switch` round.
    """

    dispatch: Dispatcher
    registry: ActionRegistry
    workers: list[str]
    _: KW_ONLY
    max_parallel: int | None

    @staticmethod
    def failed_ids(state: WorkflowState) -> list[str]:
        """The tasks the last check rejected or that did not succeed (all, if it named none)."""
        results = state.get("results") or {}
        verdict = state.get("verdict")
        named = set(verdict.failed_task_ids) if verdict is not None else set()
        failed = [tid for tid, r in results.items() if tid in named or r.status != "ok"]
        return failed or list(results)

    def _payload(self, state: WorkflowState, failed: list[str]) -> dict[str, Any]:
        results = state.get("results") or {}
        tasks = state.get("tasks") or {}
        history = state.get("history") or []
        verdict = state.get("verdict")
        entries = []
        for task_id in failed:
            result = results[task_id]
            task = tasks.get(task_id)
            entries.append(
                {
                    "task_id": task_id,
                    "agent": result.agent,
                    "action": result.action,
                    "status": result.status,
                    "error": result.error,
                    "output": result.output,
                    "inputs": task.inputs if task is not None else {},
                    "tried": _tried(task_id, history),
                }
            )
        return {
            "type": "escalation",
            "request": state.get("request", ""),
            "rounds": state.get("round", 0),
            "feedback": verdict.feedback if verdict is not None else "",
            "failed": entries,
            "choices": ["switch", "degrade", "skip", "abort"],
            "workers": list(self.workers),
        }

    def _read(self, answer: Any, failed: list[str], state: WorkflowState) -> Escalation:
        fields: Any = {"action": answer} if isinstance(answer, str) else answer
        if not isinstance(fields, Mapping):
            raise ValueError(f"Resume the escalation with {_FORMS}, not {answer!r}")
        try:
            choice = Escalation.model_validate({**fields, "round": state.get("round", 0)})
        except ValidationError as error:
            raise ValueError(f"Resume the escalation with {_FORMS}: {error}") from error
        unknown = [tid for tid in choice.task_ids if tid not in failed]
        if unknown:
            raise ValueError(f"task_ids {unknown} are not failed tasks; failed: {failed}")
        task_ids = choice.task_ids or failed
        if choice.action == "switch":
            self._check_switch(choice.worker, task_ids, state)
        return choice.model_copy(update={"task_ids": task_ids})

    def _check_switch(self, worker: str | None, task_ids: list[str], state: WorkflowState) -> None:
        if worker not in self.workers:
            raise ValueError(
                f"'switch' needs a 'worker', one of {self.workers}; not {worker!r}"
            )
        tasks = state.get("tasks") or {}
        for task_id in task_ids:
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(
                    f"task {task_id!r} never ran (the plan's checks rejected it), so it "
                    "cannot be switched; answer degrade, skip or abort"
                )
            problems = self.registry.problems_with(task.model_copy(update={"agent": worker}))
            if problems:
                raise ValueError("; ".join(problems))

    def escalate(self, state: WorkflowState, config: RunnableConfig) -> dict[str, Any]:
        """Ask a person what to do about the failed tasks, and do it."""
        failed = self.failed_ids(state)
        answer = interrupt(self._payload(state, failed))
        choice = self._read(answer, failed, state)
        emitter()(
            "escalation_answered",
            f"a person chose {choice.action}",
            **choice.model_dump(exclude={"round"}),
        )
        update: dict[str, Any] = {"escalations": [*(state.get("escalations") or []), choice]}
        results = state.get("results") or {}
        if choice.action in ("switch", "degrade"):
            update.update(
                status="running",
                extra_rounds=state.get("extra_rounds", 0) + 1,
                results=dict.fromkeys(choice.task_ids),
                redo=[results[tid] for tid in choice.task_ids if tid in results],
            )
            if choice.action == "degrade":
                update["degrade"] = choice.note
            else:
                update.update(self._switch(state, choice))
            return update
        if choice.action == "skip":
            why = "skipped by a person" + (f": {choice.note}" if choice.note else "")
            skipped = {
                tid: results[tid].model_copy(update={"status": "skipped", "error": why, "wave": 0})
                for tid in choice.task_ids
            }
            update.update(status="partial", results=skipped, history=list(skipped.values()))
            return update
        return {**update, **self._abort(state, choice, config)}

    def _switch(self, state: WorkflowState, choice: Escalation) -> dict[str, Any]:
        tasks = state.get("tasks") or {}
        results = state.get("results") or {}
        rerun = [tasks[tid] for tid in tasks if tid in choice.task_ids]
        switched = [
            task
            if results.get(task.id) is not None and results[task.id].status == "skipped"
            else task.model_copy(update={"agent": choice.worker})
            for task in rerun
        ]
        redo = set(choice.task_ids)
        done = [tid for tid, r in results.items() if r.status == "ok" and tid not in redo]
        try:
            waves = compute_waves(
                switched, done=done, registry=self.registry, max_parallel=self.max_parallel
            )
        except PlanOrderError as error:
            raise ValueError(
                f"the failed tasks cannot run again on their own ({error}); include the "
                "tasks they depend on in task_ids, or answer degrade, skip or abort"
            ) from error
        return {
            "tasks": {**tasks, **{task.id: task for task in switched}},
            "waves": waves,
            "wave": 0,
        }

    def _abort(
        self, state: WorkflowState, choice: Escalation, config: RunnableConfig
    ) -> dict[str, Any]:
        results = state.get("results") or {}
        done = [tid for tid, r in results.items() if r.status == "ok"]
        missing = [tid for tid in results if tid not in done]
        text = f"Stopped by a person after {state.get('round', 0)} round(s)"
        text += f": {choice.note}." if choice.note else "."
        text += f" Completed: {', '.join(done) or 'none'}."
        text += f" Not completed: {', '.join(missing) or 'none'}."
        update, metrics = close_run(state, text, "aborted")
        dispatch_custom_event(SPAN_ATTRIBUTES_EVENT, metrics.span_attributes(), config=config)
        return update

    def route(self, state: WorkflowState) -> str | list[Send]:
        """After an answer: another round (planner or workers), the reporter, or the end."""
        status = state.get("status")
        if status == "running":
            return "planner" if state.get("degrade") is not None else self.dispatch.route(state)
        return END if status == "aborted" else "reporter"
