"""`/undo` in a real terminal (pexpect pty): the file the last turn wrote is put back and
the model's next request no longer holds that turn."""

from __future__ import annotations

import sys

import pexpect
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject, human_texts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSWER = "ANSWER:"
REWRITE = "rewrite notes.txt"
ENTER = "\r"


def policy(request: ScriptRequest) -> AIMessage:
    """Rewrites notes.txt when asked; otherwise answers with the thread's human messages."""
    if request.last_human_text == REWRITE and not isinstance(request.messages[-1], ToolMessage):
        return ai("Rewriting.", tool_call("write_file", {"file_path": "/notes.txt",
                                                          "content": "after\n"}))
    return ai(f"{ANSWER} [{' | '.join(human_texts(request.messages))}]")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


def _say(fp: FathomProject, child: pexpect.spawn, text: str) -> None:
    fp.prompt(child)
    child.send(text + ENTER)


@pytest.mark.timeout(120)
def test_undo_restores_the_file_and_the_conversation(fathom_project: FathomProject) -> None:
    fp = fathom_project
    fp.write_config('auto_approve = ["write_file"]\n')
    notes = fp.write("notes.txt", "before\n")
    child = fp.spawn()
    fp.banner(child)
    _say(fp, child, "hello")
    child.expect_exact(f"{ANSWER} [hello]")
    _say(fp, child, REWRITE)
    child.expect_exact(f"{ANSWER} [hello | {REWRITE}]")
    assert notes.read_text(encoding="utf-8") == "after\n"

    _say(fp, child, "/undo")
    child.expect_exact("files restored: /notes.txt")
    child.expect_exact("1 earlier turn(s) can be undone")
    assert notes.read_text(encoding="utf-8") == "before\n"

    _say(fp, child, "what is left?")
    child.expect_exact(f"{ANSWER} [hello | what is left?]")  # the undone turn is gone
    assert fp.model is not None
    assert human_texts(fp.model.requests[-1].messages) == ["hello", "what is left?"]
    assert fp.leave(child) == 0
