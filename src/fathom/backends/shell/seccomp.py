"""The seccomp filter `BubblewrapSandbox` hands to `bwrap --seccomp FD`.

A deny-list over the native architecture, built with libseccomp (through `pyseccomp`, a
ctypes binding with libseccomp's own Python API) and exported as a classic BPF program.
bwrap loads it into the sandboxed command after the sandbox is built, just before it
executes the command, so every process of the command runs under it and no process can
remove it. `docs/security.md` gives the reason for each rule.

Refused calls fail with `EPERM` ("Operation not permitted"), except `clone3`, which fails
with `ENOSYS`: its flags are in memory the filter cannot read, and `ENOSYS` makes libc fall
back to `clone`, whose flags the filter checks (an `EPERM` would break thread creation).
System calls of another architecture (32-bit x86 through `int 0x80`, the x32 ABI) kill the
process: the rules are written for native numbers only.
"""

from __future__ import annotations

import errno
import functools
import os
from dataclasses import dataclass, field, replace
from typing import Any

from fathom.errors import FathomError

__all__ = [
    "DENIED_SYSCALLS",
    "SeccompProfile",
    "SeccompUnavailable",
]

DENIED_SYSCALLS: frozenset[str] = frozenset(
    {
        # another process's memory and registers
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "process_madvise",
        # the kernel keyring (shared per user across namespaces)
        "keyctl",
        "add_key",
        "request_key",
        # kernel attack surface with a history of exploits
        "bpf",
        "userfaultfd",
        "perf_event_open",
        "io_uring_setup",  # also opens sockets without socket(2), past the network rule
        "io_uring_enter",
        "io_uring_register",
        # loading code into the kernel, or another kernel
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        # the mount table, old and new mount APIs
        "mount",
        "umount2",
        "pivot_root",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        # other namespaces
        "setns",
        # file handles that bypass path permission checks
        "open_by_handle_at",
        # hardware and machine state
        "iopl",
        "ioperm",
        "swapon",
        "swapoff",
        "reboot",
        "acct",
        "quotactl",
        "quotactl_fd",
    }
)
"""The system calls the default profile answers with `EPERM` whatever their arguments."""

_CLONE_NAMESPACES = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_CLONE_NEWTIME = 0x00000080
"""`unshare` only: for `clone` the bit is part of the exit signal (CSIGNAL)."""

_PERSONALITY_QUERY = 0xFFFFFFFF
_PERSONALITY_ALLOWED_BITS = 0x00020008
"""`PER_LINUX32` (0x8) and `UNAME26` (0x20000): the personalities `setarch`/`linux32` set.
Any other bit (`ADDR_NO_RANDOMIZE`, `READ_IMPLIES_EXEC`, `MMAP_PAGE_ZERO`, other
personas) is refused; `0xffffffff` (the query) is allowed."""

_AF_UNIX = 1


class SeccompUnavailable(FathomError, RuntimeError):
    """libseccomp (or its `pyseccomp` binding) cannot be loaded here."""


@dataclass(frozen=True)
class SeccompProfile:
    """What the sandbox's seccomp filter refuses. Immutable; `deny(...)` extends it.

    Attributes:
        denied: System calls answered `EPERM` whatever their arguments (names as in
            `man 2 syscalls`). Names this architecture lacks are skipped; a name no
            architecture has is refused when the sandbox is built (`ValueError`).
        unavailable: System calls answered `ENOSYS`, as if the kernel lacked them
            (`clone3`: libc then uses `clone`).
        namespace_flags: refuse `clone` and `unshare` that would create a namespace
            (`CLONE_NEWUSER`, `CLONE_NEWNS`, `CLONE_NEWNET`, ...).
        personality: refuse `personality` changes other than the Linux personalities
            (`PER_LINUX`, `PER_LINUX32`, `UNAME26`); the query stays allowed.
        network_sockets: when the sandbox has no network (`network=False`), refuse
            `socket()` for every address family but `AF_UNIX` (so `AF_INET`, `AF_INET6`,
            `AF_PACKET`, `AF_NETLINK`, ... fail at creation, not at `connect`).

    Example: `BubblewrapSandbox(ws, seccomp=SeccompProfile().deny("chroot", "mknod"))`.
    """

    denied: frozenset[str] = field(default=DENIED_SYSCALLS)
    unavailable: frozenset[str] = field(default=frozenset({"clone3"}))
    namespace_flags: bool = True
    personality: bool = True
    network_sockets: bool = True

    def __post_init__(self) -> None:
        for name in ("denied", "unavailable"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(item, str) for item in value):
                raise TypeError(f"SeccompProfile.{name} must be a set of system call names.")
            object.__setattr__(self, name, frozenset(value))

    def deny(self, *names: str) -> SeccompProfile:
        """This profile with `names` answered `EPERM` too."""
        return replace(self, denied=self.denied | frozenset(names))

    def allow(self, *names: str) -> SeccompProfile:
        """This profile without the unconditional rules for `names` (a narrower profile:
        use it only for a workload that needs one of them, such as `ptrace` for a debugger)."""
        drop = frozenset(names)
        return replace(self, denied=self.denied - drop, unavailable=self.unavailable - drop)

    def program(self, *, network: bool) -> bytes:
        """The classic BPF program for a sandbox with or without network; cached.

        Raises `SeccompUnavailable` when libseccomp cannot be loaded and `ValueError` for
        a system call name libseccomp does not know."""
        return _program(self, network)


def _library() -> Any:
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError) as error:  # RuntimeError: no libseccomp
        raise SeccompUnavailable(
            f"the seccomp filter needs libseccomp and its Python binding ({error}): "
            "pip install pyseccomp, and apt-get install libseccomp2 (Debian/Ubuntu), "
            "dnf install libseccomp (Fedora) or apk add libseccomp (Alpine); or pass "
            "seccomp=None to run commands without a filter."
        ) from error
    return pyseccomp


def _number(lib: Any, name: str, *, strict: bool) -> int | None:
    """The native number of syscall `name`; `None` when this architecture lacks it."""
    number = int(lib.resolve_syscall(lib.Arch.NATIVE, name))
    if number == -1:  # __NR_SCMP_ERROR: libseccomp knows no call of that name
        if strict:
            raise ValueError(f"seccomp: unknown system call {name!r}")
        return None
    return number if number >= 0 else None  # negative: a call of another architecture


@functools.lru_cache(maxsize=16)
def _program(profile: SeccompProfile, network: bool) -> bytes:
    lib = _library()
    scfilter = lib.SyscallFilter(lib.ALLOW)
    scfilter.set_attr(lib.Attr.ACT_BADARCH, lib.KILL_PROCESS)
    eperm = lib.ERRNO(errno.EPERM)
    custom = profile.denied - DENIED_SYSCALLS
    for name in sorted(profile.denied):
        number = _number(lib, name, strict=name in custom)
        if number is not None:
            scfilter.add_rule(eperm, number)
    for name in sorted(profile.unavailable):
        number = _number(lib, name, strict=name != "clone3")
        if number is not None and name not in profile.denied:
            scfilter.add_rule(lib.ERRNO(errno.ENOSYS), number)
    if profile.namespace_flags:
        for flag in _CLONE_NAMESPACES:
            scfilter.add_rule(eperm, "clone", lib.Arg(0, lib.MASKED_EQ, flag, flag))
        if "unshare" not in profile.denied:
            for flag in (*_CLONE_NAMESPACES, _CLONE_NEWTIME):
                scfilter.add_rule(eperm, "unshare", lib.Arg(0, lib.MASKED_EQ, flag, flag))
    if profile.personality and "personality" not in profile.denied:
        # One comparison per rule (libseccomp allows no more on one argument): with bit 31
        # clear, any bit outside the allowed ones; with bit 31 set, any bit clear (so only
        # 0xffffffff, the query, passes). The kernel reads the low 32 bits only.
        top = 0x80000000
        for bit in range(31):
            value = 1 << bit
            if not value & _PERSONALITY_ALLOWED_BITS:
                scfilter.add_rule(
                    eperm, "personality", lib.Arg(0, lib.MASKED_EQ, value | top, value)
                )
            scfilter.add_rule(eperm, "personality", lib.Arg(0, lib.MASKED_EQ, value | top, top))
    if profile.network_sockets and not network and "socket" not in profile.denied:
        scfilter.add_rule(eperm, "socket", lib.Arg(0, lib.NE, _AF_UNIX))
    fd = os.memfd_create("fathom-seccomp-export", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as handle:
            scfilter.export_bpf(handle)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def program_fd(program: bytes) -> int:
    """A new memfd holding `program`, at offset 0, for `bwrap --seccomp FD` (the caller
    passes it to the child and closes it; bwrap reads it to the end and closes its copy)."""
    fd = os.memfd_create("fathom-seccomp", os.MFD_CLOEXEC)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
