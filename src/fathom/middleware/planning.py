"""Planning: the `write_todos` tool and its prompt section.

Built on LangChain's `TodoListMiddleware` (the `todos` state channel and the tool schema),
with fathom's shorter instructions and its prompt-section assembly. The guard against
several `write_todos` calls in one turn lives in the tool rather than in an `after_model`
hook: a hook is a graph node of its own, and every node adds a checkpoint to every step.
"""

from __future__ import annotations

from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.todo import Todo, WriteTodosInput
from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import tool_error, tool_of

__all__ = [
    "PLANNING_PROMPT", "WRITE_TODOS_DESCRIPTION", "WRITE_TODOS_TOOL", "PlanningMiddleware", "Todo",
]

WRITE_TODOS_TOOL = "write_todos"
"""The name of the planning tool."""

WRITE_TODOS_DESCRIPTION = """Write the todo list for the current task, replacing the previous list. Each item has `content` and a `status`: "pending", "in_progress" or "completed". Use it for work of three or more steps; skip it for simple requests. Keep exactly the items that still matter, mark an item in_progress when you start it and completed as soon as it is done (not when it is only partly done). Call it at most once per turn."""  # noqa: E501

PLANNING_PROMPT = """## Planning

Use `write_todos` to plan work of three or more steps and to show progress: mark the item you are on in_progress, mark items completed right after finishing them, and revise the list when you learn something new. Do not use it for quick requests. After the last update, give the user the actual result in your reply."""  # noqa: E501


def todo_summary(todos: list[Todo]) -> str:
    """A one-line acknowledgement; the model already has the list in its own call."""
    counts = {status: 0 for status in ("in_progress", "pending", "completed")}
    for todo in todos:
        counts[todo["status"]] = counts.get(todo["status"], 0) + 1
    parts = [f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n]
    return f"Todo list saved: {len(todos)} items ({', '.join(parts) or 'empty'})."


PARALLEL_CALLS_ERROR = (
    "Error: write_todos was called more than once in one turn, and each call replaces the "
    "whole list, so none was applied. Call it once with the complete list."
)


def _calls_this_turn(runtime: ToolRuntime) -> int:
    """How many `write_todos` calls the model message of this call contains."""
    state = runtime.state if isinstance(runtime.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage):
            calls = [c for c in message.tool_calls if c["name"] == WRITE_TODOS_TOOL]
            if any(c.get("id") == runtime.tool_call_id for c in calls):
                return len(calls)
            return 1
    return 1


def _write_todos(runtime: ToolRuntime, todos: list[Todo]) -> Command | ToolMessage:
    if _calls_this_turn(runtime) > 1:
        return tool_error(
            PARALLEL_CALLS_ERROR,
            tool_call_id=runtime.tool_call_id,
            name=WRITE_TODOS_TOOL,
        )
    return Command(
        update={
            "todos": todos,
            "messages": [ToolMessage(todo_summary(todos), tool_call_id=runtime.tool_call_id)],
        }
    )


async def _awrite_todos(runtime: ToolRuntime, todos: list[Todo]) -> Command | ToolMessage:
    return _write_todos(runtime, todos)


class PlanningMiddleware(SectionPromptMixin, TodoListMiddleware):
    """`write_todos` with todos in the `todos` state channel (pending / in_progress / completed).

    Args:
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_description: Replaces the `write_todos` tool description.
    """

    # The parallel-call guard is in the tool; no extra graph node per step. LangChain adds a
    # hook's node only when the method is not the base class's own function, so it must be
    # that very function (whose `self` type is the base class's).
    after_model = AgentMiddleware.after_model  # pyright: ignore[reportAssignmentType]
    aafter_model = AgentMiddleware.aafter_model  # pyright: ignore[reportAssignmentType]

    @property
    def name(self) -> str:
        """`"TodoListMiddleware"`: LangChain's planning middleware passed next to this one
        replaces it (middleware are merged by name) instead of adding a second section."""
        return "TodoListMiddleware"

    def __init__(
        self,
        *,
        system_prompt: str = PLANNING_PROMPT,
        tool_description: str = WRITE_TODOS_DESCRIPTION,
    ) -> None:
        super().__init__(system_prompt=system_prompt, tool_description=tool_description)
        self.section = PromptSection("planning", system_prompt, tools=frozenset({WRITE_TODOS_TOOL}))
        # Same schema and state update as LangChain's tool, with a short result: echoing
        # the whole list back would repeat it in every later request of the run.
        self.tools = [
            tool_of(WRITE_TODOS_TOOL, tool_description, WriteTodosInput, _write_todos,
                    _awrite_todos)
        ]  # fmt: skip
