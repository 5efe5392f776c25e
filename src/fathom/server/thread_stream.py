"""``GET /threads/{thread_id}/stream``: the events of a thread's runs, as they happen.

The stream follows the thread until the client goes away: each run of the thread that is
active when it joins or starts later, oldest first (a thread runs one at a time), from the
run's first event; after each run a ``metadata`` event ``{"status": "run_done", "run_id"}``;
and, for ``state_update``, a ``state_update`` event ``{"state", "thread_id"}`` after each
``POST /threads/{id}/state``. ``stream_mode`` (the SDK's name; ``stream_modes`` is
langgraph-api's) picks ``run_modes`` (the runs' events and ``run_done``; the default),
``lifecycle`` (only the runs' ``metadata`` start and ``run_done`` events) and ``state_update``.

Event ids are ``{run_id}:{index}`` (``{run_id}:done`` for ``run_done``); with one as
``Last-Event-ID`` the stream first goes on with that run after that event (when its events
are still kept), then follows the thread as above.

A run that starts on this server wakes the stream at once; on replicas the stream also looks
at the thread's runs once a second (``POLL_SECONDS``), for those started on other replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.guards import visible_thread
from fathom.server.context import FathomServer, server_of
from fathom.server.errors import Unprocessable
from fathom.server.serde import dumps
from fathom.server.sse import frame, sse_response
from fathom.server.stream_params import query_modes
from fathom.server.validation import check_id

__all__ = ["THREAD_STREAM_MODES", "ThreadItem", "follow_thread", "routes"]

THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
POLL_SECONDS = 1.0
"""How often the stream looks for runs started on other replicas (local ones wake it)."""
_DONE = "done"


def _wanted(event: str, modes: Collection[str]) -> bool:
    if event == "state_update":
        return "state_update" in modes
    return "run_modes" in modes or ("lifecycle" in modes and event == "metadata")


def _resume_point(request: Request) -> tuple[str, int] | None:
    """``(run_id, index)`` from ``Last-Event-ID`` (index -2 after ``run_done``), or None."""
    raw = (request.headers.get("last-event-id") or "").strip()
    if not raw:
        return None
    run_id, _, index = raw.rpartition(":")
    if not run_id or not (index.isdigit() or index == _DONE):
        raise Unprocessable(
            f"Invalid Last-Event-ID {raw!r}: thread stream ids are '{{run_id}}:{{index}}'"
        )
    return check_id(run_id, "run"), -2 if index == _DONE else int(index)


@dataclass(frozen=True)
class ThreadItem:
    """One thing a thread stream follows: a run's event, a run's end, or a state update."""

    kind: Literal["event", "run_done", "state_update"]
    run: dict[str, Any] | None
    """The run record (for ``event`` and ``run_done``; re-read at ``run_done``)."""
    index: int = -1
    event: str = ""
    data: bytes = b""
    value: Any = None
    """The ``state_update`` payload."""


async def _run_items(
    server: FathomServer, thread_id: str, run_id: str, after: int
) -> AsyncIterator[ThreadItem]:
    """One run of the thread after index ``after`` (-2: only its end), then its end."""
    run = await server.records.get_run(run_id)
    if run is None or run["thread_id"] != thread_id:
        return
    if after > -2:
        stream = await server.runs.stream(run)
        if stream is not None:
            async for index, event, data in stream.listen(None, after):
                yield ThreadItem("event", run, index, event, data)
        else:
            await server.runs.wait(run_id)
    yield ThreadItem("run_done", await server.records.get_run(run_id) or run)


async def _earlier_runs(server: FathomServer, thread_id: str) -> set[str]:
    """On replicas, the thread's runs that had ended when the stream joined (None needed on
    one server, where every run's start is told to the stream)."""
    if server.runs.queue is None:
        return set()
    ids = [run["run_id"] for run in await server.records.list_runs(thread_id)]
    active = set(await server.runs.active_runs(thread_id))
    return {run_id for run_id in ids if run_id not in active}


async def _runs_to_follow(server: FathomServer, thread_id: str, earlier: set[str]) -> list[str]:
    """The thread's active runs, oldest first; on replicas also every run created since the
    stream joined, since one on another replica can start and end between two looks."""
    active = await server.runs.active_runs(thread_id)
    if server.runs.queue is None:
        return active
    runs = reversed(await server.records.list_runs(thread_id))  # oldest first
    return list(dict.fromkeys([*(r["run_id"] for r in runs if r["run_id"] not in earlier),
                               *active]))  # fmt: skip


async def follow_thread(
    server: FathomServer,
    thread_id: str,
    *,
    resume: tuple[str, int] | None = None,
    history: bool = False,
) -> AsyncIterator[ThreadItem]:
    """Follow the thread until the caller stops: ``resume``'s run after its index first;
    with ``history``, every earlier run of the thread whose events are still kept, oldest
    first; then each run active now or started later, and the state updates."""
    seen: set[str] = set()
    with server.runs.thread_notes(thread_id) as notes:
        earlier = await _earlier_runs(server, thread_id)
        if resume is not None:
            seen.add(resume[0])
            async for item in _run_items(server, thread_id, resume[0], resume[1]):
                yield item
        if history:
            for run in reversed(await server.records.list_runs(thread_id)):
                if run["run_id"] in seen:
                    continue
                seen.add(run["run_id"])
                if await server.runs.stream(run) is not None:
                    async for item in _run_items(server, thread_id, run["run_id"], -1):
                        yield item
        while True:
            for run_id in await _runs_to_follow(server, thread_id, earlier):
                if run_id not in seen:
                    seen.add(run_id)
                    async for item in _run_items(server, thread_id, run_id, -1):
                        yield item
            note: tuple[str, Any] | None = None
            with contextlib.suppress(TimeoutError):
                note = await asyncio.wait_for(notes.get(), POLL_SECONDS)
            if note is None:
                continue
            kind, value = note
            if kind == "state_update":
                yield ThreadItem("state_update", None, value=value)
            elif kind == "run" and value not in seen:
                seen.add(value)
                async for item in _run_items(server, thread_id, value, -1):
                    yield item


async def _frames(
    server: FathomServer,
    thread_id: str,
    modes: Collection[str],
    resume: tuple[str, int] | None,
) -> AsyncIterator[bytes]:
    async for item in follow_thread(server, thread_id, resume=resume):
        if item.kind == "state_update":
            if "state_update" in modes:
                yield frame("state_update", dumps(item.value))
            continue
        assert item.run is not None
        run_id = item.run["run_id"]
        if item.kind == "run_done":
            if "run_modes" in modes or "lifecycle" in modes:
                done = dumps({"status": "run_done", "run_id": run_id})
                yield frame("metadata", done, f"{run_id}:{_DONE}")
        elif _wanted(item.event, modes):
            yield frame(item.event, item.data, f"{run_id}:{item.index}")


async def join(request: Request) -> Response:
    """``GET /threads/{thread_id}/stream``: follow the thread's runs (and state updates)."""
    server = await server_of(request)
    thread = await visible_thread(server, request, request.path_params["thread_id"])
    modes = (
        query_modes(request, "stream_mode", THREAD_STREAM_MODES)
        or query_modes(request, "stream_modes", THREAD_STREAM_MODES)
        or ["run_modes"]
    )
    resume = _resume_point(request)
    return sse_response(_frames(server, thread["thread_id"], modes, resume))


routes = [Route("/threads/{thread_id}/stream", join, methods=["GET"])]
