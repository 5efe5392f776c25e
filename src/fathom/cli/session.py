"""One conversation thread of the `fathom` command: running turns and reporting them.

A turn streams the agent (`astream` over updates, messages and custom events, subagents
included) into a `Display`, counts model calls and tokens with `AgentUsage`, and ends in one
of four ways: done, waiting for an approval, interrupted (Ctrl-C) or failed. Checkpoints go
to the project's SQLite threads database after every step, so an interrupted or failed
turn loses nothing that had finished; the next message continues the thread, and
dangling tool calls are repaired by the agent's own middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from fathom.cli.build import AgentSetup, build_agent
from fathom.cli.display import Display, RunStatus
from fathom.cli.events import EventTranslator
from fathom.cli.threads import ThreadIndex
from fathom.usage import AgentUsage

__all__ = ["PendingApproval", "Session", "TurnResult", "final_answer"]

RECURSION_LIMIT = 1000
"""Graph steps one turn may take (about 500 model calls) before it stops."""


@dataclass(frozen=True)
class PendingApproval:
    """One interrupt waiting for a person: its id and the tool calls it asks about."""

    interrupt_id: str
    action_requests: list[dict[str, Any]]
    review_configs: list[dict[str, Any]]


@dataclass
class TurnResult:
    """How a turn ended, and what the thread holds afterwards."""

    status: RunStatus
    answer: str = ""
    detail: str = ""
    approvals: list[PendingApproval] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    usage: AgentUsage = field(default_factory=AgentUsage)


def final_answer(values: dict[str, Any]) -> str:
    """The last non-empty text the main agent wrote."""
    for message in reversed(values.get("messages", [])):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text
    return ""


def _pending(snapshot: Any) -> list[PendingApproval]:
    pending = []
    for interrupt in getattr(snapshot, "interrupts", ()) or ():
        value = interrupt.value if isinstance(interrupt.value, dict) else {}
        pending.append(
            PendingApproval(
                interrupt_id=interrupt.id,
                action_requests=list(value.get("action_requests", [])),
                review_configs=list(value.get("review_configs", [])),
            )
        )
    return pending


class Session:
    """The agent of one project, the threads database and a display."""

    def __init__(
        self,
        setup: AgentSetup,
        db_path: Path,
        display: Display,
        *,
        agent_factory: Callable[[AgentSetup, Any], Any] = build_agent,
    ) -> None:
        self.setup = setup
        self.db_path = db_path
        self.display = display
        self.threads = ThreadIndex(db_path)
        self._agent_factory = agent_factory
        # One event loop for the whole session: model clients (httpx) bind to the loop they
        # first ran on, so a loop per turn would break the second turn.
        self._runner = asyncio.Runner()
        self._translators: dict[str, EventTranslator] = {}

    def close(self) -> None:
        """Close the session's event loop."""
        self._runner.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _config(self, thread_id: str, usage: AgentUsage) -> dict[str, Any]:
        return {
            "configurable": {"thread_id": thread_id},
            "callbacks": [usage],
            "recursion_limit": RECURSION_LIMIT,
        }

    def run(self, thread_id: str, message: str | None = None, *, resume: Any = None) -> TurnResult:
        """Run one turn: a new `message`, or a `resume` value answering pending approvals.

        Ctrl-C (SIGINT) during the turn cancels it and returns status "interrupted".
        """
        if message is not None:
            self.threads.touch(
                thread_id, first_message=message, model=self.setup.model_name,
                project=self.setup.project_dir,
            )
        return self._runner.run(self._run(thread_id, message, resume))

    async def _run(self, thread_id: str, message: str | None, resume: Any) -> TurnResult:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.types import Command

        usage = AgentUsage()
        config = self._config(thread_id, usage)
        if resume is not None:
            payload: Any = Command(resume=resume)
        else:
            payload = {"messages": [{"role": "user", "content": message or ""}]}
        async with AsyncSqliteSaver.from_conn_string(str(self.db_path)) as checkpointer:
            agent = self._agent_factory(self.setup, checkpointer)
            self.display.run_started(thread_id=thread_id, model=self.setup.model_name,
                                     usage=usage)
            status: RunStatus = "done"
            detail = ""
            translator = self._translators.setdefault(thread_id, EventTranslator())
            stream = asyncio.ensure_future(self._stream(agent, payload, config, translator))
            loop = asyncio.get_running_loop()
            with _cancel_on_sigint(loop, stream):
                try:
                    await stream
                except asyncio.CancelledError:
                    status, detail = "interrupted", "stopped by Ctrl-C; the thread is kept"
                except Exception as error:  # shown to the person; the thread stays usable
                    status, detail = "error", f"{type(error).__name__}: {error}"
            snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
        values = dict(snapshot.values or {})
        approvals = _pending(snapshot) if status == "done" else []
        if approvals:
            status = "approval"
            names = [r.get("name", "?") for a in approvals for r in a.action_requests]
            detail = "approval needed for " + ", ".join(names)
        result = TurnResult(status=status, answer=final_answer(values), detail=detail,
                            approvals=approvals, values=values, usage=usage)
        self.display.run_finished(status=status, usage=usage, detail=detail)
        if message is not None or resume is not None:
            self.threads.touch(thread_id, first_message=message or "", model=self.setup.model_name,
                               project=self.setup.project_dir)
        return result

    async def _stream(
        self, agent: Any, payload: Any, config: dict[str, Any], translator: EventTranslator
    ) -> None:
        async for namespace, mode, data in agent.astream(
            payload, config, stream_mode=["updates", "messages", "custom"], subgraphs=True
        ):
            for event in translator.translate(namespace, mode, data):
                self.display.event(event)

    def pending(self, thread_id: str) -> list[PendingApproval]:
        """Approvals a thread is waiting for (e.g. left by `fathom run` or a closed session)."""
        return self._runner.run(self._pending(thread_id))

    async def _pending(self, thread_id: str) -> list[PendingApproval]:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(self.db_path)) as checkpointer:
            agent = self._agent_factory(self.setup, checkpointer)
            snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
        return _pending(snapshot)


@contextlib.contextmanager
def _cancel_on_sigint(loop: asyncio.AbstractEventLoop, task: asyncio.Future[Any]) -> Any:
    """While the block runs, Ctrl-C cancels `task` instead of raising KeyboardInterrupt."""
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / Windows
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
