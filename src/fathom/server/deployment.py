"""`langgraph.json`, the deployment file: which graphs a server runs, and with what settings.

The same file deploys unchanged on `langgraph dev`, LangSmith Deployments and other Agent
Protocol servers; `fathom serve --config langgraph.json` reads the parts that matter on one
machine (the format is documented at https://docs.langchain.com/langsmith/cli#configuration-file):

- `graphs`: name → `"./path/to/file.py:attr"` (relative to the file's folder) or
  `"package.module:attr"`, or `{"path": ..., "description": ...}`. `attr` is a compiled graph, a
  `StateGraph` (compiled here), or a factory: a callable taking the run's `RunnableConfig` or
  nothing, sync or async, that returns a compiled graph.
- `env`: a path to a `.env` file (relative to the file's folder) or a mapping. The values are
  put into `os.environ` before any graph is imported; a variable already set in the process's
  environment keeps its value, so the shell can override the file.
- `dependencies`: accepted and kept; nothing is installed (install them in the environment that
  runs `fathom serve`).
- `store.index` (semantic search: `dims`, `fields`, and `embed`: `"provider:model"` for
  LangChain's `init_embeddings`, or `"./file.py:function"` for your own function) and
  `store.ttl` (`default_ttl`, `refresh_on_read`, `sweep_interval_minutes`) are passed to the
  store by `open_storage`.
- `http.cors.allow_origins` becomes the server's CORS origins; `http.disable_a2a` and
  `http.disable_mcp` (`true`) take the A2A routes (`/a2a/...` and the agent cards) and the MCP
  route (`/mcp`) off the server, as on LangGraph's server
  (https://docs.langchain.com/langsmith/server-a2a, https://docs.langchain.com/langsmith/server-mcp).
- `auth.path`: `"./auth.py:auth"` (relative to the file's folder) or `"package.module:auth"`,
  a `langgraph_sdk.Auth` whose handlers name each caller and decide what they may see and do
  (`fathom.server.auth`). `auth.disable_studio_auth`, `auth.openapi` and `auth.cache` are
  accepted and have no effect here (there is no Studio login and no OpenAPI page to secure).

Everything else is reported in `Deployment.ignored`, one line per key, which `fathom serve`
prints at start-up: container-build keys (`python_version`, `dockerfile_lines`, ...) only matter
to image builds, and `checkpointer.ttl`, `webhooks`, `ui` and most of `http` are not
implemented by fathom's server. A mistake the user can fix raises `DeploymentError`, whose message
names the file, the key and what to do.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph_sdk import Auth

from fathom.errors import FathomError
from fathom.server.graphs import GraphSource

__all__ = ["Deployment", "DeploymentError", "load_deployment", "read_env_file"]

logger = logging.getLogger(__name__)

BUILD_KEYS = frozenset({
    "python_version", "node_version", "api_version", "base_image", "image_distro",
    "pip_config_file", "pip_installer", "source", "dockerfile_lines", "keep_pkg_tools",
})  # fmt: skip
"""Keys that only shape a container image (`langgraph build`); a local server ignores them."""

UNSUPPORTED_KEYS = frozenset({"encryption", "priority", "webhooks", "ui"})
"""Platform features fathom's server does not implement."""

STORE_KEYS = frozenset({"index", "ttl"})
INDEX_KEYS = frozenset({"dims", "embed", "fields"})
TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "sweep_interval_minutes"})
HTTP_SWITCHES = {"disable_a2a": "a2a", "disable_mcp": "mcp"}
"""`http` keys that take a protocol's routes off the server, and the protocol each names."""
AUTH_NOOP_KEYS = frozenset({"disable_studio_auth", "openapi", "cache"})
"""`auth` keys langgraph-api reads that change nothing on fathom's server."""


class DeploymentError(FathomError):
    """The deployment file cannot be used; the message names the file, the key and the fix."""


@dataclass
class Deployment:
    """What a `langgraph.json` asks for, with its graphs imported."""

    path: Path
    """The deployment file."""
    graphs: dict[str, GraphSource]
    """Graph name → compiled graph or factory, in the file's order."""
    descriptions: dict[str, str] = field(default_factory=dict)
    """Graph name → the `description` given in the file, where one is."""
    env: dict[str, str] = field(default_factory=dict)
    """The variables the file sets (as given; the process's own values win in `os.environ`)."""
    dependencies: list[str] = field(default_factory=list)
    """The file's `dependencies`; not installed by fathom."""
    store_index: dict[str, Any] | None = None
    """`store.index`, for `open_storage(index=...)`."""
    store_ttl: dict[str, Any] | None = None
    """`store.ttl`, for `open_storage(ttl=...)`."""
    cors_origins: tuple[str, ...] = ()
    """`http.cors.allow_origins`."""
    disabled_protocols: frozenset[str] = frozenset()
    """The protocols whose routes `http.disable_a2a` / `http.disable_mcp` take off the server
    (`"a2a"`, `"mcp"`): `fathom serve` leaves out the routes named after them."""
    auth: Auth | None = None
    """The `langgraph_sdk.Auth` that `auth.path` names."""
    ignored: list[str] = field(default_factory=list)
    """One line per setting that was read but has no effect here, for the start-up report."""


def _fail(path: Path, key: str, message: str) -> DeploymentError:
    return DeploymentError(f"{path}: `{key}`: {message}")


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines of a `.env` file (`#` comments, `export ` prefixes, quoted values)."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(line)
        if match is None:
            raise DeploymentError(f"{path}:{number}: expected KEY=VALUE, found {line.strip()!r}")
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if match.group(2).startswith('"'):
                value = value.replace("\\n", "\n").replace('\\"', '"')
        else:
            value = re.sub(r"\s+#.*$", "", value)
        values[key] = value
    return values


def _load_env(path: Path, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        env_path = (path.parent / raw).resolve()
        if not env_path.is_file():
            raise _fail(path, "env", f"the env file {env_path} does not exist; create it or "
                        "remove `env` from the deployment file")  # fmt: skip
        return read_env_file(env_path)
    if isinstance(raw, Mapping):
        return {str(key): str(value) for key, value in raw.items()}
    raise _fail(path, "env", "expected a path to a .env file or a mapping of variables")


def _is_file_spec(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def _import_target(path: Path, key: str, spec: str) -> Any:
    """The attribute `spec` (`./file.py:attr` or `package.module:attr`) names."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr or not attr.isidentifier():
        raise _fail(path, key, f"{spec!r} is not `./file.py:attr` or `package.module:attr`; "
                    "name the file or module, a colon, and the graph's variable")  # fmt: skip
    try:
        if _is_file_spec(target):
            file = (path.parent / target).resolve()
            if not file.is_file():
                raise _fail(path, key, f"the file {file} does not exist (paths are relative to "
                            f"{path.parent})")  # fmt: skip
            module_name = "fathom_deploy__" + re.sub(r"\W", "_", str(file.with_suffix("")))
            module_spec = importlib.util.spec_from_file_location(module_name, file)
            if module_spec is None or module_spec.loader is None:
                raise _fail(path, key, f"cannot import {file} as Python")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module
            with contextlib.ExitStack() as on_failure:
                # cleanup: no half-run module is kept (the failure goes on up)
                on_failure.callback(sys.modules.pop, module_name, None)
                module_spec.loader.exec_module(module)
                on_failure.pop_all()
        else:
            module = importlib.import_module(target)
    except DeploymentError:
        raise
    except Exception as error:  # boundary: the user's module runs; re-raised as ours
        raise _fail(path, key, f"importing {target} failed: {type(error).__name__}: {error}. "
                    "Fix the module, or install what it needs into this environment"
                    ) from error  # fmt: skip
    try:
        return getattr(module, attr)
    except AttributeError:
        graphs = sorted(
            n
            for n, v in vars(module).items()
            if isinstance(v, Pregel | StateGraph) and not n.startswith("_")
        )
        hint = f"; graphs it defines: {', '.join(graphs)}" if graphs else ""
        raise _fail(path, key, f"{target} has no attribute {attr!r}{hint}") from None


def _as_source(path: Path, name: str, spec: str, value: Any) -> GraphSource:
    key = f"graphs.{name}"
    if isinstance(value, Pregel):
        return value
    if isinstance(value, StateGraph):
        return value.compile()
    if callable(value) and not isinstance(value, type):
        try:
            parameters = inspect.signature(value).parameters.values()
        except (TypeError, ValueError):
            return cast(GraphSource, value)
        required = [p for p in parameters if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
        if len(required) > 1:
            raise _fail(path, key, f"the factory {spec} takes {len(required)} arguments; a graph "
                        "factory takes the run's config (RunnableConfig) or nothing")  # fmt: skip
        return cast(GraphSource, value)
    raise _fail(path, key, f"{spec} is a {type(value).__name__}, not a graph: point it at a "
                "compiled graph (`builder.compile()`), a StateGraph, or a function returning "
                "one")  # fmt: skip


def _note_section(ignored: list[str], section: str, raw: Any, known: frozenset[str]) -> None:
    if isinstance(raw, Mapping):
        for key in raw:
            if key not in known:
                ignored.append(f"{section}.{key}: not supported by fathom serve; ignored")


def _store_settings(path: Path, raw: Any, deployment: Deployment) -> None:
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise _fail(path, "store", "expected an object with `index` and/or `ttl`")
    _note_section(deployment.ignored, "store", raw, STORE_KEYS)
    index = raw.get("index")
    if index is not None:
        if not isinstance(index, Mapping) or "dims" not in index or "embed" not in index:
            raise _fail(path, "store.index", "needs `dims` (an integer) and `embed` (e.g. "
                        '"openai:text-embedding-3-small")')  # fmt: skip
        _note_section(deployment.ignored, "store.index", index, INDEX_KEYS)
        settings = {k: v for k, v in index.items() if k in INDEX_KEYS}
        embed = settings["embed"]
        if not isinstance(embed, str):
            raise _fail(path, "store.index.embed", 'expected "provider:model" or '
                        '"./file.py:function"')  # fmt: skip
        target = embed.rpartition(":")[0]
        if _is_file_spec(target):  # your own function; "provider:model" goes to LangChain
            settings["embed"] = _import_target(path, "store.index.embed", embed)
            if not callable(settings["embed"]):
                raise _fail(path, "store.index.embed", f"{embed} is not a function")
        deployment.store_index = settings
    ttl = raw.get("ttl")
    if ttl is not None:
        if not isinstance(ttl, Mapping):
            raise _fail(path, "store.ttl", 'expected an object such as {"default_ttl": 60}')
        _note_section(deployment.ignored, "store.ttl", ttl, TTL_KEYS)
        deployment.store_ttl = {k: v for k, v in ttl.items() if k in TTL_KEYS}


def _http_settings(path: Path, raw: Any, deployment: Deployment) -> None:
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise _fail(path, "http", "expected an object")
    _note_section(deployment.ignored, "http", raw, frozenset({"cors", *HTTP_SWITCHES}))
    disabled: set[str] = set()
    for key, protocol in HTTP_SWITCHES.items():
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise _fail(path, f"http.{key}", "expected true or false")
        if value:
            disabled.add(protocol)
    deployment.disabled_protocols = frozenset(disabled)
    cors = raw.get("cors")
    if cors is None:
        return
    if not isinstance(cors, Mapping):
        raise _fail(path, "http.cors", "expected an object with `allow_origins`")
    _note_section(deployment.ignored, "http.cors", cors, frozenset({"allow_origins"}))
    origins = cors.get("allow_origins", [])
    if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
        raise _fail(path, "http.cors.allow_origins", 'expected a list of origins, e.g. '
                    '["https://ui.example.com"]')  # fmt: skip
    deployment.cors_origins = tuple(origins)


def _auth_settings(path: Path, raw: Any, deployment: Deployment) -> None:
    if raw is None:
        return
    if not isinstance(raw, Mapping):
        raise _fail(path, "auth", 'expected an object such as {"path": "./auth.py:auth"}')
    for key in raw:
        if key in AUTH_NOOP_KEYS:
            deployment.ignored.append(f"auth.{key}: accepted; no effect on fathom serve")
        elif key != "path":
            deployment.ignored.append(f"auth.{key}: not supported by fathom serve; ignored")
    spec = raw.get("path")
    if spec is None:
        return
    if not isinstance(spec, str):
        raise _fail(path, "auth.path", 'expected "./auth.py:auth" or "package.module:auth"')
    value = _import_target(path, "auth.path", spec)
    if not isinstance(value, Auth):
        raise _fail(path, "auth.path", f"{spec} is a {type(value).__name__}, not a "
                    "langgraph_sdk.Auth: point it at `auth = Auth()` in your module")  # fmt: skip
    from fathom.server.auth.authenticate import check_authenticator

    try:
        check_authenticator(value)
    except TypeError as error:
        raise _fail(path, "auth.path", str(error)) from None
    deployment.auth = value


def load_deployment(path: Path | str) -> Deployment:
    """Read `path` (a `langgraph.json`), apply its `env`, and import its graphs.

    The file's folder goes on `sys.path` first, so `package.module:attr` finds the project's own
    packages as it does under `langgraph dev`. Raises `DeploymentError` for anything the user
    must fix.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise DeploymentError(f"{path}: no such deployment file; pass --config PATH to a "
                              "langgraph.json, or create one with a `graphs` section")  # fmt: skip
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DeploymentError(f"{path}: not valid JSON: {error}") from error
    if not isinstance(raw, dict):
        raise DeploymentError(f"{path}: expected a JSON object with a `graphs` section")
    config: dict[str, Any] = raw
    graphs_raw = config.get("graphs")
    if not isinstance(graphs_raw, dict) or not graphs_raw:
        raise _fail(path, "graphs", 'expected at least one graph, e.g. '
                    '{"agent": "./agent.py:graph"}')  # fmt: skip
    deployment = Deployment(path=path, graphs={})
    for key in config:
        if key in BUILD_KEYS:
            deployment.ignored.append(f"{key}: only used to build container images; ignored")
        elif key in UNSUPPORTED_KEYS:
            deployment.ignored.append(f"{key}: not supported by fathom serve; ignored")
        elif key not in {"graphs", "env", "dependencies", "store", "checkpointer", "http", "auth"}:
            deployment.ignored.append(f"{key}: unknown key; ignored")
    deps = config.get("dependencies", [])
    if not isinstance(deps, list):
        raise _fail(path, "dependencies", 'expected a list such as ["."]')
    deployment.dependencies = [str(d) for d in deps]
    checkpointer = config.get("checkpointer")
    if isinstance(checkpointer, Mapping):
        for key in checkpointer:
            deployment.ignored.append(
                f"checkpointer.{key}: not supported by fathom serve (storage comes from "
                "--database); ignored")  # fmt: skip

    deployment.env = _load_env(path, config.get("env"))
    for name, value in deployment.env.items():
        os.environ.setdefault(name, value)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    _store_settings(path, config.get("store"), deployment)
    _http_settings(path, config.get("http"), deployment)
    _auth_settings(path, config.get("auth"), deployment)

    for name, entry in graphs_raw.items():
        name = str(name)
        if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            spec: str = entry["path"]
            if isinstance(entry.get("description"), str):
                deployment.descriptions[name] = entry["description"]
        elif isinstance(entry, str):
            spec = entry
        else:
            raise _fail(path, f"graphs.{name}", 'expected "./file.py:attr" or '
                        '{"path": "./file.py:attr", "description": "..."}')  # fmt: skip
        value = _import_target(path, f"graphs.{name}", spec)
        deployment.graphs[name] = _as_source(path, name, spec, value)
    logger.info("loaded %d graph(s) from %s", len(deployment.graphs), path)
    return deployment
