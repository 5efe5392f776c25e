"""The `fathom` command: an interactive agent in the current directory, and its subcommands.

    fathom                      talk to the agent (new thread; --resume continues the last)
    fathom run "task" [--json]  one task, then exit (non-zero on failure or pending approval)
    fathom run - / cmd | fathom the task from stdin (the whole input is one task)
    fathom --server URL         the same session on a thread of an Agent Protocol server
    fathom threads              list this project's threads
    fathom stats sticky         the repeated-request ratio over this project's threads (or a
                                server's, --url): how often a turn stays in its domain
    fathom calls THREAD         each model call of a thread: caller, messages, tools, tokens
                                and the new part of the prompt (--url: a server's thread)
    fathom tasks --thread ID    a supervisor thread's async subagent tasks, live from the
                                server (--open TASK shows one child thread)
    fathom demo [--server]      an offline end-to-end run with a scripted model (--server:
                                over HTTP, through `fathom serve`)
    fathom serve                serve a langgraph.json's graphs over the Agent Protocol
    fathom mcp serve            serve an agent as MCP tools (stdio or streamable HTTP)
    fathom acp                  serve the project agent to an editor over ACP (stdio;
                                --config langgraph.json --graph NAME: that graph instead)

Only the standard library is imported at start-up, so `fathom --help` is quick.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]

from fathom.cli.startup import (
    EXIT_APPROVAL,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    SetupError,
    auto_approved,
    build_session,
    fail,
    option,
    project_dir,
    thread_for,
)

SANDBOXES = ("none", "local", "bubblewrap")


def _common_options(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps an option given before the subcommand from being reset by the
    # subcommand's own default.
    s = argparse.SUPPRESS
    parser.add_argument("--model", default=s, metavar="PROVIDER:MODEL",
                        help='the model, e.g. "openai:gpt-4.1" (default: fathom.toml)')
    parser.add_argument("--thread", default=s, metavar="ID", help="use this thread")
    parser.add_argument("--resume", action="store_true", default=s,
                        help="continue the most recent thread")
    parser.add_argument("--sandbox", choices=SANDBOXES, default=s,
                        help="where shell commands run (default: fathom.toml, else none)")
    parser.add_argument("--auto-approve", action="append", default=s, metavar="TOOL[,TOOL]",
                        help="run these tools without asking (repeatable, comma-separated)")
    parser.add_argument("--plain", action="store_true", default=s,
                        help="plain line output, for dumb terminals and logs")
    parser.add_argument("--code", action="store_true", default=s,
                        help="give the agent `eval`: Python in a sandbox that can run "
                        "subagents and tools from code (see [code_interpreter] in fathom.toml)")
    parser.add_argument("--project", default=s, metavar="DIR",
                        help="the project directory (default: the current directory)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fathom",
        description="A deep agent in your terminal: it plans, works on the project's files, "
        "delegates to subagents and asks before it changes anything.",
        epilog="Configuration: fathom.toml in the project, ~/.fathom/config.toml for the user. "
        "Try it offline: fathom demo",
    )
    _common_options(parser)
    _attach_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", help="do one task and exit")
    _common_options(run)
    run.add_argument("task", nargs="?", default=None,
                     help='what to do; "-" (or none, with piped input) reads it from stdin')
    run.add_argument("--json", action="store_true", help="print the final state as JSON")
    threads = commands.add_parser("threads", help="list this project's threads")
    threads.add_argument("--project", default=argparse.SUPPRESS, metavar="DIR")
    _tasks_parser(commands)
    from fathom.cli.measure import add_calls_parser, add_stats_parser  # standard library only

    add_stats_parser(commands)
    add_calls_parser(commands)
    demo = commands.add_parser("demo", help="an offline end-to-end run (scripted model)")
    demo.add_argument("--plain", action="store_true", default=argparse.SUPPRESS)
    demo.add_argument("--server", action="store_true",
                      help="instead: serve a deep agent with `fathom serve` and stream one run "
                      "over HTTP with the LangGraph SDK")
    _serve_parser(commands)
    from fathom.cli.mcp import add_mcp_parser  # standard library only at import

    add_mcp_parser(commands)
    from fathom.cli.approve import add_approve_parser  # standard library only at import

    add_approve_parser(commands)
    _acp_parser(commands)
    return parser


def _attach_options(parser: argparse.ArgumentParser) -> None:
    """`--version`, and `--server`/`--assistant` for attaching to an Agent Protocol server."""
    from fathom.cli.scripting import VersionAction  # standard library only

    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--server", default=argparse.SUPPRESS, metavar="URL",
                        help="talk to a thread on this `fathom serve` (or any Agent Protocol "
                        "server) instead of running the agent here; with --thread ID, that one")
    parser.add_argument("--assistant", default=argparse.SUPPRESS, metavar="ID",
                        help="with --server: the assistant or graph to run (default: the "
                        "server's first)")


def _tasks_parser(commands: Any) -> None:
    tasks = commands.add_parser(
        "tasks", help="a supervisor thread's async subagent tasks and their live status",
        description="List the async subagent tasks a supervisor thread launched (its "
        "async_tasks), each with its status as the server reports it now; --open shows one "
        "child thread's conversation and what it waits for.",
    )  # fmt: skip
    tasks.add_argument("--thread", required=True, metavar="ID",
                       help="the supervisor's thread on the server")
    tasks.add_argument("--server", metavar="URL",
                       help="the server (default: $FATHOM_SERVER, else http://127.0.0.1:2024)")
    tasks.add_argument("--open", metavar="TASK",
                       help="show this task's child thread (a unique prefix of its id will do)")


def _serve_parser(commands: Any) -> None:
    serve = commands.add_parser(
        "serve", help="serve a langgraph.json's graphs over HTTP (Agent Protocol)",
        description="Run the graphs of a langgraph.json as an Agent Protocol server that the "
        "LangGraph SDK and LangChain's UIs can use. Binds to loopback with no key by default; "
        "another --host needs an API key.",
    )  # fmt: skip
    serve.add_argument("--config", metavar="PATH",
                       help="the deployment file (default: ./langgraph.json)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=2024, help="port (default: 2024)")
    serve.add_argument("--jobs", type=int, default=10,
                       help="runs executing at once; more wait in the queue (default: 10)")
    serve.add_argument("--workers", type=int, default=1,
                       help="processes serving the port; more than 1 needs --database "
                       "postgresql://... (default: 1)")
    serve.add_argument("--lease-seconds", type=float, default=30.0, metavar="SECONDS",
                       help="how long a server's hold on a running run lasts unless renewed "
                       "(default: 30)")
    serve.add_argument("--worker-socket", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--worker-report", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--database", metavar="URL",
                       help="postgresql://... for PostgreSQL, or memory (nothing survives a "
                       "restart) (default: SQLite in .fathom/ next to the deployment file)")
    serve.add_argument("--api-key", metavar="KEY",
                       help="require this key as x-api-key or Bearer (default: $FATHOM_API_KEY); "
                       "needed off loopback")
    serve.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="allow browser calls from this origin (repeatable; * for any)")
    serve.add_argument("--max-body-bytes", type=int, default=10 * 1024 * 1024,
                       help="largest request body accepted (default: 10 MiB)")
    serve.add_argument("--log-level", default="info",
                       choices=("critical", "error", "warning", "info", "debug"))
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument("--open", action="store_true", dest="open_browser",
                       help="open the web page (threads, runs, approvals) in a browser once up")


def _acp_parser(commands: Any) -> None:
    acp = commands.add_parser(
        "acp", help="serve the project agent to an editor over ACP (stdio)",
        description="Run the agent as an Agent Client Protocol agent on stdin/stdout, for "
        "editors such as Zed. Each session works on the project in its directory, with "
        "fathom.toml, memory, skills and subagents, and is kept as a thread. With --config, "
        "a graph of a langgraph.json is served instead.",
    )  # fmt: skip
    acp.add_argument("--model", default=argparse.SUPPRESS, metavar="PROVIDER:MODEL",
                     help="the model (default: fathom.toml)")
    acp.add_argument("--models", default="", metavar="M[,M]",
                     help="more models to offer in the editor's model picker")
    acp.add_argument("--sandbox", choices=SANDBOXES, default=argparse.SUPPRESS,
                     help="where shell commands run (default: fathom.toml, else none)")
    acp.add_argument("--auto-approve", action="append", default=argparse.SUPPRESS,
                     metavar="TOOL[,TOOL]", help="run these tools without asking")
    acp.add_argument("--config", default=None, metavar="PATH",
                     help="serve a graph of this langgraph.json instead of the project agent")
    acp.add_argument("--graph", default=None, metavar="NAME",
                     help="the graph of --config to serve (needed when it has several)")
    acp.add_argument("--log-level", default="warning",
                     choices=("critical", "error", "warning", "info", "debug"))


def _acp_graph_command(args: argparse.Namespace) -> int:
    """`fathom acp --config langgraph.json [--graph NAME]`: one graph over ACP."""
    import asyncio

    from fathom.project.threads import threads_db_path
    from fathom.protocols.acp import serve
    from fathom.protocols.acp.graph import GraphChoiceError, deployment_graph
    from fathom.server.deployment import DeploymentError

    project_only = [f"--{n}" for n in ("model", "sandbox") if option(args, n)]
    project_only += ["--models"] if args.models else []
    if project_only:
        print(f"fathom acp: {', '.join(project_only)} apply to the project agent only; a "
              "graph from --config brings its own model and tools", file=sys.stderr)
        return EXIT_USAGE
    path = Path(args.config).expanduser().resolve()
    try:
        name, graph = deployment_graph(path, args.graph)
    except (DeploymentError, GraphChoiceError) as error:
        print(f"fathom acp: {error}", file=sys.stderr)
        return EXIT_USAGE
    db_path = threads_db_path(path.parent, Path.home())
    try:
        asyncio.run(serve(graph, name=name, db_path=db_path,
                          auto_approve=tuple(auto_approved(args))))  # fmt: skip
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _acp_command(args: argparse.Namespace) -> int:
    import asyncio

    from fathom.protocols.acp import AcpOptions, serve_stdio

    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(levelname)s: %(name)s: %(message)s")  # fmt: skip
    if args.config is not None:
        return _acp_graph_command(args)
    if args.graph is not None:
        print("fathom acp: --graph names a graph of a langgraph.json; give it with --config "
              "PATH", file=sys.stderr)
        return EXIT_USAGE
    options = AcpOptions(
        model=option(args, "model"), sandbox=option(args, "sandbox"),
        models=tuple(m.strip() for m in args.models.split(",") if m.strip()),
        auto_approve=tuple(auto_approved(args)),
    )  # fmt: skip
    try:
        asyncio.run(serve_stdio(options))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _state_json(thread_id: str, result: Any) -> dict[str, Any]:
    from fathom.cli.approve import pending_calls_json as _pending_calls_json

    messages = []
    for message in result.values.get("messages", []):
        item: dict[str, Any] = {"role": message.type, "content": message.text}
        if getattr(message, "tool_calls", None):
            item["tool_calls"] = [
                {"name": call["name"], "args": call["args"], "id": call.get("id")}
                for call in message.tool_calls
            ]
        if message.type == "tool":
            item["name"] = message.name
            item["tool_call_id"] = message.tool_call_id
        messages.append(item)
    totals = result.usage.totals()
    return {
        "thread_id": thread_id,
        "status": result.status,
        "detail": result.detail,
        "answer": result.answer,
        "todos": result.values.get("todos", []),
        "files": sorted(result.values.get("files", {}) or {}),
        "messages": messages,
        "pending_approvals": _pending_calls_json(result.approvals),
        "usage": {
            "model_calls": sum(t.calls for t in totals.values()),
            "input_tokens": sum(t.input_tokens for t in totals.values()),
            "output_tokens": sum(t.output_tokens for t in totals.values()),
            "by_agent": {
                name: {"calls": t.calls, "input_tokens": t.input_tokens,
                       "output_tokens": t.output_tokens}
                for name, t in totals.items()
            },
        },
    }


def _run_command(args: argparse.Namespace) -> int:
    json_output = bool(args.json)
    try:
        session = build_session(args, json_output=json_output)
        thread_id, _ = thread_for(args, session)
    except SetupError as error:
        return fail(str(error))
    from fathom.cli.scripting import STDIN_TASK, ScriptingError, read_stdin_task
    from fathom.project.build import confinement

    if args.task == STDIN_TASK:
        try:
            args.task = read_stdin_task()
        except ScriptingError as error:
            return fail(str(error))
    # First line of the output, where progress goes: stderr when stdout holds the JSON.
    print(confinement(session.setup), file=sys.stderr if json_output else sys.stdout)
    pending = session.pending(thread_id)
    if pending:
        names = ", ".join(r.get("name", "?") for a in pending for r in a.action_requests)
        return fail(
            f"thread {thread_id} is waiting for approval of {names}; answer it with "
            f"`fathom --thread {thread_id}` (or `fathom approve {thread_id}`) before sending "
            "it more work",
            EXIT_APPROVAL,
        )
    result = session.run(thread_id, args.task)
    if json_output:
        print(json.dumps(_state_json(thread_id, result), ensure_ascii=False, default=str))
    elif result.answer and result.status == "done":
        print(result.answer)
    if result.status == "approval":
        names = ", ".join(r.get("name", "?") for a in result.approvals for r in a.action_requests)
        print(
            f"waiting for approval of {names} on thread {thread_id}. Answer it with "
            f"`fathom --thread {thread_id}`, or without a prompt with `fathom approve "
            f"{thread_id}` (--all / --reject REASON); or allow it up front with --auto-approve.",
            file=sys.stderr,
        )
        return EXIT_APPROVAL
    return {"done": EXIT_OK, "interrupted": EXIT_INTERRUPTED}.get(result.status, EXIT_FAILED)


def _threads_command(args: argparse.Namespace) -> int:
    from fathom.project.threads import ThreadIndex, threads_db_path

    project = project_dir(args)
    index = ThreadIndex(threads_db_path(project, Path.home()))
    threads = index.list()
    if not threads:
        print("no threads yet in this project; start one with `fathom`")
        return EXIT_OK
    print(f"{'thread':<10} {'last used':<17} {'model':<28} first message")
    for info in threads:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
        title = info.title if len(info.title) <= 60 else info.title[:59] + "…"
        print(f"{info.thread_id:<10} {when:<17} {info.model:<28} {title}")
    return EXIT_OK


def _tasks_command(args: argparse.Namespace) -> int:
    import asyncio

    import httpx

    from fathom.cli.tasks import (
        TaskLookupError,
        server_async_tasks,
        server_client,
        tasks_report,
    )

    client = server_client(args.server)
    where = str(client.http.client.base_url)

    async def report() -> str:
        tasks = await server_async_tasks(client, args.thread)
        return await tasks_report(client, tasks, args.open)

    try:
        text = asyncio.run(report())
    except TaskLookupError as error:
        return fail(str(error))
    except (httpx.HTTPError, ValueError) as error:  # down, refused or garbled: say so plainly
        if getattr(getattr(error, "response", None), "status_code", None) == 404:
            return fail(f"thread {args.thread} was not found on {where}", EXIT_FAILED)
        return fail(f"cannot read thread {args.thread} from {where}: {error}", EXIT_FAILED)
    print(text)
    return EXIT_OK


def _stats_command(args: argparse.Namespace) -> int:
    from fathom.cli.measure import stats_command

    return stats_command(args)


def _calls_command(args: argparse.Namespace) -> int:
    from fathom.cli.measure import calls_command

    return calls_command(args)


def _demo_command(args: argparse.Namespace) -> int:
    if args.server:
        from fathom.cli.demo_server import run_server_demo

        return run_server_demo()
    from fathom.cli.demo import run_demo

    return run_demo(plain=bool(option(args, "plain")))


def _serve_command(args: argparse.Namespace) -> int:
    from fathom.protocols import server_routes
    from fathom.server.serve import options_from_env, run_serve

    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(levelname)s:     %(name)s: %(message)s")  # fmt: skip
    return run_serve(options_from_env(
        config=Path(args.config) if args.config else None, host=args.host, port=args.port,
        jobs=args.jobs, workers=args.workers, lease_seconds=args.lease_seconds,
        worker_command=(sys.executable, "-m", "fathom.cli.main", "serve"),
        worker_socket=args.worker_socket, worker_report=args.worker_report,
        database=args.database, api_key=args.api_key,
        cors_origins=tuple(args.cors_origin), max_body_bytes=args.max_body_bytes,
        log_level=args.log_level, access_log=args.access_log, open_browser=args.open_browser,
        routes=tuple(server_routes()),
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `fathom` console script; returns the exit code.

    A closed stdout pipe (`fathom threads | head -1`) ends any command quietly with 141.
    """
    from fathom.cli.scripting import quiet_on_closed_pipe

    return quiet_on_closed_pipe(lambda: _dispatch(argv))


def _task_from_stdin(args: argparse.Namespace) -> None:
    """Mark the task as read from stdin (`STDIN_TASK`) for `fathom run` without a task and
    plain `fathom` when stdin is piped; the latter becomes `fathom run`. It is read once the
    session is set up (`_run_command`), so configuration errors come first. Raises
    `ScriptingError` for `fathom run` without a task at a terminal."""
    from fathom.cli.scripting import STDIN_TASK, ScriptingError, stdin_is_piped

    if args.command == "run" and args.task is None:
        if not stdin_is_piped():
            raise ScriptingError('fathom run needs a task: fathom run "what to do" '
                                 "(or pipe it in: echo \"what to do\" | fathom run -)")
        args.task = STDIN_TASK
    elif args.command is None and stdin_is_piped():  # runs it as `fathom run` would
        args.command, args.task, args.json = "run", STDIN_TASK, False


_COMMANDS: dict[str | None, Callable[[argparse.Namespace], int]] = {
    "run": _run_command,
    "threads": _threads_command,
    "tasks": _tasks_command,
    "stats": _stats_command,
    "calls": _calls_command,
    "demo": _demo_command,
    "serve": _serve_command,
    "acp": _acp_command,
}
"""The subcommands this module runs itself (`mcp` and `approve` load their own modules)."""


def _dispatch(argv: list[str] | None) -> int:
    from fathom.cli.scripting import ScriptingError, check_project

    args = _parser().parse_args(argv)
    problem = check_project(option(args, "project"))
    if problem:
        return fail(problem)
    if args.command is None and option(args, "server"):
        from fathom.cli.remote import attach

        return attach(args)
    try:
        _task_from_stdin(args)
    except ScriptingError as error:
        return fail(str(error))
    command = _COMMANDS.get(args.command)
    if command is not None:
        return command(args)
    if args.command == "mcp":
        from fathom.cli.mcp import mcp_command

        return mcp_command(args)
    if args.command == "approve":
        from fathom.cli.approve import approve_command

        return approve_command(args)
    from fathom.cli.interactive import interactive

    return interactive(args)


if __name__ == "__main__":
    sys.exit(main())
