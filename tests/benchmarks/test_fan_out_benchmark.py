"""The fan-out benchmark's fathom worker, run in-process, and its table rows."""

from __future__ import annotations

from types import ModuleType

import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("fan_out")


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "async"])
def test_fathom_worker_hands_every_part_out_and_counts_calls_in_flight(
    bench: ModuleType, mode: str
) -> None:
    row = bench.run_side("fathom", mode, 4, 0.05)
    # parent's two calls and four subagents (async: the parent may also read a notice)
    assert row["model_calls"] >= 6
    assert 1 <= row["max_in_flight"] <= 5
    assert row["ideal"] == (2.0 if mode == "async" else 3.0)
    # wall times are the benchmark's results; tests/test_fan_out_concurrency.py proves
    # the subagents run at once
    assert row["wall_over_latency"] > 0


def test_rows_pair_each_size_and_mode_with_the_reference(bench: ModuleType) -> None:
    runs = {
        ("fathom", "ainvoke", 4): [{"wall_over_latency": 3.1, "max_in_flight": 4}],
        ("deepagents", "ainvoke", 4): [{"wall_over_latency": 3.3, "max_in_flight": 4}],
        ("fathom", "async", 4): [{"wall_over_latency": 2.1, "max_in_flight": 5}],
    }
    rows = bench.to_rows(runs, [4], 1.0, 1, ["ainvoke", "async"])
    wall, in_flight, async_wall, _ = rows
    assert (wall.fathom, wall.deepagents) == (3.1, 3.3) and wall.winner == "fathom"
    assert in_flight.better == "higher" and in_flight.winner == "tie"
    assert async_wall.deepagents is None and "langgraph dev" in async_wall.note
