"""`FilesystemBackend`: the agent's files are real files in a directory on local disk."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from fathom.backends._beneath import Escape, Resolver, close_quietly
from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
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

logger = logging.getLogger(__name__)

_TEMP_PREFIX = ".fathom-"
_TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.fathom-[0-9a-f]{16}\.tmp")
"""A write's temporary file: in flight, or left by a process killed mid-write. Listings
and searches never show one; it is not the agent's file."""
STALE_TEMP_SECONDS = 15 * 60
"""A temporary file untouched for this long is left by a killed write and is removed the
next time a write lands in its directory. A live write holds its temporary file for the
seconds it takes to write and sync at most a few MiB, so it is never this old."""
_SWEEP_EVERY_SECONDS = 10 * 60
"""One backend sweeps a given directory for stale temporary files at most this often."""
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_READ_DIR = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
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


def _unlink_at(dir_fd: int, name: str | None) -> None:
    if name is not None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _open_listing(dir_fd: int, name: str | None) -> int:
    """A readable fd of the directory `name` in `dir_fd` (`None`: `dir_fd` itself)."""
    if name is None:
        return os.open(".", _READ_DIR, dir_fd=dir_fd)
    return os.open(name, _READ_DIR | _O_NOFOLLOW, dir_fd=dir_fd)


def _stat_at(dir_fd: int, name: str | None) -> os.stat_result:
    """The status of `name` in `dir_fd` (not following a link), or of `dir_fd` itself."""
    if name is None:
        return os.stat(dir_fd)
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _fsync_dir(dir_fd: int) -> None:
    """Make a new directory entry durable (best effort: not every platform allows it)."""
    fd = None
    try:
        fd = os.open(".", _READ_DIR, dir_fd=dir_fd)
        os.fsync(fd)
    except OSError:
        pass
    finally:
        close_quietly(fd)


@dataclass(frozen=True)
class _Target:
    """A path the model sent, resolved for use on disk."""

    shown: str
    """The path as results show it: virtual (`/a/b.txt`) or real absolute, no trailing `/`."""
    named: str
    """The OS path as named (symlinks not resolved); for messages and `resolved_path`."""
    parts: tuple[str, ...]
    """The components to resolve from the resolver's root (the root, or `/` unconfined)."""

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


def _read_regular(dir_fd: int, name: str | None, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes and status of the regular file `name` in `dir_fd`, at most `limit` bytes.

    Raises `OSError`, `_NotRegular` or `_TooLarge`. The file is opened with `O_NOFOLLOW`
    (a link swapped in since it was resolved fails) and non-blocking, so a FIFO or device
    is refused instead of hanging the agent.
    """
    if name is None:
        raise _NotRegular(True)
    flags = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_NOFOLLOW
    fd = os.open(name, flags, dir_fd=dir_fd)
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


class FilesystemBackend(BackendProtocol):
    """Files on local disk, under a root directory.

    Args:
        root_dir: The root directory; `None` means the current working directory. A relative
            path is taken from the current working directory. It is resolved once
            (`os.path.realpath`), and must exist and be a directory (else `ValueError`).
        virtual_mode: `True` confines the agent to `root_dir`: every path is a virtual
            absolute path anchored at the root (`/a/b.txt` is `<root>/a/b.txt`, `a.txt` is
            `/a.txt`), `..` above the root, `~`, NUL bytes and backslashes are refused, and
            every symlink on a path must lead to a place inside the root. Results carry
            virtual paths. `False` (the default) gives no protection, and a warning is
            logged when such a backend is built: absolute paths are real OS paths used as
            they are (so the tools' default path `/` is the machine's root), relative paths
            are taken from the root, and results carry real absolute paths.
        max_file_size_mb: `read` refuses files larger than this (in MiB).

    Confinement holds while other processes change the tree (a command run through
    `execute`, or anything on the host): paths are resolved and opened through directory
    file descriptors, never as a checked path string opened afterwards (see
    `fathom.backends._beneath`), and the last component is acted on with `O_NOFOLLOW`. A
    directory swapped for a symlink mid-call makes that call fail; it never leads out.

    Symlinks: in virtual mode a link that leads outside the root (an absolute target outside
    it, or `..` above it) is refused for every operation, and such links are left out of
    `ls`, `glob` and `grep`. Links that stay inside the root work like the files they point
    to; `delete` removes the link itself, `edit` rewrites the file it points to. `glob` and
    `grep` never descend into symlinked directories (no loops, no duplicates).

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
    (parent directories it created stay). A temporary file left by a process killed
    mid-write is removed by the next write into its directory once it is
    `STALE_TEMP_SECONDS` old. A path ending in `/` (a directory) cannot be written.
    Results have `files_update=None`: the files live on disk, not in the graph state.

    `file_owner` (`(uid, gid)` or `None`, the default): when set (by a subclass, after
    `__init__`), every file and directory the backend creates or replaces is given that
    owner before it is published.

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
        self.file_owner: tuple[int, int] | None = None
        """`(uid, gid)` given to every file and directory this backend creates or replaces."""
        self._root_prefix = root if root.endswith(os.sep) else root + os.sep
        self._resolver = Resolver(root, confined=virtual_mode, on_mkdir=self._own_new_dir)
        self._swept: dict[tuple[int, int], float] = {}
        self._sweep_lock = threading.Lock()
        if not virtual_mode:
            logger.warning(
                "%s(%s) is unconfined (virtual_mode=False): its file tools can read and write "
                "any path this process can reach, not only the root%s. Pass "
                "virtual_mode=True to confine them to the root.",
                type(self).__name__,
                root,
                " (it runs as root: /etc/shadow included)"
                if hasattr(os, "geteuid") and os.geteuid() == 0
                else "",
            )

    # ------------------------------------------------------------------ ownership

    def _own(self, fd: int) -> None:
        """Give the open file `fd` the configured `file_owner` (before it is published)."""
        if self.file_owner is not None:
            os.fchown(fd, *self.file_owner)

    def _own_new_dir(self, parent_fd: int, name: str) -> None:
        """Give a directory just made the configured `file_owner` (never through a link)."""
        if self.file_owner is not None:
            os.chown(name, *self.file_owner, dir_fd=parent_fd, follow_symlinks=False)

    # ------------------------------------------------------------------ path resolution

    def _inside(self, real: str) -> bool:
        return real == self.root_dir or real.startswith(self._root_prefix)

    def _outside_error(self, shown: str) -> str:
        return (
            f"Error: '{shown}' resolves outside the workspace root; only files inside it "
            "can be used."
        )

    def _target(
        self, path: str | None, *, directory: bool = False, new_file: bool = False
    ) -> _Target | str:
        """Resolve a model-sent path; return the target or an error message.

        For a directory (`directory=True`) an empty path or `None` means the root. A path
        for a file to create (`new_file=True`) must not name a directory (`/newdir/`).
        """
        if message := _unicode_error(path):
            return message
        if self.virtual_mode:
            return self._virtual_target(path, directory, new_file)
        if directory and (path is None or not str(path).strip()):
            return _Target(_show(self.root_dir), self.root_dir, tuple(self._split(self.root_dir)))
        if not isinstance(path, str) or not path.strip():
            return "Error: the path is empty. Give a file path such as notes.md."
        if "\x00" in path:
            return f"Error: the path {path!r} contains a NUL byte."
        if new_file:
            try:
                normalize_file_path(path.replace("\\", "/"))
            except PathError as error:
                return str(error)
        real = os.path.abspath(os.path.join(self.root_dir, path))
        return _Target(_show(real), real, tuple(self._split(real)))

    @staticmethod
    def _split(path: str) -> list[str]:
        return [part for part in path.split("/") if part]

    def _virtual_target(self, path: str | None, directory: bool, new_file: bool) -> _Target | str:
        try:
            # A directory is normalised without its trailing `/` (the root stays `/`).
            if directory:
                virtual = normalize_dir(path).rstrip("/") or "/"
            elif new_file:
                virtual = normalize_file_path(path or "")
            else:
                virtual = normalize_path(path or "")
        except PathError as error:
            return str(error)
        named = (
            os.path.join(self.root_dir, virtual.lstrip("/")) if virtual != "/" else self.root_dir
        )
        return _Target(virtual, named, tuple(self._split(virtual)))

    @contextlib.contextmanager
    def _at(
        self, parts: tuple[str, ...] | list[str], *, follow: bool, create: bool = False
    ) -> Iterator[tuple[int, str | None]]:
        """`(directory fd, name)` for `parts`, resolved beneath the root; closed on exit.

        Raises `Escape` (a link leads out of the root) or `OSError`.
        """
        root_fd = self._resolver.open_root()
        try:
            dir_fd, name = self._resolver.resolve(
                root_fd, list(parts), follow=follow, create=create
            )
        finally:
            os.close(root_fd)
        try:
            yield dir_fd, name
        finally:
            os.close(dir_fd)

    def resolved_path(self, path: str) -> str | None:
        """The path the operation would really touch, in the form results use.

        In virtual mode that is the virtual path of the symlink-resolved target (a link
        `/docs/key` to `<root>/secrets/key` resolves to `/secrets/key`); permission rules
        check it as well as the path the model named. `None` when the path is unusable or
        leads out of the root. It is advice for permission rules, worked out from the path
        at the time of the call; the operation itself resolves the path again, safely.
        """
        target = self._target(path)
        if isinstance(target, str):
            return None
        try:
            real = os.path.realpath(target.named)
        except (OSError, ValueError):
            return None
        if not self.virtual_mode:
            return _show(real)
        if not self._inside(real):
            return None
        if real == self.root_dir:
            return "/"
        return "/" + _show(os.path.relpath(real, self.root_dir)).replace(os.sep, "/")

    def _entry_status(
        self, entry: os.DirEntry[str], parts: tuple[str, ...]
    ) -> os.stat_result | None:
        """What a listed entry is (a link: what it leads to); `None` when it must be hidden."""
        if _TEMP_NAME.fullmatch(entry.name):
            return None
        try:
            if entry.is_symlink():
                return self._link_status([*parts, entry.name])
            return entry.stat(follow_symlinks=False)
        except OSError:
            return None

    def _link_status(self, parts: list[str]) -> os.stat_result | None:
        """The status of what the symlink at `parts` leads to; `None` when it must be hidden
        (it leads out of the root, dangles, or loops)."""
        try:
            with self._at(parts, follow=True) as (dir_fd, name):
                return _stat_at(dir_fd, name)
        except (Escape, OSError):
            return None

    # ------------------------------------------------------------------ reading

    def _read_error(
        self, shown: str, failure: Exception, limit: int, action: str, advice: str
    ) -> str:
        """The message for a failed read (resolution included)."""
        if isinstance(failure, Escape):
            return self._outside_error(shown)
        if isinstance(failure, _NotRegular):
            if failure.is_dir:
                return f"Error: '{shown}' is a directory. Use ls to see what it holds."
            return f"Error: '{shown}' is not a regular file and cannot be {action}."
        if isinstance(failure, _TooLarge):
            return (
                f"Error: '{shown}' is {failure.size:,} bytes, over the {limit:,}-byte limit "
                f"{advice}"
            )
        if isinstance(failure, FileNotFoundError | NotADirectoryError):
            return f"Error: File '{shown}' not found"
        if isinstance(failure, PermissionError):
            return (
                f"Error: permission denied reading '{shown}'. The file's permissions do not "
                "allow it; use another file or ask the user to change them."
            )
        assert isinstance(failure, OSError)
        return f"Error: could not read '{shown}': {_reason(failure)}."

    def _read_target(
        self, target: _Target, limit: int, action: str, advice: str
    ) -> tuple[bytes, os.stat_result] | str:
        """The bytes and status of a target's file; failures become error messages."""
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                return _read_regular(dir_fd, name, limit)
        except (Escape, OSError, _NotRegular, _TooLarge) as failure:
            return self._read_error(target.shown, failure, limit, action, advice)

    def ls(self, path: str) -> LsResult:
        """List the files and directories directly under `path` (a file lists itself)."""
        target = self._target(path, directory=True)
        if isinstance(target, str):
            return LsResult(error=target)
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                st = _stat_at(dir_fd, name)
                if not stat.S_ISDIR(st.st_mode):
                    return LsResult(entries=[_file_info(target.shown, st)])
                listing = _open_listing(dir_fd, name)
                try:
                    with os.scandir(listing) as scan:
                        # Status now: an fd-relative entry stats through the open fd.
                        children = [
                            (entry, self._entry_status(entry, target.parts)) for entry in scan
                        ]
                finally:
                    os.close(listing)
        except Escape:
            return LsResult(error=self._outside_error(target.shown))
        except (FileNotFoundError, NotADirectoryError):
            return LsResult(error=f"Error: directory '{target.shown}' not found.")
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
        for entry, st in children:
            if st is None or _TEMP_NAME.fullmatch(entry.name):
                continue  # leads out of the root, dangles, loops or vanished meanwhile
            shown = target.prefix + _show(entry.name)
            if stat.S_ISDIR(st.st_mode):
                entries.append(FileInfo(path=shown + "/", is_dir=True))
            else:
                entries.append(_file_info(shown, st))
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

    def _walk(
        self, top_fd: int, top: _Target
    ) -> Iterator[tuple[str, str, os.stat_result, int, str]]:
        """Regular files under the directory `top_fd` (which is `top`), unsorted.

        Yields `(shown path, relative path, status, directory fd, name)`; the fd is valid
        until the next item. Subdirectories are opened from their parent's fd with
        `O_NOFOLLOW`, so a directory swapped for a link is skipped, not followed; symlinked
        directories are never entered; linked files are resolved beneath the root (those
        leading out are skipped); unreadable directories are passed over.
        """
        frames: list[tuple[int, str, list[str], Iterator[os.DirEntry[str]]]] = []
        try:
            with os.scandir(top_fd) as scan:
                frames.append((top_fd, "", list(top.parts), iter(list(scan))))
        except OSError:
            return
        try:
            while frames:
                dir_fd, relative, parts, children = frames[-1]
                entry = next(children, None)
                if entry is None:
                    frames.pop()
                    if dir_fd != top_fd:
                        os.close(dir_fd)
                    continue
                if _TEMP_NAME.fullmatch(entry.name):
                    continue
                rel = relative + _show(entry.name)
                try:
                    if entry.is_symlink():
                        yield from self._walk_link(top.prefix + rel, rel, [*parts, entry.name])
                    elif entry.is_dir(follow_symlinks=False):
                        child = os.open(entry.name, _READ_DIR | _O_NOFOLLOW, dir_fd=dir_fd)
                        try:
                            with os.scandir(child) as scan:
                                grandchildren = list(scan)
                        except OSError:
                            os.close(child)
                            continue
                        frames.append((child, rel + "/", [*parts, entry.name], iter(grandchildren)))
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        yield top.prefix + rel, rel, st, dir_fd, entry.name
                except OSError:
                    continue
        finally:
            for dir_fd, *_ in frames:
                if dir_fd != top_fd:
                    close_quietly(dir_fd)

    def _walk_link(
        self, shown: str, rel: str, parts: list[str]
    ) -> Iterator[tuple[str, str, os.stat_result, int, str]]:
        """The file a symlink met in `_walk` leads to, when it is a regular file inside."""
        try:
            with self._at(parts, follow=True) as (dir_fd, name):
                if name is None:
                    return
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    yield shown, rel, st, dir_fd, name
        except Escape:
            return

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        """Files under `path` whose path relative to it matches `pattern`, sorted by path."""
        target = self._target(path, directory=True)
        if isinstance(target, str):
            return GlobResult(error=target)
        matches: list[FileInfo] = []
        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                if not stat.S_ISDIR(_stat_at(dir_fd, name).st_mode):
                    return GlobResult(matches=[])
                top = _open_listing(dir_fd, name)
                try:
                    for shown, relative, st, _, _ in self._walk(top, target):
                        if glob_matches(pattern, relative, budget):
                            matches.append(_file_info(shown, st))
                finally:
                    os.close(top)
        except GlobError as error:
            return GlobResult(error=str(error))
        except Escape:
            return GlobResult(error=self._outside_error(target.shown))
        except OSError:
            return GlobResult(error=f"Error: directory '{target.shown}' not found.")
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
        found: list[tuple[str, list[GrepMatch] | None]] = []
        """`(shown path, matches)`; `None` matches: skipped as too large."""

        def search(shown: str, dir_fd: int, name: str | None) -> None:
            try:
                raw, _ = _read_regular(dir_fd, name, MAX_EDIT_BYTES)
            except _TooLarge:
                found.append((shown, None))
                return
            except (OSError, _NotRegular):
                return  # unreadable, vanished or not a regular file: nothing to search
            view = text_view(create_file_data(raw))
            if view.text is not None:
                found.append((shown, grep_lines(shown, view.text, pattern)))

        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                if stat.S_ISDIR(_stat_at(dir_fd, name).st_mode):
                    top = _open_listing(dir_fd, name)
                    try:
                        for shown, relative, _, file_dir, file_name in self._walk(top, target):
                            if not glob or glob_matches(glob, relative, budget):
                                search(shown, file_dir, file_name)
                    finally:
                        os.close(top)
                else:
                    search(target.shown, dir_fd, name)
        except GlobError as error:
            return GrepResult(error=str(error))
        except Escape:
            return GrepResult(error=self._outside_error(target.shown))
        except (FileNotFoundError, NotADirectoryError):
            return GrepResult(error=f"Error: path '{target.shown}' not found.")
        except OSError as error:
            return GrepResult(error=f"Error: could not search '{target.shown}': {_reason(error)}.")
        found.sort(key=lambda item: item[0])
        matches = [match for _, lines in found if lines for match in lines]
        skipped = [shown for shown, lines in found if lines is None]
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
    def _temp_file(dir_fd: int, mode: int = 0o666) -> tuple[int, str]:
        """Create a new, empty temporary file in the directory `dir_fd`: `(fd, name)`."""
        for _ in range(100):
            name = f"{_TEMP_PREFIX}{secrets.token_hex(8)}{_TEMP_SUFFIX}"
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_NOFOLLOW
                return os.open(name, flags, mode, dir_fd=dir_fd), name
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "could not pick a free temporary file name")

    def _sweep_stale_temps(self, dir_fd: int) -> None:
        """Remove temporary files of killed writes (older than `STALE_TEMP_SECONDS`) here.

        Called after a write lands in the directory, at most once per
        `_SWEEP_EVERY_SECONDS` per directory; best effort, never raises.
        """
        try:
            st = os.stat(dir_fd)
            key, now = (st.st_dev, st.st_ino), time.time()
            with self._sweep_lock:
                if now - self._swept.get(key, -_SWEEP_EVERY_SECONDS) < _SWEEP_EVERY_SECONDS:
                    return
                self._swept[key] = now
            listing = _open_listing(dir_fd, None)
        except OSError:
            return
        try:
            with os.scandir(listing) as scan:
                for entry in scan:
                    if not _TEMP_NAME.fullmatch(entry.name):
                        continue
                    with contextlib.suppress(OSError):
                        old = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(old.st_mode) and now - old.st_mtime > STALE_TEMP_SECONDS:
                            os.unlink(entry.name, dir_fd=listing)
                            logger.info("removed a stale temporary file %r", entry.name)
        except OSError:
            pass
        finally:
            os.close(listing)

    def _exists_error(self, shown: str) -> str:
        return (
            f"Error: '{shown}' already exists. Use edit_file to change it, or write to a new path."
        )

    def _parent_is_file_error(self, shown: str) -> str:
        return (
            f"Error: cannot create '{shown}': a parent path is a file, not a directory. "
            "Choose another path."
        )

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create a new file (and missing parent directories); an existing file is an error."""
        target = self._target(file_path, new_file=True)
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
        # Refuse what is there already, even when reached through a link: a directory, a
        # file, or a link leading out of the root. This only refuses; the write below
        # resolves again and cannot write through anything that appears meanwhile.
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                st = _stat_at(dir_fd, name)
            if stat.S_ISDIR(st.st_mode):
                return WriteResult(
                    error=(
                        f"Error: '{target.shown}' is a directory. Write to a file path inside "
                        "it instead."
                    )
                )
            return WriteResult(error=self._exists_error(target.shown))
        except Escape:
            return WriteResult(error=self._outside_error(target.shown))
        except OSError:
            pass  # missing (the usual case), or a parent is a file: found out below
        try:
            with self._at(target.parts, follow=False, create=True) as (dir_fd, name):
                if name is None:
                    return WriteResult(error=self._exists_error(target.shown))
                published = self._publish_new(dir_fd, name, data)
        except Escape:
            return WriteResult(error=self._outside_error(target.shown))
        except (FileExistsError, NotADirectoryError):
            return WriteResult(error=self._parent_is_file_error(target.shown))
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

    def _publish_new(self, dir_fd: int, name: str, data: bytes) -> bool:
        """Atomically create `name` in the directory `dir_fd` holding `data`; `False` if it
        already exists.

        Raises `OSError`; the temporary file is removed whatever happens.
        """
        fd, temp = self._temp_file(dir_fd)
        pending: str | None = temp
        try:
            try:
                _write_all(fd, data)
                self._own(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError:
                return False
            except OSError as error:
                if error.errno not in _LINK_UNSUPPORTED:
                    raise
                try:
                    os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    return False
                except FileNotFoundError:
                    pass
                os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                pending = None
            _fsync_dir(dir_fd)
            self._sweep_stale_temps(dir_fd)
            return True
        finally:
            _unlink_at(dir_fd, pending)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace `old_string` (unique unless `replace_all`) and save the file atomically."""
        target = self._target(file_path)
        if isinstance(target, str):
            return EditResult(error=target)
        advice = "for editing in place."
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                try:
                    raw, before = _read_regular(dir_fd, name, MAX_EDIT_BYTES)
                except (OSError, _NotRegular, _TooLarge) as failure:
                    message = self._read_error(
                        target.shown, failure, MAX_EDIT_BYTES, "edited", advice
                    )
                    return EditResult(error=message)
                assert name is not None
                return self._edit_at(
                    target.shown, dir_fd, name, raw, before, old_string, new_string, replace_all
                )
        except (Escape, OSError) as failure:
            message = self._read_error(target.shown, failure, MAX_EDIT_BYTES, "edited", advice)
            return EditResult(error=message)

    def _edit_at(
        self,
        shown: str,
        dir_fd: int,
        name: str,
        raw: bytes,
        before: os.stat_result,
        old_string: str,
        new_string: str,
        replace_all: bool,
    ) -> EditResult:
        view = text_view(create_file_data(raw))
        if view.text is None:
            return EditResult(error=f"Error: '{shown}' is a binary file and cannot be edited.")
        if view.lossy:
            return EditResult(
                error=(
                    f"Error: '{shown}' is not valid UTF-8 text; editing it would corrupt "
                    "the bytes that cannot be decoded."
                )
            )
        result = apply_edit(shown, view.text, old_string, new_string, replace_all)
        if isinstance(result, EditResult):
            return result
        new_text, occurrences = result
        data = self._encode(new_text, "new_string")
        if isinstance(data, str):
            return EditResult(error=data)
        if len(data) > MAX_EDIT_BYTES:
            return EditResult(
                error=(
                    f"Error: this edit would make '{shown}' {len(data):,} bytes, over "
                    f"the {MAX_EDIT_BYTES:,}-byte limit for one file. Split the content into "
                    "several files."
                )
            )
        try:
            error = self._replace(dir_fd, name, data, before, shown)
        except OSError as failure:
            return EditResult(error=self._write_error(shown, failure))
        if error:
            return EditResult(error=error)
        return EditResult(path=shown, files_update=None, occurrences=occurrences)

    def _replace(
        self, dir_fd: int, name: str, data: bytes, before: os.stat_result, shown: str
    ) -> str | None:
        """Atomically replace `name` in `dir_fd` with `data`, keeping its mode; an error
        message or None.

        Refuses when the file changed on disk since it was read. Raises `OSError`; the
        temporary file is removed whatever happens.
        """
        fd, temp = self._temp_file(dir_fd, 0o600)
        pending: str | None = temp
        try:
            try:
                _write_all(fd, data)
                os.fchmod(fd, stat.S_IMODE(before.st_mode))
                self._own(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if (now.st_ino, now.st_size, now.st_mtime_ns) != (
                before.st_ino,
                before.st_size,
                before.st_mtime_ns,
            ):
                return (
                    f"Error: '{shown}' changed on disk while it was being edited. Read it "
                    "again and redo the edit."
                )
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            pending = None
            _fsync_dir(dir_fd)
            self._sweep_stale_temps(dir_fd)
            return None
        finally:
            _unlink_at(dir_fd, pending)

    def delete(self, file_path: str) -> DeleteResult:
        """Remove one file, or a symlink itself (directories are not removed)."""
        target = self._target(file_path)
        if isinstance(target, str):
            return DeleteResult(error=target)
        if self.virtual_mode and target.shown == "/":
            return DeleteResult(error="Error: '/' is the root directory, not a file path.")
        is_dir = (
            f"Error: '{target.shown}' is a directory. Delete the files in it one by one."
        )
        try:  # refuse a directory, or a link leading out of the root (refusing only)
            with self._at(target.parts, follow=True) as (dir_fd, name):
                if stat.S_ISDIR(_stat_at(dir_fd, name).st_mode):
                    return DeleteResult(error=is_dir)
        except Escape:
            return DeleteResult(error=self._outside_error(target.shown))
        except OSError:
            pass  # missing, or a dangling link: the unlink below says which
        try:
            with self._at(target.parts, follow=False) as (dir_fd, name):
                if name is None:
                    return DeleteResult(error=is_dir)
                os.unlink(name, dir_fd=dir_fd)  # unlinkat never removes a directory
        except Escape:
            return DeleteResult(error=self._outside_error(target.shown))
        except IsADirectoryError:
            return DeleteResult(error=is_dir)
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

    # ------------------------------------------------------------------ file transfer
    # Shared by the backends that offer `upload_files`/`download_files`.

    def _upload_bytes(
        self, path: str, content: bytes, *, mode: int = 0o666, keep_mode: bool = True
    ) -> str | None:
        """Write `content` to `path`, replacing a file there (atomically); an error or None.

        Missing parent directories are made; a last link inside the root is written
        through (its target is replaced), as `edit` does. A new file gets `mode` (less the
        umask); an existing one keeps its permission bits when `keep_mode`.
        """
        target = self._target(path, new_file=True)
        if isinstance(target, str):
            return target
        if target.shown == "/" or target.named == self.root_dir:
            return f"Error: '{target.shown}' is a directory."
        try:
            with self._at(target.parts, follow=True, create=True) as (dir_fd, name):
                if name is None:
                    return f"Error: '{target.shown}' is a directory."
                old: int | None = None
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        return f"Error: '{target.shown}' is a directory."
                    old = stat.S_IMODE(st.st_mode)
                fd, temp = self._temp_file(dir_fd, mode)
                pending: str | None = temp
                try:
                    try:
                        _write_all(fd, bytes(content))
                        if keep_mode and old is not None:
                            os.fchmod(fd, old)
                        self._own(fd)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    pending = None
                    _fsync_dir(dir_fd)
                    self._sweep_stale_temps(dir_fd)
                finally:
                    _unlink_at(dir_fd, pending)
        except Escape:
            return self._outside_error(target.shown)
        except (FileExistsError, NotADirectoryError):
            return self._parent_is_file_error(target.shown)
        except OSError as error:
            return self._write_error(target.shown, error)
        return None

    def _download_bytes(self, path: str, limit: int, advice: str) -> bytes | str:
        """The bytes of the file at `path` (at most `limit`), or an error message."""
        target = self._target(path)
        if isinstance(target, str):
            return target
        outcome = self._read_target(target, limit, "downloaded", advice)
        return outcome if isinstance(outcome, str) else outcome[0]

    # ------------------------------------------------------------------ async
    # `als` ... `aedit` are `BackendProtocol`'s: the sync method in a worker thread, so a
    # subclass that overrides a sync method is honoured in async runs too.

    async def adelete(self, file_path: str) -> DeleteResult:
        return await asyncio.to_thread(self.delete, file_path)
