"""`BackendBase`: a `BackendProtocol` for in-memory backends, whose async methods run inline."""

from __future__ import annotations

from typing import Any, Self

from fathom.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
    accepts_keyword,
    cap_grep,
)

__all__ = ["BackendBase"]


class BackendBase(BackendProtocol):
    """A `BackendProtocol` whose async methods call the sync ones directly, plus a no-op `bind`.

    In-memory backends are fast enough to run inline on the event loop, which saves a
    thread hop per call; backends that do real I/O should subclass `BackendProtocol` (whose
    async methods run in a worker thread) or override the async methods. Methods a subclass
    leaves out raise `NotImplementedError`, as on `BackendProtocol`.
    """

    def bind(self, runtime: Any) -> Self:
        """Return a backend that serves one tool call of one run (default: itself)."""
        return self

    async def als(self, path: str) -> LsResult:
        return self.ls(path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self.read(file_path, offset, limit)

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
        context_lines: int = 0,
    ) -> GrepResult:
        """Async `grep`, run inline; `context_lines` is passed on only when asked for."""
        kwargs: dict[str, Any] = {"context_lines": context_lines} if context_lines else {}
        if max_count is not None and accepts_keyword(type(self), "grep", "max_count"):
            return self.grep(pattern, path, glob, max_count=max_count, **kwargs)
        return cap_grep(self.grep(pattern, path, glob, **kwargs), max_count)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self.glob(pattern, path)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return self.write(file_path, content)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        return self.edit(file_path, old_string, new_string, replace_all)

    async def adelete(self, file_path: str) -> DeleteResult:
        return self.delete(file_path)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self.upload_files(files)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self.download_files(paths)
