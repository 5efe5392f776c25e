"""The line editor's pieces without a terminal: when it is used, where its history goes,
and what Tab offers (`fathom.cli.line_editor`). The pty tests drive it in a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from fathom.cli.commands import COMMANDS
from fathom.cli.line_editor import PlainReader, _Completer, history_path, make_reader


def _complete(project: Path, text: str) -> list[tuple[str, str]]:
    completer = _Completer(project, COMMANDS)
    return [(c.text, c.display_meta_text)
            for c in completer.get_completions(Document(text), CompleteEvent())]


def test_commands_complete_with_their_help(tmp_path: Path) -> None:
    assert _complete(tmp_path, "/he") == [("/help", "list the commands")]
    assert [text for text, _ in _complete(tmp_path, "/")] == [f"/{c.name}" for c in COMMANDS]
    assert _complete(tmp_path, "/ne") == [("/new", COMMANDS.get("clear").help)]  # an alias
    assert _complete(tmp_path, "say /he") == []  # only at the start of the line


def test_mentions_complete_anywhere_in_the_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    assert [t for t, _ in _complete(tmp_path, "look at @no")] == ["@notes.txt"]
    assert [t for t, _ in _complete(tmp_path, "@d")] == ["@docs/"]
    assert _complete(tmp_path, "mail a@no") == []  # not a word that starts with @


@pytest.mark.parametrize(("plain", "term"), [(True, "xterm-256color"), (False, "dumb"),
                                             (False, "")])
def test_plain_input_for_plain_or_dumb_terminals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain: bool, term: str
) -> None:
    monkeypatch.setenv("TERM", term)
    assert isinstance(make_reader(tmp_path, COMMANDS, plain=plain), PlainReader)


def test_plain_input_when_stdin_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    # pytest's captured stdin and stdout are not terminals
    assert isinstance(make_reader(tmp_path, COMMANDS, plain=False), PlainReader)


def test_history_is_kept_in_the_project(tmp_path: Path) -> None:
    assert history_path(tmp_path) == tmp_path / ".fathom" / "history"
    assert (tmp_path / ".fathom").is_dir()
