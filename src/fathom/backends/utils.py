"""File data helpers shared by the backends: creation, decoding, editing and searching text."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from fathom.backends.protocol import EditResult, GrepMatch
from fathom.state import FileData

__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_EDIT_BYTES",
    "TextView",
    "apply_edit",
    "create_file_data",
    "file_bytes",
    "grep_lines",
    "now_iso",
    "text_view",
    "update_file_data",
]

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


def create_file_data(content: str | bytes, created_at: str | None = None) -> FileData:
    """Build a `FileData` from text or bytes.

    Text is stored as UTF-8; bytes that are valid UTF-8 text are stored as text, anything
    else as base64 so no byte is lost.
    """
    stamp = now_iso()
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            return FileData(
                content=base64.b64encode(content).decode("ascii"),
                encoding="base64",
                created_at=created_at or stamp,
                modified_at=stamp,
            )
        if "\x00" not in text[:_SNIFF_BYTES]:
            content = text
        else:
            return FileData(
                content=base64.b64encode(content).decode("ascii"),
                encoding="base64",
                created_at=created_at or stamp,
                modified_at=stamp,
            )
    return FileData(
        content=content, encoding="utf-8", created_at=created_at or stamp, modified_at=stamp
    )


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


def apply_edit(
    path: str, text: str, old_string: str, new_string: str, replace_all: bool
) -> tuple[str, int] | EditResult:
    """Replace `old_string` in `text`; return `(new_text, occurrences)` or an error result."""
    if old_string == "":
        return EditResult(
            error=f"Error: old_string is empty. Give the exact text in {path} to replace."
        )
    if old_string == new_string:
        return EditResult(error="Error: old_string and new_string are the same; nothing to do.")
    count = text.count(old_string)
    if count == 0:
        return EditResult(
            error=(
                f"Error: old_string was not found in {path}. Read the file and copy the text "
                "exactly, including whitespace and indentation."
            )
        )
    if count > 1 and not replace_all:
        return EditResult(
            error=(
                f"Error: old_string occurs {count} times in {path}. Add surrounding lines to "
                "make it unique, or set replace_all=true to replace every occurrence."
            )
        )
    if replace_all:
        return text.replace(old_string, new_string), count
    return text.replace(old_string, new_string, 1), 1


def grep_lines(path: str, text: str, pattern: str) -> list[GrepMatch]:
    """Lines of `text` that contain the literal `pattern`, with 1-based numbers."""
    return [
        GrepMatch(path=path, line=number, text=line)
        for number, line in enumerate(text.splitlines(), start=1)
        if pattern in line
    ]
