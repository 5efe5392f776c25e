"""`benchmarks/bench.py`: the combined table, `latest.json` and the chart, from real rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import load_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("bench")


@pytest.fixture(scope="module")
def rows(bench: ModuleType) -> list:
    """Real rows: the prompt-overhead benchmark, fathom's side only (no reference venv)."""
    return load_benchmark("prompt_overhead").collect(ref_python=Path("/nonexistent/python"))


def test_ratio_winner_and_advantage(bench: ModuleType) -> None:
    row_type = sys.modules["_harness"].Row
    smaller = row_type("s", "size", "tokens", 100, 250)
    assert smaller.ratio == 2.5 and smaller.winner == "fathom"
    assert bench.fathom_advantage(smaller) == 2.5
    reuse = row_type("s", "prefix", "fraction", 0.5, 1.0, better="higher")
    assert reuse.winner == "deepagents" and bench.fathom_advantage(reuse) == 0.5
    assert row_type("s", "x", "ms", 10, 10.1).winner == "tie"
    assert row_type("s", "x", "ms", 10, None).winner == ""


def test_results_and_chart_are_written(bench: ModuleType, rows: list, tmp_path: Path) -> None:
    assert rows and all(row.fathom is not None and row.deepagents is None for row in rows)
    path = bench.write_results(rows, {"one_shot": {}}, 1.5, tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["machine"]["cores"] and data["machine"]["python"]
    assert len(data["rows"]) == len(rows)
    assert {"section", "metric", "unit", "fathom", "deepagents", "ratio", "winner"} <= set(
        data["rows"][0])
    printed = bench.table_rows(rows)
    assert printed[0][4] == "—" and printed[0][5] == "—"
    both = [*rows, sys.modules["_harness"].Row("Step", "cpu", "ms", 5.0, 10.0)]
    bench.write_chart(both, tmp_path / "latest.png")
    assert (tmp_path / "latest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
