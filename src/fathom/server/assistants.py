"""Assistant routes.

Each graph has its own assistant, ``assistant_id`` = graph name (also reachable by LangGraph's
uuid5 id for it); it cannot be changed or deleted. ``POST /assistants`` creates further ones: a
graph plus a stored ``config``/``context`` that every run of that assistant starts from.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

from pydantic import PydanticUserError, TypeAdapter, create_model
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.authorize import authorize
from fathom.server.auth.filters import matches_filter
from fathom.server.auth.guards import visible_assistant
from fathom.server.context import server_of
from fathom.server.errors import Conflict, Unprocessable, json_response
from fathom.server.records import now_iso
from fathom.server.serde import to_jsonable
from fathom.server.validation import check_id, opt_dict, opt_enum, opt_int, opt_str, read_json

__all__ = ["get_assistant", "routes", "schemas", "search"]

# What pydantic raises for a type it cannot describe (a schema error is a PydanticUserError;
# a few unusual annotations still fail with a TypeError).
_NO_SCHEMA = (PydanticUserError, TypeError)


async def search(request: Request) -> Response:
    """``POST /assistants/search``: filter by ``graph_id``, ``name``, ``metadata``."""
    server = await server_of(request)
    body = await read_json(request)
    graph_id, name = opt_str(body, "graph_id"), opt_str(body, "name")
    metadata = opt_dict(body, "metadata") or {}
    limit, offset = opt_int(body, "limit", 10), opt_int(body, "offset", 0)
    flt = await authorize(request, "assistants", "search", {
        "graph_id": graph_id, "metadata": metadata, "limit": limit, "offset": offset,
    })  # fmt: skip
    found = [server.registry.assistant(g) for g in server.registry.names]
    found += await server.records.list_assistants()
    found = [
        a
        for a in found
        if matches_filter(a["metadata"], flt)
        and (graph_id is None or a["graph_id"] == graph_id)
        and (name is None or name in a["name"])
        and all(a["metadata"].get(k) == v for k, v in metadata.items())
    ]
    return json_response(found[offset : offset + limit])


async def count(request: Request) -> Response:
    """``POST /assistants/count``."""
    server = await server_of(request)
    body = await read_json(request)
    graph_id = opt_str(body, "graph_id")
    flt = await authorize(request, "assistants", "search", {"graph_id": graph_id})
    every = [server.registry.assistant(g) for g in server.registry.names]
    every += await server.records.list_assistants()
    return json_response(
        sum(
            1
            for a in every
            if graph_id in (None, a["graph_id"]) and matches_filter(a["metadata"], flt)
        )
    )


async def get_assistant(request: Request) -> Response:
    """``GET /assistants/{assistant_id}``."""
    server = await server_of(request)
    return json_response(
        await visible_assistant(server, request, request.path_params["assistant_id"])
    )


async def create(request: Request) -> Response:
    """``POST /assistants``: a named ``config``/``context`` for a graph (``if_exists``)."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    graph_id = opt_str(body, "graph_id")
    if not graph_id:
        raise Unprocessable("'graph_id' is required")
    graph_id = server.registry.resolve(graph_id, status=422)
    if_exists = opt_enum(body, "if_exists", ("raise", "do_nothing"), "raise")
    assistant_id = opt_str(body, "assistant_id")
    if assistant_id is not None:
        assistant_id = check_id(assistant_id, "assistant")
        if server.registry.knows(assistant_id):
            raise Conflict(f"Assistant {assistant_id!r} is a graph's own assistant")
        if existing := await server.records.get_assistant(assistant_id):
            if if_exists == "raise":
                raise Conflict(f"Assistant {assistant_id} already exists")
            return json_response(existing)
    value: dict[str, Any] = {
        "assistant_id": assistant_id, "graph_id": graph_id, "config": opt_dict(body, "config"),
        "context": opt_dict(body, "context"), "metadata": opt_dict(body, "metadata") or {},
        "if_exists": if_exists, "name": opt_str(body, "name"),
        "description": opt_str(body, "description"),
    }  # fmt: skip
    await authorize(request, "assistants", "create", value)
    stamp = now_iso()
    assistant = {
        "assistant_id": assistant_id or str(uuid.uuid4()),
        "graph_id": graph_id,
        "config": opt_dict(body, "config") or {},
        "context": opt_dict(body, "context") or {},
        "metadata": value["metadata"] or {},
        "name": opt_str(body, "name") or "Untitled",
        "description": opt_str(body, "description"),
        "version": 1,
        "created_at": stamp,
        "updated_at": stamp,
    }
    return json_response(await server.records.put_assistant(assistant))


async def _created(
    request: Request, action: str, value: dict[str, Any] | None = None
) -> dict[str, Any]:
    server = await server_of(request)
    assistant_id = request.path_params["assistant_id"]
    if server.registry.knows(assistant_id):
        raise Conflict(f"Assistant {assistant_id!r} is a graph's own assistant; it cannot change")
    return await visible_assistant(server, request, assistant_id, action, value)


async def update(request: Request) -> Response:
    """``PATCH /assistants/{assistant_id}``: replace config/context/name; merge metadata."""
    server = await server_of(request)
    body = await read_json(request)
    event = {"metadata": opt_dict(body, "metadata") or {}, "graph_id": opt_str(body, "graph_id")}
    assistant = await _created(request, "update", event)
    if graph_id := opt_str(body, "graph_id"):
        assistant["graph_id"] = server.registry.resolve(graph_id, status=422)
    for key in ("config", "context"):
        if (value := opt_dict(body, key)) is not None:
            assistant[key] = value
    for key in ("name", "description"):
        if (text := opt_str(body, key)) is not None:
            assistant[key] = text
    assistant["metadata"] = {**assistant["metadata"], **event["metadata"]}
    assistant["version"] += 1
    assistant["updated_at"] = now_iso()
    return json_response(await server.records.put_assistant(assistant))


async def delete(request: Request) -> Response:
    """``DELETE /assistants/{assistant_id}`` (created assistants only)."""
    server = await server_of(request)
    assistant = await _created(request, "delete")
    await server.records.delete_assistant(assistant["assistant_id"])
    return Response(status_code=204)


async def schemas(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/schemas``: input, output, state, config, context."""
    server = await server_of(request)
    graph_id = server.registry.resolve(request.path_params["assistant_id"])
    await visible_assistant(server, request, request.path_params["assistant_id"])
    graph = await server.registry.graph(graph_id)
    return json_response(
        {
            "graph_id": graph_id,
            "input_schema": _safe(graph.get_input_jsonschema),
            "output_schema": _safe(graph.get_output_jsonschema),
            "state_schema": _safe(lambda: _state_schema(graph)),
            "config_schema": _safe(lambda: _config_schema(graph)),
            "context_schema": _safe(graph.get_context_jsonschema),
        }
    )


def _state_schema(graph: Any) -> dict[str, Any]:
    """JSON schema of the graph's state: one property per state channel, typed by what the
    channel accepts as an update (``Any`` where that type has no JSON schema)."""
    fields: dict[str, Any] = {}
    for name in graph.stream_channels_list:
        update_type = graph.channels[name].UpdateType
        try:
            TypeAdapter(update_type).json_schema()
        except _NO_SCHEMA:
            update_type = Any
        fields[name] = (update_type, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def _config_schema(graph: Any) -> Any:
    """The graph's config JSON schema (LangGraph deprecates the API but still serves it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return graph.config_schema().model_json_schema()


def _safe(fn: Any) -> Any:
    """``fn()``, or ``None`` when the graph cannot describe that schema."""
    try:
        return fn()
    except _NO_SCHEMA:
        return None


async def graph_view(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/graph``: nodes and edges (``xray`` for subgraphs)."""
    server = await server_of(request)
    assistant_id = request.path_params["assistant_id"]
    graph_id = (await visible_assistant(server, request, assistant_id))["graph_id"]
    graph = await server.registry.graph(graph_id)
    raw = request.query_params.get("xray", "false").lower()
    xray: bool | int = int(raw) if raw.isdigit() else raw in ("true", "1")
    drawable = await graph.aget_graph(xray=xray)
    return json_response(to_jsonable(drawable.to_json()))


routes = [
    Route("/assistants", create, methods=["POST"]),
    Route("/assistants/search", search, methods=["POST"]),
    Route("/assistants/count", count, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/assistants/{assistant_id}", update, methods=["PATCH"]),
    Route("/assistants/{assistant_id}", delete, methods=["DELETE"]),
    Route("/assistants/{assistant_id}/schemas", schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", graph_view, methods=["GET"]),
]
