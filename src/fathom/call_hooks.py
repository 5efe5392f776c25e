"""Middleware hooks written once for both paths: a model-request rewrite, a tool-call gate.

Many middleware only change each model request (sort or hide tools, add to the system
prompt) or only refuse some tool calls (a hidden or locked tool). LangChain asks each for a
sync and an async hook; these mixins write both around one method:

- `ModelRequestRewrite`: `rewrite_model_request(request)` → the request the model gets;
- `ToolCallGate`: `refuse_tool_call(request)` → an error answer instead of running the
  tool, or `None` to run it.

Put a mixin before the middleware base class (`class M(ToolCallGate, AgentMiddleware)`) so
its hooks are the ones LangChain finds.

Owns: the two mixins. Imports nothing of fathom.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

__all__ = ["ModelRequestRewrite", "ToolCallGate"]


class ModelRequestRewrite:
    """Hands every model call's request through `rewrite_model_request` first."""

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        """The request the model gets instead of `request`."""
        raise NotImplementedError

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(self.rewrite_model_request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await handler(self.rewrite_model_request(request))


class ToolCallGate:
    """Answers a tool call with `refuse_tool_call`'s error instead of running it."""

    def refuse_tool_call(self, request: ToolCallRequest) -> ToolMessage | None:
        """The error answer for a call that must not run; `None` runs the tool."""
        raise NotImplementedError

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        refusal = self.refuse_tool_call(request)
        return refusal if refusal is not None else handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        refusal = self.refuse_tool_call(request)
        return refusal if refusal is not None else await handler(request)
