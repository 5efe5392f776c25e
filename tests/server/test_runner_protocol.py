"""`stream_run` for a run of the thread-centric protocol (`kwargs["protocol_v2"]`): LangGraph's
`version="v2"` stream, read back into the shapes the rest of the server expects.

A real graph on a real checkpointer, driven through the server's own `stream_run`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from pydantic import BaseModel

from fathom.server.execution.runner import build_config, stream_run


class PydanticState(BaseModel):
    """A pydantic state: LangGraph's v2 stream sends its values as this model."""

    messages: Annotated[list[AnyMessage], add_messages] = []
    answer: str = ""


def _reply(state: PydanticState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="done")], "answer": "yes"}


def _ask(state: PydanticState) -> dict[str, Any]:
    return {"answer": str(interrupt({"question": "go?"}))}


def _one_node_graph(name: str, node: Any) -> Any:
    builder = StateGraph(PydanticState).add_node(name, node)
    return builder.add_edge(START, name).add_edge(name, END).compile(checkpointer=InMemorySaver())


def _run(graph_id: str, **kwargs: Any) -> dict[str, Any]:
    return {
        "run_id": str(uuid.uuid4()),
        "thread_id": str(uuid.uuid4()),
        "assistant_id": graph_id,
        "metadata": {},
        "kwargs": {"stream_mode": ["values", "updates"], "protocol_v2": True, **kwargs},
    }


async def _stream(graph: Any, run: dict[str, Any]) -> tuple[Any, list[tuple[str, Any]]]:
    events: list[tuple[str, Any]] = []
    end = await stream_run(graph, run, build_config(run, "g"), lambda e, d: events.append((e, d)))
    return end, events


async def test_a_pydantic_states_values_come_back_as_a_dict_of_its_channels() -> None:
    graph = _one_node_graph("reply", _reply)
    end, events = await _stream(graph, _run("g", input={"messages": [("user", "hi")]}))
    assert end.finished
    assert isinstance(end.values, dict) and end.values["answer"] == "yes"
    values = [data for event, data in events if event == "values"]
    assert values and all(isinstance(data, dict) for data in values)


async def test_a_pause_keeps_its_interrupt_in_the_values_and_marks_the_run_paused() -> None:
    graph = _one_node_graph("ask", _ask)
    end, events = await _stream(graph, _run("g", input={"messages": [("user", "hi")]}))
    assert end.paused and not end.finished
    paused = [data for event, data in events if event == "values" and "__interrupt__" in data]
    assert paused and paused[-1]["__interrupt__"][0].value == {"question": "go?"}
