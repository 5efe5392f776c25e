"""`BackendBase`: async methods and runtime binding for backends that only write the sync ones."""

from __future__ import annotations

from typing import Any, Self

from fathom.backends.protocol import (
    DeleteResult,
    EditResult,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)

__all__ = ["BackendBase"]


class BackendBase:
    """Mixin: async methods that call the sync ones, and a no-op `bind`.

    In-memory backends are fast enough to run inline on the event loop; backends that do
    real I/O override the async methods (e.g. with `asyncio.to_thread`).
    """

    def bind(self, runtime: Any) -> Self:
        """Return a backend that serves one tool call of one run (default: itself)."""
        return self

    async def als(self, path: str) -> LsResult:
        return self.ls(path)  # type: ignore[attr-defined]

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self.read(file_path, offset, limit)  # type: ignore[attr-defined]

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None
    ) -> GrepResult:
        return self.grep(pattern, path, glob)  # type: ignore[attr-defined]

    async def aglob(self, pattern: str, path: str = "/") -> GlobResult:
        return self.glob(pattern, path)  # type: ignore[attr-defined]

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return self.write(file_path, content)  # type: ignore[attr-defined]

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        return self.edit(file_path, old_string, new_string, replace_all)  # type: ignore[attr-defined]

    async def adelete(self, file_path: str) -> DeleteResult:
        return self.delete(file_path)  # type: ignore[attr-defined]
