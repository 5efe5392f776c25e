"""The Agent Protocol specification's own paths, mapped onto the LangGraph-style routes.

``POST /runs`` (with ``thread_id`` in the body), ``/runs/wait`` and ``/runs/stream`` are served
by the stateless routes in :mod:`fathom.server.runs`. Here: runs addressed by id alone
(``GET /runs/{run_id}``, ``/wait``, ``/stream``, ``/cancel``), ``POST /runs/search`` and the
``/agents`` names for assistants.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server import assistants, runs
from fathom.server.auth.authorize import authorize
from fathom.server.auth.guards import run_visible
from fathom.server.context import server_of
from fathom.server.errors import json_response
from fathom.server.validation import opt_int, opt_str, read_json

__all__ = ["routes"]


async def search_runs(request: Request) -> Response:
    """``POST /runs/search``: ``thread_id``, ``status``, ``limit``, ``offset``."""
    server = await server_of(request)
    body = await read_json(request)
    found = await server.records.list_runs(opt_str(body, "thread_id"), opt_str(body, "status"))
    flt = await authorize(request, "threads", "read", {"thread_id": opt_str(body, "thread_id")})
    if flt is not None:
        threads = {r["thread_id"]: await server.records.get_thread(r["thread_id"]) for r in found}
        found = [r for r in found if run_visible(r, threads[r["thread_id"]], flt)]
    limit, offset = opt_int(body, "limit", 10), opt_int(body, "offset", 0)
    return json_response(found[offset : offset + limit])


routes = [
    Route("/runs/search", search_runs, methods=["POST"]),
    Route("/runs/{run_id}", runs.get_run, methods=["GET"]),
    Route("/runs/{run_id}/wait", runs.join, methods=["GET"]),
    Route("/runs/{run_id}/stream", runs.join_stream, methods=["GET"]),
    Route("/runs/{run_id}/cancel", runs.cancel, methods=["POST"]),
    Route("/agents/search", assistants.search, methods=["POST"]),
    Route("/agents/{assistant_id}", assistants.get_assistant, methods=["GET"]),
    Route("/agents/{assistant_id}/schemas", assistants.schemas, methods=["GET"]),
]
