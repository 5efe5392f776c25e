"""/skills, /agents, /budget and /permissions on a real `Session`: a real SQLite
checkpointer, a scripted model, real files in a temporary project; each change is proved
by what the next turn does (what the model is offered, whether a call waits, a cap)."""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path

import pytest

from fathom.cli.agent_commands import parse_budget_args, write_tool_lists
from fathom.cli.commands import COMMANDS, CommandContext
from fathom.cli.display import PlainDisplay
from fathom.cli.session import Session
from fathom.project.build import AgentSetup
from fathom.project.config import ConfigError, load_config, project_sources
from fathom.project.threads import threads_db_path
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.scripted import ScriptRequest

AGENT = """---
name: {name}
description: {description}
---
You review code.
"""
SKILL = """---
name: {name}
description: {description}
---
Do the thing step by step.
"""


def _policy(request: ScriptRequest) -> object:
    text = request.last_human_text
    results = [m for m in request.turn_messages if m.type == "tool"]
    if text == "write it" and not results:
        return ai("", tool_call("write_file", {"file_path": "/out.txt", "content": "x\n"}))
    if text == "read it" and not results:
        return ai("", tool_call("read_file", {"file_path": "/a.txt"}))
    return "done"


def _session(project: Path, model: ScriptedModel) -> Session:
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    config = load_config(project, home)
    setup = AgentSetup(project, home, config, project_sources(project, home), "openai:scripted",
                       model)
    return Session(setup, threads_db_path(project, home), PlainDisplay(io.StringIO()))


def _run(session: Session, line: str, thread: str = "t1") -> str:
    out = io.StringIO()
    COMMANDS.run(CommandContext(session, argparse.Namespace(plain=True), thread, out=out), line)
    return out.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".fathom" / "agents").mkdir(parents=True)
    (folder / "a.txt").write_text("original\n", encoding="utf-8")
    return folder


def _task_description(model: ScriptedModel) -> str:
    tool = next(t for t in model.requests[-1].tools if t["function"]["name"] == "task")
    return json.dumps(tool)


def test_agents_reload_puts_a_new_definition_in_the_next_turn(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        listed = _run(session, "/agents")
        assert "general-purpose" in listed and "reviewer" not in listed
        (project / ".fathom" / "agents" / "reviewer.md").write_text(
            AGENT.format(name="reviewer", description="Reviews diffs for bugs"), encoding="utf-8")
        session.run("t1", "hello")
        assert "reviewer" not in _task_description(model)  # not reloaded yet

        assert "agents: 1 (added reviewer)" in _run(session, "/agents reload")
        session.run("t1", "hello again")
        assert "Reviews diffs for bugs" in _task_description(model)
        shown = _run(session, "/agents reviewer")
        assert "description: Reviews diffs for bugs" in shown and "You review code." in shown
        assert "no subagent 'nobody'" in _run(session, "/agents nobody")


def test_a_broken_definition_is_refused_and_the_old_agents_kept(project: Path) -> None:
    (project / ".fathom" / "agents" / "reviewer.md").write_text(
        AGENT.format(name="reviewer", description="Reviews"), encoding="utf-8")
    with _session(project, ScriptedModel(policy=_policy)) as session:
        (project / ".fathom" / "agents" / "broken.md").write_text("no front matter",
                                                                  encoding="utf-8")
        said = _run(session, "/agents reload")
        assert said.startswith("not reloaded:") and "broken.md" in said
        assert [a["name"] for a in session.setup.sources.subagents] == ["reviewer"]


@pytest.mark.filterwarnings("ignore::fathom.middleware.skills.SkillWarning")  # misnamed
def test_skills_list_show_and_reload(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        assert _run(session, "/skills").startswith("no skills")
        skill = project / ".fathom" / "skills" / "deploy"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL.format(name="deploy", description="Ship it"),
                                        encoding="utf-8")
        bad = project / ".fathom" / "skills" / "misnamed"
        bad.mkdir()
        (bad / "SKILL.md").write_text(SKILL.format(name="other", description="x"),
                                      encoding="utf-8")
        assert "skills: 1 (added deploy)" in _run(session, "/skills reload")
        listed = _run(session, "/skills")
        assert "deploy    Ship it" in listed
        assert "misnamed  SKIPPED:" in listed
        assert "Do the thing step by step." in _run(session, "/skills deploy")
        session.run("t1", "hello")
        assert "Ship it" in (model.requests[-1].system_prompt or "")


def test_budget_show_set_and_a_cap_that_stops_the_next_turn(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        assert _run(session, "/budget").startswith("no budget")
        assert "budget unchanged" in _run(session, "/budget tokens=lots")
        assert "budget unchanged" in _run(session, "/budget colour=red")
        said = _run(session, "/budget calls=1 tokens=100000")
        assert "max_model_calls = 1, max_tokens = 100000" in said
        assert session.setup.config.budget == {"max_model_calls": 1, "max_tokens": 100000}
        session.run("t1", "read it")  # two calls wanted; the cap allows one
        assert len(model.requests) == 1
        shown = _run(session, "/budget")
        assert "model calls 1 of 1 (100%)" in shown
        _run(session, "/budget calls=off")
        assert session.setup.config.budget == {"max_tokens": 100000}
        assert "budget off" in _run(session, "/budget off")
        assert session.setup.config.budget == {}


def test_parse_budget_args_names_and_values() -> None:
    assert parse_budget_args("tokens=1_000 usd=$2.5 time=60 max_model_calls=3") == {
        "max_tokens": 1000, "max_usd": 2.5, "max_wall_s": 60, "max_model_calls": 3}
    assert parse_budget_args("usd=off") == {"max_usd": None}
    with pytest.raises(ValueError, match="tokens, usd, calls"):
        parse_budget_args("tokens")


def test_permissions_ask_and_allow_change_what_the_next_turn_waits_for(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        shown = _run(session, "/permissions")
        assert "ask for approval: delete, edit_file, write_file" in shown
        assert "read_file" in shown.splitlines()[2]
        assert "did you mean 'read_file'" in _run(session, "/permissions ask read_fil")

        _run(session, "/permissions ask read_file")
        assert session.run("t1", "read it").status == "approval"
        session.run("t1", None, resume={"decisions": [{"type": "approve"}]})

        _run(session, "/permissions allow write_file")
        assert session.run("t2", "write it").status == "done"
        assert (project / "out.txt").read_text() == "x\n"
        assert not (project / "fathom.toml").exists()  # session only without --save


def test_permissions_save_writes_fathom_toml(project: Path) -> None:
    (project / "fathom.toml").write_text(
        'model = "openai:x"\nauto_approve = [\n  "edit_file",\n]\n\n[budget]\nmax_tokens = 5\n',
        encoding="utf-8")
    with _session(project, ScriptedModel(policy=_policy)) as session:
        _run(session, "/permissions allow write_file --save")
        _run(session, "/permissions ask ls --save")
    config = load_config(project, project.parent / "home")
    assert config.auto_approve == ["edit_file", "write_file"]
    assert config.interrupt_on == ["ls"]
    assert config.budget == {"max_tokens": 5}
    text = (project / "fathom.toml").read_text()
    assert text.index("interrupt_on") < text.index("[budget]")


def test_write_tool_lists_leaves_a_file_that_would_not_read_back(tmp_path: Path) -> None:
    path = tmp_path / "fathom.toml"
    path.write_text('auto_approve = ["a"]\nmodel = 3\n', encoding="utf-8")
    with pytest.raises(ConfigError):
        write_tool_lists(path, {"auto_approve": ["b"]})
    assert path.read_text() == 'auto_approve = ["a"]\nmodel = 3\n'


def test_status_line_counts_tokens_and_the_thread_s_pending_tasks(project: Path) -> None:
    from langchain.agents.middleware.types import AgentMiddleware
    from langgraph.checkpoint.sqlite import SqliteSaver

    from fathom import create_deep_agent
    from fathom.cli.status_line import status_line
    from fathom.middleware.async_subagents.tasks import AsyncSubAgentState

    class TasksChannel(AgentMiddleware):  # the channel the async subagent middleware adds
        state_schema = AsyncSubAgentState

    def task(task_id: str, status: str) -> dict[str, str]:
        return {"task_id": task_id, "agent_name": "r", "thread_id": task_id, "run_id": "r1",
                "status": status, "created_at": "", "last_checked_at": "",
                "last_updated_at": ""}

    with _session(project, ScriptedModel(policy=_policy)) as session:
        assert status_line(session, "t1") == "openai:scripted · thread t1 · 0 tokens · $— · cache -"
        session.run("t1", "hello")
        session.run("t1", "hello again")
        line = status_line(session, "t1")
        assert re.fullmatch(r"openai:scripted · thread t1 · [1-9][\d,]* tokens · \$— · "
                            r"cache \d+%", line), line
        with SqliteSaver.from_conn_string(str(session.db_path)) as saver:
            create_deep_agent(ScriptedModel(policy=lambda r: "ok"), middleware=[TasksChannel()],
                              checkpointer=saver).invoke(
                {"messages": [{"role": "user", "content": "hi"}],
                 "async_tasks": {"a": task("a", "running"), "b": task("b", "waiting"),
                                 "c": task("c", "success")}},
                {"configurable": {"thread_id": "sup"}})
        assert status_line(session, "sup").endswith(" · 2 tasks pending")
