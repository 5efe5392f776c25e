"""The dynamic-subagents benchmark's fathom parts, run in-process (no reference venv)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import load_benchmark

pytest.importorskip("pydantic_monty")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("dynamic_subagents")


def test_one_eval_fans_out_to_twenty_subagents_in_two_parent_calls(bench: ModuleType) -> None:
    row = bench.run_fan_out("eval", 0.001)

    assert (row["parent_calls"], row["subagent_calls"]) == (2, 20)
    assert '"done": 20' in row["answer"] and "item 19: summarised." in row["answer"]


def test_task_per_turn_costs_a_parent_call_per_item_and_many_more_tokens(
    bench: ModuleType,
) -> None:
    per_turn = bench.run_fan_out("task-per-turn", 0.001)
    one_eval = bench.run_fan_out("eval", 0.001)

    assert (per_turn["parent_calls"], per_turn["subagent_calls"]) == (21, 20)
    assert per_turn["answer"] == "Report: 20 summaries."
    # The benchmark's goal (token counts are deterministic, unlike wall times).
    assert per_turn["parent_input_tokens"] >= 5 * one_eval["parent_input_tokens"]


def test_interpreter_worker_times_eleven_evals(bench: ModuleType, capsys) -> None:
    assert bench.main(["--side", "fathom"]) == 0

    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    row = json.loads(lines[-1])
    assert (row["side"], row["evals"]) == ("fathom", 11)
    assert {"cold_ms", "warm_ms", "import_ms"} <= set(row)


def test_rows_compare_the_interpreters_and_leave_a_missing_side_empty(
    bench: ModuleType, tmp_path: Path
) -> None:
    fan_out = [{"mode": m, "parent_input_tokens": t, "parent_calls": c, "wall_over_latency": w}
               for m, t, c, w in (("task-per-turn", 60000, 21, 41.0),
                                  ("task-one-message", 9000, 2, 3.1), ("eval", 6000, 2, 3.0))]
    interp = {"fathom": [{"cold_ms": v, "warm_ms": 20.0, "import_ms": 900.0}
                         for v in (10.0, 12.0, 50.0)]}

    rows = bench.to_rows(fan_out, interp, 0.2)

    tokens = rows[0]
    assert (tokens.fathom, tokens.deepagents) == (6000, None)
    assert "task per turn ÷ eval 10.0×" in tokens.note
    cold = next(r for r in rows if r.metric.startswith("interpreter cold start"))
    assert (cold.fathom, cold.deepagents) == (12.0, None)  # the median of three
    path = bench.write_json(fan_out, interp, rows, 0.2, 3, tmp_path / "out.json")
    assert json.loads(path.read_text())["rows"][0]["fathom"] == 6000
