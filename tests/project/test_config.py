"""Project conventions: `fathom.toml` / `~/.fathom/config.toml`, memory, skills, subagents."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fathom.project.config import (
    ConfigError,
    FathomConfig,
    ProjectSources,
    load_config,
    project_sources,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def user_config(home: Path, text: str) -> Path:
    return write(home / ".fathom" / "config.toml", text)


def project_config(project: Path, text: str) -> Path:
    return write(project / "fathom.toml", text)


# --- configuration -----------------------------------------------------------------------


def test_defaults_without_any_file(project: Path, home: Path) -> None:
    config = load_config(project, home=home)
    assert config == FathomConfig()
    assert config.model is None
    assert config.base_url is None
    assert config.api_key_env is None
    assert config.sandbox == "none"
    assert config.auto_approve == []
    assert config.interrupt_on == []


def test_config_is_frozen(project: Path, home: Path) -> None:
    config = load_config(project, home=home)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = "openai:gpt-4o"  # type: ignore[misc]


def test_home_defaults_to_path_home(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_config(home, 'model = "anthropic:claude-sonnet-4-5"\n')
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: home))
    assert load_config(project).model == "anthropic:claude-sonnet-4-5"


def test_user_config_alone(project: Path, home: Path) -> None:
    user_config(
        home,
        'model = "openai:llama3"\nbase_url = "http://localhost:11434/v1"\n'
        'api_key_env = "OLLAMA_KEY"\nsandbox = "bubblewrap"\n'
        'auto_approve = ["read_file"]\ninterrupt_on = ["execute"]\n',
    )
    assert load_config(project, home=home) == FathomConfig(
        model="openai:llama3",
        base_url="http://localhost:11434/v1",
        api_key_env="OLLAMA_KEY",
        sandbox="bubblewrap",
        auto_approve=["read_file"],
        interrupt_on=["execute"],
    )


def test_project_overrides_user_key_by_key(project: Path, home: Path) -> None:
    user_config(
        home,
        'model = "openai:gpt-4o"\napi_key_env = "MY_KEY"\nsandbox = "local"\n'
        'auto_approve = ["read_file", "ls"]\n',
    )
    project_config(
        project,
        'model = "openai:qwen2.5"\nbase_url = "http://localhost:8000/v1"\n'
        'auto_approve = ["write_file"]\n',
    )
    config = load_config(project, home=home)
    assert config.model == "openai:qwen2.5"  # project wins
    assert config.base_url == "http://localhost:8000/v1"  # only in the project
    assert config.api_key_env == "MY_KEY"  # only in the user file
    assert config.sandbox == "local"
    assert config.auto_approve == ["write_file"]  # lists are replaced, not joined
    assert config.interrupt_on == []


def test_project_config_alone(project: Path, home: Path) -> None:
    project_config(project, 'interrupt_on = ["execute", "write_file"]\n')
    assert load_config(project, home=home).interrupt_on == ["execute", "write_file"]


def test_toml_syntax_error_names_file_and_line(project: Path, home: Path) -> None:
    path = project_config(project, 'model = "openai:gpt-4o"\n\nsandbox = local\n')
    with pytest.raises(ConfigError) as info:
        load_config(project, home=home)
    message = str(info.value)
    assert str(path) in message
    assert f"{path}, line 3: invalid TOML: Invalid value" in message
    assert "column" not in message
    assert isinstance(info.value, ValueError)


def test_toml_syntax_error_in_user_file(project: Path, home: Path) -> None:
    path = user_config(home, "model = [\n")
    with pytest.raises(ConfigError) as info:
        load_config(project, home=home)
    assert f"{path}, line 1: invalid TOML" in str(info.value)


def test_unknown_key_names_file_line_and_allowed_keys(project: Path, home: Path) -> None:
    path = project_config(project, '# models\nmodel = "openai:gpt-4o"\nmodle = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project, home=home)
    message = str(info.value)
    assert f"{path}, line 3" in message
    assert "'modle'" in message
    for key in ("model", "base_url", "api_key_env", "sandbox", "auto_approve", "interrupt_on"):
        assert key in message


def test_unknown_table_names_its_line(project: Path, home: Path) -> None:
    path = project_config(project, 'model = "openai:gpt-4o"\n\n[providers]\nurl = "x"\n')
    with pytest.raises(ConfigError, match="unknown key 'providers'") as info:
        load_config(project, home=home)
    assert f"{path}, line 3" in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("model = 4\n", 1, "'model' must be a string"),
        ('sandbox = "none"\nbase_url = true\n', 2, "'base_url' must be a string"),
        ("\n\napi_key_env = 1.5\n", 3, "'api_key_env' must be a string"),
        ('auto_approve = "read_file"\n', 1, "'auto_approve' must be a list of tool names"),
        ('interrupt_on = ["execute", 3]\n', 1, "'interrupt_on' must be a list of tool names"),
    ],
)
def test_wrong_type_names_file_and_line(
    project: Path, home: Path, text: str, line: int, expected: str
) -> None:
    path = project_config(project, text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(project, home=home)
    assert f"{path}, line {line}" in str(info.value)


def test_bad_sandbox_value_names_file_line_and_allowed_values(project: Path, home: Path) -> None:
    path = user_config(home, 'model = "openai:gpt-4o"\n  sandbox   = "docker"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project, home=home)
    message = str(info.value)
    assert f"{path}, line 2" in message
    assert "'docker'" in message
    assert '"none", "local", "bubblewrap"' in message


def test_model_without_provider_is_rejected(project: Path, home: Path) -> None:
    path = project_config(project, 'model = "gpt-4o"\n')
    with pytest.raises(ConfigError, match='"provider:model"') as info:
        load_config(project, home=home)
    assert f"{path}, line 1" in str(info.value)


def test_bad_user_file_fails_even_when_project_sets_the_key(project: Path, home: Path) -> None:
    path = user_config(home, 'sandbox = "docker"\n')
    project_config(project, 'sandbox = "local"\n')
    with pytest.raises(ConfigError) as info:
        load_config(project, home=home)
    assert str(path) in str(info.value)


# --- memory and skills ---------------------------------------------------------------------


def test_no_sources(project: Path, home: Path) -> None:
    assert project_sources(project, home=home) == ProjectSources()


def test_memory_user_then_project(project: Path, home: Path) -> None:
    user = write(home / ".fathom" / "AGENTS.md", "user memory")
    mine = write(project / ".fathom" / "AGENTS.md", "project memory")
    assert project_sources(project, home=home).memory == [user, mine]


def test_memory_only_existing_files(project: Path, home: Path) -> None:
    mine = write(project / ".fathom" / "AGENTS.md", "project memory")
    (home / ".fathom" / "AGENTS.md").mkdir(parents=True)  # a folder is not a memory file
    assert project_sources(project, home=home).memory == [mine]
    mine.unlink()
    user = write(home / ".fathom" / "config.toml", "")
    assert project_sources(project, home=home).memory == []
    assert user.exists()


def test_skills_user_then_project(project: Path, home: Path) -> None:
    (home / ".fathom" / "skills").mkdir(parents=True)
    (project / ".fathom" / "skills").mkdir(parents=True)
    assert project_sources(project, home=home).skills == [
        home / ".fathom" / "skills",
        project / ".fathom" / "skills",
    ]


def test_skills_only_existing_folders(project: Path, home: Path) -> None:
    write(home / ".fathom" / "skills", "not a folder")
    (project / ".fathom" / "skills").mkdir(parents=True)
    assert project_sources(project, home=home).skills == [project / ".fathom" / "skills"]


def test_project_in_home_is_listed_once(home: Path) -> None:
    memory = write(home / ".fathom" / "AGENTS.md", "memory")
    (home / ".fathom" / "skills").mkdir()
    sources = project_sources(home, home=home)
    assert sources.memory == [memory]
    assert sources.skills == [home / ".fathom" / "skills"]


# --- subagents ------------------------------------------------------------------------------

RESEARCHER = """---
name: researcher
description: Finds facts and cites them.
model: openai:gpt-4o-mini
tools: [read_file, grep]
---

You are a careful researcher.

Cite every source.
"""


def test_agent_definition_parsed(project: Path, home: Path) -> None:
    write(project / ".fathom" / "agents" / "researcher.md", RESEARCHER)
    assert project_sources(project, home=home).subagents == [
        {
            "name": "researcher",
            "description": "Finds facts and cites them.",
            "system_prompt": "You are a careful researcher.\n\nCite every source.",
            "model": "openai:gpt-4o-mini",
            "tools": ["read_file", "grep"],
        }
    ]


def test_agent_definition_minimal(project: Path, home: Path) -> None:
    write(
        project / ".fathom" / "agents" / "writer.md",
        "---\nname: writer\ndescription: Writes prose.\n---\nWrite well.\n",
    )
    (agent,) = project_sources(project, home=home).subagents
    assert agent == {
        "name": "writer",
        "description": "Writes prose.",
        "system_prompt": "Write well.",
    }


def test_only_markdown_files_are_agents(project: Path, home: Path) -> None:
    agents = project / ".fathom" / "agents"
    write(agents / "researcher.md", RESEARCHER)
    write(agents / "notes.txt", "not an agent")
    assert [a["name"] for a in project_sources(project, home=home).subagents] == ["researcher"]


def test_project_agent_overrides_user_agent_of_same_name(project: Path, home: Path) -> None:
    write(home / ".fathom" / "agents" / "researcher.md", RESEARCHER)
    write(
        home / ".fathom" / "agents" / "critic.md",
        "---\nname: critic\ndescription: Finds flaws.\n---\nBe blunt.\n",
    )
    write(
        project / ".fathom" / "agents" / "r.md",
        "---\nname: researcher\ndescription: Project researcher.\n---\nUse the wiki.\n",
    )
    agents = {a["name"]: a for a in project_sources(project, home=home).subagents}
    assert sorted(agents) == ["critic", "researcher"]
    assert agents["researcher"] == {
        "name": "researcher",
        "description": "Project researcher.",
        "system_prompt": "Use the wiki.",
    }
    assert agents["critic"]["system_prompt"] == "Be blunt."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("You are an agent with no front-matter.\n", "does not start with YAML front matter"),
        ("---\nname: x\ndescription: y\nNo closing line.\n", "has no closing '---' line"),
        ("---\nname: [unclosed\ndescription: y\n---\nBody\n", "not valid YAML"),
        ("---\n- a list\n---\nBody\n", "must be a mapping"),
        ("---\ndescription: y\n---\nBody\n", "needs 'name'"),
        ("---\nname: x\n---\nBody\n", "needs 'description'"),
        ("---\nname: 3\ndescription: y\n---\nBody\n", "needs 'name'"),
        ("---\nname: x\ndescription: y\nmodel: 3\n---\nBody\n", "'model' must be a string"),
        ("---\nname: x\ndescription: y\ntools: read_file\n---\nBody\n", "'tools' must be a list"),
        ("---\nname: x\ndescription: y\ntools: [1]\n---\nBody\n", "'tools' must be a list"),
        ("---\nname: x\ndescription: y\ncolour: red\n---\nBody\n", "unknown front-matter key"),
        ("---\nname: x\ndescription: y\n---\n\n  \n", "no system prompt"),
    ],
)
def test_bad_agent_file_names_file_and_problem(
    project: Path, home: Path, text: str, expected: str
) -> None:
    path = write(project / ".fathom" / "agents" / "bad.md", text)
    with pytest.raises(ConfigError, match=expected) as info:
        project_sources(project, home=home)
    assert str(path) in str(info.value)


def test_bad_agent_yaml_names_the_line(project: Path, home: Path) -> None:
    path = write(
        project / ".fathom" / "agents" / "bad.md",
        "---\nname: x\ndescription: y\ntools: [a, b\n---\nBody\n",
    )
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        project_sources(project, home=home)
    assert f"{path}, line " in str(info.value)


def test_bad_user_agent_file_raises(project: Path, home: Path) -> None:
    path = write(home / ".fathom" / "agents" / "bad.md", "no front-matter\n")
    with pytest.raises(ConfigError) as info:
        project_sources(project, home=home)
    assert str(path) in str(info.value)


def test_duplicate_name_in_one_folder_raises(project: Path, home: Path) -> None:
    agents = project / ".fathom" / "agents"
    write(agents / "a.md", RESEARCHER)
    second = write(agents / "b.md", RESEARCHER)
    with pytest.raises(ConfigError, match="already defined") as info:
        project_sources(project, home=home)
    assert str(second) in str(info.value)


# --- [code_interpreter] -----------------------------------------------------------------


def test_code_interpreter_true_and_a_table_both_turn_eval_on(project: Path, home: Path) -> None:
    write(project / "fathom.toml", "code_interpreter = true\n")
    assert load_config(project, home).code_interpreter == {"enabled": True}
    write(project / "fathom.toml", '[code_interpreter]\nptc = ["read_file"]\ntimeout = 5\n')
    assert load_config(project, home).code_interpreter == {
        "enabled": True, "ptc": ["read_file"], "timeout": 5}


def test_code_interpreter_project_keys_override_the_users(project: Path, home: Path) -> None:
    user_config(home, '[code_interpreter]\nptc = ["ls"]\npersistence = "turn"\n')
    write(project / "fathom.toml", '[code_interpreter]\nptc = ["grep"]\n')
    assert load_config(project, home).code_interpreter == {
        "enabled": True, "ptc": ["grep"], "persistence": "turn"}


@pytest.mark.parametrize(("text", "needle"), [
    ("[code_interpreter]\nptcs = []\n", "no key 'ptcs'"),
    ('[code_interpreter]\nptc = "read_file"\n', "code_interpreter.ptc must be a list"),
    ('[code_interpreter]\npersistence = "forever"\n', "'forever'"),
    ('[code_interpreter]\ntimeout = "5"\n', "code_interpreter.timeout has the wrong type"),
    ('code_interpreter = "yes"\n', "must be true, false or a table"),
])
def test_a_bad_code_interpreter_table_names_the_file_line_and_fix(
    project: Path, home: Path, text: str, needle: str
) -> None:
    write(project / "fathom.toml", 'model = "openai:x"\n' + text)
    with pytest.raises(ConfigError) as raised:
        load_config(project, home)
    assert needle in str(raised.value) and "fathom.toml, line 2" in str(raised.value)
