"""``create_app``: fathom's Agent Protocol server as a Starlette ASGI app."""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from fathom.hosting.loopback import register_app
from fathom.server import (
    assistants,
    protocol_aliases,
    run_batch,
    runs,
    store_routes,
    stream_v2,
    system,
    thread_prune,
    thread_stream,
    threads,
    web,
)
from fathom.server import crons as cron_api
from fathom.server.context import FathomServer
from fathom.server.errors import (
    ApiError,
    api_error_handler,
    http_exception_handler,
    unhandled_error_handler,
)
from fathom.server.execution.cron_scheduler import CronScheduler
from fathom.server.execution.manager import RunManager
from fathom.server.graphs import GraphRegistry, GraphSource
from fathom.server.records import RecordStore

__all__ = ["create_app"]


def _security(
    api_key: str | None,
    cors_origins: Sequence[str],
    max_body_bytes: int,
    auth: Auth | None,
    loopback_token: str,
) -> list[Middleware]:
    from fathom.server.security import security_middleware

    middleware = security_middleware(
        api_key=api_key,
        cors_origins=cors_origins,
        max_body_bytes=max_body_bytes,
        loopback_token=loopback_token,
    )
    if auth is not None:  # inside CORS and the API key, outside the body limit
        from fathom.server.auth import AuthMiddleware

        guard = Middleware(AuthMiddleware, auth=auth, loopback_token=loopback_token)
        middleware.insert(len(middleware) - 1, guard)
    return middleware


def create_app(
    graphs: Mapping[str, GraphSource],
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    jobs: int = 10,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int = 10 * 1024 * 1024,
    routes: Sequence[BaseRoute] = (),
    replica_database: str | None = None,
    lease_seconds: float = 30.0,
    auth: Auth | None = None,
) -> Starlette:
    """An ASGI app serving ``graphs`` over the LangGraph Platform / Agent Protocol API.

    ``checkpointer`` and ``store`` default to in-memory ones; they are injected into every
    graph, and the store also keeps the server's thread and run records. ``jobs`` bounds how
    many runs execute at once. ``routes`` are more endpoints served beside the API, such as
    the other protocols' (``fathom.protocols.server_routes()``: A2A at
    ``/a2a/{assistant_id}``, which ``fathom serve`` always adds). The server object is
    ``app.state.fathom``.

    ``replica_database``, a PostgreSQL URL (the one ``checkpointer`` and ``store`` use), makes
    this server one of any number of replicas: runs go through a queue in that database, any
    replica claims them, and a dead replica's runs are resumed by another once their lease of
    ``lease_seconds`` expires (``fathom.server.execution.replicas``). Without it, this server
    runs its runs itself and must be the only one on its storage.

    ``auth``, a ``langgraph_sdk.Auth`` (``langgraph.json``'s ``auth.path``), names the caller
    of every request and decides what each caller may see and do (``fathom.server.auth``).
    With ``api_key`` too, the key is checked first, then ``auth``'s handlers run.
    """
    checkpointer = checkpointer if checkpointer is not None else InMemorySaver()
    store = store if store is not None else InMemoryStore()
    registry = GraphRegistry(graphs, checkpointer, store)
    queue = None
    if replica_database is not None:
        from fathom.server.execution.replicas import PostgresRunQueue

        queue = PostgresRunQueue(replica_database, lease_seconds=lease_seconds)
    # Replicas write each other's thread records: none may keep copies of them.
    records = RecordStore(store, cache_threads=queue is None)
    manager = RunManager(registry, records, checkpointer, jobs, queue)
    cron_store = cron_api.cron_store(store, replica_database)
    server = FathomServer(registry, checkpointer, store, records, manager, cron_store)
    scheduler = CronScheduler(cron_store, functools.partial(cron_api.fire, server))
    loopback_token = secrets.token_urlsafe(32)  # proves a call comes from this app's own runs

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.runs.start()
        await scheduler.start()  # crons fire while the server serves
        try:
            yield
        finally:
            # each runs, whatever fails, last pushed first: the crons stop, the runs end or
            # go back to the queue, and only then are the routes' own closers called
            async with contextlib.AsyncExitStack() as closing:
                for closer in server.closers:
                    closing.push_async_callback(closer)
                closing.push_async_callback(cron_store.close)
                closing.push_async_callback(server.runs.shutdown)
                closing.push_async_callback(scheduler.stop)

    app = Starlette(
        routes=[
            *system.routes,
            *assistants.routes,
            *threads.routes,
            *thread_prune.routes,
            *cron_api.routes,  # before runs' routes: /runs/crons is not a run id
            *thread_stream.routes,
            *stream_v2.routes,
            *runs.routes,
            *run_batch.routes,
            *protocol_aliases.routes,
            *store_routes.routes,
            *routes,
            *web.routes,  # the page at / and its files under /ui/
        ],
        middleware=_security(api_key, cors_origins, max_body_bytes, auth, loopback_token),
        exception_handlers={
            ApiError: api_error_handler,
            HTTPException: http_exception_handler,
            Exception: unhandled_error_handler,
        },
        lifespan=lifespan,
    )
    app.state.fathom = server
    app.state.loopback_token = loopback_token  # for in_process_client(app, loopback=True)
    register_app(app)  # its runs' async subagents without a url call it in process
    return app
