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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.base import BackendBase
from fathom.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
    resolve_backend,
    supports_delete,
)

__all__ = ["BackendPolicy", "FileOperation", "OperationName", "PolicyBackend"]

OperationName = Literal["ls", "read", "grep", "glob", "write", "edit", "delete"]

_KIND: dict[str, Literal["read", "write"]] = {
    "ls": "read",
    "read": "read",
    "grep": "read",
    "glob": "read",
    "write": "write",
    "edit": "write",
    "delete": "write",
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
        """`"read"` for ls / read / grep / glob, `"write"` for write / edit / delete."""
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
        """`None` to allow, a message to refuse, or a rewritten operation to run instead."""
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
        return self._filter_ls(self.inner.ls(op.path))

    async def als(self, path: str) -> LsResult:
        op = self._admit(FileOperation("ls", path))
        if isinstance(op, str):
            return LsResult(error=op)
        return self._filter_ls(await self.inner.als(op.path))

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        op = self._admit(FileOperation("read", file_path, {"offset": offset, "limit": limit}))
        if isinstance(op, str):
            return ReadResult(error=op)
        return self.inner.read(op.path, op.arguments["offset"], op.arguments["limit"])

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        op = self._admit(FileOperation("read", file_path, {"offset": offset, "limit": limit}))
        if isinstance(op, str):
            return ReadResult(error=op)
        return await self.inner.aread(op.path, op.arguments["offset"], op.arguments["limit"])

    def _grep_op(self, pattern: str, path: str | None, glob: str | None) -> FileOperation | str:
        return self._admit(
            FileOperation("grep", path or "/", {"pattern": pattern, "glob": glob})
        )

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        op = self._grep_op(pattern, path, glob)
        if isinstance(op, str):
            return GrepResult(error=op)
        args = op.arguments
        return self._filter_grep(self.inner.grep(args["pattern"], op.path, args["glob"]))

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None
    ) -> GrepResult:
        op = self._grep_op(pattern, path, glob)
        if isinstance(op, str):
            return GrepResult(error=op)
        args = op.arguments
        return self._filter_grep(await self.inner.agrep(args["pattern"], op.path, args["glob"]))

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        op = self._admit(FileOperation("glob", path, {"pattern": pattern}))
        if isinstance(op, str):
            return GlobResult(error=op)
        return self._filter_glob(self.inner.glob(op.arguments["pattern"], op.path))

    async def aglob(self, pattern: str, path: str = "/") -> GlobResult:
        op = self._admit(FileOperation("glob", path, {"pattern": pattern}))
        if isinstance(op, str):
            return GlobResult(error=op)
        return self._filter_glob(await self.inner.aglob(op.arguments["pattern"], op.path))

    def write(self, file_path: str, content: str) -> WriteResult:
        op = self._admit(FileOperation("write", file_path, {"content": content}))
        if isinstance(op, str):
            return WriteResult(error=op)
        return self.inner.write(op.path, op.arguments["content"])

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        op = self._admit(FileOperation("write", file_path, {"content": content}))
        if isinstance(op, str):
            return WriteResult(error=op)
        return await self.inner.awrite(op.path, op.arguments["content"])

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
        return self.inner.edit(op.path, a["old_string"], a["new_string"], a["replace_all"])

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        op = self._edit_op(file_path, old_string, new_string, replace_all)
        if isinstance(op, str):
            return EditResult(error=op)
        a = op.arguments
        return await self.inner.aedit(op.path, a["old_string"], a["new_string"], a["replace_all"])

    def delete(self, file_path: str) -> DeleteResult:
        op = self._admit(FileOperation("delete", file_path))
        if isinstance(op, str):
            return DeleteResult(error=op)
        if not supports_delete(self.inner):
            return DeleteResult(error="Error: this filesystem does not support deleting files.")
        return self.inner.delete(op.path)  # type: ignore[attr-defined]

    async def adelete(self, file_path: str) -> DeleteResult:
        op = self._admit(FileOperation("delete", file_path))
        if isinstance(op, str):
            return DeleteResult(error=op)
        if not supports_delete(self.inner):
            return DeleteResult(error="Error: this filesystem does not support deleting files.")
        adelete = getattr(self.inner, "adelete", None)
        if adelete is None:
            return self.inner.delete(op.path)  # type: ignore[attr-defined]
        return await adelete(op.path)
