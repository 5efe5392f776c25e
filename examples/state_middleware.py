"""Middleware that keeps its counter in graph state, not on `self`.

Deep Agents tutorial, section 3.4 (中间件 / Middleware), "do not modify attributes after
initialisation": a middleware that must track a value across hook calls should return a
state update from its hook (`{"x": state.get("x", 0) + 1}`), because graph state is
isolated per thread; mutating `self.x` shares one value between all threads and races
under concurrent runs.

Ported to fathom: only the import changes (`deepagents` → `fathom`); the hosted model
becomes a `ScriptedModel`. Two additions the tutorial points to ("custom middleware -
custom state schema") but does not show:

- `CustomMiddleware` declares `state_schema` with an `x` key. Without it the graph has no
  `x` channel and the returned update is silently dropped, so `x` would never persist.
- A checkpointer and `thread_id`s, so the count can persist across invocations of a thread.

Run: `.venv/bin/python examples/state_middleware.py`
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langgraph.checkpoint.memory import MemorySaver

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest


class CounterState(AgentState):
    """Agent state extended with the middleware's counter."""

    x: NotRequired[int]


# 正确做法 (the correct way)
class CustomMiddleware(AgentMiddleware):
    state_schema = CounterState  # declares the `x` key so the update persists

    def __init__(self):
        pass

    def before_agent(self, state, runtime):
        return {"x": state.get("x", 0) + 1}  # Update graph state instead


# 不要这样做 (don't do this): renamed here so both can live in one file
class MutatingCustomMiddleware(AgentMiddleware):
    def __init__(self):
        self.x = 1

    def before_agent(self, state, runtime):
        self.x += 1  # Mutation causes race conditions


def reply_policy(request: ScriptRequest) -> str:
    turns = sum(1 for m in request.messages if m.type == "human")
    return f"Turn {turns} of this conversation: {request.last_human_text}"


def main() -> dict[str, Any]:
    """Invoke twice on thread "alice" and once on "bob"; return `x` after each invocation."""
    checkpointer = MemorySaver()
    mutating = MutatingCustomMiddleware()
    agent = create_deep_agent(
        model=ScriptedModel(policy=reply_policy),  # was: "google_genai:gemini-3.1-pro-preview"
        middleware=[CustomMiddleware(), mutating],
        checkpointer=checkpointer,
    )

    runs = [("alice", "Hi"), ("alice", "Hi again"), ("bob", "Hello")]
    x_by_run: list[tuple[str, int]] = []
    for thread_id, text in runs:
        config = {"configurable": {"thread_id": thread_id}}
        result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        x_by_run.append((thread_id, result["x"]))
        print(f"thread={thread_id} x={result['x']} self.x={mutating.x}")

    x_per_thread = {
        thread_id: agent.get_state({"configurable": {"thread_id": thread_id}}).values["x"]
        for thread_id in ("alice", "bob")
    }
    print(f"state x per thread: {x_per_thread}; shared self.x: {mutating.x}")
    return {"x_by_run": x_by_run, "x_per_thread": x_per_thread, "mutated_x": mutating.x}


if __name__ == "__main__":
    main()
