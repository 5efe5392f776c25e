"""The typed contracts the plan → work → check → report workflow passes between its nodes.

A planner answers with a `Plan` of `SubTask`s; each task names an action from an
`ActionRegistry` and the agent that performs it. Workers answer with `TaskResult`s; the
checker answers with a `CheckVerdict`. Every model answer is validated against these
models before it reaches the graph state, so an invalid answer never travels downstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = [
    "Action",
    "ActionRegistry",
    "CheckVerdict",
    "Clarification",
    "Escalation",
    "EscalationChoice",
    "Plan",
    "RetryPolicy",
    "SubTask",
    "TaskResult",
    "TaskStatus",
    "WorkItem",
]

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

TaskStatus = Literal["ok", "failed", "timeout", "rejected", "skipped"]
"""How a task ended: `ok`; `failed` (the worker raised); `timeout`; `rejected` (the plan
named an action or agent that is not allowed, or the person asked to approve it said no);
`skipped` (a task it depends on did not succeed, or a person chose to skip it)."""


class Action(BaseModel):
    """One business action a plan may use, with the facts that order it.

    `requires` and `produces` are the action's data contract, and the only thing that lets
    two tasks run at the same time. An action that states neither gives no dependency
    information, so its tasks run in series: alone in their wave, after every task before
    them and before every task after them. State `requires=()` (or `produces=()`) for an
    action that reads (or writes) nothing other tasks write (or read).

    Attributes:
        name: What plans call it (`SubTask.action`).
        description: What it does; shown to the planner.
        agents: The agents allowed to perform it (empty: any worker).
        requires: Artefacts it reads. A task whose action requires what another task's
            action produces runs after that task, whatever the plan says. `None` (the
            default): not stated.
        produces: Artefacts it writes. Two tasks producing the same artefact run one after
            the other, in plan order (a single writer per resource). `None` (the default):
            not stated.
        side_effect: Whether it changes the world (books, sends, pays). Such a task runs
            alone in its wave.
        needs_approval: Whether a person must approve each task of this action before it
            runs (an interrupt). Such tasks wait in a wave of their own, after the work
            that does not depend on them, and do not count toward `max_parallel`.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=_ID_PATTERN)
    description: str
    agents: tuple[str, ...] = ()
    requires: tuple[str, ...] | None = None
    produces: tuple[str, ...] | None = None
    side_effect: bool = False
    needs_approval: bool = False

    @property
    def declares_data(self) -> bool:
        """Whether the action states what it reads or writes (dependency information)."""
        return self.requires is not None or self.produces is not None


class ActionRegistry(Mapping[str, Action]):
    """The closed set of actions a planner may use, by name.

    Plans are checked against it: a task whose action is not registered, or whose agent is
    not allowed to perform the action, is rejected.
    """

    def __init__(self, actions: Iterable[Action]) -> None:
        self._actions: dict[str, Action] = {}
        for action in actions:
            if not isinstance(action, Action):
                raise TypeError(
                    f"ActionRegistry takes Action objects, not {type(action).__name__}: "
                    "use Action(name=..., description=...)"
                )
            if action.name in self._actions:
                raise ValueError(f"Action {action.name!r} is registered twice")
            self._actions[action.name] = action
        if not self._actions:
            raise ValueError("ActionRegistry needs at least one Action")

    def __getitem__(self, name: str) -> Action:
        return self._actions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._actions)

    def __len__(self) -> int:
        return len(self._actions)

    def __repr__(self) -> str:
        return f"ActionRegistry({list(self._actions)!r})"

    def problems_with(self, task: SubTask) -> list[str]:
        """Why `task` may not run under this registry (empty when it may)."""
        action = self._actions.get(task.action)
        if action is None:
            known = ", ".join(self._actions)
            return [f"task {task.id!r}: unknown action {task.action!r} (known actions: {known})"]
        if action.agents and task.agent not in action.agents:
            allowed = ", ".join(action.agents)
            return [
                f"task {task.id!r}: agent {task.agent!r} may not perform {task.action!r} "
                f"(allowed: {allowed})"
            ]
        return []


class RetryPolicy(BaseModel):
    """How often the worker node tries a task before it gives up.

    Attributes:
        attempts: Total tries, the first included.
        backoff_s: Seconds to wait before the second try; doubled before each later one.
        idempotency_key: Passed to the worker on every try so it can check whether an
            earlier try already took effect instead of repeating it. Defaults to
            `"<task id>:<round>"`.
    """

    attempts: int = Field(default=1, ge=1, le=10)
    backoff_s: float = Field(default=0.0, ge=0.0, le=60.0)
    idempotency_key: str | None = None


class SubTask(BaseModel):
    """One independently checkable piece of work in a plan (the sub-task contract).

    Attributes:
        id: Unique within a run; used by `depends_on`, results and logs.
        agent: The worker that performs it.
        action: A name from the `ActionRegistry`.
        inputs: The data this task needs; never the whole conversation.
        depends_on: Ids of tasks whose results it needs. The only ordering the model
            states; code adds the orderings the registry implies.
        timeout: Seconds one try may take (none: unlimited).
        retry: How often to try.
        success_criteria: What a correct result looks like; the checker judges by it.
    """

    id: str = Field(pattern=_ID_PATTERN)
    agent: str
    action: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    timeout: float | None = Field(default=None, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    success_criteria: str = ""

    @field_validator("retry", mode="before")
    @classmethod
    def _attempts_shorthand(cls, value: Any) -> Any:
        # Models often write `"retry": 2`; read it as two attempts.
        if isinstance(value, int) and not isinstance(value, bool):
            return {"attempts": value}
        return value

    @field_validator("depends_on")
    @classmethod
    def _no_self_dependency(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if info.data.get("id") in value:
            raise ValueError("a task cannot depend on itself")
        return list(dict.fromkeys(value))


class Plan(BaseModel):
    """The planner's answer for one round.

    Attributes:
        intent: `work` (run `tasks`), `chat` (no work: the reporter answers directly) or
            `clarify` (ask the user `question` first).
        reasoning: A short account of how the request was split; streamed as progress.
        question: What to ask the user when `intent` is `clarify`.
        tasks: The tasks to run this round. On a re-plan, only new or redone tasks:
            completed tasks are kept and may be named in `depends_on`.
    """

    intent: Literal["work", "chat", "clarify"]
    reasoning: str = ""
    question: str = ""
    tasks: list[SubTask] = Field(default_factory=list)


class Clarification(BaseModel):
    """A question the planner asked the user and the answer it got."""

    question: str
    answer: str


class WorkItem(BaseModel):
    """What one worker is given: its own task and nothing else.

    Attributes:
        task: The task to perform.
        upstream: Outputs of the tasks it depends on, by task id.
        round: The check round this try belongs to (1-based).
        attempt: Which try this is (1-based).
        idempotency_key: The same on every try of the task in this round.
    """

    task: SubTask
    upstream: dict[str, str] = Field(default_factory=dict)
    round: int = 1
    attempt: int = 1
    idempotency_key: str = ""


class TaskResult(BaseModel):
    """How one task ended.

    Attributes:
        task_id: The task's id.
        agent: The worker that ran it.
        action: Its action.
        status: See `TaskStatus`.
        output: The worker's answer (empty unless `status` is `ok`).
        error: Why it did not succeed.
        attempts: Tries made.
        round: The round it ran in.
        wave: The wave of its round it ran in (1-based; 0: it never reached a worker).
        elapsed_s: Wall-clock seconds over all tries.
        model_calls: Chat-model calls its worker made (over all tries).
        input_tokens: Input tokens of those calls, from their `usage_metadata`.
        output_tokens: Output tokens of those calls.
    """

    task_id: str
    agent: str
    action: str
    status: TaskStatus
    output: str = ""
    error: str | None = None
    attempts: int = 0
    round: int = 1
    wave: int = 0
    elapsed_s: float = 0.0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class CheckVerdict(BaseModel):
    """The checker's answer: did this round's results satisfy the request?

    Attributes:
        passed: True when the request is fully and correctly done.
        feedback: What is wrong or missing (required when `passed` is false); the planner
            gets it for the next round.
        failed_task_ids: Tasks whose results must be redone; the others are kept.
    """

    passed: bool
    feedback: str = ""
    failed_task_ids: list[str] = Field(default_factory=list)


EscalationChoice = Literal["switch", "degrade", "skip", "abort"]
"""What a person may answer when the last round failed its check: `switch` (run the failed
tasks again on another worker), `degrade` (one more round, the planner asked for a simpler
plan), `skip` (end the run with the failed tasks marked skipped and annotated) or `abort`
(end the run now, without another model call)."""


class Escalation(BaseModel):
    """A person's answer to an escalation, as the run recorded it.

    Resume the escalation interrupt with the choice alone (`"skip"`) or a dict of these
    fields (`{"action": "switch", "worker": "backup"}`).

    Attributes:
        action: See `EscalationChoice`.
        worker: For `switch`: the worker that runs the failed tasks now (it must be
            allowed to perform their actions).
        note: For `degrade`: told to the planner; for `skip`: the annotation on the
            skipped tasks; for `abort`: the reason, in the report.
        task_ids: The failed tasks it applies to (empty: all of them).
        round: The round whose check failed (filled in by the workflow).
    """

    model_config = ConfigDict(extra="forbid")

    action: EscalationChoice
    worker: str | None = None
    note: str = ""
    task_ids: list[str] = Field(default_factory=list)
    round: int = 0
