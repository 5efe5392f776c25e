"""`CompositeBackend`: one filesystem made of several backends, routed by path prefix."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Self

from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.base import BackendBase
from fathom.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileInfo,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
    resolve_backend,
    supports_delete,
    supports_execute,
)
from fathom.backends.state import StateBackend
from fathom.state import FilesUpdate

__all__ = ["CompositeBackend"]

Child = BackendProtocol | Callable[[Any], BackendProtocol]


def _route_prefix(prefix: str) -> str:
    try:
        normalized = normalize_dir(prefix)
    except PathError as error:
        raise ValueError(f"Route prefix {prefix!r} is not a usable path: {error}") from None
    if normalized == "/":
        raise ValueError("A route cannot be '/'; that is what `default` is for.")
    return normalized


class CompositeBackend(BackendBase):
    """Routes each path to the backend of its longest matching prefix.

    `routes` maps prefixes such as `"/memories/"` to backends (or factories); everything
    else goes to `default`. A routed backend sees paths relative to its route
    (`/memories/a.md` is `/a.md` there), and every result carries the full path again.
    `ls`, `glob` and `grep` merge what all the backends under the searched directory hold;
    a file a shorter route or the default holds under a longer route's prefix is hidden,
    because reads and writes of that path go to the longer route.

    Args:
        default: The backend for paths under no route.
        routes: Prefix → backend. Prefixes are absolute; a trailing `/` is added.
    """

    def __init__(self, default: Child, routes: Mapping[str, Child]) -> None:
        self.default = default
        normalized: dict[str, Child] = {}
        for prefix, child in routes.items():
            key = _route_prefix(prefix)
            if key in normalized:
                raise ValueError(f"Two routes normalise to the same prefix {key!r}.")
            normalized[key] = child.mounted_at(key) if isinstance(child, StateBackend) else child
        self.routes: dict[str, Child] = dict(
            sorted(normalized.items(), key=lambda item: -len(item[0]))
        )

    def bind(self, runtime: Any) -> Self:
        """A composite whose backends each serve `runtime` (factories are called here)."""
        bound = object.__new__(type(self))
        bound.default = resolve_backend(self.default, runtime)
        bound.routes = {}
        for prefix, child in self.routes.items():
            routed = resolve_backend(child, runtime)
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

    def ls(self, path: str) -> LsResult:
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return LsResult(error=str(error))
        prefix, child, inner = self._owner(directory)
        result = child.ls(inner)
        return self._merge_ls(directory, prefix, result)

    async def als(self, path: str) -> LsResult:
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return LsResult(error=str(error))
        prefix, child, inner = self._owner(directory)
        result = await child.als(inner)
        return self._merge_ls(directory, prefix, result)

    def _merge_ls(self, directory: str, prefix: str, result: LsResult) -> LsResult:
        entries: dict[str, FileInfo] = {}
        for entry in result.entries or []:
            outer = self._outer(prefix, entry["path"])
            if not self._shadowed(prefix, outer):
                entries[outer] = FileInfo(**{**entry, "path": outer})
        for route in self.routes:
            if len(route) > len(prefix) and route.startswith(directory) and route != directory:
                child_dir = directory + route[len(directory) :].split("/", 1)[0] + "/"
                entries.setdefault(child_dir, FileInfo(path=child_dir, is_dir=True))
        if result.error and not entries:
            return result if prefix == "/" else LsResult(error=self._outer_error(prefix, result))
        return LsResult(entries=[entries[key] for key in sorted(entries)])

    def _outer_error(self, prefix: str, result: Any) -> str:
        """A routed backend's error message, with its inner paths shown as full paths."""
        message = result.error or ""
        return message.replace("'/", "'" + prefix.rstrip("/") + "/") if prefix != "/" else message

    def _pattern_for(self, pattern: str) -> str:
        """What to ask a backend for: the pattern itself when it only names files."""
        return pattern if "/" not in pattern else "**"

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        try:
            directory = normalize_dir(path)
            glob_matches(pattern, "x")  # reject a bad pattern before asking anyone
        except (PathError, GlobError) as error:
            return GlobResult(error=str(error))
        results = [
            (prefix, child.glob(self._pattern_for(pattern), inner))
            for prefix, child, inner in self._sources(directory)
        ]
        return self._merge_glob(directory, pattern, results)

    async def aglob(self, pattern: str, path: str = "/") -> GlobResult:
        try:
            directory = normalize_dir(path)
            glob_matches(pattern, "x")
        except (PathError, GlobError) as error:
            return GlobResult(error=str(error))
        results = [
            (prefix, await child.aglob(self._pattern_for(pattern), inner))
            for prefix, child, inner in self._sources(directory)
        ]
        return self._merge_glob(directory, pattern, results)

    def _merge_glob(
        self, directory: str, pattern: str, results: list[tuple[str, GlobResult]]
    ) -> GlobResult:
        matches: dict[str, FileInfo] = {}
        budget = GlobBudget()  # bounds the matching work of the merge as a whole
        for prefix, result in results:
            if result.error:
                if "not found" in result.error:
                    continue
                return GlobResult(error=self._outer_error(prefix, result))
            for entry in result.matches or []:
                outer = self._outer(prefix, entry["path"])
                if self._shadowed(prefix, outer) or not outer.startswith(directory):
                    continue
                try:
                    if not glob_matches(pattern, outer[len(directory) :], budget):
                        continue
                except GlobError as error:
                    return GlobResult(error=str(error))
                matches[outer] = FileInfo(**{**entry, "path": outer})
        return GlobResult(matches=[matches[key] for key in sorted(matches)])

    def _grep_plan(self, path: str | None) -> tuple[str, list[tuple[str, Any, str]]]:
        """The searched directory (or file) and the backends to ask, with their paths."""
        target = normalize_path(path) if path and str(path).strip() else "/"
        directory = normalize_dir(target)
        prefix, child, inner = self._owner(target)
        sources = [(prefix, child, inner)]
        for route, routed in self.routes.items():
            if route != prefix and route.startswith(directory):
                sources.append((route, routed, "/"))
        return directory, sources

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        try:
            directory, sources = self._grep_plan(path)
            if glob:
                glob_matches(glob, "x")
        except (PathError, GlobError) as error:
            return GrepResult(error=str(error))
        child_glob = glob if glob and "/" not in glob else None
        results = [
            (prefix, child.grep(pattern, inner, child_glob)) for prefix, child, inner in sources
        ]
        return self._merge_grep(directory, glob, results)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None
    ) -> GrepResult:
        try:
            directory, sources = self._grep_plan(path)
            if glob:
                glob_matches(glob, "x")
        except (PathError, GlobError) as error:
            return GrepResult(error=str(error))
        child_glob = glob if glob and "/" not in glob else None
        results = [
            (prefix, await child.agrep(pattern, inner, child_glob))
            for prefix, child, inner in sources
        ]
        return self._merge_grep(directory, glob, results)

    def _merge_grep(
        self, directory: str, glob: str | None, results: list[tuple[str, GrepResult]]
    ) -> GrepResult:
        matches: list[GrepMatch] = []
        skipped: list[str] = []
        budget = GlobBudget()  # bounds the matching work of the merge as a whole
        for prefix, result in results:
            if result.error:
                if "not found" in result.error:
                    continue
                return GrepResult(error=self._outer_error(prefix, result))
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
                    return GrepResult(error=str(error))
                matches.append(GrepMatch(path=outer, line=match["line"], text=match["text"]))
            skipped += [
                outer
                for p in result.skipped or []
                if not self._shadowed(prefix, outer := self._outer(prefix, p))
            ]
        matches.sort(key=lambda m: (m["path"], m["line"]))
        return GrepResult(matches=matches, skipped=sorted(skipped) or None)

    # -- single files --------------------------------------------------------------------

    def _route_file(self, file_path: str, new_file: bool = False) -> tuple[str, Any, str] | str:
        try:
            path = (normalize_file_path if new_file else normalize_path)(file_path)
        except PathError as error:
            return str(error)
        prefix, child, inner = self._owner(path)
        if prefix != "/" and inner == "/":
            return f"Error: '{path}' is a directory (the root of a route), not a file."
        return prefix, child, inner

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return ReadResult(error=routed)
        prefix, child, inner = routed
        result = child.read(inner, offset, limit)
        return replace(result, error=self._outer_error(prefix, result)) if result.error else result

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return ReadResult(error=routed)
        prefix, child, inner = routed
        result = await child.aread(inner, offset, limit)
        return replace(result, error=self._outer_error(prefix, result)) if result.error else result

    def _changed(self, prefix: str, result: Any) -> Any:
        if result.error:
            return replace(result, error=self._outer_error(prefix, result))
        return replace(
            result,
            path=self._outer(prefix, result.path) if result.path else result.path,
            files_update=self._outer_update(prefix, result.files_update),
        )

    def write(self, file_path: str, content: str) -> WriteResult:
        routed = self._route_file(file_path, new_file=True)
        if isinstance(routed, str):
            return WriteResult(error=routed)
        prefix, child, inner = routed
        return self._changed(prefix, child.write(inner, content))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        routed = self._route_file(file_path, new_file=True)
        if isinstance(routed, str):
            return WriteResult(error=routed)
        prefix, child, inner = routed
        return self._changed(prefix, await child.awrite(inner, content))

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return EditResult(error=routed)
        prefix, child, inner = routed
        return self._changed(prefix, child.edit(inner, old_string, new_string, replace_all))

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return EditResult(error=routed)
        prefix, child, inner = routed
        result = await child.aedit(inner, old_string, new_string, replace_all)
        return self._changed(prefix, result)

    def delete(self, file_path: str) -> DeleteResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return DeleteResult(error=routed)
        prefix, child, inner = routed
        if not supports_delete(child):
            return DeleteResult(error=f"Error: files under '{prefix}' cannot be deleted.")
        return self._changed(prefix, child.delete(inner))

    async def adelete(self, file_path: str) -> DeleteResult:
        routed = self._route_file(file_path)
        if isinstance(routed, str):
            return DeleteResult(error=routed)
        prefix, child, inner = routed
        if not supports_delete(child):
            return DeleteResult(error=f"Error: files under '{prefix}' cannot be deleted.")
        adelete = getattr(child, "adelete", None)
        result = await adelete(inner) if adelete is not None else child.delete(inner)
        return self._changed(prefix, result)

    # -- commands ------------------------------------------------------------------------

    @property
    def can_execute(self) -> bool:
        """Whether the default backend runs shell commands (routes only hold files)."""
        return supports_execute(self.default)

    def execute(self, command: str, timeout: int | None = None) -> ExecuteResponse:
        """Run `command` in the default backend (the sandbox); routes are not visible there."""
        if not self.can_execute:
            return ExecuteResponse(
                output="Error: this filesystem cannot run commands.", exit_code=None
            )
        return self.default.execute(command, timeout)

    async def aexecute(self, command: str, timeout: int | None = None) -> ExecuteResponse:
        if not self.can_execute:
            return self.execute(command, timeout)
        aexecute = getattr(self.default, "aexecute", None)
        if aexecute is None:
            return self.default.execute(command, timeout)
        return await aexecute(command, timeout)
