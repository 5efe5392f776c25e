"""The process runner every shell backend uses: one timeout, output, kill and exit-code policy.

`LocalShellBackend` and `BubblewrapSandbox` differ only in the command line they start
(a plain `/bin/sh -c`, or `bwrap` around it); how the process is watched is the same and
lives here:

- the process starts in a new session (its own process group), stdin closed, stdout and
  stderr joined on one pipe; or, with `stderr_prefix`, on two pipes read as output arrives,
  each stderr line starting with the prefix (`LocalShellBackend`'s `[stderr] `);
- output is kept up to `capture_bytes` and the result is then marked `truncated`; once the
  output passes `kill_after_bytes` (by default `capture_bytes`) the whole process group is
  killed, so a runaway `yes` is stopped, not read forever (output between the two is read
  and dropped, and the command runs to its end);
- at the timeout the process group is killed and the exit code is **124** (as GNU
  `timeout` reports it), with the output read so far kept;
- a process ended by a signal reports `128 + signal`, as shells do;
- after the main process exits, output that background jobs still write to the shared
  pipe is read for a short grace period only (the jobs are not waited for);
- cancelling an `arun` (the awaiting task) kills the process group before the
  cancellation is passed on; so does an exception (KeyboardInterrupt...) during `run`;
- `on_output` gets the kept output, decoded, as it arrives; a listener that raises is
  dropped, never allowed to break the command.

The async form runs the same loop in a dedicated thread (not the default executor, whose
few workers long commands would starve) and hands output to `on_output` on the event loop.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import contextvars
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fathom.backends.protocol import ExecuteResponse
from fathom.backends.utils import positive_seconds
from fathom.tool_answers import Failure, attempt

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "OutputCallback",
    "ProcessResult",
    "arun_process",
    "cap_note",
    "check_request",
    "check_timeouts",
    "kill_group",
    "run_process",
    "timeout_note",
]


OutputCallback = Callable[[str], None]

TIMEOUT_EXIT_CODE = 124
"""The exit code of a command killed at its timeout (GNU `timeout`'s convention)."""

_CHUNK = 64 * 1024
_TICK = 0.1
"""Longest single wait on the pipe: how often the deadline and a cancellation are checked."""
_EXIT_GRACE = 0.5
"""After the main process exits, how long to keep reading output its background jobs
still write to the shared pipe."""
_DRAIN_GRACE = 2.0
"""After a kill, how long to keep reading until every writer of the pipe is gone."""


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the process group `pgid` (the command and all it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class ProcessResult:
    """What a finished (or killed) process produced."""

    data: bytes
    """The kept output (at most the capture cap)."""
    total: int
    """Output bytes seen before the process was stopped (more than `data` when capped)."""
    exit_code: int
    """The exit status; 124 at the timeout; `128 + n` when ended by signal `n`."""
    timed_out: bool = False
    capped: bool = False
    """The output passed the capture cap, so it was cut there."""
    runaway: bool = False
    """The output passed `kill_after_bytes`, so the process group was killed."""

    def response(
        self, timeout: float, notes: Sequence[str] = (), *, custom_timeout: bool | None = None
    ) -> ExecuteResponse:
        """The `ExecuteResponse`: the output (UTF-8, bad bytes replaced), then one line per
        note: the timeout kill (worded for the backend's default timeout when
        `custom_timeout` is false, for the caller's when true), the cut, and `notes`."""
        text = self.data.decode("utf-8", errors="replace")
        lines: list[str] = []
        if self.timed_out:
            lines.append(timeout_note(timeout, custom_timeout))
        if self.capped:
            lines.append(cap_note(len(self.data), self.total, killed=self.runaway))
        lines.extend(note for note in notes if note)
        if lines:
            text = "\n".join([text.rstrip("\n"), *lines] if text else lines)
        return ExecuteResponse(output=text, exit_code=self.exit_code, truncated=self.capped)


def timeout_note(timeout: float, custom: bool | None = None) -> str:
    """The line that says a command was killed at its timeout (`custom`: the caller's own
    timeout, not the backend's default; `None`: not known)."""
    if custom is None:
        return f"[timed out: the command ran past its {timeout:g}s timeout and was killed]"
    if custom:
        return (
            f"[timed out: the command ran past its custom timeout of {timeout:g}s and was "
            "killed; it may be stuck, or need more time]"
        )
    return (
        f"[timed out: the command ran past the default {timeout:g}s timeout and was killed; "
        "for a long-running command, run it again with a larger timeout parameter]"
    )


def cap_note(kept: int, total: int, *, killed: bool) -> str:
    """The line that says the output was cut at `kept` bytes (and the command killed)."""
    if killed:
        return (
            f"[Output truncated at {kept:,} bytes; the command was killed after {total:,} "
            "bytes of output]"
        )
    return f"[Output truncated at {kept:,} bytes of {total:,}]"


def check_timeouts(timeout: object, max_timeout: object) -> None:
    """Raise `ValueError` unless a shell backend's `timeout` is a positive number of
    seconds and its `max_timeout` one too or `None`."""
    if positive_seconds(timeout) is None:
        raise ValueError(f"timeout must be positive, got {timeout!r} (a number of seconds).")
    if max_timeout is not None and positive_seconds(max_timeout) is None:
        raise ValueError(
            f"max_timeout must be a positive number of seconds or None, not {max_timeout!r}."
        )


def check_request(
    command: object, timeout: object, default: float, cap: float
) -> ExecuteResponse | tuple[float, str]:
    """The seconds to run `command` for, and a note when the asked `timeout` was lowered
    to `cap`; or an error response for an empty command, a NUL byte or a bad timeout."""
    if not isinstance(command, str) or not command.strip():
        return ExecuteResponse(
            output="Error: Command must be a non-empty string: give a shell command such as "
            "`ls -la`.",
            exit_code=1,
        )
    if "\x00" in command:
        return ExecuteResponse(
            output="Error: the command contains a NUL byte, which no shell accepts.", exit_code=1
        )
    if timeout is None:
        return default, ""
    # Any positive number (infinity too) is accepted: above the cap it is lowered.
    if not (
        isinstance(timeout, int | float)
        and not isinstance(timeout, bool)
        and timeout == timeout  # not NaN
        and timeout > 0
    ):
        return ExecuteResponse(
            output=f"Error: timeout must be a positive number of seconds, not {timeout!r}.",
            exit_code=1,
        )
    if timeout > cap:
        return cap, f"[timeout {timeout:g}s is above this backend's limit; it ran with {cap:g}s]"
    return float(timeout), ""


class _Collector:
    """Keeps output up to `cap` bytes and passes the kept part, decoded, to a listener;
    `runaway` once more than `kill_after` bytes came."""

    def __init__(self, cap: int, listener: OutputCallback | None, kill_after: int) -> None:
        self.cap = cap
        self.kill_after = max(kill_after, cap)
        self.kept = bytearray()
        self.total = 0
        self._listener = listener
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def capped(self) -> bool:
        return self.total > self.cap

    @property
    def runaway(self) -> bool:
        return self.total > self.kill_after

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        part = chunk[: max(self.cap - len(self.kept), 0)]
        if not part:
            return
        self.kept += part
        if self._listener is not None:
            text = self._decoder.decode(part, final=len(self.kept) >= self.cap)
            if text and not _call_listener(self._listener, text):
                self._listener = None  # it raised: no longer called


def _call_listener(listener: OutputCallback, text: str) -> bool:
    """Give `text` to `listener`; `False` when it raised (logged, never passed on)."""
    # the caller's listener must never break the command
    return not isinstance(attempt(lambda: listener(text), "on_output listener"), Failure)


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


_MAX_PARTIAL = 64 * 1024
"""A stderr line longer than this is passed on in pieces (each with the prefix)."""


class _Tagger:
    """Starts each stderr line with `prefix`; a line's end may come in a later chunk."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.partial = b""

    def feed(self, chunk: bytes) -> bytes:
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        tagged = b"".join(self.prefix + line + b"\n" for line in lines)
        if len(self.partial) > _MAX_PARTIAL:
            tagged += self.flush()
        return tagged

    def flush(self) -> bytes:
        rest, self.partial = self.partial, b""
        return self.prefix + rest if rest else b""


def _pump(
    proc: subprocess.Popen[bytes],
    output: _Collector,
    deadline: float,
    cancel: threading.Event | None,
    tagger: _Tagger | None = None,
) -> bool:
    """Read `proc`'s output until EOF, shortly after it exits, or a kill; `True` when it
    was killed (deadline, runaway output or cancellation), after draining the pipes briefly.
    With `tagger`, stderr is a pipe of its own whose lines it tags."""
    assert proc.stdout is not None
    taggers: dict[int, _Tagger | None] = {proc.stdout.fileno(): None}
    if tagger is not None and proc.stderr is not None:
        taggers[proc.stderr.fileno()] = tagger
    exited_at: float | None = None
    killed_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in taggers:
            selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if killed_at is None:
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE:
                    return False
                if (
                    (exited_at is None and now >= deadline)
                    or output.runaway
                    or (cancel is not None and cancel.is_set())
                ):
                    kill_group(proc.pid)
                    killed_at = now
            elif now - killed_at > _DRAIN_GRACE:
                return True
            wait = _TICK
            if exited_at is None and killed_at is None:
                wait = min(wait, max(deadline - now, 0.0))
            for key, _ in selector.select(wait):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    del taggers[key.fd]
                    continue
                if killed_at is None:
                    tagging = taggers[key.fd]
                    output.feed(chunk if tagging is None else tagging.feed(chunk))
            if not taggers:
                return killed_at is not None


def run_process(
    argv: Sequence[str], *, timeout: float, capture_bytes: int,
    env: Mapping[str, str] | None = None, cwd: str | None = None,
    on_output: OutputCallback | None = None, on_start: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None, kill_after_bytes: int | None = None,
    stderr_prefix: str | None = None, pass_fds: Sequence[int] = (),
) -> ProcessResult | str:
    """Run `argv` under the policy of this module; the result, or why it could not start.

    `on_start(pid)` is called once the process runs (for a watcher that may kill its
    group, such as a disk guard). Setting `cancel` kills the process group (how the async
    form is cancelled). `kill_after_bytes` (default: `capture_bytes`) is how much output
    kills the command; `stderr_prefix` starts each stderr line. `pass_fds` are file
    descriptors the process inherits (a seccomp program, a status pipe), at the same numbers.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if stderr_prefix is None else subprocess.PIPE,
            start_new_session=True,
            bufsize=0,
            pass_fds=tuple(pass_fds),
        )
    except (OSError, ValueError) as error:
        return f"could not start the command: {error}"
    limit = capture_bytes if kill_after_bytes is None else kill_after_bytes
    output = _Collector(capture_bytes, on_output, limit)
    tagger = None if stderr_prefix is None else _Tagger(stderr_prefix.encode("utf-8"))
    deadline = time.monotonic() + timeout
    timed_out = False
    ended = False
    try:
        if on_start is not None:
            on_start(proc.pid)
        killed = _pump(proc, output, deadline, cancel, tagger)
        if tagger is not None and not killed:
            output.feed(tagger.flush())
        timed_out = killed and not output.runaway and time.monotonic() >= deadline
        if not killed and proc.poll() is None:
            # The pipe closed but the process runs on (it closed its own output): it
            # still gets only the time left.
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                timed_out = True
        ended = True
    finally:
        # cleanup: nothing outlives a run that raised (its whole group is killed, then
        # the failure goes on up), timed out or ran away
        if not ended or (proc.poll() is None and (timed_out or output.runaway)):
            kill_group(proc.pid)
        # Background jobs may still hold the pipe; the status is the main process's.
        returncode = proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return ProcessResult(
        data=bytes(output.kept),
        total=output.total,
        exit_code=TIMEOUT_EXIT_CODE if timed_out else _exit_status(returncode),
        timed_out=timed_out,
        capped=output.capped and not timed_out,
        runaway=output.runaway and not timed_out,
    )


async def arun_process(
    argv: Sequence[str], *, timeout: float, capture_bytes: int,
    env: Mapping[str, str] | None = None, cwd: str | None = None,
    on_output: OutputCallback | None = None, on_start: Callable[[int], None] | None = None,
    kill_after_bytes: int | None = None, stderr_prefix: str | None = None,
    pass_fds: Sequence[int] = (),
) -> ProcessResult | str:
    """`run_process` without blocking the event loop. Cancelling the awaiting task kills
    the process group, waits for it to be reaped, then re-raises the cancellation."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[ProcessResult | str] = loop.create_future()
    cancel = threading.Event()
    listener: OutputCallback | None = None
    if on_output is not None:
        callback = on_output
        context = contextvars.copy_context()  # the caller's (stream writers read it)

        def forward(text: str) -> None:
            loop.call_soon_threadsafe(_call_listener, callback, text, context=context)

        listener = forward

    def settle(outcome: ProcessResult | str | BaseException) -> None:
        if done.done():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def work() -> None:
        try:
            outcome: ProcessResult | str | BaseException = run_process(
                argv,
                timeout=timeout,
                capture_bytes=capture_bytes,
                env=env,
                cwd=cwd,
                on_output=listener,
                on_start=on_start,
                cancel=cancel,
                kill_after_bytes=kill_after_bytes,
                stderr_prefix=stderr_prefix,
                pass_fds=pass_fds,
            )
        except BaseException as error:  # boundary: handed to the awaiting task, raised there
            outcome = error
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="fathom-command", daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        cancel.set()
        with contextlib.suppress(BaseException):
            await done
        raise
