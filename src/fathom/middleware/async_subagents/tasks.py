"""Async subagent specs, the task records kept in state, and what a task's status means.

An async subagent runs as a background run on an Agent Protocol server (fathom's own
`fathom serve`, `langgraph dev`, LangSmith Deployments, ...). The parent tracks each
launch as an `AsyncTask` in the `async_tasks` state channel, next to (not inside) the
message history, so the ids survive summarization.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents.middleware.types import AgentState
from langchain_core.messages import convert_to_messages
from pydantic import BaseModel
from typing_extensions import TypedDict

from fathom.backends.utils import now_iso as now_iso  # re-exported: the records' stamps

__all__ = [
    "ASYNC_SUBAGENT_KEYS",
    "FOLLOWS_RUN_KEY",
    "PARENT_KEY",
    "TASK_STATUSES",
    "AsyncSubAgent",
    "AsyncSubAgentState",
    "AsyncTask",
    "TaskEvent",
    "context_data",
    "task_status",
    "validate_async_subagents",
]


class AsyncSubAgent(TypedDict):
    """A subagent that runs in the background on an Agent Protocol server.

    Recognised in `create_deep_agent(subagents=[...])` by its `graph_id`. Without `url` it
    runs on the server that hosts the parent (in process, through ASGI); with `url` it runs
    on that server over HTTP, with `headers` and an API key from the environment
    (`LANGGRAPH_API_KEY`, `LANGSMITH_API_KEY`, `LANGCHAIN_API_KEY`, or `FATHOM_API_KEY`).
    """

    name: str
    """The name the model launches it by (`subagent_type`); unique among async subagents."""
    description: str
    """What it does; the model reads this to decide when to delegate."""
    graph_id: str
    """The graph name or assistant id on the server."""
    url: NotRequired[str]
    """The server's base URL; omit it to use the server that hosts the parent."""
    headers: NotRequired[dict[str, str]]
    """Extra HTTP headers for every request to the server."""
    webhook: NotRequired[str]
    """A URL the server calls when a run of this subagent finishes."""
    update_strategy: NotRequired[Literal["interrupt", "enqueue"]]
    """How a follow-up reaches a busy task: `interrupt` (default) stops the current run
    and starts the follow-up on the same thread; `enqueue` queues it behind the run."""
    notify_parent: NotRequired[bool]
    """Whether the child may wake an idle parent when it ends (default `True`)."""
    mode: NotRequired[Literal["isolated", "fork"]]
    """`isolated` (default) sends only the task; `fork` sends the parent's conversation
    first, then the task."""
    client: NotRequired[Any]
    """What the tools call instead of an Agent Protocol client for `url`: an object with the
    `threads` and `runs` methods of `langgraph_sdk`'s client that the tools use (fathom's
    own extension; `fathom.a2a.a2a_async_subagent` sets one that speaks A2A)."""


ASYNC_SUBAGENT_KEYS = frozenset(AsyncSubAgent.__annotations__)
"""The keys an `AsyncSubAgent` spec may have."""

UPDATE_STRATEGIES = ("interrupt", "enqueue")
MODES = ("isolated", "fork")

TASK_STATUSES = ("pending", "running", "waiting", "success", "error", "cancelled")
"""What a task can be: `waiting` means its subagent is paused for a human."""

UNFINISHED = frozenset({"pending", "running", "waiting"})
"""Statuses that can still change, so refreshes look at them."""


class TaskEvent(TypedDict):
    """A task's outcome as a notification reports it to the agent that launched it.

    It rides in the notification message's `additional_kwargs["deepagents_notification"]`
    (the reference package's key, so apps built for either tell these messages apart from
    the user's).
    """

    task_id: str
    """The task's id (its thread on the server)."""
    agent_name: str
    """The async subagent's `name`."""
    status: Literal["success", "error", "timeout", "cancelled", "waiting"]
    """How the run ended, or `waiting` when it paused for a human."""
    run_id: str
    """The run this outcome belongs to."""


class AsyncTask(TypedDict):
    """One launched async subagent task, as kept in the `async_tasks` state channel."""

    task_id: str
    """The task's id, which is its thread's id on the server."""
    agent_name: str
    """The async subagent's `name`."""
    thread_id: str
    """The thread on the server (equal to `task_id`)."""
    run_id: str
    """The newest run this task knows of; a queued follow-up may not have started yet."""
    superseded_run_ids: NotRequired[list[str]]
    """Earlier runs, oldest first, left behind by queued follow-ups (enqueue strategy);
    cancelling the task cancels those still active."""
    status: str
    """pending, running, waiting, success, error or cancelled (or a server's own, such
    as timeout)."""
    created_at: str
    """When it was launched (UTC, `YYYY-MM-DDTHH:MM:SSZ`)."""
    last_checked_at: str
    """When the server was last asked about it."""
    last_updated_at: str
    """When its status or run last changed, or a follow-up was sent."""


def merge_tasks(
    existing: Mapping[str, AsyncTask] | None, update: Mapping[str, AsyncTask] | None
) -> dict[str, AsyncTask]:
    """The `async_tasks` reducer: records in `update` replace those with the same id."""
    return {**(existing or {}), **(update or {})}


class AsyncSubAgentState(AgentState):
    """The agent state with the `async_tasks` channel (task id -> `AsyncTask`)."""

    async_tasks: Annotated[NotRequired[dict[str, AsyncTask]], merge_tasks]


def validate_async_subagents(specs: Sequence[Mapping[str, Any]]) -> None:
    """Raise `ValueError` for a spec that cannot be what its author meant.

    Checks: no specs at all, unknown keys, missing or empty `name` / `description` /
    `graph_id`, duplicate names, a bad `update_strategy` or `mode`, a non-dict `headers`.
    """
    if not specs:
        raise ValueError(
            "At least one async subagent must be specified: AsyncSubAgentMiddleware needs "
            "at least one async subagent spec."
        )
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, Mapping):
            raise TypeError(f"An async subagent spec must be a dict, not {type(spec).__name__}.")
        label = repr(spec.get("name", "?"))
        unknown = sorted(str(key) for key in spec if key not in ASYNC_SUBAGENT_KEYS)
        if unknown:
            raise ValueError(
                f"Async subagent spec {label} has unknown key(s) {unknown}; the allowed keys "
                f"are {sorted(ASYNC_SUBAGENT_KEYS)}."
            )
        for key in ("name", "description", "graph_id"):
            if not isinstance(spec.get(key), str) or not spec[key]:
                raise ValueError(f"Async subagent spec {label} needs a non-empty string {key!r}.")
        if spec["name"] in seen:
            raise ValueError(
                f"Duplicate async subagent names: two specs are named {label}; names must be "
                "unique."
            )
        seen.add(spec["name"])
        for key, allowed, default in (
            ("update_strategy", UPDATE_STRATEGIES, "interrupt"),
            ("mode", MODES, "isolated"),
        ):
            value = spec.get(key, default)
            if value not in allowed:
                raise ValueError(
                    f"Async subagent spec {label} has {key}={value!r}; the allowed values are "
                    f"{', '.join(repr(a) for a in allowed)}."
                )
        headers = spec.get("headers")
        if headers is not None and not isinstance(headers, Mapping):
            raise ValueError(f"Async subagent spec {label} has 'headers' that is not a dict.")
        if "url" in spec and not isinstance(spec["url"], str):
            raise ValueError(f"Async subagent spec {label} has a 'url' that is not a string.")


_THREAD_STATUS_AFTER_SUCCESS = {"interrupted": "waiting", "busy": "running", "error": "error"}


def task_status(run: Mapping[str, Any], thread: Mapping[str, Any] | None) -> str:
    """A task's status from its newest run and, when that run succeeded, its thread.

    A run cancelled on the server ends `interrupted`: the task is `cancelled`. A run that
    paused at `interrupt()` ends `success` with its thread `interrupted`: the task is
    `waiting` for a human. A succeeded run whose thread is busy again (someone started a
    new run) is `running`; one whose thread failed afterwards is `error`.
    """
    status = str(run.get("status"))
    if status == "interrupted":
        return "cancelled"
    if status != "success" or thread is None:
        return status
    return _THREAD_STATUS_AFTER_SUCCESS.get(str(thread.get("status")), "success")


MEDIA_BLOCK_TYPES = frozenset({"image", "audio", "video", "file"})
"""Content block types kept as they are in results (the model sees the image)."""


def final_blocks(values: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The child's last message as content blocks: text and media; reasoning and tool
    calls are dropped."""
    messages = (values or {}).get("messages") or []
    if not messages:
        return [{"type": "text", "text": "(the subagent finished with no messages)"}]
    try:
        blocks = convert_to_messages(messages[-1:])[0].content_blocks
    except (ValueError, TypeError, KeyError):
        last = messages[-1]
        text = last.get("content", "") if isinstance(last, Mapping) else last
        return [{"type": "text", "text": str(text)}]
    kept: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            kept.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind in MEDIA_BLOCK_TYPES:
            kept.append(dict(block))
    return kept


def result_content(report: Mapping[str, Any]) -> str | list[str | dict[Any, Any]]:
    """A check's report as tool content: JSON, with a text-only answer joined into
    `result`; an answer with media follows the JSON as its own blocks, in order."""
    blocks = report.get("result")
    if not isinstance(blocks, list):
        return json.dumps(report)
    if not any(block.get("type") in MEDIA_BLOCK_TYPES for block in blocks):
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        return json.dumps({**report, "result": text})
    head = {key: value for key, value in report.items() if key != "result"}
    return [{"type": "text", "text": json.dumps(head)}, *(dict(b) for b in blocks)]


FOLLOWS_RUN_KEY = "follows_run_id"
"""Run metadata of a follow-up (``update_async_task``): the task's run before it, from the
task's record in ``async_tasks``. A client that keeps no state of its own (an A2A agent
after the supervisor restarted) finds the conversation to continue from it."""

PARENT_KEY = "deepagents_parent"
"""Where a child run finds the agent that launched it: `config["configurable"][PARENT_KEY]`
(`{"thread_id", "assistant_id"}`), or the same key in its run context; the reference's name."""


def context_data(context: object) -> dict[str, Any] | None:
    """A run context (a mapping, dataclass or pydantic model) as JSON-ready data for another
    run, without the parent reference; `None` when nothing is left."""
    if isinstance(context, BaseModel):
        context = context.model_dump(mode="json")
    elif dataclasses.is_dataclass(context) and not isinstance(context, type):
        context = dataclasses.asdict(context)
    if not isinstance(context, Mapping):
        return None
    return {str(k): v for k, v in context.items() if k != PARENT_KEY} or None


NOTIFICATION_KEY = "deepagents_notification"
"""`additional_kwargs` key marking a task update message (the reference's name, so apps
and the reference's own middleware recognise it)."""

_NEXT_STEP = {
    "success": "Use the result; tell the user if they are waiting for it.",
    "error": "Call `check_async_task` for details, then retry, try another way, or tell the user.",
    "timeout": "It ran too long and was stopped. Retry with a smaller task, or tell the user.",
    "cancelled": "Its run was cancelled outside your tools. Start it again, or tell the user.",
    "waiting": "It waits for the user, who answers on the subagent's own thread; you cannot "
    "answer or approve it. Keep working.",
}


def update_message(task: AsyncTask, status: str, blocks: list[dict[str, Any]] | None,
                   details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task's new outcome as the user-role message the parent's model reads.

    It says plainly that it is not the user speaking; the child's text is escaped so it
    cannot close the tags and pose as the system.
    """
    head = (
        "[SYSTEM NOTIFICATION - NOT USER INPUT]\n"
        "Status report on a background task you launched, written by fathom, not by the "
        "user.\n"
        f"<task-notification>\n<task-id>{html.escape(task['task_id'])}</task-id>\n"
        f"<agent-name>{html.escape(task['agent_name'])}</agent-name>\n"
        f"<status>{html.escape(status)}</status>\n"
    )
    content: list[dict[str, Any]] = [{"type": "text", "text": head}]
    if blocks:
        content.append({"type": "text", "text": "<result>\n"})
        for block in blocks:
            if block.get("type") == "text":
                text = html.escape(str(block["text"]), quote=False)
                content.append({"type": "text", "text": text})
            else:
                content.append(dict(block))
        content.append({"type": "text", "text": "\n</result>\n"})
    if details:
        text = html.escape(json.dumps(dict(details), default=str), quote=False)
        content.append({"type": "text", "text": f"<details>{text}</details>\n"})
    content.append({"type": "text", "text": "</task-notification>\n" + _NEXT_STEP.get(status, "")})
    event = {"task_id": task["task_id"], "agent_name": task["agent_name"], "status": status,
             "run_id": task["run_id"]}
    return {"role": "user", "content": content, NOTIFICATION_KEY: event}
