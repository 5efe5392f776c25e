"""`StateBackend`: files kept in the thread's graph state (the default backend)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Self, cast

from langgraph._internal._constants import CONFIG_KEY_READ, CONFIG_KEY_SEND
from langgraph.config import get_config

from fathom.backends import protocol
from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.base import BackendBase
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.protocol import UploadResults
from fathom.backends.utils import (
    create_file_data,
    delete_target,
    edit_text,
    file_bytes,
    grep_files,
    normalized,
    pattern_error,
    read_window,
    text_view,
    too_large,
    update_file_data,
)
from fathom.backends.versions import file_version, is_stale
from fathom.state import FileData, FilesUpdate, as_file_data

__all__ = [
    "StateBackend",
    "UploadResults",
    "download_from",
    "file_info",
    "files_under",
    "plan_uploads",
]


def _needs_reading(data: object) -> bool:
    return isinstance(data, str) or (
        isinstance(data, Mapping) and isinstance(data.get("content"), list)
    )


def _as_stored_file(data: object) -> FileData:
    """A `files` entry as `FileData`: a plain string is its text, legacy content (a list of
    lines) is joined with newlines; anything else is returned as it is."""
    if isinstance(data, Mapping) and isinstance(data.get("content"), list):
        lines = data["content"]
        if all(isinstance(line, str) for line in lines):
            return cast("FileData", {**data, "content": "\n".join(lines)})
    return cast("FileData", as_file_data(data))


def file_info(path: str, data: FileData) -> protocol.FileInfo:
    """Listing entry for one stored file."""
    return protocol.FileInfo(
        path=path,
        is_dir=False,
        size=text_view(data).size,
        modified_at=data.get("modified_at", ""),
    )


def _files_of_current_step() -> Mapping[str, FileData]:
    """The `files` channel of the graph step this code runs in; empty outside a graph."""
    try:
        config = get_config()
    except RuntimeError:
        return {}
    read = config.get("configurable", {}).get(CONFIG_KEY_READ)
    if read is None:
        return {}
    try:
        return read("files", True) or {}
    except KeyError:  # a graph without a files channel
        return {}


class StateBackend(BackendBase):
    """Files in the `files` channel of the current thread's state.

    Ephemeral: they live as long as the thread, are checkpointed with it, and are shared by
    the agent and its subagents. Writes return a `files_update` that the filesystem tools
    apply to state; the backend itself never mutates anything. Reads and changes report the
    file's version, and a change conditioned on a version (`versions.expecting`) the file
    is no longer at fails with `CHANGED`.

    `StateBackend()` is bound to each tool call's runtime by the filesystem middleware;
    `StateBackend(runtime)` (the reference's factory style) binds it directly. Unbound (for
    example inside a wrapper that does not forward `bind`), it reads the `files` channel of
    the graph step it runs in.
    """

    def __init__(self, runtime: Any = None) -> None:
        self._runtime = runtime
        self._mount = "/"

    def bind(self, runtime: Any) -> Self:
        """A backend reading the state of `runtime` (a tool call's `ToolRuntime`)."""
        bound = type(self)(runtime)
        bound._mount = self._mount
        return bound

    def mounted_at(self, prefix: str) -> Self:
        """A view of the files under `prefix` (ending in `/`), with the prefix cut off.

        `CompositeBackend` uses it for a state route: the files live in state under their
        full path, the routed backend sees paths relative to the route.
        """
        mounted = type(self)(self._runtime)
        mounted._mount = prefix
        return mounted

    def _read_files(self) -> Mapping[str, Any]:
        """The `files` mapping as stored in the bound runtime's state (or the current graph
        step's), before `files` reads its entries as `FileData`."""
        state = getattr(self._runtime, "state", None)
        if state is None:
            return _files_of_current_step()
        return (state.get("files") if isinstance(state, Mapping) else None) or {}

    @property
    def files(self) -> Mapping[str, FileData]:
        """The files in the bound runtime's state (or the current graph step's)."""
        files = self._read_files()
        if any(_needs_reading(data) for data in files.values()):
            # Preloaded by hand with plain strings (`{"/a.md": "text"}`), not through the
            # channel's reducer (which converts them), or stored by an older version as a
            # list of lines: read them as text files (the stored value is not changed).
            files = {path: _as_stored_file(data) for path, data in files.items()}
        if self._mount == "/":
            return files
        cut = len(self._mount) - 1
        return {path[cut:]: data for path, data in files.items() if path.startswith(self._mount)}

    def ls(self, path: str) -> protocol.LsResult:
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return protocol.LsResult(error=directory)
        files = self.files
        exact = directory.rstrip("/")
        if exact in files:
            return protocol.LsResult(entries=[file_info(exact, files[exact])])
        entries: dict[str, protocol.FileInfo] = {}
        for file_path, data in files.items():
            if not file_path.startswith(directory):
                continue
            rest = file_path[len(directory) :]
            if "/" in rest:
                sub = directory + rest.split("/", 1)[0] + "/"
                entries.setdefault(sub, protocol.FileInfo(path=sub, is_dir=True))
            else:
                entries[file_path] = file_info(file_path, data)
        if not entries and directory != "/":
            # No error in the reference (an empty listing); fathom says that nothing is
            # there and, for code that reads the entries anyway, lists none.
            shown = path if isinstance(path, str) else None
            missing = BackendError(ErrorKind.NOT_FOUND, exact, shown=shown)
            return protocol.LsResult(error=missing, entries=[])
        return protocol.LsResult(entries=[entries[key] for key in sorted(entries)])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> protocol.ReadResult:
        """`limit` lines from the 0-based line `offset` (see `ReadResult`)."""
        stored = self._stored(file_path)
        if isinstance(stored, BackendError):
            return protocol.ReadResult(error=stored)
        path, data = stored
        return replace(read_window(data, offset, limit, path), version=file_version(data))

    def _stored(self, file_path: str) -> tuple[str, FileData] | BackendError:
        """The normalised path and the data of the file at `file_path`, or why there is none."""
        if isinstance(path := normalized(normalize_path, file_path), BackendError):
            return path
        data = self.files.get(path)
        return (path, data) if data is not None else self._no_file(path)

    def _no_file(self, path: str) -> BackendError:
        """Why no file is at `path`: it is a directory, or nothing is there."""
        if path == "/" or any(p.startswith(path.rstrip("/") + "/") for p in self.files):
            return BackendError(ErrorKind.IS_DIRECTORY, path)
        return BackendError(ErrorKind.NOT_FOUND, path)

    def _under(self, directory: str) -> list[tuple[str, FileData]]:
        return sorted(
            (path, data)
            for path, data in self.files.items()
            if path.startswith(directory) or path == directory.rstrip("/")
        )

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *,
        max_count: int | None = None, context_lines: int = 0,
    ) -> protocol.GrepResult:
        """Lines containing the literal `pattern` (see `BackendProtocol.grep`); with
        `context_lines=N` each match carries N lines of context on each side."""
        return grep_files(
            self._under, pattern, path, glob, max_count=max_count, context_lines=context_lines
        )

    def glob(self, pattern: str, path: str | None = None) -> protocol.GlobResult:
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return protocol.GlobResult(error=directory)
        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            glob_matches(pattern, "", budget)  # refuse a bad pattern even with no files
            return protocol.GlobResult(
                matches=[
                    file_info(file_path, data)
                    for file_path, data in self._under(directory)
                    if file_path.startswith(directory)
                    and glob_matches(pattern, file_path[len(directory) :], budget)
                ]
            )
        except GlobError as error:
            return protocol.GlobResult(error=pattern_error(pattern, error))

    def write(self, file_path: str, content: str) -> protocol.WriteResult:
        """Create the file, or replace the content of an existing one (keeping its
        creation time)."""
        if isinstance(path := normalized(normalize_file_path, file_path), BackendError):
            return protocol.WriteResult(error=path)
        if path == "/" or any(p.startswith(path + "/") for p in self.files):
            return protocol.WriteResult(error=BackendError(ErrorKind.IS_DIRECTORY, path))
        parents = [path[:i] for i in range(1, len(path)) if path[i] == "/"]
        blocking = next((parent for parent in parents if parent in self.files), None)
        if blocking is not None:
            return protocol.WriteResult(error=BackendError(ErrorKind.NOT_A_DIRECTORY, blocking))
        if failure := too_large(path, len(content.encode("utf-8", "replace"))):
            return protocol.WriteResult(error=failure)
        previous = self.files.get(path)
        if is_stale(previous):
            return protocol.WriteResult(error=BackendError(ErrorKind.CHANGED, path))
        created_at = previous.get("created_at") if previous else None
        data = create_file_data(content, created_at=created_at)
        return protocol.WriteResult(
            path=path, files_update={path: data}, version=file_version(data)
        )

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> protocol.EditResult:
        stored = self._stored(file_path)
        if isinstance(stored, BackendError):
            return protocol.EditResult(error=stored)
        path, data = stored
        if is_stale(data):
            return protocol.EditResult(error=BackendError(ErrorKind.CHANGED, path))
        outcome = edit_text(path, data, old_string, new_string, replace_all)
        if isinstance(outcome, protocol.EditResult):
            return outcome
        new_text, occurrences = outcome
        new_data = update_file_data(data, new_text)
        return protocol.EditResult(
            path=path,
            files_update={path: new_data},
            occurrences=occurrences,
            version=file_version(new_data),
        )

    def delete(self, file_path: str) -> protocol.DeleteResult:
        """Remove a file, or a directory and every file under it.

        The `files_update` maps each removed path to `None`, which the `files` channel's
        reducer treats as a deletion. `/` itself is refused (`INVALID`): deleting every
        file in one call is never what a model means.
        """
        path = delete_target(file_path)
        if isinstance(path, protocol.DeleteResult):
            return path
        doomed = files_under(self.files, path)
        if not doomed:
            return protocol.DeleteResult(error=BackendError(ErrorKind.NOT_FOUND, path))
        return protocol.DeleteResult(path=path, files_update=dict.fromkeys(doomed))

    def upload_files(self, files: list[tuple[str, bytes]]) -> UploadResults:
        """Store each `(path, bytes)` as a file, replacing what is there.

        Each file gets its own response: a bad path (`invalid_path`), a path that is a
        directory (`is_directory`) or lies under a file (`invalid_path`) fails alone and
        the others are stored. Bytes that are UTF-8 text are kept as text, anything else as
        base64, so every byte comes back from `download_files`.

        Like `write`, the backend does not change state itself: the returned list carries
        the change as `files_update` (paths of this backend's view). When it runs inside a
        graph step that has a `files` channel, the change is also sent to that channel, so
        an upload made by a node or a tool lands in state when the step ends.
        """
        current = self.files
        responses, planned = plan_uploads(current, files)
        update: FilesUpdate = dict(planned)
        results = UploadResults(responses, files_update=update or None)
        if update:
            outer: FilesUpdate = {self._outer(path): data for path, data in update.items()}
            _send_files_of_current_step(outer)
        return results

    def download_files(self, paths: list[str]) -> list[protocol.FileDownloadResponse]:
        """The bytes of each path, or `file_not_found` / `is_directory` / `invalid_path`."""
        return download_from(self.files, paths)

    def _outer(self, path: str) -> str:
        """The full state path of a path of this (possibly mounted) view."""
        return path if self._mount == "/" else self._mount.rstrip("/") + path


def files_under(files: Mapping[str, Any], path: str) -> list[str]:
    """The stored paths that `path` names: the file itself and everything under it."""
    base = path.rstrip("/")
    return sorted(p for p in files if p == base or p.startswith(base + "/"))


def plan_uploads(
    files: Mapping[str, Any], uploads: list[tuple[str, bytes]]
) -> tuple[list[protocol.FileUploadResponse], dict[str, FileData]]:
    """Per-file responses and the new `FileData` of the accepted uploads.

    `files` is what is stored now (path -> anything); later uploads in the batch see the
    earlier ones, so `/a` then `/a/b` refuses the second.
    """
    stored = set(files)
    responses: list[protocol.FileUploadResponse] = []
    update: dict[str, FileData] = {}
    for raw, content in uploads:
        try:
            path = normalize_file_path(raw)
        except PathError:
            responses.append(protocol.FileUploadResponse(path=raw, error=ErrorKind.INVALID))
            continue
        if path == "/" or not isinstance(content, bytes | bytearray):
            responses.append(protocol.FileUploadResponse(path=raw, error=ErrorKind.INVALID))
            continue
        if any(p.startswith(path + "/") for p in stored):
            responses.append(protocol.FileUploadResponse(path=raw, error=ErrorKind.IS_DIRECTORY))
            continue
        parents = [path[:i] for i in range(1, len(path)) if path[i] == "/"]
        if any(parent in stored for parent in parents):
            responses.append(protocol.FileUploadResponse(path=raw, error=ErrorKind.INVALID))
            continue
        previous = files.get(path) if isinstance(files.get(path), Mapping) else None
        created_at = previous.get("created_at") if previous else None
        update[path] = create_file_data(bytes(content), created_at=created_at)
        stored.add(path)
        responses.append(protocol.FileUploadResponse(path=raw))
    return responses, update


def download_from(
    files: Mapping[str, FileData], paths: list[str]
) -> list[protocol.FileDownloadResponse]:
    """`download_files` over a mapping of stored files."""
    responses: list[protocol.FileDownloadResponse] = []
    for raw in paths:
        try:
            path = normalize_path(raw)
        except PathError:
            responses.append(protocol.FileDownloadResponse(path=raw, error=ErrorKind.INVALID))
            continue
        data = files.get(path)
        if data is not None:
            responses.append(protocol.FileDownloadResponse(path=raw, content=file_bytes(data)))
        elif path == "/" or any(p.startswith(path.rstrip("/") + "/") for p in files):
            responses.append(protocol.FileDownloadResponse(path=raw, error=ErrorKind.IS_DIRECTORY))
        else:
            responses.append(protocol.FileDownloadResponse(path=raw, error=ErrorKind.NOT_FOUND))
    return responses


def _send_files_of_current_step(update: FilesUpdate) -> bool:
    """Write `update` to the `files` channel of the graph step this code runs in.

    Returns whether it was sent: outside a graph, or in a graph without a `files`
    channel, nothing is sent.
    """
    try:
        config = get_config()
    except RuntimeError:
        return False
    configurable = config.get("configurable", {})
    read = configurable.get(CONFIG_KEY_READ)
    send = configurable.get(CONFIG_KEY_SEND)
    if read is None or send is None:
        return False
    try:
        read("files", True)
    except KeyError:  # a graph without a files channel
        return False
    send([("files", update)])
    return True
