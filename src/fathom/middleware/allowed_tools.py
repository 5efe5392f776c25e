"""`AllowedToolsMiddleware`: limit an agent to a named subset of its tools.

Harness tools (files, planning, shell) come from middleware, so a subagent cannot be given
"only `read_file` and `grep`" by passing tool objects. This middleware hides every other
tool from the model and refuses a call to one anyway (a model may guess a name), with a
message listing what it may use. The `fathom` command uses it for the `tools:` list of a
`.fathom/agents/<name>.md` definition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from fathom.tool_answers import tool_error

__all__ = ["AllowedToolsMiddleware"]


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        return str(tool.get("name") or tool.get("function", {}).get("name", ""))
    return str(getattr(tool, "name", ""))


class AllowedToolsMiddleware(AgentMiddleware):
    """Show the model only the tools named in `allowed`, and refuse calls to any other."""

    def __init__(self, allowed: Iterable[str]) -> None:
        super().__init__()
        self.allowed: frozenset[str] = frozenset(allowed)

    def _narrow(self, request: ModelRequest) -> ModelRequest:
        return request.override(
            tools=[tool for tool in request.tools if _tool_name(tool) in self.allowed]
        )

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
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

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """Pass the model only the allowed tools."""
        return handler(self._narrow(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Pass the model only the allowed tools."""
        return await handler(self._narrow(request))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        """Run allowed tools; answer any other call with an error message."""
        return self._refusal(request) or handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        """Run allowed tools; answer any other call with an error message."""
        return self._refusal(request) or await handler(request)
