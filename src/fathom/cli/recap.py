"""Where a thread left off, for a person coming back to it (`fathom --resume`, `--thread ID`).

The recap is the thread's last exchange (the last message the person sent and the answer
the agent gave to it, both cut to a few lines) and its open todos (pending or in progress),
as plain text: enough to pick up the work without scrolling through an old session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages

__all__ = ["thread_recap"]

MESSAGE_LINES = 3
"""Lines of the person's last message shown (a pasted file or attachment is long)."""
ANSWER_LINES = 12
"""Lines of the agent's last answer shown."""
LINE_CHARS = 200
_OPEN_MARKS = {"in_progress": "[>]", "pending": "[ ]"}


def _messages(values: dict[str, Any]) -> list[BaseMessage]:
    raw = values.get("messages") or []
    if not isinstance(raw, Sequence):
        return []
    try:
        return list(convert_to_messages(list(raw)))
    except (ValueError, TypeError, NotImplementedError):  # not messages: nothing to recap
        return [m for m in raw if isinstance(m, BaseMessage)]


def _cut_lines(text: str, limit: int) -> list[str]:
    """`text`'s lines (blank runs squeezed to one), at most `limit`, each cut to
    `LINE_CHARS`; a last line says how many more there were."""
    lines: list[str] = []
    for line in text.strip().splitlines():
        line = line.rstrip()
        if not line and (not lines or not lines[-1]):
            continue
        lines.append(line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")
    if len(lines) <= limit:
        return lines
    hidden = len(lines) - limit
    return [*lines[:limit], f"… {hidden} more line{'s' if hidden != 1 else ''}"]


def _labelled(label: str, lines: list[str]) -> list[str]:
    pad = " " * len(label)
    return [f"{label}{line}" if i == 0 else (f"{pad}{line}" if line else "")
            for i, line in enumerate(lines)]


def thread_recap(values: dict[str, Any]) -> str:
    """A few lines on where the thread stands: its last exchange and its open todos.

    `values` is the thread's state (its `messages` and `todos`). Empty when the thread has
    neither a message from the person nor an open todo.
    """
    messages = _messages(values)
    last_human = max(
        (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None
    )
    out: list[str] = []
    if last_human is not None:
        out.append("── where this thread left off")
        asked = str(messages[last_human].text)
        out += _labelled("you › ", _cut_lines(asked, MESSAGE_LINES) or ["(empty message)"])
        answer = next(
            (str(m.text) for m in reversed(messages[last_human + 1 :])
             if isinstance(m, AIMessage) and str(m.text).strip()),
            "",
        )
        if answer:
            out += _labelled("agent › ", _cut_lines(answer, ANSWER_LINES))
        else:
            out.append("agent › (no answer yet: the turn stopped before the agent replied)")
    todos = [t for t in values.get("todos") or [] if isinstance(t, dict)]
    open_todos = [t for t in todos if t.get("status") in _OPEN_MARKS]
    if open_todos:
        out.append(f"open todos ({len(open_todos)} of {len(todos)}):")
        out += [f"  {_OPEN_MARKS[str(t['status'])]} {t.get('content', '')}" for t in open_todos]
    return "\n".join(out)
