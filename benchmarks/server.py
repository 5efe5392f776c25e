"""Agent Protocol servers: `fathom serve` against `langgraph dev`, same graph, same client.

Both servers run as subprocesses, one after the other, each on a free loopback port and in a
fresh temporary copy of `benchmarks/server_deploy/` (so neither writes state into the
repository), serving the same scripted graph (`server_deploy/graphs.py:agent`: a fathom deep
agent whose scripted model echoes the user, one model call per run):

* `fathom serve --config langgraph.json --port P --jobs J` (its default storage: SQLite files
  under the copy's `.fathom/`, durable);
* "fathom (memory)": the same with `--database memory` (nothing survives a restart), which
  is `langgraph dev`'s trade-off, so this side compares like with like;
* `langgraph dev --no-browser --no-reload --port P --n-jobs-per-worker J --config
  langgraph.json` with `LANGGRAPH_CLI_NO_ANALYTICS=1` (langgraph-cli[inmem] 0.4.40 in its own
  environment, `benchmarks/.venv-langgraph-dev`, or the binary `FATHOM_LANGGRAPH_DEV` names;
  its in-memory runtime).

J is the same for both (default 10). The client is the real `langgraph_sdk` async client
over HTTP, in this process. On a machine with at least 2 cores every side runs pinned the same
way: the server's process tree on all cores but the last, this process (the load generator)
on the last, as a load generator on its own machine would be, so the client's CPU does not
come out of the server's; `--no-pin` lets the system place both. Per server:

1. warm-up: `--warmup` runs, not measured;
2. create-to-done latency: `--sequential` runs one after another, each `threads.create` then
   `runs.wait` (a new thread per run), p50 and p99;
3. throughput: `--concurrent` runs of the same kind shared by `--clients` concurrent clients
   (each its own `get_client`, hence its own connection pool, and a new thread per run);
   runs per second over the whole batch's wall time, and the server's CPU per run in that
   batch (user + system seconds over its process tree, from `/proc`): throughput depends on
   what else the machine runs, the CPU a run costs the server much less; next to it the
   client's CPU per run (this process's) and the whole machine's (`/proc/stat`), which show
   how much of the machine the load generator and everything else took (`other_cores`: the
   cores that neither server nor client used, on average over the batch);
4. time to the first SSE event: `--streams` runs, one after another, each `threads.create`
   then `runs.stream(stream_mode="values")`, from the call to the first event (`metadata`),
   p50 (the stream is read to its end before the next one);
5. server RSS: the sum of `VmRSS` over the server's process tree, after the load.

Every run's reply is checked (`echo: <the text sent>`); a wrong or missing reply fails the
benchmark. The driver prints a table per fathom side with fathom / langgraph dev for each figure and
writes `benchmarks/results/server.json`. `collect()` gives `bench.py` its rows, with langgraph dev's
figures in the reference column.

    .venv/bin/python benchmarks/server.py [--sequential 200] [--concurrent 400] [--clients 32]
        [--no-pin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import REF_PYTHON, REPO_ROOT, Row, positive_int, print_table

SECTION = "Agent Protocol server (reference column: langgraph dev)"
DEPLOY_DIR = Path(__file__).resolve().parent / "server_deploy"
RESULTS_PATH = Path(__file__).resolve().parent / "results" / "server.json"
LANGGRAPH_DEV_VENV = REPO_ROOT / "benchmarks" / ".venv-langgraph-dev"
GRAPH = "agent"
FATHOM_MEMORY = "fathom (memory)"
KINDS = ("fathom", FATHOM_MEMORY, "langgraph dev")
FATHOM_SIDES = {"fathom": "SQLite (durable)", FATHOM_MEMORY: "memory (not durable)"}
"""Each fathom side and the storage it runs on."""
START_DEADLINE_S = 120.0
"""Bounds a hang while a server starts; a healthy one answers `/ok` within seconds."""


@dataclass(frozen=True)
class Settings:
    """How much work each server gets."""

    warmup: int = 20
    sequential: int = 200
    concurrent: int = 400
    clients: int = 32
    streams: int = 50
    jobs: int = 10


# --------------------------------------------------------------------------- servers


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fathom_binary() -> Path:
    """`fathom` next to this interpreter (`.venv/bin/fathom` under `make bench`)."""
    return Path(sys.executable).parent / "fathom"


def langgraph_dev_binary() -> Path | None:
    """The `langgraph` CLI to run `langgraph dev` with, or `None` when none is installed."""
    override = os.environ.get("FATHOM_LANGGRAPH_DEV")
    if override:
        return Path(override)
    candidate = LANGGRAPH_DEV_VENV / "bin" / "langgraph"
    return candidate if candidate.exists() else None


def server_command(kind: str, config: Path, port: int, jobs: int) -> list[str]:
    """The command line that starts `kind` on `port` with `jobs` run slots."""
    if kind in FATHOM_SIDES:
        storage = ["--database", "memory"] if kind == FATHOM_MEMORY else []
        return [str(fathom_binary()), "serve", "--config", str(config), "--port", str(port),
                *storage, "--jobs", str(jobs)]  # fmt: skip
    binary = langgraph_dev_binary()
    if binary is None:
        raise RuntimeError("no langgraph dev: create benchmarks/.venv-langgraph-dev "
                           "(`make test` does) or set FATHOM_LANGGRAPH_DEV")  # fmt: skip
    return [str(binary), "dev", "--no-browser", "--no-reload", "--port", str(port),
            "--n-jobs-per-worker", str(jobs), "--config", str(config)]  # fmt: skip


def _tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants now (Linux `/proc`)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def tree_rss_mib(pid: int) -> float:
    """The sum of `VmRSS` over `pid` and all its descendants, in MiB (Linux `/proc`)."""
    total_kib = 0
    for current in _tree_pids(pid):
        with contextlib.suppress(OSError, StopIteration, ValueError):
            with open(f"/proc/{current}/status", encoding="utf-8") as handle:
                line = next(line for line in handle if line.startswith("VmRSS:"))
            total_kib += int(line.split()[1])
    return total_kib / 1024


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, with exited children's) used so far by `pid` and all its
    descendants (Linux `/proc`). Unlike throughput, the CPU a server spends per run does not
    depend on what else the machine runs."""
    ticks = 0
    for current in _tree_pids(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has been busy so far, all cores (user, nice, system, irq,
    softirq and steal from `/proc/stat`): next to the server's and the client's own CPU it
    shows how much the rest of the machine took during a measurement."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return 0.0


@dataclass(frozen=True)
class Pinning:
    """Which cores the server's process tree and the load generator (this process) get: a
    load generator on its own cores, as on its own machine, so the client's CPU (about a
    third of a server's per run) does not come out of the server's."""

    server: tuple[int, ...]
    client: tuple[int, ...]


def plan_pinning(available: Iterable[int], enabled: bool = True) -> Pinning | None:
    """The split of `available` cores: the client gets the last one (it is one asyncio loop,
    so it can use one core at most), the server every other; `None` when pinning is off or
    there are fewer than 2 cores to split."""
    cores = sorted(set(available))
    if not enabled or len(cores) < 2:
        return None
    return Pinning(server=tuple(cores[:-1]), client=(cores[-1],))


def _threads(pid: int) -> list[int]:
    """The thread ids of process `pid` now (`/proc/<pid>/task`); none once it has exited."""
    with contextlib.suppress(OSError):
        return [int(entry.name) for entry in Path(f"/proc/{pid}/task").iterdir()]
    return []


def pin_tree(pid: int, cores: Iterable[int]) -> None:
    """Restrict every thread of `pid` and of all its descendants to `cores`. Threads and
    processes they start later inherit the set."""
    wanted = set(cores)
    for process in _tree_pids(pid):
        for thread in _threads(process):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(thread, wanted)


def tree_cores(pid: int) -> list[int]:
    """The cores any thread of `pid` or of its descendants may run on now."""
    cores: set[int] = set()
    for process in _tree_pids(pid):
        for thread in _threads(process):
            with contextlib.suppress(OSError):
                cores |= os.sched_getaffinity(thread)
    return sorted(cores)


@contextlib.contextmanager
def pinned_self(cores: Iterable[int] | None) -> Iterator[None]:
    """Every thread of this process on `cores` while the block runs, then back to the set it
    had; nothing changes when `cores` is `None`."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    for thread in _threads(os.getpid()):
        os.sched_setaffinity(thread, set(cores))
    try:
        yield
    finally:
        for thread in _threads(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(thread, before)


@dataclass
class Server:
    """One server in a subprocess, serving a temporary copy of the deployment folder."""

    kind: str
    jobs: int
    workdir: Path
    cores: tuple[int, ...] | None = None
    """The cores its process tree runs on, or `None` for wherever the system puts it."""
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go."""
        return self.workdir / "server.log"

    def command(self) -> list[str]:
        """This server's command line."""
        return server_command(self.kind, self.workdir / "langgraph.json", self.port, self.jobs)

    def start(self) -> float:
        """Start the server, wait for `/ok`; return the seconds that took.

        Raises:
            RuntimeError: If it exits or does not answer within `START_DEADLINE_S`.
        """
        import httpx

        env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONUNBUFFERED": "1"}
        started = time.perf_counter()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        if self.cores is not None:  # before the server has started any thread or process
            pin_tree(self.process.pid, self.cores)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.process.returncode}:\n"
                                   f"{self.log()}")  # fmt: skip
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    if self.cores is not None:  # and anything that slipped past the first
                        pin_tree(self.process.pid, self.cores)
                    return time.perf_counter() - started
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} did not answer /ok in {START_DEADLINE_S} s:\n{self.log()}")

    def rss_mib(self) -> float:
        """The server process tree's resident memory now."""
        assert self.process is not None
        return tree_rss_mib(self.process.pid)

    def stop(self) -> None:
        """SIGTERM to the server's process group, then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)

    def log(self, tail: int = 3000) -> str:
        """The end of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "<no log>"


# --------------------------------------------------------------------------- client side


class WrongReply(RuntimeError):
    """A run ended without the scripted reply to what it was sent."""


def _check_reply(values: Any, text: str) -> None:
    messages = values.get("messages") if isinstance(values, dict) else None
    last = messages[-1] if messages else None
    content = last.get("content") if isinstance(last, dict) else None
    if content != f"echo: {text}":
        raise WrongReply(f"run for {text!r} ended with {str(values)[:300]}")


async def create_and_wait(client: Any, text: str) -> float:
    """`threads.create` + `runs.wait` for one message; seconds from the first call to done."""
    started = time.perf_counter()
    thread = await client.threads.create()
    values = await client.runs.wait(
        thread["thread_id"], GRAPH, input={"messages": [{"role": "user", "content": text}]}
    )
    elapsed = time.perf_counter() - started
    _check_reply(values, text)
    return elapsed


async def first_event(client: Any, text: str) -> tuple[float, float]:
    """On a new thread, `runs.stream(stream_mode="values")`: seconds to the first event, and
    to the end of the stream (read whole)."""
    thread = await client.threads.create()
    started = time.perf_counter()
    first: float | None = None
    last_values: Any = None
    async for part in client.runs.stream(
        thread["thread_id"], GRAPH, input={"messages": [{"role": "user", "content": text}]},
        stream_mode="values",
    ):  # fmt: skip
        if first is None:
            first = time.perf_counter() - started
        if part.event == "values":
            last_values = part.data
        elif part.event == "error":
            raise WrongReply(f"stream for {text!r} failed: {part.data}")
    total = time.perf_counter() - started
    if first is None:
        raise WrongReply(f"stream for {text!r} had no event")
    _check_reply(last_values, text)
    return first, total


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile (nearest rank) of at least one value."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


async def measure(
    url: str, settings: Settings, cpu_s: Callable[[], float] = lambda: 0.0
) -> dict[str, Any]:
    """The client-side figures for the server at `url` (see the module docstring), and the
    server's CPU per run of the concurrent batch, from `cpu_s` (its CPU seconds so far)."""
    from langgraph_sdk import get_client

    client = get_client(url=url)
    for index in range(settings.warmup):
        await create_and_wait(client, f"warm {index}")
    latencies = [await create_and_wait(client, f"seq {i}") for i in range(settings.sequential)]

    clients = [get_client(url=url) for _ in range(settings.clients)]
    remaining = iter(range(settings.concurrent))

    async def worker(own: Any) -> int:
        done = 0
        for index in remaining:  # a shared iterator: each run goes to one client
            await create_and_wait(own, f"con {index}")
            done += 1
        return done

    machine_before, client_before = machine_cpu_s(), time.process_time()
    cpu_before, started = cpu_s(), time.perf_counter()
    done = await asyncio.gather(*(worker(own) for own in clients))
    concurrent_s = time.perf_counter() - started
    client_cpu_s = time.process_time() - client_before
    machine_busy_s = machine_cpu_s() - machine_before
    server_cpu_s = cpu_s() - cpu_before
    if sum(done) != settings.concurrent:
        raise WrongReply(f"{sum(done)} of {settings.concurrent} concurrent runs finished")

    streams = [await first_event(client, f"stream {i}") for i in range(settings.streams)]
    for own in (client, *clients):
        await own.aclose()
    return {
        "latency_ms": [round(s * 1000, 3) for s in latencies],
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "concurrent_s": concurrent_s,
        "runs_per_s": settings.concurrent / concurrent_s,
        "cpu_ms_per_run": server_cpu_s / settings.concurrent * 1000,
        "client_cpu_ms_per_run": client_cpu_s / settings.concurrent * 1000,
        "machine_cpu_ms_per_run": machine_busy_s / settings.concurrent * 1000,
        "other_cores": max(0.0, machine_busy_s - server_cpu_s - client_cpu_s) / concurrent_s,
        "first_event_ms": [round(first * 1000, 3) for first, _ in streams],
        "first_event_p50_ms": statistics.median(first for first, _ in streams) * 1000,
        "stream_total_p50_ms": statistics.median(total for _, total in streams) * 1000,
    }


def _langgraph_dev_versions() -> dict[str, str] | None:
    binary = langgraph_dev_binary()
    python = None if binary is None else binary.parent / "python"
    if python is None or not python.exists():
        return None
    code = (
        "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
        "('langgraph-cli', 'langgraph-api', 'langgraph-runtime-inmem', 'langgraph')}))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def run_side(kind: str, settings: Settings, pinning: Pinning | None = None) -> dict[str, Any]:
    """Start `kind` (on `pinning.server`'s cores), measure it from this process (on
    `pinning.client`'s), read its RSS, stop it; the figures as a dict, with the cores each
    actually had (`server_cores`, `client_cores`)."""
    with tempfile.TemporaryDirectory(prefix="fathom-bench-server-") as tmp:
        workdir = Path(tmp) / "deploy"
        shutil.copytree(DEPLOY_DIR, workdir, ignore=shutil.ignore_patterns("__pycache__"))
        server = Server(kind, settings.jobs, workdir, None if pinning is None else pinning.server)
        start_s = server.start()
        try:
            idle_rss = server.rss_mib()
            pid = server.process.pid if server.process is not None else 0
            with pinned_self(None if pinning is None else pinning.client):
                client_cores = sorted(os.sched_getaffinity(0))
                figures = asyncio.run(measure(server.url, settings, lambda: tree_cpu_s(pid)))
            figures["server_cores"], figures["client_cores"] = tree_cores(pid), client_cores
            figures["rss_mib"] = server.rss_mib()
        except Exception as error:
            raise RuntimeError(f"{kind}: {error}\nserver log:\n{server.log()}") from error
        finally:
            server.stop()
    row = {"kind": kind, "command": server.command(), "jobs": settings.jobs,
           "start_s": start_s, "idle_rss_mib": idle_rss, **figures}  # fmt: skip
    print(
        f"  {kind:<15} p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
        f"{row['runs_per_s']:.1f} runs/s ({settings.clients} clients) at "
        f"{row['cpu_ms_per_run']:.1f} ms server CPU a run "
        f"({row['client_cpu_ms_per_run']:.1f} ms client CPU, "
        f"{row['machine_cpu_ms_per_run']:.1f} ms machine CPU: others had "
        f"{row['other_cores']:.2f} cores), first SSE event "
        f"{row['first_event_p50_ms']:.1f} ms, RSS {row['rss_mib']:.0f} MiB "
        f"(idle {idle_rss:.0f}), started in {start_s:.1f} s; "
        f"{describe_cores(row['server_cores'], row['client_cores'])}",
        file=sys.stderr, flush=True,
    )  # fmt: skip
    return row


def describe_cores(server: Sequence[int], client: Sequence[int]) -> str:
    """Which cores the server and the client ran on, in words."""
    return f"server on cores {_cores(server)}, client on {_cores(client)}"


def _cores(cores: Sequence[int]) -> str:
    return ",".join(str(core) for core in cores)


def run_all(
    settings: Settings, kinds: Sequence[str] = KINDS, pinning: Pinning | None = None
) -> dict[str, dict[str, Any]]:
    """Each available server in turn (never both at once), all under the same `pinning`.
    langgraph dev is skipped, with a note, when it is not installed."""
    results: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        if kind == "langgraph dev" and langgraph_dev_binary() is None:
            print("langgraph dev not found (benchmarks/.venv-langgraph-dev, or set "
                  "FATHOM_LANGGRAPH_DEV); measuring fathom only", file=sys.stderr)  # fmt: skip
            continue
        results[kind] = run_side(kind, settings, pinning)
    return results


# --------------------------------------------------------------------------- tables


METRICS: tuple[tuple[str, str, str, str], ...] = (
    # (key, metric, unit, better)
    ("p50_ms", "create-to-done latency, p50", "ms", "lower"),
    ("p99_ms", "create-to-done latency, p99", "ms", "lower"),
    ("runs_per_s", "throughput, {clients} concurrent clients", "runs/s", "higher"),
    ("cpu_ms_per_run", "server CPU per run, {clients} concurrent clients", "ms", "lower"),
    ("first_event_p50_ms", "time to first SSE event, p50", "ms", "lower"),
    ("rss_mib", "server RSS after the load", "MiB", "lower"),
)
GOALS = {"runs_per_s": (">=", 2.0), "p50_ms": ("<=", 0.5)}
"""The server's goal, as fathom / langgraph dev: at least 2× the throughput, at most half the
p50 latency."""


def rows_from(results: dict[str, dict[str, Any]], settings: Settings) -> list[Row]:
    """`bench.py` rows: each fathom side measured, and langgraph dev in the reference column.

    The durable SQLite side's rows come first, under the plain metric names; the memory
    side's rows (when measured) follow, their metric names ending in `(fathom on memory)`.
    """
    ref = results.get("langgraph dev")
    rows: list[Row] = []
    for kind in FATHOM_SIDES:
        fathom = results.get(kind)
        if kind != "fathom" and fathom is None:
            continue
        note = (f"same scripted deep agent; {settings.sequential} sequential runs, "
                f"{settings.concurrent} concurrent, {settings.streams} streams; jobs "
                f"{settings.jobs} both; reference column: langgraph dev (in-memory), fathom on "
                f"{FATHOM_SIDES[kind]}")  # fmt: skip
        if ref is None:
            note += "; langgraph dev not installed"
        suffix = "" if kind == "fathom" else " (fathom on memory)"
        rows += [
            Row(SECTION, metric.format(clients=settings.clients) + suffix, unit,
                None if fathom is None else fathom[key], None if ref is None else ref[key],
                better="higher" if better == "higher" else "lower", note=note)
            for key, metric, unit, better in METRICS
        ]  # fmt: skip
    return rows


def table(
    results: dict[str, dict[str, Any]], settings: Settings, kind: str = "fathom"
) -> list[list[str]]:
    """The printed rows for the fathom side `kind`: metric, unit, both sides,
    fathom / langgraph dev, goal."""
    fathom, ref = results.get(kind), results.get("langgraph dev")
    printed = []
    for key, metric, unit, _ in METRICS:
        mine = None if fathom is None else fathom[key]
        theirs = None if ref is None else ref[key]
        ratio = None if mine is None or not theirs else mine / theirs
        goal = "—"
        if key in GOALS and ratio is not None:
            op, bound = GOALS[key]
            met = ratio >= bound if op == ">=" else ratio <= bound
            goal = f"{op} {bound:g}×: {'met' if met else 'missed'}"
        printed.append([metric.format(clients=settings.clients), unit,
                        "—" if mine is None else f"{mine:,.1f}",
                        "—" if theirs is None else f"{theirs:,.1f}",
                        "—" if ratio is None else f"{ratio:.2f}×", goal])  # fmt: skip
    return printed


def _ratios(results: dict[str, dict[str, Any]], kind: str) -> dict[str, float]:
    if kind not in results or "langgraph dev" not in results:
        return {}
    return {key: results[kind][key] / results["langgraph dev"][key] for key, *_ in METRICS}


def pinning_json(pinning: Pinning | None) -> dict[str, list[int]] | None:
    """The planned split as JSON (`None`: not pinned)."""
    return None if pinning is None else {"server": list(pinning.server),
                                         "client": list(pinning.client)}  # fmt: skip


def write_results(
    results: dict[str, dict[str, Any]],
    settings: Settings,
    seconds: float,
    path: Path = RESULTS_PATH,
    pinning: Pinning | None = None,
) -> Path:
    """The settings, versions, load average, the cores split and per-server figures as JSON
    at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "pinning": pinning_json(pinning),
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "langgraph_dev": _langgraph_dev_versions(),
        "settings": settings.__dict__,
        "seconds": round(seconds, 1),
        "results": results,
        "fathom_over_langgraph_dev": _ratios(results, "fathom"),
        "fathom_memory_over_langgraph_dev": _ratios(results, FATHOM_MEMORY),
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def collect(ref_python: Path = REF_PYTHON, settings: Settings | None = None) -> list[Row]:
    """`bench.py`'s entry point: run both servers, write `results/server.json`, return rows.

    `ref_python` is unused: the reference here is `langgraph dev`, found by
    `langgraph_dev_binary()`.
    """
    del ref_python
    settings = settings or Settings()
    pinning = plan_pinning(os.sched_getaffinity(0))
    started = time.perf_counter()
    results = run_all(settings, pinning=pinning)
    write_results(results, settings, time.perf_counter() - started, pinning=pinning)
    return rows_from(results, settings)


def pinning_words(pinning: Pinning | None) -> str:
    """The table footer's note on where the server and the client ran."""
    if pinning is None:
        return "not pinned: the system placed the server and the client"
    return f"every side pinned: {describe_cores(pinning.server, pinning.client)}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: the `Settings` fields, `--only`, `--out` and `--no-pin`."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    defaults = Settings()
    for name in ("warmup", "sequential", "concurrent", "clients", "streams", "jobs"):
        parser.add_argument(f"--{name}", type=positive_int, default=getattr(defaults, name),
                            help=f"default: {getattr(defaults, name)}")  # fmt: skip
    parser.add_argument("--only", choices=KINDS, help="measure one server")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="JSON results file")
    parser.add_argument(
        "--no-pin", dest="pin", action="store_false",
        help="let the system place the server and the client (default: the server on all "
        "cores but the last, the client on the last)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    args = parse_args(argv)
    settings = Settings(args.warmup, args.sequential, args.concurrent, args.clients,
                        args.streams, args.jobs)  # fmt: skip
    pinning = plan_pinning(os.sched_getaffinity(0), enabled=args.pin)
    started = time.perf_counter()
    try:
        results = run_all(settings, [args.only] if args.only else KINDS, pinning)
    except (RuntimeError, WrongReply) as error:
        print(str(error), file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    path = write_results(results, settings, seconds, args.out, pinning)
    for kind, storage in FATHOM_SIDES.items():
        if kind not in results:
            continue
        print_table(
            f"fathom serve on {storage} vs langgraph dev, same scripted graph, jobs "
            f"{settings.jobs} each",
            ["metric", "unit", kind, "langgraph dev", f"{kind} / langgraph dev", "goal"],
            table(results, settings, kind),
            f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())} on "
            f"{os.cpu_count()} cores; {pinning_words(pinning)}",
        )
    print(f"wrote {path} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
