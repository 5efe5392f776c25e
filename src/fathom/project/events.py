"""What happens during one run of the `fathom` command, as plain events for a display.

`EventTranslator` turns LangGraph's `astream(..., stream_mode=["updates", "messages",
"custom"], subgraphs=True)` items into the events below, so displays never touch LangGraph's
stream shapes. Each event names the agent it comes from: `None` for the main agent, or the
`tool_call_id` of the `task` call that started a subagent (its "lane").
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage

from fathom.middleware.subagents import TASK_TOOL

__all__ = [
    "Event",
    "EventTranslator",
    "ShellOutput",
    "TextDelta",
    "TodosChanged",
    "ToolFinished",
    "ToolStarted",
    "short_text",
]

Lane = str | None
"""`None` for the main agent; otherwise the id of the `task` call running a subagent."""


@dataclass(frozen=True)
class TextDelta:
    """A piece of streamed model text."""

    lane: Lane
    text: str


@dataclass(frozen=True)
class ToolStarted:
    """The model asked for a tool call (arguments complete). `task` calls start a subagent."""

    lane: Lane
    call_id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolFinished:
    """A tool call returned. For `task`, the subagent whose lane is `call_id` has finished."""

    lane: Lane
    call_id: str
    name: str
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class TodosChanged:
    """The agent's todo list after a `write_todos` call."""

    lane: Lane
    todos: list[dict[str, Any]]


@dataclass(frozen=True)
class ShellOutput:
    """Output of a running `execute` call, as it arrives."""

    lane: Lane
    call_id: str
    chunk: str


Event = TextDelta | ToolStarted | ToolFinished | TodosChanged | ShellOutput


def short_text(text: str, limit: int = 100) -> str:
    """The first non-empty line of `text`, cut to `limit` characters with an ellipsis.

    Tabs (as in `read_file`'s numbered lines) become single spaces, so terminals do not
    expand them past the cut.
    """
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = " ".join(line.split("\t"))
    return line if len(line) <= limit else line[: limit - 1] + "…"


class EventTranslator:
    """Turns `(namespace, mode, data)` stream items into `Event`s; one per thread, so
    messages already shown in an earlier run of the thread are not shown again."""

    def __init__(self) -> None:
        self._lanes: dict[str, str] = {}  # namespace root -> task call id
        self._seen: set[str] = set()

    def _lane(self, namespace: tuple[str, ...], metadata: Mapping[str, Any] | None = None) -> Lane:
        if not namespace:
            return None
        root = namespace[0]
        if metadata is not None and root not in self._lanes:
            call_id = metadata.get("fathom_task_call_id")
            if isinstance(call_id, str):
                self._lanes[root] = call_id
        return self._lanes.get(root, root)

    def translate(self, namespace: tuple[str, ...], mode: str, data: Any) -> Iterator[Event]:
        """The events one stream item stands for (often none)."""
        if mode == "messages":
            chunk, metadata = data
            lane = self._lane(namespace, metadata)
            if isinstance(chunk, AIMessageChunk | AIMessage):
                text = chunk.text
                if text:
                    yield TextDelta(lane, text)
            return
        if mode == "custom":
            if isinstance(data, Mapping) and data.get("type") == "execute_output":
                yield ShellOutput(
                    self._lane(namespace), str(data.get("tool_call_id")), str(data.get("chunk"))
                )
            elif isinstance(data, Mapping) and data.get("type") == "subagent":
                yield from self._code_subagent(self._lane(namespace), data)
            return
        if mode != "updates" or not isinstance(data, Mapping):
            return
        lane = self._lane(namespace)
        for update in data.values():
            yield from self._update(lane, update)

    @staticmethod
    def _code_subagent(lane: Lane, data: Mapping[str, Any]) -> Iterator[Event]:
        """A subagent that code in `eval` started or ended, shown like a `task` call.

        The call id joins the `eval` call's id and the `task()` call's id within it, so each
        of the code's subagents gets its own place in the subagent tree.
        """
        call_id = f"{data.get('tool_call_id')}:{data.get('call_id')}"
        kind = str(data.get("subagent_type") or "subagent")
        event = data.get("event")
        if event == "start":
            label = data.get("label")
            args = {"subagent_type": kind, "description": str(label or f"{kind} (from eval)")}
            yield ToolStarted(lane, call_id, TASK_TOOL, args)
        elif event in ("complete", "error"):
            failed = event == "error"
            text = str(data.get("error") or "failed") if failed else "done"
            yield ToolFinished(lane, call_id, TASK_TOOL, text, is_error=failed)

    def _update(self, lane: Lane, update: Any) -> Iterator[Event]:
        updates = update if isinstance(update, list) else [update]
        for one in updates:
            if not isinstance(one, Mapping):
                continue
            messages = one.get("messages") or []
            if not isinstance(messages, list):
                messages = [messages]
            for message in messages:
                yield from self._message(lane, message)
            todos = one.get("todos")
            if isinstance(todos, list):
                yield TodosChanged(lane, [dict(todo) for todo in todos])

    def _message(self, lane: Lane, message: Any) -> Iterator[Event]:
        if not isinstance(message, BaseMessage):
            return
        # The same message comes back when a run resumes after an approval; an edited call
        # keeps the message id but changes the arguments, so it is shown again.
        calls = json.dumps(getattr(message, "tool_calls", None), sort_keys=True, default=str)
        key = f"{lane}:{message.id}:{calls}" if message.id else None
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                yield ToolStarted(lane, str(call.get("id")), call["name"], dict(call["args"]))
        elif isinstance(message, ToolMessage):
            yield ToolFinished(
                lane,
                message.tool_call_id,
                message.name or "tool",
                message.text,
                is_error=message.status == "error",
            )
