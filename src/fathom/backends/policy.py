"""Policy hooks: veto or rewrite a file operation before it reaches a backend.

A `BackendPolicy` sees every operation as a `FileOperation` and answers with `None` (go
ahead), a message (refused: the model gets it as the tool's error), or a changed
operation (for example content with secrets masked). `can_see` hides paths from `ls`,
`glob` and `grep` results. `PolicyBackend` wraps any backend with a list of policies;
fathom's filesystem permissions are one such policy.

For checks that need the backend's own logic, subclassing a backend and overriding
`write`/`edit` works as well: fathom's async methods call the sync ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self, cast

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.base import BackendBase
from fathom.backends.errors import BackendError, ErrorKind, error_kind
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
    resolve_backend,
    supports_delete,
)

__all__ = ["BackendPolicy", "FileOperation", "OperationName", "PolicyBackend"]

logger = logging.getLogger(__name__)

OperationName = Literal[
    "ls", "read", "grep", "glob", "write", "edit", "delete", "upload", "download"
]

_KIND: dict[str, Literal["read", "write"]] = {
    "ls": "read",
    "read": "read",
    "grep": "read",
    "glob": "read",
    "download": "read",
    "write": "write",
    "edit": "write",
    "delete": "write",
    "upload": "write",
}
_LISTING = frozenset({"ls", "grep", "glob"})


@dataclass(frozen=True)
class FileOperation:
    """One backend call as a policy sees it.

    Attributes:
        name: The backend method.
        path: The path argument as the caller gave it (`"/"` when a search has none).
        arguments: The other arguments by name (`content`, `old_string`, `pattern`, ...).
        resolved_path: Where the backend says the path really leads (a symlink's target),
            when the backend can tell (`resolved_path(path)`); otherwise `None`.
    """

    name: OperationName
    path: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    resolved_path: str | None = None

    @property
    def kind(self) -> Literal["read", "write"]:
        """`"read"` for ls / read / grep / glob / download, `"write"` for write / edit /
        delete / upload."""
        return _KIND[self.name]

    @property
    def is_listing(self) -> bool:
        """Whether `path` names a directory to list or search (ls, glob, grep)."""
        return self.name in _LISTING

    @property
    def normalized_path(self) -> str | None:
        """The absolute `..`-free form of `path`, or `None` when it is not a usable path."""
        try:
            return normalize_path(self.path)
        except PathError:
            return None


class BackendPolicy:
    """Base class for policy hooks; override what you need."""

    def check(self, operation: FileOperation) -> FileOperation | str | None:
        """`None` to allow, a message to refuse, or a rewritten operation to run instead.

        A refusal's message is the policy's own words for the model: `PolicyBackend`
        returns it as the result's `error` unchanged (text, like a backend written for the
        Deep Agents API), and the tool shows it as is.
        """
        return None

    def can_see(self, path: str) -> bool:
        """Whether a path may appear in `ls`, `glob` and `grep` results."""
        return True


class PolicyBackend(BackendBase):
    """A backend whose operations pass through `policies`, in order, before `inner`.

    The first refusal wins and `inner` is never called for a refused operation.
    """

    def __init__(
        self,
        inner: BackendProtocol | Callable[[Any], BackendProtocol],
        policies: Sequence[BackendPolicy],
    ) -> None:
        self.inner = inner
        self.policies = list(policies)

    def bind(self, runtime: Any) -> Self:
        return type(self)(resolve_backend(self.inner, runtime), self.policies)

    @property
    def _backend(self) -> BackendProtocol:
        """`inner` as the backend to call: a factory has no file methods until `bind`
        resolves it for a tool call."""
        inner = self.inner
        if callable(inner) and not isinstance(inner, BackendProtocol):
            raise TypeError(
                f"PolicyBackend wraps the backend factory {inner!r}: call "
                "bind(runtime) and use the PolicyBackend it returns"
            )
        return cast("BackendProtocol", inner)  # a backend, possibly duck-typed

    def _resolve(self, path: str) -> str | None:
        resolve = getattr(self.inner, "resolved_path", None)
        return resolve(path) if resolve is not None else None

    def _admit(self, operation: FileOperation) -> FileOperation | str:
        operation = replace(operation, resolved_path=self._resolve(operation.path))
        for policy in self.policies:
            outcome = policy.check(operation)
            if isinstance(outcome, str):
                return outcome
            if isinstance(outcome, FileOperation):
                operation = outcome
        return operation

    def _visible(self, path: str) -> bool:
        if not all(policy.can_see(path) for policy in self.policies):
            return False
        resolved = self._resolve(path)
        if resolved and path.endswith("/") and not resolved.endswith("/"):
            resolved += "/"
        return resolved in (None, path) or all(p.can_see(resolved) for p in self.policies)

    def _filter_ls(self, result: LsResult) -> LsResult:
        if result.entries is None:
            return result
        return replace(result, entries=[e for e in result.entries if self._visible(e["path"])])

    def _filter_glob(self, result: GlobResult) -> GlobResult:
        if result.matches is None:
            return result
        return replace(result, matches=[m for m in result.matches if self._visible(m["path"])])

    def _filter_grep(self, result: GrepResult) -> GrepResult:
        if result.matches is None:
            return result
        skipped = [p for p in result.skipped or [] if self._visible(p)]
        return replace(
            result,
            matches=[m for m in result.matches if self._visible(m["path"])],
            skipped=skipped or None,
        )

    # -- operations ----------------------------------------------------------------------

    def ls(self, path: str) -> LsResult:
        op = self._admit(FileOperation("ls", path))
        if isinstance(op, str):
            return LsResult(error=op)
        return self._filter_ls(self._backend.ls(op.path))

    async def als(self, path: str) -> LsResult:
        op = self._admit(FileOperation("ls", path))
        if isinstance(op, str):
            return LsResult(error=op)
        return self._filter_ls(await self._backend.als(op.path))

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        op = self._admit(FileOperation("read", file_path, {"offset": offset, "limit": limit}))
        if isinstance(op, str):
            return ReadResult(error=op)
        return self._backend.read(op.path, op.arguments["offset"], op.arguments["limit"])

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        op = self._admit(FileOperation("read", file_path, {"offset": offset, "limit": limit}))
        if isinstance(op, str):
            return ReadResult(error=op)
        return await self._backend.aread(op.path, op.arguments["offset"], op.arguments["limit"])

    def _grep_op(self, pattern: str, path: str | None, glob: str | None) -> FileOperation | str:
        return self._admit(
            FileOperation("grep", path or "/", {"pattern": pattern, "glob": glob})
        )

    def _grep_kwargs(self, method: str, max_count: int | None, context_lines: int) -> dict:
        kwargs: dict[str, Any] = {}
        if max_count is not None and accepts_keyword(type(self.inner), method, "max_count"):
            kwargs["max_count"] = max_count
        if context_lines > 0 and accepts_keyword(type(self.inner), method, "context_lines"):
            kwargs["context_lines"] = context_lines
        return kwargs

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
        context_lines: int = 0,
    ) -> GrepResult:
        op = self._grep_op(pattern, path, glob)
        if isinstance(op, str):
            return GrepResult(error=op)
        args = op.arguments
        kwargs = self._grep_kwargs("grep", max_count, context_lines)
        result = self._backend.grep(args["pattern"], op.path, args["glob"], **kwargs)
        return cap_grep(self._filter_grep(result), max_count)

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
        context_lines: int = 0,
    ) -> GrepResult:
        op = self._grep_op(pattern, path, glob)
        if isinstance(op, str):
            return GrepResult(error=op)
        args = op.arguments
        kwargs = self._grep_kwargs("agrep", max_count, context_lines)
        result = await self._backend.agrep(args["pattern"], op.path, args["glob"], **kwargs)
        return cap_grep(self._filter_grep(result), max_count)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        op = self._admit(FileOperation("glob", path or "/", {"pattern": pattern}))
        if isinstance(op, str):
            return GlobResult(error=op)
        return self._filter_glob(self._backend.glob(op.arguments["pattern"], op.path))

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        op = self._admit(FileOperation("glob", path or "/", {"pattern": pattern}))
        if isinstance(op, str):
            return GlobResult(error=op)
        return self._filter_glob(await self._backend.aglob(op.arguments["pattern"], op.path))

    def write(self, file_path: str, content: str) -> WriteResult:
        op = self._admit(FileOperation("write", file_path, {"content": content}))
        if isinstance(op, str):
            return WriteResult(error=op)
        return self._backend.write(op.path, op.arguments["content"])

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        op = self._admit(FileOperation("write", file_path, {"content": content}))
        if isinstance(op, str):
            return WriteResult(error=op)
        return await self._backend.awrite(op.path, op.arguments["content"])

    def _edit_op(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool
    ) -> FileOperation | str:
        arguments = {"old_string": old_string, "new_string": new_string, "replace_all": replace_all}
        return self._admit(FileOperation("edit", file_path, arguments))

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        op = self._edit_op(file_path, old_string, new_string, replace_all)
        if isinstance(op, str):
            return EditResult(error=op)
        a = op.arguments
        return self._backend.edit(op.path, a["old_string"], a["new_string"], a["replace_all"])

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        op = self._edit_op(file_path, old_string, new_string, replace_all)
        if isinstance(op, str):
            return EditResult(error=op)
        a = op.arguments
        inner = self._backend
        return await inner.aedit(op.path, a["old_string"], a["new_string"], a["replace_all"])

    def _delete_op(self, file_path: str, listing: LsResult | None) -> FileOperation | str:
        """The delete as policies see it: `arguments["directory"]` says whether the target
        is a directory (its whole subtree goes), from the inner backend's listing."""
        return self._admit(
            FileOperation("delete", file_path, {"directory": _names_directory(file_path, listing)})
        )

    def _probe(self, file_path: str) -> LsResult | None:
        try:
            return self._backend.ls(file_path)
        except Exception:  # a backend without ls: treat the target as a directory
            return None

    async def _aprobe(self, file_path: str) -> LsResult | None:
        try:
            return await self._backend.als(file_path)
        except Exception:
            return None

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Upload the files the policies admit; a refused file gets `permission_denied`.

        A policy may rewrite an upload (`arguments["content"]`, the bytes, or the path).
        Uploads are written as the policies let them through, one call to `inner` for all.
        """
        admitted, answers = self._admit_uploads(files)
        got = self._backend.upload_files([upload for _, upload in admitted]) if admitted else []
        return self._merge_uploads(files, admitted, answers, got)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async `upload_files`."""
        admitted, answers = self._admit_uploads(files)
        payload = [upload for _, upload in admitted]
        got = await self._backend.aupload_files(payload) if admitted else []
        return self._merge_uploads(files, admitted, answers, got)

    def _admit_uploads(
        self, files: list[tuple[str, bytes]]
    ) -> tuple[list[tuple[int, tuple[str, bytes]]], dict[int, FileUploadResponse]]:
        admitted: list[tuple[int, tuple[str, bytes]]] = []
        answers: dict[int, FileUploadResponse] = {}
        for index, (path, content) in enumerate(files):
            op = self._admit(FileOperation("upload", path, {"content": content}))
            if isinstance(op, str):
                logger.info("upload of %s refused by a policy: %s", path, op)
                answers[index] = FileUploadResponse(path=path, error=ErrorKind.PERMISSION)
            else:
                admitted.append((index, (op.path, op.arguments["content"])))
        return admitted, answers

    @staticmethod
    def _merge_uploads(
        files: list[tuple[str, bytes]],
        admitted: list[tuple[int, tuple[str, bytes]]],
        answers: dict[int, FileUploadResponse],
        got: list[FileUploadResponse],
    ) -> list[FileUploadResponse]:
        for position, (index, _) in enumerate(admitted):
            error = got[position].error if position < len(got) else ErrorKind.FAILED
            answers[index] = FileUploadResponse(path=files[index][0], error=error)
        responses = [answers[index] for index in range(len(files))]
        update = getattr(got, "files_update", None)
        if update is None:
            return responses
        from fathom.backends.state import UploadResults

        return UploadResults(responses, files_update=update)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Download the paths the policies admit; a refused path gets `permission_denied`."""
        admitted, answers = self._admit_downloads(paths)
        got = list(self._backend.download_files([p for _, p in admitted])) if admitted else []
        return self._merge_downloads(paths, admitted, answers, got)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async `download_files`."""
        admitted, answers = self._admit_downloads(paths)
        inner = [p for _, p in admitted]
        got = list(await self._backend.adownload_files(inner)) if admitted else []
        return self._merge_downloads(paths, admitted, answers, got)

    def _admit_downloads(
        self, paths: list[str]
    ) -> tuple[list[tuple[int, str]], dict[int, FileDownloadResponse]]:
        admitted: list[tuple[int, str]] = []
        answers: dict[int, FileDownloadResponse] = {}
        for index, path in enumerate(paths):
            op = self._admit(FileOperation("download", path))
            if isinstance(op, str):
                logger.info("download of %s refused by a policy: %s", path, op)
                answers[index] = FileDownloadResponse(path=path, error=ErrorKind.PERMISSION)
            else:
                admitted.append((index, op.path))
        return admitted, answers

    @staticmethod
    def _merge_downloads(
        paths: list[str],
        admitted: list[tuple[int, str]],
        answers: dict[int, FileDownloadResponse],
        got: list[FileDownloadResponse],
    ) -> list[FileDownloadResponse]:
        for position, (index, _) in enumerate(admitted):
            if position < len(got):
                answer = got[position]
                answers[index] = FileDownloadResponse(
                    path=paths[index], content=answer.content, error=answer.error
                )
            else:
                answers[index] = FileDownloadResponse(path=paths[index], error=ErrorKind.FAILED)
        return [answers[index] for index in range(len(paths))]

    def delete(self, file_path: str) -> DeleteResult:
        op = self._delete_op(file_path, self._probe(file_path))
        if isinstance(op, str):
            return DeleteResult(error=op)
        if not supports_delete(self.inner):
            return DeleteResult(error=BackendError(ErrorKind.UNSUPPORTED, op.path, "delete"))
        return self._backend.delete(op.path)

    async def adelete(self, file_path: str) -> DeleteResult:
        op = self._delete_op(file_path, await self._aprobe(file_path))
        if isinstance(op, str):
            return DeleteResult(error=op)
        if not supports_delete(self.inner):
            return DeleteResult(error=BackendError(ErrorKind.UNSUPPORTED, op.path, "delete"))
        adelete = getattr(self.inner, "adelete", None)
        if adelete is None:
            return self._backend.delete(op.path)
        return await adelete(op.path)


def _names_directory(file_path: str, listing: LsResult | None) -> bool:
    """Whether a delete target is (or may be) a directory, from `ls(file_path)`.

    Unknown (no listing) counts as a directory, the cautious answer: a directory delete is
    checked against every rule that could match something under it.
    """
    if listing is None:
        return True
    if listing.error is not None:
        return error_kind(listing.error) not in (ErrorKind.NOT_A_DIRECTORY, ErrorKind.NOT_FOUND)
    try:
        target = normalize_path(file_path).rstrip("/") or "/"
    except PathError:
        return True
    entries = listing.entries or []
    return not (
        len(entries) == 1
        and entries[0]["path"].rstrip("/") == target
        and not entries[0].get("is_dir")
    )
