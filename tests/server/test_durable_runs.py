"""Runs outlive the server that runs them: kill -9 under load, replicas on one PostgreSQL.

Every server here is a real `fathom serve` subprocess driven by the real `langgraph-sdk`
client over HTTP. The load is 50 runs over 10 threads (5 queued turns per thread) on the
deployment's `slow_agent`, whose scripted model takes `SLOW_MODEL_SECONDS` per answer, so
that a kill lands while runs are running and queued. After the kill every run must end
`success`, and every thread's messages must be exactly its five turns and five answers, in
order: none lost, none duplicated.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from tests.postgres import postgres_uri
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available
from tests.server.support import Gate, contents, eventually, wait_started

__all__ = ["postgres_uri"]  # the fixture, imported for this module's tests

THREADS = 10
TURNS = 5
LEASE_SECONDS = "2"
"""Short, so the surviving replica re-queues the dead one's runs soon after the kill."""
DONE_BEFORE_KILL = 10
"""The kill comes once this many runs have ended: the rest are running or queued."""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    return copy_deployment(tmp_path / "deploy")


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Servers a test starts; each is stopped at the end, whatever happened."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.stop()


def _turn(thread: int, turn: int) -> str:
    return f"thread {thread} turn {turn}"


async def _create_load(clients: list[LangGraphClient]) -> list[tuple[int, str, str]]:
    """Create the threads and queue every turn, spread over `clients`: (thread, id, run id)."""
    made: list[tuple[int, str, str]] = []
    threads = [await clients[t % len(clients)].threads.create() for t in range(THREADS)]
    for turn in range(TURNS):
        for t, thread in enumerate(threads):
            client = clients[(t + turn) % len(clients)]
            run = await client.runs.create(
                thread["thread_id"], "slow_agent", multitask_strategy="enqueue",
                input={"messages": [{"role": "user", "content": _turn(t, turn)}]},
            )  # fmt: skip
            made.append((t, thread["thread_id"], run["run_id"]))
    return made


async def _ended(client: LangGraphClient, runs: list[tuple[int, str, str]]) -> int:
    statuses = [(await client.runs.get(tid, rid))["status"] for _, tid, rid in runs]
    return sum(status not in ("pending", "running") for status in statuses)


async def _kill_when_some_ended(
    client: LangGraphClient, runs: list[tuple[int, str, str]], victim: ServerProcess
) -> None:
    async def some_ended() -> bool:
        return await _ended(client, runs) >= DONE_BEFORE_KILL

    await eventually(some_ended, f"{DONE_BEFORE_KILL} runs to end")
    assert await _ended(client, runs) < len(runs), "the load ended before the kill"
    victim.kill()


async def _assert_every_turn_once(
    client: LangGraphClient, runs: list[tuple[int, str, str]]
) -> None:
    for _, thread_id, run_id in runs:
        await client.runs.join(thread_id, run_id)
        assert (await client.runs.get(thread_id, run_id))["status"] == "success"
    for t, thread_id in sorted({(t, tid) for t, tid, _ in runs}):
        values = (await client.threads.get_state(thread_id))["values"]
        expected = [text for turn in range(TURNS)
                    for text in (_turn(t, turn), f"echo: {_turn(t, turn)}")]  # fmt: skip
        assert contents(values) == expected
        assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_kill_9_of_a_sqlite_server_under_load_loses_and_repeats_no_turn(
    workdir: Path, servers: list[ServerProcess]
) -> None:
    first = ServerProcess(kind="fathom", workdir=workdir, name="-first")
    servers.append(first)
    first.start()
    client = get_client(url=first.url, api_key=None)
    runs = await _create_load([client])
    await _kill_when_some_ended(client, runs, first)
    await client.http.client.aclose()

    second = ServerProcess(kind="fathom", workdir=workdir, name="-second")
    servers.append(second)
    second.start()
    client = get_client(url=second.url, api_key=None)
    await _assert_every_turn_once(client, runs)
    await client.http.client.aclose()


def _replica(workdir: Path, url: str, name: str) -> ServerProcess:
    options = ("--database", url, "--lease-seconds", LEASE_SECONDS)
    return ServerProcess(kind="fathom", workdir=workdir, name=name, extra_args=options)


async def test_kill_9_of_one_of_two_replicas_under_load_loses_and_repeats_no_turn(
    workdir: Path, servers: list[ServerProcess], postgres_uri: str
) -> None:
    one, two = _replica(workdir, postgres_uri, "-a"), _replica(workdir, postgres_uri, "-b")
    servers.extend([one, two])
    one.start()
    two.start()
    clients = [get_client(url=one.url, api_key=None), get_client(url=two.url, api_key=None)]
    runs = await _create_load(clients)
    await _kill_when_some_ended(clients[1], runs, one)
    await _assert_every_turn_once(clients[1], runs)
    for client in clients:
        await client.http.client.aclose()


async def test_a_run_on_one_replica_is_joined_streamed_and_cancelled_from_another(
    workdir: Path, servers: list[ServerProcess], postgres_uri: str, new_gate: Callable[[], Gate]
) -> None:
    one = _replica(workdir, postgres_uri, "-a")
    servers.append(one)
    one.start()
    on_one = get_client(url=one.url, api_key=None)
    streamed_gate, cancelled_gate = new_gate(), new_gate()
    streamed_thread = (await on_one.threads.create())["thread_id"]
    cancelled_thread = (await on_one.threads.create())["thread_id"]
    streamed = await on_one.runs.create(streamed_thread, "gated",
                                        input=streamed_gate.input("streamed"))  # fmt: skip
    cancelled = await on_one.runs.create(cancelled_thread, "gated",
                                         input=cancelled_gate.input("cancelled"))  # fmt: skip
    # Both runs run on the first replica: it was the only one when they reached their gates.
    await wait_started(streamed_gate)
    await wait_started(cancelled_gate)
    two = _replica(workdir, postgres_uri, "-b")
    servers.append(two)
    two.start()
    on_two = get_client(url=two.url, api_key=None)

    async def follow() -> list[Any]:
        parts = on_two.runs.join_stream(streamed_thread, streamed["run_id"], stream_mode="values")
        return [part async for part in parts]

    following = asyncio.create_task(follow())
    streamed_gate.release()
    events = await asyncio.wait_for(following, 120)
    assert events[0].event == "metadata" and events[0].data["run_id"] == streamed["run_id"]
    assert contents(events[-1].data) == ["streamed", "released: streamed"]
    assert contents(await on_two.runs.join(streamed_thread, streamed["run_id"])) == [
        "streamed", "released: streamed"
    ]  # fmt: skip

    await on_two.runs.cancel(cancelled_thread, cancelled["run_id"], wait=True)
    assert (await on_two.runs.get(cancelled_thread, cancelled["run_id"]))["status"] == "interrupted"
    assert (await on_one.runs.get(cancelled_thread, cancelled["run_id"]))["status"] == "interrupted"
    assert (await on_one.threads.get(cancelled_thread))["status"] != "busy"
    for client in (on_one, on_two):
        await client.http.client.aclose()


async def test_multitask_strategies_see_the_threads_runs_on_every_replica(
    workdir: Path, servers: list[ServerProcess], postgres_uri: str, new_gate: Callable[[], Gate]
) -> None:
    one, two = _replica(workdir, postgres_uri, "-a"), _replica(workdir, postgres_uri, "-b")
    servers.extend([one, two])
    one.start()
    two.start()
    on_one, on_two = get_client(url=one.url, api_key=None), get_client(url=two.url, api_key=None)
    held, opened = new_gate(), new_gate()
    opened.release()
    thread_id = (await on_one.threads.create())["thread_id"]
    first = await on_one.runs.create(thread_id, "gated", input=held.input("first"))
    await wait_started(held)

    with pytest.raises(httpx.HTTPStatusError) as refused:
        await on_two.runs.create(thread_id, "gated", input=opened.input("refused"),
                                 multitask_strategy="reject")  # fmt: skip
    assert refused.value.response.status_code == 409
    queued = await on_two.runs.create(thread_id, "gated", input=opened.input("queued"),
                                      multitask_strategy="enqueue")  # fmt: skip
    assert (await on_one.runs.get(thread_id, queued["run_id"]))["status"] == "pending"
    replacing = await on_two.runs.create(thread_id, "gated", input=opened.input("replacing"),
                                         multitask_strategy="interrupt")  # fmt: skip
    final = await on_one.runs.join(thread_id, replacing["run_id"])

    assert (await on_two.runs.get(thread_id, first["run_id"]))["status"] == "interrupted"
    assert (await on_two.runs.get(thread_id, queued["run_id"]))["status"] == "interrupted"
    assert contents(final) == ["first", "replacing", "released: replacing"]
    for client in (on_one, on_two):
        await client.http.client.aclose()


async def test_a_stalled_replica_that_lost_its_lease_stops_the_run_and_records_nothing(
    workdir: Path, servers: list[ServerProcess], postgres_uri: str, new_gate: Callable[[], Gate]
) -> None:
    one = _replica(workdir, postgres_uri, "-a")
    servers.append(one)
    one.start()
    on_one = get_client(url=one.url, api_key=None)
    gate = new_gate()
    thread_id = (await on_one.threads.create())["thread_id"]
    run = await on_one.runs.create(thread_id, "gated", input=gate.input("held"))
    await wait_started(gate)  # claimed by the first replica, the only one then
    two = _replica(workdir, postgres_uri, "-b")
    servers.append(two)
    two.start()
    on_two = get_client(url=two.url, api_key=None)

    assert one.process is not None
    (gate.path / "started").unlink()
    os.kill(one.process.pid, signal.SIGSTOP)  # stalled past its lease, not dead
    try:
        await wait_started(gate)  # the second replica re-queued the run and resumed it
    finally:
        os.kill(one.process.pid, signal.SIGCONT)

    async def gave_up() -> bool:
        return "lost the lease" in one.log(tail=100_000)

    await eventually(gave_up, "the stalled replica to notice its lease was taken")
    assert (await on_one.runs.get(thread_id, run["run_id"]))["status"] == "running"  # not ended
    gate.release()
    assert contents(await on_two.runs.join(thread_id, run["run_id"])) == ["held", "released: held"]
    assert (await on_one.runs.get(thread_id, run["run_id"]))["status"] == "success"
    assert contents((await on_one.threads.get_state(thread_id))["values"]) == [
        "held", "released: held"
    ]  # fmt: skip
    for client in (on_one, on_two):
        await client.http.client.aclose()
