"""``/a2a/{assistant_id}``: every assistant of a fathom server as an A2A agent (JSON-RPC).

``POST /a2a/{assistant_id}`` is the JSON-RPC endpoint of a2a-sdk's own dispatcher. It answers
both method families of the protocol: A2A 1.0 (``SendMessage``, ``SendStreamingMessage``,
``GetTask``, ``CancelTask``, ``ListTasks``, ``SubscribeToTask``; the client sends the
``A2A-Version: 1.0`` header) and A2A 0.3 (``message/send``, ``message/stream``,
``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``; no header). Protocol errors (a
malformed request, an unknown task) are JSON-RPC errors; an unknown assistant is a 404
``{"detail": ...}`` like every other route of the server.

The assistant's card is served at the A2A discovery path
``GET /.well-known/agent-card.json?assistant_id=<id>`` (where LangGraph's server serves it) and
at ``GET /a2a/{assistant_id}/.well-known/agent-card.json`` (the per-agent path a2a-sdk's client
reads from an agent URL), with the interface URL built from the request (so it is right
behind any host or port). The discovery path without ``assistant_id`` answers 400.

An assistant whose metadata sets ``disable_a2a`` (to any true value) is no A2A agent: its card
is a 404 and every JSON-RPC request to it is answered with the A2A error
``UnsupportedOperationError`` (code -32004) saying so. Metadata is read on every request, so
an assistant updated through the API turns A2A off (or on) at once.

Each assistant gets its own request handler and executor on first use (assistants created
through the API included). A2A task records are kept in the server's storage
(:mod:`fathom.protocols.a2a.tasks`), beside the threads and runs they drive, so they survive
a restart; before its first request, an assistant's handler settles the tasks a stopped server
left ``working`` from their runs (``FathomAgentExecutor.recover``). A message naming a
``contextId`` that is no thread of the server is refused with a JSON-RPC error
(``InvalidParamsError``, -32602): omit ``contextId`` to start a new context.
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.request_handlers.response_helpers import (
    agent_card_to_dict,
    build_error_response,
)
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import SendMessageRequest, Task
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from fathom.protocols.a2a.card import build_agent_card
from fathom.protocols.a2a.executor import FathomAgentExecutor, thread_for_context
from fathom.protocols.a2a.tasks import ServerTaskStore
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import ApiError, NotFound

__all__ = ["A2AEndpoints", "a2a_disabled", "a2a_routes"]


def _agent_url(request: Request, assistant_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/a2a/{assistant_id}"


def a2a_disabled(assistant: dict[str, Any]) -> bool:
    """Whether the assistant's metadata turns A2A off (``{"disable_a2a": true}``)."""
    metadata = assistant.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("disable_a2a"))


def _disabled_text(assistant_id: str) -> str:
    return (
        f"A2A is disabled for assistant {assistant_id!r} (its metadata sets disable_a2a); "
        "it is reachable only through the Agent Protocol API."
    )


class _KnownContexts(SimpleRequestContextBuilder):
    """Refuses a new task in a ``contextId`` that names no thread of the server."""

    def __init__(self, server: FathomServer) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=None)
        self.server = server

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if context_id and not task_id and not await self._known(context_id):
            raise InvalidParamsError(
                message=(
                    f"Unknown contextId {context_id!r}: no conversation with that id exists "
                    "on this agent. To start a new one, send the message without a "
                    "contextId; the reply's contextId continues it."
                ),
                data={"context_id": context_id, "error_type": "context_not_found"},
            )
        return await super().build(context, params, task_id, context_id, task)

    async def _known(self, context_id: str) -> bool:
        return await self.server.records.get_thread(thread_for_context(context_id)) is not None


class A2AEndpoints:
    """The per-assistant A2A handlers of one app, made on first use."""

    def __init__(self) -> None:
        self._handlers: dict[str, tuple[DefaultRequestHandlerV2, JsonRpcDispatcher]] = {}
        self._making = asyncio.Lock()

    async def _assistant(self, request: Request) -> tuple[FathomServer, dict[str, Any]]:
        server = await server_of(request)
        return server, await server.assistant(request.path_params["assistant_id"])

    async def dispatcher(
        self, server: FathomServer, assistant: dict[str, Any], request: Request
    ) -> JsonRpcDispatcher:
        """The JSON-RPC dispatcher of ``assistant``, made on first use."""
        key = str(assistant["assistant_id"])
        async with self._making:
            if key not in self._handlers:
                graph = await server.registry.graph(assistant["graph_id"])
                card = build_agent_card(assistant, graph, _agent_url(request, key))
                executor = FathomAgentExecutor(server, key, assistant["graph_id"])
                tasks = ServerTaskStore(server.store, key)
                await executor.recover(tasks)  # the tasks a stopped server left working
                handler = DefaultRequestHandlerV2(
                    executor, tasks, card, request_context_builder=_KnownContexts(server)
                )
                dispatcher = JsonRpcDispatcher(handler, enable_v0_3_compat=True)
                if not self._handlers:  # the app stops this assistant's tasks as it shuts down
                    server.close_at_shutdown(self.aclose)
                self._handlers[key] = (handler, dispatcher)
        return self._handlers[key][1]

    async def rpc(self, request: Request) -> Response:
        """``POST /a2a/{assistant_id}``: one JSON-RPC request (SSE for the streaming ones)."""
        server, assistant = await self._assistant(request)
        if a2a_disabled(assistant):
            return await _refuse(request, str(assistant["assistant_id"]))
        return await (await self.dispatcher(server, assistant, request)).handle_requests(request)

    async def card(self, request: Request) -> Response:
        """``GET /a2a/{assistant_id}/.well-known/agent-card.json``."""
        return await self._card(request, str(request.path_params["assistant_id"]))

    async def discovery_card(self, request: Request) -> Response:
        """``GET /.well-known/agent-card.json?assistant_id=<id>``: the A2A discovery path."""
        assistant_id = request.query_params.get("assistant_id")
        if not assistant_id:
            raise ApiError(
                "Missing query parameter assistant_id: ask for "
                "/.well-known/agent-card.json?assistant_id=<assistant id or graph name>"
            )
        return await self._card(request, assistant_id)

    async def _card(self, request: Request, assistant_id: str) -> Response:
        server = await server_of(request)
        assistant = await server.assistant(assistant_id)
        if a2a_disabled(assistant):
            raise NotFound(_disabled_text(assistant_id))
        graph = await server.registry.graph(assistant["graph_id"])
        url = _agent_url(request, assistant_id)
        return JSONResponse(agent_card_to_dict(build_agent_card(assistant, graph, url)))

    async def aclose(self) -> None:
        """Stop every assistant's active A2A tasks (server shutdown)."""
        for handler, _ in self._handlers.values():
            await handler.aclose()


async def _refuse(request: Request, assistant_id: str) -> Response:
    """The JSON-RPC error answering a request to an assistant with A2A disabled."""
    try:
        body = await request.json()
    except ValueError:
        body = None
    request_id = body.get("id") if isinstance(body, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    error = UnsupportedOperationError(message=_disabled_text(assistant_id))
    return JSONResponse(build_error_response(request_id, error))


def a2a_routes(endpoints: A2AEndpoints | None = None) -> list[BaseRoute]:
    """The A2A routes for a fathom app (``create_app(routes=...)``; ``fathom serve`` adds them
    when a2a-sdk is installed, through ``fathom.protocols.server_routes``)."""
    endpoints = endpoints or A2AEndpoints()
    # Named ``a2a.*``: ``langgraph.json``'s ``http.disable_a2a`` leaves these routes out.
    return [
        Route(AGENT_CARD_WELL_KNOWN_PATH, endpoints.discovery_card, methods=["GET"],
              name="a2a.discovery_card"),
        Route("/a2a/{assistant_id}", endpoints.rpc, methods=["POST"], name="a2a.rpc"),
        Route(f"/a2a/{{assistant_id}}{AGENT_CARD_WELL_KNOWN_PATH}", endpoints.card,
              methods=["GET"], name="a2a.card"),
    ]  # fmt: skip
