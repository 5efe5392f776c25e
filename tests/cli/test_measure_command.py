"""`fathom stats sticky`, `fathom calls` and `/calls` on the command's threads and a server's.

A server's: fathom's own app under uvicorn on a free port, in a thread of the test, with a
deep agent whose turns go to a `coffee` or a `flight` subagent; the command is the real
`fathom` console script in a subprocess, reading the server with the LangGraph SDK. The
command's own: a real `Session` on a temporary project (a scripted model, the project
agent with its general-purpose subagent), then the console script on its threads database.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from langchain_core.messages import AIMessage
from langgraph_sdk import get_sync_client

from fathom import create_deep_agent
from fathom.cli.commands import COMMANDS, CommandContext
from fathom.cli.display import PlainDisplay
from fathom.cli.session import Session
from fathom.project.build import AgentSetup
from fathom.project.config import load_config, project_sources
from fathom.project.threads import ThreadIndex, threads_db_path
from fathom.server import create_app
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

from .conftest import FATHOM, fathom_env

DEADLINE_S = 60.0  # bounds a hang; the conditions hold within milliseconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _delegate(request: ScriptRequest) -> AIMessage | str:
    if request.turn_results:
        return "done: " + str(request.turn_results[-1].text)
    kind = "flight" if "flight" in request.last_human_text else "coffee"
    return ai("", tool_call("task", {"description": request.last_human_text,
                                     "subagent_type": kind}))


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    subagents = [{"name": name, "description": f"{name} orders", "system_prompt": name,
                  "model": ScriptedModel(policy=lambda r: "booked")}
                 for name in ("coffee", "flight")]
    app = create_app({"desk": create_deep_agent(ScriptedModel(policy=_delegate),
                                                subagents=subagents, name="desk")})
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + DEADLINE_S
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=DEADLINE_S)


@pytest.fixture(scope="module")
def server_threads(server_url: str) -> dict[str, str]:
    """Thread "long": coffee, coffee, flight; thread "short": one coffee."""
    client = get_sync_client(url=server_url, api_key=None)
    made = {}
    for name, texts in (("long", ["a coffee", "more coffee", "a flight"]),
                        ("short", ["a coffee"])):
        thread = client.threads.create()["thread_id"]
        for text in texts:
            run = client.runs.create(thread, "desk", input={
                "messages": [{"role": "user", "content": text}]})
            client.runs.join(thread, run["run_id"])
        made[name] = thread
    return made


def _fathom(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FATHOM), *args], cwd=cwd, env=fathom_env(home),
                          capture_output=True, text=True, encoding="utf-8", timeout=120,
                          check=False)


def test_stats_sticky_over_a_servers_threads(server_url: str, server_threads: dict[str, str],
                                             tmp_path: Path) -> None:
    done = _fathom("stats", "sticky", "--url", server_url, "--idle", "30m",
                   cwd=tmp_path, home=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "over 2 threads, 4 turns, 2 adjacent pairs (idle threshold 30m)" in out
    assert "sticky rate         50.0% (1 of 2 pairs stay in their domain)" in out
    assert "single-turn 50.0%, P50 1 turns, P90 3 turns" in out
    assert "switch rate         50.0%" in out
    assert "domains             coffee 3, flight 1" in out
    assert "savable calls/day" in out and "tokens/day" in out  # the calls' tokens are known

    done = _fathom("stats", "sticky", "--url", server_url, "--idle", "0s", "--json",
                   "--thread", server_threads["long"], cwd=tmp_path, home=tmp_path)
    card = json.loads(done.stdout)
    assert (card["turns"], card["pairs"], card["rate"]) == (3, 2, 0.0)
    assert "rarely pay" in card["verdict"]
    assert card["by_threshold"] == {"300": 0.5, "1800": 0.5, "7200": 0.5}


def test_calls_of_a_servers_thread(server_url: str, server_threads: dict[str, str],
                                   tmp_path: Path) -> None:
    thread = server_threads["long"]
    done = _fathom("calls", thread, "--url", server_url, "--last", cwd=tmp_path, home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("── run ")
    assert lines[1].startswith("3 model calls · ")
    rows = [line.split() for line in lines[3:6]]
    assert [(row[1], row[2]) for row in rows] == [
        ("desk", "agent"), ("flight", "subagent"), ("desk", "agent")]
    assert "  + human   a flight" in done.stdout  # the subagent's task, as it was sent
    every = _fathom("calls", thread, "--url", server_url, "--json", cwd=tmp_path, home=tmp_path)
    assert [r["caller"] for r in json.loads(every.stdout)] == ["desk", "coffee", "desk",
                                                                "desk", "coffee", "desk",
                                                                "desk", "flight", "desk"]
    missing = _fathom("calls", "no-such-thread", "--url", server_url, cwd=tmp_path,
                      home=tmp_path)
    assert missing.returncode == 1 and "was not found" in missing.stderr


def test_calls_slash_command_attached_to_a_server(server_url: str,
                                                  server_threads: dict[str, str]) -> None:
    from fathom.cli.remote import RemoteSession

    with RemoteSession.connect(server_url, PlainDisplay(io.StringIO())) as session:
        shown = _slash(session, "/calls", server_threads["short"])
        every = _slash(session, "/calls all", server_threads["long"])
    rows = [line.split() for line in shown.splitlines()[3:6]]
    assert [row[1] for row in rows] == ["desk", "coffee", "desk"]
    assert every.count("── run ") == 3


# --------------------------------------------------------------------------- the command's


def _project_policy(request: ScriptRequest) -> AIMessage | str:
    """The main agent (it has `task`) delegates each turn, then answers; the subagent answers."""
    if not request.has_tool("task"):
        return "looked it up"
    if request.turn_results:
        return "done"
    return ai("", tool_call("task", {"description": request.last_human_text,
                                     "subagent_type": "general-purpose"}))


def _session(project: Path, home: Path) -> Session:
    config = load_config(project, home)
    setup = AgentSetup(project, home, config, project_sources(project, home), "openai:scripted",
                       ScriptedModel(policy=_project_policy))
    return Session(setup, threads_db_path(project, home), PlainDisplay(io.StringIO()))


def _slash(session: Any, line: str, thread_id: str) -> str:
    out = io.StringIO()
    COMMANDS.run(CommandContext(session, argparse.Namespace(), thread_id, out=out), line)
    return out.getvalue()


@pytest.fixture
def local_project(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    with _session(project, home) as session:
        assert "no model calls recorded" in _slash(session, "/calls", "t1")
        session.run("t1", "look up the first thing")
        session.run("t1", "and the second")
    return project, home


def test_calls_slash_command_and_the_stored_records(local_project: tuple[Path, Path]) -> None:
    project, home = local_project
    with _session(project, home) as session:  # a later session reads what the first stored
        last = _slash(session, "/calls", "t1")
        every = _slash(session, "/calls all", "t1")
    rows = [line.split() for line in last.splitlines()[3:6]]
    assert [(row[1], row[2]) for row in rows] == [
        ("fathom", "agent"), ("general-purpose", "subagent"), ("fathom", "agent")]
    assert "  + human   and the second" in last
    assert "(1 of 2)" in every and "(2 of 2)" in every
    stored = ThreadIndex(threads_db_path(project, home)).calls("t1")
    assert len(stored) == 6 and len({r["run_id"] for r in stored}) == 2
    # The session's recorder spans turns: turn 2's first call adds what turn 1 ended with
    # (the answer) and the new message, not the whole history again.
    assert [i["kind"] for i in stored[3]["new"]] == ["ai", "human"]


def test_stats_sticky_and_calls_over_the_commands_threads(
        local_project: tuple[Path, Path]) -> None:
    project, home = local_project
    done = _fathom("stats", "sticky", cwd=project, home=home)
    assert done.returncode == 0, done.stderr
    assert "over 1 thread, 2 turns, 1 adjacent pair " in done.stdout
    assert "sticky rate         100.0% (1 of 1 pairs" in done.stdout
    assert "domains             general-purpose 2" in done.stdout
    assert "s of model time/day" in done.stdout  # the stored calls' latency
    calls = _fathom("calls", "t", "--brief", cwd=project, home=home)  # a prefix of t1
    assert calls.returncode == 0, calls.stderr
    assert calls.stdout.count("── run ") == 2 and "+ human" not in calls.stdout
    (project / "labels.py").write_text(
        "def first_word(turn):\n"
        "    return str(turn.messages[0].text).split()[0]\n", encoding="utf-8")
    own = _fathom("stats", "sticky", "--label", "labels:first_word", "--json", cwd=project,
                  home=home)
    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)["domains"] == {"and": 1, "look": 1}
    bad = _fathom("stats", "sticky", "--label", "labels", cwd=project, home=home)
    assert bad.returncode == 2 and "module:function" in bad.stderr
    nothing = _fathom("calls", "zz", cwd=project, home=home)
    assert nothing.returncode == 1 and "is not a thread of this project" in nothing.stderr
