"""Resolve paths beneath a root directory through file descriptors, with no check-then-use gap.

A path check followed by an `open` of the same path string races with any process that can
change the tree meanwhile: swap a directory for a symlink between the two and the open lands
outside the root. Here every step is relative to a directory file descriptor that is already
known to be beneath the root, so there is nothing to swap:

- `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (Linux 5.6+) opens a directory in one
  system call; the kernel refuses any step that would leave the root, atomically;
- otherwise (older kernels, or a seccomp filter answering ENOSYS/EPERM), and whenever the
  kernel refuses, a walk one component at a time with `O_NOFOLLOW` opens from a stack of
  directory descriptors. Symlinks met on the way are read (`readlinkat`) and their text is
  resolved from the descriptors held, `..` pops the stack, so a link can never lead above
  the root. Absolute link targets are followed only when they name a place inside the root.

The last component of a path is never opened here: callers get `(directory fd, name)` and
act on the name with `dir_fd=` and `O_NOFOLLOW`, so a link swapped in at the last moment
makes the call fail instead of following it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import threading
from collections.abc import Callable

from fathom.errors import FathomError

__all__ = ["MAX_LINKS", "Escape", "Resolver", "close_quietly"]

MAX_LINKS = 40
"""Symlinks followed while resolving one path before `ELOOP`, as the kernel does."""

_O_PATH = getattr(os, "O_PATH", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = (_O_PATH or os.O_RDONLY) | _O_DIRECTORY | _O_CLOEXEC
"""A directory fd for walking: `O_PATH` needs only search permission, not read."""

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437}.get(platform.machine())
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_KERNEL_REFUSED = {errno.EXDEV, errno.ELOOP, errno.EAGAIN}
"""`openat2` errors that mean "not this way": the portable walk decides instead."""


class Escape(FathomError):
    """The path (or a symlink on it) leads outside the root."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """`openat2(2)` through `ctypes`, probed once per process; `None` where unavailable."""

    _lock = threading.Lock()
    _checked = False
    _call: _Openat2 | None = None

    @classmethod
    def get(cls) -> _Openat2 | None:
        with cls._lock:
            if not cls._checked:
                cls._checked = True
                cls._call = cls._probe()
        return cls._call

    @classmethod
    def _probe(cls) -> _Openat2 | None:
        if _SYS_OPENAT2 is None or not _O_PATH or os.environ.get("FATHOM_NO_OPENAT2"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            syscall = libc.syscall
        except (OSError, AttributeError):
            return None
        syscall.restype = ctypes.c_long
        call = cls(syscall, _SYS_OPENAT2)
        try:
            os.close(call.open(os.open("/", _DIR_FLAGS), ".", _DIR_FLAGS, close_dir=True))
        except OSError:
            return None  # ENOSYS (old kernel) or EPERM (seccomp): use the walk
        return call

    def __init__(self, syscall: Callable[..., int], number: int) -> None:
        self._syscall = syscall
        self._number = number

    def open(self, dir_fd: int, path: str, flags: int, *, close_dir: bool = False) -> int:
        """`openat2(dir_fd, path, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`."""
        how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        try:
            fd = self._syscall(
                ctypes.c_long(self._number),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(path)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        finally:
            if close_dir:
                os.close(dir_fd)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return int(fd)


def close_quietly(fd: int | None) -> None:
    """Close `fd` if it is one, ignoring errors."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _split(text: str) -> list[str]:
    return [part for part in text.split("/") if part not in ("", ".")]


class Resolver:
    """Opens directories beneath `root` and resolves paths to `(directory fd, name)`.

    Args:
        root: The root directory, an absolute, already resolved path.
        confined: `True` keeps every step beneath the root (`Escape` otherwise). `False`
            resolves like the kernel does, from `/`, following every link (no protection).
        on_mkdir: Called with `(parent fd, name)` after each directory `open_dir(...,
            create=True)` makes, before it is entered (the owner rule hooks in here).
    """

    def __init__(
        self,
        root: str,
        *,
        confined: bool,
        on_mkdir: Callable[[int, str], None] | None = None,
    ) -> None:
        self.root = root
        self.confined = confined
        self._prefix = root.rstrip("/") + "/"
        self._on_mkdir = on_mkdir

    def open_root(self) -> int:
        """A new directory fd of the root (`O_PATH`); the caller closes it."""
        return os.open(self.root if self.confined else "/", _DIR_FLAGS | _O_NOFOLLOW)

    def parts(self, path: str) -> list[str]:
        """The components of `path` (virtual in confined mode, absolute OS path otherwise)."""
        return _split(path)

    # ------------------------------------------------------------------ directories

    def open_dir(self, root_fd: int, parts: list[str], *, create: bool = False) -> int:
        """A new `O_PATH` fd of the directory `parts` names, every link on the way followed.

        Raises `Escape`, or `OSError` (`ENOENT`, `ENOTDIR`, `ELOOP`, ...). With `create`
        missing directories are made (mode 0o777 less the umask), each one beneath the root.
        """
        if not self.confined:
            if create:
                os.makedirs("/" + "/".join(parts), exist_ok=True)
            return os.open("/" + "/".join(parts), _DIR_FLAGS)
        kernel = _Openat2.get()
        if kernel is not None:
            try:
                return kernel.open(root_fd, "/".join(parts) or ".", _DIR_FLAGS)
            except OSError as error:
                if error.errno not in _KERNEL_REFUSED and not (
                    create and error.errno == errno.ENOENT
                ):
                    raise
        return self._walk(root_fd, parts, create)

    def _walk(self, root_fd: int, parts: list[str], create: bool) -> int:
        stack = [os.dup(root_fd)]
        pending = list(reversed(parts))
        links = 0
        try:
            while pending:
                name = pending.pop()
                if name in ("", "."):
                    continue
                if name == "..":
                    if len(stack) == 1:
                        raise Escape(name)
                    os.close(stack.pop())
                    continue
                try:
                    fd = os.open(name, _DIR_FLAGS | _O_NOFOLLOW, dir_fd=stack[-1])
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=stack[-1])
                        if self._on_mkdir is not None:
                            self._on_mkdir(stack[-1], name)
                    fd = os.open(name, _DIR_FLAGS | _O_NOFOLLOW, dir_fd=stack[-1])
                except OSError as error:
                    if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    target = self._readlink(stack[-1], name)
                    if target is None:
                        raise
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
                    rest = self._link_parts(target)
                    if target.startswith("/"):
                        while len(stack) > 1:
                            os.close(stack.pop())
                    pending.extend(reversed(rest))
                    continue
                stack.append(fd)
            return stack.pop()
        finally:
            for fd in stack:
                os.close(fd)

    @staticmethod
    def _readlink(dir_fd: int, name: str) -> str | None:
        """The text of the symlink `name` in `dir_fd`, or `None` when it is not a link."""
        try:
            return os.readlink(name, dir_fd=dir_fd)
        except OSError:
            return None

    def _link_parts(self, target: str) -> list[str]:
        """The components to resolve for a link's text (absolute ones from the root)."""
        if not target.startswith("/"):
            return target.split("/")
        if not self.confined:
            return _split(target)
        if target.rstrip("/") == self.root.rstrip("/") or target.startswith(self._prefix):
            return _split(target[len(self.root) :])
        raise Escape(target)

    # ------------------------------------------------------------------ paths

    def resolve(
        self, root_fd: int, parts: list[str], *, follow: bool, create: bool = False
    ) -> tuple[int, str | None]:
        """`(fd of the parent directory, last name)` for the path `parts`.

        `follow` follows a symlink in the last place (while it is one), as `open` would; the
        name returned is then not a link at the moment of the call (act on it with
        `O_NOFOLLOW`, so one swapped in later fails). `name` is `None` when the path is a
        directory reached as `.`/`..` or the root itself: the fd is then that directory.
        `create` makes missing parent directories. The caller closes the fd.
        """
        parts = list(parts)
        links = 0
        while True:
            while parts and parts[-1] in ("", "."):
                parts.pop()
            if not parts or parts[-1] == "..":
                return self.open_dir(root_fd, parts, create=create), None
            *parent, name = parts
            dir_fd = self.open_dir(root_fd, parent, create=create)
            if not follow:
                return dir_fd, name
            target = self._readlink(dir_fd, name)
            if target is None:
                return dir_fd, name
            os.close(dir_fd)
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
            rest = self._link_parts(target)
            parts = rest if target.startswith("/") else parent + rest
