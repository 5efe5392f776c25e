"""Modes and model switching over ACP: each rebuilds the agent and is kept with the session."""

from __future__ import annotations

from typing import Any

import pytest
from acp import RequestError, text_block
from tests.protocols.acp.support import AcpProject, EditorClient, RecordingProxy

from fathom.testing.scripted import ScriptRequest, ai, tool_call


def _policy(request: ScriptRequest) -> Any:
    text = request.last_human_text
    if text.startswith("write ") and not request.turn_results:
        name = text.removeprefix("write ")
        return ai("", tool_call("write_file", {"file_path": f"/{name}", "content": name}))
    return ai(f"you said {text!r}")


@pytest.fixture
def scripted_policy() -> Any:
    return _policy


async def test_accept_edits_mode_writes_without_asking_and_is_restored_on_load(
    acp_project: AcpProject,
) -> None:
    client = EditorClient(answers=["reject_once"])
    async with acp_project.open_agent(client) as conn:
        new = await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])
        sid = new.session_id
        assert new.modes is not None and new.modes.current_mode_id == "ask"
        assert [m.id for m in new.modes.available_modes] == ["ask", "accept_edits", "auto"]
        await conn.set_session_mode(session_id=sid, mode_id="accept_edits")
        await conn.prompt(session_id=sid, prompt=[text_block("write a.md")])
        assert (acp_project.project / "a.md").read_text() == "a.md"
        assert client.permission_requests == []
        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=sid, mode_id="reckless")
        assert "unknown mode 'reckless'" in bad.value.data["detail"]

    again = EditorClient(answers=["reject_once"])
    async with acp_project.open_agent(again) as conn:
        loaded = await conn.load_session(cwd=str(acp_project.project), session_id=sid,
                                         mcp_servers=[])
        assert loaded is not None and loaded.modes is not None
        assert loaded.modes.current_mode_id == "accept_edits"
        await conn.prompt(session_id=sid, prompt=[text_block("write b.md")])
        assert (acp_project.project / "b.md").exists() and again.permission_requests == []
        # Back to "ask": the next write waits for the editor (rejected here).
        await conn.set_config_option(config_id="mode", session_id=sid, value="ask")
        await conn.prompt(session_id=sid, prompt=[text_block("write c.md")])
        assert len(again.permission_requests) == 1
        assert not (acp_project.project / "c.md").exists()


async def test_switching_the_model_sends_the_next_turn_to_the_new_model(
    acp_project: AcpProject,
) -> None:
    proxy = RecordingProxy(acp_project.server.base_url)
    acp_project.write_config(base_url=proxy.base_url)
    client = EditorClient()
    try:
        async with acp_project.open_agent(client, "--models", "openai:other") as conn:
            new = await conn.new_session(cwd=str(acp_project.project), mcp_servers=[])
            sid = new.session_id
            model_option = {o.id: o for o in new.config_options or []}["model"]
            assert model_option.current_value == "openai:scripted"
            assert [o.value for o in model_option.options] == ["openai:scripted",
                                                               "openai:other"]
            await conn.prompt(session_id=sid, prompt=[text_block("one")])
            answer = await conn.set_config_option(config_id="model", session_id=sid,
                                                  value="openai:other")
            current = {o.id: o.current_value for o in answer.config_options}
            assert current["model"] == "openai:other"
            await conn.prompt(session_id=sid, prompt=[text_block("two")])
            with pytest.raises(RequestError) as bad:
                await conn.set_config_option(config_id="model", session_id=sid,
                                             value="openai:nonexistent")
            assert "unknown model 'openai:nonexistent'" in bad.value.data["detail"]
    finally:
        proxy.stop()
    assert proxy.models == ["scripted", "other"]
    # The conversation went on across the switch.
    assert [m.text for m in acp_project.model.requests[-1].messages if m.type == "human"] == [
        "one", "two"]
