"""What a bubblewrap sandbox costs per command: `execute("true")` against a bare `bwrap`.

Times N rounds (default 40) of, interleaved within each round (the order rotates, so load
drifts hit every variant alike):

- `bare bwrap`: `bwrap --unshare-all --ro-bind / / true` started with `subprocess.run`;
- `BubblewrapSandbox.execute("true")` as built by default (overlay, seccomp, cgroups where
  it finds them);
- the same with `overlay=False` (the disk guard instead);
- `LocalShellBackend.execute("true")`, unsandboxed, for scale.

after one warm-up call each, and prints the median and mean wall time of each in
milliseconds, the CPU time each call costs (this process plus every process it started:
on a loaded machine wall time mostly measures waiting for a CPU, so the CPU ratio is the
steadier one), and the ratio of the sandbox's median to the bare bwrap's (the goal: at most
1.5x).

    .venv/bin/python benchmarks/sandbox.py [-n 40] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

GOAL = 1.5
"""`execute("true")` through the sandbox within this many times a bare `bwrap`."""


def _bare(bwrap: str) -> Callable[[], object]:
    argv = [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--", "true"]

    def call() -> None:
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)

    return call


def _executing(backend: object) -> Callable[[], object]:
    def call() -> None:
        result = backend.execute("true")  # type: ignore[attr-defined]
        assert result.exit_code == 0, result.output

    return call


def _cpu_seconds() -> float:
    """CPU time so far of this process and of the children it has waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def measure(runs: int, workspace: str) -> dict[str, object]:
    """The timings (ms per call) of every variant, interleaved, and the ratio."""
    from fathom.backends.shell.bubblewrap import BubblewrapSandbox
    from fathom.backends.shell.local import LocalShellBackend

    for name in ("overlay", "guard", "local"):
        (Path(workspace) / name).mkdir()
    sandbox = BubblewrapSandbox(Path(workspace) / "overlay")
    guarded = BubblewrapSandbox(Path(workspace) / "guard", overlay=False)
    variants: dict[str, Callable[[], object]] = {
        "bare bwrap --unshare-all true": _bare(sandbox.bwrap),
        "BubblewrapSandbox.execute('true')": _executing(sandbox),
        "  with overlay=False": _executing(guarded),
        "LocalShellBackend.execute('true')": _executing(
            LocalShellBackend(Path(workspace) / "local")
        ),
    }
    names = list(variants)
    for call in variants.values():
        call()  # warm-up (and the sandboxes' first answers, which carry notes)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            used = _cpu_seconds()
            began = time.perf_counter()
            variants[name]()
            times[name].append((time.perf_counter() - began) * 1000)
            cpu[name].append((_cpu_seconds() - used) * 1000)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    bare = medians[names[0]]
    return {
        "runs": runs,
        "disk_limit": sandbox.disk_limit,
        "process_limit": sandbox.process_limit,
        "memory_limit": sandbox.memory_limit,
        "seccomp": sandbox.seccomp is not None,
        "median_ms": medians,
        "mean_ms": {name: statistics.fmean(values) for name, values in times.items()},
        "cpu_median_ms": cpu_medians,
        "ratio": medians[names[1]] / bare,
        "ratio_without_overlay": medians[names[2]] / bare,
        "cpu_ratio": cpu_medians[names[1]] / cpu_medians[names[0]],
        "cpu_ratio_without_overlay": cpu_medians[names[2]] / cpu_medians[names[0]],
        "goal": GOAL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=40)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workspace:
        report = measure(args.runs, workspace)
    print(
        f"runs: {report['runs']}, interleaved (disk limit: {report['disk_limit']}, processes: "
        f"{report['process_limit']}, memory: {report['memory_limit']}, seccomp: "
        f"{report['seccomp']})"
    )
    print(f"{'':36} {'median':>9} {'mean':>9} {'CPU':>9}")
    for name, median in report["median_ms"].items():  # type: ignore[union-attr]
        mean = report["mean_ms"][name]  # type: ignore[index]
        cpu = report["cpu_median_ms"][name]  # type: ignore[index]
        print(f"{name:36} {median:7.2f}ms {mean:7.2f}ms {cpu:7.2f}ms")
    ratio = report["ratio"]
    verdict = "within" if ratio <= GOAL else "over"  # type: ignore[operator]
    print(
        f"ratio sandbox/bare bwrap (medians): {ratio:.2f}x ({verdict} the {GOAL}x goal); "
        f"without the overlay: {report['ratio_without_overlay']:.2f}x"
    )
    print(
        f"CPU ratio sandbox/bare bwrap (medians): {report['cpu_ratio']:.2f}x; without the "
        f"overlay: {report['cpu_ratio_without_overlay']:.2f}x"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
