"""`FilesystemBackend`: the agent's files are real files in a directory on local disk."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from fathom.backends.globbing import GlobError, glob_matches
from fathom.backends.paths import PathError, normalize_dir, normalize_path
from fathom.backends.protocol import (
    BackendProtocol,
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
)

__all__ = ["FilesystemBackend"]

_TEMP_PREFIX = ".fathom-"
_TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.fathom-[0-9a-f]{16}\.tmp")
"""A write's temporary file: in flight, or left by a process killed mid-write. Listings
and searches never show one; it is not the agent's file."""
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_LINK_UNSUPPORTED = {
    errno.EPERM,
    errno.EXDEV,
    errno.EMLINK,
    errno.ENOSYS,
    errno.ENOTSUP,
    errno.EOPNOTSUPP,
}
"""`os.link` errors meaning "no hard links here" (then `write` falls back to `os.rename`)."""


def _show(text: str) -> str:
    """`text` safe for JSON/UTF-8: undecodable file-name bytes become `\\xNN` escapes.

    `os` hands back bytes of non-UTF-8 names as lone surrogates (`surrogateescape`); they
    are turned back into the original bytes and shown with `backslashreplace`.
    """
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unicode_error(path: object) -> str | None:
    """An error message when `path` holds lone surrogates (which no file name can be)."""
    if not isinstance(path, str):
        return None
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        escaped = path.encode("utf-8", "backslashreplace").decode("utf-8")
        return (
            f"Error: the path '{escaped}' is not valid Unicode (it holds a lone surrogate "
            "character). Send the path as plain UTF-8 text."
        )
    return None


def _iso(timestamp: float) -> str:
    """A POSIX timestamp as ISO-8601 UTC (`2026-11-30T05:00:00Z`), or '' when out of range."""
    try:
        moment = datetime.fromtimestamp(timestamp, UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _file_info(path: str, st: os.stat_result) -> FileInfo:
    return FileInfo(path=path, is_dir=False, size=st.st_size, modified_at=_iso(st.st_mtime))


def _reason(error: OSError) -> str:
    """What an `OSError` says, without its file name (which may hold undecodable bytes)."""
    return error.strerror or type(error).__name__


def _close_quietly(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _unlink_quietly(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: str) -> None:
    """Make a new directory entry durable (best effort: not every platform allows it)."""
    fd = None
    try:
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        os.fsync(fd)
    except OSError:
        pass
    finally:
        _close_quietly(fd)


@dataclass(frozen=True)
class _Target:
    """A path the model sent, resolved for use on disk."""

    shown: str
    """The path as results show it: virtual (`/a/b.txt`) or real absolute, no trailing `/`."""
    real: str
    """The OS path to open. In virtual mode every symlink in it is resolved."""
    named: str
    """The OS path as named (symlinks not resolved); `delete` unlinks this entry."""

    @property
    def prefix(self) -> str:
        """`shown` as a directory prefix, ending with `/`."""
        return self.shown if self.shown.endswith("/") else self.shown + "/"


class _NotRegular(Exception):
    """The path is a directory, FIFO, device or socket, not a regular file."""

    def __init__(self, is_dir: bool) -> None:
        super().__init__(is_dir)
        self.is_dir = is_dir


class _TooLarge(Exception):
    """The file is over the size limit."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class FilesystemBackend(BackendProtocol):
    """Files on local disk, under a root directory.

    Args:
        root_dir: The root directory; `None` means the current working directory. A relative
            path is taken from the current working directory. It is resolved once
            (`os.path.realpath`), and must exist and be a directory (else `ValueError`).
        virtual_mode: `True` confines the agent to `root_dir`: every path is a virtual
            absolute path anchored at the root (`/a/b.txt` is `<root>/a/b.txt`, `a.txt` is
            `/a.txt`), `..` above the root, `~`, NUL bytes and backslashes are refused, and
            the real target of every path (symlinked parents included) must lie inside the
            root. Results carry virtual paths. `False` (the default) gives no protection:
            absolute paths are real OS paths used as they are (so the tools' default path
            `/` is the machine's root), relative paths are taken from the root, and results
            carry real absolute paths.
        max_file_size_mb: `read` refuses files larger than this (in MiB).

    Symlinks: in virtual mode a path whose real target (after following every symlink) is
    outside the root is refused for every operation, and such links are left out of `ls`,
    `glob` and `grep`. Links that stay inside the root work like the files they point to;
    `delete` removes the link itself, `edit` rewrites the file it points to. `glob` and
    `grep` never descend into symlinked directories (no loops, no duplicates). The check is
    made just before each operation and files are opened with `O_NOFOLLOW` on their
    resolved path; a process swapping directories for symlinks at that very moment is not
    defended against.

    File names that are not valid UTF-8 are shown with their undecodable bytes escaped as
    `\\xNN` (the Latin-1 name `café.txt` lists as `caf\\xe9.txt`), so results never carry
    lone surrogates into JSON/UTF-8 tool messages. Such a name is display-only: sending
    it back names a different file (in virtual mode the backslash is refused), so the file
    can be found with `ls`/`glob`/`grep` but not read, edited or deleted through the agent.

    Writes are atomic: `write` fills a temporary file in the target directory, syncs it and
    publishes it with `os.link` (which fails if the target appeared meanwhile; `os.rename`
    after an existence check where hard links are unsupported), so it never writes through
    an existing name, not even a dangling symlink. `edit` writes a new file and swaps it in
    with `os.replace`, keeping the permission bits (owner, extended attributes and other hard
    links to the old file are not carried over), and refuses if the file changed on disk
    since it was read. A failed write leaves neither a partial target nor a temporary file
    (parent directories it created stay). Results have `files_update=None`: the files live
    on disk, not in the graph state.

    Every problem a model could cause (missing file, permission denied, disk full, path
    outside the root) is returned as an error result; nothing is raised.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = False,
        max_file_size_mb: float = 10,
    ) -> None:
        raw = os.getcwd() if root_dir is None else os.fsdecode(os.fspath(root_dir))
        try:
            root = os.path.realpath(raw)
        except (OSError, ValueError) as error:
            raise ValueError(f"root_dir {raw!r} cannot be used: {error}") from error
        if not os.path.exists(root):
            raise ValueError(f"root_dir {raw!r} does not exist; create the directory first.")
        if not os.path.isdir(root):
            raise ValueError(f"root_dir {raw!r} is not a directory.")
        if not max_file_size_mb > 0:
            raise ValueError(f"max_file_size_mb must be positive, not {max_file_size_mb!r}.")
        self.root_dir: str = root
        """The resolved absolute root directory."""
        self.virtual_mode: bool = virtual_mode
        self.max_file_size_bytes: int = int(max_file_size_mb * 1024 * 1024)
        self._root_prefix = root if root.endswith(os.sep) else root + os.sep

    # ------------------------------------------------------------------ path resolution

    def _inside(self, real: str) -> bool:
        return real == self.root_dir or real.startswith(self._root_prefix)

    def _outside_error(self, shown: str) -> str:
        return (
            f"Error: '{shown}' resolves outside the workspace root; only files inside it "
            "can be used."
        )

    def _target(self, path: str | None, *, directory: bool = False) -> _Target | str:
        """Resolve a model-sent path; return the target or an error message.

        For a directory (`directory=True`) an empty path or `None` means the root.
        """
        if message := _unicode_error(path):
            return message
        if self.virtual_mode:
            return self._virtual_target(path, directory)
        if directory and (path is None or not str(path).strip()):
            return _Target(_show(self.root_dir), self.root_dir, self.root_dir)
        if not isinstance(path, str) or not path.strip():
            return "Error: the path is empty. Give a file path such as notes.md."
        if "\x00" in path:
            return f"Error: the path {path!r} contains a NUL byte."
        real = os.path.abspath(os.path.join(self.root_dir, path))
        return _Target(_show(real), real, real)

    def _virtual_target(self, path: str | None, directory: bool) -> _Target | str:
        try:
            # A directory is normalised without its trailing `/` (the root stays `/`).
            if directory:
                virtual = normalize_dir(path).rstrip("/") or "/"
            else:
                virtual = normalize_path(path or "")
        except PathError as error:
            return str(error)
        named = (
            os.path.join(self.root_dir, virtual.lstrip("/")) if virtual != "/" else self.root_dir
        )
        try:
            real = os.path.realpath(named)
        except (OSError, ValueError) as error:
            return f"Error: the path '{virtual}' cannot be resolved: {error}."
        if not self._inside(real):
            return self._outside_error(virtual)
        return _Target(virtual, real, named)

    def resolved_path(self, path: str) -> str | None:
        """The path the operation would really touch, in the form results use.

        In virtual mode that is the virtual path of the symlink-resolved target (a link
        `/docs/key` to `<root>/secrets/key` resolves to `/secrets/key`); permission rules
        check it as well as the path the model named. `None` when the path is unusable.
        """
        target = self._target(path)
        if isinstance(target, str):
            return None
        if not self.virtual_mode:
            return _show(target.real)
        if target.real == self.root_dir:
            return "/"
        return "/" + _show(os.path.relpath(target.real, self.root_dir)).replace(os.sep, "/")

    def _child_real(self, entry: os.DirEntry[str]) -> str | None:
        """The OS path to open for a directory entry, or `None` when it must stay hidden.

        In virtual mode a symlink is resolved, and hidden when its target is outside the root.
        """
        if not self.virtual_mode:
            return entry.path
        try:
            if not entry.is_symlink():
                return entry.path
            real = os.path.realpath(entry.path)
        except (OSError, ValueError):
            return None
        return real if self._inside(real) else None

    # ------------------------------------------------------------------ reading

    @staticmethod
    def _read_regular(real: str, limit: int, nofollow: bool) -> tuple[bytes, os.stat_result]:
        """The bytes and status of the regular file `real`, at most `limit` bytes.

        Raises `OSError`, `_NotRegular` or `_TooLarge`. The file is opened non-blocking, so a
        FIFO or device is refused instead of hanging the agent.
        """
        flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | (_O_NOFOLLOW if nofollow else 0)
        fd = os.open(real, flags)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _NotRegular(stat.S_ISDIR(st.st_mode))
            if st.st_size > limit:
                raise _TooLarge(st.st_size)
            chunks: list[bytes] = []
            total = 0
            while chunk := os.read(fd, 1024 * 1024):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise _TooLarge(total)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def _read_target(
        self, target: _Target, limit: int, action: str, advice: str
    ) -> tuple[bytes, os.stat_result] | str:
        """`_read_regular` for a resolved target; failures become error messages."""
        shown = target.shown
        try:
            return self._read_regular(target.real, limit, nofollow=self.virtual_mode)
        except _NotRegular as failure:
            if failure.is_dir:
                return f"Error: '{shown}' is a directory. Use ls to see what it holds."
            return f"Error: '{shown}' is not a regular file and cannot be {action}."
        except _TooLarge as failure:
            return (
                f"Error: '{shown}' is {failure.size:,} bytes, over the {limit:,}-byte limit "
                f"{advice}"
            )
        except (FileNotFoundError, NotADirectoryError):
            return f"Error: File '{shown}' not found"
        except PermissionError:
            return (
                f"Error: permission denied reading '{shown}'. The file's permissions do not "
                "allow it; use another file or ask the user to change them."
            )
        except OSError as error:
            return f"Error: could not read '{shown}': {_reason(error)}."

    def ls(self, path: str) -> LsResult:
        """List the files and directories directly under `path` (a file lists itself)."""
        target = self._target(path, directory=True)
        if isinstance(target, str):
            return LsResult(error=target)
        try:
            st = os.stat(target.real)
        except (FileNotFoundError, NotADirectoryError):
            return LsResult(error=f"Error: directory '{target.shown}' not found.")
        except OSError as error:
            return LsResult(error=f"Error: could not list '{target.shown}': {_reason(error)}.")
        if not stat.S_ISDIR(st.st_mode):
            return LsResult(entries=[_file_info(target.shown, st)])
        try:
            with os.scandir(target.real) as scan:
                children = list(scan)
        except PermissionError:
            return LsResult(
                error=(
                    f"Error: permission denied listing '{target.shown}'. Its permissions do "
                    "not allow it; list another directory."
                )
            )
        except OSError as error:
            return LsResult(error=f"Error: could not list '{target.shown}': {_reason(error)}.")
        entries: list[FileInfo] = []
        for entry in children:
            if _TEMP_NAME.fullmatch(entry.name) or self._child_real(entry) is None:
                continue
            shown = target.prefix + _show(entry.name)
            try:
                if entry.is_dir():
                    entries.append(FileInfo(path=shown + "/", is_dir=True))
                else:
                    entries.append(_file_info(shown, entry.stat()))
            except OSError:
                continue  # vanished, or a dangling symlink: nothing to show
        entries.sort(key=lambda info: info["path"])
        return LsResult(entries=entries)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """The whole file as `FileData` (`offset`/`limit` are paging hints for the tool)."""
        target = self._target(file_path)
        if isinstance(target, str):
            return ReadResult(error=target)
        outcome = self._read_target(
            target,
            self.max_file_size_bytes,
            "read",
            "for reading a file. Use grep to find the lines you need in it.",
        )
        if isinstance(outcome, str):
            return ReadResult(error=outcome)
        return ReadResult(file_data=create_file_data(outcome[0]))

    # ------------------------------------------------------------------ searching

    def _walk(self, top: _Target) -> Iterator[tuple[str, str, str, os.DirEntry[str]]]:
        """Regular files under `top`: `(shown path, relative path, OS path, entry)`, unsorted.

        Symlinked directories are not entered; in virtual mode links leading out of the
        root are skipped; unreadable directories are passed over.
        """
        stack: list[tuple[str, str]] = [(top.real, "")]
        while stack:
            directory, relative = stack.pop()
            try:
                with os.scandir(directory) as scan:
                    children = list(scan)
            except OSError:
                continue
            for entry in children:
                if _TEMP_NAME.fullmatch(entry.name):
                    continue
                rel = relative + _show(entry.name)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, rel + "/"))
                    elif entry.is_file() and (real := self._child_real(entry)) is not None:
                        yield top.prefix + rel, rel, real, entry
                except OSError:
                    continue

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        """Files under `path` whose path relative to it matches `pattern`, sorted by path."""
        target = self._target(path, directory=True)
        if isinstance(target, str):
            return GlobResult(error=target)
        if not os.path.isdir(target.real):
            if os.path.exists(target.real):
                return GlobResult(matches=[])
            return GlobResult(error=f"Error: directory '{target.shown}' not found.")
        matches: list[FileInfo] = []
        try:
            for shown, relative, _, entry in self._walk(target):
                if not glob_matches(pattern, relative):
                    continue
                try:
                    matches.append(_file_info(shown, entry.stat()))
                except OSError:
                    continue
        except GlobError as error:
            return GlobResult(error=str(error))
        matches.sort(key=lambda info: info["path"])
        return GlobResult(matches=matches)

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        """Lines containing the literal `pattern` in files under `path` matching `glob`.

        Binary files are passed over; files over `MAX_EDIT_BYTES` are listed in `skipped`.
        """
        target = self._target(path, directory=True)
        if isinstance(target, str):
            return GrepResult(error=target)
        if glob:
            try:
                glob_matches(glob, "")
            except GlobError as error:
                return GrepResult(error=str(error))
        try:
            st = os.stat(target.real)
        except (FileNotFoundError, NotADirectoryError):
            return GrepResult(error=f"Error: path '{target.shown}' not found.")
        except OSError as error:
            return GrepResult(error=f"Error: could not search '{target.shown}': {_reason(error)}.")
        if stat.S_ISDIR(st.st_mode):
            files = sorted(
                (shown, real)
                for shown, relative, real, _ in self._walk(target)
                if not glob or glob_matches(glob, relative)
            )
        else:
            files = [(target.shown, target.real)]
        matches: list[GrepMatch] = []
        skipped: list[str] = []
        for shown, real in files:
            try:
                raw, _ = self._read_regular(real, MAX_EDIT_BYTES, nofollow=self.virtual_mode)
            except _TooLarge:
                skipped.append(shown)
                continue
            except (OSError, _NotRegular):
                continue  # unreadable, vanished or not a regular file: nothing to search
            view = text_view(create_file_data(raw))
            if view.text is not None:
                matches.extend(grep_lines(shown, view.text, pattern))
        return GrepResult(matches=matches, skipped=skipped or None)

    # ------------------------------------------------------------------ writing

    @staticmethod
    def _encode(content: str, what: str) -> bytes | str:
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            return (
                f"Error: the {what} is not valid Unicode (it holds a lone surrogate "
                "character). Send plain UTF-8 text."
            )

    @staticmethod
    def _temp_file(directory: str, mode: int = 0o666) -> tuple[int, str]:
        """Create a new, empty temporary file in `directory`: `(fd, path)`."""
        for _ in range(100):
            path = os.path.join(directory, f"{_TEMP_PREFIX}{secrets.token_hex(8)}{_TEMP_SUFFIX}")
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_NOFOLLOW
                return os.open(path, flags, mode), path
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "could not pick a free temporary file name")

    def _exists_error(self, shown: str) -> str:
        return (
            f"Error: '{shown}' already exists. Use edit_file to change it, or write to a new path."
        )

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create a new file (and missing parent directories); an existing file is an error."""
        target = self._target(file_path)
        if isinstance(target, str):
            return WriteResult(error=target)
        if self.virtual_mode and target.shown == "/":
            return WriteResult(error="Error: '/' is the root directory, not a file path.")
        data = self._encode(content, "content")
        if isinstance(data, str):
            return WriteResult(error=data)
        if len(data) > MAX_EDIT_BYTES:
            return WriteResult(
                error=(
                    f"Error: the content is {len(data):,} bytes, over the {MAX_EDIT_BYTES:,}-byte "
                    "limit for one file. Split it into several smaller files."
                )
            )
        if os.path.isdir(target.real):
            return WriteResult(
                error=(
                    f"Error: '{target.shown}' is a directory. Write to a file path inside it "
                    "instead."
                )
            )
        if os.path.lexists(target.named) or os.path.lexists(target.real):
            return WriteResult(error=self._exists_error(target.shown))
        parent = os.path.dirname(target.real)
        try:
            os.makedirs(parent, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            return WriteResult(
                error=(
                    f"Error: cannot create '{target.shown}': a parent path is a file, not a "
                    "directory. Choose another path."
                )
            )
        except OSError as error:
            return WriteResult(error=self._write_error(target.shown, error))
        if self.virtual_mode and not self._inside(os.path.realpath(parent)):
            return WriteResult(error=self._outside_error(target.shown))
        try:
            published = self._publish_new(target.real, data)
        except OSError as error:
            return WriteResult(error=self._write_error(target.shown, error))
        if not published:
            return WriteResult(error=self._exists_error(target.shown))
        return WriteResult(path=target.shown, files_update=None)

    def _write_error(self, shown: str, error: OSError) -> str:
        if isinstance(error, PermissionError):
            return (
                f"Error: permission denied writing '{shown}'. The directory's permissions do "
                "not allow it; write somewhere else."
            )
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"Error: could not write '{shown}': the disk is full. Nothing was written."
        return f"Error: could not write '{shown}': {_reason(error)}. Nothing was written."

    def _publish_new(self, real: str, data: bytes) -> bool:
        """Atomically create `real` holding `data`; `False` if it already exists.

        Raises `OSError`; the temporary file is removed whatever happens.
        """
        fd, created = self._temp_file(os.path.dirname(real))
        temp: str | None = created
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(created, real, follow_symlinks=False)
            except FileExistsError:
                return False
            except OSError as error:
                if error.errno not in _LINK_UNSUPPORTED:
                    raise
                if os.path.lexists(real):
                    return False
                os.rename(created, real)
                temp = None
            _fsync_dir(os.path.dirname(real))
            return True
        finally:
            _unlink_quietly(temp)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace `old_string` (unique unless `replace_all`) and save the file atomically."""
        target = self._target(file_path)
        if isinstance(target, str):
            return EditResult(error=target)
        outcome = self._read_target(target, MAX_EDIT_BYTES, "edited", "for editing in place.")
        if isinstance(outcome, str):
            return EditResult(error=outcome)
        raw, before = outcome
        view = text_view(create_file_data(raw))
        if view.text is None:
            return EditResult(
                error=f"Error: '{target.shown}' is a binary file and cannot be edited."
            )
        if view.lossy:
            return EditResult(
                error=(
                    f"Error: '{target.shown}' is not valid UTF-8 text; editing it would corrupt "
                    "the bytes that cannot be decoded."
                )
            )
        result = apply_edit(target.shown, view.text, old_string, new_string, replace_all)
        if isinstance(result, EditResult):
            return result
        new_text, occurrences = result
        data = self._encode(new_text, "new_string")
        if isinstance(data, str):
            return EditResult(error=data)
        if len(data) > MAX_EDIT_BYTES:
            return EditResult(
                error=(
                    f"Error: this edit would make '{target.shown}' {len(data):,} bytes, over "
                    f"the {MAX_EDIT_BYTES:,}-byte limit for one file. Split the content into "
                    "several files."
                )
            )
        try:
            error = self._replace(os.path.realpath(target.real), data, before, target.shown)
        except OSError as failure:
            return EditResult(error=self._write_error(target.shown, failure))
        if error:
            return EditResult(error=error)
        return EditResult(path=target.shown, files_update=None, occurrences=occurrences)

    def _replace(self, real: str, data: bytes, before: os.stat_result, shown: str) -> str | None:
        """Atomically replace `real` with `data`, keeping its mode; an error message or None.

        Refuses when the file changed on disk since it was read. Raises `OSError`; the
        temporary file is removed whatever happens.
        """
        fd, created = self._temp_file(os.path.dirname(real), 0o600)
        temp: str | None = created
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, stat.S_IMODE(before.st_mode))
                os.fsync(fd)
            finally:
                os.close(fd)
            now = os.stat(real, follow_symlinks=False)
            if (now.st_ino, now.st_size, now.st_mtime_ns) != (
                before.st_ino,
                before.st_size,
                before.st_mtime_ns,
            ):
                return (
                    f"Error: '{shown}' changed on disk while it was being edited. Read it "
                    "again and redo the edit."
                )
            os.replace(created, real)
            temp = None
            _fsync_dir(os.path.dirname(real))
            return None
        finally:
            _unlink_quietly(temp)

    def delete(self, file_path: str) -> DeleteResult:
        """Remove one file, or a symlink itself (directories are not removed)."""
        target = self._target(file_path)
        if isinstance(target, str):
            return DeleteResult(error=target)
        if self.virtual_mode and target.shown == "/":
            return DeleteResult(error="Error: '/' is the root directory, not a file path.")
        try:
            parent = os.path.realpath(os.path.dirname(target.named))
        except (OSError, ValueError) as error:
            return DeleteResult(error=f"Error: could not delete '{target.shown}': {error}.")
        if self.virtual_mode and not self._inside(parent):
            return DeleteResult(error=self._outside_error(target.shown))
        entry = os.path.join(parent, os.path.basename(target.named))
        if os.path.isdir(entry):
            return DeleteResult(
                error=f"Error: '{target.shown}' is a directory. Delete the files in it one by one."
            )
        try:
            os.unlink(entry)
        except (FileNotFoundError, NotADirectoryError):
            return DeleteResult(error=f"Error: File '{target.shown}' not found")
        except PermissionError:
            return DeleteResult(
                error=(
                    f"Error: permission denied deleting '{target.shown}'. The directory's "
                    "permissions do not allow it."
                )
            )
        except OSError as error:
            return DeleteResult(
                error=f"Error: could not delete '{target.shown}': {_reason(error)}."
            )
        return DeleteResult(path=target.shown, files_update=None)

    # ------------------------------------------------------------------ async
    # `als` ... `aedit` are `BackendProtocol`'s: the sync method in a worker thread, so a
    # subclass that overrides a sync method is honoured in async runs too.

    async def adelete(self, file_path: str) -> DeleteResult:
        return await asyncio.to_thread(self.delete, file_path)
