"""`StateBackend`: files kept in the thread's graph state (the default backend)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from langgraph._internal._constants import CONFIG_KEY_READ
from langgraph.config import get_config

from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.base import BackendBase
from fathom.backends.protocol import (
    DeleteResult,
    EditResult,
    FileInfo,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from fathom.backends.utils import (
    MAX_EDIT_BYTES,
    apply_edit,
    create_file_data,
    grep_lines,
    text_view,
    update_file_data,
)
from fathom.state import FileData

__all__ = ["StateBackend", "file_info"]


def file_info(path: str, data: FileData) -> FileInfo:
    """Listing entry for one stored file."""
    return FileInfo(
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
    except Exception:  # a graph without a files channel
        return {}


class StateBackend(BackendBase):
    """Files in the `files` channel of the current thread's state.

    Ephemeral: they live as long as the thread, are checkpointed with it, and are shared by
    the agent and its subagents. Writes return a `files_update` that the filesystem tools
    apply to state; the backend itself never mutates anything.

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

    @property
    def files(self) -> Mapping[str, FileData]:
        """The files in the bound runtime's state (or the current graph step's)."""
        state = getattr(self._runtime, "state", None)
        if state is None:
            files = _files_of_current_step()
        else:
            files = (state.get("files") if isinstance(state, Mapping) else None) or {}
        if self._mount == "/":
            return files
        cut = len(self._mount) - 1
        return {path[cut:]: data for path, data in files.items() if path.startswith(self._mount)}

    def ls(self, path: str) -> LsResult:
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return LsResult(error=str(error))
        files = self.files
        exact = directory.rstrip("/")
        if exact in files:
            return LsResult(entries=[file_info(exact, files[exact])])
        entries: dict[str, FileInfo] = {}
        for file_path, data in files.items():
            if not file_path.startswith(directory):
                continue
            rest = file_path[len(directory) :]
            if "/" in rest:
                sub = directory + rest.split("/", 1)[0] + "/"
                entries.setdefault(sub, FileInfo(path=sub, is_dir=True))
            else:
                entries[file_path] = file_info(file_path, data)
        if not entries and directory != "/":
            return LsResult(error=f"Error: directory '{exact}' not found.")
        return LsResult(entries=[entries[key] for key in sorted(entries)])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        try:
            path = normalize_path(file_path)
        except PathError as error:
            return ReadResult(error=str(error))
        data = self.files.get(path)
        if data is None:
            if any(p.startswith(path.rstrip("/") + "/") for p in self.files):
                return ReadResult(
                    error=f"Error: '{path}' is a directory. Use ls to see what it holds."
                )
            return ReadResult(error=f"Error: File '{path}' not found")
        return ReadResult(file_data=data)

    def _under(self, directory: str) -> list[tuple[str, FileData]]:
        return sorted(
            (path, data)
            for path, data in self.files.items()
            if path.startswith(directory) or path == directory.rstrip("/")
        )

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return GrepResult(error=str(error))
        matches: list[GrepMatch] = []
        skipped: list[str] = []
        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            if glob:
                glob_matches(glob, "", budget)  # refuse a bad pattern even with no files
        except GlobError as error:
            return GrepResult(error=str(error))
        for file_path, data in self._under(directory):
            relative = file_path[len(directory) :] if file_path.startswith(directory) else ""
            try:
                if glob and relative and not glob_matches(glob, relative, budget):
                    continue
            except GlobError as error:
                return GrepResult(error=str(error))
            view = text_view(data)
            if view.text is None:
                continue
            if view.size > MAX_EDIT_BYTES:
                skipped.append(file_path)
                continue
            matches.extend(grep_lines(file_path, view.text, pattern))
        return GrepResult(matches=matches, skipped=skipped or None)

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return GlobResult(error=str(error))
        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            glob_matches(pattern, "", budget)  # refuse a bad pattern even with no files
            return GlobResult(
                matches=[
                    file_info(file_path, data)
                    for file_path, data in self._under(directory)
                    if file_path.startswith(directory)
                    and glob_matches(pattern, file_path[len(directory) :], budget)
                ]
            )
        except GlobError as error:
            return GlobResult(error=str(error))

    def write(self, file_path: str, content: str) -> WriteResult:
        try:
            path = normalize_file_path(file_path)
        except PathError as error:
            return WriteResult(error=str(error))
        if path == "/":
            return WriteResult(error="Error: '/' is the root directory, not a file path.")
        if any(p.startswith(path + "/") for p in self.files):
            return WriteResult(
                error=f"Error: '{path}' is a directory. Write to a file path inside it instead."
            )
        if path in self.files:
            return WriteResult(
                error=(
                    f"Error: '{path}' already exists. Use edit_file to change it, "
                    "or write to a new path."
                )
            )
        size = len(content.encode("utf-8", "replace"))
        if size > MAX_EDIT_BYTES:
            return WriteResult(
                error=(
                    f"Error: the content is {size:,} bytes, over the {MAX_EDIT_BYTES:,}-byte "
                    "limit for one file. Split it into several smaller files."
                )
            )
        return WriteResult(path=path, files_update={path: create_file_data(content)})

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        try:
            path = normalize_path(file_path)
        except PathError as error:
            return EditResult(error=str(error))
        data = self.files.get(path)
        if data is None:
            return EditResult(error=f"Error: File '{path}' not found")
        view = text_view(data)
        if view.text is None:
            return EditResult(error=f"Error: '{path}' is a binary file and cannot be edited.")
        if view.lossy:
            return EditResult(
                error=(
                    f"Error: '{path}' is not valid UTF-8 text; editing it would corrupt "
                    "the bytes that cannot be decoded."
                )
            )
        if view.size > MAX_EDIT_BYTES:
            return EditResult(
                error=(
                    f"Error: '{path}' is {view.size:,} bytes, over the {MAX_EDIT_BYTES:,}-byte "
                    "limit for editing in place."
                )
            )
        outcome = apply_edit(path, view.text, old_string, new_string, replace_all)
        if isinstance(outcome, EditResult):
            return outcome
        new_text, occurrences = outcome
        new_size = len(new_text.encode("utf-8"))
        if new_size > MAX_EDIT_BYTES:
            return EditResult(
                error=(
                    f"Error: this edit would make '{path}' {new_size:,} bytes, over the "
                    f"{MAX_EDIT_BYTES:,}-byte limit for one file. Split the content into "
                    "several files."
                )
            )
        return EditResult(
            path=path,
            files_update={path: update_file_data(data, new_text)},
            occurrences=occurrences,
        )

    def delete(self, file_path: str) -> DeleteResult:
        """Remove one file (directories are not removed; delete their files)."""
        try:
            path = normalize_path(file_path)
        except PathError as error:
            return DeleteResult(error=str(error))
        if path not in self.files:
            if any(p.startswith(path.rstrip("/") + "/") for p in self.files):
                return DeleteResult(
                    error=f"Error: '{path}' is a directory. Delete the files in it one by one."
                )
            return DeleteResult(error=f"Error: File '{path}' not found")
        return DeleteResult(path=path, files_update={path: None})
