"""The prompt-overhead and prefix-stability benchmarks' fathom workers, run in-process.

CI has no reference environment, so only fathom's side runs here. Token counts use
tiktoken with the offline `cl100k_base` encoding (in the `dev` and `bench` extras).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import load_benchmark as _load

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"




@pytest.fixture(scope="module")
def overhead() -> ModuleType:
    return _load("prompt_overhead")


@pytest.fixture(scope="module")
def prefix() -> ModuleType:
    return _load("prefix_stability")


@pytest.fixture(scope="module")
def fathom_prompts(overhead: ModuleType) -> dict[str, dict[str, Any]]:
    """The fathom worker's first requests: default, full and hand-written configurations."""
    result = overhead.run_side("fathom")
    assert result["side"] == "fathom"
    configs: dict[str, dict[str, Any]] = result["configs"]
    return configs


@pytest.fixture(scope="module")
def fathom_prefix(prefix: ModuleType) -> dict[str, Any]:
    """The fathom worker's 20-step prefix-stability run."""
    result: dict[str, Any] = prefix.run_side("fathom")
    return result


def _tokens(overhead: ModuleType) -> Any:
    """`count_tokens` (cl100k_base), checked on a known string."""
    assert overhead.count_tokens("hello world") == 2
    return overhead.count_tokens


# --------------------------------------------------------------------------- prompt overhead


def test_the_worker_records_every_configuration(
    fathom_prompts: dict[str, Any], overhead: ModuleType
) -> None:
    assert set(fathom_prompts) == {"default", "full", "handwritten"}
    for request in fathom_prompts.values():
        assert request["user"] == overhead.USER_MESSAGE
        assert request["tools_json"].startswith("[")


def test_the_full_agent_carries_its_tool_subagent_memory_and_skill(
    fathom_prompts: dict[str, Any], overhead: ModuleType
) -> None:
    default, full = fathom_prompts["default"], fathom_prompts["full"]
    assert "lookup_order" in full["tool_names"] and "lookup_order" not in default["tool_names"]
    assert "task" in full["tool_names"]
    assert overhead.SUBAGENT_NAME in full["tools_json"]
    assert "Cite versions when comparing" in full["system"]  # AGENTS.md
    assert overhead.SKILL_NAME in full["system"]
    assert fathom_prompts["handwritten"]["tool_names"] == ["research"]


def test_system_prompt_sizes_are_ordered_by_configuration(fathom_prompts: dict[str, Any]) -> None:
    sizes = {name: len(request["system"]) for name, request in fathom_prompts.items()}
    assert sizes["handwritten"] < sizes["default"] < sizes["full"]


def test_token_counts_are_sane(fathom_prompts: dict[str, Any], overhead: ModuleType) -> None:
    _tokens(overhead)
    counted = {name: overhead.figures(request) for name, request in fathom_prompts.items()}
    assert counted["default"]["system_tokens"] > 100
    assert counted["full"]["system_tokens"] > counted["default"]["system_tokens"]
    assert counted["handwritten"]["system_tokens"] < counted["default"]["system_tokens"]
    assert counted["handwritten"]["total_tokens"] < counted["default"]["total_tokens"]
    for figures in counted.values():
        assert figures["system_tokens"] < figures["system_chars"]
        assert figures["tools_tokens"] < figures["tools_chars"]
        assert figures["total_tokens"] > figures["system_tokens"] + figures["tools_tokens"]


def test_rows_without_the_reference_side(
    fathom_prompts: dict[str, Any], overhead: ModuleType
) -> None:
    _tokens(overhead)
    rows = overhead.rows_from({"fathom": {"side": "fathom", "configs": fathom_prompts}})
    assert len(rows) == 3 * len(overhead.METRICS)
    assert all(row.deepagents is None and row.fathom is not None for row in rows)
    assert any("2,622" in row.note for row in rows)


# --------------------------------------------------------------------------- prefix stability


def test_the_twenty_step_run_is_measured(fathom_prefix: dict[str, Any], prefix: ModuleType) -> None:
    assert len(prefix.STEPS) == 20
    assert fathom_prefix["tool_steps"] == 20
    assert fathom_prefix["main_requests"] >= 20
    assert fathom_prefix["subagent_requests"] >= 1
    assert len(fathom_prefix["fractions"]) == fathom_prefix["main_requests"] - 1


def test_prefix_fractions_are_fractions(fathom_prefix: dict[str, Any]) -> None:
    fractions = fathom_prefix["fractions"]
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert fathom_prefix["min"] == min(fractions)
    assert 0.0 <= fathom_prefix["min"] <= fathom_prefix["mean"] <= 1.0
    assert fathom_prefix["below"] == sum(f < 0.99 for f in fractions)


def test_common_prefix_length(prefix: ModuleType) -> None:
    assert prefix.common_prefix_length("", "abc") == 0
    assert prefix.common_prefix_length("abc", "abc") == 3
    assert prefix.common_prefix_length("abc", "abcd") == 3
    assert prefix.common_prefix_length("abXd", "abYd") == 2
    assert prefix.common_prefix_length("xbc", "abc") == 0


def test_prefix_pairs_scores_an_extension_as_one_and_a_rewrite_lower(prefix: ModuleType) -> None:
    head = '[{"system":"You help."},{"tools":[]},{"messages":['
    first = head + '{"content":"hi"}]}]'
    extended = head + '{"content":"hi"},{"content":"hello"}]}]'
    rewritten = '[{"system":"You help, now at step 2."},{"tools":[]},{"messages":[' + (
        '{"content":"hi"},{"content":"hello"}]}]'
    )
    kept, broken = prefix.prefix_pairs([first, extended, rewritten])
    assert kept["fraction"] == 1.0
    assert kept["section"] == "messages"
    assert broken["fraction"] < 0.5
    assert broken["section"] == "system"
    assert "context" in broken


def test_prefix_rows_without_the_reference_side(
    fathom_prefix: dict[str, Any], prefix: ModuleType
) -> None:
    rows = prefix.rows_from({"fathom": fathom_prefix})
    assert [row.better for row in rows] == ["higher", "higher", "lower"]
    assert all(row.deepagents is None for row in rows)
