"""Large user messages saved to a file, so one pasted document cannot flood the context.

`FilesystemMiddleware(human_message_token_limit_before_evict=N)`: when the newest message
of a model call is a user message whose text is longer than `N` tokens (4 characters a
token), its text is written to `conversation_history/<uuid>.md` under the backend's
`artifacts_root` and the message is tagged in state with the file's path
(`additional_kwargs["lc_evicted_to"]`). The state keeps the full text; every model call
from then on shows the model a preview with the path instead (images and other non-text
blocks of the message stay). A write that fails leaves the message whole.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.types import Command

from fathom.backends.protocol import BackendOrFactory, BackendProtocol, HookRuntime, resolve_backend
from fathom.middleware.context.budget import CHARS_PER_TOKEN
from fathom.middleware.context.offload import ARCHIVE_DIR, artifacts_dir

__all__ = ["EVICTED_TO", "PREVIEW_LINES", "HumanMessageEviction", "with_command"]

EVICTED_TO = "lc_evicted_to"
"""`additional_kwargs` key of a user message whose text was saved: the file's path."""

PREVIEW_LINES = 10
"""Lines of an evicted message the model still sees (each cut at 200 characters)."""


def _text(message: AnyMessage) -> str:
    """The message's text: its string content, or its text blocks joined."""
    if isinstance(message.content, str):
        return message.content
    return "".join(
        str(block.get("text", ""))
        for block in message.content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _preview(message: HumanMessage, path: str, text: str) -> HumanMessage:
    """What the model sees instead of `message`, whose text was saved to `path`."""
    lines = text.splitlines()
    head = "\n".join(line[:200] for line in lines[:PREVIEW_LINES])
    notice = (
        f"This message was too large to show ({len(text):,} characters, {len(lines):,} "
        f"lines), so its text was saved to `{path}`. Its first lines:\n\n{head}\n\n"
        "Read the rest with read_file (offset and limit) or search it with grep."
    )
    if isinstance(message.content, str):
        return message.model_copy(update={"content": notice})
    others = [
        block
        for block in message.content
        if not (isinstance(block, dict) and block.get("type") == "text")
        and not isinstance(block, str)
    ]
    return message.model_copy(update={"content": [{"type": "text", "text": notice}, *others]})


def with_command(response: Any, command: Command | None) -> Any:
    """`response`, carrying `command` as a state update when there is one."""
    if command is None:
        return response
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    return ExtendedModelResponse(model_response=response, command=command)


class HumanMessageEviction:
    """Saves the newest user message when it is too large; shows previews of saved ones.

    Args:
        backend: Where the text goes (a backend, or a factory called with the model
            call's state and runtime).
        token_limit: Messages whose text is longer than this many tokens are saved.
    """

    def __init__(self, backend: BackendOrFactory, token_limit: int) -> None:
        self.backend = backend
        self.max_chars = token_limit * CHARS_PER_TOKEN
        self._seen: tuple[list[AnyMessage], dict[int, HumanMessage]] = ([], {})
        """The history `_previews` last examined, and the previews it made (by position)."""

    def _target(self, request: ModelRequest) -> tuple[BackendProtocol, str, str] | None:
        """(backend, path, text) for the newest message when it must be saved now."""
        messages = request.messages
        last = messages[-1] if messages else None
        if not isinstance(last, HumanMessage) or last.id is None:
            return None
        if last.additional_kwargs.get(EVICTED_TO):
            return None
        text = _text(last)
        if len(text) <= self.max_chars:
            return None
        backend = resolve_backend(self.backend, HookRuntime(request.state, request.runtime))
        path = f"{artifacts_dir(backend, ARCHIVE_DIR.strip('/'))}/{uuid.uuid4().hex}.md"
        return backend, path, text

    def _apply(
        self, request: ModelRequest, path: str | None, written: Any
    ) -> tuple[ModelRequest, Command | None]:
        """The request with saved messages as previews, and the state update tagging a
        newly saved one."""
        messages: list[AnyMessage] = list(request.messages)
        command = None
        if path is not None and not getattr(written, "error", None):
            last = messages[-1]
            kwargs = {**last.additional_kwargs, EVICTED_TO: path}
            tagged = last.model_copy(update={"additional_kwargs": kwargs})
            messages[-1] = tagged
            update: dict[str, Any] = {"messages": [tagged]}
            if getattr(written, "files_update", None):
                update["files"] = written.files_update
            command = Command(update=update)
        shown = self._previews(messages)
        if shown is None:
            return request, command
        return request.override(messages=shown), command

    def _previews(self, messages: Sequence[AnyMessage]) -> list[AnyMessage] | None:
        """`messages` with every saved (tagged) user message still over the limit shown
        as a preview; `None` when there is none.

        A model call's history is usually the previous call's plus a few new messages (the
        same objects), so only the messages past the prefix seen last time are examined;
        the previews found in that prefix are reused. Any other history is scanned whole.
        """
        seen, seen_previews = self._seen
        start = 0
        if seen and len(seen) <= len(messages) and all(map(operator.is_, seen, messages)):
            start = len(seen)
        previews = {k: v for k, v in seen_previews.items() if k < start}
        for k in range(start, len(messages)):
            message = messages[k]
            if not isinstance(message, HumanMessage):
                continue
            path = message.additional_kwargs.get(EVICTED_TO)
            if isinstance(path, str):
                text = _text(message)
                if len(text) > self.max_chars:
                    previews[k] = _preview(message, path, text)
        self._seen = (list(messages), previews)
        if not previews:
            return None
        result = list(messages)
        for k, preview in previews.items():
            result[k] = preview
        return result

    def prepare(self, request: ModelRequest) -> tuple[ModelRequest, Command | None]:
        """The request to send, and the state update to return with the response."""
        target = self._target(request)
        if target is None:
            return self._apply(request, None, None)
        backend, path, text = target
        return self._apply(request, path, backend.write(path, text))

    async def aprepare(self, request: ModelRequest) -> tuple[ModelRequest, Command | None]:
        """Async `prepare`, on the backend's `awrite`."""
        target = self._target(request)
        if target is None:
            return self._apply(request, None, None)
        backend, path, text = target
        return self._apply(request, path, await backend.awrite(path, text))
