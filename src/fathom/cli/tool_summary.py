"""What a tool result says, in a few lines: the summary the `fathom` command shows for it.

A tool's whole answer is often long (a directory listing, a file's numbered lines, a test
run's output), so the displays show a headline with counts (`12 entries`, `7 matches in 3
files`, `120 lines`, `exit code 1`) and at most a few lines of the text; the whole text stays
in a `ResultLog` under a short number, for `/expand N`. An error is never summarized: the
model's next step depends on it, so the person sees all of it.

The summaries read the text formats of fathom's own tools (`fathom.middleware.filesystem.answers`,
`fathom.middleware.execute`); any other tool, or a text that does not match, gets its first
lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fathom.middleware.execute import EXECUTE_TOOL
from fathom.middleware.filesystem.answers import NO_FILES_FOUND, NO_MATCHES_FOUND

__all__ = ["ResultLog", "ToolSummary", "summarize"]

PREVIEW_LINES = 3
"""How many lines of a result (other than an error) are shown under its headline."""
LINE_CHARS = 160
"""Longer lines of a summary are cut, with an ellipsis."""
_EXECUTE_HEAD = 2
_EXECUTE_TAIL = 3

_EXIT = re.compile(r"^\[exit code (-?\d+)\]$")
_NO_EXIT = "[no exit code: the command did not finish]"
_NOT_SHOWN = re.compile(r"^\[(\d+) more (entries|files|matching lines) not shown")
_READ_ROW = re.compile(r"^\s*\d+\t")
_READ_WINDOW = re.compile(r"^\[showing lines (\d+)-(\d+)(?: of (\d+))?;")
_COUNT_ROW = re.compile(r"^(.+): (\d+)$")


@dataclass(frozen=True)
class ToolSummary:
    """A result as the displays show it: a headline, a few more lines, and whether that is all.

    `complete` is true when `headline` and `lines` together hold the whole text, so there is
    nothing more for `/expand` to show; `error` is true for an error, which is always whole.
    """

    headline: str
    lines: tuple[str, ...] = ()
    complete: bool = True
    error: bool = False


def _cut(line: str, limit: int = LINE_CHARS) -> str:
    line = " ".join(line.rstrip().split("\t"))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {many or word + 's'}"


def _preview(text: str, headline: str | None = None) -> ToolSummary:
    """The first lines of `text` (under `headline`, or with the first line as headline)."""
    rows = _rows(text)
    if headline is None:
        if not rows:
            return ToolSummary("(no output)")
        headline, rows = _cut(rows[0]), rows[1:]
    shown = tuple(_cut(row) for row in rows[:PREVIEW_LINES])
    complete = len(rows) <= PREVIEW_LINES and all(len(r) <= LINE_CHARS for r in rows)
    return ToolSummary(headline, shown, complete)


def _hidden_count(rows: list[str]) -> tuple[list[str], int, list[str]]:
    """`rows` split into listed rows, the count a "[N more … not shown]" row adds, and notes."""
    listed, notes, more = [], [], 0
    for row in rows:
        hidden = _NOT_SHOWN.match(row)
        if hidden:
            more += int(hidden.group(1))
        elif row.startswith("["):
            notes.append(row)
        else:
            listed.append(row)
    return listed, more, notes


def _names(paths: list[str], limit: int = 100) -> str:
    """A few base names from `paths`, comma separated, cut to about `limit` characters."""
    names: list[str] = []
    for path in paths:
        name = path.rstrip("/").rsplit("/", 1)[-1] + ("/" if path.endswith("/") else "")
        if sum(len(n) + 2 for n in names) + len(name) > limit:
            return ", ".join(names) + ", …"
        names.append(name)
    return ", ".join(names)


def _listing(headline: str, paths: list[str], notes: list[str]) -> ToolSummary:
    """A listing's summary: `headline`, then a few of `paths`' names; the tool's notes below."""
    if paths:
        headline += f": {_names(paths)}"
    return ToolSummary(headline, tuple(_cut(n) for n in notes), complete=False)


def _ls(args: dict[str, Any], text: str) -> ToolSummary:
    rows = _rows(text)
    if len(rows) == 1 and rows[0] == NO_FILES_FOUND:
        return ToolSummary(rows[0])
    listed, more, notes = _hidden_count(rows)
    paths = [row.split("  (", 1)[0] for row in listed]
    folders = sum(1 for path in paths if path.endswith("/"))
    headline = _plural(len(paths) + more, "entry", "entries")
    if folders:
        headline += f" ({_plural(folders, 'folder')})"
    return _listing(headline, paths, notes)


def _glob(args: dict[str, Any], text: str) -> ToolSummary:
    rows = _rows(text)
    if rows and rows[0] == NO_FILES_FOUND:
        return ToolSummary(_cut(rows[0]), tuple(_cut(r) for r in rows[1:]))
    listed, more, notes = _hidden_count(rows)
    return _listing(_plural(len(listed) + more, "file"), listed, notes)


def _grep(args: dict[str, Any], text: str) -> ToolSummary:
    rows = _rows(text)
    if rows and rows[0] == NO_MATCHES_FOUND:
        return ToolSummary(_cut(rows[0]), tuple(_cut(r) for r in rows[1:]))
    listed, more, notes = _hidden_count(rows)
    names: list[str] = []
    mode = str(args.get("output_mode") or "files_with_matches")
    if mode == "content" or any(row.startswith("  ") for row in listed):
        files = sum(1 for row in listed if not row.startswith("  "))
        matches = sum(1 for row in listed if row.startswith("  ")) + more
        headline = f"{_plural(matches, 'match', 'matches')} in {_plural(files, 'file')}"
    elif mode == "count" and all(_COUNT_ROW.match(row) for row in listed):
        counts = [int(m.group(2)) for row in listed if (m := _COUNT_ROW.match(row))]
        headline = (
            f"{_plural(sum(counts), 'match', 'matches')} in {_plural(len(listed), 'file')}"
        )
    else:
        names = listed
        headline = f"matches in {_plural(len(listed) + more, 'file')}"
    return _listing(headline, names, notes)


def _read_file(args: dict[str, Any], text: str) -> ToolSummary:
    rows = _rows(text)
    numbered = [row for row in rows if _READ_ROW.match(row)]
    if not numbered:
        return _preview(text) if text.strip() else ToolSummary("(not text: an image or empty)")
    window = next((m for row in rows if (m := _READ_WINDOW.match(row))), None)
    if window is not None:
        total = f" of {int(window.group(3)):,}" if window.group(3) else ""
        headline = f"lines {window.group(1)}-{window.group(2)}{total}"
    else:
        headline = _plural(len(numbered), "line")
    path = args.get("file_path")
    if isinstance(path, str) and path:
        headline += f" of {path}" if window is None else f" ({path})"
    return ToolSummary(headline, complete=False)


def _line_count(value: Any) -> int:
    if not isinstance(value, str) or not value:
        return 0
    return value.count("\n") + (not value.endswith("\n"))


def _write_file(args: dict[str, Any], text: str) -> ToolSummary:
    first = _cut(_rows(text)[0]) if _rows(text) else "written"
    lines = _line_count(args.get("content"))
    return ToolSummary(f"{first.rstrip('.')} ({_plural(lines, 'line')})", complete=False)


def _edit_file(args: dict[str, Any], text: str) -> ToolSummary:
    first = _cut(_rows(text)[0]) if _rows(text) else "edited"
    old, new = _line_count(args.get("old_string")), _line_count(args.get("new_string"))
    change = f"{_plural(old, 'line')} → {_plural(new, 'line')}"
    return ToolSummary(f"{first.rstrip('.')} ({change})", complete=False)


def _execute(args: dict[str, Any], text: str) -> ToolSummary | None:
    rows = text.rstrip("\n").splitlines()
    if not rows or not (_EXIT.match(rows[-1].strip()) or rows[-1].strip() == _NO_EXIT):
        return None  # not the tool's usual answer (e.g. the sandbox failed): shown whole
    status = rows[-1].strip()
    exit_code = _EXIT.match(status)
    headline = f"exit code {exit_code.group(1)}" if exit_code else "did not finish"
    output = [row for row in rows[:-1] if not row.startswith("[the command was stopped")]
    if output == ["(no output)"] or not any(row.strip() for row in output):
        return ToolSummary(f"{headline} · no output")
    headline += f" · {_plural(len(output), 'line')} of output"
    if len(output) <= _EXECUTE_HEAD + _EXECUTE_TAIL:
        return ToolSummary(headline, tuple(_cut(row) for row in output),
                           complete=all(len(row) <= LINE_CHARS for row in output))
    shown = [*output[:_EXECUTE_HEAD], "…", *output[-_EXECUTE_TAIL:]]
    return ToolSummary(headline, tuple(_cut(row) for row in shown), complete=False)


_BY_TOOL: dict[str, Callable[[dict[str, Any], str], ToolSummary]] = {
    "ls": _ls,
    "glob": _glob,
    "grep": _grep,
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
}


def summarize(
    name: str, text: str, *, args: dict[str, Any] | None = None, is_error: bool = False
) -> ToolSummary:
    """The summary of tool `name`'s result `text`; `args` are the call's arguments if known.

    An error is returned whole (first line as headline, the rest as lines); so is an
    `execute` answer that does not end in its exit code. A non-zero exit code is the
    command's outcome, not a tool error: it gets the usual head and tail of the output.
    """
    args = args or {}
    if name == EXECUTE_TOOL:
        summary = _execute(args, text)
        if summary is not None:
            return summary
        is_error = True
    if is_error:
        rows = text.strip("\n").splitlines() or ["(no error text)"]
        return ToolSummary(rows[0], tuple(rows[1:]), error=True)
    handler = _BY_TOOL.get(name)
    if handler is not None and not text.lstrip().startswith("Error:"):
        try:
            return handler(args, text)
        except (ValueError, IndexError, KeyError):  # an unexpected format: show its lines
            pass
    return _preview(text)


@dataclass(frozen=True)
class _Entry:
    ref: str
    name: str
    text: str


class ResultLog:
    """Every tool result of a session, numbered from 1, for `/expand [N]`."""

    def __init__(self, keep: int = 1000) -> None:
        self._entries: list[_Entry] = []
        self._count = 0
        self._keep = keep

    def add(self, name: str, text: str) -> str:
        """Keep `text` (the result of tool `name`); its reference number, as a string."""
        self._count += 1
        self._entries.append(_Entry(str(self._count), name, text))
        del self._entries[: -self._keep]
        return str(self._count)

    def expand(self, ref: str) -> str:
        """The whole text of result `ref` ("3" or "#3"; empty: the latest), or why not."""
        if not self._entries:
            return "no tool results yet in this session"
        wanted = ref.strip().lstrip("#")
        if not wanted:
            entry = self._entries[-1]
        else:
            entry = next((e for e in self._entries if e.ref == wanted), None)
            if entry is None:
                first, last = self._entries[0].ref, self._entries[-1].ref
                return (f"no tool result #{wanted}: this session has results "
                        f"#{first} to #{last}; /expand with no number shows the latest")
        return f"#{entry.ref} {entry.name}:\n{entry.text if entry.text.strip() else '(empty)'}"
