"""Soak: mixed runs on PostgreSQL replicas while one is SIGKILLed and restarted, over and over.

Not part of `make test` or `make bench`: it runs for `--minutes` (30 by default). Setup: a
throwaway PostgreSQL (`fathom.testing.postgres.throwaway_postgres`) and `--replicas` (3)
`fathom serve --database postgresql://... --lease-seconds S` processes serving
`benchmarks/replicas_deploy/`. The load, through the real `langgraph_sdk` client:

* `--threads` (12) drivers run at once. Each owns one thread at a time, on one graph, cycling
  over `slow_agent` (1 s model), `paced_agent` (0.2 s), `agent` (no latency) and `nested` (a
  subgraph, no model); after `--turns-per-thread` (20) turns it moves on to a new thread, so
  no history grows long enough to be summarized. A driver queues one to three turns at once
  with `multitask_strategy="enqueue"` (so turns wait behind running ones), each through a
  random live replica, then joins them (through any live replica, retrying another when the
  one it asked dies), and starts again.
* Every `--kill-every` (60) seconds one replica gets SIGKILL on its whole process group and is
  started again at once; the kills rotate over every replica but the first, which is never
  killed, so its memory can be followed over the whole soak. Before a kill the replica is
  taken out of the drivers' choice, but requests already sent to it fail with it.

At the end (load stopped, every run joined) every thread's messages are checked against the
turns its driver had acknowledged (a `runs.create` that returned a run id): each turn must be
there exactly once with exactly its scripted replies (`echo: <text>`, or `parent: <text>`
and `child: <text>`), in the order they were queued. A `runs.create` that failed (its
replica died under it) may or may not have made its run; such a turn is "unconfirmed" and may
appear at most once. Reported: lost turns, duplicated turns (both must be 0), out-of-order
threads, runs that did not end `success` (with their statuses), and the replicas' RSS
(sum of `VmRSS` over each process tree) sampled every `--rss-every` seconds: first and last
sample of the never-killed replica, and of each incarnation of the others. Exit status 1 on
any lost, duplicated or out-of-order turn or a run that hangs; the figures go to
`benchmarks/results/soak.json` (or `--out`).

    .venv/bin/python benchmarks/soak.py --minutes 3 --kill-every 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _harness import positive_float, positive_int
from server_replicas import Replica, cluster

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "soak.json"
GRAPHS = ("slow_agent", "paced_agent", "agent", "nested")
JOIN_DEADLINE_S = 300.0
"""A run not ended this long after its driver starts joining it counts as a hang."""
RETRY_PAUSE_S = 0.2
"""Pause before asking another replica when one did not answer."""


@dataclass(frozen=True)
class Settings:
    """The soak's shape."""

    minutes: float = 30.0
    kill_every: float = 60.0
    replicas: int = 3
    threads: int = 12
    turns_per_thread: int = 20
    lease_seconds: float = 3.0
    rss_every: float = 10.0
    jobs: int = 10
    random_seed: int = 1


def replies(graph: str, text: str) -> list[str]:
    """The messages one turn of `graph` must add to its thread: the turn, then its answers."""
    if graph == "nested":
        return [text, f"parent: {text}", f"child: {text}"]
    return [text, f"echo: {text}"]


@dataclass
class Turn:
    """One queued turn: its text, its run id (None when `runs.create` failed), its status."""

    text: str
    run_id: str | None
    status: str = "unknown"


@dataclass
class ThreadLog:
    """What a driver did on one thread."""

    thread_id: str
    graph: str
    turns: list[Turn] = field(default_factory=list)


class Pool:
    """The replicas, which of them take requests now, and a client per replica."""

    def __init__(self, replicas: Sequence[Replica]) -> None:
        from langgraph_sdk import get_client

        self.replicas = list(replicas)
        self.up = set(range(len(replicas)))
        self.clients = [get_client(url=r.url, api_key=None) for r in replicas]
        self.errors: Counter[str] = Counter()

    def pick(self, rng: random.Random) -> Any:
        """A client of a random replica that takes requests now."""
        return self.clients[rng.choice(sorted(self.up) or [0])]

    async def call(self, rng: random.Random, action: Any) -> Any:
        """`action(client)` on live replicas until one answers; `TimeoutError` after
        `JOIN_DEADLINE_S` (a hang)."""
        return await asyncio.wait_for(self._retry(rng, action), JOIN_DEADLINE_S)

    async def _retry(self, rng: random.Random, action: Any) -> Any:
        while True:
            try:
                return await action(self.pick(rng))
            except Exception as error:  # a replica died under the call, or is restarting
                self.errors[type(error).__name__] += 1
                await asyncio.sleep(RETRY_PAUSE_S)

    async def close(self) -> None:
        """Close every client."""
        for client in self.clients:
            await client.aclose()


class Soak:
    """The drivers, the killer and the RSS sampler, sharing one pool and one deadline."""

    def __init__(self, pool: Pool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.deadline = time.monotonic() + settings.minutes * 60
        self.threads: list[ThreadLog] = []
        self.hangs: list[str] = []
        self.kills: list[dict[str, Any]] = []
        self.rss: dict[str, list[tuple[float, float]]] = {}
        self.started = time.monotonic()

    async def _create(self, rng: random.Random, log: ThreadLog, text: str) -> None:
        body = {"messages": [{"role": "user", "content": text}]}
        try:
            run = await self.pool.pick(rng).runs.create(
                log.thread_id, log.graph, input=body, multitask_strategy="enqueue"
            )
        except Exception as error:  # the replica died under the call: the run may exist
            self.pool.errors[f"create: {type(error).__name__}"] += 1
            log.turns.append(Turn(text, None))
            return
        log.turns.append(Turn(text, run["run_id"]))

    async def _join(self, rng: random.Random, log: ThreadLog, turn: Turn) -> None:
        assert turn.run_id is not None
        run_id = turn.run_id

        async def ended(client: Any) -> str:
            await client.runs.join(log.thread_id, run_id)
            return str((await client.runs.get(log.thread_id, run_id))["status"])

        try:
            turn.status = await self.pool.call(rng, ended)
        except TimeoutError:
            turn.status = "hang"
            self.hangs.append(f"thread {log.thread_id} run {run_id} ({log.graph})")

    async def drive(self, index: int) -> None:
        """One driver: threads on graph `GRAPHS[index % 4]`, batches of 1–3 turns."""
        rng = random.Random(self.settings.random_seed * 1000 + index)
        graph = GRAPHS[index % len(GRAPHS)]
        while time.monotonic() < self.deadline:
            thread = await self.pool.call(rng, lambda client: client.threads.create())
            log = ThreadLog(thread["thread_id"], graph)
            self.threads.append(log)
            while len(log.turns) < self.settings.turns_per_thread:
                if time.monotonic() >= self.deadline:
                    break
                batch = min(rng.randint(1, 3), self.settings.turns_per_thread - len(log.turns))
                first = len(log.turns)
                for _ in range(batch):
                    await self._create(rng, log, f"d{index} {log.thread_id[:8]} #{len(log.turns)}")
                for turn in log.turns[first:]:
                    if turn.run_id is not None:
                        await self._join(rng, log, turn)

    async def kill_loop(self) -> None:
        """Every `kill_every` seconds, SIGKILL one replica (never the first) and restart it."""
        victims = list(range(1, len(self.pool.replicas))) or [0]
        count = 0
        while True:
            count += 1
            due = self.started + count * self.settings.kill_every  # on a fixed schedule
            if due >= self.deadline:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            index = victims[(count - 1) % len(victims)]
            replica = self.pool.replicas[index]
            self.pool.up.discard(index)
            killed_at = time.monotonic() - self.started
            await asyncio.to_thread(replica.kill)
            restart_s = await asyncio.to_thread(replica.start)
            self.pool.up.add(index)
            self.kills.append({"replica": index, "at_s": round(killed_at, 1),
                               "restart_s": round(restart_s, 2)})  # fmt: skip
            print(f"  {killed_at:6.0f} s: killed replica {index}, back in {restart_s:.1f} s",
                  file=sys.stderr, flush=True)  # fmt: skip

    async def sample_loop(self) -> None:
        """Every `rss_every` seconds, each replica's RSS, keyed by replica and incarnation."""
        while time.monotonic() < self.deadline:
            await asyncio.sleep(self.settings.rss_every)
            now = time.monotonic() - self.started
            for index, replica in enumerate(self.pool.replicas):
                if index in self.pool.up and replica.process is not None:  # not restarting
                    key = f"replica {index} pid {replica.process.pid}"
                    self.rss.setdefault(key, []).append(
                        (round(now, 1), round(replica.rss_mib(), 1))
                    )

    async def run(self) -> None:
        """Drivers, killer and sampler until the deadline; the drivers finish their joins."""
        killer = asyncio.create_task(self.kill_loop())
        sampler = asyncio.create_task(self.sample_loop())
        await asyncio.gather(*(self.drive(i) for i in range(self.settings.threads)))
        await killer
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler


# --------------------------------------------------------------------------- the check


@dataclass
class Verdict:
    """What the final check found."""

    turns: int = 0
    unconfirmed: int = 0
    unconfirmed_present: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    not_success: dict[str, int] = field(default_factory=dict)
    not_success_runs: list[str] = field(default_factory=list)
    busy_threads: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No lost, duplicated or reordered turn."""
        return not (self.lost or self.duplicated or self.out_of_order)


def check_thread(log: ThreadLog, messages: list[str], verdict: Verdict) -> None:
    """Each acknowledged turn exactly once with its replies; an unconfirmed one either absent
    or exactly once; and the whole thread exactly those turns in the order they were queued."""
    counts = Counter(messages)
    expected: list[str] = []
    clean = True
    for turn in log.turns:
        wanted = replies(log.graph, turn.text)
        found = [counts[text] for text in wanted]
        if turn.run_id is None:
            verdict.unconfirmed += 1
            if not any(found):
                continue  # its create never reached the queue
            verdict.unconfirmed_present += 1
        else:
            verdict.turns += 1
        expected += wanted
        label = f"thread {log.thread_id} run {turn.run_id} {turn.text!r}: counts {found}"
        if min(found) == 0:
            verdict.lost.append(label)
            clean = False
        if max(found) > 1:
            verdict.duplicated.append(label)
            clean = False
    if clean and messages != expected:
        verdict.out_of_order.append(f"thread {log.thread_id}: {messages}")


async def check(soak: Soak) -> Verdict:
    """Read every thread's state and records through live replicas; the verdict."""
    verdict = Verdict()
    rng = random.Random(0)
    for log in soak.threads:
        state = await soak.pool.call(rng, lambda c, t=log.thread_id: c.threads.get_state(t))
        messages = [str(m["content"]) for m in (state.get("values") or {}).get("messages", [])]
        check_thread(log, messages, verdict)
        thread = await soak.pool.call(rng, lambda c, t=log.thread_id: c.threads.get(t))
        if thread["status"] == "busy":
            verdict.busy_threads.append(log.thread_id)
        for turn in log.turns:
            if turn.run_id is not None and turn.status != "success":
                verdict.not_success[turn.status] = verdict.not_success.get(turn.status, 0) + 1
                verdict.not_success_runs.append(f"{log.thread_id}/{turn.run_id} {turn.status}")
    return verdict


# --------------------------------------------------------------------------- output


def rss_summary(samples: dict[str, list[tuple[float, float]]]) -> list[dict[str, Any]]:
    """First, middle and last sample of each replica incarnation with at least two."""
    rows = []
    for key, series in samples.items():
        if len(series) >= 2:
            (t0, first), (tm, middle), (t1, last) = series[0], series[len(series) // 2], series[-1]
            rows.append({"replica": key, "first_s": t0, "first_mib": first, "middle_s": tm,
                         "middle_mib": middle, "last_s": t1, "last_mib": last,
                         "samples": len(series)})  # fmt: skip
    return rows


def report(soak: Soak, verdict: Verdict, seconds: float) -> dict[str, Any]:
    """The soak's figures as JSON-ready data."""
    runs = sum(1 for log in soak.threads for turn in log.turns if turn.run_id)
    return {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "settings": asdict(soak.settings),
        "seconds": round(seconds, 1),
        "threads": len(soak.threads),
        "runs": runs,
        "acknowledged_turns": verdict.turns,
        "unconfirmed_turns": verdict.unconfirmed,
        "unconfirmed_present": verdict.unconfirmed_present,
        "lost_turns": verdict.lost,
        "duplicated_turns": verdict.duplicated,
        "out_of_order_threads": verdict.out_of_order,
        "not_success": verdict.not_success,
        "not_success_runs": verdict.not_success_runs[:50],
        "busy_threads_at_end": verdict.busy_threads,
        "hangs": soak.hangs,
        "kills": soak.kills,
        "client_errors": dict(soak.pool.errors),
        "rss": rss_summary(soak.rss),
        "rss_samples": soak.rss,
    }


def print_report(data: dict[str, Any]) -> None:
    """A short human summary of `data`."""
    print(f"soak: {data['seconds']:.0f} s, {len(data['kills'])} kills, {data['threads']} "
          f"threads, {data['runs']} runs; {data['unconfirmed_turns']} creates failed under a "
          f"kill ({data['unconfirmed_present']} of them made their run)")  # fmt: skip
    print(f"  lost turns {len(data['lost_turns'])}, duplicated turns "
          f"{len(data['duplicated_turns'])}, out-of-order threads "
          f"{len(data['out_of_order_threads'])}, hangs {len(data['hangs'])}")  # fmt: skip
    print(f"  runs not success: {data['not_success'] or 0}; busy threads at the end: "
          f"{len(data['busy_threads_at_end'])}")  # fmt: skip
    print(f"  client calls that failed under a kill (joins and reads retried elsewhere, "
          f"creates left unconfirmed): {data['client_errors'] or 0}")  # fmt: skip
    for row in data["rss"]:
        print(f"  RSS {row['replica']}: {row['first_mib']:.0f} MiB at {row['first_s']:.0f} s, "
              f"{row['middle_mib']:.0f} at {row['middle_s']:.0f} s, {row['last_mib']:.0f} at "
              f"{row['last_s']:.0f} s ({row['samples']} samples)")  # fmt: skip
    problems = data["lost_turns"] + data["duplicated_turns"] + data["out_of_order_threads"]
    for label in problems[:20]:
        print(f"  ! {label}")


async def soak_on(replicas: Sequence[Replica], settings: Settings) -> tuple[Soak, Verdict]:
    """The soak and its check on started replicas."""
    pool = Pool(replicas)
    try:
        soak = Soak(pool, settings)
        await soak.run()
        return soak, await check(soak)
    finally:
        await pool.close()


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
    with cluster(settings.replicas, jobs=settings.jobs,
                 lease_seconds=settings.lease_seconds) as (_, replicas):  # fmt: skip
        soak, verdict = asyncio.run(soak_on(replicas, settings))
        if not verdict.ok or soak.hangs:
            for replica in replicas:
                print(f"--- replica {replica.name} log\n{replica.log(6000)}", file=sys.stderr)
    data = report(soak, verdict, time.perf_counter() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print_report(data)
    print(f"wrote {args.out}")
    return 0 if verdict.ok and not soak.hangs else 1


if __name__ == "__main__":
    sys.exit(main())
