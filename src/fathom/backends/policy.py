"""Policy hooks: veto or rewrite a file operation before it reaches a backend.

A `BackendPolicy` sees every operation as a `FileOperation` and answers with `None` (go
ahead), a refusal (a `BackendError`, or a message: the result's error is then a
`PERMISSION` error whose `message` the model gets as the tool's answer), or a changed
operation (for example content with secrets masked). `can_see` hides paths from `ls`,
`glob` and `grep` results. `PolicyBackend` wraps any backend with a list of policies;
fathom's filesystem permissions are one such policy.

For checks that need the backend's own logic, subclassing a backend and overriding
`write`/`edit` works as well: fathom's async methods call the sync ones. `PolicyBackend`
writes each operation once, as a plan (`PlannedBackend`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self, cast

from fathom.backends import protocol
from fathom.backends._paths import PathError, normalize_path
from fathom.backends.errors import BackendError, ErrorKind, error_kind

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

    def check(self, operation: FileOperation) -> FileOperation | BackendError | str | None:
        """`None` to allow, a refusal, or a rewritten operation to run instead.

        A refusal is a `BackendError`, or a message: the policy's own words for the model,
        which `PolicyBackend` returns as a `PERMISSION` error with that `message` (the tool
        shows it as is).
        """
        return None

    def can_see(self, path: str) -> bool:
        """Whether a path may appear in `ls`, `glob` and `grep` results."""
        return True


class PolicyBackend(protocol.PlannedBackend):
    """A backend whose operations pass through `policies`, in order, before `inner`.

    The first refusal wins and `inner` is never called for a refused operation: the result
    carries the refusal as its error, an upload or download answers the refused file with
    the refusal's kind (`permission_denied`). A policy may rewrite an upload (the bytes, or
    the path); the admitted files go to `inner` in one call.
    """

    def __init__(
        self,
        inner: protocol.BackendProtocol | Callable[[Any], protocol.BackendProtocol],
        policies: Sequence[BackendPolicy],
    ) -> None:
        self.inner = protocol.adopt(inner)
        self.policies = list(policies)

    def bind(self, runtime: Any) -> Self:
        return type(self)(protocol.resolve_backend(self.inner, runtime), self.policies)

    @property
    def _backend(self) -> protocol.BackendProtocol:
        """`inner` as the backend to call: a factory has no file methods until `bind`
        resolves it for a tool call."""
        inner = self.inner
        if callable(inner) and not isinstance(inner, protocol.BackendProtocol):
            raise TypeError(
                f"PolicyBackend wraps the backend factory {inner!r}: call "
                "bind(runtime) and use the PolicyBackend it returns"
            )
        return cast("protocol.BackendProtocol", inner)

    def _resolve(self, path: str) -> str | None:
        resolve = getattr(self.inner, "resolved_path", None)
        return resolve(path) if resolve is not None else None

    def _admit(self, operation: FileOperation) -> FileOperation | BackendError:
        operation = replace(operation, resolved_path=self._resolve(operation.path))
        for policy in self.policies:
            outcome = policy.check(operation)
            if isinstance(outcome, BackendError):  # a `str` too: checked first
                return outcome
            if isinstance(outcome, str):
                return BackendError(ErrorKind.PERMISSION, operation.path, message=outcome)
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

    def _filter_ls(self, result: protocol.LsResult) -> protocol.LsResult:
        if result.entries is None:
            return result
        return replace(result, entries=[e for e in result.entries if self._visible(e["path"])])

    def _filter_glob(self, result: protocol.GlobResult) -> protocol.GlobResult:
        if result.matches is None:
            return result
        return replace(result, matches=[m for m in result.matches if self._visible(m["path"])])

    def _filter_grep(self, result: protocol.GrepResult) -> protocol.GrepResult:
        if result.matches is None:
            return result
        skipped = [p for p in result.skipped or [] if self._visible(p)]
        return replace(
            result,
            matches=[m for m in result.matches if self._visible(m["path"])],
            skipped=skipped or None,
        )

    # -- operations ----------------------------------------------------------------------

    def _admitted(self, operation: FileOperation, *order: str, **kwargs: Any) -> protocol.Plan[Any]:
        """`operation` as the policies let it through, sent to `inner` with its arguments
        in `order` (`"path"` is the operation's path) and `kwargs`; a refusal is the
        result's error."""
        op = self._admit(operation)
        if isinstance(op, BackendError):
            return protocol.error_result(operation.name, (), op)
        args = [op.path if key == "path" else op.arguments[key] for key in order]
        return (yield protocol.call(self._backend, operation.name, *args, **kwargs))

    def _ls(self, path: str) -> protocol.Plan[protocol.LsResult]:
        return self._filter_ls((yield from self._admitted(FileOperation("ls", path), "path")))

    def _read(self, file_path: str, offset: int = 0, limit: int = 2000) -> protocol.Plan[Any]:
        operation = FileOperation("read", file_path, {"offset": offset, "limit": limit})
        return (yield from self._admitted(operation, "path", "offset", "limit"))

    def _grep(
        self, pattern: str, path: str | None, glob: str | None, max_count: int | None,
        context_lines: int,
    ) -> protocol.Plan[protocol.GrepResult]:
        operation = FileOperation("grep", path or "/", {"pattern": pattern, "glob": glob})
        kwargs = {"max_count": max_count, "context_lines": context_lines}
        result = yield from self._admitted(operation, "pattern", "path", "glob", **kwargs)
        return protocol.cap_grep(self._filter_grep(result), max_count)

    def _glob(self, pattern: str, path: str | None = None) -> protocol.Plan[protocol.GlobResult]:
        operation = FileOperation("glob", path or "/", {"pattern": pattern})
        return self._filter_glob((yield from self._admitted(operation, "pattern", "path")))

    def _write(self, file_path: str, content: str) -> protocol.Plan[Any]:
        operation = FileOperation("write", file_path, {"content": content})
        return (yield from self._admitted(operation, "path", "content"))

    def _edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> protocol.Plan[Any]:
        arguments = {"old_string": old_string, "new_string": new_string, "replace_all": replace_all}
        operation = FileOperation("edit", file_path, arguments)
        return (yield from self._admitted(operation, "path", *arguments))

    def _delete(self, file_path: str) -> protocol.Plan[protocol.DeleteResult]:
        """The delete as policies see it: `arguments["directory"]` says whether the target
        is a directory (its whole subtree goes), from the inner backend's listing."""
        try:
            listing = yield protocol.call(self._backend, "ls", file_path)
        except NotImplementedError:  # a backend without ls: treat the target as a directory
            listing = None
        directory = _names_directory(file_path, listing)
        op = self._admit(FileOperation("delete", file_path, {"directory": directory}))
        if isinstance(op, BackendError):
            return protocol.DeleteResult(error=op)
        if not protocol.supports_delete(self.inner):
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.UNSUPPORTED, op.path, "delete")
            )
        return (yield protocol.call(self._backend, "delete", op.path))

    def _upload_files(
        self, files: list[tuple[str, bytes]]
    ) -> protocol.Plan[list[protocol.FileUploadResponse]]:
        return (yield from self._transfer("upload", files))

    def _download_files(
        self, paths: list[str]
    ) -> protocol.Plan[list[protocol.FileDownloadResponse]]:
        return (yield from self._transfer("download", paths))

    def _transfer(self, name: OperationName, items: list[Any]) -> protocol.Plan[Any]:
        """Upload (`(path, bytes)` items) or download (paths) what the policies admit, in
        one call to `inner`; one response per item, in order."""
        upload = name == "upload"
        response = protocol.FileUploadResponse if upload else protocol.FileDownloadResponse
        paths = [item[0] if upload else item for item in items]
        answers: dict[int, Any] = {}
        admitted: list[tuple[int, Any]] = []
        for index, (path, item) in enumerate(zip(paths, items, strict=True)):
            op = self._admit(FileOperation(name, path, {"content": item[1]} if upload else {}))
            if isinstance(op, BackendError):
                logger.info("%s of %s refused by a policy: %s", name, path, op)
                answers[index] = response(path, error=op.kind)
            else:
                admitted.append((index, (op.path, op.arguments["content"]) if upload else op.path))
        sent = [item for _, item in admitted]
        got = (yield protocol.call(self._backend, f"{name}_files", sent)) if admitted else []
        for position, (index, _) in enumerate(admitted):
            answer = got[position] if position < len(got) else response("", error=ErrorKind.FAILED)
            answers[index] = replace(answer, path=paths[index])
        responses = [answers[index] for index in range(len(items))]
        update = getattr(got, "files_update", None)
        return (
            responses if update is None else protocol.UploadResults(responses, files_update=update)
        )


def _names_directory(file_path: str, listing: protocol.LsResult | None) -> bool:
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
