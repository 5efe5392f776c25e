"""The A2A agent card of one assistant: who it is, what it can do, where to call it.

The card names the assistant, describes it (its description, else ``"<name> assistant"``),
and lists its skills: one for the assistant as a whole, then one per tool the graph can call
(``tool:<name>``, with the tool's description), so a caller sees what the agent reaches. Its
JSON-RPC interface is ``<base url>/a2a/<assistant_id>`` with protocol version 1.0, and the
same URL again for 0.3 clients (the server answers both method families there).
"""

from __future__ import annotations

from typing import Any

from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from fathom import __version__

__all__ = ["build_agent_card", "graph_tools"]

_MODES = ["text/plain", "application/json"]


def graph_tools(graph: Pregel) -> list[tuple[str, str]]:
    """``(name, description)`` of every tool the graph's tool nodes run, in order."""
    found: list[tuple[str, str]] = []
    for node in graph.nodes.values():
        bound = getattr(node, "bound", None)
        if isinstance(bound, ToolNode):
            found.extend((t.name, t.description or "") for t in bound.tools_by_name.values())
    return found


def build_agent_card(assistant: dict[str, Any], graph: Pregel, url: str) -> AgentCard:
    """The card of ``assistant`` (a server assistant record) served at ``url``."""
    assistant_id = str(assistant["assistant_id"])
    name = str(assistant.get("name") or assistant_id)
    description = str(assistant.get("description") or f"{name} assistant")
    skills = [
        AgentSkill(
            id=assistant_id,
            name=name,
            description=description,
            tags=["fathom", str(assistant.get("graph_id") or assistant_id)],
            input_modes=_MODES,
            output_modes=_MODES,
        )
    ]
    for tool_name, tool_description in graph_tools(graph):
        skills.append(
            AgentSkill(
                id=f"tool:{tool_name}",
                name=tool_name,
                description=tool_description or f"The {tool_name} tool",
                tags=["tool"],
            )
        )
    return AgentCard(
        name=name,
        description=description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="1.0"),
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=skills,
    )
