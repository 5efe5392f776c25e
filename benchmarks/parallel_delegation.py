"""Parallel delegation: wall time of 4 subagents started at once, fathom vs deepagents.

The main agent's first model call delegates to 4 subagents in one message (4 `task` tool
calls to the same `researcher` subagent). Each subagent makes 2 model calls: a call to a
trivial custom tool, `lookup(topic)`, then its answer. The main agent then answers. Every
model call takes `L` seconds (`ScriptedModel(latency=L)`: `time.sleep` on the sync path,
`asyncio.sleep` on the async one), so the run makes 10 model calls and its wall time, in
units of `L`, shows how much of the delegation ran at the same time:

* ideal critical path: 2 (main) + 2 (one subagent) = 4 L, plus the harness's own overhead;
* fully serial: 2 + 4 × 2 = 10 L.

Both the sync (`invoke`) and the async (`ainvoke`) paths are measured on each side.

Two modes:

* Worker: `--side fathom|deepagents --mode invoke|ainvoke [--latency L]` performs one run in
  the current interpreter and prints one JSON line. A side that made other than 10 model
  calls fails (exit status 1): its wall time would not measure the same work.
* Driver (no `--side`): runs each side and mode `--reps` times (default 3), each in a fresh
  worker process, fathom with the project's `.venv/bin/python` and deepagents with
  `benchmarks/.venv-deepagents` (`PYTHONPATH=src`, so the reference side can import
  `fathom.testing`'s scripted model and nothing else of fathom's), then prints the medians.

`collect()` is the driver's entry for the combined `make bench` table.
"""

from __future__ import annotations

import json
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
    median_of,
    positive_float,
    positive_int,
    run_worker,
    side_parser,
    timed_invoke,
)
from _harness import print_table as _print_table

Side = Literal["fathom", "deepagents"]
Mode = Literal["invoke", "ainvoke"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")
MODES: tuple[Mode, ...] = ("invoke", "ainvoke")

SECTION = "Parallel delegation"
DEFAULT_LATENCY = 0.2
DEFAULT_REPS = 3
SUBAGENTS = 4
SUBAGENT_NAME = "researcher"
TOOL_NAME = "lookup"
EXPECTED_CALLS = 2 + SUBAGENTS * 2
IDEAL_WALL = 4.0
SERIAL_WALL = float(EXPECTED_CALLS)

MAIN_PROMPT = "Research four topics in parallel, then summarise what you found."
TASK_PREFIX = "Research topic "
TOPICS = ("alpha", "beta", "gamma", "delta")


Runs = dict[tuple[Side, Mode], list[dict[str, Any]]]
"""Worker rows per (side, mode)."""


class WrongCallCount(RuntimeError):
    """A side made a number of model calls other than `EXPECTED_CALLS`."""


# --------------------------------------------------------------------------- worker


def _make_tool() -> Any:
    """The subagent's `lookup` tool as a LangChain `@tool`."""
    from langchain_core.tools import tool

    @tool
    def lookup(topic: str) -> str:
        """Look up one fact about a topic."""
        return f"{topic}: one fact, found instantly."

    return lookup


def _first_human_text(request: Any) -> str:
    """Text of the first human message of a request (the task that started that agent)."""
    from langchain_core.messages import HumanMessage

    for message in request.messages:
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


def _make_model(latency: float, log: dict[str, Any]) -> Any:
    """A `ScriptedModel` playing the main agent and the 4 subagents.

    The policy tells the agents apart by the first human message: the main agent's is
    `MAIN_PROMPT`; a subagent's is the `description` of its `task` call. It counts calls
    per role in `log["counts"]` and records, per subagent call, the `perf_counter` time
    at which it was answered in `log["subagent_times"]` (answers come after the latency,
    so 4 subagents that run at the same time are answered within a few ms of each other).
    """
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    counts: dict[str, int] = log["counts"]
    times: list[tuple[str, int, float]] = log["subagent_times"]

    def policy(request: ScriptRequest) -> Any:
        task = _first_human_text(request)
        if task == MAIN_PROMPT:
            counts["main"] += 1
            results = request.turn_results
            if not results:
                calls = [
                    tool_call(
                        "task",
                        {"description": f"{TASK_PREFIX}{topic}.", "subagent_type": SUBAGENT_NAME},
                    )
                    for topic in TOPICS
                ]
                return ai("", *calls)
            return ai(f"Done: {len(results)} reports received.")
        if task.startswith(TASK_PREFIX):
            counts["subagent"] += 1
            topic = task.removeprefix(TASK_PREFIX).rstrip(".")
            turn = 2 if request.turn_results else 1
            times.append((topic, turn, time.perf_counter()))
            if turn == 1:
                return ai("", tool_call(TOOL_NAME, {"topic": topic}))
            return ai(f"Report on {topic}: {request.turn_results[-1].text}")
        counts["other"] += 1
        return ai("Unexpected request.")

    return ScriptedModel(policy=policy, latency=latency)


def _build_agent(side: Side, model: Any) -> Any:
    """The same agent on either side: one `researcher` subagent with the `lookup` tool."""
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent

    researcher = {
        "name": SUBAGENT_NAME,
        "description": "Researches one topic and reports what it found.",
        "system_prompt": "You research one topic with the lookup tool and report briefly.",
        "tools": [_make_tool()],
    }
    return create_deep_agent(model, subagents=[researcher])


def _spread(times: list[tuple[str, int, float]], turn: int) -> float:
    """Seconds between the first and the last subagent answer of `turn` (1 or 2)."""
    stamps = [t for _, k, t in times if k == turn]
    return max(stamps) - min(stamps) if stamps else 0.0


def _run_once(side: Side, mode: Mode, latency: float) -> tuple[float, dict[str, Any], Any]:
    """Build a fresh agent and model, run the task once; return (seconds, log, result)."""
    log: dict[str, Any] = {"counts": {"main": 0, "subagent": 0, "other": 0}, "subagent_times": []}
    model = _make_model(latency, log)
    agent = _build_agent(side, model)
    payload = {"messages": [{"role": "user", "content": MAIN_PROMPT}]}
    seconds, result = timed_invoke(agent, payload, mode)
    log["model_calls"] = len(model.requests)
    return seconds, log, result


def run_side(side: Side, mode: Mode, latency: float, warmup: bool = True) -> dict[str, Any]:
    """Run the parallel-delegation task once on `side` through `mode` with latency `latency`.

    With `warmup`, an untimed run with no latency (its own agent and model) comes first,
    so one-time import and first-use costs are not counted on either side.

    Returns:
        The measurement: `side`, `mode`, `latency`, `seconds` (the `invoke`/`ainvoke` call
        only), `wall_over_latency` (`seconds / latency`), `model_calls`, `main_calls`,
        `subagent_calls`, `other_calls`, `spread_first_over_latency` and
        `spread_second_over_latency` (time between the first and last of the 4
        subagents' first, resp. second, answers, in units of L: about 0 when they ran
        at the same time, about 6 each when they ran one after another),
        `overhead_ms` (`seconds` minus the ideal 4 L, in ms: the harness's own time on the
        critical path), `answer`.

    Raises:
        WrongCallCount: If the run made other than `EXPECTED_CALLS` model calls.
    """
    if warmup:
        _run_once(side, mode, 0.0)
    seconds, log, result = _run_once(side, mode, latency)
    counts = log["counts"]
    row = {
        "side": side,
        "mode": mode,
        "latency": latency,
        "seconds": round(seconds, 4),
        "wall_over_latency": round(seconds / latency, 3),
        "overhead_ms": round((seconds - IDEAL_WALL * latency) * 1000, 1),
        "model_calls": log["model_calls"],
        "main_calls": counts["main"],
        "subagent_calls": counts["subagent"],
        "other_calls": counts["other"],
        "spread_first_over_latency": round(_spread(log["subagent_times"], 1) / latency, 3),
        "spread_second_over_latency": round(_spread(log["subagent_times"], 2) / latency, 3),
        "answer": str(result["messages"][-1].text),
    }
    if row["model_calls"] != EXPECTED_CALLS:
        msg = (
            f"{side} {mode}: {row['model_calls']} model calls, expected {EXPECTED_CALLS} "
            f"(main {counts['main']}, subagents {counts['subagent']}, other {counts['other']}); "
            "the wall times would not compare the same work"
        )
        raise WrongCallCount(msg)
    return row


# --------------------------------------------------------------------------- driver


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} {row['mode']:<7} {row['seconds']:.3f} s = "
        f"{row['wall_over_latency']:.2f} L ({row['overhead_ms']:+.0f} ms over 4 L), "
        f"{row['model_calls']} model calls, subagent "
        f"answers spread {row['spread_first_over_latency']:.2f} L / "
        f"{row['spread_second_over_latency']:.2f} L",
        file=sys.stderr,
        flush=True,
    )


def measure(
    latency: float = DEFAULT_LATENCY,
    reps: int = DEFAULT_REPS,
    ref_python: Path = REF_PYTHON,
) -> tuple[Runs, list[str]]:
    """Run every side and mode `reps` times, each in a fresh worker process.

    Returns:
        The worker rows per (side, mode), and the failure messages. The deepagents side
        is skipped (with a note on stderr) when `ref_python` does not exist.
    """
    fathom_python = FATHOM_PYTHON if FATHOM_PYTHON.exists() else Path(sys.executable)
    sides: list[Side] = ["fathom"]
    if ref_python.exists():
        sides.append("deepagents")
    else:
        print(
            f"Reference environment not found ({ref_python}); showing fathom only.\n"
            "Create it with `make bench` (it builds benchmarks/.venv-deepagents with "
            "deepagents==0.7.32), or pass --ref-python.",
            file=sys.stderr,
        )
    runs: Runs = {}
    failures: list[str] = []
    args = ["--latency", str(latency)]
    # Interleave sides and modes within each repetition, so a slow patch of the machine
    # does not land on one side only.
    for _ in range(reps):
        for mode in MODES:
            for side in sides:
                python = fathom_python if side == "fathom" else ref_python
                try:
                    row = run_worker(__file__, side, ["--mode", mode, *args], python)
                except SideFailed as exc:
                    failures.append(str(exc))
                    print(str(exc), file=sys.stderr, flush=True)
                    continue
                runs.setdefault((side, mode), []).append(row)
                _progress(row)
    return runs, failures


def _median(runs: Runs, side: Side, mode: Mode) -> float | None:
    """The median wall / L of one side and mode, or `None` when it has no run."""
    rows = runs.get((side, mode))
    return round(median_of([r["wall_over_latency"] for r in rows]), 3) if rows else None


def to_rows(runs: Runs, latency: float, reps: int) -> list[Row]:
    """The combined-table rows: median wall / L per mode."""
    note = (
        f"L = {latency:g} s per model call, median of {reps}; ideal {IDEAL_WALL:g} "
        f"(2 main + 2 subagent), serial {SERIAL_WALL:g}"
    )
    return [
        Row(
            section=SECTION,
            metric=f"{SUBAGENTS} parallel subagents, {mode}: wall / L",
            unit="L",
            fathom=_median(runs, "fathom", mode),
            deepagents=_median(runs, "deepagents", mode),
            better="lower",
            note=note,
        )
        for mode in MODES
    ]


def collect(
    ref_python: Path = REF_PYTHON, latency: float = DEFAULT_LATENCY, reps: int = DEFAULT_REPS
) -> list[Row]:
    """Run both sides (`reps` fresh workers per side and mode) and return the table rows.

    Raises:
        SideFailed: If any worker failed (a wrong call count included).
    """
    runs, failures = measure(latency, reps, ref_python)
    if failures:
        raise SideFailed("\n".join(failures))
    return to_rows(runs, latency, reps)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def print_rows(rows: Sequence[Row], latency: float, reps: int) -> None:
    """Print the driver's own table."""
    headers = ["metric", "fathom", "deepagents", "deepagents ÷ fathom", "better"]
    body = [
        [
            row.metric,
            _fmt(row.fathom),
            _fmt(row.deepagents),
            "—" if row.ratio is None else f"{row.ratio:.2f}×",
            row.winner or "—",
        ]
        for row in rows
    ]
    title = (
        f"{SECTION}: {SUBAGENTS} subagents × 2 model calls, L = {latency:g} s "
        f"(median of {reps})"
    )
    footer = (
        f"wall time in units of L; ideal {IDEAL_WALL:g} (2 main + 2 subagent calls), "
        f"fully serial {SERIAL_WALL:g}"
    )
    _print_table(title, headers, body, footer)


def drive(latency: float, reps: int, ref_python: Path) -> int:
    """Run both sides, print the table; return the exit status."""
    start = time.perf_counter()
    runs, failures = measure(latency, reps, ref_python)
    if runs:
        print_rows(to_rows(runs, latency, reps), latency, reps)
    print(f"total {time.perf_counter() - start:.1f} s")
    if failures:
        print(f"{len(failures)} run(s) failed", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument("--mode", choices=MODES, default="invoke", help="worker: which path")
    parser.add_argument(
        "--latency",
        type=positive_float,
        default=DEFAULT_LATENCY,
        help="seconds per model call (default: %(default)s)",
    )
    parser.add_argument(
        "--reps",
        type=positive_int,
        default=DEFAULT_REPS,
        help="driver: fresh worker runs per side and mode (default: %(default)s)",
    )
    parser.add_argument(
        "--no-warmup", action="store_true", help="worker: skip the untimed warm-up run"
    )
    args = parser.parse_args(argv)
    if args.side is None:
        return drive(args.latency, args.reps, args.ref_python)
    try:
        row = run_side(args.side, args.mode, args.latency, warmup=not args.no_warmup)
    except WrongCallCount as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
