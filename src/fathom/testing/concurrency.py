"""`Rendezvous`: prove that calls run at the same time without timing them.

A test that measures wall-clock time to show that work ran in parallel fails whenever the
machine is busy. A rendezvous asks the question directly instead: `parties` callers wait at
it until all of them are inside at once, and only then go on. Work that runs one call after
another never gathers `parties` callers, so the first one waits out `timeout` and fails with
`RendezvousTimeout`, which says how many arrived. The timeout is a hang guard, not a speed
claim: make it long (the default is 30 s), since a passing run never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from fathom.errors import FathomError

__all__ = ["Rendezvous", "RendezvousTimeout"]


class RendezvousTimeout(FathomError, AssertionError):
    """Raised when fewer than `parties` callers were in a `Rendezvous` at once within its timeout.

    It is an `AssertionError`, so pytest reports it as a failed check, not as an error.
    """


class Rendezvous:
    """A reusable meeting point that lets callers through only in groups of `parties`.

    Sync callers use `arrive()`; coroutines use `await arrive_async()`, which waits in a
    thread of its own so the event loop keeps running the other callers. After a group
    passes, the next `parties` callers form the next group, so an agent whose four
    subagents each call a model twice meets twice. `max_in_flight` records the most
    callers that were inside at once.

    Example:
        ```python
        meet = Rendezvous(4)
        model = ScriptedModel(policy=..., rendezvous=meet)  # every call waits for 3 others
        ```
    """

    def __init__(self, parties: int, *, timeout: float = 30.0) -> None:
        """Create the meeting point.

        Args:
            parties: How many callers must be inside at once before any goes on.
            timeout: Seconds a caller waits for the others before the rendezvous breaks
                and every waiting (and later) caller raises `RendezvousTimeout`.

        Raises:
            ValueError: If `parties` is below 1 or `timeout` is not positive.
        """
        if parties < 1:
            msg = f"Rendezvous(parties={parties}): parties must be at least 1"
            raise ValueError(msg)
        if not timeout > 0:
            msg = f"Rendezvous(timeout={timeout}): timeout must be a positive number of seconds"
            raise ValueError(msg)
        self.parties = parties
        self.timeout = timeout
        self._barrier = threading.Barrier(parties, timeout=timeout)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._groups = 0

    @property
    def max_in_flight(self) -> int:
        """The most callers that were inside the rendezvous at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def groups(self) -> int:
        """How many complete groups of `parties` callers have passed."""
        with self._lock:
            return self._groups

    def arrive(self) -> None:
        """Wait until `parties` callers are inside at once, then return.

        Raises:
            RendezvousTimeout: If the group did not fill within `timeout` (or an earlier
                group failed to), naming how many callers were inside at most.
        """
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            if self._barrier.wait() == 0:
                with self._lock:
                    self._groups += 1
        except threading.BrokenBarrierError:
            msg = (
                f"Rendezvous: at most {self.max_in_flight} of {self.parties} callers were "
                f"inside at once within {self.timeout:g} s, so the calls did not run at the "
                f"same time ({self.groups} full groups passed before)"
            )
            raise RendezvousTimeout(msg) from None
        finally:
            with self._lock:
                self._in_flight -= 1

    async def arrive_async(self) -> None:
        """`arrive()` for coroutines: waits in its own thread, leaving the event loop free.

        Raises:
            RendezvousTimeout: As `arrive()`.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(error: RendezvousTimeout | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def wait() -> None:
            error: RendezvousTimeout | None = None
            try:
                self.arrive()
            except RendezvousTimeout as caught:  # handed to the awaiting coroutine
                error = caught
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, error)

        threading.Thread(target=wait, name="rendezvous", daemon=True).start()
        await done
