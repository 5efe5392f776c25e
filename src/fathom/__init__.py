"""fathom: a harness for long-running (deep) agents on LangChain and LangGraph.

The public names below are imported on first use, so `import fathom` (and the `fathom`
command's `--help`) does not load LangChain and LangGraph until they are needed.

Layer: agent; it must not import project, server, protocols or cli.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fathom import _aliases, _deferred_httpx_cli
from fathom._lazy import lazy_exports

# LangGraph imports httpx; its command-line module (click, rich, pygments) waits until used
_deferred_httpx_cli.install()
# modules that moved keep their old paths (fathom.mcp.client is fathom.tools.mcp)
_aliases.install()

if TYPE_CHECKING:
    from fathom.agent import create_deep_agent
    from fathom.backends import BackendProtocol, StateBackend, create_file_data
    from fathom.budget import Budget
    from fathom.middleware import (
        FilesystemMiddleware,
        HumanInTheLoopMiddleware,
        MemoryMiddleware,
        PatchToolCallsMiddleware,
        PlanningMiddleware,
    )
    from fathom.middleware.async_subagents.middleware import AsyncSubAgent, AsyncSubAgentMiddleware
    from fathom.middleware.code_interpreter import CodeInterpreterMiddleware
    from fathom.middleware.filesystem.middleware import FsToolName
    from fathom.middleware.human_in_the_loop import InterruptOnConfig
    from fathom.middleware.permissions import FilesystemPermission
    from fathom.middleware.subagents import CompiledSubAgent, SubAgent, SubAgentMiddleware
    from fathom.models import ModelNotConfiguredError, resolve_model
    from fathom.profiles import (
        GeneralPurposeSubagentProfile,
        HarnessProfile,
        HarnessProfileConfig,
        ProviderProfile,
        register_harness_profile,
        register_provider_profile,
    )
    from fathom.prompt import PromptSection
    from fathom.runs import ThreadBusyError, afinish_pending_step, finish_pending_step
    from fathom.state import DeepAgentState

_WHERE = {
    "fathom.middleware.code_interpreter": ("CodeInterpreterMiddleware",),
    "fathom.agent": ("create_deep_agent",),
    "fathom.backends": ("BackendProtocol", "StateBackend", "create_file_data"),
    "fathom.budget": ("Budget",),
    "fathom.middleware": (
        "FilesystemMiddleware", "HumanInTheLoopMiddleware", "MemoryMiddleware",
        "PatchToolCallsMiddleware", "PlanningMiddleware",
    ),
    "fathom.middleware.filesystem.middleware": ("FsToolName",),
    "fathom.middleware.human_in_the_loop": ("InterruptOnConfig",),
    "fathom.middleware.async_subagents.middleware": ("AsyncSubAgent", "AsyncSubAgentMiddleware"),
    "fathom.middleware.subagents": ("CompiledSubAgent", "SubAgent", "SubAgentMiddleware"),
    "fathom.models": ("ModelNotConfiguredError", "resolve_model"),
    "fathom.middleware.permissions": ("FilesystemPermission",),
    "fathom.profiles": (
        "GeneralPurposeSubagentProfile", "HarnessProfile", "HarnessProfileConfig",
        "ProviderProfile", "register_harness_profile", "register_provider_profile",
    ),
    "fathom.prompt": ("PromptSection",),
    "fathom.runs": ("ThreadBusyError", "afinish_pending_step", "finish_pending_step"),
    "fathom.state": ("DeepAgentState",),
}

__all__ = [
    "AsyncSubAgent",
    "AsyncSubAgentMiddleware",
    "BackendProtocol",
    "Budget",
    "CodeInterpreterMiddleware",
    "CompiledSubAgent",
    "DeepAgentState",
    "FilesystemMiddleware",
    "FilesystemPermission",
    "FsToolName",
    "GeneralPurposeSubagentProfile",
    "HarnessProfile",
    "HarnessProfileConfig",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "MemoryMiddleware",
    "ModelNotConfiguredError",
    "PatchToolCallsMiddleware",
    "PlanningMiddleware",
    "PromptSection",
    "ProviderProfile",
    "StateBackend",
    "SubAgent",
    "SubAgentMiddleware",
    "ThreadBusyError",
    "__version__",
    "afinish_pending_step",
    "create_deep_agent",
    "create_file_data",
    "finish_pending_step",
    "register_harness_profile",
    "register_provider_profile",
    "resolve_model",
]

__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
