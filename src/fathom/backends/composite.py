"""`CompositeBackend`: one filesystem made of several backends, routed by path prefix.

Each operation is one plan (`PlannedBackend`): it routes, yields a `call` on each backend it
needs, and merges what they answer; the sync methods answer those calls with the backends'
sync methods, the async ones with their async twins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Self

from fathom.backends import protocol
from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.errors import BackendError, ErrorKind, error_kind
from fathom.backends.state import StateBackend
from fathom.backends.utils import delete_target, invalid_path, normalized, pattern_error
from fathom.state import FilesUpdate

__all__ = ["CompositeBackend"]

Child = protocol.BackendProtocol | Callable[[Any], protocol.BackendProtocol]


def _route_prefix(prefix: str) -> str:
    try:
        normalized = normalize_dir(prefix)
    except PathError as error:
        raise ValueError(f"Route prefix {prefix!r} is not a usable path: {error}") from None
    if normalized == "/":
        raise ValueError("A route cannot be '/'; that is what `default` is for.")
    return normalized


class CompositeBackend(protocol.PlannedBackend):
    """Routes each path to the backend of its longest matching prefix.

    `routes` maps prefixes such as `"/memories/"` to backends (or factories); everything
    else goes to `default`. A routed backend sees paths relative to its route
    (`/memories/a.md` is `/a.md` there), and every result carries the full path again.
    `ls`, `glob` and `grep` merge what all the backends under the searched directory hold;
    a file a shorter route or the default holds under a longer route's prefix is hidden,
    because reads and writes of that path go to the longer route.

    A backend not made by fathom is adapted where it is handed in (`adopt`).

    Args:
        default: The backend for paths under no route.
        routes: Prefix → backend. Prefixes are absolute; a trailing `/` is added.
        artifacts_root: The directory under which middleware keeps what it writes on the
            agent's behalf (offloaded tool results, the summarization archive), so those
            files can be routed, e.g. `"/artifacts/"` with a route there. Default `/`.
    """

    def __init__(
        self, default: Child, routes: Mapping[str, Child], *, artifacts_root: str = "/"
    ) -> None:
        try:
            self.artifacts_root = normalize_dir(artifacts_root)
        except PathError as error:
            raise ValueError(
                f"artifacts_root {artifacts_root!r} is not a usable path: {error}"
            ) from None
        self.default = protocol.adopt(default)
        normalized: dict[str, Child] = {}
        for prefix, child in routes.items():
            key = _route_prefix(prefix)
            if key in normalized:
                raise ValueError(f"Two routes normalise to the same prefix {key!r}.")
            normalized[key] = child.mounted_at(key) if isinstance(child, StateBackend) else child
            normalized[key] = protocol.adopt(normalized[key])
        self.routes: dict[str, Child] = dict(
            sorted(normalized.items(), key=lambda item: -len(item[0]))
        )

    def bind(self, runtime: Any) -> Self:
        """A composite whose backends each serve `runtime` (factories are called here)."""
        bound = object.__new__(type(self))
        bound.artifacts_root = self.artifacts_root
        bound.default = protocol.resolve_backend(self.default, runtime)
        bound.routes = {}
        for prefix, child in self.routes.items():
            routed = protocol.resolve_backend(child, runtime)
            if isinstance(routed, StateBackend):
                routed = routed.mounted_at(prefix)
            bound.routes[prefix] = routed
        return bound

    # -- routing -------------------------------------------------------------------------

    def _owner(self, path: str) -> tuple[str, Any, str]:
        """(route prefix or "/", backend, path inside that backend) for a normalised path."""
        as_dir = path if path.endswith("/") else path + "/"
        for prefix, child in self.routes.items():
            if as_dir.startswith(prefix):
                return prefix, child, "/" + path[len(prefix) :]
        return "/", self.default, path

    def _shadowed(self, owner_prefix: str, outer_path: str) -> bool:
        """Whether `outer_path`, held by the backend at `owner_prefix`, is a longer route's."""
        as_dir = outer_path if outer_path.endswith("/") else outer_path + "/"
        return any(
            len(prefix) > len(owner_prefix) and as_dir.startswith(prefix) for prefix in self.routes
        )

    @staticmethod
    def _outer(prefix: str, inner_path: str) -> str:
        return inner_path if prefix == "/" else prefix.rstrip("/") + inner_path

    def _outer_update(self, prefix: str, update: FilesUpdate | None) -> FilesUpdate | None:
        if update is None or prefix == "/":
            return update
        return {self._outer(prefix, path): data for path, data in update.items()}

    def _sources(self, directory: str) -> list[tuple[str, Any, str]]:
        """Every backend holding files under `directory`, with the directory inside each."""
        owner = self._owner(directory)
        sources = [owner]
        for prefix, child in self.routes.items():
            if prefix != owner[0] and prefix.startswith(directory):
                sources.append((prefix, child, "/"))
        return sources

    def resolved_path(self, path: str) -> str | None:
        """The full path a routed backend really touches for `path` (see `PolicyBackend`)."""
        try:
            normalized = normalize_path(path)
        except PathError:
            return None
        prefix, child, inner = self._owner(normalized)
        resolve = getattr(child, "resolved_path", None)
        if resolve is None:
            return normalized
        resolved = resolve(inner)
        return None if resolved is None else self._outer(prefix, resolved)

    # -- listing and search --------------------------------------------------------------

    def _ls(self, path: str) -> protocol.Plan[protocol.LsResult]:
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return protocol.LsResult(error=directory)
        prefix, child, inner = self._owner(directory)
        result = yield protocol.call(child, "ls", inner)
        return self._merge_ls(directory, prefix, result)

    def _merge_ls(
        self, directory: str, prefix: str, result: protocol.LsResult
    ) -> protocol.LsResult:
        entries: dict[str, protocol.FileInfo] = {}
        for entry in result.entries or []:
            outer = self._outer(prefix, entry["path"])
            if not self._shadowed(prefix, outer):
                entries[outer] = protocol.FileInfo(**{**entry, "path": outer})
        for route in self.routes:
            if len(route) > len(prefix) and route.startswith(directory) and route != directory:
                child_dir = directory + route[len(directory) :].split("/", 1)[0] + "/"
                entries.setdefault(child_dir, protocol.FileInfo(path=child_dir, is_dir=True))
        if result.error and (not entries or _fails(result)):
            # Routes under the directory make it exist, so a "not found" from the backend
            # that owns it is not an error; any other failure is (as in the reference).
            if prefix == "/":
                return result
            none = [] if result.entries is not None else None
            return protocol.LsResult(error=self._outer_error(prefix, result), entries=none)
        return protocol.LsResult(entries=[entries[key] for key in sorted(entries)])

    def _outer_error(self, prefix: str, result: Any) -> Any:
        """A routed backend's error with its path shown as the full path.

        Text from a backend written for the reference API is passed on unchanged: its
        paths are the routed backend's own.
        """
        error = result.error
        if prefix != "/" and isinstance(error, BackendError) and error.path is not None:
            shown = self._outer(prefix, error.shown) if error.shown else None
            return error.changed(path=self._outer(prefix, error.path), shown=shown)
        return error

    def _pattern_for(self, pattern: str) -> str:
        """What to ask a backend for: the pattern itself when it only names files."""
        return pattern if "/" not in pattern else "**"

    def _glob_check(self, pattern: str, path: str | None) -> str | BackendError:
        """The searched directory, or the error for a bad path or pattern (checked before
        asking any backend)."""
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return directory
        try:
            glob_matches(pattern, "x")
        except GlobError as error:
            return pattern_error(pattern, error)
        return directory

    def _glob(self, pattern: str, path: str | None = None) -> protocol.Plan[protocol.GlobResult]:
        directory = self._glob_check(pattern, path)
        if isinstance(directory, BackendError):
            return protocol.GlobResult(error=directory)
        results = []
        for prefix, child, inner in self._sources(directory):
            result = yield protocol.call(child, "glob", self._pattern_for(pattern), inner)
            results.append((prefix, result))
            if _fails(result):
                break  # the merge answers with this error: no other backend is asked
        return self._merge_glob(directory, pattern, results)

    def _route_error(self, results: list[tuple[str, Any]]) -> Any:
        """The first error of the routed results, with full paths (`NOT_FOUND` is none: a
        route with nothing under the searched path)."""
        for prefix, result in results:
            if result.error and error_kind(result.error) is not ErrorKind.NOT_FOUND:
                return self._outer_error(prefix, result)
        return None

    def _merge_glob(
        self, directory: str, pattern: str, results: list[tuple[str, protocol.GlobResult]]
    ) -> protocol.GlobResult:
        matches: dict[str, protocol.FileInfo] = {}
        budget = GlobBudget()  # bounds the matching work of the merge as a whole
        truncated = False
        reason = None
        if (error := self._route_error(results)) is not None:
            return protocol.GlobResult(error=error)
        for prefix, result in results:
            if result.error:
                continue
            if result.truncated:
                truncated = True
                reason = reason or result.truncation_reason
            for entry in result.matches or []:
                outer = self._outer(prefix, entry["path"])
                if self._shadowed(prefix, outer) or not outer.startswith(directory):
                    continue
                try:
                    if not glob_matches(pattern, outer[len(directory) :], budget):
                        continue
                except GlobError as error:
                    return protocol.GlobResult(error=pattern_error(pattern, error))
                matches[outer] = protocol.FileInfo(**{**entry, "path": outer})
        return protocol.GlobResult(
            matches=[matches[key] for key in sorted(matches)],
            truncated=truncated,
            truncation_reason=reason,
        )

    def _grep_sources(self, path: str | None) -> tuple[str, list[tuple[str, Any, str]]]:
        """The searched directory (or file) and the backends to ask, with their paths."""
        target = normalize_path(path) if path and str(path).strip() else "/"
        directory = normalize_dir(target)
        prefix, child, inner = self._owner(target)
        sources = [(prefix, child, inner)]
        for route, routed in self.routes.items():
            if route != prefix and route.startswith(directory):
                sources.append((route, routed, "/"))
        return directory, sources

    def _grep_check(
        self, path: str | None, glob: str | None
    ) -> tuple[str, list[tuple[str, Any, str]]] | BackendError:
        try:
            planned = self._grep_sources(path)
        except PathError as error:
            return invalid_path(path, error)
        try:
            if glob:
                glob_matches(glob, "x")
        except GlobError as error:
            return pattern_error(glob, error)
        return planned

    def _grep(
        self, pattern: str, path: str | None, glob: str | None, max_count: int | None,
        context_lines: int,
    ) -> protocol.Plan[protocol.GrepResult]:
        """Grep every backend under `path` and merge (see `BackendProtocol.grep`)."""
        planned = self._grep_check(path, glob)
        if isinstance(planned, BackendError):
            return protocol.GrepResult(error=planned)
        directory, sources = planned
        child_glob = glob if glob and "/" not in glob else None
        kwargs = {"max_count": max_count, "context_lines": context_lines}
        results = []
        for index, (prefix, child, inner) in enumerate(sources):
            result = yield protocol.call(child, "grep", pattern, inner, child_glob, **kwargs)
            results.append((prefix, result))
            if _fails(result):
                break  # the merge answers with this error: no other backend is asked
            if max_count is not None and index + 1 < len(sources):
                merged = self._merge_grep(directory, glob, results)
                if merged.matches is not None and len(merged.matches) >= max_count:
                    # The cap is met: the other backends are not asked, and the answer
                    # says it may be incomplete (as the reference's does).
                    return protocol.cap_grep(replace(merged, truncated=True), max_count)
        return protocol.cap_grep(self._merge_grep(directory, glob, results), max_count)

    def _merge_grep(
        self, directory: str, glob: str | None, results: list[tuple[str, protocol.GrepResult]]
    ) -> protocol.GrepResult:
        matches: list[protocol.GrepMatch] = []
        skipped: list[str] = []
        budget = GlobBudget()  # bounds the matching work of the merge as a whole
        truncated = False
        if (error := self._route_error(results)) is not None:
            return protocol.GrepResult(error=error)
        for prefix, result in results:
            if result.error:
                continue
            truncated = truncated or bool(getattr(result, "truncated", False))
            for match in result.matches or []:
                outer = self._outer(prefix, match["path"])
                if self._shadowed(prefix, outer):
                    continue
                relative = outer[len(directory) :] if outer.startswith(directory) else ""
                try:
                    if glob and "/" in glob and relative and not glob_matches(
                        glob, relative, budget
                    ):
                        continue
                except GlobError as error:
                    return protocol.GrepResult(error=pattern_error(glob, error))
                matches.append(protocol.GrepMatch(**{**match, "path": outer}))
            skipped += [
                outer
                for p in result.skipped or []
                if not self._shadowed(prefix, outer := self._outer(prefix, p))
            ]
        matches.sort(key=lambda m: (m["path"], m["line"]))
        return protocol.GrepResult(
            matches=matches, truncated=truncated, skipped=sorted(skipped) or None
        )

    # -- single files --------------------------------------------------------------------

    def _route_file(
        self, file_path: str, new_file: bool = False
    ) -> tuple[str, Any, str] | BackendError:
        normalize = normalize_file_path if new_file else normalize_path
        if isinstance(path := normalized(normalize, file_path), BackendError):
            return path
        prefix, child, inner = self._owner(path)
        if prefix != "/" and inner == "/":
            return BackendError(ErrorKind.IS_DIRECTORY, path, f"the mount point of route {prefix}")
        return prefix, child, inner

    def _read(self, file_path: str, offset: int = 0, limit: int = 2000) -> protocol.Plan[Any]:
        return (yield from self._routed("read", file_path, offset, limit))

    def _write(self, file_path: str, content: str) -> protocol.Plan[Any]:
        return (yield from self._routed("write", file_path, content, new_file=True))

    def _edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> protocol.Plan[Any]:
        return (yield from self._routed("edit", file_path, old_string, new_string, replace_all))

    def _routed(
        self, method: str, file_path: str, *args: Any, new_file: bool = False
    ) -> protocol.Plan[Any]:
        """`method` on the backend serving `file_path`; its result with full paths."""
        routed = self._route_file(file_path, new_file)
        if isinstance(routed, BackendError):
            return protocol.error_result(method, (), routed)
        prefix, child, inner = routed
        result = yield protocol.call(child, method, inner, *args)
        return self._changed(prefix, result)

    def _changed(self, prefix: str, result: Any) -> Any:
        """A routed backend's result with full paths."""
        if result.error:
            return replace(result, error=self._outer_error(prefix, result))
        if isinstance(result, protocol.ReadResult):
            return result
        return replace(
            result,
            path=self._outer(prefix, result.path) if result.path else result.path,
            files_update=self._outer_update(prefix, result.files_update),
        )

    def _route_delete(self, file_path: str) -> tuple[str, Any, str] | protocol.DeleteResult:
        """The route serving a delete, or the refusal.

        `/`, a route's mount point and a directory that holds a mount point are refused
        (`INVALID`): a delete runs on one backend, so removing a directory that spans
        routes would leave the routed files behind while reporting success.
        """
        path = delete_target(file_path)
        if isinstance(path, protocol.DeleteResult):
            return path
        prefix, child, inner = self._owner(path)
        if prefix != "/" and inner == "/":
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.INVALID, path, f"the mount point of route {prefix}")
            )
        inside = [route for route in self.routes if route.startswith(path.rstrip("/") + "/")]
        if inside:
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.INVALID, path, f"holds the route {inside[-1]}")
            )
        if not protocol.supports_delete(child):
            return protocol.DeleteResult(error=BackendError(ErrorKind.UNSUPPORTED, path, "delete"))
        return prefix, child, inner

    def _delete(self, file_path: str) -> protocol.Plan[protocol.DeleteResult]:
        """Delete a file or directory (recursively) in the backend that serves it."""
        routed = self._route_delete(file_path)
        if isinstance(routed, protocol.DeleteResult):
            return routed
        prefix, child, inner = routed
        try:
            result = yield protocol.call(child, "delete", inner)
        except NotImplementedError:
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.UNSUPPORTED, file_path, "delete")
            )
        return self._changed(prefix, result)

    # -- moving files in and out -----------------------------------------------------

    def _batches(self, paths: list[str], new_file: bool) -> tuple[dict[str, Any], dict]:
        """Group paths by route: `{prefix: child}`, `{prefix: [(index, inner path)]}`.

        A path that is not usable, or names a route's mount point, is left out (its index
        gets no batch); the caller answers it with `invalid_path` / `is_directory`.
        """
        children: dict[str, Any] = {}
        batches: dict[str, list[tuple[int, str]]] = {}
        for index, raw in enumerate(paths):
            try:
                path = (normalize_file_path if new_file else normalize_path)(raw)
            except PathError:
                continue
            prefix, child, inner = self._owner(path)
            if prefix != "/" and inner == "/":
                continue
            children[prefix] = child
            batches.setdefault(prefix, []).append((index, inner))
        return children, batches

    @staticmethod
    def _unrouted_error(raw: str, new_file: bool) -> ErrorKind:
        try:
            (normalize_file_path if new_file else normalize_path)(raw)
        except PathError:
            return ErrorKind.INVALID
        return ErrorKind.IS_DIRECTORY

    def _upload_files(
        self, files: list[tuple[str, bytes]]
    ) -> protocol.Plan[protocol.UploadResults]:
        """Upload each file to the backend that serves its path; one response per file.

        Files are grouped per route and each backend gets one call; a backend that cannot
        take uploads answers `unsupported` for its files and the others still go through.
        `files_update` gathers the in-state backends' changes, with full paths.
        """
        children, batches = self._batches([path for path, _ in files], new_file=True)
        answers: dict[int, protocol.FileUploadResponse] = {}
        update: FilesUpdate = {}
        for prefix, batch in batches.items():
            payload = [(inner, files[index][1]) for index, inner in batch]
            try:
                got = yield protocol.call(children[prefix], "upload_files", payload)
            except NotImplementedError:
                got = []
            self._place_uploads(prefix, files, batch, got, answers, update)
        return self._uploads(files, answers, update)

    def _place_uploads(
        self,
        prefix: str,
        files: list[tuple[str, bytes]],
        batch: list[tuple[int, str]],
        got: list[Any],
        answers: dict[int, protocol.FileUploadResponse],
        update: FilesUpdate,
    ) -> None:
        for position, (index, _) in enumerate(batch):
            error = got[position].error if position < len(got) else ErrorKind.UNSUPPORTED
            answers[index] = protocol.FileUploadResponse(path=files[index][0], error=error)
        update.update(self._outer_update(prefix, getattr(got, "files_update", None)) or {})

    def _uploads(
        self,
        files: list[tuple[str, bytes]],
        answers: dict[int, protocol.FileUploadResponse],
        update: FilesUpdate,
    ) -> protocol.UploadResults:
        responses = [
            answers.get(index)
            or protocol.FileUploadResponse(path=raw, error=self._unrouted_error(raw, new_file=True))
            for index, (raw, _) in enumerate(files)
        ]
        return protocol.UploadResults(responses, files_update=update or None)

    def _download_files(
        self, paths: list[str]
    ) -> protocol.Plan[list[protocol.FileDownloadResponse]]:
        """Download each path from the backend that serves it; one response per path."""
        children, batches = self._batches(paths, new_file=False)
        answers: dict[int, protocol.FileDownloadResponse] = {}
        for prefix, batch in batches.items():
            try:
                got = yield protocol.call(
                    children[prefix], "download_files", [inner for _, inner in batch]
                )
            except NotImplementedError:
                got = []
            self._place_downloads(paths, batch, list(got), answers)
        return self._downloads(paths, answers)

    @staticmethod
    def _place_downloads(
        paths: list[str],
        batch: list[tuple[int, str]],
        got: list[Any],
        answers: dict[int, protocol.FileDownloadResponse],
    ) -> None:
        for position, (index, _) in enumerate(batch):
            if position < len(got):
                answer = got[position]
                answers[index] = protocol.FileDownloadResponse(
                    path=paths[index], content=answer.content, error=answer.error
                )
            else:
                answers[index] = protocol.FileDownloadResponse(
                    path=paths[index], error=ErrorKind.UNSUPPORTED
                )

    def _downloads(
        self, paths: list[str], answers: dict[int, protocol.FileDownloadResponse]
    ) -> list[protocol.FileDownloadResponse]:
        return [
            answers.get(index)
            or protocol.FileDownloadResponse(
                path=raw, error=self._unrouted_error(raw, new_file=False)
            )
            for index, raw in enumerate(paths)
        ]

    # -- commands ------------------------------------------------------------------------

    @property
    def can_execute(self) -> bool:
        """Whether the default backend runs shell commands (routes only hold files)."""
        return protocol.supports_execute(self.default)

    def execute(self, command: str, *, timeout: int | None = None) -> protocol.ExecuteResponse:
        """Run `command` in the default backend (the sandbox); routes are not visible there.

        Raises:
            NotImplementedError: the default backend cannot run commands (`can_execute`).
        """
        return self._perform("execute", command, timeout=timeout)

    async def aexecute(
        self, command: str, *, timeout: int | None = None
    ) -> protocol.ExecuteResponse:
        """Async `execute`."""
        return await self._async("execute", command, timeout=timeout)

    def _execute(
        self, command: str, timeout: int | None
    ) -> protocol.Plan[protocol.ExecuteResponse]:
        if not self.can_execute:
            # Not reached through the `execute` tool, which is offered only when the default
            # backend runs commands (`can_execute`): a direct call is a setup mistake.
            raise NotImplementedError(
                "The default backend doesn't support command execution: give the "
                "CompositeBackend a default backend that runs commands (a sandbox)."
            )
        return (yield protocol.call(self.default, "execute", command, timeout=timeout))


def _fails(result: Any) -> bool:
    """Whether a routed search result is an error the merge answers with (`NOT_FOUND` is
    not one: that route has nothing under the searched path)."""
    return bool(result.error) and error_kind(result.error) is not ErrorKind.NOT_FOUND
