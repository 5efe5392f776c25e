"""Big tool results moved out of the conversation into files on the backend.

`ToolResultOffload` owns both ways a result leaves the context:

- one result over `offload_tokens` is written under `/large_tool_results/` as it arrives
  and replaced by a preview naming the file (`tool_result` / `atool_result`);
- after a context overflow, the newest batch of results (which summarization keeps
  whole) is written out, or clipped for file tools that can be asked again in smaller
  pieces (`batch`, a plan for `fathom.backends.protocol.drive` / `adrive`).

Both `SummarizationMiddleware` and `FilesystemMiddleware` hold one. Owns also where
artifacts go (`artifacts_dir`, `OFFLOAD_DIR`, `ARCHIVE_DIR`). Imports `budget` and
`fathom.backends`; must not import the middleware that use it.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ModelRequest, ToolCallRequest
from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.types import Command

from fathom.backends.protocol import (
    BackendOrFactory,
    BackendProtocol,
    HookRuntime,
    Plan,
    adrive,
    arun_call,
    call,
    drive,
    resolve_backend,
    run_call,
)
from fathom.middleware.context.budget import CHARS_PER_TOKEN

__all__ = [
    "ARCHIVE_DIR",
    "BATCH_OFFLOAD_CHARS",
    "OFFLOAD_DIR",
    "PREVIEW_LINES",
    "ToolResultOffload",
    "artifacts_dir",
]

OFFLOAD_DIR = "/large_tool_results"
ARCHIVE_DIR = "/conversation_history"
PREVIEW_LINES = 10
BATCH_OFFLOAD_CHARS = 2_000
"""After a context overflow, results of the newest batch longer than this go to files."""
# File tools bound their own output (and offloading a read would only offload it again).
_NOT_OFFLOADED = frozenset({"ls", "glob", "grep", "read_file", "write_file", "edit_file"})


def artifacts_dir(backend: Any, name: str) -> str:
    """The directory `name` under the backend's `artifacts_root`: a `CompositeBackend`'s
    (so offloaded results and archives can be routed, e.g. under `/artifacts/`), else `/`.

    `artifacts_dir(CompositeBackend(..., artifacts_root="/artifacts/"), "large_tool_results")`
    is `/artifacts/large_tool_results`.
    """
    root = getattr(backend, "artifacts_root", None)
    root = root if isinstance(root, str) and root else "/"
    return f"{root.rstrip('/')}/{name}"


class ToolResultOffload:
    """Writes big tool results to `backend` and leaves a notice in their place.

    Args:
        backend: Where results go (a backend or a factory of one).
        offload_tokens: A result longer than this many tokens' worth of characters is
            written out as it arrives.
    """

    def __init__(self, backend: BackendOrFactory, offload_tokens: int) -> None:
        self.backend = backend
        self.offload_tokens = offload_tokens

    # -- one result as it arrives ------------------------------------------------------------

    def _target(
        self, request: ToolCallRequest, result: Any
    ) -> tuple[BackendProtocol, str, str] | None:
        """Where a too-large tool result goes: (backend, path, content); `None` keeps it."""
        if not isinstance(result, ToolMessage) or request.tool_call["name"] in _NOT_OFFLOADED:
            return None
        content = result.content
        if not isinstance(content, str) or len(content) <= self.offload_tokens * CHARS_PER_TOKEN:
            return None
        call_id = request.tool_call.get("id") or "result"
        backend: BackendProtocol = resolve_backend(self.backend, request.runtime)
        return backend, f"{artifacts_dir(backend, OFFLOAD_DIR.strip('/'))}/{call_id}", content

    def _notice(self, result: ToolMessage, path: str, content: str, written: Any) -> ToolMessage:
        """The message that replaces `result`, whose content was written to `path`."""
        lines = content.splitlines()
        preview = "\n".join(line[:200] for line in lines[:PREVIEW_LINES])
        if written.error:
            cut = self.offload_tokens * CHARS_PER_TOKEN
            text = (
                f"{content[:cut]}\n[Output cut at {cut:,} of {len(content):,} characters; it "
                f"could not be saved in full: {written.error}]"
            )
        else:
            text = (
                f"This result was too large to show ({len(content):,} characters, "
                f"{len(lines):,} lines), so it was saved to `{path}`. Its first lines:\n\n"
                f"{preview}\n\nRead the rest with read_file (offset and limit) or search it "
                "with grep."
            )
        return result.model_copy(update={"content": text})

    def _tool_result(self, request: ToolCallRequest, result: Any) -> Plan[Any]:
        target = self._target(request, result)
        if target is None:
            return result
        backend, path, content = target
        written = yield call(backend, "write", path, content)
        message = self._notice(result, path, content, written)
        if written.files_update:
            return Command(update={"files": written.files_update, "messages": [message]})
        return message

    def tool_result(self, request: ToolCallRequest, result: Any) -> Any:
        """`result`, or, when too large, a notice of the file it was written to (with the
        `files` update of an in-state backend)."""
        return drive(self._tool_result(request, result), run_call)

    async def atool_result(self, request: ToolCallRequest, result: Any) -> Any:
        """Async `tool_result`, on the backend's `awrite`."""
        return await adrive(self._tool_result(request, result), arun_call)

    # -- the newest batch after an overflow --------------------------------------------------

    @staticmethod
    def _batch(messages: list[AnyMessage]) -> list[int]:
        """Indexes of the results of the newest AI message's tool calls that are big enough
        to be worth moving out (their text is longer than the notice that replaces them)."""
        start = len(messages)
        while start > 0 and isinstance(messages[start - 1], ToolMessage):
            start -= 1
        return [
            i
            for i in range(start, len(messages))
            if isinstance(messages[i].content, str)
            and len(messages[i].content) > BATCH_OFFLOAD_CHARS
        ]

    @staticmethod
    def _clipped(message: ToolMessage) -> ToolMessage:
        """A file tool's result cut to its start: what it showed is on the backend already,
        so it is asked for again in smaller pieces rather than written a second time."""
        content = str(message.content)
        how = (
            "read it again in smaller pages (offset and limit)"
            if message.name == "read_file"
            else f"call {message.name} again with a narrower path or pattern"
        )
        text = (
            f"{content[:BATCH_OFFLOAD_CHARS]}\n[Cut at {BATCH_OFFLOAD_CHARS:,} of "
            f"{len(content):,} characters: the results of this turn did not fit the "
            f"context together. To see the rest, {how}.]"
        )
        return message.model_copy(update={"content": text})

    def batch(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> Plan[tuple[list[AnyMessage], dict[str, Any]] | None]:
        """After an overflow: `messages` with the newest batch's big results replaced
        (clipped, or a notice of the file each went to) and the `files` update; `None`
        when nothing could be replaced. Failed writes keep their result as it is
        (summarization may still make room)."""
        indexes = self._batch(messages)
        if not indexes:
            return None
        backend = resolve_backend(self.backend, HookRuntime(request.state, request.runtime))
        result, files = list(messages), {}
        for index in indexes:
            message = messages[index]
            if not isinstance(message, ToolMessage):
                continue
            if message.name in _NOT_OFFLOADED:
                result[index] = self._clipped(message)
                continue
            call_id = message.tool_call_id or f"result_{index}"
            path = f"{artifacts_dir(backend, OFFLOAD_DIR.strip('/'))}/{call_id}"
            written = yield call(backend, "write", path, str(message.content))
            if not written.error:
                result[index] = self._notice(message, path, str(message.content), written)
                files.update(written.files_update or {})
        if all(new is old for new, old in zip(result, messages, strict=True)):
            return None
        return result, files
