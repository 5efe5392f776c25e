"""Run routes: create, stream (SSE), wait, get, list, join, join-stream, cancel, delete.

Stateful runs live under ``/threads/{thread_id}/runs``; stateless ones (``POST /runs``,
``/runs/wait``, ``/runs/stream``) get a temporary thread that is deleted when the run ends
(``on_completion="keep"`` keeps it). Those stateless routes also accept ``thread_id`` in the
body, which makes them the Agent Protocol's own ``POST /runs`` family.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.authorize import authorize, request_user
from fathom.server.auth.guards import run_visible, thread_visible, visible_thread
from fathom.server.auth.run_config import Identity, attach_identity
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


def _check_budget(config: dict[str, Any]) -> None:
    """Refuse a run whose `configurable.fathom_budget` (docs/budgets.md) is no budget."""
    caps = (config.get("configurable") or {}).get("fathom_budget")
    if caps is None:
        return
    from fathom.budget import BUDGET_KEY, Budget, BudgetError  # only for runs that set one

    try:
        Budget.from_mapping(caps, where=f"config.configurable.{BUDGET_KEY}")
    except BudgetError as error:
        raise Unprocessable(str(error)) from None


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
    _check_budget(config)
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
    request: HTTPConnection | None = None,
    identity: Identity | None = None,
    protocol_v2: bool = False,
) -> dict[str, Any]:
    """Validate ``body``, find or create the thread, and submit the run (as ``run_id``).

    The body is checked before any thread is created, so a bad request leaves nothing behind.
    With ``request`` and custom auth, the ``threads.create_run`` handler decides (a thread it
    filters out is a 404), and the caller's identity goes into the run's config. Without a
    request, ``identity`` (a cron's creator) is the one the run gets.
    ``protocol_v2`` (the thread-centric protocol's ``run.start``) streams the run's
    content-block ``messages`` and ``tools`` events (``execution.runner``).
    """
    if thread_id is None:
        parsed = await parse_stateless(server, body, run_id, request=request, identity=identity)
        return await submit_stateless(server, parsed)
    thread_id = check_id(thread_id, "thread")
    existing = await server.records.get_thread(thread_id)
    if_not_exists = opt_enum(body, "if_not_exists", ("reject", "create"), "reject")
    if existing is None and if_not_exists != "create":
        raise NotFound(f"Thread with ID {thread_id} not found")
    run = await _parse(server, body, thread_id, temporary=False, run_id=run_id)
    added = await _authorize_run(request, run, existing, if_not_exists)
    if protocol_v2:
        run["kwargs"]["protocol_v2"] = True
    thread = existing or await server.records.new_thread(thread_id, added or None)
    _attach_caller(run, request, identity)
    _inherit_thread_metadata(run, thread)
    return await server.runs.submit(run, thread)


@dataclasses.dataclass(frozen=True)
class StatelessRun:
    """A checked stateless run, not yet written: its record and its temporary thread's metadata."""

    run: dict[str, Any]
    thread_metadata: dict[str, Any] | None


async def parse_stateless(
    server: FathomServer,
    body: dict[str, Any],
    run_id: str | None = None,
    *,
    request: HTTPConnection | None = None,
    identity: Identity | None = None,
) -> StatelessRun:
    """Check a stateless run's ``body`` and build its run record; nothing is written yet.

    With ``request`` and custom auth, the ``threads.create_run`` handler has allowed it (or
    raised), and what it added to the metadata (an owner) is the temporary thread's too.
    """
    on_completion = opt_enum(body, "on_completion", ("delete", "keep"), "delete")
    temporary = on_completion == "delete"
    run = await _parse(server, body, str(uuid.uuid4()), temporary=temporary, run_id=run_id)
    added = await _authorize_run(request, run, None, "create")
    _attach_caller(run, request, identity)
    metadata = {**(opt_dict(body, "metadata") or {}), **added}
    return StatelessRun(run, metadata or None)


async def submit_stateless(server: FathomServer, parsed: StatelessRun) -> dict[str, Any]:
    """Create the temporary thread of a run from :func:`parse_stateless` and submit it."""
    run = parsed.run
    thread = await server.records.new_thread(run["thread_id"], parsed.thread_metadata)
    _inherit_thread_metadata(run, thread)
    return await server.runs.submit(run, thread)


def _attach_caller(
    run: dict[str, Any], request: HTTPConnection | None, identity: Identity | None
) -> None:
    """Put the request's caller (else ``identity``) into the run's config.

    A request from a client always goes through `attach_identity`, also without custom auth:
    the identity keys a client put in its config are dropped, so no caller can pass itself
    off as a user (``runtime.server_info.user``) that the server did not authenticate.
    """
    if request is not None:
        identity = request_user(request)
        attach_identity(run["kwargs"]["config"], identity)
    elif identity is not None:
        attach_identity(run["kwargs"]["config"], identity)


async def _authorize_run(
    request: HTTPConnection | None,
    run: dict[str, Any],
    thread: dict[str, Any] | None,
    if_not_exists: str,
) -> dict[str, Any]:
    """Run the ``threads.create_run`` handler; 404 if it filters out ``thread``.

    Answers the metadata keys the handler added to the run's (an owner), which a thread the
    run creates starts with, as langgraph-api does.
    """
    if request is None:
        return {}
    before = dict(run["metadata"])
    value = {**run, "if_not_exists": if_not_exists}
    flt = await authorize(request, "threads", "create_run", value)
    if thread is not None and not thread_visible(thread, flt):
        raise NotFound(f"Thread with ID {thread['thread_id']} not found")
    after = value.get("metadata")
    if not isinstance(after, dict):
        return {}
    run["metadata"] = after
    return {k: v for k, v in after.items() if k not in before or before[k] != v}


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
        server,
        await read_json(request, allow_empty=False),
        request.path_params["thread_id"],
        request=request,
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
    run = await start_run(server, body, thread_id, request=request)
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
    run = await start_run(
        server, await read_json(request, allow_empty=False), thread_id, request=request
    )
    location = _location(run, stateless)
    output = await server.runs.output(run)
    return json_response(
        output, headers={"Location": f"{location}/join", "Content-Location": location}
    )


async def list_runs(request: Request) -> Response:
    """``GET /threads/{thread_id}/runs``: newest first; ``limit``, ``offset``, ``status``."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    status = request.query_params.get("status")
    if status is not None and status not in _RUN_STATUSES:
        raise Unprocessable(f"Unknown run status {status!r}")
    limit, offset = query_int(request, "limit", 10), query_int(request, "offset", 0)
    runs = await server.records.list_runs(thread["thread_id"], status)
    return json_response(runs[offset : offset + limit])


async def _run(
    server: FathomServer, request: Request, scoped: bool, action: str = "read"
) -> dict[str, Any]:
    """The run; with custom auth, only if its thread's handler for ``action`` lets the caller."""
    thread_id = None
    if scoped:
        thread = await visible_thread(server, request, request.path_params["thread_id"], action)
        thread_id = thread["thread_id"]
    run_id = check_id(request.path_params["run_id"], "run")
    run = await server.runs.get_run(thread_id, run_id)
    if not scoped:
        value = {"thread_id": run["thread_id"], "run_id": run_id}
        flt = await authorize(request, "threads", action, value)
        if flt is not None and not run_visible(
            run, await server.records.get_thread(run["thread_id"]), flt
        ):
            raise NotFound(f"Run {run_id} not found")
    return run


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
    run = await _run(server, request, "thread_id" in request.path_params, "update")
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
    run = await _run(server, request, True, "delete")
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
    run = await start_run(server, body, thread_id, request=request)
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
    flt = await authorize(request, "threads", "update", {"thread_id": thread_id})
    cancelled = 0
    for run in candidates:
        if flt is not None and not run_visible(
            run, await server.records.get_thread(run["thread_id"]), flt
        ):
            continue  # another caller's run: as if it did not exist
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
