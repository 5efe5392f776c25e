"""`BackendBase`: a `BackendProtocol` for in-memory backends, whose async methods run inline."""

from __future__ import annotations

from typing import Any

from fathom.backends.protocol import BackendProtocol

__all__ = ["BackendBase"]


class BackendBase(BackendProtocol):
    """A `BackendProtocol` whose async methods call the sync ones directly.

    In-memory backends are fast enough to run inline on the event loop, which saves a
    thread hop per call; backends that do real I/O should subclass `BackendProtocol` (whose
    async methods run in a worker thread) or `PlannedBackend`. Methods a subclass leaves
    out raise `NotImplementedError`, as on `BackendProtocol`.
    """

    async def _async(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the sync method `name` inline (a subclass's override of it included)."""
        return getattr(self, name)(*args, **kwargs)
