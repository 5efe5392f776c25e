"""MCP servers handed over by the editor are connected; bad prompts get clear errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, audio_block, text_block
from acp.schema import EnvVariable, McpServerStdio
from tests.protocols.acp.support import AcpProject, EditorClient

from fathom.testing.scripted import ScriptRequest, ai, tool_call

CALC = McpServerStdio(name="calc", command=sys.executable,
                      args=[str(Path(__file__).with_name("calc_mcp_server.py"))], env=[])


def _policy(request: ScriptRequest) -> Any:
    text = request.last_human_text
    if text == "add" and not request.turn_results:
        if not request.has_tool("calc_add"):
            return ai("I have no calc_add tool")
        return ai("", tool_call("calc_add", {"a": 2, "b": 3}))
    if text == "add":
        return ai(f"the tool said: {request.turn_results[-1].text}")
    return ai(f"you said {text!r}")


@pytest.fixture
def scripted_policy() -> Any:
    return _policy


async def test_an_mcp_server_from_new_session_gives_the_agent_its_tools(
    acp_project: AcpProject,
) -> None:
    client = EditorClient()
    async with acp_project.open_agent(client) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project),
                                      mcp_servers=[CALC])).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("add")])
    assert done.stop_reason == "end_turn"
    assert "the tool said: sum is 5" in client.agent_text()
    (start,) = [u for u in client.of_kind("tool_call") if u.title == "calc_add"]
    (result,) = [u for u in client.of_kind("tool_call_update")
                 if u.tool_call_id == start.tool_call_id]
    assert result.status == "completed" and "sum is 5" in str(result.raw_output)


async def test_an_mcp_server_is_started_once_per_session_with_the_editors_env(
    acp_project: AcpProject, tmp_path: Path,
) -> None:
    starts = tmp_path / "starts.txt"
    calc = CALC.model_copy(update={"env": [EnvVariable(name="CALC_STARTS", value=str(starts))]})
    client = EditorClient()
    async with acp_project.open_agent(client) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project),
                                      mcp_servers=[calc])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("add")])
        await conn.prompt(session_id=sid, prompt=[text_block("add")])
    assert client.agent_text().count("the tool said: sum is 5") == 2
    assert len(starts.read_text().split()) == 1


async def test_an_mcp_server_that_cannot_start_is_reported_and_the_session_works(
    acp_project: AcpProject, tmp_path: Path,
) -> None:
    broken = McpServerStdio(name="broken", command=str(tmp_path / "no-such-server"),
                            args=[], env=[])
    client = EditorClient()
    async with acp_project.open_agent(client) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project),
                                      mcp_servers=[broken, CALC])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("add")])
    text = client.agent_text()
    assert "MCP server 'broken' was not started" in text
    assert "the tool said: sum is 5" in text


async def test_an_unsupported_content_block_is_refused_and_the_session_stays_usable(
    acp_project: AcpProject,
) -> None:
    client = EditorClient()
    async with acp_project.open_agent(client) as conn:
        sid = (await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[
                text_block("listen"), audio_block("AAAA", "audio/wav")])
        assert refused.value.code == -32602
        assert "prompt block 1: audio is not supported" in refused.value.data["detail"]
        done = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert done.stop_reason == "end_turn"
    assert "you said 'hello'" in client.agent_text()
    # Nothing of the refused prompt reached the thread.
    assert all("listen" not in m.text for r in acp_project.model.requests for m in r.messages)


async def test_unknown_sessions_and_bad_directories_get_clear_errors(
    acp_project: AcpProject,
) -> None:
    async with acp_project.open_agent(EditorClient()) as conn:
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="nope", prompt=[text_block("hi")])
        assert "unknown session 'nope'" in unknown.value.data["detail"]
        with pytest.raises(RequestError) as missing:
            await conn.load_session(cwd=str(acp_project.project), session_id="nope",
                                    mcp_servers=[])
        assert "no session 'nope'" in missing.value.data["detail"]
        with pytest.raises(RequestError) as relative:
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert "not an existing absolute directory" in relative.value.data["detail"]


async def test_a_broken_fathom_toml_is_reported_at_new_session(
    acp_project: AcpProject, tmp_path: Path,
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "fathom.toml").write_text('sandbox = "everywhere"\n', encoding="utf-8")
    async with acp_project.open_agent(EditorClient()) as conn:
        with pytest.raises(RequestError) as broken:
            await conn.new_session(cwd=str(other), mcp_servers=[])
        assert "fathom.toml, line 1: 'sandbox' is 'everywhere'" in broken.value.data["detail"]
        # The agent still serves good projects.
        sid = (await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hi")])).stop_reason \
            == "end_turn"
