"""What a bubblewrap sandbox costs per command: `execute("true")`, sandboxed vs local.

Times N calls (default 50) of `BubblewrapSandbox.execute("true")` and of the local,
unsandboxed baseline in the same run, after one warm-up call each, and prints the mean in
milliseconds and the ratio. The baseline is `fathom.backends.shell.local.LocalShellBackend`
when it exists, else `subprocess.run("true", shell=True)` (the run says which).

    .venv/bin/python benchmarks/sandbox.py [-n 50]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Callable


def _mean_ms(call: Callable[[], object], runs: int) -> float:
    call()  # warm-up
    start = time.perf_counter()
    for _ in range(runs):
        call()
    return (time.perf_counter() - start) / runs * 1000


def _local_baseline(workspace: str) -> tuple[str, Callable[[], object]]:
    try:
        from fathom.backends.shell.local import LocalShellBackend
    except ImportError:
        return (
            "subprocess.run('true', shell=True) (LocalShellBackend is missing)",
            lambda: subprocess.run("true", shell=True, check=True, cwd=workspace),
        )
    backend = LocalShellBackend(workspace)  # confined file tools (the default); commands aren't
    return "LocalShellBackend.execute('true')", lambda: backend.execute("true")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=50)
    args = parser.parse_args()

    from fathom.backends.shell.bubblewrap import BubblewrapSandbox

    with tempfile.TemporaryDirectory() as workspace:
        sandbox = BubblewrapSandbox(workspace)

        def sandboxed() -> None:
            result = sandbox.execute("true")
            assert result.exit_code == 0, result.output

        local_name, local = _local_baseline(workspace)
        sandbox_ms = _mean_ms(sandboxed, args.runs)
        local_ms = _mean_ms(local, args.runs)
    print(f"runs: {args.runs} (process limit via {sandbox.process_limit})")
    print(f"BubblewrapSandbox.execute('true'): {sandbox_ms:8.2f} ms mean")
    print(f"{local_name}: {local_ms:8.2f} ms mean")
    print(f"ratio sandbox/local: {sandbox_ms / local_ms:.1f}x")


if __name__ == "__main__":
    main()
