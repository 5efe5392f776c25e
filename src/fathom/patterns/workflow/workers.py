"""Workers: whatever performs one task, and the tries, timeouts and events around it.

A worker is a compiled LangGraph graph with a `messages` key (such as a LangChain agent),
a chat model, or a callable taking a `WorkItem` and returning the result text (sync or
async). Whatever it is, it is shown only its own task: the task's action, inputs,
success criteria and the outputs of the tasks it depends on, never the user's whole
request or the other tasks.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeAlias
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.pregel import Pregel

from fathom.backends.protocol import Plan, adrive, drive
from fathom.errors import FathomError, wrong_type
from fathom.patterns.workflow.contracts import Action, TaskResult, TaskStatus, WorkItem
from fathom.patterns.workflow.structured import named_config
from fathom.tool_answers import Failure, aattempt
from fathom.tool_answers import attempt as attempt_work

__all__ = ["Emit", "Worker", "WorkerRunner", "render_task"]


Worker: TypeAlias = Pregel | BaseChatModel | Callable[[WorkItem], str | Awaitable[str]]
"""A compiled graph with `messages`, a chat model, or `callable(WorkItem) -> str`."""

Emit: TypeAlias = Callable[..., None]
"""`emit(event, msg, **data)`: writes one progress event to the custom stream."""

_WORKER_SYSTEM = (
    "You perform one task of a larger plan. Do only this task, using its inputs and the "
    "results of the tasks it depends on, and answer with the task's result."
)


def render_task(item: WorkItem, action: Action | None = None) -> str:
    """The text a worker is given for its task: nothing about other tasks or the request."""
    task = item.task
    lines = [f"Task {task.id}: {task.action}"]
    if action is not None:
        lines.append(f"Action: {action.description}")
    inputs = json.dumps(task.inputs, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    lines += ["Inputs:", inputs]
    if item.upstream:
        lines.append("Results of the tasks it depends on:")
        lines += [f"[{dep}] {output}" for dep, output in item.upstream.items()]
    if task.success_criteria:
        lines.append(f"Success criteria: {task.success_criteria}")
    return "\n".join(lines)


class _TaskTimeout(FathomError):
    """One try of a task ran past its timeout."""


class _ToolEvents(BaseCallbackHandler):
    """Reports a worker's tool calls as `work_tool_start` / `work_tool_end` events."""

    run_inline = True  # keeps events in order on async runs

    def __init__(self, emit: Emit, task_id: str) -> None:
        self._emit = emit
        self._task_id = task_id
        self._names: dict[UUID, str] = {}

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        self._names[run_id] = name
        self._emit(
            "work_tool_start", f"calling {name}", task_id=self._task_id, tool=name, input=input_str
        )

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        name = self._names.pop(run_id, "tool")
        self._emit("work_tool_end", f"{name} finished", task_id=self._task_id, tool=name, ok=True)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        name = self._names.pop(run_id, "tool")
        self._emit(
            "work_tool_end",
            f"{name} failed",
            task_id=self._task_id,
            tool=name,
            ok=False,
            error=str(error),
        )


class _TaskUsage(BaseCallbackHandler):
    """Counts a worker's model calls and their tokens (`usage_metadata`) for one task."""

    run_inline = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        first = response.generations[0] if response.generations else []
        generation = first[0] if first else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        with self._lock:
            self.calls += 1
            if usage:
                self.input_tokens += int(usage.get("input_tokens") or 0)
                self.output_tokens += int(usage.get("output_tokens") or 0)


class WorkerRunner:
    """Runs one named worker on a task, honouring the task's timeout and retry policy.

    Args:
        agent: The worker's name (calls are tagged `lc_agent_name="worker:<agent>"`).
        worker: The worker itself.

    Raises:
        TypeError: `worker` is none of the accepted kinds, or a graph without `messages`.
    """

    def __init__(self, agent: str, worker: Worker) -> None:
        if isinstance(worker, Pregel):
            if "messages" not in worker.channels:
                raise TypeError(
                    f"worker {agent!r}: its graph state has no 'messages' key; wrap it in a "
                    "callable(WorkItem) -> str instead"
                )
        elif not isinstance(worker, BaseChatModel) and not callable(worker):
            raise wrong_type(f"worker {agent!r}", worker, "a compiled graph with a 'messages' "
                             "key, a chat model, or a callable(WorkItem) -> str")
        self.agent = agent
        self.worker = worker

    # ------------------------------------------------------------------ one try

    def _messages(self, item: WorkItem, action: Action | None) -> list[BaseMessage]:
        prompt = HumanMessage(content=render_task(item, action))
        if isinstance(self.worker, BaseChatModel):
            return [SystemMessage(content=_WORKER_SYSTEM), prompt]
        return [prompt]

    def _config(
        self, item: WorkItem, config: RunnableConfig, emit: Emit, usage: _TaskUsage
    ) -> RunnableConfig:
        named = named_config(config, f"worker:{self.agent}")
        return merge_configs(named, {"callbacks": [_ToolEvents(emit, item.task.id), usage]})

    @staticmethod
    def _text(answer: Any) -> str:
        if isinstance(answer, dict):
            structured = answer.get("structured_response")
            if structured is not None:
                data = structured.model_dump() if hasattr(structured, "model_dump") else structured
                return json.dumps(data, ensure_ascii=False, default=str)
            messages = answer.get("messages") or []
            return str(messages[-1].text) if messages else ""
        if isinstance(answer, BaseMessage):
            return str(answer.text)
        if isinstance(answer, str):
            return answer
        raise TypeError(f"the worker returned a {type(answer).__name__}; expected a str")

    def _call(self, item: WorkItem, action: Action | None, cfg: RunnableConfig) -> str:
        worker = self.worker
        if isinstance(worker, Pregel):
            return self._text(worker.invoke({"messages": self._messages(item, action)}, cfg))
        if isinstance(worker, BaseChatModel):
            return self._text(worker.invoke(self._messages(item, action), cfg))
        answer = worker(item)
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()
            raise TypeError(
                f"worker {self.agent!r} is async; run the workflow with ainvoke or astream"
            )
        return self._text(answer)

    async def _acall(self, item: WorkItem, action: Action | None, cfg: RunnableConfig) -> str:
        worker = self.worker
        if isinstance(worker, Pregel):
            answer = await worker.ainvoke({"messages": self._messages(item, action)}, cfg)
            return self._text(answer)
        if isinstance(worker, BaseChatModel):
            return self._text(await worker.ainvoke(self._messages(item, action), cfg))
        answer = worker(item)
        if inspect.isawaitable(answer):
            answer = await answer
        return self._text(answer)

    # ------------------------------------------------------------------ with tries

    def _tries(self, item: WorkItem, emit: Emit, usage: _TaskUsage) -> Plan[TaskResult]:
        """Up to `task.retry.attempts` tries, written once: it yields each try's item (the
        answer is its output or a `Failure`) and each pause before another (seconds)."""
        task = item.task
        started = time.monotonic()
        failure: tuple[TaskStatus, str] = ("failed", "")
        for attempt in range(1, task.retry.attempts + 1):
            output = yield item.model_copy(update={"attempt": attempt})
            if not isinstance(output, Failure):
                return self._result(item, "ok", attempt, started, usage, output=output)
            failure = _describe_failure(output.error, task.timeout)
            if attempt < task.retry.attempts:
                self._announce_retry(emit, item, attempt, failure[1])
                yield task.retry.backoff_s * 2 ** (attempt - 1)
        return self._result(
            item, failure[0], task.retry.attempts, started, usage, error=failure[1]
        )

    def run(
        self, item: WorkItem, action: Action | None, config: RunnableConfig, emit: Emit
    ) -> TaskResult:
        """Try the task up to `task.retry.attempts` times; never raises for a failed try."""
        usage = _TaskUsage()
        cfg, timeout = self._config(item, config, emit, usage), item.task.timeout

        def step(op: WorkItem | float) -> Any:
            if not isinstance(op, WorkItem):
                return time.sleep(op)
            return attempt_work(partial(_with_timeout, partial(self._call, op, action, cfg),
                                        timeout), _TRY)  # fmt: skip

        return drive(self._tries(item, emit, usage), step)

    async def arun(
        self, item: WorkItem, action: Action | None, config: RunnableConfig, emit: Emit
    ) -> TaskResult:
        """Async `run`; a timed-out try is cancelled."""
        usage = _TaskUsage()
        cfg, timeout = self._config(item, config, emit, usage), item.task.timeout

        async def step(op: WorkItem | float) -> Any:
            if not isinstance(op, WorkItem):
                return await asyncio.sleep(op)
            return await aattempt(_awith_timeout(self._acall(op, action, cfg), timeout), _TRY)

        return await adrive(self._tries(item, emit, usage), step)

    def _announce_retry(self, emit: Emit, item: WorkItem, attempt: int, error: str) -> None:
        emit(
            "work_retry",
            f"task {item.task.id}: try {attempt} failed, trying again",
            task_id=item.task.id,
            attempt=attempt,
            error=error,
        )

    def _result(
        self,
        item: WorkItem,
        status: TaskStatus,
        attempts: int,
        started: float,
        usage: _TaskUsage,
        *,
        output: str = "",
        error: str | None = None,
    ) -> TaskResult:
        return TaskResult(
            task_id=item.task.id,
            agent=self.agent,
            action=item.task.action,
            status=status,
            output=output,
            error=error,
            attempts=attempts,
            round=item.round,
            elapsed_s=round(time.monotonic() - started, 3),
            model_calls=usage.calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )


_TRY = "a workflow task's try"
"""What a failed try is called in the log (a failed try is the task's result)."""


def _describe_failure(error: Exception, timeout: float | None) -> tuple[TaskStatus, str]:
    if isinstance(error, _TaskTimeout):
        return "timeout", f"timed out after {timeout:g}s"
    return "failed", f"{type(error).__name__}: {error}"


def _with_timeout(call: Callable[[], str], timeout: float | None) -> str:
    if timeout is None:
        return call()
    # A thread cannot be cancelled: on timeout the try is abandoned and left to finish
    # in the background; its answer is ignored.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fathom-worker")
    future = pool.submit(contextvars.copy_context().run, call)
    try:
        return future.result(timeout=timeout)
    except TimeoutError as error:
        if future.done():
            raise
        raise _TaskTimeout from error
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


async def _awith_timeout(call: Awaitable[str], timeout: float | None) -> str:
    if timeout is None:
        return await call
    try:
        return await asyncio.wait_for(call, timeout)
    except TimeoutError as error:
        raise _TaskTimeout from error
