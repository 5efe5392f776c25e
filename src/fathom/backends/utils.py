"""File data helpers shared by the backends: creation, decoding, editing and searching text."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, Literal, TypeVar, overload

from fathom.backends._globbing import (
    GLOB_TRAVERSAL_REASON,
    GlobBudget,
    GlobError,
    glob_matches,
)
from fathom.backends._paths import PathError, normalize_dir, normalize_path
from fathom.backends.errors import EMPTY_OLD_STRING_ERROR, BackendError, ErrorKind
from fathom.backends.protocol import (
    ContextLine,
    DeleteResult,
    EditResult,
    FileInfo,
    GrepMatch,
    GrepResult,
    ReadResult,
)
from fathom.state import FileData

__all__ = [
    "EMPTY_CONTENT_WARNING",
    "EMPTY_OLD_STRING_ERROR",
    "IMAGE_EXTENSIONS",
    "MAX_EDIT_BYTES",
    "MAX_LINE_LENGTH",
    "MAX_VIDEO_INPUT_BYTES",
    "TOOL_RESULT_TOKEN_LIMIT",
    "TRUNCATION_GUIDANCE",
    "TRUNCATION_MARKER_TEMPLATE",
    "FileInfo",
    "FileType",
    "GrepMatch",
    "InvalidGlobPatternError",
    "TextView",
    "apply_edit",
    "build_grep_results_dict",
    "check_empty_content",
    "compile_grep_include_glob",
    "create_file_data",
    "delete_target",
    "edit_text",
    "file_bytes",
    "file_data_to_string",
    "format_content_with_line_numbers",
    "format_grep_matches",
    "grep_files",
    "grep_lines",
    "grep_matches_from_files",
    "invalid_path",
    "iso_timestamp",
    "normalize_read_bounds",
    "normalized",
    "now_iso",
    "pattern_error",
    "perform_string_replacement",
    "positive_seconds",
    "read_window",
    "regex_literal_hint",
    "sanitize_tool_call_id",
    "slice_read_response",
    "text_view",
    "to_posix_path",
    "too_large",
    "truncate_if_too_long",
    "update_file_data",
    "validate_path",
]

P = TypeVar("P")

IMAGE_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
"""Extensions `read_file` returns as image content blocks, on every backend."""

MAX_EDIT_BYTES = 5 * 1024 * 1024
"""Largest file that `write_file`, `edit_file` and `grep` handle in one piece (5 MiB)."""

_SNIFF_BYTES = 8192


def now_iso() -> str:
    """The current UTC time as an ISO-8601 string."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def positive_seconds(value: object) -> float | None:
    """`value` as seconds when it is a positive finite number, else `None` (a bool, NaN,
    infinity, zero or a negative number is no timeout)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < float("inf") else None


def iso_timestamp(timestamp: float) -> str:
    """A POSIX timestamp as ISO-8601 UTC (`2026-11-30T05:00:00Z`), or '' when out of range."""
    try:
        moment = datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def create_file_data(
    content: str | bytes, created_at: str | None = None, encoding: str = "utf-8"
) -> FileData:
    """Build a `FileData` from text or bytes.

    With `encoding="utf-8"` (the default), text is stored as text; bytes that are UTF-8
    text without NUL bytes are stored as text, anything else as base64, so no byte is lost.
    With `encoding="base64"`, a `str` is already base64 text (as in the Deep Agents API) and
    is stored as given; bytes are base64-encoded.

    Raises:
        ValueError: `encoding` is neither `"utf-8"` nor `"base64"`, or a base64 `str` is
            not valid base64.
    """
    if encoding not in ("utf-8", "base64"):
        raise ValueError(
            f"create_file_data: encoding must be 'utf-8' or 'base64', not {encoding!r}"
        )
    stamp = now_iso()
    created = created_at or stamp
    if encoding == "base64":
        if isinstance(content, bytes):
            text = base64.b64encode(content).decode("ascii")
        else:
            try:
                base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(
                    "create_file_data: content is not valid base64; pass the raw bytes, "
                    "or encoding='utf-8' for text"
                ) from None
            text = content
        return FileData(content=text, encoding="base64", created_at=created, modified_at=stamp)
    if isinstance(content, bytes):
        try:
            decoded = content.decode("utf-8")
        except UnicodeDecodeError:
            decoded = None
        if decoded is None or "\x00" in decoded[:_SNIFF_BYTES]:
            return FileData(
                content=base64.b64encode(content).decode("ascii"),
                encoding="base64",
                created_at=created,
                modified_at=stamp,
            )
        content = decoded
    return FileData(content=content, encoding="utf-8", created_at=created, modified_at=stamp)


def update_file_data(data: FileData, content: str) -> FileData:
    """A copy of `data` with new text content and a fresh modification time."""
    return FileData(
        content=content,
        encoding="utf-8",
        created_at=data.get("created_at") or now_iso(),
        modified_at=now_iso(),
    )


def file_bytes(data: FileData) -> bytes:
    """The raw bytes of a file."""
    if data.get("encoding") == "base64":
        try:
            return base64.b64decode(data["content"], validate=False)
        except (binascii.Error, ValueError):
            return data["content"].encode("utf-8", "replace")
    return data["content"].encode("utf-8")


@dataclass(frozen=True)
class TextView:
    """How a file reads as text."""

    text: str | None
    """The text, or `None` for a binary file."""
    size: int
    """Size in bytes."""
    lossy: bool = False
    """True when the bytes were not valid UTF-8 and were decoded with replacement characters."""

    @property
    def binary(self) -> bool:
        return self.text is None


def text_view(data: FileData) -> TextView:
    """Decode a file for the text tools.

    A file with a NUL byte near its start is binary. Other bytes that are not valid UTF-8
    (e.g. Latin-1 text) are decoded with U+FFFD replacement characters and marked `lossy`.
    """
    if data.get("encoding") != "base64":
        text = data["content"]
        if "\x00" in text[:_SNIFF_BYTES]:
            return TextView(None, len(text.encode("utf-8", "replace")))
        return TextView(text, len(text.encode("utf-8", "replace")))
    raw = file_bytes(data)
    if b"\x00" in raw[:_SNIFF_BYTES]:
        return TextView(None, len(raw))
    try:
        return TextView(raw.decode("utf-8"), len(raw))
    except UnicodeDecodeError:
        return TextView(raw.decode("utf-8", "replace"), len(raw), lossy=True)


def invalid_path(raw: object, error: PathError) -> BackendError:
    """The `INVALID` error for a path that `normalize_path` refused."""
    return BackendError(ErrorKind.INVALID, raw if isinstance(raw, str) else None, error.reason)


def normalized(normalize: Callable[[P], str], raw: P) -> str | BackendError:
    """`normalize(raw)`, or the `INVALID` error when it refuses the path."""
    try:
        return normalize(raw)
    except PathError as error:
        return invalid_path(raw, error)


def too_large(path: str | None, size: int, detail: str | None = None) -> BackendError | None:
    """The `TOO_LARGE` error when `size` bytes are over `MAX_EDIT_BYTES`, else `None`."""
    if size <= MAX_EDIT_BYTES:
        return None
    return BackendError(ErrorKind.TOO_LARGE, path, detail, count=size, limit=MAX_EDIT_BYTES)


def delete_target(file_path: str) -> str | DeleteResult:
    """`file_path` normalised for `delete`, or the refusal: a path `normalize_path` refuses,
    or `/` itself (deleting every file in one call is never what a model means)."""
    if isinstance(path := normalized(normalize_path, file_path), BackendError):
        return DeleteResult(error=path)
    if path == "/":
        return DeleteResult(error=BackendError(ErrorKind.INVALID, "/", "the root directory"))
    return path


def pattern_error(pattern: object, error: GlobError) -> BackendError:
    """The error for a glob pattern the matcher refused: `LIMIT` when it passed a bound
    (length, nesting, matching work), `INVALID` when it is malformed; its text is the
    reference's (`Path traversal not allowed in glob pattern ...` for a `..` segment)."""
    shown = repr(pattern) if len(repr(pattern)) <= 80 else repr(pattern)[:77] + "..."
    detail = f"the glob pattern {shown} {error.reason}"
    text = _glob_refusal(shown, error)
    if error.limit is not None:
        return BackendError(ErrorKind.LIMIT, detail=detail, limit=error.limit, text=text)
    return BackendError(ErrorKind.INVALID, detail=detail, text=text)


def _glob_refusal(shown: str, error: GlobError) -> str:
    """The reference's text for a refused glob pattern (`shown` is its quoted form)."""
    if error.reason == GLOB_TRAVERSAL_REASON:
        return f"Path traversal not allowed in glob pattern {shown}"
    bound = f" (limit {error.limit})" if error.limit is not None else ""
    return f"Invalid glob pattern {shown}: {error.reason}{bound}"


def read_window(data: FileData, offset: int, limit: int, path: str | None) -> ReadResult:
    """The `ReadResult` for `limit` lines of `data` from the 0-based line `offset`.

    Text files come back as only the window (line endings as stored) with the window
    fields set; an empty or whitespace-only file comes back whole without them, a
    zero-line request comes back empty with `no_lines_requested`, and an offset at or past
    the last line is a `PAST_END` error. Binary files, and bytes that are not valid UTF-8,
    come back whole and untouched (so no byte is lost): the caller decodes and pages them.
    """
    view = text_view(data)
    if view.text is None or view.lossy:
        return ReadResult(file_data=data)
    text = view.text
    offset, limit = max(int(offset), 0), max(int(limit), 0)
    if not text.strip():
        return ReadResult(file_data=data)
    if limit == 0:
        return ReadResult(file_data=_with_content(data, ""), no_lines_requested=True)
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if offset >= total:
        return ReadResult(error=BackendError(ErrorKind.PAST_END, path, count=total, limit=offset))
    end = min(offset + limit, total)
    window = "".join(lines[offset:end])  # line endings kept: the text round-trips
    return ReadResult(
        file_data=_with_content(data, window),
        total_lines=total,
        start_line=offset + 1,
        end_line=end,
        next_offset=end if end < total else None,
    )


def _with_content(data: FileData, text: str) -> FileData:
    """A copy of `data` holding `text` as UTF-8, its timestamps kept."""
    copy = dict(data)
    copy["content"] = text
    copy["encoding"] = "utf-8"
    return copy  # type: ignore[return-value]


def apply_edit(
    path: str, text: str, old_string: str, new_string: str, replace_all: bool
) -> tuple[str, int] | EditResult:
    """Replace `old_string` in `text`; return `(new_text, occurrences)` or an error result.

    Line ends are matched as the reference's file backend reads them (text mode): in a
    file without carriage returns, `\r\n` and `\r` in both strings are read as `\n`, and
    in a file whose every line ends with `\r\n`, a `\n` in strings without carriage
    returns is read as `\r\n`; either way the file keeps its one kind of line end. An
    `old_string` that misses only because of a newline the file's end lacks says so
    (`detail`).
    """
    if old_string == "":
        return EditResult(error=BackendError(ErrorKind.INVALID, path, "old_string is empty"))
    if "\r" not in text and ("\r" in old_string or "\r" in new_string):
        old_string, new_string = _lf(old_string), _lf(new_string)
    elif _crlf_only(text) and "\n" in old_string and "\r" not in old_string + new_string:
        old_string, new_string = _crlf(old_string), _crlf(new_string)
    if old_string == new_string:
        return EditResult(
            error=BackendError(ErrorKind.INVALID, path, "old_string and new_string are the same")
        )
    count = text.count(old_string)
    if count == 0:
        return EditResult(error=BackendError(ErrorKind.NO_MATCH, path, _eof_hint(text, old_string)))
    if count > 1 and not replace_all:
        return EditResult(error=BackendError(ErrorKind.NOT_UNIQUE, path, count=count))
    if replace_all:
        return text.replace(old_string, new_string), count
    return text.replace(old_string, new_string, 1), 1


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _crlf_only(text: str) -> bool:
    """Whether every line end of `text` is `\r\n` (and it has one)."""
    lines = text.count("\n")
    return lines > 0 and text.count("\r\n") == lines and text.count("\r") == lines


def _eof_hint(text: str, old_string: str) -> str | None:
    """Why `old_string` missed when the only cause is its final newline, which the file's
    last line lacks; else `None`."""
    stripped = old_string.removesuffix("\n")
    if not old_string.endswith("\n") or not stripped or not text.endswith(stripped):
        return None
    found = text.count(stripped)
    hint = "old_string ends with a newline, but the file does not end with one"
    if found == 1:
        return f"{hint}; remove that newline from old_string (and new_string)"
    return (
        f"{hint}; without it, old_string appears {found} times: remove the newline and add "
        "surrounding context"
    )


def grep_lines(
    path: str,
    text: str,
    pattern: str,
    *,
    context_lines: int = 0,
    max_count: int | None = None,
) -> list[GrepMatch]:
    """Lines of `text` that contain the literal `pattern`, with 1-based numbers.

    With `context_lines > 0` each match carries up to that many neighbouring lines on each
    side (`context_before` / `context_after`); a neighbour that matches too is not repeated
    as context. At most `max_count` matches are returned (`None`: all).
    """
    lines = text.splitlines()
    numbers = [n for n, line in enumerate(lines, start=1) if pattern in line]
    if max_count is not None:
        numbers = numbers[: max(max_count, 0)]
    if context_lines <= 0:
        return [GrepMatch(path=path, line=n, text=lines[n - 1]) for n in numbers]
    hits = {n for n, line in enumerate(lines, start=1) if pattern in line}

    def context(numbers: range) -> list[ContextLine]:
        return [ContextLine(line=i, text=lines[i - 1]) for i in numbers if i not in hits]

    return [
        GrepMatch(
            path=path,
            line=n,
            text=lines[n - 1],
            context_before=context(range(max(1, n - context_lines), n)),
            context_after=context(range(n + 1, min(len(lines), n + context_lines) + 1)),
        )
        for n in numbers
    ]


def edit_text(
    path: str, data: FileData, old_string: str, new_string: str, replace_all: bool
) -> tuple[str, int] | EditResult:
    """Check that `data` can be edited as text and apply the edit: `(new_text, occurrences)`
    or the error result (`BINARY`, `TOO_LARGE`, or `apply_edit`'s)."""
    view = text_view(data)
    if view.text is None:
        return EditResult(error=BackendError(ErrorKind.BINARY, path))
    if view.lossy:
        return EditResult(error=BackendError(ErrorKind.BINARY, path, "not valid UTF-8"))
    if failure := too_large(path, view.size):
        return EditResult(error=failure)
    outcome = apply_edit(path, view.text, old_string, new_string, replace_all)
    if isinstance(outcome, EditResult):
        return outcome
    if failure := too_large(path, len(outcome[0].encode("utf-8")), "after the edit"):
        return EditResult(error=failure)
    return outcome


def grep_files(
    under: Callable[[str], list[tuple[str, FileData]]],
    pattern: str,
    path: str | None,
    glob: str | None,
    *,
    max_count: int | None = None,
    context_lines: int = 0,
) -> GrepResult:
    """`grep` over stored files: `under(directory)` lists `(path, data)` in path order.

    Binary files are not searched; files over `MAX_EDIT_BYTES` are named in `skipped`. The
    search stops once `max_count` matches are found and then reports `truncated` if any
    further match exists.
    """
    if isinstance(directory := normalized(normalize_dir, path), BackendError):
        return GrepResult(error=directory)
    budget = GlobBudget()  # bounds the matching work of this whole search
    try:
        if glob:
            glob_matches(glob, "", budget)  # refuse a bad pattern even with no files
    except GlobError as error:
        return GrepResult(error=pattern_error(glob, error))
    matches: list[GrepMatch] = []
    skipped: list[str] = []
    for file_path, data in under(directory):
        relative = file_path[len(directory) :] if file_path.startswith(directory) else ""
        try:
            if glob and relative and not glob_matches(glob, relative, budget):
                continue
        except GlobError as error:
            return GrepResult(error=pattern_error(glob, error))
        view = text_view(data)
        if view.text is None:
            continue
        if view.size > MAX_EDIT_BYTES:
            skipped.append(file_path)
            continue
        left = None if max_count is None else max_count - len(matches) + 1
        matches += grep_lines(
            file_path, view.text, pattern, context_lines=context_lines, max_count=left
        )
        if max_count is not None and len(matches) > max_count:
            return GrepResult(matches=matches[:max_count], truncated=True, skipped=skipped or None)
    return GrepResult(matches=matches, skipped=skipped or None)


# --------------------------------------------------------------------------- the reference's
# helpers
#
# `deepagents.backends.utils` also offers helpers that code written for the Deep Agents API
# imports (custom backends, tools that format results). They behave as the reference's do;
# fathom's own backends and tools use the helpers above.

FileType = Literal["text", "image", "audio", "video", "file"]
"""How a file is classified by its extension (the reference's classification)."""

EMPTY_CONTENT_WARNING = "System reminder: File exists but has empty contents"
"""`check_empty_content`'s answer for an empty (or whitespace-only) file."""

MAX_LINE_LENGTH = 5000
"""`format_content_with_line_numbers` cuts longer lines into numbered pieces (`5.1`, ...)."""

TOOL_RESULT_TOKEN_LIMIT = 20000
"""`truncate_if_too_long` keeps a result under about this many tokens (4 characters each)."""

TRUNCATION_GUIDANCE = "... [results truncated, try being more specific with your parameters]"
"""What `truncate_if_too_long` puts where it cut a result."""

TRUNCATION_MARKER_TEMPLATE = "... [{omitted_lines} lines truncated] ..."
"""The marker for lines left out of the middle of a preview (`omitted_lines` is their number)."""

MAX_VIDEO_INPUT_BYTES = 1024 * 1024 * 1024
"""The largest video the reference's `read_file` takes (1 GiB); fathom reads no video."""

_MAX_ID_BYTES = 128


class InvalidGlobPatternError(GlobError):
    """A glob pattern `compile_grep_include_glob` refuses (a `ValueError`, as the reference's):
    a `..` segment, or a pattern past a bound of the matcher."""


def _content_text(file_data: Mapping[str, Any]) -> str:
    """The stored content as one string: legacy content (a list of lines) is joined."""
    content = file_data["content"]
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        return "\n".join(content)
    if not isinstance(content, str):
        raise TypeError(
            "File content must be a string or a legacy list of strings, "
            f"got {type(content).__name__}."
        )
    return content


def file_data_to_string(file_data: FileData) -> str:
    """The content of `file_data` as a string, as stored (base64 content stays base64 text);
    legacy content (a list of lines) is joined with newlines.

    Raises:
        TypeError: the content is neither a string nor a list of strings.
    """
    return _content_text(file_data)


def _text_data(file_data: Mapping[str, Any]) -> FileData:
    """`file_data` with its content as one string (legacy lists joined), timestamps kept."""
    copy: dict[str, Any] = dict(file_data)
    copy["content"] = _content_text(file_data)
    copy.setdefault("encoding", "utf-8")
    return copy  # type: ignore[return-value]


def check_empty_content(content: str) -> str | None:
    """`EMPTY_CONTENT_WARNING` when `content` is empty or only whitespace, else `None`."""
    return EMPTY_CONTENT_WARNING if not content or not content.strip() else None


def to_posix_path(path: str) -> str:
    """`path` with every backslash turned into `/`."""
    return path.replace("\\", "/")


def sanitize_tool_call_id(tool_call_id: str) -> str:
    """A tool call id made safe as one path component: `.`, `/` and `\\` become `_`, and an
    id longer than 128 bytes becomes `call-<sha256 of the id>`."""
    safe = tool_call_id.replace(".", "_").replace("/", "_").replace("\\", "_")
    if len(safe.encode("utf-8")) > _MAX_ID_BYTES:
        return "call-" + hashlib.sha256(tool_call_id.encode("utf-8")).hexdigest()
    return safe


def validate_path(path: str, *, allowed_prefixes: Sequence[str] | None = None) -> str:
    """The canonical virtual form of `path` (leading `/`, forward slashes, `.` and `//`
    folded), or `ValueError`.

    Refused: a `..` component or a leading `~` (`Path traversal not allowed: ...`), a
    Windows drive (`C:...`), and, with `allowed_prefixes`, a path that starts with none
    of them. A name that merely contains dots (`foo..bar`) is fine.
    """
    if ".." in PurePosixPath(to_posix_path(path)).parts or path.startswith("~"):
        raise ValueError(f"Path traversal not allowed: {path}")
    if re.match(r"^[a-zA-Z]:", path):
        raise ValueError(
            f"Windows absolute paths are not supported: {path}. "
            "Use a virtual path that starts with /, such as /workspace/file.txt"
        )
    canonical = os.path.normpath(path).replace("\\", "/")
    if not canonical.startswith("/"):
        canonical = "/" + canonical
    if ".." in canonical.split("/"):
        raise ValueError(f"Path traversal detected after normalization: {path} -> {canonical}")
    if allowed_prefixes is not None and not any(canonical.startswith(p) for p in allowed_prefixes):
        raise ValueError(f"Path must start with one of {list(allowed_prefixes)}: {path}")
    return canonical


def format_content_with_line_numbers(content: str | list[str], start_line: int = 1) -> str:
    """`content` with a line number before each line: the number right-aligned to the
    widest one, then two spaces. A line longer than `MAX_LINE_LENGTH` is cut into pieces
    numbered `N`, `N.1`, `N.2`, ...; a final empty line (after the last newline) is left out.
    """
    if isinstance(content, str):
        lines = content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
    else:
        lines = list(content)
    rows: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=start_line):
        pieces = [line[i : i + MAX_LINE_LENGTH] for i in range(0, len(line), MAX_LINE_LENGTH)]
        for index, piece in enumerate(pieces or [""]):
            rows.append((str(number) if index == 0 else f"{number}.{index}", piece))
    width = max((len(marker) for marker, _ in rows), default=0)
    return "\n".join(f"{marker:>{width}}  {piece}" for marker, piece in rows)


def normalize_read_bounds(offset: int, limit: int) -> tuple[int, int]:
    """`(offset, limit)` as ints, each at least 0."""
    return max(int(offset), 0), max(int(limit), 0)


def slice_read_response(file_data: FileData, offset: int, limit: int) -> ReadResult:
    """The `ReadResult` of `limit` lines of `file_data` from the 0-based line `offset`, as
    fathom's backends answer `read` (see `ReadResult`): an offset past the end is an error
    (`Line offset N exceeds file length (M lines)`), an empty file comes back whole, a
    zero-line window empty with `no_lines_requested`. Legacy content is joined first."""
    offset, limit = normalize_read_bounds(offset, limit)
    return read_window(_text_data(file_data), offset, limit, None)


def perform_string_replacement(
    content: str, old_string: str, new_string: str, replace_all: bool = False
) -> tuple[str, int] | str:
    """Replace `old_string` in `content`: `(new_content, occurrences)`, or the error text.

    The errors are the reference's: `EMPTY_OLD_STRING_ERROR`; `String not found in file`
    (with a precise hint when `old_string` ends with a newline that the file's end lacks);
    `appears N times in file` when it is not unique and `replace_all` is false.
    """
    if not old_string:
        return EMPTY_OLD_STRING_ERROR
    occurrences = content.count(old_string)
    if occurrences == 0:
        stripped = old_string.removesuffix("\n")
        if old_string.endswith("\n") and stripped and content.endswith(stripped):
            found = content.count(stripped)
            if found == 1:
                return (
                    "Error: old_string ends with a newline, but the file does not end with "
                    "one. Remove the trailing newline from old_string (and from new_string "
                    "if it has one) and try again."
                )
            return (
                "Error: old_string ends with a newline, but the file does not end with one; "
                f"without it, old_string would appear {found} times in the file. Remove the "
                "trailing newline and add surrounding context so the match is unique."
            )
        return f"Error: String not found in file: '{old_string}'"
    if occurrences > 1 and not replace_all:
        return (
            f"Error: String '{old_string}' appears {occurrences} times in file. Use "
            "replace_all=True to replace all instances, or provide a more specific string "
            "with surrounding context."
        )
    return content.replace(old_string, new_string), occurrences


@functools.lru_cache(maxsize=256)
def compile_grep_include_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate on search-root-relative paths: whether `pattern` includes the path.

    The same reading as the `glob` tool and grep's `glob=` (`glob_matches`): a pattern
    without `/` matches the file name at any depth, one with `/` the whole relative path
    (`**` crosses directories), a leading `/` anchors at the search root; dot-names match
    only a segment that starts with `.`.

    Raises:
        InvalidGlobPatternError: the pattern has a `..` segment (`Path traversal not
            allowed in glob pattern ...`) or passes a bound of the matcher (`Invalid glob
            pattern ...`). A merely malformed pattern (`*.{py`) compiles and matches nothing.
    """
    try:
        glob_matches(pattern, "")
    except GlobError as error:
        shown = repr(pattern) if len(repr(pattern)) <= 80 else repr(pattern)[:77] + "..."
        raise InvalidGlobPatternError(
            _glob_refusal(shown, error), reason=error.reason, limit=error.limit
        ) from None

    def matches(relative_path: str) -> bool:
        try:
            return glob_matches(pattern, relative_path)
        except GlobError:
            return False

    return matches


def grep_matches_from_files(
    files: Mapping[str, Any],
    pattern: str,
    path: str | None = None,
    glob: str | None = None,
    *,
    max_count: int | None = None,
) -> GrepResult:
    """`grep` over a mapping of path -> `FileData`, as fathom's in-state backends search.

    Literal search (not regex); binary files are passed over; `glob` filters the files
    (`compile_grep_include_glob`'s reading; a refused pattern is an error result, not an
    exception); `max_count` caps the matches and sets `truncated` when more exist. A path
    that is not usable finds nothing.
    """
    try:
        directory = normalize_dir(path)
    except PathError:
        return GrepResult(matches=[])
    stored = {key: _text_data(data) for key, data in files.items()}

    def under(top: str) -> list[tuple[str, FileData]]:
        exact = top.rstrip("/")
        return sorted((key, data) for key, data in stored.items()
                      if key.startswith(top) or key == exact)

    return grep_files(under, pattern, directory, glob, max_count=max_count)


def build_grep_results_dict(matches: list[GrepMatch]) -> dict[str, list[tuple[int, str]]]:
    """Matches grouped by file: path -> `[(line, text), ...]`, in the order given."""
    grouped: dict[str, list[tuple[int, str]]] = {}
    for match in matches:
        grouped.setdefault(match["path"], []).append((match["line"], match["text"]))
    return grouped


def format_grep_matches(
    matches: list[GrepMatch],
    output_mode: Literal["files_with_matches", "content", "count"],
) -> str:
    """Matches as the reference's grep tool shows them.

    `No matches found` when there are none; `files_with_matches`: the sorted paths, one a
    line; `count`: `path: N` lines; `content`: each file's path and a colon, then its lines
    indented as `  N: text`, with context lines (when matches carry them) as `  N- text`
    and `  --` between groups of lines that are not adjacent.
    """
    if not matches:
        return "No matches found"
    grouped = build_grep_results_dict(matches)
    if output_mode == "files_with_matches":
        return "\n".join(sorted(grouped))
    if output_mode == "count":
        return "\n".join(f"{path}: {len(grouped[path])}" for path in sorted(grouped))
    with_context = any("context_before" in m or "context_after" in m for m in matches)
    rows: list[str] = []
    for path in sorted(grouped):
        rows.append(f"{path}:")
        if not with_context:
            rows.extend(f"  {line}: {text}" for line, text in grouped[path])
            continue
        rows.extend(_context_rows([m for m in matches if m["path"] == path]))
    return "\n".join(rows)


def _context_rows(matches: list[GrepMatch]) -> list[str]:
    """The `content` rows of one file's matches with their context lines."""
    hits = {match["line"] for match in matches}
    shown: dict[int, str] = {}
    for match in matches:
        for near in match.get("context_before", []):
            shown[near["line"]] = near["text"]
        shown[match["line"]] = match["text"]
        for near in match.get("context_after", []):
            shown[near["line"]] = near["text"]
    rows: list[str] = []
    previous: int | None = None
    for line in sorted(shown):
        if previous is not None and line > previous + 1:
            rows.append("  --")
        rows.append(f"  {line}{':' if line in hits else '-'} {shown[line]}")
        previous = line
    return rows


@overload
def truncate_if_too_long(result: list[str]) -> list[str]: ...
@overload
def truncate_if_too_long(result: str) -> str: ...
def truncate_if_too_long(result: list[str] | str) -> list[str] | str:
    """`result` cut to about `TOOL_RESULT_TOKEN_LIMIT` tokens (4 characters a token), with
    `TRUNCATION_GUIDANCE` where it was cut: a list loses its last items (as rendered with
    `str()`), a string its end."""
    budget = TOOL_RESULT_TOKEN_LIMIT * 4
    if isinstance(result, str):
        if len(result) <= budget:
            return result
        return result[: budget - len(TRUNCATION_GUIDANCE) - 1] + "\n" + TRUNCATION_GUIDANCE
    room = budget - len(repr(TRUNCATION_GUIDANCE)) - 2
    used = 0
    for kept, item in enumerate(result):
        used += len(repr(item)) + 2
        if used > room:
            return [*result[:kept], TRUNCATION_GUIDANCE]
    return result


_REGEX_SIGNS = re.compile(r"\||\.\*|\.\+|\\[.wWdDsSbB(){}\[\]|+*?^$]")
"""Signs that a grep pattern was written as a regex: `|`, `.*`, `.+`, an escaped
metacharacter or class. Plain `.`, brackets and parentheses are common in literal code
searches (`self.x`, `f(a)`, `a[0]`), so they are not signs."""


def regex_literal_hint(pattern: str) -> str | None:
    """A one-line note for a grep that found nothing with a pattern that looks like a
    regex (grep matches literal text), else `None`."""
    if not _REGEX_SIGNS.search(pattern):
        return None
    return (
        "Note: grep searches for the literal text of the pattern, not a regex, so `|`, "
        "`.*` and `\\.` are matched as written. Search for the literal text instead, and "
        "run one search per alternative rather than using `|`."
    )
