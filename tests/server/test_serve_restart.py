"""`fathom serve` killed with SIGKILL mid-run, then restarted on the same `.fathom/` storage.

What fathom documents (`fathom.server.execution.manager`): a run a dead server left
`pending` or `running` is marked `error` on start-up and its thread `error`; the thread's
checkpoints stay intact, so a run with no new input continues from the last checkpoint.
Only fathom persists across a restart (`langgraph dev` keeps everything in memory).
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


async def test_run_killed_with_the_server_is_marked_error_and_the_checkpoint_survives(
    workdir: Path, new_gate: Callable[[], Gate]
) -> None:
    first = ServerProcess(kind="fathom", workdir=workdir)
    first.start()
    opened, gate = new_gate(), new_gate()
    opened.release()
    try:
        client = get_client(url=first.url, api_key=None)
        thread = await client.threads.create(metadata={"purpose": "restart"})
        thread_id = thread["thread_id"]
        await client.runs.wait(thread_id, "gated", input=opened.input("before"))
        doomed = await client.runs.create(thread_id, "gated", input=gate.input("held"))
        await wait_started(gate)

        async def checkpointed() -> bool:
            # LangGraph saves the checkpoint in the background while the node starts, so
            # the test waits until the server reads it back before pulling the plug.
            return (await client.threads.get_state(thread_id))["next"] == ["wait_at_gate"]

        await eventually(checkpointed, "the held run's checkpoint to be saved")
        await client.http.client.aclose()
    finally:
        first.kill()
    assert (workdir / ".fathom").is_dir()

    second = ServerProcess(kind="fathom", workdir=workdir)
    second.start()
    try:
        client = get_client(url=second.url, api_key=None)
        run = await client.runs.get(thread_id, doomed["run_id"])
        assert run["status"] == "error"
        restored = await client.threads.get(thread_id)
        assert restored["status"] == "error"
        assert restored["metadata"]["purpose"] == "restart"
        state = await client.threads.get_state(thread_id)
        assert contents(state["values"]) == ["before", "released: before", "held"]
        assert state["next"] == ["wait_at_gate"]

        gate.release()
        resumed = await client.runs.wait(thread_id, "gated", input=None)

        assert contents(resumed) == ["before", "released: before", "held", "released: held"]
        assert (await client.threads.get(thread_id))["status"] == "idle"
        await client.http.client.aclose()
    finally:
        second.stop()
