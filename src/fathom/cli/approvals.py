"""Answering approval requests at the prompt: approve, edit the arguments, or reject.

Arguments are edited in `$EDITOR` when it is set (as a JSON file), otherwise inline as
JSON. A reject may carry a reason, which the model receives in place of the tool's result.

An answer counts only when it is typed after its question is shown (`ask_after_prompt`):
text typed ahead while the agent worked, or a pasted block whose next line happens to be
`y`, must not approve a call the person never saw. So pending terminal input is discarded
just before the question is shown, and an answer that arrives together with more text (a
paste) is refused and asked again. When stdin is not a terminal the command does not ask
at all (see `fathom.cli.main`): lines in a pipe were written before any question.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TextIO

from fathom.cli.session import PendingApproval

__all__ = [
    "NoTerminalForApproval",
    "answer_approvals",
    "ask_after_prompt",
    "ask_decisions",
    "discard_pending_input",
    "stdin_is_terminal",
]

Ask = Callable[[str], str]

CHOICES = {"approve": "y", "edit": "e", "reject": "n"}


def _stdin_fd() -> int | None:
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # replaced or closed stdin
        return None
    return fd if os.isatty(fd) else None


def stdin_is_terminal() -> bool:
    """Whether standard input is a terminal, where a person can answer an approval."""
    return _stdin_fd() is not None


def discard_pending_input() -> None:
    """Throw away terminal input that was typed or pasted but not read yet.

    Only a terminal is flushed (`tcflush(TCIFLUSH)`); a pipe or file is left alone. Nothing
    is buffered above the terminal: in canonical mode each `read` returns at most one line,
    and `input()` consumes the whole line it gets, so everything unread is still in the
    terminal's queue.
    """
    fd = _stdin_fd()
    if fd is None:
        return
    try:
        import termios
    except ImportError:  # pragma: no cover - not POSIX
        return
    with contextlib.suppress(termios.error):  # not a real terminal after all
        termios.tcflush(fd, termios.TCIFLUSH)


def _input_pending() -> bool:
    fd = _stdin_fd()
    if fd is None:
        return False
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):  # pragma: no cover
        return False


def ask_after_prompt(prompt: str) -> str:
    """Ask `prompt` on the terminal and return the line typed after it appeared.

    Pending input is discarded, then the prompt is shown and one line is read: in that
    order, a key pressed in answer to the prompt can never be discarded. If more input is
    already waiting right after that line, the line came with a paste rather than from a
    key pressed in answer; it is refused and the question asked again. KeyboardInterrupt
    and EOFError propagate.
    """
    while True:
        discard_pending_input()
        sys.stdout.write(prompt)
        sys.stdout.flush()
        answer = input()
        if not _input_pending():
            return answer
        discard_pending_input()
        sys.stdout.write(
            "\nthat answer arrived together with more text (a paste?), so it was not used; "
            "type the answer again\n"
        )


def _show(request: dict[str, Any], out: TextIO) -> None:
    args = json.dumps(request.get("args", {}), indent=2, ensure_ascii=False)
    if len(args) > 2000:
        args = args[:2000] + "\n… (cut; edit to see all)"
    out.write(f"\napproval needed: {request.get('name', '?')}\n")
    for line in args.splitlines():
        out.write(f"  {line}\n")
    out.flush()


def _edit_in_editor(editor: str, args: dict[str, Any]) -> str:
    with tempfile.NamedTemporaryFile(
        "w", suffix=".json", prefix="fathom-args-", delete=False, encoding="utf-8"
    ) as handle:
        json.dump(args, handle, indent=2, ensure_ascii=False)
        path = handle.name
    try:
        subprocess.run([*shlex.split(editor), path], check=False)
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    finally:
        os.unlink(path)


def _edited_args(
    args: dict[str, Any], ask: Ask, out: TextIO, editor: str | None
) -> dict[str, Any] | None:
    """New arguments from the editor or the prompt; `None` when the person gives up."""
    while True:
        if editor:
            text = _edit_in_editor(editor, args)
        else:
            text = ask("new arguments as JSON (empty keeps them): ")
            if not text.strip():
                return args
        try:
            edited = json.loads(text)
        except json.JSONDecodeError as error:
            out.write(f"not valid JSON ({error}); try again or leave it empty\n")
        else:
            if isinstance(edited, dict):
                return edited
            out.write("the arguments must be a JSON object such as {\"file_path\": \"/a.md\"}\n")
        if editor and ask("edit again? [Y/n] ").strip().lower() in ("n", "no"):
            return None


def _decide(request: dict[str, Any], allowed: list[str], ask: Ask, out: TextIO,
            editor: str | None) -> dict[str, Any]:
    options = [f"{word} [{CHOICES[word]}]" for word in ("approve", "edit", "reject")
               if word in allowed]
    while True:
        answer = ask(" / ".join(options) + "? ").strip().lower()
        if answer in ("y", "yes", "a", "approve") and "approve" in allowed:
            return {"type": "approve"}
        if answer in ("e", "edit") and "edit" in allowed:
            edited = _edited_args(dict(request.get("args", {})), ask, out, editor)
            if edited is None:
                continue
            return {"type": "edit",
                    "edited_action": {"name": request.get("name"), "args": edited}}
        if answer in ("n", "no", "r", "reject") and "reject" in allowed:
            reason = ask("reason for the agent (optional): ").strip()
            decision: dict[str, Any] = {"type": "reject"}
            if reason:
                decision["message"] = reason
            return decision
        out.write(f"please answer {', '.join(CHOICES[w] for w in allowed if w in CHOICES)}\n")


def ask_decisions(
    approvals: list[PendingApproval],
    *,
    ask: Ask = ask_after_prompt,
    out: TextIO | None = None,
    editor: str | None = None,
) -> dict[str, Any]:
    """Ask about every pending tool call; the value to resume the thread with.

    `ask` reads one answer; the default counts only input typed after the question is
    shown. Returns `{interrupt_id: {"decisions": [...]}}` with one decision per tool call,
    in order. KeyboardInterrupt and EOFError propagate: the approvals then stay pending.
    """
    stream: TextIO = out or sys.stdout
    resume: dict[str, Any] = {}
    for approval in approvals:
        decisions = []
        for request in approval.action_requests:
            allowed = next(
                (list(config.get("allowed_decisions", CHOICES))
                 for config in approval.review_configs
                 if config.get("action_name") == request.get("name")),
                list(CHOICES),
            )
            _show(request, stream)
            decisions.append(_decide(request, allowed, ask, stream, editor))
        resume[approval.interrupt_id] = {"decisions": decisions}
    return resume


class NoTerminalForApproval(Exception):
    """An approval is needed but standard input is not a terminal; the session stops."""


def answer_approvals(session: Any, thread_id: str, approvals: list[Any]) -> Any:
    """Ask about pending approvals and resume until the turn ends another way.

    Raises `NoTerminalForApproval` when stdin is not a terminal: lines left in a pipe were
    written before the question existed, so they never answer it (the approval stays
    pending, as `fathom run` leaves it).
    """
    result = None
    while approvals:
        session.display.pause()
        if not stdin_is_terminal():
            names = ", ".join(r.get("name", "?") for a in approvals for r in a.action_requests)
            print(
                f"approval needed for {names}, but input is not a terminal, and approvals "
                f"are never read from a pipe. It stays pending on thread {thread_id}: "
                f"answer it in a terminal with `fathom --thread {thread_id}`, or allow the "
                "tool up front with --auto-approve.",
                file=sys.stderr,
            )
            raise NoTerminalForApproval
        try:
            resume = ask_decisions(approvals, editor=os.environ.get("EDITOR"))
        except (KeyboardInterrupt, EOFError):
            print("\napproval left pending; it is asked again when you continue this thread")
            return result
        result = session.run(thread_id, resume=resume)
        approvals = result.approvals if result.status == "approval" else []
    return result
