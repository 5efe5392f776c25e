"""The interactive session's slash commands: a registry of names, one-line help and handlers.

A line that starts with `/` is a command, never a message: an unknown one is an error
naming the nearest command (`difflib`), and nothing reaches the model. `/` alone lists
the commands; `//text` sends `/text` as a message.

A handler gets a `CommandContext` (the session, the parsed arguments, the current thread)
and the text after the command's name. The session is used only through what a session
attached to a server offers too (`threads`, `setup`, `display`, `db_path`, `pending`,
`call_records`);
commands that change local checkpoints or files (/undo, /compact) check
`supports_local_ops` first (/model shows the model anywhere; switching it is refused
remotely by `switch_model` itself).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "COMMANDS",
    "Command",
    "CommandContext",
    "CommandRegistry",
    "is_command",
    "message_text",
]

Handler = Callable[["CommandContext", str], None]


@dataclass(frozen=True)
class Command:
    """One slash command: `/name` (or an alias), what it does in one line, its handler."""

    name: str
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()
    usage: str = ""
    """What follows the name, e.g. `ID` or `[N]`; shown by /help."""

    @property
    def synopsis(self) -> str:
        return f"/{self.name} {self.usage}".rstrip()


@dataclass
class CommandContext:
    """What a command works on; a handler changes `thread_id` to switch threads and sets
    `leaving` to end the session."""

    session: Any
    args: argparse.Namespace
    thread_id: str
    out: TextIO = field(default_factory=lambda: sys.stdout)
    leaving: bool = False

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _editing(ctx: CommandContext) -> bool:
    from fathom.cli.line_editor import use_line_editor

    return use_line_editor(plain=bool(getattr(ctx.args, "plain", False)))


def is_command(text: str) -> bool:
    """Whether a line typed at the prompt is a slash command (`//` escapes a message)."""
    return text.startswith("/") and not text.startswith("//")


def message_text(text: str) -> str:
    """A line that is not a command, as the model gets it: `//text` becomes `/text`."""
    return text[1:] if text.startswith("//") else text


class CommandRegistry:
    """Slash commands by name and alias, in the order they were added."""

    def __init__(self, commands: Iterable[Command] = ()) -> None:
        self._commands: list[Command] = []
        self._by_name: dict[str, Command] = {}
        for command in commands:
            self.add(command)

    def add(self, command: Command) -> None:
        """Register `command`; a name or alias already taken is a programming error."""
        for name in (command.name, *command.aliases):
            if name.lower() in self._by_name:
                raise ValueError(f"/{name} is registered twice")
            self._by_name[name.lower()] = command
        self._commands.append(command)

    def __iter__(self) -> Any:
        return iter(self._commands)

    def get(self, name: str) -> Command | None:
        """The command called `name` (without `/`, any case), or `None`."""
        return self._by_name.get(name.lower())

    def names(self) -> list[str]:
        """Every name and alias, in registration order."""
        return [name for c in self._commands for name in (c.name, *c.aliases)]

    def nearest(self, name: str) -> str | None:
        """The registered name closest to a mistyped `name`, if any is close."""
        close = difflib.get_close_matches(name.lower(), self.names(), n=1, cutoff=0.5)
        return close[0] if close else None

    def help_text(self, *, line_editor: bool = True) -> str:
        """Every command with its help, one a line; the editing keys when the line editor
        is in use (`--plain` and pipes read plain lines, without them)."""
        width = max(len(c.synopsis) for c in self._commands)
        lines = ["commands:"]
        for command in self._commands:
            aliases = ", ".join("/" + a for a in command.aliases)
            also = f" (also {aliases})" if aliases else ""
            lines.append(f"  {command.synopsis:<{width}}  {command.help}{also}")
        keys = "Enter sends; Alt-Enter (Esc, Enter) adds a line; " if line_editor else ""
        lines.append(f"{keys}@path attaches a file; //text sends a message starting with /. "
                     "Ctrl-C stops a run, Ctrl-D leaves.")
        return "\n".join(lines)

    def run(self, ctx: CommandContext, line: str) -> None:
        """Run the command `line` (which starts with `/`); unknown ones print an error."""
        name, arg = ([*line[1:].split(None, 1), "", ""])[:2]
        if not name:
            ctx.say(self.help_text(line_editor=_editing(ctx)))
            return
        command = self.get(name)
        if command is None:
            near = self.nearest(name)
            hint = f"; did you mean /{near}?" if near else ""
            ctx.say(f"unknown command /{name}{hint} (/help lists the commands; "
                    "nothing was sent to the model)")
            return
        command.handler(ctx, arg.strip())


# --------------------------------------------------------------------------- the commands


def _help(ctx: CommandContext, _arg: str) -> None:
    ctx.say(COMMANDS.help_text(line_editor=_editing(ctx)))


def _exit(ctx: CommandContext, _arg: str) -> None:
    ctx.leaving = True


def _threads(ctx: CommandContext, _arg: str) -> None:
    threads = ctx.session.threads.list()
    if not threads:
        ctx.say("no threads yet in this project (this one is listed once it has a message)")
        return
    lines = [f"  {'thread':<10} {'last used':<17} {'model':<28} first message"]
    for info in threads:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated))
        title = info.title if len(info.title) <= 60 else info.title[:59] + "…"
        mark = "*" if info.thread_id == ctx.thread_id else " "
        lines.append(f"{mark} {info.thread_id:<10} {when:<17} {info.model:<28} {title}")
    lines.append("(* this thread; /thread ID switches)")
    ctx.say("\n".join(lines))


def _thread(ctx: CommandContext, arg: str) -> None:
    if not arg:
        ctx.say(f"this is thread {ctx.thread_id}; /thread ID switches, /threads lists them")
        return
    known = [info.thread_id for info in ctx.session.threads.list()]
    matches = [t for t in known if t == arg] or [t for t in known if t.startswith(arg)]
    if len(matches) != 1:
        why = "is more than one thread" if matches else "is not a thread of this project"
        ctx.say(f"{arg} {why}; /threads lists them")
        return
    ctx.thread_id = matches[0]
    ctx.say(f"switched to thread {ctx.thread_id}")


def _clear(ctx: CommandContext, _arg: str) -> None:
    ctx.thread_id = ctx.session.threads.new_thread_id()
    ctx.say(f"new thread {ctx.thread_id} (the last one stays: /thread ID goes back)")


def _mcp(ctx: CommandContext, _arg: str) -> None:
    from fathom.cli.mcp import mcp_report

    ctx.say(mcp_report(getattr(ctx.session.setup, "mcp", None)))


def _calls(ctx: CommandContext, arg: str) -> None:
    """`/calls [all]`: the call card of this thread's last turn (all: of every turn; a run's
    id, or a prefix of it: of that turn)."""
    from fathom.cli.measure import calls_report

    records = ctx.session.call_records(ctx.thread_id)
    if not records:
        ctx.say("no model calls recorded on this thread yet")
        return
    if arg == "all":
        ctx.say(calls_report(records))
    elif arg:
        ctx.say(calls_report(records, run=arg))
    else:
        ctx.say(calls_report(records, last=True))


def _expand(ctx: CommandContext, arg: str) -> None:
    expand = getattr(ctx.session.display, "expand", None)
    if expand is None:
        ctx.say("this display keeps no tool results to expand")
        return
    ctx.say(expand(arg))


def _session_op(command: str, name: str, *, local_only: bool, with_arg: bool = False) -> Handler:
    """A handler printing `fathom.cli.session_ops.<name>(session, thread_id)` (or the
    argument, with `with_arg`); `local_only` ones refuse a session attached to a server."""

    def handler(ctx: CommandContext, arg: str) -> None:
        if local_only and not getattr(ctx.session, "supports_local_ops", True):
            ctx.say(f"/{command} is not available when attached to a server")
            return
        try:  # imported when used: it needs the agent stack
            session_ops = importlib.import_module("fathom.cli.session_ops")
        except ImportError as error:  # pragma: no cover - an install without them
            if error.name != "fathom.cli.session_ops":
                raise
            ctx.say(f"/{command} is not available in this version of fathom")
            return
        operation = getattr(session_ops, name)
        if with_arg:
            ctx.say(operation(ctx.session, arg or None))
        else:
            ctx.say(operation(ctx.session, ctx.thread_id))

    return handler


def _history_commands() -> list[Command]:
    """`/rewind`, `/fork`, `/export`, `/init` and `/memory` (`fathom.cli.history_commands`)."""
    from fathom.cli import history_commands as h

    return [
        Command("rewind", "go back to before turn N: conversation and files (no N: list "
                "the turns); the discarded branch is kept as a thread", h.rewind, usage="[N]"),
        Command("fork", "copy this thread to a new one and switch to it", h.fork_thread),
        Command("export", "write this thread as Markdown (default: fathom-thread-ID.md)",
                h.export_thread, usage="[PATH]"),
        Command("init", "write a starter .fathom/AGENTS.md for this project",
                h.init_memory, usage="[--force]"),
        Command("memory", "the memory files the agent loads: show or edit one", h.memory,
                usage="[show|edit NAME]"),
    ]


def _agent_commands() -> list[Command]:
    """/skills, /agents, /tasks, /budget and /permissions (`fathom.cli.agent_commands`)."""
    from fathom.cli import agent_commands as ac

    return [
        Command("skills", "the project's skills (NAME: one SKILL.md; reload: read them again)",
                ac.skills_command, usage="[NAME|reload]"),
        Command("agents", "the subagents task can start (NAME: one; reload: read them again)",
                ac.agents_command, usage="[NAME|reload]"),
        Command("tasks", "this thread's async subagent tasks (check ID: one; cancel ID: stop "
                "it)", ac.tasks_command, usage="[check|cancel ID]"),
        Command("budget", "the run budget and this thread's spend (tokens=N usd=X: set it)",
                ac.budget_command, usage="[NAME=VALUE...|off]"),
        Command("permissions", "which tools ask for approval (allow|ask TOOL [--save])",
                ac.permissions_command, usage="[allow|ask TOOL]"),
    ]


def _default_commands() -> CommandRegistry:
    return CommandRegistry([
        Command("help", "list the commands", _help),
        Command("threads", "this project's threads", _threads),
        Command("thread", "switch to thread ID (a unique prefix will do)", _thread, usage="ID"),
        Command("clear", "start a new thread in this session", _clear, aliases=("new",)),
        Command("undo", "roll the thread and the files it wrote back to before the last turn",
                _session_op("undo", "undo_last_turn", local_only=True)),
        *_history_commands(),  # /rewind /fork /export /init /memory
        Command("compact", "summarize the conversation now, to free context",
                _session_op("compact", "compact_thread", local_only=True)),
        Command("model", "switch the model for the next turn (no NAME: show the current one)",
                _session_op("model", "switch_model", local_only=False, with_arg=True),
                usage="[NAME]"),
        Command("cost", "model calls, tokens and an estimated price of this thread",
                _session_op("cost", "cost_report", local_only=False)),
        Command("calls", "the last turn's model calls: who, tokens, what each added (all: "
                "every turn)", _calls, usage="[all]"),
        Command("expand", "show tool result N in full (no N: the last one)", _expand,
                usage="[N]"),
        Command("mcp", "the MCP servers and their tools", _mcp),
        *_agent_commands(),
        Command("exit", "leave (Ctrl-D does too)", _exit, aliases=("quit",)),
    ])  # fmt: skip


COMMANDS = _default_commands()
"""The interactive session's commands."""
