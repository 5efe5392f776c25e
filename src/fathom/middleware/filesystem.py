"""Filesystem tools (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`) over a backend.

Every problem the model can cause (a missing file, a path outside the root, a binary or
oversized file, a non-unique edit) comes back as an error `ToolMessage` that says what to do
next; nothing raises into the agent loop and nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from fathom.backends.paths import PathError, normalize_path
from fathom.backends.protocol import BackendProtocol
from fathom.backends.state import StateBackend
from fathom.backends.utils import IMAGE_EXTENSIONS, file_bytes, text_view
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.state import FilesState

__all__ = ["FILESYSTEM_PROMPT", "FILESYSTEM_TOOL_NAMES", "FilesystemMiddleware"]

FILESYSTEM_TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "glob", "grep")

FILESYSTEM_PROMPT = """## Files

You have a filesystem rooted at `/`: `ls` lists a directory, `read_file` reads a file with line numbers (page with `offset`/`limit`), `write_file` creates a new file, `edit_file` replaces exact text in an existing one, `glob` finds files by name pattern and `grep` finds text in files. Use absolute paths such as `/notes/plan.md`. Read a file before you edit it. Save long material you will need later to a file instead of repeating it in messages."""  # noqa: E501

READ_DEFAULT_LIMIT = 2000
"""Lines `read_file` returns when the model gives no `limit` (the reference's backend default)."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut in `read_file` output, with a note of how much was left out."""
READ_OUTPUT_CHARS = 60_000
"""`read_file` stops before its output passes this many characters and says where to go on."""
LIST_LIMIT = 500
"""At most this many entries, paths or matching lines in one `ls`, `glob` or `grep` answer."""

DESCRIPTIONS = {
    "ls": "List the files and directories directly under a directory, with size and time.",
    "read_file": (
        "Read a file. Text comes back with 1-based line numbers; use offset (0-based line) "
        "and limit to page through long files. Images come back as images."
    ),
    "write_file": "Create a new file with the given content. Fails if the file already exists.",
    "edit_file": (
        "Replace exact text in an existing file. old_string must occur exactly once unless "
        "replace_all is true."
    ),
    "glob": (
        "Find files by glob pattern, e.g. '*.py' (any depth), 'src/**/*.md', '/*.txt' "
        "(top level only)."
    ),
    "grep": (
        "Search file contents for a literal string. output_mode: 'files_with_matches' "
        "(default), 'content' (matching lines with numbers) or 'count'."
    ),
}


class LsInput(BaseModel):
    path: str = Field(default="/", description="Absolute directory path.")


class ReadFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file.")
    offset: int = Field(default=0, ge=0, description="0-based line to start from.")
    limit: int = Field(default=READ_DEFAULT_LIMIT, ge=1, description="Maximum lines to return.")


class WriteFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the new file.")
    content: str = Field(description="The full text of the file.")


class EditFileInput(BaseModel):
    file_path: str = Field(description="Absolute path of the file.")
    old_string: str = Field(description="Exact text to replace.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class GlobInput(BaseModel):
    pattern: str = Field(description="Glob pattern; supports *, ?, ** and {a,b}.")
    path: str = Field(default="/", description="Directory to search under.")


class GrepInput(BaseModel):
    pattern: str = Field(description="Literal text to search for (not a regex).")
    path: str | None = Field(default=None, description="Directory or file to search.")
    glob: str | None = Field(default=None, description="Only search files matching this glob.")
    output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches"


Backend = BackendProtocol | Callable[[Any], BackendProtocol]


def resolve_backend(backend: Backend, runtime: Any) -> BackendProtocol:
    """The backend serving one tool call: call a factory, then bind to the runtime."""
    if callable(backend) and not isinstance(backend, BackendProtocol):
        backend = backend(runtime)
    bind = getattr(backend, "bind", None)
    return bind(runtime) if bind is not None else backend


def _error(message: str, runtime: ToolRuntime, tool: str) -> ToolMessage:
    return ToolMessage(
        content=message, tool_call_id=runtime.tool_call_id, name=tool, status="error"
    )


_CHANGING_TOOLS = ("write_file", "edit_file")


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
        for call in message.tool_calls:
            if call.get("id") == runtime.tool_call_id:
                return None
            if call["name"] in _CHANGING_TOOLS and _same_path(
                call["args"].get("file_path"), file_path
            ):
                return call["name"]
        return None
    return None


def _conflict_error(earlier: str, file_path: str, runtime: ToolRuntime, tool: str) -> ToolMessage:
    return _error(
        f"Error: an earlier {earlier} call in this same turn already changes {file_path}, and "
        "calls in one turn all see the file as it was before the turn. Read the file and make "
        "this change in your next turn, or combine both changes into one call.",
        runtime,
        tool,
    )


def _format_ls(path: str, entries: list[dict]) -> str:
    if not entries:
        return f"(no files under {path})"
    rows = []
    for entry in entries[:LIST_LIMIT]:
        if entry.get("is_dir"):
            rows.append(entry["path"])
        else:
            meta = [f"{entry['size']} B"] if "size" in entry else []
            if entry.get("modified_at"):
                meta.append(entry["modified_at"])
            rows.append(f"{entry['path']}  ({', '.join(meta)})" if meta else entry["path"])
    if len(entries) > LIST_LIMIT:
        rows.append(f"[{len(entries) - LIST_LIMIT} more entries not shown]")
    return "\n".join(rows)


def _format_read(path: str, text: str, offset: int, limit: int, lossy: bool) -> str:
    lines = text.splitlines()
    if not lines:
        return f"(the file {path} is empty)"
    if offset >= len(lines):
        return f"Error: offset {offset} is past the end of {path}, which has {len(lines)} lines."
    rows: list[str] = []
    if lossy:
        rows.append("[note: this file is not valid UTF-8; undecodable bytes are shown as \ufffd]")
    used = 0
    end = min(len(lines), offset + limit)
    for number in range(offset, end):
        line = lines[number]
        if len(line) > MAX_LINE_CHARS:
            cut = len(line) - MAX_LINE_CHARS
            line = f"{line[:MAX_LINE_CHARS]} [… {cut} more characters on this line]"
        row = f"{number + 1:6d}\t{line}"
        if used + len(row) > READ_OUTPUT_CHARS and rows:
            rows.append(
                f"[output stopped at line {number} to stay under {READ_OUTPUT_CHARS} "
                f"characters; call read_file with offset={number} to continue]"
            )
            return "\n".join(rows)
        rows.append(row)
        used += len(row) + 1
    if end < len(lines):
        rows.append(
            f"[showing lines {offset + 1}-{end} of {len(lines)}; "
            f"call read_file with offset={end} to read more]"
        )
    return "\n".join(rows)


def _format_grep(pattern: str, matches: list[dict], mode: str) -> str:
    if not matches:
        return f"No matches for {pattern!r}."
    if mode == "count":
        counts: dict[str, int] = {}
        for match in matches:
            counts[match["path"]] = counts.get(match["path"], 0) + 1
        return "\n".join(f"{path}: {n}" for path, n in counts.items())
    if mode == "content":
        rows: list[str] = []
        current = None
        for match in matches[:LIST_LIMIT]:
            if match["path"] != current:
                current = match["path"]
                rows.append(f"{current}:")
            text = match["text"]
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + " [… line cut]"
            rows.append(f"  {match['line']}: {text}")
        if len(matches) > LIST_LIMIT:
            rows.append(
                f"[{len(matches) - LIST_LIMIT} more matching lines not shown; "
                "narrow the path or glob]"
            )
        return "\n".join(rows)
    paths = list(dict.fromkeys(match["path"] for match in matches))
    rows = paths[:LIST_LIMIT]
    if len(paths) > LIST_LIMIT:
        rows.append(f"[{len(paths) - LIST_LIMIT} more files not shown]")
    return "\n".join(rows)


def _image_message(path: str, data: dict, runtime: ToolRuntime) -> ToolMessage:
    import base64

    mime = IMAGE_EXTENSIONS[_extension(path)]
    payload = base64.b64encode(file_bytes(data)).decode("ascii")
    return ToolMessage(
        content=[{"type": "image", "base64": payload, "mime_type": mime}],
        tool_call_id=runtime.tool_call_id,
        name="read_file",
    )


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


class _Tools:
    """The six tools' logic, written once over sync or async backend calls."""

    def __init__(self, middleware: FilesystemMiddleware) -> None:
        self.middleware = middleware

    def backend(self, runtime: ToolRuntime) -> BackendProtocol:
        return resolve_backend(self.middleware.backend, runtime)

    # Each `*_result` turns a backend result into what the tool returns.
    def ls_result(self, result: Any, path: str, runtime: ToolRuntime) -> Any:
        if result.error:
            return _error(result.error, runtime, "ls")
        return _format_ls(path, result.entries or [])

    def read_result(
        self, result: Any, file_path: str, offset: int, limit: int, runtime: ToolRuntime
    ) -> Any:
        if result.error:
            return _error(result.error, runtime, "read_file")
        data = result.file_data
        if _extension(file_path) in IMAGE_EXTENSIONS:
            return _image_message(file_path, data, runtime)
        view = text_view(data)
        if view.text is None:
            return _error(
                f"Error: '{file_path}' is a binary file ({view.size:,} bytes) and cannot be "
                "shown as text.",
                runtime,
                "read_file",
            )
        text = _format_read(file_path, view.text, offset, limit, view.lossy)
        if text.startswith("Error:"):
            return _error(text, runtime, "read_file")
        return text

    def change_result(self, result: Any, runtime: ToolRuntime, tool: str, message: str) -> Any:
        if result.error:
            return _error(result.error, runtime, tool)
        tool_message = ToolMessage(content=message, tool_call_id=runtime.tool_call_id, name=tool)
        if result.files_update:
            return Command(update={"files": result.files_update, "messages": [tool_message]})
        return tool_message

    def glob_result(self, result: Any, pattern: str, path: str, runtime: ToolRuntime) -> Any:
        if result.error:
            return _error(result.error, runtime, "glob")
        paths = [m["path"] for m in result.matches or []]
        if not paths:
            return f"No files match {pattern!r} under {path}."
        shown = paths[:LIST_LIMIT]
        if len(paths) > LIST_LIMIT:
            shown.append(f"[{len(paths) - LIST_LIMIT} more files not shown]")
        return "\n".join(shown)

    def grep_result(self, result: Any, pattern: str, mode: str, runtime: ToolRuntime) -> Any:
        if result.error:
            return _error(result.error, runtime, "grep")
        return _format_grep(pattern, result.matches or [], mode)


def _write_message(result: Any) -> str:
    return f"Wrote {result.path}."


def _edit_message(result: Any) -> str:
    n = result.occurrences or 0
    return f"Edited {result.path}: replaced {n} occurrence{'s' if n != 1 else ''}."


def _build_tools(middleware: FilesystemMiddleware) -> list[BaseTool]:
    logic = _Tools(middleware)
    descriptions = {**DESCRIPTIONS, **middleware.tool_descriptions}

    def ls(runtime: ToolRuntime, path: str = "/") -> Any:
        return logic.ls_result(logic.backend(runtime).ls(path), path, runtime)

    async def als(runtime: ToolRuntime, path: str = "/") -> Any:
        return logic.ls_result(await logic.backend(runtime).als(path), path, runtime)

    def read_file(
        runtime: ToolRuntime, file_path: str, offset: int = 0, limit: int = READ_DEFAULT_LIMIT
    ) -> Any:
        result = logic.backend(runtime).read(file_path, offset, limit)
        return logic.read_result(result, file_path, offset, limit, runtime)

    async def aread_file(
        runtime: ToolRuntime, file_path: str, offset: int = 0, limit: int = READ_DEFAULT_LIMIT
    ) -> Any:
        result = await logic.backend(runtime).aread(file_path, offset, limit)
        return logic.read_result(result, file_path, offset, limit, runtime)

    def write_file(runtime: ToolRuntime, file_path: str, content: str) -> Any:
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, "write_file")
        result = logic.backend(runtime).write(file_path, content)
        return logic.change_result(result, runtime, "write_file", _write_message(result))

    async def awrite_file(runtime: ToolRuntime, file_path: str, content: str) -> Any:
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, "write_file")
        result = await logic.backend(runtime).awrite(file_path, content)
        return logic.change_result(result, runtime, "write_file", _write_message(result))

    def edit_file(
        runtime: ToolRuntime,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> Any:
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, "edit_file")
        result = logic.backend(runtime).edit(file_path, old_string, new_string, replace_all)
        return logic.change_result(result, runtime, "edit_file", _edit_message(result))

    async def aedit_file(
        runtime: ToolRuntime,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> Any:
        if earlier := earlier_change_in_turn(runtime, file_path):
            return _conflict_error(earlier, file_path, runtime, "edit_file")
        backend = logic.backend(runtime)
        result = await backend.aedit(file_path, old_string, new_string, replace_all)
        return logic.change_result(result, runtime, "edit_file", _edit_message(result))

    def glob(runtime: ToolRuntime, pattern: str, path: str = "/") -> Any:
        return logic.glob_result(logic.backend(runtime).glob(pattern, path), pattern, path, runtime)

    async def aglob(runtime: ToolRuntime, pattern: str, path: str = "/") -> Any:
        result = await logic.backend(runtime).aglob(pattern, path)
        return logic.glob_result(result, pattern, path, runtime)

    def grep(
        runtime: ToolRuntime,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        output_mode: str = "files_with_matches",
    ) -> Any:
        result = logic.backend(runtime).grep(pattern, path, glob)
        return logic.grep_result(result, pattern, output_mode, runtime)

    async def agrep(
        runtime: ToolRuntime,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        output_mode: str = "files_with_matches",
    ) -> Any:
        result = await logic.backend(runtime).agrep(pattern, path, glob)
        return logic.grep_result(result, pattern, output_mode, runtime)

    specs = [
        ("ls", ls, als, LsInput),
        ("read_file", read_file, aread_file, ReadFileInput),
        ("write_file", write_file, awrite_file, WriteFileInput),
        ("edit_file", edit_file, aedit_file, EditFileInput),
        ("glob", glob, aglob, GlobInput),
        ("grep", grep, agrep, GrepInput),
    ]
    return [
        StructuredTool.from_function(
            name=name,
            description=descriptions[name],
            func=func,
            coroutine=coroutine,
            args_schema=schema,
            infer_schema=False,
        )
        for name, func, coroutine, schema in specs
    ]


class FilesystemMiddleware(SectionPromptMixin, AgentMiddleware[FilesState, Any, Any]):
    """Gives the agent a virtual filesystem over a backend, and a prompt section about it.

    Args:
        backend: A `BackendProtocol`, or a factory `(runtime) -> BackendProtocol` called for
            every tool call. Defaults to `StateBackend()` (files in the thread's state).
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_descriptions: Replaces the descriptions of the named tools.
    """

    state_schema = FilesState

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        system_prompt: str | None = None,
        tool_descriptions: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.backend: Backend = backend if backend is not None else StateBackend()
        self.tool_descriptions = dict(tool_descriptions or {})
        unknown = set(self.tool_descriptions) - set(FILESYSTEM_TOOL_NAMES)
        if unknown:
            raise ValueError(
                f"tool_descriptions names unknown tools {sorted(unknown)}; "
                f"the filesystem tools are {list(FILESYSTEM_TOOL_NAMES)}"
            )
        self.section = PromptSection(
            "filesystem", FILESYSTEM_PROMPT if system_prompt is None else system_prompt
        )
        self.tools = _build_tools(self)
