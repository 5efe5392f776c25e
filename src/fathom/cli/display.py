"""How the `fathom` command shows a run: the `Display` interface and its two implementations.

`RichDisplay` draws a live view for terminals and renders the agent's answers as markdown;
`PlainDisplay` prints one line per event, as plain text, for dumb terminals and logs
(`--plain`). Both receive the same calls from the session, show each tool result as a short
summary with a number, and give the whole result back for `/expand N`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

from fathom.cli.markdown_stream import finished_prefix
from fathom.cli.tool_summary import ResultLog, ToolSummary, summarize
from fathom.middleware.planning import WRITE_TODOS_TOOL
from fathom.middleware.subagents import TASK_TOOL
from fathom.project.events import (
    Event,
    Lane,
    ShellOutput,
    TextDelta,
    TodosChanged,
    ToolFinished,
    ToolStarted,
    short_text,
)
from fathom.usage import AgentTotals, AgentUsage

if TYPE_CHECKING:  # rich is imported lazily: `fathom --help` should not pay for it
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.text import Text

__all__ = ["Display", "PlainDisplay", "RichDisplay", "RunStatus", "make_display"]

RunStatus = Literal["done", "interrupted", "approval", "error"]
"""How a run ended: finished, stopped by Ctrl-C, waiting for an approval, or failed."""


class Display(Protocol):
    """What the session tells a display. Every method must return quickly."""

    def run_started(self, *, thread_id: str, model: str, usage: AgentUsage) -> None:
        """A run starts; `usage` is live and may be read at any time for the counters."""

    def event(self, event: Event) -> None:
        """Something happened in the run (streamed text, a tool call, a todo list...)."""

    def run_finished(self, *, status: RunStatus, usage: AgentUsage, detail: str = "") -> None:
        """The run ended; show the status, and the model calls and tokens it used."""

    def pause(self) -> None:
        """Stop any live drawing so that the session can prompt the user; idempotent."""

    def notice(self, text: str) -> None:
        """An informational line from the command itself (not from the agent)."""

    def error(self, text: str) -> None:
        """An error line from the command itself."""

    def expand(self, ref: str) -> str:
        """The whole text of tool result `ref` (its number; empty: the latest) for `/expand`,
        or a message saying there is no such result."""
        ...


# --------------------------------------------------------------------------- shared helpers

_STATUS_WORDS: dict[str, str] = {
    "done": "done",
    "interrupted": "interrupted",
    "approval": "waiting for approval",
    "error": "failed",
}
_PLAIN_TODO_MARKS: dict[str, str] = {"completed": "[x]", "in_progress": "[>]"}
_RICH_TODO_MARKS: dict[str, tuple[str, str]] = {
    "completed": ("✔", "green"),
    "in_progress": ("▶", "bold cyan"),
}
_LIVE_TEXT_LINES = 8  # how much of the paragraph being streamed the live region shows


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args_text(args: dict[str, Any], limit: int) -> str:
    """Tool-call arguments as one line of JSON, cut to `limit` characters."""
    try:
        text = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = " ".join(str(args).split())
    return _cut(text, limit)


def _last_line(text: str) -> str:
    """The last non-empty line of `text`, stripped."""
    return next((part.strip() for part in reversed(text.splitlines()) if part.strip()), "")


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m {seconds % 60:02d}s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class _Summary:
    calls: int
    input_tokens: int
    output_tokens: int
    agents: dict[str, AgentTotals]

    @classmethod
    def of(cls, usage: AgentUsage) -> _Summary:
        agents = usage.totals()
        return cls(
            calls=sum(t.calls for t in agents.values()),
            input_tokens=sum(t.input_tokens for t in agents.values()),
            output_tokens=sum(t.output_tokens for t in agents.values()),
            agents=agents,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class _Subagent:
    """One `task` call's subagent, as the displays track it."""

    label: str
    description: str = ""
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    failed: bool = False
    steps: int = 0
    activity: str = ""


class _Subagents:
    """Labels subagent lanes `<subagent_type>#<n>`, numbered in start order within a run."""

    def __init__(self) -> None:
        self._by_lane: dict[str, _Subagent] = {}
        self._count = 0

    def start(self, event: ToolStarted) -> _Subagent:
        known = self._by_lane.get(event.call_id)
        if known is not None and known.label != "subagent":
            return known
        self._count += 1
        kind = str(event.args.get("subagent_type") or "subagent")
        description = short_text(str(event.args.get("description") or ""), 80)
        agent = _Subagent(label=f"{kind}#{self._count}", description=description)
        self._by_lane[event.call_id] = agent
        return agent

    def get(self, lane: str) -> _Subagent:
        """The subagent of `lane`; one whose `task` call was never seen is labelled "subagent"."""
        agent = self._by_lane.get(lane)
        if agent is None:
            agent = self._by_lane[lane] = _Subagent(label="subagent")
        return agent

    def all(self) -> list[_Subagent]:
        return list(self._by_lane.values())


# --------------------------------------------------------------------------- plain


class PlainDisplay:
    """One line per thing, no colour and no cursor movement: for logs, pipes and `--plain`.

    Streamed text is buffered per lane and printed as whole lines when that lane's next
    non-text event arrives (or the run ends), so parallel subagents never split a line.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self._subagents = _Subagents()
        self._text: dict[Lane, str] = {}
        self._shell: dict[str, tuple[Lane, str]] = {}  # call id -> (lane, unfinished line)
        self._results = ResultLog()
        self._args: dict[str, dict[str, Any]] = {}  # call id -> arguments, until its result
        self._streamed: set[str] = set()  # execute calls whose output was printed as it came

    def _write(self, *lines: str) -> None:
        for line in lines:
            self._stream.write(line.rstrip() + "\n")
        self._stream.flush()

    def _prefix(self, lane: Lane) -> str:
        return "" if lane is None else f"  [{self._subagents.get(lane).label}] "

    def _flush_text(self, lane: Lane) -> None:
        text = self._text.pop(lane, "").strip("\n")
        if not text.strip():
            return
        prefix = "model › " if lane is None else f"  [{self._subagents.get(lane).label}] › "
        self._write(*(prefix + line for line in text.splitlines()))

    def _flush_shell(self, call_id: str) -> None:
        lane, rest = self._shell.pop(call_id, (None, ""))
        if rest:
            self._write(f"{self._prefix(lane)}  │ {rest}")

    def _flush_all(self) -> None:
        for lane in list(self._text):
            self._flush_text(lane)
        for call_id in list(self._shell):
            self._flush_shell(call_id)

    def run_started(self, *, thread_id: str, model: str, usage: AgentUsage) -> None:
        """Print a header line naming the thread and the model."""
        self._subagents = _Subagents()
        self._text.clear()
        self._shell.clear()
        self._write(f"── run on thread {thread_id} ({model})")

    def event(self, event: Event) -> None:
        """Print the event as one or more lines."""
        if isinstance(event, TextDelta):
            self._text[event.lane] = self._text.get(event.lane, "") + event.text
            return
        self._flush_text(event.lane)
        prefix = self._prefix(event.lane)
        if isinstance(event, ToolStarted):
            self._args[event.call_id] = event.args
            if event.name == TASK_TOOL:
                agent = self._subagents.start(event)
                self._write(f"{prefix}subagent › {agent.label} started: {agent.description}")
            elif event.name != WRITE_TODOS_TOOL:
                self._write(f"{prefix}call › {event.name}({_args_text(event.args, 100)})")
        elif isinstance(event, ToolFinished):
            self._flush_shell(event.call_id)
            args = self._args.pop(event.call_id, {})
            if event.name == WRITE_TODOS_TOOL:  # the TodosChanged that follows shows the list
                return
            ref = self._results.add(event.name, event.text)
            summary = summarize(event.name, event.text, args=args, is_error=event.is_error)
            lines = summary.lines
            if event.call_id in self._streamed and not summary.error:
                lines = ()  # its output is already on screen, line by line
            self._streamed.discard(event.call_id)
            if event.name == TASK_TOOL:
                self._flush_text(event.call_id)
                agent = self._subagents.get(event.call_id)
                word = "failed" if event.is_error else "finished"
                head = f"{prefix}subagent › {agent.label} {word}: "
            elif event.is_error:
                head = f"{prefix}error ‹ {event.name}: "
            else:
                head = f"{prefix}result ‹ {event.name}: "
            self._write(f"{head}{summary.headline} [#{ref}]",
                        *(f"{prefix}    {line}" for line in lines))
        elif isinstance(event, TodosChanged):
            self._write(
                f"{prefix}todos:",
                *(
                    f"{prefix}  {_PLAIN_TODO_MARKS.get(str(todo.get('status')), '[ ]')} "
                    f"{todo.get('content', '')}"
                    for todo in event.todos
                ),
            )
        elif isinstance(event, ShellOutput):
            self._streamed.add(event.call_id)
            lane, rest = self._shell.get(event.call_id, (event.lane, ""))
            *lines, rest = (rest + event.chunk).split("\n")
            self._write(*(f"{prefix}  │ {line.rstrip(chr(13))}" for line in lines))
            self._shell[event.call_id] = (lane, rest)

    def run_finished(self, *, status: RunStatus, usage: AgentUsage, detail: str = "") -> None:
        """Print any text still buffered, then the status and the calls and tokens used."""
        self._flush_all()
        summary = _Summary.of(usage)
        line = (
            f"── {_STATUS_WORDS[status]}: {summary.calls} model calls, "
            f"{summary.input_tokens:,} in / {summary.output_tokens:,} out tokens"
        )
        if detail:
            line += f" — {detail}"
        lines = [line]
        if len(summary.agents) > 1:
            lines += [
                f"   {name}: {t.calls} calls, {t.total_tokens:,} tokens"
                for name, t in summary.agents.items()
            ]
        self._write(*lines)

    def pause(self) -> None:
        """Print any text still buffered, so it shows before the session prompts."""
        self._flush_all()

    def notice(self, text: str) -> None:
        """Print `text` as it is."""
        self._flush_all()
        self._write(text)

    def error(self, text: str) -> None:
        """Print `error: <text>`."""
        self._flush_all()
        self._write(f"error: {text}")

    def expand(self, ref: str) -> str:
        """The whole text of tool result `ref` (empty: the latest), or why there is none."""
        return self._results.expand(ref)


# --------------------------------------------------------------------------- rich


class _LiveView:
    """The live region; rich calls `__rich__` on every refresh, so it always shows the latest."""

    def __init__(self, display: RichDisplay) -> None:
        self._display = display

    def __rich__(self) -> RenderableType:
        return self._display._live_renderable()


class RichDisplay:
    """A live terminal view: finished items scroll above, a live region shows the run's state.

    Printed permanently: the agent's text rendered as markdown, each tool call with its
    arguments and a summary of its result (numbered, for `/expand`; an error in full), todo
    list changes and finished subagents. Text is rendered block by block: a markdown block is
    printed once a later block has started (so nothing printed can change any more), and
    the block still being written streams as raw text in the live region, which is redrawn
    in place and leaves nothing behind in the scrollback. The live region below them shows
    the text being streamed, the main agent's running tool calls, the todo list, a tree
    of the run's subagents with their latest activity, and a spinner with the elapsed time
    and the model calls and tokens so far (read from `AgentUsage` on every refresh).
    Subagents' own tool calls only appear in the tree, so parallel subagents do not
    interleave in the scrollback.
    """

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.spinner import Spinner

        self._console = console if console is not None else Console()
        self._spinner = Spinner("dots", style="cyan")
        self._lock = threading.Lock()  # between event calls and the live refresh thread
        self._live: Live | None = None
        self._usage: AgentUsage | None = None
        self._model = ""
        self._thread_id: str | None = None
        self._started = time.monotonic()
        self._subagents = _Subagents()
        self._todos: list[dict[str, Any]] = []
        self._text = ""  # the main agent's text not yet rendered (its unfinished block)
        self._text_open = False  # the current text already printed a markdown block
        self._lane_text: dict[str, str] = {}  # subagent lane -> text since its last tool event
        # Main-agent tool calls without a result yet. Kept across runs: a call that waits for
        # approval gets its result in the next run.
        self._running: dict[str, ToolStarted] = {}
        self._shell_tail: dict[str, str] = {}  # call id -> last line of shell output
        self._results = ResultLog()
        self._lane_args: dict[str, dict[str, Any]] = {}  # subagents' call id -> arguments

    # ---------------------------------------------------------------- Display

    def run_started(self, *, thread_id: str, model: str, usage: AgentUsage) -> None:
        """Start the live region for a new run."""
        with self._lock:
            if thread_id != self._thread_id:  # calls left waiting belong to the old thread
                self._running.clear()
            self._thread_id = thread_id
            self._usage = usage
            self._model = model
            self._started = time.monotonic()
            self._subagents = _Subagents()
            self._todos = []
            self._text = ""
            self._text_open = False
            self._lane_text.clear()
            self._shell_tail.clear()
        self._ensure_live()

    def event(self, event: Event) -> None:
        """Update the live state, printing whatever the event completes."""
        self._ensure_live()
        with self._lock:
            if event.lane is None:
                prints = self._main_event(event)
            else:
                prints = self._lane_event(event.lane, event)
        self._print(prints)

    def run_finished(self, *, status: RunStatus, usage: AgentUsage, detail: str = "") -> None:
        """Print what is left, stop the live region and print the run's summary."""
        from rich import box
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            prints = self._flush_text()
            note = "waiting for approval" if status == "approval" else "no result"
            prints += [
                self._call_block(call, Text(note, style="yellow"))
                for call in self._running.values()
            ]
            if status != "approval":
                self._running.clear()
            for agent in self._subagents.all():
                if agent.finished is None:
                    agent.finished = time.monotonic()
                    prints.append(self._subagent_block(agent, Text("not finished", style="yellow")))
            elapsed = _elapsed(time.monotonic() - self._started)
        self._print(prints)
        self._stop_live()

        summary = _Summary.of(usage)
        mark, style = {
            "done": ("✔", "bold green"),
            "interrupted": ("■", "bold yellow"),
            "approval": ("?", "bold yellow"),
            "error": ("✘", "bold red"),
        }[status]
        line = Text.assemble(
            (f"{mark} {_STATUS_WORDS[status]}", style),
            (
                f" · {summary.calls} model calls · {summary.input_tokens:,} in / "
                f"{summary.output_tokens:,} out tokens · {elapsed}",
                "dim",
            ),
        )
        if detail:
            line.append(f" — {detail}")
        self._console.print()
        self._console.print(line)
        if len(summary.agents) > 1:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
            table.add_column("agent")
            for header in ("calls", "in", "out", "tokens"):
                table.add_column(header, justify="right")
            for name, t in summary.agents.items():
                table.add_row(
                    Text(name),
                    str(t.calls),
                    f"{t.input_tokens:,}",
                    f"{t.output_tokens:,}",
                    f"{t.total_tokens:,}",
                )
            self._console.print(table)

    def pause(self) -> None:
        """Print the paragraph being streamed and stop the live region; idempotent."""
        with self._lock:
            prints = self._flush_text()
        self._print(prints)
        self._stop_live()

    def notice(self, text: str) -> None:
        """Print `text`, dimmed."""
        from rich.text import Text

        self._console.print(Text(text, style="dim"))

    def error(self, text: str) -> None:
        """Print `error: <text>` in red."""
        from rich.text import Text

        self._console.print(Text(f"error: {text}", style="bold red"))

    def expand(self, ref: str) -> str:
        """The whole text of tool result `ref` (empty: the latest), or why there is none."""
        return self._results.expand(ref)

    # ---------------------------------------------------------------- live region

    def _ensure_live(self) -> None:
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                _LiveView(self), console=self._console, refresh_per_second=8, transient=True
            )
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def _live_renderable(self) -> RenderableType:
        from rich.console import Group
        from rich.text import Text
        from rich.tree import Tree

        with self._lock:
            parts: list[RenderableType] = []
            if self._text.strip():
                tail = "\n".join(self._text.strip("\n").splitlines()[-_LIVE_TEXT_LINES:])
                parts.append(_block(" " if self._text_open else "●", "", Text(tail)))
            for call in self._running.values():
                line = Text.assemble(("◌ ", "cyan"), self._call_text(call))
                tail = self._shell_tail.get(call.call_id)
                if tail:
                    line.append(f"\n  │ {_cut(tail, 100)}", style="dim")
                parts.append(line)
            if self._todos:
                parts.append(self._todo_lines(self._todos))
            agents = self._subagents.all()
            if agents:
                tree = Tree(Text("subagents", style="bold"), guide_style="dim")
                now = time.monotonic()
                for agent in agents:
                    if agent.finished is None:
                        mark, style = "▶", "cyan"
                    else:
                        mark, style = ("✘", "red") if agent.failed else ("✔", "green")
                    seconds = (agent.finished or now) - agent.started
                    node = tree.add(
                        Text.assemble(
                            (f"{mark} ", style),
                            (agent.label, "bold"),
                            f" {_cut(agent.description, 60)}" if agent.description else "",
                            (f" · {_plural(agent.steps, 'step')} · {_elapsed(seconds)}", "dim"),
                        )
                    )
                    if agent.activity:
                        node.add(Text(agent.activity, style="dim"))
                parts.append(tree)
            status = Text.assemble(
                ("Working… ", "bold"),
                (f"{self._model} · " if self._model else "", "dim"),
                (_elapsed(time.monotonic() - self._started), "dim"),
            )
            if self._usage is not None:
                summary = _Summary.of(self._usage)
                status.append(
                    f" · {summary.calls} model calls · {summary.total_tokens:,} tokens", "dim"
                )
            status.append(" · ctrl+c to interrupt", "dim")
            self._spinner.update(text=status)
            parts.append(self._spinner)
        return Group(*parts)

    # ---------------------------------------------------------------- events

    def _main_event(self, event: Event) -> list[RenderableType]:
        from rich.text import Text

        if isinstance(event, TextDelta):
            self._text += event.text
            if "\n" not in event.text:
                return []
            cut = finished_prefix(self._text)
            done, self._text = self._text[:cut], self._text[cut:]
            return self._paragraph(done)
        prints = self._flush_text()
        self._text_open = False
        if isinstance(event, ToolStarted):
            if event.name == TASK_TOOL:
                self._subagents.start(event)
            elif event.name != WRITE_TODOS_TOOL:
                self._running[event.call_id] = event
        elif isinstance(event, ToolFinished):
            self._shell_tail.pop(event.call_id, None)
            call = self._running.pop(event.call_id, None)
            if event.name == WRITE_TODOS_TOOL:  # the TodosChanged that follows shows the list
                return prints
            ref = self._results.add(event.name, event.text)
            args = call.args if call is not None else {}
            summary = summarize(event.name, event.text, args=args, is_error=event.is_error)
            if event.name == TASK_TOOL:
                agent = self._finish_subagent(event)
                result = self._summary_text(summary, event.is_error, "failed: ")
                prints.append(self._subagent_block(agent, result, ref))
            else:
                result = self._summary_text(summary, event.is_error, "error: ")
                prints.append(self._call_block(call or event, result, ref))
        elif isinstance(event, TodosChanged):
            self._todos = list(event.todos)
            prints.append(
                _block("●", "cyan", Text("todos", style="bold"), self._todo_lines(self._todos))
            )
        elif isinstance(event, ShellOutput):
            line = _last_line(event.chunk)
            if line:
                self._shell_tail[event.call_id] = line
        return prints

    def _lane_event(self, lane: str, event: Event) -> list[RenderableType]:
        from rich.text import Text

        agent = self._subagents.get(lane)
        if isinstance(event, TextDelta):
            # Only the latest line is shown, so a long answer need not be kept whole.
            self._lane_text[lane] = (self._lane_text.get(lane, "") + event.text)[-2000:]
            line = _last_line(self._lane_text[lane])
            if line:
                agent.activity = f"› {_cut(line, 80)}"
            return []
        self._lane_text.pop(lane, None)
        prints: list[RenderableType] = []
        if isinstance(event, ToolStarted):
            agent.steps += 1
            agent.activity = f"{event.name}({_args_text(event.args, 60)})"
            self._lane_args[event.call_id] = event.args
            if event.name == TASK_TOOL:
                self._subagents.start(event)
        elif isinstance(event, ToolFinished):
            args = self._lane_args.pop(event.call_id, {})
            if event.name == WRITE_TODOS_TOOL:  # the TodosChanged that follows says it
                return prints
            ref = self._results.add(event.name, event.text)
            summary = summarize(event.name, event.text, args=args, is_error=event.is_error)
            text = _cut(summary.headline, 80)
            agent.activity = (
                f"{event.name} ⎿ {'error: ' if event.is_error else ''}{text} #{ref}"
            )
            if event.name == TASK_TOOL:
                nested = self._finish_subagent(event)
                prints.append(self._subagent_block(nested, Text(text), ref))
        elif isinstance(event, TodosChanged):
            done = sum(1 for todo in event.todos if todo.get("status") == "completed")
            agent.activity = f"todos: {done}/{len(event.todos)} done"
        elif isinstance(event, ShellOutput):
            line = _last_line(event.chunk)
            if line:
                agent.activity = f"│ {_cut(line, 80)}"
        return prints

    def _finish_subagent(self, event: ToolFinished) -> _Subagent:
        agent = self._subagents.get(event.call_id)
        agent.finished = time.monotonic()
        agent.failed = event.is_error
        agent.activity = (
            f"{'failed' if event.is_error else 'finished'}: {short_text(event.text, 80)}"
        )
        self._lane_text.pop(event.call_id, None)
        return agent

    # ---------------------------------------------------------------- printing

    def _print(self, renderables: list[RenderableType]) -> None:
        from rich.console import Group
        from rich.text import Text

        for renderable in renderables:
            self._console.print(Group(Text(""), renderable))

    def _flush_text(self) -> list[RenderableType]:
        text, self._text = self._text, ""
        return self._paragraph(text)

    def _paragraph(self, text: str) -> list[RenderableType]:
        from rich.markdown import Markdown

        text = text.strip("\n")
        if not text.strip():
            return []
        marker = " " if self._text_open else "●"
        self._text_open = True
        # No OSC 8 hyperlinks: a link shows its address, which survives logs and copying.
        return [_block(marker, "", Markdown(text, hyperlinks=False))]

    @staticmethod
    def _summary_text(summary: ToolSummary, failed: bool, word: str) -> Text:
        """A result's summary: the headline (red, after `word`, for an error), then its lines
        dimmed; an error's lines are all there, in red. A failed call that is not an error
        (a command's non-zero exit) has only its headline in red."""
        from rich.text import Text

        headline = f"{word}{summary.headline}" if summary.error else summary.headline
        # "fold": a long word (a path, a hash) wraps instead of being cut with an ellipsis.
        result = Text(headline, style="red" if failed else "", overflow="fold")
        for line in summary.lines:
            result.append("\n")
            result.append(line, style="red" if summary.error else "dim")
        return result

    def _call_text(self, call: ToolStarted | ToolFinished) -> Text:
        from rich.text import Text

        if isinstance(call, ToolStarted):
            return Text.assemble((call.name, "bold"), f"({_args_text(call.args, 100)})")
        return Text(call.name, style="bold")

    def _call_block(
        self, call: ToolStarted | ToolFinished, result: Text, ref: str = ""
    ) -> RenderableType:
        header = self._call_text(call)
        if ref:
            header.append(f" #{ref}", style="dim")
        return _block("●", "red" if result.style == "red" else "green", header, result)

    def _subagent_block(self, agent: _Subagent, result: Text, ref: str = "") -> RenderableType:
        from rich.text import Text

        seconds = (agent.finished or time.monotonic()) - agent.started
        header = Text.assemble(
            (agent.label, "bold"),
            f" {agent.description}" if agent.description else "",
            (f" · {_plural(agent.steps, 'step')} · {_elapsed(seconds)}", "dim"),
            (f" #{ref}" if ref else "", "dim"),
        )
        return _block("●", "red" if agent.failed else "magenta", header, result)

    @staticmethod
    def _todo_lines(todos: list[dict[str, Any]]) -> Text:
        from rich.text import Text

        lines = Text()
        for index, todo in enumerate(todos):
            status = str(todo.get("status"))
            mark, style = _RICH_TODO_MARKS.get(status, ("○", ""))
            if index:
                lines.append("\n")
            lines.append(f"{mark} ", style=style)
            lines.append(str(todo.get("content", "")), style="dim" if status == "completed" else "")
        return lines


def _block(
    marker: str, marker_style: str, header: RenderableType, result: RenderableType | None = None
) -> RenderableType:
    """`header` after a marker, with `result` below it after a `⎿`, in the style of Claude Code."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(Text(marker, style=marker_style), header)
    if result is not None:
        inner = Table.grid(padding=(0, 1))
        inner.add_column(no_wrap=True)
        inner.add_column()
        inner.add_row(Text("⎿", style="dim"), result)
        grid.add_row(Text(""), inner)
    return grid


def make_display(plain: bool, stream: TextIO | None = None) -> Display:
    """The display for `stream` (stdout by default).

    `PlainDisplay` when `plain` is set, when the stream is not a terminal, or when
    `TERM=dumb`; otherwise a `RichDisplay` writing to the stream.
    """
    target: TextIO = stream if stream is not None else sys.stdout
    if plain or os.environ.get("TERM") == "dumb" or not _isatty(target):
        return PlainDisplay(target)
    from rich.console import Console

    return RichDisplay(Console(file=target))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
