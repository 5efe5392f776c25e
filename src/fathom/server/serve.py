"""`fathom serve`: run the graphs of a `langgraph.json` as an Agent Protocol server.

It loads the deployment file, opens the storage (SQLite under the project's `.fathom/` unless
`--database` names a PostgreSQL, or `memory`: nothing survives a restart), builds the app with
`fathom.server.create_app`, and serves it with uvicorn, whose signal handling stops it cleanly
on Ctrl-C or SIGTERM. The project is the deployment file's folder.

Security by default: the server binds to loopback (127.0.0.1), where no key is needed. Binding to
any other address needs an API key (`--api-key` or `FATHOM_API_KEY`), which clients then send as
`x-api-key` or `Authorization: Bearer`; `fathom serve` refuses to start without one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from starlette.routing import BaseRoute

from fathom.errors import FathomError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "ServeError",
    "ServeOptions",
    "is_loopback",
    "options_from_env",
    "run_serve",
    "serve",
]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2024
"""The port `langgraph dev` uses, so clients and UIs configured for it find this server."""
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
API_KEY_ENV = "FATHOM_API_KEY"
EXIT_USAGE = 2


class ServeError(FathomError):
    """The server cannot start as asked; the message says what to change."""


@dataclass(frozen=True)
class ServeOptions:
    """What `fathom serve` was asked for (see `fathom serve --help`)."""

    config: Path | None = None
    """The deployment file; None: `./langgraph.json`."""
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    jobs: int = 10
    database: str | None = None
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_level: str = "info"
    access_log: bool = False
    open_browser: bool = False
    """Open the web page (`/`) in the default browser once the server listens."""
    out: TextIO | None = field(default=None, repr=False)
    """Where the start-up line goes; None: standard output."""
    routes: tuple[BaseRoute, ...] = field(default=(), repr=False)
    """More endpoints beside the API (the `fathom` command adds the other protocols')."""


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def _check(options: ServeOptions) -> Path:
    """The deployment file; raises `ServeError` for options that must change."""
    if not options.api_key and not is_loopback(options.host):
        raise ServeError(
            f"refusing to listen on {options.host} without an API key: anyone who can reach it "
            f"could run the graphs. Set one with --api-key KEY or {API_KEY_ENV}=KEY (clients "
            "send it as the x-api-key header), or bind to 127.0.0.1."
        )
    if options.jobs < 1:
        raise ServeError(f"--jobs must be at least 1, not {options.jobs}")
    if not 0 <= options.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, not {options.port}")
    config = options.config or Path("langgraph.json")
    if not config.is_file():
        hint = "" if options.config else " in the current directory; pass --config PATH"
        raise ServeError(f"no deployment file {config}{hint} (a langgraph.json with a `graphs` "
                         "section, as for `langgraph dev`)")  # fmt: skip
    return config.resolve()


def _url(server: Any, host: str, port: int) -> str:
    sockets = [s for srv in getattr(server, "servers", []) for s in srv.sockets]
    if sockets:
        port = int(sockets[0].getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _open_page(url: str) -> None:
    """Open the web page in the default browser (`webbrowser`); say so when none opens."""
    import webbrowser

    page = url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:") + "/"
    if not webbrowser.open(page):
        logger.warning("no browser could be opened; visit %s", page)


async def serve(options: ServeOptions) -> None:
    """Load, open, build and serve until uvicorn is told to stop.

    Raises `ServeError`, `DeploymentError` or `StorageError` for what the user must fix.
    """
    config_path = _check(options)  # before the imports: a refusal is quick

    import uvicorn

    from fathom.server.app import create_app
    from fathom.server.deployment import load_deployment
    from fathom.server.storage import MEMORY, open_storage

    deployment = load_deployment(config_path)
    for line in deployment.ignored:
        print(f"fathom serve: {config_path.name}: {line}", file=sys.stderr)
    origins = tuple(dict.fromkeys((*deployment.cors_origins, *options.cors_origins)))
    state_dir = config_path.parent / ".fathom"
    async with open_storage(options.database, state_dir, index=deployment.store_index,
                            ttl=deployment.store_ttl) as storage:  # fmt: skip
        app = create_app(
            deployment.graphs,
            checkpointer=storage.checkpointer,
            store=storage.store,
            jobs=options.jobs,
            api_key=options.api_key or None,
            cors_origins=origins,
            max_body_bytes=options.max_body_bytes,
            routes=options.routes,
            replica_database=_postgres_url(options.database),
        )
        server = uvicorn.Server(uvicorn.Config(
            app, host=options.host, port=options.port, log_level=options.log_level,
            access_log=options.access_log, timeout_graceful_shutdown=10,
        ))  # fmt: skip
        task = asyncio.create_task(_serve_catching_exit(server))
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if server.started:
            key = "API key required" if options.api_key else "no API key (loopback only)"
            print(f"fathom serve: {_url(server, options.host, options.port)} · graphs: "
                  f"{', '.join(deployment.graphs)} · storage: {storage.description} · "
                  f"{options.jobs} jobs · {key}",
                  file=options.out or sys.stdout, flush=True)  # fmt: skip
            if options.open_browser:
                await asyncio.to_thread(_open_page, _url(server, options.host, options.port))
            if options.database == MEMORY:
                print("fathom serve: --database memory: threads, runs, checkpoints and store "
                      "items live in this process only; nothing survives a restart",
                      file=options.out or sys.stdout, flush=True)  # fmt: skip
        exit_code = await task
        if not server.started or exit_code:
            raise ServeError(f"the server could not start on {options.host}:{options.port} "
                             "(see the error above); is the port in use?")  # fmt: skip


def _postgres_url(database: str | None) -> str | None:
    """The URL replicas share their run queue through: a PostgreSQL `--database`, else None."""
    if database and database.startswith(("postgresql://", "postgres://")):
        return database
    return None


async def _serve_catching_exit(server: Any) -> int | str | None:
    """Run uvicorn's `serve`; its `sys.exit` on a failed start-up becomes the exit code.

    Uvicorn exits with `SystemExit` when it cannot bind or the app's start-up fails; raised
    inside a task, that would escape the event loop as an unretrieved task exception.
    """
    try:
        await server.serve()
    except SystemExit as stop:
        return stop.code or 1
    return None


def run_serve(options: ServeOptions) -> int:
    """Run `serve` to its end and return the exit code; user errors print one message."""
    from fathom.server.deployment import DeploymentError
    from fathom.server.storage import StorageError

    try:
        asyncio.run(serve(options))
    except (ServeError, DeploymentError, StorageError) as error:
        print(f"fathom serve: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn already shut down cleanly
    except SystemExit as stop:  # uvicorn exits this way when the app's start-up fails
        print("fathom serve: the server did not start (see the error above)", file=sys.stderr)
        return stop.code if isinstance(stop.code, int) and stop.code else 1
    return 0


def options_from_env(**given: Any) -> ServeOptions:
    """`ServeOptions` with the API key taken from `FATHOM_API_KEY` when none is given."""
    if not given.get("api_key"):
        given["api_key"] = os.environ.get(API_KEY_ENV) or None
    return ServeOptions(**given)
