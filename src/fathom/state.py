"""Shared state schemas and reducers: the `files` and `todos` channels.

The `files` channel maps absolute virtual paths to `FileData` (or `None`, which deletes the
path). It is a LangGraph `DeltaChannel`: a checkpoint stores only the writes of its own step
and the full mapping is rebuilt by replaying them, so storage grows with the data written,
not with the number of steps times the size of the filesystem.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

# No `from __future__ import annotations` here: the TypedDicts below must see their
# `NotRequired`/`Required` markers at class creation, or every key reads as required at
# runtime (`__required_keys__`), which LangGraph and callers inspect.
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, TypeVar

from langchain.agents.middleware.types import AgentState
from langchain_core.messages import AnyMessage
from langgraph.channels.binop import _get_overwrite
from langgraph.channels.delta import DeltaChannel
from langgraph.errors import InvalidUpdateError
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

from fathom.errors import FathomError

__all__ = [
    "FILES_SNAPSHOT_FREQUENCY",
    "MESSAGES_SNAPSHOT_FREQUENCY",
    "DeepAgentState",
    "FileData",
    "FilesChannel",
    "FilesState",
    "FilesUpdate",
    "FilesystemState",
    "InvalidFilesError",
    "as_file_data",
    "check_files_update",
    "merge_files",
    "merge_update",
    "reduce_files",
]


class FileData(TypedDict):
    """One file of the virtual filesystem, as stored in state or a store."""

    content: str
    """The file's text, or its bytes in base64 when `encoding` is `"base64"`."""
    encoding: Literal["utf-8", "base64"]
    created_at: NotRequired[str]
    """ISO-8601 UTC timestamp of creation (absent in data written by some other tools;
    read it with `.get`)."""
    modified_at: NotRequired[str]
    """ISO-8601 UTC timestamp of the last change (may be absent, like `created_at`)."""


FilesUpdate = dict[str, FileData | None]
"""A write to the `files` channel: path → new data, or `None` to delete the path."""

FILES_SNAPSHOT_FREQUENCY = 10_000
"""Updates between full snapshots of the `files` channel.

Each snapshot stores every file again, so frequent snapshots bring back quadratic growth;
replaying up to this many small writes on load is cheap by comparison.
"""


K = TypeVar("K")
V = TypeVar("V")


def merge_update(current: Mapping[K, V] | None, update: Mapping[K, V | None] | None) -> dict[K, V]:
    """`current` with `update` applied: a value replaces the key's, `None` removes the key
    (how the `files` channel and a workflow's `results` merge)."""
    merged = dict(current or {})
    for key, value in (update or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def as_file_data(value: object) -> object:
    """`value` as a `files` entry: a plain string (content preloaded by hand, e.g.
    `{"/a.md": "text"}` instead of `create_file_data("text")`) becomes a `FileData` holding
    it as UTF-8 text, with no timestamps (so replaying the channel gives the same value);
    anything else is returned unchanged."""
    if isinstance(value, str):
        return FileData(content=value, encoding="utf-8")
    return value


def merge_files(current: Mapping[str, FileData] | None, update: FilesUpdate | None) -> dict:
    """Apply one `files` update to a mapping and return the new mapping (a plain-string
    value is taken as the file's text, see `as_file_data`)."""
    if update and any(isinstance(value, str) for value in update.values()):
        update = {path: as_file_data(value) for path, value in update.items()}  # type: ignore[misc]
    return merge_update(current, update)


class InvalidFilesError(FathomError, InvalidUpdateError, ValueError):
    """A write to the `files` channel that no file tool could read back: a key that is not
    an absolute path, or a value that is not file data.

    Raised where the write enters the channel (the invoke input, `update_state`, a node's
    update), never later at a read. Like any update a LangGraph channel refuses
    (`InvalidUpdateError`), nothing of the step is stored: the thread's next run starts from
    what it held before (until then `get_state` raises the same error).
    """


def _key_problem(key: object) -> str | None:
    """Why `key` cannot name a file of the virtual filesystem, or `None` when it can."""
    if not isinstance(key, str):
        return f"is a {type(key).__name__}, not a path"
    if not key.startswith("/"):
        return "does not start with '/'"
    if key == "/" or key.endswith("/"):
        return "ends with '/', so it names a directory"
    if "\\" in key or "\x00" in key:
        return "contains a backslash or a NUL byte"
    if any(part in ("", ".", "..") for part in key[1:].split("/")):
        return "has an empty, '.' or '..' part"
    return None


def _is_file_value(value: object) -> bool:
    """Whether `value` reads as a file: text, or a mapping whose `content` is text (or a
    list of lines, the older format)."""
    if isinstance(value, str):
        return True
    if not isinstance(value, Mapping):
        return False
    content = value.get("content")
    return isinstance(content, str) or (
        isinstance(content, list) and all(isinstance(line, str) for line in content)
    )


def check_files_update(update: object) -> None:
    """Refuse a `files` write no reader could use (`InvalidFilesError`, naming the key).

    Keys must be absolute, normalised file paths (`/notes/a.md`); values must be file
    data (`create_file_data(text)`), a plain string (the file's text) or `None` (delete the
    path; any key may be deleted, so an entry stored before this check can be removed).
    """
    if not isinstance(update, Mapping):
        raise InvalidFilesError(
            f"`files` must map file paths to file data, not {type(update).__name__}."
        )
    for key, value in update.items():
        if value is None:
            continue
        problem = _key_problem(key)
        if problem is not None:
            raise InvalidFilesError(
                f"`files` key {key!r} {problem}: start file paths with '/' and name a file "
                f"(here perhaps {_suggested_path(key)!r}). A file stored under this key "
                "could never be read."
            )
        if not _is_file_value(value):
            raise InvalidFilesError(
                f"`files` value for {key!r} is {type(value).__name__} {_preview(value)}, not file "
                "data: give the file's text as a str, or create_file_data(text)."
            )


def _suggested_path(key: object) -> str:
    """`key` as an absolute file path (`a.md` -> `/a.md`, `/x/../a.md` -> `/a.md`)."""
    parts: list[str] = []
    for part in str(key).replace("\\", "/").replace("\x00", "").split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/" + "/".join(parts) if parts else "/notes.md"


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class FilesChannel(DeltaChannel):
    """The `files` channel: a `DeltaChannel` over `reduce_files` that refuses, as it is
    written, an update no reader could use (`check_files_update`).

    Only new writes are checked (the invoke input, `update_state`, a node's update); writes
    replayed from a checkpoint are not, so a thread saved before the check still loads.
    """

    def update(self, values: Sequence[Any]) -> bool:
        for value in values:
            is_overwrite, replacement = _get_overwrite(value)
            if not (is_overwrite and replacement is None):
                check_files_update(replacement if is_overwrite else value)
        return super().update(values)


def reduce_files(current: Mapping[str, FileData] | None, writes: Sequence[FilesUpdate]) -> dict:
    """Batch reducer of the `files` channel: apply each write in order.

    Deterministic and batching-invariant, as `DeltaChannel` requires.
    """
    merged = dict(current or {})
    for update in writes:
        merged = merge_files(merged, update)
    return merged


class FilesState(AgentState):
    """Agent state with the virtual filesystem channel."""

    files: NotRequired[
        Annotated[
            dict[str, FileData],
            FilesChannel(reduce_files, snapshot_frequency=FILES_SNAPSHOT_FREQUENCY),
        ]
    ]


FilesystemState = FilesState
"""The Deep Agents name of `FilesState` (`deepagents.middleware.filesystem.FilesystemState`):
the same class, so state schemas written against either name are one schema."""


MESSAGES_SNAPSHOT_FREQUENCY = 10_000
"""Updates between full snapshots of the `messages` channel (see `DeepAgentState`)."""


class DeepAgentState(FilesState):
    """The state of a deep agent: `messages` and `files` stored as deltas.

    LangChain's default `messages` channel stores the whole conversation in every
    checkpoint, so a run of N steps stores O(N²) bytes. Here `messages` is a `DeltaChannel`
    with LangGraph's batch messages reducer (same semantics as `add_messages` for agent
    use: update by id, `RemoveMessage`, `REMOVE_ALL_MESSAGES`): each checkpoint stores its
    own step's messages, plus a full snapshot every `MESSAGES_SNAPSHOT_FREQUENCY` updates.
    """

    messages: Required[
        Annotated[
            list[AnyMessage],
            # LangGraph's own reducer, passed as is: LangGraph recognises it by identity (to
            # give messages ids), though its `list` parameter is narrower than the
            # `Sequence` DeltaChannel declares (it does pass a list).
            DeltaChannel(
                _messages_delta_reducer,  # pyright: ignore[reportArgumentType]
                snapshot_frequency=MESSAGES_SNAPSHOT_FREQUENCY,
            ),
        ]
    ]
