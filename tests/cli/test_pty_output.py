"""What the `fathom` command prints for reading, in a real terminal (pexpect pty): answers
rendered as markdown (literal with `--plain`), tool results as summaries with a number,
a failing tool's error in full, `/expand N` for a whole result, and the recap of a resumed
thread with its open todos.
"""

from __future__ import annotations

import re
import sys

import pexpect
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSWER = "ANSWER:"
MARKDOWN_TASK = "show the report"
MARKDOWN = (
    "# Report Heading\n\nThe survey is **done**.\n\n- first bullet\n- second bullet\n\n"
    "```python\nprint('hello fathom')\n```\n\nANSWER: end of report"
)
SURVEY_TASK = "survey the project"
BROKEN_TASK = "break a tool"
PLAN_TASK = "plan the work"
TODOS = [
    {"content": "Survey the code", "status": "completed"},
    {"content": "Write the report", "status": "in_progress"},
    {"content": "Review it", "status": "pending"},
]
SHELL = "for i in 1 2 3 4 5 6 7 8; do echo out$i; done; exit 4"
ENTER = "\r"


def policy(request: ScriptRequest) -> AIMessage:
    """Each task's step, decided from the request alone; every task ends in an answer."""
    task = request.last_human_text
    answered = isinstance(request.messages[-1], ToolMessage)
    if task == MARKDOWN_TASK:
        return ai(MARKDOWN)
    if task == SURVEY_TASK and not answered:
        return ai("Surveying.",
                  tool_call("grep", {"pattern": "def ", "output_mode": "content"}),
                  tool_call("ls", {"path": "/src"}),
                  tool_call("execute", {"command": SHELL}))
    if task == BROKEN_TASK and not answered:
        return ai("Reading.", tool_call("read_file", {"offset": "abc", "limit": -3}))
    if task == PLAN_TASK and not answered:
        return ai("Planning.", tool_call("write_todos", {"todos": TODOS}))
    if task == PLAN_TASK:
        return ai(f"{ANSWER} planned three steps.\n\nThe report is next.")
    return ai(f"{ANSWER} done with {task!r}")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


@pytest.fixture
def project(fathom_project: FathomProject) -> FathomProject:
    fathom_project.write("src/one.py", "def alpha():\n    return 1\n\n\ndef beta():\n    pass\n")
    fathom_project.write("src/two.py", "def gamma():\n    return 3\n")
    return fathom_project


def _ask(fp: FathomProject, child: pexpect.spawn, text: str, *, plain: bool) -> None:
    """Wait for the prompt and send `text` (a carriage return, as a terminal sends Enter)."""
    fp.prompt(child)
    if plain:
        child.sendline(text)
    else:
        child.send(text + ENTER)


def _lines(text: str) -> list[str]:
    """The lines of `text`, stripped, without the `●` that starts a printed item."""
    return [line.strip().removeprefix("●").strip() for line in text.splitlines()]


@pytest.mark.timeout(120)
def test_an_answer_renders_as_markdown_in_the_terminal(project: FathomProject) -> None:
    fp = project
    child = fp.spawn()
    _ask(fp, child, MARKDOWN_TASK, plain=False)
    child.expect_exact("✔ done")
    lines = _lines(fp.transcript(child))
    # The raw text may flash in the live region; the rendered lines are what stays.
    assert "Report Heading" in lines  # the heading, without its `#`
    assert "• first bullet" in lines and "• second bullet" in lines
    assert "The survey is done." in lines  # bold, without its `**`
    assert "print('hello fathom')" in lines  # the code block's content, without fences
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_plain_output_keeps_the_markdown_literal(project: FathomProject) -> None:
    fp = project
    child = fp.spawn("--plain")
    _ask(fp, child, MARKDOWN_TASK, plain=True)
    child.expect_exact("── done:")
    raw = child.logfile_read.getvalue()
    for line in ("model › # Report Heading", "model › The survey is **done**.",
                 "model › - first bullet", "model › ```python",
                 "model › print('hello fathom')"):
        assert line in raw
    assert "\x1b" not in raw
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_tool_results_show_summaries_and_expand_in_full(project: FathomProject) -> None:
    fp = project
    child = fp.spawn("--plain", "--sandbox", "local", "--auto-approve", "execute")
    _ask(fp, child, SURVEY_TASK, plain=True)
    child.expect_exact(f"model › {ANSWER} done with")
    shown = fp.transcript(child)
    grep = re.search(r"result ‹ grep: 3 matches in 2 files \[#(\d+)\]", shown)
    assert grep, shown
    assert re.search(r"result ‹ ls: 2 entries: one\.py, two\.py \[#\d+\]", shown), shown
    assert re.search(r"error ‹ execute: exit code 4 · 8 lines of output \[#\d+\]", shown), shown
    assert "  3: def gamma" not in shown.replace("  1: def gamma", "")  # grep's lines hidden

    fp.prompt(child)
    child.sendline(f"/expand {grep.group(1)}")
    child.expect_exact(f"#{grep.group(1)} grep:")
    for line in ("/src/one.py:", "1: def alpha():", "5: def beta():", "/src/two.py:",
                 "1: def gamma():"):
        child.expect_exact(line)
    fp.prompt(child)
    child.sendline("/expand 99")
    child.expect_exact("no tool result #99")
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_rich_display_shows_a_commands_exit_code_and_its_first_and_last_lines(
    project: FathomProject,
) -> None:
    fp = project
    child = fp.spawn("--sandbox", "local", "--auto-approve", "execute")
    _ask(fp, child, SURVEY_TASK, plain=False)
    child.expect_exact("✔ done")
    lines = _lines(fp.transcript(child))
    assert any(line.endswith("3 matches in 2 files") for line in lines), lines
    assert any(line.endswith("exit code 4 · 8 lines of output") for line in lines), lines
    at = next(i for i, line in enumerate(lines) if line.endswith("exit code 4 · 8 lines of output"))
    assert lines[at + 1 : at + 7] == ["out1", "out2", "…", "out6", "out7", "out8"]
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_a_failing_tools_error_is_on_screen_in_full(project: FathomProject) -> None:
    fp = project
    child = fp.spawn()
    _ask(fp, child, BROKEN_TASK, plain=False)
    child.expect_exact("✔ done")
    shown = " ".join(fp.transcript(child).split())
    for part in ("error: Error invoking tool 'read_file'", "file_path: Field required",
                 "offset: Input should be a valid integer, unable to parse string as an integer",
                 "Please fix the error and try again."):
        assert part in shown, shown
    assert fp.leave(child) == 0


@pytest.mark.timeout(150)
def test_resume_prints_the_last_exchange_and_the_open_todos(project: FathomProject) -> None:
    fp = project
    first = fp.spawn("--plain")
    thread, _state = fp.banner(first)
    _ask(fp, first, PLAN_TASK, plain=True)
    first.expect_exact(f"model › {ANSWER} planned three steps.")
    assert fp.leave(first) == 0
    assert "where this thread left off" not in fp.transcript(first)  # a new thread: no recap

    second = fp.spawn("--resume", "--plain")
    assert fp.banner(second) == (thread, "resumed")
    for line in ("── where this thread left off", f"you › {PLAN_TASK}",
                 f"agent › {ANSWER} planned three steps.", "        The report is next.",
                 "open todos (2 of 3):", "  [>] Write the report", "  [ ] Review it"):
        second.expect_exact(line)
    assert "Survey the code" not in fp.transcript(second)  # a finished todo is not listed
    assert fp.leave(second) == 0
