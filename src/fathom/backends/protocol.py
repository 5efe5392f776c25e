"""The backend protocol: where the agent's files live.

Every filesystem tool talks to a `BackendProtocol`. Backends never raise for a bad request
from the model (missing file, non-unique edit, path outside the root): they return a result
whose `error` is a `BackendError` (a kind and the facts of the failure), and the tool layer
(`fathom.middleware.filesystem.answers.describe_error`) writes the words the model reads.

`BackendProtocol` is a base class, not a structural `typing.Protocol`: a subclass that
leaves a sync method out fails loudly with `NotImplementedError` naming the class and the
method (instead of silently returning `None`), and every async method runs its sync twin
in a worker thread unless the subclass overrides it. An object that has the methods without
subclassing still counts as a backend (`isinstance` checks the method names), so duck-typed
backends keep working.

This module deliberately does not use `from __future__ import annotations`: the TypedDicts
below must report their `NotRequired` keys as optional at runtime (`__required_keys__`),
which schema tools such as pydantic and LangGraph read.
"""

import abc
import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from fathom.backends.errors import BackendError, ErrorKind
from fathom.state import FileData, FilesUpdate

__all__ = [
    "BackendFactory",
    "BackendOrFactory",
    "BackendProtocol",
    "ContextLine",
    "DeleteResult",
    "EditResult",
    "ExecuteResponse",
    "FileDownloadResponse",
    "FileInfo",
    "FileUploadResponse",
    "GlobResult",
    "GlobTruncationReason",
    "GrepMatch",
    "GrepResult",
    "HookRuntime",
    "LsResult",
    "ReadResult",
    "ResultError",
    "SandboxBackendProtocol",
    "WriteResult",
    "execute_accepts_timeout",
    "resolve_backend",
    "supports_delete",
    "supports_execute",
]

logger = logging.getLogger(__name__)

ResultError = BackendError | str | None
"""A result's `error`: a `BackendError` from fathom's backends, free text from a backend
written for the Deep Agents API, or `None` on success."""


class FileInfo(TypedDict):
    """One entry of a listing."""

    path: str
    """Absolute virtual path; directories end with `/`."""
    is_dir: NotRequired[bool]
    size: NotRequired[int]
    """Size in bytes."""
    modified_at: NotRequired[str]
    """ISO-8601 UTC timestamp."""


class ContextLine(TypedDict):
    """A line next to a grep match, shown as context (`grep(..., context_lines=N)`)."""

    line: int
    """1-based line number."""
    text: str


class GrepMatch(TypedDict):
    """One line that matched a grep pattern."""

    path: str
    line: int
    """1-based line number."""
    text: str
    context_before: NotRequired[list[ContextLine]]
    """Up to `context_lines` lines before the match (set with `context_after`, only when
    context was asked for). A line that itself matches is never repeated as context."""
    context_after: NotRequired[list[ContextLine]]
    """Up to `context_lines` lines after the match; see `context_before`."""


@dataclass(frozen=True)
class LsResult:
    """Result of `ls`: entries sorted by path, or an error."""

    error: ResultError = None
    entries: list[FileInfo] | None = None


@dataclass(frozen=True)
class ReadResult:
    """Result of `read`: the requested window of a file, or an error.

    For a text file `file_data["content"]` holds only the lines of the window (their line
    endings as stored), and the window fields say where it lies:

    - `start_line` / `end_line`: the 1-based first and last line shown (set together);
    - `total_lines`: the file's number of lines;
    - `next_offset`: the 0-based offset to pass to read on, `None` at the end of the file.

    An empty (or whitespace-only) file comes back whole with no window fields. A read of zero
    lines (`limit <= 0`) comes back empty with `no_lines_requested=True`, so a caller can tell
    it from an empty file. A binary file comes back whole, without window fields. Inconsistent
    combinations raise `ValueError` at construction: a backend bug, caught where it is made.
    """

    error: ResultError = None
    file_data: FileData | None = None
    total_lines: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    next_offset: int | None = None
    no_lines_requested: bool = False

    def __post_init__(self) -> None:
        """Reject window fields that contradict each other (they would mislead paging)."""
        if (self.start_line is None) != (self.end_line is None):
            raise ValueError("ReadResult: set start_line and end_line together, or neither")
        windowless = self.start_line is None
        if windowless and (self.total_lines is not None or self.next_offset is not None):
            raise ValueError("ReadResult: total_lines and next_offset need start_line/end_line")
        if self.no_lines_requested and (self.error is not None or not windowless):
            raise ValueError(
                "ReadResult: no_lines_requested means nothing was read; "
                "it cannot carry an error or window fields"
            )
        if windowless:
            return
        assert self.start_line is not None and self.end_line is not None
        if not 1 <= self.start_line <= self.end_line:
            raise ValueError(
                f"ReadResult: need 1 <= start_line <= end_line, got "
                f"{self.start_line}..{self.end_line}"
            )
        if self.total_lines is not None and self.total_lines < self.end_line:
            raise ValueError(
                f"ReadResult: total_lines {self.total_lines} < end_line {self.end_line}"
            )
        if self.next_offset is not None and self.next_offset != self.end_line:
            raise ValueError(
                f"ReadResult: next_offset {self.next_offset} must be end_line "
                f"{self.end_line} (the 0-based index of the first line not shown)"
            )


@dataclass(frozen=True)
class GrepResult:
    """Result of `grep`: matches in path then line order, or an error.

    `truncated` is true when the search stopped early (`max_count` reached, or a bound on
    the work) so `matches` is incomplete but valid. `skipped` names files that were not
    searched because they are too large (a fathom addition, so the model learns that the
    search was not complete).
    """

    error: ResultError = None
    matches: list[GrepMatch] | None = None
    truncated: bool = False
    skipped: list[str] | None = None


GlobTruncationReason = Literal["budget", "unreadable", "transport"]
"""Why a glob result is incomplete: `budget` (a time or match bound; narrowing the pattern
helps), `unreadable` (a directory could not be read; narrowing will not help), `transport`
(a sandbox's output was cut)."""


@dataclass(frozen=True)
class GlobResult:
    """Result of `glob`: matched files sorted by path (empty when none), or an error.

    `truncated` is true when the walk stopped early; `truncation_reason` says why when the
    backend knows.
    """

    error: ResultError = None
    matches: list[FileInfo] | None = None
    truncated: bool = False
    truncation_reason: GlobTruncationReason | None = None


@dataclass(frozen=True)
class WriteResult:
    """Result of `write` (creates the file, or replaces it when it exists).

    In-state backends return the change as `files_update` for the `files` channel;
    backends with their own storage return `files_update=None`.
    """

    error: ResultError = None
    path: str | None = None
    files_update: FilesUpdate | None = None


@dataclass(frozen=True)
class EditResult:
    """Result of `edit`, with the number of replacements made (and `files_update` as for
    `WriteResult`)."""

    error: ResultError = None
    path: str | None = None
    occurrences: int | None = None
    files_update: FilesUpdate | None = None


@dataclass(frozen=True)
class DeleteResult:
    """Result of `delete`: the removed path, or an error (and `files_update` as for
    `WriteResult`)."""

    error: ResultError = None
    path: str | None = None
    files_update: FilesUpdate | None = None


@dataclass(frozen=True)
class ExecuteResponse:
    """What a shell command produced: combined stdout/stderr, exit code, whether cut."""

    output: str
    exit_code: int | None = None
    """`None` when the exit code is unknown."""
    truncated: bool = False


@dataclass(frozen=True)
class FileUploadResponse:
    """Result of uploading one file: `error` is `None` on success.

    `error` is an `ErrorKind` (a `str`; the Deep Agents API's four values where they apply:
    `file_not_found`, `permission_denied`, `is_directory`, `invalid_path`), or free text
    from a backend written for that API.
    """

    path: str
    error: ErrorKind | str | None = None


@dataclass(frozen=True)
class FileDownloadResponse:
    """Result of downloading one file: its bytes, or an error (as in `FileUploadResponse`)."""

    path: str
    content: bytes | None = None
    error: ErrorKind | str | None = None


def _missing(backend: object, method: str) -> NotImplementedError:
    return NotImplementedError(
        f"{type(backend).__name__} does not implement {method}(); "
        f"define {method} on the backend class"
    )


_SYNC_METHODS = ("ls", "read", "grep", "glob", "write", "edit")
_ASYNC_METHODS = ("als", "aread", "agrep", "aglob", "awrite", "aedit")


def _has_methods(cls: type, names: tuple[str, ...]) -> bool:
    return all(callable(getattr(cls, name, None)) for name in names)


class BackendProtocol(abc.ABC):  # noqa: B024 - every method has a default on purpose
    """Storage for the virtual filesystem.

    Paths are absolute virtual paths (`/notes/a.md`). Implementations return results with
    `error` set (a `BackendError`) instead of raising for anything the model could have
    caused.

    Subclass it and write the sync methods you support: each one you leave out raises
    `NotImplementedError` naming the class and method, and each async method (`als`,
    `aread`, ...) runs its sync twin with `asyncio.to_thread` unless overridden. `delete`,
    `upload_files` and `download_files` are optional (`supports_delete`).

    `isinstance(obj, BackendProtocol)` is also true for an object that does not subclass it
    but has the six file methods and their async twins (a duck-typed backend).
    """

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        """Count classes with the file methods (sync and async) as backends."""
        if cls is BackendProtocol:
            return True if _has_methods(other, _SYNC_METHODS + _ASYNC_METHODS) else NotImplemented
        return NotImplemented

    def ls(self, path: str) -> LsResult:
        """List the files and directories directly under `path`."""
        raise _missing(self, "ls")

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Read `limit` lines from the 0-based line `offset` (see `ReadResult`).

        A negative `offset` reads from the start; `limit <= 0` reads nothing
        (`no_lines_requested`); an `offset` at or past the last line is a `PAST_END` error.
        """
        raise _missing(self, "read")

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Find lines containing the literal `pattern` under `path` (`None`: `/`), in files
        matching `glob`.

        `max_count` caps the total number of matches: the search stops there and sets
        `truncated` when more exist. fathom's own backends also take `context_lines=N`.
        """
        raise _missing(self, "grep")

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Find files under `path` (`None`: `/`) whose path matches the glob `pattern`."""
        raise _missing(self, "glob")

    def write(self, file_path: str, content: str) -> WriteResult:
        """Write a file, creating it or replacing the content of an existing one."""
        raise _missing(self, "write")

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace `old_string` (unique unless `replace_all`) with `new_string`."""
        raise _missing(self, "edit")

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file, or a directory with everything under it (optional)."""
        raise _missing(self, "delete")

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)`, replacing existing files; one response per file, in
        order (optional)."""
        raise _missing(self, "upload_files")

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each path's bytes; one response per path, in order (optional)."""
        raise _missing(self, "download_files")

    async def als(self, path: str) -> LsResult:
        """Async `ls`."""
        return await asyncio.to_thread(self.ls, path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async `read`."""
        return await asyncio.to_thread(self.read, file_path, offset, limit)

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Async `grep`. A `grep` written without `max_count` runs uncapped and the result
        is cut to `max_count` afterwards, so callers get the cap either way."""
        if max_count is None:
            return await asyncio.to_thread(self.grep, pattern, path, glob)
        if accepts_keyword(type(self), "grep", "max_count"):
            result = await asyncio.to_thread(
                lambda: self.grep(pattern, path, glob, max_count=max_count)
            )
        else:
            result = await asyncio.to_thread(self.grep, pattern, path, glob)
        return cap_grep(result, max_count)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
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

    async def adelete(self, file_path: str) -> DeleteResult:
        """Async `delete`."""
        return await asyncio.to_thread(self.delete, file_path)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async `upload_files`."""
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async `download_files`."""
        return await asyncio.to_thread(self.download_files, paths)


def cap_grep(result: GrepResult, max_count: int | None) -> GrepResult:
    """`result` with at most `max_count` matches, `truncated` when some were dropped."""
    if max_count is None or result.matches is None or len(result.matches) <= max_count:
        return result
    return GrepResult(
        error=result.error,
        matches=result.matches[: max(max_count, 0)],
        truncated=True,
        skipped=result.skipped,
    )


@lru_cache(maxsize=512)
def accepts_keyword(cls: type, method: str, keyword: str) -> bool:
    """Whether `cls.method` takes `keyword` (by name or through `**kwargs`).

    Lets callers pass newer arguments (`max_count`, `context_lines`, `timeout`) only to
    backends written to take them.
    """
    try:
        parameters = inspect.signature(getattr(cls, method)).parameters
    except (AttributeError, TypeError, ValueError):
        logger.warning("cannot inspect %s.%s; not passing %s", cls.__qualname__, method, keyword)
        return False
    return keyword in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


class SandboxBackendProtocol(BackendProtocol):
    """A backend that can also run shell commands.

    `isinstance` is also true for a duck-typed backend that has `execute`.
    """

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        """Count backends with a callable `execute` as sandboxes."""
        if cls is SandboxBackendProtocol:
            if _has_methods(other, (*_SYNC_METHODS, *_ASYNC_METHODS, "execute")):
                return True
            return NotImplemented
        return NotImplemented

    @property
    def id(self) -> str:
        """A unique identifier of this sandbox instance."""
        raise _missing(self, "id")

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run `command` in the backend's workspace; never raises for a failing command.

        `timeout` is in seconds; `None` means the backend's default.
        """
        raise _missing(self, "execute")

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Async `execute` (in a worker thread). `timeout` is passed only to an `execute`
        that takes it."""
        if timeout is not None and execute_accepts_timeout(type(self)):
            return await asyncio.to_thread(lambda: self.execute(command, timeout=timeout))
        return await asyncio.to_thread(self.execute, command)


def execute_accepts_timeout(cls: type) -> bool:
    """Whether `cls.execute` takes a `timeout` keyword (older sandboxes may not)."""
    return accepts_keyword(cls, "execute", "timeout")


def supports_execute(backend: object) -> bool:
    """Whether `backend` can run shell commands.

    A backend with `execute` can, unless it says otherwise with a `can_execute` attribute
    (a `CompositeBackend` can when its default backend can), or it is a `BackendProtocol`
    subclass that only inherits the default `execute`.
    """
    execute = getattr(type(backend), "execute", None)
    if not callable(getattr(backend, "execute", None)):
        return False
    if execute is SandboxBackendProtocol.execute:
        return False
    return bool(getattr(backend, "can_execute", True))


def supports_delete(backend: object) -> bool:
    """Whether `backend` implements `delete` (a `BackendProtocol` subclass must override
    the default; a duck-typed backend must have the method)."""
    if isinstance(backend, BackendProtocol) and type(backend).delete is BackendProtocol.delete:
        return False
    return callable(getattr(backend, "delete", None))


BackendFactory = Callable[[Any], BackendProtocol]
"""A callable `(runtime) -> BackendProtocol`, called for each tool call with its `ToolRuntime`
(which factories written for the reference API take positionally)."""

BackendOrFactory = BackendProtocol | BackendFactory
"""What middleware and `create_deep_agent` accept as `backend`: a backend, or a factory
called once per tool call (`resolve_backend`). What the call's backend can do (run commands,
delete) is decided per call, on the resolved backend."""


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


def resolve_backend(backend: BackendOrFactory, runtime: Any) -> BackendProtocol:
    """The backend serving one tool call: call a factory, then `bind` it to the runtime.

    A callable that is not itself a backend is a factory.
    """
    if callable(backend) and not isinstance(backend, BackendProtocol):
        backend = backend(runtime)
    bind = getattr(backend, "bind", None)
    return bind(runtime) if bind is not None else backend
