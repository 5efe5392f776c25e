"""Project conventions for the `fathom` command: configuration, memory, skills and subagents.

A project is a directory; the user's own settings live in `~/.fathom/`. Both may hold:

- a configuration file (`~/.fathom/config.toml`, then `<project>/fathom.toml`; project values
  override user values key by key), read by `load_config`;
- `AGENTS.md` memory, a `skills/` folder and `agents/<name>.md` subagent definitions (under
  `~/.fathom/` and `<project>/.fathom/`), found by `project_sources`.

User sources come first and project sources last, because later sources win. Anything
malformed raises `ConfigError`, whose message names the file, the line where it can be
found, and what is allowed.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from fathom._frontmatter import FrontMatterError, parse_front_matter
from fathom.errors import FathomError
from fathom.middleware.subagents import SubAgent

__all__ = [
    "ConfigError",
    "FathomConfig",
    "ProjectSources",
    "SandboxKind",
    "load_config",
    "project_sources",
]

SandboxKind = Literal["none", "local", "bubblewrap"]
"""Where the agent's commands run: nowhere, on this machine, or in a bubblewrap sandbox."""

_SANDBOX_KINDS: tuple[str, ...] = get_args(SandboxKind)


class ConfigError(FathomError, ValueError):
    """A configuration file or subagent definition that fathom cannot use.

    The message names the file (and the line, where one is known) and says what is allowed.
    """


@dataclass(frozen=True)
class FathomConfig:
    """Settings from `~/.fathom/config.toml` and `<project>/fathom.toml`, merged.

    Every field is optional in the files; absent fields keep the defaults below.
    """

    model: str | None = None
    """The model as "provider:model", e.g. "openai:gpt-4o" or "anthropic:claude-sonnet-4-5"."""
    base_url: str | None = None
    """Base URL of an OpenAI-compatible endpoint (Ollama, vLLM, a llama.cpp server)."""
    api_key_env: str | None = None
    """Name of the environment variable that holds the endpoint's API key."""
    sandbox: SandboxKind = "none"
    """Where shell commands run: "none" (no shell), "local" or "bubblewrap"."""
    auto_approve: list[str] = field(default_factory=list)
    """Tool names whose calls run without asking."""
    interrupt_on: list[str] = field(default_factory=list)
    """Tool names whose calls wait for a person's approval."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """`[mcp_servers.NAME]` tables: MCP servers whose tools the agent gets (`fathom.mcp`)."""
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    """`[prices."provider:model"]` tables (`input`, `output`: USD per million tokens) for
    `/cost`'s estimates and the budget's `max_usd` (`fathom.pricing`)."""
    budget: dict[str, float] = field(default_factory=dict)
    """The `[budget]` table: caps on what each thread's agent tree may spend
    (`max_tokens`, `max_usd`, `max_wall_s`, `max_model_calls`; see docs/budgets.md)."""
    code_interpreter: dict[str, Any] = field(default_factory=dict)
    """The `[code_interpreter]` table (or `code_interpreter = true`): the `eval` tool,
    Python in the Monty sandbox. Keys: `enabled` (default true once the table is there),
    `ptc` (tool names the code may call), `persistence`, `timeout`, `memory_limit`,
    `max_ptc_calls`, `max_result_chars`, `max_subagent_concurrency`
    (`CodeInterpreterMiddleware`'s options). Empty: off."""


@dataclass(frozen=True)
class ProjectSources:
    """What a project brings to the agent, in order of precedence (later wins)."""

    memory: list[Path] = field(default_factory=list)
    """Existing `AGENTS.md` files: the user's, then the project's."""
    skills: list[Path] = field(default_factory=list)
    """Existing skill folders: the user's, then the project's."""
    subagents: list[SubAgent] = field(default_factory=list)
    """Subagent definitions; a project definition replaces a user one of the same name.

    `tools`, where given, holds tool names; the caller maps them to tools.
    """


# --- configuration -----------------------------------------------------------------------

_STRING_KEYS = ("model", "base_url", "api_key_env")
_LIST_KEYS = ("auto_approve", "interrupt_on")
_CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(FathomConfig))


def _key_line(text: str, key: str) -> int | None:
    """The 1-based line where `key` is assigned (or opened as a table) in TOML `text`."""
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    pattern = re.compile(rf"^\s*(?:{name}\s*[=.]|\[\[?\s*{name}\s*[\].])")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def _where(path: Path, text: str, key: str) -> str:
    line = _key_line(text, key)
    return f"{path}, line {line}" if line is not None else str(path)


def _read_toml(path: Path) -> dict[str, Any]:
    """Read and check one configuration file; an absent file is empty."""
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, reason = _toml_error_line(exc, text)
        raise ConfigError(f"{path}, line {line}: invalid TOML: {reason}") from exc

    for key, value in data.items():
        where = _where(path, text, key)
        if key not in _CONFIG_KEYS:
            allowed = ", ".join(_CONFIG_KEYS)
            raise ConfigError(f"{where}: unknown key {key!r}; allowed keys are {allowed}")
        if key in _STRING_KEYS and not isinstance(value, str):
            raise ConfigError(
                f"{where}: {key!r} must be a string, not {_toml_type(value)}"
                + (' (e.g. "openai:gpt-4o")' if key == "model" else "")
            )
        if key == "sandbox" and value not in _SANDBOX_KINDS:
            allowed = ", ".join(f'"{kind}"' for kind in _SANDBOX_KINDS)
            raise ConfigError(f"{where}: 'sandbox' is {value!r}; allowed values are {allowed}")
        if key == "mcp_servers":
            _check_mcp_servers(path, text, value)
        if key == "prices":
            _check_prices(where, value)
        if key == "budget":
            _check_budget(where, value)
        if key == "code_interpreter":
            data[key] = _check_code_interpreter(where, value)
        if key in _LIST_KEYS and not (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        ):
            raise ConfigError(
                f"{where}: {key!r} must be a list of tool names (strings), "
                f'e.g. {key} = ["write_file", "edit_file"]'
            )
    if isinstance(data.get("model"), str) and ":" not in data["model"]:
        raise ConfigError(
            f"{_where(path, text, 'model')}: 'model' is {data['model']!r}; "
            'it must be "provider:model", e.g. "openai:gpt-4o"'
        )
    return data


def _check_mcp_servers(path: Path, text: str, value: Any) -> None:
    from fathom.tools.mcp_config import McpConfigError, parse_servers

    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path, text, 'mcp_servers')}: 'mcp_servers' must be a table "
                          'of servers, e.g. [mcp_servers.files] command = "npx"')
    try:
        parse_servers(value)
    except McpConfigError as exc:
        raise ConfigError(f"{_where(path, text, 'mcp_servers')}: {exc}") from exc


def _check_prices(where: str, value: Any) -> None:
    example = '[prices."openai:gpt-4.1"] input = 2.0, output = 8.0 (USD per million tokens)'
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'prices' must be a table of models, e.g. {example}")
    for model, price in value.items():
        if ":" not in model:
            raise ConfigError(f"{where}: prices key {model!r} must be \"provider:model\", "
                              f"e.g. {example}")
        if not isinstance(price, dict):
            raise ConfigError(f"{where}: prices.{model!r} must be a table, e.g. {example}")
        unknown = sorted(set(price) - {"input", "output"})
        missing = sorted({"input", "output"} - set(price))
        if unknown or missing:
            problem = (f"unknown key(s) {', '.join(unknown)}" if unknown
                       else f"missing {', '.join(missing)}")
            raise ConfigError(f"{where}: prices.{model!r}: {problem}; the keys are input "
                              "and output (USD per million tokens)")
        for key in ("input", "output"):
            number = price[key]
            if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                raise ConfigError(f"{where}: prices.{model!r}.{key} must be a number >= 0 "
                                  "(USD per million tokens)")


def _check_budget(where: str, value: Any) -> None:
    from fathom.budget import Budget, BudgetError

    example = "[budget] max_tokens = 200000, max_usd = 2.0"
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'budget' must be a table of caps, e.g. {example}")
    if "prices" in value:
        raise ConfigError(f"{where}: prices go in their own tables, e.g. "
                          '[prices."openai:gpt-4.1"] input = 2.0, output = 8.0')
    try:
        Budget.from_mapping(value, where="budget")
    except BudgetError as exc:
        raise ConfigError(f"{where}: {exc} (e.g. {example})") from exc


CODE_INTERPRETER_KEYS = {
    "enabled": bool, "ptc": list, "persistence": str, "timeout": (int, float),
    "memory_limit": int, "max_ptc_calls": int, "max_result_chars": int,
    "max_subagent_concurrency": int,
}
"""The keys of `[code_interpreter]` and their TOML types."""


def _check_code_interpreter(where: str, value: Any) -> dict[str, Any]:
    """`[code_interpreter]` checked; `code_interpreter = true/false` as `{"enabled": ...}`."""
    example = '[code_interpreter] ptc = ["read_file", "grep"]'
    if isinstance(value, bool):
        return {"enabled": value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'code_interpreter' must be true, false or a table, "
                          f"e.g. {example}")
    for key, item in value.items():
        kind = CODE_INTERPRETER_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{where}: code_interpreter has no key {key!r}; allowed keys are "
                              f"{', '.join(CODE_INTERPRETER_KEYS)}")
        wrong = not isinstance(item, kind) or (kind is not bool and isinstance(item, bool))
        if key == "ptc":
            wrong = wrong or not (isinstance(item, list)
                                  and all(isinstance(name, str) for name in item))
        if key == "persistence" and item not in ("thread", "turn", "call"):
            raise ConfigError(f"{where}: code_interpreter.persistence is {item!r}; allowed "
                              'values are "thread", "turn" and "call"')
        if wrong:
            shown = "a list of tool names" if key == "ptc" else _toml_type(item)
            raise ConfigError(f"{where}: code_interpreter.{key} has the wrong type "
                              f"({_toml_type(item)}); e.g. {example}" if key != "ptc" else
                              f"{where}: code_interpreter.ptc must be {shown}, e.g. {example}")
    return {"enabled": True, **value}


_AT_POSITION = re.compile(r"\s*\(at (?:line (\d+), column \d+|end of document)\)\s*$")


def _toml_error_line(exc: tomllib.TOMLDecodeError, text: str) -> tuple[int, str]:
    """The 1-based line of a TOML syntax error, and the error without its position.

    Python 3.14 gives `lineno`; older versions only say "(at line N, column M)" or
    "(at end of document)" in the message.
    """
    message = str(getattr(exc, "msg", None) or exc)
    match = _AT_POSITION.search(message)
    reason = message[: match.start()] if match else message
    lineno = getattr(exc, "lineno", None)
    if isinstance(lineno, int):
        return lineno, reason
    if match and match.group(1):
        return int(match.group(1)), reason
    return max(1, len(text.splitlines())), reason  # at the end of the document


def _toml_type(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", list: "an array"}
    if isinstance(value, dict):
        return "a table"
    return names.get(type(value), type(value).__name__)


def load_config(project_dir: Path, home: Path | None = None) -> FathomConfig:
    """Read `<home>/.fathom/config.toml`, then `<project_dir>/fathom.toml`, and merge them.

    Project values override user values key by key; absent files count as empty. `home`
    defaults to `Path.home()`. Raises `ConfigError` for a file that is not valid TOML, an
    unknown key, a value of the wrong type or a value that is not allowed.
    """
    home = Path.home() if home is None else home
    merged: dict[str, Any] = {}
    user = _read_toml(home / ".fathom" / "config.toml")
    project = _read_toml(Path(project_dir) / "fathom.toml")
    merged.update(user)
    merged.update(project)
    # MCP servers merge by name: a project server replaces the user's one of that name.
    merged["mcp_servers"] = {**user.get("mcp_servers", {}), **project.get("mcp_servers", {})}
    merged["prices"] = {**user.get("prices", {}), **project.get("prices", {})}
    merged["budget"] = {**user.get("budget", {}), **project.get("budget", {})}
    merged["code_interpreter"] = {**user.get("code_interpreter", {}),
                                  **project.get("code_interpreter", {})}
    for key in _LIST_KEYS:
        if key in merged:
            merged[key] = list(merged[key])
    return FathomConfig(**merged)


# --- memory, skills and subagents ---------------------------------------------------------

_AGENT_KEYS = ("name", "description", "model", "tools")


def _parse_agent(path: Path) -> SubAgent:
    """Read one `agents/<name>.md` file: YAML front-matter, then the system prompt."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the subagent definition: {exc}") from exc
    try:
        meta, body = parse_front_matter(text)
    except FrontMatterError as exc:
        where = str(path) if exc.line is None else f"{path}, line {exc.line}"
        raise ConfigError(
            f"{where}: {exc.reason}; a subagent definition is YAML front matter between "
            "'---' lines (name, description, optional model and tools), then its prompt"
        ) from exc

    unknown = sorted(str(key) for key in meta if key not in _AGENT_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown front-matter key(s) {', '.join(unknown)}; "
            f"allowed keys are {', '.join(_AGENT_KEYS)}"
        )
    for key in ("name", "description"):
        value = meta.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{path}: the front-matter needs {key!r}, a non-empty string")
    if "model" in meta and not isinstance(meta["model"], str):
        raise ConfigError(f"{path}: 'model' must be a string such as \"openai:gpt-4o\"")
    tools = meta.get("tools")
    if "tools" in meta and not (
        isinstance(tools, list) and all(isinstance(tool, str) for tool in tools)
    ):
        raise ConfigError(f"{path}: 'tools' must be a list of tool names (strings)")

    prompt = body.strip()
    if not prompt:
        raise ConfigError(f"{path}: the definition has no system prompt after the front-matter")

    agent = SubAgent(
        name=meta["name"].strip(),
        description=meta["description"].strip(),
        system_prompt=prompt,
    )
    if "model" in meta:
        agent["model"] = meta["model"]
    if tools is not None:
        agent["tools"] = list(tools)
    return agent


def _agents_in(folder: Path) -> dict[str, SubAgent]:
    agents: dict[str, SubAgent] = {}
    seen: dict[str, Path] = {}
    if not folder.is_dir():
        return agents
    for path in sorted(folder.glob("*.md")):
        if not path.is_file():
            continue
        agent = _parse_agent(path)
        if agent["name"] in seen:
            first = seen[agent["name"]]
            raise ConfigError(
                f"{path}: subagent name {agent['name']!r} is already defined in {first}"
            )
        seen[agent["name"]] = path
        agents[agent["name"]] = agent
    return agents


def project_sources(project_dir: Path, home: Path | None = None) -> ProjectSources:
    """Find the memory files, skill folders and subagent definitions of a project.

    User sources (`<home>/.fathom/`) come before project sources (`<project_dir>/.fathom/`)
    and only existing files and folders are listed. A project subagent replaces a user one
    with the same name. Raises `ConfigError` for a subagent definition that cannot be used.
    """
    home = Path.home() if home is None else home
    roots = [home / ".fathom", Path(project_dir) / ".fathom"]
    if roots[0].resolve() == roots[1].resolve():  # run in the home directory itself
        roots = roots[:1]
    memory = [root / "AGENTS.md" for root in roots if (root / "AGENTS.md").is_file()]
    skills = [root / "skills" for root in roots if (root / "skills").is_dir()]
    agents: dict[str, SubAgent] = {}
    for root in roots:
        agents.update(_agents_in(root / "agents"))
    return ProjectSources(memory=memory, skills=skills, subagents=list(agents.values()))
