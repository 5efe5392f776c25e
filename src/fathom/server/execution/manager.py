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
* **Recovery**: on start-up, the runs a dead server left ``pending`` or ``running`` start
  again, oldest first, under their own ``run_id``: a run that never started simply starts;
  one that had started resumes from its last checkpoint (``fathom.runs.has_unfinished_step``
  decides, from the pending tasks and their saved writes), and one whose graph had already
  finished is only recorded. A server that shuts down cleanly (the ASGI lifespan ends)
  cancels its active runs first; they are recorded ``interrupted``.
* **Replicas** (with a ``PostgresRunQueue``, see ``replicas``): runs are not started by the
  server that admitted them but claimed from the shared queue by any server with a free
  slot; admission, cancellation, joins and streams work across servers, a dead server's runs
  are resumed by another one once their lease expires, and a clean shutdown hands its runs
  back to the queue instead of interrupting them.
* **Resumable streams** (``stream_resumable=True``): on a single server the run's events are
  also written, in batches, to the store (``event_log``); on replicas they are in the shared
  events table anyway. Either way listeners get only stored events, so ``Last-Event-ID``
  resumes with no gap and no repeat, after the run's memory copy is gone or a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from fathom.cache_metrics import PREFIX_METADATA_KEY, PrefixRecorder, merge_metadata
from fathom.hosting.loopback import run_context
from fathom.measure.calls import CALLS_METADATA_KEY, CallRecord, append_stored
from fathom.runs import has_unfinished_step
from fathom.server.errors import Conflict, NotFound
from fathom.server.execution.broker import RunStream
from fathom.server.execution.event_log import EventLog, StoredRunStream
from fathom.server.execution.locks import KeyedLocks, member_of
from fathom.server.execution.runner import RunEnd, build_config, stream_run
from fathom.server.graphs import GraphRegistry
from fathom.server.records import RecordStore, now_iso
from fathom.server.serde import to_jsonable
from fathom.server.snapshots import is_interrupted

if TYPE_CHECKING:
    from fathom.server.execution.replicas import Claim, PostgresRunQueue, SharedRunStream

__all__ = ["RunManager"]

logger = logging.getLogger(__name__)

_KEEP_FINISHED = 512
_UNREAD: Any = object()  # the run never read the thread's checkpoint: nothing to roll back
_LOOK_UP: Any = object()  # find the checkpoint before the run only if a rollback needs it
_ACTIVE = ("pending", "running")
_FINISHED: Any = object()  # a resumed run whose graph had already finished: only record it


@contextlib.contextmanager
def _logged(what: str, *args: object) -> Iterator[None]:
    """Run the body as a cleanup of a run's end: its failure (the storage's, the store's,
    the checkpointer's) is logged as `what % args`, and the rest of the cleanup goes on."""
    try:
        yield
    except Exception:  # boundary (cleanup): the run's stream and slot are released anyway
        logger.exception(what, *args)


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
        queue: PostgresRunQueue | None = None,
    ) -> None:
        """``queue``: the run queue shared with other servers; None runs everything here."""
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
        self.queue = queue
        self._held: set[str] = set()  # claimed runs whose slot the dispatcher took for them
        self._lost: set[str] = set()  # runs another server owns now: record nothing for them
        self._dispatcher: asyncio.Task[None] | None = None
        self._launched: dict[str, set[asyncio.Queue[tuple[str, Any]]]] = {}
        self.event_log = EventLog(records.store) if queue is None else None
        """Where resumable runs' events are stored on a single server (None on replicas)."""
        if self.event_log is not None:
            self.event_log.on_stored = self._stored
        if queue is not None:
            queue.on_cancel = self._cancel_here
            queue.on_lost = self._give_up
            queue.on_stored = self._stored

    # lifecycle
    async def start(self) -> None:
        """Resume the runs a dead server left behind, or join the shared queue; idempotent and
        safe to call concurrently."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._begin())
        await asyncio.shield(self._started)

    async def _begin(self) -> None:
        if self.queue is None:
            await self._recover()
            return
        await self.queue.open()
        self._dispatcher = asyncio.create_task(self._dispatch(), name="fathom-run-dispatch")

    async def _recover(self) -> None:
        left = [run for status in _ACTIVE for run in await self.records.list_runs(status=status)]
        left.sort(key=lambda run: run["created_at"])
        for run in left:
            if run["run_id"] in self._tasks:
                continue
            if await self.records.get_thread(run["thread_id"]) is None:
                continue  # its thread was deleted: nothing to resume into
            logger.warning("run %s was %s when the server stopped; resuming it",
                           run["run_id"], run["status"])  # fmt: skip
            earlier = None
            if self.event_log is not None and run["kwargs"].get("resumable"):
                earlier = await self.event_log.read(run["thread_id"], run["run_id"])
            self._launch(run, 2 if run["status"] == "running" else 1, earlier)

    async def shutdown(self) -> None:
        """Cancel every active run (recorded ``interrupted``, or handed back to the shared
        queue) and wait for their tasks."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(BaseException):
                await self._dispatcher
        handed = list(self._tasks) if self.queue is not None else []
        self._lost.update(handed)
        tasks = list(self._tasks.values())
        for run_id in list(self._tasks):
            self._cancel_here(run_id)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for pending in list(self._background):
            with contextlib.suppress(BaseException):
                await pending
        if self.queue is not None:
            await self.queue.release(handed)
            await self.queue.close()
        if self.event_log is not None:
            await self.event_log.close()

    # queries
    async def active_runs(self, thread_id: str) -> list[str]:
        """Ids of the thread's pending and running runs (on every server), oldest first."""
        if self.queue is not None:
            return await self.queue.active_runs(thread_id)
        return list(self._thread_runs.get(thread_id, []))

    async def stream(
        self, run: dict[str, Any]
    ) -> RunStream | SharedRunStream | StoredRunStream | None:
        """The live or recently finished event stream of ``run``, wherever it runs; for a
        resumable run on a single server, also its stored events once it left memory."""
        run_id = run["run_id"]
        local = self._streams.get(run_id) or self._finished_streams.get(run_id)
        if local is not None:
            return local
        if self.queue is None:
            if self.event_log is None or not run["kwargs"].get("resumable"):
                return None
            stored = await self.event_log.read(run["thread_id"], run_id)
            local = self._streams.get(run_id) or self._finished_streams.get(run_id)
            return local or (StoredRunStream(run_id, stored) if stored else None)
        from fathom.server.execution.replicas import SharedRunStream

        if await self.queue.is_queued(run_id) or await self.queue.has_events(run_id):
            return SharedRunStream(self.queue, run_id)
        return None

    async def is_active(self, run_id: str) -> bool:
        """Whether ``run_id`` is pending or running (on any server)."""
        if run_id in self._tasks:
            return True
        return self.queue is not None and await self.queue.is_queued(run_id)

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
        """Admit ``run`` on ``thread`` under its multitask strategy and start (or queue) it."""
        if self.queue is not None:
            return await self._submit_shared(run, thread)
        thread_id = thread["thread_id"]
        async with self._admission.hold(thread_id):
            active = await self.active_runs(thread_id)
            await self._check_admission(run, thread, active)
            await self.records.put_many(threads=[_busy(thread, run)], runs=[run])
            self._launch(run, 1)
            await self._supersede(run, active)
        return run

    async def _submit_shared(self, run: dict[str, Any], thread: dict[str, Any]) -> dict[str, Any]:
        """Admission through the shared queue: any server with a free slot claims the run."""
        assert self.queue is not None
        async with self.queue.admitting(thread["thread_id"]) as admission:
            active = await admission.active_runs()
            await self._check_admission(run, thread, active)
            await self.records.put_many(threads=[_busy(thread, run)], runs=[run])
            await admission.enqueue(run)
        await self._supersede(run, active)
        return run

    async def _check_admission(
        self, run: dict[str, Any], thread: dict[str, Any], active: list[str]
    ) -> None:
        """Raise ``Conflict`` when the strategy refuses ``run`` beside the ``active`` runs."""
        strategy = run["multitask_strategy"]
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

    async def _supersede(self, run: dict[str, Any], active: list[str]) -> None:
        """Under ``interrupt`` and ``rollback``, cancel the runs the new one replaces."""
        strategy = run["multitask_strategy"]
        if strategy in ("interrupt", "rollback"):
            for other in active:
                await self.cancel(other, strategy)

    def _launch(self, run: dict[str, Any], attempt: int,
                earlier: list[tuple[str, bytes]] | None = None) -> None:  # fmt: skip
        """Start the task that runs ``run`` here (after the thread's earlier runs); an
        ``attempt`` above 1 resumes a run whose server died."""
        run_id, thread_id = run["run_id"], run["thread_id"]
        if self._thread_runs.get(thread_id):
            self._queued.add(run_id)
        self._thread_runs.setdefault(thread_id, []).append(run_id)
        resumable = bool(run["kwargs"].get("resumable"))
        sink = self.queue.publish if self.queue is not None else None
        if resumable and self.event_log is not None:
            sink = self.event_log.sink(thread_id)
        self._streams[run_id] = RunStream(
            run_id, earlier=earlier or (), sink=sink, durable=resumable
        )
        self.note_thread(thread_id, "run", run_id)
        self._done[run_id] = asyncio.Event()
        task = asyncio.create_task(
            self._execute(run, attempt), name=f"run-{run_id}", context=run_context()
        )
        task.add_done_callback(lambda _t, run=run: self._after_task(run))
        self._tasks[run_id] = task

    def _stored(self, run_id: str, count: int) -> None:
        """The run's first ``count`` events are stored: its durable listeners may read them."""
        stream = self._streams.get(run_id)
        if stream is not None:
            stream.mark_stored(count)

    def thread_notes(
        self, thread_id: str
    ) -> contextlib.AbstractContextManager[asyncio.Queue[tuple[str, Any]]]:
        """A queue told ``("run", run_id)`` for each run of ``thread_id`` that starts here,
        and the thread's other notes (``note_thread``), while the block runs: what the thread
        stream follows (on replicas it also polls for runs started elsewhere)."""
        return member_of(self._launched, thread_id, asyncio.Queue())

    def listens_to(self, thread_id: str) -> bool:
        """Whether a thread stream follows ``thread_id`` here."""
        return thread_id in self._launched

    def note_thread(self, thread_id: str, kind: str, value: Any) -> None:
        """Tell the thread's streams here of ``kind`` (``run``, ``state_update``)."""
        for listener in self._launched.get(thread_id, ()):
            listener.put_nowait((kind, value))

    # the shared queue
    async def _dispatch(self) -> None:
        """Claim runs from the shared queue while this server has free slots."""
        assert self.queue is not None
        while True:
            await self._slots.acquire()
            claim = await self.queue.claim()
            if claim is None:
                self._slots.release()
                await self.queue.wait_for_work()
                continue
            self._start_claimed(claim)

    def _start_claimed(self, claim: Claim) -> None:
        run_id = claim.run["run_id"]
        if claim.attempt > 1:  # a dead server's run: its stream goes on after its last event
            logger.warning("resuming run %s (attempt %d) from its last checkpoint",
                           run_id, claim.attempt)  # fmt: skip
        self._held.add(run_id)
        self._launch(claim.run, claim.attempt, claim.earlier)
        if claim.cancel:
            self._cancel_here(run_id, claim.cancel)

    def _give_up(self, run_ids: set[str]) -> None:
        """Stop runs whose lease another server took: it resumes them; record nothing."""
        for run_id in run_ids:
            if run_id in self._tasks:
                self._lost.add(run_id)
                self._cancel_here(run_id)

    def _after_task(self, run: dict[str, Any]) -> None:
        """Record the end of a run whose task was cancelled before its first step."""
        run_id = run["run_id"]
        if run_id in self._held:  # cancelled before it reached the slot claimed for it
            self._held.discard(run_id)
            self._slots.release()
        if run_id in self._tasks and run_id not in self._finishing:
            self._finishing.add(run_id)
            status = self._cancelled_status(run_id)
            finish = asyncio.ensure_future(self._finish(run, status, None, None, _UNREAD, None))
            self._background.add(finish)
            finish.add_done_callback(self._background.discard)

    # cancellation and waits
    async def cancel(self, run_id: str, action: str = "interrupt") -> bool:
        """Cancel the run wherever it is; ``False`` if it is not active.

        A run of this server that is interrupted reads ``interrupted`` from the moment the
        cancel is accepted, not only once its task has unwound: a client that cancels and
        then reads the run (a supervisor's cancel, then its check) sees the cancel, however
        busy the server is. Its end is recorded as usual when the task stops."""
        if self._cancel_here(run_id, action):
            if action == "interrupt":
                record = await self.records.get_run(run_id)
                if record is not None and record.get("status") in ("pending", "running"):
                    await self.records.put_run({**record, "status": "interrupted"})
            return True
        if self.queue is None:
            return False
        outcome, record = await self.queue.cancel(run_id, action)
        if record is not None:  # still queued: it never started, so end it here
            await self._end_unstarted(record, action)
        return outcome != "gone"

    def _cancel_here(self, run_id: str, action: str = "interrupt") -> bool:
        """Cancel the run's task in this server; ``False`` if it does not run here."""
        task = self._tasks.get(run_id)
        if task is None or run_id in self._finishing:
            return False
        self._cancel_action.setdefault(run_id, action)
        task.cancel()
        return True

    async def _end_unstarted(self, run: dict[str, Any], action: str) -> None:
        """Record the end of a queued run cancelled before any server claimed it."""
        if action == "rollback":
            await self.records.delete_run(run["run_id"])
        else:
            run["status"] = "interrupted"
        snap = await self._snapshot(run["thread_id"], run["metadata"].get("graph_id"))
        await self._update_thread(run, None, bool(snap and is_interrupted(snap)),
                                  keep_run=action != "rollback")  # fmt: skip

    async def wait(self, run_id: str) -> None:
        """Return once ``run_id`` is no longer active (on any server)."""
        done = self._done.get(run_id)
        if done is not None:
            await done.wait()
        elif self.queue is not None:
            await self.queue.wait_gone(run_id)

    async def output(self, run: dict[str, Any]) -> Any:
        """What ``join``/``wait`` answer: the thread's values (+ ``__interrupt__``) or the error."""
        await self.wait(run["run_id"])
        if run["run_id"] in self._outputs:
            return self._outputs[run["run_id"]]
        ended = await self.records.get_run(run["run_id"])
        if ended is not None and ended["status"] == "error":  # ended on another server
            thread = await self.records.get_thread(run["thread_id"]) or {}
            return {"__error__": thread.get("error")}
        return await self._thread_output(run["thread_id"], run["metadata"].get("graph_id"))

    async def _thread_output(self, thread_id: str, graph_id: str | None) -> Any:
        return _output_of(await self._snapshot(thread_id, graph_id))

    async def _snapshot(self, thread_id: str, graph_id: str | None) -> StateSnapshot | None:
        if graph_id not in self.registry.names:
            return None
        graph = await self.registry.graph(graph_id)
        return await graph.aget_state(_thread_config(thread_id))

    # execution
    async def _execute(self, run: dict[str, Any], attempt: int) -> None:
        run_id, thread_id = run["run_id"], run["thread_id"]
        entered = False
        # Runs claimed from the shared queue need no lock: the queue runs one per thread.
        turn = self._thread_locks.hold(thread_id) if self.queue is None else _no_lock()
        try:
            async with turn:
                entered = True
                status, error, graph, before, end = await self._invoke(run, attempt)
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

    @contextlib.asynccontextmanager
    async def _slot(self, run_id: str) -> AsyncIterator[None]:
        """Hold a pool slot for the body: the one the dispatcher claimed the run with, if any."""
        if run_id in self._held:
            self._held.discard(run_id)
        else:
            await self._slots.acquire()
        try:
            yield
        finally:
            self._slots.release()

    def _cancelled_status(self, run_id: str) -> str:
        return "rollback" if self._cancel_action.get(run_id) == "rollback" else "interrupted"

    async def _invoke(
        self, run: dict[str, Any], attempt: int
    ) -> tuple[str, dict[str, Any] | None, Pregel | None, Any, RunEnd | None]:
        """Execute the graph in a pool slot; returns ``(status, error, graph, before, end)``.

        A later ``attempt`` (its server died) continues from its last checkpoint if any.
        """
        run_id, thread_id = run["run_id"], run["thread_id"]
        stream = self._streams[run_id]
        graph: Pregel | None = None
        before: Any = _UNREAD
        kwargs = run["kwargs"]
        resumed = attempt > 1
        try:
            async with self._slot(run_id):
                self.active_count += 1
                self.max_active_seen = max(self.max_active_seen, self.active_count)
                try:
                    config = build_config(run, run["metadata"]["graph_id"])
                    graph = await self.registry.graph(run["metadata"]["graph_id"], config)
                    invocation = await self._resumption(graph, run) if resumed else run
                    if invocation is _FINISHED:
                        return "success", None, graph, _LOOK_UP, None
                    if invocation is not run:
                        config = build_config(invocation, run["metadata"]["graph_id"])
                    elif kwargs.get("checkpoint") or kwargs.get("checkpoint_id"):
                        # The run starts from an older checkpoint: its first checkpoint's
                        # parent is not the thread's latest, so read that now.
                        before = await self.checkpointer.aget_tuple(_thread_config(thread_id))
                    else:
                        before = _LOOK_UP
                    run["status"] = "running"
                    await self.records.put_run(run)
                    if run_id in self._queued and not resumed:
                        await self._check_interrupt(graph, run)
                    stream.publish("metadata", {"run_id": run_id, "attempt": attempt})
                    end = await stream_run(graph, invocation, config, stream.publish)
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

    async def _resumption(self, graph: Pregel, run: dict[str, Any]) -> Any:
        """How a run resumes after its server died.

        It starts over with its own input if it wrote no checkpoint; it continues with no
        input (LangGraph keeps the finished tasks' saved writes and runs the rest) if its last
        step is unfinished; otherwise its graph had finished: ``_FINISHED``.
        """
        config = _thread_config(run["thread_id"])
        async for _ in self.checkpointer.alist(config, filter={"run_id": run["run_id"]},
                                               limit=1):  # fmt: skip
            break
        else:
            return run
        if not has_unfinished_step(await graph.aget_state(config)):
            return _FINISHED
        kwargs = {key: value for key, value in run["kwargs"].items()
                  if key not in ("input", "command", "checkpoint", "checkpoint_id")}  # fmt: skip
        return {**run, "kwargs": kwargs}

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
        await self._store_events(run)
        if run_id in self._lost:  # another server has (or will have) the run: it records
            self._forget(run_id, thread_id)
            return
        try:
            with _logged("could not record the end of run %s", run_id):
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
                await self._update_thread(
                    run,
                    error,
                    waiting,
                    keep_run=status != "rollback",
                    prefix=end.prefix if end is not None else None,
                    calls=end.calls if end is not None else None,
                )
                if self.queue is not None:
                    await self.queue.finish(run_id)
        finally:
            self._forget(run_id, thread_id)
        if webhook := run["kwargs"].get("webhook"):
            task = asyncio.create_task(_post_webhook(webhook, run))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if run["kwargs"].get("temporary"):
            await self._delete_temporary(thread_id)

    async def _store_events(self, run: dict[str, Any]) -> None:
        """Write a resumable run's last events before its stream closes (single server)."""
        if self.event_log is None or not run["kwargs"].get("resumable"):
            return
        with _logged("could not store the last events of run %s", run["run_id"]):
            await self.event_log.flush()  # on failure the listeners still get them from memory

    def _forget(self, run_id: str, thread_id: str) -> None:
        """Drop the run from this server's active runs; its stream stays joinable a while."""
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
        self._lost.discard(run_id)
        self._done.pop(run_id).set()

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
        self,
        run: dict[str, Any],
        error: dict[str, Any] | None,
        waiting: bool,
        *,
        keep_run: bool,
        prefix: PrefixRecorder | None = None,
        calls: list[CallRecord] | None = None,
    ) -> None:
        """Record the thread's status after ``run`` (and the run's record, in the same batch),
        add the run's prompt-cache prefix figures to its ``fathom_prefix`` metadata and its
        model calls to its ``fathom_calls`` (the last ``STORED_CALLS``)."""
        run_id, thread_id = run["run_id"], run["thread_id"]
        thread = await self.records.get_thread(thread_id)
        if thread is None:
            if keep_run:
                await self.records.put_run(run)
            return
        others = [r for r in await self.active_runs(thread_id) if r != run_id]
        if others:
            thread["status"] = "busy"
        elif error is not None:
            thread["status"] = "error"
        else:
            thread["status"] = "interrupted" if waiting else "idle"
        thread["error"] = error
        if prefix is not None and prefix.agents():
            metadata = dict(thread.get("metadata") or {})
            metadata[PREFIX_METADATA_KEY] = merge_metadata(
                metadata.get(PREFIX_METADATA_KEY), prefix
            )
            thread["metadata"] = metadata
        if calls:
            metadata = dict(thread.get("metadata") or {})
            metadata[CALLS_METADATA_KEY] = append_stored(metadata.get(CALLS_METADATA_KEY), calls)
            thread["metadata"] = metadata
        stamp = now_iso()
        thread["updated_at"] = thread["state_updated_at"] = stamp
        await self.records.put_many(threads=[thread], runs=[run] if keep_run else [])

    async def _delete_temporary(self, thread_id: str) -> None:
        await self.records.delete_thread(thread_id)
        await self.checkpointer.adelete_thread(thread_id)
        await self.forget_events(thread_id)

    async def forget_events(self, thread_id: str) -> None:
        """Delete the stored stream events of the thread's runs (the thread is deleted)."""
        if self.event_log is not None:
            await self.event_log.delete_thread(thread_id)

    @staticmethod
    def new_run_id() -> str:
        return str(uuid.uuid4())

    async def get_run(self, thread_id: str | None, run_id: str) -> dict[str, Any]:
        """The run record, 404 if unknown (or on another thread)."""
        run = await self.records.get_run(run_id)
        if run is None or (thread_id is not None and run["thread_id"] != thread_id):
            raise NotFound(f"Run {run_id} not found")
        return run


def _busy(thread: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The thread record as ``run`` is admitted: busy, and bound to the run's graph."""
    metadata = thread.setdefault("metadata", {})
    metadata.setdefault("graph_id", run["metadata"]["graph_id"])
    metadata.setdefault("assistant_id", run["assistant_id"])
    thread["status"] = "busy"
    thread["updated_at"] = now_iso()
    return thread


@contextlib.asynccontextmanager
async def _no_lock() -> AsyncIterator[None]:
    yield


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
