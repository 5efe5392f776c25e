"""Order a plan's tasks into waves: code decides what runs in parallel, not the model.

A wave is a group of tasks whose dependencies are all satisfied by earlier waves; the
tasks of one wave run at the same time. Dependencies come from each task's `depends_on`
and, given an `ActionRegistry`, from the actions themselves: a task that requires an
artefact another task produces runs after it, two producers of one artefact run in plan
order, and a task with side effects runs alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fathom.errors import FathomError
from fathom.patterns.workflow.contracts import ActionRegistry, SubTask

__all__ = ["PlanOrderError", "compute_waves", "task_dependencies"]


class PlanOrderError(FathomError, ValueError):
    """A plan's tasks cannot be ordered: duplicate ids, unknown dependencies or a cycle."""


def task_dependencies(
    tasks: Sequence[SubTask],
    *,
    done: Iterable[str] = (),
    registry: ActionRegistry | None = None,
) -> dict[str, set[str]]:
    """The ids of the tasks in `tasks` that each task must wait for.

    Args:
        tasks: The tasks to order, in plan order.
        done: Ids of tasks completed earlier; depending on them is allowed and satisfied.
        registry: When given, orderings implied by the actions' `requires` / `produces`
            are added to the stated ones.

    Returns:
        For every task id, the set of ids (all within `tasks`) it runs after.

    Raises:
        PlanOrderError: Two tasks share an id, or a task depends on an id that is neither
            in `tasks` nor in `done`.
    """
    finished = set(done)
    ids: list[str] = []
    for task in tasks:
        if task.id in ids:
            raise PlanOrderError(f"task id {task.id!r} is used twice in the plan")
        if task.id in finished:
            raise PlanOrderError(
                f"task id {task.id!r} is already completed; give the new task a new id"
            )
        ids.append(task.id)

    known = set(ids)
    deps: dict[str, set[str]] = {task.id: set() for task in tasks}
    for task in tasks:
        for dep in task.depends_on:
            if dep in known:
                deps[task.id].add(dep)
            elif dep not in finished:
                raise PlanOrderError(f"task {task.id!r} depends on unknown task {dep!r}")

    if registry is not None:
        for later_pos, later in enumerate(tasks):
            later_action = registry.get(later.action)
            if later_action is None:
                continue
            for earlier_pos, earlier in enumerate(tasks):
                earlier_action = registry.get(earlier.action)
                if earlier is later or earlier_action is None:
                    continue
                reads_its_output = set(later_action.requires) & set(earlier_action.produces)
                same_resource = earlier_pos < later_pos and (
                    set(later_action.produces) & set(earlier_action.produces)
                )
                if reads_its_output or same_resource:
                    deps[later.id].add(earlier.id)
    return deps


def compute_waves(
    tasks: Sequence[SubTask],
    *,
    done: Iterable[str] = (),
    registry: ActionRegistry | None = None,
    max_parallel: int | None = None,
) -> list[list[str]]:
    """Group `tasks` into waves that can run one after another, each wave in parallel.

    Every wave holds the tasks whose dependencies all lie in earlier waves (or in `done`),
    in plan order. Tasks whose action has side effects run alone in their wave; read-only
    tasks that are ready go first. `max_parallel` caps the size of a wave.

    Example: with `③` depending on `②` and `④` on `③`, the tasks `①②③④` give
    `[["①", "②"], ["③"], ["④"]]`.

    Args:
        tasks: The tasks, in plan order.
        done: Ids of tasks completed earlier (satisfied dependencies).
        registry: Adds orderings implied by the actions (see `task_dependencies`) and
            identifies side-effecting actions.
        max_parallel: The most tasks in one wave (none: no limit).

    Returns:
        The waves, as lists of task ids.

    Raises:
        PlanOrderError: Duplicate ids, unknown dependencies, or a dependency cycle.
        ValueError: `max_parallel` is below 1.
    """
    if max_parallel is not None and max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, not {max_parallel}")
    deps = task_dependencies(tasks, done=done, registry=registry)
    order = [task.id for task in tasks]
    side_effects = {
        task.id
        for task in tasks
        if registry is not None
        and (action := registry.get(task.action)) is not None
        and action.side_effect
    }

    waves: list[list[str]] = []
    placed: set[str] = set()
    while len(placed) < len(order):
        ready = [i for i in order if i not in placed and deps[i] <= placed]
        if not ready:
            raise PlanOrderError(_describe_cycle(deps, placed))
        read_only = [i for i in ready if i not in side_effects]
        wave = read_only[:max_parallel] if read_only else ready[:1]
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
