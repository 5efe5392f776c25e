"""The prompts of the planner, checker and reporter, assembled stable-first.

Each role's system prompt is fixed once the workflow is built (role, rules, action
catalogue), so every call of that role shares it as a cacheable prefix. Everything that
changes between calls (the request, answers from the user, results, checker feedback)
goes in the human message after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from fathom.patterns.workflow.contracts import (
    ActionRegistry,
    CheckVerdict,
    Clarification,
    SubTask,
    TaskResult,
)
from fathom.prompt import PromptSection, render_sections

__all__ = ["checker_messages", "planner_messages", "reporter_messages"]

_OUTPUT_CHARS = 1500

_PLANNER_ROLE = """You are the planner of a plan -> work -> check -> report workflow. Split the user's request into tasks for the workers and answer by calling `Plan`.

- intent "chat": the message needs no work (greetings, small talk, questions you can answer directly); leave tasks empty.
- intent "clarify": information the work needs is missing and cannot be assumed; put one precise question for the user in `question`.
- intent "work": list the tasks. Each task is one independently checkable business action from the action list (never one task per tool call), performed by a worker allowed to do it.
- Give every task a short unique id, only the inputs it needs, the ids of the tasks whose results it needs in `depends_on`, and `success_criteria` that a checker can verify. Code orders the tasks from what the actions read and write, and adds the order `depends_on` states; independent tasks run in parallel.
- On a new round after a failed check, plan only the tasks still needed: completed tasks are kept (you may depend on their ids); redo a failed task under its own id or a new one."""  # noqa: E501

_CHECKER_ROLE = """You are the checker of a plan -> work -> check -> report workflow. Judge whether the task results together satisfy the user's request and each task's success criteria, and answer by calling `CheckVerdict`.

- passed: true only when the request is fully and correctly done.
- feedback: when not passed, say precisely what is wrong or missing; the planner reads it.
- failed_task_ids: the tasks whose results must be redone (an empty list when passed). Results you do not list are kept."""  # noqa: E501

_REPORTER_ROLE = """You are the reporter of a plan -> work -> check -> report workflow. Write the final answer to the user.

- When the workflow did work, present its results clearly and completely, organised by task, without mentioning the workflow's internals.
- When the status says the work could not be completed, say what was done and what is missing.
- When there was no work to do, reply to the user's message directly and naturally."""  # noqa: E501


_STATUS_MEANING = {
    "passed": "the work was done and passed the check",
    "chat": "there was no work to do",
    "max_rounds": "the round limit was reached before the work passed the check",
    "failed": "the workflow could not complete the work",
    "partial": "the work did not pass the check and a person chose to skip the failed tasks",
}


def _catalogue(registry: ActionRegistry, workers: Sequence[str]) -> str:
    lines = ["Actions:"]
    for action in registry.values():
        notes = []
        if action.agents:
            notes.append("workers: " + ", ".join(action.agents))
        if action.side_effect:
            notes.append("has side effects")
        if action.needs_approval:
            notes.append("a person approves each task")
        suffix = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"- {action.name}: {action.description}{suffix}")
    lines.append("Workers: " + ", ".join(workers))
    return "\n".join(lines)


def _system(*sections: PromptSection) -> SystemMessage:
    return SystemMessage(content=render_sections(sections))


def _clip(text: str) -> str:
    return text if len(text) <= _OUTPUT_CHARS else text[:_OUTPUT_CHARS] + "…"


def _request_block(request: str, clarifications: Sequence[Clarification]) -> list[str]:
    lines = [f"Request: {request}"]
    if clarifications:
        lines.append("Answers from the user:")
        lines += [f"- Q: {c.question}\n  A: {c.answer}" for c in clarifications]
    return lines


def _result_line(result: TaskResult, task: SubTask | None) -> str:
    head = f"[{result.task_id}] {result.action} by {result.agent}: {result.status}"
    if task is not None and task.success_criteria:
        head += f" (criteria: {task.success_criteria})"
    body = _clip(result.output) if result.status == "ok" else (result.error or "")
    return f"{head}\n  {body}"


def planner_messages(
    registry: ActionRegistry,
    workers: Sequence[str],
    *,
    request: str,
    clarifications: Sequence[Clarification],
    kept: Mapping[str, TaskResult],
    redo: Sequence[TaskResult],
    verdict: CheckVerdict | None,
    round_number: int,
    max_rounds: int,
    degrade: str | None = None,
) -> list[BaseMessage]:
    """Messages for one planner call; a re-plan adds the kept results and the feedback.

    `degrade` (set when a person answered an escalation with `degrade`) asks for a simpler
    plan, with the person's note.
    """
    system = _system(
        PromptSection("role", _PLANNER_ROLE),
        PromptSection("catalogue", _catalogue(registry, workers), "conditional"),
    )
    lines = _request_block(request, clarifications)
    if verdict is not None:
        lines.append(
            f"Round {round_number} of {max_rounds}. The checker rejected the previous round: "
            f"{verdict.feedback}"
        )
        if kept:
            lines.append("Completed tasks (kept; do not redo them):")
            lines += [_result_line(r, None) for r in kept.values()]
        if redo:
            lines.append("Tasks to redo:")
            lines += [_result_line(r, None) for r in redo]
        if degrade is not None:
            lines.append(
                "The round limit was reached and a person asked for a simpler plan: plan a "
                "reduced version of the remaining work, with fewer and simpler tasks."
                + (f" Their note: {degrade}" if degrade else "")
            )
        lines.append("Plan only the tasks still needed.")
    return [system, HumanMessage(content="\n".join(lines))]


def checker_messages(
    *,
    request: str,
    clarifications: Sequence[Clarification],
    tasks: Mapping[str, SubTask],
    results: Mapping[str, TaskResult],
) -> list[BaseMessage]:
    """Messages for one checker call: the request and every current result."""
    lines = _request_block(request, clarifications)
    lines.append("Results:")
    lines += [_result_line(r, tasks.get(r.task_id)) for r in results.values()]
    return [_system(PromptSection("role", _CHECKER_ROLE)), HumanMessage(content="\n".join(lines))]


def reporter_messages(
    *,
    request: str,
    clarifications: Sequence[Clarification],
    results: Mapping[str, TaskResult],
    status: str,
    errors: Sequence[str],
    feedback: str,
) -> list[BaseMessage]:
    """Messages for the reporter: what was asked, what came of it, and how the run ended."""
    lines = _request_block(request, clarifications)
    lines.append(f"Status: {status} ({_STATUS_MEANING.get(status, status)})")
    if errors:
        lines.append("Errors: " + "; ".join(errors))
    if feedback and status != "passed":
        lines.append(f"Open checker feedback: {feedback}")
    if results:
        lines.append("Results:")
        lines += [_result_line(r, None) for r in results.values()]
    return [_system(PromptSection("role", _REPORTER_ROLE)), HumanMessage(content="\n".join(lines))]
