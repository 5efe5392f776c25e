"""The project's text names no internal issue numbers, and no file that is not there.

Users read the docs, README, examples, source and benchmarks without the project's issue
tracker, so "(issue N)" or "issue N's goal" tells them nothing: the text names the topic
instead. Upstream issues are fine to cite by their URL. The patterns below are spelled in
parts so this file never matches them. And every `src/fathom/...` or `tests/...` path the
README, `ARCHITECTURE.md` or `docs/` names exists, so the text follows the tree when it moves.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

SCOPE = ("README.md", "docs", "examples", "src", "benchmarks")
"""What users read: the tests are not in it."""

WORD = "iss" + "ue"
INTERNAL_ISSUE = re.compile(rf"\b{WORD}s?\s*#?\s*\d+", re.IGNORECASE)
"""`issue N`, `(issue N)`, `Issue N's goal`, `issues N and M`, `issue #N`, N a number."""

URL = re.compile(r"https?://\S+")
"""An upstream issue cited by its address (`github.com/owner/repo/issues/123`) is fine."""


def _lines_with_the_word() -> list[str]:
    """`path:line:text` of every line in `SCOPE` that holds the word, as `git grep` finds it
    in tracked and untracked (not ignored) text files."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    done = subprocess.run(
        ["git", "grep", "--untracked", "-n", "-I", "-i", "-e", WORD, "--", *SCOPE,
         f":(exclude){THIS_FILE}"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):  # 1: no match
        raise AssertionError(done.stderr)
    return done.stdout.splitlines()


def internal_issue_references(line: str) -> list[str]:
    """The internal issue references in `line`, leaving out those inside URLs."""
    return INTERNAL_ISSUE.findall(URL.sub("", line))


def test_no_text_names_an_internal_issue_number() -> None:
    hits = [line for line in _lines_with_the_word() if internal_issue_references(line)]
    assert hits == [], "name the topic instead of the issue:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "text",
    [
        f"## Core harness ({WORD} 2)",
        f"belongs to the `fathom` command ({WORD} 7), which",
        f"| {WORD.capitalize()} 17's goal |",
        f"two parts in one run ({WORD} 19).",
        f"the {WORD}s 3 and 5",
        f"see {WORD} #12",
    ],
)
def test_internal_references_are_found(text: str) -> None:
    assert internal_issue_references(text)


@pytest.mark.parametrize(
    "text",
    [
        f"https://github.com/langchain-ai/langgraph/{WORD}s/1234 describes it",
        f"Found 3 {WORD}s matching 'auth': #142 (API auth docs), #89 (OAuth flow)",
        f"classifies the {WORD} as hardware or software",
        f"(({WORD}_type: IssueType, runtime: ToolRuntime[None, SupportState])",
    ],
)
def test_other_uses_of_the_word_are_allowed(text: str) -> None:
    assert internal_issue_references(text) == []


REPO_PATH = re.compile(r"`((?:src/fathom|tests)/[\w/.*-]+?)/?`")
"""A path in backquotes under `src/fathom/` or `tests/` (a `*` matches as a glob)."""


def test_every_path_the_docs_name_exists() -> None:
    texts = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [
        f"{text.relative_to(ROOT)}: {path}"
        for text in texts
        for path in REPO_PATH.findall(text.read_text(encoding="utf-8"))
        if not any(ROOT.glob(path))
    ]
    assert missing == []
