"""Planning: the `write_todos` tool and its prompt section.

Built on LangChain's `TodoListMiddleware` (the `todos` state channel, the tool, and the
guard against parallel `write_todos` calls), with fathom's shorter instructions and its
prompt-section assembly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.todo import Todo
from langchain.agents.middleware.types import ModelRequest, ModelResponse

from fathom.prompt import PromptSection, add_prompt_section

__all__ = ["PLANNING_PROMPT", "WRITE_TODOS_DESCRIPTION", "PlanningMiddleware", "Todo"]

WRITE_TODOS_DESCRIPTION = """Write the todo list for the current task, replacing the previous list. Each item has `content` and a `status`: "pending", "in_progress" or "completed". Use it for work of three or more steps; skip it for simple requests. Keep exactly the items that still matter, mark an item in_progress when you start it and completed as soon as it is done (not when it is only partly done). Call it at most once per turn."""  # noqa: E501

PLANNING_PROMPT = """## Planning

Use `write_todos` to plan work of three or more steps and to show progress: mark the item you are on in_progress, mark items completed right after finishing them, and revise the list when you learn something new. Do not use it for quick requests. After the last update, give the user the actual result in your reply."""  # noqa: E501


class PlanningMiddleware(TodoListMiddleware):
    """`write_todos` with todos in the `todos` state channel (pending / in_progress / completed).

    Args:
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_description: Replaces the `write_todos` tool description.
    """

    def __init__(
        self,
        *,
        system_prompt: str = PLANNING_PROMPT,
        tool_description: str = WRITE_TODOS_DESCRIPTION,
    ) -> None:
        super().__init__(system_prompt=system_prompt, tool_description=tool_description)
        self.section = PromptSection("planning", system_prompt)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        return handler(add_prompt_section(request, self.section))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        return await handler(add_prompt_section(request, self.section))
