"""The state of the "LangChain floor" agent in `step_overhead.py`: `create_agent`'s own
`AgentState`, with `messages` kept in LangGraph's `DeltaChannel` (LangGraph's own batch
messages reducer), as both harnesses keep it, so that checkpoints store each step's new
messages rather than the whole history again.
"""

# No `from __future__ import annotations`: LangGraph reads these annotations at run time.
from typing import Annotated, Required

from langchain.agents.middleware.types import AgentState
from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import _messages_delta_reducer  # pyright: ignore[reportPrivateUsage]


class FloorState(AgentState):
    """`AgentState` whose `messages` are stored as deltas."""

    messages: Required[  # pyright: ignore[reportIncompatibleVariableOverride]
        Annotated[
            list[AnyMessage],
            DeltaChannel(_messages_delta_reducer),  # pyright: ignore[reportArgumentType]
        ]
    ]
