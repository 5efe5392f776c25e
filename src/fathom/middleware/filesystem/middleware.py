"""Filesystem tools (`ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`, `grep`).

Every problem the model can cause (a missing file, a path outside the root, a binary or
oversized file, a non-unique edit) comes back as an error `ToolMessage` that says what to do
next; nothing raises into the agent loop and nothing is half-written.

Each tool answers as the reference's do, also when invoked directly
(`tool.invoke({"runtime": runtime, **args})` or with a `ToolCall` whose arguments carry the
runtime): a `ToolMessage` with a `status` of `"success"` or `"error"`, or, when the backend
keeps files in the thread's state, a `Command` updating `files` that carries it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import re
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain.tools import ToolRuntime
from langchain_core._api.deprecation import LangChainDeprecationWarning
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.composite import CompositeBackend
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.policy import PolicyBackend
from fathom.backends.protocol import (
    BackendOrFactory,
    BackendProtocol,
    Call,
    HookRuntime,
    Plan,
    adopt,
    adrive,
    arun_call,
    call,
    cap_grep,
    drive,
    is_factory,
    resolve_backend,
    run_call,
    supports_execute,
)
from fathom.backends.state import StateBackend
from fathom.backends.utils import positive_seconds
from fathom.backends.versions import ABSENT, expecting
from fathom.middleware.context.blob_offload import BlobOffload, blobs_in_state
from fathom.middleware.context.budget import CHARS_PER_TOKEN, OFFLOAD_TOKENS
from fathom.middleware.context.eviction import HumanMessageEviction, with_command
from fathom.middleware.context.offload import ToolResultOffload
from fathom.middleware.filesystem import media
from fathom.middleware.filesystem.answers import (
    EMPTY_CONTENT_WARNING,
    GLOB_PATHLESS_DENIED_HINT,
    GLOB_TRUNCATION_NOTE,
    GLOB_UNREADABLE_NOTE,
    GREP_TRUNCATION_NOTE,
    NO_LINES_REQUESTED_WARNING,
    READ_FILE_TRUNCATION_MSG,
    READ_OUTPUT_CHARS,
    change_answer,
    delete_message,
    edit_message,
    error_message,
    glob_answer,
    grep_answer,
    ls_answer,
    read_answer,
    write_message,
)
from fathom.middleware.filesystem.versions import changed_answer, seen_version, with_version
from fathom.middleware.permissions import (
    FilesystemPermission,
    PermissionPolicy,
    check_permissions_apply,
)
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.state import FileData, FilesState, FilesystemState
from fathom.tool_answers import Failure, attempt, tool_answer, tool_error

__all__ = [
    "DEFAULT_READ_LIMIT",
    "DEFAULT_READ_OFFSET",
    "DELETE_TOOL_DESCRIPTION",
    "EDIT_FILE_TOOL_DESCRIPTION",
    "EMPTY_CONTENT_WARNING",
    "FILESYSTEM_PROMPT",
    "FILESYSTEM_TOOL_NAMES",
    "GLOB_PATHLESS_DENIED_HINT",
    "GLOB_TIMEOUT",
    "GLOB_TOOL_DESCRIPTION",
    "GLOB_TRUNCATION_NOTE",
    "GLOB_UNREADABLE_NOTE",
    "GREP_GLOB_DESCRIPTION",
    "GREP_MAX_COUNT",
    "GREP_OUTPUT_MODE_DESCRIPTION",
    "GREP_TOOL_DESCRIPTION",
    "GREP_TRUNCATION_NOTE",
    "LIST_FILES_TOOL_DESCRIPTION",
    "NO_LINES_REQUESTED_WARNING",
    "NUM_CHARS_PER_TOKEN",
    "READ_FILE_TOOL_DESCRIPTION",
    "READ_FILE_TRUNCATION_MSG",
    "TOOLS_EXCLUDED_FROM_EVICTION",
    "WRITE_FILE_TOOL_DESCRIPTION",
    "DeleteSchema",
    "EditFileSchema",
    "FileData",
    "FilesystemMiddleware",
    "FilesystemOperation",
    "FilesystemPermission",
    "FilesystemState",
    "FsToolName",
    "GlobSchema",
    "GrepSchema",
    "LsSchema",
    "ReadFileSchema",
    "WriteFileSchema",
    "supports_execution",
]

FILESYSTEM_TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep")

FsToolName = Literal[
    "ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "execute"
]
"""A name `FilesystemMiddleware(tools=[...])` accepts (the reference's `FsToolName`)."""

FilesystemOperation = Literal["read", "write"]
"""Whether a file tool reads or changes files (the reference's name; permission rules name
these operations)."""

FILESYSTEM_PROMPT = """## Files

You have a filesystem rooted at `/`: `ls` lists a directory, `read_file` reads a file with line numbers (page with `offset`/`limit`), `write_file` writes a whole file (creating it, or replacing an existing one), `edit_file` replaces exact text in an existing one, `delete` removes a file or a directory with everything in it, `glob` finds files by name pattern and `grep` finds text in files. Use absolute paths such as `/notes/plan.md`. Read a file before you edit it. Save long material you will need later to a file instead of repeating it in messages."""  # noqa: E501

DEFAULT_READ_OFFSET = 0
"""The line `read_file` starts at when the model gives no `offset` (0-based)."""

DEFAULT_READ_LIMIT = 2000
"""Lines `read_file` returns when the model gives no `limit` (the reference's tool: 100; its
backends: 2,000). Every answer also stops before `READ_OUTPUT_CHARS` characters."""

READ_DEFAULT_LIMIT = DEFAULT_READ_LIMIT
"""fathom's earlier name of `DEFAULT_READ_LIMIT`."""

NUM_CHARS_PER_TOKEN = CHARS_PER_TOKEN
"""Characters counted as one token where sizes are estimated (the reference's 4)."""

GLOB_TIMEOUT = 10.0
"""Seconds a `glob` may run; a longer one answers with an error naming this limit. Read at
call time from `fathom.middleware.filesystem.GLOB_TIMEOUT`, so patching it there (as the
reference's tests do with theirs) changes the limit."""

_GLOB_WORKERS = 4
"""Sync `glob` calls run on a shared pool of this many threads, so a stuck backend can be
given up on; when all are busy a call is refused rather than queued."""

TOOLS_EXCLUDED_FROM_EVICTION = (
    "ls", "glob", "grep", "read_file", "edit_file", "write_file", "delete"
)
"""The file tools whose results are never saved to a file when they are large: they bound
their own answers (the reference's tuple)."""

LIST_FILES_TOOL_DESCRIPTION = (
    "List the files and directories directly under a directory, with size and time."
)

READ_FILE_TOOL_DESCRIPTION = (
    "Read a file. Text comes back with 1-based line numbers; use offset (0-based line) and "
    "limit to page through long files, and to read a large tool result offloaded to a file. "
    "Images come back as images."
)

WRITE_FILE_TOOL_DESCRIPTION = (
    "Write a file with the given content: creates it, or replaces the whole content of an "
    "existing file. To change part of a file, use edit_file."
)

EDIT_FILE_TOOL_DESCRIPTION = (
    "Replace exact text in an existing file. old_string must occur exactly once unless "
    "replace_all is true."
)

DELETE_TOOL_DESCRIPTION = (
    "Delete a file, or a directory and everything in it. This cannot be undone: delete only "
    "what is no longer needed, and a directory in one call rather than file by file."
)

GLOB_TOOL_DESCRIPTION = (
    "Find files by glob pattern, e.g. '*.py' (any depth), 'src/**/*.md', '/*.txt' "
    "(top level only)."
)

GREP_TOOL_DESCRIPTION = (
    "Search file contents for a literal string (not a regex). At most max_count matches "
    "come back (a default cap applies); a note says when more exist. Offloaded large tool "
    "results are under large_tool_results/ in the artifacts root."
)

GREP_GLOB_DESCRIPTION = "Only search files matching this glob (not a regex), e.g. '*.py'."

GREP_OUTPUT_MODE_DESCRIPTION = (
    "'files_with_matches' (paths), 'content' (matching lines with numbers) or 'count'."
)

DESCRIPTIONS = {
    "ls": LIST_FILES_TOOL_DESCRIPTION,
    "read_file": READ_FILE_TOOL_DESCRIPTION,
    "write_file": WRITE_FILE_TOOL_DESCRIPTION,
    "edit_file": EDIT_FILE_TOOL_DESCRIPTION,
    "delete": DELETE_TOOL_DESCRIPTION,
    "glob": GLOB_TOOL_DESCRIPTION,
    "grep": GREP_TOOL_DESCRIPTION,
}
"""Each file tool's default description (`custom_tool_descriptions=` replaces them)."""


class LsSchema(BaseModel):
    """The arguments of `ls`."""

    path: str = Field(default="/", description="Absolute directory path.")


class ReadFileSchema(BaseModel):
    """The arguments of `read_file`."""

    file_path: str = Field(description="Absolute path of the file.")
    offset: int = Field(default=DEFAULT_READ_OFFSET, description="0-based line to start from.")
    limit: int = Field(default=DEFAULT_READ_LIMIT, description="Maximum lines to return.")


class WriteFileSchema(BaseModel):
    """The arguments of `write_file`."""

    file_path: str = Field(description="Absolute path of the file to write.")
    content: str = Field(description="The full text of the file.")


class EditFileSchema(BaseModel):
    """The arguments of `edit_file`."""

    file_path: str = Field(description="Absolute path of the file.")
    old_string: str = Field(description="Exact text to replace.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class DeleteSchema(BaseModel):
    """The arguments of `delete`."""

    file_path: str = Field(description="Absolute path of the file or directory to delete.")


class GlobSchema(BaseModel):
    """The arguments of `glob`."""

    pattern: str = Field(description="Glob pattern; supports *, ?, ** and {a,b}.")
    path: str | None = Field(
        default=None, description="Directory to search under (default: the backend's default root)."
    )


class GrepSchema(BaseModel):
    """The arguments of `grep`."""

    pattern: str = Field(description="Literal text to search for (not a regex).")
    path: str | None = Field(default=None, description="Directory or file to search.")
    glob: str | None = Field(default=None, description=GREP_GLOB_DESCRIPTION)
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        default="files_with_matches", description=GREP_OUTPUT_MODE_DESCRIPTION
    )
    max_count: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Most matches to return across all files; leave unset for the default cap. "
            "When the cap is hit a note says so: narrow the search or raise max_count."
        ),
    )


Backend = BackendOrFactory
"""What `backend=` accepts: a backend, or a factory called once per tool call."""


def supports_execution(backend: BackendProtocol) -> bool:
    """Whether `backend` runs shell commands (a `CompositeBackend`: its default backend)."""
    return supports_execute(backend)


_CHANGING_TOOLS = ("write_file", "edit_file", "delete")

PARALLEL_MUTATION_ERROR = "Error: parallel file mutations to the same path are not allowed."
"""How a second change of one file in one model turn is refused (the reference's words)."""

_WINDOWS_DRIVE = re.compile(r"^[a-zA-Z]:")


def checked_path(path: str) -> str:
    """`path` as the file tools pass it on: backslashes turned into `/`.

    Raises:
        ValueError: a `..` part or a leading `~` ("Path traversal not allowed: ..."), or a
            Windows drive (`C:`), each with the reference's words. The backend normalises
            what passes (relative paths start at `/`) and refuses what it cannot serve.
    """
    posix = path.replace("\\", "/")
    if ".." in posix.split("/") or path.startswith("~"):
        raise ValueError(f"Path traversal not allowed: {path}")
    if _WINDOWS_DRIVE.match(path):
        raise ValueError(
            f"Windows absolute paths are not supported: {path}. Please use virtual paths "
            "starting with / (e.g., /workspace/file.txt)"
        )
    return posix


def _refused_path(path: Any, runtime: ToolRuntime, tool: str) -> tuple[Any, ToolMessage | None]:
    """`(checked path, None)`, or `(None, the error answer)` for a path `checked_path`
    refuses. A path that is not text is left to the backend."""
    if not isinstance(path, str):
        return path, None
    try:
        return checked_path(path), None
    except ValueError as refused:
        return None, error_message(f"Error: {refused}", runtime, tool)


def _same_path(a: Any, b: str) -> bool:
    try:
        return normalize_path(a) == normalize_path(b)
    except (PathError, TypeError):
        return False


def earlier_change_in_turn(runtime: ToolRuntime, file_path: str) -> str | None:
    """The name of an earlier write/edit call of the same model turn on the same file.

    All tool calls of one turn run against the state from before the turn, so a second
    change to one file would silently replace the first (or two creations would both
    succeed). The later call is refused instead, and the model redoes it next turn.
    """
    state = runtime.state if isinstance(runtime.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if not isinstance(message, AIMessage):
            continue
        for tool_call in message.tool_calls:
            if tool_call.get("id") == runtime.tool_call_id:
                return None
            if tool_call["name"] in _CHANGING_TOOLS and _same_path(
                tool_call["args"].get("file_path"), file_path
            ):
                return tool_call["name"]
        return None
    return None


def _conflict_error(earlier: str, file_path: str, runtime: ToolRuntime, tool: str) -> ToolMessage:
    return error_message(
        f"{PARALLEL_MUTATION_ERROR} An earlier {earlier} call in this same turn already "
        f"changes `{file_path}`, and calls in one turn all see the file as it was before the "
        "turn. Read the file and make this change in your next turn, or combine both changes "
        "into one call.",
        runtime,
        tool,
    )


MAX_EXECUTE_TIMEOUT = 3600
"""The default `max_execute_timeout` in seconds (the reference's)."""

HUMAN_MESSAGE_TOKENS = 50_000
"""The default `human_message_token_limit_before_evict` (the reference's)."""

GREP_MAX_COUNT = 1000
"""The default cap on the matches of one `grep` call (`FilesystemMiddleware(grep_max_count=)`)."""


_CHANGE_MESSAGES = {
    "write_file": write_message, "edit_file": edit_message, "delete": delete_message
}
"""Each changing tool's answer on success."""


class _StepFailed:
    """What a guarded backend call gives its plan instead of a result: the error text
    (the call raised, or did not finish in time)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _glob_timeout() -> float:
    """`GLOB_TIMEOUT` as it is now in `fathom.middleware.filesystem` (where callers patch
    it), else this module's."""
    package = sys.modules.get(__package__ or "")
    value = getattr(package, "GLOB_TIMEOUT", GLOB_TIMEOUT)
    return value if isinstance(value, int | float) else GLOB_TIMEOUT


def _timed_out() -> _StepFailed:
    return _StepFailed(
        f"Error: glob timed out after {_glob_timeout()}s. Try a more specific pattern or a "
        "narrower path."
    )


_GLOB = "the backend's glob"


def _glob_failed(error: BaseException) -> _StepFailed:
    return _StepFailed(f"Error: glob failed: {error}")


_glob_pool: concurrent.futures.ThreadPoolExecutor | None = None
_glob_slots = threading.BoundedSemaphore(_GLOB_WORKERS)
_glob_pool_lock = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _glob_pool
    with _glob_pool_lock:
        if _glob_pool is None:
            _glob_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=_GLOB_WORKERS, thread_name_prefix="fathom-glob"
            )
        return _glob_pool


def _timed_step(step: Call) -> Any:
    """Run a `glob` call for `drive` with `GLOB_TIMEOUT` on a pool thread: a stuck
    backend is given up on (its thread finishes in the background), and an exception from
    the backend becomes an error answer rather than escaping the tool."""
    if not _glob_slots.acquire(blocking=False):
        return _StepFailed(
            "Error: too many glob calls are already running. Try again later with a more "
            "specific pattern or a narrower path."
        )
    context = contextvars.copy_context()

    def work() -> Any:
        try:
            return context.run(run_call, step)
        finally:
            _glob_slots.release()

    with contextlib.ExitStack() as undo:
        undo.callback(_glob_slots.release)  # a call that never starts frees its slot
        future = _pool().submit(work)
        undo.pop_all()  # submitted: `work` frees it when it ends
    done, _ = concurrent.futures.wait([future], timeout=_glob_timeout())
    if not done:
        if future.cancel():
            _glob_slots.release()
        return _timed_out()
    return _glob_answer(attempt(future.result, _GLOB))


def _discard(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()


async def _atimed_step(step: Call) -> Any:
    """`_timed_step` for `adrive`: the backend's async call, given up on at the timeout."""
    task = asyncio.ensure_future(arun_call(step))
    done, _ = await asyncio.wait({task}, timeout=_glob_timeout())
    if not done:
        task.add_done_callback(_discard)
        task.cancel()
        return _timed_out()
    return _glob_answer(attempt(task.result, _GLOB))


def _glob_answer(outcome: Any) -> Any:
    """The answer of a finished `glob` call: its result, or its failure as the glob's
    answer. The backend may be the caller's own and raise anything, so the call is a
    boundary (`attempt` catches and logs); a missing operation (`NotImplementedError`) is
    raised again for `drive`, which hands it to the plan."""
    if not isinstance(outcome, Failure):
        return outcome
    if isinstance(outcome.error, NotImplementedError):
        raise outcome.error
    return _glob_failed(outcome.error)


def _build_tools(middleware: FilesystemMiddleware) -> list[BaseTool]:
    """The file tools over `middleware`'s backend: each written once as a plan, which its
    sync tool `drive`s and its async tool `adrive`s."""

    def backend(runtime: ToolRuntime) -> BackendProtocol:
        resolved = resolve_backend(middleware.backend, runtime)
        if middleware.permissions:
            return PolicyBackend(resolved, [PermissionPolicy(middleware.permissions)])
        return resolved

    def ls(runtime: ToolRuntime, path: str = "/") -> Plan[Any]:
        """List the entries directly under a directory."""
        path, refused = _refused_path(path, runtime, "ls")
        if refused is not None:
            return refused
        result = yield call(backend(runtime), "ls", path)
        return ls_answer(result, path, runtime)

    video = media.video_enabled()  # videos are read as frames (the `video` extra)

    def read_file(
        runtime: ToolRuntime,
        file_path: str,
        offset: int = DEFAULT_READ_OFFSET,
        limit: int = DEFAULT_READ_LIMIT,
    ) -> Plan[Any]:
        """Read a file's lines, a window at a time."""
        file_path, refused = _refused_path(file_path, runtime, "read_file")
        if refused is not None:
            return refused
        result = yield call(
            backend(runtime), "read", file_path, offset=max(offset, 0), limit=max(limit, 0)
        )
        answer = media.media_answer(result, file_path, offset, limit, runtime, video=video)
        if answer is None:
            answer = read_answer(result, file_path, offset, limit, runtime, middleware.read_chars)
        return with_version(answer, runtime, "read_file", file_path, _read_version(result))

    def change(
        runtime: ToolRuntime,
        tool: str,
        method: str,
        *args: Any,
        expected: str | None = None,
        options: Mapping[str, Any] | None = None,
        old_string: str | None = None,
    ) -> Plan[Any]:
        """A change of `args[0]` by `tool` (the backend's `method`), refused when another
        call of this turn changes the same file, and applied only while the file is at the
        `expected` version (when given). Its answer records the file's new version."""
        file_path, refused = _refused_path(args[0], runtime, tool)
        if refused is not None:
            return refused
        args = (file_path, *args[1:])
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, tool)
        target = backend(runtime)
        with expecting(expected):
            result = yield call(target, method, *args, **(options or {}))
        if result.error and tool != "delete" and (seen := seen_version(runtime, file_path)):
            refused_change = error_kind(result.error) is ErrorKind.CHANGED and expected is not None
            if refused_change or error_kind(result.error) in _STALE_EDIT_ERRORS:
                current = yield call(target, "read", file_path, offset=0, limit=DEFAULT_READ_LIMIT)
                version = _read_version(current)
                if refused_change or version != seen:
                    shown = read_answer(
                        current, file_path, 0, DEFAULT_READ_LIMIT, runtime, middleware.read_chars
                    )
                    return changed_answer(runtime, tool, file_path, shown, version)
        message = _CHANGE_MESSAGES[tool](result)
        answer = change_answer(result, runtime, tool, message, file_path, old_string=old_string)
        if result.error:
            return answer
        version = ABSENT if tool == "delete" else getattr(result, "version", None)
        return with_version(answer, runtime, tool, file_path, version)

    def write_file(runtime: ToolRuntime, file_path: str, content: str) -> Plan[Any]:
        """Create a file, or replace the whole content of one."""
        expected = seen_version(runtime, file_path) if isinstance(file_path, str) else None
        return change(runtime, "write_file", "write", file_path, content, expected=expected)

    def edit_file(
        runtime: ToolRuntime,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> Plan[Any]:
        """Replace exact text in a file."""
        return change(
            runtime, "edit_file", "edit", file_path, old_string, new_string,
            options={"replace_all": replace_all}, old_string=old_string,
        )

    def delete(runtime: ToolRuntime, file_path: str) -> Plan[Any]:
        """Delete a file, or a directory with everything in it."""
        return change(runtime, "delete", "delete", file_path)

    def glob(runtime: ToolRuntime, pattern: str, path: str | None = None) -> Plan[Any]:
        """Find files whose path matches a glob pattern."""
        if path is not None:
            path, refused = _refused_path(path, runtime, "glob")
            if refused is not None:
                return refused
        result = yield call(backend(runtime), "glob", pattern, path=path)
        if isinstance(result, _StepFailed):
            return error_message(result.text, runtime, "glob")
        if path is None and result.error and error_kind(result.error) is ErrorKind.PERMISSION:
            text = error_message(result.error, runtime, "glob").text.rstrip(".")
            return error_message(text + GLOB_PATHLESS_DENIED_HINT, runtime, "glob")
        return glob_answer(result, pattern, path, runtime)

    def grep(
        runtime: ToolRuntime,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        output_mode: str = "files_with_matches",
        max_count: int | None = None,
    ) -> Plan[Any]:
        """Find the lines of files that contain a literal string."""
        if path is not None:
            path, refused = _refused_path(path, runtime, "grep")
            if refused is not None:
                return refused
        cap = max_count if max_count is not None else middleware.grep_max_count
        result = yield call(backend(runtime), "grep", pattern, path=path, glob=glob, max_count=cap)
        hint = not middleware.permissions  # rules may have hidden the matches: no regex hint
        return grep_answer(cap_grep(result, cap), pattern, output_mode, runtime, path, hint=hint)

    descriptions = {
        name: middleware.tool_descriptions.get(name) or default
        for name, default in DESCRIPTIONS.items()
    }
    read_schema: type[BaseModel] = ReadFileSchema
    if video:
        read_schema = media.video_read_schema(ReadFileSchema)
        if not middleware.tool_descriptions.get("read_file"):
            descriptions["read_file"] = media.video_read_description(
                descriptions["read_file"], READ_DEFAULT_LIMIT
            )
    specs: list[tuple[str, Callable[..., Plan[Any]], type[BaseModel]]] = [
        ("ls", ls, LsSchema),
        ("read_file", read_file, read_schema),
        ("write_file", write_file, WriteFileSchema),
        ("edit_file", edit_file, EditFileSchema),
        ("delete", delete, DeleteSchema),
        ("glob", glob, GlobSchema),
        ("grep", grep, GrepSchema),
    ]
    timed = {"glob"}
    return [
        StructuredTool.from_function(
            name=name,
            description=descriptions[name],
            func=_driven(name, plan, _timed_step if name in timed else run_call),
            coroutine=_adriven(name, plan, _atimed_step if name in timed else arun_call),
            args_schema=schema,
            infer_schema=False,
        )
        for name, plan, schema in specs
    ]


_STALE_EDIT_ERRORS = frozenset({ErrorKind.NO_MATCH, ErrorKind.NOT_UNIQUE})
"""Edit failures that may come from another writer's change since the model read the file."""


def _read_version(result: Any) -> str | None:
    """The version a read saw: the backend's for a file, `ABSENT` for a missing one, `None`
    when the backend keeps no versions or the read failed otherwise."""
    if result.error:
        return ABSENT if error_kind(result.error) is ErrorKind.NOT_FOUND else None
    return getattr(result, "version", None)


def _answered(answer: Any, runtime: ToolRuntime, tool: str) -> Any:
    """`answer` as a tool result: text becomes a successful `ToolMessage`, so invoking a
    tool directly gives what the tool node gets."""
    if isinstance(answer, str):
        return tool_answer(content=answer, tool_call_id=runtime.tool_call_id, name=tool)
    return answer


def _driven(
    name: str, plan: Callable[..., Plan[Any]], step: Callable[[Call], Any] = run_call
) -> Callable[..., Any]:
    """The sync function of the tool `name` that runs `plan`, answering its backend calls
    with `step`. It has the plan's signature and docstring (so a schema inferred from it
    equals the async one's), and names `runtime`, which is how the tool node knows to
    inject the `ToolRuntime`."""

    @functools.wraps(plan)
    def func(runtime: ToolRuntime, **args: Any) -> Any:
        return _answered(drive(plan(runtime, **args), step), runtime, name)

    return func


def _adriven(
    name: str, plan: Callable[..., Plan[Any]], step: Callable[[Call], Awaitable[Any]] = arun_call
) -> Callable[..., Awaitable[Any]]:
    """`_driven`'s async twin: the tool's coroutine, on the backend's async methods."""

    @functools.wraps(plan)
    async def coroutine(runtime: ToolRuntime, **args: Any) -> Any:
        return _answered(await adrive(plan(runtime, **args), step), runtime, name)

    return coroutine


def _keeps_files_in_state(backend: Any) -> bool:
    """Whether `backend` may keep files in the thread's `files` channel: a `StateBackend`,
    a `CompositeBackend` with one among its backends, or a factory (whose backends are only
    known per call)."""
    if is_factory(backend) or isinstance(backend, StateBackend):
        return True
    if isinstance(backend, CompositeBackend):
        parts = [backend.default, *backend.routes.values()]
        return any(_keeps_files_in_state(part) for part in parts)
    return False


class FilesystemMiddleware(SectionPromptMixin, AgentMiddleware[FilesState, Any, Any]):
    """Gives the agent a virtual filesystem over a backend, and a prompt section about it.

    Args:
        backend: A `BackendProtocol`, or a factory `(runtime) -> BackendProtocol` called for
            every tool call. Defaults to `StateBackend()` (files in the thread's state).
        permissions: Ordered `FilesystemPermission` rules, checked before the backend is
            called (first match wins; no match allows).
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_descriptions: Replaces the descriptions of the named tools (an empty text
            keeps the default, as in the reference).
        grep_max_count: The most matches one `grep` call returns unless the model asks for
            another cap with the tool's `max_count`; bounds memory and context on large
            trees. `None` returns every match by default.
        custom_tool_descriptions: The reference's name for `tool_descriptions`. A name
            that is not a file tool here (`"execute"`, which `ExecuteMiddleware` offers, or
            a misspelling) is ignored, with a warning for a misspelling.
        tools: Which file tools the model gets: `None` or `"all"` every one, or a list of
            names (it must include `read_file`; `"execute"` is accepted, but fathom's
            `execute` tool comes from `ExecuteMiddleware`).
        tool_token_limit_before_evict: A result of another tool (not a file tool) larger
            than this many tokens is saved under `/large_tool_results/` and replaced by a
            preview naming the file. `None` (or `0`, as in the reference) keeps every
            result whole.
        human_message_token_limit_before_evict: When the newest message of a model call is
            a user message longer than this many tokens, its text is saved under
            `conversation_history/` (below a `CompositeBackend`'s `artifacts_root`) and
            the model sees a preview naming the file from then on; the state keeps the
            full text. `None` (or `0`) keeps every message whole.
        max_execute_timeout: The most seconds an `execute` call may ask for with its
            `timeout` argument: a call asking for more is refused with an error answer
            (the command does not run). Default one hour; `None` refuses none. Below it,
            `ExecuteMiddleware(max_timeout=)` and the backend's own cap lower the timeout.
        offload_binary_content: Keep images and other base64 content of `read_file`
            results and user messages out of the message history: each payload is saved
            once under `blobs/<sha256>` (below a `CompositeBackend`'s `artifacts_root`),
            the message in state keeps its digest, and every model call reads it back.
            Has no effect (a warning says so) when `blobs/` is kept in the thread's state,
            as with `StateBackend`.
        _permissions: The reference's deprecated spelling of `permissions` (a
            `LangChainDeprecationWarning` says so); pass one of the two.

    The middleware's `state_schema` is `FilesystemState` (the `files` channel) when the
    backend keeps files in the thread's state (a `StateBackend`, a `CompositeBackend` with
    one, or a factory), and LangChain's `AgentState` otherwise, as in the reference.

    Raises:
        NotImplementedError: `permissions` on paths a shell-capable backend serves.
        ValueError: `grep_max_count` that is not a positive integer or `None`;
            `tool_token_limit_before_evict` or `human_message_token_limit_before_evict`
            that is negative or not an integer; `max_execute_timeout` that is not a
            positive number or `None`; unknown or incomplete `tools`; both description
            arguments, or both permission arguments.
    """

    state_schema: type[Any] = FilesState

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        permissions: Sequence[FilesystemPermission] | None = None,
        system_prompt: str | None = None,
        tool_descriptions: Mapping[str, str] | None = None,
        grep_max_count: int | None = GREP_MAX_COUNT,
        custom_tool_descriptions: Mapping[str, str] | None = None,
        tools: Sequence[FsToolName] | Literal["all"] | None = None,
        tool_token_limit_before_evict: int | None = OFFLOAD_TOKENS,
        human_message_token_limit_before_evict: int | None = HUMAN_MESSAGE_TOKENS,
        max_execute_timeout: float | None = MAX_EXECUTE_TIMEOUT,
        offload_binary_content: bool = False,
        _permissions: Sequence[FilesystemPermission] | None = None,
    ) -> None:
        super().__init__()
        if _permissions is not None:
            if permissions is not None:
                raise ValueError("Pass only permissions, not both permissions and _permissions.")
            warnings.warn(
                "FilesystemMiddleware(_permissions=...) is deprecated (as in deepagents "
                "0.7.31); use FilesystemMiddleware(permissions=...) instead.",
                LangChainDeprecationWarning,
                stacklevel=2,
            )
            permissions = _permissions
        tool_token_limit_before_evict = _token_limit(
            "tool_token_limit_before_evict", tool_token_limit_before_evict
        )
        human_message_token_limit_before_evict = _token_limit(
            "human_message_token_limit_before_evict", human_message_token_limit_before_evict
        )
        if max_execute_timeout is not None and positive_seconds(max_execute_timeout) is None:
            raise ValueError(
                "max_execute_timeout must be positive (a number of seconds) or None, got "
                f"{max_execute_timeout!r}"
            )
        self.tool_token_limit_before_evict = tool_token_limit_before_evict
        self.read_chars = READ_OUTPUT_CHARS
        """The most characters of one `read_file` answer: `READ_OUTPUT_CHARS`, or less when
        `tool_token_limit_before_evict` allows less."""
        if tool_token_limit_before_evict is not None:
            allowed = NUM_CHARS_PER_TOKEN * tool_token_limit_before_evict
            self.read_chars = min(READ_OUTPUT_CHARS, allowed)
        self.human_message_token_limit_before_evict = human_message_token_limit_before_evict
        self.max_execute_timeout = max_execute_timeout
        if grep_max_count is not None and (
            isinstance(grep_max_count, bool)
            or not isinstance(grep_max_count, int)
            or grep_max_count <= 0
        ):
            raise ValueError(
                f"grep_max_count must be positive or None (an integer), got {grep_max_count!r}"
            )
        self.grep_max_count = grep_max_count
        self.backend: Backend = adopt(backend) if backend is not None else StateBackend()
        self.state_schema = FilesState if _keeps_files_in_state(self.backend) else AgentState
        if offload_binary_content and blobs_in_state(self.backend):
            warnings.warn(
                "offload_binary_content=True has no effect here: blobs/ is kept in the "
                "thread's state (StateBackend), so the payloads would stay in the checkpoint "
                "anyway. Route the artifacts root to a store, disk or sandbox backend.",
                stacklevel=2,
            )
            offload_binary_content = False
        self.offload_binary_content = offload_binary_content
        self.permissions = list(permissions or [])
        for rule in self.permissions:
            if not isinstance(rule, FilesystemPermission):
                raise TypeError(
                    f"permissions must be FilesystemPermission rules, not {type(rule).__name__}"
                )
        check_permissions_apply(self.permissions, self.backend)
        if tool_descriptions is not None and custom_tool_descriptions is not None:
            raise ValueError(
                "Pass tool descriptions once: custom_tool_descriptions= or its alias "
                "tool_descriptions=, not both."
            )
        self.tool_descriptions = dict(custom_tool_descriptions or tool_descriptions or {})
        unknown = set(self.tool_descriptions) - set(_SELECTABLE_TOOLS)
        if unknown:
            warnings.warn(
                f"custom_tool_descriptions names unknown tools {sorted(unknown)}, which get "
                f"no description from it; the filesystem tools are {list(FILESYSTEM_TOOL_NAMES)}",
                stacklevel=2,
            )
        selected = _selected_tools(tools)
        self.tools = [tool for tool in _build_tools(self) if tool.name in selected]
        self.section = PromptSection(
            "filesystem", FILESYSTEM_PROMPT if system_prompt is None else system_prompt,
            tools=frozenset(tool.name for tool in self.tools),
        )
        self._human_eviction = (
            None
            if human_message_token_limit_before_evict is None
            else HumanMessageEviction(self.backend, human_message_token_limit_before_evict)
        )
        self._results_offload = (
            None
            if tool_token_limit_before_evict is None
            else ToolResultOffload(self.backend, tool_token_limit_before_evict)
        )

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        """Add the prompt section; save a too-large newest user message to a file and show
        saved ones as previews (see `human_message_token_limit_before_evict`). A video's
        frames come after all the tool results of their turn (`media.media_request`)."""
        request = media.media_request(request)
        command = None
        if self._human_eviction is not None:
            request, command = self._human_eviction.prepare(request)
        if (blobs := self._blobs(HookRuntime(request.state, request.runtime))) is not None:
            queued = _queued(command)
            saved = blobs.history_update(_state_messages(request), queued)
            request = request.override(messages=blobs.hydrate(request.messages))
            command = _with_messages(command, saved, queued)
        retry = media.RejectedMediaRetry()  # a refused media read is sent as a notice instead
        response = super().wrap_model_call(request, retry.wrap(handler))
        if retry.replaced:
            queued = _queued(command)
            command = _with_messages(command, [*queued, *retry.replaced], queued)
        return with_command(response, command)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        """Async `wrap_model_call`."""
        request = media.media_request(request)
        command = None
        if self._human_eviction is not None:
            request, command = await self._human_eviction.aprepare(request)
        if (blobs := self._blobs(HookRuntime(request.state, request.runtime))) is not None:
            queued = _queued(command)
            saved = await blobs.ahistory_update(_state_messages(request), queued)
            request = request.override(messages=await blobs.ahydrate(request.messages))
            command = _with_messages(command, saved, queued)
        retry = media.RejectedMediaRetry()
        response = await super().awrap_model_call(request, retry.awrap(handler))
        if retry.replaced:
            queued = _queued(command)
            command = _with_messages(command, [*queued, *retry.replaced], queued)
        return with_command(response, command)

    def _blobs(self, runtime: Any) -> BlobOffload | None:
        """Where binary content goes for this call (`runtime` is what a backend factory is
        given); `None` when it stays inline."""
        if not self.offload_binary_content:
            return None
        backend = resolve_backend(self.backend, runtime)
        return None if blobs_in_state(backend) else BlobOffload(backend)

    def _tool_blobs(self, request: ToolCallRequest) -> BlobOffload | None:
        """Where a `read_file` result's binary content goes; `None` for other tools."""
        if request.tool_call.get("name") != "read_file":
            return None
        return self._blobs(request.runtime)

    def _refused_timeout(self, request: ToolCallRequest) -> ToolMessage | None:
        """The error answer to an `execute` call whose `timeout` is over
        `max_execute_timeout`; `None` lets the call run."""
        cap = self.max_execute_timeout
        call = request.tool_call
        timeout = (call.get("args") or {}).get("timeout")
        if (
            cap is None
            or call.get("name") != "execute"
            or isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or timeout <= cap
        ):
            return None
        return tool_error(
            content=(
                f"Error: timeout {timeout:g}s is above the limit of {cap:g}s for one command; "
                f"the command did not run. Run it again with a timeout of at most {cap:g}, "
                "or split it into shorter steps."
            ),
            name="execute",
            tool_call_id=call.get("id") or "",
        )

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        """Run the tool; a result over `tool_token_limit_before_evict` is saved to a file
        and replaced by a preview naming it (so one big answer cannot flood the context).
        An `execute` call asking for more than `max_execute_timeout` is refused."""
        if (refused := self._refused_timeout(request)) is not None:
            return refused
        result = handler(request)
        if (blobs := self._tool_blobs(request)) is not None:
            result = blobs.tool_result(result)
        if self._results_offload is None:
            return result
        return self._results_offload.tool_result(request, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Any]],
    ) -> Any:
        """Async `wrap_tool_call`."""
        if (refused := self._refused_timeout(request)) is not None:
            return refused
        result = await handler(request)
        if (blobs := self._tool_blobs(request)) is not None:
            result = await blobs.atool_result(result)
        if self._results_offload is None:
            return result
        return await self._results_offload.atool_result(request, result)


_SELECTABLE_TOOLS = (*FILESYSTEM_TOOL_NAMES, "execute")


def _state_messages(request: ModelRequest) -> list[Any]:
    state = request.state if isinstance(request.state, Mapping) else {}
    return list(state.get("messages") or [])


def _queued(command: Command | None) -> list[Any]:
    """The messages a state update already carries."""
    update = command.update if command is not None else None
    messages = update.get("messages") if isinstance(update, dict) else None
    return list(messages) if isinstance(messages, list) else []


def _with_messages(command: Command | None, messages: list[Any], queued: list[Any]) -> Any:
    """`command` carrying `messages` instead of `queued` (a new update when needed)."""
    if messages == queued:
        return command
    previous = command.update if command is not None else None
    update = dict(previous) if isinstance(previous, dict) else {}
    update["messages"] = messages
    return Command(update=update)


def _token_limit(name: str, value: Any) -> int | None:
    """`value` as a token limit: a positive integer, or `None` for none (`0` too, which the
    reference reads as off); raise `ValueError` for anything else."""
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a positive integer, 0 or None, not {value!r}")
    return value


def _selected_tools(tools: Sequence[str] | Literal["all"] | None) -> set[str]:
    """The file tool names `tools=` offers: `None`/`"all"` every one, else the listed ones
    (`"execute"` may be listed; fathom's `execute` comes from `ExecuteMiddleware`)."""
    if tools is None or tools == "all":
        return set(FILESYSTEM_TOOL_NAMES)
    if isinstance(tools, str):
        raise ValueError(f'tools must be None, "all" or a list of tool names, not {tools!r}')
    names = list(tools)
    unknown = sorted(set(names) - set(_SELECTABLE_TOOLS))
    if unknown:
        raise ValueError(
            f"tools names unknown tools {unknown}; choose from {list(_SELECTABLE_TOOLS)}"
        )
    if "read_file" not in names:
        raise ValueError(
            "read_file must be included in tools: offloaded results and archives are read "
            "back with it. Add 'read_file' to the list."
        )
    return set(names)
