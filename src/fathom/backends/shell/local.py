"""`LocalShellBackend`: files on local disk plus unrestricted shell commands on the host.

UNSAFE: nothing here is a sandbox. See the class docstring.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)

__all__ = ["DEFAULT_PATH", "LocalShellBackend"]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""`PATH` given to commands when the environment is not inherited and `env` sets none."""

_CHUNK = 64 * 1024
_EXIT_GRACE_S = 0.5
"""After the shell exits, how long to keep reading output that background jobs still write
to the shared pipe before giving up on it (the jobs themselves are left running)."""

OutputCallback = Callable[[str], None]

logger = logging.getLogger(__name__)


class _Output:
    """Collects a command's output: keeps the first `limit` bytes, counts (and drops) the rest.

    Kept text is also passed, decoded, to `on_output` as it arrives.
    """

    def __init__(self, limit: int, on_output: OutputCallback | None) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.kept)
        if room <= 0:
            return
        part = chunk[:room]
        self.kept += part
        if self._on_output is not None:
            final = len(self.kept) >= self.limit
            text = self._decoder.decode(part, final=final)
            if text:
                try:
                    self._on_output(text)
                except Exception:
                    # A broken listener must not break the command; stop calling it.
                    self._on_output = None

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def response(
        self, exit_code: int | None, timeout: float | None, note: str = ""
    ) -> ExecuteResponse:
        """The response: kept output, a truncation note, a note when it was killed, and
        `note` (the timeout cap) when given."""
        output = self.kept.decode("utf-8", errors="replace")
        notes = [note] if note else []
        if self.truncated:
            notes.append(
                f"[output truncated: showing the first {self.limit:,} of {self.total:,} bytes]"
            )
        if timeout is not None:
            notes.append(f"[killed after {timeout:g} s]")
        if notes:
            output = "\n".join([output.rstrip("\n"), *notes] if output else notes)
        return ExecuteResponse(output=output, exit_code=exit_code, truncated=self.truncated)


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group `pgid` (the shell and all it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _error(message: str) -> ExecuteResponse:
    return ExecuteResponse(output=message, exit_code=1)


class LocalShellBackend(FilesystemBackend):
    """UNSAFE: `FilesystemBackend` plus shell commands run directly on the host, unsandboxed.

    `execute` runs `command` with `/bin/sh` as the current user, with that user's full
    privileges: it can read, change or delete any file the user can, reach the network and
    use unbounded CPU, memory and disk. There is no isolation of any kind. `root_dir` is only
    the working directory commands start in, not a jail (`cd /` leaves it), and
    `virtual_mode=True` confines the file tools only: once a shell is available it gives no
    protection at all. Use it for local development with a trusted agent and trusted input,
    never on a server, with untrusted input or in a multi-tenant setting; gate `execute`
    behind human approval (`interrupt_on={"execute": True}`) where that matters.

    Args:
        root_dir: The workspace directory (also the file tools' root); see
            `FilesystemBackend`. Commands run with it as their working directory.
        virtual_mode: As for `FilesystemBackend` (file tools and uploads/downloads only).
        timeout: Seconds a command may run before its whole process group is killed, when
            the caller (the model) gives none.
        max_timeout: The most seconds a caller may ask for; a larger `timeout` given to
            `execute` is lowered to it (and the output says so). `None` (the default)
            means `timeout`: the model cannot raise the operator's limit.
        max_output_bytes: Output (stdout and stderr combined) kept per command; the rest is
            read and discarded, so the command never blocks on a full pipe, and the
            response is marked `truncated`.
        env: Environment variables for commands.
        inherit_env: `True` starts from this process's environment and applies `env` on
            top; `False` (the default) gives commands only `env` (plus `PATH` =
            `DEFAULT_PATH` when `env` sets none), so this process's secrets stay out.
        max_file_size_mb: As for `FilesystemBackend`.

    Each command runs in a new session (its own process group). On timeout, or when an
    `aexecute` call is cancelled, the whole group is killed with SIGKILL, so children die
    too (a process that starts its own session escapes this). When the shell exits normally,
    background jobs it started keep running; output they still send to the shared pipe is
    read for a short grace period only, so redirect their output to a file.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = False,
        *,
        timeout: float = 120,
        max_timeout: float | None = None,
        max_output_bytes: int = 100_000,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        max_file_size_mb: float = 10,
    ) -> None:
        super().__init__(root_dir, virtual_mode, max_file_size_mb)
        if not _valid_timeout(timeout):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}.")
        if max_timeout is not None and not _valid_timeout(max_timeout):
            raise ValueError(
                f"max_timeout must be a positive number of seconds or None, not {max_timeout!r}."
            )
        if isinstance(max_output_bytes, bool) or not (
            isinstance(max_output_bytes, int) and max_output_bytes > 0
        ):
            raise ValueError(f"max_output_bytes must be a positive int, not {max_output_bytes!r}.")
        self.timeout: float = float(timeout)
        self.max_timeout: float = max(self.timeout, float(max_timeout or timeout))
        self.max_output_bytes: int = max_output_bytes
        self.env: dict[str, str] = dict(env or {})
        self.inherit_env: bool = inherit_env
        # Loud by design: nothing about this backend is isolated, and it is easy to forget.
        logger.warning(
            "LocalShellBackend(%s): `execute` runs commands on this host as uid %s with no "
            "isolation (any file the user can reach, the network, no resource limits); "
            "%s. Use BubblewrapSandbox to isolate commands.",
            self.root_dir, os.getuid() if hasattr(os, "getuid") else "?",
            "the file tools are confined to the root, commands are not" if self.virtual_mode
            else "the file tools are NOT confined either (virtual_mode=False): any path on "
            "the host can be read and written",
        )

    # ------------------------------------------------------------------ execute

    def _environment(self) -> dict[str, str]:
        if self.inherit_env:
            return {**os.environ, **self.env}
        environment = dict(self.env)
        environment.setdefault("PATH", DEFAULT_PATH)
        return environment

    def _check(self, command: object, timeout: object) -> ExecuteResponse | tuple[float, str]:
        """The timeout to use and a note when it was capped at `max_timeout`, or an error
        response for a bad command or timeout."""
        if not isinstance(command, str) or not command.strip():
            return _error("Error: the command is empty. Give a shell command such as `ls -la`.")
        if "\x00" in command:
            return _error("Error: the command contains a NUL byte, which no shell accepts.")
        if timeout is None:
            return self.timeout, ""
        # Any positive number (infinity too) is accepted: above the cap it is lowered.
        if not (
            isinstance(timeout, (int, float))
            and not isinstance(timeout, bool)
            and timeout == timeout  # not NaN
            and timeout > 0
        ):
            return _error(f"Error: timeout must be a positive number of seconds, not {timeout!r}.")
        if timeout > self.max_timeout:
            return self.max_timeout, (
                f"[timeout {timeout:g}s is above this backend's limit; it ran with "
                f"{self.max_timeout:g}s]"
            )
        return float(timeout), ""

    def execute(
        self,
        command: str,
        timeout: float | None = None,
        *,
        on_output: OutputCallback | None = None,
    ) -> ExecuteResponse:
        """Run `command` with `/bin/sh` in `root_dir`; never raises for a failing command.

        Args:
            command: The shell command line.
            timeout: Seconds before the process group is killed; `None` uses `self.timeout`.
            on_output: Called with each piece of (kept) output as it arrives.

        Returns:
            Combined stdout/stderr (decoded as UTF-8, bad bytes replaced), the exit code
            (`None` when killed at the timeout) and whether the output was truncated.
        """
        checked = self._check(command, timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        limit, note = checked
        try:
            proc = subprocess.Popen(
                command,
                shell=True,
                cwd=self.root_dir,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                bufsize=0,
            )
        except (OSError, ValueError) as error:
            return _error(f"Error: could not start the command: {error}")
        output = _Output(self.max_output_bytes, on_output)
        assert proc.stdout is not None
        finished = False
        try:
            timed_out = self._pump(proc, output, limit)
            if timed_out:
                _kill_group(proc.pid)
                proc.wait()
                finished = True
                return output.response(None, limit, note)
            finished = True
            return output.response(proc.wait(), None, note)
        finally:
            if not finished:  # an exception (KeyboardInterrupt...) while the command ran
                _kill_group(proc.pid)
                proc.wait()
            proc.stdout.close()

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], output: _Output, limit: float) -> bool:
        """Read output until EOF (or shortly after the shell exits); `True` on timeout."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + limit
        exited_at: float | None = None
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                    return False
                if now >= deadline:
                    return exited_at is None
                if not selector.select(min(deadline - now, 0.1)):
                    continue
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return False
                output.feed(chunk)

    async def aexecute(
        self,
        command: str,
        timeout: float | None = None,
        *,
        on_output: OutputCallback | None = None,
    ) -> ExecuteResponse:
        """Async `execute`. Cancelling the awaiting task kills the command's process group."""
        checked = self._check(command, timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        limit, note = checked
        try:
            proc = await asyncio.create_subprocess_shell(
                command,
                cwd=self.root_dir,
                env=self._environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as error:
            return _error(f"Error: could not start the command: {error}")
        output = _Output(self.max_output_bytes, on_output)
        assert proc.stdout is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        exited_at: float | None = None
        timed_out = False
        eof = False
        try:
            while True:
                now = loop.time()
                if exited_at is None and proc.returncode is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                    break
                if now >= deadline:
                    timed_out = exited_at is None
                    break
                try:
                    chunk = await asyncio.wait_for(
                        proc.stdout.read(_CHUNK), min(deadline - now, 0.1)
                    )
                except TimeoutError:
                    continue
                if not chunk:
                    eof = True
                    break
                output.feed(chunk)
        except BaseException:
            # Cancelled (or failed) while the command ran: take the whole group down, and
            # let the loop reap the shell and close the pipe before passing the error on.
            _kill_group(proc.pid)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(proc.wait(), 5)
            raise
        if timed_out:
            _kill_group(proc.pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5)
            return output.response(None, limit, note)
        if not eof:
            # Background jobs still hold the pipe; stop listening to it (they keep running).
            # Process.wait() would wait for the pipe to close, so the exit code is read
            # from `returncode`, which is set as soon as the shell is reaped.
            proc._transport.close()  # type: ignore[attr-defined]
        else:
            await proc.wait()
        return output.response(proc.returncode, None, note)

    # ------------------------------------------------------------------ file transfer

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)` (overwriting), resolving paths like the file tools.

        Missing parent directories are created; an existing file keeps its permission bits.
        Each file is written atomically; failures are reported per file, never raised.
        """
        return [self._upload_one(path, content) for path, content in files]

    def _upload_one(self, path: str, content: bytes) -> FileUploadResponse:
        if not isinstance(content, (bytes, bytearray, memoryview)):
            return FileUploadResponse(
                path, error=f"Error: content for '{path}' must be bytes, not {type(content)}."
            )
        return FileUploadResponse(path, error=self._upload_bytes(path, bytes(content)))

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each path's bytes (any size), resolving paths like the file tools."""
        responses = []
        for path in paths:
            outcome = self._download_bytes(path, sys.maxsize, "")
            if isinstance(outcome, str):
                responses.append(FileDownloadResponse(path, error=outcome))
            else:
                responses.append(FileDownloadResponse(path, content=outcome))
        return responses

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async `upload_files`."""
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async `download_files`."""
        return await asyncio.to_thread(self.download_files, paths)


def _valid_timeout(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
