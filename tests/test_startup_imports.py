"""Building the first agent loads only what it uses, and compiles each graph once.

`from fathom import create_deep_agent` plus one `create_deep_agent(model)` must not load a
provider SDK, httpx's command-line client (click, rich, pygments), the server, the web
page, MCP, A2A or YAML: each costs start-up time and none of it is needed until asked for.
Checked in a fresh interpreter, by the modules it ends up with (not by timing it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langgraph.graph.state import StateGraph

import fathom
from fathom import create_deep_agent

UNWANTED = (
    "openai",
    "anthropic",
    "langchain_openai",
    "langchain_anthropic",
    "click",
    "rich",
    "pygments",
    "yaml",
    "starlette",
    "uvicorn",
    "sse_starlette",
    "mcp",
    "langchain_mcp_adapters",
    "a2a",
    "fathom.server",
    "fathom.web",
    "fathom.cli",
    "fathom.protocols.mcp",
    "fathom.protocols.a2a",
    "fathom.backends.shell",
    "fathom.backends.filesystem",
)

_PROBE = textwrap.dedent(
    """
    import json, sys
    from fathom import create_deep_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    create_deep_agent(GenericFakeChatModel(messages=iter([])))
    cli = sys.modules.get("httpx._main")
    print(json.dumps({"modules": sorted(sys.modules),
                      "httpx_cli_file": getattr(cli, "__file__", None)}))
    """
)


def _loaded_by_first_agent() -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_first_agent_loads_no_provider_sdk_cli_server_or_yaml() -> None:
    found = _loaded_by_first_agent()
    modules = found["modules"]
    assert isinstance(modules, list)
    loaded = [name for name in modules
              if any(name == u or name.startswith(f"{u}.") for u in UNWANTED)]  # fmt: skip
    assert loaded == []
    assert "langchain.agents" in modules  # the probe did build an agent
    # httpx is imported (langgraph-sdk needs it), its command-line module is not
    assert "httpx" in modules
    assert found["httpx_cli_file"] is None


def test_httpx_cli_still_loads_when_asked_for() -> None:
    code = ("import fathom.agent, httpx, sys\n"
            "from httpx._main import print_help\n"
            "print(callable(print_help), 'rich' in sys.modules, callable(httpx.main))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.split() == ["True", "True", "True"]


def test_create_deep_agent_compiles_the_agent_and_its_subagent_once_each() -> None:
    compiled: list[str] = []
    original = StateGraph.compile

    def counting(self: StateGraph, *args: object, **kwargs: object) -> object:
        compiled.append(str(kwargs.get("name")))
        return original(self, *args, **kwargs)  # pyright: ignore[reportArgumentType]

    StateGraph.compile = counting  # pyright: ignore[reportAttributeAccessIssue]
    try:
        create_deep_agent(GenericFakeChatModel(messages=iter([])), name="main")
    finally:
        StateGraph.compile = original
    # the main agent and its general-purpose subagent, one compile each
    assert sorted(compiled) == sorted(["main", "general-purpose"])


def test_import_fathom_alone_loads_no_langchain() -> None:
    code = "import fathom, sys; print(any(m.startswith('lang') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "False"
    assert "create_deep_agent" in dir(fathom)
