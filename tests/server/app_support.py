"""Small graphs and helpers for the in-process server tests (``test_app_*``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

__all__ = ["GatedGraph", "State", "ask_graph", "until"]


class State(TypedDict, total=False):
    x: int
    answer: str
    seen: list[int]


class GatedGraph:
    """A one-node graph whose node waits on an event the test controls.

    It counts how many node calls are in flight at once, how many started, and how many
    were cancelled, so tests prove queuing, pooling and cancellation without sleeping.
    """

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[int] = []
        self.finished: list[int] = []
        self.cancelled = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def node(self, state: State) -> State:
        x = state.get("x", 0)
        self.started.append(x)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        self.finished.append(x)
        return {"x": x + 1, "seen": [*state.get("seen", []), x]}

    def graph(self) -> Any:
        g = StateGraph(State)
        g.add_node("gate", self.node)
        g.add_edge(START, "gate")
        g.add_edge("gate", END)
        return g.compile()


def _ask(state: State) -> State:
    return {"answer": str(interrupt({"question": "ok?"}))}


def ask_graph() -> Any:
    """``x`` is kept; node ``ask`` interrupts with ``{"question": "ok?"}``."""
    g = StateGraph(State)
    g.add_node("ask", _ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile()


async def until(cond: Callable[[], bool], what: str = "condition") -> None:
    """Poll ``cond`` until true; the 60 s deadline only bounds a hang."""
    try:
        async with asyncio.timeout(60):
            while not cond():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
