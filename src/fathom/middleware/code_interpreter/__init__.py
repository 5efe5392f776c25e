"""The `eval` tool: the model writes Python that runs in the Monty sandbox and orchestrates
subagents (`await task(...)`) and allowed tools (`tools.<name>(...)`) in one call.

Layer: capabilities; it must not import agent, project, server, protocols or cli.
"""

from fathom.middleware.code_interpreter.events import SUBAGENT_EVENT
from fathom.middleware.code_interpreter.limits import CodeInterpreterLimits
from fathom.middleware.code_interpreter.middleware import (
    EVAL_TOOL_DESCRIPTION,
    CodeInterpreterMiddleware,
)
from fathom.middleware.code_interpreter.session import SESSION_KEY, Persistence

__all__ = [
    "EVAL_TOOL_DESCRIPTION",
    "SESSION_KEY",
    "SUBAGENT_EVENT",
    "CodeInterpreterLimits",
    "CodeInterpreterMiddleware",
    "Persistence",
]
