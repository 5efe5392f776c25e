"""`fathom acp` driven by the real ACP client: approvals, plans, diffs, cancel, replay."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from acp import text_block
from tests.protocols.acp.support import DEADLINE, AcpProject, EditorClient

from fathom.protocols.acp.sessions import SessionStore
from fathom.testing.scripted import ScriptRequest, ai, tool_call

GATE = threading.Event()
"""Released by the cancel test; the "slow" prompt's model call waits on it."""
ENTERED = threading.Event()
"""Set when the "slow" prompt's model call has started."""


def _policy(request: ScriptRequest) -> Any:
    text = request.last_human_text
    done = len(request.turn_results)  # (tool names do not survive the OpenAI wire format)
    if text.startswith("write "):  # "write NAME: TEXT"
        name, body = text.removeprefix("write ").split(": ", 1)
        if not done:
            todos = [{"content": f"write {name}", "status": "in_progress"}]
            return ai("", tool_call("write_todos", {"todos": todos}))
        if done == 1:
            return ai("", tool_call("write_file", {"file_path": f"/{name}", "content": body}))
        return ai(f"result: {request.turn_results[-1].text}")
    if text == "slow":
        ENTERED.set()
        GATE.wait(DEADLINE)
        return ai("slow answer")
    return ai(f"you said {text!r}")


@pytest.fixture
def scripted_policy() -> Any:
    return _policy


async def test_an_approved_write_is_made_and_a_rejected_one_is_not(
    acp_project: AcpProject,
) -> None:
    client = EditorClient(answers=["allow_once", "reject_once"])
    async with acp_project.open_agent(client) as conn:
        session = await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])
        sid = session.session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("write a.md: alpha\n")])
        assert done.stop_reason == "end_turn"
        assert (acp_project.project / "a.md").read_text() == "alpha\n"

        done = await conn.prompt(session_id=sid, prompt=[text_block("write b.md: beta\n")])
        assert done.stop_reason == "end_turn"
        assert not (acp_project.project / "b.md").exists()

    # Each approval was asked with the call's own id, title, diff and the three options.
    (first, options), (second, _) = client.permission_requests
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    assert first.title == "Write `/a.md`" and second.title == "Write `/b.md`"
    starts = {u.tool_call_id: u for u in client.of_kind("tool_call")}
    assert first.tool_call_id in starts and starts[first.tool_call_id].kind == "edit"
    diff = first.content[0]
    target = str(acp_project.project / "a.md")
    assert (diff.type, diff.path, diff.new_text, diff.old_text) == ("diff", target, "alpha\n",
                                                                     None)
    # The tool-call card got the result: completed for the approved write, failed or a
    # rejection message for the rejected one; the model saw the rejection.
    results = {u.tool_call_id: u for u in client.of_kind("tool_call_update")}
    assert results[first.tool_call_id].status == "completed"
    assert "rejected" in client.agent_text().lower()
    # write_todos became plan updates.
    plans = client.of_kind("plan")
    assert [e.content for e in plans[0].entries] == ["write a.md"]
    assert plans[0].entries[0].status == "in_progress"


async def test_allow_always_stops_asking_for_that_tool(acp_project: AcpProject) -> None:
    client = EditorClient(answers=["allow_always"])
    async with acp_project.open_agent(client) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write a.md: one")])
        await conn.prompt(session_id=sid, prompt=[text_block("write b.md: two")])
    assert len(client.permission_requests) == 1
    assert (acp_project.project / "b.md").read_text() == "two"


async def test_cancel_stops_the_run_and_a_new_process_does_not_rerun_it(
    acp_project: AcpProject,
) -> None:
    GATE.clear()
    ENTERED.clear()
    client = EditorClient()
    try:
        async with acp_project.open_agent(client) as conn:
            sid = (await conn.new_session(cwd=str(acp_project.project),
                                          mcp_servers=[])).session_id
            running = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("slow")]))
            assert await asyncio.to_thread(ENTERED.wait, DEADLINE)
            await conn.cancel(session_id=sid)
            done = await asyncio.wait_for(running, DEADLINE)
            assert done.stop_reason == "cancelled"
            GATE.set()
        # The editor was told `cancelled`, and the session says so on disk.
        record = SessionStore(acp_project.project / ".fathom" / "threads.sqlite").get(sid)
        assert record is not None and record.stopped

        # The session goes on in the next process, and the cancelled step is not run again.
        again = EditorClient()
        async with acp_project.open_agent(again) as conn:
            await conn.load_session(cwd=str(acp_project.project), session_id=sid,
                                    mcp_servers=[])
            assert [u.content.text for u in again.of_kind("user_message_chunk")] == ["slow"]
            after = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
            assert after.stop_reason == "end_turn"
        assert "you said 'hello'" in again.agent_text()
    finally:
        GATE.set()
    asked = [r for r in acp_project.model.requests if r.last_human_text == "slow"]
    assert len(asked) == 1
    assert "slow answer" not in client.agent_text() + again.agent_text()


async def test_load_session_in_a_new_process_replays_the_conversation(
    acp_project: AcpProject,
) -> None:
    first = EditorClient(answers=["allow_once"])
    async with acp_project.open_agent(first) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write a.md: alpha")])
        await conn.prompt(session_id=sid, prompt=[text_block("and then?")])

    second = EditorClient()
    async with acp_project.open_agent(second) as conn:
        loaded = await conn.load_session(cwd=str(acp_project.project), session_id=sid,
                                         mcp_servers=[])
        assert loaded is not None
        users = [u.content.text for u in second.of_kind("user_message_chunk")]
        assert users == ["write a.md: alpha", "and then?"]
        assert [u.title for u in second.of_kind("tool_call")] == ["write_todos",
                                                                   "Write `/a.md`"]
        assert "you said 'and then?'" in second.agent_text()
        assert [e.content for e in second.of_kind("plan")[-1].entries] == ["write a.md"]
        # The loaded session goes on with its history: the model sees the earlier turns.
        await conn.prompt(session_id=sid, prompt=[text_block("third")])
    last = acp_project.model.requests[-1]
    assert [m.text for m in last.messages if m.type == "human"] == [
        "write a.md: alpha", "and then?", "third"]
