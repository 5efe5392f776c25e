"""The interactive `fathom` session: read a message or a slash command, run a turn, answer
its approvals, until /exit or Ctrl-D.

Lines are read by the line editor in a terminal, else by `input()` (`fathom.cli.line_editor`).
A line starting with `/` is a command (`fathom.cli.commands`) and never reaches the model;
`@path` mentions in a message attach the project's files (`fathom.cli.mentions`). The
status line (`fathom.cli.status_line`) is drawn under the prompt by the line editor, and
printed after each turn without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fathom.cli.approvals import NoTerminalForApproval, answer_approvals
from fathom.cli.startup import EXIT_APPROVAL, EXIT_OK, SetupError, build_session, fail, thread_for

__all__ = ["interactive"]


def interactive(args: argparse.Namespace) -> int:
    try:
        session = build_session(args)
        thread_id, existed = thread_for(args, session)
    except SetupError as error:
        return fail(str(error))
    state = "resumed" if existed else "new"
    from fathom.project.build import confinement

    print(f"fathom · {session.setup.model_name} · thread {thread_id} ({state}) · "
          f"{session.setup.project_dir}")
    print(confinement(session.setup))
    from fathom.cli.line_editor import use_line_editor

    keys = ("Enter sends, Alt-Enter adds a line, " if
            use_line_editor(plain=bool(getattr(args, "plain", False))) else "")
    print(f"/help lists the commands; {keys}@path attaches a file. Ctrl-C stops a run, "
          "Ctrl-D or /exit leaves.")
    if existed:  # where the thread left off: its last exchange and open todos
        from fathom.cli.recap import thread_recap

        recap = thread_recap(session.values(thread_id))
        if recap:
            print(recap)
    try:
        return _talk(args, session, thread_id, existed)
    except NoTerminalForApproval:
        return EXIT_APPROVAL


def _project_dir(args: argparse.Namespace, session: Any) -> Path:
    """The folder whose files `@path` names and whose `.fathom/history` keeps the prompt's
    history: the session's project, or (attached to a server) `--project` or here."""
    project = getattr(getattr(session, "setup", None), "project_dir", None)
    return Path(project or getattr(args, "project", None) or Path.cwd()).resolve()


def _talk(args: argparse.Namespace, session: Any, thread_id: str, existed: bool) -> int:
    """The interactive loop: read a message, run a turn, answer its approvals."""
    from fathom.cli.commands import COMMANDS, CommandContext, is_command, message_text
    from fathom.cli.line_editor import make_reader, use_line_editor
    from fathom.cli.mentions import MentionError, attach_mentions
    from fathom.cli.status_line import status_line

    project = _project_dir(args, session)
    plain = bool(getattr(args, "plain", False))
    reader = make_reader(project, COMMANDS, plain=plain)
    # the status line: under the prompt in the line editor, else printed after each turn
    toolbar = use_line_editor(plain=plain)

    def answer(approvals: list[Any]) -> None:
        # Keys the editor read ahead were typed before the question: never an answer.
        reader.discard_typeahead()
        answer_approvals(session, thread_id, approvals)

    if existed:
        pending = session.pending(thread_id)
        if pending:
            answer(pending)
    while True:
        session.display.pause()
        try:
            text = reader.read("› ", status=status_line(session, thread_id) if toolbar else None)
        except EOFError:
            print()
            return EXIT_OK
        except KeyboardInterrupt:
            print("\n(Ctrl-D or /exit to leave)")
            continue
        text = text.strip()
        if not text:
            continue
        if is_command(text):
            ctx = CommandContext(session, args, thread_id)
            COMMANDS.run(ctx, text)
            if ctx.leaving:
                return EXIT_OK
            if ctx.thread_id != thread_id:
                thread_id = ctx.thread_id
                pending = session.pending(thread_id)
                if pending:
                    answer(pending)
            continue
        try:
            attached = attach_mentions(message_text(text), project)
        except MentionError as error:
            print(f"{error}; nothing was sent")
            continue
        for note in attached.notes:
            print(note)
        pending = session.pending(thread_id)
        if pending:  # e.g. left by Ctrl-C at the approval prompt: answer it first
            print("an approval from the last run is still waiting; answer it first")
            answer(pending)
            if session.pending(thread_id):
                print("your message was not sent; it goes once the approval is answered")
                continue
        result = session.run(thread_id, attached.message)
        if result.status == "approval":
            answer(result.approvals)
        if not toolbar:
            print(f"── {status_line(session, thread_id)}", flush=True)
