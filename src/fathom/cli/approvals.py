"""Answering approval requests at the prompt: approve, edit, or reject each tool call, or
all remaining ones at once.

Each call is shown so it can be judged (`fathom.cli.approval_view`): a file change as a
diff against the file as it is now, a command as the command. Edit opens the real content
in `$EDITOR` (a `write_file`'s content, an `edit_file`'s `new_string`, an `execute`'s
command; other tools' arguments as JSON); without `$EDITOR` it is asked for inline. A
reject may carry a reason, which the model receives in place of the tool's result. When
several calls wait, all are shown first, then each is asked about in turn, and the answer
`A` (approve all remaining) or `N` (reject all remaining) settles the rest at once.

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
from typing import Any, TextIO, cast

from fathom.cli.approval_view import CallView, CurrentUnknown, ReadCurrent, render_view, view_call
from fathom.cli.session import PendingApproval
from fathom.errors import FathomError
from fathom.middleware.execute import EXECUTE_TOOL

__all__ = [
    "NoTerminalForApproval",
    "allowed_decisions",
    "answer_approvals",
    "ask_after_prompt",
    "ask_decisions",
    "discard_pending_input",
    "file_reader",
    "not_gated",
    "reader_for",
    "stdin_is_terminal",
    "wants_colour",
]

Ask = Callable[[str], str]

CHOICES = {"approve": "y", "edit": "e", "reject": "n"}
ALL_CHOICES = {"approve": "A", "reject": "N"}
"""Answers that settle this call and every remaining one (shown when several wait)."""

MAX_COMPARED_BYTES = 4 * 1024 * 1024
"""A larger file is not diffed (its new content is shown instead)."""


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


def allowed_decisions(approval: PendingApproval, request: dict[str, Any]) -> list[str]:
    """The decisions the interrupt allows for `request` (its review config), in order."""
    for config in approval.review_configs:
        if config.get("action_name") == request.get("name"):
            return list(config.get("allowed_decisions", CHOICES))
    return list(CHOICES)


_READ_ERRORS = {
    "invalid_path": "the path is outside the project",
    "is_directory": "it is a directory",
    "permission_denied": "permission denied",
}


def file_reader(setup: Any) -> ReadCurrent:
    """Read files as the command's agent sees them: its backend over `setup`'s project
    (virtual paths: `/notes.txt` is `<project>/notes.txt`) and `~/.fathom/`.

    Files under the harness's state routes live in the thread's state, not on disk, so
    they raise `CurrentUnknown`, as do unreadable, binary and very large files.
    """
    from fathom.project.build import STATE_ROUTES, build_backend

    backend: Any = None

    def read(path: str) -> str | None:
        nonlocal backend
        if any(path.startswith(route) or path == route.rstrip("/") for route in STATE_ROUTES):
            raise CurrentUnknown("the file is kept in the thread's state, not on disk")
        if backend is None:  # the files are the same whichever sandbox runs commands
            backend = build_backend(setup.project_dir, setup.home, "none")
        try:
            [answer] = backend.download_files([path])
        except (OSError, FathomError) as error:  # fathom's backend failed: show the content
            raise CurrentUnknown(f"reading it failed ({error})") from error
        if answer.error is not None:
            kind = str(getattr(answer.error, "value", answer.error))
            if kind == "file_not_found":
                return None
            raise CurrentUnknown(_READ_ERRORS.get(kind, kind))
        data = answer.content or b""
        if len(data) > MAX_COMPARED_BYTES:
            raise CurrentUnknown(f"the file is too large to compare ({len(data):,} bytes)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CurrentUnknown("the file is not UTF-8 text") from error

    return read


def wants_colour(display: Any, stream: TextIO) -> bool:
    """Colour for the approval views: on a terminal, unless `--plain`, `TERM=dumb` or
    `NO_COLOR` (https://no-color.org) says otherwise."""
    from fathom.cli.display import PlainDisplay

    if isinstance(display, PlainDisplay) or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --------------------------------------------------------------------------- editing

# What `$EDITOR` opens for a tool: the argument holding the real content. Anything else
# is edited as its arguments in JSON.
CONTENT_ARGUMENT = {"write_file": "content", "edit_file": "new_string", EXECUTE_TOOL: "command"}


def _run_editor(editor: str, text: str, suffix: str) -> str:
    with tempfile.NamedTemporaryFile(
        "w", suffix=suffix, prefix="fathom-", delete=False, encoding="utf-8"
    ) as handle:
        handle.write(text)
        path = handle.name
    try:
        subprocess.run([*shlex.split(editor), path], check=False)
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    finally:
        os.unlink(path)


def _suffix(request: dict[str, Any]) -> str:
    """The temporary file's suffix: the target file's, so the editor highlights it."""
    if request.get("name") == EXECUTE_TOOL:
        return ".sh"
    path = str(request.get("args", {}).get("file_path", ""))
    name = path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1] if "." in name.strip(".") else ".txt"


def _edited_content(request: dict[str, Any], editor: str) -> dict[str, Any] | None:
    """The call's arguments with its content edited in `editor`; `None` if unchanged."""
    args = dict(request.get("args", {}))
    key = CONTENT_ARGUMENT[str(request.get("name"))]
    before = str(args[key])
    after = _run_editor(editor, before, _suffix(request))
    if not before.endswith("\n") and after.endswith("\n"):
        after = after[:-1]  # the newline an editor adds at the end of the file
    if request.get("name") == EXECUTE_TOOL:
        after = after.strip()
        if not after:
            return None
    if after == before:
        return None
    args[key] = after
    return args


def _edited_json(
    args: dict[str, Any], ask: Ask, out: TextIO, editor: str | None
) -> dict[str, Any] | None:
    """New arguments as JSON, from the editor or the prompt; `None` when the person gives up."""
    while True:
        if editor:
            text = _run_editor(editor, json.dumps(args, indent=2, ensure_ascii=False) + "\n",
                               ".json")
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


def _edited_args(request: dict[str, Any], ask: Ask, out: TextIO,
                 editor: str | None) -> dict[str, Any] | None:
    """The edited arguments, or `None` to ask about the call again."""
    args = dict(request.get("args", {}))
    name = request.get("name")
    key = CONTENT_ARGUMENT.get(str(name))
    if key is not None and isinstance(args.get(key), str):
        if editor:
            edited = _edited_content(request, editor)
            if edited is None:
                out.write("nothing was changed in the editor; answer again\n")
            return edited
        if name == EXECUTE_TOOL:
            command = ask("new command (empty keeps it): ").strip()
            return {**args, "command": command} if command else None
    return _edited_json(args, ask, out, editor)


# --------------------------------------------------------------------------- asking


def _prompt(allowed: list[str], several: bool) -> str:
    options = [f"{word} [{CHOICES[word]}]" for word in ("approve", "edit", "reject")
               if word in allowed]
    if several:
        options += [f"{word} all remaining [{ALL_CHOICES[word]}]"
                    for word in ("approve", "reject") if word in allowed]
    return " / ".join(options) + "? "


def _answer(text: str) -> tuple[str, bool] | None:
    """(decision, for all remaining) for a typed answer; `None` if it is none of them."""
    word = text.strip()
    if word in ("A", "a") or word.lower() == "all":
        return "approve", True
    if word == "N" or word.lower() == "none":
        return "reject", True
    word = word.lower()
    if word in ("y", "yes", "approve"):
        return "approve", False
    if word in ("e", "edit"):
        return "edit", False
    if word in ("n", "no", "r", "reject"):
        return "reject", False
    return None


def _reject(ask: Ask) -> dict[str, Any]:
    reason = ask("reason for the agent (optional): ").strip()
    decision: dict[str, Any] = {"type": "reject"}
    if reason:
        decision["message"] = reason
    return decision


class _Call:
    """One tool call to decide on, with where its decision goes."""

    def __init__(self, approval: PendingApproval, request: dict[str, Any],
                 view: CallView) -> None:
        self.approval = approval
        self.request = request
        self.allowed = allowed_decisions(approval, request)
        self.view = view


def _show_edited(request: dict[str, Any], args: dict[str, Any], read_current: ReadCurrent | None,
                 out: TextIO, color: bool) -> None:
    view = view_call({"name": request.get("name"), "args": args}, read_current)
    out.write(render_view(view, heading="edited", color=color))


def ask_decisions(
    approvals: list[PendingApproval],
    *,
    ask: Ask = ask_after_prompt,
    out: TextIO | None = None,
    editor: str | None = None,
    read_current: ReadCurrent | None = None,
    color: bool = False,
) -> dict[str, Any]:
    """Ask about every pending tool call; the value to resume the thread with.

    Each call is shown first (`read_current` reads files for the diffs; `color` adds ANSI
    colours). `ask` reads one answer; the default counts only input typed after the
    question is shown. Returns `{interrupt_id: {"decisions": [...]}}` with one decision
    per tool call, in order. KeyboardInterrupt and EOFError propagate: the approvals then
    stay pending.
    """
    stream: TextIO = out or sys.stdout
    calls = [_Call(approval, request, view_call(request, read_current))
             for approval in approvals for request in approval.action_requests]
    total = len(calls)
    for number, call in enumerate(calls, start=1):
        heading = "approval needed" if total == 1 else f"approval needed ({number} of {total})"
        stream.write("\n" + render_view(call.view, heading=heading, color=color))
    stream.flush()
    decided: list[dict[str, Any]] = []
    rest: dict[str, Any] | None = None  # the decision for all remaining calls, once given
    for number, call in enumerate(calls, start=1):
        if rest is not None and rest["type"] in call.allowed:
            decided.append(dict(rest))
            done = "approved" if rest["type"] == "approve" else "rejected"
            stream.write(f"{number} of {total}: {call.view.title}: {done} (all remaining)\n")
            continue
        if total > 1:
            stream.write(f"\n{number} of {total}: {call.view.title}\n")
            stream.flush()
        several = total - number >= 1
        while True:
            answer = _answer(ask(_prompt(call.allowed, several)))
            if answer is None or answer[0] not in call.allowed:
                keys = [CHOICES[w] for w in call.allowed if w in CHOICES]
                if several:
                    keys += [ALL_CHOICES[w] for w in ("approve", "reject") if w in call.allowed]
                stream.write(f"please answer {', '.join(keys)}\n")
                continue
            kind, for_all = answer
            if kind == "edit":
                edited = _edited_args(call.request, ask, stream, editor)
                if edited is None:
                    continue
                _show_edited(call.request, edited, read_current, stream, color)
                decided.append({"type": "edit", "edited_action": {
                    "name": call.request.get("name"), "args": edited}})
            elif kind == "approve":
                decided.append({"type": "approve"})
            else:
                decided.append(_reject(ask))
            if for_all:
                rest = decided[-1]
            break
    resume: dict[str, Any] = {}
    for call, decision in zip(calls, decided, strict=True):
        resume.setdefault(call.approval.interrupt_id, {"decisions": []})["decisions"].append(
            decision)
    return resume


class NoTerminalForApproval(FathomError):
    """An approval is needed but standard input is not a terminal; the session stops."""


def reader_for(session: Any) -> ReadCurrent | None:
    """How to read the session's files: its own `read_current` (a remote session may have
    one), else the local project's backend, else nothing (views show content only)."""
    reader = getattr(session, "read_current", None)
    if callable(reader):
        return cast("ReadCurrent", reader)
    setup = getattr(session, "setup", None)
    if getattr(setup, "project_dir", None) is not None and getattr(setup, "home", None):
        return file_reader(setup)
    return None


def not_gated(approvals: list[Any], session: Any) -> str:
    """Why the agent built here cannot take the answer, or "" when it can.

    The answer reaches a call only if this agent still asks about that tool: built with
    another `--sandbox` (no `execute`) or with the tool auto-approved since, it would drop
    the answer, and the call would run (or fail) unanswered.
    """
    setup = getattr(session, "setup", None)
    if setup is None or not hasattr(setup, "approvals"):
        return ""
    gated = setup.approvals()
    names = sorted({str(r.get("name")) for a in approvals for r in a.action_requests} - set(gated))
    if not names:
        return ""
    hint = (" `execute` exists only with the --sandbox the run used (e.g. --sandbox local)."
            if EXECUTE_TOOL in names else "")
    return (f"this agent does not ask before {', '.join(names)} (it lacks the tool or "
            f"auto-approves it), so it cannot take the answer; answer with the options of "
            f"the run that asked (`fathom --thread ID` or `fathom approve ID`).{hint}")


def answer_approvals(session: Any, thread_id: str, approvals: list[Any]) -> Any:
    """Ask about pending approvals and resume until the turn ends another way.

    Raises `NoTerminalForApproval` when stdin is not a terminal: lines left in a pipe were
    written before the question existed, so they never answer it (the approval stays
    pending, as `fathom run` leaves it).
    """
    result = None
    reader = reader_for(session)
    while approvals:
        session.display.pause()
        if not stdin_is_terminal():
            names = ", ".join(r.get("name", "?") for a in approvals for r in a.action_requests)
            print(
                f"approval needed for {names}, but input is not a terminal, and approvals "
                f"are never read from a pipe. It stays pending on thread {thread_id}: "
                f"answer it in a terminal with `fathom --thread {thread_id}` or with "
                f"`fathom approve {thread_id}`, or allow the tool up front with "
                "--auto-approve.",
                file=sys.stderr,
            )
            raise NoTerminalForApproval
        ungated = not_gated(approvals, session)
        if ungated:  # answering would let the call run unanswered: leave it pending
            session.display.error(f"approval left pending on thread {thread_id}: {ungated}")
            return result
        try:
            resume = ask_decisions(approvals, editor=os.environ.get("EDITOR") or None,
                                   read_current=reader,
                                   color=wants_colour(session.display, sys.stdout))
        except (KeyboardInterrupt, EOFError):
            print("\napproval left pending; it is asked again when you continue this thread")
            return result
        result = session.run(thread_id, resume=resume)
        approvals = result.approvals if result.status == "approval" else []
    return result
