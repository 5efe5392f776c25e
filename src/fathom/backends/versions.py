"""File versions: how a change says which version of a file it was based on.

Two writers of one file (two threads of a user on a shared store namespace, or a background
consolidation racing a live conversation) each read the file, compute new content and
write it; without a check the last write silently replaces the first. A backend that keeps
versions reports, with each read and change, the *version* of the file (`file_version`: a
hash of its stored content, or `ABSENT` when there is no file), and takes a change on the
condition that the file is still at the version the writer saw (`expecting`): if it is not,
the change is refused with `ErrorKind.CHANGED` and nothing is written.

The condition travels with the call as a context variable rather than as an argument, so
the reference signatures `write(file_path, content)` and `edit(...)` stay as they are and
every wrapper between the tool and the backend (`CompositeBackend` routes, `PolicyBackend`,
a user's pass-through wrapper) carries it without knowing about it. A backend that keeps no
versions (a disk, a sandbox, a foreign backend) ignores it and keeps its own guarantees.

`KeyLocks` serialises the read-check-write of one key inside this process, so a check and
the write that follows it are one step against every other writer in the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping
from contextvars import ContextVar

from fathom.state import FileData

__all__ = [
    "ABSENT",
    "KeyLocks",
    "expected_version",
    "expecting",
    "file_version",
    "is_stale",
    "version_of",
]

ABSENT = "absent"
"""The version of a path where no file is."""

_EXPECTED: ContextVar[str | None] = ContextVar("fathom_expected_file_version", default=None)


def file_version(data: FileData | Mapping[str, object]) -> str:
    """The version of a stored file: a short hash of its encoding and content (timestamps
    are left out, so rewriting the same text is the same version)."""
    encoding = str(data.get("encoding") or "utf-8")
    content = data.get("content")
    text = content if isinstance(content, str) else repr(content)
    digest = hashlib.sha256(f"{encoding}\0{text}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def version_of(data: FileData | Mapping[str, object] | None) -> str:
    """`file_version(data)`, or `ABSENT` when there is no file."""
    return ABSENT if data is None else file_version(data)


@contextlib.contextmanager
def expecting(version: str | None) -> Iterator[None]:
    """Within the block, a backend that keeps versions changes a file only while it is at
    `version` (`None`: no condition, the change applies to whatever is there)."""
    token = _EXPECTED.set(version)
    try:
        yield
    finally:
        _EXPECTED.reset(token)


def expected_version() -> str | None:
    """The version the current change is conditioned on (see `expecting`), or `None`."""
    return _EXPECTED.get()


def is_stale(current: FileData | Mapping[str, object] | None) -> bool:
    """Whether a change conditioned by `expecting` must be refused: the file is no longer
    (or not yet) at the expected version. `current` is what is stored now."""
    expected = _EXPECTED.get()
    return expected is not None and version_of(current) != expected


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


def _release_if_acquired(entry: _Entry, got: asyncio.Future[bool]) -> None:
    """Release the lock a cancelled waiter's thread acquired after it gave up."""
    if not got.cancelled() and got.exception() is None and got.result():
        entry.lock.release()


class KeyLocks:
    """One lock per key, held by sync callers and coroutines alike, forgotten when unused.

    A coroutine never blocks its event loop waiting: when the lock is taken it waits in a
    worker thread, and if it is cancelled while waiting the lock is released as soon as
    that thread gets it.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}

    def _enter(self, key: Hashable) -> _Entry:
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.users += 1
            return entry

    def _leave(self, key: Hashable, entry: _Entry) -> None:
        with self._guard:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    def users(self, key: Hashable) -> int:
        """How many callers hold or wait for the lock of `key` now (for tests and metrics)."""
        with self._guard:
            entry = self._entries.get(key)
            return 0 if entry is None else entry.users

    @contextlib.contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Hold the lock of `key` for the block (blocking this thread while another has it)."""
        entry = self._enter(key)
        try:
            with entry.lock:
                yield
        finally:
            self._leave(key, entry)

    @contextlib.asynccontextmanager
    async def ahold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold the lock of `key` for the block, waiting off the event loop."""
        entry = self._enter(key)
        try:
            if not entry.lock.acquire(blocking=False):
                waiting = asyncio.get_running_loop().run_in_executor(None, entry.lock.acquire)
                try:
                    await asyncio.shield(waiting)
                except asyncio.CancelledError:
                    waiting.add_done_callback(lambda got: _release_if_acquired(entry, got))
                    raise
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            self._leave(key, entry)
