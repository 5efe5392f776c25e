"""Harness overhead per agent step: CPU milliseconds per step, fathom vs deepagents.

A step is one model call plus one tool call. The model is `fathom.testing.ScriptedModel`
with no latency; its policy calls a trivial custom tool, `tick(i) -> "ok i"`, N times (one
call per model turn) and then answers "done", so a run makes N + 1 model calls and N tool
calls. Both agents are built the same way, otherwise at their defaults:
`create_deep_agent(model, tools=[tick], checkpointer=InMemorySaver())`, and invoked once on
a thread id (`configurable.thread_id`), because real runs are checkpointed. With a
zero-latency model nearly all the CPU a run uses is the harness's: its middleware, the
LangGraph loop, checkpointing, and the scripted model itself.

A third agent, the LangChain floor, is LangChain's `create_agent(model, tools=[tick],
checkpointer=InMemorySaver())` with no middleware, its messages stored as deltas like both
harnesses store them (`_floor_state.py`): what the agent loop, the tool node and the
checkpointer cost any harness built on them.

What is reported (each figure is the median over 3 worker processes per side and N):

* `ms/step`: `time.process_time()` spent in the one `invoke` call, divided by N. Imports and
  building the agent are excluded; the first invoke's one-time set-up (a few milliseconds
  on each side) is included, as it is in every real run.
* `harness ms/step`: the same minus the CPU spent inside `ScriptedModel.respond` (the scripted
  model records a deep copy of every request and counts its tokens, which grows with the
  history and costs both sides alike). This is the harness's own share.
* peak RSS: `resource.getrusage(RUSAGE_SELF).ru_maxrss` at the end of the 200-step worker, in
  MiB. It includes the interpreter and every imported module, not just the run.
* The long run (N = 2,000, one process per side): harness CPU per step, the harness CPU of
  the last 10 steps over that of the first 10 (1 means flat: a step costs the same however
  long the history), and peak RSS. A step's CPU is read from the process CPU clock at each
  model call (see `_timeline`).

Two modes, as in the other benchmarks:

* Worker: `--side fathom|deepagents --steps N` performs one run in the current interpreter
  and prints one JSON line; `--side fathom --floor` runs the LangChain floor.
* Driver (no `--side`): runs the three for N = 50 and 200, three fresh worker processes
  each, then once each for `--long-steps` (2,000; 0 skips it), fathom and the floor with
  `.venv/bin/python` and deepagents with `benchmarks/.venv-deepagents` (`PYTHONPATH=src`,
  only for the scripted model), and prints a table.
"""

from __future__ import annotations

import json
import resource
import sys
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
    positive_int,
    print_table,
    run_worker,
    side_parser,
)

Side = Literal["fathom", "deepagents"]
Agent = Literal["fathom", "deepagents", "floor"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")
SIDES_AND_FLOOR: tuple[Agent, ...] = ("fathom", "deepagents", "floor")

SECTION = "Step overhead"
DEFAULT_SIZES: tuple[int, ...] = (50, 200)
DEFAULT_REPEATS = 3
RSS_STEPS = 200
LONG_STEPS = 2_000
TOOL_NAME = "tick"


# --------------------------------------------------------------------------- worker


def _make_tool() -> Any:
    """The `tick` tool as a LangChain `@tool`."""
    from langchain_core.tools import tool

    @tool
    def tick(i: int) -> str:
        """Record tick number i and acknowledge it."""
        return f"ok {i}"

    return tick


def _make_model(
    steps: int, counters: dict[str, float], marks: list[tuple[float, float]] | None = None
) -> Any:
    """A zero-latency `ScriptedModel` that calls `tick` `steps` times, then answers "done".

    It is a subclass only to add up the CPU time spent inside `respond` (in
    `counters["model_cpu"]`), so that the scripted model's own cost can be taken out, and
    to append `(CPU clock at the call, CPU spent in it)` per call to `marks`.
    """
    from langchain_core.messages import AIMessage, BaseMessage

    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    if marks is None:
        marks = []

    class TimedScriptedModel(ScriptedModel):
        """`ScriptedModel` that adds its CPU time per answer to `counters["model_cpu"]`.

        It also keeps, per call, the process CPU clock when the call came in and the CPU
        spent answering it (`marks`), from which `_timeline` derives each step's harness CPU.
        """

        def respond(
            self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
        ) -> AIMessage:
            start = time.process_time()
            try:
                return super().respond(messages, tools)
            finally:
                spent = time.process_time() - start
                counters["model_cpu"] += spent
                marks.append((start, spent))

    def policy(request: ScriptRequest) -> AIMessage:
        if counters["ticks"] < steps:
            counters["ticks"] += 1
            return ai("", tool_call(TOOL_NAME, {"i": int(counters["ticks"])}))
        return ai("done")

    return TimedScriptedModel(policy=policy)


def _timeline(marks: Sequence[tuple[float, float]]) -> list[float]:
    """Harness CPU milliseconds of each step, from the model-call marks of one run.

    Step k runs from model call k to model call k + 1: the CPU clock between the two calls
    less what model call k itself spent. So it holds the middleware around both calls, the
    tool call and the graph's two supersteps, and nothing of the scripted model.
    """
    return [
        (marks[k + 1][0] - marks[k][0] - marks[k][1]) * 1000 for k in range(len(marks) - 1)
    ]


def _build(side: Agent, model: Any) -> Any:
    """The agent of `side` around `model`, with the `tick` tool and an in-memory checkpointer.

    "floor" is LangChain's own `create_agent` with nothing added but a state whose
    `messages` LangGraph's `DeltaChannel` stores as deltas, as both harnesses do (with the
    default channel every checkpoint copies the whole history, which at 2,000 steps takes
    gigabytes): the cost of the agent loop, the tool node and the checkpointer that any
    harness built on them pays.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    tools = [_make_tool()]
    if side == "floor":
        from _floor_state import FloorState
        from langchain.agents import create_agent

        return create_agent(
            model, tools=tools, checkpointer=InMemorySaver(), state_schema=FloorState
        )
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent
    return create_deep_agent(model, tools=tools, checkpointer=InMemorySaver())


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def run_side(side: Agent, steps: int) -> dict[str, Any]:
    """Run one agent of `side` for `steps` tool-calling steps in this interpreter.

    Returns:
        `side`, `steps`, `cpu_ms_per_step` (CPU time of `invoke` ÷ steps),
        `model_cpu_ms_per_step` (the part spent in the scripted model),
        `harness_cpu_ms_per_step` (the difference), `first10_ms` and `last10_ms` (mean
        harness CPU of the first and the last 10 steps), `deciles_ms` (mean harness CPU per
        step in each tenth of the run), `wall_s` (of `invoke`), `model_calls`,
        `tool_messages` (in the final state) and `max_rss_mib` (peak RSS of this process).

    Raises:
        RuntimeError: If the run did not make exactly `steps` tool calls and one answer.
    """
    from langchain_core.messages import ToolMessage

    counters: dict[str, float] = {"ticks": 0, "model_cpu": 0.0}
    marks: list[tuple[float, float]] = []
    model = _make_model(steps, counters, marks)
    agent = _build(side, model)
    config = {"configurable": {"thread_id": f"step-overhead-{side}"}, "recursion_limit": 100_000}
    wall_start = time.perf_counter()
    cpu_start = time.process_time()
    result = agent.invoke({"messages": [{"role": "user", "content": "Tick, then stop."}]}, config)
    cpu = time.process_time() - cpu_start
    wall = time.perf_counter() - wall_start
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tool_messages = sum(isinstance(m, ToolMessage) for m in result["messages"])
    if counters["ticks"] != steps or tool_messages != steps or model.calls != steps + 1:
        msg = (
            f"{side}: expected {steps} tick calls and {steps + 1} model calls, got "
            f"{int(counters['ticks'])} ticks, {tool_messages} tool messages, "
            f"{model.calls} model calls"
        )
        raise RuntimeError(msg)
    model_cpu = counters["model_cpu"]
    timeline = _timeline(marks)
    tenth = max(1, len(timeline) // 10)
    deciles = [_mean(timeline[k : k + tenth]) for k in range(0, tenth * 10, tenth)]
    return {
        "side": side,
        "steps": steps,
        "cpu_ms_per_step": round(cpu * 1000 / steps, 4),
        "model_cpu_ms_per_step": round(model_cpu * 1000 / steps, 4),
        "harness_cpu_ms_per_step": round((cpu - model_cpu) * 1000 / steps, 4),
        "first10_ms": round(_mean(timeline[:10]), 4),
        "last10_ms": round(_mean(timeline[-10:]), 4),
        "deciles_ms": [round(d, 4) for d in deciles],
        "wall_s": round(wall, 4),
        "model_calls": model.calls,
        "tool_messages": tool_messages,
        "max_rss_mib": round(rss_kib / 1024, 2),
    }


# --------------------------------------------------------------------------- driver

Results = dict[tuple[Agent, int], list[dict[str, Any]]]


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} N={row['steps']:<4} {row['cpu_ms_per_step']:6.2f} ms/step CPU "
        f"({row['model_cpu_ms_per_step']:.2f} in the scripted model), first/last 10 steps "
        f"{row.get('first10_ms', 0):.2f}/{row.get('last10_ms', 0):.2f} ms, "
        f"invoke {row['wall_s']:.2f} s wall, peak RSS {row['max_rss_mib']:.0f} MiB",
        file=sys.stderr,
        flush=True,
    )


def _run_one(side: Agent, steps: int, ref_python: Path, results: Results) -> None:
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    if side == "deepagents":
        row = run_worker(__file__, side, ["--steps", str(steps)], ref_python)
    else:  # the floor runs in fathom's environment, which has LangChain
        extra = ["--floor"] if side == "floor" else []
        row = run_worker(__file__, "fathom", ["--steps", str(steps), *extra], fathom_python)
    _progress(row)
    results.setdefault((side, steps), []).append(row)


def run_all(
    ref_python: Path = REF_PYTHON,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = DEFAULT_REPEATS,
    long_steps: int | None = LONG_STEPS,
) -> Results:
    """Run `repeats` fresh workers per side and size, sides interleaved, then one worker
    per side for the `long_steps` run (none when `None`); return their rows.

    The sides are fathom, deepagents and the LangChain floor (`create_agent` alone). The
    deepagents side is skipped (no key in the result) when `ref_python` does not exist.

    Raises:
        SideFailed: If any worker fails.
    """
    sides: list[Agent] = ["fathom", "deepagents", "floor"]
    if not ref_python.exists():
        sides.remove("deepagents")
    results: Results = {}
    for _ in range(repeats):
        for steps in sizes:
            for side in sides:
                _run_one(side, steps, ref_python, results)
    if long_steps is not None:
        for side in sides:
            _run_one(side, long_steps, ref_python, results)
    return results


def _median(results: Results, side: Agent, steps: int, key: str) -> float | None:
    rows = results.get((side, steps))
    return None if not rows else median_of([float(r[key]) for r in rows])


def _growth(results: Results, side: Agent, steps: int) -> float | None:
    """Harness CPU of the last 10 steps ÷ that of the first 10 (median over processes)."""
    rows = results.get((side, steps))
    if not rows:
        return None
    return median_of([float(r["last10_ms"]) / float(r["first10_ms"]) for r in rows])


def _with_floor(note: str, value: float | None, unit: str) -> str:
    if value is None:
        return note
    return f"{note}; LangChain floor {_fmt(value, unit)} {unit}"


def _rows_with_floors(
    results: Results, sizes: Sequence[int], repeats: int
) -> list[tuple[Row, float | None]]:
    """Each combined-table row with the LangChain floor's figure for it (or `None`)."""
    missing = "" if any(side == "deepagents" for side, _ in results) else "; no reference env"
    runs = f"median of {repeats} processes per side"
    one = f"one process per side{missing}"

    def row(metric: str, unit: str, steps: int, key: str, note: str) -> tuple[Row, float | None]:
        if key == "growth":
            fathom, ref, floor = (_growth(results, s, steps) for s in SIDES_AND_FLOOR)
        else:
            fathom, ref, floor = (_median(results, s, steps, key) for s in SIDES_AND_FLOOR)
        return Row(SECTION, metric, unit, fathom, ref, note=_with_floor(note, floor, unit)), floor

    pairs: list[tuple[Row, float | None]] = []
    for steps in sizes:
        pairs.append(row(f"CPU per step, N={steps}", "ms", steps, "cpu_ms_per_step",
                         f"one model + one tool call, zero-latency model, {runs}{missing}"))
        pairs.append(row(f"harness CPU per step, N={steps}", "ms", steps,
                         "harness_cpu_ms_per_step",
                         f"as above minus the scripted model's own CPU, {runs}{missing}"))
    rss_steps = RSS_STEPS if RSS_STEPS in sizes else max(sizes)
    pairs.append(row(f"peak RSS after {rss_steps} steps", "MiB", rss_steps, "max_rss_mib",
                     f"ru_maxrss, includes the interpreter and imports, {runs}{missing}"))
    for steps in sorted({n for _, n in results if n not in sizes}):
        pairs.append(row(f"harness CPU per step, N={steps:,}", "ms", steps,
                         "harness_cpu_ms_per_step", f"long run, {one}"))
        pairs.append(row(f"last 10 ÷ first 10 steps, N={steps:,}", "×", steps, "growth",
                         "harness CPU of the last 10 steps over the first 10 (1 = flat), "
                         f"{one}"))
        pairs.append(row(f"peak RSS after {steps:,} steps", "MiB", steps, "max_rss_mib",
                         f"ru_maxrss of the long run, {one}"))
    return pairs


def rows_from(
    results: Results,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = DEFAULT_REPEATS,
) -> list[Row]:
    """The combined-table rows for the medians of `results`.

    The LangChain floor, when measured, is named in each row's note. The long run's rows
    (harness CPU per step, last 10 ÷ first 10 steps, peak RSS) follow when `results` has a
    size that is not in `sizes`.
    """
    return [r for r, _ in _rows_with_floors(results, sizes, repeats)]


def floors_from(
    results: Results, sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = DEFAULT_REPEATS
) -> dict[str, float | None]:
    """The LangChain floor's figure for each row of `rows_from`, by metric."""
    return {r.metric: f for r, f in _rows_with_floors(results, sizes, repeats)}


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Run all three (N = 50 and 200, 3 processes each; N = 2,000 once each) and return the
    combined-table rows.

    Without the reference environment the deepagents figures are `None`.

    Raises:
        SideFailed: If any worker fails.
    """
    return rows_from(run_all(ref_python))


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}" if unit == "MiB" else f"{value:,.2f}"


def show(
    rows: Sequence[Row], title: str, floors: dict[str, float | None] | None = None
) -> None:
    """Print `rows` as a table with the deepagents ÷ fathom ratio and the LangChain floor."""
    headers = ["metric", "unit", "fathom", "deepagents", "LangChain floor",
               "deepagents ÷ fathom", "better"]
    floors = floors or {}
    cells = [
        [
            row.metric,
            row.unit,
            _fmt(row.fathom, row.unit),
            _fmt(row.deepagents, row.unit),
            _fmt(floors.get(row.metric), row.unit),
            "—" if row.ratio is None else f"{row.ratio:.2f}×",
            row.winner or "—",
        ]
        for row in rows
    ]
    notes = sorted({row.note for row in rows if row.note})
    print_table(title, headers, cells, "\n".join(notes))


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument("--steps", type=positive_int, default=RSS_STEPS, help="worker: steps")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="worker: run LangChain's create_agent alone (with --side fathom)",
    )
    parser.add_argument(
        "--sizes",
        type=int_list,
        default=list(DEFAULT_SIZES),
        help="driver: comma-separated step counts (default: 50,200)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help="driver: worker processes per side and size (default: %(default)s)",
    )
    parser.add_argument(
        "--long-steps",
        type=int,
        default=LONG_STEPS,
        help="driver: steps of the long run, one process per side; 0 skips it "
        "(default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.side is not None:
        side: Agent = "floor" if args.floor else args.side
        print(json.dumps(run_side(side, args.steps)), flush=True)
        return 0
    if not args.ref_python.exists():
        print(
            f"Reference environment not found ({args.ref_python}); showing fathom only. "
            "Create it with `make bench`, or pass --ref-python.",
            file=sys.stderr,
        )
    start = time.perf_counter()
    long_steps = args.long_steps if args.long_steps > 0 else None
    try:
        results = run_all(args.ref_python, args.sizes, args.repeats, long_steps)
    except SideFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    rows = rows_from(results, args.sizes, args.repeats)
    floors = floors_from(results, args.sizes, args.repeats)
    show(rows, "Harness CPU per step (tick tool)", floors)
    print(json.dumps({"results": {f"{k[0]}:{k[1]}": v for k, v in results.items()}}))
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
