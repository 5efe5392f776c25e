"""What every `fathom` subcommand that talks to the agent shares: exit codes, reading the
options, and building the session (or a `SetupError` that says why not).

Owns: the command's start-up. Imports only the standard library at module level (so
`fathom --help` stays quick); the session's parts load inside `build_session`. Must not
import `fathom.cli.main`, which imports it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from fathom.errors import FathomError

__all__ = [
    "EXIT_APPROVAL",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "SetupError",
    "auto_approved",
    "build_session",
    "fail",
    "option",
    "project_dir",
    "thread_for",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_APPROVAL = 3
EXIT_INTERRUPTED = 130


def option(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


def auto_approved(args: argparse.Namespace) -> list[str]:
    names: list[str] = []
    for value in option(args, "auto_approve", []) or []:
        names.extend(part.strip() for part in value.split(",") if part.strip())
    return names


def fail(message: str, code: int = EXIT_USAGE) -> int:
    print(message, file=sys.stderr)
    return code


def project_dir(args: argparse.Namespace) -> Path:
    return Path(option(args, "project") or os.getcwd()).resolve()


def build_session(args: argparse.Namespace, *, json_output: bool = False) -> Any:
    """Build the session, or raise `SetupError` with a message for the person."""
    from fathom.cli.display import PlainDisplay, make_display
    from fathom.cli.session import Session
    from fathom.project.build import (
        AgentSetup,
        ModelSetupError,
        agent_budget,
        build_model,
        choose_model,
        subagent_specs,
    )
    from fathom.project.config import ConfigError, load_config, project_sources
    from fathom.project.threads import threads_db_path

    project = project_dir(args)
    home = Path.home()
    try:
        config = load_config(project, home)
        sources = project_sources(project, home)
        model_name = choose_model(option(args, "model"), config)
        from fathom.cli.mcp import connect_servers

        mcp = connect_servers(project, config)  # a server that fails is a warning, not a stop
        setup = AgentSetup(
            project_dir=project,
            home=home,
            config=config,
            sources=sources,
            model_name=model_name,
            model=build_model(model_name, config),
            sandbox=option(args, "sandbox") or config.sandbox,
            auto_approve=auto_approved(args),
            tools=list(mcp.tools) if mcp else [],
            mcp=mcp,
            code=bool(option(args, "code")),
        )
        if json_output:  # the JSON goes to stdout; progress goes to stderr
            display: Any = PlainDisplay(sys.stderr)
        else:
            display = make_display(bool(option(args, "plain")))
        setup.approvals()  # a misspelled tool name in the approvals fails now, too
        subagent_specs(setup)  # a bad subagent definition fails now, not mid-run
        agent_budget(setup)  # so does a cost cap on a model without a price
        setup.code_interpreter()  # and a ptc name the agent has no tool for
        # The command states the confinement itself (`confinement`), once, before the first
        # turn; the backend's construction warning would repeat it on every turn.
        logging.getLogger("fathom.backends.shell.local").setLevel(logging.ERROR)
        session = Session(setup, threads_db_path(project, home), display)
    except (ConfigError, ModelSetupError, RuntimeError) as error:
        raise SetupError(str(error)) from error
    return session


class SetupError(FathomError):
    """The command cannot start; the message says why and what to do."""


def thread_for(args: argparse.Namespace, session: Any) -> tuple[str, bool]:
    """The thread to use and whether it already existed."""
    thread = option(args, "thread")
    if thread:
        return thread, session.threads.get(thread) is not None
    if option(args, "resume"):
        latest = session.threads.latest()
        if latest is None:
            raise SetupError("there is no thread to resume yet; start one with `fathom`")
        return latest.thread_id, True
    return session.threads.new_thread_id(), False
