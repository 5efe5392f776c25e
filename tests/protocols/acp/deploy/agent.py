"""A user's graphs for `fathom acp --config langgraph.json --graph NAME` (copied by the tests).

`coder` is a factory that accepts tools: a deep agent over the folder `ACP_GRAPH_ROOT` (set
by the deployment file's `env`) that asks before `write_file` and has an `ask_person` tool
whose `interrupt` asks a question. `plain` is a compiled `create_agent` graph. Both are
driven by a `ScriptedModel` in this process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.types import interrupt

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.testing import ScriptedModel
from fathom.testing.scripted import ScriptRequest, ai, tool_call

ROOT = Path(os.environ["ACP_GRAPH_ROOT"])


@tool
def ask_person(question: str) -> str:
    """Ask the person a question and wait for the answer."""
    return f"the person said {interrupt(question)}"


def policy(request: ScriptRequest) -> Any:
    text = request.last_human_text
    done = len(request.turn_results)
    turns = sum(1 for m in request.messages if m.type == "human")
    if text.startswith("write "):  # "write NAME: TEXT"
        name, body = text.removeprefix("write ").split(": ", 1)
        if not done:
            todos = [{"content": f"write {name}", "status": "in_progress"}]
            return ai("", tool_call("write_todos", {"todos": todos}))
        if done == 1:
            return ai("", tool_call("write_file", {"file_path": f"/{name}", "content": body}))
        return ai(f"result: {request.turn_results[-1].text}")
    if text == "ask":
        if not done:
            return ai("", tool_call("ask_person", {"question": "Which colour?"}))
        return ai(f"noted: {request.turn_results[-1].text}")
    if text == "add":
        if not request.has_tool("calc_add"):
            return ai("I have no calc_add tool")
        if not done:
            return ai("", tool_call("calc_add", {"a": 2, "b": 3}))
        return ai(f"the tool said: {request.turn_results[-1].text}")
    return ai(f"you said {text!r} (turn {turns})")


def make_coder(config: Any, tools: list[Any] | None = None) -> Any:
    """The `coder` graph, with the editor's MCP tools when there are some."""
    return create_deep_agent(
        model=ScriptedModel(policy=policy),
        tools=[ask_person, *(tools or [])],
        backend=FilesystemBackend(root_dir=ROOT, virtual_mode=True),
        interrupt_on={"write_file": True},
    )


plain = create_agent(ScriptedModel(policy=policy), tools=[])
