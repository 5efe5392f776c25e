"""The `fathom` command with MCP servers: `[mcp_servers]` in fathom.toml, a project
`.mcp.json`, a server that fails to start, approval before an MCP tool unless its server
says `auto_approve = true`, `interrupt_on` by the prefixed name, and `/mcp`.

The servers are real FastMCP processes (`tests/protocols/mcp/servers/`); the model is scripted.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from tests.protocols.mcp.support import STARTUP_TIMEOUT_S, TOOLS_SERVER

from fathom.testing import ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FathomProject

# The start-up timeout only bounds a hang: a loaded machine can take many seconds to import
# a FastMCP server, past the default 30 s.
CALC = f'[mcp_servers.calc]\ncommand = {json.dumps(sys.executable)}\n' \
       f'args = [{json.dumps(str(TOOLS_SERVER))}]\ntimeout = {STARTUP_TIMEOUT_S}\n'
AUTO_CALC = CALC + "auto_approve = true\n"


def _add_then_report(request: Any) -> Any:
    results = request.turn_results
    if not results:
        return ai("", tool_call("calc_add", {"a": 2, "b": 3}))
    return f"calc said {results[-1].text}"


@pytest.fixture
def scripted_policy() -> Script:
    return _add_then_report


def _tool_answers(payload: dict[str, Any], name: str) -> list[str]:
    return [m["content"] for m in payload["messages"] if m.get("name") == name]


def test_a_server_from_fathom_toml_gives_the_agent_its_prefixed_tools(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config(AUTO_CALC)
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 0, done.stderr
    assert _tool_answers(payload, "calc_add") == ["5"]
    assert payload["answer"] == "calc said 5"


def test_a_project_mcp_json_server_that_cannot_start_is_a_warning_and_the_run_goes_on(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config()
    fathom_project.write(".mcp.json", json.dumps({"mcpServers": {
        "calc": {"command": sys.executable, "args": [str(TOOLS_SERVER)],
                 "timeout": STARTUP_TIMEOUT_S, "auto_approve": True},
        "broken": {"command": "/nonexistent/mcp-server", "args": []},
    }}))
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 0, done.stderr
    assert "MCP server 'broken' was not started" in done.stderr
    assert "No such file" in done.stderr
    assert payload["answer"] == "calc said 5"


def test_an_mcp_tool_from_fathom_toml_waits_for_approval_by_default(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config(CALC)
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 3, done.stderr
    assert payload["status"] == "approval"
    (pending,) = payload["pending_approvals"]
    assert (pending["name"], pending["args"]) == ("calc_add", {"a": 2, "b": 3})
    assert _tool_answers(payload, "calc_add") == []  # it did not run


def test_an_mcp_tool_from_mcp_json_waits_for_approval_by_default(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config()
    fathom_project.write(".mcp.json", json.dumps({"mcpServers": {
        "calc": {"command": sys.executable, "args": [str(TOOLS_SERVER)],
                 "timeout": STARTUP_TIMEOUT_S},
    }}))
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 3, done.stderr
    (pending,) = payload["pending_approvals"]
    assert pending["name"] == "calc_add"
    assert _tool_answers(payload, "calc_add") == []


def test_auto_approve_false_in_mcp_json_asks_and_true_runs_without_asking(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config()
    entry = {"command": sys.executable, "args": [str(TOOLS_SERVER)],
             "timeout": STARTUP_TIMEOUT_S}
    fathom_project.write(".mcp.json", json.dumps({"mcpServers": {
        "calc": {**entry, "auto_approve": False}}}))
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 3, done.stderr
    assert [p["name"] for p in payload["pending_approvals"]] == ["calc_add"]

    fathom_project.write(".mcp.json", json.dumps({"mcpServers": {
        "calc": {**entry, "auto_approve": True}}}))
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 0, done.stderr
    assert _tool_answers(payload, "calc_add") == ["5"]


def test_an_approved_mcp_tool_call_runs_after_fathom_approve(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config(CALC)
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 3, done.stderr
    approved = fathom_project.run("approve", payload["thread_id"], "--all")
    assert approved.returncode == 0, approved.stderr
    assert "calc said 5" in approved.stdout


def test_interrupt_on_the_prefixed_name_makes_the_mcp_tool_wait_for_approval(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config(f'interrupt_on = ["calc_add"]\n{AUTO_CALC}')
    done, payload = fathom_project.run_json("add two and three")
    assert done.returncode == 3, done.stderr
    assert payload["status"] == "approval"
    (pending,) = payload["pending_approvals"]
    assert pending["name"] == "calc_add"
    assert _tool_answers(payload, "calc_add") == []


def test_a_bad_mcp_server_entry_stops_the_command_naming_the_file(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config('[mcp_servers.calc]\nargs = ["x"]\n')
    done = fathom_project.run("run", "hi")
    assert done.returncode == 2
    assert "fathom.toml, line 3" in done.stderr
    assert "MCP server 'calc'" in done.stderr and "`command`" in done.stderr


def test_slash_mcp_lists_the_servers_their_state_and_tools(
    fathom_project: FathomProject,
) -> None:
    fathom_project.write_config(CALC + '[mcp_servers.gone]\ncommand = "/nonexistent/x"\n')
    child = fathom_project.spawn("--plain")
    fathom_project.prompt(child)
    child.sendline("/mcp")
    child.expect("calc_pid")
    fathom_project.leave(child)
    text = fathom_project.transcript(child)
    assert "calc (stdio): connected" in text
    assert "asks before each call" in text
    assert "calc_add" in text and "calc_shout" in text
    assert "gone (stdio): failed" in text and "No such file" in text


async def test_mcp_serve_without_langgraph_json_serves_the_project_agent(
    fathom_project: FathomProject,
) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from .conftest import FATHOM

    fathom_project.write_config(AUTO_CALC)
    params = StdioServerParameters(command=str(FATHOM), args=["mcp", "serve"],
                                   env=fathom_project.env, cwd=str(fathom_project.project))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("ask", {"question": "add two and three"})
    assert not result.isError, result.content
    assert result.structuredContent is not None
    assert result.structuredContent["answer"] == "calc said 5"  # its MCP tool ran, too
    assert (fathom_project.project / ".fathom" / "threads.sqlite").is_file()
