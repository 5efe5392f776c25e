"""Middleware: one capability each, usable with plain `langchain.agents.create_agent`."""

from typing import TYPE_CHECKING, Any

from fathom.middleware.async_subagents import AsyncSubAgentMiddleware
from fathom.middleware.async_tasks import AsyncSubAgent, AsyncTask, TaskEvent
from fathom.middleware.execute import ExecuteMiddleware
from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.middleware.human_in_the_loop import HumanInTheLoopMiddleware
from fathom.middleware.memory import MemoryMiddleware
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.middleware.planning import PlanningMiddleware
from fathom.middleware.skills import SkillsMiddleware
from fathom.middleware.subagents import SubAgentMiddleware
from fathom.middleware.summarization import (
    SummarizationMiddleware,
    SummarizationToolMiddleware,
    create_summarization_tool_middleware,
)

if TYPE_CHECKING:
    from fathom.middleware.code_interpreter import CodeInterpreterMiddleware

__all__ = [
    "AsyncSubAgent",
    "AsyncSubAgentMiddleware",
    "AsyncTask",
    "CodeInterpreterMiddleware",
    "ExecuteMiddleware",
    "FilesystemMiddleware",
    "HumanInTheLoopMiddleware",
    "MemoryMiddleware",
    "PatchToolCallsMiddleware",
    "PlanningMiddleware",
    "SkillsMiddleware",
    "SubAgentMiddleware",
    "SummarizationMiddleware",
    "SummarizationToolMiddleware",
    "TaskEvent",
    "create_summarization_tool_middleware",
]


def __getattr__(name: str) -> Any:
    """`CodeInterpreterMiddleware` is imported on first use: it needs `fathom[code]`."""
    if name == "CodeInterpreterMiddleware":
        from fathom.middleware.code_interpreter import CodeInterpreterMiddleware

        return CodeInterpreterMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
