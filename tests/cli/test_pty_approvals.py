"""Approvals on the screen of the real `fathom` command (pexpect in a pty, and subprocesses):
a diff for an edit of a 2,000-line file, a new file's numbered content, an `execute` shown as
its command, a pasted block of `y` lines approving nothing, several calls answered at once,
`$EDITOR` editing the real content, and `fathom approve` answering without a prompt.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject, fathom_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

BIG = "".join(f"line {i:04d}\n" for i in range(1, 2001))
BIG_EDIT = "edit the big file"
NEW_FILE = "write new.txt"
RUN_IT = "run the check"
TWO_FILES = "write two files"
EDIT_NOTES = "edit the notes"
ANSWER = "ANSWER:"
ONE_PROMPT = "approve [y] / edit [e] / reject [n]? "
SEVERAL_PROMPT = ("approve [y] / edit [e] / reject [n] / approve all remaining [A] / "
                  "reject all remaining [N]? ")

CALLS = {
    BIG_EDIT: [tool_call("edit_file", {"file_path": "/big.txt", "old_string": "line 1000\n",
                                       "new_string": "line one thousand\n"})],
    NEW_FILE: [tool_call("write_file", {"file_path": "/new.txt",
                                        "content": "alpha\nbeta\ngamma\n"})],
    RUN_IT: [tool_call("execute", {"command": "touch ran.txt && echo ran", "timeout": 30})],
    TWO_FILES: [tool_call("write_file", {"file_path": "/one.txt", "content": "one\n"}),
                tool_call("write_file", {"file_path": "/two.txt", "content": "two\n"})],
    EDIT_NOTES: [tool_call("edit_file", {"file_path": "/notes.txt", "old_string": "hello\n",
                                         "new_string": "hello world\n"})],
}


def _results(messages: list[BaseMessage]) -> list[ToolMessage]:
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return [m for m in messages[last + 1:] if isinstance(m, ToolMessage)]


def policy(request: ScriptRequest) -> AIMessage:
    """The task's tool calls first; once they have results, an answer quoting them."""
    task = request.last_human_text
    results = _results(request.messages)
    if task in CALLS and not results:
        return ai("Working on it.", *CALLS[task])
    said = " | ".join(" ".join(str(m.content).split())[:80] for m in results)
    return ai(f"{ANSWER} results: {said or 'none'}")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


def _tool_results(fp: FathomProject, task: str) -> list[str]:
    """The tool results the model received in `task`'s last request."""
    [*_, last] = fp.requests_for(task)
    return [str(m.content) for m in _results(last.messages)]


@pytest.mark.timeout(90)
def test_an_edit_on_a_2000_line_file_shows_the_hunk_in_colour(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write("big.txt", BIG)
    child = fp.spawn()  # the rich display in a terminal: the diff is coloured
    fp.prompt(child)
    child.sendline(BIG_EDIT)
    child.expect_exact("approval needed: edit_file /big.txt (1 line added, 1 removed)")
    child.expect_exact(ONE_PROMPT)
    shown = fp.transcript(child)
    view = shown[shown.index("approval needed: edit_file"):]
    for line in ("@@ -997,7 +997,7 @@", "-line 1000", "+line one thousand", " line 0997",
                 " line 1003"):
        assert f"\n  {line}\n" in view, view
    assert "line 0996" not in view and "line 1004" not in view  # the hunk, not the file
    assert "line 0001" not in shown
    raw = child.logfile_read.getvalue()
    assert "\x1b[32m+line one thousand\x1b[0m" in raw and "\x1b[31m-line 1000\x1b[0m" in raw
    child.sendline("y")
    child.expect_exact(f"{ANSWER} results:")
    assert fp.leave(child) == 0
    assert (fp.project / "big.txt").read_text(encoding="utf-8") == BIG.replace(
        "line 1000\n", "line one thousand\n")


@pytest.mark.timeout(90)
def test_a_new_file_is_shown_numbered_without_colour_in_plain(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(NEW_FILE)
    child.expect_exact("approval needed: write_file /new.txt (new file, 3 lines)\r\n"
                       "  1  alpha\r\n  2  beta\r\n  3  gamma\r\n")
    child.expect_exact(ONE_PROMPT)  # one call: no "all remaining" choices
    assert "all remaining" not in fp.transcript(child)
    assert "\x1b[3" not in child.logfile_read.getvalue(), "colour in --plain"
    child.sendline("n")
    child.expect_exact("reason for the agent (optional): ")
    child.sendline("")
    child.expect_exact(f"model › {ANSWER} results:")
    assert fp.leave(child) == 0
    assert not (fp.project / "new.txt").exists()


@pytest.mark.timeout(90)
def test_execute_is_shown_as_its_command(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain", "--sandbox", "local")
    fp.prompt(child)
    child.sendline(RUN_IT)
    child.expect_exact("approval needed: execute\r\n  $ touch ran.txt && echo ran\r\n"
                       "  timeout: 30 s\r\n")
    child.expect_exact(ONE_PROMPT)
    child.sendline("n")
    child.expect_exact("reason for the agent (optional): ")
    child.sendline("not now")
    child.expect_exact(f"model › {ANSWER} results:")
    assert fp.leave(child) == 0
    assert not (fp.project / "ran.txt").exists(), "a rejected command ran"
    assert any("not now" in result for result in _tool_results(fp, RUN_IT))


@pytest.mark.timeout(90)
def test_a_pasted_block_of_y_lines_approves_nothing(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(TWO_FILES)
    child.expect_exact(SEVERAL_PROMPT)
    child.send("y\ny\na\nA\nyes\n")  # one write: a paste, not keys pressed in answer
    child.expect_exact("that answer arrived together with more text")
    child.expect_exact(SEVERAL_PROMPT)
    assert not (fp.project / "one.txt").exists() and not (fp.project / "two.txt").exists()
    child.send("A\ny\n")  # a shorter paste, starting with "approve all remaining"
    child.expect_exact("that answer arrived together with more text")
    child.expect_exact(SEVERAL_PROMPT)
    child.sendline("N")  # now typed: reject both, with one reason
    child.expect_exact("reason for the agent (optional): ")
    child.sendline("pasted by mistake")
    child.expect_exact("2 of 2: write_file /two.txt: rejected (all remaining)")
    child.expect_exact(f"model › {ANSWER} results:")
    assert fp.leave(child) == 0
    assert not (fp.project / "one.txt").exists() and not (fp.project / "two.txt").exists()
    results = _tool_results(fp, TWO_FILES)
    assert len(results) == 2 and all("pasted by mistake" in r for r in results)
    assert not fp.requests_for("yes"), "the paste became a message"


@pytest.mark.timeout(90)
def test_several_calls_are_shown_then_approved_at_once(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(TWO_FILES)
    child.expect_exact("approval needed (1 of 2): write_file /one.txt (new file, 1 line)")
    child.expect_exact("approval needed (2 of 2): write_file /two.txt (new file, 1 line)")
    child.expect_exact("1 of 2: write_file /one.txt")
    child.expect_exact(SEVERAL_PROMPT)
    child.sendline("A")
    child.expect_exact("2 of 2: write_file /two.txt: approved (all remaining)")
    child.expect_exact(f"model › {ANSWER} results:")
    assert fp.leave(child) == 0
    assert (fp.project / "one.txt").read_text(encoding="utf-8") == "one\n"
    assert (fp.project / "two.txt").read_text(encoding="utf-8") == "two\n"


@pytest.mark.timeout(90)
def test_the_editor_gets_the_new_text_not_json(
    fathom_project: FathomProject, tmp_path: Path
) -> None:
    fp = fathom_project
    fp.write("notes.txt", "hello\nbye\n")
    seen = tmp_path / "seen.txt"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\ncp "$1" {seen}\nprintf "hello editor\\n" > "$1"\n',
                      encoding="utf-8")
    editor.chmod(0o755)
    child = fp.spawn("--plain", env=fathom_env(fp.home, EDITOR=str(editor)))
    fp.prompt(child)
    child.sendline(EDIT_NOTES)
    child.expect_exact(ONE_PROMPT)
    child.sendline("e")
    child.expect_exact("edited: edit_file /notes.txt (1 line added, 1 removed)")
    child.expect_exact("  +hello editor\r\n")
    child.expect_exact(f"model › {ANSWER} results:")
    assert fp.leave(child) == 0
    assert seen.read_text(encoding="utf-8") == "hello world\n"  # the model's new_string
    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == "hello editor\nbye\n"


@pytest.mark.timeout(420)  # seven starts of the command: a hang bound, sized for a loaded machine
def test_fathom_approve_lists_approves_and_rejects(fathom_project: FathomProject) -> None:
    fp = fathom_project
    done, payload = fp.run_json(TWO_FILES)
    assert done.returncode == 3, done.stderr
    thread = payload["thread_id"]
    calls = payload["pending_approvals"]
    assert [(c["index"], c["name"], c["args"]["file_path"]) for c in calls] == [
        (0, "write_file", "/one.txt"), (1, "write_file", "/two.txt")]
    assert len({c["interrupt_id"] for c in calls}) == 1 and calls[0]["interrupt_id"]
    assert all(c["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
               for c in calls)

    listed = fp.run("approve", thread)
    assert listed.returncode == 3, listed.stderr
    assert "approval needed (1 of 2): write_file /one.txt (new file, 1 line)\n  1  one\n" in (
        listed.stdout)
    assert f"fathom approve {thread} --all" in listed.stderr
    assert not (fp.project / "one.txt").exists()

    approved = fp.run("approve", thread, "--all")
    assert approved.returncode == 0, approved.stderr
    assert "approved: write_file, write_file" in approved.stdout
    assert approved.stdout.rstrip().endswith(
        f"{ANSWER} results: Updated file /one.txt | Updated file /two.txt"), approved.stdout
    assert (fp.project / "one.txt").read_text(encoding="utf-8") == "one\n"
    assert (fp.project / "two.txt").read_text(encoding="utf-8") == "two\n"
    again = fp.run("approve", thread, "--all")
    assert again.returncode == 0 and "nothing is waiting for approval" in again.stdout

    done, payload = fp.run_json(NEW_FILE)
    assert done.returncode == 3, done.stderr
    rejected = fp.run("approve", payload["thread_id"], "--reject", "wrong folder")
    assert rejected.returncode == 0, rejected.stderr
    assert re.search(rf"{ANSWER} results: .*wrong folder", rejected.stdout), rejected.stdout
    assert not (fp.project / "new.txt").exists()

    unknown = fp.run("approve", "nosuchthread", "--all")
    assert unknown.returncode == 2
    assert "there is no thread nosuchthread" in unknown.stderr and "fathom threads" in (
        unknown.stderr)
    assert "Traceback" not in unknown.stderr


@pytest.mark.timeout(240)  # three starts of the command: a hang bound, sized for a loaded machine
def test_fathom_approve_refuses_an_agent_that_would_drop_the_answer(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    done, payload = fp.run_json("--sandbox", "local", RUN_IT)
    assert done.returncode == 3, done.stderr
    thread = payload["thread_id"]
    # Without the run's sandbox the agent has no `execute`: the answer would be dropped.
    refused = fp.run("approve", thread, "--reject", "no")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "does not ask before execute" in refused.stderr and "--sandbox local" in (
        refused.stderr)
    approved = fp.run("approve", thread, "--all", "--sandbox", "local")
    assert approved.returncode == 0, approved.stderr
    assert (fp.project / "ran.txt").exists()
    assert re.search(rf"{ANSWER} results: .*ran", approved.stdout), approved.stdout


@pytest.mark.timeout(240)  # three starts of the command: a hang bound, sized for a loaded machine
def test_the_prompt_leaves_pending_a_call_this_agent_would_not_gate(
    fathom_project: FathomProject,
) -> None:
    """A thread paused on `execute` (run with --sandbox local), continued without the
    sandbox: answering would reach no gate and the call would run unanswered, so the
    session says why and leaves the approval pending instead of asking."""
    fp = fathom_project
    done, payload = fp.run_json("--sandbox", "local", RUN_IT)
    assert done.returncode == 3, done.stderr
    thread = payload["thread_id"]
    child = fp.spawn("--plain", "--thread", thread)
    child.expect_exact("approval left pending on thread")
    child.expect_exact("does not ask before execute")
    assert fp.leave(child) == 0
    assert not (fp.project / "ran.txt").exists(), "the command ran unanswered"
    assert "approve [y]" not in fp.transcript(child)
    approved = fp.run("approve", thread, "--all", "--sandbox", "local")
    assert approved.returncode == 0, approved.stderr
    assert (fp.project / "ran.txt").exists()
