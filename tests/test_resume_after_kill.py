"""A run killed with `kill -9` mid-step, resumed with a new message, loses no completed write.

Each trial: a child process runs a deep agent on a SQLite checkpointer. Its model asks for
three tools in one step: `write_file` (quick), `count` (appends a line to a counter file:
a side effect) and `slow`. `slow` waits until the other two tools' writes are recorded in
the checkpointer, proving they completed, then signals readiness and sleeps; the parent
kills the child with SIGKILL. A new process resumes the thread with a new message through
`finish_pending_step`. Every trial must keep the written file (in state, or on disk for
the disk backend), keep both tools' results in the conversation, and have run `count`
exactly once; `slow`, which had not finished, runs again.

Without `finish_pending_step` (the new message sent directly) LangGraph drops the step's
saved writes: the file is gone and the model is told the calls did not complete.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TRIALS_PER_BACKEND = 10

CHILD = textwrap.dedent(
    """
    import json, sqlite3, sys, time
    from pathlib import Path
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from fathom import create_deep_agent, finish_pending_step
    from fathom.backends import FilesystemBackend, StateBackend
    from fathom.testing import ScriptedModel, ai, tool_call

    mode, kind = sys.argv[1], sys.argv[2]
    THREAD = {"configurable": {"thread_id": "t"}}

    def policy(request):
        if request.last_human_text == "go" and not request.turn_results:
            return ai("", tool_call("write_file", {"file_path": "/done.txt", "content": "kept"}),
                      tool_call("count", {}), tool_call("slow", {}))
        return "ok: " + request.last_human_text

    def build(trial):
        saver = SqliteSaver(sqlite3.connect(trial / "threads.db", check_same_thread=False))

        def recorded():  # both quick tools' results are saved as pending writes
            names = set()
            for _task, channel, value in saver.get_tuple(THREAD).pending_writes or []:
                if channel == "messages":
                    names |= {getattr(m, "name", None) for m in value}
            return {"write_file", "count"} <= names

        @tool
        def count() -> str:
            \"\"\"Record one call.\"\"\"
            with open(trial / "counter", "a") as out:
                out.write("x\\n")
            return "counted"

        @tool
        def slow() -> str:
            \"\"\"Take a while.\"\"\"
            with open(trial / "slow-started", "a") as out:
                out.write("x\\n")
            if mode == "start":
                while not recorded():
                    time.sleep(0.01)
                (trial / "ready").write_text("ready")
                time.sleep(600)
            return "slow done"

        backend = (FilesystemBackend(root_dir=trial / "root", virtual_mode=True)
                   if kind == "disk" else StateBackend())
        return create_deep_agent(ScriptedModel(policy=policy), tools=[count, slow],
                                 backend=backend, checkpointer=saver)

    if mode == "start":
        agent = build(Path(sys.argv[3]))
        agent.invoke({"messages": [{"role": "user", "content": "go"}]}, THREAD,
                     durability="sync")
    else:  # resume every trial, in one process
        for trial in map(Path, sys.argv[3:]):
            agent = build(trial)
            if mode == "helper":
                assert finish_pending_step(agent, THREAD, durability="sync")
            out = agent.invoke({"messages": [{"role": "user", "content": "next"}]}, THREAD,
                               durability="sync")
            print(json.dumps({
                "trial": str(trial),
                "files": {k: v["content"] for k, v in out.get("files", {}).items()},
                "results": {m.name: m.text for m in out["messages"] if m.type == "tool"},
                "humans": [m.text for m in out["messages"] if m.type == "human"],
                "answer": out["messages"][-1].text,
            }))
    """
)


def _start_and_kill(script: Path, trial: Path, kind: str) -> None:
    (trial / "root").mkdir(parents=True)
    with open(trial / "stderr", "w") as errors:
        child = subprocess.Popen([sys.executable, str(script), "start", kind, str(trial)],
                                 stderr=errors)
    try:
        while not (trial / "ready").exists():  # written only once the writes are saved
            if child.poll() is not None:
                errors = (trial / "stderr").read_text()
                pytest.fail(f"the run exited before it was ready:\n{errors}")
            time.sleep(0.02)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL


def _resume(script: Path, trials: list[Path], kind: str, mode: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(script), mode, kind, *map(str, trials)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["state", "disk"])
def test_kill_9_then_new_message_keeps_every_completed_write(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    trials = [tmp_path / f"trial{n}" for n in range(TRIALS_PER_BACKEND)]
    for trial in trials:
        _start_and_kill(script, trial, kind)
        assert (trial / "counter").read_text() == "x\n"  # `count` ran before the kill
    outcomes = _resume(script, trials, kind, "helper")
    assert len(outcomes) == len(trials)
    lost = []
    for trial, outcome in zip(trials, outcomes, strict=True):
        kept = outcome["results"].get("write_file") == "Updated file /done.txt"
        if kind == "state":
            kept = kept and outcome["files"].get("/done.txt") == "kept"
        else:
            kept = kept and (trial / "root" / "done.txt").read_text() == "kept"
        if not kept:
            lost.append(outcome)
    assert not lost, f"{len(lost)} of {len(trials)} trials lost the completed write: {lost}"
    for trial, outcome in zip(trials, outcomes, strict=True):
        assert outcome["results"]["count"] == "counted"
        assert outcome["results"]["slow"] == "slow done"
        assert outcome["humans"] == ["go", "next"] and outcome["answer"] == "ok: next"
        # side effects: the finished tool did not run again; the unfinished one did
        assert (trial / "counter").read_text() == "x\n"
        assert (trial / "slow-started").read_text() == "x\nx\n"


def test_without_finishing_the_step_the_new_message_drops_the_writes(tmp_path: Path) -> None:
    """Why `finish_pending_step` exists: LangGraph's own behaviour on new input."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    trial = tmp_path / "trial"
    _start_and_kill(script, trial, "state")
    (outcome,) = _resume(script, [trial], "state", "direct")
    assert "/done.txt" not in outcome["files"]
    assert "did not complete" in outcome["results"]["write_file"]
