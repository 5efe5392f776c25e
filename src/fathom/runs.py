"""Runs on a thread that lose no turn: one run per thread at a time, and safe resumes.

A LangGraph checkpointer keeps the last write: two runs on the same thread at once both
report success, and the turn of the one that saved first disappears. And when new input
arrives on a thread whose last run was killed in the middle of a step, LangGraph drops
the writes of the tasks of that step that had completed (a file written, a command's
result). This module closes both gaps:

- `ThreadGuardedGraph` (what `create_deep_agent` returns when it has a checkpointer)
  refuses a second run on a thread that is running in this process with
  `ThreadBusyError`; `thread_file_lock` does the same across processes with a lock file
  that the kernel releases when its process dies, so a `kill -9` leaves no stale lock.
- `finish_pending_step` / `afinish_pending_step` run `invoke(None)` on a thread whose
  last run stopped mid-step, which keeps the completed tasks' saved writes and re-runs
  only the tasks that had not finished, before the caller sends a new message.
  `has_unfinished_step` is the test they use, and the one for any caller that must decide
  whether to resume a thread with input `None`: the step has tasks, even when every one of
  them saved its writes and so `snapshot.next` is empty.

What a resume re-runs: LangGraph saves each task's writes as soon as the task returns.
A resumed step runs again only the tasks without saved writes, that is the tools that
had not finished (or whose result was still being saved) when the process died. A tool
whose side effect happened but whose result was not saved yet runs twice, so make side
effects idempotent (write whole files, check before you append) or record them where
the tool can see them. Pass `durability="sync"` to `invoke`/`stream` for such runs:
every step's checkpoint is then saved before the next step starts.

Layer: agent; it must not import project, server, protocols or cli.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph._internal._constants import CONFIG_KEY_TASK_ID
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from langgraph.typing import ContextT, InputT, OutputT, StateT
from typing_extensions import TypeVar

from fathom.errors import FathomError

if TYPE_CHECKING:
    from langgraph._internal._typing import StateLike

__all__ = [
    "ThreadBusyError",
    "ThreadGuardedGraph",
    "afinish_pending_step",
    "finish_pending_step",
    "has_unfinished_step",
    "thread_file_lock",
]

logger = logging.getLogger(__name__)


class ThreadBusyError(FathomError, RuntimeError):
    """A run was refused because another run on the same thread has not finished.

    Attributes:
        thread_id: The busy thread.
    """

    def __init__(self, thread_id: str, where: str = "in this process") -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} is busy: another run on it has not finished ({where}). "
            "Two runs on one thread would overwrite each other's checkpoints and lose a "
            "turn. Wait for that run to end and try again, or use another thread_id."
        )


# Running threads per checkpointer: {(thread_id, checkpoint_ns)}. Weak keys, so a
# checkpointer that is no longer used takes its entry with it.
_RUNNING: weakref.WeakKeyDictionary[Any, set[tuple[str, str]]] = weakref.WeakKeyDictionary()
_RUNNING_LOCK = threading.Lock()


@contextlib.contextmanager
def _claim(checkpointer: Any, thread_id: str, namespace: str) -> Iterator[None]:
    key = (thread_id, namespace)
    with _RUNNING_LOCK:
        running = _RUNNING.setdefault(checkpointer, set())
        if key in running:
            raise ThreadBusyError(thread_id)
        running.add(key)
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING.get(checkpointer, set()).discard(key)


def _guard(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig | None
) -> contextlib.AbstractContextManager[None]:
    """The claim of (checkpointer, thread_id, namespace) to hold for a run, or no claim.

    Unguarded: no saver of its own (a subgraph, or no checkpointer), a nested call (the
    parent run holds the claim), or no thread id (LangGraph refuses that itself).
    """
    merged = merge_configs(graph.config, config)
    configurable = merged.get("configurable") or {}
    saver = graph.checkpointer
    thread_id = configurable.get("thread_id")
    if (
        not isinstance(saver, BaseCheckpointSaver)
        or CONFIG_KEY_TASK_ID in configurable
        or thread_id is None
    ):
        return contextlib.nullcontext()
    return _claim(saver, str(thread_id), str(configurable.get("checkpoint_ns", "")))


# from_graph's own type variables: it is called on the class, unspecialised
_S = TypeVar("_S", bound="StateLike")
_C = TypeVar("_C", bound="StateLike | None")
_I = TypeVar("_I", bound="StateLike")
_O = TypeVar("_O", bound="StateLike")


class ThreadGuardedGraph(CompiledStateGraph[StateT, ContextT, InputT, OutputT]):
    """A compiled agent graph that runs at most one run per thread at a time.

    `invoke`, `ainvoke`, `stream`, `astream` and the event streams all go through
    `stream` / `astream`, which claim `(checkpointer, thread_id)` when the run starts and
    release it when it ends (or its iterator is closed). A second run on a claimed thread
    raises `ThreadBusyError` before it touches the checkpoint; runs on other threads, and
    nested calls of a parent run, are not affected. It is still a `CompiledStateGraph`.

    The claim is per checkpointer object, in this process. Processes sharing a database
    need `thread_file_lock` as well (the `fathom` command takes one per turn).
    """

    @classmethod
    def from_graph(
        cls, graph: CompiledStateGraph[_S, _C, _I, _O]
    ) -> ThreadGuardedGraph[_S, _C, _I, _O]:
        """The same compiled graph (nodes, channels, config, checkpointer), guarded."""
        guarded: object = graph
        if not isinstance(graph, cls):
            attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
            guarded = cls(**attrs)
        # the same graph, so the same state, context, input and output types
        return cast("ThreadGuardedGraph[_S, _C, _I, _O]", guarded)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """`CompiledStateGraph.stream`, refused with `ThreadBusyError` on a busy thread."""
        with _guard(self, config):
            yield from super().stream(input, config, **kwargs)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """`CompiledStateGraph.astream`, refused with `ThreadBusyError` on a busy thread."""
        with _guard(self, config):
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk


_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _lock_name(thread_id: str) -> str:
    if _SAFE_NAME.fullmatch(thread_id):
        return f"{thread_id}.lock"
    return hashlib.sha256(thread_id.encode()).hexdigest()[:32] + ".lock"


@contextlib.contextmanager
def thread_file_lock(lock_dir: str | os.PathLike[str], thread_id: str) -> Iterator[Path]:
    """Hold the lock file of `thread_id` in `lock_dir` for the block, across processes.

    Uses `flock` on `<lock_dir>/<thread_id>.lock` (a hashed name for ids that are not
    plain file names), taken without waiting. The kernel drops the lock when the file is
    closed or its process dies, so a killed run leaves no stale lock behind. Two opens of
    the same file conflict even inside one process.

    Raises:
        ThreadBusyError: another holder has the lock.
    """
    folder = Path(lock_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _lock_name(thread_id)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ThreadBusyError(thread_id, "in another process") from None
        try:
            yield path
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def has_unfinished_step(snapshot: StateSnapshot) -> bool:
    """Whether a thread's last run stopped in the middle of a step, not waiting for an approval.

    `snapshot` is the thread's latest state (`get_state` / `aget_state` without a
    `checkpoint_id`). The step after its checkpoint is unfinished when that step has tasks
    (`snapshot.tasks`): a run that ended saves a last checkpoint with none. Some of the tasks
    may have finished, their writes saved (`PregelTask.result` set), and `snapshot.next`
    lists only the others; so when every task of the step saved its writes but the process
    died before the step's checkpoint was saved, `next` is empty and the step still has to be
    finished, or new input drops those writes. A task with a pending interrupt means the run
    waits for an approval instead: False. An `interrupt_before` / `interrupt_after` pause
    leaves tasks without interrupts and reads as unfinished too.
    """
    return bool(snapshot.tasks) and _ready(snapshot)


def _ready(snapshot: StateSnapshot) -> bool:
    """No task waits on an interrupt (in a latest-state snapshot, only unanswered ones show)."""
    return not any(task.interrupts for task in snapshot.tasks)


def _log_finishing(config: RunnableConfig, snapshot: StateSnapshot) -> None:
    """Log the resume; the task count shows it when `next` is empty (all tasks had written)."""
    thread_id = config.get("configurable", {}).get("thread_id")
    logger.info(
        "finishing the interrupted run on thread %s (%d task(s) in the step; still to run: %s)",
        thread_id,
        len(snapshot.tasks),
        list(snapshot.next),
    )


def finish_pending_step(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, **invoke_kwargs: Any
) -> bool:
    """Finish a thread's interrupted run before a new message is sent to it.

    New input on a thread whose run stopped mid-step (a crash, `kill -9`) makes LangGraph
    drop the saved writes of that step's completed tasks: a file the agent wrote is
    gone from its state and the model is told the call did not complete. Call this
    first: when `has_unfinished_step`, it runs `graph.invoke(None, config)`, which keeps
    those writes, re-runs only the tasks that had not finished, and continues the run to
    its end. Then send the new message.

    Args:
        graph: The agent (e.g. from `create_deep_agent`) with a checkpointer.
        config: The run config naming the thread (`{"configurable": {"thread_id": ...}}`).
        **invoke_kwargs: Passed to `invoke`, e.g. `durability="sync"`.

    Returns:
        `True` when the thread is ready for a new message; `False` when it waits for an
        approval (already, or the finished run reached one): answer it with
        `Command(resume=...)` first.
    """
    snapshot = graph.get_state(config)
    if has_unfinished_step(snapshot):
        _log_finishing(config, snapshot)
        graph.invoke(None, config, **invoke_kwargs)
        snapshot = graph.get_state(config)
    return _ready(snapshot)


async def afinish_pending_step(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, **invoke_kwargs: Any
) -> bool:
    """Async `finish_pending_step`: `ainvoke(None)` on a thread whose run stopped mid-step."""
    snapshot = await graph.aget_state(config)
    if has_unfinished_step(snapshot):
        _log_finishing(config, snapshot)
        await graph.ainvoke(None, config, **invoke_kwargs)
        snapshot = await graph.aget_state(config)
    return _ready(snapshot)
