"""`@path` file mentions in a message: the files they name are attached to it.

A word that starts with `@` names a file under the project, relative to the project's
root (`@src/app.py`). Sending the message attaches each named file's text after the
message, inside `<file path="...">` tags, so the model sees the content without a tool
call. A mention that names no file of the project (a typo, a folder, a path outside the
project, a binary file) is an error the person sees before anything is sent. A long file
is cut to `MAX_ATTACHED_CHARS` characters, and both the person and the model are told.

Completion (`mention_candidates`) lists the project's paths, one folder level at a time,
without `.git` and `.fathom`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fathom.errors import FathomError

__all__ = [
    "MAX_ATTACHED_CHARS",
    "Attached",
    "MentionError",
    "attach_mentions",
    "mention_candidates",
    "mentions",
]

MAX_ATTACHED_CHARS = 50_000
"""The most characters of one file attached to a message; the rest is cut."""

HIDDEN = frozenset({".git", ".fathom"})
"""Folders that completion never offers."""

_MENTION = re.compile(r"(?<!\S)@(\S+)")
_TRAILING = ".,;:!?)]}'\""


class MentionError(FathomError, ValueError):
    """A mention that names no attachable file; the message says which and why."""


@dataclass
class Attached:
    """The message to send (with the files appended) and one note per attached file."""

    message: str
    notes: list[str] = field(default_factory=list)


def mentions(text: str) -> list[str]:
    """The `@path` words of `text`, in order, without the `@`."""
    return [match.group(1) for match in _MENTION.finditer(text)]


def _inside(project: Path, relative: str) -> Path | None:
    """`relative` resolved under `project`, or `None` when it leads outside it."""
    root = project.resolve()
    if Path(relative).is_absolute():
        return None
    path = (root / relative).resolve()
    return path if path == root or path.is_relative_to(root) else None


def _resolve(project: Path, word: str) -> tuple[str, Path]:
    """The project file a mention names; trailing punctuation (`@a.py,`) is tolerated."""
    candidates = [word]
    stripped = word.rstrip(_TRAILING)
    if stripped and stripped != word:
        candidates.append(stripped)
    for candidate in candidates:
        path = _inside(project, candidate)
        if path is not None and path.is_file():
            return candidate, path
    path = _inside(project, stripped or word)
    if path is None:
        raise MentionError(f"@{word} is outside the project; only its files can be attached")
    if path.is_dir():
        raise MentionError(f"@{word} is a folder; mention a file in it (Tab completes paths)")
    raise MentionError(f"@{word}: no such file in the project (Tab completes paths)")


def _read_text(name: str, path: Path) -> str:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise MentionError(f"@{name} is not a text file, so it cannot be attached")
    return data.decode("utf-8", errors="replace")


def attach_mentions(text: str, project: Path, *, limit: int = MAX_ATTACHED_CHARS) -> Attached:
    """`text` with the content of every file it mentions appended; raises `MentionError`.

    Each file is attached once, however often it is mentioned. The message itself is
    left as written, so the model sees which words referred to the files.
    """
    words = mentions(text)
    if not words:
        return Attached(text)
    parts = [text]
    notes = []
    seen: set[Path] = set()
    for word in words:
        name, path = _resolve(project, word)
        if path in seen:
            continue
        seen.add(path)
        content = _read_text(name, path)
        shown = Path(path).relative_to(project.resolve()).as_posix()
        if len(content) > limit:
            cut = f"cut to the first {limit:,} of {len(content):,} characters"
            parts.append(f'<file path="{shown}" note="{cut}">\n{content[:limit]}\n</file>')
            notes.append(f"attached {shown} ({cut})")
        else:
            parts.append(f'<file path="{shown}">\n{content}\n</file>')
            notes.append(f"attached {shown} ({len(content):,} characters)")
    return Attached("\n\n".join(parts), notes)


def mention_candidates(project: Path, partial: str, *, limit: int = 200) -> list[str]:
    """Paths under `project` that complete `partial` (the text after `@`).

    One folder level at a time: `src/` lists `src`'s entries; folders end in `/`. Paths
    outside the project and the `.git` and `.fathom` folders are never offered.
    """
    folder, _, prefix = partial.rpartition("/")
    if any(part in HIDDEN for part in folder.split("/")):
        return []
    base = _inside(project, folder or ".")
    if base is None or not base.is_dir():
        return []
    found = []
    try:
        entries = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    for entry in entries:
        if entry.name in HIDDEN or not entry.name.startswith(prefix):
            continue
        if entry.name.startswith(".") and not prefix.startswith("."):
            continue
        if _inside(project, f"{folder}/{entry.name}" if folder else entry.name) is None:
            continue  # a link that leads outside the project
        path = f"{folder}/{entry.name}" if folder else entry.name
        found.append(path + "/" if entry.is_dir() else path)
        if len(found) >= limit:
            break
    return found
