"""The thread-centric streaming protocol over HTTP, as langgraph-sdk's ``client.threads.stream``
uses it (its SSE transport; the WebSocket transport is not served).

* ``POST /threads/{thread_id}/commands``: one command ``{"id", "method", "params"}`` in, one
  response out: ``{"type": "success", "id", "result", "meta"}`` or ``{"type": "error", "id",
  "error", "message"}``. ``run.start`` (``assistant_id``, ``input``, ``config``, ``metadata``,
  ``multitask_strategy``) starts a run on the thread, creating the thread if needed;
  ``input.respond`` (``interrupt_id`` and ``response``, or ``responses``) resumes a thread
  waiting on ``interrupt()``. Such runs stream their subgraphs too (``stream_subgraphs``).
* ``POST /threads/{thread_id}/stream/events``: an SSE stream of protocol events for the body's
  ``channels`` (and optional ``namespaces``/``depth``): every kept event of the thread's
  runs, oldest run first, then the runs as they happen, until the client goes away. Events
  are numbered ``seq`` 1, 2, ... per connection in that order (the SSE ``id``), so ``since``
  (the last ``seq`` a client got) skips what it saw; the SDK also drops repeats by
  ``event_id``. A run started with ``run.start`` keeps its events (``stream_resumable``),
  its content-block ``messages`` and its ``tools`` events among them.

The run's events become protocol events in ``protocol_events``. With custom auth, the event
stream needs ``threads.read`` and both commands ``threads.create_run`` on the thread (a thread
the filter hides is unknown); the runs they start carry the caller's identity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.guards import visible_thread
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import ApiError, Unprocessable, json_response
from fathom.server.protocol_events import (
    CHANNELS,
    matches,
    protocol_event,
    run_end_events,
    subgraph_starts,
)
from fathom.server.runs import start_run
from fathom.server.serde import dumps, to_jsonable
from fathom.server.sse import frame, sse_response
from fathom.server.thread_stream import follow_thread
from fathom.server.validation import check_id

__all__ = ["routes"]

_RUN_MODES = ["values", "updates", "custom"]
_STRATEGIES = ("reject", "interrupt", "rollback", "enqueue")


def _success(command_id: int, result: dict[str, Any]) -> Response:
    return json_response(
        {"type": "success", "id": command_id, "result": result, "meta": {"applied_through_seq": 0}}
    )


def _error(command_id: int | None, code: str, message: str) -> Response:
    return json_response({"type": "error", "id": command_id, "error": code, "message": message})


async def _body(request: Request) -> Any:
    try:
        return orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise Unprocessable(f"Invalid JSON in request body: {exc}") from None


# commands
async def commands(request: Request) -> Response:
    """``POST /threads/{thread_id}/commands``: ``run.start`` and ``input.respond``."""
    server = await server_of(request)
    thread_id = check_id(request.path_params["thread_id"], "thread")
    command = await _body(request)
    if (
        not isinstance(command, dict)
        or not isinstance(command.get("id"), int)
        or not isinstance(command.get("method"), str)
    ):
        raise Unprocessable("A command is an object with an integer 'id' and a string 'method'")
    command_id: int = command["id"]
    params = command.get("params") or {}
    if not isinstance(params, dict):
        return _error(command_id, "invalid_argument", "'params' must be an object")
    method = command["method"]
    try:
        if method == "run.start":
            return _success(command_id, await _run_start(server, request, thread_id, params))
        if method == "input.respond":
            result = await _input_respond(server, request, thread_id, params)
            return _success(command_id, result)
    except ApiError as exc:
        code = "no_such_run" if exc.status == 404 else "invalid_argument"
        return _error(command_id, code, exc.detail)
    return _error(command_id, "unknown_command", f"Unknown protocol command: {method}")


def _run_body(params: dict[str, Any]) -> dict[str, Any]:
    assistant_id = params.get("assistant_id")
    if not isinstance(assistant_id, str) or not assistant_id:
        raise Unprocessable("run.start requires an 'assistant_id'")
    strategy = params.get("multitask_strategy", "enqueue")
    if strategy not in _STRATEGIES:
        raise Unprocessable(f"'multitask_strategy' must be one of {', '.join(_STRATEGIES)}")
    return {
        "assistant_id": assistant_id,
        "config": params.get("config"),
        "metadata": params.get("metadata"),
        "stream_mode": _RUN_MODES,
        "stream_subgraphs": True,
        "stream_resumable": True,
        "if_not_exists": "create",
        "multitask_strategy": strategy,
    }


async def _run_start(
    server: FathomServer, request: Request, thread_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Start a run on the thread as the caller (the ``threads.create_run`` handler decides)."""
    body = {**_run_body(params), "input": params.get("input")}
    run = await start_run(server, body, thread_id, request=request, protocol_v2=True)
    return {"run_id": run["run_id"]}


async def _input_respond(
    server: FathomServer, request: Request, thread_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Resume the thread's pending interrupts with a run as the caller (``threads.create_run``;
    a thread its filter hides is unknown before its state is read)."""
    entries = params.get("responses")
    if entries is None:
        entries = [params]
    if not isinstance(entries, list) or not entries:
        raise Unprocessable("input.respond needs 'interrupt_id' and 'response', or 'responses'")
    resume: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("interrupt_id"), str):
            raise Unprocessable("each response needs an 'interrupt_id' (a string)")
        resume[entry["interrupt_id"]] = entry.get("response")
    thread = await visible_thread(server, request, thread_id, "create_run")
    graph = await server.thread_graph(thread)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    state = await graph.aget_state(config)  # pyright: ignore[reportArgumentType]
    pending = {item.id for item in state.interrupts}
    unknown = sorted(set(resume) - pending)
    if unknown:
        raise Unprocessable(f"No pending interrupt {unknown[0]!r} on thread {thread_id}")
    assistant_id = params.get("assistant_id") or thread.get("metadata", {}).get("assistant_id")
    body = {**_run_body({**params, "assistant_id": assistant_id}), "command": {"resume": resume}}
    run = await start_run(server, body, thread_id, request=request, protocol_v2=True)
    return {"run_id": run["run_id"]}


# events
def _subscription(body: Any) -> tuple[list[str], list[list[str]] | None, int | None, int]:
    """``(channels, namespaces, depth, since)`` from a stream request body; 422 if bad."""
    if not isinstance(body, dict):
        raise Unprocessable("The body must be an object with 'channels'")
    channels = body.get("channels")
    if not isinstance(channels, list) or not channels:
        raise Unprocessable("'channels' is required: a non-empty list")
    for channel in channels:
        if not isinstance(channel, str) or not (
            channel in CHANNELS or channel.startswith("custom:")
        ):
            raise Unprocessable(
                f"Unknown channel {channel!r} in 'channels'; expected one of "
                f"{', '.join(CHANNELS)} or 'custom:<name>'"
            )
    namespaces = body.get("namespaces")
    if namespaces is not None and not (
        isinstance(namespaces, list)
        and all(isinstance(ns, list) and all(isinstance(s, str) for s in ns) for ns in namespaces)
    ):
        raise Unprocessable("'namespaces' must be a list of lists of strings")
    depth, since = body.get("depth"), body.get("since", 0)
    for name, value in (("depth", depth), ("since", since)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise Unprocessable(f"'{name}' must be a non-negative integer")
    return channels, namespaces or None, depth, since or 0


async def _interrupts(server: FathomServer, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The interrupts the thread waits on, if ``run_id`` is its newest run (they are its)."""
    thread = await server.records.get_thread(thread_id)
    if thread is None or thread.get("status") != "interrupted":
        return []
    newest = await server.records.list_runs(thread_id)
    if not newest or newest[0]["run_id"] != run_id:
        return []
    graph = await server.thread_graph(thread)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    state = await graph.aget_state(config)  # pyright: ignore[reportArgumentType]
    return [dict(to_jsonable(item)) for item in state.interrupts]


async def _protocol_events(server: FathomServer, thread_id: str) -> AsyncIterator[dict[str, Any]]:
    """The thread's protocol events, oldest run first, then live (no ``seq`` yet)."""
    failed: set[str] = set()
    started: dict[str, set[tuple[str, ...]]] = {}  # per run: the subgraphs seen
    async for item in follow_thread(server, thread_id, history=True):
        if item.run is None:
            continue
        run_id = item.run["run_id"]
        if item.kind == "run_done":
            interrupts = await _interrupts(server, thread_id, run_id)
            for event in run_end_events(run_id, item.run["status"], interrupts,
                                        run_id in failed):  # fmt: skip
                yield event
            failed.discard(run_id)
            started.pop(run_id, None)
            continue
        if item.event == "error":
            failed.add(run_id)
        event = protocol_event(run_id, item.index, item.event, item.data)
        if event is not None:
            for start in subgraph_starts(run_id, event, started.setdefault(run_id, set())):
                yield start
            yield event


async def _frames(
    server: FathomServer,
    thread_id: str,
    channels: Sequence[str],
    namespaces: Sequence[Sequence[str]] | None,
    depth: int | None,
    since: int,
) -> AsyncIterator[bytes]:
    seq = 0
    async for event in _protocol_events(server, thread_id):
        seq += 1
        if seq <= since or not matches(event, channels, namespaces, depth):
            continue
        event["seq"] = seq
        yield frame(event["method"], dumps(event), str(seq))


async def events(request: Request) -> Response:
    """``POST /threads/{thread_id}/stream/events``: the thread's protocol events (SSE)."""
    server = await server_of(request)
    channels, namespaces, depth, since = _subscription(await _body(request))
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    return sse_response(_frames(server, thread["thread_id"], channels, namespaces, depth, since))


routes = [
    Route("/threads/{thread_id}/commands", commands, methods=["POST"]),
    Route("/threads/{thread_id}/stream/events", events, methods=["POST"]),
]
