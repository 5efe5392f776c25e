"""`fathom serve` replicas on one PostgreSQL: throughput, queue-to-start, crash recovery.

Every replica is a real `fathom serve --database postgresql://... --lease-seconds S`
subprocess on its own loopback port, serving a fresh temporary copy of
`benchmarks/replicas_deploy/`; the database is a throwaway cluster
(`fathom.testing.postgres.throwaway_postgres`), a fresh one per phase. The client is the real
`langgraph_sdk` async client over HTTP, in this process. Three phases:

1. **Throughput, 1 and 3 replicas.** `--runs` runs on `paced_agent` (a deep agent whose
   scripted model takes `--latency` seconds per answer, 0.2 s by default), shared by
   `--clients` concurrent clients, each run `threads.create` + `runs.wait` on a new thread;
   client k talks to replica k mod n, so the same total load is spread over the replicas'
   ports. Runs per second over the batch's wall time, and p50/p95 of each run's
   create-to-done latency; then 3 replicas ÷ 1 replica.
2. **Queue-to-start**, on both clusters while idle: `--starts` runs of `stamp`, one after
   another, round-robin over the replicas. Its only node answers `started <time.time()>`, so
   the figure is that wall-clock instant minus the instant `runs.create` returned in this
   process (same machine, same clock). It includes everything between the queue row and the
   graph's first node (the claim, loading the thread, starting the graph), so it is an upper
   bound on the time to the claim. Goal: p50 ≤ 50 ms.
3. **Crash recovery**, 2 replicas at `--lease-seconds` (2 by default): `--recovery-threads`
   threads, each with one `slow_agent` run (1 s model) queued through either replica; once
   runs are running, SIGKILL to one replica's process group. The figure is the time from the
   kill until every run that had not ended at the kill has ended, all `success` (joined
   through the survivor). The dead replica's runs wait for their lease to expire before the
   survivor's reaper re-queues them, so the lease dominates. The queue table is read at the
   kill (runs running per owner) and during recovery (runs whose attempt went above 1).

Every reply is checked (`echo: <text>`), or the benchmark fails. It prints a table, writes
`benchmarks/results/server_replicas.json`; `collect()` gives `bench.py` its rows (fathom's
column only: there is no reference for this).

    .venv/bin/python benchmarks/server_replicas.py [--runs 300] [--clients 30] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _harness import REF_PYTHON, Row, positive_float, positive_int, print_table

from fathom.testing.postgres import PostgresStartFailed, PostgresUnavailable, throwaway_postgres
from server import fathom_binary, free_port, percentile, tree_rss_mib

SECTION = "fathom serve replicas on one PostgreSQL"
DEPLOY_DIR = Path(__file__).resolve().parent / "replicas_deploy"
RESULTS_PATH = Path(__file__).resolve().parent / "results" / "server_replicas.json"
START_DEADLINE_S = 120.0
"""Bounds a hang while a replica starts; a healthy one answers `/ok` within seconds."""
RUN_DEADLINE_S = 300.0
"""Bounds a hang while waiting for runs; a healthy cluster finishes them long before."""


@dataclass(frozen=True)
class Settings:
    """How much work each phase gets."""

    runs: int = 300
    clients: int = 30
    latency: float = 0.2
    jobs: int = 10
    warmup: int = 10
    starts: int = 50
    recovery_threads: int = 20
    lease_seconds: float = 2.0


# --------------------------------------------------------------------------- replicas


@dataclass
class Replica:
    """One `fathom serve` on the shared database, in its own process group."""

    workdir: Path
    database: str
    name: str
    jobs: int = 10
    lease_seconds: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The replica's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where its stdout and stderr go (appended across restarts)."""
        return self.workdir / f"replica-{self.name}.log"

    def command(self) -> list[str]:
        """Its command line."""
        return [str(fathom_binary()), "serve", "--config", str(self.workdir / "langgraph.json"),
                "--port", str(self.port), "--jobs", str(self.jobs), "--database", self.database,
                "--lease-seconds", f"{self.lease_seconds:g}"]  # fmt: skip

    def start(self) -> float:
        """Start it (a new port if the old one is taken) and wait for `/ok`; the seconds that
        took. Raises `RuntimeError` with its log if it exits or never answers."""
        import httpx

        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        started = time.perf_counter()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited with {self.process.returncode}:"
                                   f"\n{self.log()}")  # fmt: skip
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return time.perf_counter() - started
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"replica {self.name} did not answer /ok:\n{self.log()}")

    def alive(self) -> bool:
        """Whether its process is running."""
        return self.process is not None and self.process.poll() is None

    def rss_mib(self) -> float:
        """Its process tree's resident memory now (0 when it is not running)."""
        return tree_rss_mib(self.process.pid) if self.process and self.alive() else 0.0

    def kill(self) -> None:
        """SIGKILL to its whole process group, as a crash would; waits for it to go."""
        if self.process is not None and self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM to its process group, then SIGKILL if it lingers."""
        if self.process is None or not self.alive():
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self, tail: int = 3000) -> str:
        """The end of its log."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "<no log>"


@contextlib.contextmanager
def cluster(count: int, *, jobs: int = 10, lease_seconds: float = 30.0,
            env: dict[str, str] | None = None) -> Iterator[tuple[str, list[Replica]]]:  # fmt: skip
    """A fresh PostgreSQL and `count` replicas on it, each in its own copy of the deploy
    folder; yields the database URL and the started replicas, and stops them all at the end."""
    with throwaway_postgres() as database, tempfile.TemporaryDirectory(prefix="fathom-rep-") as tmp:
        replicas: list[Replica] = []
        try:
            for index in range(count):
                workdir = Path(tmp) / f"deploy-{index}"
                shutil.copytree(DEPLOY_DIR, workdir, ignore=shutil.ignore_patterns("__pycache__"))
                replica = Replica(workdir, database, str(index), jobs, lease_seconds, env or {})
                replicas.append(replica)
                replica.start()
            yield database, replicas
        finally:
            for replica in replicas:
                replica.stop()


# --------------------------------------------------------------------------- client side


class WrongReply(RuntimeError):
    """A run ended without the scripted reply, or not in `success`."""


def last_content(values: Any) -> Any:
    """The content of the last message in a thread's `values`, or None."""
    messages = values.get("messages") if isinstance(values, dict) else None
    last = messages[-1] if messages else None
    return last.get("content") if isinstance(last, dict) else None


async def create_and_wait(client: Any, graph: str, text: str) -> float:
    """`threads.create` + `runs.wait` on `graph`; seconds from the first call to done."""
    started = time.perf_counter()
    thread = await client.threads.create()
    values = await client.runs.wait(
        thread["thread_id"], graph, input={"messages": [{"role": "user", "content": text}]}
    )
    elapsed = time.perf_counter() - started
    if last_content(values) != f"echo: {text}":
        raise WrongReply(f"run for {text!r} ended with {str(values)[:300]}")
    return elapsed


async def throughput(urls: Sequence[str], settings: Settings) -> dict[str, Any]:
    """`settings.runs` paced runs over `settings.clients` clients, client k on `urls[k % n]`."""
    from langgraph_sdk import get_client

    clients = [get_client(url=urls[k % len(urls)], api_key=None) for k in range(settings.clients)]
    for index in range(settings.warmup):
        await create_and_wait(clients[index % len(clients)], "paced_agent", f"warm {index}")
    remaining = iter(range(settings.runs))
    latencies: list[float] = []

    async def worker(own: Any) -> None:
        for index in remaining:  # a shared iterator: each run goes to one client
            latencies.append(await create_and_wait(own, "paced_agent", f"run {index}"))

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker(own) for own in clients)), RUN_DEADLINE_S)
    wall = time.perf_counter() - started
    for own in clients:
        await own.aclose()
    return {
        "wall_s": wall,
        "runs_per_s": settings.runs / wall,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": percentile(latencies, 0.95) * 1000,
    }


async def queue_to_start(urls: Sequence[str], count: int) -> dict[str, Any]:
    """`count` `stamp` runs one after another over `urls`: ms from `runs.create` returning to
    the graph's node running (the wall clock it answered with)."""
    from langgraph_sdk import get_client

    clients = [get_client(url=url, api_key=None) for url in urls]
    delays: list[float] = []
    for index in range(count):
        client = clients[index % len(clients)]
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "stamp", input={"messages": [
            {"role": "user", "content": f"stamp {index}"}]})  # fmt: skip
        created = time.time()
        values = await client.runs.join(thread["thread_id"], run["run_id"])
        content = str(last_content(values))
        if not content.startswith("started "):
            raise WrongReply(f"stamp run {run['run_id']} ended with {str(values)[:300]}")
        delays.append(float(content.removeprefix("started ")) - created)
    for client in clients:
        await client.aclose()
    return {
        "queue_to_start_ms": [round(d * 1000, 3) for d in delays],
        "queue_to_start_p50_ms": statistics.median(delays) * 1000,
        "queue_to_start_p95_ms": percentile(delays, 0.95) * 1000,
    }


async def _queue_rows(database: str) -> list[tuple[str, str, str | None, int]]:
    """(run id, status, owner, attempt) of every row of the shared run queue."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        cursor = await conn.execute("SELECT run_id, status, owner, attempt FROM fathom_run_queue")
        return [(str(r[0]), str(r[1]), r[2], int(r[3])) for r in await cursor.fetchall()]


async def _watch_requeued(database: str, seen: set[str], stop: asyncio.Event) -> None:
    """Add to `seen` every run whose attempt goes above 1, until `stop` is set."""
    while not stop.is_set():
        seen.update(run_id for run_id, _, _, attempt in await _queue_rows(database) if attempt > 1)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


async def recovery(
    database: str, replicas: Sequence[Replica], settings: Settings
) -> dict[str, Any]:
    """Queue `slow_agent` runs over both replicas, kill one once they run, time the rest."""
    from langgraph_sdk import get_client

    victim = replicas[0]  # the survivor, replicas[1], answers every join below
    clients = [get_client(url=r.url, api_key=None) for r in replicas]
    runs: list[tuple[str, str, str]] = []
    for index in range(settings.recovery_threads):
        client = clients[index % 2]
        thread = await client.threads.create()
        text = f"recover {index}"
        run = await client.runs.create(thread["thread_id"], "slow_agent", input={"messages": [
            {"role": "user", "content": text}]})  # fmt: skip
        runs.append((thread["thread_id"], run["run_id"], text))
    deadline = time.monotonic() + RUN_DEADLINE_S
    while len({o for _, s, o, _ in await _queue_rows(database) if s == "running"}) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("runs did not start on both replicas")
        await asyncio.sleep(0.02)
    at_kill = await _queue_rows(database)
    in_flight = {run_id for run_id, _, _, _ in at_kill}
    victim.kill()
    killed = time.perf_counter()
    requeued: set[str] = set()
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_requeued(database, requeued, stop))
    on_survivor = clients[1]

    async def join(thread_id: str, run_id: str, text: str) -> float:
        values = await on_survivor.runs.join(thread_id, run_id)
        ended = time.perf_counter() - killed
        status = (await on_survivor.runs.get(thread_id, run_id))["status"]
        if status != "success" or last_content(values) != f"echo: {text}":
            raise WrongReply(f"run {run_id} after the kill: {status}, {str(values)[:300]}")
        return ended

    ends = await asyncio.wait_for(asyncio.gather(
        *(join(*run) for run in runs if run[1] in in_flight)), RUN_DEADLINE_S)  # fmt: skip
    stop.set()
    await watcher
    for client in clients:
        await client.aclose()
    owners: dict[str, int] = {}
    for _, status, owner, _ in at_kill:
        if status == "running" and owner:
            owners[owner] = owners.get(owner, 0) + 1
    return {
        "lease_seconds": settings.lease_seconds,
        "runs": len(runs),
        "in_flight_at_kill": len(in_flight),
        "running_at_kill_per_owner": sorted(owners.values(), reverse=True),
        "requeued": len(requeued),
        "recovery_s": max(ends) if ends else 0.0,
    }


# --------------------------------------------------------------------------- phases


def _server_env(settings: Settings) -> dict[str, str]:
    return {"FATHOM_BENCH_PACED_SECONDS": f"{settings.latency:g}"}


def measure_cluster(count: int, settings: Settings) -> dict[str, Any]:
    """Throughput then queue-to-start on a fresh `count`-replica cluster."""
    with cluster(count, jobs=settings.jobs, env=_server_env(settings)) as (_, replicas):
        urls = [r.url for r in replicas]
        try:
            figures = asyncio.run(throughput(urls, settings))
            figures |= asyncio.run(queue_to_start(urls, settings.starts))
        except Exception as error:
            logs = "\n".join(f"--- replica {r.name}\n{r.log()}" for r in replicas)
            raise RuntimeError(f"{count} replicas: {error}\n{logs}") from error
        figures["rss_mib"] = [round(r.rss_mib(), 1) for r in replicas]
    print(f"  {count} replica(s): {figures['runs_per_s']:.1f} runs/s, p50 "
          f"{figures['p50_ms']:.0f} ms, p95 {figures['p95_ms']:.0f} ms, queue-to-start p50 "
          f"{figures['queue_to_start_p50_ms']:.1f} ms", file=sys.stderr, flush=True)  # fmt: skip
    return {"replicas": count, **figures}


def measure_recovery(settings: Settings) -> dict[str, Any]:
    """Crash recovery on a fresh two-replica cluster."""
    with cluster(2, jobs=settings.jobs, lease_seconds=settings.lease_seconds,
                 env=_server_env(settings)) as (database, replicas):  # fmt: skip
        try:
            figures = asyncio.run(recovery(database, replicas, settings))
        except Exception as error:
            logs = "\n".join(f"--- replica {r.name}\n{r.log()}" for r in replicas)
            raise RuntimeError(f"recovery: {error}\n{logs}") from error
    print(f"  recovery: {figures['recovery_s']:.2f} s after the kill for "
          f"{figures['in_flight_at_kill']} in-flight runs ({figures['requeued']} re-queued), "
          f"lease {settings.lease_seconds:g} s", file=sys.stderr, flush=True)  # fmt: skip
    return figures


def run_all(settings: Settings) -> dict[str, Any]:
    """Every phase, one after the other; the figures as a dict."""
    one, three = measure_cluster(1, settings), measure_cluster(3, settings)
    return {
        "one_replica": one,
        "three_replicas": three,
        "throughput_ratio": three["runs_per_s"] / one["runs_per_s"],
        "recovery": measure_recovery(settings),
    }


# --------------------------------------------------------------------------- output


def table(results: dict[str, Any], settings: Settings) -> list[list[str]]:
    """The printed rows: metric, unit, 1 replica, 3 replicas, 3 ÷ 1."""
    one, three = results["one_replica"], results["three_replicas"]
    rows = []
    for key, metric, unit in (
        ("runs_per_s", f"throughput, {settings.clients} clients", "runs/s"),
        ("p50_ms", "create-to-done latency, p50", "ms"),
        ("p95_ms", "create-to-done latency, p95", "ms"),
        ("queue_to_start_p50_ms", "queue-to-start, p50 (goal ≤ 50)", "ms"),
        ("queue_to_start_p95_ms", "queue-to-start, p95", "ms"),
    ):
        rows.append([metric, unit, f"{one[key]:,.1f}", f"{three[key]:,.1f}",
                     f"{three[key] / one[key]:.2f}×"])  # fmt: skip
    recovery = results["recovery"]
    rows.append([f"crash recovery, lease {settings.lease_seconds:g} s", "s", "—",
                 f"{recovery['recovery_s']:.2f} (2 replicas)", "—"])  # fmt: skip
    return rows


def rows_from(results: dict[str, Any], settings: Settings) -> list[Row]:
    """`bench.py` rows (fathom's column only)."""
    note = (f"paced_agent at {settings.latency:g} s model latency, {settings.runs} runs, "
            f"{settings.clients} clients, jobs {settings.jobs} per replica")  # fmt: skip
    one, three, recovery = results["one_replica"], results["three_replicas"], results["recovery"]
    return [
        Row(SECTION, "throughput, 1 replica", "runs/s", one["runs_per_s"], None, "higher", note),
        Row(SECTION, "throughput, 3 replicas", "runs/s", three["runs_per_s"], None, "higher", note),
        Row(SECTION, "throughput, 3 ÷ 1 replicas", "×", results["throughput_ratio"], None,
            "higher", note),
        Row(SECTION, "latency p50, 3 replicas", "ms", three["p50_ms"], None, note=note),
        Row(SECTION, "latency p95, 3 replicas", "ms", three["p95_ms"], None, note=note),
        Row(SECTION, "queue-to-start p50, 3 replicas", "ms", three["queue_to_start_p50_ms"],
            None, note="stamp graph's node clock minus runs.create's return; goal ≤ 50 ms"),
        Row(SECTION, "crash recovery, 2 replicas", "s", recovery["recovery_s"], None,
            note=f"kill -9 → every in-flight run success; lease {settings.lease_seconds:g} s"),
    ]  # fmt: skip


def write_results(results: dict[str, Any], settings: Settings, seconds: float,
                  path: Path = RESULTS_PATH) -> Path:  # fmt: skip
    """The settings, machine and figures as JSON at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "settings": asdict(settings),
        "seconds": round(seconds, 1),
        "results": results,
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def collect(ref_python: Path = REF_PYTHON, settings: Settings | None = None) -> list[Row]:
    """`bench.py`'s entry point: every phase, `results/server_replicas.json`, the rows.

    `ref_python` is unused: nothing here has a reference implementation.
    """
    del ref_python
    settings = settings or Settings()
    started = time.perf_counter()
    results = run_all(settings)
    write_results(results, settings, time.perf_counter() - started)
    return rows_from(results, settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    defaults = Settings()
    for name, value in asdict(defaults).items():
        kind = positive_float if isinstance(value, float) else positive_int
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=value,
                            help=f"default: {value}")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="JSON results file")
    args = parser.parse_args(argv)
    settings = Settings(**{name: getattr(args, name) for name in asdict(defaults)})
    started = time.perf_counter()
    try:
        results = run_all(settings)
    except (RuntimeError, WrongReply, PostgresUnavailable, PostgresStartFailed) as error:
        print(str(error), file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    path = write_results(results, settings, seconds, args.out)
    print_table(
        f"fathom serve replicas on one PostgreSQL, paced_agent at {settings.latency:g} s per "
        f"model call, jobs {settings.jobs} per replica",
        ["metric", "unit", "1 replica", "3 replicas", "3 ÷ 1"],
        table(results, settings),
        f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())} on "
        f"{os.cpu_count()} cores",
    )
    print(f"wrote {path} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
