"""The `fathom` command loses no turn: one run per thread, and a killed run is finished first.

- Two `fathom` processes on the same thread: the second is refused ("thread ... is busy",
  non-zero exit) while the first runs, and neither turn is lost.
- A `fathom run` killed with SIGKILL after one of its parallel tools completed: the next
  message on the thread (`fathom run --thread`, as `--resume` does) first finishes the
  killed step, so the completed write stays in the conversation.

Concurrency is shown with files the tools create and wait for, never with timing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fathom.testing import ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FATHOM, FathomProject

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs fcntl")

BLOCK_TASK = "block until released"
KILL_TASK = "write, then wait"
# Signals that it started, then waits for the test to create `release`.
WAIT_COMMAND = "touch started; while [ ! -f release ]; do sleep 0.05; done; echo released"


def policy(request: ScriptRequest):
    task = request.last_human_text
    if not request.turn_results and task == BLOCK_TASK:
        return ai("", tool_call("execute", {"command": WAIT_COMMAND}))
    if not request.turn_results and task == KILL_TASK:
        return ai("", tool_call("write_file", {"file_path": "/kept.txt", "content": "kept"}),
                  tool_call("execute", {"command": WAIT_COMMAND}))
    return "answer: " + task


@pytest.fixture
def scripted_policy() -> Script:
    return policy


OPTIONS = ("--sandbox", "local", "--auto-approve", "execute,write_file")


def _spawn_run(fp: FathomProject, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(FATHOM), "run", *OPTIONS, *args],
        cwd=fp.project, env=fp.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(check, process: subprocess.Popen[str], what: str) -> None:
    while not check():
        if process.poll() is not None:
            pytest.fail(f"fathom exited before {what}: {process.communicate()}")
        time.sleep(0.05)


@pytest.mark.timeout(300)  # four starts of the command: a hang bound, sized for a loaded machine
def test_a_second_fathom_on_a_busy_thread_is_refused(fathom_project: FathomProject) -> None:
    fp = fathom_project
    first = _spawn_run(fp, "--thread", "shared", BLOCK_TASK)
    try:
        _wait_for((fp.project / "started").exists, first, "its command started")
        done, payload = fp.run_json(*OPTIONS, "--thread", "shared", "second message")
        assert done.returncode == 1
        assert payload["status"] == "error"
        assert "thread 'shared' is busy" in payload["detail"]
        assert "busy" in done.stderr
        other, _ = fp.run_json(*OPTIONS, "--thread", "another", "hello")  # other threads run
        assert other.returncode == 0
    finally:
        (fp.project / "release").touch()
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.strip().endswith("answer: " + BLOCK_TASK)
    done, payload = fp.run_json(*OPTIONS, "--thread", "shared", "and now")
    assert done.returncode == 0, done.stderr
    humans = [m["content"] for m in payload["messages"] if m["role"] == "human"]
    assert humans == [BLOCK_TASK, "and now"]  # the refused message was never sent
    results = [m["content"] for m in payload["messages"] if m["role"] == "tool"]
    assert any("released" in r for r in results)


def _write_saved(db: Path) -> bool:
    """Whether a `write_file` result is saved as a pending write of the thread's head."""
    if not db.exists():
        return False
    with sqlite3.connect(db, timeout=10) as conn:
        try:
            head = conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id='crashed' "
                "AND checkpoint_ns='' ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
            if head is None:
                return False
            rows = conn.execute(
                "SELECT value FROM writes WHERE thread_id='crashed' AND checkpoint_ns='' "
                "AND checkpoint_id=? AND channel='messages'", head).fetchall()
        except sqlite3.OperationalError:  # tables not created yet, or locked
            return False
    return any(b"Updated file /kept.txt" in bytes(value) for (value,) in rows)


@pytest.mark.timeout(180)  # two starts of the command: a hang bound, sized for a loaded machine
def test_next_message_after_kill_9_keeps_the_completed_write(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    db = fp.project / ".fathom" / "threads.sqlite"
    first = _spawn_run(fp, "--thread", "crashed", KILL_TASK)
    try:
        _wait_for((fp.project / "started").exists, first, "its command started")
        _wait_for(lambda: _write_saved(db), first, "the write was saved")
    finally:
        if first.poll() is None:
            os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
        (fp.project / "release").touch()  # lets the orphaned command (and its re-run) end
    assert first.returncode == -signal.SIGKILL
    assert (fp.project / "kept.txt").read_text() == "kept"

    done, payload = fp.run_json(*OPTIONS, "--thread", "crashed", "next")
    assert done.returncode == 0, done.stderr
    results = {m["name"]: m["content"] for m in payload["messages"] if m["role"] == "tool"}
    assert results["write_file"] == "Updated file /kept.txt"  # not "did not complete"
    assert "released" in results["execute"]  # the unfinished command ran again
    humans = [m["content"] for m in payload["messages"] if m["role"] == "human"]
    assert humans == [KILL_TASK, "next"]
    assert payload["answer"] == "answer: next"
