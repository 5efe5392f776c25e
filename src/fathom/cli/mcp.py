"""The `fathom` command's MCP parts: connecting the project's MCP servers, `/mcp`, and
`fathom mcp serve` (the project agent, or a langgraph.json graph, as MCP tools).

Servers come from `[mcp_servers]` in fathom.toml (user, then project) and from the project's
`.mcp.json`, `mcp.json` or `.cursor/mcp.json` (the JSON shape Claude Code and Cursor use);
for one name, the later source wins. A server that does not start is reported in one
warning line and left out; the agent starts without its tools.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.project.config import FathomConfig

__all__ = ["add_mcp_parser", "connect_servers", "mcp_command", "mcp_report", "server_configs"]


def server_configs(project_dir: Path, config: FathomConfig) -> list[Any]:
    """The MCP servers of fathom.toml's `[mcp_servers]`, then of the project's JSON files."""
    from fathom.project.config import ConfigError
    from fathom.tools.mcp_config import McpConfigError, parse_servers, project_servers

    try:
        found = {s.name: s for s in parse_servers(config.mcp_servers, source="fathom.toml")}
        found.update({s.name: s for s in project_servers(project_dir)})
    except McpConfigError as error:
        raise ConfigError(str(error)) from error
    return list(found.values())


def connect_servers(project_dir: Path, config: FathomConfig) -> Any:
    """Connect the project's MCP servers (an `McpServers`, or None when there are none);
    each one that fails is printed as a warning on stderr."""
    servers = server_configs(project_dir, config)
    if not servers:
        return None
    from fathom.protocols.mcp import McpServers

    # printed below instead
    logging.getLogger("fathom.tools.mcp").setLevel(logging.ERROR)
    connected = McpServers.open(servers)
    atexit.register(connected.close)  # stop the stdio servers when the command ends
    for line in connected.failures():
        print(f"warning: {line}; going on without its tools", file=sys.stderr)
    return connected


def mcp_report(servers: Any) -> str:
    """`/mcp`: each server, its state and its tools."""
    if servers is None:
        return ("no MCP servers configured; add them under [mcp_servers] in fathom.toml or "
                "in .mcp.json")
    lines = []
    for status in servers.status():
        line = f"{status.name} ({status.transport}): {status.state}"
        if status.error:
            line += f" — {status.error}"
        lines.append(line)
        if status.tools and status.state == "connected":
            lines.append("  tools: " + ", ".join(status.tools))
            lines.append("  runs them without asking (auto_approve = true)" if status.auto_approve
                         else "  asks before each call (auto_approve = true in its entry "
                         "skips that)")
    return "\n".join(lines)


def add_mcp_parser(commands: Any) -> None:
    """`fathom mcp serve ...`."""
    mcp = commands.add_parser("mcp", help="serve an agent as MCP tools (fathom mcp serve)")
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve", help="serve the agent as MCP tools: ask, start_task, check_task, "
        "answer_approval",
        description="Serve an agent to MCP clients: a graph of a langgraph.json (--config, "
        "or ./langgraph.json), else the project's own agent (fathom.toml).",
    )  # fmt: skip
    serve.add_argument("--config", metavar="PATH", help="a langgraph.json (default: "
                       "./langgraph.json if there is one, else the project agent)")
    serve.add_argument("--graph", metavar="NAME", help="the graph to serve (needed when the "
                       "file has several)")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                       help="stdio (default) or streamable HTTP at http://HOST:PORT/mcp")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP address (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000)")
    serve.add_argument("--project", metavar="DIR", help="the project directory (default: .)")
    serve.add_argument("--model", metavar="PROVIDER:MODEL", help="the project agent's model")
    serve.add_argument("--auto-approve", action="append", default=[], metavar="TOOL[,TOOL]",
                       help="project agent: run these tools without asking")


def _deployment_graph(path: Path, name: str | None) -> Any:
    from fathom.project.config import ConfigError
    from fathom.server.deployment import DeploymentError, load_deployment

    try:
        deployment = load_deployment(path)
    except DeploymentError as error:
        raise ConfigError(str(error)) from error
    names = list(deployment.graphs)
    if name is None:
        if len(names) != 1:
            raise ConfigError(f"{path} has graphs {', '.join(names)}; choose one with --graph")
        name = names[0]
    if name not in deployment.graphs:
        raise ConfigError(f"{path} has no graph {name!r}; its graphs are {', '.join(names)}")
    return deployment.graphs[name]


def _project_graph(args: argparse.Namespace, project: Path) -> tuple[Any, str]:
    from fathom.project.build import AgentSetup, build_agent, build_model, choose_model
    from fathom.project.config import load_config, project_sources

    home = Path.home()
    config = load_config(project, home)
    model_name = choose_model(args.model, config)
    approve = [p.strip() for v in args.auto_approve for p in v.split(",") if p.strip()]
    mcp = connect_servers(project, config)
    setup = AgentSetup(project_dir=project, home=home, config=config,
                       sources=project_sources(project, home), model_name=model_name,
                       model=build_model(model_name, config), sandbox=config.sandbox,
                       auto_approve=approve, tools=list(mcp.tools) if mcp else [], mcp=mcp)
    from langgraph.checkpoint.memory import InMemorySaver

    # A placeholder: the MCP server puts its own SQLite checkpointer in (GraphRegistry).
    return build_agent(setup, InMemorySaver()), model_name


def mcp_command(args: argparse.Namespace) -> int:
    """`fathom mcp serve`: returns the exit code."""
    from fathom.project.build import ModelSetupError
    from fathom.project.config import ConfigError
    from fathom.project.threads import threads_db_path
    from fathom.protocols.mcp.server import serve_mcp

    # stdout is the protocol's channel over stdio: everything else goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    project = Path(args.project or ".").resolve()
    config_path = Path(args.config) if args.config else project / "langgraph.json"
    try:
        if args.config or config_path.is_file():
            if not config_path.is_file():
                raise ConfigError(f"{config_path}: no such deployment file")
            graph = _deployment_graph(config_path.resolve(), args.graph)
            project, model = config_path.resolve().parent, ""
        else:
            if args.graph:
                raise ConfigError("--graph needs a langgraph.json (--config)")
            graph, model = _project_graph(args, project)
    except (ConfigError, ModelSetupError) as error:
        print(f"fathom mcp serve: {error}", file=sys.stderr)
        return 2
    if args.transport == "http":
        print(f"fathom mcp serve: streamable HTTP at http://{args.host}:{args.port}/mcp",
              file=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_mcp(graph, db_path=threads_db_path(project, Path.home()),
                              transport=args.transport, host=args.host, port=args.port,
                              model=model, project=project))
    return 0
