"""`FilesystemBackend`: the agent's files are real files in a directory on local disk."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fathom.backends import protocol
from fathom.backends._beneath import Escape, Resolver, close_quietly
from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.utils import (
    MAX_EDIT_BYTES,
    apply_edit,
    create_file_data,
    grep_lines,
    invalid_path,
    iso_timestamp,
    pattern_error,
    read_window,
    text_view,
    too_large,
)
from fathom.errors import FathomError

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
NO_RIPGREP_ENV = "FATHOM_NO_RIPGREP"
"""Set (to anything non-empty) to make backends built with `ripgrep=None` search in Python."""
_RG_TIMEOUT_S = 120
"""Seconds one ripgrep run may take before it is killed and the search redone in Python."""
_RG_UNSAFE = ("\x00", "\n", "\r", "\ufffd")
"""Characters that keep a pattern from ripgrep: it cannot take NUL in an argument or match
across lines, and U+FFFD stands for undecodable bytes only after decoding (in Python)."""
_GIT_DIR = ".git"

def _show(text: str) -> str:
    """`text` safe for JSON/UTF-8: undecodable file-name bytes become `\\xNN` escapes.

    `os` hands back bytes of non-UTF-8 names as lone surrogates (`surrogateescape`); they
    are turned back into the original bytes and shown with `backslashreplace`.
    """
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unicode_error(path: object) -> BackendError | None:
    """The `INVALID` error when `path` holds lone surrogates (which no file name can be)."""
    if not isinstance(path, str):
        return None
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        escaped = path.encode("utf-8", "backslashreplace").decode("utf-8")
        return BackendError(
            ErrorKind.INVALID, escaped, "is not valid Unicode (it holds a lone surrogate)"
        )
    return None


def _os_error(
    shown: str, error: OSError, *, not_a_dir: ErrorKind = ErrorKind.NOT_FOUND
) -> BackendError:
    """The typed error for an `OSError` met while acting on `shown`.

    `not_a_dir` is the kind for `ENOTDIR`: a path that goes through a file is "not found"
    for reading, and "not a directory" when a parent had to be used or made.
    """
    if isinstance(error, FileNotFoundError):
        return BackendError(ErrorKind.NOT_FOUND, shown)
    if isinstance(error, NotADirectoryError):
        return BackendError(not_a_dir, shown)
    if isinstance(error, IsADirectoryError):
        return BackendError(ErrorKind.IS_DIRECTORY, shown)
    if isinstance(error, PermissionError):  # EACCES, EPERM
        return BackendError(ErrorKind.PERMISSION, shown, _reason(error))
    return BackendError(ErrorKind.FAILED, shown, _reason(error))


def _outside(shown: str) -> BackendError:
    return BackendError(ErrorKind.OUTSIDE_ROOT, shown)


def _search_error(error: GlobError | Escape | OSError, pattern: object, shown: str) -> BackendError:
    """Why a search (`glob`, `grep`) under `shown` stopped: `pattern` was refused, the path
    leads outside the root, or the system failed."""
    if isinstance(error, GlobError):
        return pattern_error(pattern, error)
    return _outside(shown) if isinstance(error, Escape) else _os_error(shown, error)


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _special_file(shown: str, mode: int) -> BackendError:
    """The refusal to write over something that is neither a regular file nor a directory
    (it is left in place: replacing a FIFO or a socket would break whoever uses it)."""
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")
    return BackendError(
        ErrorKind.INVALID, shown, f"it is {kind}, not a regular file; nothing was written"
    )


def _search_failure(
    error: GlobError | Escape | OSError, pattern: object, shown: str, raw: str | None
) -> dict[str, Any]:
    """The fields of a failed search's result: the error (`_search_error`), worded with the
    path as the caller wrote it, and, for a directory that does not exist, no matches
    (`matches=[]`, as the reference answers) beside the error."""
    failure = _search_error(error, pattern, shown)
    if failure.kind is not ErrorKind.NOT_FOUND:
        return {"error": failure}
    return {"error": failure.changed(shown=raw or None), "matches": []}


def _file_info(path: str, st: os.stat_result) -> protocol.FileInfo:
    return protocol.FileInfo(
        path=path, is_dir=False, size=st.st_size, modified_at=iso_timestamp(st.st_mtime)
    )


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


class _NotRegular(FathomError):
    """The path is a directory, FIFO, device or socket, not a regular file."""

    def __init__(self, is_dir: bool) -> None:
        super().__init__(is_dir)
        self.is_dir = is_dir


class _TooLarge(FathomError):
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


def _run_ripgreps(argvs: list[list[str]], top_fd: int) -> list[bytes] | str:
    """The stdout of each ripgrep `argv`, run at once in the directory `top_fd`; or why
    one failed (it could not start, ran past `_RG_TIMEOUT_S`, or exited with an error and
    printed nothing). Every process started is waited for."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for argv in argvs:
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=f"/proc/self/fd/{top_fd}",
                    pass_fds=(top_fd,),
                    env={},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        deadline = time.monotonic() + _RG_TIMEOUT_S
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 0.001))
            if proc.returncode not in (0, 1) and not out:
                detail = err.decode("utf-8", "replace").strip()[:200]
                return f"exit {proc.returncode}: {detail}"
            outputs.append(out)
        return outputs
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


def _rg_paths(output: bytes) -> list[str]:
    """ripgrep's NUL-separated paths, relative (`./` dropped)."""
    paths = []
    for raw in output.split(b"\0"):
        if raw:
            relative = os.fsdecode(raw)
            paths.append(relative[2:] if relative.startswith("./") else relative)
    return paths


class FilesystemBackend(protocol.BackendProtocol):
    """Files on local disk, under a root directory.

    Args:
        root_dir: The root directory; `None` means the current working directory. A relative
            path is taken from the current working directory. It is resolved once
            (`os.path.realpath`), and must be a directory if it exists (else `ValueError`).
            A root that does not exist yet reads as empty and is made at the first write,
            as the reference's backend does.
        virtual_mode: `True` (the default) confines the agent to `root_dir`: every path is
            a virtual absolute path anchored at the root (`/a/b.txt` is `<root>/a/b.txt`,
            `a.txt` is `/a.txt`), `..` above the root, `~`, NUL bytes and backslashes are
            refused, and every symlink on a path must lead to a place inside the root.
            Results carry virtual paths. `False` must be asked for by name and gives no
            protection (a warning is logged when such a backend is built): absolute paths
            are real OS paths used as they are (so the tools' default path `/` is the
            machine's root), relative paths are taken from the root, and results carry
            real absolute paths.
        max_file_size_mb: `read` refuses files larger than this (in MiB).
        ripgrep: How `grep` searches a directory. `None` (the default): with the `rg`
            binary (ripgrep) when it is on `PATH` and the environment variable
            `FATHOM_NO_RIPGREP` is not set, in Python otherwise. `True`: with `rg`
            (`ValueError` here when it is missing). `False`: always in Python.

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

    Writes are atomic: `write` (which creates the file, or replaces an existing one) fills a
    temporary file in the target directory, syncs it and swaps it in with `os.replace`, so
    a reader sees the old content or the new, never a mix. A replaced file keeps its
    permission bits (owner, extended attributes and other hard links to the old file are not
    carried over); a last symlink that stays inside the root is written through (the file
    it leads to is replaced), as `edit` does. `edit` also refuses if the file changed on
    disk since it was read. A failed write leaves neither a partial target nor a temporary
    file (parent directories it created stay). A temporary file left by a process killed
    mid-write is removed by the next write into its directory once it is
    `STALE_TEMP_SECONDS` old. A path ending in `/` (a directory) cannot be written, and a
    directory is never replaced by a file. `delete` removes a file, a symlink itself, or a
    directory with everything under it (through directory descriptors, never following a
    link); the root itself cannot be deleted. Results have `files_update=None`: the files
    live on disk, not in the graph state.

    `grep` over a directory lets ripgrep (`rg`, when present) pick the files that contain
    the pattern and then reads each of them beneath the root as the Python search does, so
    both give the same matches, except that ripgrep leaves out what the `.gitignore`,
    `.ignore` and `.rgignore` files in the searched directory (and below it) exclude. Both
    skip `.git/` directories, symlinks (a linked file is searched at its own path) and the
    backend's temporary files, and both search hidden files.

    `file_owner` (`(uid, gid)` or `None`, the default): when set (by a subclass, after
    `__init__`), every file and directory the backend creates or replaces is given that
    owner before it is published.

    Every problem a model could cause (missing file, permission denied, disk full, path
    outside the root) is returned as an error result whose `error` is a `BackendError`
    (its kind and facts; the tool layer words it); nothing is raised.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = True,
        max_file_size_mb: float = 10,
        *,
        ripgrep: bool | None = None,
    ) -> None:
        raw = os.getcwd() if root_dir is None else os.fsdecode(os.fspath(root_dir))
        try:
            root = os.path.realpath(raw)
        except (OSError, ValueError) as error:
            raise ValueError(f"root_dir {raw!r} cannot be used: {error}") from error
        if os.path.exists(root) and not os.path.isdir(root):
            raise ValueError(f"root_dir {raw!r} is not a directory.")
        if not max_file_size_mb > 0:
            raise ValueError(f"max_file_size_mb must be positive, not {max_file_size_mb!r}.")
        rg = shutil.which("rg") if ripgrep is not False else None
        if ripgrep is True and rg is None:
            raise ValueError(
                "ripgrep=True but no `rg` binary is on PATH: install ripgrep (Debian/Ubuntu: "
                "apt-get install ripgrep), or pass ripgrep=None to search in Python without it."
            )
        if ripgrep is None and os.environ.get(NO_RIPGREP_ENV):
            rg = None
        self.ripgrep: str | None = rg
        """The `rg` binary `grep` uses, or `None`: `grep` searches in Python."""
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
            self._warn_unconfined()

    def _warn_unconfined(self) -> None:
        """Log, once per backend built with `virtual_mode=False`, that nothing is confined.

        A subclass whose own construction warning already says so overrides this, so that
        one clear warning is logged, not two.
        """
        logger.warning(
            "%s(%s) is unconfined (virtual_mode=False): its file tools can read and write "
            "any path this process can reach, not only the root%s. Leave virtual_mode at "
            "its default (True) to confine them to the root.",
            type(self).__name__,
            self.root_dir,
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

    def _target(
        self, path: str | None, *, directory: bool = False, new_file: bool = False
    ) -> _Target | BackendError:
        """Resolve a model-sent path; return the target or an `INVALID` error.

        For a directory (`directory=True`) an empty path or `None` means the root. A path
        for a file to create (`new_file=True`) must not name a directory (`/newdir/`).
        """
        if failure := _unicode_error(path):
            return failure
        if self.virtual_mode:
            return self._virtual_target(path, directory, new_file)
        if directory and (path is None or not str(path).strip()):
            return _Target(_show(self.root_dir), self.root_dir, tuple(self._split(self.root_dir)))
        if not isinstance(path, str) or not path.strip():
            shown = path if isinstance(path, str) else None
            return BackendError(ErrorKind.INVALID, shown, "is empty")
        if "\x00" in path:
            return BackendError(ErrorKind.INVALID, path, "contains a NUL byte")
        if new_file:
            try:
                normalize_file_path(path.replace("\\", "/"))
            except PathError as error:
                return invalid_path(path, error)
        real = os.path.abspath(os.path.join(self.root_dir, path))
        return _Target(_show(real), real, tuple(self._split(real)))

    @staticmethod
    def _split(path: str) -> list[str]:
        return [part for part in path.split("/") if part]

    def _virtual_target(
        self, path: str | None, directory: bool, new_file: bool
    ) -> _Target | BackendError:
        try:
            # A directory is normalised without its trailing `/` (the root stays `/`).
            if directory:
                virtual = normalize_dir(path).rstrip("/") or "/"
            elif new_file:
                virtual = normalize_file_path(path or "")
            else:
                virtual = normalize_path(path or "")
        except PathError as error:
            return invalid_path(path, error)
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
        if create:
            self._make_root_if_missing()
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

    def _make_root_if_missing(self) -> None:
        """Create a root that did not exist yet, at the first write (as the reference does).

        Raises `Escape` when the path made is not the root resolved at construction (a link
        put on the way since), so nothing is written elsewhere.
        """
        if os.path.lexists(self.root_dir):
            return
        os.makedirs(self.root_dir, exist_ok=True)
        if os.path.realpath(self.root_dir) != self.root_dir:
            raise Escape(self.root_dir)

    def resolved_path(self, path: str) -> str | None:
        """The path the operation would really touch, in the form results use.

        In virtual mode that is the virtual path of the symlink-resolved target (a link
        `/docs/key` to `<root>/secrets/key` resolves to `/secrets/key`); permission rules
        check it as well as the path the model named. `None` when the path is unusable or
        leads out of the root. It is advice for permission rules, worked out from the path
        at the time of the call; the operation itself resolves the path again, safely.
        """
        target = self._target(path)
        if isinstance(target, BackendError):
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

    @staticmethod
    def _read_error(shown: str, failure: Exception, limit: int) -> BackendError:
        """The typed error for a failed read (resolution included)."""
        if isinstance(failure, Escape):
            return _outside(shown)
        if isinstance(failure, _NotRegular):
            if failure.is_dir:
                return BackendError(ErrorKind.IS_DIRECTORY, shown)
            return BackendError(ErrorKind.INVALID, shown, "is not a regular file")
        if isinstance(failure, _TooLarge):
            return BackendError(ErrorKind.TOO_LARGE, shown, count=failure.size, limit=limit)
        assert isinstance(failure, OSError)
        return _os_error(shown, failure)

    def _read_target(
        self, target: _Target, limit: int
    ) -> tuple[bytes, os.stat_result] | BackendError:
        """The bytes and status of a target's file, or the typed error."""
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                return _read_regular(dir_fd, name, limit)
        except (Escape, OSError, _NotRegular, _TooLarge) as failure:
            return self._read_error(target.shown, failure, limit)

    def ls(self, path: str) -> protocol.LsResult:
        """List the files and directories directly under `path` (a file lists itself)."""
        target = self._target(path, directory=True)
        if isinstance(target, BackendError):
            return protocol.LsResult(error=target)
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                st = _stat_at(dir_fd, name)
                if not stat.S_ISDIR(st.st_mode):
                    return protocol.LsResult(entries=[_file_info(target.shown, st)])
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
            return protocol.LsResult(error=_outside(target.shown).for_operation("ls", path))
        except OSError as error:
            return protocol.LsResult(error=_os_error(target.shown, error).for_operation("ls", path))
        entries: list[protocol.FileInfo] = []
        for entry, st in children:
            if st is None or _TEMP_NAME.fullmatch(entry.name):
                continue  # leads out of the root, dangles, loops or vanished meanwhile
            shown = target.prefix + _show(entry.name)
            if stat.S_ISDIR(st.st_mode):
                entries.append(protocol.FileInfo(path=shown + "/", is_dir=True))
            else:
                entries.append(_file_info(shown, st))
        entries.sort(key=lambda info: info["path"])
        return protocol.LsResult(entries=entries)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> protocol.ReadResult:
        """`limit` lines of the file from the 0-based line `offset`, with the window fields
        (`total_lines`, `start_line`, `end_line`, `next_offset`; see `ReadResult`).

        A binary file (or one that is not valid UTF-8) comes back whole. Files over
        `max_file_size_mb` are refused (`TOO_LARGE`) whatever the window.
        """
        target = self._target(file_path)
        if isinstance(target, BackendError):
            return protocol.ReadResult(error=target)
        outcome = self._read_target(target, self.max_file_size_bytes)
        if isinstance(outcome, BackendError):
            return protocol.ReadResult(error=outcome)
        return read_window(create_file_data(outcome[0]), offset, limit, target.shown)

    # ------------------------------------------------------------------ searching

    def _walk(
        self, top_fd: int, top: _Target, *, searching: bool = False
    ) -> Iterator[tuple[str, str, os.stat_result, int, str]]:
        """Regular files under the directory `top_fd` (which is `top`), unsorted.

        Yields `(shown path, relative path, status, directory fd, name)`; the fd is valid
        until the next item. Subdirectories are opened from their parent's fd with
        `O_NOFOLLOW`, so a directory swapped for a link is skipped, not followed; symlinked
        directories are never entered; linked files are resolved beneath the root (those
        leading out are skipped); unreadable directories are passed over. `searching`
        (for `grep`, as ripgrep does) leaves out `.git` directories and every symlink.
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
                if _TEMP_NAME.fullmatch(entry.name) or (searching and entry.name == _GIT_DIR):
                    continue
                rel = relative + _show(entry.name)
                try:
                    if entry.is_symlink():
                        if not searching:
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

    def glob(self, pattern: str, path: str | None = None) -> protocol.GlobResult:
        """Files under `path` (`None`: the root) whose path relative to it matches
        `pattern`, sorted by path."""
        target = self._target(path, directory=True)
        if isinstance(target, BackendError):
            return protocol.GlobResult(error=target)
        matches: list[protocol.FileInfo] = []
        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            glob_matches(pattern, "")  # an unusable pattern is refused even in an empty tree
            with self._at(target.parts, follow=True) as (dir_fd, name):
                if not stat.S_ISDIR(_stat_at(dir_fd, name).st_mode):
                    return protocol.GlobResult(matches=[])
                top = _open_listing(dir_fd, name)
                try:
                    for shown, relative, st, _, _ in self._walk(top, target):
                        if glob_matches(pattern, relative, budget):
                            matches.append(_file_info(shown, st))
                finally:
                    os.close(top)
        except (GlobError, Escape, OSError) as error:
            return protocol.GlobResult(**_search_failure(error, pattern, target.shown, path))
        matches.sort(key=lambda info: info["path"])
        return protocol.GlobResult(matches=matches)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *,
        max_count: int | None = None, context_lines: int = 0,
    ) -> protocol.GrepResult:
        """Lines containing the literal `pattern` in files under `path` matching `glob`.

        Matches are in path, then line order. At most `max_count` are returned (`None`: all;
        `truncated` says some were left out). `context_lines=N` gives each match up to `N`
        neighbouring lines on each side (`context_before`/`context_after`). Binary files
        are passed over; files over `MAX_EDIT_BYTES` are listed in `skipped`.

        Raises:
            ValueError: `context_lines` is negative (as in the reference: the keyword is
                the caller's, never the model's).
        """
        if type(context_lines) is int and context_lines < 0:
            raise ValueError("context_lines must be non-negative")
        target = self._target(path, directory=True)
        if isinstance(target, BackendError):
            return protocol.GrepResult(error=target)
        for name, value in (("max_count", max_count), ("context_lines", context_lines)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                return protocol.GrepResult(
                    error=BackendError(ErrorKind.INVALID, detail=f"{name} must be an int >= 0")
                )
        if glob:
            try:
                glob_matches(glob, "")
            except GlobError as error:
                return protocol.GrepResult(error=pattern_error(glob, error))
        found: list[tuple[str, list[protocol.GrepMatch] | None]] = []
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
                lines = grep_lines(shown, view.text, pattern, context_lines=context_lines)
                found.append((shown, lines))

        budget = GlobBudget()  # bounds the matching work of this whole search
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                if stat.S_ISDIR(_stat_at(dir_fd, name).st_mode):
                    top = _open_listing(dir_fd, name)
                    try:
                        self._search_tree(top, target, pattern, glob, budget, search)
                    finally:
                        os.close(top)
                else:
                    search(target.shown, dir_fd, name)
        except (GlobError, Escape, OSError) as error:
            return protocol.GrepResult(**_search_failure(error, glob, target.shown, path))
        found.sort(key=lambda item: item[0])
        matches = [match for _, lines in found if lines for match in lines]
        skipped = [shown for shown, lines in found if lines is None]
        truncated = max_count is not None and len(matches) > max_count
        if truncated:
            matches = matches[:max_count]
        return protocol.GrepResult(matches=matches, truncated=truncated, skipped=skipped or None)

    def _search_tree(
        self,
        top_fd: int,
        top: _Target,
        pattern: str,
        glob: str | None,
        budget: GlobBudget,
        search: Callable[[str, int, str | None], None],
    ) -> None:
        """Call `search(shown, dir_fd, name)` for each file under `top` that may hold
        `pattern` and matches `glob`: the files ripgrep lists, or every file walked."""
        ripgrep = self._ripgrep_files(top_fd, pattern)
        if ripgrep is None:
            for shown, relative, _, file_dir, file_name in self._walk(
                top_fd, top, searching=True
            ):
                if not glob or glob_matches(glob, relative, budget):
                    search(shown, file_dir, file_name)
            return
        listed, oversized = ripgrep
        for relative in sorted(set(listed) | set(oversized)):
            parts = relative.split("/")
            if _TEMP_NAME.fullmatch(parts[-1]) or _GIT_DIR in parts:
                continue
            shown_relative = _show(relative)
            if glob and not glob_matches(glob, shown_relative, budget):
                continue
            # Read it as the walk would: resolved beneath the root again (ripgrep only
            # chose the file), a regular file opened without following a link.
            try:
                with self._at([*top.parts, *parts], follow=False) as (dir_fd, name):
                    if name is None:
                        continue
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        search(top.prefix + shown_relative, dir_fd, name)
            except (Escape, OSError):
                continue

    def _ripgrep_files(
        self, top_fd: int, pattern: str
    ) -> tuple[list[str], list[str]] | None:
        """`(files that contain pattern, files over the size cap)` under the directory
        `top_fd`, relative to it, as ripgrep finds them; `None` when ripgrep is not to be
        used or failed (then the caller walks the tree itself).

        ripgrep gets an argv (no shell), the pattern after `--` as a fixed string, no
        config file and no environment, and the directory as `/proc/self/fd/N` (the fd this
        backend opened beneath the root) for its working directory, so it starts inside the
        root whatever happens to the path meanwhile. It follows no symlinks (its default).
        It reads no file over `MAX_EDIT_BYTES` (`--max-filesize`, the cap the Python search
        applies), so a huge or sparse file cannot stall the search; a second, concurrent
        `rg --files` lists the files it would search, and those over the cap are returned
        so that the caller reports them as skipped, as the Python search does. Its paths
        are only candidates: the caller resolves each beneath the root again.
        """
        if (
            self.ripgrep is None
            or any(char in pattern for char in _RG_UNSAFE)
            or _unicode_error(pattern) is not None
            or not os.path.isdir(f"/proc/self/fd/{top_fd}")
        ):
            return None
        common = [
            "--null",
            "--no-config",
            "--hidden",  # dotfiles are searched, as in the Python walk
            "--no-require-git",  # .gitignore applies in any directory
            "--no-ignore-global",  # not the user's global git excludes
            "--no-ignore-parent",  # nothing above the searched directory (outside the root)
            "--no-messages",
            "--glob",
            f"!{_GIT_DIR}",
        ]
        search = [
            self.ripgrep,
            "--files-with-matches",
            "--fixed-strings",
            "--binary",  # search past NUL bytes: the caller decides what is binary
            "--encoding",
            "none",  # raw bytes, no transcoding: a superset of what the caller finds
            "--max-filesize",
            str(MAX_EDIT_BYTES),  # larger files are skipped, as in the Python search
            *common,
            "--",
            pattern,
            ".",
        ]
        listing = [self.ripgrep, "--files", *common, "--", "."]
        outputs = _run_ripgreps([search, listing], top_fd)
        if isinstance(outputs, str):
            logger.warning("ripgrep failed (%s); searching in Python instead", outputs)
            return None
        matching, candidates = (_rg_paths(output) for output in outputs)
        oversized = []
        for relative in candidates:
            with contextlib.suppress(OSError):
                st = os.stat(relative, dir_fd=top_fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_size > MAX_EDIT_BYTES:
                    oversized.append(relative)
        return matching, oversized

    # ------------------------------------------------------------------ writing

    @staticmethod
    def _encode(content: str, what: str, shown: str) -> bytes | BackendError:
        """`content` as UTF-8, or `INVALID` when it holds lone surrogates (or is not text)."""
        if not isinstance(content, str):
            return BackendError(ErrorKind.INVALID, shown, f"the {what} is not text")
        try:
            return content.encode("utf-8")
        except UnicodeEncodeError:
            return BackendError(
                ErrorKind.INVALID, shown, f"the {what} is not valid Unicode (a lone surrogate)"
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

    def write(self, file_path: str, content: str) -> protocol.WriteResult:
        """Write the file, creating it (and missing parent directories) or replacing the
        content of an existing one, atomically."""
        target = self._target(file_path, new_file=True)
        if isinstance(target, BackendError):
            return protocol.WriteResult(error=target)
        data = self._encode(content, "content", target.shown)
        if isinstance(data, BackendError):
            return protocol.WriteResult(error=data)
        if failure := too_large(target.shown, len(data)):
            return protocol.WriteResult(error=failure)
        error = self._put(target, data)
        if error is not None:
            return protocol.WriteResult(error=error)
        return protocol.WriteResult(path=target.shown, files_update=None)

    def _put(
        self, target: _Target, data: bytes, *, mode: int = 0o666, keep_mode: bool = True
    ) -> BackendError | None:
        """Write `data` to `target`, replacing a file there, atomically; the error or None.

        Missing parent directories are made; a last link inside the root is written through
        (its target is replaced), as `edit` does. A new file gets `mode` (less the umask);
        an existing one keeps its permission bits when `keep_mode`. A directory is never
        replaced (`IS_DIRECTORY`, also when one appears at the last moment: `rename(2)`
        refuses to put a file over a directory).
        """
        if target.shown == "/" or target.named == self.root_dir:
            return BackendError(ErrorKind.IS_DIRECTORY, target.shown)
        try:
            with self._at(target.parts, follow=True, create=True) as (dir_fd, name):
                if name is None:
                    return BackendError(ErrorKind.IS_DIRECTORY, target.shown)
                old: int | None = None
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        return BackendError(ErrorKind.IS_DIRECTORY, target.shown)
                    if not stat.S_ISREG(st.st_mode):
                        return _special_file(target.shown, st.st_mode)
                    old = stat.S_IMODE(st.st_mode)
                self._replace(dir_fd, name, data, mode=mode, keep=old if keep_mode else None)
        except Escape:
            return _outside(target.shown)
        except FileExistsError:  # a parent to make is a file
            return BackendError(ErrorKind.NOT_A_DIRECTORY, target.shown)
        except OSError as error:
            return _os_error(target.shown, error, not_a_dir=ErrorKind.NOT_A_DIRECTORY)
        return None

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> protocol.EditResult:
        """Replace `old_string` (unique unless `replace_all`) and save the file atomically."""
        target = self._target(file_path)
        if isinstance(target, BackendError):
            return protocol.EditResult(error=target)
        try:
            with self._at(target.parts, follow=True) as (dir_fd, name):
                try:
                    raw, before = _read_regular(dir_fd, name, MAX_EDIT_BYTES)
                except (OSError, _NotRegular, _TooLarge) as failure:
                    error = self._read_error(target.shown, failure, MAX_EDIT_BYTES)
                    return protocol.EditResult(error=error)
                assert name is not None
                return self._edit_at(
                    target.shown, dir_fd, name, raw, before, old_string, new_string, replace_all
                )
        except (Escape, OSError) as failure:
            return protocol.EditResult(
                error=self._read_error(target.shown, failure, MAX_EDIT_BYTES)
            )

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
    ) -> protocol.EditResult:
        view = text_view(create_file_data(raw))
        if view.text is None:
            return protocol.EditResult(error=BackendError(ErrorKind.BINARY, shown))
        if view.lossy:
            # Editing would turn the bytes that cannot be decoded into U+FFFD.
            return protocol.EditResult(
                error=BackendError(ErrorKind.BINARY, shown, "not valid UTF-8")
            )
        for what, value in (("old_string", old_string), ("new_string", new_string)):
            if isinstance(failure := self._encode(value, what, shown), BackendError):
                return protocol.EditResult(error=failure)
        result = apply_edit(shown, view.text, old_string, new_string, replace_all)
        if isinstance(result, protocol.EditResult):
            return result
        new_text, occurrences = result
        data = new_text.encode("utf-8")
        if failure := too_large(shown, len(data)):
            return protocol.EditResult(error=failure)
        try:
            keep = stat.S_IMODE(before.st_mode)
            changed = not self._replace(dir_fd, name, data, mode=0o600, keep=keep, before=before)
        except OSError as failure:
            return protocol.EditResult(error=_os_error(shown, failure))
        if changed:
            return protocol.EditResult(error=BackendError(ErrorKind.CHANGED, shown))
        return protocol.EditResult(path=shown, files_update=None, occurrences=occurrences)

    def _replace(
        self, dir_fd: int, name: str, data: bytes, *,
        mode: int, keep: int | None, before: os.stat_result | None = None,
    ) -> bool:
        """Atomically replace `name` in `dir_fd` with `data`: a temporary file (created with
        `mode`, then given the permission bits `keep` when set, and `file_owner`) is synced
        and renamed over it. `False` when it was not replaced because the file no longer
        matches `before` (when given): it changed on disk since it was read.

        Raises `OSError`; the temporary file is removed whatever happens.
        """
        fd, temp = self._temp_file(dir_fd, mode)
        pending: str | None = temp
        try:
            try:
                _write_all(fd, data)
                if keep is not None:
                    os.fchmod(fd, keep)
                self._own(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            if before is not None:
                now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if (now.st_ino, now.st_size, now.st_mtime_ns) != (
                    before.st_ino,
                    before.st_size,
                    before.st_mtime_ns,
                ):
                    return False
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            pending = None
            _fsync_dir(dir_fd)
            self._sweep_stale_temps(dir_fd)
            return True
        finally:
            _unlink_at(dir_fd, pending)

    def delete(self, file_path: str) -> protocol.DeleteResult:
        """Remove a file, a symlink itself, or a directory with everything under it.

        A directory is removed through directory descriptors (`shutil.rmtree` with
        `dir_fd`), which never follows a symlink met inside it: a link is removed, not what
        it leads to. The root (`/`) cannot be deleted (`INVALID`).
        """
        target = self._target(file_path)
        if isinstance(target, BackendError):
            return protocol.DeleteResult(error=target)
        if target.shown == "/" or target.named == self.root_dir:
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.INVALID, target.shown, "is the root directory")
            )
        try:  # refuse a link leading out of the root, even though only the link would go
            with self._at(target.parts, follow=True):
                pass
        except Escape:
            return protocol.DeleteResult(error=_outside(target.shown))
        except OSError:
            pass  # missing, or a dangling link: found out below
        try:
            with self._at(target.parts, follow=False) as (dir_fd, name):
                if name is None:
                    return protocol.DeleteResult(
                        error=BackendError(ErrorKind.INVALID, target.shown, "names a directory")
                    )
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(name, dir_fd=dir_fd)
                else:
                    os.unlink(name, dir_fd=dir_fd)  # unlinkat never removes a directory
        except Escape:
            return protocol.DeleteResult(error=_outside(target.shown))
        except OSError as error:
            return protocol.DeleteResult(error=_os_error(target.shown, error))
        return protocol.DeleteResult(path=target.shown, files_update=None)

    # ------------------------------------------------------------------ file transfer

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[protocol.FileUploadResponse]:
        """Write each `(path, bytes)`, replacing existing files, resolving paths like the file
        tools; one response per file, in order.

        Each file is written atomically (as `write` does, any size); failures are reported
        per file as an `ErrorKind` (`file_not_found`, `permission_denied`, `is_directory`,
        `invalid_path`, or another kind such as `outside_root`), never raised.
        """
        return [self._upload_one(path, content) for path, content in files]

    def _upload_one(
        self, path: str, content: bytes, *, mode: int = 0o666, keep_mode: bool = True
    ) -> protocol.FileUploadResponse:
        if not isinstance(content, bytes | bytearray | memoryview):
            return protocol.FileUploadResponse(path, error=ErrorKind.INVALID)
        error = self._upload_bytes(path, bytes(content), mode=mode, keep_mode=keep_mode)
        return protocol.FileUploadResponse(path, error=None if error is None else error.kind)

    def download_files(self, paths: list[str]) -> list[protocol.FileDownloadResponse]:
        """Read each path's bytes (at most `max_file_size_mb`), resolving paths like the
        file tools; one response per path, in order, failures as in `upload_files`."""
        return [self._download_one(path, self.max_file_size_bytes) for path in paths]

    def _download_one(self, path: str, limit: int) -> protocol.FileDownloadResponse:
        outcome = self._download_bytes(path, limit)
        if isinstance(outcome, BackendError):
            return protocol.FileDownloadResponse(path, error=outcome.kind)
        return protocol.FileDownloadResponse(path, content=outcome)

    def _upload_bytes(
        self, path: str, content: bytes, *, mode: int = 0o666, keep_mode: bool = True
    ) -> BackendError | None:
        """Write `content` to `path`, replacing a file there (atomically); the error or None.

        See `_put`; unlike `write`, there is no size limit.
        """
        target = self._target(path, new_file=True)
        if isinstance(target, BackendError):
            return target
        return self._put(target, bytes(content), mode=mode, keep_mode=keep_mode)

    def _download_bytes(self, path: str, limit: int) -> bytes | BackendError:
        """The bytes of the file at `path` (at most `limit`), or the typed error."""
        target = self._target(path)
        if isinstance(target, BackendError):
            return target
        outcome = self._read_target(target, limit)
        return outcome if isinstance(outcome, BackendError) else outcome[0]

    # ------------------------------------------------------------------ async
    # `als` ... `adelete` are `BackendProtocol`'s: the sync method in a worker thread, so a
    # subclass that overrides a sync method is honoured in async runs too.
