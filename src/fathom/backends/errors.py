"""Typed backend errors: what went wrong, as data, not prose.

Backends never raise for a request the model could have made badly; they return a result
whose `error` is a `BackendError` (a kind, the path, and the facts the wording needs). The
words the model reads are written once, by the tool layer (`fathom.middleware.filesystem.answers`),
so that no layer above the backends has to recognise an error by its text.

A backend written for the Deep Agents API puts plain text in `error`: wrapped at the edge
(`fathom.backends.protocol.as_backend`), its text becomes a `BackendError` whose `message` is
that text, shown as it is (so is a policy's refusal). A result of a backend subclassed from
fathom's classes is passed on as it came, so consumers still accept text (`error_kind` of a
string is `None` unless it is an `ErrorKind` value).

The kinds whose values are `file_not_found`, `permission_denied`, `is_directory` and
`invalid_path` are the reference API's `FileOperationError` values, which
`FileUploadResponse.error` / `FileDownloadResponse.error` carry; because `ErrorKind` is a
`StrEnum`, `ErrorKind.NOT_FOUND == "file_not_found"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = [
    "BackendError",
    "ErrorKind",
    "FileOperationError",
    "error_kind",
]

FileOperationError = Literal["file_not_found", "permission_denied", "is_directory", "invalid_path"]
"""The error values of an upload or download in the Deep Agents API."""


class ErrorKind(StrEnum):
    """What kind of failure a backend result reports."""

    NOT_FOUND = "file_not_found"
    """No file (or directory) at the path."""
    PERMISSION = "permission_denied"
    """A permission rule, a policy hook or the operating system refused the operation."""
    IS_DIRECTORY = "is_directory"
    """A file operation named a directory."""
    INVALID = "invalid_path"
    """The path (or an argument) is malformed: relative, with `..` above the root, a NUL,
    a name that names a directory where a file is needed, ..."""
    NOT_A_DIRECTORY = "not_a_directory"
    """A directory operation (or a parent on the way) named a file."""
    EXISTS = "exists"
    """Something is already at the path and the operation does not replace it."""
    OUTSIDE_ROOT = "outside_root"
    """The path (or a link on the way) leads outside the backend's root."""
    TOO_LARGE = "too_large"
    """The file or content is over the backend's size limit."""
    BINARY = "binary"
    """The operation needs text and the file is binary."""
    PAST_END = "past_end"
    """`read`: the offset is at or past the file's last line; `count` is the file's number
    of lines, `limit` the offset asked for."""
    NO_MATCH = "no_match"
    """`edit`: `old_string` does not occur in the file."""
    NOT_UNIQUE = "not_unique"
    """`edit`: `old_string` occurs more than once and `replace_all` is false."""
    CHANGED = "changed"
    """The file changed while the operation ran (another writer); nothing was changed."""
    LIMIT = "limit"
    """A bound on the request was passed (pattern size, nesting, matching work, depth)."""
    UNSUPPORTED = "unsupported"
    """The backend cannot do this operation at all."""
    FAILED = "failed"
    """The backend failed for a reason outside the request (an I/O error, a store error);
    `detail` says which."""


@dataclass(frozen=True)
class BackendError:
    """A failed backend operation, as data.

    Attributes:
        kind: What went wrong.
        path: The virtual path it concerns, when there is one.
        detail: Facts the wording needs that the kind does not carry (an OS reason, the
            limit that was passed, the route that refused); never the whole sentence.
        count: A number the wording needs (`NOT_UNIQUE`: how many occurrences;
            `TOO_LARGE`: the size in bytes).
        limit: The bound that was passed (`TOO_LARGE`: the backend's limit in bytes;
            `LIMIT`: the bound's value).
        message: Words to show as they are, instead of the tool layer's: a policy's
            refusal, or the text error of a backend written for the reference API.
    """

    kind: ErrorKind
    path: str | None = None
    detail: str | None = None
    count: int | None = None
    limit: int | None = None
    message: str | None = None

    def __str__(self) -> str:
        """`message` when there is one, else a short, neutral rendering for logs (the tool
        layer writes the model's text)."""
        if self.message is not None:
            return self.message
        parts = [self.kind.value]
        if self.path is not None:
            parts.append(self.path)
        text = ": ".join(parts)
        return f"{text} ({self.detail})" if self.detail else text


def error_kind(error: object) -> ErrorKind | None:
    """The kind of a result's `error`: its `ErrorKind`, or `None` for text and no error.

    Accepts a `BackendError`, an `ErrorKind` or one of its string values (an upload's or
    download's error), or free text from a backend written for the reference API.
    """
    if isinstance(error, BackendError):
        return error.kind
    if isinstance(error, ErrorKind):
        return error
    if isinstance(error, str):
        try:
            return ErrorKind(error)
        except ValueError:
            return None
    return None
