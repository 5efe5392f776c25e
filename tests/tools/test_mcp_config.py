"""MCP server settings: the `mcp.json` shape, `[mcp_servers]` in fathom.toml, and the errors
a person can make in them. No server is started here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.cli.mcp import mcp_report, server_configs
from fathom.project.config import ConfigError, load_config
from fathom.protocols.mcp import McpConfigError, McpServers, parse_servers, read_mcp_json


def test_the_claude_code_and_cursor_shape_reads_command_and_url_servers(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files"], "env": {"A": "1"}},
        "search": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer k"}},
        "events": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }}))
    files, search, events = read_mcp_json(path)
    assert files.connection == {"transport": "stdio", "command": "npx",
                                "args": ["-y", "server-files"], "env": {"A": "1"}}
    assert files.prefix == "files_"
    assert search.connection["transport"] == "streamable_http"
    assert search.connection["headers"] == {"Authorization": "Bearer k"}
    assert events.connection["transport"] == "sse"


def test_prefix_and_timeouts_are_configurable() -> None:
    (server,) = parse_servers({"s": {"command": "x", "prefix": "", "timeout": 5,
                                     "tool_timeout": 2.5}})
    assert (server.prefix, server.timeout, server.tool_timeout) == ("", 5.0, 2.5)


def test_a_server_asks_for_approval_unless_it_says_auto_approve() -> None:
    asking, trusted = parse_servers({"asking": {"command": "x"},
                                     "trusted": {"command": "x", "auto_approve": True}})
    assert (asking.auto_approve, trusted.auto_approve) == (False, True)


@pytest.mark.parametrize(("entry", "message"), [
    ({"args": ["x"]}, "needs `command`"),
    ({"command": "x", "colour": "red"}, "unknown key(s) colour"),
    ({"command": "x", "args": "not a list"}, "'args' must be a list"),
    ({"url": "localhost:80"}, "needs `url`"),
    ({"command": "x", "transport": "carrier-pigeon"}, "transport 'carrier-pigeon'"),
    ({"command": "x", "timeout": 0}, "'timeout' must be a positive number"),
    ({"command": "x", "auto_approve": "yes"}, "'auto_approve' must be true or false"),
])
def test_a_bad_entry_names_the_server_and_the_fix(entry: dict, message: str) -> None:
    with pytest.raises(McpConfigError, match="MCP server 'bad'") as caught:
        parse_servers({"bad": entry})
    assert message in str(caught.value)


def test_invalid_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {\n  "a": {,}\n}}')
    with pytest.raises(McpConfigError, match=r"mcp\.json, line 2: invalid JSON"):
        read_mcp_json(path)


def test_fathom_toml_servers_merge_by_name_over_the_users(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".fathom").mkdir(parents=True)
    project.mkdir()
    (home / ".fathom" / "config.toml").write_text(
        '[mcp_servers.a]\ncommand = "user-a"\n[mcp_servers.b]\ncommand = "user-b"\n')
    (project / "fathom.toml").write_text('[mcp_servers.b]\ncommand = "project-b"\n')
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"c": {"url": "http://h/mcp"}}}))
    config = load_config(project, home)
    servers = {s.name: s for s in server_configs(project, config)}
    assert servers["a"].connection["command"] == "user-a"
    assert servers["b"].connection["command"] == "project-b"
    assert servers["c"].connection["url"] == "http://h/mcp"


def test_a_bad_fathom_toml_server_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "fathom.toml").write_text('model = "openai:x"\n\n[mcp_servers.s]\nurl = 3\n')
    with pytest.raises(ConfigError, match=r"fathom\.toml, line 3: MCP server 's'"):
        load_config(tmp_path, tmp_path / "nohome")


def test_slash_mcp_without_servers_says_how_to_add_them() -> None:
    assert "[mcp_servers]" in mcp_report(None)


def test_slash_mcp_reports_a_server_that_failed_and_why() -> None:
    with McpServers.open(parse_servers({"ghost": {"command": "/nonexistent/ghost"}})) as mcp:
        report = mcp_report(mcp)
    assert report.startswith("ghost (stdio): failed — FileNotFoundError")
