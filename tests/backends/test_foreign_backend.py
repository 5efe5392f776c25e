"""One contract inside, adapters at the edge: foreign backends are wrapped once where they
are handed in, subclasses are conformed when their class is made, and nothing inside probes
a backend for keywords or for async methods."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, StateBackend
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.protocol import (
    BackendProtocol,
    ExecuteResponse,
    FileInfo,
    ForeignBackend,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
    as_backend,
    execute_accepts_timeout,
    resolve_backend,
    supports_delete,
    supports_execute,
)
from fathom.backends.utils import create_file_data, read_window
from fathom.middleware.filesystem.answers import describe_error
from fathom.testing import ScriptedModel, ai, tool_call


@dataclass
class RefGrepResult:
    """A result as the reference package makes it: text errors, no `skipped`."""

    error: str | None = None
    matches: list[dict] | None = None
    truncated: bool = False


@dataclass
class Disk:
    """A duck-typed, sync-only backend written for the reference API: no `delete`, no async
    twins, `grep` without `max_count`, text errors."""

    files: dict[str, str] = field(default_factory=dict)
    greps: list[tuple[Any, ...]] = field(default_factory=list)

    def ls(self, path: str) -> LsResult:
        return LsResult(entries=[FileInfo(path=p) for p in sorted(self.files)])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        if file_path not in self.files:
            return ReadResult(error=f"Error: no file {file_path} here")
        return read_window(create_file_data(self.files[file_path]), offset, limit, file_path)

    def write(self, file_path: str, content: str) -> WriteResult:
        self.files[file_path] = content
        return WriteResult(path=file_path)

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> Any:
        self.greps.append((pattern, path, glob))
        found = [
            {"path": p, "line": n, "text": line}
            for p, text in sorted(self.files.items())
            for n, line in enumerate(text.splitlines(), 1)
            if pattern in line
        ]
        return RefGrepResult(matches=found)


def _run(agent: Any, mode: str) -> list[Any]:
    payload = {"messages": [{"role": "user", "content": "go"}]}
    result = agent.invoke(payload) if mode == "sync" else asyncio.run(agent.ainvoke(payload))
    return [m for m in result["messages"] if m.type == "tool"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sync_only_duck_typed_backend_serves_every_tool(mode: str) -> None:
    disk = Disk({"/a.txt": "hit\n" * 5})
    model = ScriptedModel(
        replies=[
            ai(
                "",
                tool_call("read_file", {"file_path": "/a.txt"}, id="r"),
                tool_call("read_file", {"file_path": "/nope"}, id="m"),
                tool_call("grep", {"pattern": "hit", "output_mode": "count", "max_count": 2},
                          id="g"),
                tool_call("delete", {"file_path": "/a.txt"}, id="d"),
            ),
            ai("done"),
        ]
    )
    answers = {m.tool_call_id: m for m in _run(create_deep_agent(model, backend=disk), mode)}
    assert "hit" in answers["r"].text
    assert answers["m"].text == "Error: no file /nope here"  # the backend's words, as they are
    assert "2" in answers["g"].text and disk.greps == [("hit", None, None)]  # capped after
    assert answers["d"].status == "error" and "does not support" in answers["d"].text
    assert disk.files  # nothing was deleted


def test_the_wrapper_types_answers_and_errors() -> None:
    wrapped = as_backend(Disk({"/a": "x\nx\nx\n"}))
    assert isinstance(wrapped, ForeignBackend) and as_backend(wrapped) is wrapped
    missing = wrapped.read("/b").error
    assert isinstance(missing, BackendError) and error_kind(missing) is ErrorKind.FAILED
    assert str(missing) == describe_error(missing) == "Error: no file /b here"
    grep = wrapped.grep("x", max_count=2)
    assert isinstance(grep, GrepResult) and grep.skipped is None
    assert len(grep.matches or []) == 2 and grep.truncated
    assert error_kind(wrapped.delete("/a").error) is ErrorKind.UNSUPPORTED
    (upload,) = wrapped.upload_files([("/c", b"c")])
    assert upload.error == ErrorKind.UNSUPPORTED
    assert not supports_delete(wrapped) and not supports_execute(wrapped)
    assert asyncio.run(wrapped.aread("/a")).file_data is not None  # sync method in a thread


def test_fathoms_own_backends_are_not_wrapped() -> None:
    state = StateBackend()
    assert as_backend(state) is state
    composite = CompositeBackend(state, {"/disk/": Disk({"/a": "hit"})})
    assert composite.default is state
    assert isinstance(composite.routes["/disk/"], ForeignBackend)
    assert [m["path"] for m in composite.grep("hit").matches or []] == ["/disk/a"]


def test_a_factory_is_called_once_per_tool_call_and_its_foreign_backend_wrapped() -> None:
    calls: list[Any] = []

    def factory(runtime: Any) -> Disk:
        calls.append(runtime)
        return Disk({"/a": "a"})

    assert isinstance(resolve_backend(factory, object()), ForeignBackend)
    calls.clear()
    model = ScriptedModel(
        replies=[ai("", tool_call("grep", {"pattern": "a"}, id="g")), ai("done")]
    )
    for mode in ("sync", "async"):
        calls.clear()
        _run(create_deep_agent(ScriptedModel(replies=list(model.replies)), backend=factory), mode)
        assert len(calls) == 1, mode


def test_subclasses_are_conformed_when_the_class_is_made() -> None:
    class OldShell(SandboxBackendProtocol):
        def execute(self, command: str) -> ExecuteResponse:  # type: ignore[override]
            return ExecuteResponse(output=command)

    class InMemoryShell(StateBackend):
        def execute(self, command: str) -> ExecuteResponse:
            return ExecuteResponse(output=command.upper())

    shell = OldShell()
    assert shell.execute("ls", timeout=5, on_output=print).output == "ls"
    assert asyncio.run(shell.aexecute("ls", timeout=5)).output == "ls"
    assert not execute_accepts_timeout(OldShell)  # as written
    assert "command" in inspect.signature(OldShell.execute).parameters
    memory = InMemoryShell()
    assert asyncio.run(memory.aexecute("x", timeout=1)).output == "X"  # given an aexecute


def test_a_missing_method_of_a_subclass_still_raises_for_direct_callers() -> None:
    class Partial(BackendProtocol):
        pass

    with pytest.raises(NotImplementedError, match="Partial does not implement read"):
        asyncio.run(Partial().aread("/a"))
