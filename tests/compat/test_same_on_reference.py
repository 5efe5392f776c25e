"""The compatibility tests describe the reference's behaviour: they pass on deepagents 0.7.32.

The other files of this folder are copied to a scratch directory with every `fathom` import
changed to `deepagents` (except `fathom.testing`, the scripted model, which the reference's
environment imports from `src/`), and run with pytest in `benchmarks/.venv-deepagents`. Tests
marked `fathom_only` are left out. A failure there means a compatibility test asserts
something the reference does not do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.system_requirements import needs

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
REFERENCE_PYTHON = REPO_ROOT / "benchmarks" / ".venv-deepagents" / "bin" / "python"
PACKAGE_WORD = re.compile(r"\bfathom\b(?!\.testing)")
RUN_TIMEOUT_S = 600
"""Bounds a hang of the reference run; it normally ends within a minute."""


def _reference_has_pytest() -> bool:
    if not REFERENCE_PYTHON.exists():
        return False
    probe = subprocess.run(
        [str(REFERENCE_PYTHON), "-c", "import pytest, pytest_asyncio"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _reference_has_pytest(), reason=needs("the reference package", "with pytest")
)


def as_reference_test(source: str) -> str:
    """A compatibility test's text with its `fathom` imports changed to `deepagents`."""
    return PACKAGE_WORD.sub("deepagents", source)


def test_rewriting_changes_imports_and_keeps_the_scripted_model() -> None:
    lines = ["from fathom.backends import X", "from fathom.testing import Model", "import fathom"]
    assert as_reference_test("\n".join(lines)).splitlines() == [
        "from deepagents.backends import X",
        "from fathom.testing import Model",
        "import deepagents",
    ]


def test_compatibility_tests_pass_on_the_reference_package(tmp_path: Path) -> None:
    target = tmp_path / "reference_compat"
    target.mkdir()
    copied = 0
    for path in sorted(HERE.glob("*.py")):
        if path.name == Path(__file__).name:
            continue
        (target / path.name).write_text(
            as_reference_test(path.read_text(encoding="utf-8")), encoding="utf-8"
        )
        copied += path.name.startswith("test_")
    for folder in HERE.iterdir():
        if folder.is_dir() and folder.name not in {"__pycache__"}:
            shutil.copytree(folder, target / folder.name)
    if copied == 0:
        pytest.skip("no compatibility tests yet")
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    for name in ("FATHOM_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    result = subprocess.run(
        [
            str(REFERENCE_PYTHON),
            "-m",
            "pytest",
            str(target),
            "-q",
            "-m",
            "not fathom_only",
            "-p",
            "no:cacheprovider",
            "-c",
            str(tmp_path / "pytest.ini"),
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0, f"compatibility tests fail on the reference package:\n{tail}"
    assert re.search(r"\d+ passed", result.stdout), tail
