"""The interactive `fathom` session: read a message or a slash command, run a turn, answer
its approvals, until /exit or Ctrl-D."""

from __future__ import annotations

import argparse
from typing import Any

from fathom.cli import main as cli_main
from fathom.cli.approvals import NoTerminalForApproval, answer_approvals
from fathom.cli.main import EXIT_APPROVAL, EXIT_OK, SetupError, _fail, _session, _thread_for

__all__ = ["interactive"]


def _local_tasks(session: Any, thread_id: str, ref: str) -> None:
    """`/tasks [TASK]`: this thread's async tasks, refreshed from `$FATHOM_SERVER`."""
    import asyncio

    from fathom.cli.tasks import TaskLookupError, local_async_tasks, server_client, tasks_report

    async def report() -> str:
        tasks = await local_async_tasks(session.db_path, thread_id)
        if not tasks:
            return "no async tasks on this thread"
        return await tasks_report(server_client(None), tasks, ref or None)

    try:
        print(asyncio.run(report()))
    except TaskLookupError as error:
        print(error)


HELP = ("commands: /threads  /tasks [TASK] (async subagent tasks)  /mcp (MCP servers and "
        "tools)  /new (start a new thread)  "
        "/exit (or Ctrl-D).  Ctrl-C stops a run.")


def interactive(args: argparse.Namespace) -> int:
    try:
        session = _session(args)
        thread_id, existed = _thread_for(args, session)
    except SetupError as error:
        return _fail(str(error))
    state = "resumed" if existed else "new"
    from fathom.cli.build import confinement

    print(f"fathom · {session.setup.model_name} · thread {thread_id} ({state}) · "
          f"{session.setup.project_dir}")
    print(confinement(session.setup))
    print(HELP)
    try:
        return _talk(args, session, thread_id, existed)
    except NoTerminalForApproval:
        return EXIT_APPROVAL


def _talk(args: argparse.Namespace, session: Any, thread_id: str, existed: bool) -> int:
    """The interactive loop: read a message, run a turn, answer its approvals."""
    if existed:
        pending = session.pending(thread_id)
        if pending:
            answer_approvals(session, thread_id, pending)
    while True:
        session.display.pause()
        try:
            text = input("› ")
        except EOFError:
            print()
            return EXIT_OK
        except KeyboardInterrupt:
            print("\n(Ctrl-D or /exit to leave)")
            continue
        text = text.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return EXIT_OK
        if text == "/help":
            print(HELP)
            continue
        if text == "/threads":
            cli_main._threads_command(args)
            continue
        if text == "/tasks" or text.startswith("/tasks "):
            _local_tasks(session, thread_id, text.removeprefix("/tasks").strip())
            continue
        if text == "/mcp":
            from fathom.cli.mcp import mcp_report

            print(mcp_report(session.setup.mcp))
            continue
        if text == "/new":
            thread_id = session.threads.new_thread_id()
            print(f"new thread {thread_id}")
            continue
        pending = session.pending(thread_id)
        if pending:  # e.g. left by Ctrl-C at the approval prompt: answer it first
            print("an approval from the last run is still waiting; answer it first")
            answer_approvals(session, thread_id, pending)
            if session.pending(thread_id):
                print("your message was not sent; it goes once the approval is answered")
                continue
        result = session.run(thread_id, text)
        if result.status == "approval":
            answer_approvals(session, thread_id, result.approvals)
