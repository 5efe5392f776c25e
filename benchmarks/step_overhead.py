"""Harness overhead per agent step: CPU milliseconds per step, fathom vs deepagents.

A step is one model call plus one tool call. The model is `fathom.testing.ScriptedModel`
with no latency; its policy calls a trivial custom tool, `tick(i) -> "ok i"`, N times (one
call per model turn) and then answers "done", so a run makes N + 1 model calls and N tool
calls. Both agents are built the same way, otherwise at their defaults:
`create_deep_agent(model, tools=[tick], checkpointer=InMemorySaver())`, and invoked once on
a thread id (`configurable.thread_id`), because real runs are checkpointed. With a
zero-latency model nearly all the CPU a run uses is the harness's: its middleware, the
LangGraph loop, checkpointing, and the scripted model itself.

What is reported (each figure is the median over 3 worker processes per side and N):

* `ms/step`: `time.process_time()` spent in the one `invoke` call, divided by N. Imports and
  building the agent are excluded; the first invoke's one-time set-up (a few milliseconds
  on each side) is included, as it is in every real run.
* `harness ms/step`: the same minus the CPU spent inside `ScriptedModel.respond` (the scripted
  model records a deep copy of every request and counts its tokens, which grows with the
  history and costs both sides alike). This is the harness's own share.
* peak RSS: `resource.getrusage(RUSAGE_SELF).ru_maxrss` at the end of the 200-step worker, in
  MiB. It includes the interpreter and every imported module, not just the run.

Two modes, as in the other benchmarks:

* Worker: `--side fathom|deepagents --steps N` performs one run in the current interpreter
  and prints one JSON line.
* Driver (no `--side`): runs both sides for N = 50 and 200, three fresh worker processes each,
  fathom with `.venv/bin/python` and deepagents with `benchmarks/.venv-deepagents`
  (`PYTHONPATH=src`, only for the scripted model), and prints a table.
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
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

SECTION = "Step overhead"
DEFAULT_SIZES: tuple[int, ...] = (50, 200)
DEFAULT_REPEATS = 3
RSS_STEPS = 200
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


def _make_model(steps: int, counters: dict[str, float]) -> Any:
    """A zero-latency `ScriptedModel` that calls `tick` `steps` times, then answers "done".

    It is a subclass only to add up the CPU time spent inside `respond` (in
    `counters["model_cpu"]`), so that the scripted model's own cost can be taken out.
    """
    from langchain_core.messages import AIMessage, BaseMessage

    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    class TimedScriptedModel(ScriptedModel):
        """`ScriptedModel` that adds its CPU time per answer to `counters["model_cpu"]`."""

        def respond(
            self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
        ) -> AIMessage:
            start = time.process_time()
            try:
                return super().respond(messages, tools)
            finally:
                counters["model_cpu"] += time.process_time() - start

    def policy(request: ScriptRequest) -> AIMessage:
        if counters["ticks"] < steps:
            counters["ticks"] += 1
            return ai("", tool_call(TOOL_NAME, {"i": int(counters["ticks"])}))
        return ai("done")

    return TimedScriptedModel(policy=policy)


def run_side(side: Side, steps: int) -> dict[str, Any]:
    """Run one agent of `side` for `steps` tool-calling steps in this interpreter.

    Returns:
        `side`, `steps`, `cpu_ms_per_step` (CPU time of `invoke` ÷ steps),
        `model_cpu_ms_per_step` (the part spent in the scripted model),
        `harness_cpu_ms_per_step` (the difference), `wall_s` (of `invoke`), `model_calls`,
        `tool_messages` (in the final state) and `max_rss_mib` (peak RSS of this process).

    Raises:
        RuntimeError: If the run did not make exactly `steps` tool calls and one answer.
    """
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver

    counters: dict[str, float] = {"ticks": 0, "model_cpu": 0.0}
    model = _make_model(steps, counters)
    agent = create_deep_agent(model, tools=[_make_tool()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"step-overhead-{side}"}, "recursion_limit": 10_000}
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
    return {
        "side": side,
        "steps": steps,
        "cpu_ms_per_step": round(cpu * 1000 / steps, 4),
        "model_cpu_ms_per_step": round(model_cpu * 1000 / steps, 4),
        "harness_cpu_ms_per_step": round((cpu - model_cpu) * 1000 / steps, 4),
        "wall_s": round(wall, 4),
        "model_calls": model.calls,
        "tool_messages": tool_messages,
        "max_rss_mib": round(rss_kib / 1024, 2),
    }


# --------------------------------------------------------------------------- driver


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} N={row['steps']:<4} {row['cpu_ms_per_step']:6.2f} ms/step CPU "
        f"({row['model_cpu_ms_per_step']:.2f} in the scripted model), "
        f"invoke {row['wall_s']:.2f} s wall, peak RSS {row['max_rss_mib']:.0f} MiB",
        file=sys.stderr,
        flush=True,
    )


def run_all(
    ref_python: Path = REF_PYTHON,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = DEFAULT_REPEATS,
) -> dict[tuple[Side, int], list[dict[str, Any]]]:
    """Run `repeats` fresh workers per side and size, sides interleaved; return their rows.

    The deepagents side is skipped (no key in the result) when `ref_python` does not exist.

    Raises:
        SideFailed: If any worker fails.
    """
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    sides: list[Side] = ["fathom", "deepagents"] if ref_python.exists() else ["fathom"]
    results: dict[tuple[Side, int], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for steps in sizes:
            for side in sides:
                python = fathom_python if side == "fathom" else ref_python
                row = run_worker(__file__, side, ["--steps", str(steps)], python)
                _progress(row)
                results.setdefault((side, steps), []).append(row)
    return results


def _median(
    results: dict[tuple[Side, int], list[dict[str, Any]]], side: Side, steps: int, key: str
) -> float | None:
    rows = results.get((side, steps))
    return None if not rows else median_of([float(r[key]) for r in rows])


def rows_from(
    results: dict[tuple[Side, int], list[dict[str, Any]]],
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = DEFAULT_REPEATS,
) -> list[Row]:
    """The combined-table rows for the medians of `results`."""
    missing = "" if any(side == "deepagents" for side, _ in results) else "; no reference env"
    runs = f"median of {repeats} processes per side"
    rows: list[Row] = []
    for steps in sizes:
        rows.append(
            Row(
                SECTION,
                f"CPU per step, N={steps}",
                "ms",
                _median(results, "fathom", steps, "cpu_ms_per_step"),
                _median(results, "deepagents", steps, "cpu_ms_per_step"),
                note=f"one model + one tool call, zero-latency model, {runs}{missing}",
            )
        )
        rows.append(
            Row(
                SECTION,
                f"harness CPU per step, N={steps}",
                "ms",
                _median(results, "fathom", steps, "harness_cpu_ms_per_step"),
                _median(results, "deepagents", steps, "harness_cpu_ms_per_step"),
                note=f"as above minus the scripted model's own CPU, {runs}{missing}",
            )
        )
    rss_steps = RSS_STEPS if RSS_STEPS in sizes else max(sizes)
    rows.append(
        Row(
            SECTION,
            f"peak RSS after {rss_steps} steps",
            "MiB",
            _median(results, "fathom", rss_steps, "max_rss_mib"),
            _median(results, "deepagents", rss_steps, "max_rss_mib"),
            note=f"ru_maxrss, includes the interpreter and imports, {runs}{missing}",
        )
    )
    return rows


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Run both sides (N = 50 and 200, 3 processes each) and return the combined-table rows.

    Without the reference environment the deepagents figures are `None`.

    Raises:
        SideFailed: If any worker fails.
    """
    return rows_from(run_all(ref_python))


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}" if unit == "MiB" else f"{value:,.2f}"


def show(rows: Sequence[Row], title: str) -> None:
    """Print `rows` as a table with the deepagents ÷ fathom ratio."""
    headers = ["metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom", "better"]
    cells = [
        [
            row.metric,
            row.unit,
            _fmt(row.fathom, row.unit),
            _fmt(row.deepagents, row.unit),
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
    args = parser.parse_args(argv)
    if args.side is not None:
        print(json.dumps(run_side(args.side, args.steps)), flush=True)
        return 0
    if not args.ref_python.exists():
        print(
            f"Reference environment not found ({args.ref_python}); showing fathom only. "
            "Create it with `make bench`, or pass --ref-python.",
            file=sys.stderr,
        )
    start = time.perf_counter()
    try:
        results = run_all(args.ref_python, args.sizes, args.repeats)
    except SideFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    show(rows_from(results, args.sizes, args.repeats), "Harness CPU per step (tick tool)")
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
