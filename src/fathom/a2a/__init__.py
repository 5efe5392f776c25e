"""`fathom.a2a`: the public path of `fathom.protocols.a2a` (see that package).

Kept so that `from fathom.a2a import ...` and submodule paths such as `fathom.a2a.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.a2a`.
"""

from fathom.protocols.a2a import (
    A2AAgent,
    A2AEndpoints,
    A2AReply,
    FathomAgentExecutor,
    a2a_routes,
    a2a_subagent,
    a2a_tool,
    thread_for_context,
)

__all__ = [
    "A2AAgent",
    "A2AEndpoints",
    "A2AReply",
    "FathomAgentExecutor",
    "a2a_routes",
    "a2a_subagent",
    "a2a_tool",
    "thread_for_context",
]

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
