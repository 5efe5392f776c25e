"""Turning a project's configuration into a model, a backend and a deep agent.

Everything here uses the library as any user would: `create_deep_agent` with a backend,
memory and skill sources, subagents and `interrupt_on`. The command adds nothing the
library does not have.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from fathom.errors import FathomError
from fathom.middleware.code_interpreter.middleware import EVAL_TOOL
from fathom.middleware.execute import EXECUTE_TOOL
from fathom.middleware.filesystem.middleware import FILESYSTEM_TOOL_NAMES
from fathom.middleware.planning import WRITE_TODOS_TOOL
from fathom.middleware.subagents import TASK_TOOL
from fathom.project.config import ConfigError, FathomConfig, ProjectSources, SandboxKind

__all__ = [
    "DEFAULT_APPROVALS",
    "USER_ROUTE",
    "AgentSetup",
    "ModelSetupError",
    "agent_budget",
    "build_agent",
    "build_backend",
    "build_model",
    "choose_model",
    "confinement",
    "subagent_specs",
]

DEFAULT_APPROVALS = ("write_file", "edit_file", "delete", EXECUTE_TOOL)
"""Tools that ask before they run unless auto-approved: they change files or run commands."""

USER_ROUTE = "/.fathom-user/"
"""Where the user's `~/.fathom/` folder appears in the agent's filesystem."""

STATE_ROUTES = ("/large_tool_results/", "/conversation_history/")
"""Harness files kept in the thread's state (so in its checkpoints), not in the project."""

KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_MODELS = {"openai": "openai:gpt-4.1", "anthropic": "anthropic:claude-sonnet-4-5"}
HARNESS_TOOLS = (WRITE_TODOS_TOOL, *FILESYSTEM_TOOL_NAMES)

NO_MODEL_HELP = """fathom needs a model. Put one in fathom.toml (or pass --model): model = "openai:gpt-4.1"
and its key in the environment: export OPENAI_API_KEY=... (local Ollama/vLLM: base_url = "http://localhost:11434/v1")
To see fathom work first, offline and without a key, run: fathom demo"""  # noqa: E501


class ModelSetupError(FathomError, RuntimeError):
    """The model cannot be built; the message says what to set."""


def choose_model(cli_model: str | None, config: FathomConfig) -> str:
    """The "provider:model" to use: `--model`, the config, `FATHOM_MODEL`, or a key's default.

    Raises `ModelSetupError` with `NO_MODEL_HELP` when nothing names a model and no
    provider key is in the environment.
    """
    for candidate in (cli_model, config.model, os.environ.get("FATHOM_MODEL", "").strip()):
        if candidate:
            if ":" not in candidate:
                raise ModelSetupError(
                    f"model {candidate!r} must be 'provider:model', e.g. 'openai:gpt-4.1'"
                )
            return candidate
    for provider, variable in KEY_VARIABLES.items():
        if os.environ.get(variable):
            return DEFAULT_MODELS[provider]
    raise ModelSetupError(NO_MODEL_HELP)


def build_model(model: str, config: FathomConfig) -> BaseChatModel:
    """A chat model for "provider:model", using the config's `base_url` and `api_key_env`."""
    from langchain.chat_models import init_chat_model

    provider = model.split(":", 1)[0]
    kwargs: dict[str, Any] = {}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ModelSetupError(
                f"api_key_env names {config.api_key_env}, but it is not set; "
                f"export {config.api_key_env}=... and run again."
            )
        kwargs["api_key"] = key
    if config.base_url:
        kwargs["base_url"] = config.base_url
        kwargs.setdefault("api_key", "unused")  # local servers accept any key
    elif provider in KEY_VARIABLES and "api_key" not in kwargs:
        variable = KEY_VARIABLES[provider]
        if not os.environ.get(variable):
            raise ModelSetupError(
                f"{model} needs an API key: export {variable}=... (or set base_url for a "
                "local OpenAI-compatible server).\nTo try fathom offline without a key, "
                "run: fathom demo"
            )
    if provider == "openai":
        kwargs["stream_usage"] = True  # token counts for the live display
    try:
        return init_chat_model(model, **kwargs)
    except (ValueError, ImportError) as error:
        raise ModelSetupError(f"cannot build the model {model!r}: {error}") from error


def build_backend(project_dir: Path, home: Path, sandbox: SandboxKind, *,
                  journal: Any = None) -> Any:
    """The agent's filesystem: the project on disk, the user's `~/.fathom/`, harness files
    in state; with a sandbox, shell commands run in the project directory. With a
    `journal` (`fathom.project.undo.FileJournal`), files keep their pre-images for `/undo`."""
    from fathom.backends import (
        BubblewrapSandbox,
        CompositeBackend,
        FilesystemBackend,
        LocalShellBackend,
        StateBackend,
    )

    if sandbox == "local":
        default: Any = LocalShellBackend(root_dir=project_dir, virtual_mode=True,
                                         inherit_env=True)
    elif sandbox == "bubblewrap":
        default = BubblewrapSandbox(project_dir)
    else:
        default = FilesystemBackend(root_dir=project_dir, virtual_mode=True)
    routes: dict[str, Any] = {route: StateBackend() for route in STATE_ROUTES}
    user_folder = home / ".fathom"
    if user_folder.is_dir() and user_folder.resolve() != (project_dir / ".fathom").resolve():
        routes[USER_ROUTE] = FilesystemBackend(root_dir=user_folder, virtual_mode=True)
    if journal is not None:
        from fathom.project.undo import JournaledBackend

        return JournaledBackend(journal, default, routes)
    return CompositeBackend(default=default, routes=routes)


def _virtual(path: Path, project_dir: Path, home: Path) -> str:
    """Where a host path under the project or `~/.fathom/` appears to the agent."""
    try:
        return "/" + path.resolve().relative_to(project_dir.resolve()).as_posix()
    except ValueError:
        relative = path.resolve().relative_to((home / ".fathom").resolve()).as_posix()
        return USER_ROUTE + relative


def local_context(project_dir: Path, sandbox: SandboxKind) -> str:
    """The CLI-only part of the system prompt: where the agent is working."""
    shell = {
        "none": "You cannot run shell commands in this session.",
        "local": "`execute` runs shell commands on this machine, in the project directory.",
        "bubblewrap": "`execute` runs shell commands in a bubblewrap sandbox that sees only "
        "the project directory, without network.",
    }[sandbox]
    return (
        f"You are fathom, working for a person in the project directory {project_dir}. "
        f"Your file tools see that directory as `/` (so {project_dir}/README.md is "
        f"/README.md). {shell} The person reviews file changes and commands before they "
        "run; keep answers short and say what you changed."
    )


@dataclass
class AgentSetup:
    """Everything that decides how the command's agent is built."""

    project_dir: Path
    home: Path
    config: FathomConfig
    sources: ProjectSources
    model_name: str
    model: BaseChatModel
    sandbox: SandboxKind = "none"
    auto_approve: Sequence[str] = ()
    tools: Sequence[Any] = field(default_factory=list)
    system_prompt: str | None = None
    mcp: Any = None
    """The connected MCP servers (`fathom.protocols.mcp.McpServers`) whose tools are in `tools`."""
    file_journal: Any = None
    """Where the backend keeps files' pre-images for `/undo` (`fathom.project.undo.FileJournal`;
    a `Session` sets it)."""
    code: bool = False
    """`--code`: the `eval` tool on, with the `[code_interpreter]` table's options."""

    def code_interpreter(self) -> dict[str, Any] | None:
        """`create_deep_agent(code_interpreter=...)`'s options: the `[code_interpreter]`
        table less `enabled`, when `--code` or the table turns `eval` on; else `None`.

        Raises:
            ConfigError: `ptc` names a tool the agent does not have, or `pydantic-monty`
                is not installed.
        """
        table = dict(self.config.code_interpreter)
        enabled = table.pop("enabled", False)
        if not (self.code or enabled):
            return None
        try:
            from fathom.middleware.code_interpreter.middleware import require_monty

            require_monty()
        except ImportError as error:
            raise ConfigError(str(error)) from None
        known = self.tool_names() - {EVAL_TOOL}
        unknown = sorted(set(table.get("ptc", ())) - known)
        if unknown:
            raise ConfigError(
                f"code_interpreter.ptc (fathom.toml or ~/.fathom/config.toml) names "
                f"{', '.join(unknown)}, not a tool of the agent; its tools are "
                f"{', '.join(sorted(known))}")
        return table

    def tool_names(self) -> set[str]:
        """The tools the command's agent has: the harness's, `task`, the setup's own tools,
        `execute` when a sandbox is chosen, and `eval` with the code interpreter."""
        names = set(HARNESS_TOOLS) | {TASK_TOOL} | {getattr(t, "name", "") for t in self.tools}
        if self.sandbox != "none":
            names.add(EXECUTE_TOOL)
        if self.code or self.config.code_interpreter.get("enabled"):
            names.add(EVAL_TOOL)
        return names - {""}

    def approvals(self) -> dict[str, bool]:
        """`interrupt_on` for the agent: defaults, configured tools and the tools of MCP
        servers not configured with `auto_approve = true`, less auto-approved.

        Raises:
            ConfigError: a name in `--auto-approve`, `auto_approve` or `interrupt_on` that
                is no tool of the agent. A typo there would switch an approval off (or
                never on) without a word, so it stops the command instead.
        """
        # `execute` is a real tool name even without a sandbox (a config may be shared by
        # runs with and without one); it is gated only when the agent has it.
        known = self.tool_names() | {EXECUTE_TOOL}
        for where, names in (
            ("--auto-approve", self.auto_approve),
            ("auto_approve (fathom.toml or ~/.fathom/config.toml)", self.config.auto_approve),
            ("interrupt_on (fathom.toml or ~/.fathom/config.toml)", self.config.interrupt_on),
        ):
            unknown = [name for name in names if name not in known]
            if unknown:
                from fathom.middleware.human_in_the_loop import unknown_tools_message

                raise ConfigError(unknown_tools_message(unknown, known, where))
        asking = set(self.mcp.asking_tools()) if self.mcp is not None else set()
        gated = (set(DEFAULT_APPROVALS) | set(self.config.interrupt_on) | asking) \
            & self.tool_names()
        skipped = set(self.config.auto_approve) | set(self.auto_approve)
        return {tool: True for tool in sorted(gated - skipped)}


def confinement(setup: AgentSetup) -> str:
    """One line saying what the agent can reach: the folder its file tools are confined to
    and where its commands run. The command prints it before the first turn."""
    files = f"files: {setup.project_dir} (confined; the agent sees it as /"
    user_folder = setup.home / ".fathom"
    if user_folder.is_dir() and user_folder.resolve() != (setup.project_dir / ".fathom").resolve():
        files += f", and {user_folder} as {USER_ROUTE}"
    files += ")"
    commands = {
        "none": "commands: none (no shell; --sandbox local or bubblewrap adds one)",
        "local": "commands: run UNSANDBOXED on this machine as this user (--sandbox local): "
        "they can read and change anything you can",
        "bubblewrap": "commands: in a bubblewrap sandbox that sees only the project, "
        "without network",
    }[setup.sandbox]
    return f"{files} · {commands}"


def subagent_specs(setup: AgentSetup) -> list[dict[str, Any]]:
    from fathom.middleware.allowed_tools import AllowedToolsMiddleware

    known = set(HARNESS_TOOLS) | {getattr(tool, "name", "") for tool in setup.tools}
    if setup.sandbox != "none":
        known.add(EXECUTE_TOOL)
    specs: list[dict[str, Any]] = []
    for definition in setup.sources.subagents:
        spec: dict[str, Any] = {
            key: value for key, value in definition.items() if key not in ("tools", "model")
        }
        if "model" in definition:
            spec["model"] = build_model(str(definition["model"]), setup.config)
        if "tools" in definition:
            names = [str(name) for name in definition["tools"]]  # names (cli/project.py)
            unknown = sorted(set(names) - known)
            if unknown:
                raise ConfigError(
                    f"subagent {definition['name']!r} (.fathom/agents/): unknown tool(s) "
                    f"{', '.join(unknown)}; available: {', '.join(sorted(known))}"
                )
            spec["middleware"] = [AllowedToolsMiddleware(names)]
            # A call it may not make is refused, so it should not wait for an approval first.
            # (`task` is left out: subagents have no `task` tool.)
            spec["interrupt_on"] = {
                tool: False for tool in setup.approvals() if tool not in names and tool != TASK_TOOL
            }
        specs.append(spec)
    return specs


def agent_budget(setup: AgentSetup) -> Any:
    """The `fathom.Budget` of the `[budget]` table (priced by `[prices]`), or `None`.

    Raises:
        ConfigError: `max_usd` with a model that has no price.
    """
    if not setup.config.budget:
        return None
    from fathom.budget import Budget, BudgetError
    from fathom.middleware.budget import check_prices

    budget = Budget.from_mapping(setup.config.budget, prices=setup.config.prices,
                                 where="[budget] (fathom.toml or ~/.fathom/config.toml)")
    models = [setup.model, *(spec["model"] for spec in subagent_specs(setup) if "model" in spec)]
    try:
        check_prices(budget, models)
    except BudgetError as error:
        raise ConfigError(str(error)) from None
    return budget


def _code_option(options: dict[str, Any] | None) -> dict[str, Any] | bool:
    """`create_deep_agent`'s `code_interpreter`: off, on with defaults, or the options."""
    if options is None:
        return False
    return options or True


def build_agent(setup: AgentSetup, checkpointer: Any) -> Any:
    """The command's deep agent over the project, with the given checkpointer."""
    from fathom import create_deep_agent

    memory = [_virtual(path, setup.project_dir, setup.home) for path in setup.sources.memory]
    project_memory = "/.fathom/AGENTS.md"
    if project_memory not in memory:
        memory.append(project_memory)  # shown as "not created yet", so the agent can start it
    skills = [_virtual(path, setup.project_dir, setup.home) + "/"
              for path in setup.sources.skills]
    prompt = setup.system_prompt or local_context(setup.project_dir, setup.sandbox)
    return create_deep_agent(
        setup.model,
        tools=list(setup.tools),
        system_prompt=prompt,
        subagents=subagent_specs(setup),
        memory=memory,
        skills=skills or None,
        backend=build_backend(setup.project_dir, setup.home, setup.sandbox,
                              journal=setup.file_journal),
        interrupt_on=setup.approvals(),
        checkpointer=checkpointer,
        name="fathom",
        budget=agent_budget(setup),
        code_interpreter=_code_option(setup.code_interpreter()),
    )
