"""Virtual path normalisation: one absolute, `..`-free form for every path the model sends."""

from __future__ import annotations

from fathom.backends.errors import HOME_REASON, TRAVERSAL_REASON
from fathom.errors import FathomError

__all__ = [
    "MAX_PATH_CHARS",
    "MAX_PATH_DEPTH",
    "PathError",
    "normalize_dir",
    "normalize_file_path",
    "normalize_path",
]

MAX_PATH_CHARS = 4096
"""The longest path accepted, in characters (Linux's `PATH_MAX`)."""

MAX_PATH_DEPTH = 256
"""The most `/`-separated parts a path may have; deeper paths overflow recursive helpers."""


class PathError(FathomError, ValueError):
    """A path the model sent cannot be used; the message says why and what to send instead.

    `reason` says what is wrong in a few words (`"contains a NUL byte"`), for backends that
    return the failure as data (`BackendError(INVALID, detail=reason)`) rather than text.
    """

    def __init__(self, message: str, reason: str = "is not usable") -> None:
        super().__init__(message)
        self.reason = reason


def normalize_path(path: str) -> str:
    """Return the absolute virtual form of `path`, or raise `PathError`.

    Relative paths are taken from the root (`notes.md` is `/notes.md`). `.` and `..` are
    resolved, and a `..` that would climb above the root is refused, as are `~`, NUL bytes
    and backslashes.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathError(
            "Error: the path is empty. Give an absolute path such as `/notes.md`.", "is empty"
        )
    raw = path.strip()
    if "\x00" in raw:
        raise PathError(f"Error: the path {raw!r} contains a NUL byte.", "contains a NUL byte")
    if raw.startswith("~"):
        raise PathError(
            f"Error: the path {raw!r} uses '~', which is not allowed here. "
            "Use an absolute path inside the workspace, such as `/notes.md`.",
            HOME_REASON,
        )
    if "\\" in raw:
        raise PathError(
            f"Error: the path {raw!r} contains a backslash. Use '/' as the separator.",
            "contains a backslash",
        )
    if len(raw) > MAX_PATH_CHARS:
        raise PathError(
            f"Error: the path is {len(raw)} characters long; the limit is {MAX_PATH_CHARS}. "
            "Use a shorter path.",
            f"is {len(raw)} characters long, over the {MAX_PATH_CHARS}-character limit",
        )
    parts: list[str] = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathError(
                    f"Error: the path {raw!r} goes above the filesystem root. "
                    "Paths must stay inside '/'.",
                    TRAVERSAL_REASON,
                )
            parts.pop()
            continue
        parts.append(part)
    if len(parts) > MAX_PATH_DEPTH:
        raise PathError(
            f"Error: the path {raw[:60]!r}... is {len(parts)} parts deep; the limit is "
            f"{MAX_PATH_DEPTH}. Use a shallower path.",
            f"is {len(parts)} parts deep, over the {MAX_PATH_DEPTH}-part limit",
        )
    return "/" + "/".join(parts)


def normalize_dir(path: str | None) -> str:
    """Normalise a directory path; the result ends with `/` (the root is `/`)."""
    if path is None or not str(path).strip():
        return "/"
    normalized = normalize_path(path)
    return normalized if normalized == "/" else normalized + "/"


def normalize_file_path(path: str) -> str:
    """`normalize_path` for a file to be created: a path naming a directory is refused.

    `/newdir/`, `/newdir/.` and `/a/..` name directories; normalising them silently would
    create a file called `newdir` (or `a`'s parent) instead of what the model asked for.
    """
    normalized = normalize_path(path)
    last = path.strip().rsplit("/", 1)[-1]
    if last in ("", ".", "..") and normalized != "/":
        raise PathError(
            f"Error: the path {path.strip()!r} ends with '{last or '/'}', so it names a "
            "directory, not a file. Give a file path such as `/notes/todo.md`.",
            f"ends with '{last or '/'}', so it names a directory, not a file",
        )
    return normalized
