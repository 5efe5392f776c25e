"""`benchmarks/patterns.py` reproduces the cost table of LangChain's multi-agent docs: calls
exactly, tokens within the published bands (~9K, 14K+, ~15K), parallel patterns on a shorter
critical path than serial ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from .conftest import load_script

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling `_harness`
    return load_script(BENCHMARKS / "patterns.py", "patterns_benchmark")


@pytest.fixture(scope="module")
def results(bench: ModuleType) -> dict:
    return bench.run_all(latency=0.0)


@pytest.mark.parametrize(
    ("scenario", "calls"),
    [
        ("one_shot", {"subagents": 4, "handoffs": 3, "skills": 3, "router": 3}),
        ("repeated", {"subagents": 8, "handoffs": 5, "skills": 5, "router": 6}),
        ("multi_domain", {"subagents": 5, "handoffs": 7, "skills": 3, "router": 5}),
    ],
)
def test_call_counts_match_the_reference(results: dict, scenario: str, calls: dict) -> None:
    assert {p: r["calls"] for p, r in results[scenario].items()} == calls


def test_multi_domain_tokens_are_in_the_published_bands(results: dict) -> None:
    tokens = {p: r["tokens"] for p, r in results["multi_domain"].items()}
    assert 8_100 <= tokens["subagents"] <= 9_900
    assert 8_100 <= tokens["router"] <= 9_900
    assert 13_500 <= tokens["skills"] <= 16_500
    assert tokens["handoffs"] >= 14_000
    assert tokens["skills"] > 1.5 * tokens["subagents"]


def test_every_figure_is_within_five_percent_of_the_token_model(bench: ModuleType,
                                                                results: dict) -> None:
    for scenario, patterns in bench.REFERENCE.items():
        for pattern, reference in patterns.items():
            measured = results[scenario][pattern]["tokens"]
            assert abs(measured - reference["tokens"]) <= 0.05 * reference["tokens"], (
                scenario, pattern, measured)


def test_token_model_counts_messages_as_documented(bench: ModuleType) -> None:
    count = bench.notes_tokens
    assert count(SystemMessage("one two three")) == 3
    assert count(HumanMessage("Buy coffee")) == 10
    assert count(HumanMessage(" ".join(["w"] * 25))) == 25
    assert count(ToolMessage("a b c d", tool_call_id="1")) == 4
    call = {"name": "task", "args": {"description": "x"}, "id": "1"}
    findings = {"name": "note_findings", "args": {"findings": "a b c"}, "id": "2"}
    classify = {"name": "ClassificationResult",
                "args": {"classifications": [{}, {}, {}]}, "id": "3"}
    assert count(AIMessage("hi there", tool_calls=[call])) == 22
    assert count(AIMessage("", tool_calls=[findings])) == 3
    assert count(AIMessage("", tool_calls=[classify])) == 60


def test_handoffs_make_their_calls_one_after_another(bench: ModuleType) -> None:
    # A lower bound only: seven sleeps of one latency in turn cannot take less, however
    # loaded the machine. How much shorter the parallel patterns' critical path is, is the
    # benchmark's result; test_router.py and test_subagents.py prove that they overlap.
    latency = 0.05
    walls = {p: bench.run_scenario("multi_domain", p, latency).wall_latencies
             for p in ("subagents", "router", "handoffs")}
    assert walls["handoffs"] >= 7  # seven calls, one after another
    assert all(w > 0 for w in walls.values())


def test_main_writes_the_results_file(bench: ModuleType, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "patterns.json"
    assert bench.main(["--latency", "0.01", "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data) == {"one_shot", "repeated", "multi_domain"}
    assert data["one_shot"]["subagents"]["calls"] == 4
    assert set(data["one_shot"]["router"]) >= {"calls", "tokens"}
    assert "Multi-agent patterns" in capsys.readouterr().out
