"""Transactional commands for `BubblewrapSandbox`: each command runs on an overlay.

bubblewrap 0.8 has no `--overlay`, so the sandbox builds one itself, in a *stage*: a first
`bwrap` that shows the workspace at `LOWER`, mounts a size-limited tmpfs at `LAYER` (the
disk budget, exactly: a write past it fails with `ENOSPC`) and runs `STAGE_SCRIPT`, which
mounts the kernel's overlayfs (`lowerdir` the workspace, `upperdir`/`workdir` on the
tmpfs) at `MERGED` and starts the sandbox proper with `MERGED` as its `/workspace`. As an
ordinary user the stage has its own user namespace (overlay mounts there are allowed since
Linux 5.11, with `userxattr`); as root it is a plain mount namespace.

Nothing the command does reaches the workspace while it runs. Once the overlay is mounted,
the stage reports on a FIFO and waits; fathom opens the tmpfs through `/proc/<stage>/root`
(the descriptor keeps it alive), releases the stage, which then `exec`s the sandbox, and,
when the command has exited in time and its changes fit the budget, applies them to the
workspace (`apply_changes`):
per file, through a temporary file renamed into place, so every file is either its old or
its new version. A command that ran past its timeout, was killed, or wrote more than the
budget leaves the workspace exactly as it was.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import select
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "CONTROL",
    "EARLY",
    "LAYER",
    "LOWER",
    "MERGED",
    "SLACK_BYTES",
    "STAGE_SCRIPT",
    "Applied",
    "Handshake",
    "apply_changes",
    "has_changes",
    "layer_usage",
]

logger = logging.getLogger(__name__)

LOWER = "/tmp/fathom-workspace"
"""Where the stage shows the real workspace (the overlay's lower layer)."""
LAYER = "/tmp/fathom-layer"
"""The stage's size-limited tmpfs, holding `upper` and `work`."""
MERGED = "/tmp/fathom-merged"
"""Where the stage mounts the overlay; the sandbox binds it as `/workspace`."""
SLACK_BYTES = 64 * 1024
"""The tmpfs is this much larger than the budget: a command that fills it wrote more than
the budget (an exact fit, which leaves the slack free, is still within it)."""

CONTROL = "/tmp/fathom-control"
"""Where the stage sees the command's control directory (the two FIFOs)."""

STAGE_SCRIPT = r"""
exec 3>/tmp/fathom-control/status 4</tmp/fathom-control/release
fail() { echo fathom-stage-failed >&3; exit 125; }
own=$1; opts=$2; n=$3; shift 3
while [ "$n" -gt 0 ]; do echo $$ > "$1" 2>&3 || fail; n=$((n - 1)); shift; done
L=/tmp/fathom-layer
if [ -n "$own" ]; then /usr/bin/chown "$own" "$L/upper" 2>&3 || fail; fi
o="lowerdir=/tmp/fathom-workspace,upperdir=$L/upper,workdir=$L/work,$opts,nosuid,nodev"
/usr/bin/mount -t overlay -o "$o" fathom-overlay /tmp/fathom-merged 2>&3 || fail
echo "fathom-stage-ready $$" >&3
read -r _ <&4
exec 3>&- 4<&-
exec "$@"
"""
"""Run by `/bin/sh -c` in the stage. It talks to fathom through two FIFOs in `CONTROL` (so
no descriptor is inherited from fathom, and none can leak into the sandbox, which never
holds 3 and 4 and has no `CONTROL`). `$1` is the `uid:gid` to give the upper layer's root
(root only: as an ordinary user bwrap makes it with the right owner), `$2` the overlay's
mount options (`mount_options`), `$3` a count N and the N `cgroup.procs` files after it
the cgroups the stage joins first (so that everything the command starts is in them); the
sandbox's command line follows."""


def mount_options(privileged: bool) -> str:
    """The overlay's options beyond its layers. As root: `trusted.` xattrs and
    `redirect_dir=on`, so that renaming a directory that was already there works (the
    layer records where it came from and `apply_changes` moves it). As an ordinary user:
    `userxattr` (the only kind a user namespace may mount), where the kernel allows no
    redirects, so such a rename fails with `EXDEV` (`mv` copies instead; `git mv` of a
    directory fails)."""
    if privileged:
        return "redirect_dir=on,index=off,metacopy=off,xino=off"
    return "userxattr"

EARLY = "the stage ended early"
"""`Handshake.failure` when the stage said nothing before it ended."""
_USER_XATTRS = "user.overlay."
_TRUSTED_XATTRS = "trusted.overlay."
_O_NOFOLLOW = os.O_NOFOLLOW
_DIR_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | _O_NOFOLLOW
_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
_TEMP = ".fathom-{}.tmp"
"""The file tools' temporary-file pattern: listings and searches never show one in flight."""


# ---------------------------------------------------------------------- the handshake


class Handshake:
    """The two FIFOs between fathom and the stage, and the thread that answers the stage.

    The pipes are FIFOs in a private control directory that only the stage is shown
    (`CONTROL`). `start()` (called once the command runs)
    starts the thread. When the stage says the overlay is mounted, the thread opens the
    layer through `/proc/<stage>/root` (the descriptor keeps the tmpfs alive after the
    stage is gone), notes the stage's cgroup, and releases the stage by closing the
    release FIFO; the stage then becomes the sandbox (`exec`). `wait()` (once the
    command's process has exited) stops and joins it; `close()` closes everything, the
    layer too (its tmpfs is then freed).
    """

    def __init__(self) -> None:
        self.control_dir = tempfile.mkdtemp(prefix="fathom-control-")
        """A private directory (mode 0700) holding the FIFOs `status` and `release`; the
        stage sees it at `CONTROL`."""
        try:
            for name in ("status", "release"):
                os.mkfifo(os.path.join(self.control_dir, name), 0o600)
            # Read-write ends: opening them never blocks, and the stage's opens never
            # wait for fathom. Closing `release_w` is what releases the stage.
            flags = os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC
            self.status_r = os.open(os.path.join(self.control_dir, "status"), flags)
            self.release_w = os.open(os.path.join(self.control_dir, "release"), flags)
        except OSError:
            _remove_control(self.control_dir)
            raise
        self.layer_fd: int | None = None
        """The layer's root (holding `upper`), from when the overlay is mounted."""
        self.failure: str | None = None
        """What the stage reported when it could not set the overlay up."""
        self.cgroup: str | None = None
        """The stage's cgroup v2 path (`/proc/<pid>/cgroup`): the command's cgroup."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, pid: int | None = None) -> None:
        """`run_process`'s `on_start`: the stage runs (it reports its own pid)."""
        del pid
        self._thread = threading.Thread(target=self._serve, name="fathom-overlay", daemon=True)
        self._thread.start()

    def _lines(self) -> Iterator[str]:
        """The stage's report, line by line, until it ends or `wait()` stops the thread."""
        pending = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self.status_r], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.status_r, 4096)
            except BlockingIOError:
                continue
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")

    def _serve(self) -> None:
        said: list[str] = []
        try:
            for line in self._lines():
                words = line.split()
                if len(words) == 2 and words[0] == "fathom-stage-ready":
                    self.layer_fd = os.open(f"/proc/{int(words[1])}/root{LAYER}", _DIR_READ)
                    self.cgroup = _v2_cgroup(int(words[1]))
                    return
                elif line.startswith("fathom-stage-failed"):
                    self.failure = "; ".join(said).strip() or "the stage could not start"
                    return
                else:
                    said.append(line)
            if self.layer_fd is None:
                self.failure = "; ".join(said).strip() or EARLY
        except (OSError, ValueError) as error:
            self.failure = f"the stage's report could not be read: {error}"
        finally:
            self._release()

    def _release(self) -> None:
        if self.release_w >= 0:
            with contextlib.suppress(OSError):
                os.close(self.release_w)
            self.release_w = -1

    def wait(self) -> None:
        """Once the stage's process has exited: stop the thread and join it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._release()

    def close(self) -> None:
        """Close every descriptor still open (the layer too: its tmpfs is then freed) and
        remove the control directory."""
        self.wait()
        for fd in (self.status_r, self.layer_fd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.status_r = -1
        self.layer_fd = None
        _remove_control(self.control_dir)


def _remove_control(path: str) -> None:
    """Remove a control directory: its two FIFOs, then itself."""
    for name in ("status", "release"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, name))
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _v2_cgroup(pid: int) -> str | None:
    """Process `pid`'s cgroup v2 path, from `/proc/<pid>/cgroup`."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def layer_usage(layer_fd: int) -> int:
    """Bytes the command's changes take on the layer's tmpfs."""
    info = os.fstatvfs(layer_fd)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


# ---------------------------------------------------------------------- applying


@dataclass
class Applied:
    """What `apply_changes` did."""

    written: int = 0
    """Files, links and directories created or replaced."""
    removed: int = 0
    """Entries the command deleted that were removed from the workspace."""
    errors: list[str] = field(default_factory=list)
    """Changes that could not be applied (`path: reason`); the rest were."""
    changed: list[str] = field(default_factory=list)
    """Workspace-relative paths written or removed, in order."""


def _is_whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _xattr(fd: int, name: str) -> bytes | None:
    try:
        return os.getxattr(fd, name)
    except OSError:
        return None


class _Applier:
    """One application of an upper layer onto the workspace (see `apply_changes`)."""

    def __init__(self, root_fd: int, xattrs: str) -> None:
        self.root_fd = root_fd
        self.xattrs = xattrs
        """The overlay's xattr namespace (`user.overlay.` or `trusted.overlay.`)."""
        self.as_root = os.geteuid() == 0
        self.result = Applied()
        self.links: dict[int, tuple[int, str]] = {}
        """Upper inode -> (workspace dir fd, name) of its first applied name (hard links)."""
        self._held: list[int] = []
        self.moved: dict[str, str] = {}
        """Upper path of a renamed directory -> the name, in the workspace root, its old
        tree was moved to for the time of the application (`hold_renamed`)."""

    # -- directories the command renamed (redirects, root only)

    def _redirects(self, upper_dir: int, prefix: str, lower: str,
                   found: list[tuple[str, str]]) -> None:
        """`(upper path, lower path)` of every renamed directory below `upper_dir`."""
        for name, info in self._entries(upper_dir):
            if not stat.S_ISDIR(info.st_mode):
                continue
            sub = self._open_upper(upper_dir, name, _DIR_READ)
            try:
                redirect = _xattr(sub, self.xattrs + "redirect")
                if redirect is not None:
                    text = os.fsdecode(redirect)
                    source = text.lstrip("/") if text.startswith("/") else (
                        f"{lower}/{text}" if lower else text
                    )
                    found.append((prefix + name, source))
                else:
                    source = f"{lower}/{name}" if lower else name
                self._redirects(sub, prefix + name + "/", source, found)
            finally:
                os.close(sub)

    def hold_renamed(self, upper: int) -> None:
        """Move the workspace's old tree of every renamed directory aside (the deepest
        first, so that a directory renamed inside a renamed one is found where it was);
        `_apply_subdir` moves it to its new name."""
        found: list[tuple[str, str]] = []
        self._redirects(upper, "", "", found)
        for upper_path, source in sorted(found, key=lambda item: -item[1].count("/")):
            *parents, name = source.split("/")
            try:
                parent = self._open_work_path(parents)
            except OSError:
                continue
            try:
                hold = self._temp_name(self.root_fd)
                os.rename(name, hold, src_dir_fd=parent, dst_dir_fd=self.root_fd)
                self.moved[upper_path] = hold
            except OSError as error:
                self.result.errors.append(f"{source}: {error.strerror or error}")
            finally:
                os.close(parent)

    def _open_work_path(self, parts: list[str]) -> int:
        """The workspace directory `parts` below the root, each step without a link."""
        fd = os.dup(self.root_fd)
        for part in parts:
            try:
                sub = os.open(part, _DIR_READ, dir_fd=fd)
            finally:
                os.close(fd)
            fd = sub
        return fd

    def release_held(self) -> None:
        """Remove what is still held aside (a rename the application could not finish)."""
        for hold in self.moved.values():
            with contextlib.suppress(OSError):
                self._remove(self.root_fd, hold)
        self.moved.clear()

    # -- reading the upper layer (owned by the sandbox user: fathom may need to chmod it)

    def _open_upper(self, dir_fd: int, name: str, flags: int) -> int:
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except PermissionError:
            if self.as_root:
                raise
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            extra = 0o500 if stat.S_ISDIR(info.st_mode) else 0o400
            path_fd = os.open(name, os.O_PATH | _O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                os.chmod(f"/proc/self/fd/{path_fd}", stat.S_IMODE(info.st_mode) | extra)
            finally:
                os.close(path_fd)
            return os.open(name, flags, dir_fd=dir_fd)

    @staticmethod
    def _entries(dir_fd: int) -> list[tuple[str, os.stat_result]]:
        listing = os.open(".", _DIR_READ, dir_fd=dir_fd)
        try:
            names = sorted(os.listdir(listing))
        finally:
            os.close(listing)
        entries = []
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                entries.append((name, os.stat(name, dir_fd=dir_fd, follow_symlinks=False)))
        return entries

    # -- writing the workspace (through directory fds, never following a link)

    def _make_writable(self, dir_fd: int) -> None:
        """As an ordinary user, let fathom add entries to a directory whose mode forbids it
        (its final mode is set from the upper layer afterwards)."""
        if self.as_root:
            return
        info = os.fstat(dir_fd)
        if info.st_mode & 0o300 != 0o300 and info.st_uid == os.geteuid():
            os.chmod(dir_fd, stat.S_IMODE(info.st_mode) | 0o300)

    def _remove(self, dir_fd: int, name: str) -> bool:
        """Remove `name` (a whole tree for a directory); `False` if it was not there."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(info.st_mode):
            sub = os.open(name, _DIR_READ, dir_fd=dir_fd)
            try:
                self._make_writable(sub)
                for child, _ in self._entries(sub):
                    self._remove(sub, child)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)
        return True

    def _finish_entry(self, target_fd: int | None, dir_fd: int, name: str,
                      info: os.stat_result) -> None:
        """Owner, mode (setuid/setgid dropped) and times of a new entry, from the upper."""
        mode = stat.S_IMODE(info.st_mode) & ~_PRIVILEGE_BITS
        is_link = stat.S_ISLNK(info.st_mode)
        if self.as_root:
            uid, gid = (info.st_uid, info.st_gid)
            if target_fd is not None:
                os.fchown(target_fd, uid, gid)
            else:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        if not is_link:
            if target_fd is not None:
                os.fchmod(target_fd, mode)
            else:
                os.chmod(name, mode, dir_fd=dir_fd)
        times = (info.st_atime_ns, info.st_mtime_ns)
        if target_fd is not None:
            os.utime(target_fd, ns=times)
        else:
            os.utime(name, ns=times, dir_fd=dir_fd, follow_symlinks=False)

    @staticmethod
    def _temp_name(dir_fd: int) -> str:
        while True:
            name = _TEMP.format(secrets.token_hex(8))
            try:
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return name

    @staticmethod
    def _copy(src: int, dst: int, size: int) -> None:
        """Copy `size` bytes, keeping holes (a sparse file stays sparse on disk)."""
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src, offset, os.SEEK_DATA)
            except OSError as error:
                if error.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = os.lseek(src, start, os.SEEK_HOLE)
            os.lseek(dst, start, os.SEEK_SET)
            position = start
            while position < end:
                sent = os.sendfile(dst, src, position, end - position)
                if sent == 0:
                    break
                position += sent
            offset = end
        os.ftruncate(dst, size)

    def _put(self, upper_dir: int, work_dir: int, name: str, info: os.stat_result,
             relative: str) -> None:
        """Materialise a non-directory entry beside its target, then rename it into place."""
        kind = stat.S_IFMT(info.st_mode)
        linked = self.links.get(info.st_ino) if info.st_nlink > 1 else None
        if linked is None and kind not in (stat.S_IFREG, stat.S_IFLNK, stat.S_IFIFO):
            # a socket or a device: nothing a file can carry over
            self.result.errors.append(f"{relative}: a socket or device, not carried over")
            return
        temp = self._temp_name(work_dir)
        placed = False
        try:
            if linked is not None:
                os.link(linked[1], temp, src_dir_fd=linked[0], dst_dir_fd=work_dir,
                        follow_symlinks=False)
            elif kind == stat.S_IFREG:
                self._put_file(upper_dir, work_dir, name, temp, info)
            elif kind == stat.S_IFLNK:
                os.symlink(os.readlink(name, dir_fd=upper_dir), temp, dir_fd=work_dir)
                self._finish_entry(None, work_dir, temp, info)
            else:
                os.mkfifo(temp, 0o600, dir_fd=work_dir)
                self._finish_entry(None, work_dir, temp, info)
            try:
                os.rename(temp, name, src_dir_fd=work_dir, dst_dir_fd=work_dir)
            except IsADirectoryError:
                self._remove(work_dir, name)
                os.rename(temp, name, src_dir_fd=work_dir, dst_dir_fd=work_dir)
            placed = True
        finally:
            if not placed:  # cleanup: an entry that failed leaves no temporary behind
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=work_dir)
        if info.st_nlink > 1 and linked is None:
            held = os.dup(work_dir)
            self._held.append(held)
            self.links[info.st_ino] = (held, name)
        self.result.written += 1
        self.result.changed.append(relative)

    def _put_file(self, upper_dir: int, work_dir: int, name: str, temp: str,
                  info: os.stat_result) -> None:
        """Copy the regular file `name` of the upper to the new entry `temp`."""
        src = self._open_upper(upper_dir, name, os.O_RDONLY | os.O_CLOEXEC | _O_NOFOLLOW)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _O_NOFOLLOW
            dst = os.open(temp, flags, 0o600, dir_fd=work_dir)
            try:
                self._copy(src, dst, info.st_size)
                self._finish_entry(dst, work_dir, temp, info)
            finally:
                os.close(dst)
        finally:
            os.close(src)

    def apply_dir(self, upper_dir: int, work_dir: int, prefix: str) -> None:
        """Apply the upper directory `upper_dir` onto the workspace directory `work_dir`."""
        self._make_writable(work_dir)
        entries = self._entries(upper_dir)
        for name, info in entries:  # deletions first: a rename may reuse a removed name
            if _is_whiteout(info):
                relative = prefix + name
                try:
                    if self._remove(work_dir, name):
                        self.result.removed += 1
                        self.result.changed.append(relative)
                except OSError as error:
                    self.result.errors.append(f"{relative}: {error.strerror or error}")
        for name, info in entries:
            if _is_whiteout(info):
                continue
            relative = prefix + name
            try:
                if stat.S_ISDIR(info.st_mode):
                    self._apply_subdir(upper_dir, work_dir, name, info, relative)
                else:
                    self._put(upper_dir, work_dir, name, info, relative)
            except OSError as error:
                self.result.errors.append(f"{relative}: {error.strerror or error}")

    def _apply_subdir(self, upper_dir: int, work_dir: int, name: str, info: os.stat_result,
                      relative: str) -> None:
        sub_upper = self._open_upper(upper_dir, name, _DIR_READ)
        try:
            fresh = _xattr(sub_upper, self.xattrs + "opaque") == b"y"
            try:
                existing = os.stat(name, dir_fd=work_dir, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            hold = self.moved.pop(relative, None)
            if existing is not None and (
                fresh or hold is not None or not stat.S_ISDIR(existing.st_mode)
            ):
                self._remove(work_dir, name)
                existing = None
            if hold is not None:  # a directory the command renamed: its old tree, moved
                os.rename(hold, name, src_dir_fd=self.root_fd, dst_dir_fd=work_dir)
                existing = os.stat(name, dir_fd=work_dir, follow_symlinks=False)
                self.result.changed.append(relative + "/")
            if existing is None:
                os.mkdir(name, 0o700, dir_fd=work_dir)
                self.result.written += 1
                self.result.changed.append(relative + "/")
            sub_work = os.open(name, _DIR_READ, dir_fd=work_dir)
            try:
                self.apply_dir(sub_upper, sub_work, relative + "/")
                self._finish_entry(sub_work, work_dir, name, info)
            finally:
                os.close(sub_work)
        finally:
            os.close(sub_upper)

    def close(self) -> None:
        for fd in self._held:
            os.close(fd)
        self._held.clear()


def apply_changes(layer_fd: int, root: str, *, privileged: bool = False) -> Applied:
    """Apply the overlay's upper layer (`upper` under the layer `layer_fd`) to the
    workspace directory `root`. `privileged`: the overlay was mounted by root
    (`mount_options(True)`: `trusted.` xattrs, renamed directories recorded).

    Deleted entries (whiteouts) are removed; a directory the command renamed gets the
    workspace's old tree moved to its new name, then its changes; a directory it replaced
    (opaque, or where the workspace has no directory) replaces the workspace's whole; and
    every file, symlink and FIFO is written beside its target and renamed over it, with
    the mode (without setuid/setgid), times and, as root, owner it has in the layer. Hard
    links made by the command stay links. Errors are collected per entry; the rest is
    applied.
    """
    upper = os.open("upper", _DIR_READ, dir_fd=layer_fd)
    try:
        work = os.open(root, _DIR_READ)
        applier = _Applier(work, _TRUSTED_XATTRS if privileged else _USER_XATTRS)
        try:
            if applier._entries(upper):
                if privileged:
                    applier.hold_renamed(upper)
                applier.apply_dir(upper, work, "")
                applier._finish_entry(work, work, ".", os.fstat(upper))
        finally:
            applier.release_held()
            applier.close()
            os.close(work)
    finally:
        os.close(upper)
    return applier.result


def has_changes(layer_fd: int) -> bool:
    """Whether the upper layer holds anything: a change the command made."""
    upper = os.open("upper", _DIR_READ, dir_fd=layer_fd)
    try:
        return bool(os.listdir(upper))
    finally:
        os.close(upper)
