"""How a tool call waiting for approval is shown, so a person can judge it.

`write_file` and `edit_file` are shown as a unified diff (`difflib`) against the file's
current content; a new file as its content with line numbers. `edit_file` is applied as
the tool would apply it (`old_string` replaced once, or everywhere with `replace_all`), and
an edit that would fail (text not found, found several times) says so. `execute` is shown
as its command, anything else as its arguments, one per line. Long diffs keep only their
hunks with a few lines of context, and a view is cut after `max_lines` lines.

Text from the model is made visible, never interpreted: control characters (a terminal
escape hidden in a file's content, say) are shown as `\\x1b` and the like.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fathom.errors import FathomError
from fathom.middleware.execute import EXECUTE_TOOL

__all__ = [
    "DEFAULT_MAX_LINES",
    "CallView",
    "CurrentUnknown",
    "EditProblem",
    "Line",
    "ReadCurrent",
    "apply_edit",
    "render_view",
    "view_call",
]

DEFAULT_MAX_LINES = 120
"""Lines of a view shown before it is cut (the editor shows everything)."""

CONTEXT_LINES = 3
"""Unchanged lines shown around each change in a diff."""


class CurrentUnknown(FathomError):
    """The current content of a file cannot be read here; the message says why."""


class EditProblem(FathomError):
    """An `edit_file` call that would fail as proposed; the message says why."""


ReadCurrent = Callable[[str], "str | None"]
"""Reads a file's current text by the agent's path; `None` when there is no such file.
Raises `CurrentUnknown` when the content cannot be known here."""

LineKind = Literal["add", "remove", "hunk", "context", "meta", "note", "number", "text"]


@dataclass(frozen=True)
class Line:
    """One line of a view; `kind` decides its colour."""

    kind: LineKind
    text: str


@dataclass(frozen=True)
class CallView:
    """What is shown for one tool call: a title, a summary and the body's lines."""

    name: str
    title: str
    summary: str = ""
    lines: list[Line] = field(default_factory=list)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """`text` with control characters (other than tab) written out, so none is obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _lines(text: str) -> list[str]:
    """Lines split on `\\n` only (what an editor and the file tools count as lines)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def apply_edit(content: str, old: str, new: str, replace_all: bool = False) -> tuple[str, int]:
    """`content` after `edit_file` replaces `old` by `new`, and how many places changed.

    Raises `EditProblem` when the tool would refuse the edit: `old` is empty or not in
    `content`, or occurs more than once without `replace_all`.
    """
    if not old:
        raise EditProblem("old_string is empty, so there is nothing to replace")
    count = content.count(old)
    if count == 0:
        raise EditProblem("old_string was not found in the file")
    if count > 1 and not replace_all:
        raise EditProblem(
            f"old_string occurs {count} times in the file and replace_all is not set"
        )
    if replace_all:
        return content.replace(old, new), count
    return content.replace(old, new, 1), 1


def _numbered(text: str, limit: int) -> list[Line]:
    lines = _lines(text)
    width = len(str(max(len(lines), 1)))
    shown = [Line("number", f"{i:>{width}}  {_visible(line)}".rstrip(" "))
             for i, line in enumerate(lines[:limit], start=1)]
    if len(lines) > limit:
        shown.append(Line("note", f"… {_count(len(lines) - limit, 'more line')} not shown"))
    if not lines:
        shown.append(Line("note", "(empty file)"))
    return shown


def _diff(path: str, before: str, after: str, limit: int) -> tuple[list[Line], int, int]:
    """The unified diff's lines (cut at `limit`), and the lines added and removed."""
    out: list[Line] = []
    added = removed = 0
    diff = difflib.unified_diff(_lines(before), _lines(after), f"{path} (now)",
                                f"{path} (proposed)", lineterm="", n=CONTEXT_LINES)
    for index, raw in enumerate(diff):
        if index < 2:  # the `---` and `+++` header
            kind: LineKind = "meta"
        elif raw.startswith("@@"):
            kind = "hunk"
        elif raw.startswith("+"):
            kind, added = "add", added + 1
        elif raw.startswith("-"):
            kind, removed = "remove", removed + 1
        else:
            kind = "context"
        out.append(Line(kind, _visible(raw)))
    if len(out) > limit:
        hidden = len(out) - limit
        out = [*out[:limit], Line("note", f"… {_count(hidden, 'more diff line')} not shown")]
    return out, added, removed


def _changes(added: int, removed: int) -> str:
    return f"{_count(added, 'line')} added, {removed:,} removed"


def _strings(old: str, new: str, limit: int) -> list[Line]:
    """`old_string` and `new_string` side by side, as removed and added lines."""
    lines = [Line("remove", "-" + _visible(line)) for line in _lines(old) or [""]]
    lines += [Line("add", "+" + _visible(line)) for line in _lines(new) or [""]]
    if len(lines) > limit:
        lines = [*lines[:limit], Line("note", f"… {_count(len(lines) - limit, 'more line')}")]
    return lines


def _current(read_current: ReadCurrent | None, path: str) -> tuple[str | None, str]:
    """(content, "") when read; (None, "") for no such file; (None, why) when unknown."""
    if read_current is None:
        return None, "the current file was not read"
    try:
        return read_current(path), ""
    except CurrentUnknown as error:
        return None, str(error) or "the current file cannot be read here"


def _write_view(args: Mapping[str, Any], read_current: ReadCurrent | None,
                limit: int) -> CallView:
    path, content = str(args["file_path"]), str(args["content"])
    title = f"write_file {_visible(path)}"
    size = _count(len(_lines(content)), "line")
    current, unknown = _current(read_current, path)
    if unknown:
        return CallView("write_file", title, size, [
            Line("note", f"cannot compare with the current file: {unknown}"),
            *_numbered(content, limit),
        ])
    if current is None:
        return CallView("write_file", title, f"new file, {size}", _numbered(content, limit))
    if current == content:
        return CallView("write_file", title, "no change",
                        [Line("note", "the file already holds exactly this content")])
    lines, added, removed = _diff(path, current, content, limit)
    if not added and not removed:
        lines = [Line("note", "only the line ending at the end of the file changes")]
    return CallView("write_file", title, f"replaces the file: {_changes(added, removed)}",
                    lines)


def _edit_view(args: Mapping[str, Any], read_current: ReadCurrent | None,
               limit: int) -> CallView:
    path = str(args["file_path"])
    old, new = str(args["old_string"]), str(args["new_string"])
    replace_all = bool(args.get("replace_all", False))
    title = f"edit_file {_visible(path)}" + (" (replace_all)" if replace_all else "")
    current, unknown = _current(read_current, path)
    if unknown:
        return CallView("edit_file", title, "", [
            Line("note", f"cannot show it applied: {unknown}"), *_strings(old, new, limit)])
    if current is None:
        return CallView("edit_file", title, "will fail", [
            Line("note", f"{_visible(path)} does not exist, so the edit will fail as proposed"),
            *_strings(old, new, limit),
        ])
    try:
        after, places = apply_edit(current, old, new, replace_all)
    except EditProblem as problem:
        return CallView("edit_file", title, "will fail", [
            Line("note", f"{problem}: the edit will fail as proposed"),
            *_strings(old, new, limit),
        ])
    lines, added, removed = _diff(path, current, after, limit)
    where = f"{_count(places, 'place')}: " if places > 1 else ""
    return CallView("edit_file", title, where + _changes(added, removed), lines)


def _execute_view(args: Mapping[str, Any], limit: int) -> CallView:
    command = _lines(str(args["command"])) or [""]
    lines = [Line("text", ("$ " if i == 0 else "  ") + _visible(line))
             for i, line in enumerate(command[:limit])]
    if len(command) > limit:
        lines.append(Line("note", f"… {_count(len(command) - limit, 'more line')}"))
    timeout = args.get("timeout")
    if timeout is not None:
        lines.append(Line("note", f"timeout: {timeout} s"))
    rest = {key: value for key, value in args.items() if key not in ("command", "timeout")}
    lines += _argument_lines(rest, limit)
    return CallView(EXECUTE_TOOL, EXECUTE_TOOL, "", lines)


def _argument_lines(args: Mapping[str, Any], limit: int) -> list[Line]:
    lines: list[Line] = []
    for key, value in args.items():
        if isinstance(value, str) and "\n" in value:
            lines.append(Line("text", f"{_visible(str(key))}:"))
            lines += [Line("text", "  " + _visible(line)) for line in _lines(value)]
        elif isinstance(value, (dict, list)) and value:
            dumped = json.dumps(value, indent=2, ensure_ascii=False, default=str)
            lines.append(Line("text", f"{_visible(str(key))}:"))
            lines += [Line("text", "  " + _visible(line)) for line in dumped.splitlines()]
        else:
            dumped = json.dumps(value, ensure_ascii=False, default=str)
            lines.append(Line("text", f"{_visible(str(key))}: {_visible(dumped)}"))
    if len(lines) > limit:
        lines = [*lines[:limit], Line("note", f"… {_count(len(lines) - limit, 'more line')}")]
    return lines


def _has(args: Mapping[str, Any], *names: str) -> bool:
    return all(isinstance(args.get(name), str) for name in names)


def view_call(request: Mapping[str, Any], read_current: ReadCurrent | None = None, *,
              max_lines: int = DEFAULT_MAX_LINES) -> CallView:
    """The view of one action request (`{"name": ..., "args": {...}}`).

    `read_current` reads a file's current text (see `ReadCurrent`); without it a
    `write_file` is shown as its numbered content and an `edit_file` as its two strings.
    """
    name = str(request.get("name", "?"))
    raw = request.get("args")
    args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if name == "write_file" and _has(args, "file_path", "content"):
        return _write_view(args, read_current, max_lines)
    if name == "edit_file" and _has(args, "file_path", "old_string", "new_string"):
        return _edit_view(args, read_current, max_lines)
    if name == EXECUTE_TOOL and _has(args, "command"):
        return _execute_view(args, max_lines)
    lines = _argument_lines(args, max_lines) or [Line("note", "(no arguments)")]
    return CallView(name, _visible(name), "", lines)


_STYLES: dict[str, str] = {
    "add": "\x1b[32m", "remove": "\x1b[31m", "hunk": "\x1b[36m", "meta": "\x1b[1m",
    "note": "\x1b[33m", "title": "\x1b[1m",
}
_RESET = "\x1b[0m"


def _paint(kind: str, text: str, color: bool) -> str:
    if color and kind == "number":
        number = re.match(r"\s*\d+", text)
        cut = number.end() if number else 0
        return f"\x1b[2m{text[:cut]}{_RESET}{text[cut:]}"
    style = _STYLES.get(kind) if color else None
    return f"{style}{text}{_RESET}" if style else text


def render_view(view: CallView, *, heading: str = "approval needed", color: bool = False,
                indent: str = "  ") -> str:
    """The view as text: a title line, then the body indented. ANSI colours when `color`."""
    title = f"{heading}: {view.title}" + (f" ({view.summary})" if view.summary else "")
    out = [_paint("title", title, color)]
    out += [indent + _paint(line.kind, line.text, color) for line in view.lines]
    return "\n".join(out) + "\n"
