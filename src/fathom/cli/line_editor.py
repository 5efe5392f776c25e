"""Reading what the person types at the `› ` prompt: a line editor in a terminal, `input()`
otherwise.

In a terminal the prompt is a prompt_toolkit `PromptSession`
(https://python-prompt-toolkit.readthedocs.io/): arrow keys and Emacs keys edit the line,
Up/Down and Ctrl-R search the history, which is kept per project in `.fathom/history`.
Enter sends; Alt-Enter (or Esc then Enter) adds a line; a pasted block arrives whole,
newlines included, as one message (the terminal's bracketed paste). Tab completes
`/commands` (their help alongside) and `@path` mentions of the project's files. The
session's status line (model, thread, tokens and cost, cache rate, pending tasks) is the
prompt's bottom toolbar.

When stdin or stdout is not a terminal, `TERM` is `dumb`, or `--plain` is given, lines
are read with `input()`. Both readers raise `EOFError` on Ctrl-D and `KeyboardInterrupt`
on Ctrl-C, as `input()` does.

Keys read by the editor but not used when a line is sent (text typed after Enter in the
same burst) are kept by prompt_toolkit for the next prompt; `discard_typeahead` drops
them, so that nothing typed before an approval question is asked can surface after it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.typeahead import clear_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from fathom.cli.mentions import mention_candidates

__all__ = [
    "EditorReader",
    "LineReader",
    "PlainReader",
    "history_path",
    "make_reader",
    "use_line_editor",
]

_MENTION_AT_CURSOR = re.compile(r"(?:^|\s)@(\S*)$")
_COMMAND_AT_CURSOR = re.compile(r"^/(\S*)$")


class LineReader(Protocol):
    """Reads one message from the person."""

    def read(self, prompt: str, *, status: str | None = None) -> str:
        """The text typed after `prompt`; `EOFError` on Ctrl-D, `KeyboardInterrupt` on Ctrl-C.

        `status` is the session's status line, shown under the prompt by the line editor
        (the plain reader leaves it to the caller)."""
        ...

    def discard_typeahead(self) -> None:
        """Forget input read ahead of the next prompt."""
        ...


class PlainReader:
    """`input()`: for pipes, dumb terminals and `--plain`."""

    def read(self, prompt: str, *, status: str | None = None) -> str:
        return input(prompt)

    def discard_typeahead(self) -> None:
        """Nothing is read ahead: `input()` consumes only the line it returns."""


class Completable(Protocol):
    """What completion reads of a slash command (`fathom.cli.commands.Command` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...
    @property
    def help(self) -> str: ...


def use_line_editor(*, plain: bool) -> bool:
    """Whether to use the line editor: stdin and stdout are terminals, `TERM` is not
    `dumb` and `--plain` was not given."""
    if plain or os.environ.get("TERM", "") in ("", "dumb"):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def history_path(project_dir: Path) -> Path | None:
    """`<project>/.fathom/history`, or `None` when that folder cannot be written."""
    folder = project_dir / ".fathom"
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder / "history" if os.access(folder, os.W_OK) else None


class EditorReader:
    """A prompt_toolkit prompt with the project's history and completion."""

    def __init__(self, project_dir: Path, commands: Iterable[Completable]) -> None:
        path = history_path(project_dir)
        history: History = FileHistory(str(path)) if path else InMemoryHistory()
        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            """Alt-Enter (Esc, Enter) adds a line instead of sending."""
            event.current_buffer.insert_text("\n")

        self._session: PromptSession[str] = PromptSession(
            history=history,
            completer=_Completer(project_dir, commands),
            # Tab completes. Completing while typing would race a quick Tab: prompt_toolkit
            # drops a completion asked for while another one is still running.
            complete_while_typing=False,
            key_bindings=bindings,
            prompt_continuation=lambda width, _line, _wrap: " " * width,
            enable_history_search=False,
        )

    def read(self, prompt: str, *, status: str | None = None) -> str:
        # the bottom toolbar: one line under the prompt, drawn while the person types
        return self._session.prompt(prompt, bottom_toolbar=status)

    def discard_typeahead(self) -> None:
        clear_typeahead(self._session.input)


class _Completer(Completer):
    """`/commands` at the start of the line, `@paths` anywhere."""

    def __init__(self, project_dir: Path, commands: Iterable[Completable]) -> None:
        self._project = project_dir
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        before = document.text_before_cursor
        command = _COMMAND_AT_CURSOR.match(before)
        if command:
            typed = command.group(1).lower()
            for item in self._commands:
                names: Iterable[str] = (item.name, *item.aliases)
                name = next((n for n in names if n.startswith(typed)), None)
                if name is not None:
                    yield Completion(f"/{name}", start_position=-len(before),
                                     display_meta=item.help)
            return
        mention = _MENTION_AT_CURSOR.search(before)
        if mention:
            partial = mention.group(1)
            for path in mention_candidates(self._project, partial):
                shown = path.rstrip("/").rpartition("/")[2] + ("/" if path.endswith("/") else "")
                yield Completion(f"@{path}", start_position=-len(partial) - 1, display=shown)


def make_reader(project_dir: Path, commands: Iterable[Completable], *, plain: bool) -> LineReader:
    """The line editor when `use_line_editor`, else `input()`."""
    if use_line_editor(plain=plain):
        return EditorReader(project_dir, commands)
    return PlainReader()

