"""Thread routes: create, get, patch, delete, search, state, history, copy."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.memory.stores import aforget_thread
from fathom.server.auth.authorize import Filter, authorize
from fathom.server.auth.guards import thread_visible, visible_thread
from fathom.server.checkpoint_copy import copy_thread
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import Conflict, Unprocessable, json_response
from fathom.server.records import now_iso
from fathom.server.serde import to_jsonable
from fathom.server.snapshots import snapshot_json, thread_interrupts
from fathom.server.thread_search import parse_extract, parse_select, project
from fathom.server.validation import (
    check_id,
    opt_dict,
    opt_enum,
    opt_int,
    opt_str,
    opt_str_list,
    read_json,
)

__all__ = ["remove_thread", "routes"]

_THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
_SORT_FIELDS = ("thread_id", "status", "created_at", "updated_at", "state_updated_at")
_MAX_LIMIT = 1000
_EMPTY_STATE: dict[str, Any] = {
    "values": {},
    "next": [],
    "tasks": [],
    "metadata": None,
    "created_at": None,
    "checkpoint": None,
    "parent_checkpoint": None,
    "interrupts": [],
    "checkpoint_id": None,
    "parent_checkpoint_id": None,
}


def _has_graph(server: FathomServer, thread: dict[str, Any]) -> bool:
    """Whether the thread's state can be read: a run chose its graph, or there is one graph."""
    graph_id = thread.get("metadata", {}).get("graph_id")
    return graph_id is not None or len(server.registry.names) == 1


def _config(thread_id: str, checkpoint: dict[str, Any] | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    for key in ("checkpoint_id", "checkpoint_ns"):
        if checkpoint and checkpoint.get(key):
            configurable[key] = checkpoint[key]
    return RunnableConfig(configurable=configurable)


async def _full(server: FathomServer, thread: dict[str, Any]) -> dict[str, Any]:
    """The thread record with ``values`` and ``interrupts`` read from its checkpoint."""
    out = {**thread, "values": None, "interrupts": {}}
    if thread.get("metadata", {}).get("graph_id") in server.registry.names:
        graph = await server.thread_graph(thread)
        snap = await graph.aget_state(_config(thread["thread_id"]))
        if snap.created_at is not None:
            out["values"] = to_jsonable(snap.values)
            out["interrupts"] = thread_interrupts(snap)
    return out


async def create(request: Request) -> Response:
    """``POST /threads``: ``thread_id``, ``metadata``, ``if_exists`` (raise | do_nothing)."""
    server = await server_of(request)
    body = await read_json(request)
    thread_id = opt_str(body, "thread_id")
    if thread_id is not None:
        thread_id = check_id(thread_id, "thread")
    if_exists = opt_enum(body, "if_exists", ("raise", "do_nothing"), "raise")
    metadata = opt_dict(body, "metadata")
    value = {"thread_id": thread_id, "metadata": dict(metadata or {}), "if_exists": if_exists}
    flt = await authorize(request, "threads", "create", value)
    metadata = value["metadata"] or metadata  # with what the handler added (an owner)
    if thread_id is not None and (existing := await server.records.get_thread(thread_id)):
        if if_exists == "raise" or not thread_visible(existing, flt):
            raise Conflict(f"Thread {thread_id} already exists")
        return json_response(await _full(server, existing))
    if metadata and "graph_id" in metadata:
        metadata["graph_id"] = server.registry.resolve(str(metadata["graph_id"]), status=422)
    thread = await server.records.new_thread(thread_id, metadata)
    return json_response(await _full(server, thread))


async def get(request: Request) -> Response:
    """``GET /threads/{thread_id}``."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    return json_response(await _full(server, thread))


async def patch(request: Request) -> Response:
    """``PATCH /threads/{thread_id}``: merge ``metadata``."""
    server = await server_of(request)
    body = await read_json(request)
    value = {"metadata": opt_dict(body, "metadata") or {}}
    thread = await visible_thread(
        server, request, request.path_params["thread_id"], "update", value
    )
    thread["metadata"] = {**thread.get("metadata", {}), **value["metadata"]}
    thread["updated_at"] = now_iso()
    await server.records.put_thread(thread)
    return json_response(await _full(server, thread))


async def delete(request: Request) -> Response:
    """``DELETE /threads/{thread_id}``: cancels its runs, drops records and checkpoints."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"], "delete")
    await remove_thread(server, thread["thread_id"])
    return Response(status_code=204)


async def remove_thread(server: FathomServer, thread_id: str) -> None:
    """Cancel the thread's active runs (waiting for them to stop), then drop its records
    and checkpoints: nothing a run still writes can bring the thread back."""
    for run_id in await server.runs.active_runs(thread_id):
        await server.runs.cancel(run_id)
        await server.runs.wait(run_id)
    await aforget_thread(server.store, thread_id)  # first: a failure here deletes nothing
    await server.records.delete_thread(thread_id)
    await server.checkpointer.adelete_thread(thread_id)
    await server.runs.forget_events(thread_id)


def _matches(sub: Any, full: Any) -> bool:
    """Whether ``full`` contains ``sub`` as PostgreSQL's jsonb ``@>`` (langgraph-api's filter)
    decides: objects key by key, and a list when each of ``sub``'s items is in one of its own."""
    if isinstance(sub, dict):
        return isinstance(full, dict) and all(
            k in full and _matches(v, full[k]) for k, v in sub.items()
        )
    if isinstance(sub, list):
        return isinstance(full, list) and all(any(_matches(s, f) for f in full) for s in sub)
    return sub == full


def _status_filter(body: dict[str, Any]) -> str | None:
    status = body.get("status")
    if status is not None and status not in _THREAD_STATUSES:
        raise Unprocessable(f"'status' must be one of {', '.join(_THREAD_STATUSES)}")
    return status


async def _matching(
    server: FathomServer,
    body: dict[str, Any],
    ids: list[str] | None = None,
    flt: Filter | None = None,
) -> list[dict[str, Any]]:
    """The thread records matching the body's ``metadata``, ``status`` and ``ids`` that the
    ``threads.search`` handler's filter ``flt`` lets the caller see."""
    metadata, status = opt_dict(body, "metadata"), _status_filter(body)
    found = []
    for thread in await server.records.list_threads():
        if not thread_visible(thread, flt):
            continue
        if metadata and not _matches(metadata, thread.get("metadata", {})):
            continue
        if status and thread.get("status") != status:
            continue
        if ids and thread["thread_id"] not in ids:
            continue
        found.append(thread)
    return found


async def _search_filter(
    request: Request, body: dict[str, Any], limit: int, offset: int
) -> Filter | None:
    """The ``threads.search`` handler's answer for a search or count with ``body``."""
    value = {
        "metadata": opt_dict(body, "metadata") or {},
        "values": opt_dict(body, "values") or {},
        "status": _status_filter(body),
        "limit": limit,
        "offset": offset,
    }
    return await authorize(request, "threads", "search", value)


async def search(request: Request) -> Response:
    """``POST /threads/search``: ``metadata``, ``values``, ``status``, ``ids``; sort, page,
    ``select`` and ``extract`` (``fathom.server.thread_search``). Without ``sort_by`` the
    most recently updated threads come first, as on langgraph-api."""
    server = await server_of(request)
    body = await read_json(request)
    values = opt_dict(body, "values")
    ids = opt_str_list(body, "ids")
    ids = [check_id(i, "thread") for i in ids] if ids else None
    sort_by = opt_enum(body, "sort_by", _SORT_FIELDS, "updated_at")
    order = opt_enum(body, "sort_order", ("asc", "desc"), "desc")
    limit, offset = opt_int(body, "limit", 10, minimum=1), opt_int(body, "offset", 0)
    if limit > _MAX_LIMIT:
        raise Unprocessable(f"'limit' must be at most {_MAX_LIMIT}")
    select, extract = parse_select(body), parse_extract(body)
    flt = await _search_filter(request, body, limit, offset)
    found = await _matching(server, body, ids, flt)
    found.sort(key=lambda t: str(t.get(sort_by) or ""), reverse=order == "desc")
    if values:  # only the checkpoints tell which threads match
        fulls = [await _full(server, thread) for thread in found]
        found = [full for full in fulls if _matches(values, full["values"] or {})]
        page = found[offset : offset + limit]
    else:  # read the checkpoints of the page's threads only
        page = [await _full(server, t) for t in found[offset : offset + limit]]
    more = len(found) > offset + limit
    headers = {"X-Pagination-Total": str(offset + limit + 1 if more else offset + len(page))}
    if more:
        headers["X-Pagination-Next"] = str(offset + limit)
    return json_response([project(t, select, extract) for t in page], headers=headers)


async def count(request: Request) -> Response:
    """``POST /threads/count``: how many threads match ``metadata``, ``values``, ``status``."""
    server = await server_of(request)
    body = await read_json(request)
    values = opt_dict(body, "values")
    flt = await _search_filter(request, body, 0, 0)
    n = 0
    for thread in await _matching(server, body, flt=flt):
        if values and not _matches(values, (await _full(server, thread))["values"] or {}):
            continue
        n += 1
    return json_response(n)


async def get_state(request: Request) -> Response:
    """``GET /threads/{id}/state`` and ``/state/{checkpoint_id}``; ``POST /state/checkpoint``."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    checkpoint: dict[str, Any] | None = None
    subgraphs = request.query_params.get("subgraphs", "false").lower() in ("1", "true")
    if "checkpoint_id" in request.path_params:
        checkpoint = {"checkpoint_id": request.path_params["checkpoint_id"]}
    elif request.method == "POST":
        body = await read_json(request)
        checkpoint = opt_dict(body, "checkpoint")
        subgraphs = bool(body.get("subgraphs"))
    if not _has_graph(server, thread):
        return json_response(_EMPTY_STATE)
    graph = await server.thread_graph(thread)
    snap = await graph.aget_state(_config(thread["thread_id"], checkpoint), subgraphs=subgraphs)
    return json_response(snapshot_json(snap))


async def update_state(request: Request) -> Response:
    """``POST /threads/{id}/state``: ``values``, ``as_node``, ``checkpoint``/``checkpoint_id``."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"], "update")
    if await server.runs.active_runs(thread["thread_id"]):
        raise Conflict("Thread is busy; update its state when its runs have finished")
    body = await read_json(request)
    checkpoint = opt_dict(body, "checkpoint") or {}
    if cid := opt_str(body, "checkpoint_id"):
        checkpoint = {**checkpoint, "checkpoint_id": cid}
    graph = await server.thread_graph(thread)
    try:
        config = await graph.aupdate_state(
            _config(thread["thread_id"], checkpoint),
            body.get("values"),
            as_node=opt_str(body, "as_node"),
        )
    except (ValueError, KeyError) as exc:
        raise Unprocessable(f"Cannot update state: {exc}") from None
    thread["status"] = await server.runs.thread_state_status(thread)
    thread["updated_at"] = thread["state_updated_at"] = now_iso()
    await server.records.put_thread(thread)
    if server.runs.listens_to(thread["thread_id"]):  # a thread stream wants the new state
        snap = await graph.aget_state(_config(thread["thread_id"]))
        update = {"state": snapshot_json(snap), "thread_id": thread["thread_id"]}
        server.runs.note_thread(thread["thread_id"], "state_update", update)
    ref = dict(config.get("configurable") or {})
    return json_response(
        {"checkpoint": ref, "configurable": ref, "checkpoint_id": ref.get("checkpoint_id")}
    )


async def history(request: Request) -> Response:
    """``POST /threads/{id}/history``: ``limit``, ``before``, ``metadata``, ``checkpoint``."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    body = await read_json(request)
    limit = opt_int(body, "limit", 10, minimum=1)
    before = body.get("before")
    if isinstance(before, str):
        before = {"checkpoint_id": before}
    if not _has_graph(server, thread):
        return json_response([])
    graph = await server.thread_graph(thread)
    snaps = graph.aget_state_history(
        _config(thread["thread_id"], opt_dict(body, "checkpoint")),
        filter=opt_dict(body, "metadata"),
        before=_config(thread["thread_id"], before) if before else None,
        limit=limit,
    )
    return json_response([snapshot_json(s) async for s in snaps])


async def copy(request: Request) -> Response:
    """``POST /threads/{id}/copy``: a new thread with the same metadata and checkpoints."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    # May the caller create threads at all? The copy keeps the original's metadata (its
    # owner too), as langgraph-api's does.
    await authorize(request, "threads", "create", {"thread_id": None})
    new = await server.records.new_thread(None, thread.get("metadata"))
    await copy_thread(server.checkpointer, thread["thread_id"], new["thread_id"])
    new["status"] = await server.runs.thread_state_status(new)
    await server.records.put_thread(new)
    return json_response(await _full(server, new))


routes = [
    Route("/threads", create, methods=["POST"]),
    Route("/threads/search", search, methods=["POST"]),
    Route("/threads/count", count, methods=["POST"]),
    Route("/threads/{thread_id}", get, methods=["GET"]),
    Route("/threads/{thread_id}", patch, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", get_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["POST"]),
    Route("/threads/{thread_id}/copy", copy, methods=["POST"]),
]
