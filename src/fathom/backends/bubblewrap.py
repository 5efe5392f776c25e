"""`BubblewrapSandbox`: shell commands in a bubblewrap (`bwrap`) sandbox on the local machine.

Each `execute` call starts a fresh `bwrap` with new user, mount, pid, ipc, uts, cgroup and
(unless `network=True`) network namespaces. The workspace directory is bound read-write at
`/workspace`; `/usr` (with the `/bin`, `/lib`, `/lib64`, `/sbin` entries) and an allow-list
of `/etc` files are bound read-only; `/tmp` is a private, size-capped tmpfs; `/proc` and
`/dev` are fresh minimal instances. Nothing else of the host exists inside (no `/root`,
`/home`, `/var`, `/run`, other workspaces or sockets).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)

__all__ = ["WORKSPACE", "BubblewrapSandbox"]

logger = logging.getLogger(__name__)

WORKSPACE = "/workspace"
"""Where the workspace directory appears inside the sandbox (also the working directory)."""

SANDBOX_UID = 65534
"""`nobody`: the uid and gid commands run as inside the sandbox."""

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
"""The `/etc` entries bound read-only. An allow-list, not `/etc` whole: when fathom runs as
root, the sandbox user maps to host uid 0, so it *owns* every root-owned file it can see and
owner-only files (`/etc/shadow`, `/etc/ssl/private`, `/etc/ssh/*_key`) would be readable."""

_DRAIN_GRACE = 2.0
"""Seconds to keep reading after a kill, until every writer of the pipe is gone."""

_probed: set[str] = set()
_probe_lock = threading.Lock()


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (the outer `bwrap`).

    The sandboxed command runs in its own pid namespace under `bwrap`'s init with
    `--die-with-parent`: once `bwrap` dies the namespace's init dies and the kernel kills
    every process left in the namespace, including ones that called `setsid`.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _PidsCgroup:
    """A per-command `pids` cgroup (v1 or delegated v2), when this process can create one.

    It bounds the number of tasks whatever the uid: `RLIMIT_NPROC` is not enforced for
    processes whose real uid is host root (the kernel exempts `INIT_USER`), which is what a
    user-namespaced sandbox started by root runs as.
    """

    def __init__(self, base: str) -> None:
        self.base = base

    @classmethod
    def find(cls) -> _PidsCgroup | None:
        try:
            with open("/proc/self/cgroup", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return None
        candidates: list[str] = []
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                candidates.append(os.path.join("/sys/fs/cgroup/pids", path.lstrip("/")))
            elif controllers == "":
                candidates.append(os.path.join("/sys/fs/cgroup", path.lstrip("/")))
        for base in candidates:
            cgroup = cls(base)
            try:
                probe = cgroup.create(1)
            except OSError:
                continue
            cgroup.remove(probe)
            return cgroup
        return None

    def create(self, limit: int) -> str:
        """A new child cgroup holding at most `limit` tasks; raises `OSError`."""
        path = os.path.join(self.base, f"fathom-{os.getpid()}-{secrets.token_hex(6)}")
        os.mkdir(path)
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as handle:
                handle.write(str(limit))
        except OSError:
            self.remove(path)
            raise
        return path

    @staticmethod
    def remove(path: str) -> None:
        """Remove a child cgroup once its tasks are gone (they are being killed)."""
        for _ in range(50):
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if error.errno != errno.EBUSY:
                    break
                time.sleep(0.01)
        logger.warning("could not remove cgroup %s", path)


def _in_cgroup(path: str | None, argv: list[str]) -> list[str]:
    """`argv` started inside the cgroup `path`: a tiny `sh` joins it, then execs `argv`.

    Joining before `bwrap` starts counts every task it forks. A shell wrapper rather than a
    `preexec_fn`, which would force a slow `fork()` of this whole process on every command.
    """
    if path is None:
        return argv
    procs = os.path.join(path, "cgroup.procs")
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]


class _Output:
    """Output kept up to `limit` bytes; what comes after is counted and dropped."""

    def __init__(self, limit: int, listener: Callable[[str], None] | None = None) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.listener = listener
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> bool:
        """Keep `chunk` (or the part that fits); `False` once the cap is exceeded."""
        room = self.limit - self.size
        if len(chunk) > room:
            chunk = chunk[: max(room, 0)]
            self.truncated = True
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.listener is not None and chunk:
            try:
                self.listener(self._decoder.decode(chunk))
            except Exception:  # a failing listener must not break the command
                self.listener = None
        return not self.truncated

    def response(self, exit_code: int | None, note: str | None) -> ExecuteResponse:
        data = b"".join(self.chunks)
        if self.truncated:
            # The notice fits inside the cap too: the response never exceeds `limit` bytes.
            notice = f"\n[output truncated at {self.limit:,} bytes; the command was killed]"
            data = data[: max(self.limit - len(notice), 0)]
            return ExecuteResponse(
                output=data.decode("utf-8", errors="replace") + notice,
                exit_code=exit_code,
                truncated=True,
            )
        text = data.decode("utf-8", errors="replace")
        if note:
            text += ("\n" if text and not text.endswith("\n") else "") + note
        return ExecuteResponse(output=text, exit_code=exit_code, truncated=self.truncated)


def _positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value  # not NaN
        and 0 < value < float("inf")
    )


class BubblewrapSandbox(FilesystemBackend):
    """A workspace directory plus shell commands run isolated by bubblewrap (`bwrap`).

    File tools, uploads and downloads are `FilesystemBackend`'s with `virtual_mode=True`
    (the workspace is the jail: `/a.txt` is `<root_dir>/a.txt`). `execute` runs
    `/bin/sh -c command` in `/workspace` inside a fresh sandbox for every call:

    - namespaces: user, mount, pid, ipc, uts, cgroup, and network unless `network=True`
      (a new network namespace has only a down loopback: no host services, no internet);
    - user: uid/gid 65534 inside with every capability dropped (`--cap-drop ALL`),
      `--new-session` (no TIOCSTI into the caller's terminal), `--die-with-parent`;
    - files: the workspace read-write at `/workspace`; `/usr` and an allow-list of `/etc`
      read-only; a private tmpfs `/tmp` capped at `max_memory_mb`; no `/root`, `/home`,
      `/var`, `/run` or other host paths. Only `env` (plus `PATH`, `HOME=/tmp`, `LANG`)
      reaches the command, never this process's environment;
    - limits: `timeout` seconds (then `bwrap` is SIGKILLed; the pid namespace takes every
      sandboxed process with it, background and `setsid` ones included); `max_output_bytes`
      of combined stdout/stderr (then the command is killed, `truncated=True`);
      `max_processes` tasks through a per-command `pids` cgroup when one can be created,
      and `RLIMIT_NPROC` always (the kernel does not enforce it when fathom runs as root);
      `max_memory_mb` of address space per process (`RLIMIT_AS`).

    When the command exits, its leftover background processes are killed with the pid
    namespace. Raises `RuntimeError` at construction when `bwrap` or `prlimit` is missing or
    user namespaces do not work; it never falls back to running commands unsandboxed.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        timeout: float = 120,
        max_output_bytes: int = 100_000,
        network: bool = False,
        max_processes: int = 256,
        max_memory_mb: int = 2048,
        env: Mapping[str, str] | None = None,
        max_file_size_mb: float = 10,
    ) -> None:
        super().__init__(root_dir, virtual_mode=True, max_file_size_mb=max_file_size_mb)
        if not _positive(timeout):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}.")
        for name, value in (
            ("max_output_bytes", max_output_bytes),
            ("max_processes", max_processes),
            ("max_memory_mb", max_memory_mb),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, not {value!r}.")
        self.timeout: float = float(timeout)
        self.max_output_bytes: int = max_output_bytes
        self.network: bool = bool(network)
        self.max_processes: int = max_processes
        self.max_memory_mb: int = max_memory_mb
        self.env: dict[str, str] = dict(env or {})
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise RuntimeError(
                "bubblewrap (bwrap) is not installed: apt-get install bubblewrap (Debian/"
                "Ubuntu), dnf install bubblewrap (Fedora) or apk add bubblewrap (Alpine)."
            )
        self.bwrap: str = bwrap
        self._cgroup = _PidsCgroup.find()
        if self._cgroup is None and os.geteuid() == 0:
            logger.warning(
                "BubblewrapSandbox runs as root without a writable pids cgroup: RLIMIT_NPROC "
                "is not enforced for root, so max_processes is not enforced; only the "
                "timeout bounds a fork bomb."
            )
        self._probe()

    @property
    def process_limit(self) -> str:
        """How `max_processes` is enforced: `"cgroup"`, `"rlimit"` or `"none"` (root)."""
        if self._cgroup is not None:
            return "cgroup"
        return "none" if os.geteuid() == 0 else "rlimit"

    # ------------------------------------------------------------------ the command line

    def _bwrap_args(self, command: Sequence[str]) -> list[str]:
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
        tmp_bytes = str(self.max_memory_mb * 1024 * 1024)
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            tmp_bytes,
            "--tmpfs",
            "/tmp",
            "--bind",
            self.root_dir,
            WORKSPACE,
            "--remount-ro",
            "/",
            "--chdir",
            WORKSPACE,
            "--",
            *command,
        ]
        return args

    def _limited(self, argv: Sequence[str]) -> list[str]:
        memory = self.max_memory_mb * 1024 * 1024
        return [
            "/usr/bin/prlimit",
            f"--nproc={self.max_processes}",
            f"--as={memory}",
            "--core=0",
            "--",
            *argv,
        ]

    def _environment(self) -> dict[str, str]:
        environment = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        environment.update(self.env)
        return environment

    def _probe(self) -> None:
        if not os.path.exists("/usr/bin/prlimit"):
            raise RuntimeError(
                "prlimit (util-linux) is missing at /usr/bin/prlimit; BubblewrapSandbox "
                "needs it to set process and memory limits: apt-get install util-linux."
            )
        with _probe_lock:
            if self.bwrap in _probed:
                return
            try:
                result = subprocess.run(
                    self._bwrap_args(["/usr/bin/true"]),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=30,
                    env=self._environment(),
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                raise RuntimeError(f"bubblewrap could not be started: {error}") from error
            if result.returncode != 0:
                detail = result.stderr.decode("utf-8", "replace").strip()
                raise RuntimeError(
                    f"bubblewrap cannot create a sandbox here ({detail or result.returncode}). "
                    "It needs unprivileged user namespaces: enable them with `sysctl -w "
                    "kernel.unprivileged_userns_clone=1` (Debian/Ubuntu kernels), `sysctl -w "
                    "user.max_user_namespaces=15000`, or `sysctl -w "
                    "kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+); in a "
                    "container, run it with a seccomp/AppArmor profile that allows unshare/"
                    "clone of user namespaces (e.g. docker --security-opt seccomp=unconfined)."
                )
            _probed.add(self.bwrap)

    def _check(self, command: object, timeout: object) -> ExecuteResponse | float:
        if not isinstance(command, str) or not command.strip():
            return ExecuteResponse(output="Error: the command is empty.", exit_code=1)
        if "\x00" in command:
            return ExecuteResponse(output="Error: the command contains a NUL byte.", exit_code=1)
        if timeout is None:
            return self.timeout
        if not _positive(timeout):
            return ExecuteResponse(
                output=f"Error: timeout must be a positive number of seconds, not {timeout!r}.",
                exit_code=1,
            )
        return float(timeout)  # type: ignore[arg-type]

    def _start(self) -> str | None:
        """A fresh pids cgroup for one command (`None` when there is no cgroup support)."""
        if self._cgroup is None:
            return None
        try:
            return self._cgroup.create(self.max_processes)
        except OSError as error:
            raise RuntimeError(f"could not create the command's pids cgroup: {error}") from error

    def _finish(self, path: str | None) -> None:
        if path is not None and self._cgroup is not None:
            self._cgroup.remove(path)

    @staticmethod
    def _final_code(returncode: int, output: _Output) -> int | None:
        """The exit status; `None` when the output cap made us kill the command."""
        if output.truncated and returncode == -signal.SIGKILL:
            return None
        return 128 - returncode if returncode < 0 else returncode

    # ------------------------------------------------------------------ execute

    def execute(
        self,
        command: str,
        timeout: float | None = None,
        *,
        on_output: Callable[[str], None] | None = None,
    ) -> ExecuteResponse:
        """Run `command` with `/bin/sh -c` in a fresh sandbox; never raises for the command.

        Output is stdout and stderr combined; `on_output` receives it as it arrives. At the
        timeout the sandbox is killed and `exit_code` is `None`; past `max_output_bytes` it
        is killed and `truncated=True`.
        """
        checked = self._check(command, timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        output = _Output(self.max_output_bytes, on_output)
        path = self._start()
        argv = _in_cgroup(path, self._bwrap_args(self._limited(["/bin/sh", "-c", command])))
        try:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    start_new_session=True,
                )
            except OSError as error:
                return ExecuteResponse(output=f"Error: could not start bwrap: {error}", exit_code=1)
            try:
                timed_out = self._pump(proc, output, time.monotonic() + checked)
            finally:
                if proc.poll() is None:
                    _kill_group(proc.pid)
                proc.wait()
        finally:
            self._finish(path)
        if timed_out:
            return output.response(None, f"[killed: the command ran past the {checked:g}s timeout]")
        return output.response(self._final_code(proc.returncode, output), None)

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], output: _Output, deadline: float) -> bool:
        """Read until EOF; kill at the deadline or the output cap. `True` if timed out."""
        assert proc.stdout is not None
        stream = proc.stdout.fileno()
        timed_out = False
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            killed_at: float | None = None
            while True:
                now = time.monotonic()
                if killed_at is None and now >= deadline:
                    timed_out = True
                if killed_at is None and (timed_out or output.truncated):
                    _kill_group(proc.pid)
                    killed_at = now
                limit = deadline if killed_at is None else killed_at + _DRAIN_GRACE
                if now >= limit and killed_at is not None:
                    break
                if not selector.select(max(limit - now, 0)):
                    continue
                chunk = os.read(stream, 65536)
                if not chunk:
                    break
                if killed_at is None:
                    output.feed(chunk)
        proc.stdout.close()
        return timed_out

    async def aexecute(
        self,
        command: str,
        timeout: float | None = None,
        *,
        on_output: Callable[[str], None] | None = None,
    ) -> ExecuteResponse:
        """Async `execute`; cancelling the call kills the sandbox and everything in it."""
        checked = self._check(command, timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        output = _Output(self.max_output_bytes, on_output)
        path = self._start()
        argv = _in_cgroup(path, self._bwrap_args(self._limited(["/bin/sh", "-c", command])))
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    start_new_session=True,
                )
            except OSError as error:
                return ExecuteResponse(output=f"Error: could not start bwrap: {error}", exit_code=1)
            timed_out = False
            try:
                timed_out = await self._apump(proc, output, checked)
                returncode = await proc.wait()
            finally:
                if proc.returncode is None:
                    _kill_group(proc.pid)
                    # Reap even when cancelled, so no zombie and no live sandbox is left.
                    await asyncio.shield(proc.wait())
        finally:
            self._finish(path)
        if timed_out:
            return output.response(None, f"[killed: the command ran past the {checked:g}s timeout]")
        return output.response(self._final_code(returncode, output), None)

    @staticmethod
    async def _apump(proc: asyncio.subprocess.Process, output: _Output, limit: float) -> bool:
        assert proc.stdout is not None
        stream = proc.stdout
        timed_out = False
        try:
            async with asyncio.timeout(limit):
                while chunk := await stream.read(65536):
                    if not output.feed(chunk):
                        break
        except TimeoutError:
            timed_out = True
        if timed_out or output.truncated:
            _kill_group(proc.pid)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_GRACE):
                    while await stream.read(65536):
                        pass
        return timed_out

    # ------------------------------------------------------------------ file transfer

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)` into the workspace (overwriting); paths are virtual."""
        return [self._upload_one(path, content) for path, content in files]

    def _upload_one(self, path: str, content: bytes) -> FileUploadResponse:
        if not isinstance(content, bytes | bytearray):
            return FileUploadResponse(path=path, error="Error: content must be bytes.")
        target = self._target(path)
        if isinstance(target, str):
            return FileUploadResponse(path=path, error=target)
        if target.shown == "/" or os.path.isdir(target.real):
            return FileUploadResponse(path=path, error=f"Error: '{target.shown}' is a directory.")
        parent = os.path.dirname(target.real)
        try:
            os.makedirs(parent, exist_ok=True)
            if not self._inside(os.path.realpath(parent)):
                return FileUploadResponse(path=path, error=self._outside_error(target.shown))
            fd, temp = self._temp_file(parent, 0o644)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(bytes(content))
                os.replace(temp, target.real)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as error:
            return FileUploadResponse(path=path, error=self._write_error(target.shown, error))
        return FileUploadResponse(path=path)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each workspace path's bytes (virtual paths, jailed like `read`)."""
        responses = []
        for path in paths:
            target = self._target(path)
            if isinstance(target, str):
                responses.append(FileDownloadResponse(path=path, error=target))
                continue
            got = self._read_target(
                target, self.max_file_size_bytes, "downloaded", "for a download."
            )
            if isinstance(got, str):
                responses.append(FileDownloadResponse(path=path, error=got))
            else:
                responses.append(FileDownloadResponse(path=path, content=got[0]))
        return responses

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async `upload_files`."""
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async `download_files`."""
        return await asyncio.to_thread(self.download_files, paths)
