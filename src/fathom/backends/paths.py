"""Virtual path normalisation: one absolute, `..`-free form for every path the model sends."""

from __future__ import annotations

__all__ = ["PathError", "normalize_dir", "normalize_path"]


class PathError(ValueError):
    """A path the model sent cannot be used; the message says why and what to send instead."""


def normalize_path(path: str) -> str:
    """Return the absolute virtual form of `path`, or raise `PathError`.

    Relative paths are taken from the root (`notes.md` is `/notes.md`). `.` and `..` are
    resolved, and a `..` that would climb above the root is refused, as are `~`, NUL bytes
    and backslashes.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathError("Error: the path is empty. Give an absolute path such as /notes.md.")
    raw = path.strip()
    if "\x00" in raw:
        raise PathError(f"Error: the path {raw!r} contains a NUL byte.")
    if raw.startswith("~"):
        raise PathError(
            f"Error: the path {raw!r} uses '~', which is not allowed here. "
            "Use an absolute path inside the workspace, such as /notes.md."
        )
    if "\\" in raw:
        raise PathError(f"Error: the path {raw!r} contains a backslash. Use '/' as the separator.")
    parts: list[str] = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathError(
                    f"Error: the path {raw!r} goes above the filesystem root. "
                    "Paths must stay inside '/'."
                )
            parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def normalize_dir(path: str | None) -> str:
    """Normalise a directory path; the result ends with `/` (the root is `/`)."""
    if path is None or not str(path).strip():
        return "/"
    normalized = normalize_path(path)
    return normalized if normalized == "/" else normalized + "/"
