"""The backend contract: where the agent's files live, and how every backend keeps it.

Every filesystem tool talks to a `BackendProtocol`. Backends never raise for a bad request
from the model (missing file, non-unique edit, path outside the root): they return a result
whose `error` is a `BackendError` (a kind and the facts of the failure), and the tool layer
(`fathom.middleware.filesystem.answers.describe_error`) writes the words the model reads.

`BackendProtocol` is a base class, not a structural `typing.Protocol`: a subclass that
leaves a sync method out fails loudly with `NotImplementedError` naming the class and the
method (instead of silently returning `None`), and every async method runs its sync twin
in a worker thread unless the subclass overrides it. An object that has the methods without
subclassing still counts as a backend (`isinstance` checks the method names).

One contract inside, adapters at the edge. Inside fathom every backend takes the whole
contract (the async twins, `grep(max_count=, context_lines=)`, `execute(timeout=,
on_output=)`, `bind`), so no caller probes a backend for a keyword or falls back between
sync and async. It holds by construction for subclasses of `BackendProtocol`: the class is
conformed when it is made (`conform`). Any other object (written for the Deep Agents API,
duck-typed, sync-only) is wrapped once, where it is handed in, in a `ForeignBackend`
(`as_backend`, which `resolve_backend` applies to what a factory returns).

Operations that reach other backends, a store or a sandbox are written once, as plans run
by a sync and an async driver (`PlannedBackend`).

This module deliberately does not use `from __future__ import annotations`: the TypedDicts
below must report their `NotRequired` keys as optional at runtime (`__required_keys__`),
which schema tools such as pydantic and LangGraph read.
"""

import abc
import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal, NotRequired, Self, TypeVar, cast

from typing_extensions import TypedDict

from fathom.backends.errors import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    BackendError,
    ErrorKind,
    FileOperationError,
    error_kind,
)
from fathom.errors import FathomError
from fathom.state import FileData, FilesUpdate

__all__ = [
    "ASYNC_GLOB_TIMEOUT",
    "ASYNC_GREP_TIMEOUT",
    "DEFAULT_GREP_TIMEOUT",
    "FILE_NOT_FOUND",
    "INVALID_PATH",
    "IS_DIRECTORY",
    "PERMISSION_DENIED",
    "BackendFactory",
    "BackendOrFactory",
    "BackendProtocol",
    "Call",
    "ContextLine",
    "DeleteResult",
    "EditResult",
    "ExecuteResponse",
    "FileDownloadResponse",
    "FileInfo",
    "FileOperationError",
    "FileUploadResponse",
    "ForeignBackend",
    "GlobResult",
    "GlobTruncationReason",
    "GrepMatch",
    "GrepResult",
    "HookRuntime",
    "LsResult",
    "OperationFailed",
    "PlannedBackend",
    "ReadResult",
    "ResultError",
    "SandboxBackendProtocol",
    "UploadResults",
    "WriteResult",
    "adopt",
    "adrive",
    "arun_call",
    "as_backend",
    "call",
    "cap_grep",
    "conform",
    "drive",
    "error_result",
    "execute_accepts_timeout",
    "is_factory",
    "resolve_backend",
    "run_call",
    "supports_delete",
    "supports_execute",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

DEFAULT_GREP_TIMEOUT = 15
"""The reference's bound, in seconds, on one sync grep phase, for backends that want one;
fathom's own backends bound a search by its work (`GlobBudget`, sizes), not by time."""

ASYNC_GREP_TIMEOUT = 2 * DEFAULT_GREP_TIMEOUT + 5
"""The reference's bound, in seconds, on an async grep (see `DEFAULT_GREP_TIMEOUT`)."""

ASYNC_GLOB_TIMEOUT = 30
"""The reference's bound, in seconds, on a sandbox glob round trip (see
`DEFAULT_GREP_TIMEOUT`)."""

ResultError = BackendError | str | None
"""A result's `error`: a `BackendError` from fathom's backends, free text from a backend
written for the Deep Agents API, or `None` on success."""


def _word(result: Any, operation: str) -> None:
    """Word a result's `BackendError` for `operation` (the reference's text for it)."""
    error = result.error
    if isinstance(error, BackendError) and error.operation is None:
        object.__setattr__(result, "error", error.for_operation(operation))


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

    def __post_init__(self) -> None:
        _word(self, "ls")


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

    `version` is the whole file's version (`fathom.backends.versions.file_version`) from a
    backend that keeps versions, `None` from one that does not: a later change conditioned
    on it applies only if nobody changed the file in between.
    """

    error: ResultError = None
    file_data: FileData | None = None
    total_lines: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    next_offset: int | None = None
    no_lines_requested: bool = False
    version: str | None = None

    def __post_init__(self) -> None:
        """Word the error for `read`, and reject window fields that contradict each other
        (they would mislead paging)."""
        _word(self, "read")
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

    def __post_init__(self) -> None:
        _word(self, "grep")


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

    def __post_init__(self) -> None:
        _word(self, "glob")


@dataclass(frozen=True)
class WriteResult:
    """Result of `write` (creates the file, or replaces it when it exists).

    In-state backends return the change as `files_update` for the `files` channel;
    backends with their own storage return `files_update=None`. `version` is the file's
    version after the write, from a backend that keeps versions (see `ReadResult`); a write
    conditioned on a version the file is no longer at fails with `ErrorKind.CHANGED`.
    """

    error: ResultError = None
    path: str | None = None
    files_update: FilesUpdate | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        _word(self, "write")


@dataclass(frozen=True)
class EditResult:
    """Result of `edit`, with the number of replacements made (and `files_update` as for
    `WriteResult`; `version` as for `WriteResult`)."""

    error: ResultError = None
    path: str | None = None
    occurrences: int | None = None
    files_update: FilesUpdate | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        _word(self, "edit")


@dataclass(frozen=True)
class DeleteResult:
    """Result of `delete`: the removed path, or an error (and `files_update` as for
    `WriteResult`)."""

    error: ResultError = None
    path: str | None = None
    files_update: FilesUpdate | None = None

    def __post_init__(self) -> None:
        _word(self, "delete")


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


class UploadResults(list[FileUploadResponse]):
    """The responses of `upload_files`, one per file in input order, plus the state change.

    A plain list for every caller written for the reference API. In-state backends also
    set `files_update` (path -> `FileData`) for the `files` channel, as `write` does;
    backends with their own storage leave it `None`.
    """

    def __init__(
        self, responses: Iterable[FileUploadResponse] = (), files_update: FilesUpdate | None = None
    ) -> None:
        super().__init__(responses)
        self.files_update = files_update


# --------------------------------------------------------------------------- conforming

_OPTIONAL: dict[str, tuple[str, ...]] = {
    "grep": ("max_count", "context_lines"),
    "agrep": ("max_count", "context_lines"),
    "execute": ("timeout", "on_output"),
    "aexecute": ("timeout", "on_output"),
}
"""The contract's optional keywords, by method: older backends may take none of them."""


@functools.lru_cache(maxsize=512)
def _dropped(function: Callable[..., Any], name: str) -> tuple[str, ...]:
    """The optional keywords of `name` that `function` does not take (by name or `**`)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        logger.warning("cannot inspect %r; not passing it %s", function, _OPTIONAL[name])
        return _OPTIONAL[name]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return ()
    return tuple(keyword for keyword in _OPTIONAL[name] if keyword not in parameters)


def conform(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`method` (a backend's `name`) taking every optional keyword of the contract.

    The keywords it does not take are dropped, and a `grep` that cannot stop at `max_count`
    has its result cut there (`cap_grep`), so callers get the cap either way. Applied once:
    to a `BackendProtocol` subclass's methods when the class is made, and to a foreign
    backend's methods by its `ForeignBackend`.
    """
    if name not in _OPTIONAL:
        return method
    function = getattr(method, "__func__", method)
    try:
        dropped = _dropped(function, name)
    except TypeError:  # an unhashable callable: not cached
        dropped = _dropped.__wrapped__(function, name)
    if not dropped:
        return method
    cap = "max_count" in dropped

    def call(kwargs: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        limit = kwargs.get("max_count") if cap else None
        return {k: v for k, v in kwargs.items() if k not in dropped}, limit

    if inspect.iscoroutinefunction(method):

        async def conformed_async(*args: Any, **kwargs: Any) -> Any:
            passed, limit = call(kwargs)
            return cap_grep(await method(*args, **passed), limit)

        return functools.wraps(method)(conformed_async)

    def conformed(*args: Any, **kwargs: Any) -> Any:
        passed, limit = call(kwargs)
        return cap_grep(method(*args, **passed), limit)

    return functools.wraps(method)(conformed)


def _conform_class(cls: type) -> None:
    """Conform the methods `cls` defines, and give a class with `execute` an `aexecute`."""
    for name in _OPTIONAL:
        method = cls.__dict__.get(name)
        if inspect.isfunction(method) and not getattr(method, "__isabstractmethod__", False):
            conformed = conform(method, name)
            if conformed is not method:
                setattr(cls, name, conformed)
    if callable(getattr(cls, "execute", None)) and getattr(cls, "aexecute", None) is None:
        cls.aexecute = SandboxBackendProtocol.aexecute  # type: ignore[attr-defined]


def cap_grep(result: Any, max_count: int | None) -> Any:
    """`result` with at most `max_count` matches, `truncated` when some were dropped."""
    matches = getattr(result, "matches", None)
    if max_count is None or matches is None or len(matches) <= max_count:
        return result
    kept = matches[: max(max_count, 0)]
    if is_dataclass(result) and not isinstance(result, type):
        return replace(result, matches=kept, truncated=True)
    return GrepResult(error=getattr(result, "error", None), matches=kept, truncated=True)


def _missing(backend: object, method: str) -> NotImplementedError:
    return NotImplementedError(
        f"{type(backend).__name__} does not implement {method}(); "
        f"define {method} on the backend class"
    )


_SYNC_METHODS = ("ls", "read", "grep", "glob", "write", "edit")
_ASYNC_METHODS = ("als", "aread", "agrep", "aglob", "awrite", "aedit")


def _has_methods(cls: type, names: tuple[str, ...]) -> bool:
    return all(callable(getattr(cls, name, None)) for name in names)


# --------------------------------------------------------------------------- the protocol


class BackendProtocol(abc.ABC):  # noqa: B024 - every method has a default on purpose
    """Storage for the virtual filesystem.

    Paths are absolute virtual paths (`/notes/a.md`). Implementations return results with
    `error` set (a `BackendError`) instead of raising for anything the model could have
    caused.

    Subclass it and write the sync methods you support: each one you leave out raises
    `NotImplementedError` naming the class and method, and each async method (`als`,
    `aread`, ...) runs its sync twin with `asyncio.to_thread` unless overridden (`_async`).
    `delete`, `upload_files` and `download_files` are optional (`supports_delete`).
    A `grep` (or `execute`) written without the newer keywords (`max_count`,
    `context_lines`; `timeout`, `on_output`) is conformed when the class is made, so
    fathom may pass them to any subclass (see `conform`).

    `isinstance(obj, BackendProtocol)` is also true for an object that does not subclass it
    but has the six file methods and their async twins (a duck-typed backend).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _conform_class(cls)

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        """Count classes with the file methods (sync and async) as backends."""
        if cls is BackendProtocol:
            return True if _has_methods(other, _SYNC_METHODS + _ASYNC_METHODS) else NotImplemented
        return NotImplemented

    def bind(self, runtime: Any) -> Self:
        """The backend serving one tool call of one run (default: this backend itself)."""
        return self

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
        self, pattern: str, path: str | None = None, glob: str | None = None, *,
        max_count: int | None = None, context_lines: int = 0,
    ) -> GrepResult:
        """Find lines containing the literal `pattern` under `path` (`None`: `/`), in files
        matching `glob`.

        `max_count` caps the total number of matches: the search stops there and sets
        `truncated` when more exist. `context_lines=N` gives each match up to N lines of
        context on each side (a backend that cannot leaves them out).
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
        return await self._async("ls", path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async `read`."""
        return await self._async("read", file_path, offset, limit)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *,
        max_count: int | None = None, context_lines: int = 0,
    ) -> GrepResult:
        """Async `grep`."""
        kwargs = {"max_count": max_count, "context_lines": context_lines}
        return await self._async("grep", pattern, path, glob, **kwargs)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Async `glob`."""
        return await self._async("glob", pattern, path)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Async `write`."""
        return await self._async("write", file_path, content)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Async `edit`."""
        return await self._async("edit", file_path, old_string, new_string, replace_all)

    async def adelete(self, file_path: str) -> DeleteResult:
        """Async `delete`."""
        return await self._async("delete", file_path)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async `upload_files`."""
        return await self._async("upload_files", files)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async `download_files`."""
        return await self._async("download_files", paths)

    async def _async(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the file operation `name` for an async caller: by default its sync method in
        a worker thread, as LangGraph and LangChain run sync code (so a subclass that
        overrides a sync method is honoured by its async twin). `BackendBase` runs it
        inline, `PlannedBackend` drives its plan with async steps."""
        return await asyncio.to_thread(getattr(self, name), *args, **kwargs)


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

        `timeout` is in seconds; `None` means the backend's default. A backend may also take
        `on_output` (a callback for each piece of output as it arrives).
        """
        raise _missing(self, "execute")

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Async `execute`: `execute` in a worker thread."""
        return await asyncio.to_thread(self.execute, command, timeout=timeout)


@functools.lru_cache(maxsize=128)
def execute_accepts_timeout(cls: type) -> bool:
    """Whether `cls.execute`, as written, takes a `timeout` keyword (the reference's check,
    cached per class; fathom never needs it: every backend's `execute` is conformed). A
    signature that cannot be read logs a warning and counts as no."""
    try:
        return "timeout" in inspect.signature(cls.execute).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        logger.warning(
            "Could not inspect signature of %s.execute; assuming it takes no timeout",
            getattr(cls, "__qualname__", cls),
            exc_info=True,
        )
        return False


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
    the default; a duck-typed backend must have the method; a wrapper may say with a
    `can_delete` attribute)."""
    if isinstance(backend, BackendProtocol) and type(backend).delete is BackendProtocol.delete:
        return False
    return callable(getattr(backend, "delete", None)) and bool(getattr(backend, "can_delete", True))


# --------------------------------------------------------------------------- plans

Plan = Generator[Any, Any, R]
"""An operation written once: it yields the steps it needs, receives each answer, and
returns the result. A sync driver and an async driver run the same plan."""


@dataclass(frozen=True)
class Call:
    """A plan's step: `backend.method(*args, **kwargs)`, or its async twin (`a` + method)
    when the plan runs async."""

    backend: Any
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def call(backend: Any, method: str, *args: Any, **kwargs: Any) -> Call:
    """The step `Call(backend, method, args, kwargs)`."""
    return Call(backend, method, args, kwargs)


def run_call(step: Call) -> Any:
    """Answer a `Call` with the backend's sync method (`drive`'s step for calls)."""
    return getattr(step.backend, step.method)(*step.args, **step.kwargs)


async def arun_call(step: Call) -> Any:
    """Answer a `Call` with the backend's async twin (`adrive`'s step for calls)."""
    return await getattr(step.backend, "a" + step.method)(*step.args, **step.kwargs)


class OperationFailed(FathomError):
    """Raised by a step when the whole operation fails (no store, no answer from the
    sandbox, an operation the backend lacks); the operation answers `error_result`."""

    def __init__(self, error: BackendError) -> None:
        super().__init__(str(error))
        self.error = error


_Thrown = type[BaseException] | tuple[type[BaseException], ...]


def drive(plan: Plan[R], step: Callable[[Any], Any], throw: _Thrown = NotImplementedError) -> R:
    """Run `plan` with sync steps: each step it yields is answered with `step(op)`. A step's
    failure of a `throw` type (a missing operation, `NotImplementedError`, by default) is
    raised in the plan, where it yielded; any other ends the run. The loop is `adrive`'s,
    run to its end in one `send`: a sync step never suspends it."""

    async def now(op: Any) -> Any:
        return step(op)

    loop = adrive(plan, now, throw)
    try:
        loop.send(None)
    except StopIteration as done:
        return done.value
    finally:
        loop.close()
    raise AssertionError("drive: a sync step suspended the plan")  # pragma: no cover


async def adrive(
    plan: Plan[R], step: Callable[[Any], Any], throw: _Thrown = NotImplementedError
) -> R:
    """Run `plan` with async steps: each answer is `await step(op)` (see `drive`)."""
    value: Any = None
    resume: Callable[[Any], Any] = plan.send
    try:
        while True:
            try:
                op = resume(value)
            except StopIteration as done:
                return done.value
            try:
                value, resume = await step(op), plan.send
            except throw as failure:
                value, resume = failure, plan.throw
    finally:
        plan.close()


_RESULTS: dict[str, Callable[..., Any]] = {
    "ls": LsResult,
    "read": ReadResult,
    "grep": GrepResult,
    "glob": GlobResult,
    "write": WriteResult,
    "edit": EditResult,
    "delete": DeleteResult,
}
_RESPONSES = {"upload_files": FileUploadResponse, "download_files": FileDownloadResponse}


def error_result(name: str, args: tuple[Any, ...], error: BackendError) -> Any:
    """What the operation `name` (called with `args`) answers when it fails as a whole.

    A file operation's result carries `error`; a transfer answers each file with the
    error's kind (a response has no room for the detail, so a failure is logged);
    `execute` answers with an error output.
    """
    if name == "execute":
        return ExecuteResponse(output="Error: this filesystem cannot run commands.")
    if name not in _RESPONSES:
        return _RESULTS[name](error=error)
    if error.kind is not ErrorKind.UNSUPPORTED:
        logger.warning("%s failed: %s", name, error)
    paths = [item[0] if name == "upload_files" else item for item in args[0]]
    return [_RESPONSES[name](path, error=error.kind) for path in paths]


class PlannedBackend(BackendProtocol):
    """A backend whose operations are each written once, as a plan.

    A plan is a generator method named after its operation (`_ls`, `_read`, `_grep`, ...,
    `_upload_files`, `_download_files`) taking the operation's arguments: it yields the
    steps it needs, receives their answers and returns the result. The sync methods run it
    with `_run`, the async ones with `_arun`; by default a step is a `Call` on another
    backend (its async twin when async), and a subclass with other steps (a store's reads
    and writes, a sandbox's requests) overrides the two drivers. A step that raises
    `OperationFailed` ends the operation with `error_result`.
    """

    def ls(self, path: str) -> LsResult:
        return self._perform("ls", path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self._perform("read", file_path, offset, limit)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *,
        max_count: int | None = None, context_lines: int = 0,
    ) -> GrepResult:
        kwargs = {"max_count": max_count, "context_lines": context_lines}
        return self._perform("grep", pattern, path, glob, **kwargs)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self._perform("glob", pattern, path)

    def write(self, file_path: str, content: str) -> WriteResult:
        return self._perform("write", file_path, content)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        return self._perform("edit", file_path, old_string, new_string, replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        return self._perform("delete", file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self._perform("upload_files", files)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self._perform("download_files", paths)

    def _plan(self, name: str, *args: Any, **kwargs: Any) -> Plan[Any]:
        """The plan of the operation `name` for these arguments."""
        return getattr(self, "_" + name)(*args, **kwargs)

    def _perform(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the plan of `name` with sync steps."""
        try:
            return self._run(self._plan(name, *args, **kwargs))
        except OperationFailed as failed:
            return error_result(name, args, failed.error)

    async def _async(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the plan of `name` with async steps."""
        try:
            return await self._arun(self._plan(name, *args, **kwargs))
        except OperationFailed as failed:
            return error_result(name, args, failed.error)

    def _run(self, plan: Plan[R]) -> R:
        """Run `plan` with sync steps (default: `Call`s, `run_call`)."""
        return drive(plan, run_call)

    async def _arun(self, plan: Plan[R]) -> R:
        """Run `plan` with async steps (default: `Call`s, `arun_call`)."""
        return await adrive(plan, arun_call)


# --------------------------------------------------------------------------- the edge


class ForeignBackend(PlannedBackend):
    """A backend fathom did not make, under fathom's contract (see `as_backend`).

    It wraps an object written for the Deep Agents API (a subclass of its
    `BackendProtocol`), a duck-typed one, or one with only sync methods. Each operation
    calls the object's method of the same name: its async twin for an async caller when
    the object has one (else the sync method in a worker thread), with only the optional
    keywords it takes (`conform`); an operation the object lacks answers `UNSUPPORTED`.
    Answers come back as fathom's result types, and a text error as a `BackendError` whose
    `message` is the text. Every other attribute (`max_timeout`, `artifacts_root`,
    `resolved_path`, `id`, ...) is the object's.
    """

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"ForeignBackend({self.inner!r})"

    def bind(self, runtime: Any) -> Self:
        bind = getattr(self.inner, "bind", None)
        return self if bind is None else cast("Self", as_backend(bind(runtime)))

    @property
    def can_execute(self) -> bool:
        """Whether the object runs shell commands (`supports_execute`)."""
        return supports_execute(self.inner)

    @property
    def can_delete(self) -> bool:
        """Whether the object deletes (`supports_delete`)."""
        return supports_delete(self.inner)

    def execute(
        self, command: str, *, timeout: int | None = None, on_output: Any = None
    ) -> ExecuteResponse:
        """The object's `execute` (an error output when it has none)."""
        return self._perform("execute", command, timeout=timeout, on_output=on_output)

    async def aexecute(
        self, command: str, *, timeout: int | None = None, on_output: Any = None
    ) -> ExecuteResponse:
        """Async `execute`."""
        return await self._async("execute", command, timeout=timeout, on_output=on_output)

    def _plan(self, name: str, *args: Any, **kwargs: Any) -> Plan[Any]:
        answer = yield Call(self.inner, name, args, kwargs)
        return _typed(name, answer)

    def _run(self, plan: Plan[R]) -> R:
        return drive(plan, self._call)

    async def _arun(self, plan: Plan[R]) -> R:
        return await adrive(plan, self._acall)

    def _method(self, name: str) -> Callable[..., Any] | None:
        method = getattr(self.inner, name, None)
        return conform(method, name) if callable(method) else None

    def _call(self, step: Call) -> Any:
        method = self._method(step.method)
        if method is None:
            raise OperationFailed(BackendError(ErrorKind.UNSUPPORTED, detail=step.method))
        return method(*step.args, **step.kwargs)

    async def _acall(self, step: Call) -> Any:
        method = self._method("a" + step.method)
        if method is None:
            return await asyncio.to_thread(self._call, step)
        return await method(*step.args, **step.kwargs)


def _typed(name: str, answer: Any) -> Any:
    """A foreign backend's answer to `name` as fathom's result type (so every field fathom
    reads is there), with a text error made a `BackendError`."""
    if name not in _RESPONSES:
        return _as(ExecuteResponse if name == "execute" else _RESULTS[name], answer)
    responses = [_as(_RESPONSES[name], item) for item in answer]
    if name == "download_files":
        return responses
    return UploadResults(responses, files_update=getattr(answer, "files_update", None))


def _as(kind: Callable[..., Any], answer: Any) -> Any:
    if not is_dataclass(answer) or isinstance(answer, type):
        return answer  # not a result at all: left for the caller to report
    values = {f.name: getattr(answer, f.name) for f in fields(cast("Any", kind))
              if hasattr(answer, f.name)}
    error = values.get("error")
    if isinstance(error, str) and not isinstance(error, ErrorKind | BackendError):
        known = error_kind(error)
        if kind in _RESPONSES.values():
            values["error"] = known or error  # a transfer's error is a kind, or text
        else:
            values["error"] = BackendError(known or ErrorKind.FAILED, message=error)
    elif type(answer) is kind:
        return answer
    return kind(**values)


def is_factory(backend: object) -> bool:
    """Whether `backend` is a factory `(runtime) -> backend`: a callable that is not itself
    a backend."""
    return callable(backend) and not isinstance(backend, BackendProtocol)


def as_backend(backend: object) -> BackendProtocol:
    """`backend` under fathom's contract: itself when it is one of fathom's (an instance of
    a `BackendProtocol` subclass, conformed when its class was made), else wrapped once in
    a `ForeignBackend`."""
    if BackendProtocol in type(backend).__mro__:
        return cast("BackendProtocol", backend)
    return ForeignBackend(backend)


def adopt(backend: "BackendOrFactory") -> "BackendOrFactory":
    """What a constructor keeps of its `backend=` argument: a factory as it is (what it
    returns is adapted call by call, by `resolve_backend`), a backend `as_backend`."""
    return backend if is_factory(backend) else as_backend(backend)


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
    """The backend serving one tool call: call a factory (once), adapt what it gives
    (`as_backend`), and `bind` it to the runtime."""
    if is_factory(backend):
        backend = cast("BackendFactory", backend)(runtime)
    return as_backend(backend).bind(runtime)
