"""A run paused for approval is resumed from a SQLite checkpoint by a new process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, sqlite3, sys
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command
    from fathom import create_deep_agent
    from fathom.testing import ScriptedModel, ai, tool_call

    def policy(request):
        if request.last_message.type == "tool":
            return ai("finished: " + request.last_message.content)
        return ai("", tool_call("write_file", {"file_path": "/report.md", "content": "42"}))

    db, step = sys.argv[1], sys.argv[2]
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    agent = create_deep_agent(
        ScriptedModel(policy=policy), interrupt_on={"write_file": True}, checkpointer=saver
    )
    config = {"configurable": {"thread_id": "persisted"}}
    if step == "start":
        out = agent.invoke({"messages": [{"role": "user", "content": "write it"}]}, config,
                           version="v2")
        print(json.dumps({"interrupted": bool(out.interrupts),
                          "files": sorted((out.value or {}).get("files", {}))}))
    else:
        out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config,
                           version="v2")
        print(json.dumps({"answer": out.value["messages"][-1].content,
                          "files": {k: v["content"] for k, v in out.value["files"].items()}}))
    """
)


def _run(tmp_path, step):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "threads.db"), step],
        capture_output=True,
        text=True,
        timeout=100,  # bounds a hang: a loaded machine starts Python slowly
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_new_process_resumes_an_interrupted_run_from_sqlite(tmp_path):
    started = _run(tmp_path, "start")
    assert started == {"interrupted": True, "files": []}
    resumed = _run(tmp_path, "resume")
    assert resumed == {"answer": "finished: Updated file /report.md", "files": {"/report.md": "42"}}
