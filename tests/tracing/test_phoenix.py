"""Spans read back from a real Arize Phoenix collector, started by the test.

Phoenix lives in its own virtualenv (its dependencies are many and pinned):
`python3.11 -m venv benchmarks/.venv-phoenix && benchmarks/.venv-phoenix/bin/pip install
arize-phoenix` (or name a `phoenix` executable in `FATHOM_PHOENIX`). Without it the test is
skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.system_requirements import needs

import fathom.tracing
from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

REPO = Path(__file__).resolve().parents[2]
PHOENIX = Path(os.environ.get("FATHOM_PHOENIX") or REPO / "benchmarks/.venv-phoenix/bin/phoenix")

pytestmark = pytest.mark.skipif(
    not PHOENIX.exists(),
    reason=needs("arize phoenix", f"none at {PHOENIX}"),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PHOENIX_START_DEADLINE_S = 180
"""Phoenix takes a while to start, much longer on a loaded machine; this only bounds a hang."""


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server on free ports, offline, its data in a temporary folder; its URL."""
    port, grpc = _free_port(), _free_port()
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_PORT": str(port),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_TELEMETRY_ENABLED": "false", "DO_NOT_TRACK": "1"}
    log = (workdir / "phoenix.log").open("wb")
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PHOENIX_START_DEADLINE_S  # bounds a hang only
        while True:
            assert proc.poll() is None, (workdir / "phoenix.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:  # bounds a hang only
                pytest.fail("Phoenix did not start within 180 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _spans(url: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(f"{url}/v1/projects/default/spans", params={"limit": 100}, timeout=10)
        answer.raise_for_status()
        data = answer.json()["data"]
        if len(data) >= count or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


@pytest.mark.timeout(PHOENIX_START_DEADLINE_S + 120)  # the fixture's start counts toward it
def test_phoenix_reads_the_agent_tree_kinds_sessions_and_tokens(phoenix: str) -> None:
    fathom.tracing.enable(endpoint=phoenix)
    try:
        model = ScriptedModel(replies=[
            ai("", tool_call("task", {"description": "find", "subagent_type": "researcher"})),
            "facts", "done"])
        agent = create_deep_agent(model, name="main", subagents=[
            {"name": "researcher", "description": "finds", "system_prompt": "Research."}])
        agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "px-1"}})
    finally:
        fathom.tracing.disable()
    spans = _spans(phoenix, 6)
    by_id = {s["context"]["span_id"]: s for s in spans}
    kinds = {s["name"]: s["span_kind"] for s in spans}
    assert kinds == {"main": "AGENT", "scripted": "LLM", "task": "TOOL", "researcher": "AGENT"}
    [researcher] = [s for s in spans if s["name"] == "researcher"]
    assert by_id[researcher["parent_id"]]["name"] == "task"
    assert by_id[by_id[researcher["parent_id"]]["parent_id"]]["name"] == "main"
    assert {s["attributes"]["session.id"] for s in spans} == {"px-1"}
    llm = [s for s in spans if s["span_kind"] == "LLM"]
    assert len(llm) == 3
    assert all(s["attributes"]["llm.token_count.total"] > 0 for s in llm)
    assert sum(s["attributes"]["llm.token_count.prompt"] for s in llm) == sum(
        r.input_tokens for r in model.requests)
