"""A worker event loop for the `eval` tool under a sync `invoke`.

The interpreter is asynchronous through and through (Monty's async sandbox, the driver
graph, the subagents it starts with `ainvoke`). A sync run of the agent calls the tool's
sync function from a thread that has no running loop, or from LangGraph's own executor,
so the coroutine is handed to one dedicated thread with its own event loop and the
caller waits for its result. The caller's context variables (LangChain's run config and
callbacks) go with it, so usage, tracing and interrupts see the same run.

The loop starts on first use and lives for the process (a daemon thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_on_worker_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="fathom-eval-loop",
                                      daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run_on_worker_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the worker loop, in a copy of the caller's context; block for its
    result (its exception is raised here, `GraphInterrupt` included)."""
    loop = _worker_loop()
    context = contextvars.copy_context()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        task = loop.create_task(coro, context=context)

        def finished(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        task.add_done_callback(finished)

    loop.call_soon_threadsafe(start)
    return done.result()
