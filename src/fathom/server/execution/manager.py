"""Admission, queuing, execution and cancellation of runs.

* **Worker pool**: at most ``jobs`` runs execute at once; each active run holds one slot.
* **Per-thread queue**: runs of one thread execute one at a time, in arrival order.
* **Multitask strategies** for a run created while its thread has an active run:
  ``reject`` answers 409; ``enqueue`` (the default, as in LangGraph's server) queues it;
  ``interrupt`` cancels the active runs (their records are kept as ``interrupted``) and then
  runs; ``rollback`` cancels them, reverts the thread to the checkpoint it had before each,
  and deletes their records.
* **Pending interrupts are never dropped silently**: a run with new ``input`` (and no
  ``command``) on a thread that waits on an ``interrupt()`` is refused (409) under ``reject``
  and ``enqueue``; resume it with ``command``, or pass ``interrupt``/``rollback`` to supersede
  the pending interrupt on purpose. An enqueued run that reaches such a thread fails with an
  error saying so. (A thread paused by ``interrupt_before/after``, or whose node a cancelled
  run did not finish, also reads ``interrupted``; new input simply continues it, as on
  LangGraph's server.)
* **Cancellation** cancels the run's asyncio task, so the graph's running node sees
  ``CancelledError``. ``action="interrupt"`` keeps what was checkpointed; ``"rollback"``
  reverts the thread and deletes the run.
* **Few storage round trips per run**: the run and thread records are written in one store
  batch when the run is admitted and in one when it ends; a run that ends without pausing
  takes its output and the thread's status from its own stream (its last ``values``), not from
  the checkpoint. The checkpoint a ``rollback`` returns to is looked up only when a rollback
  happens: it is the parent of the run's first checkpoint (found by the ``run_id`` LangGraph
  writes into each checkpoint's metadata).
* **Recovery**: on start-up, runs that a previous server left ``pending`` or ``running`` are
  marked ``error`` (``"server stopped before the run finished"``) and their threads
  ``error``; they are not resumed. The thread's checkpoints are left intact, so a new run (or a
  ``command``) continues from the last checkpoint. A server that shuts down cleanly (the
  ASGI lifespan ends) cancels its active runs first; they are recorded ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from fathom.cache_metrics import PREFIX_METADATA_KEY, PrefixRecorder, merge_metadata
from fathom.hosting.loopback import run_context
from fathom.server.errors import Conflict, NotFound
from fathom.server.execution.broker import RunStream
from fathom.server.execution.locks import KeyedLocks
from fathom.server.execution.runner import RunEnd, build_config, stream_run
from fathom.server.graphs import GraphRegistry
from fathom.server.records import RecordStore, now_iso
from fathom.server.serde import to_jsonable
from fathom.server.snapshots import is_interrupted

__all__ = ["RunManager"]

logger = logging.getLogger(__name__)

_KEEP_FINISHED = 512
_UNREAD: Any = object()  # the run never read the thread's checkpoint: nothing to roll back
_LOOK_UP: Any = object()  # find the checkpoint before the run only if a rollback needs it
_ACTIVE = ("pending", "running")


def _thread_config(thread_id: str) -> RunnableConfig:
    return RunnableConfig(configurable={"thread_id": thread_id, "checkpoint_ns": ""})


class _Finished(OrderedDict[str, Any]):
    """A bounded map of recently finished runs' streams/outputs."""

    def keep(self, key: str, value: Any) -> None:
        self[key] = value
        while len(self) > _KEEP_FINISHED:
            self.popitem(last=False)


class RunManager:
    """Owns every run's task; routes call it to create, wait for and cancel runs."""

    def __init__(
        self,
        registry: GraphRegistry,
        records: RecordStore,
        checkpointer: BaseCheckpointSaver[Any],
        jobs: int,
    ) -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self.registry = registry
        self.records = records
        self.checkpointer = checkpointer
        self.jobs = jobs
        self.active_count = 0
        self.max_active_seen = 0
        self._slots = asyncio.Semaphore(jobs)
        self._thread_locks = KeyedLocks()
        self._admission = KeyedLocks()
        self._thread_runs: dict[str, list[str]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._cancel_action: dict[str, str] = {}
        self._streams: dict[str, RunStream] = {}
        self._finished_streams = _Finished()
        self._outputs = _Finished()
        self._finishing: set[str] = set()
        self._queued: set[str] = set()  # admitted behind another run of their thread
        self._background: set[asyncio.Future[None]] = set()
        self._started: asyncio.Task[None] | None = None

    # lifecycle
    async def start(self) -> None:
        """Recover runs a dead server left behind; idempotent and safe to call concurrently."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._recover())
        await asyncio.shield(self._started)

    async def _recover(self) -> None:
        for status in _ACTIVE:
            for run in await self.records.list_runs(status=status):
                if run["run_id"] in self._tasks:
                    continue
                logger.warning(
                    "run %s was %s when the server stopped; marking it error", run["run_id"], status
                )
                run["status"] = "error"
                await self.records.put_run(run)
                thread = await self.records.get_thread(run["thread_id"])
                if thread is not None:
                    thread["status"] = "error"
                    thread["error"] = {
                        "error": "ServerRestarted",
                        "message": "server stopped before the run finished",
                    }
                    thread["updated_at"] = now_iso()
                    await self.records.put_thread(thread)

    async def shutdown(self) -> None:
        """Cancel every active run (recorded ``interrupted``) and wait for their tasks."""
        tasks = list(self._tasks.values())
        for run_id in list(self._tasks):
            self.cancel(run_id)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for pending in list(self._background):
            with contextlib.suppress(BaseException):
                await pending

    # queries
    def active_runs(self, thread_id: str) -> list[str]:
        """Ids of the thread's pending and running runs, oldest first."""
        return list(self._thread_runs.get(thread_id, []))

    def stream(self, run_id: str) -> RunStream | None:
        """The live or recently finished event stream of ``run_id``."""
        return self._streams.get(run_id) or self._finished_streams.get(run_id)

    def is_active(self, run_id: str) -> bool:
        return run_id in self._tasks

    async def thread_state_status(self, thread: dict[str, Any]) -> str:
        """``interrupted`` if the thread's graph is waiting on a node, else ``idle``."""
        graph_id = thread.get("metadata", {}).get("graph_id")
        if graph_id not in self.registry.names:
            return "idle"
        graph = await self.registry.graph(graph_id)
        state = await graph.aget_state(_thread_config(thread["thread_id"]))
        return "interrupted" if is_interrupted(state) else "idle"

    async def pending_interrupts(self, thread: dict[str, Any]) -> bool:
        """Whether the thread waits on an ``interrupt()`` that a new input would discard."""
        if thread.get("status") != "interrupted":
            return False  # the server keeps the status current after every run and update
        graph_id = thread.get("metadata", {}).get("graph_id")
        if graph_id not in self.registry.names:
            return False
        graph = await self.registry.graph(graph_id)
        return bool((await graph.aget_state(_thread_config(thread["thread_id"]))).interrupts)

    # admission
    async def submit(self, run: dict[str, Any], thread: dict[str, Any]) -> dict[str, Any]:
        """Admit ``run`` on ``thread`` under its multitask strategy and start its task."""
        thread_id = thread["thread_id"]
        async with self._admission.hold(thread_id):
            strategy = run["multitask_strategy"]
            active = self.active_runs(thread_id)
            if active and strategy == "reject":
                raise Conflict(
                    "Thread is already running a task. Wait for it to finish or choose a "
                    "different multitask strategy."
                )
            kwargs = run["kwargs"]
            new_input = kwargs.get("input") is not None and not kwargs.get("command")
            if (
                not active
                and new_input
                and strategy in ("reject", "enqueue")
                and await self.pending_interrupts(thread)
            ):
                raise Conflict(
                    "Thread is waiting on an interrupt. Resume it with 'command' "
                    "({'resume': ...}), or pass multitask_strategy 'interrupt' or 'rollback' "
                    "to discard the pending interrupt."
                )
            metadata = thread.setdefault("metadata", {})
            metadata.setdefault("graph_id", run["metadata"]["graph_id"])
            metadata.setdefault("assistant_id", run["assistant_id"])
            thread["status"] = "busy"
            thread["updated_at"] = now_iso()
            await self.records.put_many(threads=[thread], runs=[run])
            run_id = run["run_id"]
            if active:
                self._queued.add(run_id)
            self._thread_runs.setdefault(thread_id, []).append(run_id)
            self._streams[run_id] = RunStream(run_id)
            self._done[run_id] = asyncio.Event()
            if strategy in ("interrupt", "rollback"):
                for other in active:
                    self.cancel(other, strategy)
            task = asyncio.create_task(
                self._execute(run), name=f"run-{run_id}", context=run_context()
            )
            task.add_done_callback(lambda _t, run=run: self._after_task(run))
            self._tasks[run_id] = task
        return run

    def _after_task(self, run: dict[str, Any]) -> None:
        """Record the end of a run whose task was cancelled before its first step."""
        run_id = run["run_id"]
        if run_id in self._tasks and run_id not in self._finishing:
            self._finishing.add(run_id)
            status = self._cancelled_status(run_id)
            finish = asyncio.ensure_future(self._finish(run, status, None, None, _UNREAD, None))
            self._background.add(finish)
            finish.add_done_callback(self._background.discard)

    def cancel(self, run_id: str, action: str = "interrupt") -> bool:
        """Cancel the run's task; ``False`` if it is not active."""
        task = self._tasks.get(run_id)
        if task is None or run_id in self._finishing:
            return False
        self._cancel_action.setdefault(run_id, action)
        task.cancel()
        return True

    async def wait(self, run_id: str) -> None:
        """Return once ``run_id`` is no longer active."""
        done = self._done.get(run_id)
        if done is not None:
            await done.wait()

    async def output(self, run: dict[str, Any]) -> Any:
        """What ``join``/``wait`` answer: the thread's values (+ ``__interrupt__``) or the error."""
        await self.wait(run["run_id"])
        if run["run_id"] in self._outputs:
            return self._outputs[run["run_id"]]
        return await self._thread_output(run["thread_id"], run["metadata"].get("graph_id"))

    async def _thread_output(self, thread_id: str, graph_id: str | None) -> Any:
        return _output_of(await self._snapshot(thread_id, graph_id))

    async def _snapshot(self, thread_id: str, graph_id: str | None) -> StateSnapshot | None:
        if graph_id not in self.registry.names:
            return None
        graph = await self.registry.graph(graph_id)
        return await graph.aget_state(_thread_config(thread_id))

    # execution
    async def _execute(self, run: dict[str, Any]) -> None:
        run_id, thread_id = run["run_id"], run["thread_id"]
        entered = False
        try:
            async with self._thread_locks.hold(thread_id):
                entered = True
                status, error, graph, before, end = await self._invoke(run)
                # The thread stays locked until the run's end is recorded (and any rollback
                # is done), so the next queued run starts from the final state.
                self._finishing.add(run_id)
                await self._finish(run, status, error, graph, before, end)
        except asyncio.CancelledError:
            if entered:
                raise
            # Cancelled while queued behind the thread's active run.
            self._finishing.add(run_id)
            await self._finish(run, self._cancelled_status(run_id), None, None, _UNREAD, None)

    def _cancelled_status(self, run_id: str) -> str:
        return "rollback" if self._cancel_action.get(run_id) == "rollback" else "interrupted"

    async def _invoke(
        self, run: dict[str, Any]
    ) -> tuple[str, dict[str, Any] | None, Pregel | None, Any, RunEnd | None]:
        """Execute the graph in a pool slot; returns ``(status, error, graph, before, end)``."""
        run_id, thread_id = run["run_id"], run["thread_id"]
        stream = self._streams[run_id]
        graph: Pregel | None = None
        before: Any = _UNREAD
        kwargs = run["kwargs"]
        try:
            async with self._slots:
                self.active_count += 1
                self.max_active_seen = max(self.max_active_seen, self.active_count)
                try:
                    config = build_config(run, run["metadata"]["graph_id"])
                    graph = await self.registry.graph(run["metadata"]["graph_id"], config)
                    if kwargs.get("checkpoint") or kwargs.get("checkpoint_id"):
                        # The run starts from an older checkpoint: its first checkpoint's
                        # parent is not the thread's latest, so read that now.
                        before = await self.checkpointer.aget_tuple(_thread_config(thread_id))
                    else:
                        before = _LOOK_UP
                    run["status"] = "running"
                    await self.records.put_run(run)
                    if run_id in self._queued:
                        await self._check_interrupt(graph, run)
                    stream.publish("metadata", {"run_id": run_id, "attempt": 1})
                    end = await stream_run(graph, run, config, stream.publish)
                finally:
                    self.active_count -= 1
        except asyncio.CancelledError:
            return self._cancelled_status(run_id), None, graph, before, None
        except Exception as exc:  # boundary: the graph's failure ends its run, not the server
            logger.exception("run %s failed", run_id)
            error = {"error": type(exc).__name__, "message": str(exc)}
            stream.publish("error", error)
            return "error", error, graph, before, None
        return "success", None, graph, before, end

    async def _check_interrupt(self, graph: Pregel, run: dict[str, Any]) -> None:
        """Fail an enqueued run with new input that reached a thread waiting on ``interrupt()``.

        A run admitted with no other run on its thread was checked by ``submit``.
        """
        kwargs = run["kwargs"]
        if run["multitask_strategy"] in ("interrupt", "rollback") or kwargs.get("command"):
            return
        if kwargs.get("input") is None:
            return
        state = await graph.aget_state(_thread_config(run["thread_id"]))
        if state.interrupts:
            raise RuntimeError(
                "thread is waiting on an interrupt; resume it with 'command' or use "
                "multitask_strategy 'interrupt'/'rollback' to discard it"
            )

    async def _finish(
        self,
        run: dict[str, Any],
        status: str,
        error: dict[str, Any] | None,
        graph: Pregel | None,
        before: Any,
        end: RunEnd | None,
    ) -> None:
        run_id, thread_id = run["run_id"], run["thread_id"]
        self._queued.discard(run_id)
        try:
            if status == "rollback":
                await self._rollback(graph, run_id, thread_id, before)
                await self.records.delete_run(run_id)
            else:
                run["status"] = status
            if end is not None and end.finished and error is None:
                # Ran to its end: the stream's last values are the thread's, nothing is next.
                self._outputs.keep(run_id, to_jsonable(end.values))
                waiting = False
            else:
                snap = await self._snapshot(thread_id, run["metadata"]["graph_id"])
                if error is not None:
                    self._outputs.keep(run_id, {"__error__": error})
                elif status != "rollback":
                    self._outputs.keep(run_id, _output_of(snap))
                waiting = bool(snap and is_interrupted(snap))
            await self._update_thread(run, error, waiting, keep_run=status != "rollback",
                                      prefix=end.prefix if end is not None else None)
        except Exception:  # boundary (cleanup): the run's stream and slot are released anyway
            logger.exception("could not record the end of run %s", run_id)
        finally:
            runs = self._thread_runs.get(thread_id, [])
            if run_id in runs:
                runs.remove(run_id)
            if not runs:
                self._thread_runs.pop(thread_id, None)
            stream = self._streams.pop(run_id)
            stream.close()
            self._finished_streams.keep(run_id, stream)
            self._tasks.pop(run_id, None)
            self._cancel_action.pop(run_id, None)
            self._finishing.discard(run_id)
            self._done.pop(run_id).set()
        if webhook := run["kwargs"].get("webhook"):
            task = asyncio.create_task(_post_webhook(webhook, run))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if run["kwargs"].get("temporary"):
            await self._delete_temporary(thread_id)

    async def _rollback(
        self, graph: Pregel | None, run_id: str, thread_id: str, before: Any
    ) -> None:
        """Return the thread to the checkpoint it had before ``run_id`` started."""
        if before is _LOOK_UP:
            first = None
            # Newest first: the last one listed is the run's first checkpoint.
            async for found in self.checkpointer.alist(
                _thread_config(thread_id), filter={"run_id": run_id}
            ):
                first = found
            if first is None:
                return  # the run wrote no checkpoint: the thread is as it was
            target = first.parent_config
        elif before is _UNREAD:
            return
        else:
            target = None if before is None else before.config
        if target is None:
            await self.checkpointer.adelete_thread(thread_id)
        elif graph is not None:
            await graph.aupdate_state(target, None, as_node="__copy__")

    async def _update_thread(
        self, run: dict[str, Any], error: dict[str, Any] | None, waiting: bool, *, keep_run: bool,
        prefix: PrefixRecorder | None = None,
    ) -> None:
        """Record the thread's status after ``run`` (and the run's record, in the same batch),
        and add the run's prompt-cache prefix figures to its ``fathom_prefix`` metadata."""
        run_id, thread_id = run["run_id"], run["thread_id"]
        thread = await self.records.get_thread(thread_id)
        if thread is None:
            if keep_run:
                await self.records.put_run(run)
            return
        others = [r for r in self._thread_runs.get(thread_id, []) if r != run_id]
        if others:
            thread["status"] = "busy"
        elif error is not None:
            thread["status"] = "error"
        else:
            thread["status"] = "interrupted" if waiting else "idle"
        thread["error"] = error
        if prefix is not None and prefix.agents():
            metadata = dict(thread.get("metadata") or {})
            metadata[PREFIX_METADATA_KEY] = merge_metadata(metadata.get(PREFIX_METADATA_KEY),
                                                           prefix)
            thread["metadata"] = metadata
        stamp = now_iso()
        thread["updated_at"] = thread["state_updated_at"] = stamp
        await self.records.put_many(threads=[thread], runs=[run] if keep_run else [])

    async def _delete_temporary(self, thread_id: str) -> None:
        await self.records.delete_thread(thread_id)
        await self.checkpointer.adelete_thread(thread_id)

    @staticmethod
    def new_run_id() -> str:
        return str(uuid.uuid4())

    async def get_run(self, thread_id: str | None, run_id: str) -> dict[str, Any]:
        """The run record, 404 if unknown (or on another thread)."""
        run = await self.records.get_run(run_id)
        if run is None or (thread_id is not None and run["thread_id"] != thread_id):
            raise NotFound(f"Run {run_id} not found")
        return run


def _output_of(snap: StateSnapshot | None) -> Any:
    """The thread's values, with ``__interrupt__`` when it waits on interrupts."""
    if snap is None:
        return None
    values = to_jsonable(snap.values)
    if snap.interrupts and isinstance(values, dict):
        values["__interrupt__"] = to_jsonable(list(snap.interrupts))
    return values


async def _post_webhook(url: str, run: dict[str, Any]) -> None:
    """POST the finished run record to ``url``; failures are logged, never raised."""
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(url, json=to_jsonable(run))
            response.raise_for_status()
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # unreachable, refused, or no URL
        logger.warning("webhook %s for run %s failed: %s", url, run["run_id"], exc)
