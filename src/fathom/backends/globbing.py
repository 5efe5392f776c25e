"""Glob patterns with `**` and `{a,b}`, compiled to regular expressions.

Python 3.11's `fnmatch` has neither recursive `**` nor brace alternation, and both the
`glob` tool and permission rules need them.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["GlobError", "compile_glob", "glob_matches"]


class GlobError(ValueError):
    """A glob pattern that cannot be used; the message says what is wrong with it."""


def _split_braces(body: str) -> list[str]:
    """Split the inside of `{...}` on top-level commas."""
    options, depth, current = [], 0, []
    for char in body:
        if char == "," and depth == 0:
            options.append("".join(current))
            current = []
            continue
        depth += char == "{"
        depth -= char == "}"
        current.append(char)
    options.append("".join(current))
    return options


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            # A negated class must still not cross a path separator, like `*` and `?`.
            body = "^/" + body[1:] if body.startswith("!") else body
            out.append(f"[{body}]")
            i = end + 1
        elif char == "{":
            depth, j = 0, i
            while j < n:
                depth += pattern[j] == "{"
                depth -= pattern[j] == "}"
                if depth == 0:
                    break
                j += 1
            if j >= n:
                out.append(re.escape(char))
                i += 1
                continue
            options = _split_braces(pattern[i + 1 : j])
            out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
            i = j + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob to a regex that must match a whole path.

    `*` and `?` stay within one path segment, `**` crosses segments (`**/` also matches
    no directory at all), `[abc]`/`[!abc]` are character classes, `{a,b}` alternates.
    """
    try:
        return re.compile(_translate(pattern) + r"\Z", re.DOTALL)
    except re.error as error:
        raise GlobError(
            f"Error: the glob pattern {pattern!r} is not valid ({error}). "
            "Use *, ?, **, [abc], [!abc] and {a,b}."
        ) from error


def glob_matches(pattern: str, relative_path: str) -> bool:
    """Whether `relative_path` (no leading `/`) matches `pattern` as the `glob` tool reads it.

    A pattern without `/` matches a file name at any depth (`*.py`); a pattern with `/` is
    matched against the whole path relative to the search root (`src/**/*.py`); a leading
    `/` anchors at the search root (`/*.py` matches only top-level files).
    """
    if pattern.startswith("/"):
        return compile_glob(pattern.lstrip("/")).match(relative_path) is not None
    if "/" not in pattern:
        name = relative_path.rsplit("/", 1)[-1]
        return compile_glob(pattern).match(name) is not None
    return compile_glob(pattern).match(relative_path) is not None
