"""One serving process per SQLite storage folder: an exclusive lock held while it serves.

SQLite storage belongs to one process: its start-up recovery marks every run the storage
holds as `pending` or `running` as `error`, since no other process could be running them. A
second `fathom serve` on the same folder would do that to the first one's live runs, so
`hold_storage_lock` takes an exclusive `flock` on `<folder>/server.lock` first and refuses
when another process holds it. The kernel releases the lock when its holder exits, however it
exits (kill -9 included), so a restart after a crash finds the folder free. The holder writes
its pid into the file, for the refusal to name it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fathom.errors import FathomError

__all__ = ["LOCK_FILE", "StorageInUse", "hold_storage_lock"]

LOCK_FILE = "server.lock"


class StorageInUse(FathomError):
    """Another process holds the storage folder's lock; `holder` is its pid when known."""

    def __init__(self, folder: Path, holder: int | None) -> None:
        super().__init__(f"{folder} is locked by process {holder or 'unknown'}")
        self.folder = folder
        self.holder = holder


@contextmanager
def hold_storage_lock(folder: Path) -> Iterator[Path]:
    """Hold the exclusive lock on `folder` (created if missing) until the block ends.

    Raises `StorageInUse` at once, without waiting, when another process holds it, and
    `OSError` when the folder or the lock file cannot be created. Yields the lock file's path.
    """
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StorageInUse(folder, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def _holder(fd: int) -> int | None:
    """The pid the lock's holder wrote, or None while it has not written it yet."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None
