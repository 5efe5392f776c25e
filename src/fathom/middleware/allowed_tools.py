"""`AllowedToolsMiddleware`: limit an agent to a named subset of its tools.

Harness tools (files, planning, shell) come from middleware, so a subagent cannot be given
"only `read_file` and `grep`" by passing tool objects. This middleware hides every other
tool from the model and refuses a call to one anyway (a model may guess a name), with a
message listing what it may use. The `fathom` command uses it for the `tools:` list of a
`.fathom/agents/<name>.md` definition.
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ToolCallRequest,
)
from langchain_core.messages import ToolMessage

from fathom.call_hooks import ModelRequestRewrite, ToolCallGate
from fathom.profiles.apply import tool_name
from fathom.tool_answers import tool_error

__all__ = ["AllowedToolsMiddleware"]


class AllowedToolsMiddleware(ModelRequestRewrite, ToolCallGate, AgentMiddleware):
    """Show the model only the tools named in `allowed`, and refuse calls to any other."""

    def __init__(self, allowed: Iterable[str]) -> None:
        super().__init__()
        self.allowed: frozenset[str] = frozenset(allowed)

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        """Pass the model only the allowed tools."""
        return request.override(
            tools=[tool for tool in request.tools if tool_name(tool) in self.allowed]
        )

    def refuse_tool_call(self, request: ToolCallRequest) -> ToolMessage | None:
        """Answer a call to any tool not allowed with an error message."""
        name = request.tool_call["name"]
        if name in self.allowed:
            return None
        return tool_error(
            content=(
                f"Error: tool {name!r} is not available to this agent. It may use only: "
                f"{', '.join(sorted(self.allowed)) or 'no tools'}."
            ),
            tool_call_id=request.tool_call["id"],
            name=name,
        )
