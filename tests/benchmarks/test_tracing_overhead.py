"""The tracing-overhead benchmark's worker measures both agents and exports the spans."""

from __future__ import annotations

import fathom.tracing

from .conftest import load_benchmark


def test_the_worker_runs_both_agents_and_the_traced_one_exports_every_span() -> None:
    bench = load_benchmark("tracing_overhead")
    row = bench.run_side(steps=4, rounds=2)
    assert not fathom.tracing.is_enabled()  # the worker turns tracing off again
    assert row["off_ms_per_step"] > 0 and row["on_ms_per_step"] > 0
    # per traced run: the agent, 5 model calls and 4 tool calls
    assert row["spans"] == 2 * (1 + 5 + 4)
    rows = bench.rows_from([row])
    assert [r.metric for r in rows] == ["CPU per step, tracing off", "CPU per step, tracing on",
                                        "tracing overhead per step"]
    assert rows[2].fathom == row["overhead_pct"] and rows[2].unit == "%"
    assert all(r.deepagents is None for r in rows)
