"""Order a plan's tasks into waves: code decides what runs in parallel, not the model.

A wave is a group of tasks whose dependencies are all satisfied by earlier waves; the
tasks of one wave run at the same time. Dependencies are business facts, so they come
from the actions' contracts in the `ActionRegistry`: a task that requires an artefact
another task produces runs after it, two producers of one artefact run in plan order, and
a task with side effects runs alone. What the model states in `depends_on` is a hint: it
can add an ordering, never remove one, and a hint that contradicts the contracts is
dropped. Without dependency information (no registry, or an action that states neither
`requires` nor `produces`) nothing is guessed: such tasks run in series, in plan order.
Tasks that need a person's approval wait in a wave of their own, after the work that
does not depend on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fathom.errors import FathomError
from fathom.patterns.workflow.contracts import ActionRegistry, SubTask

__all__ = ["PlanOrderError", "TaskOrder", "compute_waves", "order_tasks", "task_dependencies"]


class PlanOrderError(FathomError, ValueError):
    """A plan's tasks cannot be ordered: duplicate ids, unknown dependencies or a cycle."""


@dataclass(frozen=True)
class TaskOrder:
    """What orders a plan's tasks, and why.

    Attributes:
        deps: For every task id, the ids (all within the plan) it runs after: those the
            contracts imply and the hints that were kept.
        dropped_hints: Stated `depends_on` entries that were ignored because the
            contracts order the two tasks the other way, by task id.
        serial: The tasks without dependency information, in plan order: each runs alone,
            after every task before it and before every task after it.
    """

    deps: dict[str, set[str]]
    dropped_hints: dict[str, list[str]] = field(default_factory=dict)
    serial: list[str] = field(default_factory=list)


def _check_ids(tasks: Sequence[SubTask], finished: set[str]) -> set[str]:
    ids: set[str] = set()
    for task in tasks:
        if task.id in ids:
            raise PlanOrderError(f"task id {task.id!r} is used twice in the plan")
        if task.id in finished:
            raise PlanOrderError(
                f"task id {task.id!r} is already completed; give the new task a new id"
            )
        ids.add(task.id)
    return ids


def _contract_edges(tasks: Sequence[SubTask], registry: ActionRegistry) -> dict[str, set[str]]:
    """The orderings the actions' `requires` / `produces` imply."""
    deps: dict[str, set[str]] = {task.id: set() for task in tasks}
    for later_pos, later in enumerate(tasks):
        later_action = registry.get(later.action)
        if later_action is None:
            continue
        for earlier_pos, earlier in enumerate(tasks):
            earlier_action = registry.get(earlier.action)
            if earlier is later or earlier_action is None:
                continue
            reads_its_output = set(later_action.requires or ()) & set(
                earlier_action.produces or ()
            )
            same_resource = earlier_pos < later_pos and (
                set(later_action.produces or ()) & set(earlier_action.produces or ())
            )
            if reads_its_output or same_resource:
                deps[later.id].add(earlier.id)
    return deps


def _waits_for(deps: dict[str, set[str]], start: str, target: str) -> bool:
    """Whether `start` runs (transitively) after `target` under `deps`."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        current = stack.pop()
        for dep in deps.get(current, ()):
            if dep == target:
                return True
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return False


def order_tasks(
    tasks: Sequence[SubTask],
    *,
    done: Iterable[str] = (),
    registry: ActionRegistry | None = None,
) -> TaskOrder:
    """What each task of `tasks` runs after: the contracts, then the plan's hints.

    Args:
        tasks: The tasks to order, in plan order.
        done: Ids of tasks completed earlier; depending on them is allowed and satisfied.
        registry: The actions' contracts. Without it no task has dependency information.

    Raises:
        PlanOrderError: Two tasks share an id, or a task depends on an id that is neither
            in `tasks` nor in `done`.
    """
    finished = set(done)
    known = _check_ids(tasks, finished)
    contracts = (
        _contract_edges(tasks, registry)
        if registry is not None
        else {task.id: set() for task in tasks}
    )
    deps = {task_id: set(edges) for task_id, edges in contracts.items()}
    dropped: dict[str, list[str]] = {}
    for task in tasks:
        for dep in task.depends_on:
            if dep in known:
                if _waits_for(contracts, dep, task.id):
                    dropped.setdefault(task.id, []).append(dep)
                else:
                    deps[task.id].add(dep)
            elif dep not in finished:
                raise PlanOrderError(f"task {task.id!r} depends on unknown task {dep!r}")
    serial = [
        task.id
        for task in tasks
        if registry is None
        or (action := registry.get(task.action)) is None
        or not action.declares_data
    ]
    return TaskOrder(deps=deps, dropped_hints=dropped, serial=serial)


def task_dependencies(
    tasks: Sequence[SubTask],
    *,
    done: Iterable[str] = (),
    registry: ActionRegistry | None = None,
) -> dict[str, set[str]]:
    """The ids of the tasks in `tasks` that each task must wait for (`order_tasks(...).deps`)."""
    return order_tasks(tasks, done=done, registry=registry).deps


def _in_order(order: list[str], deps: dict[str, set[str]]) -> list[str]:
    """A topological order of `order` under `deps`, earliest plan position first."""
    placed: set[str] = set()
    result: list[str] = []
    while len(result) < len(order):
        ready = next((i for i in order if i not in placed and deps[i] <= placed), None)
        if ready is None:
            raise PlanOrderError(_describe_cycle(deps, placed))
        result.append(ready)
        placed.add(ready)
    return result


def compute_waves(
    tasks: Sequence[SubTask],
    *,
    done: Iterable[str] = (),
    registry: ActionRegistry | None = None,
    max_parallel: int | None = None,
) -> list[list[str]]:
    """Group `tasks` into waves that can run one after another, each wave in parallel.

    Every wave holds tasks whose dependencies all lie in earlier waves (or in `done`), in
    plan order. Ready tasks go in this order of preference: read-only tasks (at most
    `max_parallel`), then one task with side effects, then, when nothing else is ready,
    every ready task that needs approval (a task with side effects among them alone):
    approvals wait for people, not for capacity, so they are not capped. A task without
    dependency information (see `order_tasks`) runs alone, in series.

    Example: with actions where `③` requires what `②` produces and `④` what `③`
    produces, the tasks `①②③④` give `[["①", "②"], ["③"], ["④"]]`.

    Args:
        tasks: The tasks, in plan order.
        done: Ids of tasks completed earlier (satisfied dependencies).
        registry: The actions' contracts (see `order_tasks`), side effects and approvals.
        max_parallel: The most tasks in one wave that needs no approval (none: no limit).

    Returns:
        The waves, as lists of task ids.

    Raises:
        PlanOrderError: Duplicate ids, unknown dependencies, or a dependency cycle.
        ValueError: `max_parallel` is below 1.
    """
    if max_parallel is not None and max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, not {max_parallel}")
    ordering = order_tasks(tasks, done=done, registry=registry)
    deps = {task_id: set(edges) for task_id, edges in ordering.deps.items()}
    order = [task.id for task in tasks]
    if ordering.serial:
        # Without dependency information a task is a barrier: it waits for everything
        # before it (in an order that keeps the known dependencies) and everything after
        # it waits for it.
        line = _in_order(order, deps)
        for task_id in ordering.serial:
            at = line.index(task_id)
            deps[task_id].update(line[:at])
            for later in line[at + 1 :]:
                deps[later].add(task_id)
    side_effects: set[str] = set()
    approvals: set[str] = set()
    for task in tasks:
        action = registry.get(task.action) if registry is not None else None
        if action is not None and action.side_effect:
            side_effects.add(task.id)
        if action is not None and action.needs_approval:
            approvals.add(task.id)

    waves: list[list[str]] = []
    placed: set[str] = set()
    while len(placed) < len(order):
        ready = [i for i in order if i not in placed and deps[i] <= placed]
        if not ready:
            raise PlanOrderError(_describe_cycle(deps, placed))
        plain = [i for i in ready if i not in side_effects and i not in approvals]
        effects = [i for i in ready if i in side_effects and i not in approvals]
        if plain:
            wave = plain[:max_parallel]
        elif effects:
            wave = effects[:1]
        else:
            wave = [i for i in ready if i not in side_effects] or ready[:1]
        waves.append(wave)
        placed.update(wave)
    return waves


def _describe_cycle(deps: dict[str, set[str]], placed: set[str]) -> str:
    """Name one dependency cycle among the tasks not yet placed."""
    remaining = [i for i in deps if i not in placed]
    path: list[str] = []
    current = remaining[0]
    while current not in path:
        path.append(current)
        current = sorted(d for d in deps[current] if d not in placed)[0]
    cycle = [*path[path.index(current) :], current]
    return "tasks wait on each other in a cycle (each waits for the next): " + " -> ".join(cycle)
