"""Run routes: create, stream (SSE), wait, get, list, join, join-stream, cancel, delete.

Stateful runs live under ``/threads/{thread_id}/runs``; stateless ones (``POST /runs``,
``/runs/wait``, ``/runs/stream``) get a temporary thread that is deleted when the run ends
(``on_completion="keep"`` keeps it). Those stateless routes also accept ``thread_id`` in the
body, which makes them the Agent Protocol's own ``POST /runs`` family.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.context import FathomServer, server_of
from fathom.server.errors import NotFound, Unprocessable, json_response
from fathom.server.records import now_iso
from fathom.server.sse import frame, sse_response
from fathom.server.stream_params import last_event_index, query_modes
from fathom.server.validation import (
    check_id,
    opt_bool,
    opt_dict,
    opt_enum,
    opt_str,
    opt_str_list,
    query_bool,
    query_int,
    read_json,
)

__all__ = ["check_run_body", "parse_stateless", "routes", "start_run", "submit_stateless"]

_STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
)
_STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")
_CANCEL_STATUSES = ("pending", "running", "all")
_RUN_STATUSES = ("pending", "running", "success", "error", "timeout", "interrupted")


def _interrupt_nodes(body: dict[str, Any], key: str) -> str | list[str] | None:
    value = body.get(key)
    if value == "*":
        return "*"
    return opt_str_list(body, key)


def _merge_config(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; ``configurable`` and ``metadata`` are merged key by key."""
    merged = {**base, **over}
    for key in ("configurable", "metadata"):
        if key in base or key in over:
            merged[key] = {**(base.get(key) or {}), **(over.get(key) or {})}
    return merged


async def _parse(
    server: FathomServer,
    body: dict[str, Any],
    thread_id: str,
    *,
    temporary: bool,
    run_id: str | None = None,
) -> dict[str, Any]:
    if not (requested := opt_str(body, "assistant_id")):
        raise Unprocessable("'assistant_id' is required")
    assistant = await server.assistant(requested)
    if body.get("after_seconds"):
        raise Unprocessable("'after_seconds' (scheduled runs) is not supported by this server")
    graph_id, assistant_id = assistant["graph_id"], assistant["assistant_id"]
    if body.get("input") is not None and body.get("command"):
        raise Unprocessable("Pass either 'input' or 'command', not both")
    command = opt_dict(body, "command")
    stream_mode = opt_str_list(body, "stream_mode") or ["values"]
    for mode in stream_mode:
        if mode not in _STREAM_MODES:
            raise Unprocessable(
                f"Unknown stream_mode {mode!r}; expected one of {', '.join(_STREAM_MODES)}"
            )
    config = _merge_config(assistant.get("config") or {}, opt_dict(body, "config") or {})
    context = {**(assistant.get("context") or {}), **(opt_dict(body, "context") or {})}
    metadata = opt_dict(body, "metadata") or {}
    stamp = now_iso()
    return {
        "run_id": run_id or server.runs.new_run_id(),
        "thread_id": thread_id,
        "assistant_id": assistant_id,
        "metadata": {**metadata, "graph_id": graph_id, "assistant_id": assistant_id},
        "status": "pending",
        "kwargs": {
            "input": body.get("input"),
            "command": command,
            "config": config,
            "context": context,
            "stream_mode": stream_mode,
            "interrupt_before": _interrupt_nodes(body, "interrupt_before"),
            "interrupt_after": _interrupt_nodes(body, "interrupt_after"),
            "webhook": opt_str(body, "webhook"),
            "feedback_keys": body.get("feedback_keys"),
            "temporary": temporary,
            "subgraphs": opt_bool(body, "stream_subgraphs"),
            "resumable": opt_bool(body, "stream_resumable"),
            "checkpoint": opt_dict(body, "checkpoint"),
            "checkpoint_id": opt_str(body, "checkpoint_id"),
            "durability": opt_enum(body, "durability", ("sync", "async", "exit"), "async"),
            "on_disconnect": opt_enum(body, "on_disconnect", ("cancel", "continue"), "continue"),
        },
        "multitask_strategy": opt_enum(body, "multitask_strategy", _STRATEGIES, "enqueue"),
        "created_at": stamp,
        "updated_at": stamp,
    }


async def check_run_body(server: FathomServer, body: dict[str, Any]) -> None:
    """Raise the error `start_run` would answer for ``body`` (a cron checks its payload)."""
    await _parse(server, body, str(uuid.uuid4()), temporary=False)


async def start_run(
    server: FathomServer,
    body: dict[str, Any],
    thread_id: str | None,
    run_id: str | None = None,
    *,
    protocol_v2: bool = False,
) -> dict[str, Any]:
    """Validate ``body``, find or create the thread, and submit the run (as ``run_id``).

    The body is checked before any thread is created, so a bad request leaves nothing behind.
    ``protocol_v2`` (the thread-centric protocol's ``run.start``) streams the run's
    content-block ``messages`` and ``tools`` events (``execution.runner``).
    """
    if thread_id is None:
        run = await parse_stateless(server, body, run_id)
        return await submit_stateless(server, body, run)
    thread_id = check_id(thread_id, "thread")
    existing = await server.records.get_thread(thread_id)
    create = opt_enum(body, "if_not_exists", ("reject", "create"), "reject") == "create"
    if existing is None and not create:
        raise NotFound(f"Thread with ID {thread_id} not found")
    run = await _parse(server, body, thread_id, temporary=False, run_id=run_id)
    if protocol_v2:
        run["kwargs"]["protocol_v2"] = True
    thread = existing or await server.records.new_thread(thread_id, None)
    _inherit_thread_metadata(run, thread)
    return await server.runs.submit(run, thread)


async def parse_stateless(
    server: FathomServer, body: dict[str, Any], run_id: str | None = None
) -> dict[str, Any]:
    """Check a stateless run's ``body`` and build its run record; nothing is written yet."""
    on_completion = opt_enum(body, "on_completion", ("delete", "keep"), "delete")
    temporary = on_completion == "delete"
    return await _parse(server, body, str(uuid.uuid4()), temporary=temporary, run_id=run_id)


async def submit_stateless(
    server: FathomServer, body: dict[str, Any], run: dict[str, Any]
) -> dict[str, Any]:
    """Create the temporary thread of ``run`` (from :func:`parse_stateless`) and submit it."""
    thread = await server.records.new_thread(run["thread_id"], opt_dict(body, "metadata"))
    _inherit_thread_metadata(run, thread)
    return await server.runs.submit(run, thread)


def _inherit_thread_metadata(run: dict[str, Any], thread: dict[str, Any]) -> None:
    """Put the thread's metadata under the run's config metadata, as langgraph-api does.

    A graph reads who launched its thread (an async subagent's `parent_thread_id`, say) from
    its run config's metadata; the run's own metadata keys win.
    """
    inherited = thread.get("metadata") or {}
    if not inherited:
        return
    config = run["kwargs"]["config"]
    config["metadata"] = {**inherited, **(config.get("metadata") or {})}


def _location(run: dict[str, Any], stateless: bool) -> str:
    return (
        f"/runs/{run['run_id']}"
        if stateless
        else f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    )


async def _events(
    server: FathomServer,
    run: dict[str, Any],
    modes: list[str] | None,
    after: int,
    cancel_on_disconnect: bool,
) -> AsyncIterator[bytes]:
    stream = await server.runs.stream(run)
    if stream is None:
        return
    finished = False
    try:
        async for index, event, data in stream.listen(modes, after):
            yield frame(event, data, str(index))
        finished = True
    finally:
        if not finished and cancel_on_disconnect:
            await server.runs.cancel(run["run_id"])


# thread-scoped
async def create(request: Request) -> Response:
    """``POST /threads/{thread_id}/runs``: start a background run."""
    server = await server_of(request)
    run = await start_run(
        server, await read_json(request, allow_empty=False), request.path_params["thread_id"]
    )
    return json_response(run, headers={"Content-Location": _location(run, False)})


async def stream(request: Request) -> Response:
    """``POST /threads/{thread_id}/runs/stream``: start a run and stream its events."""
    server = await server_of(request)
    return await _stream(server, request, request.path_params["thread_id"], stateless=False)


async def _stream(
    server: FathomServer, request: Request, thread_id: str | None, *, stateless: bool
) -> Response:
    body = await read_json(request, allow_empty=False)
    run = await start_run(server, body, thread_id)
    cancel = run["kwargs"]["on_disconnect"] == "cancel"
    location = _location(run, stateless)
    return sse_response(
        _events(server, run, None, -1, cancel),
        {"Location": f"{location}/stream", "Content-Location": location},
    )


async def wait(request: Request) -> Response:
    """``POST /threads/{thread_id}/runs/wait``: start a run and answer its final values."""
    server = await server_of(request)
    return await _wait(server, request, request.path_params["thread_id"], stateless=False)


async def _wait(
    server: FathomServer, request: Request, thread_id: str | None, *, stateless: bool
) -> Response:
    run = await start_run(server, await read_json(request, allow_empty=False), thread_id)
    location = _location(run, stateless)
    output = await server.runs.output(run)
    return json_response(
        output, headers={"Location": f"{location}/join", "Content-Location": location}
    )


async def list_runs(request: Request) -> Response:
    """``GET /threads/{thread_id}/runs``: newest first; ``limit``, ``offset``, ``status``."""
    server = await server_of(request)
    thread = await server.thread(request.path_params["thread_id"])
    status = request.query_params.get("status")
    if status is not None and status not in _RUN_STATUSES:
        raise Unprocessable(f"Unknown run status {status!r}")
    limit, offset = query_int(request, "limit", 10), query_int(request, "offset", 0)
    runs = await server.records.list_runs(thread["thread_id"], status)
    return json_response(runs[offset : offset + limit])


async def _run(server: FathomServer, request: Request, scoped: bool) -> dict[str, Any]:
    thread_id = None
    if scoped:
        thread_id = (await server.thread(request.path_params["thread_id"]))["thread_id"]
    run_id = check_id(request.path_params["run_id"], "run")
    return await server.runs.get_run(thread_id, run_id)


async def get_run(request: Request) -> Response:
    """``GET /threads/{thread_id}/runs/{run_id}``."""
    server = await server_of(request)
    return json_response(await _run(server, request, "thread_id" in request.path_params))


async def join(request: Request) -> Response:
    """``GET .../runs/{run_id}/join``: wait for the run, answer the thread's final values."""
    server = await server_of(request)
    run = await _run(server, request, "thread_id" in request.path_params)
    return json_response(await server.runs.output(run))


async def join_stream(request: Request) -> Response:
    """``GET .../runs/{run_id}/stream``: replay and follow the run's events."""
    server = await server_of(request)
    run = await _run(server, request, "thread_id" in request.path_params)
    modes = query_modes(request, "stream_mode", _STREAM_MODES)
    after = last_event_index(request)
    cancel = query_bool(request, "cancel_on_disconnect")
    location = _location(run, "thread_id" not in request.path_params)
    return sse_response(
        _events(server, run, modes, after, cancel),
        {"Location": f"{location}/stream", "Content-Location": location},
    )


async def cancel(request: Request) -> Response:
    """``POST .../runs/{run_id}/cancel``: ``wait=1`` blocks until the run stopped."""
    server = await server_of(request)
    run = await _run(server, request, "thread_id" in request.path_params)
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise Unprocessable("'action' must be 'interrupt' or 'rollback'")
    if not await server.runs.cancel(run["run_id"], action):
        raise NotFound(
            f"Run {run['run_id']} is not active (status {run['status']}): nothing to cancel"
        )
    if query_bool(request, "wait"):
        await server.runs.wait(run["run_id"])
    return Response(status_code=202 if not query_bool(request, "wait") else 204)


async def delete(request: Request) -> Response:
    """``DELETE /threads/{thread_id}/runs/{run_id}``: an active run is cancelled first."""
    server = await server_of(request)
    run = await _run(server, request, True)
    if await server.runs.cancel(run["run_id"]):
        await server.runs.wait(run["run_id"])
    await server.records.delete_run(run["run_id"])
    return Response(status_code=204)


# stateless (and Agent Protocol POST /runs with thread_id in the body)
async def create_stateless(request: Request) -> Response:
    """``POST /runs``."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    thread_id = opt_str(body, "thread_id")
    run = await start_run(server, body, thread_id)
    return json_response(run, headers={"Content-Location": _location(run, thread_id is None)})


async def stream_stateless(request: Request) -> Response:
    """``POST /runs/stream``."""
    server = await server_of(request)
    body_thread = opt_str(await read_json(request, allow_empty=False), "thread_id")
    return await _stream(server, request, body_thread, stateless=body_thread is None)


async def wait_stateless(request: Request) -> Response:
    """``POST /runs/wait``."""
    server = await server_of(request)
    body_thread = opt_str(await read_json(request, allow_empty=False), "thread_id")
    return await _wait(server, request, body_thread, stateless=body_thread is None)


async def cancel_many(request: Request) -> Response:
    """``POST /runs/cancel``: ``status`` (pending|running|all, every thread), or ``thread_id``
    with ``run_ids``; as on langgraph-api, 404 when none of the chosen runs is active."""
    server = await server_of(request)
    body = await read_json(request)
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise Unprocessable("'action' must be 'interrupt' or 'rollback'")
    thread_id, run_ids = opt_str(body, "thread_id"), opt_str_list(body, "run_ids")
    status = opt_str(body, "status")
    if status is not None:
        status = opt_enum({"status": status.lower()}, "status", _CANCEL_STATUSES, "all")
        if thread_id is not None or run_ids is not None:
            raise Unprocessable(
                "Pass either 'status' (which cancels the runs of every thread) or "
                "'thread_id' with 'run_ids', not both"
            )
        wanted = ("pending", "running") if status == "all" else (status,)
        candidates = [r for s in wanted for r in await server.records.list_runs(status=s)]
    else:
        if thread_id is None or run_ids is None:
            raise Unprocessable("Pass 'status', or both 'thread_id' and 'run_ids'")
        ids = {check_id(run_id, "run") for run_id in run_ids}
        runs = await server.records.list_runs(check_id(thread_id, "thread"))
        candidates = [r for r in runs if r["run_id"] in ids]
    cancelled = 0
    for run in candidates:
        cancelled += await server.runs.cancel(run["run_id"], action)
    if not cancelled:
        raise NotFound("No active runs matched: they are unknown, finished or deleted")
    return Response(status_code=204)


routes = [
    Route("/threads/{thread_id}/runs", create, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/threads/{thread_id}/runs/stream", stream, methods=["POST"]),
    Route("/threads/{thread_id}/runs/wait", wait, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel, methods=["POST"]),
    Route("/runs", create_stateless, methods=["POST"]),
    Route("/runs/cancel", cancel_many, methods=["POST"]),
    Route("/runs/stream", stream_stateless, methods=["POST"]),
    Route("/runs/wait", wait_stateless, methods=["POST"]),
]
