"""The step benchmark's per-step timeline, its LangChain floor and its long-run rows.

The worker records the CPU clock at every model call; a step's harness CPU is the time
from one call to the next less the scripted model's own share. The floor is LangChain's
`create_agent` alone. Only fathom and the floor run here (CI has no reference environment).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def step_overhead() -> ModuleType:
    return load_benchmark("step_overhead")


def test_a_step_is_the_time_between_model_calls_less_the_model(
    step_overhead: ModuleType,
) -> None:
    # calls at CPU 0, 10 and 25 s, spending 2, 3 and 1 s in the model
    marks = [(0.0, 2.0), (10.0, 3.0), (25.0, 1.0)]
    assert step_overhead._timeline(marks) == [8_000.0, 12_000.0]


def test_the_fathom_worker_reports_a_timeline_of_every_step(step_overhead: ModuleType) -> None:
    row = step_overhead.run_side("fathom", 30)
    assert len(row["deciles_ms"]) == 10 and all(d > 0 for d in row["deciles_ms"])
    assert row["first10_ms"] > 0 and row["last10_ms"] > 0
    # the ten tenths of the run add up to the harness CPU of its steps (less the first
    # call's set-up before the first model call and the last answer after the last step)
    assert sum(row["deciles_ms"]) * 3 <= row["harness_cpu_ms_per_step"] * 30 + 0.01


def test_the_floor_is_create_agent_alone_with_the_same_tool(step_overhead: ModuleType) -> None:
    row = step_overhead.run_worker(
        step_overhead.__file__, "fathom", ["--steps", "4", "--floor"], Path(sys.executable)
    )
    assert row["side"] == "floor"
    assert row["model_calls"] == 5 and row["tool_messages"] == 4


def _fake(side: str, harness: float, first: float, last: float, rss: float) -> dict[str, Any]:
    return {
        "side": side,
        "cpu_ms_per_step": harness + 1,
        "harness_cpu_ms_per_step": harness,
        "first10_ms": first,
        "last10_ms": last,
        "max_rss_mib": rss,
    }


def test_long_run_rows_give_growth_and_rss_with_the_floor_in_the_notes(
    step_overhead: ModuleType,
) -> None:
    results = {
        ("fathom", 200): [_fake("fathom", 5.0, 5.0, 5.0, 90)],
        ("deepagents", 200): [_fake("deepagents", 10.0, 9.0, 11.0, 95)],
        ("floor", 200): [_fake("floor", 4.0, 4.0, 4.5, 85)],
        ("fathom", 2000): [_fake("fathom", 9.0, 5.0, 6.0, 120)],
        ("deepagents", 2000): [_fake("deepagents", 30.0, 8.0, 80.0, 160)],
        ("floor", 2000): [_fake("floor", 8.0, 4.0, 20.0, 110)],
    }
    rows = {r.metric: r for r in step_overhead.rows_from(results, sizes=[200], repeats=1)}
    growth = rows["last 10 ÷ first 10 steps, N=2,000"]
    assert (growth.fathom, growth.deepagents) == (pytest.approx(1.2), pytest.approx(10.0))
    assert growth.winner == "fathom" and "LangChain floor 5.00 ×" in growth.note
    rss = rows["peak RSS after 2,000 steps"]
    assert (rss.fathom, rss.deepagents) == (120, 160) and "LangChain floor 110.0 MiB" in rss.note
    assert "LangChain floor 4.00 ms" in rows["harness CPU per step, N=200"].note

    floors = step_overhead.floors_from(results, sizes=[200], repeats=1)
    assert floors["harness CPU per step, N=2,000"] == 8.0
    assert floors["last 10 ÷ first 10 steps, N=2,000"] == pytest.approx(5.0)
