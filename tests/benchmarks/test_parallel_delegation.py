"""The parallel-delegation benchmark's fathom worker, run in-process (no reference venv)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import load_benchmark

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
LATENCY = 0.1


def _load() -> ModuleType:
    return load_benchmark("parallel_delegation")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load()


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_fathom_runs_the_four_subagents_at_the_same_time(bench: ModuleType, mode: str) -> None:
    row = bench.run_side("fathom", mode, LATENCY)

    assert row["model_calls"] == 10
    assert (row["main_calls"], row["subagent_calls"], row["other_calls"]) == (2, 8, 0)
    assert row["answer"] == "Done: 4 reports received."
    # The wall time and spreads are the benchmark's results, not claims a loaded test
    # machine can check; tests/middleware/test_subagents.py proves the four run at once.
    assert {"wall_over_latency", "spread_first_over_latency"} <= set(row)


def test_a_wrong_call_count_fails_loudly(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "EXPECTED_CALLS", 11)
    with pytest.raises(bench.WrongCallCount, match="10 model calls, expected 11"):
        bench.run_side("fathom", "invoke", 0.01, warmup=False)


def test_worker_cli_prints_one_json_line(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    status = bench.main(["--side", "fathom", "--mode", "invoke", "--latency", "0.01"])

    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert status == 0 and len(lines) == 1
    row = json.loads(lines[0])
    assert (row["side"], row["mode"], row["model_calls"]) == ("fathom", "invoke", 10)


def test_rows_take_the_median_and_leave_a_missing_side_empty(bench: ModuleType) -> None:
    runs = {
        ("fathom", "invoke"): [{"wall_over_latency": v} for v in (4.5, 4.2, 9.0)],
        ("fathom", "ainvoke"): [{"wall_over_latency": v} for v in (4.4, 4.3, 4.35)],
    }
    rows = bench.to_rows(runs, 0.2, 3)

    assert [r.metric for r in rows] == [
        "4 parallel subagents, invoke: wall / L",
        "4 parallel subagents, ainvoke: wall / L",
    ]
    assert [r.fathom for r in rows] == [4.5, 4.35]
    assert all(r.deepagents is None and r.better == "lower" for r in rows)
