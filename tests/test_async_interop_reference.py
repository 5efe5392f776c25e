"""Interoperability: the reference package's own supervisor drives children on `fathom serve`.

`tests/async_e2e/reference_supervisor.py` runs in the reference's virtualenv
(`benchmarks/.venv-deepagents`, made by `make test`): `deepagents.create_deep_agent` with
the reference's `AsyncSubAgentMiddleware`, its `researcher` and `coder` specs pointing by
`url` at a `fathom serve` subprocess that hosts fathom's scripted child graphs. The test
asserts what the reference reports (tool answers, `async_tasks`) and what fathom's server
recorded (runs interrupted by the update and the cancel, the queued follow-up).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests.async_e2e.support import copy_e2e_deployment, use_gates
from tests.server.servers import REPO_ROOT, ServerProcess, fathom_serve_available
from tests.system_requirements import needs

REFERENCE_PYTHON = REPO_ROOT / "benchmarks" / ".venv-deepagents" / "bin" / "python"
SCRIPT = REPO_ROOT / "tests" / "async_e2e" / "reference_supervisor.py"
SCRIPT_TIMEOUT_S = 300
"""Bounds a hang of the reference script; it normally ends within seconds."""

pytestmark = [
    pytest.mark.skipif(not fathom_serve_available(), reason="no `fathom serve`"),
    pytest.mark.skipif(not REFERENCE_PYTHON.exists(), reason=needs("the reference package")),
]


async def test_reference_supervisor_drives_children_on_fathom_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = use_gates(tmp_path / "gates", monkeypatch)
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "FATHOM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FATHOM_E2E_CHILD_URL", raising=False)
    server = ServerProcess(kind="fathom", workdir=copy_e2e_deployment(tmp_path / "deploy"))
    server.start()
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
        done = subprocess.run(
            [str(REFERENCE_PYTHON), str(SCRIPT), server.url], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{done.stderr[-4000:]}\n{server.log()}"
        log = json.loads(done.stdout.strip().splitlines()[-1])
        researcher, coder = log["ids"]["researcher"], log["ids"]["coder"]

        # what the reference reports
        assert log["reply"] == "said: hello"
        running = log["tasks_while_running"]
        assert {t["agent_name"]: t["status"] for t in running.values()} == {
            "researcher": "running", "coder": "running"}  # fmt: skip
        [checks] = log["check"][:1]
        assert [json.loads(c)["status"] for c in checks] == ["running", "running"]
        [[updated], [queued]] = log["update"]
        assert updated == f"Updated async subagent. task_id: {researcher}"
        assert queued == ("Queued follow-up to async subagent without interrupting its current "
                          f"run. task_id: {coder}")  # fmt: skip
        assert log["coder_after_update"]["status"] == "pending"
        assert json.loads(log["check"][1][0])["status"] == "running"  # the follow-up runs
        assert log["cancel"] == [[f"Cancelled async subagent task: {coder}"]]
        assert json.loads(log["check"][2][0])["status"] == "cancelled"
        final = json.loads(log["check"][-1][0])
        assert final == {"status": "success", "thread_id": researcher,
                         "result": "researcher done: alpha | alpha-more"}  # fmt: skip
        assert log["list"][0][0].splitlines() == [
            "2 tracked task(s):",
            f"- task_id: {researcher}  agent: researcher  status: success",
            f"- task_id: {coder}  agent: coder  status: cancelled",
        ]
        assert {t: log["tasks"][t]["status"] for t in log["tasks"]} == {
            researcher: "success", coder: "cancelled"}  # fmt: skip

        # what fathom's server recorded
        client = get_client(url=server.url)
        first, second = log["researcher_runs"]
        assert first != second
        assert (await client.runs.get(researcher, first))["status"] == "interrupted"
        assert (await client.runs.get(researcher, second))["status"] == "success"
        coder_runs = await client.runs.list(coder)
        assert sorted(r["status"] for r in coder_runs) == ["interrupted", "success"]
        thread = await client.threads.get(coder)
        assert (thread["metadata"] or {})["subagent_name"] == "coder"
        assert gates["beta-more"].started
    finally:
        server.stop()
