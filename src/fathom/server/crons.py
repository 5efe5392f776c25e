"""Cron routes: scheduled runs, as LangGraph's server serves them (``client.crons``).

``POST /runs/crons`` makes a cron whose every tick runs on a new thread (deleted after the run
unless ``on_run_completed="keep"``); ``POST /threads/{thread_id}/runs/crons`` makes one whose
ticks run on that thread. ``POST /runs/crons/search`` and ``/count`` find them, and
``GET|PATCH|DELETE /runs/crons/{cron_id}`` read, change and delete one.

A record keeps the request as its ``payload`` (the assistant resolved to its id, and the
cron's id under ``config.configurable.cron_id``, as LangGraph's server does). Each tick
(``fathom.server.execution.cron_scheduler``) submits an ordinary run from that payload through
`start_run`, the path ``POST /threads/{id}/runs`` takes, with the cron's metadata and its
``cron_id`` in the run's metadata: the run streams, joins and lists like any other.

With custom auth (``fathom.server.auth``), each route asks the ``crons`` handler for its action
(``create``, ``read``, ``update``, ``delete``, ``search``) as langgraph-api does: ``create`` may
add metadata (an owner), and a cron its filter hides is unknown (404, left out of searches). A
cron for a thread needs that thread to be visible to the caller, and searches leave out the
crons of threads the caller may not see. The creator's identity is the
record's ``user_id`` and sits in its payload's ``config.configurable`` (the keys
``attach_identity`` writes), so every tick runs as the user who made the cron and the graph
sees them as ``runtime.server_info.user``; a ``PATCH`` cannot change it.
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import BaseStore
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.authorize import Filter, authorize, request_user
from fathom.server.auth.filters import matches_filter
from fathom.server.auth.guards import thread_visible, visible_thread
from fathom.server.auth.run_config import AUTH_CONFIG_KEYS, attach_identity
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import NotFound, Unprocessable, json_response
from fathom.server.execution.cron_schedule import (
    check_schedule,
    check_timezone,
    next_run,
    parse_time,
)
from fathom.server.execution.cron_store import CronStore, Firing, RecordCronStore
from fathom.server.runs import check_run_body, start_run
from fathom.server.validation import (
    check_id,
    opt_bool,
    opt_dict,
    opt_enum,
    opt_int,
    opt_str,
    opt_str_list,
    read_json,
)

__all__ = ["cron_store", "fire", "routes"]

_RUN_KEYS = (
    "assistant_id", "input", "command", "config", "context", "metadata", "interrupt_before",
    "interrupt_after", "webhook", "feedback_keys", "stream_mode", "stream_subgraphs",
    "stream_resumable", "durability", "multitask_strategy", "checkpoint_during",
)  # fmt: skip
"""The payload keys a tick's run takes (the rest describe the schedule)."""
_FIELDS = (
    "cron_id", "assistant_id", "thread_id", "end_time", "schedule", "timezone", "created_at",
    "updated_at", "user_id", "payload", "next_run_date", "metadata", "now",
    "on_run_completed", "enabled",
)  # fmt: skip
_SORTS = ("cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at",
          "updated_at")  # fmt: skip
_TIMES = ("next_run_date", "end_time", "created_at", "updated_at")
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def cron_store(store: BaseStore, replica_database: str | None) -> CronStore:
    """The crons' storage: the shared PostgreSQL table for replicas, else ``store``."""
    if replica_database is None:
        return RecordCronStore(store)
    from fathom.server.execution.cron_postgres import PostgresCronStore

    return PostgresCronStore(replica_database)


def _run_body(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: payload[key] for key in _RUN_KEYS if key in payload}


def _utc(value: object, field: str) -> str | None:
    parsed = parse_time(value, field)
    return parsed.astimezone(UTC).isoformat() if parsed is not None else None


async def _create(
    server: FathomServer, request: Request, body: dict[str, Any], thread_id: str | None
) -> dict[str, Any]:
    timezone = check_timezone(body.get("timezone"))
    schedule = check_schedule(body.get("schedule"))
    end_time = _utc(body.get("end_time"), "end_time")
    enabled = opt_bool(body, "enabled", True)
    metadata = opt_dict(body, "metadata") or {}
    on_run_completed = None
    if thread_id is None:
        on_run_completed = opt_enum(body, "on_run_completed", ("delete", "keep"), "delete")
    if not (requested := opt_str(body, "assistant_id")):
        raise Unprocessable("'assistant_id' is required")
    assistant = await server.assistant(requested)
    if thread_id is not None:
        thread_id = (await visible_thread(server, request, thread_id))["thread_id"]
    cron_id = str(uuid.uuid4())
    payload = {key: value for key, value in body.items() if value is not None}
    payload["assistant_id"] = assistant["assistant_id"]
    config = dict(opt_dict(payload, "config") or {})
    config["configurable"] = {**(config.get("configurable") or {}), "cron_id": cron_id}
    payload["config"] = config
    await check_run_body(server, _run_body(payload))
    identity = request_user(request)
    user_id = identity[0].identity if identity is not None else None
    value = {
        "payload": payload,
        "schedule": schedule,
        "cron_id": cron_id,
        "thread_id": thread_id,
        "user_id": user_id,
        "end_time": end_time,
        "metadata": metadata,
    }
    await authorize(request, "crons", "create", value)
    if isinstance(value.get("metadata"), dict):
        metadata = value["metadata"]  # with what the handler added (an owner)
    attach_identity(config, identity)  # every tick runs as the creator (or as nobody)
    now = datetime.now(UTC)
    cron = {
        "cron_id": cron_id,
        "assistant_id": assistant["assistant_id"],
        "thread_id": thread_id,
        "user_id": user_id,
        "end_time": end_time,
        "schedule": schedule,
        "timezone": timezone,
        "payload": payload,
        "next_run_date": next_run(schedule, now, timezone).isoformat(),
        "metadata": metadata,
        "on_run_completed": on_run_completed,
        "enabled": enabled,
        "created_at": now.isoformat(),
        "updated_at": now.isoformat(),
    }
    await server.crons.put(cron)
    return cron


async def create(request: Request) -> Response:
    """``POST /runs/crons``: a cron whose ticks each run on a new thread."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    return json_response(await _create(server, request, body, None))


async def create_for_thread(request: Request) -> Response:
    """``POST /threads/{thread_id}/runs/crons``: a cron whose ticks run on that thread."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    return json_response(await _create(server, request, body, request.path_params["thread_id"]))


def _visible(cron: dict[str, Any], flt: Filter | None) -> bool:
    """Whether the ``crons`` handler's filter ``flt`` lets the caller see ``cron``."""
    return flt is None or matches_filter(cron.get("metadata") or {}, flt)


async def _cron(
    server: FathomServer,
    request: Request,
    action: str = "read",
    value: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The cron of the path, after the ``crons`` handler for ``action`` allowed it; else 404.

    ``value`` is what the handler sees besides ``cron_id`` (it may change it).
    """
    cron_id = check_id(request.path_params["cron_id"], "cron")
    if value is None:
        value = {}
    value["cron_id"] = cron_id
    flt = await authorize(request, "crons", action, value)
    cron = await server.crons.get(cron_id)
    if cron is None or not _visible(cron, flt):
        raise NotFound(f"Cron {cron_id} not found")
    return cron


async def get(request: Request) -> Response:
    """``GET /runs/crons/{cron_id}``."""
    server = await server_of(request)
    return json_response(await _cron(server, request))


def _merge_payload(cron: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The cron's payload under the patch's keys; its assistant, cron id and creator stay."""
    old = cron["payload"]
    merged = {**old, **body, "assistant_id": old["assistant_id"]}
    config = dict(merged.get("config") or {})
    creator = (old.get("config") or {}).get("configurable") or {}
    given = config.get("configurable") or {}
    configurable = {
        **{k: v for k, v in given.items() if k not in AUTH_CONFIG_KEYS},
        **{k: creator[k] for k in AUTH_CONFIG_KEYS if k in creator},  # the creator stays
        "cron_id": cron["cron_id"],
    }
    config["configurable"] = configurable
    merged["config"] = config
    return merged


async def patch(request: Request) -> Response:
    """``PATCH /runs/crons/{cron_id}``: change the schedule, the payload, pause or end it."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    if not body:
        raise Unprocessable("Pass at least one field to change")
    value = {key: body.get(key) for key in ("schedule", "end_time", "enabled", "on_run_completed")}
    value["payload"] = _run_body(body)
    if body.get("metadata") is not None:
        value["metadata"] = body["metadata"]
    cron = await _cron(server, request, "update", value)
    if isinstance(value.get("metadata"), dict):  # with what the handler added (an owner)
        body = {**body, "metadata": value["metadata"]}
    schedule = check_schedule(body["schedule"]) if body.get("schedule") is not None else None
    timezone = check_timezone(body.get("timezone"))
    end_time = _utc(body.get("end_time"), "end_time")
    enabled = opt_bool(body, "enabled") if body.get("enabled") is not None else None
    on_run_completed = body.get("on_run_completed")
    if on_run_completed is not None:
        on_run_completed = opt_enum(body, "on_run_completed", ("delete", "keep"), "delete")
    metadata = opt_dict(body, "metadata")
    await check_run_body(server, _run_body(_merge_payload(cron, body)))

    def change(current: dict[str, Any]) -> dict[str, Any]:
        new = {**current, "payload": _merge_payload(current, body)}
        if enabled is not None:
            new["enabled"] = enabled
        if timezone is not None:
            new["timezone"] = timezone
        if schedule is not None:
            new["schedule"] = schedule
        if schedule is not None or timezone is not None:
            upcoming = next_run(new["schedule"], datetime.now(UTC), new.get("timezone"))
            new["next_run_date"] = upcoming.isoformat()
        if "end_time" in body:
            new["end_time"] = end_time
        if on_run_completed is not None:
            new["on_run_completed"] = on_run_completed
        if metadata is not None:
            new["metadata"] = {**(current.get("metadata") or {}), **metadata}
        return new

    changed = await server.crons.update(cron["cron_id"], change)
    if changed is None:
        raise NotFound(f"Cron {cron['cron_id']} not found")
    return json_response(changed)


async def delete(request: Request) -> Response:
    """``DELETE /runs/crons/{cron_id}``: no tick after this one fires."""
    server = await server_of(request)
    cron = await _cron(server, request, "delete")
    if not await server.crons.delete(cron["cron_id"]):
        raise NotFound(f"Cron {cron['cron_id']} not found")
    return Response(status_code=204)


async def _assistant_filter(server: FathomServer, body: dict[str, Any]) -> str | None:
    """The ``assistant_id`` filter as an assistant id (a graph name is resolved)."""
    requested = opt_str(body, "assistant_id")
    if requested is None:
        return None
    try:
        return (await server.assistant(requested))["assistant_id"]
    except NotFound:  # an unknown assistant simply has no crons
        return requested


async def _matching(
    server: FathomServer, request: Request, body: dict[str, Any], limit: int, offset: int
) -> list[dict[str, Any]]:
    """The crons matching the body's filters that the ``crons.search`` handler lets through."""
    assistant_id = await _assistant_filter(server, body)
    thread_id = opt_str(body, "thread_id")
    enabled = body.get("enabled")
    if enabled is not None:
        enabled = opt_bool(body, "enabled")
    metadata = opt_dict(body, "metadata") or {}
    value = {
        "assistant_id": assistant_id,
        "thread_id": thread_id,
        "limit": limit,
        "offset": offset,
        "metadata": metadata,
    }
    flt = await authorize(request, "crons", "search", value)
    found = [
        cron
        for cron in await server.crons.all()
        if _visible(cron, flt)
        and (assistant_id is None or cron["assistant_id"] == assistant_id)
        and (thread_id is None or cron.get("thread_id") == thread_id)
        and (enabled is None or cron.get("enabled") == enabled)
        and all((cron.get("metadata") or {}).get(k) == v for k, v in metadata.items())
    ]
    return await _on_visible_threads(server, request, found, thread_id)


async def _on_visible_threads(
    server: FathomServer, request: Request, crons: list[dict[str, Any]], thread_id: str | None
) -> list[dict[str, Any]]:
    """``crons`` less those on a thread the caller may not see, as langgraph-api filters a
    search: by the ``threads.read`` handler when the search names a thread, else by
    ``threads.search``; a stateless cron has no thread to hide it."""
    if thread_id is not None:
        thread_flt = await authorize(request, "threads", "read", {"thread_id": thread_id})
    else:
        thread_flt = await authorize(request, "threads", "search", {})
    if thread_flt is None:
        return crons
    kept: list[dict[str, Any]] = []
    for cron in crons:
        on = cron.get("thread_id")
        if on is None or thread_visible(await server.records.get_thread(on), thread_flt):
            kept.append(cron)
    return kept


def _sort_key(field: str) -> Any:
    if field in _TIMES:
        return lambda cron: parse_time(cron.get(field), field) or _EARLIEST
    return lambda cron: str(cron.get(field) or "").lower()


async def search(request: Request) -> Response:
    """``POST /runs/crons/search``: filter, sort, page and select fields."""
    server = await server_of(request)
    body = await read_json(request)
    limit, offset = opt_int(body, "limit", 10, minimum=1), opt_int(body, "offset", 0)
    sort_by = opt_enum(body, "sort_by", _SORTS, "created_at")
    sort_order = opt_enum(body, "sort_order", ("asc", "desc"), "desc")
    select = opt_str_list(body, "select")
    for field in select or ():
        if field not in _FIELDS:
            raise Unprocessable(f"Unknown field {field!r} in 'select'; expected {_FIELDS}")
    found = await _matching(server, request, body, limit, offset)
    found.sort(key=_sort_key(sort_by), reverse=sort_order == "desc")
    page = found[offset : offset + limit]
    if select:
        page = [{key: cron[key] for key in select if key in cron} for cron in page]
    headers = {"X-Pagination-Total": str(len(found))}
    if offset + limit < len(found):
        headers["X-Pagination-Next"] = str(offset + limit)
    return json_response(page, headers=headers)


async def count(request: Request) -> Response:
    """``POST /runs/crons/count``: how many crons match ``assistant_id``, ``thread_id``,
    ``metadata``."""
    server = await server_of(request)
    body = await read_json(request)
    return json_response(len(await _matching(server, request, body, 0, 0)))


async def fire(server: FathomServer, firing: Firing) -> None:
    """Submit the run of one claimed tick, unless a run with its id exists already."""
    if await server.records.get_run(firing.run_id) is not None:
        return  # submitted before the server that claimed the tick could say so
    cron = firing.cron
    payload = copy.deepcopy(cron["payload"])
    body = _run_body(payload)
    body["metadata"] = {
        **(cron.get("metadata") or {}),
        **(payload.get("metadata") or {}),
        "cron_id": cron["cron_id"],
    }
    thread_id = cron.get("thread_id")
    if thread_id is None:
        body["on_completion"] = cron.get("on_run_completed") or "delete"
    await start_run(server, body, thread_id, run_id=firing.run_id)


routes = [
    Route("/runs/crons", create, methods=["POST"]),
    Route("/runs/crons/search", search, methods=["POST"]),
    Route("/runs/crons/count", count, methods=["POST"]),
    Route("/runs/crons/{cron_id}", get, methods=["GET"]),
    Route("/runs/crons/{cron_id}", patch, methods=["PATCH"]),
    Route("/runs/crons/{cron_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/crons", create_for_thread, methods=["POST"]),
]
