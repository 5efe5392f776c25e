"""Fixtures for the web page's browser tests: a live `fathom serve` and headless Chromium.

The server runs the scripted graphs of `deploy/` in a subprocess on a free port, with a file
gate (`FATHOM_WEB_GATE`) that tests open to let a held run go on. Chromium is Debian's
(`/usr/bin/chromium`, or `FATHOM_CHROMIUM`), driven by Playwright for Python; without either
the tests are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.system_requirements import needs

DEPLOY_DIR = Path(__file__).parent / "deploy"
IMAGES = (Path(os.environ["FATHOM_WEB_SCREENSHOTS"]) if os.environ.get("FATHOM_WEB_SCREENSHOTS")
          else Path(tempfile.gettempdir()) / "fathom-web-screenshots")
"""Where the browser tests save their screenshots. `docs/web.md`'s pictures are made with
`FATHOM_WEB_SCREENSHOTS=docs/images`; an ordinary test run leaves the repository alone."""
START_DEADLINE_S = 60.0
"""Bounds a hang while the server starts."""
CHROMIUM = Path(os.environ.get("FATHOM_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]  # fmt: skip
"""No sandbox (tests may run as root); nothing that reaches out to the network."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class WebServer:
    """`fathom serve` in a subprocess, with the gate directory its `wait_gate` tool watches."""

    workdir: Path
    gate: Path
    api_key: str | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, *extra: str, env: dict[str, str] | None = None) -> None:
        """Start it (with `extra` options and `env` added) and wait until `/ok` answers."""
        self.port = _free_port()
        command = [str(Path(sys.executable).parent / "fathom"), "serve", "--config",
                   str(self.workdir / "langgraph.json"), "--port", str(self.port),
                   "--database", "memory", *extra]  # fmt: skip
        if self.api_key:
            command += ["--api-key", self.api_key]
        env = {**os.environ, "FATHOM_WEB_GATE": str(self.gate), "PYTHONUNBUFFERED": "1",
               **(env or {})}  # fmt: skip
        env.pop("FATHOM_API_KEY", None)
        log = (self.workdir / "server.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                command, cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"fathom serve exited with {self.process.returncode}:\n{self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"fathom serve did not answer /ok in {START_DEADLINE_S}s:\n{self.log()}")

    def stop(self) -> None:
        """SIGTERM to its process group, then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)

    def log(self) -> str:
        """The end of the server's log."""
        with contextlib.suppress(OSError):
            return (self.workdir / "server.log").read_text(errors="replace")[-4000:]
        return "<no log>"

    def reset_gate(self) -> None:
        """Close the gate: the next `wait_gate` call waits until `open_gate`."""
        shutil.rmtree(self.gate, ignore_errors=True)

    def wait_until_held(self, deadline_s: float = 60.0) -> None:
        """Wait until a run waits at the gate (a deadline only bounds a hang)."""
        deadline = time.monotonic() + deadline_s
        while not (self.gate / "started").exists():
            if time.monotonic() > deadline:
                pytest.fail(f"no run reached the gate:\n{self.log()}")
            time.sleep(0.05)

    def open_gate(self) -> None:
        """Let the held run go on."""
        self.gate.mkdir(parents=True, exist_ok=True)
        (self.gate / "release").touch()


def prepare(tmp: Path, api_key: str | None = None) -> WebServer:
    """A not yet started server of a copy of the deploy folder under `tmp`."""
    workdir = tmp / "deploy"
    shutil.copytree(DEPLOY_DIR, workdir, ignore=shutil.ignore_patterns("__pycache__"))
    return WebServer(workdir, tmp / "gate", api_key)


def _serve(tmp: Path, api_key: str | None = None) -> WebServer:
    server = prepare(tmp, api_key)
    server.start()
    return server


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """A `fathom serve` of the scripted web graphs, shared by a module's tests."""
    server = _serve(tmp_path_factory.mktemp("web"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """The same graphs behind an API key."""
    server = _serve(tmp_path_factory.mktemp("web-key"), api_key="s3cret-key")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through Playwright (skipped when either is missing).

    Module-scoped on purpose: while Playwright's sync API is open, this thread has a
    running event loop, so any later test that calls `asyncio.run` (every async test)
    fails. A session-scoped browser broke whichever tests a random order put after it.
    """
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip(needs("chromium", f"none at {CHROMIUM}"))
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh light-mode tab, 1280x860; a script error in the page fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, color_scheme="light")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, f"script errors in the page: {errors}"
