"""What the filesystem tools answer: backend results turned into tool results.

Text answers are bounded (long lines cut, long listings and reads stopped with a note
saying how to go on) so one call never floods the context. `describe_error` is the one
place that words a backend's typed error (`BackendError`) for the model.

Where the Deep Agents reference has a fixed answer that callers and prompts branch on
(`"No matches found"`, `"No files found"`, `"Error: File '/x' not found"`, `"Partial
matches:"`, `"[Output was truncated due to size limits"`, the success lines of the changing
tools), the answer is that string, or starts with it and fathom's guidance follows.
"""

from __future__ import annotations

import base64
import re
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
    "EMPTY_CONTENT_WARNING",
    "GLOB_PATHLESS_DENIED_HINT",
    "GLOB_TRUNCATION_NOTE",
    "GLOB_UNREADABLE_NOTE",
    "GREP_TRUNCATION_NOTE",
    "LIST_LIMIT",
    "MAX_LINE_CHARS",
    "NO_FILES_FOUND",
    "NO_LINES_REQUESTED_WARNING",
    "NO_MATCHES_FOUND",
    "PARTIAL_MATCHES",
    "READ_FILE_TRUNCATION_MSG",
    "READ_OUTPUT_CHARS",
    "TRUNCATION_GUIDANCE",
    "change_answer",
    "delete_message",
    "describe_error",
    "edit_message",
    "error_message",
    "glob_answer",
    "grep_answer",
    "ls_answer",
    "read_answer",
    "regex_literal_hint",
    "write_message",
]

MAX_LINE_CHARS = 2000
"""Longer lines are cut in `read_file` output, with a note of how much was left out."""
READ_OUTPUT_CHARS = 60_000
"""`read_file` stops before its output passes this many characters and says where to go on."""
LIST_LIMIT = 500
"""At most this many entries, paths or matching lines in one `ls`, `glob` or `grep` answer."""

TRUNCATION_GUIDANCE = "... [results truncated, try being more specific with your parameters]"
"""Ends an answer part cut to its size bound (the reference's marker, also its
`deepagents.backends.utils.TRUNCATION_GUIDANCE`)."""

NO_FILES_FOUND = "No files found"
"""The whole answer of an `ls` or `glob` that found nothing (the reference's words)."""
NO_MATCHES_FOUND = "No matches found"
"""How a `grep` that matched nothing answers (the reference's words); a note may follow."""
PARTIAL_MATCHES = "Partial matches:"
"""Heads the matches a failed `grep` still found, after its error (the reference's words)."""

EMPTY_CONTENT_WARNING = "System reminder: File exists but has empty contents"
"""The whole answer of a `read_file` of an empty (or blank) file: the reference's marker,
which its `read_file` description teaches models to recognise."""

NO_LINES_REQUESTED_WARNING = (
    "System reminder: `limit` was {limit}, so no lines were read: the file was not looked at "
    "and may well have content. Call read_file with a limit of 1 or more to read it."
)
"""The answer of a `read_file` asked for no lines (`limit` ≤ 0). It must not read like
`EMPTY_CONTENT_WARNING`: a model told a file is empty may overwrite it."""

READ_FILE_TRUNCATION_MSG = (
    "\n\n[Output was truncated due to size limits. Lines of {file_path} this long cannot be "
    "shown whole; if you need them, reformat the file into shorter lines first (pretty-print "
    "JSON, for instance), then read it again.]"
)
"""Appended (with `{file_path}` filled in) to a `read_file` answer whose lines were cut at
`MAX_LINE_CHARS`. A read stopped at `READ_OUTPUT_CHARS` says where to continue instead; both
start with the reference's marker `[Output was truncated due to size limits`."""

GREP_TRUNCATION_NOTE = (
    "Note: the search stopped at its match limit, so more matches exist than are shown. "
    "Narrow the pattern, path or glob, or raise max_count, to see the rest."
)
"""Follows (after a blank line) the matches of a `grep` that stopped early."""

GLOB_TRUNCATION_NOTE = (
    "Note: the search stopped at its time or size limit, so the list above is incomplete. "
    "Narrow the pattern or the path to see the rest."
)
"""Follows (after a blank line) the paths of a `glob` that stopped early."""

GLOB_UNREADABLE_NOTE = (
    "Note: some directories could not be read, so files in them are missing from the list "
    "above. A narrower search will not show them; go on with what is listed, or report "
    "that those directories are not accessible."
)
"""Follows the paths of a `glob` that skipped unreadable directories (narrowing cannot help)."""

GLOB_PATHLESS_DENIED_HINT = (
    ". A glob without `path` is checked against the root, not against the directories its "
    "pattern names: give a `path` inside an allowed directory and a pattern relative to it."
)
"""Appended to the permission error of a `glob` called without `path`."""

_REGEX_SIGNALS = re.compile(r"\||\.\*|\.\+|\\[.wWdDsSbB(){}\[\]|+*?^$]")
"""Signs that a `grep` pattern was meant as a regex: `|`, `.*`, `.+`, or an escaped
metacharacter. A bare `.`, `(` or `[` is not one: literal code searches are full of them."""


def regex_literal_hint(pattern: str) -> str | None:
    """A note for a `grep` that matched nothing with a pattern that looks like a regex
    (`grep` is literal), or `None` when the pattern shows no sign of one."""
    if not isinstance(pattern, str) or not _REGEX_SIGNALS.search(pattern):
        return None
    return (
        "Note: grep matches literal text, not regex: `|`, `.*` and `\\.` were searched for as "
        "those very characters. Search for the literal text you expect, and run one search "
        "per alternative instead of `a|b`."
    )


def error_message(
    message: Any,
    runtime: ToolRuntime,
    tool: str,
    path: str | None = None,
    *,
    old_string: str | None = None,
) -> ToolMessage:
    """An error result for `tool` that the model reads and acts on.

    `message` is text, or a backend's `BackendError` (worded by `describe_error`; `path`,
    the path the tool was called with, names the file when the error names none, and
    `old_string` is an edit's text to replace).
    """
    return tool_error(
        content=describe_error(message, path, tool=tool, old_string=old_string),
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


_PREFIXED = frozenset({"read_file", "ls", "glob"})
"""The tools whose answer puts `Error: ` before a backend's own error text."""


def describe_error(
    error: BackendError | str | None,
    path: str | None = None,
    *,
    tool: str = "",
    old_string: str | None = None,
) -> str:
    """The model-facing text of a backend result's `error`.

    A `BackendError` is worded by its kind: what happened and what to do next, led by the
    reference's words where it has fixed ones (`Error: File '/x' not found`, `Error: String
    not found in file: '...'` when `old_string` is given). Text, and an error's `message`
    (a policy's refusal, the words of a backend written for the Deep Agents API), is
    returned unchanged. `path` is used when the error names none; `tool` picks the verb
    ("cannot delete ...") and the advice that fits the tool.
    """
    if error is None:
        return ""
    if not isinstance(error, BackendError) or error.message is not None:
        text = str(error)
        if tool in _PREFIXED and not text.startswith("Error"):
            return f"Error: {text}"  # as the reference's read_file, ls and glob do
        return text
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
            f"Error: Line offset {offset} exceeds file length ({lines} lines) of '{p}'. "
            f"Use an offset below {lines}."
        )
    if kind is ErrorKind.NO_MATCH:
        if old_string is not None:
            return f"Error: String not found in file: '{old_string}'"
        return (
            f"Error: old_string was not found in '{p}'. Read the file and copy the text "
            "exactly, including whitespace and indentation."
        )
    if kind is ErrorKind.NOT_UNIQUE:
        advice = (
            "Add surrounding lines to make it unique, or set replace_all=True to replace "
            "every occurrence."
        )
        if old_string is not None:
            return f"Error: String '{old_string}' appears {error.count} times in file. {advice}"
        return f"Error: old_string appears {error.count} times in '{p}'. {advice}"
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


def _bounded(text: str, limit: int = READ_OUTPUT_CHARS) -> str:
    """`text`, or its first `limit` characters and `TRUNCATION_GUIDANCE` (a backend's very
    long error, for instance)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - len(TRUNCATION_GUIDANCE) - 1]}\n{TRUNCATION_GUIDANCE}"


def _format_ls(entries: list[dict]) -> str:
    if not entries:
        return NO_FILES_FOUND
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
    lines: list[str],
    start: int,
    total: int | None,
    next_offset: int | None,
    lossy: bool,
    file_path: str,
    budget: int = READ_OUTPUT_CHARS,
) -> str:
    """Numbered rows for `lines`, the file's lines from the 0-based line `start`, in at
    most about `budget` characters."""
    rows: list[str] = []
    if lossy:
        rows.append("[note: this file is not valid UTF-8; undecodable bytes are shown as \ufffd]")
    used = 0
    cut_any = False
    end = start + len(lines)
    for number in range(start, end):
        line = lines[number - start]
        if len(line) > MAX_LINE_CHARS:
            cut = len(line) - MAX_LINE_CHARS
            line = f"{line[:MAX_LINE_CHARS]} [… {cut} more characters on this line]"
            cut_any = True
        row = f"{number + 1:6d}\t{line}"
        if used + len(row) > budget and number == start:  # not even one line fits
            rows.append(row[: max(budget - used, 0)])
            rows.append(
                f"[Output was truncated due to size limits: line {number + 1} is longer than "
                f"the {budget:,} characters one answer may hold, so only its start is shown; "
                f"call read_file with offset={number + 1} for the lines after it]"
            )
            return "\n".join(rows)
        if used + len(row) > budget:
            rows.append(
                f"[Output was truncated due to size limits: it stopped at line {number} to "
                f"stay under {budget:,} characters; call read_file with offset={number} to "
                "continue]"
            )
            return _with_cut_note("\n".join(rows), cut_any, file_path)
        rows.append(row)
        used += len(row) + 1
    if next_offset is not None:
        of = f" of {total}" if total is not None else ""
        rows.append(
            f"[showing lines {start + 1}-{end}{of}; "
            f"call read_file with offset={next_offset} to read more]"
        )
    return _with_cut_note("\n".join(rows), cut_any, file_path)


def _with_cut_note(text: str, cut_any: bool, file_path: str) -> str:
    """`text`, followed by `READ_FILE_TRUNCATION_MSG` when some of its lines were cut."""
    return text + READ_FILE_TRUNCATION_MSG.format(file_path=file_path) if cut_any else text


def _format_grep(matches: list[dict], mode: str) -> str:
    if not matches:
        return NO_MATCHES_FOUND
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
        additional_kwargs={"read_file_path": path, "read_file_media_type": mime},
    )


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


def ls_answer(result: Any, path: str, runtime: ToolRuntime) -> Any:
    """The `ls` tool's answer: one entry a line (directories end with `/`; files show
    their size and time), or `"No files found"`."""
    if result.error:
        return error_message(result.error, runtime, "ls", path)
    return _format_ls(result.entries or [])


def _with_offset_notice(answer: Any, offset: int) -> Any:
    """`answer` telling the model that its negative `offset` was read as 0."""
    if offset >= 0 or not isinstance(answer, str):
        return answer
    return (
        f"{answer}\n[offset {offset} is before the start of the file; it was read from "
        "line 1 instead]"
    )


def read_answer(
    result: Any,
    file_path: str,
    offset: int,
    limit: int,
    runtime: ToolRuntime,
    max_chars: int = READ_OUTPUT_CHARS,
) -> Any:
    """The `read_file` tool's answer: numbered text, an image, or an error.

    A result with window fields (`start_line`, ...) holds only the requested lines; one
    without them holds the whole file (an empty or binary file, or a backend that does not
    page), which is paged here. A negative `offset` reads from the start and says so; a
    `limit` of 0 or less reads nothing and says so (`NO_LINES_REQUESTED_WARNING`); text
    stops before `max_chars` characters and says where to continue.
    """
    if result.error:
        return error_message(result.error, runtime, "read_file", file_path)
    data = result.file_data
    if data is None:
        return error_message(f"Error: no data returned for '{file_path}'", runtime, "read_file")
    start_line = getattr(result, "start_line", None)
    if getattr(result, "no_lines_requested", False):
        return NO_LINES_REQUESTED_WARNING.format(limit=limit)
    if start_line is None and not file_bytes(data):
        return EMPTY_CONTENT_WARNING
    if _extension(file_path) in IMAGE_EXTENSIONS:
        return _image_message(file_path, data, runtime)
    view = text_view(data)
    if view.text is not None and start_line is None and not view.text.strip():
        return EMPTY_CONTENT_WARNING
    if limit <= 0:
        return NO_LINES_REQUESTED_WARNING.format(limit=limit)
    if view.text is None:
        error = BackendError(ErrorKind.BINARY, file_path, f"{view.size:,} bytes")
        return error_message(error, runtime, "read_file")
    if start_line is not None:
        lines = view.text.splitlines()
        window = _format_window(
            lines, start_line - 1, result.total_lines, result.next_offset, view.lossy,
            file_path, max_chars,
        )
        return _with_offset_notice(window, offset)
    lines = view.text.splitlines()
    first = max(offset, 0)
    if first >= len(lines):
        error = BackendError(ErrorKind.PAST_END, file_path, count=len(lines), limit=first)
        return error_message(error, runtime, "read_file")
    end = min(len(lines), first + limit)
    more = end if end < len(lines) else None
    window = _format_window(
        lines[first:end], first, len(lines), more, view.lossy, file_path, max_chars
    )
    return _with_offset_notice(window, offset)


def change_answer(
    result: Any,
    runtime: ToolRuntime,
    tool: str,
    message: str,
    path: str | None = None,
    *,
    old_string: str | None = None,
) -> Any:
    """The answer of `write_file`/`edit_file`/`delete`, with the `files` update for in-state
    backends; `path` is the path the tool was called with (for errors that name none),
    `old_string` an edit's text to replace (named when it is not found)."""
    if result.error:
        return error_message(result.error, runtime, tool, path, old_string=old_string)
    tool_message = ToolMessage(
        content=message, tool_call_id=runtime.tool_call_id, name=tool, status="success"
    )
    if result.files_update:
        return Command(update={"files": result.files_update, "messages": [tool_message]})
    return tool_message


def glob_answer(result: Any, pattern: str, path: str | None, runtime: ToolRuntime) -> Any:
    """The `glob` tool's answer: one path a line, or `"No files found"`; a note follows
    (after a blank line) when the search stopped early or skipped unreadable directories."""
    if result.error:
        return error_message(result.error, runtime, "glob", path)
    paths = [m["path"] for m in result.matches or []]
    note = ""
    if getattr(result, "truncated", False):
        unreadable = getattr(result, "truncation_reason", None) == "unreadable"
        note = GLOB_UNREADABLE_NOTE if unreadable else GLOB_TRUNCATION_NOTE
    if not paths:
        return NO_FILES_FOUND + (f"\n\n{note}" if note else "")
    shown = paths[:LIST_LIMIT]
    if len(paths) > LIST_LIMIT:
        shown.append(f"[{len(paths) - LIST_LIMIT} more files not shown]")
    text = "\n".join(shown)
    return f"{text}\n\n{note}" if note else text


def grep_answer(
    result: Any,
    pattern: str,
    mode: str,
    runtime: ToolRuntime,
    path: str | None = None,
    *,
    hint: bool = True,
) -> Any:
    """The `grep` tool's answer in the requested output mode (`path`: the searched path).

    No match answers `"No matches found"` (with a note when the pattern looks like a
    regex, unless `hint` is false); a search that stopped early ends with
    `GREP_TRUNCATION_NOTE`; an error that still found matches is an error answer listing
    them under `"Partial matches:"`, each part bounded.
    """
    matches = result.matches or []
    if result.error:
        failed = error_message(result.error, runtime, "grep", path)
        failed.content = _bounded(failed.text)
        if matches:
            found = _bounded(_format_grep(matches, mode))
            failed.content = f"{failed.content}\n\n{PARTIAL_MATCHES}\n{found}"
        return failed
    answer = _format_grep(matches, mode)
    notes: list[str] = []
    if getattr(result, "truncated", False):
        notes.append(GREP_TRUNCATION_NOTE)
    elif not matches and hint and (regex := regex_literal_hint(pattern)):
        notes.append(regex)
    skipped = getattr(result, "skipped", None)
    if skipped:
        shown = ", ".join(f"`{p}`" for p in skipped[:10]) + (" …" if len(skipped) > 10 else "")
        notes.append(
            f"[not searched, too large for grep: {shown}; page through them with "
            "read_file instead]"
        )
    return "\n\n".join([answer, *notes])


def write_message(result: Any) -> str:
    """Success text of `write_file` (the reference's words)."""
    return f"Updated file {result.path}"


def edit_message(result: Any) -> str:
    """Success text of `edit_file` (the reference's words)."""
    n = result.occurrences or 0
    return f"Successfully replaced {n} instance(s) of the string in '{result.path}'"


def delete_message(result: Any) -> str:
    """Success text of `delete` (the reference's words)."""
    return f"Deleted {result.path}" if result.path else "Deleted."
