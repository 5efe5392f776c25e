"""Binary content kept out of the message history (`offload_binary_content=True`).

An image (or other base64 block) that `read_file` returns, or that a user message carries
inline, is written once to `blobs/<sha256>` under the backend's `artifacts_root`; the
message in state keeps the block without its payload and with the digest under
`BLOB_REF` instead, so checkpoints stay small. Every model call puts the payloads back
(read from the backend and checked against the digest); one that can no longer be read
becomes a short text notice. A payload that cannot be written stays inline.

Pointless on a backend that keeps files in the thread's state (the payload would be in
the checkpoint either way), so `FilesystemMiddleware` turns it off there with a warning.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from fathom.backends.composite import CompositeBackend
from fathom.backends.protocol import BackendProtocol
from fathom.backends.state import StateBackend
from fathom.errors import FathomError
from fathom.middleware.context.offload import artifacts_dir

__all__ = [
    "BLOB_REF",
    "MISSING_BLOB_TEXT",
    "BlobOffload",
    "blobs_in_state",
]

logger = logging.getLogger(__name__)

BLOB_REF = "fathom_blob"
"""Content-block key holding the SHA-256 digest of a payload saved under `blobs/`."""

MISSING_BLOB_TEXT = (
    "[An image or file returned earlier is no longer available. Read the file again if "
    "you still need it.]"
)
"""What the model sees in place of a saved payload that can no longer be read."""

_DIGEST = re.compile(r"[0-9a-f]{64}")
_UNREACHABLE = (FathomError, OSError, NotImplementedError)
"""What an upload or download raises when the backend cannot do it at all (it lacks the
operation, or its store fails); a single file's failure comes back as a response `error`."""


def blobs_in_state(backend: Any) -> bool:
    """Whether `blobs/` (under the artifacts root) is kept in the thread's state."""
    if isinstance(backend, StateBackend):
        return True
    if isinstance(backend, CompositeBackend):
        probe = f"{artifacts_dir(backend, 'blobs')}/probe"
        return isinstance(backend._owner(probe)[1], StateBackend)  # pyright: ignore[reportPrivateUsage]
    return False


def _pending(messages: Sequence[Any]) -> dict[str, tuple[str, bytes]]:
    """Each inline base64 payload → (digest, bytes)."""
    found: dict[str, tuple[str, bytes]] = {}
    for message in messages:
        if not isinstance(message, BaseMessage) or not isinstance(message.content, list):
            continue
        for block in message.content:
            payload = block.get("base64") if isinstance(block, dict) else None
            if not isinstance(payload, str) or payload in found:
                continue
            try:
                raw = base64.b64decode(payload, validate=True)
            except (ValueError, binascii.Error):
                continue
            found[payload] = (hashlib.sha256(raw).hexdigest(), raw)
    return found


def _stubbed(messages: Sequence[Any], saved: dict[str, str]) -> list[Any]:
    """`messages` with each saved payload replaced by its digest."""

    def stub(block: Any) -> Any:
        if not isinstance(block, dict) or block.get("base64") not in saved:
            return block
        kept = {key: value for key, value in block.items() if key != "base64"}
        return {**kept, BLOB_REF: saved[block["base64"]]}

    return _each_block(messages, stub)


def _each_block(messages: Sequence[Any], change: Callable[[Any], Any]) -> list[Any]:
    """`messages` with `change` applied to every content block (changed messages copied)."""
    result = []
    for message in messages:
        if isinstance(message, BaseMessage) and isinstance(message.content, list):
            content = [change(block) for block in message.content]
            if content != message.content:
                message = message.model_copy(update={"content": content})
        result.append(message)
    return result


def _refs(messages: Sequence[Any]) -> list[str]:
    digests: dict[str, None] = {}
    for message in messages:
        if isinstance(message, BaseMessage) and isinstance(message.content, list):
            for block in message.content:
                ref = block.get(BLOB_REF) if isinstance(block, dict) else None
                if isinstance(ref, str) and _DIGEST.fullmatch(ref):
                    digests[ref] = None
    return list(digests)


def _restored(messages: Sequence[Any], payloads: dict[str, str]) -> list[Any]:
    """`messages` with each digest replaced by its payload (or the missing notice)."""

    def hydrate(block: Any) -> Any:
        if not isinstance(block, dict) or BLOB_REF not in block:
            return block
        payload = payloads.get(block[BLOB_REF])
        if payload is None:
            return {"type": "text", "text": MISSING_BLOB_TEXT}
        kept = {key: value for key, value in block.items() if key != BLOB_REF}
        return {**kept, "base64": payload}

    return _each_block(messages, hydrate)


def _candidates(state_messages: Sequence[Any], queued: Sequence[Any]) -> list[Any]:
    """User messages and `read_file` results of the history (with `queued` replacements
    of the same id in their place)."""
    by_id = {m.id: m for m in queued if isinstance(m, BaseMessage) and m.id is not None}
    history = (
        by_id.get(m.id, m)
        for m in state_messages
        if isinstance(m, BaseMessage) and m.id is not None
    )
    return [
        m
        for m in history
        if isinstance(m, HumanMessage) or (isinstance(m, ToolMessage) and m.name == "read_file")
    ]


class BlobOffload:
    """Saves payloads under `blobs/` and restores them for model calls (module docstring).

    Args:
        backend: The resolved backend the blobs are written to and read from.
    """

    def __init__(self, backend: BackendProtocol) -> None:
        self.backend = backend
        self.prefix = artifacts_dir(backend, "blobs")

    def _path(self, digest: str) -> str:
        return f"{self.prefix}/{digest}"

    def _saved(self, pending: dict[str, tuple[str, bytes]], responses: Sequence[Any]) -> dict:
        return {
            payload: digest
            for (payload, (digest, _)), response in zip(pending.items(), responses, strict=False)
            if getattr(response, "error", None) is None
        }

    def offload(self, messages: Sequence[Any]) -> list[Any]:
        """`messages` with their inline payloads saved and replaced by digests."""
        pending = _pending(messages)
        if not pending:
            return list(messages)
        files = [(self._path(digest), raw) for digest, raw in pending.values()]
        try:
            responses = self.backend.upload_files(files)
        except _UNREACHABLE:  # best effort: the payload stays inline
            logger.warning("Could not save binary content under %s", self.prefix, exc_info=True)
            return list(messages)
        return _stubbed(messages, self._saved(pending, responses))

    async def aoffload(self, messages: Sequence[Any]) -> list[Any]:
        """Async `offload`."""
        pending = _pending(messages)
        if not pending:
            return list(messages)
        files = [(self._path(digest), raw) for digest, raw in pending.values()]
        try:
            responses = await self.backend.aupload_files(files)
        except _UNREACHABLE:  # best effort: the payload stays inline
            logger.warning("Could not save binary content under %s", self.prefix, exc_info=True)
            return list(messages)
        return _stubbed(messages, self._saved(pending, responses))

    def _accepted(self, digests: list[str], responses: Sequence[Any]) -> dict[str, str]:
        """Payloads whose bytes still match their digest (the files are agent-writable)."""
        payloads = {}
        for digest, response in zip(digests, responses, strict=False):
            content = getattr(response, "content", None)
            if (
                getattr(response, "error", None) is None
                and isinstance(content, bytes)
                and hashlib.sha256(content).hexdigest() == digest
            ):
                payloads[digest] = base64.b64encode(content).decode("ascii")
        return payloads

    def hydrate(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """`messages` with saved payloads read back (for the model call)."""
        digests = _refs(messages)
        if not digests:
            return list(messages)
        try:
            responses = self.backend.download_files([self._path(d) for d in digests])
        except _UNREACHABLE:
            logger.warning("Could not read binary content under %s", self.prefix, exc_info=True)
            responses = []
        return _restored(messages, self._accepted(digests, responses))

    async def ahydrate(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """Async `hydrate`."""
        digests = _refs(messages)
        if not digests:
            return list(messages)
        try:
            responses = await self.backend.adownload_files([self._path(d) for d in digests])
        except _UNREACHABLE:
            logger.warning("Could not read binary content under %s", self.prefix, exc_info=True)
            responses = []
        return _restored(messages, self._accepted(digests, responses))

    def history_update(self, state_messages: Sequence[Any], queued: Sequence[Any]) -> list[Any]:
        """`queued` plus the history's messages whose payloads were saved now (by id)."""
        candidates = _candidates(state_messages, queued)
        return _merged(queued, candidates, self.offload(candidates))

    async def ahistory_update(
        self, state_messages: Sequence[Any], queued: Sequence[Any]
    ) -> list[Any]:
        """Async `history_update`."""
        candidates = _candidates(state_messages, queued)
        return _merged(queued, candidates, await self.aoffload(candidates))

    def tool_result(self, result: Any) -> Any:
        """A `read_file` result (message or `Command`) with its payloads saved."""
        if isinstance(result, ToolMessage):
            return self.offload([result])[0]
        if isinstance(result, Command) and isinstance(result.update, dict):
            messages = result.update.get("messages")
            if isinstance(messages, list):
                update = {**result.update, "messages": self.offload(messages)}
                return replace(result, update=update)
        return result

    async def atool_result(self, result: Any) -> Any:
        """Async `tool_result`."""
        if isinstance(result, ToolMessage):
            return (await self.aoffload([result]))[0]
        if isinstance(result, Command) and isinstance(result.update, dict):
            messages = result.update.get("messages")
            if isinstance(messages, list):
                update = {**result.update, "messages": await self.aoffload(messages)}
                return replace(result, update=update)
        return result


def _merged(queued: Sequence[Any], before: Sequence[Any], after: Sequence[Any]) -> list[Any]:
    changed = [new for new, old in zip(after, before, strict=True) if new is not old]
    ids = {m.id for m in changed}
    return [*(m for m in queued if getattr(m, "id", None) not in ids), *changed]
