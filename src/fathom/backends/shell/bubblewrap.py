"""`BubblewrapSandbox`: shell commands in a bubblewrap (`bwrap`) sandbox on the local machine.

Each `execute` call starts a fresh `bwrap` with new user, mount, pid, ipc, uts, cgroup and
(unless `network=True`) network namespaces. The workspace directory is bound read-write at
`/workspace` (`nosuid,nodev`); `/usr` (with the `/bin`, `/lib`, `/lib64`, `/sbin` entries) and
an allow-list of `/etc` files are bound read-only; `/tmp` and `/dev/shm` are private,
size-capped tmpfs; `/proc` and `/dev` are fresh minimal instances with the kernel's knobs
(`/proc/sys`, `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus`) read-only. Nothing else of the
host exists inside (no `/root`, `/home`, `/var`, `/run`, `/sys`, other workspaces or sockets).

When fathom runs as root, commands never run as host root: the sandbox is started as a
dedicated unprivileged host uid/gid (`sandbox_uid`/`sandbox_gid`) that owns the workspace.
See `docs/security.md` for the threat model.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from fathom.backends.shell._runner import (
    OutputCallback,
    ProcessResult,
    arun_process,
    check_request,
    check_timeouts,
    kill_group,
    run_process,
)
from fathom.backends.shell.seccomp import SeccompProfile, program_fd

__all__ = ["DEFAULT_SANDBOX_HOST_ID", "WORKSPACE", "BubblewrapSandbox", "SeccompProfile"]

logger = logging.getLogger(__name__)

WORKSPACE = "/workspace"
"""Where the workspace directory appears inside the sandbox (also the working directory)."""

SANDBOX_UID = 65534
"""`nobody`: the uid and gid commands run as *inside* the sandbox's user namespace."""

DEFAULT_SANDBOX_HOST_ID = 2_000_000_000
"""The host uid and gid sandboxed commands run as when fathom runs as root.

A dedicated id no account uses: above the ranges systemd and `/etc/subuid` hand out for
containers (up to 0x6FFFFFFF) and below 2**31 (tools that read uids as signed ints)."""

DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
"""Output captured per command by default; past it the sandbox is killed."""

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_ETC_ALLOW = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "nsswitch.conf",
    "resolv.conf",
    "gai.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "ssl/certs",
    "ca-certificates",
    "ca-certificates.conf",
    "protocols",
    "services",
    "mime.types",
    "os-release",
    "debian_version",
    "profile",
    "bash.bashrc",
    "inputrc",
    "gitconfig",
    "python3",
)
"""The `/etc` entries bound read-only. An allow-list, not `/etc` whole: host files that are
readable by every user (or by the user fathom runs as, when it is not root) but are nobody
else's business stay out."""

_KERNEL_KNOBS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
"""Parts of `/proc` that change the running kernel; bound read-only over the fresh `/proc`."""

_HOLD = "/tmp/fathom-workspace"
"""Root only: where the first, privileged stage shows the workspace to the unprivileged one."""

_DISK_POLL = 0.5
"""Seconds between two measurements of the workspace while a command runs (at least)."""

_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID

DEFAULT_SECCOMP = SeccompProfile()
"""The seccomp profile sandboxes use unless given another (`docs/security.md`)."""

_probed: dict[tuple[str, int, int], bool] = {}
"""Per (bwrap, host uid, host gid): whether `--disable-userns` works."""
_probe_lock = threading.Lock()
_cgroup_warned: set[str] = set()


# ---------------------------------------------------------------------- cgroups

_LIMIT_FILES = {
    ("pids", 1): ("pids.max",),
    ("pids", 2): ("pids.max",),
    # memsw after memory: the kernel wants memory+swap >= memory at all times.
    ("memory", 1): ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes?"),
    ("memory", 2): ("memory.max", "memory.swap.max=0?"),
}
"""The files a per-command child's limit is written to; `?` marks optional ones (swap
accounting may be off) and `=V` a fixed value instead of the limit."""


@dataclass(frozen=True)
class _CgroupBase:
    """A cgroup directory of this process in which per-command children can be made."""

    path: str
    version: int
    controller: str

    def create(self, limit: int) -> str:
        """A new child cgroup with `limit` written to the controller's files; `OSError`."""
        path = os.path.join(self.path, f"fathom-{os.getpid()}-{secrets.token_hex(6)}")
        os.mkdir(path)
        try:
            for spec in _LIMIT_FILES[(self.controller, self.version)]:
                optional = spec.endswith("?")
                name, _, fixed = spec.rstrip("?").partition("=")
                try:
                    with open(os.path.join(path, name), "w", encoding="ascii") as handle:
                        handle.write(fixed or str(limit))
                except OSError:
                    if not optional:
                        raise
        except OSError:
            _remove_cgroup(path)
            raise
        return path

    def oom_kills(self, path: str) -> int:
        """How many processes the kernel killed in the child `path` for memory."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(path, name), encoding="ascii") as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0


def _cgroup_mounts() -> list[tuple[str, str, set[str]]]:
    """`(mount point, fstype, options)` of every cgroup filesystem this process sees."""
    mounts = []
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
                    mounts.append((fields[1], fields[2], set(fields[3].split(","))))
    except OSError:
        pass
    return mounts


def _find_cgroup(controller: str) -> _CgroupBase | None:
    """This process's cgroup for `controller` (v1 or delegated v2), if children can be
    made there with a limit; `None` otherwise."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    candidates: list[_CgroupBase] = []
    mounts = _cgroup_mounts()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controller in controllers.split(","):
            for point, fstype, options in mounts:
                if fstype == "cgroup" and controller in options:
                    candidates.append(
                        _CgroupBase(os.path.join(point, relative), 1, controller)
                    )
        elif controllers == "":
            for point, fstype, _ in mounts:
                if fstype == "cgroup2":
                    candidates.append(_CgroupBase(os.path.join(point, relative), 2, controller))
    for base in candidates:
        try:
            probe = base.create(1 << 30 if controller == "memory" else 1)
        except OSError:
            continue
        _remove_cgroup(probe)
        return base
    return None


CGROUP_REAP_S = 10.0
"""How long removing a sandbox's cgroup waits for its killed tasks to be reaped."""


def _remove_cgroup(path: str) -> None:
    """Remove a child cgroup once its tasks are gone (they are being killed).

    Waits up to `CGROUP_REAP_S`: on a loaded machine the kernel can take most of a second
    to reap a killed fork bomb, and an early give-up left the cgroup behind."""
    deadline = time.monotonic() + CGROUP_REAP_S
    delay = 0.01
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
    logger.warning("could not remove cgroup %s", path)


def _in_cgroups(paths: Sequence[str], argv: list[str]) -> list[str]:
    """`argv` started inside every cgroup of `paths`: a tiny `sh` joins them, then execs.

    Joining before `bwrap` starts counts every task it forks. A shell wrapper rather than a
    `preexec_fn`, which would force a slow `fork()` of this whole process on every command.
    When fathom is root the shell runs as root (it must, to join), and the privileges are
    dropped after it, before any sandbox is built.
    """
    if not paths:
        return argv
    procs = [os.path.join(path, "cgroup.procs") for path in paths]
    joins = " && ".join(f'echo $$ > "${index}"' for index in range(len(procs)))
    shift = f" && shift {len(procs) - 1}" if len(procs) > 1 else ""
    return ["/bin/sh", "-c", f'{joins}{shift} && exec "$@"', *procs, *argv]


# ---------------------------------------------------------------------- the workspace


def _walk(root: str) -> Iterator[tuple[int, str, os.stat_result]]:
    """`(dir fd, name, lstat)` of every entry under `root`, on `root`'s filesystem only.

    Directory fds (`os.fwalk`), never a path re-resolved later, so a command swapping a
    directory for a symlink cannot send the walk, or what is done with its results,
    outside the workspace. Entries that vanish while walking are skipped.
    """
    try:
        device = os.stat(root).st_dev
    except OSError:
        return
    for _, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        for name in list(dirnames):
            try:
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                dirnames.remove(name)
                continue
            if info.st_dev != device:
                dirnames.remove(name)  # a mount point: not the workspace's files
            yield dirfd, name, info
        for name in filenames:
            try:
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                continue
            yield dirfd, name, info


def _drop_privilege_bits(dirfd: int, name: str, info: os.stat_result) -> bool:
    """Clear setuid/setgid on the regular file `name` (in `dirfd`); `True` if done.

    Through an `O_PATH | O_NOFOLLOW` fd: a symlink put there meanwhile is left alone, and
    no read permission on the file is needed.
    """
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (
            info.st_dev,
            info.st_ino,
        ):
            return False
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(now.st_mode) & ~_PRIVILEGE_BITS)
        return True
    except OSError as error:
        logger.warning("could not clear setuid/setgid on %s: %s", name, error)
        return False
    finally:
        os.close(fd)


def _sweep(root: str, *, strip: bool) -> int:
    """Bytes the workspace takes on disk (hard links counted once); with `strip`, clear
    setuid/setgid bits of its regular files on the way."""
    used = 0
    seen: set[tuple[int, int]] = set()
    for dirfd, name, info in _walk(root):
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key in seen:
                continue
            seen.add(key)
        used += info.st_blocks * 512
        if strip and stat.S_ISREG(info.st_mode) and info.st_mode & _PRIVILEGE_BITS:
            _drop_privilege_bits(dirfd, name, info)
    return used


def _chown_tree(root: str, uid: int, gid: int) -> int:
    """Give every entry under `root` (and `root`) to `uid:gid`; the number changed."""
    changed = 0
    info = os.stat(root)
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.chown(root, uid, gid)
        changed += 1
    for dirfd, name, info in _walk(root):
        if (info.st_uid, info.st_gid) != (uid, gid):
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
                changed += 1
    return changed


class _DiskGuard:
    """Kills a running command once the workspace has grown by more than `budget` bytes.

    A thread measures the workspace every `_DISK_POLL` seconds (or twice as long as the
    last measurement took, on big workspaces) and SIGKILLs the sandbox's process group
    when it is over `baseline + budget`.
    """

    def __init__(self, root: str, budget: int) -> None:
        self.root = root
        self.budget = budget
        self.baseline = _sweep(root, strip=False)
        self.tripped = False
        self._pid: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, pid: int) -> None:
        self._pid = pid
        self._thread = threading.Thread(target=self._run, name="fathom-disk-guard", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = _DISK_POLL
        while not self._stop.wait(wait):
            began = time.monotonic()
            if _sweep(self.root, strip=False) - self.baseline > self.budget:
                self.tripped = True
                assert self._pid is not None
                # bwrap leads the group; with `--die-with-parent` its pid namespace (every
                # sandboxed process, `setsid` ones too) dies with it.
                kill_group(self._pid)
                return
            wait = max(_DISK_POLL, 2 * (time.monotonic() - began))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _host_id(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**32 - 1:
        raise ValueError(
            f"{name} must be an int between 1 and 4294967294 (a host id that is not root), "
            f"not {value!r}."
        )
    return value


@dataclass
class _Run:
    """What one command needs besides its argv: cgroups, the disk guard, the timeout."""

    argv: list[str]
    cgroups: list[tuple[_CgroupBase, str]]
    guard: _DiskGuard | None
    timeout: float
    notes: list[str]
    fds: list[int] = field(default_factory=list)
    """Descriptors the command inherits (the seccomp program); closed by `_finish`."""


class BubblewrapSandbox(FilesystemBackend):
    """A workspace directory plus shell commands run isolated by bubblewrap (`bwrap`).

    File tools, uploads and downloads are `FilesystemBackend`'s with `virtual_mode=True`
    (the workspace is the jail: `/a.txt` is `<root_dir>/a.txt`). `execute` runs
    `/bin/sh -c command` in `/workspace` inside a fresh sandbox for every call:

    - namespaces: user, mount, pid, ipc, uts, cgroup, and network unless `network=True`
      (a new network namespace has only a down loopback: no host services, no internet);
      nested user namespaces are refused (`--disable-userns`, where bwrap has it);
    - user: uid/gid 65534 inside with every capability dropped (`--cap-drop ALL`),
      `--new-session` (no TIOCSTI into the caller's terminal), `--die-with-parent`. On the
      host that is this process's uid, or, when fathom runs as root, `sandbox_uid` and
      `sandbox_gid` (never root): the workspace tree is then given to them at construction
      and the file tools create files owned by them;
    - files: the workspace read-write at `/workspace`, mounted `nosuid,nodev`, and setuid/
      setgid bits cleared from its files after every command; `/usr` and an allow-list of
      `/etc` read-only; private tmpfs `/tmp` and `/dev/shm` capped at `max_memory_mb` each;
      `/proc/sys` and the other kernel knobs read-only; no `/root`, `/home`, `/var`, `/run`,
      `/sys` or other host paths. Only `env` (plus `PATH`, `HOME=/tmp`, `LANG`) reaches the
      command, never this process's environment;
    - limits: `timeout` seconds (then `bwrap` is SIGKILLed; the pid namespace takes every
      sandboxed process with it, background and `setsid` ones included); a timeout the
      model asks for is capped at `max_timeout` (default: `timeout`); `max_output_bytes` of
      combined stdout/stderr (then the command is killed, `truncated=True`);
      `max_processes` tasks through a per-command `pids` cgroup when one can be created,
      and `RLIMIT_NPROC` always; `max_memory_mb` for the whole command through a
      per-command `memory` cgroup when one can be created (`memory_limit`), and of address
      space per process (`RLIMIT_AS`) always; `max_disk_mb`: the most the workspace may grow
      during one command (checked every half second, the command is killed past it) and
      the largest file a command may write (`RLIMIT_FSIZE`).

    When the command exits, its leftover background processes are killed with the pid
    namespace. Raises `RuntimeError` at construction when `bwrap`, `prlimit` (or, as root,
    `setpriv`) is missing or user namespaces do not work; it never falls back to running
    commands unsandboxed.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        timeout: float = 120,
        max_timeout: float | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        network: bool = False,
        max_processes: int = 256,
        max_memory_mb: int = 2048,
        max_disk_mb: int | None = 4096,
        env: Mapping[str, str] | None = None,
        max_file_size_mb: float = 10,
        sandbox_uid: int = DEFAULT_SANDBOX_HOST_ID,
        sandbox_gid: int | None = None,
        seccomp: SeccompProfile | None = DEFAULT_SECCOMP,
    ) -> None:
        super().__init__(root_dir, virtual_mode=True, max_file_size_mb=max_file_size_mb)
        self._make_root_if_missing()  # the sandbox binds it as /workspace from the start
        check_timeouts(timeout, max_timeout)
        for name, value in (
            ("max_output_bytes", max_output_bytes),
            ("max_processes", max_processes),
            ("max_memory_mb", max_memory_mb),
            ("max_disk_mb", 1 if max_disk_mb is None else max_disk_mb),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, not {value!r}.")
        self.timeout: float = float(timeout)
        self.max_timeout: float = max(
            self.timeout, float(max_timeout) if max_timeout is not None else self.timeout
        )
        self.max_output_bytes: int = max_output_bytes
        self.network: bool = bool(network)
        self.max_processes: int = max_processes
        self.max_memory_mb: int = max_memory_mb
        self.max_disk_mb: int | None = max_disk_mb
        self.env: dict[str, str] = dict(env or {})
        if seccomp is not None and not isinstance(seccomp, SeccompProfile):
            raise TypeError(f"seccomp must be a SeccompProfile or None, not {seccomp!r}.")
        self.seccomp: SeccompProfile | None = seccomp
        """The seccomp profile every command runs under; `None`: no filter."""
        self._seccomp_program: bytes | None = (
            seccomp.program(network=self.network) if seccomp is not None else None
        )
        if seccomp is None and "seccomp" not in _cgroup_warned:
            _cgroup_warned.add("seccomp")
            logger.warning(
                "BubblewrapSandbox(seccomp=None): commands run without a seccomp filter "
                "(ptrace, bpf, io_uring, network sockets, ... are the kernel's to refuse)."
            )
        uid = _host_id("sandbox_uid", sandbox_uid)
        gid = _host_id("sandbox_gid", uid if sandbox_gid is None else sandbox_gid)
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise RuntimeError(
                "bubblewrap (bwrap) is not installed: apt-get install bubblewrap (Debian/"
                "Ubuntu), dnf install bubblewrap (Fedora) or apk add bubblewrap (Alpine)."
            )
        self.bwrap: str = bwrap
        self._as_root = os.geteuid() == 0
        self.sandbox_ids: tuple[int, int] = (uid, gid) if self._as_root else (
            os.geteuid(),
            os.getegid(),
        )
        """The host uid and gid sandboxed commands run as (never 0)."""
        if self._as_root:
            if not os.path.exists("/usr/bin/setpriv"):
                raise RuntimeError(
                    "setpriv (util-linux) is missing at /usr/bin/setpriv; as root, "
                    "BubblewrapSandbox needs it to run commands as an unprivileged user: "
                    "apt-get install util-linux."
                )
            changed = _chown_tree(self.root_dir, uid, gid)
            if changed:
                logger.info(
                    "gave %d entries of the workspace %s to the sandbox user %d:%d",
                    changed,
                    self.root_dir,
                    uid,
                    gid,
                )
            self.file_owner = (uid, gid)
        self._pids = _find_cgroup("pids")
        self._memory = _find_cgroup("memory")
        self._warn_limits()
        self._disable_userns = self._probe()

    def _warn_limits(self) -> None:
        """Say once per process which limits have no per-command cgroup behind them."""
        if self._pids is None and "pids" not in _cgroup_warned:
            _cgroup_warned.add("pids")
            logger.warning(
                "BubblewrapSandbox: no writable pids cgroup; max_processes is enforced with "
                "RLIMIT_NPROC only, which counts every process of the sandbox's host uid."
            )
        if self._memory is None and "memory" not in _cgroup_warned:
            _cgroup_warned.add("memory")
            logger.warning(
                "BubblewrapSandbox: no writable memory cgroup; max_memory_mb bounds each "
                "process's address space (RLIMIT_AS) and each tmpfs, not the whole command."
            )

    @property
    def process_limit(self) -> str:
        """How `max_processes` is enforced: `"cgroup"` (per command) or `"rlimit"`."""
        return "cgroup" if self._pids is not None else "rlimit"

    @property
    def memory_limit(self) -> str:
        """How `max_memory_mb` is enforced: `"cgroup"` (the whole command's memory) or
        `"rlimit"` (each process's address space, and each tmpfs's size)."""
        return "cgroup" if self._memory is not None else "rlimit"

    # ------------------------------------------------------------------ the command line

    def _bwrap_args(
        self,
        command: Sequence[str],
        *,
        disable_userns: bool = True,
        source: str | None = None,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        """The unprivileged `bwrap` command line that runs `command` in the sandbox."""
        args = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        if disable_userns:
            args.append("--disable-userns")
        if self.network:
            args.append("--share-net")
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = "/" + top
            if os.path.islink(host):
                args += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                args += ["--ro-bind", host, host]
        args += ["--dir", "/etc"]
        for entry in _ETC_ALLOW:
            args += ["--ro-bind-try", "/etc/" + entry, "/etc/" + entry]
        args += ["--proc", "/proc"]
        for knob in _KERNEL_KNOBS:
            args += ["--ro-bind-try", knob, knob]
        size = str(self.max_memory_mb * 1024 * 1024)
        args += [
            "--dev",
            "/dev",
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",
            "--size",
            size,
            "--tmpfs",
            "/tmp",
            "--bind",
            source or self.root_dir,
            WORKSPACE,
            "--remount-ro",
            "/",
            "--chdir",
            WORKSPACE,
        ]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--", *command]
        return args

    def _unprivileged(self, inner: list[str]) -> list[str]:
        """As root: `inner` (a bwrap command line) started as the sandbox user.

        A first, privileged `bwrap` (a mount namespace only) shows the workspace at `_HOLD`,
        so the unprivileged one can reach it even under a directory only root may enter
        (`/root`, pytest's temporary directories); then `setpriv` drops to the sandbox
        uid/gid with no supplementary groups and no capabilities left to gain.
        """
        uid, gid = self.sandbox_ids
        return [
            self.bwrap,
            "--die-with-parent",
            "--dev-bind",  # devices stay usable for the inner --dev (plain --bind is nodev)
            "/",
            "/",
            "--size",
            "65536",
            "--tmpfs",
            "/tmp",
            "--bind",
            self.root_dir,
            _HOLD,
            "--",
            "/usr/bin/setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            *inner,
        ]

    def _sandbox_argv(
        self, command: Sequence[str], *, disable_userns: bool, seccomp_fd: int | None = None
    ) -> list[str]:
        if not self._as_root:
            return self._bwrap_args(
                command, disable_userns=disable_userns, seccomp_fd=seccomp_fd
            )
        inner = self._bwrap_args(
            command, disable_userns=disable_userns, source=_HOLD, seccomp_fd=seccomp_fd
        )
        return self._unprivileged(inner)

    def _seccomp_fd(self) -> int | None:
        """A fresh descriptor of the seccomp program for one bwrap (it reads it whole)."""
        return None if self._seccomp_program is None else program_fd(self._seccomp_program)

    def _limited(self, argv: Sequence[str]) -> list[str]:
        memory = self.max_memory_mb * 1024 * 1024
        limits = [f"--nproc={self.max_processes}", f"--as={memory}", "--core=0"]
        if self.max_disk_mb is not None:
            limits.append(f"--fsize={self.max_disk_mb * 1024 * 1024}")
        return ["/usr/bin/prlimit", *limits, "--", *argv]

    def _environment(self) -> dict[str, str]:
        environment = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        environment.update(self.env)
        return environment

    def _probe(self) -> bool:
        """Check that a sandbox starts here; whether `--disable-userns` is supported."""
        if not os.path.exists("/usr/bin/prlimit"):
            raise RuntimeError(
                "prlimit (util-linux) is missing at /usr/bin/prlimit; BubblewrapSandbox "
                "needs it to set process and memory limits: apt-get install util-linux."
            )
        key = (self.bwrap, *self.sandbox_ids)
        with _probe_lock:
            if key in _probed:
                return _probed[key]
            detail = ""
            for disable in (True, False):
                fd = self._seccomp_fd()
                try:
                    result = subprocess.run(
                        self._sandbox_argv(
                            ["/usr/bin/true"], disable_userns=disable, seccomp_fd=fd
                        ),
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=30,
                        env=self._environment(),
                        check=False,
                        pass_fds=() if fd is None else (fd,),
                    )
                except (OSError, subprocess.TimeoutExpired) as error:
                    raise RuntimeError(f"bubblewrap could not be started: {error}") from error
                finally:
                    if fd is not None:
                        os.close(fd)
                if result.returncode == 0:
                    if not disable:
                        logger.warning(
                            "this bwrap has no --disable-userns (bubblewrap < 0.8): commands "
                            "can create nested user namespaces inside the sandbox."
                        )
                    _probed[key] = disable
                    return disable
                detail = detail or result.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(
                f"bubblewrap cannot create a sandbox here ({detail or result.returncode}). "
                "It needs unprivileged user namespaces: enable them with `sysctl -w "
                "kernel.unprivileged_userns_clone=1` (Debian/Ubuntu kernels), `sysctl -w "
                "user.max_user_namespaces=15000`, or `sysctl -w "
                "kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+); in a "
                "container, run it with a seccomp/AppArmor profile that allows unshare/"
                "clone of user namespaces (e.g. docker --security-opt seccomp=unconfined)."
            )

    def _prepare(self, command: str, timeout: object) -> ExecuteResponse | _Run:
        """Everything one command needs, made in order; undone by `_finish` on any error."""
        checked = check_request(command, timeout, self.timeout, self.max_timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        seconds, note = checked
        run = _Run([], [], None, seconds, [note] if note else [])
        try:
            for base, limit in (
                (self._pids, self.max_processes),
                (self._memory, self.max_memory_mb * 1024 * 1024),
            ):
                if base is not None:
                    run.cgroups.append((base, base.create(limit)))
            if self.max_disk_mb is not None:
                run.guard = _DiskGuard(self.root_dir, self.max_disk_mb * 1024 * 1024)
        except OSError as error:
            self._finish(run)
            return ExecuteResponse(
                output=f"Error: could not set up the command's limits: {error}", exit_code=1
            )
        inner = self._limited(["/bin/sh", "-c", command])
        fd = self._seccomp_fd()
        if fd is not None:
            run.fds.append(fd)
        sandbox = self._sandbox_argv(inner, disable_userns=self._disable_userns, seccomp_fd=fd)
        run.argv = _in_cgroups([path for _, path in run.cgroups], sandbox)
        return run

    def _finish(self, run: _Run) -> None:
        """After the command: stop the guard, note what the kernel killed, remove the
        cgroups, and clear setuid/setgid bits the command left in the workspace."""
        if run.guard is not None:
            run.guard.stop()
        for fd in run.fds:
            os.close(fd)
        run.fds.clear()
        for base, path in run.cgroups:
            if base.controller == "memory" and base.oom_kills(path):
                run.notes.append(
                    f"[memory limit: the command used more than {self.max_memory_mb} MiB in "
                    "all; the kernel killed processes of it]"
                )
            _remove_cgroup(path)
        if run.guard is not None and run.guard.tripped:
            run.notes.append(
                f"[killed: the command wrote more than {self.max_disk_mb} MiB to the "
                "workspace; delete what is not needed]"
            )
        _sweep(self.root_dir, strip=True)

    # ------------------------------------------------------------------ execute

    def execute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Run `command` with `/bin/sh -c` in a fresh sandbox; never raises for the command.

        Output is stdout and stderr combined; `on_output` receives it as it arrives. At the
        timeout the sandbox is killed and `exit_code` is 124 (the output so far is kept);
        past `max_output_bytes` it is killed and `truncated=True`. A `timeout` above
        `max_timeout` is lowered to it (the output says so).
        """
        run = self._prepare(command, timeout)
        if isinstance(run, ExecuteResponse):
            return run
        try:
            result = run_process(run.argv, **self._process(run, on_output))
        finally:
            self._finish(run)
        return self._response(run, result)

    async def aexecute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Async `execute`; cancelling the call kills the sandbox and everything in it."""
        run = await asyncio.to_thread(self._prepare, command, timeout)
        if isinstance(run, ExecuteResponse):
            return run
        try:
            result = await arun_process(run.argv, **self._process(run, on_output))
        finally:
            await asyncio.shield(asyncio.to_thread(self._finish, run))
        return self._response(run, result)

    def _process(self, run: _Run, on_output: OutputCallback | None) -> dict[str, Any]:
        """How `run_process` runs the prepared command (its keywords)."""
        return {
            "timeout": run.timeout,
            "capture_bytes": self.max_output_bytes,
            "env": self._environment(),
            "on_output": on_output,
            "on_start": run.guard.start if run.guard is not None else None,
            "pass_fds": tuple(run.fds),
        }

    @staticmethod
    def _response(run: _Run, result: ProcessResult | str) -> ExecuteResponse:
        if isinstance(result, str):
            return ExecuteResponse(output=f"Error: bwrap {result}", exit_code=1)
        return result.response(run.timeout, run.notes)

    # ------------------------------------------------------------------ file transfer

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)` into the workspace (overwriting, mode 0o644); paths
        are virtual. Failures are per file, as an `ErrorKind`."""
        return [
            self._upload_one(path, content, mode=0o644, keep_mode=False)
            for path, content in files
        ]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each workspace path's bytes (virtual paths, jailed like `read`, at most
        `max_file_size_mb`)."""
        return [self._download_one(path, self.max_file_size_bytes) for path in paths]
