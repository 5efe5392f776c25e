"""Servers under test, each in its own subprocess: `fathom serve` and `langgraph dev`.

Both serve a temporary copy of `deploy/` (so neither writes state into the repository).
`langgraph dev` comes from its own virtualenv, `benchmarks/.venv-langgraph-dev` (made by
`make test`), or from the `langgraph` binary that `FATHOM_LANGGRAPH_DEV` names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

DEPLOY_DIR = Path(__file__).resolve().parent / "deploy"
"""The deployment shared by every server test: `langgraph.json` and its scripted graphs."""
REPO_ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH_DEV_VENV = REPO_ROOT / "benchmarks" / ".venv-langgraph-dev"
SERVER_KINDS = ("fathom", "langgraph-dev")
START_DEADLINE_S = 90.0
"""Bounds a hang while a server starts; a healthy one answers `/ok` within seconds."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def langgraph_dev_binary() -> Path | None:
    """The `langgraph` CLI to run `langgraph dev` with, or `None` when none is installed."""
    override = os.environ.get("FATHOM_LANGGRAPH_DEV")
    if override:
        return Path(override)
    candidate = LANGGRAPH_DEV_VENV / "bin" / "langgraph"
    return candidate if candidate.exists() else None


def fathom_binary() -> Path:
    """The `fathom` console script of the interpreter running the tests."""
    return Path(sys.executable).parent / "fathom"


@dataclass
class ServerProcess:
    """A server running in a subprocess, serving a copy of the deploy folder."""

    kind: str
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    extra_args: tuple[str, ...] = ()
    """More `fathom serve` options, such as `("--database", url)`."""
    name: str = ""
    """Tells the logs of several servers of one kind apart."""

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go."""
        return self.workdir / f"server-{self.kind}{self.name}.log"

    def command(self) -> list[str]:
        """The command line that starts this kind of server."""
        config = str(self.workdir / "langgraph.json")
        if self.kind == "fathom":
            return [str(fathom_binary()), "serve", "--config", config, "--port", str(self.port),
                    *self.extra_args]  # fmt: skip
        binary = langgraph_dev_binary()
        assert binary is not None
        return [
            str(binary), "dev", "--no-browser", "--no-reload", "--port", str(self.port),
            "--n-jobs-per-worker", "10", "--config", config,
        ]  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until `/ok` answers (or fail with its log)."""
        env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                pytest.fail(f"{self.kind} server exited with {code}:\n{self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"{self.kind} server did not answer /ok in {START_DEADLINE_S}s:\n{self.log()}")

    def kill(self) -> None:
        """Kill the server's whole process group with SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server: SIGTERM to its process group, then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self, tail: int = 4000) -> str:
        """The end of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return "<no log>"


def copy_deployment(destination: Path) -> Path:
    """Copy the deploy folder to `destination` (state files land there, not in the repo)."""
    shutil.copytree(DEPLOY_DIR, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def fathom_serve_available() -> bool:
    """Whether this fathom has the `serve` command."""
    result = subprocess.run(
        [str(fathom_binary()), "serve", "--help"], capture_output=True, check=False, timeout=60
    )
    return result.returncode == 0
