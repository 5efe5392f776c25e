"""The model-facing `delete` tool end to end: `create_deep_agent` driven by a `ScriptedModel`.

Each test scripts one turn of tool calls and checks what the model was told and what is
left in state or on disk; bad input (the root, a path outside the root, a symlink out, a
denied file inside the directory) must come back as an error and change nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import create_deep_agent, create_file_data
from fathom.backends import FilesystemBackend
from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.middleware.permissions import FilesystemPermission
from fathom.project.build import DEFAULT_APPROVALS
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"role": "user", "content": "go"}


def files(*paths: str) -> dict[str, Any]:
    return {path: dict(create_file_data(path)) for path in paths}


def run(mode: str, *calls: Any, state_files: dict | None = None, **options: Any) -> dict:
    agent = create_deep_agent(ScriptedModel(replies=[ai("", *calls), ai("done")]), **options)
    state: dict[str, Any] = {"messages": [USER]}
    if state_files is not None:
        state["files"] = state_files
    return asyncio.run(agent.ainvoke(state)) if mode == "ainvoke" else agent.invoke(state)


def tool_messages(result: dict) -> list[ToolMessage]:
    return [m for m in result["messages"] if m.type == "tool"]


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def test_the_tool_takes_file_path_and_is_a_filesystem_tool() -> None:
    (tool,) = [t for t in FilesystemMiddleware().tools if t.name == "delete"]
    assert list(tool.args) == ["file_path"]
    assert "directory" in tool.description
    assert "delete" in DEFAULT_APPROVALS  # the fathom command asks first


def test_deleting_a_directory_removes_everything_in_it(mode: str) -> None:
    start = files("/d/a.txt", "/d/sub/b.txt", "/dx.txt")
    result = run(mode, tool_call("delete", {"file_path": "/d"}), state_files=start)
    (message,) = tool_messages(result)
    assert message.status == "success"
    assert "/d" in message.text
    assert sorted(result["files"]) == ["/dx.txt"]


@pytest.mark.parametrize("path", ["/", "/missing"])
def test_bad_targets_are_errors_and_change_nothing(mode: str, path: str) -> None:
    start = files("/a.txt")
    result = run(mode, tool_call("delete", {"file_path": path}), state_files=start)
    (message,) = tool_messages(result)
    assert message.status == "error"
    assert isinstance(message.content, str) and path in message.content
    assert sorted(result["files"]) == ["/a.txt"]


def test_a_deny_rule_inside_the_directory_refuses_the_delete(mode: str) -> None:
    start = files("/w/a.txt", "/w/keep/b.txt")
    rules = [
        FilesystemPermission(["write"], ["/w/**"]),
        FilesystemPermission(["write"], ["/w/keep/**"], mode="deny"),
    ]
    result = run(
        mode, tool_call("delete", {"file_path": "/w"}), state_files=start, permissions=rules
    )
    (message,) = tool_messages(result)
    assert message.status == "error"
    assert "not a valid tool" not in message.text
    assert sorted(result["files"]) == ["/w/a.txt", "/w/keep/b.txt"]
    allowed = run(
        mode, tool_call("delete", {"file_path": "/w"}), state_files=start, permissions=rules[:1]
    )
    assert allowed["files"] == {}  # the refusal came from the deny rule


def test_delete_asks_first_with_interrupt_on() -> None:
    agent = create_deep_agent(
        ScriptedModel(replies=[ai("", tool_call("delete", {"file_path": "/a.txt"})), ai("ok")]),
        interrupt_on={"delete": True},
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [USER], "files": files("/a.txt")}, config, version="v2")
    assert paused.interrupts, "delete ran without asking"
    assert "/a.txt" in agent.get_state(config).values["files"]
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2")
    assert agent.get_state(config).values["files"] == {}


@pytest.fixture
def disk(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("f")
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (root / "link").symlink_to(outside, target_is_directory=True)
    return root, outside


@pytest.mark.parametrize(
    "path", ["/../outside/precious.txt", "/link/precious.txt", "/d/../../outside"]
)
def test_on_disk_nothing_outside_the_root_is_deleted(
    mode: str, disk: tuple[Path, Path], path: str
) -> None:
    root, outside = disk
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    result = run(mode, tool_call("delete", {"file_path": path}), backend=backend)
    (message,) = tool_messages(result)
    assert message.status == "error", message.text
    assert "not a valid tool" not in message.text
    assert (outside / "precious.txt").read_text() == "keep me"
    assert (root / "d" / "f.txt").exists()


def test_on_disk_a_directory_is_deleted_recursively_and_read_file_of_one_is_an_error(
    mode: str, disk: tuple[Path, Path]
) -> None:
    root, outside = disk
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    read = run(mode, tool_call("read_file", {"file_path": "/d"}), backend=backend)
    assert tool_messages(read)[0].status == "error"
    result = run(mode, tool_call("delete", {"file_path": "/d"}), backend=backend)
    assert tool_messages(result)[0].status == "success", tool_messages(result)[0].text
    assert not (root / "d").exists()
    assert (outside / "precious.txt").read_text() == "keep me"
