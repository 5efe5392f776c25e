"""The run's orchestration metrics, computed from every result the run produced.

Four numbers tell whether the splitting and ordering rules fit the work: how wide the
waves that actually ran were (always 1 means the rules are too conservative and the run
pays serial latency), the share of downstream tasks that ran before an upstream task had
succeeded (the dependency-violation rate; anything above 0 means the contracts and the
plans disagree), how many subtasks a request became, and what each subtask cost in model
calls and tokens (from the worker's `usage_metadata`). Failures by worker say where
failures concentrate. They are set in the state's `metrics` when a run ends, sent with the
`done` event, and put on the run's span when tracing is on; each subtask's own figures are
on its span.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, computed_field

from fathom.patterns.workflow.contracts import SubTask, TaskResult

__all__ = ["RAN", "TaskCost", "WorkflowMetrics", "dependency_violation", "workflow_metrics"]

RAN = frozenset({"ok", "failed", "timeout"})
"""The statuses of a result whose worker actually ran (the others never started it)."""


class TaskCost(BaseModel):
    """What one subtask cost, over every time it ran in the run.

    Attributes:
        agents: The workers that ran it, in order (more than one after a switch).
        runs: How often it reached a worker.
        model_calls: Chat-model calls its workers made.
        input_tokens: Their input tokens (`usage_metadata`).
        output_tokens: Their output tokens.
    """

    agents: list[str] = Field(default_factory=list)
    runs: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @computed_field
    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (in `model_dump` too)."""
        return self.input_tokens + self.output_tokens


class WorkflowMetrics(BaseModel):
    """The orchestration metrics of one run (see the module docstring).

    Attributes:
        subtasks: Distinct subtasks planned in the run (rejected ones included).
        waves: Waves that ran, over all rounds.
        wave_widths: Tasks in each wave that ran, in the order they ran.
        max_wave_width: The widest wave (0 when none ran).
        mean_wave_width: The mean width.
        downstream_runs: Runs of tasks that have at least one dependency.
        dependency_violations: Those that ran before a dependency had succeeded.
        dependency_violation_rate: `dependency_violations / downstream_runs` (0 when
            there were none); the target is 0.
        cost: What each subtask cost, by task id.
        worker_tokens: All subtasks' tokens together.
        failures_by_agent: Results that failed, timed out or were rejected, by worker.
    """

    subtasks: int = 0
    waves: int = 0
    wave_widths: list[int] = Field(default_factory=list)
    max_wave_width: int = 0
    mean_wave_width: float = 0.0
    downstream_runs: int = 0
    dependency_violations: int = 0
    dependency_violation_rate: float = 0.0
    cost: dict[str, TaskCost] = Field(default_factory=dict)
    worker_tokens: int = 0
    failures_by_agent: dict[str, int] = Field(default_factory=dict)

    def span_attributes(self) -> dict[str, Any]:
        """The metrics as span attributes (`fathom.workflow.*`)."""
        costs = {task_id: cost.model_dump() for task_id, cost in self.cost.items()}
        return {
            "fathom.workflow.subtasks": self.subtasks,
            "fathom.workflow.waves": self.waves,
            "fathom.workflow.wave_widths": list(self.wave_widths),
            "fathom.workflow.max_wave_width": self.max_wave_width,
            "fathom.workflow.mean_wave_width": self.mean_wave_width,
            "fathom.workflow.downstream_runs": self.downstream_runs,
            "fathom.workflow.dependency_violations": self.dependency_violations,
            "fathom.workflow.dependency_violation_rate": self.dependency_violation_rate,
            "fathom.workflow.worker_tokens": self.worker_tokens,
            "fathom.workflow.cost": json.dumps(costs, sort_keys=True),
            "fathom.workflow.failures_by_agent": json.dumps(
                self.failures_by_agent, sort_keys=True
            ),
        }


def _when(result: TaskResult) -> tuple[int, int]:
    return (result.round, result.wave)


def dependency_violation(
    result: TaskResult, depends_on: Sequence[str], history: Sequence[TaskResult]
) -> list[str]:
    """The dependencies of `result`'s run that had not succeeded before it ran.

    A dependency is satisfied when its latest result from an earlier wave (of this round
    or an earlier one) is `ok` and it does not run again in the same round at or after
    `result`'s wave. Empty when every dependency was satisfied, or when `result`'s worker
    never ran (a skipped task is the scheduler keeping the rule, not breaking it).
    """
    if result.status not in RAN or result.wave == 0:
        return []
    late: list[str] = []
    for dep in depends_on:
        entries = [r for r in history if r.task_id == dep]
        before = [r for r in entries if r.wave > 0 and _when(r) < _when(result)]
        again = any(r.round == result.round and r.wave >= result.wave for r in entries)
        latest = max(before, key=_when) if before else None
        if latest is None or latest.status != "ok" or again:
            late.append(dep)
    return late


def workflow_metrics(
    tasks: Mapping[str, SubTask], history: Sequence[TaskResult]
) -> WorkflowMetrics:
    """The metrics of a run from its planned `tasks` and every result it produced."""
    widths: dict[tuple[int, int], int] = {}
    for result in history:
        if result.wave > 0:
            widths[_when(result)] = widths.get(_when(result), 0) + 1
    wave_widths = [widths[key] for key in sorted(widths)]

    downstream = violations = 0
    for result in history:
        task = tasks.get(result.task_id)
        if task is None or not task.depends_on or result.status not in RAN or not result.wave:
            continue
        downstream += 1
        if dependency_violation(result, task.depends_on, history):
            violations += 1

    cost: dict[str, TaskCost] = {}
    failures: dict[str, int] = {}
    for result in history:
        if result.wave > 0:
            entry = cost.setdefault(result.task_id, TaskCost())
            if result.agent not in entry.agents:
                entry.agents.append(result.agent)
            entry.runs += 1
            entry.model_calls += result.model_calls
            entry.input_tokens += result.input_tokens
            entry.output_tokens += result.output_tokens
        if result.status in ("failed", "timeout", "rejected"):
            failures[result.agent] = failures.get(result.agent, 0) + 1

    return WorkflowMetrics(
        subtasks=len(set(tasks) | {r.task_id for r in history}),
        waves=len(wave_widths),
        wave_widths=wave_widths,
        max_wave_width=max(wave_widths, default=0),
        mean_wave_width=round(sum(wave_widths) / len(wave_widths), 3) if wave_widths else 0.0,
        downstream_runs=downstream,
        dependency_violations=violations,
        dependency_violation_rate=round(violations / downstream, 4) if downstream else 0.0,
        cost=cost,
        worker_tokens=sum(c.total_tokens for c in cost.values()),
        failures_by_agent=failures,
    )
