"""Model calls and tokens per agent, for runs where a main agent delegates to subagents.

Pass an `AgentUsage` as a callback; every chat-model call is counted under the name of
the agent that made it (the `lc_agent_name` in the call's metadata: the subagent's name,
or the main agent's `name`), so a run can report what each agent cost.

```python
usage = AgentUsage()
agent.invoke(inputs, config={"callbacks": [usage]})
usage.totals()  # {"main": AgentTotals(calls=2, ...), "research-agent": AgentTotals(...)}
```

Async subagents run elsewhere (as background runs on a server), so the callback never sees
their calls. Each such run adds its calls and tokens to its thread's `fathom_usage`
metadata when it ends; `collect_async_usage` reads them for the tasks in a supervisor's
`async_tasks` and adds them to the report by task id:

```python
await collect_async_usage(usage, state["async_tasks"], client)
usage.task_totals()  # {"<task id>": ("researcher", AgentTotals(calls=3, ...))}
```

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from uuid import UUID

import httpx
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

__all__ = [
    "TASK_USAGE_KEY",
    "UNNAMED_AGENT",
    "AgentTotals",
    "AgentUsage",
    "ChatModelCalls",
    "agent_name",
    "ai_messages",
    "collect_async_usage",
    "task_usage",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TASK_USAGE_KEY = "fathom_usage"
"""Thread metadata key where an async subagent's runs add up their calls and tokens."""

UNNAMED_AGENT = "(unnamed agent)"
"""The key for calls made by an agent built without `name=`."""


def agent_name(metadata: Mapping[str, Any] | None) -> str:
    """The agent a model call is counted under: its `lc_agent_name`, else `UNNAMED_AGENT`."""
    return str((metadata or {}).get("lc_agent_name") or UNNAMED_AGENT)


@dataclass
class AgentTotals:
    """What one agent's model calls added up to."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: AgentTotals) -> None:
        """Count `other`'s calls and tokens into these."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens


def ai_messages(response: LLMResult) -> Iterator[AIMessage]:
    """The chat messages a model call answered with, in order."""
    for generations in response.generations:
        for generation in generations:
            message = generation.message if isinstance(generation, ChatGeneration) else None
            if isinstance(message, AIMessage):
                yield message


class ChatModelCalls(BaseCallbackHandler, ABC, Generic[T]):
    """A callback handler that follows each chat-model call from its start to its end.

    `_started` turns a call that starts into what is kept for it until it ends; `_ended` or
    `_failed` is given that back. All three run under the handler's lock (calls of parallel
    subagents end on several threads).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[UUID, T] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        request = messages[0] if messages else []
        with self._lock:
            self._running[run_id] = self._started(request, metadata or {}, invocation_params or {})

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            call = self._running.pop(run_id, None)
            if call is not None:
                self._ended(call, response)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            call = self._running.pop(run_id, None)
            if call is not None:
                self._failed(call, error)

    @abstractmethod
    def _started(
        self, request: list[BaseMessage], meta: dict[str, Any], params: dict[str, Any]
    ) -> T:
        """What to keep of a call as it starts (`request` is its messages)."""

    @abstractmethod
    def _ended(self, call: T, response: LLMResult) -> None:
        """Record the call that `_started` kept, now that `response` came."""

    def _failed(self, call: T, error: BaseException) -> None:
        """Nothing by default: a failed call used no tokens that are reported."""


class AgentUsage(ChatModelCalls[str]):
    """A callback handler that adds up model calls and token usage per agent name."""

    def __init__(self) -> None:
        super().__init__()
        self._totals: dict[str, AgentTotals] = {}
        self._tasks: dict[str, tuple[str, AgentTotals]] = {}

    def _started(
        self, request: list[BaseMessage], meta: dict[str, Any], params: dict[str, Any]
    ) -> str:
        name = agent_name(meta)
        self._totals.setdefault(name, AgentTotals()).calls += 1
        return name

    def _ended(self, call: str, response: LLMResult) -> None:
        totals = self._totals[call]
        for message in ai_messages(response):
            usage = message.usage_metadata
            if usage:
                totals.input_tokens += usage.get("input_tokens", 0)
                totals.output_tokens += usage.get("output_tokens", 0)

    def totals(self) -> dict[str, AgentTotals]:
        """A copy of the totals so far, by agent name."""
        with self._lock:
            return {name: AgentTotals(**vars(t)) for name, t in self._totals.items()}

    def record_task(self, task_id: str, agent_name: str, totals: AgentTotals) -> None:
        """Set what async subagent task `task_id` (run by `agent_name`) used so far.

        A later call for the same task replaces the earlier figures (they are cumulative).
        """
        with self._lock:
            self._tasks[task_id] = (agent_name, AgentTotals(**vars(totals)))

    def task_totals(self) -> dict[str, tuple[str, AgentTotals]]:
        """A copy of the async subagent tasks' figures: task id -> (agent name, totals)."""
        with self._lock:
            return {task: (name, AgentTotals(**vars(t))) for task, (name, t) in self._tasks.items()}

    def total(self) -> AgentTotals:
        """Calls and tokens of all agents together, async subagent tasks included."""
        overall = AgentTotals()
        tasks = [totals for _, totals in self.task_totals().values()]
        for totals in [*self.totals().values(), *tasks]:
            overall.add(totals)
        return overall

    def report(self) -> str:
        """A plain-text table: model calls and tokens per agent, then the total.

        Agents are listed in the order they first called a model, then the async
        subagent tasks (`name [task id]`) in the order they were recorded.
        """
        rows = [(name, t.calls, t.input_tokens, t.output_tokens, t.total_tokens)
                for name, t in self.totals().items()]
        rows += [(f"{name} [{task_id}]", t.calls, t.input_tokens, t.output_tokens,
                  t.total_tokens) for task_id, (name, t) in self.task_totals().items()]
        overall = self.total()
        rows.append(("total", overall.calls, overall.input_tokens, overall.output_tokens,
                     overall.total_tokens))
        width = max(len("agent"), *(len(row[0]) for row in rows))
        header = f"{'agent':<{width}}  {'calls':>5}  {'input':>9}  {'output':>9}  {'tokens':>9}"
        lines = [header, "-" * len(header)]
        for name, calls, tokens_in, tokens_out, tokens in rows:
            if name == "total":
                lines.append("-" * len(header))
            lines.append(f"{name:<{width}}  {calls:>5}  {tokens_in:>9,}  {tokens_out:>9,}  "
                         f"{tokens:>9,}")
        return "\n".join(lines)


def task_usage(thread: Mapping[str, Any]) -> AgentTotals | None:
    """What an async subagent's thread (as the server returns it) says its runs used."""
    recorded = (thread.get("metadata") or {}).get(TASK_USAGE_KEY)
    if not isinstance(recorded, Mapping):
        return None
    return AgentTotals(
        calls=int(recorded.get("calls", 0)),
        input_tokens=int(recorded.get("input_tokens", 0)),
        output_tokens=int(recorded.get("output_tokens", 0)),
    )


async def collect_async_usage(
    usage: AgentUsage,
    tasks: Mapping[str, Mapping[str, Any]],
    client: LangGraphClient | Callable[[Mapping[str, Any]], LangGraphClient],
) -> list[str]:
    """Add each async subagent task's calls and tokens to `usage`, by task id.

    `tasks` is a supervisor's `async_tasks` state (task id -> record with `thread_id` and
    `agent_name`). `client` reaches the server the tasks run on, or is a function giving
    the client for a task (tasks may run on several servers). Returns the ids of the
    tasks whose threads could not be read (gone, or the server is down); a task that has
    not finished a run yet counts as zero.
    """
    unread: list[str] = []
    for task_id, task in tasks.items():
        task_client = client(task) if callable(client) else client
        try:
            thread = await task_client.threads.get(str(task.get("thread_id") or task_id))
        except (httpx.HTTPError, ValueError) as error:  # the server is down, says no, or garbles
            logger.warning("could not read the usage of async task %s: %s", task_id, error)
            unread.append(task_id)
            continue
        totals = task_usage(thread) or AgentTotals()
        usage.record_task(task_id, str(task.get("agent_name") or "async task"), totals)
    return unread
