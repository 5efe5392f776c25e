"""One conversation thread of the `fathom` command: running turns and reporting them.

A turn streams the agent (`astream` over updates, messages and custom events, subagents
included) into a `Display`, counts model calls and tokens with `AgentUsage`, and ends in one
of four ways: done, waiting for an approval, interrupted (Ctrl-C) or failed. Checkpoints go
to the project's SQLite threads database after every step (`durability="sync"`), so an
interrupted or failed turn loses nothing that had finished; the next message continues the
thread, and dangling tool calls are repaired by the agent's own middleware. A run that died
mid-step (the process was killed) is finished first, so the writes of its completed tools
are kept. A turn holds the thread's lock file in `.fathom/locks/`: a second `fathom` on the
same thread is refused with "thread ... is busy" instead of overwriting the first's turn.

Each turn is recorded for `/undo` (`fathom.project.undo`): the checkpoint it started from and
the pre-images of the files it changed. The calls and tokens of the session's turns add up
per thread for `/cost`. Every model call is recorded (`fathom.measure.calls.CallRecorder`, one
per thread for the session, so a turn's first call is compared with the thread's previous
one) and stored with the thread for `/calls` and `fathom calls`. The operations behind
`/undo`, `/compact`, `/model` and `/cost` are in `fathom.cli.session_ops`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import AIMessage

from fathom.cache_metrics import PrefixRecorder
from fathom.cli.display import Display, RunStatus
from fathom.measure.calls import CallRecord, CallRecorder, records_from_json, stored
from fathom.project.build import AgentSetup, build_agent
from fathom.project.events import EventTranslator
from fathom.project.threads import ThreadIndex
from fathom.project.undo import FileJournal
from fathom.tool_answers import Failure, aattempt
from fathom.usage import AgentTotals, AgentUsage

__all__ = ["PendingApproval", "Session", "TurnResult", "final_answer"]

T = TypeVar("T")

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


UsageKey = tuple[str, str | None]
"""(agent name, "provider:model" it ran on, or None when not known)."""


class Session:
    """The agent of one project, the threads database and a display."""

    supports_local_ops = True
    """`/undo`, `/compact` and `/model` work here (a session attached to a server has not
    got the thread's checkpoints and files at hand)."""

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
        self._stopped: set[str] = set()  # threads whose last run was stopped by Ctrl-C
        self._prefixes: dict[str, PrefixRecorder] = {}  # the prefix reuse rate, per thread
        self._calls: dict[str, CallRecorder] = {}  # every model call, per thread
        self._saved_calls: dict[str, int] = {}  # how many of them are in the database
        self.journal = FileJournal(db_path.parent / "undo")
        # a copy of the setup whose backend records into this session's journal (the
        # caller's setup may serve other sessions)
        self.setup = dataclasses.replace(setup, file_journal=self.journal)
        self._usage: dict[str, dict[UsageKey, AgentTotals]] = {}

    def usage_of(self, thread_id: str) -> dict[UsageKey, AgentTotals]:
        """Calls and tokens of this session's turns on `thread_id`, per agent and model."""
        return {key: AgentTotals(**vars(t)) for key, t in self._usage.get(thread_id, {}).items()}

    def add_usage(self, thread_id: str, usage: AgentUsage, *,
                  rename: dict[str, str] | None = None) -> None:
        """Add a turn's `usage` to the thread's totals (agent names mapped by `rename`)."""
        models = {str(d["name"]): str(d["model"]) for d in self.setup.sources.subagents
                  if "model" in d}
        totals = self._usage.setdefault(thread_id, {})
        counted: list[tuple[UsageKey, AgentTotals]] = []
        for name, figures in usage.totals().items():
            name = (rename or {}).get(name, name)
            counted.append(((name, models.get(name, self.setup.model_name)), figures))
        for name, figures in usage.task_totals().values():  # async subagents, run elsewhere
            counted.append(((name, models.get(name)), figures))
        for key, figures in counted:
            totals.setdefault(key, AgentTotals()).add(figures)

    def operate(self, thread_id: str,
                operation: Callable[[Any, Any], Awaitable[T]]) -> T:
        """Run `operation(agent, checkpointer)` on the thread, holding its lock, in the
        session's event loop. Raises `fathom.runs.ThreadBusyError` when another `fathom`
        has the thread."""
        return self._runner.run(self._operate(thread_id, operation))

    async def _operate(self, thread_id: str,
                       operation: Callable[[Any, Any], Awaitable[T]]) -> T:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        from fathom.runs import thread_file_lock

        with thread_file_lock(self.db_path.parent / "locks", thread_id):
            async with AsyncSqliteSaver.from_conn_string(str(self.db_path)) as checkpointer:
                return await operation(self._agent_factory(self.setup, checkpointer),
                                       checkpointer)

    def forget_run_state(self, thread_id: str) -> None:
        """Drop what the session remembers of the thread's last run (after `/undo`)."""
        self._stopped.discard(thread_id)
        self._translators.pop(thread_id, None)

    def close(self) -> None:
        """Close the session's event loop."""
        self._runner.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def prefix_recorder(self, thread_id: str) -> PrefixRecorder:
        """What this session's requests on the thread kept of their previous request's prefix
        (the prompt-cache prefix reuse rate that `/cost` shows)."""
        return self._prefixes.setdefault(thread_id, PrefixRecorder())

    def call_recorder(self, thread_id: str) -> CallRecorder:
        """What this session's model calls on the thread sent and cost (see `/calls`)."""
        return self._calls.setdefault(thread_id, CallRecorder())

    def call_records(self, thread_id: str) -> list[CallRecord]:
        """The thread's call records, as stored with it (every session's turns)."""
        return records_from_json(self.threads.calls(thread_id))

    def _save_calls(self, thread_id: str) -> None:
        """Store the calls the thread's recorder saw since the last time."""
        records = self.call_recorder(thread_id).records()
        done = self._saved_calls.get(thread_id, 0)
        self.threads.add_calls(thread_id, [stored(r) for r in records[done:]])
        self._saved_calls[thread_id] = len(records)

    def _config(self, thread_id: str, usage: AgentUsage) -> dict[str, Any]:
        calls = self.call_recorder(thread_id)
        calls.run_id = uuid.uuid4().hex[:8]  # this turn's
        return {
            "configurable": {"thread_id": thread_id},
            "callbacks": [usage, self.prefix_recorder(thread_id), calls],
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
        from fathom.runs import ThreadBusyError, thread_file_lock

        try:
            with thread_file_lock(self.db_path.parent / "locks", thread_id):
                return await self._run_locked(thread_id, message, resume)
        except ThreadBusyError as error:  # another `fathom` has the thread: nothing was sent
            usage = AgentUsage()
            self.display.error(str(error))
            return TurnResult(status="error", detail=str(error), usage=usage)

    async def _run_locked(self, thread_id: str, message: str | None, resume: Any) -> TurnResult:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.types import Command

        from fathom.runs import has_unfinished_step

        usage = AgentUsage()
        config = self._config(thread_id, usage)
        state_config = {"configurable": {"thread_id": thread_id}}
        if resume is not None:
            payload: Any = Command(resume=resume)
        else:
            payload = {"messages": [{"role": "user", "content": message or ""}]}
        async with AsyncSqliteSaver.from_conn_string(str(self.db_path)) as checkpointer:
            agent = self._agent_factory(self.setup, checkpointer)
            # A run that died mid-step (killed, crashed) is finished before new input, which
            # would make LangGraph drop what its completed tools wrote. One stopped on
            # purpose with Ctrl-C in this session is not re-run.
            before = await agent.aget_state(state_config)
            finish_first = (
                resume is None
                and thread_id not in self._stopped
                and has_unfinished_step(before)
            )
            start = (before.config or {}).get("configurable", {}).get("checkpoint_id")
            if resume is None or not self.journal.continue_turn(thread_id):
                self.journal.begin_turn(thread_id, message or "", start)
            self.display.run_started(thread_id=thread_id, model=self.setup.model_name,
                                     usage=usage)
            status: RunStatus = "done"
            detail = ""
            translator = self._translators.setdefault(thread_id, EventTranslator())
            stream = asyncio.ensure_future(
                self._turn(agent, payload, config, translator, finish_first=finish_first)
            )
            loop = asyncio.get_running_loop()
            sent = True
            with _cancel_on_sigint(loop, stream):
                try:
                    outcome = await aattempt(stream, f"the turn on thread {thread_id}")
                    if isinstance(outcome, Failure):  # the run failed; shown to the person
                        status, detail = "error", outcome.text
                    else:
                        sent = outcome
                        self._stopped.discard(thread_id)
                except asyncio.CancelledError:
                    self._stopped.add(thread_id)
                    status, detail = "interrupted", "stopped by Ctrl-C; the thread is kept"
                finally:
                    self.journal.end_turn()
            self.add_usage(thread_id, usage)
            self._save_calls(thread_id)
            snapshot = await agent.aget_state(state_config)
        values = dict(snapshot.values or {})
        approvals = _pending(snapshot) if status == "done" else []
        if approvals:
            status = "approval"
            names = [r.get("name", "?") for a in approvals for r in a.action_requests]
            detail = "approval needed for " + ", ".join(names)
            if not sent:
                detail += (" (the run stopped earlier reached it; your message was not sent: "
                           "send it again once this is answered)")
        result = TurnResult(status=status, answer=final_answer(values), detail=detail,
                            approvals=approvals, values=values, usage=usage)
        self.display.run_finished(status=status, usage=usage, detail=detail)
        if values.get("fathom_budget"):  # the thread's spend against its budget, turn by turn
            from fathom.budget import budget_summary

            self.display.notice(f"── {budget_summary(values['fathom_budget'])}")
        if message is not None or resume is not None:
            self.threads.touch(thread_id, first_message=message or "", model=self.setup.model_name,
                               project=self.setup.project_dir)
        return result

    async def _turn(
        self, agent: Any, payload: Any, config: dict[str, Any], translator: EventTranslator,
        *, finish_first: bool,
    ) -> bool:
        """Stream `payload`, after finishing the thread's interrupted run if `finish_first`.

        Returns False when that run stopped at an approval, so `payload` was not sent.
        """
        if finish_first:
            self.display.notice("finishing the run that stopped part-way before your message")
            await self._stream(agent, None, config, translator)
            thread = {"configurable": dict(config["configurable"])}
            if _pending(await agent.aget_state(thread)):
                return False
        await self._stream(agent, payload, config, translator)
        return True

    async def _stream(
        self, agent: Any, payload: Any, config: dict[str, Any], translator: EventTranslator
    ) -> None:
        async for namespace, mode, data in agent.astream(
            payload, config, stream_mode=["updates", "messages", "custom"], subgraphs=True,
            durability="sync",  # each step is saved before the next starts
        ):
            for event in translator.translate(namespace, mode, data):
                self.display.event(event)

    def pending(self, thread_id: str) -> list[PendingApproval]:
        """Approvals a thread is waiting for (e.g. left by `fathom run` or a closed session)."""
        return _pending(self._runner.run(self._snapshot(thread_id)))

    def values(self, thread_id: str) -> dict[str, Any]:
        """The thread's saved state values (messages, todos...); empty for a new thread."""
        return dict(self._runner.run(self._snapshot(thread_id)).values or {})

    async def _snapshot(self, thread_id: str) -> Any:
        """The thread's saved state, read by an agent on the threads database."""
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(self.db_path)) as checkpointer:
            agent = self._agent_factory(self.setup, checkpointer)
            return await agent.aget_state({"configurable": {"thread_id": thread_id}})


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
