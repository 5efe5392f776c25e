"""Scripted graphs for `benchmarks/server_replicas.py` and `benchmarks/soak.py`.

Every graph answers from what it is sent, so the scripts can check each thread's messages.
The agents' model keeps no record of its calls (`ForgetfulScriptedModel`), so a long soak
measures the server's memory, not the scripted model's request log:

- `agent`: a fathom deep agent (every default middleware) on a `ScriptedModel` that answers
  `echo: <last user text>` at once: the servers' own cost per run.
- `paced_agent`: the same agent on a model that takes `PACED_MODEL_SECONDS` per answer
  (`$FATHOM_BENCH_PACED_SECONDS`, default 0.2 s), the stated model latency of the
  throughput figures: runs hold their slot as a model call would.
- `slow_agent`: the same agent at `SLOW_MODEL_SECONDS` (1 s), so kills land mid-run.
- `nested`: a parent graph (`parent: <text>`) whose node is a compiled subgraph
  (`child: <text>`); no model.
- `stamp`: one node that answers `started <wall clock>` (`time.time()` when the node runs),
  so the driver, on the same machine, can tell when a run started executing.

No `from __future__ import annotations` here: the state schemas' hints must resolve even when
a loader executes this file without registering it in `sys.modules`.
"""

import os
import time
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest

PACED_MODEL_SECONDS = float(os.environ.get("FATHOM_BENCH_PACED_SECONDS", "0.2"))
"""`paced_agent`'s model latency per answer (an `asyncio.sleep`)."""
SLOW_MODEL_SECONDS = 1.0
"""`slow_agent`'s model latency per answer."""
SYSTEM_PROMPT = "You are the scripted benchmark agent."


def _echo(request: ScriptRequest) -> str:
    return f"echo: {request.last_human_text}"


class ForgetfulScriptedModel(ScriptedModel):
    """A `ScriptedModel` that keeps no record of the calls it answered.

    `ScriptedModel` records every call (tests assert on `model.requests`), so in a server
    that answers thousands of runs the record alone grows without bound and a soak would
    measure it instead of the server. This model answers from its policy alone, so clearing
    the record (and rewinding the unused reply list) after each answer changes no answer.
    """

    def respond(self, messages: Any, tools: Any = None) -> AIMessage:
        """The policy's answer; then the record is cleared."""
        answer = super().respond(messages, tools)
        self.reset()
        return answer


def _deep_agent(name: str, latency: float) -> Any:
    model = ForgetfulScriptedModel(policy=_echo, latency=latency)
    return create_deep_agent(model=model, system_prompt=SYSTEM_PROMPT, name=name)


agent = _deep_agent("agent", 0.0)
paced_agent = _deep_agent("paced_agent", PACED_MODEL_SECONDS)
slow_agent = _deep_agent("slow_agent", SLOW_MODEL_SECONDS)


class MessagesState(TypedDict, total=False):
    """Messages, appended with `add_messages`."""

    messages: Annotated[list[AnyMessage], add_messages]


def _last_human_text(state: MessagesState) -> str:
    for message in reversed(state.get("messages", [])):
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


def _one_node(name: str, node: Any) -> Any:
    graph = StateGraph(MessagesState).add_node(name, node)
    return graph.add_edge(START, name).add_edge(name, END)


def _child_step(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"child: {_last_human_text(state)}")]}


def _parent_step(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"parent: {_last_human_text(state)}")]}


_child = _one_node("child_step", _child_step).compile(name="child")
nested = (
    StateGraph(MessagesState)
    .add_node("parent_step", _parent_step)
    .add_node("child", _child)
    .add_edge(START, "parent_step")
    .add_edge("parent_step", "child")
    .add_edge("child", END)
).compile(name="nested")


def _stamp(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"started {time.time():.6f}")]}


stamp = _one_node("stamp", _stamp).compile(name="stamp")
