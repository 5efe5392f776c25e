"""`fathom serve` as a user runs it: a subprocess on a free port, used by the real LangGraph SDK.

Each server serves a temporary copy of `deploy/` (so its `.fathom/` lands there), listens on
port 0 (the kernel picks a free port) and is found through its start-up line.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from fathom.server.serve import is_loopback

DEPLOY_DIR = Path(__file__).resolve().parent / "deploy"
FATHOM = Path(sys.executable).parent / "fathom"
DEADLINE_S = 90.0
"""Bounds a hang while a server starts or stops; a healthy one takes seconds."""
KEY = "test-key-3f9a"


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    log: Path
    url: str
    line: str


def _start(workdir: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    log = workdir / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(FATHOM), "serve", "--config", str(workdir / "langgraph.json"), "--port", "0",
             *args],
            cwd=workdir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )  # fmt: skip
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        match = re.search(r"^fathom serve: (http://\S+) .*$", text, re.MULTILINE)
        if match:
            return Served(process, log, match.group(1).replace("0.0.0.0", "127.0.0.1"),
                          match.group(0))  # fmt: skip
        if process.poll() is not None:
            pytest.fail(f"fathom serve exited with {process.returncode}:\n{text}")
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"fathom serve printed no start-up line:\n{log.read_text(errors='replace')}")


def _stop(served: Served) -> int:
    if served.process.poll() is None:
        os.killpg(served.process.pid, signal.SIGTERM)
        try:
            served.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(served.process.pid, signal.SIGKILL)
            served.process.wait()
    return served.process.returncode


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(DEPLOY_DIR, tmp_path / "deploy", ignore=shutil.ignore_patterns(".fathom"))
    return tmp_path / "deploy"


@pytest.fixture
def served(workdir: Path) -> Iterator[Served]:
    server = _start(workdir)
    try:
        yield server
    finally:
        _stop(server)


def _run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FATHOM_API_KEY"}
    return subprocess.run([str(FATHOM), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=DEADLINE_S, env={**environment, **(env or {})})  # fmt: skip


def test_serve_help_lists_its_options(tmp_path: Path):
    result = _run_cli("serve", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in ("--config", "--host", "--port", "--jobs", "--database", "--api-key",
                   "--cors-origin"):  # fmt: skip
        assert option in result.stdout


def test_a_non_loopback_host_without_an_api_key_is_refused(workdir: Path):
    result = _run_cli("serve", "--config", str(workdir / "langgraph.json"), "--host", "0.0.0.0",
                      cwd=workdir)  # fmt: skip
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without an API key" in result.stderr
    assert "--api-key" in result.stderr
    assert "FATHOM_API_KEY" in result.stderr


def test_a_missing_deployment_file_is_a_usage_error(tmp_path: Path):
    result = _run_cli("serve", cwd=tmp_path)
    assert result.returncode == 2
    assert "no deployment file langgraph.json" in result.stderr
    assert "--config" in result.stderr


def test_a_broken_deployment_file_names_the_key(workdir: Path):
    (workdir / "langgraph.json").write_text('{"graphs": {"agent": "./graphs.py:nope"}}')
    result = _run_cli("serve", "--config", str(workdir / "langgraph.json"), cwd=workdir)
    assert result.returncode == 2
    assert "`graphs.agent`" in result.stderr
    assert "no attribute 'nope'" in result.stderr


def test_an_unsupported_database_is_a_usage_error(workdir: Path):
    result = _run_cli("serve", "--config", str(workdir / "langgraph.json"), "--database",
                      "mysql://localhost/db", cwd=workdir)  # fmt: skip
    assert result.returncode == 2
    assert "unsupported --database" in result.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts_are_recognized(host: str):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.com", ""])
def test_other_hosts_are_not_loopback(host: str):
    assert not is_loopback(host)


async def test_the_served_deployment_answers_the_real_sdk(served: Served, workdir: Path):
    graphs = (
        "agent, slow_agent, weather, interrupting, nested, forecast, custom, failing, gated, "
        "whoami"
    )
    assert f"graphs: {graphs}" in served.line
    assert f"storage: SQLite in {workdir / '.fathom'}" in served.line
    async with httpx.AsyncClient(base_url=served.url) as http:
        assert (await http.get("/ok")).json() == {"ok": True}
        assert (await http.get("/info")).status_code == 200
    client = get_client(url=served.url)
    assistants = await client.assistants.search(limit=100)
    assert {a["graph_id"] for a in assistants} >= {"agent", "interrupting", "gated"}
    thread = await client.threads.create()
    hello = {"messages": [{"role": "user", "content": "hello"}]}
    run = await client.runs.wait(thread["thread_id"], "agent", input=hello)
    assert isinstance(run, dict)
    assert run["messages"][-1]["content"] == "echo: hello"
    assert (workdir / ".fathom" / "server-checkpoints.sqlite").is_file()


async def test_a_thread_survives_a_restart_on_the_same_project(workdir: Path):
    first = _start(workdir)
    try:
        client = get_client(url=first.url)
        thread = await client.threads.create(metadata={"owner": "s3"})
        remember = {"messages": [{"role": "user", "content": "remember"}]}
        await client.runs.wait(thread["thread_id"], "agent", input=remember)
    finally:
        _stop(first)
    second = _start(workdir)
    try:
        client = get_client(url=second.url)
        again = await client.threads.get(thread["thread_id"])
        assert again["metadata"]["owner"] == "s3"
        state = await client.threads.get_state(thread["thread_id"])
        values = state["values"]
        assert isinstance(values, dict)
        assert values["messages"][-1]["content"] == "echo: remember"
    finally:
        _stop(second)


async def test_an_api_keyed_server_off_loopback_refuses_clients_without_the_key(workdir: Path):
    served = _start(workdir, "--host", "0.0.0.0", env={"FATHOM_API_KEY": KEY})
    try:
        assert "API key required" in served.line
        async with httpx.AsyncClient(base_url=served.url) as http:
            assert (await http.get("/ok")).status_code == 200  # health checks stay open
            bare = await http.post("/assistants/search", json={})
            wrong = await http.post("/assistants/search", json={}, headers={"x-api-key": "x"})
        assert bare.status_code == 401
        assert "x-api-key" in bare.json()["detail"]
        assert wrong.status_code == 403
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await get_client(url=served.url).assistants.search()
        assert refused.value.response.status_code == 401
        # The SDK sends `api_key` as the x-api-key header (it refuses that header in `headers`).
        keyed = get_client(url=served.url, api_key=KEY)
        assistants = await keyed.assistants.search(limit=100)
        assert "agent" in {a["graph_id"] for a in assistants}
        bearer = get_client(url=served.url, headers={"Authorization": f"Bearer {KEY}"})
        assert await bearer.assistants.search(limit=1)
    finally:
        _stop(served)


def test_sigterm_stops_the_server_cleanly(served: Served):
    code = _stop(served)
    assert code in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in served.log.read_text()


def test_a_port_in_use_is_reported_and_the_command_fails(workdir: Path):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = _run_cli("serve", "--config", str(workdir / "langgraph.json"), "--port", port,
                          cwd=workdir)  # fmt: skip
    assert result.returncode == 2
    assert f"could not start on 127.0.0.1:{port}" in result.stderr
    assert "is the port in use?" in result.stderr
    assert "Traceback" not in result.stderr and "never retrieved" not in result.stderr
