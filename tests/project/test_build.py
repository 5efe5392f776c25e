"""Building the command's model, backend and agent from a project's configuration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fathom.project.build import (
    NO_MODEL_HELP,
    USER_ROUTE,
    AgentSetup,
    ModelSetupError,
    build_agent,
    build_backend,
    build_model,
    choose_model,
    confinement,
    subagent_specs,
)
from fathom.project.config import ConfigError, FathomConfig, load_config, project_sources
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ai, tool_call

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FATHOM_MODEL")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


def test_model_choice_order(monkeypatch: pytest.MonkeyPatch) -> None:
    config = FathomConfig(model="anthropic:claude-sonnet-4-5")
    assert choose_model("openai:gpt-4o", config) == "openai:gpt-4o"
    assert choose_model(None, config) == "anthropic:claude-sonnet-4-5"
    monkeypatch.setenv("FATHOM_MODEL", "openai:gpt-4.1-mini")
    assert choose_model(None, FathomConfig()) == "openai:gpt-4.1-mini"
    monkeypatch.delenv("FATHOM_MODEL")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert choose_model(None, FathomConfig()) == "anthropic:claude-sonnet-4-5"
    with pytest.raises(ModelSetupError, match="provider:model"):
        choose_model("gpt-4o", FathomConfig())


def test_no_model_and_no_key_explains_in_three_lines() -> None:
    with pytest.raises(ModelSetupError) as raised:
        choose_model(None, FathomConfig())
    assert str(raised.value) == NO_MODEL_HELP
    lines = NO_MODEL_HELP.splitlines()
    assert len(lines) == 3 and "fathom demo" in lines[2] and "OPENAI_API_KEY" in lines[1]


def test_missing_key_and_missing_key_variable_are_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ModelSetupError, match="export OPENAI_API_KEY"):
        build_model("openai:gpt-4.1", FathomConfig())
    with pytest.raises(ModelSetupError, match="MY_KEY"):
        build_model("openai:x", FathomConfig(api_key_env="MY_KEY"))
    with pytest.raises(ModelSetupError, match="cannot build the model"):
        build_model("nosuchprovider:x", FathomConfig(base_url="http://127.0.0.1:9/v1"))


def test_base_url_model_talks_to_an_openai_compatible_server() -> None:
    scripted = ScriptedModel(policy=lambda request: f"echo {request.last_human_text}")
    with ScriptedOpenAIServer(scripted) as server:
        model = build_model("openai:local-llm", FathomConfig(base_url=server.base_url))
        assert model.invoke("hi").text == "echo hi"


def _setup(project: Path, home: Path, model: ScriptedModel, **overrides: object) -> AgentSetup:
    config = load_config(project, home)
    values: dict[str, object] = dict(
        project_dir=project, home=home, config=config,
        sources=project_sources(project, home), model_name="scripted", model=model,
    )
    values.update(overrides)
    return AgentSetup(**values)  # type: ignore[arg-type]


def test_approvals_defaults_config_and_auto_approve(tmp_path: Path) -> None:
    (tmp_path / "fathom.toml").write_text(
        'interrupt_on = ["task"]\nauto_approve = ["edit_file"]\n', encoding="utf-8"
    )
    setup = _setup(tmp_path, tmp_path / "home", ScriptedModel(), auto_approve=["execute"])
    assert setup.approvals() == {"delete": True, "task": True, "write_file": True}


def test_misspelled_tool_names_in_approvals_are_refused(tmp_path: Path) -> None:
    model = ScriptedModel()
    with pytest.raises(ConfigError, match=r"--auto-approve names an unknown tool: 'wrte_file' "
                                          r"\(did you mean 'write_file'\?\)"):
        _setup(tmp_path, tmp_path / "home", model, auto_approve=["wrte_file"]).approvals()
    (tmp_path / "fathom.toml").write_text('interrupt_on = ["grpe"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"interrupt_on .*'grpe'.*tools are: .*grep"):
        _setup(tmp_path, tmp_path / "home", model).approvals()


def test_execute_is_gated_only_when_a_sandbox_gives_it(tmp_path: Path) -> None:
    none = _setup(tmp_path, tmp_path / "home", ScriptedModel())
    # no `execute` tool without a sandbox
    assert none.approvals() == {"delete": True, "edit_file": True, "write_file": True}
    skipped = _setup(tmp_path, tmp_path / "home", ScriptedModel(), auto_approve=["execute"])
    assert "execute" not in skipped.approvals()  # a known name with no tool: accepted
    local = _setup(tmp_path, tmp_path / "home", ScriptedModel(), sandbox="local")
    assert local.approvals()["execute"] is True
    from langgraph.checkpoint.memory import InMemorySaver

    # The library refuses interrupt_on names the agent lacks, so both must build.
    build_agent(none, InMemorySaver())
    build_agent(local, InMemorySaver())


def test_a_gated_task_does_not_break_a_subagent_with_a_tool_list(tmp_path: Path) -> None:
    agents = tmp_path / ".fathom" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: reads\ntools: [read_file]\n---\nRead.\n",
        encoding="utf-8",
    )
    (tmp_path / "fathom.toml").write_text('interrupt_on = ["task"]\n', encoding="utf-8")
    setup = _setup(tmp_path, tmp_path / "home", ScriptedModel())
    [spec] = subagent_specs(setup)
    # no `task` in a subagent
    assert spec["interrupt_on"] == {"delete": False, "edit_file": False, "write_file": False}
    from langgraph.checkpoint.memory import InMemorySaver

    build_agent(setup, InMemorySaver())


def test_confinement_names_the_root_and_where_commands_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".fathom").mkdir(parents=True)
    line = confinement(_setup(tmp_path, home, ScriptedModel(), sandbox="local"))
    assert line.startswith(f"files: {tmp_path} (confined; the agent sees it as /, and "
                           f"{home / '.fathom'} as {USER_ROUTE})")
    assert "UNSANDBOXED" in line
    assert "commands: none" in confinement(_setup(tmp_path, home, ScriptedModel()))


def test_backend_routes_project_state_and_user_folder(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "h"
    (home / ".fathom").mkdir(parents=True)
    project.mkdir()
    backend = build_backend(project, home, "none")
    assert sorted(backend.routes) == [
        USER_ROUTE, "/conversation_history/", "/large_tool_results/"
    ]
    backend.write("/notes.md", "on disk")
    assert (project / "notes.md").read_text() == "on disk"
    backend.write(USER_ROUTE + "AGENTS.md", "mine")
    assert (home / ".fathom" / "AGENTS.md").read_text() == "mine"
    assert not hasattr(backend.default, "execute")
    assert hasattr(build_backend(project, home, "local").default, "execute")


def test_subagent_tools_are_checked_and_limit_the_subagent(tmp_path: Path) -> None:
    agents = tmp_path / ".fathom" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: reads\ntools: [read_file]\n---\nRead things.\n",
        encoding="utf-8",
    )
    (tmp_path / "a.txt").write_text("alpha", encoding="utf-8")

    def policy(request):  # the reader tries a tool it does not have, then reads
        if "Read things." in (request.system_prompt or ""):
            if not any(m.type == "tool" for m in request.messages):
                return ai("", tool_call("write_file", {"file_path": "/x", "content": "x"}),
                          tool_call("read_file", {"file_path": "/a.txt"}))
            return "read: " + " | ".join(m.text for m in request.messages if m.type == "tool")
        if not any(m.type == "tool" for m in request.messages):
            return ai("", tool_call("task", {"description": "read a.txt",
                                             "subagent_type": "reader"}))
        return "done"

    model = ScriptedModel(policy=policy)
    setup = _setup(tmp_path, tmp_path / "home", model)
    from langgraph.checkpoint.memory import InMemorySaver

    agent = build_agent(setup, InMemorySaver())
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                          {"configurable": {"thread_id": "t"}})
    reader_request = next(r for r in model.requests if "Read things." in (r.system_prompt or ""))
    assert reader_request.tool_names == ["read_file"]
    report = next(m for m in result["messages"] if m.type == "tool" and m.name == "task")
    assert "not available to this agent" in report.text and "alpha" in report.text
    assert not (tmp_path / "x").exists()

    (agents / "bad.md").write_text(
        "---\nname: bad\ndescription: d\ntools: [rm_rf]\n---\nNo.\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"unknown tool.*rm_rf"):
        subagent_specs(_setup(tmp_path, tmp_path / "home", model))


def test_memory_and_skills_from_project_and_user(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "h"
    (project / ".fathom" / "skills" / "greet").mkdir(parents=True)
    (project / ".fathom" / "skills" / "greet" / "SKILL.md").write_text(
        "---\nname: greet\ndescription: How to greet people.\n---\nSay hello.\n",
        encoding="utf-8")
    (home / ".fathom").mkdir(parents=True)
    (home / ".fathom" / "AGENTS.md").write_text("User prefers British spelling.",
                                                encoding="utf-8")
    (project / ".fathom" / "AGENTS.md").write_text("Project uses tabs.", encoding="utf-8")
    model = ScriptedModel(policy=lambda request: "ok")
    from langgraph.checkpoint.memory import InMemorySaver

    agent = build_agent(_setup(project, home, model), InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]},
                 {"configurable": {"thread_id": "t"}})
    prompt = model.requests[0].system_prompt or ""
    assert "User prefers British spelling." in prompt and "Project uses tabs." in prompt
    assert prompt.index("British") < prompt.index("tabs")
    assert "greet" in prompt and "How to greet people." in prompt
    assert str(project) in prompt  # the CLI's local context


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux-only")
def test_bubblewrap_backend_runs_in_the_project(tmp_path: Path) -> None:
    import shutil

    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is required: apt-get install bubblewrap")
    backend = build_backend(tmp_path, tmp_path / "home", "bubblewrap")
    (tmp_path / "seen.txt").write_text("inside", encoding="utf-8")
    assert "inside" in backend.execute("cat seen.txt").output
