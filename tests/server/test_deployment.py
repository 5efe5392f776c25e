"""`load_deployment`: reading `langgraph.json`, importing its graphs, and its clear errors."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.pregel import Pregel

from fathom.server.deployment import DeploymentError, load_deployment, read_env_file

GRAPH_MODULE = '''
from typing import TypedDict
from langgraph.graph import StateGraph, START

class State(TypedDict):
    n: int

def bump(state: State) -> dict:
    return {"n": state["n"] + 1}

builder = StateGraph(State)
builder.add_node("bump", bump)
builder.add_edge(START, "bump")
graph = builder.compile()
uncompiled = StateGraph(State)
uncompiled.add_node("bump", bump)
uncompiled.add_edge(START, "bump")

def make_graph(config):
    return builder.compile()

async def make_graph_async():
    return builder.compile()

def too_many(a, b):
    return graph

not_a_graph = 42
'''


def write_project(root: Path, config: dict[str, Any], module: str = GRAPH_MODULE) -> Path:
    (root / "agent.py").write_text(module)
    path = root / "langgraph.json"
    path.write_text(json.dumps(config))
    return path


async def test_graphs_load_as_compiled_graphs_and_factories(tmp_path: Path):
    path = write_project(tmp_path, {"graphs": {
        "compiled": "./agent.py:graph",
        "from_builder": "agent.py:uncompiled",
        "factory": {"path": "./agent.py:make_graph", "description": "built per run"},
        "async_factory": "./agent.py:make_graph_async",
    }})  # fmt: skip
    deployment = load_deployment(path)
    assert list(deployment.graphs) == ["compiled", "from_builder", "factory", "async_factory"]
    assert isinstance(deployment.graphs["compiled"], Pregel)
    built = deployment.graphs["from_builder"]
    assert isinstance(built, Pregel)
    assert built.invoke({"n": 1}) == {"n": 2}
    factory = deployment.graphs["factory"]
    assert not isinstance(factory, Pregel)
    assert factory({}).invoke({"n": 5}) == {"n": 6}
    async_factory = deployment.graphs["async_factory"]
    assert not isinstance(async_factory, Pregel)
    made = await async_factory()
    assert isinstance(made, Pregel)
    assert deployment.descriptions == {"factory": "built per run"}


def test_a_module_path_is_imported_from_the_deployment_folder(tmp_path: Path):
    package = tmp_path / "mypkg_s3deploy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "graphs.py").write_text(GRAPH_MODULE)
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"agent": "mypkg_s3deploy.graphs:graph"}}))
    deployment = load_deployment(path)
    assert isinstance(deployment.graphs["agent"], Pregel)


def test_env_from_a_file_is_applied_before_import_and_the_shell_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("S3_DEPLOY_SEEN", raising=False)
    monkeypatch.setenv("S3_DEPLOY_SHELL", "from-shell")
    (tmp_path / ".env").write_text(textwrap.dedent("""\
        # a comment
        S3_DEPLOY_SEEN="from file"
        export S3_DEPLOY_SHELL=from-file  # trailing comment
    """))
    module = GRAPH_MODULE + "\nimport os\nSEEN = os.environ['S3_DEPLOY_SEEN']\n"
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"}, "env": ".env"}, module)
    deployment = load_deployment(path)
    monkeypatch.delenv("S3_DEPLOY_SEEN")  # the file set it; undo for other tests
    assert deployment.env == {"S3_DEPLOY_SEEN": "from file", "S3_DEPLOY_SHELL": "from-file"}
    assert os.environ["S3_DEPLOY_SHELL"] == "from-shell"


def test_env_as_a_mapping_is_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("S3_DEPLOY_MAP", raising=False)
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "env": {"S3_DEPLOY_MAP": "yes"}})  # fmt: skip
    load_deployment(path)
    assert os.environ.pop("S3_DEPLOY_MAP") == "yes"


def test_settings_fathom_uses_are_read_and_the_rest_reported_as_ignored(tmp_path: Path):
    path = write_project(tmp_path, {
        "graphs": {"g": "./agent.py:graph"},
        "dependencies": ["."],
        "python_version": "3.12",
        "auth": {"openapi": {"securitySchemes": {}}, "disable_studio_auth": True},
        "store": {"index": {"dims": 8, "embed": "fake:embed", "fields": ["text"]},
                  "ttl": {"default_ttl": 60, "sweep_interval_minutes": 5}},
        "checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 10}},
        "http": {"cors": {"allow_origins": ["https://ui.example"], "max_age": 60},
                 "disable_mcp": True, "disable_meta": True},
        "mystery": 1,
    })  # fmt: skip
    deployment = load_deployment(path)
    assert deployment.dependencies == ["."]
    assert deployment.store_index == {"dims": 8, "embed": "fake:embed", "fields": ["text"]}
    assert deployment.store_ttl == {"default_ttl": 60, "sweep_interval_minutes": 5}
    assert deployment.cors_origins == ("https://ui.example",)
    assert deployment.disabled_protocols == {"mcp"}
    ignored = "\n".join(deployment.ignored)
    for key in ("python_version", "auth.openapi", "auth.disable_studio_auth", "checkpointer.ttl",
                "http.cors.max_age",
                "http.disable_meta", "mystery"):  # fmt: skip
        assert key in ignored
    assert "disable_mcp" not in ignored
    assert "store.index" not in ignored
    assert "dependencies" not in ignored
    assert deployment.auth is None


def test_http_protocol_switches_are_read_and_checked(tmp_path: Path):
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "http": {"disable_a2a": True, "disable_mcp": False}})
    assert load_deployment(path).disabled_protocols == {"a2a"}
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "http": {"disable_a2a": "yes"}})
    with pytest.raises(DeploymentError, match=r"http\.disable_a2a.*true or false"):
        load_deployment(path)


AUTH_MODULE = '''
from langgraph_sdk import Auth

auth = Auth()
not_auth = object()

@auth.authenticate
async def who(authorization: str | None):
    return "someone"
'''


def test_auth_path_loads_the_auth_object_relative_to_the_file(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "auth.py").write_text(AUTH_MODULE)
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "auth": {"path": "./sub/auth.py:auth"}})  # fmt: skip
    deployment = load_deployment(path)
    from langgraph_sdk import Auth

    assert isinstance(deployment.auth, Auth)
    assert not [line for line in deployment.ignored if line.startswith("auth")]


def test_auth_path_to_something_else_names_the_key_and_the_fix(tmp_path: Path):
    (tmp_path / "auth.py").write_text(AUTH_MODULE)
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "auth": {"path": "./auth.py:not_auth"}})  # fmt: skip
    message = _error(path)
    assert "auth.path" in message and "langgraph_sdk.Auth" in message


def test_an_authenticate_handler_asking_for_an_unknown_parameter_is_refused(tmp_path: Path):
    (tmp_path / "auth.py").write_text(AUTH_MODULE.replace("authorization: str | None", "token"))
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "auth": {"path": "./auth.py:auth"}})  # fmt: skip
    message = _error(path)
    assert "auth.path" in message and "'token'" in message and "authorization" in message


def _error(path: Path) -> str:
    with pytest.raises(DeploymentError) as caught:
        load_deployment(path)
    return str(caught.value)


def test_a_missing_file_names_the_path_and_the_option(tmp_path: Path):
    message = _error(tmp_path / "langgraph.json")
    assert str(tmp_path / "langgraph.json") in message
    assert "--config" in message


def test_invalid_json_is_reported(tmp_path: Path):
    path = tmp_path / "langgraph.json"
    path.write_text("{not json")
    assert "not valid JSON" in _error(path)


def test_no_graphs_is_reported(tmp_path: Path):
    assert "`graphs`" in _error(write_project(tmp_path, {"env": {}}))


def test_a_spec_without_attr_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py"}}))
    assert "`graphs.g`" in message
    assert "./file.py:attr" in message


def test_a_missing_graph_file_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./nowhere.py:graph"}}))
    assert "nowhere.py does not exist" in message
    assert "`graphs.g`" in message


def test_a_missing_attr_lists_the_graphs_the_module_has(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:grpah"}}))
    assert "no attribute 'grpah'" in message
    assert "graph" in message.split("graphs it defines:")[1]


def test_an_import_error_carries_the_exception(tmp_path: Path):
    broken = "import definitely_not_installed_s3\n"
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"}}, broken))
    assert "ModuleNotFoundError" in message
    assert "definitely_not_installed_s3" in message
    assert str(tmp_path / "langgraph.json") in message


def test_a_missing_module_is_reported(tmp_path: Path):
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"g": "no_such_pkg_s3.mod:graph"}}))
    assert "importing no_such_pkg_s3.mod failed" in _error(path)


def test_a_value_that_is_not_a_graph_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:not_a_graph"}}))
    assert "is a int, not a graph" in message


def test_a_factory_with_two_arguments_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:too_many"}}))
    assert "takes 2 arguments" in message


def test_a_missing_env_file_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                              "env": ".env.missing"}))  # fmt: skip
    assert "`env`" in message
    assert ".env.missing does not exist" in message


def test_a_malformed_env_line_names_the_line(tmp_path: Path):
    env = tmp_path / ".env"
    env.write_text("GOOD=1\nthis is not an assignment\n")
    with pytest.raises(DeploymentError, match=r"\.env:2: expected KEY=VALUE"):
        read_env_file(env)


def test_store_index_without_dims_is_reported(tmp_path: Path):
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                              "store": {"index": {"embed": "x:y"}}}))  # fmt: skip
    assert "`store.index`" in message
    assert "dims" in message


def test_a_store_embed_function_in_a_file_is_imported(tmp_path: Path):
    (tmp_path / "embed.py").write_text("def embed(texts):\n    return [[1.0, 0.0]] * len(texts)\n")
    path = write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                    "store": {"index": {"dims": 2, "embed": "./embed.py:embed"}}})
    index = load_deployment(path).store_index
    assert index is not None
    assert index["embed"](["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]


def test_a_missing_store_embed_function_is_reported(tmp_path: Path):
    (tmp_path / "embed.py").write_text("x = 1\n")
    message = _error(write_project(tmp_path, {"graphs": {"g": "./agent.py:graph"},
                                              "store": {"index": {"dims": 2,
                                                                  "embed": "./embed.py:embed"}}}))
    assert "`store.index.embed`" in message
    assert "no attribute 'embed'" in message
