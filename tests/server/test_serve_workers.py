"""`fathom serve --workers 2` on a real PostgreSQL: one port, two worker processes serving it.

Which worker the kernel hands a connection to is up to the kernel, so the tests choose it
without timing: a worker stopped with SIGSTOP cannot accept, so while one is stopped every
request is served by the other. Each worker serving a request in turn, on the same port
and the same threads, proves both serve the one port from the one storage. The parent's
workers are its child processes, read from `/proc`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from tests import postgres
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available
from tests.server.support import Gate, contents, eventually

pytest.importorskip("psycopg", reason="needs the postgres extra: pip install 'fathom[postgres]'")
pytest.importorskip("langgraph.checkpoint.postgres", reason="needs langgraph-checkpoint-postgres")

postgres_uri = postgres.postgres_uri  # the fixture, for the tests below

WORKERS = 2


@dataclass
class WorkersServer(ServerProcess):
    """`fathom serve --workers 2` on PostgreSQL (the `database` URL)."""

    database: str = ""

    def command(self) -> list[str]:
        return [*super().command(), "--workers", str(WORKERS), "--database", self.database]

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


def children(parent: int) -> set[int]:
    """The live (not zombie) child processes of `parent`, from `/proc/*/stat`."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue  # the process ended while being read
        if int(ppid) == parent and state != "Z":
            found.add(int(stat.parent.name))
    return found


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """Hold process `pid` stopped (SIGSTOP) while the block runs: it accepts no connection."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture
def server(tmp_path: Path, postgres_uri: str) -> Iterator[WorkersServer]:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    served = WorkersServer(kind="fathom", workdir=copy_deployment(tmp_path / "deploy"),
                           database=postgres_uri)  # fmt: skip
    served.start()
    try:
        yield served
    finally:
        served.stop()


async def wait_announced(server: WorkersServer) -> None:
    """Wait for the parent's start-up line, which it prints once every worker serves."""

    async def announced() -> bool:
        assert server.process is not None
        if server.process.poll() is not None:
            pytest.fail(f"fathom serve exited with {server.process.returncode}:\n{server.log()}")
        return f"{WORKERS} workers" in server.log()

    await eventually(announced, "the start-up line")


async def serve_in(server: WorkersServer, only: int, thread_id: str, gate: Gate,
                   text: str) -> list[str]:  # fmt: skip
    """Run the `gated` graph on the thread while every worker but `only` is stopped."""
    others = children(server.pid) - {only}
    with ExitStack() as stack:
        for pid in others:
            stack.enter_context(stopped(pid))
        client = get_client(url=server.url, api_key=None)  # new connections, to `only`
        try:
            return contents(await client.runs.wait(thread_id, "gated", input=gate.input(text)))
        finally:
            await client.http.client.aclose()


async def test_two_workers_serve_one_port_and_share_the_storage(
    server: WorkersServer, new_gate: Callable[[], Gate]
) -> None:
    await wait_announced(server)
    workers = children(server.pid)
    assert len(workers) == WORKERS
    first, second = sorted(workers)
    gate = new_gate()
    gate.release()
    client = get_client(url=server.url, api_key=None)
    thread_id = (await client.threads.create(metadata={"purpose": "workers"}))["thread_id"]
    await client.http.client.aclose()

    by_first = await serve_in(server, first, thread_id, gate, "one")
    by_second = await serve_in(server, second, thread_id, gate, "two")

    assert by_first == ["one", "released: one"]
    assert by_second == ["one", "released: one", "two", "released: two"]
    assert f"{WORKERS} workers × 10 jobs" in server.log()
    assert "storage: PostgreSQL at postgresql://" in server.log()


async def test_a_killed_worker_is_replaced_and_sigterm_stops_them_all(
    server: WorkersServer, new_gate: Callable[[], Gate]
) -> None:
    await wait_announced(server)
    doomed, survivor = sorted(children(server.pid))
    os.kill(doomed, signal.SIGKILL)

    async def replaced() -> bool:
        now = children(server.pid)
        return len(now) == WORKERS and doomed not in now

    await eventually(replaced, "a worker in place of the killed one")
    (fresh,) = children(server.pid) - {survivor}
    gate = new_gate()
    gate.release()
    client = get_client(url=server.url, api_key=None)
    thread_id = (await client.threads.create())["thread_id"]
    await client.http.client.aclose()
    assert await serve_in(server, fresh, thread_id, gate, "again") == ["again", "released: again"]

    assert server.process is not None
    os.kill(server.pid, signal.SIGTERM)  # the parent alone: it stops its workers
    assert server.process.wait(timeout=60) == 0
    assert not children(server.pid)
    for worker in (survivor, fresh):
        assert not Path(f"/proc/{worker}").exists()


async def test_workers_stop_when_their_supervisor_is_killed(server: WorkersServer) -> None:
    await wait_announced(server)
    workers = children(server.pid)
    assert len(workers) == WORKERS
    assert server.process is not None
    os.kill(server.pid, signal.SIGKILL)  # the parent alone: no chance to stop its workers
    server.process.wait(timeout=60)

    async def all_gone() -> bool:
        return not any(_alive(worker) for worker in workers)

    await eventually(all_gone, "the orphaned workers to stop")


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
