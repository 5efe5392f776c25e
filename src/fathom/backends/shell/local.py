"""`LocalShellBackend`: files on local disk plus unrestricted shell commands on the host.

UNSAFE: nothing here is a sandbox. See the class docstring.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    Plan,
    adrive,
    drive,
)
from fathom.backends.shell._runner import (
    OutputCallback,
    arun_process,
    check_request,
    check_timeouts,
    run_process,
)

__all__ = ["DEFAULT_PATH", "LocalShellBackend"]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""`PATH` given to commands when the environment is not inherited and `env` sets none."""

DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
"""Output captured per command by default; past it the output is cut."""

DEFAULT_EXECUTE_TIMEOUT = 120
"""Seconds a command may run when no timeout is given (the Deep Agents API's constant)."""

RUNAWAY_OUTPUT_BYTES = 64 * 1024 * 1024
"""Output after which a command is killed whatever its cap: 64 MiB, or 64 times
`max_output_bytes` when that is more (a runaway `yes` is stopped, a verbose build is not)."""

STDERR_PREFIX = "[stderr] "
"""What each line a command writes to stderr starts with in the output."""

logger = logging.getLogger(__name__)


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
        virtual_mode: As for `FilesystemBackend` (file tools and uploads/downloads only):
            `True` (the default) confines them to `root_dir`; `False` must be passed by name
            to give them the whole host, and the construction warning then says so.
        timeout: Seconds a command may run before its whole process group is killed, when
            the caller (the model) gives none (`DEFAULT_EXECUTE_TIMEOUT`, 120); it must be
            positive (`ValueError`).
        max_timeout: The most seconds a caller may ask for; a larger `timeout` given to
            `execute` is lowered to it (and the output says so). `None` (the default)
            sets no cap, as in the reference, where a per-command `timeout` overrides the
            default either way; the model's requests are still bounded by
            `FilesystemMiddleware(max_execute_timeout=)` (3600 s by default) and
            `ExecuteMiddleware(max_timeout=)`. Set it to keep the model (or any caller)
            from raising the operator's limit.
        max_output_bytes: Output (stdout and stderr combined) kept per command; past it
            the output is cut (a line says where) and the response is marked `truncated`,
            while the command runs on to its end. Only a runaway command is killed, once its
            output passes `RUNAWAY_OUTPUT_BYTES` or 64 times this cap. The `execute` tool
            shows the model a head and tail of long output and offloads the whole capture
            to a file it can page.
        env: Environment variables for commands.
        inherit_env: `True` starts from this process's environment and applies `env` on
            top; `False` (the default) gives commands only `env` (plus `PATH` =
            `DEFAULT_PATH` when `env` sets none), so this process's secrets stay out.
        max_file_size_mb: As for `FilesystemBackend`.

    The output is the command's stdout and stderr as they arrive, each stderr line
    starting with `[stderr] `; a command that exits non-zero gets a last line
    `Exit code: N` (as in the reference API). `id` is `local-` and 8 hex digits; `cwd` is
    the working directory as a `Path`.

    Each command runs in a new session (its own process group). On timeout (exit code 124,
    output so far kept, and a line saying whether the default or the caller's timeout was
    passed), on runaway output, or when an `aexecute` call is cancelled, the whole group is
    killed with SIGKILL, so children die too (a process that starts its own session
    escapes this). When the shell exits normally, background jobs it started keep running;
    output they still send to the shared pipes is read for a short grace period only, so
    redirect their output to a file.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        virtual_mode: bool = True,
        *,
        timeout: float = DEFAULT_EXECUTE_TIMEOUT,
        max_timeout: float | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        max_file_size_mb: float = 10,
    ) -> None:
        super().__init__(root_dir, virtual_mode, max_file_size_mb)
        check_timeouts(timeout, max_timeout)
        if isinstance(max_output_bytes, bool) or not (
            isinstance(max_output_bytes, int) and max_output_bytes > 0
        ):
            raise ValueError(f"max_output_bytes must be a positive int, not {max_output_bytes!r}.")
        self.timeout: float = float(timeout)
        self.max_timeout: float = (
            float("inf") if max_timeout is None else max(self.timeout, float(max_timeout))
        )
        self.max_output_bytes: int = max_output_bytes
        self.env: dict[str, str] = dict(env or {})
        self.inherit_env: bool = inherit_env
        self._sandbox_id = f"local-{uuid.uuid4().hex[:8]}"
        # The reference's `cwd`; a subclass (or `FilesystemBackend`) may define it already.
        vars(self).setdefault("cwd", Path(self.root_dir))
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

    @property
    def id(self) -> str:
        """This backend's identifier: `local-` and 8 random hex digits."""
        return self._sandbox_id

    @property
    def _default_timeout(self) -> float:
        """The reference API's name of `timeout`."""
        return self.timeout

    # ------------------------------------------------------------------ execute

    def _environment(self) -> dict[str, str]:
        if self.inherit_env:
            return {**os.environ, **self.env}
        environment = dict(self.env)
        environment.setdefault("PATH", DEFAULT_PATH)
        return environment

    def execute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Run `command` with `/bin/sh -c` in `root_dir`; never raises for a failing command.

        Args:
            command: The shell command line.
            timeout: Seconds before the process group is killed; `None` uses
                `self.timeout`, and more than `max_timeout` is lowered to it (the output
                says so).
            on_output: Called with each piece of (kept) output as it arrives.

        Returns:
            Combined stdout/stderr (decoded as UTF-8, bad bytes replaced; stderr lines
            start with `[stderr] `, and a non-zero exit adds `Exit code: N`) and the exit
            code: 124 when killed at the timeout (the output so far is kept), `128 + n`
            when ended by signal `n`; `truncated=True` when the output passed
            `max_output_bytes` and was cut there.

        Raises:
            ValueError: `timeout` is a number that is not positive (as in the reference).
        """
        return drive(self._shell(command, timeout, on_output), lambda run: run_process(**run))

    async def aexecute(
        self, command: str, timeout: float | None = None, *, on_output: OutputCallback | None = None
    ) -> ExecuteResponse:
        """Async `execute`. Cancelling the awaiting task kills the command's process group."""
        plan = self._shell(command, timeout, on_output)
        return await adrive(plan, lambda run: arun_process(**run))

    def _shell(
        self, command: str, timeout: float | None, on_output: OutputCallback | None
    ) -> Plan[ExecuteResponse]:
        """One command, written once: yields the process to run (`run_process`'s keywords),
        receives its result."""
        if (
            isinstance(timeout, int | float) and not isinstance(timeout, bool)
            and timeout <= 0
        ):
            raise ValueError(f"timeout must be positive, got {timeout}")
        checked = check_request(command, timeout, self.timeout, self.max_timeout)
        if isinstance(checked, ExecuteResponse):
            return checked
        seconds, note = checked
        result = yield {
            "argv": ["/bin/sh", "-c", command],
            "timeout": seconds,
            "capture_bytes": self.max_output_bytes,
            "kill_after_bytes": max(RUNAWAY_OUTPUT_BYTES, 64 * self.max_output_bytes),
            "stderr_prefix": STDERR_PREFIX,
            "env": self._environment(),
            "cwd": str(self.root_dir),
            "on_output": on_output,
        }
        if isinstance(result, str):
            return _error(f"Error: {result}")
        response = result.response(seconds, [note], custom_timeout=timeout is not None)
        if response.exit_code:
            output = response.output.rstrip()
            response = ExecuteResponse(
                output=f"{output}\n\nExit code: {response.exit_code}" if output
                else f"Exit code: {response.exit_code}",
                exit_code=response.exit_code,
                truncated=response.truncated,
            )
        return response

    # ------------------------------------------------------------------ file transfer

    def _warn_unconfined(self) -> None:
        """The construction warning below names unconfined file tools; no second one."""

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each `(path, bytes)` (overwriting), resolving paths like the file tools.

        Missing parent directories are created; an existing file keeps its permission bits.
        Each file is written atomically; failures are reported per file as an `ErrorKind`
        (see `FilesystemBackend.upload_files`), never raised.
        """
        return [self._upload_one(path, content) for path, content in files]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read each path's bytes (any size), resolving paths like the file tools."""
        return [self._download_one(path, sys.maxsize) for path in paths]
