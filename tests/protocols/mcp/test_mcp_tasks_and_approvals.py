"""`fathom mcp serve` over stdio, in real subprocesses, called with the MCP Python SDK's
client: tasks that outlive their session, approvals answered with `answer_approval` and
through MCP elicitation, and sessions that end without a traceback.

The served graph is a deep agent over a `ScriptedModel` with two tools: `echo` (which needs
an approval) and `hold` (which waits until the test lets it go, so a task is still running
when its session ends).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from tests.protocols.mcp.support import DEADLINE_S

GRAPH = '''
from pathlib import Path
import asyncio

from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

HERE = Path(__file__).resolve().parent


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo said: {text}"


@tool
async def hold() -> str:
    """Wait until the file `release` exists."""
    (HERE / "holding").write_text("yes")
    while not (HERE / "release").exists():
        await asyncio.sleep(0.05)
    return "released"


def answer(request):
    results = request.turn_results
    text = request.last_human_text
    if results:
        return f"finished: {results[-1].text}"
    if text.startswith("echo "):
        return ai("", tool_call("echo", {"text": text.removeprefix("echo ")}))
    if text == "hold":
        return ai("", tool_call("hold", {}))
    return f"plain answer to {text}"


graph = create_deep_agent(ScriptedModel(policy=answer), tools=[echo, hold],
                          interrupt_on={"echo": True})
'''


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    (tmp_path / "agent.py").write_text(textwrap.dedent(GRAPH), encoding="utf-8")
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"helper": "./agent.py:graph"}}), encoding="utf-8")
    return config


@asynccontextmanager
async def _session(config: Path, *, errlog: Any = None,
                   elicitation_callback: Any = None) -> AsyncIterator[ClientSession]:
    """One stdio session with a new `fathom mcp serve` process. (The graph module's own
    warning, that `interrupt_on` needs the checkpointer the server supplies, is silenced,
    so that stderr holds only what the server prints.)"""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fathom.cli", "mcp", "serve", "--config", str(config)],
        env={**os.environ, "PYTHONWARNINGS": "ignore::UserWarning"}, cwd=str(config.parent))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write), \
            ClientSession(read, write, elicitation_callback=elicitation_callback) as session:
        await session.initialize()
        yield session


def _payload(result: Any) -> dict[str, Any]:
    assert not result.isError, result.content
    return dict(result.structuredContent)


def _error(result: Any) -> str:
    assert result.isError, result.structuredContent
    return str(result.content[0].text)


async def _until(session: ClientSession, task_id: str, *statuses: str) -> dict[str, Any]:
    """check_task until the task's status is one of `statuses`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        report = _payload(await session.call_tool("check_task", {"task_id": task_id}))
        if report["status"] in statuses or time.monotonic() > deadline:
            return report
        await asyncio.sleep(0.05)


# --- tasks in the project's storage ----------------------------------------------------------


async def test_a_task_that_ended_in_one_session_is_known_in_the_next(deployment: Path) -> None:
    async with _session(deployment) as first:
        task_id = _payload(await first.call_tool(
            "start_task", {"description": "quick"}))["task_id"]
        done = await _until(first, task_id, "success", "error")
        assert done["status"] == "success"

    async with _session(deployment) as second:
        report = _payload(await second.call_tool("check_task", {"task_id": task_id}))
    assert report == {"task_id": task_id, "status": "success", "thread_id": task_id,
                      "result": "plain answer to quick"}


async def test_tasks_and_their_threads_live_in_the_projects_threads_database(
    deployment: Path,
) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "quick"}))["task_id"]
        await _until(session, task_id, "success", "error")

    database = deployment.parent / ".fathom" / "threads.sqlite"
    with sqlite3.connect(database) as db:
        (status,) = db.execute("SELECT status FROM fathom_mcp_tasks WHERE task_id = ?",
                               (task_id,)).fetchone()
        (title,) = db.execute("SELECT title FROM fathom_threads WHERE thread_id = ?",
                              (task_id,)).fetchone()
        checkpoints = db.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?",
                                 (task_id,)).fetchone()[0]
    assert (status, title) == ("success", "quick")  # `fathom threads` lists it, too
    assert checkpoints > 0


async def test_a_task_still_running_when_its_session_ends_is_reported_cancelled_next_time(
    deployment: Path, tmp_path: Path,
) -> None:
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as errlog:
        async with _session(deployment, errlog=errlog) as first:
            task_id = _payload(await first.call_tool(
                "start_task", {"description": "hold"}))["task_id"]
            deadline = time.monotonic() + DEADLINE_S
            while not (tmp_path / "holding").exists() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert (await _until(first, task_id, "running"))["status"] == "running"
    assert errors.read_text() == ""

    async with _session(deployment) as second:
        report = _payload(await second.call_tool("check_task", {"task_id": task_id}))
    assert report["status"] == "cancelled"
    assert "stopped before it finished" in report["error"]


async def test_a_second_session_at_the_same_time_sees_the_first_ones_task_run_and_end(
    deployment: Path, tmp_path: Path,
) -> None:
    async with _session(deployment) as first, _session(deployment) as second:
        task_id = _payload(await first.call_tool(
            "start_task", {"description": "hold"}))["task_id"]
        deadline = time.monotonic() + DEADLINE_S
        while not (tmp_path / "holding").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        seen = _payload(await second.call_tool("check_task", {"task_id": task_id}))
        assert seen["status"] == "running"  # its server process is alive
        busy = await second.call_tool("ask", {"question": "hi", "thread_id": task_id})
        assert "busy with a running task" in _error(busy)

        (tmp_path / "release").write_text("go")
        done = await _until(second, task_id, "success", "error", "cancelled")
    assert done["status"] == "success"
    assert done["result"] == "finished: released"


async def test_check_task_on_an_unknown_id_lists_the_latest_tasks(deployment: Path) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "quick"}))["task_id"]
        text = _error(await session.call_tool("check_task", {"task_id": "nope"}))
    assert "No task has id 'nope'" in text and task_id in text


# --- answer_approval -------------------------------------------------------------------------


async def test_a_task_waiting_in_one_session_is_approved_in_the_next(deployment: Path) -> None:
    async with _session(deployment) as first:
        task_id = _payload(await first.call_tool(
            "start_task", {"description": "echo hello"}))["task_id"]
        waiting = await _until(first, task_id, "waiting", "success", "error")
        assert waiting["status"] == "waiting"

    async with _session(deployment) as second:
        report = _payload(await second.call_tool("check_task", {"task_id": task_id}))
        assert report["status"] == "waiting"
        (interrupt,) = report["interrupts"]
        (request,) = interrupt["value"]["action_requests"]
        assert (request["name"], request["args"]) == ("echo", {"text": "hello"})

        answered = _payload(await second.call_tool(
            "answer_approval", {"task_id": task_id, "decision": "approve"}))
        assert (answered["status"], answered["calls"]) == ("running", ["echo"])
        done = await _until(second, task_id, "success", "error", "waiting")
    assert done["status"] == "success"
    assert done["result"] == "finished: echo said: hello"


async def test_a_rejection_reaches_the_model_with_its_reason(deployment: Path) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "echo secret"}))["task_id"]
        await _until(session, task_id, "waiting")
        _payload(await session.call_tool("answer_approval", {
            "task_id": task_id, "decision": "reject", "message": "not today"}))
        done = await _until(session, task_id, "success", "error")
    assert done["status"] == "success"
    assert "not today" in done["result"]
    assert "echo said" not in done["result"]


async def test_an_ask_that_waits_is_answered_with_edited_arguments(deployment: Path) -> None:
    async with _session(deployment) as session:  # this client has no elicitation
        reply = _payload(await session.call_tool("ask", {"question": "echo first"}))
        assert reply["status"] == "waiting"
        thread = reply["thread_id"]
        _payload(await session.call_tool("answer_approval", {
            "task_id": thread, "decision": "edit", "args": {"text": "second"}}))
        done = await _until(session, thread, "success", "error")
    assert done["result"].endswith("echo said: second")  # after the middleware's edit note
    assert "echo said: first" not in done["result"]


async def test_respond_gives_the_model_the_message_instead_of_the_tools_result(
    deployment: Path,
) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "echo ignored"}))["task_id"]
        await _until(session, task_id, "waiting")
        _payload(await session.call_tool("answer_approval", {
            "task_id": task_id, "decision": "respond", "message": "said by a person"}))
        done = await _until(session, task_id, "success", "error")
    assert done["result"] == "finished: said by a person"


async def test_of_two_answers_sent_at_once_one_is_taken_and_the_other_refused(
    deployment: Path,
) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "echo once"}))["task_id"]
        await _until(session, task_id, "waiting")
        answers = await asyncio.gather(*(session.call_tool(
            "answer_approval", {"task_id": task_id, "decision": decision})
            for decision in ("approve", "reject")))
        done = await _until(session, task_id, "success", "error")
    refused = [a for a in answers if a.isError]
    assert len(refused) == 1
    assert "not waiting for an approval" in refused[0].content[0].text  # type: ignore[union-attr]
    assert done["status"] == "success"


async def test_answer_approval_refuses_a_task_that_is_not_waiting(deployment: Path) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "quick"}))["task_id"]
        await _until(session, task_id, "success")
        text = _error(await session.call_tool(
            "answer_approval", {"task_id": task_id, "decision": "approve"}))
        assert "is success, not waiting for an approval" in text
        text = _error(await session.call_tool(
            "answer_approval", {"task_id": task_id, "decision": "maybe"}))
        assert "decision" in text


async def test_edit_without_args_is_a_tool_error_and_the_task_still_waits(
    deployment: Path,
) -> None:
    async with _session(deployment) as session:
        task_id = _payload(await session.call_tool(
            "start_task", {"description": "echo x"}))["task_id"]
        await _until(session, task_id, "waiting")
        text = _error(await session.call_tool(
            "answer_approval", {"task_id": task_id, "decision": "edit"}))
        assert "`edit` needs `args`" in text
        report = _payload(await session.call_tool("check_task", {"task_id": task_id}))
    assert report["status"] == "waiting"


# --- elicitation -----------------------------------------------------------------------------


class Person:
    """An elicitation callback that answers each request with the next of `answers`."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> Any:
        self.asked.append(params)
        return self.answers.pop(0)


async def test_ask_puts_the_approval_to_a_client_that_supports_elicitation(
    deployment: Path,
) -> None:
    person = Person(types.ElicitResult(action="accept", content={"decision": "approve"}))
    async with _session(deployment, elicitation_callback=person) as session:
        reply = _payload(await session.call_tool("ask", {"question": "echo over mcp"}))
    assert reply["status"] == "success"
    assert reply["answer"] == "finished: echo said: over mcp"
    (asked,) = person.asked
    assert "echo" in asked.message and "over mcp" in asked.message
    schema = asked.requestedSchema  # type: ignore[union-attr]
    assert schema["properties"]["decision"]["enum"] == ["approve", "reject"]


async def test_an_elicited_rejection_and_a_decline_reject_the_call(deployment: Path) -> None:
    person = Person(
        types.ElicitResult(action="accept", content={"decision": "reject", "message": "no"}),
        types.ElicitResult(action="decline"),
    )
    async with _session(deployment, elicitation_callback=person) as session:
        rejected = _payload(await session.call_tool("ask", {"question": "echo one"}))
        declined = _payload(await session.call_tool("ask", {"question": "echo two"}))
    assert rejected["status"] == declined["status"] == "success"
    assert "no" in rejected["answer"] and "echo said" not in rejected["answer"]
    assert "echo said" not in declined["answer"]
    assert len(person.asked) == 2


async def test_a_cancelled_elicitation_leaves_the_approval_for_answer_approval(
    deployment: Path,
) -> None:
    person = Person(types.ElicitResult(action="cancel"))
    async with _session(deployment, elicitation_callback=person) as session:
        reply = _payload(await session.call_tool("ask", {"question": "echo later"}))
        assert reply["status"] == "waiting"
        _payload(await session.call_tool(
            "answer_approval", {"task_id": reply["thread_id"], "decision": "approve"}))
        done = await _until(session, reply["thread_id"], "success", "error")
    assert done["result"] == "finished: echo said: later"


# --- quiet ends ------------------------------------------------------------------------------


async def test_a_session_ends_without_anything_on_stderr(deployment: Path,
                                                         tmp_path: Path) -> None:
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as errlog:
        async with _session(deployment, errlog=errlog) as session:
            reply = _payload(await session.call_tool("ask", {"question": "hi"}))
            assert reply["answer"] == "plain answer to hi"
    assert errors.read_text() == ""
