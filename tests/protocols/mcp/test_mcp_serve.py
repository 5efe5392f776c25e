"""`fathom mcp serve` in a subprocess, called with the MCP Python SDK's own client.

The served graph is a deep agent over a `ScriptedModel` that answers with the number of
user messages on its thread, so continuing a thread shows in the answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from tests.protocols.mcp.support import DEADLINE_S, free_port, wait_for_port

GRAPH = '''
from langchain_core.messages import HumanMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel


def answer(request):
    asked = [m for m in request.messages if isinstance(m, HumanMessage)]
    return f"answer {len(asked)}: {request.last_human_text}"


graph = create_deep_agent(ScriptedModel(policy=answer))
'''


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(textwrap.dedent(GRAPH), encoding="utf-8")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"helper": "./agent.py:graph"}}), encoding="utf-8")
    return config


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "fathom.cli", "mcp", "serve", *args]


@asynccontextmanager
async def _stdio_session(config: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable,
                                   args=_command("--config", str(config))[1:],
                                   env=dict(os.environ), cwd=str(config.parent))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _payload(result: Any) -> dict[str, Any]:
    assert not result.isError, result.content
    return dict(result.structuredContent)


async def test_ask_answers_and_the_same_thread_continues(deployment: Path) -> None:
    async with _stdio_session(deployment) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"ask", "start_task", "check_task"} <= names

        first = _payload(await session.call_tool("ask", {"question": "hello"}))
        assert first["status"] == "success"
        assert first["answer"] == "answer 1: hello"

        again = _payload(await session.call_tool(
            "ask", {"question": "more", "thread_id": first["thread_id"]}))
        assert again["thread_id"] == first["thread_id"]
        assert again["answer"] == "answer 2: more"


async def test_start_task_then_check_task_until_success(deployment: Path) -> None:
    async with _stdio_session(deployment) as session:
        started = _payload(await session.call_tool("start_task", {"description": "long job"}))
        task_id = started["task_id"]
        assert started["status"] in ("pending", "running")

        deadline = time.monotonic() + DEADLINE_S
        report = started
        while report["status"] in ("pending", "running") and time.monotonic() < deadline:
            report = _payload(await session.call_tool("check_task", {"task_id": task_id}))
            await asyncio.sleep(0.05)
        assert report["status"] == "success"
        assert report["result"] == "answer 1: long job"
        assert report["thread_id"] == task_id


async def test_check_task_with_an_unknown_id_is_a_clear_tool_error(deployment: Path) -> None:
    async with _stdio_session(deployment) as session:
        result = await session.call_tool("check_task", {"task_id": "no-such-task"})
        assert result.isError
        assert "No task has id 'no-such-task'" in result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def http_serve(deployment: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        _command("--config", str(deployment), "--transport", "http", "--port", str(port)),
        cwd=deployment.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_ask_over_streamable_http(http_serve: str) -> None:
    async with streamable_http_client(http_serve) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        reply = _payload(await session.call_tool("ask", {"question": "web"}))
        assert reply["answer"] == "answer 1: web"


def test_a_graph_name_that_is_not_in_the_file_is_a_usage_error(deployment: Path) -> None:
    done = subprocess.run(_command("--config", str(deployment), "--graph", "nope"),
                          capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 2
    assert "no graph 'nope'" in done.stderr and "helper" in done.stderr
