"""The planner node: the request becomes a validated `Plan`, ordered into waves by code.

The planner model answers with a `Plan`; it is accepted only when every task names a
registered action and a known worker allowed to perform it, and the dependencies can be
ordered. Invalid answers are shown their problems and asked again; when the tries run
out, tasks with bad actions or workers are rejected (with the tasks that depend on them)
and the rest runs, or the run ends with the failure reported. The `ask` node pauses for
the user's answer when the planner needs information.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langgraph.types import interrupt
from pydantic import BaseModel, Field, create_model

from fathom.patterns.workflow.contracts import (
    ActionRegistry,
    Clarification,
    Plan,
    SubTask,
    TaskResult,
)
from fathom.patterns.workflow.prompts import planner_messages
from fathom.patterns.workflow.state import WorkflowState, emitter, kept_results
from fathom.patterns.workflow.structured import (
    StructuredCall,
    StructuredNode,
    StructuredOutputError,
)
from fathom.patterns.workflow.waves import PlanOrderError, compute_waves, order_tasks

__all__ = ["PlannerNode"]


def _plan_prompt_schema(registry: ActionRegistry, agents: list[str]) -> type[BaseModel]:
    """`Plan` as the model sees it: actions and agents constrained to the known names."""
    # The names are known only at run time, so the field types are built as values.
    task_fields: dict[str, Any] = {
        "action": (Literal[tuple(registry)], Field(description="One of the registered actions.")),
        "agent": (Literal[tuple(agents)], Field(description="The worker that performs it.")),
    }
    task = create_model("SubTask", __base__=SubTask, __doc__=SubTask.__doc__, **task_fields)
    plan_fields: dict[str, Any] = {"tasks": (list[task], Field(default_factory=list))}
    return create_model("Plan", __base__=Plan, __doc__=Plan.__doc__, **plan_fields)


class PlannerNode(StructuredNode[Plan]):
    """The `planner` and `ask` nodes. Holds configuration only, never run state.

    Args:
        model: The planner model.
        registry: The actions plans may use.
        workers: The worker names plans may assign.
        max_rounds: Shown to the planner on a re-plan.
        max_parallel: The most tasks in one wave.
        attempts: Answers to ask for before giving up.
    """

    def __init__(
        self,
        model: BaseChatModel,
        registry: ActionRegistry,
        workers: Sequence[str],
        *,
        max_rounds: int,
        max_parallel: int | None,
        attempts: int,
    ) -> None:
        self.registry = registry
        self.workers = list(workers)
        self.max_rounds = max_rounds
        self.max_parallel = max_parallel
        self.call = StructuredCall(
            model,
            Plan,
            agent_name="planner",
            attempts=attempts,
            prompt_schema=_plan_prompt_schema(registry, self.workers),
        )

    def _question(self, state: WorkflowState) -> tuple[list[Any], dict[str, Any]]:
        emit = emitter()
        round_number = state.get("round", 0) + 1
        emit("plan_thinking", f"planning round {round_number}", round=round_number)
        kept = kept_results(state)
        messages = planner_messages(
            self.registry,
            self.workers,
            request=state.get("request", ""),
            clarifications=state.get("clarifications") or [],
            kept=kept,
            redo=state.get("redo") or [],
            verdict=state.get("verdict"),
            round_number=round_number,
            max_rounds=self.max_rounds + state.get("extra_rounds", 0),
            degrade=state.get("degrade"),
        )
        replanning = state.get("verdict") is not None

        def on_invalid(attempt: int, problems: list[str]) -> None:
            emit("plan_invalid", f"plan rejected (try {attempt})", problems=problems)

        return messages, {
            "validate": lambda plan: self._plan_problems(plan, kept, replanning),
            "on_invalid": on_invalid,
        }

    def _task_problems(self, task: SubTask) -> list[str]:
        if task.agent not in self.workers:
            known = ", ".join(self.workers)
            return [f"task {task.id!r}: unknown worker {task.agent!r} (workers: {known})"]
        return self.registry.problems_with(task)

    def _plan_problems(
        self, plan: Plan, kept: Mapping[str, TaskResult], replanning: bool
    ) -> list[str]:
        if plan.intent == "clarify":
            return [] if plan.question.strip() else ["intent is 'clarify' but question is empty"]
        if plan.intent == "chat":
            if replanning:
                return ["the last check failed: plan the remaining work (intent 'work')"]
            return []
        if not plan.tasks:
            return ["intent is 'work' but there are no tasks"]
        problems = [p for task in plan.tasks for p in self._task_problems(task)]
        try:
            compute_waves(plan.tasks, done=kept, registry=self.registry)
        except PlanOrderError as error:
            problems.append(str(error))
        return problems

    def _answered(
        self,
        state: WorkflowState,
        plan: Plan,
        rejected: Mapping[str, TaskResult] | None = None,
        errors: list[str] | None = None,
    ) -> dict[str, Any]:
        kept = kept_results(state)
        update: dict[str, Any] = {
            "plan": plan,
            "status": "running",
            "waves": [],
            "wave": 0,
            "degrade": None,
        }
        serial: list[str] = []
        dropped: dict[str, list[str]] = {}
        if plan.intent == "work":
            order = order_tasks(plan.tasks, done=kept, registry=self.registry)
            serial, dropped = order.serial, order.dropped_hints
            effective = {
                task.id: task.model_copy(
                    update={
                        "depends_on": [
                            *(d for d in task.depends_on if d not in dropped.get(task.id, ())),
                            *sorted(order.deps[task.id] - set(task.depends_on)),
                        ]
                    }
                )
                for task in plan.tasks
            }
            waves = compute_waves(
                plan.tasks, done=kept, registry=self.registry, max_parallel=self.max_parallel
            )
            update.update(
                tasks={**(state.get("tasks") or {}), **effective},
                waves=waves,
                results=dict(rejected or {}),
                history=list((rejected or {}).values()),
            )
        if errors:
            update["errors"] = [*(state.get("errors") or []), *errors]
        emitter()(
            "plan_done",
            f"plan: {plan.intent}, {len(update['waves'])} wave(s)",
            intent=plan.intent,
            reasoning=plan.reasoning,
            question=plan.question,
            tasks=[t.model_dump() for t in plan.tasks] if plan.intent == "work" else [],
            waves=update["waves"],
            serial=serial,
            dropped_hints=dropped,
        )
        return update

    def _unanswered(self, state: WorkflowState, error: StructuredOutputError) -> dict[str, Any]:
        """Out of tries: run what is valid, reject tasks with bad actions, or give up."""
        plan = error.candidate
        failure = {
            "status": "failed",
            "errors": [*(state.get("errors") or []), f"planner: {error}"],
        }
        if not isinstance(plan, Plan) or plan.intent != "work":
            return failure
        reasons = {t.id: "; ".join(p) for t in plan.tasks if (p := self._task_problems(t))}
        changed = True
        while changed:
            changed = False
            for task in plan.tasks:
                blocker = next((d for d in task.depends_on if d in reasons), None)
                if task.id not in reasons and blocker is not None:
                    reasons[task.id] = f"depends on rejected task {blocker!r}"
                    changed = True
        remaining = plan.model_copy(
            update={"tasks": [t for t in plan.tasks if t.id not in reasons]}
        )
        replanning = state.get("verdict") is not None
        if not reasons or self._plan_problems(remaining, kept_results(state), replanning):
            return failure
        round_number = state.get("round", 0) + 1
        rejected = {
            task.id: TaskResult(
                task_id=task.id,
                agent=task.agent,
                action=task.action,
                status="rejected" if reasons[task.id].startswith("task ") else "skipped",
                error=reasons[task.id],
                round=round_number,
            )
            for task in plan.tasks
            if task.id in reasons
        }
        errors = [f"rejected {tid}: {why}" for tid, why in reasons.items()]
        return self._answered(state, remaining, rejected, errors)

    def ask(self, state: WorkflowState) -> dict[str, Any]:
        """Pause for the user's answer to the planner's question, then plan again."""
        plan = state.get("plan")
        question = plan.question if plan is not None else ""
        request = state.get("request", "")
        answer = interrupt({"type": "clarify", "question": question, "request": request})
        if isinstance(answer, dict) and isinstance(answer.get("answer"), str):
            answer = answer["answer"]
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(
                f"Resume the workflow with the user's answer: Command(resume='...') or "
                f"Command(resume={{'answer': '...'}}), not {answer!r}"
            )
        emitter()("clarified", f"user answered: {answer}", question=question, answer=answer)
        clarification = Clarification(question=question, answer=answer)
        return {"clarifications": [*(state.get("clarifications") or []), clarification]}
