"""The backend protocol: where the agent's files live.

Every filesystem tool talks to a `BackendProtocol`. Backends never raise for a bad request
from the model (missing file, non-unique edit, path outside the root): they return a result
whose `error` says what happened, and the tool hands that text to the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NotRequired, Protocol, runtime_checkable

from typing_extensions import TypedDict

from fathom.state import FileData, FilesUpdate

__all__ = [
    "BackendFactory",
    "BackendProtocol",
    "DeleteResult",
    "EditResult",
    "ExecuteResponse",
    "FileDownloadResponse",
    "FileInfo",
    "FileUploadResponse",
    "GlobResult",
    "GrepMatch",
    "GrepResult",
    "HookRuntime",
    "LsResult",
    "ReadResult",
    "SandboxBackendProtocol",
    "WriteResult",
    "resolve_backend",
    "supports_delete",
    "supports_execute",
]


class FileInfo(TypedDict):
    """One entry of a listing."""

    path: str
    """Absolute virtual path; directories end with `/`."""
    is_dir: NotRequired[bool]
    size: NotRequired[int]
    """Size in bytes."""
    modified_at: NotRequired[str]
    """ISO-8601 UTC timestamp."""


class GrepMatch(TypedDict):
    """One line that matched a grep pattern."""

    path: str
    line: int
    """1-based line number."""
    text: str


@dataclass(frozen=True)
class LsResult:
    """Result of `ls`: entries sorted by path, or an error."""

    error: str | None = None
    entries: list[FileInfo] | None = None


@dataclass(frozen=True)
class ReadResult:
    """Result of `read`: the whole file's data, or an error."""

    error: str | None = None
    file_data: FileData | None = None


@dataclass(frozen=True)
class GrepResult:
    """Result of `grep`: matches in path then line order, or an error.

    `skipped` names files that were not searched because they are too large (a fathom
    addition, so the model learns that the search was not complete).
    """

    error: str | None = None
    matches: list[GrepMatch] | None = None
    skipped: list[str] | None = None


@dataclass(frozen=True)
class GlobResult:
    """Result of `glob`: matched files sorted by path (empty when none), or an error."""

    error: str | None = None
    matches: list[FileInfo] | None = None


@dataclass(frozen=True)
class WriteResult:
    """Result of `write` (create-only).

    In-state backends return the change as `files_update` for the `files` channel;
    backends with their own storage return `files_update=None`.
    """

    error: str | None = None
    path: str | None = None
    files_update: FilesUpdate | None = None


@dataclass(frozen=True)
class EditResult:
    """Result of `edit`, with the number of replacements made."""

    error: str | None = None
    path: str | None = None
    files_update: FilesUpdate | None = None
    occurrences: int | None = None


@dataclass(frozen=True)
class DeleteResult:
    """Result of `delete` (an optional backend method): the removed path, or an error."""

    error: str | None = None
    path: str | None = None
    files_update: FilesUpdate | None = None


@runtime_checkable
class BackendProtocol(Protocol):
    """Storage for the virtual filesystem.

    Paths are absolute virtual paths (`/notes/a.md`). Implementations return results with
    `error` set instead of raising for anything the model could have caused.

    A class that subclasses the protocol and writes only the sync methods gets async ones
    that run them in a worker thread. Backends may also offer `delete(file_path)` /
    `adelete(file_path)` returning a `DeleteResult` (see `supports_delete`).
    """

    def ls(self, path: str) -> LsResult:
        """List the files and directories directly under `path`."""
        ...

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Read a file. `offset`/`limit` are hints in lines; the full data may be returned."""
        ...

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        """Find lines containing the literal `pattern` under `path`, in files matching `glob`."""
        ...

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        """Find files under `path` whose path matches the glob `pattern`."""
        ...

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create a new file; an existing file is an error."""
        ...

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace `old_string` (unique unless `replace_all`) with `new_string`."""
        ...

    async def als(self, path: str) -> LsResult:
        """Async `ls`."""
        return await asyncio.to_thread(self.ls, path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async `read`."""
        return await asyncio.to_thread(self.read, file_path, offset, limit)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None
    ) -> GrepResult:
        """Async `grep`."""
        return await asyncio.to_thread(self.grep, pattern, path, glob)

    async def aglob(self, pattern: str, path: str = "/") -> GlobResult:
        """Async `glob`."""
        return await asyncio.to_thread(self.glob, pattern, path)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Async `write`."""
        return await asyncio.to_thread(self.write, file_path, content)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Async `edit`."""
        return await asyncio.to_thread(self.edit, file_path, old_string, new_string, replace_all)


@dataclass(frozen=True)
class ExecuteResponse:
    """What a shell command produced: combined stdout/stderr, exit code, whether cut."""

    output: str
    exit_code: int | None = None
    """`None` when the command did not finish (killed at the timeout)."""
    truncated: bool = False


@dataclass(frozen=True)
class FileUploadResponse:
    """Result of uploading one file: `error` is `None` on success."""

    path: str
    error: str | None = None


@dataclass(frozen=True)
class FileDownloadResponse:
    """Result of downloading one file: its bytes, or an error."""

    path: str
    content: bytes | None = None
    error: str | None = None


@runtime_checkable
class SandboxBackendProtocol(BackendProtocol, Protocol):
    """A backend that can also run shell commands and move files in and out."""

    def execute(self, command: str, timeout: int | None = None) -> ExecuteResponse:
        """Run `command` in the backend's workspace; never raises for a failing command."""
        ...

    async def aexecute(self, command: str, timeout: int | None = None) -> ExecuteResponse:
        """Async `execute`."""
        return await asyncio.to_thread(self.execute, command, timeout)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)` into the workspace (overwriting)."""
        ...

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each path's bytes from the workspace."""
        ...


def supports_execute(backend: object) -> bool:
    """Whether `backend` can run shell commands.

    A backend with `execute` can, unless it says otherwise with a `can_execute` attribute
    (a `CompositeBackend` can when its default backend can).
    """
    if not callable(getattr(backend, "execute", None)):
        return False
    return bool(getattr(backend, "can_execute", True))


def supports_delete(backend: object) -> bool:
    """Whether `backend` implements the optional `delete` method."""
    return callable(getattr(backend, "delete", None))


BackendFactory = Callable[[Any], BackendProtocol]
"""A callable `(runtime) -> BackendProtocol`, called for each tool call with its `ToolRuntime`
(which factories written for the reference API take positionally)."""


class HookRuntime:
    """What a backend (or factory) needs to serve a middleware hook outside a tool call.

    Tools get a `ToolRuntime`; hooks such as `before_agent(state, runtime)` get the graph
    state and a LangGraph `Runtime` separately. This joins them: `state`, and every
    attribute of the runtime (`context`, `store`, `execution_info`, `server_info`, ...),
    plus the run's `config`.
    """

    def __init__(self, state: Any, runtime: Any, config: Any = None) -> None:
        self.state = state
        self._runtime = runtime
        self.config = config if config is not None else _current_config()
        self.tool_call_id = None

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_runtime"), name)


def _current_config() -> Any:
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return {}


def resolve_backend(backend: BackendProtocol | BackendFactory, runtime: Any) -> BackendProtocol:
    """The backend serving one tool call: call a factory, then `bind` it to the runtime."""
    if callable(backend) and not isinstance(backend, BackendProtocol):
        backend = backend(runtime)
    bind = getattr(backend, "bind", None)
    return bind(runtime) if bind is not None else backend
