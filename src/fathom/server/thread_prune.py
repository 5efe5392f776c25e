"""``POST /threads/prune``: delete threads, or their old checkpoints, by id.

``strategy="delete"`` (the default) removes each thread as ``DELETE /threads/{id}`` does: its
active runs are cancelled and waited for, then its records and every checkpoint go.
``strategy="keep_latest"`` keeps the threads and drops all but the latest checkpoint of
each namespace, through the checkpointer's own ``aprune`` (LangGraph's PostgreSQL saver has
it, and it leaves alone what a running run saves meanwhile); on a checkpointer without one
(memory, SQLite) it is refused with 422 before anything changes, as ``langgraph dev`` refuses
it. Unknown thread ids are skipped, as on langgraph-api: ``pruned_count`` counts the threads
that existed. With custom auth, the ``threads.delete`` handler decides (False is 403), and a
thread its filter hides counts as unknown: it stays, and is not counted.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.authorize import authorize
from fathom.server.auth.guards import thread_visible
from fathom.server.context import server_of
from fathom.server.errors import Unprocessable, json_response
from fathom.server.threads import remove_thread
from fathom.server.validation import check_id, opt_enum, read_json

__all__ = ["routes"]


def _can_prune(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether the checkpointer implements ``aprune`` (the base class only raises)."""
    return type(saver).aprune is not BaseCheckpointSaver.aprune


async def prune(request: Request) -> Response:
    """``POST /threads/prune``: ``thread_ids`` and ``strategy``; answers ``pruned_count``."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    raw = body.get("thread_ids")
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise Unprocessable("'thread_ids' is required: a list of thread IDs")
    strategy = opt_enum(body, "strategy", ("delete", "keep_latest"), "delete")
    thread_ids = list(dict.fromkeys(check_id(t, "thread") for t in raw))
    if strategy == "keep_latest" and not _can_prune(server.checkpointer):
        raise Unprocessable(
            "strategy 'keep_latest' needs a checkpointer that prunes checkpoints; this "
            "server's storage does not (serve with --database postgresql://... for it)"
        )
    flt = await authorize(request, "threads", "delete", {"thread_ids": thread_ids})
    existing: list[str] = []
    for thread_id in thread_ids:
        thread = await server.records.get_thread(thread_id)
        if thread is not None and thread_visible(thread, flt):
            existing.append(thread_id)
    if not existing:
        return json_response({"pruned_count": 0})
    if strategy == "delete":
        for thread_id in existing:
            await remove_thread(server, thread_id)
    else:
        try:
            await server.checkpointer.aprune(existing, strategy="keep_latest")
        except NotImplementedError as exc:  # a thread with a DeltaChannel
            raise Unprocessable(f"Cannot keep only the latest checkpoints: {exc}") from None
    return json_response({"pruned_count": len(existing)})


routes = [Route("/threads/prune", prune, methods=["POST"])]
