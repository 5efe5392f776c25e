"""Running the waves: `Send` each task of a wave to the worker node, then join.

Code routes after the planner and after every wave: to the reporter (nothing to do), to
the `ask` node, to one `worker` task per task of the next wave (run in parallel, results
merged by the state's reducer), or to the checker once the last wave is done. A task whose
dependency did not succeed is skipped rather than run without its input. A task whose
action needs approval first asks a person (an interrupt): approved, it runs (with the
inputs the person edited, if any); rejected, it ends `rejected` and its dependants are
skipped.

Each task runs inside a chain run of its own, `subtask:<id>`, which the tracing handler
turns into a span with the task's id, worker, action, wave, round and dependencies, and,
when it ends, its status, tries, model calls, tokens and whether it ran before a
dependency had succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from langchain_core.callbacks.manager import adispatch_custom_event, dispatch_custom_event
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.types import Send, interrupt

from fathom.patterns.workflow.contracts import ActionRegistry, SubTask, TaskResult, WorkItem
from fathom.patterns.workflow.metrics import RAN
from fathom.patterns.workflow.state import WorkflowState, emitter
from fathom.patterns.workflow.workers import Emit, WorkerRunner
from fathom.tracing.keys import SPAN_ATTRIBUTES_EVENT, SPAN_METADATA_KEY


class WorkPacket(TypedDict):
    """What `route` sends to one `worker` run: a task and what it needs from its wave."""

    task: SubTask
    upstream: dict[str, str]
    """Outputs of the dependencies that succeeded, by task id."""
    blocked: list[str]
    """Dependencies without a successful result: the task is not run."""
    late: list[str]
    """Dependencies whose result is not from an earlier wave (a violation if it runs)."""
    round: int
    wave: int


__all__ = ["Dispatcher", "WorkPacket"]

_APPROVAL_FORMS = (
    "'approve', 'reject', {'type': 'approve'}, {'type': 'reject', 'message': '...'} or "
    "{'type': 'edit', 'inputs': {...}}"
)


def _read_approval(answer: Any) -> tuple[str, str, dict[str, Any] | None]:
    """A person's answer to an approval as (decision, message, edited inputs)."""
    if answer is True or answer == "approve":
        return "approve", "", None
    if answer is False or answer == "reject":
        return "reject", "", None
    if isinstance(answer, Mapping):
        kind = answer.get("type")
        message = answer.get("message")
        inputs = answer.get("inputs")
        if kind == "approve":
            return "approve", "", None
        if kind == "reject" and isinstance(message, str | None):
            return "reject", message or "", None
        if kind == "edit" and isinstance(inputs, Mapping):
            return "approve", "", dict(inputs)
    raise ValueError(f"Resume a task approval with {_APPROVAL_FORMS}, not {answer!r}")


def _span_start(packet: WorkPacket, task: SubTask, needs_approval: bool) -> dict[str, Any]:
    return {
        "fathom.subtask.id": task.id,
        "fathom.subtask.agent": task.agent,
        "fathom.subtask.action": task.action,
        "fathom.subtask.wave": packet["wave"],
        "fathom.subtask.round": packet["round"],
        "fathom.subtask.depends_on": list(task.depends_on),
        "fathom.subtask.needs_approval": needs_approval,
    }


def _span_end(result: TaskResult, packet: WorkPacket) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "fathom.subtask.status": result.status,
        "fathom.subtask.attempts": result.attempts,
        "fathom.subtask.model_calls": result.model_calls,
        "fathom.subtask.input_tokens": result.input_tokens,
        "fathom.subtask.output_tokens": result.output_tokens,
        "fathom.subtask.total_tokens": result.input_tokens + result.output_tokens,
        "fathom.subtask.dependency_violation": result.status in RAN and bool(packet["late"]),
    }
    if result.error:
        attributes["fathom.subtask.error"] = result.error
    return attributes


class Dispatcher:
    """The routes after planning and after each wave, and the `worker` and `join` nodes.

    Args:
        runners: The workers by name.
        registry: Looks up each task's action (its description is shown to the worker).
    """

    def __init__(self, runners: Mapping[str, WorkerRunner], registry: ActionRegistry) -> None:
        self.runners = dict(runners)
        self.registry = registry

    def route(self, state: WorkflowState) -> str | list[Send]:
        """After planning or a wave: report, ask, run the next wave, or check."""
        plan = state.get("plan")
        if state.get("status") != "running" or plan is None or plan.intent == "chat":
            return "reporter"
        if plan.intent == "clarify":
            return "ask"
        waves = state.get("waves") or []
        index = state.get("wave", 0)
        if index >= len(waves):
            return "checker"
        results = state.get("results") or {}
        tasks = state.get("tasks") or {}
        round_number = state.get("round", 0) + 1
        sends = []
        for task_id in waves[index]:
            task = tasks[task_id]
            upstream = {
                dep: results[dep].output
                for dep in task.depends_on
                if dep in results and results[dep].status == "ok"
            }
            late = [
                dep
                for dep in upstream
                if (results[dep].round, results[dep].wave) >= (round_number, index + 1)
            ]
            packet: WorkPacket = {
                "task": task,
                "upstream": upstream,
                "blocked": [dep for dep in task.depends_on if dep not in upstream],
                "late": late,
                "round": round_number,
                "wave": index + 1,
            }
            sends.append(Send("worker", packet))
        return sends

    # ------------------------------------------------------------------ one task

    def _approve(self, packet: WorkPacket) -> tuple[SubTask, TaskResult | None]:
        """Ask a person before a task whose action needs approval (an interrupt)."""
        task: SubTask = packet["task"]
        action = self.registry.get(task.action)
        if action is None or not action.needs_approval or packet["blocked"]:
            return task, None
        answer = interrupt(
            {
                "type": "approval",
                "task_id": task.id,
                "task": task.model_dump(),
                "description": action.description,
                "upstream": dict(packet["upstream"]),
                "round": packet["round"],
                "wave": packet["wave"],
            }
        )
        decision, message, inputs = _read_approval(answer)
        if decision == "reject":
            rejected = TaskResult(
                task_id=task.id,
                agent=task.agent,
                action=task.action,
                status="rejected",
                error="rejected by a person" + (f": {message}" if message else ""),
                round=packet["round"],
            )
            return task, rejected
        if inputs is not None:
            task = task.model_copy(update={"inputs": inputs})
        return task, None

    def _work_setup(self, packet: WorkPacket) -> tuple[WorkItem, Emit, TaskResult | None]:
        task, decided = self._approve(packet)
        round_number = int(packet["round"])
        item = WorkItem(
            task=task,
            upstream=dict(packet["upstream"]),
            round=round_number,
            idempotency_key=task.retry.idempotency_key or f"{task.id}:{round_number}",
        )
        emit = emitter()
        emit(
            "work_start",
            f"task {task.id}: {task.action} by {task.agent}",
            task_id=task.id,
            agent=task.agent,
            action=task.action,
            wave=packet["wave"],
            round=round_number,
        )
        blocked = list(packet["blocked"])
        if decided is not None or not blocked:
            return item, emit, decided
        skipped = TaskResult(
            task_id=task.id,
            agent=task.agent,
            action=task.action,
            status="skipped",
            error="a task it depends on did not succeed: " + ", ".join(blocked),
            round=round_number,
        )
        return item, emit, skipped

    def _subtask_config(self, config: RunnableConfig, task: SubTask) -> RunnableConfig:
        name = f"subtask:{task.id}"
        return merge_configs(
            config,
            {
                "run_name": name,
                "metadata": {SPAN_METADATA_KEY: name, "lc_agent_name": f"worker:{task.agent}"},
            },
        )

    def _needs_approval(self, task: SubTask) -> bool:
        action = self.registry.get(task.action)
        return action is not None and action.needs_approval

    @staticmethod
    def _work_done(result: TaskResult, packet: WorkPacket, emit: Emit) -> dict[str, Any]:
        emit(
            "work_done",
            f"task {result.task_id}: {result.status}",
            **result.model_dump(include={"task_id", "status", "attempts", "error", "model_calls",
                                         "input_tokens", "output_tokens"}),
        )
        return {"results": {result.task_id: result}, "history": [result]}

    def work(self, packet: WorkPacket, config: RunnableConfig) -> dict[str, Any]:
        """Run one task on its worker (one of several in parallel), as its own span."""
        item, emit, decided = self._work_setup(packet)
        task = item.task

        def run(_: Any, config: RunnableConfig) -> TaskResult:
            start = _span_start(packet, task, self._needs_approval(task))
            dispatch_custom_event(SPAN_ATTRIBUTES_EVENT, start, config=config)
            result = decided or self.runners[task.agent].run(
                item, self.registry.get(task.action), config, emit
            )
            result = result.model_copy(update={"wave": packet["wave"]})
            dispatch_custom_event(SPAN_ATTRIBUTES_EVENT, _span_end(result, packet), config=config)
            return result

        runnable = RunnableLambda(run, name=f"subtask:{task.id}")
        result = runnable.invoke(None, self._subtask_config(config, task))
        return self._work_done(result, packet, emit)

    async def awork(self, packet: WorkPacket, config: RunnableConfig) -> dict[str, Any]:
        """Async `work`."""
        item, emit, decided = self._work_setup(packet)
        task = item.task

        async def run(_: Any, config: RunnableConfig) -> TaskResult:
            start = _span_start(packet, task, self._needs_approval(task))
            await adispatch_custom_event(SPAN_ATTRIBUTES_EVENT, start, config=config)
            result = decided or await self.runners[task.agent].arun(
                item, self.registry.get(task.action), config, emit
            )
            result = result.model_copy(update={"wave": packet["wave"]})
            end = _span_end(result, packet)
            await adispatch_custom_event(SPAN_ATTRIBUTES_EVENT, end, config=config)
            return result

        runnable = RunnableLambda(run, name=f"subtask:{task.id}")
        result = await runnable.ainvoke(None, self._subtask_config(config, task))
        return self._work_done(result, packet, emit)

    @staticmethod
    def join(state: WorkflowState) -> dict[str, Any]:
        """After every worker of a wave has finished: move on to the next wave."""
        return {"wave": state.get("wave", 0) + 1}
