"""The child side of async subagents: a run launched by a parent agent wakes it when it ends.

A supervisor's `start_async_task` starts a run on a server (fathom's own, `langgraph dev`,
LangSmith Deployments) and passes a reference to itself in
`config["configurable"]["deepagents_parent"]` (`{"thread_id", "assistant_id"}`, the key
and shape the reference package uses; fathom also reads an optional `url`). Servers that
copy thread metadata into runs give it as `parent_thread_id` / `parent_assistant_id`
metadata instead. `create_deep_agent` adds `ParentNotifierMiddleware` to every deep agent;
it does nothing for runs that carry no parent reference.

When such a run ends, the middleware starts a run on the parent's thread whose input is one
user message: a notification the parent's model reads (the task id, the subagent's name,
the status, the result or what went wrong), marked in `additional_kwargs["deepagents_notification"]`
with `{task_id, agent_name, status, run_id}` so apps and supervisors tell it from the user.
Statuses: `success` (the final answer as content blocks, text escaped and cut when very
long), `error` (the exception's type only: its message may carry internals), `waiting`
(the run paused on an `interrupt()`, e.g. a tool approval), and `timeout`. A run cancelled
on the server (the parent's own `cancel_async_task` or an interrupting update) wakes nobody.

Rules that keep this safe:

- Only the outermost graph of the run reports (a sync subagent nested in it inherits its
  config), and once per run id.
- The parent is woken only while its thread is `idle` or `error`, with
  `multitask_strategy="reject"`: a new run on a thread that waits for a human would drop
  that approval, and a busy parent refreshes its tasks itself before its next model call.
  A parent that is gone (404) or just became busy (409) is logged at debug level.
- A parent whose `async_tasks` already holds this run's outcome (its own refresh saw the
  run end first) is not woken: it was told once. Should a notification still reach it
  (it learnt the outcome between this check and the new run), its `AsyncSubAgentMiddleware`
  drops the message and ends that run before any model call.
- Nothing here raises into the child's run.

The report is made after the run has ended, by a background task that joins the run on
the server hosting it (so the parent, once woken, reads the final thread state). That task
also adds the run's model calls and tokens to the child thread's `fathom_usage` metadata,
which `fathom.usage.collect_async_usage` reads for the parent's usage report.

Runs outside a server (plain `ainvoke`) have no run id and report nothing; the sync
`invoke` path reports nothing either (servers use the async path).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest

from fathom.middleware.async_subagents.tasks import (
    NOTIFICATION_KEY,
    PARENT_KEY,
    context_data,
    final_blocks,
    update_message,
)
from fathom.middleware.async_subagents.transport import REMOTE_ERRORS, status_code
from fathom.usage import TASK_USAGE_KEY

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

__all__ = [
    "NOTIFICATION_KEY",
    "PARENT_KEY",
    "USAGE_METADATA_KEY",
    "ParentNotifierMiddleware",
    "ParentReference",
    "launching_agent",
    "wake_parent",
]

logger = logging.getLogger(__name__)


USAGE_METADATA_KEY = TASK_USAGE_KEY
"""Child thread metadata key: `{"calls", "input_tokens", "output_tokens"}` over its runs."""

MAX_RESULT_CHARS = 80_000
"""Result text longer than this is cut in a notification; `check_async_task` has it all."""

_WAKEABLE = frozenset({"idle", "error"})
_REPORTED_STATUSES = frozenset({"success", "error", "timeout"})
_MAX_REMEMBERED_RUNS = 1000
_MAX_JOIN_ATTEMPTS = 100


class ParentReference(TypedDict):
    """What a child run knows about the agent that launched it."""

    thread_id: NotRequired[str]
    """The parent's thread: where the notification run goes."""
    assistant_id: NotRequired[str]
    """The parent's assistant, which runs the notification."""
    url: NotRequired[str]
    """The parent's server, when it is not the one hosting the child (a fathom extension)."""


def launching_agent(config: Mapping[str, Any]) -> ParentReference | None:
    """The parent reference of this run, or `None` when no async subagent tool started it."""
    reference = (config.get("configurable") or {}).get(PARENT_KEY)
    if isinstance(reference, Mapping):
        return cast(ParentReference, {k: str(v) for k, v in reference.items() if v})
    metadata = config.get("metadata") or {}
    if not metadata.get("parent_thread_id"):
        return None
    found: ParentReference = {"thread_id": str(metadata["parent_thread_id"])}
    if metadata.get("parent_assistant_id"):
        found["assistant_id"] = str(metadata["parent_assistant_id"])
    return found


def _is_outermost(config: Mapping[str, Any]) -> bool:
    """Whether this code runs in the run's own graph, not in a graph nested in one of its nodes."""
    return "|" not in str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def _run_id(config: Mapping[str, Any]) -> str | None:
    run_id = (config.get("metadata") or {}).get("run_id")
    return str(run_id) if run_id else None


def _clipped(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        text = block.get("text")
        if block.get("type") == "text" and isinstance(text, str) and len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "\n... [cut; `check_async_task` has the full result]"
            block = {**block, "text": text}
        out.append(block)
    return out


_app_clients: weakref.WeakKeyDictionary[Any, dict[Any, LangGraphClient]] = (
    weakref.WeakKeyDictionary()
)
"""Clients per fathom app and event loop (an `httpx.AsyncClient` belongs to the loop it
first ran in)."""
_url_clients: dict[str, dict[Any, LangGraphClient]] = {}
"""Clients per parent url (`""`: the SDK's own loopback) and event loop."""


def _cached(
    per_loop: dict[Any, LangGraphClient], make: Callable[[], LangGraphClient]
) -> LangGraphClient:
    loop = asyncio.get_running_loop()
    for stale in [other for other in per_loop if other.is_closed()]:
        del per_loop[stale]
    client = per_loop.get(loop)
    if client is None:
        client = per_loop[loop] = make()
    return client


def _hosting_client() -> LangGraphClient | None:
    """A client for the server that runs this code: the fathom app in process, else the
    SDK's own in-process transport (as on `langgraph dev`), else `None`."""
    from fathom.hosting.client import in_process_client
    from fathom.hosting.loopback import hosting_app

    app = hosting_app()
    if app is not None:
        clients = _app_clients.setdefault(app, {})
        return _cached(clients, lambda: in_process_client(app, loopback=True))
    try:
        import langgraph_api.server  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return None
    from langgraph_sdk import get_client

    return _cached(_url_clients.setdefault("", {}), lambda: get_client(url=None))


def _client_for(parent: ParentReference) -> LangGraphClient | None:
    url = parent.get("url")
    if not url:
        return _hosting_client()
    from langgraph_sdk import get_client

    return _cached(_url_clients.setdefault(url, {}), lambda: get_client(url=url))


async def wake_parent(
    client: LangGraphClient,
    parent: ParentReference,
    message: Mapping[str, Any],
    *,
    context: Mapping[str, Any] | None = None,
) -> bool:
    """Start a run on the parent's thread with `message` as input, if the thread is idle.

    A parent whose state already records the outcome that `message` reports (its own
    refresh saw it first) is not woken. Returns whether a run was started. Server failures
    do not raise: a missing thread (404)
    or one that became busy (409, `reject`) is logged at debug level, any other as a warning.
    """
    thread_id, assistant_id = parent.get("thread_id"), parent.get("assistant_id")
    if not thread_id or not assistant_id:
        return False
    try:
        thread = await client.threads.get(thread_id)
        if thread.get("status") not in _WAKEABLE:
            logger.debug("parent thread %s is %s; it will refresh its tasks itself",
                         thread_id, thread.get("status"))
            return False
        if _already_known(thread, message.get(NOTIFICATION_KEY)):
            logger.debug("parent thread %s already knows this outcome; not woken", thread_id)
            return False
        await client.runs.create(
            thread_id,
            assistant_id,
            input={"messages": [dict(message)]},
            multitask_strategy="reject",
            context=dict(context) if context else None,
        )
    except REMOTE_ERRORS as error:
        quiet = status_code(error) in (404, 409)
        (logger.debug if quiet else logger.warning)(
            "could not wake parent thread %s: %s", thread_id, error, exc_info=not quiet
        )
        return False
    return True


def _already_known(thread: Mapping[str, Any], event: object) -> bool:
    """Whether the parent's state already records the outcome `event` reports.

    The parent refreshes its unfinished tasks before each model call and after its final
    answer, and reports each new outcome itself; a run that ended just before such a
    refresh is then reported twice, once by that refresh and once by this notifier, when
    the notifier finds the parent idle a moment later.
    """
    if not isinstance(event, Mapping):
        return False
    tasks = (thread.get("values") or {}).get("async_tasks")
    task = tasks.get(str(event.get("task_id"))) if isinstance(tasks, Mapping) else None
    return (isinstance(task, Mapping) and task.get("run_id") == event.get("run_id")
            and task.get("status") == event.get("status"))


@dataclasses.dataclass
class _RunRecord:
    """What the middleware learns about one child run while it executes."""

    parent: ParentReference
    thread_id: str
    agent_name: str
    context: dict[str, Any] | None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    failure: str | None = None
    watcher: asyncio.Task[None] | None = None


_runs: dict[str, _RunRecord] = {}
"""Child runs in this process by run id (shared by the nested agents of one run)."""
_background: set[asyncio.Task[None]] = set()


class ParentNotifierMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Wakes the agent that launched this run as an async subagent, when the run ends.

    Added by `create_deep_agent` to every deep agent; inert for runs without a parent
    reference. Also counts the run's model calls and tokens for the parent's usage report.
    It only wraps model and tool calls (the first one starts watching the run), so it adds
    no node to the graph and no step to a run.
    """

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Pass through (sync path)."""
        return handler(request)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        """Pass through (sync path)."""
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Count the call and its tokens; remember a failure's type for the notification."""
        record = _record_for(request.runtime.context)
        with _noting_failure(record):
            response = await handler(request)
        if record is not None:
            record.calls += 1
            for message in response.result:
                usage = message.usage_metadata if isinstance(message, AIMessage) else None
                if usage:
                    record.input_tokens += usage.get("input_tokens", 0)
                    record.output_tokens += usage.get("output_tokens", 0)
        return response

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        """Remember the type of an exception that escapes a tool (it fails the run)."""
        with _noting_failure(_record_for(request.runtime.context)):
            return await handler(request)


@contextlib.contextmanager
def _noting_failure(record: _RunRecord | None) -> Iterator[None]:
    """Note the type of the first exception that fails the run in `record`; re-raise it."""
    try:
        yield
    except GraphInterrupt:
        raise
    except Exception as error:  # boundary: a model or tool call of the run; re-raised
        if record is not None:
            record.failure = record.failure or type(error).__name__
        raise


def _record_for(context: object) -> _RunRecord | None:
    """This run's record; the outermost graph creates it and starts its watcher.

    Nested agents (a sync subagent inside the run) share the run id, so their model calls
    count towards the same record.
    """
    try:
        config = get_config()
    except RuntimeError:
        return None
    run_id = _run_id(config)
    if run_id is None:
        return None
    record = _runs.get(run_id)
    if record is not None:
        return record
    parent = launching_agent(config)
    if parent is None or not _is_outermost(config):
        return None
    thread_id = str((config.get("configurable") or {}).get("thread_id") or "")
    if not thread_id:
        return None
    metadata = config.get("metadata") or {}
    name = str(metadata.get("subagent_name") or metadata.get("graph_id") or "subagent")
    record = _RunRecord(parent, thread_id, name, context_data(context))
    _runs[run_id] = record
    while len(_runs) > _MAX_REMEMBERED_RUNS:
        del _runs[next(iter(_runs))]
    own = _hosting_client()
    if own is None:
        logger.debug("run %s has no server to report from; the parent will not be woken", run_id)
        return record
    task = asyncio.get_running_loop().create_task(_report_when_done(own, run_id, record))
    record.watcher = task
    _background.add(task)
    task.add_done_callback(_background.discard)
    return record


async def _join(client: LangGraphClient, thread_id: str, run_id: str) -> dict[str, Any] | None:
    """Wait for the run to end; its record, or `None` when the server cannot say."""
    for _ in range(_MAX_JOIN_ATTEMPTS):
        try:
            await client.runs.join(thread_id, run_id)
        except REMOTE_ERRORS as error:  # a long run can outlast one join request
            if status_code(error) == 404:
                return None
            logger.debug("join of run %s ended early: %s", run_id, error)
        try:
            run = await client.runs.get(thread_id, run_id)
        except REMOTE_ERRORS:
            logger.debug("could not read run %s", run_id, exc_info=True)
            return None
        if run.get("status") not in ("pending", "running"):
            return dict(run)
    return None


async def _report_when_done(client: LangGraphClient, run_id: str, record: _RunRecord) -> None:
    """After the child run ends: record its usage on its thread, then wake the parent."""
    try:
        run = await _join(client, record.thread_id, run_id)
        if run is None:
            return
        thread: dict[str, Any] = dict(await client.threads.get(record.thread_id))
        await _add_usage(client, record, thread)
        status = str(run.get("status"))
        if status not in _REPORTED_STATUSES:
            return  # cancelled on the server: the parent did it, or knows from its tools
        if status == "success" and thread.get("status") == "interrupted":
            status = "waiting"
        name = str((thread.get("metadata") or {}).get("subagent_name") or record.agent_name)
        task = {"task_id": record.thread_id, "agent_name": name, "run_id": run_id}
        blocks: list[dict[str, Any]] | None = None
        details: dict[str, Any] | None = None
        if status == "success":
            blocks = _clipped(final_blocks(thread.get("values")))
        elif status == "error":
            failure = record.failure
            details = {"error": f"The subagent's run failed ({failure})." if failure
                       else "The subagent's run failed."}
        elif status == "waiting":
            pending = [item for items in (thread.get("interrupts") or {}).values()
                       for item in items]
            details = {"interrupts": [{"id": i.get("id"), "value": i.get("value")}
                                      for i in pending]}
        message = update_message(cast(Any, task), status, blocks, details)
        parent_client = _client_for(record.parent)
        if parent_client is not None:
            await wake_parent(parent_client, record.parent, message, context=record.context)
    except Exception:  # boundary: a background report never hurts the child or its server
        logger.warning("could not report the end of run %s to its parent", run_id, exc_info=True)


async def _add_usage(
    client: LangGraphClient, record: _RunRecord, thread: Mapping[str, Any]
) -> None:
    """Add this run's model calls and tokens to the child thread's `fathom_usage` metadata."""
    if not record.calls:
        return
    before = (thread.get("metadata") or {}).get(USAGE_METADATA_KEY) or {}
    totals = {key: int(before.get(key, 0)) + getattr(record, key)
              for key in ("calls", "input_tokens", "output_tokens")}
    try:
        await client.threads.update(record.thread_id, metadata={USAGE_METADATA_KEY: totals})
    except REMOTE_ERRORS:
        logger.warning("could not record usage on thread %s", record.thread_id, exc_info=True)

