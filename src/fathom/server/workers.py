"""Several processes serving one listening socket: start them, replace the dead, stop them.

`fathom serve --workers N` binds its port once, in the parent, and starts N worker processes
that inherit the socket and each serve the app on it; the kernel hands every new connection
to one of them. This module is the parent's part and knows nothing of the app: a
`WorkerPool` runs the command it is given once per worker, passing the socket and the write
end of a pipe on which the worker reports, in one line, once it serves (and closes it).

Supervision: a worker that dies after it served is replaced by a new one; a worker that
exits before it reports (a start-up failure, which a retry would repeat) stops the pool and
raises `WorkerFailed`. Stopping sends SIGTERM to every worker, and SIGKILL to any still alive
after the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fathom.errors import FathomError

__all__ = ["STOP_GRACE_S", "WorkerCommand", "WorkerFailed", "WorkerPool"]

logger = logging.getLogger(__name__)

STOP_GRACE_S = 20.0
"""How long a stopping worker may take: uvicorn's 10 s for open requests, then storage."""

WorkerCommand = Callable[[int, int], Sequence[str]]
"""The command line of one worker, given the socket's and the report pipe's descriptors."""


class WorkerFailed(FathomError):
    """A worker exited before it served; `code` is its exit status."""

    def __init__(self, pid: int, code: int | None) -> None:
        super().__init__(f"worker process {pid} exited with {code} before it served")
        self.pid = pid
        self.code = code


@dataclass
class _Worker:
    process: asyncio.subprocess.Process
    report: asyncio.Future[bytes]
    """What the worker wrote on its pipe; empty when it closed it without reporting."""
    exited: asyncio.Future[int]


def _read_report(fd: int) -> bytes:
    """Everything written on the pipe `fd` until its writer closes it (blocking; closes it)."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class WorkerPool:
    """N worker processes on one listening socket (see the module docstring)."""

    def __init__(self, command: WorkerCommand, sock: socket.socket, count: int,
                 env: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self._command = command
        self._sock = sock
        self._count = count
        self._env = dict(env) if env is not None else None
        self._workers: list[_Worker] = []

    @property
    def pids(self) -> list[int]:
        """The pids of the workers alive now."""
        return [w.process.pid for w in self._workers if not w.exited.done()]

    async def start(self) -> bytes:
        """Start every worker and wait until each reports; return the first one's report.

        The first starts alone, so that it creates the storage's tables before the others
        open it (concurrent migrations of a fresh database can collide). Raises
        `WorkerFailed` (after stopping the others) when one exits before reporting.
        """
        self._workers.append(await self._spawn())
        first = await self._ready(self._workers[0], None)
        for _ in range(self._count - 1):
            self._workers.append(await self._spawn())
        for worker in self._workers[1:]:
            await self._ready(worker, None)
        return first

    async def supervise(self, stop: asyncio.Event) -> None:
        """Replace each worker that dies until `stop` is set; raises `WorkerFailed` as `start`."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                exits = {w.exited for w in self._workers}
                await asyncio.wait({stopping, *exits}, return_when=asyncio.FIRST_COMPLETED)
                for worker in [w for w in self._workers if w.exited.done()]:
                    if stop.is_set():
                        break
                    await self._replace(worker, stop)
        finally:
            stopping.cancel()

    async def stop(self, grace_s: float) -> None:
        """SIGTERM every worker; SIGKILL those still alive after `grace_s` seconds."""
        alive = [w for w in self._workers if not w.exited.done()]
        for worker in alive:
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
        if alive:
            _, lingering = await asyncio.wait([w.exited for w in alive], timeout=grace_s)
            for worker in [w for w in alive if w.exited in lingering]:
                logger.warning("worker %d did not stop in %ss; killing it",
                               worker.process.pid, grace_s)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
                await worker.exited

    async def _spawn(self) -> _Worker:
        read, write = os.pipe()
        with contextlib.ExitStack() as on_failure:
            on_failure.callback(os.close, read)  # cleanup: no worker started (re-raised)
            try:
                process = await asyncio.create_subprocess_exec(
                    *self._command(self._sock.fileno(), write), env=self._env,
                    pass_fds=(self._sock.fileno(), write),
                )  # fmt: skip
            finally:
                os.close(write)  # the worker holds its own copy: EOF here once it closes or dies
            on_failure.pop_all()
        report = asyncio.ensure_future(asyncio.to_thread(_read_report, read))
        return _Worker(process, report, asyncio.ensure_future(process.wait()))

    async def _ready(self, worker: _Worker, stop: asyncio.Event | None) -> bytes:
        """Wait for `worker`'s report; raise `WorkerFailed` when it exits without one.

        A worker that exits without reporting while the pool is stopping did not fail.
        """
        report = await worker.report  # EOF comes at the latest when the worker exits
        if report or (stop is not None and stop.is_set()):
            return report
        code = await worker.exited
        await self.stop(STOP_GRACE_S)
        raise WorkerFailed(worker.process.pid, code)

    async def _replace(self, dead: _Worker, stop: asyncio.Event) -> None:
        logger.warning("worker %d exited with %s; starting another",
                       dead.process.pid, dead.exited.result())  # fmt: skip
        self._workers.remove(dead)
        fresh = await self._spawn()
        self._workers.append(fresh)
        await self._ready(fresh, stop)
        logger.info("worker %d serves in place of %d", fresh.process.pid, dead.process.pid)
