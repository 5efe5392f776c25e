"""`make flake`: run the whole suite several times, each in a new random order under load.

A test that passes alone but fails when it runs after another test, on another xdist
worker, or while the machine is busy is a flake. This script looks for them the way a
fresh clone on a loaded machine would meet them:

- each run uses a different random-order seed (pytest-randomly's `--randomly-seed`);
- during each run a busy loop runs on every core (plain Python processes, started and
  stopped here), so timing-dependent tests see a loaded machine;
- at the end it lists every test that failed in any run, with the random-order seeds
  that replay it.

Usage: `python tests/flake_hunt.py [--runs N] [--no-load] [-- extra pytest args]`.
It exits 1 when any test failed in any run, else 0.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BUSY_LOOP = "while True: pass"


@dataclass
class RunResult:
    """What one run of the suite gave."""

    number: int
    random_seed: int
    seconds: float
    exit_code: int
    passed: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)


@contextmanager
def cpu_load(cores: int) -> Iterator[None]:
    """A busy loop on each of `cores` cores for the duration of the block."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True)
        for _ in range(cores)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
        for hog in hogs:
            hog.wait()


def node_id(case: ElementTree.Element) -> str:
    """The pytest node id (`path::Class::name`) of a test case of an xunit1 report."""
    file, name = case.get("file", ""), case.get("name", "")
    module = file.removesuffix(".py").replace("/", ".")
    cls = case.get("classname", "").removeprefix(module).lstrip(".")
    return "::".join(part for part in (file, cls, name) if part)


def read_junit(path: Path, result: RunResult) -> None:
    """Fill `result`'s counts and failed test ids from a JUnit XML report."""
    if not path.exists():
        return
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        test_id = node_id(case)
        if outcome & {"failure", "error"}:
            result.failed.append(test_id)
        elif "skipped" in outcome:
            result.skipped += 1
        else:
            result.passed += 1


def run_suite(
    number: int, random_seed: int, pytest_args: Sequence[str], report: Path
) -> RunResult:
    """One whole run of the suite in the order that `random_seed` gives."""
    command = [
        sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p", "randomly",
        f"--randomly-seed={random_seed}", f"--junitxml={report}", "-o", "junit_family=xunit1",
        *pytest_args,
    ]  # fmt: skip
    print(f"\n=== run {number}: {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, check=False)
    result = RunResult(number, random_seed, time.monotonic() - started, done.returncode)
    read_junit(report, result)
    return result


def summary(results: Sequence[RunResult]) -> str:
    """A Markdown table of the runs, then every failing test with its random-order seeds."""
    lines = [
        "| run | random-order seed | passed | failed | skipped | minutes | exit code |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.number} | {r.random_seed} | {r.passed} | {len(r.failed)} | {r.skipped} "
            f"| {r.seconds / 60:.1f} | {r.exit_code} |"
        )
    failing: dict[str, list[int]] = {}
    for r in results:
        for test_id in r.failed:
            failing.setdefault(test_id, []).append(r.random_seed)
    lines.append("")
    if failing:
        lines.append(f"{len(failing)} tests failed in at least one run:")
        for test_id, random_seeds in sorted(failing.items()):
            lines.append(f"- {test_id} (random-order seeds {', '.join(map(str, random_seeds))})")
    else:
        lines.append("0 tests failed in any run.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="how many whole runs (default 3)")
    parser.add_argument("--no-load", action="store_true", help="run without the busy loops")
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = parser.parse_args(argv)
    cores = 0 if args.no_load else (os.cpu_count() or 1)
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="fathom-flake-") as folder:
        for number in range(1, args.runs + 1):
            random_seed = random.SystemRandom().randrange(1, 2**32)
            report = Path(folder) / f"run-{number}.xml"
            with cpu_load(cores):
                results.append(run_suite(number, random_seed, args.pytest_args, report))
    load = f"a busy loop on each of {cores} cores" if cores else "no added load"
    print(f"\n=== make flake: {args.runs} runs, {load}\n{summary(results)}")
    return 1 if any(r.failed or r.exit_code not in (0, 5) for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
