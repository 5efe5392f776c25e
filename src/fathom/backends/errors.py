"""Typed backend errors: a failure as data, that reads as the reference API's text.

Backends never raise for a request the model could have made badly; they return a result
whose `error` is a `BackendError`. It is two things at once:

- **a string**, the Deep Agents API's wording of that failure for the operation that
  produced it (`"File '/a.md' not found"` from `read`, `"Error: File '/a.md' not found"`
  from `edit`, `"Path '/x/': path_not_found"` from `ls`, `"Line offset 9 exceeds file
  length (3 lines)"`, ...), so code written for that API keeps working
  (`"not found" in result.error`, `result.error.lower()`, `result.error == "..."`);
- **data**: its `kind` (an `ErrorKind`), the `path`, and the facts the words need
  (`detail`, `count`, `limit`). The words the model reads are written from the kind by
  the tool layer (`fathom.middleware.filesystem.answers`), so no layer above the backends
  has to recognise an error by its text (`error_kind`).

A result type words its error for its own operation when it is made (an `EditResult`'s
error reads as `edit`'s), so a backend builds errors without naming the operation.

A backend written for the Deep Agents API puts plain text in `error`: wrapped at the edge
(`fathom.backends.protocol.as_backend`), its text becomes a `BackendError` whose `message` is
that text, which is then both its string and what the model reads (so is a policy's refusal).
A result of a backend subclassed from fathom's classes is passed on as it came, so consumers
still accept text (`error_kind` of a string is `None` unless it is an `ErrorKind` value).

The kinds whose values are `file_not_found`, `permission_denied`, `is_directory` and
`invalid_path` are the reference API's `FileOperationError` values, which
`FileUploadResponse.error` / `FileDownloadResponse.error` carry; because `ErrorKind` is a
`StrEnum`, `ErrorKind.NOT_FOUND == "file_not_found"`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, NoReturn, Self

__all__ = [
    "EMPTY_OLD_STRING_ERROR",
    "FILE_NOT_FOUND",
    "HOME_REASON",
    "INVALID_PATH",
    "IS_DIRECTORY",
    "PERMISSION_DENIED",
    "TRAVERSAL_REASON",
    "BackendError",
    "ErrorKind",
    "FileOperationError",
    "Operation",
    "error_kind",
]

FileOperationError = Literal["file_not_found", "permission_denied", "is_directory", "invalid_path"]
"""The error values of an upload or download in the Deep Agents API."""

Operation = Literal["ls", "read", "write", "edit", "delete", "grep", "glob"]
"""The file operations whose results carry a `BackendError`."""

EMPTY_OLD_STRING_ERROR = "Error: old_string cannot be empty. Provide the exact text to replace."
"""The text of `edit`'s error for an empty `old_string` (the reference's string)."""

TRAVERSAL_REASON = "goes above the root with '..'"
"""The `detail` of the `INVALID` error for a path whose `..` climbs above the root."""
HOME_REASON = "starts with '~'"
"""The `detail` of the `INVALID` error for a path starting with `~`."""


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


FILE_NOT_FOUND = ErrorKind.NOT_FOUND
"""The reference's `FILE_NOT_FOUND` constant (`"file_not_found"`)."""
PERMISSION_DENIED = ErrorKind.PERMISSION
"""The reference's `PERMISSION_DENIED` constant (`"permission_denied"`)."""
IS_DIRECTORY = ErrorKind.IS_DIRECTORY
"""The reference's `IS_DIRECTORY` constant (`"is_directory"`)."""
INVALID_PATH = ErrorKind.INVALID
"""The reference's `INVALID_PATH` constant (`"invalid_path"`)."""

_FACTS = ("kind", "path", "detail", "count", "limit", "message")

_FAILED_PREFIX = {
    "ls": "Cannot list '{p}'",
    "read": "Error reading file '{p}'",
    "write": "Error writing file '{p}'",
    "edit": "Error editing file '{p}'",
    "delete": "Error deleting '{p}'",
    "grep": "Error searching path '{p}'",
    "glob": "Error globbing path '{p}'",
}
"""How the reference opens the text of a failure it did not foresee (an OS error), by
operation."""

_VERB = {
    "ls": "list",
    "read": "read",
    "write": "write",
    "edit": "edit",
    "delete": "delete",
    "grep": "search",
    "glob": "search",
}


def _prefix(operation: str | None, p: str) -> str:
    if not p:
        return "Error"
    template = _FAILED_PREFIX.get(operation or "")
    return template.format(p=p) if template else f"Error: cannot use '{p}'"


def _aside(detail: str | None) -> str:
    return f" ({detail})" if detail else ""


def _words(
    kind: ErrorKind,
    p: str,
    detail: str | None,
    count: int | None,
    limit: int | None,
    operation: str | None,
) -> str:
    """The Deep Agents API's text for a failure of `operation` (see the module docstring);
    `p` is the path shown ("" when the error names none)."""
    quoted = f"'{p}'" if p else "the path"
    in_file = f" in file '{p}'" if p else ""
    if kind is ErrorKind.NOT_FOUND:
        if operation in ("ls", "grep", "glob"):
            return f"Path {quoted}: path_not_found"
        opening = "Error: File" if operation in ("edit", "delete") else "File"
        return f"{opening} '{p}' not found" if p else f"{opening} not found"
    if kind is ErrorKind.NOT_A_DIRECTORY:
        if operation == "ls":
            return f"Path {quoted}: not_a_directory"
        return f"Error: {quoted} is not a directory{_aside(detail)}"
    if kind is ErrorKind.IS_DIRECTORY:
        if operation in ("read", "edit"):
            # The reference's backends find no file at a directory's path.
            opening = "Error: File" if operation == "edit" else "File"
            where = f" '{p}'" if p else ""
            return f"{opening}{where} not found: it is a directory{_aside(detail)}"
        if operation == "write":
            return f"{_prefix(operation, p)}: Is a directory{_aside(detail)}"
        return f"Error: {quoted} is a directory{_aside(detail)}"
    if kind is ErrorKind.INVALID:
        if detail in (TRAVERSAL_REASON, HOME_REASON):
            return f"Path traversal not allowed: {p}" if p else "Path traversal not allowed"
        if detail == "old_string is empty":
            return EMPTY_OLD_STRING_ERROR
        if not p:
            return f"Error: {detail or 'the request is not valid'}"
        verb = _VERB.get(operation or "", "use")
        return f"Error: cannot {verb} '{p}': {detail or 'the path is not valid'}"
    if kind is ErrorKind.OUTSIDE_ROOT:
        return f"Error: {quoted} is outside the root directory{_aside(detail)}"
    if kind is ErrorKind.PERMISSION:
        reason = "" if detail in (None, "Permission denied") else f" ({detail})"
        return f"{_prefix(operation, p)}: Permission denied{reason}"
    if kind is ErrorKind.EXISTS:
        return f"Error: File '{p}' already exists" if p else "Error: the file already exists"
    if kind is ErrorKind.TOO_LARGE:
        size = f"{count} bytes" if count is not None else "over the size limit"
        bound = f", which exceeds the maximum size of {limit} bytes" if limit is not None else ""
        when = f" {detail}" if detail else ""
        return f"{_prefix(operation, p)}: the file{when} is {size}{bound}"
    if kind is ErrorKind.BINARY:
        if operation == "edit":
            return f"Error: Cannot edit binary files with text replacements.{_aside(detail)}"
        return f"Error: {quoted} is a binary file{_aside(detail)}"
    if kind is ErrorKind.PAST_END:
        return f"Line offset {limit or 0} exceeds file length ({count or 0} lines)"
    if kind is ErrorKind.NO_MATCH:
        return f"Error: String not found{in_file}{_aside(detail)}"
    if kind is ErrorKind.NOT_UNIQUE:
        times = f"{count} times" if count is not None else "more than once"
        return (
            f"Error: String appears {times}{in_file}. Use replace_all=True to replace all "
            "instances, or provide a more specific string with surrounding context."
        )
    if kind is ErrorKind.CHANGED:
        return (
            f"{_prefix(operation, p)}: the file changed while the operation ran "
            "(another writer); nothing was changed"
        )
    if kind is ErrorKind.LIMIT:
        bound = f" (limit {limit})" if limit is not None else ""
        return f"Error: {detail or 'the request passed a limit'}{bound}"
    if kind is ErrorKind.UNSUPPORTED:
        if operation == "delete" or detail == "delete":
            return f"Error: deletion is not supported for {quoted}."
        what = detail or operation or "this operation"
        return f"Error: {what} is not supported" + (f" for '{p}'." if p else ".")
    return f"{_prefix(operation, p)}: {detail or 'the backend failed'}"


class BackendError(str):
    """A failed backend operation: its text is the reference API's, its attributes the facts.

    Attributes:
        kind: What went wrong.
        path: The virtual path it concerns, when there is one.
        detail: Facts the wording needs that the kind does not carry (an OS reason, the
            limit that was passed, the route that refused); never the whole sentence.
        count: A number the wording needs (`NOT_UNIQUE`: how many occurrences;
            `TOO_LARGE`: the size in bytes; `PAST_END`: the file's lines).
        limit: The bound that was passed (`TOO_LARGE`: the backend's limit in bytes;
            `LIMIT`: the bound's value; `PAST_END`: the offset asked for).
        message: Words to show as they are, instead of the tool layer's: a policy's
            refusal, or the text error of a backend written for the reference API. It is
            then also the error's text.
        operation: The operation whose wording the text follows (`read`, `edit`, `ls`,
            ...), set when the error is put in a result; `None` before.
        shown: The path as the caller wrote it, when the text shows that rather than
            `path` (the reference's `ls` quotes `/x/` as given); `None` otherwise.

    The error is immutable. Two errors are equal when their facts (`kind`, `path`,
    `detail`, `count`, `limit`, `message`) are, whichever operation each is worded for; an
    error equals a plain string with its text, and hashes as that text (so two equal
    errors worded for different operations, which are different strings, hash apart).
    Every `str` method works on the text, except `count`, which is the fact above (count
    substrings with `str.count(error, sub)`).
    """

    __slots__ = (
        "_given",
        "count",  # pyright: ignore[reportIncompatibleMethodOverride] - the fact, see above
        "detail",
        "kind",
        "limit",
        "message",
        "operation",
        "path",
        "shown",
    )

    kind: ErrorKind
    path: str | None
    detail: str | None
    count: int | None  # pyright: ignore[reportIncompatibleMethodOverride]
    limit: int | None
    message: str | None
    operation: str | None
    _given: str | None
    shown: str | None

    def __new__(
        cls,
        kind: ErrorKind | str,
        path: str | None = None,
        detail: str | None = None,
        count: int | None = None,
        limit: int | None = None,
        message: str | None = None,
        *,
        operation: str | None = None,
        text: str | None = None,
        shown: str | None = None,
    ) -> Self:
        """`text` gives the string explicitly (the reference's words for a case the kind
        alone does not decide, such as a refused glob pattern); `shown` is the path as
        the caller wrote it, for the text (default `path`)."""
        kind = ErrorKind(kind)
        if message is not None:
            words = message
        elif text is not None:
            words = text
        else:
            p = shown if shown is not None else (path if path is not None else "")
            words = _words(kind, p, detail, count, limit, operation)
        self = super().__new__(cls, words or kind.value)
        for name, value in (
            ("kind", kind), ("path", path), ("detail", detail), ("count", count),
            ("limit", limit), ("message", message), ("operation", operation), ("_given", text),
            ("shown", shown),
        ):
            object.__setattr__(self, name, value)
        return self

    def _facts(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FACTS)

    def changed(self, **changes: Any) -> BackendError:
        """A copy with some facts changed (`path=`, `detail=`, `operation=`, `shown=`, ...);
        its text is worded again from them (words given as `text` or `message` are kept; a
        new `path` drops the path as the caller wrote it)."""
        values: dict[str, Any] = {name: getattr(self, name) for name in _FACTS}
        values["operation"] = self.operation
        values["text"] = self._given
        values["shown"] = None if "path" in changes else self.shown
        values.update(changes)
        return BackendError(**values)

    def for_operation(self, operation: str, shown: str | None = None) -> BackendError:
        """This error worded for `operation` (a result type calls it for its own
        operation); `shown` is the path as the caller wrote it (default: as before)."""
        if self.operation == operation and shown in (None, self.shown):
            return self
        return self.changed(operation=operation, shown=shown if shown is not None else self.shown)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BackendError):
            return self._facts() == other._facts()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"BackendError is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"BackendError is immutable (cannot delete {name!r})")

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        facts = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in _FACTS[1:]
            if getattr(self, name) is not None
        )
        parts = [f"ErrorKind.{self.kind.name}", *([facts] if facts else [])]
        return f"BackendError({', '.join(parts)}, text={str.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        values = {name: getattr(self, name) for name in _FACTS}
        return (_restore, (values, self.operation, self._given, self.shown))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self


def _restore(
    values: dict[str, Any], operation: str | None, given: str | None, shown: str | None
) -> BackendError:
    """Rebuild a pickled `BackendError`."""
    return BackendError(**values, operation=operation, text=given, shown=shown)


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
