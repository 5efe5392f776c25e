"""`fathom acp --config langgraph.json --graph NAME` serves a user's graph to an editor.

The graphs are in `deploy/agent.py` (a deep agent factory that accepts tools, and a compiled
`create_agent` graph), copied into a deployment folder whose `langgraph.json` names them and
sets their `env`. The real `agent-client-protocol` client spawns the real command, as Zed
does.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import McpServerStdio
from tests.protocols.acp.support import DEADLINE, FATHOM, EditorClient

from fathom.protocols.acp.sessions import SessionStore

HERE = Path(__file__).parent
CALC = McpServerStdio(name="calc", command=sys.executable,
                      args=[str(HERE / "calc_mcp_server.py")], env=[])


@dataclass
class Deploy:
    """A deployment folder (`langgraph.json`, `agent.py`), the project the graph's files
    live in (the editor's `cwd`), and a private home."""

    folder: Path
    project: Path
    home: Path

    @property
    def config(self) -> Path:
        return self.folder / "langgraph.json"

    @property
    def env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        for kept in ("TMPDIR", "PYTHONPATH"):  # PYTHONPATH: the command runs the code under test
            if kept in os.environ:
                env[kept] = os.environ[kept]
        return env

    @asynccontextmanager
    async def open_agent(self, client: EditorClient, graph: str = "coder",
                         *args: str) -> AsyncIterator[tuple[Any, Any]]:
        """`fathom acp --config ... --graph GRAPH`, initialized: (connection, initialize)."""
        async with spawn_agent_process(
            client, str(FATHOM), "acp", "--config", str(self.config), "--graph", graph,
            *args, env=self.env, cwd=self.project, transport_kwargs={"stderr": None},
        ) as (conn, _process):
            init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION),
                                          DEADLINE)
            yield conn, init


@pytest.fixture
def deploy(tmp_path: Path) -> Deploy:
    folder, project, home = tmp_path / "deploy", tmp_path / "project", tmp_path / "home"
    for path in (folder, project, home):
        path.mkdir()
    shutil.copy(HERE / "deploy" / "agent.py", folder / "agent.py")
    (folder / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."],
        "graphs": {"coder": "./agent.py:make_coder", "plain": "./agent.py:plain"},
        "env": {"ACP_GRAPH_ROOT": str(project.resolve())},
    }), encoding="utf-8")  # fmt: skip
    return Deploy(folder.resolve(), project.resolve(), home)


async def test_a_graph_answers_asks_before_writing_and_sends_its_plan(deploy: Deploy) -> None:
    client = EditorClient(answers=["allow_once"])
    async with deploy.open_agent(client) as (conn, init):
        assert init.agent_info.title == "fathom: coder"
        assert init.agent_capabilities.load_session
        session = await conn.new_session(cwd=str(deploy.project), mcp_servers=[])
        sid = session.session_id
        assert [o.id for o in session.config_options] == ["mode"]  # the graph has its model
        done = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert done.stop_reason == "end_turn"
        assert "you said 'hello' (turn 1)" in client.agent_text()

        done = await conn.prompt(session_id=sid, prompt=[text_block("write a.md: alpha\n")])
        assert done.stop_reason == "end_turn"
    assert (deploy.project / "a.md").read_text() == "alpha\n"
    # The graph's interrupt_on approval was a permission request with the write's diff.
    ((asked, options),) = client.permission_requests
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    assert asked.title == "Write `/a.md`"
    diff = asked.content[0]
    assert (diff.type, diff.path, diff.new_text, diff.old_text) == (
        "diff", str(deploy.project / "a.md"), "alpha\n", None)
    results = {u.tool_call_id: u for u in client.of_kind("tool_call_update")}
    assert results[asked.tool_call_id].status == "completed"
    # Its todos became a plan.
    (plan,) = client.of_kind("plan")
    assert [(e.content, e.status) for e in plan.entries] == [("write a.md", "in_progress")]
    # The sessions are kept with the deployment's project, as the graph's.
    record = SessionStore(deploy.folder / ".fathom" / "threads.sqlite").get(sid)
    assert record is not None and record.model == "graph:coder"


async def test_a_rejected_write_is_not_made_and_accept_edits_mode_stops_asking(
    deploy: Deploy,
) -> None:
    client = EditorClient(answers=["reject_once"])
    async with deploy.open_agent(client) as (conn, _):
        sid = (await conn.new_session(cwd=str(deploy.project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write a.md: no")])
        assert not (deploy.project / "a.md").exists()
        await conn.set_session_mode(session_id=sid, mode_id="accept_edits")
        await conn.prompt(session_id=sid, prompt=[text_block("write b.md: yes")])
        with pytest.raises(RequestError, match="brings its own model"):
            await conn.set_config_option(session_id=sid, config_id="model", value="x:y")
    assert len(client.permission_requests) == 1  # only the first write was asked about
    assert (deploy.project / "b.md").read_text() == "yes"


async def test_a_session_loads_after_the_process_restarts(deploy: Deploy) -> None:
    first = EditorClient(answers=["allow_once"])
    async with deploy.open_agent(first) as (conn, _):
        sid = (await conn.new_session(cwd=str(deploy.project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write a.md: alpha")])
        await conn.prompt(session_id=sid, prompt=[text_block("and then?")])

    second = EditorClient()
    async with deploy.open_agent(second) as (conn, _):
        await conn.load_session(cwd=str(deploy.project), session_id=sid, mcp_servers=[])
        users = [u.content.text for u in second.of_kind("user_message_chunk")]
        assert users == ["write a.md: alpha", "and then?"]
        assert [u.title for u in second.of_kind("tool_call")] == ["write_todos",
                                                                   "Write `/a.md`"]
        assert [e.content for e in second.of_kind("plan")[-1].entries] == ["write a.md"]
        await conn.prompt(session_id=sid, prompt=[text_block("third")])
    # The model saw the earlier turns: this is the third human message of the thread.
    assert "you said 'third' (turn 3)" in second.agent_text()

    # Another graph of the file does not load the coder's session.
    other = EditorClient()
    async with deploy.open_agent(other, "plain") as (conn, _):
        with pytest.raises(RequestError, match="belongs to coder"):
            await conn.load_session(cwd=str(deploy.project), session_id=sid, mcp_servers=[])


async def test_a_graph_question_is_answered_by_the_next_prompt(deploy: Deploy) -> None:
    client = EditorClient()
    async with deploy.open_agent(client) as (conn, _):
        sid = (await conn.new_session(cwd=str(deploy.project), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("ask")])
        assert done.stop_reason == "end_turn"
        assert "Which colour?" in client.agent_text()
        await conn.prompt(session_id=sid, prompt=[text_block("blue")])
    assert "noted: the person said blue" in client.agent_text()
    assert not client.permission_requests


async def test_the_editors_mcp_servers_reach_a_factory_that_takes_tools(
    deploy: Deploy,
) -> None:
    client = EditorClient()
    async with deploy.open_agent(client) as (conn, init):
        assert init.agent_capabilities.mcp_capabilities.http
        sid = (await conn.new_session(cwd=str(deploy.project), mcp_servers=[CALC])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("add")])
    assert "the tool said: sum is 5" in client.agent_text()


async def test_a_compiled_graph_says_it_cannot_take_the_editors_mcp_servers(
    deploy: Deploy,
) -> None:
    client = EditorClient()
    async with deploy.open_agent(client, "plain") as (conn, init):
        assert not init.agent_capabilities.mcp_capabilities.http
        sid = (await conn.new_session(cwd=str(deploy.project), mcp_servers=[CALC])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("add")])
    text = client.agent_text()
    assert "'calc'" in text and "not connected" in text and "compiled graph" in text
    assert "I have no calc_add tool" in text


@pytest.mark.parametrize(("graph_args", "expected"), [
    (["--graph", "nope"], "has no graph 'nope'; its graphs are coder, plain"),
    ([], "has the graphs coder, plain; choose one with --graph NAME"),
])  # fmt: skip
def test_an_unknown_or_missing_graph_name_is_an_error_listing_the_graphs(
    deploy: Deploy, graph_args: list[str], expected: str,
) -> None:
    done = subprocess.run(
        [str(FATHOM), "acp", "--config", str(deploy.config), *graph_args], env=deploy.env,
        cwd=deploy.project, capture_output=True, text=True, timeout=DEADLINE,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert expected in done.stderr
    assert done.stdout == ""  # nothing on the protocol channel


@pytest.mark.parametrize(("args", "expected"), [
    (["--graph", "coder"], "--graph names a graph of a langgraph.json; give it with --config"),
    (["--config", "CONFIG", "--model", "openai:gpt-4.1"], "--model apply to the project agent"),
])  # fmt: skip
def test_project_agent_options_and_a_graph_without_its_file_are_refused(
    deploy: Deploy, args: list[str], expected: str,
) -> None:
    args = [str(deploy.config) if a == "CONFIG" else a for a in args]
    done = subprocess.run(
        [str(FATHOM), "acp", *args], env=deploy.env, cwd=deploy.project, capture_output=True,
        text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert expected in done.stderr
