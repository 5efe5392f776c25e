"""`fathom approve THREAD [--all | --reject REASON]`: answer a thread's pending approvals
without a prompt, for scripts (after `fathom run` exits 3) and for a second terminal.

Without `--all` or `--reject` it lists the calls waiting, each shown as at the prompt (a
diff for a file change, the command for `execute`), and exits 3. `--all` approves every
pending call, `--reject REASON` rejects every one with that reason for the model; then
the thread resumes and the outcome is printed, as `fathom run` prints it. New approvals
asked for by the resumed run are listed, never approved: nobody has seen them.

Only the standard library is imported here at start-up (`fathom --help` builds this
parser); the agent stack is imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_approve_parser", "approve_command", "pending_calls_json"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_APPROVAL = 3
EXIT_INTERRUPTED = 130


def add_approve_parser(commands: Any) -> None:
    """Add the `approve` subcommand to `fathom`'s subparsers."""
    s = argparse.SUPPRESS
    approve = commands.add_parser(
        "approve", help="answer a thread's pending approvals without a prompt",
        description="Show the tool calls a thread waits for (exit 3), or answer them all: "
        "--all approves every one, --reject REASON rejects every one and tells the model "
        "why. The thread then continues and its outcome is printed. Use the same "
        "--sandbox (and --model) as the run that asked.",
    )  # fmt: skip
    approve.add_argument("thread", metavar="THREAD", help="the thread (see `fathom threads`)")
    answer = approve.add_mutually_exclusive_group()
    answer.add_argument("--all", action="store_true", dest="approve_all",
                        help="approve every pending call")
    answer.add_argument("--reject", metavar="REASON",
                        help="reject every pending call, with this reason for the model")
    approve.add_argument("--project", default=s, metavar="DIR",
                         help="the project directory (default: the current directory)")
    approve.add_argument("--model", default=s, metavar="PROVIDER:MODEL",
                         help="the model that continues the thread (default: fathom.toml)")
    approve.add_argument("--sandbox", choices=("none", "local", "bubblewrap"), default=s,
                         help="where an approved command runs (default: fathom.toml, else none)")
    approve.add_argument("--plain", action="store_true", default=s,
                         help="plain line output, without colour")


def pending_calls_json(approvals: list[Any]) -> list[dict[str, Any]]:
    """Every pending tool call as JSON for scripts: the interrupt's id, the call's index in
    it, the tool, its arguments, its description and the decisions it allows."""
    from fathom.cli.approvals import allowed_decisions

    calls: list[dict[str, Any]] = []
    for approval in approvals:
        for index, request in enumerate(approval.action_requests):
            calls.append({
                "interrupt_id": approval.interrupt_id,
                "index": index,
                "name": request.get("name"),
                "args": request.get("args", {}),
                "description": request.get("description", ""),
                "allowed_decisions": allowed_decisions(approval, request),
            })  # fmt: skip
    return calls


def _names(approvals: list[Any]) -> str:
    return ", ".join(str(r.get("name", "?")) for a in approvals for r in a.action_requests)


def _show(approvals: list[Any], session: Any) -> None:
    from fathom.cli.approval_view import render_view, view_call
    from fathom.cli.approvals import reader_for, wants_colour

    reader = reader_for(session)
    color = wants_colour(session.display, sys.stdout)
    requests = [r for a in approvals for r in a.action_requests]
    for number, request in enumerate(requests, start=1):
        heading = ("approval needed" if len(requests) == 1
                   else f"approval needed ({number} of {len(requests)})")
        print(render_view(view_call(request, reader), heading=heading, color=color))


def _decisions(approvals: list[Any], decision: dict[str, Any]) -> dict[str, Any] | str:
    """The resume value giving `decision` to every call, or why a call does not allow it."""
    from fathom.cli.approvals import allowed_decisions

    resume: dict[str, Any] = {}
    for approval in approvals:
        for request in approval.action_requests:
            allowed = allowed_decisions(approval, request)
            if decision["type"] not in allowed:
                return (f"{request.get('name', '?')} does not allow {decision['type']} "
                        f"(it allows: {', '.join(allowed)}); answer it with "
                        "`fathom --thread ...` instead")
        resume[approval.interrupt_id] = {
            "decisions": [dict(decision) for _ in approval.action_requests]}
    return resume


def approve_command(args: argparse.Namespace) -> int:
    """Run `fathom approve`; the exit code (0 done, 1 failed, 2 usage, 3 still pending)."""
    from fathom.cli.startup import SetupError, build_session, fail, project_dir

    thread = str(args.thread)
    try:
        session = build_session(args)
    except SetupError as error:
        return fail(str(error))
    try:
        if session.threads.get(thread) is None:
            return fail(f"there is no thread {thread} in {project_dir(args)}; "
                         "`fathom threads` lists this project's threads", EXIT_USAGE)
        pending = session.pending(thread)
        if not pending:
            print(f"nothing is waiting for approval on thread {thread}")
            return EXIT_OK
        if not args.approve_all and args.reject is None:
            _show(pending, session)
            print(f"thread {thread} waits for approval of {_names(pending)}. Answer with "
                  f"`fathom approve {thread} --all` or `--reject REASON`, or at the prompt "
                  f"with `fathom --thread {thread}`.", file=sys.stderr)
            return EXIT_APPROVAL
        decision: dict[str, Any] = {"type": "approve"}
        if args.reject is not None:
            decision = {"type": "reject"}
            if args.reject.strip():
                decision["message"] = args.reject.strip()
        from fathom.cli.approvals import not_gated

        ungated = not_gated(pending, session)
        if ungated:
            return fail(ungated, EXIT_USAGE)
        resume = _decisions(pending, decision)
        if isinstance(resume, str):
            return fail(resume, EXIT_USAGE)
        done = "approved" if decision["type"] == "approve" else "rejected"
        print(f"{done}: {_names(pending)}")
        return _outcome(session, thread, session.run(thread, resume=resume))
    finally:
        session.close()


def _outcome(session: Any, thread: str, result: Any) -> int:
    if result.status == "done":
        if result.answer:
            print(result.answer)
        return EXIT_OK
    if result.status == "approval":
        _show(result.approvals, session)
        print(f"the thread continued and now waits for approval of {_names(result.approvals)}; "
              f"answer it with `fathom approve {thread}` (see above) or "
              f"`fathom --thread {thread}`", file=sys.stderr)
        return EXIT_APPROVAL
    if result.detail:
        print(result.detail, file=sys.stderr)
    return EXIT_INTERRUPTED if result.status == "interrupted" else EXIT_FAILED
