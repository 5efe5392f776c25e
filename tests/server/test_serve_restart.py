"""`fathom serve` killed with SIGKILL mid-run, then restarted on the same `.fathom/` storage.

What fathom documents (`fathom.server.execution.manager`): the runs a dead server left
`running` resume from their last checkpoint under their own `run_id`, and those it left
queued simply start, in order. Only fathom persists across a restart (`langgraph dev` keeps
everything in memory).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available
from tests.server.support import Gate, contents, eventually, wait_started


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    return copy_deployment(tmp_path / "deploy")


async def test_running_and_queued_runs_killed_with_the_server_finish_after_a_restart(
    workdir: Path, new_gate: Callable[[], Gate]
) -> None:
    first = ServerProcess(kind="fathom", workdir=workdir)
    first.start()
    opened, gate, later = new_gate(), new_gate(), new_gate()
    opened.release()
    later.release()
    try:
        client = get_client(url=first.url, api_key=None)
        thread = await client.threads.create(metadata={"purpose": "restart"})
        thread_id = thread["thread_id"]
        await client.runs.wait(thread_id, "gated", input=opened.input("before"))
        doomed = await client.runs.create(thread_id, "gated", input=gate.input("held"))
        await wait_started(gate)
        queued = await client.runs.create(thread_id, "gated", input=later.input("queued"),
                                          multitask_strategy="enqueue")  # fmt: skip

        async def checkpointed() -> bool:
            # LangGraph saves the checkpoint in the background while the node starts, so
            # the test waits until the server reads it back before pulling the plug.
            return (await client.threads.get_state(thread_id))["next"] == ["wait_at_gate"]

        await eventually(checkpointed, "the held run's checkpoint to be saved")
        assert (await client.runs.get(thread_id, queued["run_id"]))["status"] == "pending"
        await client.http.client.aclose()
    finally:
        first.kill()
    assert (workdir / ".fathom").is_dir()
    (gate.path / "started").unlink()  # the resumed run creates it again when its node re-runs

    second = ServerProcess(kind="fathom", workdir=workdir)
    second.start()
    try:
        client = get_client(url=second.url, api_key=None)
        await wait_started(gate)  # the restarted server resumed the held run: its node re-ran
        assert (await client.runs.get(thread_id, doomed["run_id"]))["status"] == "running"
        assert (await client.threads.get(thread_id))["status"] == "busy"
        gate.release()
        await client.runs.join(thread_id, doomed["run_id"])
        final = await client.runs.join(thread_id, queued["run_id"])

        assert contents(final) == [
            "before", "released: before", "held", "released: held", "queued", "released: queued"
        ]  # fmt: skip
        for run in (doomed, queued):
            assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"
        restored = await client.threads.get(thread_id)
        assert restored["status"] == "idle"
        assert restored["metadata"]["purpose"] == "restart"
        await client.http.client.aclose()
    finally:
        second.stop()
