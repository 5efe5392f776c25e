"""File data helpers shared by the backends: creation, decoding, editing and searching text."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from fathom.backends._globbing import (
    GLOB_TRAVERSAL_REASON,
    GlobBudget,
    GlobError,
    glob_matches,
)
from fathom.backends._paths import PathError, normalize_dir, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.protocol import (
    ContextLine,
    DeleteResult,
    EditResult,
    GrepMatch,
    GrepResult,
    ReadResult,
)
from fathom.state import FileData

__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_EDIT_BYTES",
    "TextView",
    "apply_edit",
    "create_file_data",
    "delete_target",
    "edit_text",
    "file_bytes",
    "grep_files",
    "grep_lines",
    "invalid_path",
    "iso_timestamp",
    "normalized",
    "now_iso",
    "pattern_error",
    "positive_seconds",
    "read_window",
    "text_view",
    "too_large",
    "update_file_data",
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


def read_window(data: FileData, offset: int, limit: int, path: str) -> ReadResult:
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
    """Replace `old_string` in `text`; return `(new_text, occurrences)` or an error result."""
    if old_string == "":
        return EditResult(error=BackendError(ErrorKind.INVALID, path, "old_string is empty"))
    if old_string == new_string:
        return EditResult(
            error=BackendError(ErrorKind.INVALID, path, "old_string and new_string are the same")
        )
    count = text.count(old_string)
    if count == 0:
        return EditResult(error=BackendError(ErrorKind.NO_MATCH, path))
    if count > 1 and not replace_all:
        return EditResult(error=BackendError(ErrorKind.NOT_UNIQUE, path, count=count))
    if replace_all:
        return text.replace(old_string, new_string), count
    return text.replace(old_string, new_string, 1), 1


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
