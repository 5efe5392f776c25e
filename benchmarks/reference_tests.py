"""Run the reference package's own unit tests against fathom, and report the pass rate.

The reference (deepagents) keeps its unit tests in its repository, under
`libs/deepagents/tests/unit_tests`. This script copies that folder to a scratch directory,
changes every `deepagents` import to `fathom` (the one change the README asks of a reference
user), runs pytest on the copy with fathom's interpreter, and reports how many of the tests
pass. A test file that imports one of the reference's private helpers (a module or name whose
last part starts with `_`, such as `deepagents.middleware._utils`) is counted apart: those
helpers are the reference's internals, not its API, and fathom does not promise them.

Usage (the reference's repository is not a dependency, so point the script at a checkout):

    git clone https://github.com/langchain-ai/deepagents /tmp/deepagents
    .venv/bin/python benchmarks/reference_tests.py /tmp/deepagents [--json out.json] [-k EXPR]

It prints one line per test file (passed / total, or "private") and the total; `--failures`
lists each failing test with the last line of its error.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

TESTS_IN_REPO = Path("libs/deepagents/tests/unit_tests")
SOURCE_ROOT = Path(__file__).resolve().parent.parent / "src"
REFERENCE_PYTHON = SOURCE_ROOT.parent / "benchmarks" / ".venv-deepagents" / "bin" / "python"
_IMPORT_WORD = re.compile(r"\bdeepagents\b")


@dataclass
class FileResult:
    """What happened to the tests of one file."""

    path: str
    private: list[str] = field(default_factory=list)
    private_names: set[str] = field(default_factory=set)
    private_passed: int = 0
    private_total: int = 0
    passed: int = 0
    passed_names: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.passed + len(self.failed)


def private_imports(source: str) -> list[str]:
    """The reference's private modules or names a test file imports (`_`-prefixed parts)."""
    found: list[str] = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["<unparsable>"]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "deepagents"
        ):
            parts = node.module.split(".")
            if any(p.startswith("_") for p in parts):
                found.append(node.module)
            found.extend(
                f"{node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and a.name != "__version__"
            )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "deepagents" and any(p.startswith("_") for p in parts):
                    found.append(alias.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # patch("deepagents.middleware._video.x") and similar dotted targets.
            text = node.value
            if text.startswith("deepagents.") and any(
                p.startswith("_") for p in text.split(".")[1:-1]
            ):
                found.append(text)
    return found


NEUTRAL_CONFTEST = '''"""The reference's root conftest resets its private internals (deprecation
flags, a video probe cache, its profile registries); none exist in fathom, so it is left out."""
'''

PYTEST_INI = """[pytest]
asyncio_mode = auto
markers =
    benchmark: wall-time benchmarks
    requires: integration test dependencies
    video_extra: the [video]-extra variant
addopts = -m "not benchmark"
"""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_tests(source: str) -> set[str]:
    """The tests of a file (`name` or `Class::name`) that reach the reference's private parts:
    an `_`-prefixed attribute (`backend._ripgrep_search`), a name imported privately, or a
    patch target with a private part, a private attribute replaced by name
    (`monkeypatch.setattr(backend, "_ripgrep_search", …)`), or a fixture of the file that
    does one of these. Such a test checks the reference's internals."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    imported = {
        (a.asname or a.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deepagents")
        for a in node.names
        if _is_private(a.name)
    }

    def replaces_private(node: ast.AST) -> bool:
        """`setattr(x, "_name", …)`, `monkeypatch.setattr(x, "_name", …)`, `patch.object(x,
        "_name")` and the like: a private attribute named as a string and replaced."""
        if not isinstance(node, ast.Call):
            return False
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        return called in {"setattr", "delattr", "object"} and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and _is_private(a.value)
            and a.value.isidentifier()
            for a in node.args[1:2]
        )

    def own_reach(function: ast.AST) -> bool:
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                return True
            if isinstance(node, ast.Name) and node.id in imported:
                return True
            if replaces_private(node):
                return True
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = node.value.split(".")
                if parts[0] == "deepagents" and any(_is_private(p) for p in parts[1:]):
                    return True
        return False

    # a fixture of the file that reaches private parts makes each test using it reach them
    private_fixtures = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any("fixture" in ast.unparse(d) for d in node.decorator_list)
        and own_reach(node)
    }

    def reaches_private(function: ast.AST) -> bool:
        if own_reach(function):
            return True
        uses = {a.arg for a in getattr(function, "args", ast.arguments()).args}
        for decorator in getattr(function, "decorator_list", []):
            if "usefixtures" in ast.unparse(decorator) and isinstance(decorator, ast.Call):
                uses |= {a.value for a in decorator.args if isinstance(a, ast.Constant)}
        return bool(uses & private_fixtures)

    def is_test(node: ast.AST) -> bool:
        functions = (ast.FunctionDef, ast.AsyncFunctionDef)
        return isinstance(node, functions) and node.name.startswith("test")

    found: set[str] = set()
    for node in tree.body:
        if is_test(node) and reaches_private(node):
            found.add(cast(ast.FunctionDef, node).name)
        elif isinstance(node, ast.ClassDef):
            found.update(
                f"{node.name}::{cast(ast.FunctionDef, item).name}"
                for item in node.body
                if is_test(item) and reaches_private(item)
            )
    return found


def copy_rewritten(source_dir: Path, target: Path, package: str = "fathom") -> None:
    """Copy the tests with `deepagents` imports changed to `fathom`.

    The root conftest only resets the reference's private state, so a neutral one replaces it.
    """
    shutil.copytree(source_dir, target)
    for helper in source_dir.parent.glob("*.py"):  # tests/utils.py and the package marker
        shutil.copy(helper, target.parent / helper.name)
    (target.parent / "__init__.py").touch()
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(_IMPORT_WORD.sub(package, text), encoding="utf-8")
    (target / "conftest.py").write_text(NEUTRAL_CONFTEST, encoding="utf-8")
    (target.parent.parent / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")


def run(
    repo: Path, keyword: str | None, workers: str, python: str = sys.executable
) -> tuple[list[FileResult], Path]:
    """Run the rewritten tests; one `FileResult` per test file."""
    source_dir = repo / TESTS_IN_REPO
    if not source_dir.is_dir():
        raise SystemExit(
            f"no reference unit tests at {source_dir}: pass the root of a deepagents checkout"
        )
    scratch = Path(tempfile.mkdtemp(prefix="reference-tests-"))
    tests = scratch / "tests" / "unit_tests"  # the reference imports `tests.unit_tests.chat_model`
    copy_rewritten(source_dir, tests, "fathom" if python == sys.executable else "deepagents")
    results: dict[str, FileResult] = {}
    for path in sorted(source_dir.rglob("test_*.py")):
        rel = str(path.relative_to(source_dir))
        text = path.read_text(encoding="utf-8")
        results[rel] = FileResult(
            rel, private=private_imports(text), private_names=private_tests(text)
        )
    report = scratch / "report.xml"
    command = [
        python,
        "-m",
        "pytest",
        str(tests),
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(scratch),
        "--junitxml",
        str(report),
        "-c",
        str(scratch / "pytest.ini"),
        "--continue-on-collection-errors",
    ]
    if python == sys.executable:  # the reference's environment has no xdist or timeout plugin
        command += ["--timeout", "120", "-n", workers]
    if keyword:
        command += ["-k", keyword]
    # This checkout's `src` first, so a git worktree tests its own fathom, not the installed one.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SOURCE_ROOT), str(scratch)])}
    subprocess.run(
        command,
        cwd=scratch,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    for case in ET.parse(report).getroot().iter("testcase"):
        rel = _relative_file(case.get("classname") or case.get("name") or "")
        result = results.setdefault(rel, FileResult(rel))
        name = f"{case.get('classname')}::{case.get('name')}"
        last = (case.get("classname") or "").rsplit(".", 1)[-1]
        function = (case.get("name") or "").split("[", 1)[0]
        key = f"{last}::{function}" if last and not last.startswith("test_") else function
        if not result.private and key in result.private_names:
            result.private_total += 1
            failed = case.find("failure") is not None or case.find("error") is not None
            result.private_passed += 0 if failed or case.find("skipped") is not None else 1
            continue
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            result.failed.append((name, message[-1][:200] if message else ""))
        elif case.find("skipped") is not None:
            result.skipped += 1
        else:
            result.passed += 1
            result.passed_names.append(name)
    return list(results.values()), scratch


def _relative_file(dotted_name: str) -> str:
    """The test file of a junit case (`tests.unit_tests.backends.test_x.TestY`), relative to
    the unit-test folder; a collection error names the module alone."""
    dotted = dotted_name.split("unit_tests.", 1)[-1].split(".")
    for end in range(len(dotted), 0, -1):
        if dotted[end - 1].startswith("test_"):
            return "/".join(dotted[:end]) + ".py"
    return dotted_name


def _keep_passing_on_reference(results: list[FileResult], reference: list[FileResult]) -> None:
    """Drop from `results` the tests that fail on the reference itself (a checkout newer than
    the installed release tests behaviour the release does not have yet)."""
    failing = {name for r in reference for name, _ in r.failed}
    for result in results:
        result.failed = [(name, text) for name, text in result.failed if name not in failing]
        result.passed -= sum(name in failing for name in result.passed_names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="root of a deepagents checkout")
    parser.add_argument("--json", type=Path, help="write the per-file results here")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("-n", dest="workers", default="2", help="pytest-xdist workers (default 2)")
    parser.add_argument("--failures", action="store_true", help="list each failing test")
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also run them on the reference (benchmarks/.venv-deepagents) and count only the "
        "tests that pass there",
    )
    args = parser.parse_args()
    results, scratch = run(args.repo, args.keyword, args.workers)
    if args.baseline:
        reference, _ = run(args.repo, args.keyword, args.workers, str(REFERENCE_PYTHON))
        _keep_passing_on_reference(results, reference)
    public_pass = public_total = private_pass = private_total = reach_pass = reach_total = 0
    for result in sorted(results, key=lambda r: r.path):
        reach_pass += result.private_passed
        reach_total += result.private_total
        if result.private:
            private_pass += result.passed
            private_total += result.total
            why = ", ".join(result.private[:2])
            print(f"{result.path:60} private ({result.passed}/{result.total}): {why}")
            continue
        public_pass += result.passed
        public_total += result.total
        reaching = (
            f"  (+{result.private_total} reach private parts)" if result.private_total else ""
        )
        print(f"{result.path:60} {result.passed}/{result.total}{reaching}")
        if args.failures:
            for name, message in result.failed:
                print(f"    FAIL {name}: {message}")
    rate = public_pass / public_total if public_total else 0.0
    print(f"\npublic API tests: {public_pass}/{public_total} passed ({rate:.1%})")
    print(f"test files that import private helpers (not counted): {private_pass}/{private_total}")
    print(f"tests that reach private attributes (not counted): {reach_pass}/{reach_total} passed")
    print(f"scratch copy: {scratch}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "public_passed": public_pass,
                    "public_total": public_total,
                    "private_attribute_tests": [reach_pass, reach_total],
                    "files": [
                        {
                            "path": r.path,
                            "private": r.private,
                            "passed": r.passed,
                            "failed": r.failed,
                        }
                        for r in results
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
