"""`fathom serve`: run the graphs of a `langgraph.json` as an Agent Protocol server.

It loads the deployment file, opens the storage (SQLite under the project's `.fathom/` unless
`--database` names a PostgreSQL, or `memory`: nothing survives a restart), builds the app with
`fathom.server.create_app`, and serves it with uvicorn, whose signal handling stops it cleanly
on Ctrl-C or SIGTERM. The project is the deployment file's folder.

Security by default: the server binds to loopback (127.0.0.1), where no key is needed. Binding to
any other address needs an API key (`--api-key` or `FATHOM_API_KEY`), which clients then send as
`x-api-key` or `Authorization: Bearer`; `fathom serve` refuses to start without one.

One process per SQLite storage: the server holds an exclusive lock on the SQLite folder while
it serves (`fathom.server.storage_lock`), so a second `fathom serve` on the same `.fathom/`
refuses to start instead of marking the first one's live runs `error`. With PostgreSQL,
`--workers N` serves one port from N processes: this process binds the port and supervises N
workers that each run the app on the inherited socket (`fathom.server.workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AsyncExitStack, ExitStack
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
    workers: int = 1
    """Processes serving the port; more than one needs a PostgreSQL `database`."""
    lease_seconds: float = 30.0
    """How long a server's hold on a running run lasts unless renewed (must be > 0)."""
    worker_command: tuple[str, ...] = ()
    """The command that runs one worker, to which the serve options are appended; needed
    for `workers` > 1 (`fathom serve` gives itself: each worker then has its routes)."""
    worker_socket: int | None = None
    """In a worker: the descriptor of the listening socket inherited from its parent."""
    worker_report: int | None = None
    """In a worker: the pipe on which it tells its parent, in one line, that it serves."""


def enabled_routes(
    routes: Sequence[BaseRoute], disabled: AbstractSet[str]
) -> tuple[BaseRoute, ...]:
    """``routes`` less those of the ``disabled`` protocols (``langgraph.json``'s
    ``http.disable_a2a``/``http.disable_mcp``): a protocol's routes are named after it,
    ``"mcp"`` or ``"a2a.<anything>"``."""

    def protocol(route: BaseRoute) -> str:
        return str(getattr(route, "name", "") or "").partition(".")[0]

    return tuple(route for route in routes if protocol(route) not in disabled)


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def _has_custom_auth(config: Path) -> bool:
    """Whether the deployment file names an `auth.path` (its handlers then guard every call)."""
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # load_deployment reports the file's problem
    auth = raw.get("auth") if isinstance(raw, dict) else None
    return isinstance(auth, dict) and isinstance(auth.get("path"), str)


def _check(options: ServeOptions) -> Path:
    """The deployment file; raises `ServeError` for options that must change."""
    guarded = _has_custom_auth(options.config or Path("langgraph.json"))
    if not options.api_key and not guarded and not is_loopback(options.host):
        raise ServeError(
            f"refusing to listen on {options.host} without an API key: anyone who can reach it "
            f"could run the graphs. Set one with --api-key KEY or {API_KEY_ENV}=KEY (clients "
            "send it as the x-api-key header), give langgraph.json an `auth` with handlers, "
            "or bind to 127.0.0.1."
        )
    if options.jobs < 1:
        raise ServeError(f"--jobs must be at least 1, not {options.jobs}")
    if not options.lease_seconds > 0:
        raise ServeError(f"--lease-seconds must be more than 0, not {options.lease_seconds}")
    _check_workers(options)
    if not 0 <= options.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, not {options.port}")
    config = options.config or Path("langgraph.json")
    if not config.is_file():
        hint = "" if options.config else " in the current directory; pass --config PATH"
        raise ServeError(f"no deployment file {config}{hint} (a langgraph.json with a `graphs` "
                         "section, as for `langgraph dev`)")  # fmt: skip
    return config.resolve()


def _check_auth(options: ServeOptions, auth: Any) -> None:
    """An `auth` without an authenticate handler names nobody, so it guards nothing."""
    if auth is None or options.api_key or is_loopback(options.host):
        return
    if getattr(auth, "_authenticate_handler", None) is None:
        raise ServeError(
            f"refusing to listen on {options.host}: langgraph.json's `auth` has no "
            "@auth.authenticate handler, so every caller would be let in. Add one, set "
            f"--api-key KEY or {API_KEY_ENV}=KEY, or bind to 127.0.0.1."
        )


def _check_workers(options: ServeOptions) -> None:
    if options.workers < 1:
        raise ServeError(f"--workers must be at least 1, not {options.workers}")
    if options.workers == 1:
        return
    if not (options.database or "").startswith(("postgresql://", "postgres://")):
        raise ServeError(f"--workers {options.workers} needs --database postgresql://...: "
                         "SQLite and memory storage belong to one process")  # fmt: skip
    if not options.worker_command:
        raise ServeError("workers > 1 needs ServeOptions.worker_command, the command that "
                         "runs one worker (`fathom serve` gives itself)")  # fmt: skip


def _url(server: Any, host: str, port: int) -> str:
    sockets = [s for srv in getattr(server, "servers", []) for s in srv.sockets]
    if sockets:
        port = int(sockets[0].getsockname()[1])
    return _shown_url(host, port)


def _shown_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _open_page(url: str) -> None:
    """Open the web page in the default browser (`webbrowser`); say so when none opens."""
    import webbrowser

    page = url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:") + "/"
    if not webbrowser.open(page):
        logger.warning("no browser could be opened; visit %s", page)


async def serve(options: ServeOptions) -> None:
    """Load, open, build and serve until uvicorn is told to stop (or supervise the workers).

    Raises `ServeError`, `DeploymentError` or `StorageError` for what the user must fix.
    """
    config_path = _check(options)  # before the imports: a refusal is quick
    if options.workers > 1:
        await _serve_workers(options, config_path)
    else:
        await _serve_one(options, config_path)


async def _serve_one(options: ServeOptions, config_path: Path) -> None:
    """Serve from this process: on its own port, or on a parent's socket as a worker."""
    import uvicorn

    from fathom.server.app import create_app
    from fathom.server.deployment import load_deployment
    from fathom.server.storage import open_storage
    from fathom.tracing import inline_hops

    inline_hops.install()  # this process is fathom's: LangSmith's untraced hops stay inline
    state_dir = config_path.parent / ".fathom"
    if options.worker_socket is not None:
        _stop_with_parent()
    async with AsyncExitStack() as stack:
        _lock_storage(stack, options.database, state_dir)  # before anything reads the storage
        deployment = load_deployment(config_path)
        _check_auth(options, deployment.auth)
        for line in deployment.ignored:
            print(f"fathom serve: {config_path.name}: {line}", file=sys.stderr)
        origins = tuple(dict.fromkeys((*deployment.cors_origins, *options.cors_origins)))
        storage = await stack.enter_async_context(open_storage(
            options.database, state_dir, index=deployment.store_index, ttl=deployment.store_ttl,
        ))  # fmt: skip
        app = create_app(
            deployment.graphs,
            checkpointer=storage.checkpointer,
            store=storage.store,
            jobs=options.jobs,
            api_key=options.api_key or None,
            cors_origins=origins,
            max_body_bytes=options.max_body_bytes,
            routes=enabled_routes(options.routes, deployment.disabled_protocols),
            replica_database=_postgres_url(options.database),
            lease_seconds=options.lease_seconds,
            auth=deployment.auth,
        )
        server = uvicorn.Server(uvicorn.Config(
            app, host=options.host, port=options.port, log_level=options.log_level,
            access_log=options.access_log, timeout_graceful_shutdown=10,
        ))  # fmt: skip
        task = asyncio.create_task(_serve_catching_exit(server, _inherited_sockets(options)))
        while not server.started and not task.done():
            await asyncio.sleep(0.05)
        if server.started and options.worker_report is not None:
            _report_serving(options.worker_report, list(deployment.graphs), storage.description)
        elif server.started:
            url = _url(server, options.host, options.port)
            await _announce(options, url, list(deployment.graphs), storage.description,
                            f"{options.jobs} jobs")  # fmt: skip
        exit_code = await task
        if not server.started or exit_code:
            raise ServeError(f"the server could not start on {options.host}:{options.port} "
                             "(see the error above); is the port in use?")  # fmt: skip


def _postgres_url(database: str | None) -> str | None:
    """The URL replicas share their run queue through: a PostgreSQL `--database`, else None."""
    if database and database.startswith(("postgresql://", "postgres://")):
        return database
    return None


def _lock_storage(stack: ExitStack | AsyncExitStack, database: str | None,
                  state_dir: Path) -> None:  # fmt: skip
    """Hold the SQLite folder's lock until `stack` closes; PostgreSQL and memory need none."""
    from fathom.server.storage import sqlite_folder
    from fathom.server.storage_lock import StorageInUse, hold_storage_lock

    folder = sqlite_folder(database, state_dir)
    if folder is None:
        return
    try:
        stack.enter_context(hold_storage_lock(folder))
    except StorageInUse as busy:
        holder = f" (pid {busy.holder})" if busy.holder else ""
        raise ServeError(
            f"another fathom serve{holder} is serving this storage, {folder}: SQLite storage "
            "belongs to one process. Stop it, or give each server its own storage "
            "(--database sqlite:///OTHER/FOLDER, or another project folder), or use "
            "--database postgresql://... to run several replicas.") from None  # fmt: skip
    except OSError as error:
        raise ServeError(f"cannot lock the state folder {folder}: {error}; pass "
                         "--database postgresql://... or run where it is writable"
                         ) from error  # fmt: skip


async def _announce(options: ServeOptions, url: str, graphs: Sequence[str], storage: str,
                    capacity: str) -> None:  # fmt: skip
    """Print the start-up line (and the memory notice), and open the browser if asked."""
    from fathom.server.storage import MEMORY

    key = "API key required" if options.api_key else "no API key (loopback only)"
    if _has_custom_auth(options.config or Path("langgraph.json")):
        key = f"{key.split(' (')[0]}, auth handlers from langgraph.json"
    out = options.out or sys.stdout
    print(f"fathom serve: {url} · graphs: {', '.join(graphs)} · storage: {storage} · "
          f"{capacity} · {key}", file=out, flush=True)  # fmt: skip
    if options.open_browser:
        await asyncio.to_thread(_open_page, url)
    if options.database == MEMORY:
        print("fathom serve: --database memory: threads, runs, checkpoints and store "
              "items live in this process only; nothing survives a restart",
              file=out, flush=True)  # fmt: skip


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
SUPERVISOR_ENV = "FATHOM_SUPERVISOR_PID"
"""Tells a worker its supervisor's pid, to notice a supervisor that died before it started."""


def _stop_with_parent() -> None:
    """Have the kernel send this worker SIGTERM when its parent dies, even by SIGKILL.

    Without it, workers of a killed `fathom serve --workers N` would go on serving its port
    unsupervised. SIGTERM stops a worker cleanly (with PostgreSQL its runs go back to the
    queue). Linux only; elsewhere a worker outlives a killed parent.
    """
    import ctypes
    import ctypes.util

    parent = int(os.environ.get(SUPERVISOR_ENV) or os.getppid())
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        logger.warning("this system cannot stop a worker when its parent dies")
    if os.getppid() != parent:  # the parent died before the request took effect
        raise ServeError("the supervising fathom serve exited before this worker started")


def _inherited_sockets(options: ServeOptions) -> list[socket.socket] | None:
    """In a worker, the parent's listening socket; None: uvicorn binds the port itself."""
    if options.worker_socket is None:
        return None
    return [socket.socket(fileno=options.worker_socket)]


def _report_serving(fd: int, graphs: list[str], storage: str) -> None:
    """Tell the parent that this worker serves: one JSON line on the pipe `fd`, then close it."""
    with os.fdopen(fd, "w", encoding="utf-8") as pipe:
        pipe.write(json.dumps({"graphs": graphs, "storage": storage}) + "\n")


async def _serve_workers(options: ServeOptions, config_path: Path) -> None:
    """Bind the port, start `options.workers` workers on it, and supervise them until a signal.

    A worker that dies after it served is replaced; one that fails to start stops them all
    and raises `ServeError`. SIGTERM or SIGINT stops every worker.
    """
    from fathom.server.workers import STOP_GRACE_S, WorkerFailed, WorkerPool

    with _listening_socket(options.host, options.port) as sock:
        port = int(sock.getsockname()[1])

        def command(socket_fd: int, report_fd: int) -> list[str]:
            return _worker_command(options, config_path, port, socket_fd, report_fd)

        env = {**os.environ, API_KEY_ENV: options.api_key or "", SUPERVISOR_ENV: str(os.getpid())}
        pool = WorkerPool(command, sock, options.workers, env=env)
        stop = asyncio.Event()
        with _stop_on_signals(stop):
            try:
                report = json.loads(await pool.start())
                capacity = f"{options.workers} workers × {options.jobs} jobs"
                await _announce(options, _shown_url(options.host, port), report["graphs"],
                                report["storage"], capacity)  # fmt: skip
                await pool.supervise(stop)
            except WorkerFailed as failed:
                raise ServeError(f"{failed} (see its error above); the server stopped"
                                 ) from None  # fmt: skip
            finally:
                await pool.stop(STOP_GRACE_S)


@contextlib.contextmanager
def _listening_socket(host: str, port: int) -> Iterator[socket.socket]:
    """A TCP socket bound to `host:port` and listening, closed on exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
            sock.listen(2048)
        except OSError as error:
            raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}; "
                             "is the port in use?") from error  # fmt: skip
        yield sock


def _worker_command(options: ServeOptions, config_path: Path, port: int, socket_fd: int,
                    report_fd: int) -> list[str]:  # fmt: skip
    """One worker's command line: `options.worker_command` and the options it serves with.

    The API key goes in the environment (`FATHOM_API_KEY`), where other users cannot read it.
    """
    args = [
        *options.worker_command, "--config", str(config_path), "--host", options.host,
        "--port", str(port), "--jobs", str(options.jobs), "--database", options.database or "",
        "--max-body-bytes", str(options.max_body_bytes), "--log-level", options.log_level,
        "--lease-seconds", repr(options.lease_seconds),
        "--worker-socket", str(socket_fd), "--worker-report", str(report_fd),
    ]  # fmt: skip
    for origin in options.cors_origins:
        args += ["--cors-origin", origin]
    if options.access_log:
        args.append("--access-log")
    return args


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set `stop` on SIGTERM or SIGINT while the block runs."""
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    try:
        yield
    finally:
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(number)


async def _serve_catching_exit(
    server: Any, sockets: list[socket.socket] | None
) -> int | str | None:
    """Run uvicorn's `serve`; its `sys.exit` on a failed start-up becomes the exit code.

    Uvicorn exits with `SystemExit` when it cannot bind or the app's start-up fails; raised
    inside a task, that would escape the event loop as an unretrieved task exception.
    """
    try:
        await server.serve(sockets=sockets)
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
