"""Which version of a file the model last saw, so its changes never silently undo another's.

Each `read_file`, `write_file`, `edit_file` and `delete` answer about a file carries, in its
`ToolMessage.artifact` (kept in the thread's messages, never sent to the model), the version
of the file the model saw or produced (`fathom.backends.versions`). A later `write_file` of
that file is conditioned on the newest such version: when another writer (another thread on
a shared store, a background job, a subagent) changed the file in between, the backend
refuses the write (`CHANGED`) and the model is shown the file's current text to re-apply
its change to. An `edit_file` applies to the current text when its `old_string` is still
there (that loses nothing); when it is not, and the file changed since the model saw it,
the answer says so and shows the current text too.

A memory file the model saw only in its prompt (`MemoryMiddleware`) counts as seen at the
version loaded. A model that never saw a file writes it unconditioned, as in the reference
API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.versions import ABSENT
from fathom.tool_answers import tool_error

__all__ = [
    "MEMORY_VERSIONS",
    "VERSION_ARTIFACT",
    "changed_answer",
    "seen_version",
    "with_version",
]

VERSION_ARTIFACT = "fathom_file_version"
"""The key of a file tool answer's artifact that records `{"path": ..., "version": ...}`."""

MEMORY_VERSIONS = "memory_versions"
"""The state key where `MemoryMiddleware` keeps the version of each memory file it loaded
into the prompt: what the model saw of a file it has no tool answer about."""


def _normal(path: object) -> str | None:
    try:
        return normalize_path(path)  # type: ignore[arg-type]
    except (PathError, TypeError):
        return None


def seen_version(runtime: ToolRuntime, file_path: str) -> str | None:
    """The version of `file_path` the newest file tool answer in this agent's messages
    recorded, or `None` when no answer did (the model has not seen the file)."""
    path = _normal(file_path)
    state = runtime.state if isinstance(runtime.state, Mapping) else {}
    if path is None:
        return None
    for message in reversed(state.get("messages") or []):
        artifact = getattr(message, "artifact", None) if isinstance(message, ToolMessage) else None
        record = artifact.get(VERSION_ARTIFACT) if isinstance(artifact, Mapping) else None
        if isinstance(record, Mapping) and record.get("path") == path:
            version = record.get("version")
            return version if isinstance(version, str) else None
    loaded = state.get(MEMORY_VERSIONS)  # a memory file the model saw only in its prompt
    version = loaded.get(path) if isinstance(loaded, Mapping) else None
    return version if isinstance(version, str) else None


def _record(message: ToolMessage, path: str, version: str) -> ToolMessage:
    artifact = dict(message.artifact) if isinstance(message.artifact, Mapping) else {}
    artifact[VERSION_ARTIFACT] = {"path": path, "version": version}
    return message.model_copy(update={"artifact": artifact})


def with_version(answer: Any, runtime: ToolRuntime, tool: str, file_path: str,
                 version: str | None) -> Any:  # fmt: skip
    """`answer` (text, a `ToolMessage` or a `Command` carrying one) recording that the
    model has seen `file_path` at `version`; unchanged when `version` is `None`."""
    path = _normal(file_path)
    if version is None or path is None:
        return answer
    if isinstance(answer, str):
        answer = ToolMessage(content=answer, tool_call_id=runtime.tool_call_id, name=tool)
    if isinstance(answer, ToolMessage):
        return _record(answer, path, version)
    if isinstance(answer, Command) and isinstance(answer.update, dict):
        messages = [
            _record(m, path, version) if isinstance(m, ToolMessage) else m
            for m in answer.update.get("messages") or []
        ]
        return Command(update={**answer.update, "messages": messages})
    return answer


def changed_answer(runtime: ToolRuntime, tool: str, file_path: str, current: Any,
                   version: str | None) -> ToolMessage:  # fmt: skip
    """The error answer to a `tool` call whose change was not applied because `file_path`
    changed since the model last saw it; `current` is the `read_file` answer of the file
    now (text, or an error answer when it is gone or unreadable), `version` its version."""
    shown = normalize_path(file_path) if _normal(file_path) else file_path
    change = "write" if tool == "write_file" else "edit"
    if version == ABSENT:
        text = (
            f"Error: `{shown}` was deleted since you last read it (another writer); your "
            f"{change} was not applied. If it should still exist, create it again with "
            "write_file."
        )
    else:
        body = current if isinstance(current, str) else getattr(current, "text", str(current))
        text = (
            f"Error: `{shown}` changed since you last read it (another writer changed it); "
            f"your {change} was not applied, so nothing of theirs was lost. Its current "
            "content is below: apply your change to this text and call "
            f"{tool} again (edit_file is best for adding to it).\n\n{body}"
        )
    answer = tool_error(content=text, tool_call_id=runtime.tool_call_id, name=tool)
    if version is None:
        return answer
    return _record(answer, shown, version)
