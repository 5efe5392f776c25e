"""What the filesystem tools answer: backend results turned into tool results.

Text answers are bounded (long lines cut, long listings and reads stopped with a note
saying how to go on) so one call never floods the context. `describe_error` is the one
place that words a backend's typed error (`BackendError`) for the model.
"""

from __future__ import annotations

import base64
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.utils import IMAGE_EXTENSIONS, file_bytes, text_view
from fathom.state import FileData
from fathom.tool_answers import tool_error

__all__ = [
    "LIST_LIMIT",
    "MAX_LINE_CHARS",
    "READ_OUTPUT_CHARS",
    "change_answer",
    "describe_error",
    "edit_message",
    "error_message",
    "glob_answer",
    "grep_answer",
    "ls_answer",
    "read_answer",
    "write_message",
]

MAX_LINE_CHARS = 2000
"""Longer lines are cut in `read_file` output, with a note of how much was left out."""
READ_OUTPUT_CHARS = 60_000
"""`read_file` stops before its output passes this many characters and says where to go on."""
LIST_LIMIT = 500
"""At most this many entries, paths or matching lines in one `ls`, `glob` or `grep` answer."""


def error_message(
    message: Any, runtime: ToolRuntime, tool: str, path: str | None = None
) -> ToolMessage:
    """An error result for `tool` that the model reads and acts on.

    `message` is text, or a backend's `BackendError` (worded by `describe_error`; `path`,
    the path the tool was called with, names the file when the error names none).
    """
    return tool_error(
        content=describe_error(message, path, tool=tool),
        tool_call_id=runtime.tool_call_id,
        name=tool,
    )


_VERBS = {
    "ls": "list",
    "read_file": "read",
    "write_file": "write",
    "edit_file": "edit",
    "delete": "delete",
    "glob": "search",
    "grep": "search",
    "upload": "upload",
    "download": "download",
}


def describe_error(
    error: BackendError | str | None, path: str | None = None, *, tool: str = ""
) -> str:
    """The model-facing text of a backend result's `error`.

    A `BackendError` is worded by its kind: what happened and what to do next. Text, and
    an error's `message` (a policy's refusal, the words of a backend written for the Deep
    Agents API), is returned unchanged. `path` is used when the error names none; `tool`
    picks the verb ("cannot delete ...") and the advice that fits the tool.
    """
    if error is None:
        return ""
    if not isinstance(error, BackendError) or error.message is not None:
        return str(error)
    p = error.path if error.path is not None else (path or "")
    verb = _VERBS.get(tool, "use")
    kind = error.kind
    detail = error.detail
    aside = f" ({detail})" if detail else ""
    if kind is ErrorKind.NOT_FOUND:
        if tool in ("ls", "glob", "grep"):
            return f"Error: directory '{p}' not found. Use ls on its parent to see what exists."
        return f"Error: File '{p}' not found"
    if kind is ErrorKind.PERMISSION:
        return (
            f"Error: permission denied: cannot {verb} '{p}'{aside}. Do not retry this path; "
            "work within what is allowed or ask the user."
        )
    if kind is ErrorKind.IS_DIRECTORY:
        if tool in ("write_file", "upload"):
            return (
                f"Error: '{p}' is a directory{aside}. Write to a file path inside it instead."
            )
        return f"Error: '{p}' is a directory{aside}. Use ls to see what it holds."
    if kind is ErrorKind.INVALID:
        if not p:
            return f"Error: {detail or 'the request is not valid'}."
        if _is_normal_path(p):
            # The path is a clean absolute path, so an argument is what is wrong.
            advice = (
                "Give old_string as text copied exactly from the file, and a new_string "
                "that differs from it."
                if tool == "edit_file"
                else "Use another path, or fix the arguments, and call the tool again."
            )
            return f"Error: cannot {verb} '{p}' ({detail or 'the request is not valid'}). {advice}"
        return (
            f"Error: cannot {verb} '{p}' ({detail or 'not a usable path'}). Give an absolute "
            "path inside the filesystem, such as `/notes.md`."
        )
    if kind is ErrorKind.NOT_A_DIRECTORY:
        return (
            f"Error: '{p}' is a file, not a directory. Use read_file to read it, or choose "
            "a path that does not go through it."
        )
    if kind is ErrorKind.EXISTS:
        return f"Error: '{p}' already exists. Use edit_file to change it, or choose another path."
    if kind is ErrorKind.OUTSIDE_ROOT:
        return (
            f"Error: '{p}' leads outside the filesystem root{aside}. "
            "Use a path inside the root; links that point out of it are not followed."
        )
    if kind is ErrorKind.TOO_LARGE:
        size = f" is {error.count:,} bytes" if error.count is not None else " is too large"
        bound = f", over the {error.limit:,}-byte limit" if error.limit is not None else ""
        when = f" {detail}" if detail else ""
        if tool in ("read_file", "grep", "download"):
            advice = "Read it in pages with offset/limit, or search it with grep."
        elif tool == "edit_file":
            advice = (
                "Files this large cannot be edited in place; keep the content in several "
                "smaller files (write_file) and edit those."
            )
        else:
            advice = "Split the content into several smaller files."
        return f"Error: '{p}'{when}{size}{bound}. {advice}"
    if kind is ErrorKind.BINARY:
        if tool != "edit_file":
            return f"Error: '{p}' is a binary file{aside} and cannot be shown as text."
        if detail:
            return (
                f"Error: '{p}' cannot be edited as text ({detail}): changing it as text "
                "would corrupt its bytes. Write the whole file anew with write_file instead."
            )
        return (
            f"Error: '{p}' is a binary file and cannot be edited as text. "
            "Write the whole file anew with write_file instead."
        )
    if kind is ErrorKind.PAST_END:
        lines = error.count if error.count is not None else 0
        offset = error.limit if error.limit is not None else lines
        return (
            f"Error: offset {offset} is past the end of '{p}', which has {lines} lines. "
            f"Use an offset below {lines}."
        )
    if kind is ErrorKind.NO_MATCH:
        return (
            f"Error: old_string was not found in '{p}'. Read the file and copy the text "
            "exactly, including whitespace and indentation."
        )
    if kind is ErrorKind.NOT_UNIQUE:
        return (
            f"Error: old_string appears {error.count} times in '{p}'. Add surrounding lines "
            "to make it unique, or set replace_all=true to replace every occurrence."
        )
    if kind is ErrorKind.CHANGED:
        return (
            f"Error: '{p}' changed while this {verb} ran (another writer); nothing was "
            "changed. Read it again and retry."
        )
    if kind is ErrorKind.LIMIT:
        what = detail or "the request"
        bound = f" (limit {error.limit:,})" if error.limit is not None else ""
        return (
            f"Error: {what}{bound}. Use a simpler pattern, a narrower path, or a smaller "
            "request."
        )
    if kind is ErrorKind.UNSUPPORTED:
        return (
            f"Error: this filesystem cannot {detail or verb} '{p}'; "
            "its backend does not support it."
        )
    where = f" '{p}'" if p else ""
    return (
        f"Error: could not {verb}{where}: {detail or 'the backend failed'}. The request "
        "itself is not the cause; retry once, and if it fails again tell the user."
    )


def _is_normal_path(path: str) -> bool:
    """Whether `path` is already a clean absolute virtual path (so it is not the problem)."""
    try:
        return normalize_path(path) == path
    except PathError:
        return False


def _format_ls(path: str, entries: list[dict]) -> str:
    if not entries:
        return f"(no files under `{path}`)"
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


def _format_window(
    lines: list[str], start: int, total: int | None, next_offset: int | None, lossy: bool
) -> str:
    """Numbered rows for `lines`, the file's lines from the 0-based line `start`."""
    rows: list[str] = []
    if lossy:
        rows.append("[note: this file is not valid UTF-8; undecodable bytes are shown as \ufffd]")
    used = 0
    end = start + len(lines)
    for number in range(start, end):
        line = lines[number - start]
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
    if next_offset is not None:
        of = f" of {total}" if total is not None else ""
        rows.append(
            f"[showing lines {start + 1}-{end}{of}; "
            f"call read_file with offset={next_offset} to read more]"
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


def _image_message(path: str, data: FileData, runtime: ToolRuntime) -> ToolMessage:
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


def ls_answer(result: Any, path: str, runtime: ToolRuntime) -> Any:
    """The `ls` tool's answer."""
    if result.error:
        return error_message(result.error, runtime, "ls", path)
    return _format_ls(path, result.entries or [])


def read_answer(result: Any, file_path: str, offset: int, limit: int, runtime: ToolRuntime) -> Any:
    """The `read_file` tool's answer: numbered text, an image, or an error.

    A result with window fields (`start_line`, ...) holds only the requested lines; one
    without them holds the whole file (an empty or binary file, or a backend that does not
    page), which is paged here.
    """
    if result.error:
        return error_message(result.error, runtime, "read_file", file_path)
    data = result.file_data
    if _extension(file_path) in IMAGE_EXTENSIONS:
        return _image_message(file_path, data, runtime)
    if getattr(result, "no_lines_requested", False):
        return f"(no lines of `{file_path}` were requested; give a limit of 1 or more)"
    view = text_view(data)
    if view.text is None:
        error = BackendError(ErrorKind.BINARY, file_path, f"{view.size:,} bytes")
        return error_message(error, runtime, "read_file")
    start_line = getattr(result, "start_line", None)
    if start_line is not None:
        lines = view.text.splitlines()
        return _format_window(
            lines, start_line - 1, result.total_lines, result.next_offset, view.lossy
        )
    lines = view.text.splitlines()
    if not lines:
        return f"(the file `{file_path}` is empty)"
    if offset >= len(lines):
        error = BackendError(ErrorKind.PAST_END, file_path, count=len(lines), limit=offset)
        return error_message(error, runtime, "read_file")
    end = min(len(lines), offset + limit)
    more = end if end < len(lines) else None
    return _format_window(lines[offset:end], offset, len(lines), more, view.lossy)


def change_answer(
    result: Any, runtime: ToolRuntime, tool: str, message: str, path: str | None = None
) -> Any:
    """The answer of `write_file`/`edit_file`/`delete`, with the `files` update for in-state
    backends; `path` is the path the tool was called with (for errors that name none)."""
    if result.error:
        return error_message(result.error, runtime, tool, path)
    tool_message = ToolMessage(content=message, tool_call_id=runtime.tool_call_id, name=tool)
    if result.files_update:
        return Command(update={"files": result.files_update, "messages": [tool_message]})
    return tool_message


def glob_answer(result: Any, pattern: str, path: str, runtime: ToolRuntime) -> Any:
    """The `glob` tool's answer."""
    if result.error:
        return error_message(result.error, runtime, "glob", path)
    paths = [m["path"] for m in result.matches or []]
    note = ""
    if getattr(result, "truncated", False):
        if getattr(result, "truncation_reason", None) == "unreadable":
            note = "[some directories could not be read, so files in them are not listed]"
        else:
            note = "[the search stopped early; narrow the pattern or the path to see the rest]"
    if not paths:
        return f"No files match {pattern!r} under `{path}`." + (f"\n{note}" if note else "")
    shown = paths[:LIST_LIMIT]
    if len(paths) > LIST_LIMIT:
        shown.append(f"[{len(paths) - LIST_LIMIT} more files not shown]")
    if note:
        shown.append(note)
    return "\n".join(shown)


def grep_answer(
    result: Any, pattern: str, mode: str, runtime: ToolRuntime, path: str | None = None
) -> Any:
    """The `grep` tool's answer in the requested output mode (`path`: the searched path)."""
    if result.error:
        return error_message(result.error, runtime, "grep", path)
    answer = _format_grep(pattern, result.matches or [], mode)
    if getattr(result, "truncated", False):
        answer += (
            f"\n[the search stopped after {len(result.matches or [])} matches; more exist. "
            "Narrow the path, glob or pattern, or raise max_count, to see the rest]"
        )
    skipped = getattr(result, "skipped", None)
    if skipped:
        shown = ", ".join(f"`{p}`" for p in skipped[:10]) + (" …" if len(skipped) > 10 else "")
        answer += (
            f"\n[not searched, too large for grep: {shown}; page through them with "
            "read_file instead]"
        )
    return answer


def write_message(result: Any) -> str:
    """Success text of `write_file`."""
    return f"Wrote `{result.path}`."


def edit_message(result: Any) -> str:
    """Success text of `edit_file`."""
    n = result.occurrences or 0
    return f"Edited `{result.path}`: replaced {n} occurrence{'s' if n != 1 else ''}."
