"""Filesystem tools (`ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`, `grep`).

Every problem the model can cause (a missing file, a path outside the root, a binary or
oversized file, a non-unique edit) comes back as an error `ToolMessage` that says what to do
next; nothing raises into the agent loop and nothing is half-written.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.policy import PolicyBackend
from fathom.backends.protocol import (
    BackendOrFactory,
    BackendProtocol,
    HookRuntime,
    Plan,
    adopt,
    adrive,
    arun_call,
    call,
    cap_grep,
    drive,
    resolve_backend,
    run_call,
)
from fathom.backends.state import StateBackend
from fathom.backends.utils import positive_seconds
from fathom.backends.versions import ABSENT, expecting
from fathom.middleware.context.blob_offload import BlobOffload, blobs_in_state
from fathom.middleware.context.budget import OFFLOAD_TOKENS
from fathom.middleware.context.eviction import HumanMessageEviction, with_command
from fathom.middleware.context.offload import ToolResultOffload
from fathom.middleware.filesystem import media
from fathom.middleware.filesystem.answers import (
    change_answer,
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
from fathom.state import FilesState, FilesystemState
from fathom.tool_answers import tool_error

__all__ = [
    "FILESYSTEM_PROMPT",
    "FILESYSTEM_TOOL_NAMES",
    "GREP_MAX_COUNT",
    "FilesystemMiddleware",
    "FilesystemState",
    "FsToolName",
]

FILESYSTEM_TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep")

FsToolName = Literal[
    "ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "execute"
]
"""A name `FilesystemMiddleware(tools=[...])` accepts (the reference's `FsToolName`)."""

FILESYSTEM_PROMPT = """## Files

You have a filesystem rooted at `/`: `ls` lists a directory, `read_file` reads a file with line numbers (page with `offset`/`limit`), `write_file` writes a whole file (creating it, or replacing an existing one), `edit_file` replaces exact text in an existing one, `delete` removes a file or a directory with everything in it, `glob` finds files by name pattern and `grep` finds text in files. Use absolute paths such as `/notes/plan.md`. Read a file before you edit it. Save long material you will need later to a file instead of repeating it in messages."""  # noqa: E501

READ_DEFAULT_LIMIT = 2000
"""Lines `read_file` returns when the model gives no `limit` (the reference's backend default)."""

DESCRIPTIONS = {
    "ls": "List the files and directories directly under a directory, with size and time.",
    "read_file": (
        "Read a file. Text comes back with 1-based line numbers; use offset (0-based line) "
        "and limit to page through long files. Images come back as images."
    ),
    "write_file": (
        "Write a file with the given content: creates it, or replaces the whole content of "
        "an existing file. To change part of a file, use edit_file."
    ),
    "edit_file": (
        "Replace exact text in an existing file. old_string must occur exactly once unless "
        "replace_all is true."
    ),
    "delete": (
        "Delete a file, or a directory and everything in it. This cannot be undone: delete "
        "only what is no longer needed, and a directory in one call rather than file by file."
    ),
    "glob": (
        "Find files by glob pattern, e.g. '*.py' (any depth), 'src/**/*.md', '/*.txt' "
        "(top level only)."
    ),
    "grep": (
        "Search file contents for a literal string. output_mode: 'files_with_matches' "
        "(default), 'content' (matching lines with numbers) or 'count'. At most max_count "
        "matches come back (a default cap applies); a note says when more exist."
    ),
}


class LsInput(BaseModel):
    path: str = Field(default="/", description="Absolute directory path.")


class ReadFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file.")
    offset: int = Field(default=0, ge=0, description="0-based line to start from.")
    limit: int = Field(default=READ_DEFAULT_LIMIT, ge=1, description="Maximum lines to return.")


class WriteFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file to write.")
    content: str = Field(description="The full text of the file.")


class EditFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file.")
    old_string: str = Field(description="Exact text to replace.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class DeleteInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file or directory to delete.")


class GlobInput(BaseModel):
    pattern: str = Field(description="Glob pattern; supports *, ?, ** and {a,b}.")
    path: str = Field(default="/", description="Directory to search under.")


class GrepInput(BaseModel):
    pattern: str = Field(description="Literal text to search for (not a regex).")
    path: str | None = Field(default=None, description="Directory or file to search.")
    glob: str | None = Field(default=None, description="Only search files matching this glob.")
    output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches"
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


_CHANGING_TOOLS = ("write_file", "edit_file", "delete")


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
        f"Error: an earlier {earlier} call in this same turn already changes `{file_path}`, and "
        "calls in one turn all see the file as it was before the turn. Read the file and make "
        "this change in your next turn, or combine both changes into one call.",
        runtime,
        tool,
    )


MAX_EXECUTE_TIMEOUT = 3600
"""The default `max_execute_timeout` in seconds (the reference's)."""

HUMAN_MESSAGE_TOKENS = 50_000
"""The default `human_message_token_limit_before_evict` (the reference's)."""

GREP_MAX_COUNT = 1000
"""The default cap on the matches of one `grep` call (`FilesystemMiddleware(grep_max_count=)`)."""


def delete_message(result: Any) -> str:
    """The `delete` tool's answer on success."""
    return f"Deleted `{result.path}`" if result.path else "Deleted."


_CHANGE_MESSAGES = {
    "write_file": write_message, "edit_file": edit_message, "delete": delete_message
}
"""Each changing tool's answer on success."""


def _build_tools(middleware: FilesystemMiddleware) -> list[BaseTool]:
    """The file tools over `middleware`'s backend: each written once as a plan, which its
    sync tool `drive`s and its async tool `adrive`s."""

    def backend(runtime: ToolRuntime) -> BackendProtocol:
        resolved = resolve_backend(middleware.backend, runtime)
        if middleware.permissions:
            return PolicyBackend(resolved, [PermissionPolicy(middleware.permissions)])
        return resolved

    def ls(runtime: ToolRuntime, path: str = "/") -> Plan[Any]:
        result = yield call(backend(runtime), "ls", path)
        return ls_answer(result, path, runtime)

    video = media.video_enabled()  # videos are read as frames (the `video` extra)

    def read_file(
        runtime: ToolRuntime, file_path: str, offset: int = 0, limit: int = READ_DEFAULT_LIMIT
    ) -> Plan[Any]:
        result = yield call(backend(runtime), "read", file_path, offset, limit)
        answer = media.media_answer(result, file_path, offset, limit, runtime, video=video)
        if answer is None:
            answer = read_answer(result, file_path, offset, limit, runtime)
        return with_version(answer, runtime, "read_file", file_path, _read_version(result))

    def change(
        runtime: ToolRuntime, tool: str, method: str, *args: Any, expected: str | None = None
    ) -> Plan[Any]:
        """A change of `args[0]` by `tool` (the backend's `method`), refused when another
        call of this turn changes the same file, and applied only while the file is at the
        `expected` version (when given). Its answer records the file's new version."""
        file_path = args[0]
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, tool)
        target = backend(runtime)
        with expecting(expected):
            result = yield call(target, method, *args)
        if result.error and tool != "delete" and (seen := seen_version(runtime, file_path)):
            refused = error_kind(result.error) is ErrorKind.CHANGED and expected is not None
            if refused or error_kind(result.error) in _STALE_EDIT_ERRORS:
                current = yield call(target, "read", file_path, 0, READ_DEFAULT_LIMIT)
                version = _read_version(current)
                if refused or version != seen:
                    shown = read_answer(current, file_path, 0, READ_DEFAULT_LIMIT, runtime)
                    return changed_answer(runtime, tool, file_path, shown, version)
        answer = change_answer(result, runtime, tool, _CHANGE_MESSAGES[tool](result), file_path)
        if result.error:
            return answer
        version = ABSENT if tool == "delete" else getattr(result, "version", None)
        return with_version(answer, runtime, tool, file_path, version)

    def write_file(runtime: ToolRuntime, file_path: str, content: str) -> Plan[Any]:
        expected = seen_version(runtime, file_path)
        return change(runtime, "write_file", "write", file_path, content, expected=expected)

    def edit_file(
        runtime: ToolRuntime,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> Plan[Any]:
        return change(runtime, "edit_file", "edit", file_path, old_string, new_string, replace_all)

    # -- delete: a file, or a directory recursively ------------------------------------

    def delete(runtime: ToolRuntime, file_path: str) -> Plan[Any]:
        return change(runtime, "delete", "delete", file_path)

    def glob(runtime: ToolRuntime, pattern: str, path: str = "/") -> Plan[Any]:
        result = yield call(backend(runtime), "glob", pattern, path)
        return glob_answer(result, pattern, path, runtime)

    def grep(
        runtime: ToolRuntime,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        output_mode: str = "files_with_matches",
        max_count: int | None = None,
    ) -> Plan[Any]:
        cap = max_count if max_count is not None else middleware.grep_max_count
        result = yield call(backend(runtime), "grep", pattern, path, glob, max_count=cap)
        return grep_answer(cap_grep(result, cap), pattern, output_mode, runtime, path)

    descriptions = {**DESCRIPTIONS, **middleware.tool_descriptions}
    read_schema: type[BaseModel] = ReadFileInput
    if video:
        read_schema = media.video_read_schema(ReadFileInput)
        if "read_file" not in middleware.tool_descriptions:
            descriptions["read_file"] = media.video_read_description(
                descriptions["read_file"], READ_DEFAULT_LIMIT
            )
    specs = [
        ("ls", ls, LsInput),
        ("read_file", read_file, read_schema),
        ("write_file", write_file, WriteFileInput),
        ("edit_file", edit_file, EditFileInput),
        ("delete", delete, DeleteInput),
        ("glob", glob, GlobInput),
        ("grep", grep, GrepInput),
    ]
    return [
        StructuredTool.from_function(
            name=name,
            description=descriptions[name],
            func=_driven(plan),
            coroutine=_adriven(plan),
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


def _driven(plan: Callable[..., Plan[Any]]) -> Callable[..., Any]:
    """The sync function of a tool that runs `plan`. It takes the arguments by keyword (the
    schema fills in defaults) and names `runtime`, which is how the tool node knows to
    inject the `ToolRuntime`."""

    def func(runtime: ToolRuntime, **args: Any) -> Any:
        return drive(plan(runtime, **args), run_call)

    return func


def _adriven(plan: Callable[..., Plan[Any]]) -> Callable[..., Awaitable[Any]]:
    """`_driven`'s async twin: the tool's coroutine, on the backend's async methods."""

    async def coroutine(runtime: ToolRuntime, **args: Any) -> Any:
        return await adrive(plan(runtime, **args), arun_call)

    return coroutine


class FilesystemMiddleware(SectionPromptMixin, AgentMiddleware[FilesState, Any, Any]):
    """Gives the agent a virtual filesystem over a backend, and a prompt section about it.

    Args:
        backend: A `BackendProtocol`, or a factory `(runtime) -> BackendProtocol` called for
            every tool call. Defaults to `StateBackend()` (files in the thread's state).
        permissions: Ordered `FilesystemPermission` rules, checked before the backend is
            called (first match wins; no match allows).
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_descriptions: Replaces the descriptions of the named tools.
        grep_max_count: The most matches one `grep` call returns unless the model asks for
            another cap with the tool's `max_count`; bounds memory and context on large
            trees. `None` returns every match by default.
        custom_tool_descriptions: The reference's name for `tool_descriptions`.
        tools: Which file tools the model gets: `None` or `"all"` every one, or a list of
            names (it must include `read_file`; `"execute"` is accepted, but fathom's
            `execute` tool comes from `ExecuteMiddleware`).
        tool_token_limit_before_evict: A result of another tool (not a file tool) larger
            than this many tokens is saved under `/large_tool_results/` and replaced by a
            preview naming the file. `None` keeps every result whole.
        human_message_token_limit_before_evict: When the newest message of a model call is
            a user message longer than this many tokens, its text is saved under
            `conversation_history/` (below a `CompositeBackend`'s `artifacts_root`) and
            the model sees a preview naming the file from then on; the state keeps the
            full text. `None` keeps every message whole.
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

    Raises:
        NotImplementedError: `permissions` on paths a shell-capable backend serves.
        ValueError: `grep_max_count`, `tool_token_limit_before_evict` or
            `human_message_token_limit_before_evict` that is not a positive integer or
            `None`; `max_execute_timeout` that is not a positive number or `None`; unknown
            or incomplete `tools`; both description arguments.
    """

    state_schema = FilesState

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
    ) -> None:
        super().__init__()
        _check_limit("tool_token_limit_before_evict", tool_token_limit_before_evict)
        _check_limit(
            "human_message_token_limit_before_evict", human_message_token_limit_before_evict
        )
        if max_execute_timeout is not None and positive_seconds(max_execute_timeout) is None:
            raise ValueError(
                "max_execute_timeout must be a positive number of seconds or None, not "
                f"{max_execute_timeout!r}"
            )
        self.tool_token_limit_before_evict = tool_token_limit_before_evict
        self.human_message_token_limit_before_evict = human_message_token_limit_before_evict
        self.max_execute_timeout = max_execute_timeout
        _check_limit("grep_max_count", grep_max_count)
        self.grep_max_count = grep_max_count
        self.backend: Backend = adopt(backend) if backend is not None else StateBackend()
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
        unknown = set(self.tool_descriptions) - set(FILESYSTEM_TOOL_NAMES)
        if unknown:
            raise ValueError(
                f"tool_descriptions names unknown tools {sorted(unknown)}; "
                f"the filesystem tools are {list(FILESYSTEM_TOOL_NAMES)}"
            )
        selected = _selected_tools(tools)
        self.section = PromptSection(
            "filesystem", FILESYSTEM_PROMPT if system_prompt is None else system_prompt
        )
        self.tools = [tool for tool in _build_tools(self) if tool.name in selected]
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


def _check_limit(name: str, value: Any) -> None:
    """Raise `ValueError` unless `value` is a positive integer or `None`."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(f"{name} must be a positive integer or None, not {value!r}")


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
            "tools must include 'read_file': offloaded results and archives are read back "
            "with it. Add 'read_file' to the list."
        )
    return set(names)
