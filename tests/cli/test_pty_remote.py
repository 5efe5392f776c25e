"""`fathom --server URL`: the interactive session attached to a thread on a real `fathom serve`.

The server is the real command, a subprocess on a free port, serving a deep agent whose model
is scripted (it runs in the server's process); the client is the real `fathom` in a pty.
Checked on the screen: answers, the approval prompt and its effect on the server's thread,
`--thread ID` continuing the conversation in a new process, commands that cannot work
remotely, a server that is down, and one that dies in the middle of a turn.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
from langgraph_sdk import get_sync_client

from .conftest import FATHOM, FathomProject

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

DEADLINE_S = 90.0
"""Bounds a hang while the server starts or a condition is awaited; healthy ones take seconds."""
APPROVAL_PROMPT = "approve [y] / edit [e] / reject [n]? "
PROMPT = "\n› "
NOTES = "hello from the server\n"

AGENT_PY = '''"""A deep agent for the attach tests: a scripted model, approvals for write_file."""

import asyncio
import os
from pathlib import Path

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call


@tool
async def wait_for_release() -> str:
    """Wait until the test creates the gate's `release` file (the server stays responsive)."""
    gate = Path(os.environ["ATTACH_GATE"])
    (gate / "started").touch()
    while not (gate / "release").exists():
        await asyncio.sleep(0.05)
    return "released"


def policy(request):
    task = request.last_human_text
    results = [m for m in request.turn_messages if isinstance(m, ToolMessage)]
    if task == "write notes.txt":
        if not results:
            return ai("Writing notes.txt.", tool_call(
                "write_file", {"file_path": "/notes.txt", "content": NOTES}))
        return ai(f"ANSWER: write_file said: {results[-1].content}")
    if task == "edit notes.txt":
        if not results:
            return ai("Editing notes.txt.", tool_call("edit_file", {
                "file_path": "/notes.txt", "old_string": "the server", "new_string": "an edit"}))
        return ai(f"ANSWER: edit_file said: {results[-1].content}")
    if task == "wait":
        if not results:
            return ai("Waiting.", tool_call("wait_for_release", {}))
        return ai(f"ANSWER: the wait said {results[-1].content}")
    seen = sum(isinstance(m, HumanMessage) for m in request.messages)
    return ai(f"ANSWER: you said {task!r} (message {seen} on this thread)")


graph = create_deep_agent(model=ScriptedModel(policy=policy), tools=[wait_for_release],
                          interrupt_on={"write_file": True, "edit_file": True},
                          checkpointer=True)  # the server injects its own
'''.replace("NOTES", repr(NOTES))


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """`fathom serve` on the scripted deep agent (graph `attach`), on a free port."""
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    (deploy / "agent.py").write_text(AGENT_PY, encoding="utf-8")
    (deploy / "langgraph.json").write_text(json.dumps(
        {"dependencies": ["."], "graphs": {"attach": "./agent.py:graph"}}))
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(FATHOM), "serve", "--config", str(deploy / "langgraph.json"), "--port", "0"],
            cwd=deploy, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "ATTACH_GATE": str(tmp_path)},
        )  # fmt: skip
    found: list[str] = []

    def started() -> bool:
        match = re.search(r"^fathom serve: (http://\S+) ", log.read_text(errors="replace"),
                          re.MULTILINE)  # fmt: skip
        if match:
            found.append(match.group(1))
        elif process.poll() is not None:
            pytest.fail(f"fathom serve exited:\n{log.read_text(errors='replace')}")
        return bool(match)

    try:
        _wait_for(started, "fathom serve to start")
        yield Served(process, found[0])
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _attach(fp: FathomProject, url: str, *args: str) -> tuple[pexpect.spawn, str, str]:
    """`fathom --server URL ... --plain` in a pty; the child, its thread id and "new"/"resumed"."""
    child = fp.spawn("--server", url, *args, "--plain", timeout=60)
    child.expect(r"fathom · attach · thread ([0-9a-f-]+) \((new|resumed)\) · ")
    return child, child.match.group(1), child.match.group(2)


def _send(child: pexpect.spawn, text: str) -> None:
    child.expect_exact(PROMPT)
    child.sendline(text)


@pytest.mark.timeout(240)
def test_attached_session_answers_approves_and_continues_with_thread_id(
    bare_project: FathomProject, served: Served,
) -> None:
    fp = bare_project
    child, thread_id, state = _attach(fp, served.url)
    assert state == "new"
    _send(child, "hello")
    child.expect_exact("model › ANSWER: you said 'hello' (message 1 on this thread)")

    _send(child, "write notes.txt")
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    client = get_sync_client(url=served.url, api_key=None)
    assert client.threads.get_state(thread_id)["interrupts"], "the server's thread is not paused"
    child.sendline("y")
    child.expect_exact("model › ANSWER: write_file said: Updated file /notes.txt")

    # An edit is shown as a diff against the file in the server's thread state.
    _send(child, "edit notes.txt")
    child.expect_exact("approval needed: edit_file /notes.txt (1 line added, 1 removed)")
    child.expect_exact("+++ /notes.txt (proposed)")
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("y")
    child.expect_exact(
        "model › ANSWER: edit_file said: Successfully replaced 1 instance(s) of the string in "
        "'/notes.txt'"
    )

    _send(child, "/undo")  # works on local checkpoints only
    child.expect_exact("/undo is not available when attached to a server")
    _send(child, "/cost")  # counted from the replies the server streamed: 1 + 2 + 2 calls
    child.expect(r"\n\s*total\s+\S*\s*5\s")
    _send(child, "/exit")
    assert fp.finish(child) == 0
    # The approved write happened on the server's thread (its files live in the state).
    files = client.threads.get_state(thread_id)["values"]["files"]
    assert "/notes.txt" in files

    again, same, state = _attach(fp, served.url, "--thread", thread_id)
    assert (same, state) == (thread_id, "resumed")
    _send(again, "and now?")
    again.expect_exact("model › ANSWER: you said 'and now?' (message 4 on this thread)")
    _send(again, "/exit")
    assert fp.finish(again) == 0
    assert "Traceback" not in fp.transcript(child) + fp.transcript(again)


@pytest.mark.timeout(240)
def test_a_pending_approval_is_asked_first_when_attaching_with_thread_id(
    bare_project: FathomProject, served: Served,
) -> None:
    fp = bare_project
    # Left waiting by a non-interactive turn: piped stdin is one turn, as `fathom run` does.
    done = subprocess.run(
        [str(FATHOM), "--server", served.url], input="write notes.txt", cwd=fp.project,
        env=fp.env, capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    waiting = re.search(r"--thread ([0-9a-f-]+)", done.stderr)
    assert waiting, done.stderr
    child, thread_id, state = _attach(fp, served.url, "--thread", waiting.group(1))
    assert state == "resumed"
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("n")
    child.expect_exact("reason for the agent (optional): ")
    child.sendline("not now")
    child.expect_exact("model › ANSWER: write_file said:")
    _send(child, "/exit")
    assert fp.finish(child) == 0
    client = get_sync_client(url=served.url, api_key=None)
    values = client.threads.get_state(thread_id)["values"]
    assert "/notes.txt" not in (values.get("files") or {}), "a rejected write happened"


@pytest.mark.timeout(240)
def test_a_server_dying_mid_turn_ends_the_turn_with_an_error(
    bare_project: FathomProject, served: Served, tmp_path: Path,
) -> None:
    fp = bare_project
    child, _thread, _state = _attach(fp, served.url)
    _send(child, "wait")
    _wait_for((tmp_path / "started").exists, "the run to reach its tool")
    os.killpg(served.process.pid, signal.SIGKILL)
    # The SDK tries to reconnect a few times (some seconds) before the turn fails.
    child.expect_exact("cannot reach the server at", timeout=DEADLINE_S)
    _send(child, "/threads")  # the session goes on, saying why nothing works
    child.expect_exact("cannot reach the server at")
    _send(child, "hello")
    child.expect_exact("cannot reach the server at")
    _send(child, "/exit")
    assert fp.finish(child) == 0
    assert "Traceback" not in fp.transcript(child)


@pytest.mark.timeout(240)
def test_ctrl_c_cancels_the_run_on_the_server_and_the_thread_goes_on(
    bare_project: FathomProject, served: Served, tmp_path: Path,
) -> None:
    fp = bare_project
    child, thread_id, _state = _attach(fp, served.url)
    _send(child, "wait")
    _wait_for((tmp_path / "started").exists, "the run to reach its tool")
    child.sendintr()
    child.expect_exact("stopped by Ctrl-C; the run was cancelled on the server")
    client = get_sync_client(url=served.url, api_key=None)
    statuses: list[str] = []

    def cancelled() -> bool:
        statuses[:] = [run["status"] for run in client.runs.list(thread_id)]
        return statuses[:1] == ["interrupted"]

    _wait_for(cancelled, "the server to cancel the run")
    (tmp_path / "release").touch()  # had it not been cancelled, the run would finish now
    _send(child, "hello")
    child.expect_exact("model › ANSWER: you said 'hello'")
    _send(child, "/exit")
    assert fp.finish(child) == 0
    assert "Traceback" not in fp.transcript(child)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.timeout(120)
def test_a_server_that_is_down_is_a_clear_message_and_exit_2(bare_project: FathomProject) -> None:
    fp = bare_project
    url = f"http://127.0.0.1:{_free_port()}"
    child = fp.spawn("--server", url, "--plain", timeout=60)
    child.expect_exact(f"cannot reach the server at {url}")
    assert fp.finish(child) == 2
    assert "Traceback" not in fp.transcript(child)


@pytest.mark.timeout(120)
def test_an_unknown_assistant_names_the_servers_graphs(
    bare_project: FathomProject, served: Served,
) -> None:
    fp = bare_project
    child = fp.spawn("--server", served.url, "--assistant", "atach", timeout=60)
    child.expect_exact("has no assistant 'atach'; it has: attach")
    assert fp.finish(child) == 2
