"""The six dynamic-subagent patterns of `examples/dynamic_subagents/patterns.py` run in
the code interpreter and make exactly the model calls the pattern implies.

Each pattern is one `eval` by the parent (2 parent model calls: the code, then the
answer); the subagents' counts are what the code's control flow asks for, so a pattern
that replayed code, ran a subagent twice or missed a bye would show here.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("pydantic_monty")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dynamic_subagents" / "patterns.py"


@pytest.fixture(scope="module")
def patterns() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dynamic_subagent_patterns", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_classify_and_act_routes_each_ticket_to_the_handler_for_its_label(patterns):
    run = patterns.classify_and_act()

    assert run.parent_calls == 2
    assert run.subagent_calls == {"classifier": 4, "billing-agent": 2, "bug-triager": 1,
                                  "product-agent": 1}
    assert [(r["label"], r["action"].split(":")[0]) for r in run.result] == [
        ("billing", "refund issued"), ("bug", "bug filed"),
        ("feature", "request logged"), ("billing", "refund issued"),
    ]


def test_fan_out_and_synthesize_runs_one_researcher_per_topic_then_one_writer(patterns):
    run = patterns.fan_out_and_synthesize()

    assert run.parent_calls == 2
    assert run.subagent_calls == {"researcher": 5, "writer": 1}
    assert run.result == {
        "topics": 5,
        "summary": "5 findings: checkpointing, streaming, interrupts, subgraphs, stores",
    }


def test_adversarial_verification_retries_only_the_answer_the_verifier_broke(patterns):
    run = patterns.adversarial_verification()

    assert run.parent_calls == 2
    assert run.subagent_calls == {"solver": 4, "verifier": 4}
    assert run.result == [
        {"problem": "17 * 23", "answer": "391", "attempts": 2},
        {"problem": "12 * 12", "answer": "144", "attempts": 1},
        {"problem": "31 * 7", "answer": "217", "attempts": 1},
    ]


def test_generate_and_filter_scores_only_the_candidates_that_survive_the_filter(patterns):
    run = patterns.generate_and_filter()

    assert run.parent_calls == 2
    # 9 proposals: 2 case/space duplicates and 2 bad lengths dropped in code, 5 scored.
    assert run.subagent_calls == {"generator": 3, "scorer": 5}
    assert run.result == {"kept": 5, "top": ["GraphLoop", "Fathom", "Bubbles"]}


def test_tournament_of_five_makes_four_judge_calls_with_byes(patterns):
    run = patterns.tournament()

    assert run.parent_calls == 2
    assert run.subagent_calls == {"judge": 4}
    assert run.result == {
        "champion": "plan B",
        "judge_calls": 4,
        "rounds": [{"matches": 2, "bye": ["plan E"]}, {"matches": 1, "bye": ["plan E"]},
                   {"matches": 1, "bye": []}],
    }


def test_loop_until_done_dedupes_by_a_stable_key_and_stops_when_nothing_is_new(patterns):
    run = patterns.loop_until_done()

    assert run.parent_calls == 2
    assert run.subagent_calls == {"explorer": 8}  # rounds of 1, 3 and 4
    assert run.result["rounds"] == 3 and run.result["done"] is True
    found = run.result["found"]
    assert len(found) == 8
    assert len({name.lower() for name in found}) == len(found)  # one node per key


def test_loop_until_done_stops_at_the_round_cap(patterns):
    run = patterns.loop_until_done(max_rounds=2)

    assert run.parent_calls == 2
    assert run.subagent_calls == {"explorer": 4}  # rounds of 1 and 3
    assert run.result["rounds"] == 2 and run.result["done"] is False


def test_the_example_runs_as_a_script_and_prints_each_result():
    done = subprocess.run([sys.executable, str(EXAMPLE), "tournament", "loop-until-done"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 0, done.stderr
    assert "== tournament: parent 2 model calls, subagents {'judge': 4}" in done.stdout
    assert '"champion": "plan B"' in done.stdout
    assert "== loop-until-done: parent 2 model calls, subagents {'explorer': 8}" in done.stdout
