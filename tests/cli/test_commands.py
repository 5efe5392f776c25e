"""The slash-command registry (`fathom.cli.commands`): help, unknown commands, thread
switching, and the guards for displays and sessions that lack an operation.

The session here is the surface the commands use (`threads`, `setup`, `display`), with a
real `ThreadIndex` on a temporary SQLite file; the pty tests drive the real command.
"""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fathom.cli.commands import (
    COMMANDS,
    Command,
    CommandContext,
    CommandRegistry,
    is_command,
    message_text,
)
from fathom.project.threads import ThreadIndex


@dataclass
class _Setup:
    mcp: Any = None
    model_name: str = "openai:scripted"


@dataclass
class _Session:
    threads: ThreadIndex
    display: Any = None
    setup: _Setup = field(default_factory=_Setup)
    supports_local_ops: bool = True


class _Display:
    """A display that keeps tool results to expand, as `/expand` expects."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def expand(self, ref: str) -> str:
        self.asked.append(ref)
        return f"result {ref or 'latest'} in full"


@pytest.fixture
def session(tmp_path: Path) -> _Session:
    index = ThreadIndex(tmp_path / "threads.sqlite")
    for thread_id, title in (("aaaa1111", "first"), ("aaaa2222", "second"),
                             ("bbbb3333", "third")):
        index.touch(thread_id, first_message=title, model="openai:scripted", project=tmp_path)
    return _Session(threads=index)


def _run(session: Any, line: str, thread_id: str = "aaaa1111") -> CommandContext:
    ctx = CommandContext(session, argparse.Namespace(), thread_id, out=io.StringIO())
    COMMANDS.run(ctx, line)
    return ctx


def _said(ctx: CommandContext) -> str:
    assert isinstance(ctx.out, io.StringIO)
    return ctx.out.getvalue()


def test_help_lists_every_command_with_its_help(session: _Session) -> None:
    shown = _said(_run(session, "/help"))
    for command in COMMANDS:
        assert f"/{command.name}" in shown and command.help in shown
    for name in ("help", "threads", "thread", "clear", "new", "undo", "compact", "model",
                 "cost", "expand", "tasks", "mcp", "exit", "quit"):
        assert COMMANDS.get(name) is not None, f"/{name} is not registered"
    assert "(also /new)" in shown and "(also /quit)" in shown


def test_a_slash_alone_lists_the_commands(session: _Session) -> None:
    assert _said(_run(session, "/")) == _said(_run(session, "/help"))


def test_an_unknown_command_names_the_nearest_and_runs_nothing(session: _Session) -> None:
    ran: list[str] = []
    registry = CommandRegistry([Command("help", "h", lambda ctx, arg: ran.append(arg))])
    ctx = CommandContext(session, argparse.Namespace(), "aaaa1111", out=io.StringIO())
    registry.run(ctx, "/hepl me")
    assert ran == []
    assert "unknown command /hepl; did you mean /help?" in _said(ctx)
    assert "nothing was sent to the model" in _said(ctx)
    far = _said(_run(session, "/zzzzzz"))
    assert "unknown command /zzzzzz (" in far and "did you mean" not in far


def test_the_argument_is_everything_after_the_name(session: _Session) -> None:
    ctx = _run(session, "/thread\n  bbbb3333  ")
    assert ctx.thread_id == "bbbb3333"
    assert "unknown command /zzqx (" in _said(_run(session, "/zzqx\ntwo"))


def test_names_are_matched_in_any_case(session: _Session) -> None:
    assert _run(session, "/EXIT").leaving


def test_exit_and_quit_leave(session: _Session) -> None:
    assert _run(session, "/exit").leaving and _run(session, "/quit").leaving
    assert not _run(session, "/help").leaving


def test_clear_and_new_start_an_unused_thread(session: _Session) -> None:
    for line in ("/clear", "/new"):
        ctx = _run(session, line)
        assert ctx.thread_id != "aaaa1111"
        assert session.threads.get(ctx.thread_id) is None
        assert f"new thread {ctx.thread_id}" in _said(ctx)


def test_thread_switches_by_id_or_unique_prefix(session: _Session) -> None:
    assert _run(session, "/thread aaaa2222").thread_id == "aaaa2222"
    ctx = _run(session, "/thread bbbb")
    assert ctx.thread_id == "bbbb3333" and "switched to thread bbbb3333" in _said(ctx)


@pytest.mark.parametrize(("arg", "why"), [("nope", "is not a thread of this project"),
                                          ("aaaa", "is more than one thread")])
def test_thread_refuses_an_unknown_or_ambiguous_id(session: _Session, arg: str,
                                                   why: str) -> None:
    ctx = _run(session, f"/thread {arg}")
    assert ctx.thread_id == "aaaa1111"
    assert f"{arg} {why}" in _said(ctx)


def test_threads_marks_the_current_one(session: _Session) -> None:
    shown = _said(_run(session, "/threads", thread_id="aaaa2222"))
    rows = [line for line in shown.splitlines() if "aaaa2222" in line]
    assert rows and rows[0].startswith("* aaaa2222") and "second" in rows[0]
    assert "  aaaa1111" in shown


def test_expand_asks_the_display_and_says_when_it_cannot(session: _Session) -> None:
    session.display = _Display()
    assert "result 3 in full" in _said(_run(session, "/expand 3"))
    assert "result latest in full" in _said(_run(session, "/expand"))
    assert session.display.asked == ["3", ""]
    session.display = object()  # a display without expand()
    assert "no tool results to expand" in _said(_run(session, "/expand"))


@pytest.mark.parametrize("line", ["/undo", "/compact"])
def test_local_operations_refuse_a_session_attached_to_a_server(
    session: _Session, line: str
) -> None:
    session.supports_local_ops = False
    name = line.split()[0]
    assert f"{name} is not available when attached to a server" in _said(_run(session, line))


def test_tasks_needs_the_local_threads_database(session: _Session) -> None:
    assert "/tasks is not available when attached to a server" in _said(
        _run(session, "/tasks"))  # this session, like a remote one, has no db_path


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="/new is registered twice"):
        CommandRegistry([Command("clear", "x", lambda c, a: None, aliases=("new",)),
                         Command("new", "y", lambda c, a: None)])


def test_double_slash_is_a_message_starting_with_a_slash() -> None:
    assert is_command("/help") and not is_command("//etc/hosts is odd")
    assert not is_command("hello /help")
    assert message_text("//etc/hosts is odd") == "/etc/hosts is odd"
    assert message_text("hello") == "hello"
