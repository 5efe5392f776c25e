"""`/mcp` on `fathom serve`: every assistant of the server as an MCP tool (streamable HTTP).

As LangGraph's server does at the same path, each assistant the caller may see is one tool:
its name is the assistant's name (characters MCP tool names do not allow become `_`; a name
given twice gets the assistant id's start appended), its description the assistant's
description (else a line naming its graph), its input one `message`, and its result the
run's final answer. Each call is a stateless run of the assistant, through the server's own
run manager, so it counts against `--jobs` and is traced and stored like any other run.

The endpoint is stateless, answering each POST with one JSON response (the streamable HTTP
transport's JSON mode): any replica can answer any request. It sits behind the server's
security like every route: the API key (`x-api-key` or `Authorization: Bearer`), then a
`langgraph.json` auth handler; the assistants listed are those its `assistants.search`
filter lets the caller see, and a run is authorized as any run is (`threads.create_run`).

A run that stops for a human approval cannot be answered here (a stateless run has no
thread to resume); the call answers a tool error saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from fathom.server.auth.authorize import authorize
from fathom.server.auth.filters import matches_filter
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import ApiError
from fathom.server.runs import start_run

__all__ = ["McpEndpoint", "assistant_tools", "mcp_routes", "tool_name"]

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64
_INPUT = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "what to ask the assistant"}},
    "required": ["message"],
}


def tool_name(name: str) -> str:
    """`name` as an MCP tool name: letters, digits, `_` and `-`, at most 64 characters."""
    return _NOT_ALLOWED.sub("_", name).strip("_")[:_MAX_NAME] or "assistant"


def assistant_tools(assistants: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each assistant under its tool name, in the order given (graphs' own first)."""
    tools: dict[str, Mapping[str, Any]] = {}
    for assistant in assistants:
        name = tool_name(str(assistant.get("name") or assistant["assistant_id"]))
        if name in tools:
            suffix = "_" + str(assistant["assistant_id"]).replace("-", "")[:8]
            name = name[: _MAX_NAME - len(suffix)] + suffix
        tools[name] = assistant
    return tools


def _description(assistant: Mapping[str, Any]) -> str:
    text = str(assistant.get("description") or "").strip()
    return text or (f"Ask the {assistant['graph_id']} agent (assistant "
                    f"{assistant['assistant_id']}); it answers with its final message.")


def _answer(output: Any) -> str:
    messages = output.get("messages", []) if isinstance(output, Mapping) else []
    for message in reversed(list(messages or [])):
        kind = message.get("type") if isinstance(message, Mapping) else getattr(message, "type", "")
        content = message.get("content") if isinstance(message, Mapping) \
            else getattr(message, "content", "")
        if kind in ("ai", "AIMessageChunk"):
            text = content if isinstance(content, str) else "".join(
                str(b.get("text", "")) for b in content or [] if isinstance(b, Mapping))
            if text.strip():
                return text
    return ""


class McpEndpoint:
    """The `/mcp` ASGI endpoint of one app: a low-level MCP server run per request."""

    def __init__(self) -> None:
        self.server: Server[Any, Request] = Server("fathom")
        self.server.list_tools()(self._list_tools)
        self.server.call_tool(validate_input=True)(self._call_tool)

    def _request(self) -> Request:
        request = self.server.request_context.request
        assert isinstance(request, Request)  # the streamable HTTP transport passes it
        return request

    async def _visible(self, request: Request) -> tuple[FathomServer, dict[str, Mapping[str, Any]]]:
        server = await server_of(request)
        flt = await authorize(request, "assistants", "search", {
            "graph_id": None, "metadata": {}, "limit": 1000, "offset": 0})  # fmt: skip
        found = [server.registry.assistant(g) for g in server.registry.names]
        found += await server.records.list_assistants()
        visible = [a for a in found if matches_filter(a["metadata"], flt)]
        return server, assistant_tools(visible)

    async def _list_tools(self) -> list[types.Tool]:
        _, tools = await self._visible(self._request())
        return [types.Tool(name=name, description=_description(assistant), inputSchema=_INPUT)
                for name, assistant in tools.items()]

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        request = self._request()
        server, tools = await self._visible(request)
        assistant = tools.get(name)
        if assistant is None:
            raise ValueError(f"no assistant is served as tool {name!r}; the tools are: "
                             f"{', '.join(tools) or 'none'}")
        body = {"assistant_id": str(assistant["assistant_id"]),
                "input": {"messages": [{"role": "user", "content": str(arguments["message"])}]}}
        try:
            run = await start_run(server, body, None, request=request)
        except ApiError as error:
            raise ValueError(error.detail) from None
        output = await server.runs.output(run)
        if isinstance(output, Mapping) and "__error__" in output:
            error = output["__error__"] or {}
            raise ValueError(f"the run failed: {error.get('error')}: {error.get('message')}")
        if isinstance(output, Mapping) and output.get("__interrupt__"):
            raise ValueError(f"the {name} run stopped for a human approval, which /mcp cannot "
                             "answer (its run has no thread); run this assistant on a thread "
                             "through the Agent Protocol API instead")
        return [types.TextContent(type="text", text=_answer(output))]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        transport = StreamableHTTPServerTransport(mcp_session_id=None,
                                                  is_json_response_enabled=True)

        async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
                      ) -> None:
            async with transport.connect() as (read, write):
                task_status.started()
                await self.server.run(read, write, self.server.create_initialization_options(),
                                      stateless=True)

        async with anyio.create_task_group() as group:
            await group.start(run)
            try:
                await transport.handle_request(scope, receive, send)
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()


def mcp_routes(endpoint: McpEndpoint | None = None) -> list[BaseRoute]:
    """`/mcp` for a fathom app (`create_app(routes=...)`; `fathom serve` adds it when the
    `mcp` SDK is installed, through `fathom.protocols.server_routes`)."""
    # Named ``mcp``: ``langgraph.json``'s ``http.disable_mcp`` leaves this route out.
    return [
        Route("/mcp", endpoint or McpEndpoint(), methods=["GET", "POST", "DELETE"], name="mcp")
    ]
