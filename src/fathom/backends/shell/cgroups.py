"""Per-command cgroups for `BubblewrapSandbox`: where they come from, in order.

1. This process's own cgroup, when children can be made in it with a limit: a cgroup v1
   controller (root in a container or CI job usually has one), or a cgroup v2 directory
   whose `cgroup.subtree_control` already enables the controller (`find_own_cgroup`).
2. A delegated cgroup v2 subtree that holds only this process, such as the one
   `systemd-run --user --scope -p Delegate=yes fathom ...` gives (`find_delegated_v2`):
   fathom moves itself into a leaf `fathom-main`, enables the controllers, and makes
   per-command children beside it.
3. A transient systemd scope per command (`systemd-run [--user] --scope -p MemoryMax=...
   -p TasksMax=...`, `SystemdScopes`), when a systemd manager answers: systemd moves the
   command in, so no write access to any cgroup is needed (it costs a D-Bus round trip per
   command).
4. Otherwise none: the limits fall back to per-process rlimits, and the sandbox's first
   answer says so.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CGROUP_REAP_S",
    "CgroupBase",
    "SystemdScopes",
    "cgroup_mounts",
    "find_delegated_v2",
    "find_own_cgroup",
    "find_systemd_scopes",
    "in_cgroups",
    "oom_kills_v2",
    "remove_cgroup",
]

logger = logging.getLogger(__name__)

_V2_ROOT = "/sys/fs/cgroup"
_LEAF = "fathom-main"
"""The leaf a delegated cgroup's own process (fathom) moves into (`find_delegated_v2`)."""

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
class CgroupBase:
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
            remove_cgroup(path)
            raise
        return path

    def oom_kills(self, path: str) -> int:
        """How many processes the kernel killed in the child `path` for memory."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _oom_kill_count(os.path.join(path, name))


def cgroup_mounts() -> list[tuple[str, str, set[str]]]:
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


def find_own_cgroup(controller: str) -> CgroupBase | None:
    """This process's cgroup for `controller` (v1 or delegated v2), if children can be
    made there with a limit; `None` otherwise."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    candidates: list[CgroupBase] = []
    mounts = cgroup_mounts()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controller in controllers.split(","):
            for point, fstype, options in mounts:
                if fstype == "cgroup" and controller in options:
                    candidates.append(
                        CgroupBase(os.path.join(point, relative), 1, controller)
                    )
        elif controllers == "":
            for point, fstype, _ in mounts:
                if fstype == "cgroup2":
                    candidates.append(CgroupBase(os.path.join(point, relative), 2, controller))
    for base in candidates:
        try:
            probe = base.create(1 << 30 if controller == "memory" else 1)
        except OSError:
            continue
        remove_cgroup(probe)
        return base
    return None


CGROUP_REAP_S = 10.0
"""How long removing a sandbox's cgroup waits for its killed tasks to be reaped."""


def remove_cgroup(path: str) -> None:
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


def in_cgroups(paths: Sequence[str], argv: list[str]) -> list[str]:
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


def _own_v2_path() -> str | None:
    """This process's cgroup v2 directory, when the unified hierarchy is mounted."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    if relative is None:
        return None
    for point, fstype, _ in cgroup_mounts():
        if fstype == "cgroup2":
            return os.path.join(point, relative.lstrip("/"))
    return None


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def find_delegated_v2(controllers: Sequence[str]) -> dict[str, CgroupBase]:
    """Bases for `controllers` in this process's own cgroup v2 directory when it is
    delegated to this user and holds no other process; `{}` otherwise.

    cgroup v2 lets a cgroup either hold processes or have controllers enabled for its
    children. A delegated cgroup that holds only fathom (a `systemd-run --user --scope -p
    Delegate=yes` started for it) is made usable by moving fathom into a leaf child,
    `fathom-main`, and enabling the controllers; per-command children then sit beside it.
    """
    own = _own_v2_path()
    if own is None:
        return {}
    if os.path.basename(own) == _LEAF:  # moved there by an earlier sandbox of this process
        own = os.path.dirname(own)
    control = os.path.join(own, "cgroup.subtree_control")
    procs = os.path.join(own, "cgroup.procs")
    if not (os.access(control, os.W_OK) and os.access(procs, os.W_OK)):
        return {}
    try:
        available = set(_read(os.path.join(own, "cgroup.controllers")).split())
        wanted = [name for name in controllers if name in available]
        if not wanted:
            return {}
        members = {int(pid) for pid in _read(procs).split()}
        if members - {os.getpid()}:
            return {}  # another process is there: it cannot be moved out from under it
        if members:
            leaf = os.path.join(own, _LEAF)
            os.makedirs(leaf, exist_ok=True)
            _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
        enabled = set(_read(control).split())
        missing = [name for name in wanted if name not in enabled]
        if missing:
            _write(control, " ".join(f"+{name}" for name in missing))
    except (OSError, ValueError) as error:
        logger.info("the delegated cgroup %s cannot be used: %s", own, error)
        return {}
    found = {}
    for name in wanted:
        base = CgroupBase(own, 2, name)
        try:
            probe = base.create(1 << 30 if name == "memory" else 1)
        except OSError:
            continue
        remove_cgroup(probe)
        found[name] = base
    if found:
        logger.info("per-command cgroups under the delegated cgroup %s", own)
    return found


def oom_kills_v2(cgroup: str) -> int:
    """How many processes the kernel killed for memory in the cgroup v2 `cgroup` (a path
    relative to the hierarchy's root, as `/proc/<pid>/cgroup` gives it)."""
    return _oom_kill_count(os.path.join(_V2_ROOT, cgroup.lstrip("/"), "memory.events"))


def _oom_kill_count(path: str) -> int:
    """The `oom_kill` count of the memory events file `path`; 0 when it cannot be read."""
    try:
        for line in _read(path).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


@dataclass(frozen=True)
class SystemdScopes:
    """Per-command transient scopes made by systemd (`systemd-run --scope`).

    `user` picks the user's manager (`--user`, for an ordinary user) or the system's (root).
    `controllers` are those whose limits a probe saw applied (`pids`, `memory`).
    """

    user: bool
    controllers: frozenset[str]

    def prefix(self, *, tasks: int, memory: int) -> list[str]:
        """The `systemd-run` command line that starts the rest inside a new scope."""
        argv = [_SYSTEMD_RUN]
        if self.user:
            argv.append("--user")
        argv += ["--scope", "--quiet", "--collect"]
        if "pids" in self.controllers:
            argv += ["-p", f"TasksMax={tasks}"]
        if "memory" in self.controllers:
            argv += ["-p", f"MemoryMax={memory}", "-p", "MemorySwapMax=0"]
        return [*argv, "--"]


_SYSTEMD_RUN = "/usr/bin/systemd-run"
_SYSTEMD_PROBE = (
    'cg=$(sed -n "s/^0:://p" /proc/self/cgroup); d=/sys/fs/cgroup$cg; '
    'echo "pids=$(cat "$d/pids.max" 2>/dev/null) memory=$(cat "$d/memory.max" 2>/dev/null)"'
)


_scopes_probed: dict[bool, SystemdScopes | None] = {}
_scopes_lock = threading.Lock()


def find_systemd_scopes(*, user: bool, timeout: float = 15) -> SystemdScopes | None:
    """Whether `systemd-run --scope` can limit a command here, and which controllers
    (probed once per process: one throwaway scope)."""
    with _scopes_lock:
        if user not in _scopes_probed:
            _scopes_probed[user] = _probe_systemd_scopes(user=user, timeout=timeout)
        return _scopes_probed[user]


def _probe_systemd_scopes(*, user: bool, timeout: float) -> SystemdScopes | None:
    if not os.path.exists(_SYSTEMD_RUN):
        return None
    if user and not (os.environ.get("XDG_RUNTIME_DIR") or os.environ.get(
        "DBUS_SESSION_BUS_ADDRESS"
    )):
        return None  # no user session bus: the user's manager cannot be reached
    probe = SystemdScopes(user, frozenset({"pids", "memory"}))
    argv = [*probe.prefix(tasks=4321, memory=987_654_144), "/bin/sh", "-c", _SYSTEMD_PROBE]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    seen = dict(part.split("=", 1) for part in done.stdout.split() if "=" in part)
    controllers = {
        name for name, value in (("pids", "4321"), ("memory", "987654144"))
        if seen.get(name) == value
    }
    if not controllers:
        return None
    return SystemdScopes(user, frozenset(controllers))
