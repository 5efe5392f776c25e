"""`BubblewrapSandbox`: shell commands in a bubblewrap (`bwrap`) sandbox on the local machine.

Each `execute` call starts a fresh `bwrap` with new user, mount, pid, ipc, uts, cgroup and
(unless `network=True`) network namespaces, under a seccomp filter (`seccomp.py`). The
workspace directory is seen at `/workspace` (`nosuid,nodev`): through an overlay whose
changes are applied back when the command ends within its disk budget (`overlay.py`), or,
where overlays are unavailable, directly. `/usr` (with the `/bin`, `/lib`, `/lib64`,
`/sbin` entries) and an allow-list of `/etc` files are bound read-only; `/tmp` and
`/dev/shm` are private, size-capped tmpfs; `/proc` and `/dev` are fresh minimal instances
with the kernel's knobs (`/proc/sys`, `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus`)
read-only. Nothing else of the host exists inside (no `/root`, `/home`, `/var`, `/run`,
`/sys`, other workspaces or sockets).

When fathom runs as root, commands never run as host root: the sandbox is started as a
dedicated unprivileged host uid/gid (`sandbox_uid`/`sandbox_gid`) that owns the workspace.
See `docs/security.md` for the threat model.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from fathom.backends.shell.cgroups import (
    CgroupBase,
    SystemdScopes,
    find_delegated_v2,
    find_own_cgroup,
    find_systemd_scopes,
    in_cgroups,
    oom_kills_v2,
    remove_cgroup,
)
from fathom.backends.shell.overlay import (
    CONTROL,
    EARLY,
    LAYER,
    LOWER,
    MERGED,
    SLACK_BYTES,
    STAGE_SCRIPT,
    Applied,
    Handshake,
    apply_changes,
    has_changes,
    layer_usage,
    mount_options,
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

_MIB = 1024 * 1024

_DISK_POLL = 0.5
"""Seconds between two measurements of the workspace while a command runs (at least)."""

_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID

DEFAULT_SECCOMP = SeccompProfile()
"""The seccomp profile sandboxes use unless given another (`docs/security.md`)."""


_probed: dict[tuple[str, int, int], bool] = {}
"""Per (bwrap, host uid, host gid): whether `--disable-userns` works."""
_overlay_probed: dict[tuple[str, int, int, int], str | None] = {}
"""Per (bwrap, host uid, host gid, workspace device): why the overlay cannot be used there
(`None`: it can)."""
_probe_lock = threading.Lock()
_warned: set[str] = set()
"""The fallbacks already logged by this process (each is logged once)."""


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


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


@dataclass
class _Run:
    """What one command needs besides its argv: cgroups, the overlay or the disk guard,
    the timeout, and the notes its answer will carry."""

    argv: list[str]
    cgroups: list[tuple[CgroupBase, str]]
    guard: _DiskGuard | None
    timeout: float
    notes: list[str]
    fds: list[int] = field(default_factory=list)
    """Descriptors the command inherits (the seccomp program); closed by `_finish`."""
    handshake: Handshake | None = None
    """The overlay stage's pipes, when the command runs on an overlay."""
    discarded: bool = False
    """Its changes were not applied (over the budget, or it did not finish)."""
    rerun: bool = False
    """The overlay could not be set up, so the command never ran: run it again without."""
    applied: Applied | None = None


class BubblewrapSandbox(FilesystemBackend):
    """A workspace directory plus shell commands run isolated by bubblewrap (`bwrap`).

    File tools, uploads and downloads are `FilesystemBackend`'s with `virtual_mode=True`
    (the workspace is the jail: `/a.txt` is `<root_dir>/a.txt`). `execute` runs
    `/bin/sh -c command` in `/workspace` inside a fresh sandbox for every call:

    - namespaces: user, mount, pid, ipc, uts, cgroup, and network unless `network=True`
      (a new network namespace has only a down loopback: no host services, no internet);
      nested user namespaces are refused (`--disable-userns`, where bwrap has it);
    - system calls: a seccomp filter (`seccomp`, a `SeccompProfile`; `None` for none)
      refuses ptrace, bpf, io_uring, keyctl, mount, kernel modules, namespace creation and
      more, and, with the network off, every socket but `AF_UNIX`;
    - user: uid/gid 65534 inside with every capability dropped (`--cap-drop ALL`),
      `--new-session` (no TIOCSTI into the caller's terminal), `--die-with-parent`. On the
      host that is this process's uid, or, when fathom runs as root, `sandbox_uid` and
      `sandbox_gid` (never root): the workspace tree is then given to them at construction
      and the file tools create files owned by them;
    - files: the workspace at `/workspace`, mounted `nosuid,nodev`; with `overlay=True`
      (the default) and a `max_disk_mb`, the command writes to an overlay whose changes
      are applied to the workspace, per file and atomically, only when it exits in time
      and within the budget (`disk_limit == "overlay"`); setuid/setgid bits never reach
      the workspace. `/usr` and an allow-list of `/etc` read-only; private tmpfs `/tmp`
      and `/dev/shm` capped at `max_memory_mb` each; `/proc/sys` and the other kernel
      knobs read-only; no `/root`, `/home`, `/var`, `/run`, `/sys` or other host paths.
      Only `env` (plus `PATH`, `HOME=/tmp`, `LANG`) reaches the command, never this
      process's environment;
    - limits: `timeout` seconds (then `bwrap` is SIGKILLed; the pid namespace takes every
      sandboxed process with it, background and `setsid` ones included); a timeout the
      model asks for is capped at `max_timeout` (default: `timeout`); `max_output_bytes` of
      combined stdout/stderr (then the command is killed, `truncated=True`);
      `max_processes` tasks and `max_memory_mb` for the whole command through per-command
      cgroups when they can be had (this process's cgroup, a delegated cgroup v2 subtree,
      or a `systemd-run --scope`; `process_limit`, `memory_limit`), and `RLIMIT_NPROC` and
      `RLIMIT_AS` (per process) always; `max_disk_mb`: the most one command may write to
      the workspace (exact on the overlay; without it, the workspace is measured every half
      second and the command killed past it) and the largest file it may write
      (`RLIMIT_FSIZE`).

    A fallback (no cgroup, no overlay) is logged once and stated in the first answer.
    When the command exits, its leftover background processes are killed with the pid
    namespace. Raises `RuntimeError` at construction when `bwrap`, `prlimit` (or, as root,
    `setpriv`) or libseccomp is missing or user namespaces do not work; it never falls back
    to running commands unsandboxed.
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
        overlay: bool = True,
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
        if seccomp is None:
            _warn_once(
                "seccomp",
                "BubblewrapSandbox(seccomp=None): commands run without a seccomp filter "
                "(ptrace, bpf, io_uring, network sockets, ... are the kernel's to refuse).",
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
        self._pids = find_own_cgroup("pids")
        self._memory = find_own_cgroup("memory")
        if self._pids is None or self._memory is None:
            delegated = find_delegated_v2(
                [name for name, base in (("pids", self._pids), ("memory", self._memory))
                 if base is None]
            )
            self._pids = self._pids or delegated.get("pids")
            self._memory = self._memory or delegated.get("memory")
        self._scopes: SystemdScopes | None = None
        if self._pids is None and self._memory is None:
            self._scopes = find_systemd_scopes(user=not self._as_root)
        self._notes_lock = threading.Lock()
        self._first_notes: list[str] = []
        """Said once, in the first answer: the fallbacks this sandbox runs with."""
        self._warn_limits()
        self._overlay = bool(overlay) and max_disk_mb is not None
        self._disable_userns, overlay_failure = self._probe()
        if self._overlay and overlay_failure is not None:
            self._fall_back_from_overlay(overlay_failure)

    # ------------------------------------------------------------------ what it runs with

    def _warn_limits(self) -> None:
        """Log once per process, and say in this sandbox's first answer, which limits
        have no per-command cgroup behind them."""
        uid = self.sandbox_ids[0]
        if self.process_limit == "rlimit":
            _warn_once(
                "pids",
                "BubblewrapSandbox: no per-command pids cgroup (no writable cgroup, no "
                "delegated cgroup v2, no systemd-run scope); max_processes is enforced with "
                "RLIMIT_NPROC only, which counts every process of the sandbox's host uid.",
            )
            self._first_notes.append(
                f"[sandbox limits: no per-command cgroup here, so max_processes="
                f"{self.max_processes} counts every process of host uid {uid} (RLIMIT_NPROC)]"
            )
        if self.memory_limit == "rlimit":
            _warn_once(
                "memory",
                "BubblewrapSandbox: no per-command memory cgroup; max_memory_mb bounds each "
                "process's address space (RLIMIT_AS) and each tmpfs, not the whole command.",
            )
            self._first_notes.append(
                f"[sandbox limits: no per-command cgroup here, so max_memory_mb="
                f"{self.max_memory_mb} bounds each process (RLIMIT_AS), not the command's "
                "processes together]"
            )

    def _fall_back_from_overlay(self, why: str) -> None:
        self._overlay = False
        _warn_once(
            "overlay:" + why,
            "BubblewrapSandbox: the workspace overlay is unavailable here (%s); "
            "max_disk_mb is enforced by measuring the workspace every %gs instead, and "
            "a command's changes are kept even when it is killed.",
            why,
            _DISK_POLL,
        )
        with self._notes_lock:
            self._first_notes.append(
                f"[disk budget: no workspace overlay here ({why}); the workspace is measured "
                f"every {_DISK_POLL:g}s and the command killed past max_disk_mb, and what it "
                "wrote until then stays]"
            )

    @property
    def process_limit(self) -> str:
        """How `max_processes` is enforced: `"cgroup"` (per command: this process's or a
        delegated cgroup, or a systemd scope) or `"rlimit"`."""
        return self._enforced_by(self._pids, "pids")

    @property
    def memory_limit(self) -> str:
        """How `max_memory_mb` is enforced: `"cgroup"` (the whole command's memory) or
        `"rlimit"` (each process's address space, and each tmpfs's size)."""
        return self._enforced_by(self._memory, "memory")

    def _enforced_by(self, own: object, controller: str) -> str:
        """`"cgroup"` when a cgroup of this process (`own`) or a systemd scope has
        `controller`, else `"rlimit"`."""
        scoped = self._scopes is not None and controller in self._scopes.controllers
        return "cgroup" if own is not None or scoped else "rlimit"

    @property
    def disk_limit(self) -> str:
        """How `max_disk_mb` is enforced: `"overlay"` (exact, and a command over it, or
        killed, changes nothing), `"guard"` (measured every half second) or `"none"`."""
        if self.max_disk_mb is None:
            return "none"
        return "overlay" if self._overlay else "guard"

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
        size = str(self.max_memory_mb * _MIB)
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

    def _drop_to_sandbox_user(self) -> list[str]:
        """As root: `setpriv` to the sandbox uid/gid, no groups, no capabilities to gain."""
        uid, gid = self.sandbox_ids
        return [
            "/usr/bin/setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]

    def _host_tree(self, workspace: str) -> list[str]:
        """A privileged stage's mounts: the host's tree, devices usable for the inner
        `--dev` (plain `--bind` is nodev), a small `/tmp` and the workspace at `workspace`."""
        return ["--dev-bind", "/", "/", "--size", "65536", "--tmpfs", "/tmp",
                "--bind", self.root_dir, workspace]  # fmt: skip

    def _unprivileged(self, inner: list[str]) -> list[str]:
        """As root: `inner` (a bwrap command line) started as the sandbox user.

        A first, privileged `bwrap` (a mount namespace only) shows the workspace at `_HOLD`,
        so the unprivileged one can reach it even under a directory only root may enter
        (`/root`, pytest's temporary directories); then `setpriv` drops to the sandbox
        uid/gid with no supplementary groups and no capabilities left to gain.
        """
        return [
            self.bwrap,
            "--die-with-parent",
            *self._host_tree(_HOLD),
            "--",
            *self._drop_to_sandbox_user(),
            *inner,
        ]

    def _staged(
        self, inner: list[str], handshake: Handshake, cgroups: Sequence[str] = ()
    ) -> list[str]:
        """`inner` (a bwrap command line on `MERGED`) started from the overlay stage.

        The stage is a `bwrap` with the host's tree (`--dev-bind / /`, so that the inner
        `--dev` works), the workspace at `LOWER`, and a tmpfs of the disk budget (plus
        `SLACK_BYTES`) at `LAYER` holding `upper`, made with the workspace root's mode (the
        overlay's root takes its attributes from it), and `work`. As an ordinary user it
        has a user namespace of its own in which it is root with every capability (needed
        to mount the overlay and to start the inner bwrap; they reach nothing outside that
        namespace, and the sandbox drops them all); as root it is a mount namespace, and
        `setpriv` drops to the sandbox user before the sandbox is built.
        """
        assert self.max_disk_mb is not None
        mode = stat.S_IMODE(os.stat(self.root_dir).st_mode)
        args = [self.bwrap, "--die-with-parent"]
        if not self._as_root:
            args += ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL"]
        owner = "{}:{}".format(*self.sandbox_ids) if self._as_root else ""
        args += [
            *self._host_tree(LOWER),
            "--size",
            str(self.max_disk_mb * _MIB + SLACK_BYTES),
            "--perms",
            "0700",
            "--tmpfs",
            LAYER,
            "--perms",
            f"{mode:04o}",
            "--dir",
            LAYER + "/upper",
            "--dir",
            LAYER + "/work",
            "--dir",
            MERGED,
            "--bind",
            handshake.control_dir,
            CONTROL,
            "--",
            "/bin/sh",
            "-c",
            STAGE_SCRIPT,
            "fathom-stage",
            owner,
            mount_options(self._as_root),
            str(len(cgroups)),
            *(os.path.join(path, "cgroup.procs") for path in cgroups),
        ]
        if self._as_root:
            args += self._drop_to_sandbox_user()
        return args + inner

    def _sandbox_argv(
        self,
        command: Sequence[str],
        *,
        disable_userns: bool,
        seccomp_fd: int | None = None,
        handshake: Handshake | None = None,
        cgroups: Sequence[str] = (),
    ) -> list[str]:
        """The command line of one sandbox; on the overlay when given a `handshake` (the
        stage then joins `cgroups`; otherwise the caller wraps the line with `in_cgroups`)."""
        if handshake is not None:
            inner = self._bwrap_args(
                command, disable_userns=disable_userns, source=MERGED, seccomp_fd=seccomp_fd
            )
            return self._staged(inner, handshake, cgroups)
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
        memory = self.max_memory_mb * _MIB
        limits = [f"--nproc={self.max_processes}", f"--as={memory}", "--core=0"]
        if self.max_disk_mb is not None:
            limits.append(f"--fsize={self.max_disk_mb * _MIB}")
        return ["/usr/bin/prlimit", *limits, "--", *argv]

    def _cgroup_memory(self) -> int:
        """The memory limit of the command's cgroup. On the overlay the files the command
        writes are tmpfs pages until it ends, and they count in it too (as `/tmp` does)."""
        return self.max_memory_mb * _MIB

    def _environment(self) -> dict[str, str]:
        environment = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        environment.update(self.env)
        return environment

    def _probe(self) -> tuple[bool, str | None]:
        """Check that a sandbox starts here: whether `--disable-userns` is supported, and
        why the overlay cannot be used (`None` when it can)."""
        if not os.path.exists("/usr/bin/prlimit"):
            raise RuntimeError(
                "prlimit (util-linux) is missing at /usr/bin/prlimit; BubblewrapSandbox "
                "needs it to set process and memory limits: apt-get install util-linux."
            )
        key = (self.bwrap, *self.sandbox_ids)
        with _probe_lock:
            if key not in _probed:
                _probed[key] = self._probe_plain()
            disable = _probed[key]
        if not self._overlay:
            return disable, None
        # The overlay depends on the workspace's filesystem too (a lower layer overlayfs
        # cannot use): checked once per filesystem.
        where = (*key, os.stat(self.root_dir).st_dev)
        with _probe_lock:
            if where not in _overlay_probed:
                _overlay_probed[where] = self._probe_overlay(disable)
            return disable, _overlay_probed[where]

    def _start_probe(
        self, argv: list[str], fds: Sequence[int]
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                env=self._environment(),
                check=False,
                pass_fds=tuple(fds),
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise RuntimeError(f"bubblewrap could not be started: {error}") from error

    def _probe_plain(self) -> bool:
        detail = ""
        code = 0
        for disable in (True, False):
            fd = self._seccomp_fd()
            try:
                result = self._start_probe(
                    self._sandbox_argv(["/usr/bin/true"], disable_userns=disable, seccomp_fd=fd),
                    () if fd is None else (fd,),
                )
            finally:
                if fd is not None:
                    os.close(fd)
            if result.returncode == 0:
                if not disable:
                    logger.warning(
                        "this bwrap has no --disable-userns (bubblewrap < 0.8): commands "
                        "can create nested user namespaces inside the sandbox."
                    )
                return disable
            code = result.returncode
            detail = detail or result.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(
            f"bubblewrap cannot create a sandbox here ({detail or code}). "
            "It needs unprivileged user namespaces: enable them with `sysctl -w "
            "kernel.unprivileged_userns_clone=1` (Debian/Ubuntu kernels), `sysctl -w "
            "user.max_user_namespaces=15000`, or `sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+); in a "
            "container, run it with a seccomp/AppArmor profile that allows unshare/"
            "clone of user namespaces (e.g. docker --security-opt seccomp=unconfined)."
        )

    def _probe_overlay(self, disable: bool) -> str | None:
        """Run `true` on the overlay; why it failed, or `None`."""
        if self.max_disk_mb is None:
            return None
        handshake = Handshake()
        try:
            argv = self._sandbox_argv(
                ["/usr/bin/true"], disable_userns=disable, handshake=handshake
            )
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                )
            except OSError as error:
                return f"the stage could not start: {error}"
            handshake.start(proc.pid)
            try:
                output, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            handshake.wait()
            if handshake.layer_fd is not None and proc.returncode == 0:
                return None
            said = output.decode("utf-8", "replace").strip()
            why = handshake.failure if handshake.failure not in (None, EARLY) or not said else said
            return (why or f"exit {proc.returncode}").replace("\n", "; ")[:300]
        finally:
            handshake.close()

    # ------------------------------------------------------------------ one command

    def _take_first_notes(self) -> list[str]:
        with self._notes_lock:
            notes, self._first_notes = self._first_notes, []
        return notes

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
                (self._memory, self._cgroup_memory()),
            ):
                if base is not None:
                    run.cgroups.append((base, base.create(limit)))
            if self._overlay:
                run.handshake = Handshake()
            elif self.max_disk_mb is not None:
                run.guard = _DiskGuard(self.root_dir, self.max_disk_mb * _MIB)
        except OSError as error:
            self._finish(run, None)
            return ExecuteResponse(
                output=f"Error: could not set up the command's limits: {error}", exit_code=1
            )
        inner = self._limited(["/bin/sh", "-c", command])
        try:
            fd = self._seccomp_fd()
        except OSError as error:
            self._finish(run, None)
            return ExecuteResponse(
                output=f"Error: could not load the seccomp filter: {error}", exit_code=1
            )
        if fd is not None:
            run.fds.append(fd)
        cgroups = [path for _, path in run.cgroups]
        sandbox = self._sandbox_argv(
            inner,
            disable_userns=self._disable_userns,
            seccomp_fd=fd,
            handshake=run.handshake,
            cgroups=cgroups,
        )
        if run.handshake is None:
            sandbox = in_cgroups(cgroups, sandbox)
        if self._scopes is not None:
            sandbox = [
                *self._scopes.prefix(tasks=self.max_processes, memory=self._cgroup_memory()),
                *sandbox,
            ]
        run.argv = sandbox
        return run

    def _finish(self, run: _Run, result: ProcessResult | str | None) -> None:
        """After the command: stop the guard, apply or discard the overlay's changes, note
        what the kernel killed, remove the cgroups, and (without the overlay) clear
        setuid/setgid bits the command left in the workspace."""
        if run.guard is not None:
            run.guard.stop()
        for fd in run.fds:
            os.close(fd)
        run.fds.clear()
        if run.handshake is not None:
            try:
                self._settle_overlay(run, result)
            finally:
                run.handshake.close()
        memory_killed = any(
            base.controller == "memory" and base.oom_kills(path) for base, path in run.cgroups
        )
        if (
            not memory_killed
            and self._scopes is not None
            and run.handshake is not None
            and run.handshake.cgroup is not None
        ):
            memory_killed = oom_kills_v2(run.handshake.cgroup) > 0
        if memory_killed:
            run.notes.append(
                f"[memory limit: the command used more than {self.max_memory_mb} MiB in "
                "all; the kernel killed processes of it]"
            )
        for _, path in run.cgroups:
            remove_cgroup(path)
        if run.guard is not None and run.guard.tripped:
            run.notes.append(
                f"[killed: the command wrote more than {self.max_disk_mb} MiB to the "
                "workspace; delete what is not needed]"
            )
        if run.handshake is None:
            _sweep(self.root_dir, strip=True)

    def _settle_overlay(self, run: _Run, result: ProcessResult | str | None) -> None:
        """Apply the overlay's changes to the workspace, or discard them, and say which."""
        handshake = run.handshake
        assert handshake is not None and self.max_disk_mb is not None
        handshake.wait()
        killed = not isinstance(result, ProcessResult) or result.timed_out or result.capped
        if handshake.layer_fd is None:  # the overlay was never mounted: nothing ran on it
            if handshake.failure is not None and not killed and (
                isinstance(result, ProcessResult) and result.exit_code == 125
            ):
                run.rerun = True  # the stage could not mount it; the command did not run
                self._fall_back_from_overlay(handshake.failure[:200])
            return
        if killed:
            if has_changes(handshake.layer_fd):
                run.discarded = True
                run.notes.append(_UNCHANGED_KILLED)
            return
        if layer_usage(handshake.layer_fd) > self.max_disk_mb * _MIB:
            run.discarded = True
            run.notes.append(
                f"[disk budget: the command wrote more than max_disk_mb={self.max_disk_mb} MiB "
                "to the workspace; none of its changes were applied, the workspace is as it "
                "was before the command]"
            )
            return
        run.applied = apply_changes(
            handshake.layer_fd, self.root_dir, privileged=self._as_root
        )
        if run.applied.errors:
            shown = "; ".join(run.applied.errors[:3])
            more = len(run.applied.errors) - 3
            run.notes.append(
                f"[{len(run.applied.errors)} of the command's changes could not be applied to "
                f"the workspace ({shown}{f'; {more} more' if more > 0 else ''}); the others "
                "were]"
            )

    # ------------------------------------------------------------------ execute

    def execute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Run `command` with `/bin/sh -c` in a fresh sandbox; never raises for the command.

        Output is stdout and stderr combined; `on_output` receives it as it arrives. At the
        timeout the sandbox is killed and `exit_code` is 124 (the output so far is kept);
        past `max_output_bytes` it is killed and `truncated=True`. A `timeout` above
        `max_timeout` is lowered to it (the output says so). On the overlay, a command that
        is killed or writes more than `max_disk_mb` changes nothing in the workspace (the
        output says so; a command that exited 0 then reports exit code 1).
        """
        run = self._prepare(command, timeout)
        if isinstance(run, ExecuteResponse):
            return run
        result: ProcessResult | str | None = None
        try:
            result = run_process(run.argv, **self._process(run, on_output))
        finally:
            self._finish(run, result)
        if run.rerun:
            return self.execute(command, timeout, on_output=on_output)
        return self._response(run, result)

    async def aexecute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Async `execute`; cancelling the call kills the sandbox and everything in it (on
        the overlay, nothing it wrote reaches the workspace)."""
        run = await asyncio.to_thread(self._prepare, command, timeout)
        if isinstance(run, ExecuteResponse):
            return run
        result: ProcessResult | str | None = None
        try:
            result = await arun_process(run.argv, **self._process(run, on_output))
        finally:
            await asyncio.shield(asyncio.to_thread(self._finish, run, result))
        if run.rerun:
            return await self.aexecute(command, timeout, on_output=on_output)
        return self._response(run, result)

    def _process(self, run: _Run, on_output: OutputCallback | None) -> dict[str, Any]:
        """How `run_process` runs the prepared command (its keywords)."""
        starts: list[Callable[[int], None]] = []
        if run.guard is not None:
            starts.append(run.guard.start)
        if run.handshake is not None:
            starts.append(run.handshake.start)

        def on_start(pid: int) -> None:
            for start in starts:
                start(pid)

        return {
            "timeout": run.timeout,
            "capture_bytes": self.max_output_bytes,
            "env": self._environment(),
            "on_output": on_output,
            "on_start": on_start if starts else None,
            "pass_fds": tuple(run.fds),
        }

    def _response(self, run: _Run, result: ProcessResult | str | None) -> ExecuteResponse:
        if not isinstance(result, ProcessResult):
            return ExecuteResponse(output=f"Error: bwrap {result}", exit_code=1)
        response = result.response(run.timeout, [*self._take_first_notes(), *run.notes])
        if run.discarded and response.exit_code == 0:
            return dataclasses.replace(response, exit_code=1)
        return response

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


_UNCHANGED_KILLED = (
    "[the workspace is as it was before the command: it did not finish, so none of its "
    "changes were applied]"
)
