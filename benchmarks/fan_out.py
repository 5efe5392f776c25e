"""Fan-out scale: N subagents started at once (N = 4, 16, 64), fathom vs deepagents.

Every model call takes a fixed latency `L` (`ScriptedModel(latency=L)`: `asyncio.sleep`
on the async paths, `time.sleep` on the sync one) and the scripted model counts how many
calls are waiting out their latency at the same moment (`max in flight`). The parent's
first model call starts N subagents in one message, each subagent answers in one model
call, and the parent then answers. So the critical path is

    parent call + one subagent call + parent's final call = 3 L   (sync subagents)
    parent call + one subagent call                       = 2 L   (async subagents: the
        parent's final call, "launched", runs while the subagents work)

and anything above it is the harness's own time, or calls that waited for one another.
Fully concurrent subagents show `max in flight` = N.

Modes:

* `invoke` / `ainvoke`: N `task` tool calls in one message (sync subagents), through the
  sync and the async API. Both sides, same scripted model.
* `async`: N `start_async_task` calls (async subagents) to a `worker` graph hosted by the
  same in-process fathom server as the parent (`fathom.server.create_app`, reached over
  ASGI with the real `langgraph-sdk` client; `jobs` = N + 2 so the server's run limit is
  not what is measured). The wall time runs from the parent's run being created to the
  later of the parent's own answer and the last subagent's answer (the completion notices
  that wake the parent afterwards are not timed). fathom only: the reference's async
  subagents need a LangGraph server (`langgraph dev`), a separate process per run whose
  start-up would dwarf the figure, so the deepagents column stays empty.

Two modes of the script, as in the other benchmarks:

* Worker: `--side fathom|deepagents --mode invoke|ainvoke|async --n N [--latency L]` runs
  once (after an untimed warm-up run with no latency) and prints one JSON line.
* Driver (no `--side`): every N, mode and side in a fresh worker, interleaved, and a table.

`collect()` is the driver's entry for the combined `make bench` table.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from _harness import (
    FATHOM_PYTHON,
    REF_PYTHON,
    Row,
    SideFailed,
    int_list,
    median_of,
    positive_float,
    positive_int,
    run_worker,
    side_parser,
    timed_invoke,
)
from _harness import print_table as _print_table

Side = Literal["fathom", "deepagents"]
Mode = Literal["invoke", "ainvoke", "async"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")
MODES: tuple[Mode, ...] = ("invoke", "ainvoke", "async")

SECTION = "Fan-out"
DEFAULT_SIZES: tuple[int, ...] = (4, 16, 64)
DEFAULT_LATENCY = 1.0
DEFAULT_REPS = 1
WORKER = "worker"
MAIN_PROMPT = "Split the job into parts, hand each part to a worker, then report."
PART_PREFIX = "Work on part "
IDEAL: dict[Mode, float] = {"invoke": 3.0, "ainvoke": 3.0, "async": 2.0}
GOAL = 1.10
"""Within 10 % of the ideal critical path."""

Runs = dict[tuple[Side, Mode, int], list[dict[str, Any]]]


# --------------------------------------------------------------------------- worker


class Gauge:
    """Counts model calls waiting out their latency at once, from any thread or loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.parts_done = 0
        self.all_parts = threading.Event()
        self.expected_parts = 0
        self.parts_at = 0.0
        self.parent_done_at = 0.0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1

    def part_done(self) -> None:
        with self._lock:
            self.parts_done += 1
            if self.parts_done >= self.expected_parts:
                self.parts_at = time.perf_counter()
                self.all_parts.set()


def _first_human_text(request: Any) -> str:
    from langchain_core.messages import HumanMessage

    for message in request.messages:
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


def _make_model(n: int, mode: Mode, latency: float, gauge: Gauge) -> Any:
    """One scripted model for the parent and its N subagents, told apart by their task."""
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    class CountingModel(ScriptedModel):
        """`ScriptedModel` whose latency is counted by `gauge` while it is waited out."""

        def wait_turn(self) -> None:
            gauge.enter()
            try:
                super().wait_turn()
            finally:
                gauge.leave()

        async def wait_turn_async(self) -> None:
            gauge.enter()
            try:
                await super().wait_turn_async()
            finally:
                gauge.leave()

    tool = "start_async_task" if mode == "async" else "task"

    def policy(request: ScriptRequest) -> Any:
        task = _first_human_text(request)
        if task == MAIN_PROMPT:
            if request.turn_results:
                gauge.parent_done_at = time.perf_counter()
                return ai(f"Done: {len(request.turn_results)} parts handed out.")
            if any(m.type == "ai" for m in request.messages):
                return ai("Noted.")  # a later turn: a subagent's completion notice
            return ai("", *(
                tool_call(tool, {"description": f"{PART_PREFIX}{k}.", "subagent_type": WORKER})
                for k in range(n)
            ))  # fmt: skip
        if task.startswith(PART_PREFIX):
            gauge.part_done()
            return ai(f"{task.removeprefix(PART_PREFIX).rstrip('.')} done.")
        return ai("Noted.")

    return CountingModel(policy=policy, latency=latency)


def _create_deep_agent(side: Side) -> Any:
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent  # pyright: ignore[reportMissingImports]
    return create_deep_agent


def _sync_agent(side: Side, model: Any) -> Any:
    worker = {
        "name": WORKER,
        "description": "Does one part of a job and reports.",
        "system_prompt": "Do the part you are given and report in one line.",
    }
    return _create_deep_agent(side)(model, subagents=[worker])


def _run_task_fan_out(side: Side, mode: Mode, n: int, latency: float) -> dict[str, Any]:
    gauge = Gauge()
    gauge.expected_parts = n
    model = _make_model(n, mode, latency, gauge)
    agent = _sync_agent(side, model)
    payload = {"messages": [{"role": "user", "content": MAIN_PROMPT}]}
    seconds, result = timed_invoke(agent, payload, mode)
    return {"seconds": seconds, "max_in_flight": gauge.peak, "model_calls": model.calls,
            "parts_done": gauge.parts_done, "answer": str(result["messages"][-1].text)}


async def _async_fan_out(n: int, latency: float) -> dict[str, Any]:
    """N async subagents on an in-process fathom server hosting parent and worker."""
    from fathom import create_deep_agent
    from fathom.server import create_app, in_process_client

    gauge = Gauge()
    gauge.expected_parts = n
    model = _make_model(n, "async", latency, gauge)
    spec = {"name": WORKER, "description": "Does one part of a job and reports.",
            "graph_id": WORKER}
    graphs = {"parent": create_deep_agent(model, subagents=[spec]),
              WORKER: create_deep_agent(model)}
    app = create_app(graphs, jobs=n + 2)
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        loop = asyncio.get_running_loop()
        parts = loop.run_in_executor(None, gauge.all_parts.wait, 120.0)
        start = time.perf_counter()
        values = await client.runs.wait(
            thread, "parent", input={"messages": [{"role": "user", "content": MAIN_PROMPT}]}
        )
        await parts
        # the parent's own answer ("Done: ...") and the last subagent's answer: the work
        # measured ends there; `runs.wait` may also cover a completion-notice turn after it
        seconds = max(gauge.parent_done_at, gauge.parts_at) - start
        peak = gauge.peak
        # untimed: let the parent's completion-notice turns settle before shutting down
        async with asyncio.timeout(120):
            while True:
                runs = await client.runs.list(thread)
                if all(r["status"] not in ("pending", "running") for r in runs):
                    break
                await asyncio.sleep(0.05)
    finally:
        await app.state.fathom.runs.shutdown()
    answer = values["messages"][-1]["content"] if isinstance(values, dict) else str(values)
    return {"seconds": seconds, "max_in_flight": peak, "model_calls": model.calls,
            "parts_done": gauge.parts_done, "answer": str(answer)}


def _run_once(side: Side, mode: Mode, n: int, latency: float) -> dict[str, Any]:
    if mode == "async":
        if side != "fathom":
            raise ValueError("the async mode runs fathom only (see the module docstring)")
        return asyncio.run(_async_fan_out(n, latency))
    return _run_task_fan_out(side, mode, n, latency)


def run_side(side: Side, mode: Mode, n: int, latency: float) -> dict[str, Any]:
    """One warm-up run with no latency, then the timed run; the worker's JSON row.

    Raises:
        RuntimeError: If fewer than N subagents answered (the wall time would not measure
            the same work).
    """
    _run_once(side, mode, min(n, 4), 0.0)
    measured = _run_once(side, mode, n, latency)
    if measured["parts_done"] < n:
        msg = f"{side} {mode} N={n}: {measured['parts_done']} of {n} subagents answered"
        raise RuntimeError(msg)
    seconds = measured["seconds"]
    return {
        "side": side,
        "mode": mode,
        "n": n,
        "latency": latency,
        "seconds": round(seconds, 4),
        "wall_over_latency": round(seconds / latency, 3),
        "ideal": IDEAL[mode],
        "over_ideal": round(seconds / latency / IDEAL[mode], 3),
        "max_in_flight": measured["max_in_flight"],
        "model_calls": measured["model_calls"],
        "answer": measured["answer"],
    }


# --------------------------------------------------------------------------- driver


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} {row['mode']:<7} N={row['n']:<3} {row['seconds']:.2f} s = "
        f"{row['wall_over_latency']:.2f} L (ideal {row['ideal']:g} L, ×{row['over_ideal']:.2f}),"
        f" max in flight {row['max_in_flight']}, {row['model_calls']} model calls",
        file=sys.stderr,
        flush=True,
    )


def measure(
    sizes: Sequence[int] = DEFAULT_SIZES,
    latency: float = DEFAULT_LATENCY,
    reps: int = DEFAULT_REPS,
    ref_python: Path = REF_PYTHON,
    modes: Sequence[Mode] = MODES,
) -> tuple[Runs, list[str]]:
    """Every size, mode and side `reps` times, each in a fresh worker, interleaved.

    Returns:
        The worker rows per (side, mode, N), and the failure messages.
    """
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    sides: list[tuple[Side, Path]] = [("fathom", fathom_python)]
    if ref_python.exists():
        sides.append(("deepagents", ref_python))
    runs: Runs = {}
    failures: list[str] = []
    for _ in range(reps):
        for n in sizes:
            for mode in modes:
                for side, python in sides:
                    if mode == "async" and side != "fathom":
                        continue
                    args = ["--mode", mode, "--n", str(n), "--latency", str(latency)]
                    try:
                        row = run_worker(__file__, side, args, python)
                    except SideFailed as exc:
                        failures.append(str(exc))
                        print(str(exc), file=sys.stderr, flush=True)
                        continue
                    runs.setdefault((side, mode, n), []).append(row)
                    _progress(row)
    return runs, failures


def _median(runs: Runs, side: Side, mode: Mode, n: int, key: str) -> float | None:
    rows = runs.get((side, mode, n))
    return round(median_of([r[key] for r in rows]), 3) if rows else None


def to_rows(runs: Runs, sizes: Sequence[int], latency: float, reps: int,
            modes: Sequence[Mode] = MODES) -> list[Row]:
    """Per N and mode: wall / L and max in flight, both sides."""
    rows: list[Row] = []
    for n in sizes:
        for mode in modes:
            kind = "async subagents" if mode == "async" else f"task, {mode}"
            ref_note = ("; deepagents: needs a LangGraph server (langgraph dev), not run"
                        if mode == "async" else "")
            rows.append(Row(
                SECTION, f"{n} subagents, {kind}: wall / L", "L",
                _median(runs, "fathom", mode, n, "wall_over_latency"),
                _median(runs, "deepagents", mode, n, "wall_over_latency"),
                note=(f"L = {latency:g} s per model call, median of {reps}; ideal "
                      f"{IDEAL[mode]:g} L, goal ≤ {GOAL * IDEAL[mode]:.2f} L{ref_note}"),
            ))
            rows.append(Row(
                SECTION, f"{n} subagents, {kind}: max model calls in flight", "calls",
                _median(runs, "fathom", mode, n, "max_in_flight"),
                _median(runs, "deepagents", mode, n, "max_in_flight"),
                better="higher",
                note=f"N = {n} means every subagent's call waited at the same time",
            ))
    return rows


def collect(ref_python: Path = REF_PYTHON, sizes: Sequence[int] = DEFAULT_SIZES,
            latency: float = DEFAULT_LATENCY, reps: int = DEFAULT_REPS) -> list[Row]:
    """Run every size, mode and side and return the combined-table rows.

    Raises:
        SideFailed: If any worker failed.
    """
    runs, failures = measure(sizes, latency, reps, ref_python)
    if failures:
        raise SideFailed("; ".join(failures))
    return to_rows(runs, sizes, latency, reps)


def show(rows: Sequence[Row], title: str) -> None:
    """Print `rows` as a table with the notes."""
    headers = ["metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom", "better"]
    def cell(value: float | None, unit: str) -> str:
        if value is None:
            return "—"
        return f"{value:.0f}" if unit == "calls" else f"{value:.2f}"

    cells = [
        [row.metric, row.unit, cell(row.fathom, row.unit), cell(row.deepagents, row.unit),
         "—" if row.ratio is None else f"{row.ratio:.2f}×",
         row.winner or "—"]
        for row in rows
    ]
    notes = "\n".join(sorted({f"{row.note}" for row in rows if row.note}))
    _print_table(title, headers, cells, notes)


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    import json

    parser = side_parser(__doc__)
    parser.add_argument("--mode", choices=MODES, help="worker: which fan-out")
    parser.add_argument("--modes", default=",".join(MODES), help="driver: modes to run")
    parser.add_argument("--n", type=positive_int, default=4, help="worker: subagents")
    parser.add_argument("--sizes", type=int_list, default=list(DEFAULT_SIZES),
                        help="driver: comma-separated N (default: 4,16,64)")
    parser.add_argument("--latency", type=positive_float, default=DEFAULT_LATENCY)
    parser.add_argument("--reps", type=positive_int, default=DEFAULT_REPS)
    args = parser.parse_args(argv)
    if args.side is not None:
        if args.mode is None:
            parser.error("--side needs --mode")
        print(json.dumps(run_side(args.side, args.mode, args.n, args.latency)), flush=True)
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    start = time.perf_counter()
    runs, failures = measure(args.sizes, args.latency, args.reps, args.ref_python, modes)
    show(to_rows(runs, args.sizes, args.latency, args.reps, modes),  # pyright: ignore[reportArgumentType]
         "Fan-out: wall time in units of model latency L")
    print(f"total {time.perf_counter() - start:.1f} s")
    if failures:
        print("failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
