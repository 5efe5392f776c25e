"""``/a2a/{assistant_id}``: every assistant of a fathom server as an A2A agent (JSON-RPC).

``POST /a2a/{assistant_id}`` is the JSON-RPC endpoint of a2a-sdk's own dispatcher. It answers
both method families of the protocol: A2A 1.0 (``SendMessage``, ``SendStreamingMessage``,
``GetTask``, ``CancelTask``, ``ListTasks``, ``SubscribeToTask``; the client sends the
``A2A-Version: 1.0`` header) and A2A 0.3 (``message/send``, ``message/stream``,
``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``; no header). Protocol errors (a
malformed request, an unknown task) are JSON-RPC errors; an unknown assistant is a 404
``{"detail": ...}`` like every other route of the server.

``GET /a2a/{assistant_id}/.well-known/agent-card.json`` serves the assistant's card, with the
interface URL built from the request (so it is right behind any host or port).

Each assistant gets its own request handler and executor on first use (assistants created
through the API included). A2A task records are kept in memory; the threads and runs they
drive are the server's, persisted in its storage.
"""

from __future__ import annotations

from typing import Any

from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import InMemoryTaskStore
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from fathom.protocols.a2a.card import build_agent_card
from fathom.protocols.a2a.executor import FathomAgentExecutor
from fathom.server.context import FathomServer, server_of

__all__ = ["A2AEndpoints", "a2a_routes"]


def _agent_url(request: Request, assistant_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/a2a/{assistant_id}"


class A2AEndpoints:
    """The per-assistant A2A handlers of one app, made on first use."""

    def __init__(self) -> None:
        self._handlers: dict[str, tuple[DefaultRequestHandlerV2, JsonRpcDispatcher]] = {}

    async def _assistant(self, request: Request) -> tuple[FathomServer, dict[str, Any]]:
        server = await server_of(request)
        return server, await server.assistant(request.path_params["assistant_id"])

    async def dispatcher(self, request: Request) -> JsonRpcDispatcher:
        """The JSON-RPC dispatcher of the request's assistant (404 if unknown)."""
        server, assistant = await self._assistant(request)
        key = str(assistant["assistant_id"])
        if key not in self._handlers:
            graph = await server.registry.graph(assistant["graph_id"])
            card = build_agent_card(assistant, graph, _agent_url(request, key))
            executor = FathomAgentExecutor(server, key, assistant["graph_id"])
            handler = DefaultRequestHandlerV2(executor, InMemoryTaskStore(), card)
            self._handlers[key] = (handler, JsonRpcDispatcher(handler, enable_v0_3_compat=True))
        return self._handlers[key][1]

    async def rpc(self, request: Request) -> Response:
        """``POST /a2a/{assistant_id}``: one JSON-RPC request (SSE for the streaming ones)."""
        return await (await self.dispatcher(request)).handle_requests(request)

    async def card(self, request: Request) -> Response:
        """``GET /a2a/{assistant_id}/.well-known/agent-card.json``."""
        server, assistant = await self._assistant(request)
        graph = await server.registry.graph(assistant["graph_id"])
        url = _agent_url(request, str(request.path_params["assistant_id"]))
        return JSONResponse(agent_card_to_dict(build_agent_card(assistant, graph, url)))

    async def aclose(self) -> None:
        """Stop every assistant's active A2A tasks (server shutdown)."""
        for handler, _ in self._handlers.values():
            await handler.aclose()


def a2a_routes(endpoints: A2AEndpoints | None = None) -> list[BaseRoute]:
    """The A2A routes for a fathom app (``create_app(routes=...)``; ``fathom serve`` adds them
    when a2a-sdk is installed, through ``fathom.protocols.server_routes``)."""
    endpoints = endpoints or A2AEndpoints()
    return [
        Route("/a2a/{assistant_id}", endpoints.rpc, methods=["POST"]),
        Route(
            f"/a2a/{{assistant_id}}{AGENT_CARD_WELL_KNOWN_PATH}", endpoints.card, methods=["GET"]
        ),
    ]
