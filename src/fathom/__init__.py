"""fathom: a harness for long-running (deep) agents on LangChain and LangGraph."""

from fathom.agent import create_deep_agent
from fathom.backends import BackendProtocol, StateBackend, create_file_data
from fathom.middleware import (
    FilesystemMiddleware,
    HumanInTheLoopMiddleware,
    PatchToolCallsMiddleware,
    PlanningMiddleware,
)
from fathom.middleware.human_in_the_loop import InterruptOnConfig
from fathom.middleware.subagents import CompiledSubAgent, SubAgent, SubAgentMiddleware
from fathom.models import ModelNotConfiguredError, resolve_model
from fathom.permissions import FilesystemPermission
from fathom.prompt import PromptSection

__all__ = [
    "BackendProtocol",
    "CompiledSubAgent",
    "FilesystemMiddleware",
    "FilesystemPermission",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "ModelNotConfiguredError",
    "PatchToolCallsMiddleware",
    "PlanningMiddleware",
    "PromptSection",
    "StateBackend",
    "SubAgent",
    "SubAgentMiddleware",
    "create_deep_agent",
    "create_file_data",
    "resolve_model",
]

__version__ = "0.1.0"
