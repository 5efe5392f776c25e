"""`StoreBackend`: files kept in a LangGraph `BaseStore`, shared across threads.

Each file is one store item: the key is the file's normalised absolute path and the value
is its `FileData` (`content`, `encoding`, `created_at`, `modified_at`). Directories are not
stored; they exist while some key lies under them, as in `StateBackend`.

Every operation is written once, as a plan (`PlannedBackend`): a generator that yields the
store reads and writes it needs (`_Get`, `_Page`, `_Put`, `_Remove`) and returns the result.
The sync methods run a plan with the store's sync API and the async methods with its async
API (`aget`, `aput`, `adelete`, `asearch`), so both share one body. The decisions themselves
(what `ls` lists, what `edit` refuses, every message) are `StateBackend`'s, applied to the
files fetched from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from langgraph.store.base import BaseStore, InvalidNamespaceError, Item, PutOp

from fathom.backends import protocol
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.state import (
    StateBackend,
    download_from,
    files_under,
    plan_uploads,
    valid_downloads,
)
from fathom.backends.store_cas import Expected, aconditional_put, conditional_put
from fathom.backends.utils import delete_target, file_bytes, normalized
from fathom.backends.versions import KeyLocks
from fathom.state import FileData
from fathom.tool_answers import Failure, attempt

__all__ = [
    "DEFAULT_NAMESPACE",
    "KEY_LOCKS",
    "NAMESPACE_DEPRECATION",
    "NO_STORE_ERROR",
    "PAGE_SIZE",
    "NamespaceFactory",
    "NamespaceRuntime",
    "StoreBackend",
    "namespace_problem",
    "validate_namespace",
]

NamespaceFactory = Callable[[Any], tuple[str, ...]]
"""A callable `(runtime) -> namespace`, called for every operation with a `NamespaceRuntime`
wrapping the LangGraph runtime of the current tool call."""

DEFAULT_NAMESPACE: tuple[str, ...] = ("filesystem",)
"""Where files go when no namespace is given and no assistant id is known."""

PAGE_SIZE = 500
"""Items fetched per `search` call while listing a namespace."""

NO_STORE_ERROR = BackendError(
    ErrorKind.FAILED,
    detail="no LangGraph store is configured (pass store=... to create_deep_agent, "
    "e.g. InMemoryStore())",
)
"""The error of every operation when neither the backend nor the runtime has a store."""

NAMESPACE_DEPRECATION = (
    "StoreBackend namespace factories now receive the LangGraph Runtime; use rt.<field> "
    "instead of ctx.runtime.<field> (ctx.state has no replacement: namespaces must not "
    "depend on mutable state)"
)

_ALLOWED_DESCRIPTION = (
    "ASCII letters, digits and the characters - _ . @ + : ~ "
    "(wildcards such as * and ? are not allowed)"
)
_COMPONENT = re.compile(r"[A-Za-z0-9\-_.@+:~]+")
_ALLOWED_CHAR = re.compile(r"[A-Za-z0-9\-_.@+:~]")

R = TypeVar("R")
logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- namespaces


def namespace_problem(namespace: object) -> str | None:
    """What is wrong with `namespace`, or `None` when it is a valid store namespace.

    A namespace is a non-empty tuple (or list) of non-empty strings made only of ASCII
    letters, digits and `-`, `_`, `.`, `@`, `+`, `:`, `~`. The words are the reference's
    (`must not be empty`, `must be a string`, `contains disallowed characters`).
    """
    if not isinstance(namespace, tuple | list):
        return (
            f"the namespace must be a tuple of strings, got {type(namespace).__name__} "
            f"{namespace!r}"
        )
    if not namespace:
        return "the namespace tuple must not be empty; give at least one component"
    for index, component in enumerate(namespace):
        if not isinstance(component, str):
            return (
                f"namespace component at index {index} must be a string, got "
                f"{type(component).__name__} ({component!r} in {tuple(namespace)!r})"
            )
        if not component:
            return (
                f"namespace component at index {index} must not be empty "
                f"({tuple(namespace)!r})"
            )
        if not _COMPONENT.fullmatch(component):
            bad = next(char for char in component if not _ALLOWED_CHAR.fullmatch(char))
            return (
                f"namespace component at index {index} contains disallowed characters: "
                f"{component!r} has {bad!r}; components may only contain {_ALLOWED_DESCRIPTION}"
            )
    return None


def validate_namespace(namespace: object) -> tuple[str, ...]:
    """`namespace` as a tuple if it is a valid store namespace, else raise `ValueError`."""
    problem = namespace_problem(namespace)
    if problem is not None:
        raise ValueError(f"Invalid StoreBackend namespace: {problem}.")
    return tuple(namespace)  # type: ignore[arg-type]


def _validate_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    """The reference's check of a namespace: `namespace` itself when valid, else `TypeError`
    (a component that is not a string) or `ValueError` (the words of `namespace_problem`)."""
    problem = namespace_problem(namespace)
    if problem is None:
        return namespace
    message = problem[0].upper() + problem[1:] + "."
    if "must be a string" in problem:
        raise TypeError(message)
    raise ValueError(message)


class NamespaceRuntime:
    """What a namespace factory receives: the LangGraph runtime, attribute for attribute.

    `rt.context`, `rt.store`, `rt.execution_info`, `rt.server_info` (and, for a tool call's
    `ToolRuntime`, `rt.config`) are the wrapped runtime's. The `BackendContext` accessors of
    the older factory form still work but warn: `ctx.runtime` is the runtime itself and
    `ctx.state` the graph state.
    """

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        runtime = object.__getattribute__(self, "_runtime")
        if runtime is None:
            raise AttributeError(
                f"no LangGraph runtime is available to read {name!r} from: the StoreBackend "
                "is not bound to a tool call and is not running inside a graph"
            )
        try:
            return getattr(runtime, name)
        except AttributeError:
            # a hook handed a partial runtime (a test's SimpleNamespace, say): the graph's
            # own runtime, where there is one, has the rest (`server_info`, `context`)
            graph = _graph_runtime()
            if graph is None or graph is runtime:
                raise
            return getattr(graph, name)

    @property
    def runtime(self) -> Any:
        """Deprecated: the runtime itself (use the attributes of this object directly)."""
        warnings.warn(NAMESPACE_DEPRECATION, DeprecationWarning, stacklevel=2)
        return self._runtime

    @property
    def state(self) -> Any:
        """Deprecated: the graph state of the tool call, `None` when there is none."""
        warnings.warn(NAMESPACE_DEPRECATION, DeprecationWarning, stacklevel=2)
        return getattr(self._runtime, "state", None)

    def __repr__(self) -> str:
        return f"NamespaceRuntime({self._runtime!r})"


NO_SERVER_INFO_HINT = (
    "rt.server_info is None: this run is not served by a LangGraph server (langgraph dev, "
    "LangGraph Platform or fathom serve), so it has no assistant or user. Run the agent on "
    "a server, pass configurable 'assistant_id' and 'langgraph_auth_user' in the run "
    "config, or give the namespace factory a fallback for local runs"
)
"""Why a factory that reads `rt.server_info` fails in a plain local run, and the fixes."""


def _factory_failure(error: Exception, runtime: Any) -> str:
    """The facts of a namespace factory's failure, with the configuration fix when the
    cause is a run without server information (the common mistake)."""
    detail = f"the StoreBackend namespace factory failed with {type(error).__name__}: {error}"
    no_server_info = runtime is not None and getattr(runtime, "server_info", None) is None
    if isinstance(error, AttributeError) and no_server_info:
        return f"{detail} ({NO_SERVER_INFO_HINT})"
    return detail


def _graph_runtime() -> Any:
    """The runtime of the graph run this code is part of, or `None` outside one."""
    try:
        from langgraph.runtime import get_runtime

        return get_runtime()
    except (RuntimeError, KeyError, LookupError):
        return None


def _graph_store() -> BaseStore | None:
    """The store of the graph run this code is part of, or `None`."""
    try:
        from langgraph.config import get_store

        return get_store()
    except (RuntimeError, KeyError, LookupError, AttributeError):
        return None


def _assistant_id(runtime: Any) -> str | None:
    """The assistant id from the server info, else from the run config's metadata."""
    server_info = getattr(runtime, "server_info", None)
    assistant_id = getattr(server_info, "assistant_id", None)
    if isinstance(assistant_id, str) and assistant_id:
        return assistant_id
    config = getattr(runtime, "config", None)
    if config is None:
        try:
            from langgraph.config import get_config

            config = get_config()
        except (RuntimeError, LookupError):
            config = None
    metadata = config.get("metadata") if isinstance(config, Mapping) else None
    assistant_id = metadata.get("assistant_id") if isinstance(metadata, Mapping) else None
    return assistant_id if isinstance(assistant_id, str) and assistant_id else None


# --------------------------------------------------------------------------- stored values


def _iso(moment: datetime | None) -> str:
    if not isinstance(moment, datetime):
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _file_data(item: Item) -> FileData | None:
    """The `FileData` of a stored item, or `None` when its value holds no text content.

    Legacy values whose `content` is a list of lines are joined with newlines, a plain
    string value (from a store that keeps non-dict values) is the text itself, a missing
    `encoding` means UTF-8 text, and missing timestamps are taken from the item.
    """
    value: Any = item.value
    if isinstance(value, str):  # a store that keeps plain values: the text itself
        value = {"content": value}
    if not isinstance(value, Mapping):
        return None
    content = value.get("content")
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        content = "\n".join(content)
    if not isinstance(content, str):
        return None
    created_at = value.get("created_at")
    modified_at = value.get("modified_at")
    return FileData(
        content=content,
        encoding="base64" if value.get("encoding") == "base64" else "utf-8",
        created_at=created_at if isinstance(created_at, str) else _iso(item.created_at),
        modified_at=modified_at if isinstance(modified_at, str) else _iso(item.updated_at),
    )


def _unreadable(path: str) -> BackendError:
    """The error for a key whose stored value is not a file (no text `content`)."""
    return BackendError(
        ErrorKind.FAILED,
        path,
        "its stored value is not a file this backend can read (no text 'content'); "
        "delete it and write it again",
    )


class _Snapshot(StateBackend):
    """`StateBackend`'s logic over files fetched from the store."""

    def __init__(self, files: Mapping[str, FileData]) -> None:
        super().__init__(None)
        self._files = files

    @property
    def files(self) -> Mapping[str, FileData]:
        return self._files


@dataclass(frozen=True)
class _Listing:
    """Every item of one namespace: readable files, and keys whose value is not a file."""

    files: dict[str, FileData]
    unreadable: frozenset[str]
    stamps: Mapping[str, datetime | None] = field(default_factory=dict)
    """Each key's `updated_at`, for a conditional put (`store_cas`)."""

    def for_listing(self) -> _Snapshot:
        """All keys, unreadable ones as empty placeholders (their size is removed later)."""
        placeholder = FileData(content="", encoding="utf-8", created_at="", modified_at="")
        return _Snapshot({**dict.fromkeys(self.unreadable, placeholder), **self.files})

    def strip(self, entries: list[protocol.FileInfo] | None) -> list[protocol.FileInfo] | None:
        """Drop the placeholder size and time from entries of unreadable keys."""
        if entries is None or not self.unreadable:
            return entries
        return [
            protocol.FileInfo(path=entry["path"], is_dir=False)
            if entry["path"] in self.unreadable
            else entry
            for entry in entries
        ]


def _listing(items: list[Item]) -> _Listing:
    files: dict[str, FileData] = {}
    unreadable: set[str] = set()
    for item in items:
        data = _file_data(item)
        if data is None:
            unreadable.add(item.key)
        else:
            files[item.key] = data
    stamps = {item.key: item.updated_at for item in items}
    return _Listing(files, frozenset(unreadable), stamps)


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class _Get:
    """Fetch one item; the plan receives the `Item` or `None`."""

    key: str


@dataclass(frozen=True)
class _Page:
    """Fetch `PAGE_SIZE` items of the namespace from `offset`; the plan receives how many
    the store gave and those of exactly the namespace (see `_list_all`)."""

    offset: int


@dataclass(frozen=True)
class _Put:
    """Store `value` at `key`; with `expected`, only if the item is still as read (the plan
    receives `False` when another writer changed it first)."""

    key: str
    value: FileData
    expected: Expected | None = None


class _Raced:
    """What a write or edit plan returns when its conditional put lost to another writer:
    the operation is run again on what is stored now."""


@dataclass(frozen=True)
class _Remove:
    """Remove these keys, in one store batch."""

    keys: tuple[str, ...]


_Op = _Get | _Page | _Put | _Remove


def _list_all() -> Generator[_Op, Any, _Listing]:
    """Every item of the namespace, a page at a time."""
    items: list[Item] = []
    offset = 0
    while True:
        size, own = yield _Page(offset)
        items.extend(own)
        if size < PAGE_SIZE:
            return _listing(items)
        offset += size


def _ls_plan(path: str) -> Generator[_Op, Any, protocol.LsResult]:
    if isinstance(directory := normalized(normalize_dir, path), BackendError):
        return protocol.LsResult(error=directory)
    listing = yield from _list_all()
    result = listing.for_listing().ls(path)
    return protocol.LsResult(error=result.error, entries=listing.strip(result.entries))


def _file_plan(
    file_path: str,
) -> Generator[_Op, Any, tuple[str, _Snapshot, Expected] | BackendError]:
    """The normalised `file_path`, a snapshot that answers for it (the stored file alone,
    or, when no key is there, the whole namespace, to tell a directory from a missing
    file), and what a conditional put of it expects."""
    if isinstance(path := normalized(normalize_path, file_path), BackendError):
        return path
    item: Item | None = yield _Get(path)
    if item is None:
        listing = yield from _list_all()
        return path, listing.for_listing(), Expected(None)
    data = _file_data(item)
    if data is None:
        return _unreadable(path)
    return path, _Snapshot({path: data}), Expected(item.updated_at)


def _read_plan(file_path: str, offset: int, limit: int) -> Generator[_Op, Any, protocol.ReadResult]:
    found = yield from _file_plan(file_path)
    if isinstance(found, BackendError):
        return protocol.ReadResult(error=found)
    path, snapshot, _ = found
    return snapshot.read(path, offset, limit)


def _grep_plan(
    pattern: str, path: str | None, glob: str | None, max_count: int | None, context_lines: int
) -> Generator[_Op, Any, protocol.GrepResult]:
    if isinstance(directory := normalized(normalize_dir, path), BackendError):
        return protocol.GrepResult(error=directory)
    listing = yield from _list_all()
    return _Snapshot(listing.files).grep(
        pattern, path, glob, max_count=max_count, context_lines=context_lines
    )


def _glob_plan(pattern: str, path: str | None) -> Generator[_Op, Any, protocol.GlobResult]:
    if isinstance(directory := normalized(normalize_dir, path), BackendError):
        return protocol.GlobResult(error=directory)
    listing = yield from _list_all()
    result = listing.for_listing().glob(pattern, path)
    return protocol.GlobResult(error=result.error, matches=listing.strip(result.matches))


def _write_plan(file_path: str, content: str) -> Generator[_Op, Any, protocol.WriteResult | _Raced]:
    if isinstance(path := normalized(normalize_file_path, file_path), BackendError):
        return protocol.WriteResult(error=path)
    if path == "/":
        return _Snapshot({}).write(path, content)
    listing = yield from _list_all()
    result = listing.for_listing().write(path, content)
    data = (result.files_update or {}).get(path)
    if result.error or data is None:
        return result
    expected = Expected(listing.stamps.get(path))
    if (yield _Put(path, data, expected)) is False:
        return _Raced()
    return protocol.WriteResult(path=path, version=result.version)


def _edit_plan(
    file_path: str, old_string: str, new_string: str, replace_all: bool
) -> Generator[_Op, Any, protocol.EditResult | _Raced]:
    found = yield from _file_plan(file_path)
    if isinstance(found, BackendError):
        return protocol.EditResult(error=found)
    path, snapshot, expected = found
    result = snapshot.edit(path, old_string, new_string, replace_all)
    new_data = (result.files_update or {}).get(path)
    if result.error or new_data is None:
        return result
    if (yield _Put(path, new_data, expected)) is False:
        return _Raced()
    return protocol.EditResult(path=path, occurrences=result.occurrences, version=result.version)


def _delete_plan(file_path: str) -> Generator[_Op, Any, protocol.DeleteResult]:
    """Remove the key `file_path` and every key under `file_path/` (recursive)."""
    path = delete_target(file_path)
    if isinstance(path, protocol.DeleteResult):
        return path
    listing = yield from _list_all()
    doomed = files_under(dict.fromkeys([*listing.files, *listing.unreadable]), path)
    if not doomed:
        return protocol.DeleteResult(error=BackendError(ErrorKind.NOT_FOUND, path))
    yield _Remove(tuple(doomed))
    return protocol.DeleteResult(path=path)


def _upload_plan(
    files: list[tuple[str, bytes]],
) -> Generator[_Op, Any, list[protocol.FileUploadResponse]]:
    """Store each accepted upload (see `plan_uploads`); one response per file."""
    listing = yield from _list_all()
    stored = {**dict.fromkeys(listing.unreadable), **listing.files}
    responses, update = plan_uploads(stored, files)
    for key, data in update.items():
        yield _Put(key, data)
    return responses


def _download_plan(paths: list[str]) -> Generator[_Op, Any, list[protocol.FileDownloadResponse]]:
    """The bytes of each path; the namespace is listed only to tell a directory apart."""
    responses: list[protocol.FileDownloadResponse] = []
    listing: _Listing | None = None
    for raw, path in valid_downloads(paths, responses):
        item: Item | None = None if path == "/" else (yield _Get(path))
        if item is not None:
            data = _file_data(item)
            if data is None:
                responses.append(protocol.FileDownloadResponse(path=raw, error=ErrorKind.FAILED))
            else:
                responses.append(protocol.FileDownloadResponse(path=raw, content=file_bytes(data)))
            continue
        if listing is None:
            fetched = yield from _list_all()
            listing = fetched
        responses.extend(download_from(listing.for_listing().files, [path]))
        responses[-1] = replace(responses[-1], path=raw)
    return responses


_PLANS: dict[str, Callable[..., protocol.Plan[Any]]] = {
    "ls": _ls_plan,
    "read": _read_plan,
    "grep": _grep_plan,
    "glob": _glob_plan,
    "write": _write_plan,
    "edit": _edit_plan,
    "delete": _delete_plan,
    "upload_files": _upload_plan,
    "download_files": _download_plan,
}


# --------------------------------------------------------------------------- the backend

KEY_LOCKS = KeyLocks()
"""The in-process locks of the store keys being written or edited, by (store, namespace,
key): a write's or an edit's read, check and put are one step against every other
`StoreBackend` of this process on the same store."""

_EXCLUSIVE = frozenset({"write", "edit"})

RACE_ATTEMPTS = 5
"""How many times a write or edit is applied again after losing a conditional put to a
writer in another process, before it answers `CHANGED`."""


def _exclusive_key(name: str, args: tuple[Any, ...]) -> str | None:
    """The key whose lock the operation `name` holds while it runs, or `None` (reads, and a
    path that will be refused anyway)."""
    if name not in _EXCLUSIVE or not args or not isinstance(args[0], str):
        return None
    try:
        return normalize_path(args[0])
    except PathError:
        return None


def _own(items: Sequence[Item], namespace: tuple[str, ...]) -> list[Item]:
    """The items of exactly `namespace` (a prefix search also returns sub-namespaces)."""
    return [item for item in items if tuple(item.namespace) == namespace]


def _request(namespace: tuple[str, ...], op: _Op) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The store call answering `op`: the sync method's name and its arguments."""
    if isinstance(op, _Get):
        return "get", (namespace, op.key), {}
    if isinstance(op, _Put):
        return "put", (namespace, op.key, dict(op.value)), {}
    if isinstance(op, _Remove):
        return "batch", ([PutOp(namespace, key, None) for key in op.keys],), {}
    return "search", (namespace,), {"limit": PAGE_SIZE, "offset": op.offset}


def _answer(namespace: tuple[str, ...], op: _Op, got: Any) -> Any:
    return (len(got), _own(got, namespace)) if isinstance(op, _Page) else got


@contextlib.contextmanager
def _namespace_refused(namespace: tuple[str, ...]) -> Iterator[None]:
    """A namespace the store refuses (`InvalidNamespaceError`) fails the operation."""
    try:
        yield
    except InvalidNamespaceError as error:
        detail = f"the store rejected the namespace {namespace!r}: {error}"
        raise protocol.OperationFailed(BackendError(ErrorKind.FAILED, detail=detail)) from None


class StoreBackend(protocol.PlannedBackend):
    """Files in a LangGraph `BaseStore`: they persist across threads and runs.

    Args:
        runtime: The runtime to serve (the reference's factory style,
            `lambda rt: StoreBackend(rt)`). The filesystem middleware binds a backend to
            each tool call's `ToolRuntime` anyway, so `StoreBackend()` is enough there.
        namespace: Where the files live in the store. A tuple of strings, or a factory
            `(rt) -> tuple[str, ...]` called for every operation with the tool call's
            runtime (`rt.context`, `rt.execution_info.thread_id`,
            `rt.server_info.assistant_id`, ...). Components may only hold ASCII letters,
            digits and `- _ . @ + : ~`. Defaults to `(assistant_id, "filesystem")` when an
            assistant id is known (LangGraph server), else `("filesystem",)`; in
            multi-user deployments always pass a factory.
        store: The store to use. Defaults to the runtime's store (the one given to
            `create_deep_agent(store=...)` or provided by the platform).

    Raises:
        ValueError: `namespace` is neither a factory nor a valid namespace tuple.

    Operations never raise for a missing store or a bad namespace from a factory: they
    return a result whose `error` says what is wrong, and the store is not touched. A
    namespace the store itself refuses (LangGraph's stores refuse `.` in any component and
    `langgraph` as the first one) is an error result too.
    Writes store the file directly and return `files_update=None`. A write or an edit
    reads the item, checks it and puts the new value as one step against every other
    `StoreBackend` in this process on the same store and key (an in-process lock per key),
    so two concurrent edits of one file both land, one after the other. Reads and changes
    report the file's version (`versions.file_version`); a change conditioned on a version
    (`versions.expecting`) fails with `CHANGED` when the stored file is no longer at it.
    Across processes the lock does not reach: on LangGraph's PostgreSQL stores the put is
    a conditional statement instead (`store_cas`), and a write or edit that loses it to
    another process is applied again on what is stored now.
    `upload_files` stores text bytes as UTF-8 text and anything else as base64, so every
    byte comes back from `download_files`; a store that cannot be reached fails every file
    (`failed`, logged).
    """

    def __init__(
        self,
        runtime: Any = None,
        *,
        namespace: tuple[str, ...] | NamespaceFactory | None = None,
        store: BaseStore | None = None,
    ) -> None:
        if namespace is not None and not callable(namespace):
            namespace = validate_namespace(namespace)
        self._runtime = runtime
        self._namespace = namespace
        self._store = store

    def bind(self, runtime: Any) -> Self:
        """A copy of this backend serving `runtime` (a tool call's `ToolRuntime`)."""
        bound = copy.copy(self)
        bound._runtime = runtime
        return bound

    # ----------------------------------------------------------------- resolution

    def _target(self) -> tuple[BaseStore, tuple[str, ...]] | BackendError:
        """The store and namespace for one operation, or the error to return (`FAILED`)."""
        runtime = self._runtime if self._runtime is not None else _graph_runtime()
        store = self._store
        if store is None:
            store = getattr(runtime, "store", None)
        if store is None:
            store = _graph_store()
        if store is None:
            return NO_STORE_ERROR
        if isinstance(self._namespace, tuple):
            return store, self._namespace  # validated when the backend was made
        namespace: object
        if self._namespace is None:
            assistant_id = _assistant_id(runtime)
            namespace = (assistant_id, "filesystem") if assistant_id else DEFAULT_NAMESPACE
        else:
            factory: Callable[[NamespaceRuntime], object] = self._namespace
            namespace = attempt(lambda: factory(NamespaceRuntime(runtime)), "namespace")
            if isinstance(namespace, Failure):  # the user's factory fails the operation
                detail = _factory_failure(namespace.error, runtime)
                logger.warning("%s", detail, exc_info=namespace.error)
                return BackendError(ErrorKind.FAILED, detail=detail)
        problem = namespace_problem(namespace)
        if problem is not None:
            return BackendError(
                ErrorKind.FAILED, detail=f"invalid StoreBackend namespace: {problem}"
            )
        return store, tuple(namespace)  # type: ignore[arg-type]

    # ----------------------------------------------------------------- running plans

    def _plan(self, name: str, *args: Any, **kwargs: Any) -> protocol.Plan[Any]:
        return _PLANS[name](*args, **kwargs)

    def _place(self) -> tuple[BaseStore, tuple[str, ...]]:
        target = self._target()
        if isinstance(target, BackendError):
            raise protocol.OperationFailed(target)
        return target

    def _run(self, plan: protocol.Plan[R]) -> R:
        """Run `plan` against the store with the sync API."""
        store, namespace = self._place()
        return protocol.drive(plan, lambda op: self._execute(store, namespace, op))

    async def _arun(self, plan: protocol.Plan[R]) -> R:
        """Run `plan` against the store with the async API."""
        store, namespace = self._place()
        return await protocol.adrive(plan, lambda op: self._aexecute(store, namespace, op))

    def _perform(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the plan of `name`; a write or edit holds its key's lock (`_exclusive`)."""
        key = _exclusive_key(name, args)
        if key is None:
            return super()._perform(name, *args, **kwargs)
        try:
            store, namespace = self._place()
            with KEY_LOCKS.hold((id(store), namespace, key)):
                for _ in range(RACE_ATTEMPTS):
                    plan = self._plan(name, *args, **kwargs)
                    result = protocol.drive(plan, lambda op: self._execute(store, namespace, op))
                    if not isinstance(result, _Raced):
                        return result
        except protocol.OperationFailed as failed:
            return protocol.error_result(name, args, failed.error)
        return protocol.error_result(name, args, BackendError(ErrorKind.CHANGED, key))

    async def _async(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Async `_perform`."""
        key = _exclusive_key(name, args)
        if key is None:
            return await super()._async(name, *args, **kwargs)
        try:
            store, namespace = self._place()
            async with KEY_LOCKS.ahold((id(store), namespace, key)):
                for _ in range(RACE_ATTEMPTS):
                    plan = self._plan(name, *args, **kwargs)
                    result = await protocol.adrive(
                        plan, lambda op: self._aexecute(store, namespace, op)
                    )
                    if not isinstance(result, _Raced):
                        return result
        except protocol.OperationFailed as failed:
            return protocol.error_result(name, args, failed.error)
        return protocol.error_result(name, args, BackendError(ErrorKind.CHANGED, key))

    @staticmethod
    def _execute(store: BaseStore, namespace: tuple[str, ...], op: _Op) -> Any:
        method, args, kwargs = _request(namespace, op)
        with _namespace_refused(namespace):
            if isinstance(op, _Put) and op.expected is not None:
                done = conditional_put(store, namespace, op.key, op.value, op.expected)
                if done is not None:
                    return done
            return _answer(namespace, op, getattr(store, method)(*args, **kwargs))

    @staticmethod
    async def _aexecute(store: BaseStore, namespace: tuple[str, ...], op: _Op) -> Any:
        method, args, kwargs = _request(namespace, op)
        with _namespace_refused(namespace):
            if isinstance(op, _Put) and op.expected is not None:
                done = await aconditional_put(store, namespace, op.key, op.value, op.expected)
                if done is not None:
                    return done
            try:
                got = await getattr(store, "a" + method)(*args, **kwargs)
            except NotImplementedError:  # a store with only a sync API (`SqliteStore`)
                got = await asyncio.to_thread(getattr(store, method), *args, **kwargs)
            return _answer(namespace, op, got)
