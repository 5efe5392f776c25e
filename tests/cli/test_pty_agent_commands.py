"""/skills, /agents, /budget and /permissions, and the status line, in the real `fathom`
command in a pty (pexpect): the line editor's bottom toolbar, and the plain line printed
after each turn with `--plain`. A subagent definition written while the session runs is
in the next turn after `/agents reload` (the scripted model's request shows it)."""

from __future__ import annotations

import json
import re
import sys

import pexpect
import pytest
from langchain_core.messages import AIMessage

from fathom.testing import ScriptRequest, ai
from fathom.testing.scripted import Script

from .conftest import FathomProject

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ENTER = "\r"
AGENT = """---
name: {name}
description: {description}
---
You review code.
"""
SKILL = """---
name: deploy
description: Ship the release
---
Steps.
"""


def policy(request: ScriptRequest) -> AIMessage:
    return ai(f"ANSWER: {request.last_human_text}")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


CPR_REQUEST = "\x1b[6n"  # where is the cursor? (prompt_toolkit asks at every prompt)


def _send(child: pexpect.spawn, text: str) -> None:
    child.send(text + ENTER)


def _expect(child: pexpect.spawn, pattern: str, *, exact: bool = False) -> None:
    """Wait for `pattern`, answering the line editor's cursor position requests as a
    terminal does: prompt_toolkit draws the bottom toolbar only once it knows how many
    rows are below the cursor."""
    wanted = re.escape(pattern) if exact else pattern
    while child.expect([wanted, re.escape(CPR_REQUEST)]) == 1:
        child.send("\x1b[5;1R")  # row 5 of 40


def _task_tool(fp: FathomProject) -> str:
    assert fp.model is not None
    request = fp.model.requests[-1]
    return json.dumps(next(t for t in request.tools if t["function"]["name"] == "task"))


@pytest.mark.timeout(180)  # one start of the command and a few turns: a hang bound
def test_agent_commands_and_the_status_line_under_the_prompt(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write(".fathom/agents/reviewer.md", AGENT.format(name="reviewer",
                                                        description="Reviews diffs"))
    fp.write(".fathom/skills/deploy/SKILL.md", SKILL)
    # a terminal that answers cursor position requests, no --plain: the line editor
    env = {k: v for k, v in fp.env.items() if k != "PROMPT_TOOLKIT_NO_CPR"}
    child = fp.spawn(env=env)
    thread, _ = fp.banner(child)
    _expect(child, re.escape(f"openai:scripted · thread {thread} · 0 tokens · $— · cache -"))

    _send(child, "hello")
    _expect(child, "ANSWER: hello", exact=True)
    # after a turn the toolbar counts its tokens (the scripted server reports usage)
    _expect(child, rf"openai:scripted · thread {thread} · [1-9][\d,]* tokens · \$\S+ · cache ")

    _send(child, "/skills")
    _expect(child, r"deploy\s+Ship the release")
    _send(child, "/agents")
    _expect(child, r"reviewer\s+Reviews diffs")
    _expect(child, r"general-purpose\s+\(built in\)")

    fp.write(".fathom/agents/tester.md", AGENT.format(name="tester",
                                                      description="Writes the missing tests"))
    _send(child, "/agents reload")
    _expect(child, "agents: 2 (added tester)", exact=True)
    _send(child, "/agents tester")
    _expect(child, "description: Writes the missing tests", exact=True)
    _send(child, "check the tests")
    _expect(child, "ANSWER: check the tests", exact=True)
    assert "Writes the missing tests" in _task_tool(fp)

    _send(child, "/budget")
    _expect(child, "no budget: runs have no caps", exact=True)
    _send(child, "/budget tokens=90000 calls=40")
    _expect(child, "max_tokens = 90000, max_model_calls = 40", exact=True)
    _send(child, "spend some")  # the next turn runs under the caps
    _expect(child, "ANSWER: spend some", exact=True)
    _send(child, "/budget")
    _expect(child, "budget caps: max_tokens = 90000, max_model_calls = 40", exact=True)
    _expect(child, r"budget: tokens [1-9][\d,]* of 90,000 \(\d+%\) · model calls 1 of 40")

    _send(child, "/permissions")
    _expect(child, "tools that ask for approval: delete, edit_file, write_file", exact=True)
    _send(child, "/permissions allow write_file")
    _expect(child, "write_file now run without asking", exact=True)
    _expect(child, "tools that ask for approval: delete, edit_file\r", exact=True)
    _send(child, "/exit")
    assert fp.finish(child) == 0


@pytest.mark.timeout(120)
def test_plain_session_prints_the_status_line_after_each_turn(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    thread, _ = fp.banner(child)
    fp.prompt(child)
    child.sendline("hello")
    child.expect_exact("ANSWER: hello")
    child.expect(rf"── openai:scripted · thread {thread} · [1-9][\d,]* tokens · ")
    assert fp.leave(child) == 0
