"""The interactive prompt's line editor and slash commands, in a real terminal (pexpect pty).

Without `--plain`, in a terminal, `fathom` reads messages with prompt_toolkit: history kept
per project, a bracketed paste or Alt-Enter for several lines in one message, Tab
completion of `/commands` and `@path` mentions (which attach the file). Slash commands
never reach the model: the scripted model's recorded requests are counted to show it.
"""

from __future__ import annotations

import re
import sys

import pexpect
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject, human_texts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSWER = "ANSWER:"
WRITE_TASK = "write notes.txt"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"  # a terminal's bracketed paste
UP, TAB, ALT_ENTER, ENTER = "\x1b[A", "\t", "\x1b\r", "\r"


def policy(request: ScriptRequest) -> AIMessage:
    """Answers with every human message of the thread so far (so a thread's history shows),
    and writes notes.txt when asked to (for the approval test)."""
    task = request.last_human_text
    if task == WRITE_TASK:
        if not isinstance(request.messages[-1], ToolMessage):
            return ai("Writing.", tool_call("write_file", {"file_path": "/notes.txt",
                                                           "content": "x\n"}))
        return ai(f"{ANSWER} wrote it")
    said = " | ".join(" / ".join(t.splitlines()) for t in human_texts(request.messages))
    return ai(f"{ANSWER} [{said}]")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


def _requests(fp: FathomProject) -> int:
    assert fp.model is not None
    return len(fp.model.requests)


def _answer(child: pexpect.spawn, said: str) -> None:
    """Wait for the answer listing the thread's human messages `said`, then the prompt."""
    child.expect_exact(f"{ANSWER} [{said}]")
    FathomProject.prompt(child)


def _send(child: pexpect.spawn, text: str) -> None:
    """Type `text` and Enter (a carriage return, as a terminal sends it)."""
    child.send(text + ENTER)


def _leave(fp: FathomProject, child: pexpect.spawn) -> int | None:
    """At the prompt (already shown): /exit; the exit status."""
    _send(child, "/exit")
    return fp.finish(child)


@pytest.mark.timeout(120)
def test_history_survives_the_session_and_up_recalls_it(fathom_project: FathomProject) -> None:
    fp = fathom_project
    first = fp.spawn()
    fp.prompt(first)
    _send(first, "remember the tide tables")
    _answer(first, "remember the tide tables")
    assert _leave(fp, first) == 0
    assert "remember the tide tables" in (fp.project / ".fathom" / "history").read_text(
        encoding="utf-8")

    second = fp.spawn()  # a new process, a new thread
    fp.prompt(second)
    second.send(UP + UP)  # the first session's last line (/exit), then the one before
    second.send(ENTER)
    second.expect_exact("› remember the tide tables")  # the line as sent
    _answer(second, "remember the tide tables")
    assert _leave(fp, second) == 0
    assert _requests(fp) == 2
    assert "^[[A" not in fp.transcript(second)


@pytest.mark.timeout(90)
def test_a_pasted_block_of_three_lines_is_one_message(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    child.send(f"{PASTE_START}first line\nsecond line\nthird line{PASTE_END}")
    child.send(ENTER)
    _answer(child, "first line / second line / third line")
    assert _leave(fp, child) == 0
    assert fp.model is not None
    [request] = fp.model.requests
    assert human_texts(request.messages) == ["first line\nsecond line\nthird line"]


@pytest.mark.timeout(90)
def test_alt_enter_adds_a_line_and_enter_sends(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    child.send("one" + ALT_ENTER)
    child.send("two" + ENTER)
    _answer(child, "one / two")
    assert _leave(fp, child) == 0
    assert fp.model is not None
    [request] = fp.model.requests
    assert human_texts(request.messages) == ["one\ntwo"]


@pytest.mark.timeout(90)
def test_tab_completes_a_command(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    child.send("/he" + TAB)
    child.send(ENTER)
    child.expect_exact("› /help")  # the line as sent
    child.expect_exact("commands:")
    child.expect_exact("/exit")
    assert fp.leave(child) == 0
    assert _requests(fp) == 0


@pytest.mark.timeout(90)
def test_tab_completes_a_mention_and_the_model_gets_the_file(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write("notes.txt", "the tide turns at four\n")
    child = fp.spawn()
    fp.prompt(child)
    child.send("summarize @no" + TAB)
    child.send(ENTER)
    child.expect_exact("› summarize @notes.txt")  # the line as sent
    child.expect_exact("attached notes.txt")
    child.expect_exact(ANSWER)
    fp.prompt(child)
    assert _leave(fp, child) == 0
    assert fp.model is not None
    [request] = fp.model.requests
    [message] = human_texts(request.messages)
    assert message.startswith("summarize @notes.txt\n\n")
    assert '<file path="notes.txt">\nthe tide turns at four\n\n</file>' in message


@pytest.mark.timeout(90)
def test_an_unknown_mention_is_an_error_and_nothing_is_sent(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    _send(child, "read @nowhere.txt")
    child.expect_exact("@nowhere.txt: no such file in the project")
    child.expect_exact("nothing was sent")
    assert fp.leave(child) == 0
    assert _requests(fp) == 0


@pytest.mark.timeout(90)
def test_an_unknown_command_names_the_nearest_and_reaches_no_model(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    _send(child, "/hepl")
    child.expect_exact("unknown command /hepl; did you mean /help?")
    fp.prompt(child)
    _send(child, "/")  # a slash alone lists the commands
    child.expect_exact("commands:")
    assert fp.leave(child) == 0
    assert _requests(fp) == 0, "a slash command reached the model"


@pytest.mark.timeout(90)
def test_help_lists_every_command(fathom_project: FathomProject) -> None:
    from fathom.cli.commands import COMMANDS

    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    _send(child, "/help")
    child.expect_exact("commands:")
    fp.prompt(child)
    shown = fp.transcript(child).split("commands:", 1)[1]
    for command in COMMANDS:
        assert re.search(rf"^\s+/{command.name}\b.*{re.escape(command.help)}", shown,
                         re.MULTILINE), f"/{command.name} is not listed:\n{shown}"
    assert _leave(fp, child) == 0


@pytest.mark.timeout(120)
def test_clear_starts_a_new_thread_and_thread_switches_back(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn()
    first, _ = fp.banner(child)
    fp.prompt(child)
    _send(child, "alpha")
    _answer(child, "alpha")

    _send(child, "/clear")
    child.expect(r"new thread (\w+)")
    second = child.match.group(1)
    assert second != first
    fp.prompt(child)
    _send(child, "beta")
    _answer(child, "beta")  # the new thread does not hold "alpha"

    _send(child, "/thread nosuchthread")
    child.expect_exact("nosuchthread is not a thread of this project")
    fp.prompt(child)
    _send(child, f"/thread {first}")
    child.expect_exact(f"switched to thread {first}")
    fp.prompt(child)
    _send(child, "gamma")
    _answer(child, "alpha | gamma")
    _send(child, "/threads")
    child.expect_exact(f"* {first}")
    child.expect_exact(second)
    assert fp.leave(child) == 0
    assert _requests(fp) == 3


@pytest.mark.timeout(90)
def test_keys_typed_ahead_of_an_approval_neither_answer_it_nor_become_a_message(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    # One burst, as a fast typist or a paste without bracketed paste sends it: the editor
    # reads the `y` together with the message, before the question exists.
    child.send(f"{WRITE_TASK}{ENTER}y{ENTER}")
    child.expect(r"approve \[y\]")
    child.send("n" + ENTER)
    child.expect_exact("reason for the agent (optional): ")
    child.send(ENTER)
    child.expect_exact(f"{ANSWER} wrote it")
    fp.prompt(child)
    assert _leave(fp, child) == 0
    assert not (fp.project / "notes.txt").exists(), "the typed-ahead `y` approved the write"
    assert not fp.requests_for("y"), "the typed-ahead `y` was sent as a message"


@pytest.mark.timeout(90)
def test_model_and_cost_answer_without_a_model_call(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    _send(child, "hello")
    _answer(child, "hello")
    _send(child, "/model")
    child.expect_exact("model: openai:scripted")
    fp.prompt(child)
    _send(child, "/cost")
    child.expect(r"openai:scripted\s+1\s")  # one call on this thread so far
    fp.prompt(child)
    assert _leave(fp, child) == 0
    assert _requests(fp) == 1, "a command reached the model"


@pytest.mark.timeout(90)
def test_ctrl_c_clears_the_line_and_ctrl_d_leaves(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.prompt(child)
    child.send("half a thought")
    child.sendintr()
    child.expect_exact("(Ctrl-D or /exit to leave)")
    fp.prompt(child)
    child.sendeof()
    assert fp.finish(child) == 0
    assert _requests(fp) == 0, "the line left by Ctrl-C was sent"
