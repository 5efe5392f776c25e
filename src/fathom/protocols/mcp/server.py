"""An agent served as MCP tools (`fathom mcp serve`), over stdio or streamable HTTP.

Three tools, built with the MCP Python SDK's FastMCP:

- `ask(question, thread_id=None)`: one run to its end; answers `{"status", "thread_id",
  "answer"}`. Pass the `thread_id` back to continue the conversation.
- `start_task(description)`: starts a run in the background and answers its `task_id`
  (the task's thread id) at once.
- `check_task(task_id)`: the task's status, as the async subagent tools report it:
  `pending`, `running`, `waiting` (paused for a human approval, with its `interrupts`),
  `success` (with `result`, the final answer), `error` (with `error`) or `cancelled`.

Threads are checkpointed in SQLite (`threads.sqlite` in the given folder), so an `ask` can
continue a thread from an earlier server process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from fathom.tool_answers import Failure, aattempt

__all__ = ["AgentTools", "TaskRecord", "build_mcp_server", "serve_mcp"]

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]

_INSTRUCTIONS = (
    "A fathom agent. `ask` runs it once and answers (pass `thread_id` back to continue). "
    "For long work, `start_task` returns a task_id at once; poll it with `check_task`."
)


@dataclass
class TaskRecord:
    """One background task: its thread, status and outcome."""

    task_id: str
    status: str = "pending"
    result: str = ""
    error: str = ""
    interrupts: list[dict[str, Any]] = field(default_factory=list)


def _answer(values: Mapping[str, Any]) -> str:
    for message in reversed(list(values.get("messages", []) or [])):
        if getattr(message, "type", "") == "ai" and str(message.text).strip():
            return str(message.text)
    return ""


class AgentTools:
    """The agent behind the MCP tools: runs, threads and background tasks."""

    def __init__(self, graph: Any, checkpointer: Any, store: Any = None) -> None:
        from langgraph.store.memory import InMemoryStore

        from fathom.server.graphs import GraphRegistry

        self._registry = GraphRegistry({"agent": graph}, checkpointer,
                                       store if store is not None else InMemoryStore())
        self.tasks: dict[str, TaskRecord] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    async def _run(self, question: str, thread_id: str) -> tuple[str, str, list[dict[str, Any]]]:
        """Run to the end; (status, answer, interrupts): "success" or "waiting"."""
        config = RunnableConfig(configurable={"thread_id": thread_id}, recursion_limit=1000)
        graph = await self._registry.graph("agent", config)
        await graph.ainvoke({"messages": [{"role": "user", "content": question}]}, config)
        snapshot = await graph.aget_state(config)
        interrupts = [{"id": i.id, "value": i.value} for i in snapshot.interrupts or ()]
        status = "waiting" if interrupts else "success"
        return status, _answer(snapshot.values or {}), interrupts

    async def ask(self, question: str, thread_id: str | None = None) -> dict[str, Any]:
        """One run; the answer and the thread to continue."""
        thread = (thread_id or "").strip() or str(uuid.uuid4())
        if thread in self._running:
            raise ToolError(f"thread {thread} is busy with a running task; check_task it first")
        outcome = await aattempt(self._run(question, thread), f"ask on thread {thread}")
        if isinstance(outcome, Failure):
            logger.error("ask on thread %s failed", thread, exc_info=outcome.error)
            text = f"the agent failed on thread {thread}: {outcome.text}"
            raise ToolError(text) from outcome.error
        status, answer, interrupts = outcome
        reply: dict[str, Any] = {"status": status, "thread_id": thread, "answer": answer}
        if interrupts:
            reply["interrupts"] = interrupts
        return reply

    async def start_task(self, description: str) -> dict[str, Any]:
        """Start a background run; its task id is its thread id."""
        task_id = str(uuid.uuid4())
        record = TaskRecord(task_id)
        self.tasks[task_id] = record
        self._running[task_id] = asyncio.create_task(self._background(record, description))
        return {"task_id": task_id, "status": record.status}

    async def _background(self, record: TaskRecord, description: str) -> None:
        record.status = "running"
        try:
            outcome = await aattempt(self._run(description, record.task_id), record.task_id)
            if isinstance(outcome, Failure):  # the run's failure is the task's result
                logger.error("task %s failed", record.task_id, exc_info=outcome.error)
                record.status, record.error = "error", outcome.text
            else:
                record.status, record.result, record.interrupts = outcome
        except asyncio.CancelledError:
            record.status = "cancelled"
        finally:
            self._running.pop(record.task_id, None)

    def check_task(self, task_id: str) -> dict[str, Any]:
        """A task's status and, once it ended, its result or error."""
        record = self.tasks.get(task_id.strip())
        if record is None:
            known = ", ".join(self.tasks) or "none yet"
            raise ToolError(f"No task has id {task_id!r}; the tasks started here are: {known}")
        report: dict[str, Any] = {"task_id": record.task_id, "status": record.status,
                                  "thread_id": record.task_id}
        if record.status == "success":
            report["result"] = record.result
        elif record.status == "error":
            report["error"] = record.error
        elif record.status == "waiting":
            report["interrupts"] = record.interrupts
        return report

    async def aclose(self) -> None:
        """Cancel the tasks still running."""
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(BaseException):
                await task


def build_mcp_server(tools: AgentTools, *, name: str = "fathom", host: str = "127.0.0.1",
                     port: int = 8000) -> FastMCP:
    """A FastMCP server whose `ask`, `start_task` and `check_task` tools use `tools`."""
    server = FastMCP(name, instructions=_INSTRUCTIONS, host=host, port=port,
                     log_level="WARNING")

    @server.tool()
    async def ask(question: str, thread_id: str | None = None) -> dict[str, Any]:
        """Ask the agent one question and wait for its answer. Pass the returned thread_id
        to continue the same conversation."""
        return await tools.ask(question, thread_id)

    @server.tool()
    async def start_task(description: str) -> dict[str, Any]:
        """Start a long task in the background; returns its task_id at once. Poll it with
        check_task."""
        return await tools.start_task(description)

    @server.tool()
    async def check_task(task_id: str) -> dict[str, Any]:
        """The status of a task started with start_task: pending, running, waiting (for a
        human), success (with result), error or cancelled."""
        return tools.check_task(task_id)

    return server


@contextlib.asynccontextmanager
async def _agent_tools(graph: Any, state_dir: Path) -> AsyncIterator[AgentTools]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    state_dir.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(state_dir / "threads.sqlite")) as saver:
        tools = AgentTools(graph, saver)
        try:
            yield tools
        finally:
            await tools.aclose()


async def serve_mcp(graph: Any, *, state_dir: Path, transport: Transport = "stdio",
                    host: str = "127.0.0.1", port: int = 8000, name: str = "fathom") -> None:
    """Serve `graph` (a compiled graph or a graph factory) as MCP tools until stopped.

    Over `"stdio"` the MCP client talks on this process's stdin/stdout; over `"http"` the
    streamable HTTP endpoint is `http://<host>:<port>/mcp`.
    """
    async with _agent_tools(graph, state_dir) as tools:
        server = build_mcp_server(tools, name=name, host=host, port=port)
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            await server.run_streamable_http_async()
