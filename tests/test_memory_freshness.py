"""Memory and skills are read fresh at every turn of a checkpointed thread; the reference's
are not.

`tests/freshness_agent.py` runs the same agent code on both harnesses (only the import
differs): two turns of one thread, with `AGENTS.md` and a skill's description changed between
them, and prints each turn's system prompt. fathom shows the new text in the second turn. The
reference (deepagents 0.7.32) loads memory and skills once per thread and keeps them in its
checkpointed state, so its second turn still shows the first text; `docs/memory.md` records
the difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.server.servers import REPO_ROOT
from tests.system_requirements import needs

SCRIPT = REPO_ROOT / "tests" / "freshness_agent.py"
REFERENCE_PYTHON = REPO_ROOT / "benchmarks" / ".venv-deepagents" / "bin" / "python"
OLD = ("The user prefers tea.", "Ship the weekly release.")
NEW = ("The user prefers coffee now.", "Ship the release on Mondays only.")


def _prompts(python: Path | str, harness: str, root: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    done = subprocess.run(
        [str(python), str(SCRIPT), harness, str(root)], env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    prompts = json.loads(done.stdout.strip().splitlines()[-1])["prompts"]
    assert len(prompts) == 2
    return prompts


def _shows(prompt: str, texts: tuple[str, str]) -> tuple[bool, bool]:
    return texts[0] in prompt, texts[1] in prompt


def test_a_changed_memory_file_and_skill_are_in_the_next_turn_of_the_thread(
    tmp_path: Path,
) -> None:
    first, second = _prompts(sys.executable, "fathom", tmp_path / "root")
    assert _shows(first, OLD) == (True, True)
    assert _shows(second, NEW) == (True, True)
    assert _shows(second, OLD) == (False, False)


@pytest.mark.skipif(not REFERENCE_PYTHON.exists(), reason=needs("the reference package"))
def test_the_reference_keeps_the_first_turn_s_memory_and_skills(tmp_path: Path) -> None:
    """What deepagents 0.7.32 does with the same code: the old text, in both turns."""
    first, second = _prompts(REFERENCE_PYTHON, "deepagents", tmp_path / "root")
    assert _shows(first, OLD) == (True, True)
    assert _shows(second, OLD) == (True, True)
    assert _shows(second, NEW) == (False, False)
