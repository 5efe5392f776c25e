"""`make bench`: every benchmark, fathom and deepagents side by side, in one table.

Runs each two-sided benchmark's `collect()` (each runs fathom under `.venv` and the
reference implementation, deepagents 0.7.32, under `benchmarks/.venv-deepagents`, with
the same scripted model), then the multi-agent patterns table (fathom only: deepagents has
no counterpart of those constructs). Prints one table with fathom, deepagents and
deepagents ÷ fathom per row, and writes:

* `benchmarks/results/latest.json`: the machine, the rows and the patterns table;
* `benchmarks/results/latest.png`: a chart of how many times better fathom does per row.

    .venv/bin/python benchmarks/bench.py [--only prompt_overhead,startup] [--results DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import REF_PYTHON, REPO_ROOT, Row, print_table

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# The table's sections, in order; each module has `collect(ref_python) -> list[Row]`.
SECTIONS = (
    "prompt_overhead",
    "step_overhead",
    "checkpoint_growth",
    "parallel_delegation",
    "prefix_stability",
    "long_run",
    "startup",
    "server",  # fathom serve against langgraph dev (the reference column)
    "server_replicas",  # PostgreSQL: 1 vs 3 replicas, queue-to-start, crash recovery
    "dynamic_subagents",  # one eval vs task calls; Monty vs QuickJS start-up
    "fan_out",  # 4, 16 and 64 subagents at once, sync and async, wall / L
    # tracing spans on vs off, per step; left out where the script is absent
    *(("tracing_overhead",) if (Path(__file__).resolve().parent / "tracing_overhead.py")
      .exists() else ()),
)


def machine() -> dict[str, Any]:
    """What the run happened on: CPU, memory, Python, the two versions compared."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")),
                cpu,
            )
    except OSError:
        pass
    memory_gib = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
            memory_gib = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "os": platform.platform(),
        "python": platform.python_version(),
        "fathom_commit": _git_commit(),
        "deepagents": _reference_version(),
    }


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def _reference_version() -> str | None:
    if not REF_PYTHON.exists():
        return None
    code = "import importlib.metadata as m; print(m.version('deepagents'))"
    done = subprocess.run([str(REF_PYTHON), "-c", code], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or None


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("tokens", "chars", "calls"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """The printed table: section, metric, unit, both sides, the ratio and who does better."""
    printed = []
    for row in rows:
        ratio = "—" if row.ratio is None else f"{row.ratio:.2f}×"
        printed.append([row.section, row.metric, row.unit, _number(row.fathom, row.unit),
                        _number(row.deepagents, row.unit), ratio, row.winner or "—"])
    return printed


def fathom_advantage(row: Row) -> float | None:
    """How many times better fathom does on `row` (above 1: fathom better; 0 when the
    reference's figure is 0 and lower is better)."""
    if row.ratio is None:
        return None
    if row.better == "lower":
        return row.ratio
    return None if row.ratio == 0 else 1 / row.ratio


CHART_FLOOR = 0.1
"""Bars below this (a reference figure of 0, say) are drawn at it, labelled with the value."""


def write_chart(rows: Sequence[Row], path: Path) -> None:
    """A horizontal bar per comparable row: fathom's advantage on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter

    shown = [(f"{r.section}: {r.metric} ({r.unit})", fathom_advantage(r)) for r in rows]
    shown = [(label, value) for label, value in shown if value is not None]
    if not shown:
        return
    labels, values = zip(*shown, strict=True)
    height = max(3.0, 0.32 * len(values) + 1.4)
    figure, axes = plt.subplots(figsize=(12, height))
    colours = [
        "#8a8a8a" if abs(v - 1) <= 0.02 else "#2a7f62" if v > 1 else "#b3472d" for v in values
    ]
    positions = list(range(len(values)))
    drawn = [max(v, CHART_FLOOR) for v in values]
    # Bars grow from 1× (a tie) towards whichever side does better.
    axes.barh(positions, [d - 1 for d in drawn], left=1, color=colours)
    axes.set_yticks(positions, labels=labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    ticks = [0.1, 0.25, 0.5, 1, 2, 4, 8]
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}×"))
    axes.xaxis.set_minor_locator(FixedLocator([]))
    axes.set_xlim(CHART_FLOOR * 0.9, max(8.0, max(drawn) * 1.3))
    axes.axvline(1, color="black", linewidth=0.8)
    axes.set_xlabel("times better fathom does (deepagents ÷ fathom; inverted where higher is "
                    "better)\ngreen: fathom better, red: deepagents better, grey: within 2 %")
    axes.set_title("fathom vs deepagents, same scripted model, same run")
    for position, value, bar in zip(positions, values, drawn, strict=True):
        if bar >= 1:
            axes.text(bar, position, f" {value:.2f}×", va="center", ha="left", fontsize=7)
        elif bar < 0.7:  # a long bar to the left: label it inside, next to 1×
            axes.text(0.95, position, f"{value:.2f}× ", va="center", ha="right", fontsize=7,
                      color="white")
        else:
            axes.text(bar, position, f"{value:.2f}× ", va="center", ha="right", fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_results(rows: Sequence[Row], patterns: dict[str, Any] | None, seconds: float,
                  directory: Path) -> Path:
    """`latest.json` in `directory`: machine, rows, patterns table, total time."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "latest.json"
    data = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "seconds": round(seconds, 1),
        "rows": [row.as_dict() for row in rows],
        "patterns": patterns,
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def run(sections: Sequence[str], ref_python: Path, with_patterns: bool,
        results_dir: Path) -> int:
    """Run the chosen sections, print the table, write the JSON and the chart."""
    started = time.perf_counter()
    rows: list[Row] = []
    failed: list[str] = []
    for name in sections:
        print(f"== {name}", file=sys.stderr, flush=True)
        section_start = time.perf_counter()
        module = importlib.import_module(name)
        try:
            rows.extend(module.collect(ref_python))
        except Exception as error:  # report the others anyway; the exit code says it failed
            failed.append(f"{name}: {type(error).__name__}: {error}")
            print(f"   {name} failed: {error}", file=sys.stderr, flush=True)
        print(f"   {time.perf_counter() - section_start:.1f} s", file=sys.stderr, flush=True)
    print_table("fathom vs deepagents (same scripted model, same run)",
                ["section", "metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom",
                 "better"], table_rows(rows))
    patterns_results = None
    if with_patterns:
        patterns = importlib.import_module("patterns")
        patterns_results = patterns.run_all()
        print_table("Multi-agent patterns (fathom only): model calls and tokens",
                    ["scenario", "pattern", "calls", "ref", "tokens", "model", "ratio",
                     "wall/L"], patterns.table_rows(patterns_results))
    seconds = time.perf_counter() - started
    path = write_results(rows, patterns_results, seconds, results_dir)
    write_chart(rows, results_dir / "latest.png")
    print(f"wrote {path} and {results_dir / 'latest.png'} in {seconds:.0f} s")
    if failed:
        print("failed sections:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated sections (default: all)")
    parser.add_argument("--no-patterns", action="store_true", help="skip the patterns table")
    parser.add_argument("--ref-python", type=Path, default=REF_PYTHON)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    sections = list(SECTIONS)
    if args.only:
        sections = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(sections) - set(SECTIONS))
        if unknown:
            parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    return run(sections, args.ref_python, not args.no_patterns, args.results)


if __name__ == "__main__":
    sys.exit(main())
