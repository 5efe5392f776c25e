"""Running the waves: `Send` each task of a wave to the worker node, then join.

Code routes after the planner and after every wave: to the reporter (nothing to do), to
the `ask` node, to one `worker` task per task of the next wave (run in parallel, results
merged by the state's reducer), or to the checker once the last wave is done. A task whose
dependency did not succeed is skipped rather than run without its input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from fathom.patterns.workflow.contracts import ActionRegistry, SubTask, TaskResult, WorkItem
from fathom.patterns.workflow.state import WorkflowState, emitter
from fathom.patterns.workflow.workers import Emit, WorkerRunner


class WorkPacket(TypedDict):
    """What `route` sends to one `worker` run: a task and what it needs from its wave."""

    task: SubTask
    upstream: dict[str, str]
    """Outputs of the dependencies that succeeded, by task id."""
    blocked: list[str]
    """Dependencies without a successful result: the task is not run."""
    round: int
    wave: int

__all__ = ["Dispatcher"]


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
        sends = []
        for task_id in waves[index]:
            task = tasks[task_id]
            upstream = {
                dep: results[dep].output
                for dep in task.depends_on
                if dep in results and results[dep].status == "ok"
            }
            packet: WorkPacket = {
                "task": task,
                "upstream": upstream,
                "blocked": [dep for dep in task.depends_on if dep not in upstream],
                "round": state.get("round", 0) + 1,
                "wave": index + 1,
            }
            sends.append(Send("worker", packet))
        return sends

    def _work_setup(self, packet: WorkPacket) -> tuple[WorkItem, Emit, TaskResult | None]:
        task: SubTask = packet["task"]
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
        if not blocked:
            return item, emit, None
        skipped = TaskResult(
            task_id=task.id,
            agent=task.agent,
            action=task.action,
            status="skipped",
            error="a task it depends on did not succeed: " + ", ".join(blocked),
            round=round_number,
        )
        return item, emit, skipped

    @staticmethod
    def _work_done(result: TaskResult, emit: Emit) -> dict[str, Any]:
        emit(
            "work_done",
            f"task {result.task_id}: {result.status}",
            task_id=result.task_id,
            status=result.status,
            attempts=result.attempts,
            error=result.error,
        )
        return {"results": {result.task_id: result}}

    def work(self, packet: WorkPacket, config: RunnableConfig) -> dict[str, Any]:
        """Run one task on its worker (one of several in parallel)."""
        item, emit, result = self._work_setup(packet)
        if result is None:
            task = item.task
            result = self.runners[task.agent].run(
                item, self.registry.get(task.action), config, emit
            )
        return self._work_done(result, emit)

    async def awork(self, packet: WorkPacket, config: RunnableConfig) -> dict[str, Any]:
        """Async `work`."""
        item, emit, result = self._work_setup(packet)
        if result is None:
            task = item.task
            result = await self.runners[task.agent].arun(
                item, self.registry.get(task.action), config, emit
            )
        return self._work_done(result, emit)

    @staticmethod
    def join(state: WorkflowState) -> dict[str, Any]:
        """After every worker of a wave has finished: move on to the next wave."""
        return {"wave": state.get("wave", 0) + 1}
