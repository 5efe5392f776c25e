"""Fixtures for driving the real `fathom` command: a scripted model behind a real HTTP server,
a temporary project and home, and the command spawned in a pty (pexpect) or as a subprocess.

A test module chooses the scripted model's behaviour by overriding the `scripted_policy`
fixture. Policies should decide every reply from what the model is sent (the last human
message, the tool results after it), never from how many calls were answered, so that a
thread continued by a new process gets the same answers as one that kept running.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pexpect
import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from fathom.testing import RecordedRequest, ScriptedModel, ScriptedOpenAIServer
from fathom.testing.scripted import Script

FATHOM = Path(sys.executable).parent / "fathom"
if not FATHOM.exists():  # pragma: no cover - a venv without the console script
    FATHOM = Path(shutil.which("fathom") or FATHOM)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>78]|\r")
_BANNER = re.compile(r"fathom · (\S+) · thread (\w+) \((new|resumed)\) · ")
# The input prompt at the start of a line; rich may leave cursor escapes just before it, and
# plain lines such as "model › ..." never have it at the start. The line editor
# (prompt_toolkit) draws the prompt's trailing space as a cursor move.
_PROMPT = re.compile(r"\n(?:\x1b\[[0-9;?]*[A-Za-z])*›(?: |\x08\x1b\[2C)")


def strip_ansi(text: str) -> str:
    """`text` without terminal escapes and carriage returns."""
    return _ANSI.sub("", text)


def human_texts(messages: list[BaseMessage]) -> list[str]:
    """The text of every human message, in order."""
    return [str(m.text) for m in messages if isinstance(m, HumanMessage)]


def fathom_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for the command: no provider keys, no FATHOM_MODEL, no proxies,
    no EDITOR, a private HOME, a UTF-8 locale and a colour terminal (that, like pexpect's
    pty, does not answer cursor position requests)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
        # pexpect's pty answers no cursor position requests; the line editor would wait
        # for the answer and then print a warning about the terminal.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    for name in ("TMPDIR", "PYTHONPATH"):  # PYTHONPATH: the source tree under test
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra)
    return env


@dataclass
class FathomProject:
    """A temporary project (and home) to run the command in; with a scripted model served over
    HTTP when `model` is set. Spawned children are closed by the fixture."""

    project: Path
    home: Path
    PROMPT_RE: ClassVar[re.Pattern[str]] = _PROMPT
    model: ScriptedModel | None = None
    server: ScriptedOpenAIServer | None = None
    children: list[pexpect.spawn] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return fathom_env(self.home)

    def write(self, name: str, text: str) -> Path:
        """Write a file in the project, creating its folders."""
        path = self.project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def write_config(self, extra: str = "") -> None:
        """`fathom.toml` naming the scripted model and its server, then `extra` (from line 3)."""
        assert self.server is not None
        self.write(
            "fathom.toml",
            f'model = "openai:scripted"\nbase_url = "{self.server.base_url}"\n{extra}',
        )

    # ---------------------------------------------------------------- running the command

    def spawn(self, *args: str, env: dict[str, str] | None = None,
              timeout: float = 90) -> pexpect.spawn:
        """The command in a 40x120 pty; all it prints is kept for `transcript`. `timeout` is
        each `expect`'s default: it only bounds a hang (a loaded machine can take tens of
        seconds to start the command and import LangChain)."""
        child = pexpect.spawn(
            str(FATHOM), list(args), cwd=str(self.project), env=env or self.env,
            encoding="utf-8", timeout=timeout, dimensions=(40, 120),
        )
        child.logfile_read = io.StringIO()
        self.children.append(child)
        return child

    def run(self, *args: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
        """The command without a terminal; stdout and stderr captured separately (`timeout`
        only bounds a hang)."""
        return subprocess.run(
            [str(FATHOM), *args], cwd=self.project, env=self.env, capture_output=True,
            text=True, encoding="utf-8", timeout=timeout, check=False,
        )

    def run_json(self, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        """`fathom run --json ...`; the process and the JSON object it printed."""
        done = self.run("run", "--json", *args)
        try:
            payload = json.loads(done.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"stdout is not one JSON object (exit {done.returncode}):\n"
                        f"{done.stdout}\nstderr:\n{done.stderr}")
        assert isinstance(payload, dict)
        return done, payload

    # ---------------------------------------------------------------- reading it

    @staticmethod
    def transcript(child: pexpect.spawn) -> str:
        """Everything the child printed so far, without terminal escapes."""
        return strip_ansi(child.logfile_read.getvalue())

    @staticmethod
    def banner(child: pexpect.spawn) -> tuple[str, str]:
        """Wait for the session banner; (thread id, "new" or "resumed")."""
        child.expect(_BANNER)
        return child.match.group(2), child.match.group(3)

    @staticmethod
    def prompt(child: pexpect.spawn) -> None:
        """Wait for the `› ` input prompt."""
        child.expect(_PROMPT)

    @staticmethod
    def finish(child: pexpect.spawn, timeout: float = 90) -> int | None:
        """Wait for the child to exit; its exit status (`timeout` only bounds a hang)."""
        child.expect(pexpect.EOF, timeout=timeout)
        child.close()
        return child.exitstatus

    def leave(self, child: pexpect.spawn) -> int | None:
        """Wait for the prompt, type /exit; the exit status."""
        self.prompt(child)
        child.sendline("/exit")
        return self.finish(child)

    def requests_for(self, text: str) -> list[RecordedRequest]:
        """The model's recorded requests in the turn whose last human message is `text`."""
        assert self.model is not None
        return [r for r in self.model.requests if (human_texts(r.messages) or [""])[-1] == text]

    def close(self) -> None:
        for child in self.children:
            if child.isalive():
                child.close(force=True)
        if self.server is not None:
            self.server.stop()


def _echo(request: Any) -> str:
    return f"you said {request.last_human_text!r}"


@pytest.fixture
def scripted_policy() -> Script:
    """The scripted model's policy; override this fixture in a test module."""
    return _echo


@pytest.fixture
def fathom_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def bare_project(tmp_path: Path, fathom_home: Path) -> Iterator[FathomProject]:
    """An empty project: no fathom.toml, no model."""
    project = tmp_path / "bare"
    project.mkdir()
    setup = FathomProject(project=project, home=fathom_home)
    try:
        yield setup
    finally:
        setup.close()


@pytest.fixture
def fathom_project(
    tmp_path: Path, fathom_home: Path, scripted_policy: Script
) -> Iterator[FathomProject]:
    """A project whose `fathom.toml` points at a `ScriptedModel` served over HTTP."""
    project = tmp_path / "project"
    project.mkdir()
    model = ScriptedModel(policy=scripted_policy)
    setup = FathomProject(project=project, home=fathom_home, model=model,
                          server=ScriptedOpenAIServer(model).start())
    setup.write_config()
    try:
        yield setup
    finally:
        setup.close()
