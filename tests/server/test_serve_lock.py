"""One `fathom serve` per SQLite storage: a second one on the same `.fathom/` refuses to start.

A second server would otherwise mark the first one's live runs `error` at start-up (SQLite
storage belongs to one process, whose recovery takes every unfinished run for its own). The
lock is the kernel's (`flock`), so a server killed with SIGKILL leaves the folder free for
the next. `--workers` above 1 needs PostgreSQL and is refused on SQLite and memory storage.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests.server.servers import (
    START_DEADLINE_S,
    ServerProcess,
    copy_deployment,
    fathom_binary,
    fathom_serve_available,
    free_port,
)
from tests.server.support import Gate, contents, wait_started

from fathom.server.storage_lock import LOCK_FILE


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    return copy_deployment(tmp_path / "deploy")


def _serve(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `fathom serve` on `workdir`'s deployment to its end (a refusal ends it at once)."""
    return subprocess.run(
        [str(fathom_binary()), "serve", "--config", str(workdir / "langgraph.json"),
         "--port", str(free_port()), *args],
        cwd=workdir, capture_output=True, text=True, check=False, timeout=START_DEADLINE_S,
    )  # fmt: skip


async def test_a_second_server_on_the_same_sqlite_storage_refuses_and_the_first_runs_on(
    workdir: Path, new_gate: Callable[[], Gate]
) -> None:
    first = ServerProcess(kind="fathom", workdir=workdir)
    first.start()
    assert first.process is not None
    gate = new_gate()
    try:
        client = get_client(url=first.url, api_key=None)
        thread_id = (await client.threads.create())["thread_id"]
        held = await client.runs.create(thread_id, "gated", input=gate.input("held"))
        await wait_started(gate)

        second = _serve(workdir)

        assert second.returncode == 2
        assert f"another fathom serve (pid {first.process.pid}) is serving this storage" in (
            second.stderr
        )
        assert "--database postgresql://" in second.stderr
        assert (await client.runs.get(thread_id, held["run_id"]))["status"] == "running"
        gate.release()
        await client.runs.join(thread_id, held["run_id"])
        assert (await client.runs.get(thread_id, held["run_id"]))["status"] == "success"
        state = await client.threads.get_state(thread_id)
        assert contents(state["values"]) == ["held", "released: held"]
        await client.http.client.aclose()
    finally:
        first.stop()


def test_a_server_killed_with_sigkill_leaves_the_storage_free_for_the_next(
    workdir: Path,
) -> None:
    first = ServerProcess(kind="fathom", workdir=workdir)
    first.start()
    first.kill()
    second = ServerProcess(kind="fathom", workdir=workdir)
    second.start()  # fails the test if the server exits instead
    try:
        assert second.process is not None
        lock = (workdir / ".fathom" / LOCK_FILE).read_text()
        assert lock.strip() == str(second.process.pid)
    finally:
        second.stop()


@pytest.mark.parametrize("database", [None, "memory"])
def test_several_workers_are_refused_without_postgresql(
    workdir: Path, database: str | None
) -> None:
    args = ("--database", database) if database else ()
    result = _serve(workdir, "--workers", "2", *args)

    assert result.returncode == 2
    assert "--workers 2 needs --database postgresql://" in result.stderr
    assert not (workdir / ".fathom").exists()  # refused before it touched any storage


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--workers", "0"), "--workers must be at least 1, not 0"),
        (("--lease-seconds", "0"), "--lease-seconds must be more than 0, not 0.0"),
    ],
)
def test_worker_and_lease_settings_out_of_range_are_refused(
    workdir: Path, args: tuple[str, ...], message: str
) -> None:
    result = _serve(workdir, *args)

    assert result.returncode == 2
    assert message in result.stderr
