"""What the filesystem tools answer: backend results turned into tool results.

Text answers are bounded (long lines cut, long listings and reads stopped with a note
saying how to go on) so one call never floods the context.
"""

from __future__ import annotations

import base64
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from fathom.backends.utils import IMAGE_EXTENSIONS, file_bytes, text_view

__all__ = [
    "LIST_LIMIT",
    "MAX_LINE_CHARS",
    "READ_OUTPUT_CHARS",
    "change_answer",
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


def error_message(message: str, runtime: ToolRuntime, tool: str) -> ToolMessage:
    """An error result for `tool` that the model reads and acts on."""
    return ToolMessage(
        content=message, tool_call_id=runtime.tool_call_id, name=tool, status="error"
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
        return error_message(result.error, runtime, "ls")
    return _format_ls(path, result.entries or [])


def read_answer(result: Any, file_path: str, offset: int, limit: int, runtime: ToolRuntime) -> Any:
    """The `read_file` tool's answer: numbered text, an image, or an error."""
    if result.error:
        return error_message(result.error, runtime, "read_file")
    data = result.file_data
    if _extension(file_path) in IMAGE_EXTENSIONS:
        return _image_message(file_path, data, runtime)
    view = text_view(data)
    if view.text is None:
        return error_message(
            f"Error: '{file_path}' is a binary file ({view.size:,} bytes) and cannot be "
            "shown as text.",
            runtime,
            "read_file",
        )
    text = _format_read(file_path, view.text, offset, limit, view.lossy)
    if text.startswith("Error:"):
        return error_message(text, runtime, "read_file")
    return text


def change_answer(result: Any, runtime: ToolRuntime, tool: str, message: str) -> Any:
    """The answer of `write_file`/`edit_file`, with the `files` update for in-state backends."""
    if result.error:
        return error_message(result.error, runtime, tool)
    tool_message = ToolMessage(content=message, tool_call_id=runtime.tool_call_id, name=tool)
    if result.files_update:
        return Command(update={"files": result.files_update, "messages": [tool_message]})
    return tool_message


def glob_answer(result: Any, pattern: str, path: str, runtime: ToolRuntime) -> Any:
    """The `glob` tool's answer."""
    if result.error:
        return error_message(result.error, runtime, "glob")
    paths = [m["path"] for m in result.matches or []]
    if not paths:
        return f"No files match {pattern!r} under {path}."
    shown = paths[:LIST_LIMIT]
    if len(paths) > LIST_LIMIT:
        shown.append(f"[{len(paths) - LIST_LIMIT} more files not shown]")
    return "\n".join(shown)


def grep_answer(result: Any, pattern: str, mode: str, runtime: ToolRuntime) -> Any:
    """The `grep` tool's answer in the requested output mode."""
    if result.error:
        return error_message(result.error, runtime, "grep")
    answer = _format_grep(pattern, result.matches or [], mode)
    skipped = getattr(result, "skipped", None)
    if skipped:
        shown = ", ".join(skipped[:10]) + (" …" if len(skipped) > 10 else "")
        answer += (
            f"\n[not searched, too large for grep: {shown}; page through them with "
            "read_file instead]"
        )
    return answer


def write_message(result: Any) -> str:
    """Success text of `write_file`."""
    return f"Wrote {result.path}."


def edit_message(result: Any) -> str:
    """Success text of `edit_file`."""
    n = result.occurrences or 0
    return f"Edited {result.path}: replaced {n} occurrence{'s' if n != 1 else ''}."
