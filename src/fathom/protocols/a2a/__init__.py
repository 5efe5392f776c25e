"""A2A (Agent2Agent protocol, a2a-sdk 1.x) for fathom: serve assistants, call other agents.

* Serving: ``fathom serve`` answers every assistant at ``/a2a/{assistant_id}`` (routes in
  :mod:`fathom.protocols.a2a.routes`, executor in :mod:`fathom.protocols.a2a.executor`, card in
  :mod:`fathom.protocols.a2a.card`, approval replies in :mod:`fathom.protocols.a2a.approvals`).
* Calling: :class:`A2AAgent`, :func:`a2a_tool` and :func:`a2a_subagent`
  (:mod:`fathom.protocols.a2a.client`), and :func:`a2a_async_subagent`, a remote agent as a
  background (async) subagent (:mod:`fathom.protocols.a2a.async_subagent`).

Needs the ``a2a`` extra (``pip install 'fathom[a2a]'``).

Layer: protocols; it must not import cli.
"""

from fathom.protocols.a2a.async_subagent import A2ATaskClient, a2a_async_subagent
from fathom.protocols.a2a.client import A2AAgent, A2AReply, a2a_subagent, a2a_tool
from fathom.protocols.a2a.executor import FathomAgentExecutor, thread_for_context
from fathom.protocols.a2a.routes import A2AEndpoints, a2a_routes

__all__ = [
    "A2AAgent",
    "A2AEndpoints",
    "A2AReply",
    "A2ATaskClient",
    "FathomAgentExecutor",
    "a2a_async_subagent",
    "a2a_routes",
    "a2a_subagent",
    "a2a_tool",
    "thread_for_context",
]
