"""An agent served as MCP tools (`fathom mcp serve`), over stdio or streamable HTTP.

Four tools, built with the MCP Python SDK's FastMCP:

- `ask(question, thread_id=None)`: one run to its end; answers `{"status", "thread_id",
  "answer"}`. Pass the `thread_id` back to continue the conversation. When the run stops
  for a human approval and the client supports MCP elicitation, the approval is asked
  through it and the run goes on; otherwise the answer is `waiting` with its
  `interrupts`, and the thread is a task that `answer_approval` answers.
- `start_task(description)`: starts a run in the background and answers its `task_id`
  (the task's thread id) at once.
- `check_task(task_id)`: the task's status, as the async subagent tools report it:
  `pending`, `running`, `waiting` (paused for a human approval, with its `interrupts`),
  `success` (with `result`, the final answer), `error` (with `error`) or `cancelled`.
- `answer_approval(task_id, decision, message=None, args=None)`: answers what a waiting
  task asks (`approve`, `reject` with an optional `message` for the model, `edit` with
  the call's new `args`, or `respond` with the `message` the model gets instead of the
  tool's result: LangChain's approval decisions) and continues it in the background.

Threads are checkpointed in the project's threads database (`.fathom/threads.sqlite`, as
the `fathom` command keeps them) and the tasks' records live in the same file
(`fathom.protocols.mcp.tasks`), so a task started in one session is known in the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from fathom.protocols.mcp.tasks import TaskRecord, TaskTable, owner_alive
from fathom.tool_answers import Failure, aattempt

__all__ = ["AgentTools", "TaskRecord", "build_mcp_server", "serve_mcp"]

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]
Decision = Literal["approve", "reject", "edit", "respond"]
Elicit = Callable[[list[dict[str, Any]]], Awaitable[dict[str, Any] | None]]
"""Asks the person about a run's interrupts; the resume value, or None to leave them."""

_INSTRUCTIONS = (
    "A fathom agent. `ask` runs it once and answers (pass `thread_id` back to continue). "
    "For long work, `start_task` returns a task_id at once; poll it with `check_task`. A "
    "task `waiting` for a human approval continues after `answer_approval`."
)
_STOPPED = ("the server that ran it stopped before it finished (its MCP session ended); "
            "its thread keeps the work up to its last checkpoint: `ask` with this id as "
            "thread_id continues the conversation")
_ENDED = ("success", "error", "cancelled")
_DECISIONS = ("approve", "edit", "reject", "respond")


def _answer(values: Mapping[str, Any]) -> str:
    for message in reversed(list(values.get("messages", []) or [])):
        if getattr(message, "type", "") == "ai" and str(message.text).strip():
            return str(message.text)
    return ""


def _allowed(interrupt: Mapping[str, Any], name: Any) -> list[str]:
    """The decisions the approval middleware allows for a call of `name`."""
    for config in interrupt.get("review_configs", []) or []:
        if config.get("action_name") == name:
            return list(config.get("allowed_decisions", _DECISIONS))
    return list(_DECISIONS)


def resume_for(interrupts: list[dict[str, Any]], decision: str, *, message: str | None = None,
               args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The resume value giving `decision` to every call the `interrupts` ask about.

    Raises `ToolError` (for the MCP client) when a call does not allow the decision, when
    `edit` has no `args` or is given to several calls at once, or when an interrupt is not
    an approval request.
    """
    if decision not in _DECISIONS:
        raise ToolError(f"decision must be approve, reject, edit or respond, not {decision!r}")
    if decision == "respond" and not message:
        raise ToolError("`respond` needs `message`: what the agent gets instead of the "
                        "tool's result")
    calls = [(i, r) for i in interrupts for r in (i["value"] or {}).get("action_requests", [])]
    if not calls or any(not isinstance(i["value"], Mapping) for i in interrupts):
        raise ToolError("the task waits for something that is not a tool approval; continue "
                        "it with `ask` and this thread_id")
    if decision == "edit":
        if args is None:
            raise ToolError("`edit` needs `args`: the call's arguments as they should run")
        if len(calls) != 1:
            names = ", ".join(str(r.get("name")) for _, r in calls)
            raise ToolError(f"`edit` answers one call, and {len(calls)} wait ({names}); "
                            "approve or reject them together instead")
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        decisions = []
        for request in interrupt["value"].get("action_requests", []):
            allowed = _allowed(interrupt["value"], request.get("name"))
            if decision not in allowed:
                raise ToolError(f"{request.get('name')} does not allow {decision} (it allows: "
                                f"{', '.join(allowed)})")
            answer: dict[str, Any] = {"type": decision}
            if decision in ("reject", "respond") and message:
                answer["message"] = message
            if decision == "edit":
                answer["edited_action"] = {"name": request.get("name"), "args": dict(args or {})}
            decisions.append(answer)
        resume[interrupt["id"]] = {"decisions": decisions}
    return resume


class AgentTools:
    """The agent behind the MCP tools: runs, threads and background tasks.

    `tasks` keeps the task records (in the threads database, so they outlive the process);
    `index`, when given, is the project's thread index (`fathom threads` lists the threads).
    """

    def __init__(self, graph: Any, checkpointer: Any, store: Any = None, *,
                 tasks: TaskTable, index: Any = None, model: str = "",
                 project: Path | None = None) -> None:
        from langgraph.store.memory import InMemoryStore

        from fathom.server.graphs import GraphRegistry

        self._registry = GraphRegistry({"agent": graph}, checkpointer,
                                       store if store is not None else InMemoryStore())
        self.tasks = tasks
        self._index, self._model, self._project = index, model, project or Path.cwd()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._answering = asyncio.Lock()  # two answers to one task: the second is refused

    def _new_id(self) -> str:
        return self._index.new_thread_id() if self._index is not None else str(uuid.uuid4())

    async def _touch(self, thread_id: str, first_message: str) -> None:
        if self._index is not None:
            await asyncio.to_thread(self._index.touch, thread_id, first_message=first_message,
                                    model=self._model, project=self._project)

    async def _graph(self, thread_id: str) -> tuple[Any, RunnableConfig]:
        config = RunnableConfig(configurable={"thread_id": thread_id}, recursion_limit=1000)
        return await self._registry.graph("agent", config), config

    async def _interrupts(self, thread_id: str) -> tuple[list[dict[str, Any]], str, bool]:
        """The thread's pending interrupts, its final answer, and whether it has ended."""
        graph, config = await self._graph(thread_id)
        snapshot = await graph.aget_state(config)
        interrupts = [{"id": i.id, "value": i.value} for i in snapshot.interrupts or ()]
        return interrupts, _answer(snapshot.values or {}), not snapshot.next

    async def _run(self, given: Any, thread_id: str) -> tuple[str, str, list[dict[str, Any]]]:
        """Run to the end; (status, answer, interrupts): "success" or "waiting"."""
        graph, config = await self._graph(thread_id)
        run_input = given if isinstance(given, Command) else {
            "messages": [{"role": "user", "content": given}]}
        await graph.ainvoke(run_input, config)
        interrupts, answer, _ = await self._interrupts(thread_id)
        return ("waiting" if interrupts else "success"), answer, interrupts

    async def _busy(self, thread_id: str) -> TaskRecord | None:
        """The thread's task record when a server process runs it now."""
        record = await self.tasks.get(thread_id)
        if thread_id in self._running:
            return record or TaskRecord(thread_id, status="running")
        if record is not None and record.status in ("pending", "running") \
                and record.owner != os.getpid() and owner_alive(record.owner):
            return record
        return None

    async def ask(self, question: str, thread_id: str | None = None, *,
                  elicit: Elicit | None = None) -> dict[str, Any]:
        """One run; the answer and the thread to continue. With `elicit`, approvals the run
        asks for are put to the person through it, and the run goes on."""
        thread = (thread_id or "").strip() or self._new_id()
        if await self._busy(thread) is not None:
            raise ToolError(f"thread {thread} is busy with a running task; check_task it first")
        await self._touch(thread, question)
        given: Any = question
        while True:
            outcome = await aattempt(self._run(given, thread), f"ask on thread {thread}")
            if isinstance(outcome, Failure):
                logger.error("ask on thread %s failed", thread, exc_info=outcome.error)
                text = f"the agent failed on thread {thread}: {outcome.text}"
                raise ToolError(text) from outcome.error
            status, answer, interrupts = outcome
            if status != "waiting" or elicit is None:
                break
            resume = await elicit(interrupts)
            if resume is None:
                break
            given = Command(resume=resume)
        reply: dict[str, Any] = {"status": status, "thread_id": thread, "answer": answer}
        if interrupts:
            reply["interrupts"] = interrupts
            # answer_approval and check_task know the thread as a task from now on
            record = await self.tasks.get(thread) or TaskRecord(thread, description=question)
            await self.tasks.save(record.but(status="waiting", owner=os.getpid()))
        return reply

    async def start_task(self, description: str) -> dict[str, Any]:
        """Start a background run; its task id is its thread id."""
        task_id = self._new_id()
        record = TaskRecord(task_id, description=description, owner=os.getpid()).but()
        await self.tasks.save(record)
        await self._touch(task_id, description)
        self._start(record, description)
        return {"task_id": task_id, "status": record.status}

    def _start(self, record: TaskRecord, given: Any) -> None:
        self._running[record.task_id] = asyncio.create_task(self._background(record, given))

    async def _background(self, record: TaskRecord, given: Any) -> None:
        record = record.but(status="running", owner=os.getpid())
        try:
            await self.tasks.save(record)
            outcome = await aattempt(self._run(given, record.task_id), record.task_id)
            if isinstance(outcome, Failure):  # the run's failure is the task's result
                logger.error("task %s failed", record.task_id, exc_info=outcome.error)
                record = record.but(status="error", error=outcome.text)
            else:
                status, answer, _ = outcome
                record = record.but(status=status, result=answer, error="")
        except asyncio.CancelledError:
            record = record.but(status="cancelled", error=_STOPPED)
        finally:  # saved before it leaves `_running`, so no reader sees it in between
            try:
                await asyncio.shield(self.tasks.save(record))
            finally:
                self._running.pop(record.task_id, None)

    async def _current(self, task_id: str) -> TaskRecord:
        """The task's record, brought up to date: a task whose server process is gone was
        stopped; a waiting one may have been answered elsewhere (`fathom approve`)."""
        record = await self.tasks.get(task_id.strip())
        if record is None:
            known = ", ".join(await self.tasks.recent()) or "none yet"
            raise ToolError(f"No task has id {task_id!r}; the latest tasks are: {known}")
        if record.task_id in self._running or record.status in _ENDED:
            return record
        if record.status in ("pending", "running"):
            if record.owner != os.getpid() and owner_alive(record.owner):
                return record
            record = record.but(status="cancelled", error=_STOPPED)
        else:  # waiting
            interrupts, answer, ended = await self._interrupts(record.task_id)
            if interrupts or not ended:
                return record
            record = record.but(status="success", result=answer)
        await self.tasks.save(record)
        return record

    async def check_task(self, task_id: str) -> dict[str, Any]:
        """A task's status and, once it ended, its result or error."""
        record = await self._current(task_id)
        report: dict[str, Any] = {"task_id": record.task_id, "status": record.status,
                                  "thread_id": record.task_id}
        if record.status == "success":
            report["result"] = record.result
        elif record.status in ("error", "cancelled") and record.error:
            report["error"] = record.error
        elif record.status == "waiting":
            report["interrupts"], _, _ = await self._interrupts(record.task_id)
        return report

    async def answer_approval(self, task_id: str, decision: str, message: str | None = None,
                              args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Answer the approvals a waiting task asks for; it continues in the background."""
        async with self._answering:
            record = await self._current(task_id)
            if record.status != "waiting":
                raise ToolError(f"task {record.task_id} is {record.status}, not waiting for an "
                                "approval; check_task shows what it does")
            interrupts, _, _ = await self._interrupts(record.task_id)
            resume = resume_for(interrupts, decision, message=message, args=args)
            record = record.but(status="running", owner=os.getpid())
            await self.tasks.save(record)
            self._start(record, Command(resume=resume))
        calls = [str(r.get("name")) for i in interrupts for r in i["value"]["action_requests"]]
        return {"task_id": record.task_id, "status": "running", "decision": decision,
                "calls": calls}

    async def aclose(self) -> None:
        """Cancel the tasks still running (each is recorded as cancelled)."""
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(BaseException):
                await task


def _elicitation(ctx: Context[Any, Any, Any]) -> Elicit | None:
    """Approvals asked through MCP elicitation, when the client supports it."""
    from mcp import types

    session = ctx.session
    if not session.check_client_capability(
            types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        return None

    async def elicit(interrupts: list[dict[str, Any]]) -> dict[str, Any] | None:
        resume: dict[str, Any] = {}
        for interrupt in interrupts:
            value = interrupt["value"]
            if not isinstance(value, Mapping) or not value.get("action_requests"):
                return None  # not an approval: the caller answers it
            decisions = []
            for request in value["action_requests"]:
                choices = [d for d in _allowed(value, request.get("name"))
                           if d in ("approve", "reject")]
                text = (f"The agent asks to run {request.get('name')} with "
                        f"{json.dumps(request.get('args', {}), default=str)}. "
                        f"{request.get('description', '')}".strip())
                schema = {"type": "object", "required": ["decision"], "properties": {
                    "decision": {"type": "string", "enum": choices,
                                 "description": "approve runs the call; reject refuses it"},
                    "message": {"type": "string",
                                "description": "why it is rejected (for the agent)"},
                }}  # fmt: skip
                answer = await session.elicit_form(text, schema,  # type: ignore[arg-type]
                                                   related_request_id=ctx.request_id)
                if answer.action == "cancel":
                    return None  # left waiting: answer_approval answers it later
                content = answer.content or {}
                chosen = content.get("decision") if answer.action == "accept" else "reject"
                if chosen not in choices:
                    return None
                decision: dict[str, Any] = {"type": chosen}
                if chosen == "reject" and content.get("message"):
                    decision["message"] = str(content["message"])
                decisions.append(decision)
            resume[interrupt["id"]] = {"decisions": decisions}
        return resume

    return elicit


def build_mcp_server(tools: AgentTools, *, name: str = "fathom", host: str = "127.0.0.1",
                     port: int = 8000) -> FastMCP:
    """A FastMCP server whose `ask`, `start_task`, `check_task` and `answer_approval`
    tools use `tools`."""
    server = FastMCP(name, instructions=_INSTRUCTIONS, host=host, port=port,
                     log_level="WARNING")

    @server.tool()
    async def ask(question: str, ctx: Context[Any, Any, Any],
                  thread_id: str | None = None) -> dict[str, Any]:
        """Ask the agent one question and wait for its answer. Pass the returned thread_id
        to continue the same conversation. A tool call that needs a human's approval is
        asked through elicitation when the client supports it; otherwise the answer is
        `waiting`, and answer_approval answers it."""
        return await tools.ask(question, thread_id, elicit=_elicitation(ctx))

    @server.tool()
    async def start_task(description: str) -> dict[str, Any]:
        """Start a long task in the background; returns its task_id at once. Poll it with
        check_task."""
        return await tools.start_task(description)

    @server.tool()
    async def check_task(task_id: str) -> dict[str, Any]:
        """The status of a task started with start_task: pending, running, waiting (for a
        human, with the calls it asks about), success (with result), error or cancelled."""
        return await tools.check_task(task_id)

    @server.tool()
    async def answer_approval(task_id: str, decision: Decision, message: str | None = None,
                              args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer a task that is `waiting` for a human approval: approve the tool call(s),
        reject them (message: why, for the agent), edit (args: the call's arguments as
        they should run) or respond (message: what the agent gets instead of the tool's
        result). The task continues in the background; poll it with check_task."""
        return await tools.answer_approval(task_id, decision, message, args)

    return server


@contextlib.asynccontextmanager
async def _agent_tools(graph: Any, db_path: Path, model: str,
                       project: Path) -> AsyncIterator[AgentTools]:
    from fathom.project.checkpoints import CancelSafeSqliteSaver
    from fathom.project.threads import ThreadIndex

    db_path.parent.mkdir(parents=True, exist_ok=True)
    index, table = ThreadIndex(db_path), TaskTable(db_path)
    async with CancelSafeSqliteSaver.from_conn_string(str(db_path)) as saver:
        tools = AgentTools(graph, saver, tasks=table, index=index, model=model,
                           project=project)
        try:
            yield tools
        finally:
            await tools.aclose()


async def serve_mcp(graph: Any, *, db_path: Path, transport: Transport = "stdio",
                    host: str = "127.0.0.1", port: int = 8000, name: str = "fathom",
                    model: str = "", project: Path | None = None) -> None:
    """Serve `graph` (a compiled graph or a graph factory) as MCP tools until stopped.

    Threads, their checkpoints and the tasks' records are kept in the SQLite file
    `db_path` (the project's `.fathom/threads.sqlite`, see
    `fathom.project.threads.threads_db_path`); `model` and `project` are what the thread
    index records for `fathom threads`. Over `"stdio"` the MCP client talks on this
    process's stdin/stdout; over `"http"` the streamable HTTP endpoint is
    `http://<host>:<port>/mcp`.
    """
    async with _agent_tools(graph, db_path, model, project or db_path.parent.parent) as tools:
        server = build_mcp_server(tools, name=name, host=host, port=port)
        if transport == "stdio":
            await _run_stdio(server)
        else:
            await server.run_streamable_http_async()


async def _run_stdio(server: FastMCP) -> None:
    """Serve over stdio on private duplicates of the stdin and stdout descriptors.

    The SDK's own stdio transport wraps `sys.stdout.buffer` in a text stream that closes
    it when collected, so the process's last flush of `sys.stdout` raised and every session
    ended with a traceback. Closing these duplicates leaves the process's streams open.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    with open(os.dup(sys.stdin.fileno()), encoding="utf-8", errors="replace") as stdin, \
            open(os.dup(sys.stdout.fileno()), "w", encoding="utf-8") as stdout:
        async with stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as streams:
            low_level = server._mcp_server  # what FastMCP.run_stdio_async runs, too
            await low_level.run(*streams, low_level.create_initialization_options())
