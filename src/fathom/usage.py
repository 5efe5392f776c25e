"""Model calls and tokens per agent, for runs where a main agent delegates to subagents.

Pass an `AgentUsage` as a callback; every chat-model call is counted under the name of
the agent that made it (the `lc_agent_name` in the call's metadata: the subagent's name,
or the main agent's `name`), so a run can report what each agent cost.

```python
usage = AgentUsage()
agent.invoke(inputs, config={"callbacks": [usage]})
usage.totals()  # {"main": AgentTotals(calls=2, ...), "research-agent": AgentTotals(...)}
```
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

__all__ = ["UNNAMED_AGENT", "AgentTotals", "AgentUsage"]

UNNAMED_AGENT = "(unnamed agent)"
"""The key for calls made by an agent built without `name=`."""


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


class AgentUsage(BaseCallbackHandler):
    """A callback handler that adds up model calls and token usage per agent name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[UUID, str] = {}
        self._totals: dict[str, AgentTotals] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = (metadata or {}).get("lc_agent_name") or UNNAMED_AGENT
        with self._lock:
            self._running[run_id] = name
            self._totals.setdefault(name, AgentTotals()).calls += 1

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            name = self._running.pop(run_id, None)
            if name is None:
                return
            totals = self._totals[name]
            for generations in response.generations:
                for generation in generations:
                    message = (
                        generation.message if isinstance(generation, ChatGeneration) else None
                    )
                    usage = message.usage_metadata if isinstance(message, AIMessage) else None
                    if usage:
                        totals.input_tokens += usage.get("input_tokens", 0)
                        totals.output_tokens += usage.get("output_tokens", 0)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._running.pop(run_id, None)

    def totals(self) -> dict[str, AgentTotals]:
        """A copy of the totals so far, by agent name."""
        with self._lock:
            return {name: AgentTotals(**vars(t)) for name, t in self._totals.items()}

    def total(self) -> AgentTotals:
        """Calls and tokens of all agents together."""
        overall = AgentTotals()
        for totals in self.totals().values():
            overall.calls += totals.calls
            overall.input_tokens += totals.input_tokens
            overall.output_tokens += totals.output_tokens
        return overall

    def report(self) -> str:
        """A plain-text table: model calls and tokens per agent, then the total.

        Agents are listed in the order they first called a model.
        """
        rows = [(name, t.calls, t.input_tokens, t.output_tokens, t.total_tokens)
                for name, t in self.totals().items()]
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
