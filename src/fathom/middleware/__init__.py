"""Middleware: one capability each, usable with plain `langchain.agents.create_agent`."""

from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.middleware.human_in_the_loop import HumanInTheLoopMiddleware
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.middleware.planning import PlanningMiddleware
from fathom.middleware.subagents import SubAgentMiddleware

__all__ = [
    "FilesystemMiddleware",
    "HumanInTheLoopMiddleware",
    "PatchToolCallsMiddleware",
    "PlanningMiddleware",
    "SubAgentMiddleware",
]
