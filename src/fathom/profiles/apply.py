"""Applying a harness profile to one agent: its prompt, its tools and its middleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
)

from fathom.profiles.harness import SCAFFOLDING_MIDDLEWARE, HarnessProfile
from fathom.prompt import AssembledSystemMessage, PromptSection, sections_of

__all__ = ["ProfileToolsMiddleware", "apply_profile"]


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping):
            return str(function.get("name") or "")
        return str(tool.get("name") or "")
    return str(getattr(tool, "name", ""))


def _described(tool: Any, description: str) -> Any:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping):
            return {**tool, "function": {**function, "description": description}}
        return {**tool, "description": description}
    return tool.model_copy(update={"description": description})


class ProfileToolsMiddleware(AgentMiddleware):
    """Shows the model the profile's tool descriptions and hides its excluded tools.

    It works on each model request, so it reaches every tool alike: the caller's and those
    the built-in middleware add (`task`, the file tools, `write_todos`).
    """

    def __init__(self, overrides: Mapping[str, str], excluded: frozenset[str]) -> None:
        super().__init__()
        self.overrides = dict(overrides)
        self.excluded = frozenset(excluded)

    def _tools(self, request: ModelRequest) -> ModelRequest:
        tools = []
        for tool in request.tools:
            name = _tool_name(tool)
            if name in self.excluded:
                continue
            tools.append(_described(tool, self.overrides[name]) if name in self.overrides else tool)
        return request.override(tools=tools)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(self._tools(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await handler(self._tools(request))


def apply_profile(
    profile: HarnessProfile,
    system_message: AssembledSystemMessage,
    stack: Sequence[AgentMiddleware],
) -> tuple[AssembledSystemMessage, list[AgentMiddleware]]:
    """`system_message` and the middleware `stack` changed as `profile` says.

    The prompt keeps the caller's part first; the `base` section becomes the profile's
    base prompt and suffix. Excluded middleware leaves the stack (never the scaffolding),
    extra middleware follows it, and the tool changes come last, so they see every tool.
    """
    sections = sections_of(system_message)
    base = next((s for s in sections if s.name == "base"), None)
    text = profile.prompt(base.text if base else "")
    if base is not None:
        sections[sections.index(base)] = PromptSection("base", text, base.stability)
    elif text:
        sections.append(PromptSection("base", text))
    kept = [m for m in stack if type(m).__name__ in SCAFFOLDING_MIDDLEWARE
            or not profile.excludes(m)]
    kept.extend(profile.materialize_extra_middleware())
    if profile.tool_description_overrides or profile.excluded_tools:
        kept.append(ProfileToolsMiddleware(profile.tool_description_overrides,
                                           profile.excluded_tools))
    return AssembledSystemMessage.from_sections(sections, system_message.leading), kept
