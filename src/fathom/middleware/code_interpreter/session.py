"""Where the interpreter's variables live between `eval` calls: a private state key.

The sandbox session (its globals, functions and imports) is dumped to bytes after each
`eval` that finishes and kept in the agent's state under `SESSION_KEY`, so the thread's
checkpointer saves it with the conversation and a resumed thread keeps its variables.
How long it lives is the `persistence` mode:

- `"thread"`: for the whole thread (every turn sees what earlier turns defined);
- `"turn"`: for one run of the agent (cleared when a new turn starts);
- `"call"`: for one `eval` (nothing is kept).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated, Literal, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

__all__ = [
    "PERSISTENCE_MODES",
    "SESSION_KEY",
    "CodeInterpreterState",
    "Persistence",
    "seal",
    "signing_key",
    "unseal",
]

Persistence = Literal["thread", "turn", "call"]

PERSISTENCE_MODES: tuple[Persistence, ...] = ("thread", "turn", "call")

SESSION_KEY = "code_interpreter_session"
"""The state key holding the dumped sandbox session (bytes); not in the input or output."""


class CodeInterpreterState(AgentState):
    """The agent state with the interpreter's session."""

    code_interpreter_session: NotRequired[Annotated[bytes | None, PrivateStateAttr]]


_SEALED = b"fathom-hmac-sha256:"
"""The start of a signed blob: this prefix, the 32-byte HMAC-SHA256 of the dump, the dump."""


def signing_key(key: str | bytes | None) -> bytes | None:
    """`snapshot_signing_key` as bytes (a str is UTF-8); `None` signs nothing."""
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else key
    if not isinstance(raw, bytes) or not raw:
        raise ValueError("snapshot_signing_key must be a non-empty str or bytes, or None.")
    return raw


def seal(blob: bytes | None, key: bytes | None) -> bytes | None:
    """`blob` signed with `key` for the checkpointer (unchanged without a key)."""
    if blob is None or key is None:
        return blob
    return _SEALED + hmac.new(key, blob, hashlib.sha256).digest() + blob


def unseal(stored: bytes | None, key: bytes | None) -> bytes | None:
    """The dump inside `stored` when its signature is `key`'s; `None` when it is missing or
    does not match (the caller discards it rather than load it). Without a key, `stored`."""
    if stored is None or key is None:
        return stored
    if not stored.startswith(_SEALED):
        return None
    mac, blob = stored[len(_SEALED) : len(_SEALED) + 32], stored[len(_SEALED) + 32 :]
    expected = hmac.new(key, blob, hashlib.sha256).digest()
    return blob if hmac.compare_digest(mac, expected) else None
