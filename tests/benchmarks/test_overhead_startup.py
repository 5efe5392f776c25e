"""The step-overhead and start-up benchmarks' fathom side gives sane figures.

Only fathom runs here (CI has no reference environment): the workers are run in-process or
under this interpreter, with few steps and one repetition, and the driver's row builders are
checked on those results.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import load_benchmark as _load

BENCH_DIR = Path(__file__).resolve().parents[2] / "benchmarks"




@pytest.fixture(scope="module")
def step_overhead() -> ModuleType:
    return _load("step_overhead")


@pytest.fixture(scope="module")
def startup() -> ModuleType:
    return _load("startup")


@pytest.fixture(scope="module")
def startup_row(startup: ModuleType) -> dict[str, Any]:
    """One timed round of the fathom start-up worker, run in-process."""
    row: dict[str, Any] = startup.run_side("fathom", reps=1)
    return row


# --------------------------------------------------------------------------- step overhead


def test_step_worker_in_process(step_overhead: ModuleType) -> None:
    row = step_overhead.run_side("fathom", 5)
    assert row["side"] == "fathom"
    assert row["steps"] == 5
    assert row["model_calls"] == 6  # five tick calls, then the answer
    assert row["tool_messages"] == 5
    assert row["cpu_ms_per_step"] > 0
    assert 0 < row["model_cpu_ms_per_step"] < row["cpu_ms_per_step"]
    assert row["harness_cpu_ms_per_step"] == pytest.approx(
        row["cpu_ms_per_step"] - row["model_cpu_ms_per_step"], abs=1e-3
    )
    assert row["max_rss_mib"] > 0
    assert row["wall_s"] > 0


def test_step_worker_subprocess_and_rows(step_overhead: ModuleType) -> None:
    # The worker as the driver runs it: a fresh interpreter printing one JSON line.
    row = step_overhead.run_worker(
        step_overhead.__file__, "fathom", ["--steps", "3"], Path(sys.executable)
    )
    assert row["steps"] == 3 and row["cpu_ms_per_step"] > 0 and row["max_rss_mib"] > 0

    rows = step_overhead.rows_from({("fathom", 3): [row]}, sizes=[3], repeats=1)
    metrics = [r.metric for r in rows]
    assert metrics == [
        "CPU per step, N=3",
        "harness CPU per step, N=3",
        "peak RSS after 3 steps",
    ]
    for r in rows:
        assert r.section == "Step overhead"
        assert r.fathom is not None and r.fathom > 0
        assert r.deepagents is None and r.ratio is None
        assert "no reference env" in r.note
    assert rows[-1].unit == "MiB" and rows[-1].fathom == row["max_rss_mib"]


def test_step_rows_ratio(step_overhead: ModuleType) -> None:
    def fake(side: str, ms: float, rss: float) -> dict[str, Any]:
        return {
            "side": side,
            "cpu_ms_per_step": ms,
            "harness_cpu_ms_per_step": ms / 2,
            "max_rss_mib": rss,
        }

    results = {
        ("fathom", 200): [fake("fathom", v, 100) for v in (4.0, 5.0, 9.0)],
        ("deepagents", 200): [fake("deepagents", v, 110) for v in (8.0, 10.0, 1.0)],
    }
    rows = step_overhead.rows_from(results, sizes=[200], repeats=3)
    cpu = rows[0]
    assert (cpu.fathom, cpu.deepagents) == (5.0, 8.0)  # medians
    assert cpu.ratio == pytest.approx(1.6) and cpu.winner == "fathom"
    assert rows[-1].metric == "peak RSS after 200 steps" and rows[-1].ratio == pytest.approx(1.1)


# --------------------------------------------------------------------------- start-up


def test_startup_worker_times(startup_row: dict[str, Any]) -> None:
    row = startup_row
    assert row["side"] == "fathom"
    for key in ("pass_ms", "entry_ms", "package_ms", "first_agent_ms", "floor_ms",
                "pass_cpu_ms", "first_agent_cpu_ms", "own_cpu_ms"):
        assert len(row[key]) == 1 and row[key][0] > 0
    # building the first agent costs CPU beyond the bare interpreter
    assert row["first_agent_cpu_ms"][0] > row["pass_cpu_ms"][0]
    # Importing LangChain and LangGraph takes far longer than a bare interpreter.
    assert row["entry_ms"][0] > row["pass_ms"][0]
    fathom_cli = Path(sys.executable).parent / "fathom"
    if fathom_cli.exists():
        assert row["cli"] == str(fathom_cli)
        assert row["help_ms"] is not None and row["help_ms"][0] > 0
        assert row["cli_package"].startswith("fathom ")
    else:
        assert row["help_ms"] is None and row["cli"] is None


def test_startup_rows(startup: ModuleType, startup_row: dict[str, Any]) -> None:
    rows = startup.rows_from({"fathom": startup_row}, rounds=1)
    by_metric = {r.metric: r for r in rows}
    assert set(by_metric) == {
        "import create_deep_agent",
        "first agent: import + create_deep_agent",
        "first agent, CPU",
        "floor: import langchain.agents",
        "harness's own share: import + first agent, CPU",
        "import fathom (lazy names)",
        "CLI --help",
    }
    first = by_metric["first agent: import + create_deep_agent"]
    assert first.fathom is not None and first.fathom > 0 and first.deepagents is None
    entry = by_metric["import create_deep_agent"]
    assert entry.fathom is not None and entry.fathom > 0
    assert entry.deepagents is None and "no reference env" in entry.note
    assert by_metric["import fathom (lazy names)"].deepagents is None
    help_row = by_metric["CLI --help"]
    assert help_row.deepagents is None
    if startup_row["help_ms"] is not None:
        assert help_row.fathom is not None and help_row.fathom > 0


def test_startup_rows_without_reference_command(startup: ModuleType) -> None:
    fathom = {"pass_ms": [10.0], "entry_ms": [110.0], "package_ms": [15.0], "help_ms": [40.0],
              "first_agent_ms": [130.0], "floor_ms": [100.0], "pass_cpu_ms": [8.0],
              "first_agent_cpu_ms": [108.0], "own_cpu_ms": [20.0]}
    ref = {"pass_ms": [12.0, 10.0, 11.0], "entry_ms": [131.0], "help_ms": None, "cli": None,
           "first_agent_ms": [171.0], "floor_ms": [101.0], "pass_cpu_ms": [9.0],
           "first_agent_cpu_ms": [159.0], "own_cpu_ms": [70.0]}
    rows = startup.rows_from({"fathom": fathom, "deepagents": ref}, rounds=1)
    entry, first, cpu, floor, own, package, help_row = rows
    assert (entry.fathom, entry.deepagents) == (100.0, 120.0)
    assert entry.ratio == pytest.approx(1.2)
    assert (first.fathom, first.deepagents) == (120.0, 160.0)
    assert (cpu.fathom, cpu.deepagents) == (100.0, 150.0)
    assert (floor.fathom, floor.deepagents) == (90.0, 90.0)
    assert (own.fathom, own.deepagents) == (20.0, 70.0)
    assert package.fathom == 5.0 and package.deepagents is None
    assert help_row.fathom == 40.0 and help_row.deepagents is None
    assert "no `deepagents` command" in help_row.note
