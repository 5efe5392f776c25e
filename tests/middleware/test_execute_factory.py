"""`create_deep_agent(backend=<factory>)` and the `execute` tool.

A factory's backend is only known per tool call, so the agent is offered `execute` and each
call resolves the factory once: a call whose backend runs commands runs it, a call whose
backend cannot is answered with a tool error (never a crash).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, StateBackend
from fathom.backends.shell.local import LocalShellBackend
from fathom.middleware.permissions import FilesystemPermission
from fathom.testing import ScriptedModel, ai, tool_call

FINAL = "done"
GO = {"messages": [{"role": "user", "content": "go"}]}


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def drive(mode: str, backend: Any, *calls: Any, **kwargs: Any) -> tuple[list[Any], ScriptedModel]:
    model = ScriptedModel(replies=[ai("", *calls), ai(FINAL)])
    agent = create_deep_agent(model, backend=backend, **kwargs)
    result = asyncio.run(agent.ainvoke(GO)) if mode == "ainvoke" else agent.invoke(GO)
    assert result["messages"][-1].content == FINAL
    return [m for m in result["messages"] if m.type == "tool"], model


def test_factory_returning_a_shell_offers_execute_and_runs_it(mode: str, tmp_path: Path) -> None:
    made: list[Any] = []

    def factory(runtime: Any) -> LocalShellBackend:
        made.append(runtime.tool_call_id)
        return LocalShellBackend(root_dir=tmp_path)

    call = tool_call(
        "execute", {"command": "echo from the factory > out.txt; cat out.txt"}, id="call-x"
    )
    (message,), model = drive(mode, factory, call)
    assert "execute" in model.requests[0].tool_names
    assert message.status == "success"
    assert message.text == "from the factory\n[exit code 0]"
    assert (tmp_path / "out.txt").read_text() == "from the factory\n"
    assert made == ["call-x"]  # resolved once, for this call


def test_factory_returning_a_composite_with_a_shell_default_runs_commands(
    mode: str, tmp_path: Path
) -> None:
    def factory(runtime: Any) -> CompositeBackend:
        return CompositeBackend(
            default=LocalShellBackend(root_dir=tmp_path), routes={"/memories/": StateBackend()}
        )

    (message,), _ = drive(mode, factory, tool_call("execute", {"command": "echo ok"}))
    assert (message.status, message.text) == ("success", "ok\n[exit code 0]")


def test_factory_returning_a_backend_without_a_shell_answers_with_an_error(mode: str) -> None:
    calls = [
        tool_call("execute", {"command": "echo nope"}),
        tool_call("write_file", {"file_path": "/a.txt", "content": "still works"}),
    ]
    (refused, written), model = drive(mode, lambda rt: StateBackend(), *calls)
    assert "execute" in model.requests[0].tool_names
    assert refused.status == "error"
    assert refused.text.startswith("Error: this backend cannot run commands")
    assert "Use the file tools instead" in refused.text
    assert written.status == "success"  # the file tools are unaffected


def test_factory_with_permissions_gets_no_execute(mode: str, tmp_path: Path) -> None:
    rules = [FilesystemPermission(operations=["write"], paths=["/secret/**"], mode="deny")]
    (message,), model = drive(
        mode,
        lambda rt: LocalShellBackend(root_dir=tmp_path),
        tool_call("execute", {"command": "mkdir secret && touch secret/x"}),
        permissions=rules,
    )
    assert "execute" not in model.requests[0].tool_names
    assert message.status == "error"
    assert not (tmp_path / "secret").exists()


def test_plain_backend_without_a_shell_still_gets_no_execute(mode: str) -> None:
    (message,), model = drive(mode, StateBackend(), tool_call("ls", {"path": "/"}))
    assert "execute" not in model.requests[0].tool_names
    assert message.status == "success"
