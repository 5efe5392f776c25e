"""What tracing costs per agent step: CPU per step with `fathom.tracing` on and off.

The run is the step-overhead run (see `step_overhead.py`): a zero-latency
`fathom.testing.ScriptedModel` calls a trivial `tick` tool N times, then answers, on a
checkpointed thread. One worker process builds the same agent twice, once before
`fathom.tracing.enable(...)` (no callback handler) and once after, and runs them in turns
(`off, on`, then `on, off`, ...) so both see the same machine load. With tracing on, every
model call, tool call and the run itself become spans that go through the SDK's
`BatchSpanProcessor` to an exporter that accepts and drops them (what a local collector
costs the process, without the network), and the timed region ends with `force_flush()`,
so the export thread's CPU is counted. `time.process_time()` counts every thread.

Reported: the median CPU per step of each (over the rounds of one process, then the median
over 3 processes), and the overhead: the median over each process's rounds of `on / off - 1`
for the two runs of a round (which cancels the machine's slower and faster spells), then the
median over the processes, in percent. The goal is at most 5 %.
deepagents has no OpenTelemetry tracing of its own (it traces to LangSmith), so it has no
figures here.

Worker: `--side fathom [--steps N --rounds R]` prints one JSON line; driver (no `--side`)
runs 3 workers and prints the table.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    FATHOM_PYTHON,
    REF_PYTHON,
    Row,
    median_of,
    positive_int,
    print_table,
    run_worker,
    side_parser,
)

SECTION = "Tracing overhead"
DEFAULT_STEPS = 50
DEFAULT_ROUNDS = 20
DEFAULT_PROCESSES = 3
GOAL_PERCENT = 5.0


def _agent(steps_box: dict[str, int]) -> Any:
    """A deep agent whose scripted model ticks `steps_box["steps"]` times per run."""
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from fathom import create_deep_agent
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    @tool
    def tick(i: int) -> str:
        """Record tick number i and acknowledge it."""
        return f"ok {i}"

    def policy(request: ScriptRequest) -> Any:
        done = sum(1 for m in request.turn_results)
        if done < steps_box["steps"]:
            return ai("", tool_call("tick", {"i": done + 1}))
        return ai("done")

    return create_deep_agent(ScriptedModel(policy=policy), tools=[tick],
                             checkpointer=InMemorySaver())


def _timed(agent: Any, thread: str, steps: int, flush: Any = None) -> float:
    """CPU milliseconds per step of one run of `steps` steps on a new thread."""
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 100_000}
    start = time.process_time()
    agent.invoke({"messages": [{"role": "user", "content": "Tick, then stop."}]}, config)
    if flush is not None:
        flush()
    return (time.process_time() - start) * 1000 / steps


def run_side(steps: int = DEFAULT_STEPS, rounds: int = DEFAULT_ROUNDS) -> dict[str, Any]:
    """One worker: the same agent with tracing off and on, `rounds` runs each, in turns.

    Returns `off_ms_per_step`, `on_ms_per_step` (medians over the rounds), `overhead_pct`,
    and `spans` (how many spans the traced runs exported).
    """
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    import fathom.tracing

    class DroppingExporter(SpanExporter):
        """Accepts every span and keeps none (counts them)."""

        def __init__(self) -> None:
            self.count = 0

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            self.count += len(spans)
            return SpanExportResult.SUCCESS

    box = {"steps": steps}
    fathom.tracing.disable()
    off = _agent(box)
    exporter = DroppingExporter()
    handler = fathom.tracing.enable(span_processor=BatchSpanProcessor(exporter))
    assert handler is not None and handler.provider is not None
    on = _agent(box)
    flush = handler.provider.force_flush
    box["steps"] = 3  # warm both up: first-run set-up is not what is compared
    _timed(off, "warm-off", 3)
    _timed(on, "warm-on", 3, flush)
    box["steps"] = steps
    exporter.count = 0
    off_ms: list[float] = []
    on_ms: list[float] = []
    for round_ in range(rounds):
        order = [("off", off), ("on", on)] if round_ % 2 == 0 else [("on", on), ("off", off)]
        for name, agent in order:
            if name == "on":
                on_ms.append(_timed(agent, f"on-{round_}", steps, flush))
            else:
                off_ms.append(_timed(agent, f"off-{round_}", steps))
    fathom.tracing.disable()
    ratios = [on / off for on, off in zip(on_ms, off_ms, strict=True)]
    return {
        "side": "fathom",
        "steps": steps,
        "rounds": rounds,
        "off_ms_per_step": round(median_of(off_ms), 4),
        "on_ms_per_step": round(median_of(on_ms), 4),
        "overhead_pct": round((median_of(ratios) - 1) * 100, 2),
        "spans": exporter.count,
    }


def measure(processes: int = DEFAULT_PROCESSES, steps: int = DEFAULT_STEPS,
            rounds: int = DEFAULT_ROUNDS) -> list[dict[str, Any]]:
    """Run `processes` fresh fathom workers; their JSON rows."""
    python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    rows = []
    for _ in range(processes):
        row = run_worker(__file__, "fathom", ["--steps", str(steps), "--rounds", str(rounds)],
                         python)
        print(f"  tracing off {row['off_ms_per_step']:.2f} ms/step, on "
              f"{row['on_ms_per_step']:.2f} ms/step ({row['overhead_pct']:+.1f} %), "
              f"{row['spans']} spans", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def rows_from(results: Sequence[dict[str, Any]]) -> list[Row]:
    """The combined-table rows: CPU per step off and on, and the overhead."""
    off = median_of([float(r["off_ms_per_step"]) for r in results])
    on = median_of([float(r["on_ms_per_step"]) for r in results])
    overhead = median_of([float(r["overhead_pct"]) for r in results])
    steps, rounds = results[0]["steps"], results[0]["rounds"]
    how = (f"N={steps}, median of {rounds} paired runs per process, "
           f"median of {len(results)} processes")
    none = "deepagents has no OpenTelemetry tracing of its own"
    return [
        Row(SECTION, "CPU per step, tracing off", "ms", off, None, note=how),
        Row(SECTION, "CPU per step, tracing on", "ms", on, None,
            note=f"BatchSpanProcessor to a dropping exporter, flushed in the timed region; {none}"),
        Row(SECTION, "tracing overhead per step", "%", overhead, None,
            note=f"median of the paired runs' on/off ratios; goal ≤ {GOAL_PERCENT:g} %"),
    ]


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Rows for the combined table (fathom only; `ref_python` is not used)."""
    return rows_from(measure())


def main(argv: Sequence[str] | None = None) -> int:
    parser = side_parser(__doc__)
    parser.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS)
    parser.add_argument("--rounds", type=positive_int, default=DEFAULT_ROUNDS)
    parser.add_argument("--processes", type=positive_int, default=DEFAULT_PROCESSES)
    args = parser.parse_args(argv)
    if args.side == "deepagents":
        parser.error("deepagents has no OpenTelemetry tracing to measure")
    if args.side:
        print(json.dumps(run_side(args.steps, args.rounds)))
        return 0
    rows = rows_from(measure(args.processes, args.steps, args.rounds))
    print_table(
        f"{SECTION} (fathom)",
        ["metric", "unit", "value", "note"],
        [[r.metric, r.unit, f"{r.fathom:,.2f}" if r.fathom is not None else "—", r.note]
         for r in rows],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
