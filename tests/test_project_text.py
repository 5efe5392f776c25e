"""The project's text cites what its users can read.

Docs, examples, comments and benchmark labels point to public documentation (the Deep
Agents and LangChain docs) or to fathom's own docs, never to design notes that ship
outside the repository: no "seed" documents and no paths into a `shared` folder next to
the checkout. "seed" is fine where it means a random seed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

RANDOM_SEED = re.compile(
    r"random[ _.-]?seed|randomly[_-]seed|random[ -]order seeds?\b|\.seed\(|\bseed\s*=\s*\d|--seed\b"
    r"|PYTHONHASHSEED",
    re.IGNORECASE,
)
"""Lines where "seed" means a random seed."""


def _git_grep(*args: str) -> list[str]:
    """`git grep -n <args>` over the tracked files, except this one, as `path:line:text`."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    done = subprocess.run(
        ["git", "grep", "--untracked", "-n", "-I", *args, "--", ".", f":(exclude){THIS_FILE}"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):  # 1: no match
        raise AssertionError(done.stderr)
    return done.stdout.splitlines()


def test_no_text_cites_seed_documents() -> None:
    hits = [line for line in _git_grep("-i", "seed") if not RANDOM_SEED.search(line)]
    assert hits == []


def test_no_text_points_into_a_shared_folder_outside_the_repository() -> None:
    outside = "../" + "shared"  # spelled in two parts so this file never matches itself
    assert _git_grep("-F", "-e", outside) == []


def test_random_seeds_are_allowed() -> None:
    assert RANDOM_SEED.search("random.seed(4)")
    assert RANDOM_SEED.search("rng = Random(seed=7)")
    assert RANDOM_SEED.search("pytest -p randomly --randomly-seed=12")
    assert RANDOM_SEED.search("the random-order seeds of each run")
    assert not RANDOM_SEED.search("see seed" + " 002 §3")  # split: the text must not match itself
