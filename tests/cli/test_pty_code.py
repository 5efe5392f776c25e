"""`eval` in the real command: `--code` and `[code_interpreter]` in fathom.toml turn it on,
and the allow-list reaches the built-in file tools; a ptc name the agent lacks stops the
command with the tools it has."""

from __future__ import annotations

import sys

import pexpect
import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSWER = "ANSWER:"
COMPUTE = "compute it"
READ = "read it in code"
ENTER = "\r"


def policy(request: ScriptRequest) -> AIMessage:
    """Says whether it has `eval`; runs code with it when asked and answers its result."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return ai(f"{ANSWER} eval gave <{' '.join(str(last.content).split())}>")
    if not request.has_tool("eval"):
        return ai(f"{ANSWER} no eval tool")
    if request.last_human_text == COMPUTE:
        return ai("", tool_call("eval", {"code": "print('six sevens')\n6 * 7"}))
    if request.last_human_text == READ:
        return ai("", tool_call("eval", {
            "code": "text = await tools.read_file(file_path='/notes.txt')\n"
                    "'LINES=' + str(len(text.splitlines()))"}))
    return ai(f"{ANSWER} eval is here")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


def _say(fp: FathomProject, child: pexpect.spawn, text: str) -> None:
    fp.prompt(child)
    child.send(text + ENTER)


@pytest.mark.timeout(120)
def test_code_flag_turns_eval_on_and_it_runs(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--code")
    fp.banner(child)
    _say(fp, child, COMPUTE)
    child.expect_exact(f"{ANSWER} eval gave <six sevens 42>")
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_without_code_the_agent_has_no_eval(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()
    fp.banner(child)
    _say(fp, child, COMPUTE)
    child.expect_exact(f"{ANSWER} no eval tool")
    assert fp.leave(child) == 0


@pytest.mark.timeout(120)
def test_the_config_table_turns_eval_on_with_a_built_in_tool_callable_from_code(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write_config('[code_interpreter]\nptc = ["read_file"]\n')
    fp.write("notes.txt", "one\ntwo\nthree\n")
    child = fp.spawn()
    fp.banner(child)
    _say(fp, child, READ)
    child.expect_exact(f"{ANSWER} eval gave <LINES=")
    child.expect_exact(">")
    shown = fp.transcript(child)
    assert "LINES=3" in shown or "LINES=4" in shown  # read_file's numbered lines, maybe a header
    assert fp.leave(child) == 0


def test_a_ptc_name_the_agent_lacks_stops_the_command_listing_its_tools(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    fp.write_config('[code_interpreter]\nptc = ["read_fil"]\n')
    done = fp.run("run", "hello")
    assert done.returncode != 0
    assert "read_fil" in done.stderr and "read_file" in done.stderr and "write_todos" in done.stderr
