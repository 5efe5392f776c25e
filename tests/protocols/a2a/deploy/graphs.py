"""The graph of the A2A restart tests, served by `fathom serve` in a subprocess.

- `gated`: the last user message names a directory (the gate); the node creates
  `<gate>/started`, waits until `<gate>/release` exists, and answers `released: <gate name>`.
  A test holds an A2A task's run in flight across a server's death for exactly as long as it
  needs, with no timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

GATE_POLL_SECONDS = 0.02
"""Pause between two looks at the gate's release file (an `asyncio.sleep`: cancellable)."""


class MessagesState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def _gate(messages: list[AnyMessage]) -> Path:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and isinstance(message.content, str):
            return Path(message.content.strip())
    raise ValueError("no user message names a gate")


async def _wait_at_gate(state: MessagesState) -> dict[str, Any]:
    gate = _gate(state.get("messages", []))
    await asyncio.to_thread(gate.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread((gate / "started").touch)
    release = gate / "release"
    while not await asyncio.to_thread(release.exists):
        await asyncio.sleep(GATE_POLL_SECONDS)
    return {"messages": [AIMessage(content=f"released: {gate.name}")]}


gated = (
    StateGraph(MessagesState)
    .add_node("wait_at_gate", _wait_at_gate)
    .add_edge(START, "wait_at_gate")
    .add_edge("wait_at_gate", END)
).compile(name="gated")
