"""What the agent does, as ACP session updates: tool calls, their results and the plan.

File tools report as `read`/`edit`/`search` tool calls, with a diff for `write_file` and
`edit_file` (an editor shows it inline); `execute` reports as `execute`; `write_todos`
becomes a plan update. Everything else is an `other` tool call titled with its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentPlanUpdate,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
)

from fathom.middleware.execute import EXECUTE_TOOL
from fathom.middleware.planning import WRITE_TODOS_TOOL
from fathom.middleware.subagents import TASK_TOOL

__all__ = ["plan_update", "tool_call_start", "tool_call_title", "tool_result_update"]

_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "delete": "delete",
    "ls": "search",
    "glob": "search",
    "grep": "search",
    EXECUTE_TOOL: "execute",
    TASK_TOOL: "think",
    WRITE_TODOS_TOOL: "think",
}
_PLAN_STATUSES = ("pending", "in_progress", "completed")
RESULT_LIMIT = 4000
"""Characters of a tool result shown in its tool-call update; the model still gets all."""


def _path(args: Mapping[str, Any]) -> str:
    value = args.get("file_path") or args.get("path") or ""
    return str(value)


def tool_call_title(name: str, args: Mapping[str, Any]) -> str:
    """A short human title: "Write `/notes.md`", "Run `ls`", or the tool's name."""
    path = _path(args)
    titles = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit",
              "delete": "Delete"}  # fmt: skip
    if name in titles and path:
        return f"{titles[name]} `{path}`"
    if name == EXECUTE_TOOL and args.get("command"):
        return f"Run `{args['command']}`"
    if name == TASK_TOOL and args.get("subagent_type"):
        return f"Delegate to {args['subagent_type']}"
    return name


def tool_call_start(
    call_id: str, name: str, args: Mapping[str, Any], *, root: Path | None = None,
    old_text: str | None = None,
) -> ToolCallStart:
    """The `tool_call` update announcing a call, before it runs (status pending).

    Diffs and locations name the file on disk (`root` joined with the agent's path), as
    editors open them; `old_text` is the file's current text for the diff of a
    `write_file` (None: a new file).
    """
    kind = _KINDS.get(name, "other")
    path = _path(args)
    if path and root is not None:
        path = str(root / path.lstrip("/"))
    content = None
    if name == "write_file" and path:
        content = [tool_diff_content(path, str(args.get("content", "")), old_text)]
    elif name == "edit_file" and path:
        content = [tool_diff_content(path, str(args.get("new_string", "")),
                                     str(args.get("old_string", "")))]  # fmt: skip
    located = path and kind in ("read", "edit", "delete")
    locations = [ToolCallLocation(path=path)] if located else None
    return start_tool_call(
        call_id, tool_call_title(name, args), kind=kind, status="pending", content=content,
        locations=locations, raw_input=dict(args),
    )  # fmt: skip


def tool_result_update(call_id: str, result: str, *, failed: bool) -> ToolCallProgress:
    """The `tool_call_update` with a call's result: completed, or failed on an error."""
    shown = result if len(result) <= RESULT_LIMIT else result[:RESULT_LIMIT] + "…"
    return update_tool_call(
        call_id, status="failed" if failed else "completed",
        content=[tool_content(text_block(shown))] if shown else None, raw_output=result,
    )  # fmt: skip


def plan_update(todos: Iterable[Mapping[str, Any]]) -> AgentPlanUpdate:
    """The `plan` update for the agent's todo list (the whole list, as ACP requires)."""
    entries = []
    for todo in todos:
        status = todo.get("status")
        entries.append(plan_entry(
            str(todo.get("content", "")),
            status=status if status in _PLAN_STATUSES else "pending",  # type: ignore[arg-type]
        ))  # fmt: skip
    return update_plan(entries)
