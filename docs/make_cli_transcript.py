"""Make the interactive transcript in docs/cli.md from a real `fathom --plain` session.

Run it from the repository root:

    .venv/bin/python docs/make_cli_transcript.py

It writes a small project into a temporary folder, serves a scripted model over an
OpenAI-compatible HTTP endpoint (`fathom.testing.ScriptedOpenAIServer`, the one the tests
use, so no key or network is needed), and drives the real `fathom --plain` command in a
pseudo-terminal (pexpect): /help, a task that writes a file (approved), a task that edits it
(approved after its diff), /cost, /undo, a mistyped command and /exit. What the command
printed, without terminal escapes and with the temporary paths and thread id made stable,
replaces the text between the transcript markers in docs/cli.md.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import tempfile
from pathlib import Path

import pexpect
from langchain_core.messages import AIMessage, ToolMessage

from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest, ai, tool_call

DOC = Path(__file__).resolve().parent / "cli.md"
FATHOM = Path(sys.executable).parent / "fathom"
START, END = "<!-- transcript:start -->", "<!-- transcript:end -->"
PROMPT = "\n› "
APPROVAL = "approve [y] / edit [e] / reject [n]? "

WRITE = "write a greeting module in hello.py"
EDIT = "make it greet the world"
HELLO = 'def greet(name):\n    return "hello " + name\n\n\nif __name__ == "__main__":\n' \
        '    print(greet("you"))\n'

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>78]|\r")


def policy(request: ScriptRequest) -> AIMessage:
    """One scripted step, decided from the request alone (the last human message and whether
    a tool result follows it)."""
    task = request.last_human_text
    answered = isinstance(request.messages[-1], ToolMessage)
    if task == WRITE and not answered:
        return ai("I'll write the module.",
                  tool_call("write_file", {"file_path": "/hello.py", "content": HELLO}))
    if task == WRITE:
        return ai("Wrote **hello.py**: `greet(name)` returns a greeting, and running the "
                  "file prints one.")
    if task == EDIT and not answered:
        return ai("Changing the default name.",
                  tool_call("edit_file", {"file_path": "/hello.py",
                                          "old_string": 'greet("you")',
                                          "new_string": 'greet("world")'}))
    if task == EDIT:
        return ai("Done: `python hello.py` now prints `hello world`.")
    return ai(f"You said: {task}")


def run_session(project: Path, home: Path) -> str:
    """Drive one interactive session; everything it printed, without escapes."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color",
    }
    child = pexpect.spawn(str(FATHOM), ["--plain"], cwd=str(project), env=env,
                          encoding="utf-8", timeout=60, dimensions=(40, 100))
    log: list[str] = []
    child.logfile_read = _Collect(log)

    def say(text: str) -> None:
        child.expect_exact(PROMPT)
        child.sendline(text)

    say("/help")
    say(WRITE)
    child.expect_exact(APPROVAL)
    child.sendline("y")
    child.expect_exact("── done")
    say(EDIT)
    child.expect_exact(APPROVAL)
    child.sendline("y")
    child.expect_exact("── done")
    say("/cost")
    say("/undo")
    child.expect_exact("files restored")
    say("/hepl")
    say("/exit")
    child.expect(pexpect.EOF)
    child.close()
    if child.exitstatus != 0:
        raise SystemExit(f"fathom exited with {child.exitstatus}:\n{''.join(log)}")
    return _ANSI.sub("", "".join(log))


class _Collect:
    """A file-like sink for pexpect's `logfile_read`."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts

    def write(self, text: str) -> None:
        self.parts.append(text)

    def flush(self) -> None:
        pass


def stable(text: str, project: Path, home: Path) -> str:
    """The transcript with the temporary paths, the thread id and timings made stable."""
    text = text.replace(str(project), "/home/me/shop").replace(str(home), "/home/me")
    thread = re.search(r"thread (\w+) \(new\)", text)
    if thread:
        text = text.replace(thread.group(1), "3f9c2a1b")
    text = re.sub(r"\b\d+\.\d+ ?s\b", "0.1s", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def main() -> None:
    model = ScriptedModel(policy=policy)
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(model) as server:
        project, home = Path(tmp, "shop"), Path(tmp, "home")
        project.mkdir()
        home.mkdir()
        (project / "fathom.toml").write_text(
            f'model = "openai:scripted"\nbase_url = "{server.base_url}"\n\n'
            '[prices."openai:scripted"]\ninput = 2.0\noutput = 8.0\n', encoding="utf-8")
        screen = stable(run_session(project, home), project, home)
        after_undo = (project / "hello.py").read_text(encoding="utf-8")
    if after_undo != HELLO:  # /undo took back the edit, not the write before it
        raise SystemExit(f"hello.py after /undo is {after_undo!r}; the transcript would be wrong")

    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    block = (f"{START}\n"
             f"Made on {today} by `.venv/bin/python docs/make_cli_transcript.py` (a scripted "
             "model over HTTP, the real `fathom --plain` in a pty; `fathom.toml` sets "
             "`[prices.\"openai:scripted\"]`).\n\n"
             f"```text\n{screen}\n```\n{END}")
    doc = DOC.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {START} ... {END} markers")
    head, rest = doc.split(START, 1)
    _old, tail = rest.split(END, 1)
    DOC.write_text(head + block + tail, encoding="utf-8")
    print(f"wrote {len(screen.splitlines())} lines of transcript into {DOC}")


if __name__ == "__main__":
    main()
