"""`/rewind`, `/fork`, `/export`, `/init` and `/memory` in a real terminal (pexpect pty),
with a scripted model whose answers show what conversation it was sent."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import pexpect
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject, human_texts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSWER = "ANSWER:"
ENTER = "\r"
WRITE = re.compile(r"^write (\w+)$")


def policy(request: ScriptRequest) -> AIMessage:
    """`write X` writes X into notes.txt; otherwise answers with the thread's human messages
    (and, when memory holds it, the word MEMORY-MARK)."""
    text = request.last_human_text
    match = WRITE.match(text)
    if match and not isinstance(request.messages[-1], ToolMessage):
        return ai("Writing.", tool_call("write_file", {"file_path": "/notes.txt",
                                                        "content": match.group(1) + "\n"}))
    mark = " MEMORY-MARK" if "MEMORY-MARK" in (request.system_prompt or "") else ""
    return ai(f"{ANSWER} [{' | '.join(human_texts(request.messages))}]{mark}")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


def _say(fp: FathomProject, child: pexpect.spawn, text: str) -> None:
    fp.prompt(child)
    child.send(text + ENTER)


def _thread_id(text: str, pattern: str) -> str:
    found = re.findall(pattern, text)
    assert found, text[-2000:]
    return found[-1]


@pytest.mark.timeout(180)
def test_rewind_goes_back_several_turns_and_keeps_the_discarded_branch(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write_config('auto_approve = ["write_file"]\n')
    notes = fp.write("notes.txt", "zero\n")
    child = fp.spawn()
    thread, _ = fp.banner(child)
    _say(fp, child, "hello")
    child.expect_exact(f"{ANSWER} [hello]")
    _say(fp, child, "write one")
    child.expect_exact(f"{ANSWER} [hello | write one]")
    _say(fp, child, "write two")
    child.expect_exact(f"{ANSWER} [hello | write one | write two]")
    assert notes.read_text(encoding="utf-8") == "two\n"

    _say(fp, child, "/rewind")
    child.expect_exact("turns of this thread")
    child.expect(r"3\s+write two")
    _say(fp, child, "/rewind 2")
    child.expect_exact("rewound to before turn 2")
    child.expect_exact("files restored: /notes.txt")
    child.expect(r"the discarded branch is thread (\w+)")
    branch = child.match.group(1)
    assert notes.read_text(encoding="utf-8") == "zero\n"
    saved = fp.project / ".fathom" / "rewind" / branch
    assert sorted(p.name for p in saved.iterdir()) == ["0.bin", "manifest.json"]
    assert (saved / "0.bin").read_text(encoding="utf-8") == "two\n"  # the branch's file

    _say(fp, child, "after")
    child.expect_exact(f"{ANSWER} [hello | after]")  # turns 2 and 3 are gone

    _say(fp, child, "/threads")
    child.expect_exact(branch)
    _say(fp, child, f"/thread {branch}")
    child.expect_exact(f"switched to thread {branch}")
    _say(fp, child, "back on the branch")
    child.expect_exact(f"{ANSWER} [hello | write one | write two | back on the branch]")
    assert branch != thread
    assert fp.leave(child) == 0


@pytest.mark.timeout(150)
def test_fork_copies_the_thread_and_leaves_the_original_unchanged(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn()
    original, _ = fp.banner(child)
    _say(fp, child, "first")
    child.expect_exact(f"{ANSWER} [first]")
    _say(fp, child, "/fork")
    child.expect(r"forked thread (\w+) as (\w+); now on")
    assert child.match.group(1) == original
    fork = child.match.group(2)
    _say(fp, child, "on the fork")
    child.expect_exact(f"{ANSWER} [first | on the fork]")
    _say(fp, child, f"/thread {original}")
    child.expect_exact(f"switched to thread {original}")
    _say(fp, child, "on the original")
    child.expect_exact(f"{ANSWER} [first | on the original]")  # the fork's turn is not here
    assert fork != original
    assert fp.leave(child) == 0


@pytest.mark.timeout(150)
def test_export_writes_the_transcript_as_markdown(fathom_project: FathomProject) -> None:
    fp = fathom_project
    fp.write_config('auto_approve = ["write_file"]\n')
    child = fp.spawn()
    thread, _ = fp.banner(child)
    _say(fp, child, "write hi")
    child.expect_exact(f"{ANSWER} [write hi]")
    _say(fp, child, "/export")
    child.expect(r"wrote the transcript \(4 messages\) to (\S+\.md)")
    default = fp.project / f"fathom-thread-{thread}.md"
    assert default.is_file()
    text = default.read_text(encoding="utf-8")
    assert text.startswith(f"# fathom thread {thread}")
    assert "## User\n\nwrite hi" in text
    assert "- tool call `write_file`" in text and '"/notes.txt"' in text
    assert "- result of `write_file`:" in text
    assert f"{ANSWER} [write hi]" in text
    _say(fp, child, "/export out/t.md")
    child.expect(r"wrote the transcript \(4 messages\) to \S+out/t\.md")
    assert (fp.project / "out" / "t.md").read_text(encoding="utf-8") == text
    assert fp.leave(child) == 0


@pytest.mark.timeout(150)
def test_init_writes_a_starter_agents_md_and_refuses_to_overwrite(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write("README.md", "intro\n# Widget Factory\n\ntext\n")
    fp.write("Makefile", ".PHONY: test\ntest:\n\tpytest\nlint: test\n\truff\nX := 1\n")
    fp.write("src/app.py", "")
    child = fp.spawn()
    fp.banner(child)
    _say(fp, child, "/init")
    child.expect_exact("wrote ")
    memory = fp.project / ".fathom" / "AGENTS.md"
    text = memory.read_text(encoding="utf-8")
    assert text.startswith(f"# {fp.project.name}\n")
    assert "Widget Factory (from the README)" in text
    assert "- `src/`" in text and "- `README.md`" in text and "- `Makefile`" in text
    assert "- `make test`" in text and "- `make lint`" in text and "make X" not in text
    memory.write_text("mine MEMORY-MARK\n", encoding="utf-8")
    _say(fp, child, "/init")
    child.expect_exact("exists already; /init --force replaces it")
    assert memory.read_text(encoding="utf-8") == "mine MEMORY-MARK\n"
    _say(fp, child, "do you remember?")
    child.expect_exact(f"{ANSWER} [do you remember?] MEMORY-MARK")  # the agent loads it
    _say(fp, child, "/init --force")
    child.expect_exact("wrote ")
    assert "Widget Factory" in memory.read_text(encoding="utf-8")
    assert fp.leave(child) == 0


@pytest.mark.timeout(150)
def test_memory_lists_shows_and_edits_with_the_editor(fathom_project: FathomProject,
                                                      tmp_path: Path) -> None:
    fp = fathom_project
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "added MEMORY-MARK" >> "$1"\n', encoding="utf-8")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    user_memory = fp.home / ".fathom" / "AGENTS.md"
    user_memory.parent.mkdir(parents=True)
    user_memory.write_text("user notes\n", encoding="utf-8")
    child = fp.spawn(env={**fp.env, "EDITOR": str(editor)})
    fp.banner(child)
    _say(fp, child, "/memory")
    child.expect_exact("memory files the agent loads")
    child.expect(r"1\s+user\s+\S+AGENTS\.md \(11 bytes\)")
    child.expect(r"2\s+project\s+\S+AGENTS\.md \(not created yet\)")
    _say(fp, child, "/memory show user")
    child.expect_exact("user notes")
    _say(fp, child, "/memory edit project")
    child.expect_exact("saved (the agent reads it from the next turn on)")
    project_memory = fp.project / ".fathom" / "AGENTS.md"
    assert project_memory.read_text(encoding="utf-8") == "added MEMORY-MARK\n"
    _say(fp, child, "/memory edit 1")
    child.expect_exact("saved")
    assert user_memory.read_text(encoding="utf-8") == "user notes\nadded MEMORY-MARK\n"
    _say(fp, child, "hi")
    child.expect_exact(f"{ANSWER} [hi] MEMORY-MARK")
    _say(fp, child, "/memory edit nowhere")
    child.expect_exact("no memory file called 'nowhere'")
    assert fp.leave(child) == 0
