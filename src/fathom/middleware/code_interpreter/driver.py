"""Runs one `eval` as a small LangGraph graph, so a human approval inside a subagent that
the code started pauses the code durably and resumes it where it stopped.

Two nodes take turns. `run` drives the sandbox until the code either finishes or waits
on `task()` calls only; then it dumps the suspended interpreter (a Monty snapshot, bytes)
into the graph state and ends its step. `dispatch` runs one subagent per waiting call,
all of them in one step (LangGraph `Send`s), and writes each answer into the state. The
next `run` restores the snapshot in a fresh sandbox and hands it the answers.

The graph is a subgraph of the `eval` tool's task, so it is checkpointed with the
agent's thread. When a subagent interrupts for approval, LangGraph keeps the answers of
the subagents that finished in the same step and the snapshot from the step before; on
`Command(resume=...)` only the interrupted subagent runs again (resuming from its own
checkpoint), and the code continues from the snapshot: it is not replayed.

`tools.<name>()` calls are run by `run` itself, concurrently, since they do not interrupt.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from fathom.middleware.code_interpreter.events import subagent_event
from fathom.middleware.code_interpreter.host import (
    TOOL_FUNCTION,
    exception_result,
    plain,
    prelude,
    render_value,
    run_tool,
    task_call,
)
from fathom.middleware.code_interpreter.limits import (
    CodeInterpreterLimits,
    HostCallLimitError,
    describe_failure,
)
from fathom.middleware.code_interpreter.schema import (
    ResponseSchemaError,
    parse_answer,
    schema_instruction,
)
from fathom.middleware.code_interpreter.session import seal, unseal
from fathom.tool_answers import Failure, aattempt, exception_text

__all__ = ["EvalContext", "build_driver", "current_eval"]

logger = logging.getLogger(__name__)


@dataclass
class EvalContext:
    """What the driver's nodes need from the `eval` call they run for (host objects,
    never checkpointed: the `eval` tool sets them again when a resumed run re-enters)."""

    subagents: Any  # a SubAgentMiddleware, or None
    tools: Mapping[str, BaseTool]
    state: Mapping[str, Any]
    tool_call_id: str
    writer: Callable[[Any], None] | None
    semaphore: asyncio.Semaphore
    recursion_limit: int | None
    keep_session: bool
    config: RunnableConfig = field(default_factory=lambda: RunnableConfig())
    runtime: Any = None
    """The `eval` call's `ToolRuntime`, the base of the one each tool the code calls gets."""
    tool_updates: dict[str, Any] = field(default_factory=dict)
    """State updates of the tools the code called (files written into state), merged."""

    def add_tool_update(self, update: Mapping[str, Any]) -> None:
        """Merge one tool's state update (file deltas merge; other keys: the last wins)."""
        self.tool_updates = _updates(self.tool_updates, dict(update))

    def tool_runtime(self) -> Any:
        """A `ToolRuntime` for a tool the code calls: the `eval` call's, over the state as
        the code's earlier tool calls left it."""
        if self.runtime is None:
            return None
        state = dict(self.state)
        if self.tool_updates.get("files"):
            state["files"] = {**(state.get("files") or {}), **self.tool_updates["files"]}
        return dataclasses.replace(self.runtime, state=state)


_CURRENT: contextvars.ContextVar[EvalContext | None] = contextvars.ContextVar(
    "fathom_code_interpreter_eval", default=None
)


def current_eval() -> contextvars.ContextVar[EvalContext | None]:
    """The context variable holding the running `eval`'s `EvalContext`."""
    return _CURRENT


def _results(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Answers of `task()` calls by call id; `{"__replace__": d}` replaces them all."""
    if new and "__replace__" in new:
        return dict(new["__replace__"])
    return {**(old or {}), **(new or {})}


def _updates(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """State updates from subagents (files): file deltas merge, other keys last one wins."""
    merged = dict(old or {})
    for key, value in (new or {}).items():
        if key == "files" and isinstance(value, Mapping):
            merged["files"] = {**(merged.get("files") or {}), **value}
        else:
            merged[key] = value
    return merged


class DriverState(TypedDict, total=False):
    code: str
    session: bytes | None
    snapshot: bytes | None
    pending: dict[str, dict[str, Any]]
    results: Annotated[dict[str, Any], _results]
    updates: Annotated[dict[str, Any], _updates]
    output: str
    host_calls: int
    result: str | None
    error: str | None
    done: bool


class _Runtime:
    """The parts of a `ToolRuntime` that `SubAgentMiddleware` reads to run a subagent."""

    def __init__(self, state: Mapping[str, Any], config: RunnableConfig, tool_call_id: str):
        self.state, self.config, self.tool_call_id = state, config, tool_call_id


def _context() -> EvalContext:
    ctx = _CURRENT.get()
    if ctx is None:
        raise RuntimeError("the code interpreter's graph runs only inside its eval tool")
    return ctx


async def _resume(snap: Any, *answer: Any) -> Any:
    """`snap.resume(answer)`: Monty types its answers as TypedDicts; here they are plain
    dicts, the form they are checkpointed in."""
    return await snap.resume(*answer)


async def _limited_tool(ctx: EvalContext, args: tuple[Any, ...],
                        config: RunnableConfig) -> dict[str, Any]:
    async with ctx.semaphore:
        return await run_tool(ctx.tools, args, config, runtime=ctx.tool_runtime,
                              on_update=ctx.add_tool_update)


async def _drive(start: Any, ctx: EvalContext, limits: CodeInterpreterLimits,
                 pending: dict[str, dict[str, Any]], host_calls: int,
                 config: RunnableConfig) -> tuple[Any, int]:
    """Answer the sandbox until it completes or waits on `task()` calls alone."""
    from pydantic_monty import (
        AsyncFunctionSnapshot,
        AsyncFutureSnapshot,
        AsyncNameLookupSnapshot,
        MontyComplete,
    )

    local: dict[int, asyncio.Task[Any]] = {}
    known = list(getattr(ctx.subagents, "subagents", None) or {})
    snap: Any = start  # Monty's snapshot types; results are built as plain dicts here
    try:
        while not isinstance(snap, MontyComplete):
            if isinstance(snap, AsyncNameLookupSnapshot):
                snap = await _resume(snap)  # an undefined name: NameError in the code
            elif isinstance(snap, AsyncFunctionSnapshot):
                name = snap.function_name
                if snap.is_os_function:  # files, clock-free os calls, imports: refused
                    snap = await snap.resume_not_handled()
                    continue
                if name not in ("task", TOOL_FUNCTION):
                    snap = await _resume(snap, exception_result(
                        "NameError", f"name {name!r} is not defined"))
                    continue
                host_calls += 1
                if host_calls > limits.max_host_calls:
                    raise HostCallLimitError(
                        f"HostCallLimitError: the code made more than {limits.max_host_calls} "
                        "task()/tools calls in one eval (the limit). Do fewer per eval, or "
                        "batch the work into fewer, larger tasks."
                    )
                if name == TOOL_FUNCTION:
                    local[snap.call_id] = asyncio.ensure_future(
                        _limited_tool(ctx, snap.args, config))
                    snap = await _resume(snap, {"future": ...})
                    continue
                try:
                    call = task_call(snap.args, snap.kwargs, known)
                except (TypeError, ValueError) as error:
                    snap = await _resume(snap, exception_result(type(error).__name__, str(error)))
                    continue
                pending[str(snap.call_id)] = call.as_dict()
                snap = await _resume(snap, {"future": ...})
            elif isinstance(snap, AsyncFutureSnapshot):
                waiting = [i for i in snap.pending_call_ids if i in local]
                if not waiting:
                    return snap, host_calls  # only task() calls left: dispatch them
                await asyncio.wait([local[i] for i in waiting],
                                   return_when=asyncio.FIRST_COMPLETED)
                settled = {i: local.pop(i).result() for i in waiting if local[i].done()}
                snap = await _resume(snap, settled)
            else:  # pragma: no cover - a snapshot kind newer than this code
                raise RuntimeError(f"unexpected interpreter state {type(snap).__name__}")
        return snap, host_calls
    finally:
        for task in local.values():
            task.cancel()


_TAMPERED = (
    "the interpreter's saved state failed its integrity check (snapshot_signing_key) and "
    "was discarded; run the code again."
)


def build_driver(
    limits: CodeInterpreterLimits, tool_names: list[str], signing_key: bytes | None = None
) -> Any:
    """The compiled driver graph for one middleware's limits and allowed tools.

    With `signing_key`, every dump it stores (the session, and the snapshot kept while
    subagents run or wait for approval) is signed, and one whose signature is missing or
    wrong is discarded rather than loaded (`session.seal` / `session.unseal`).
    """
    setup = prelude(tool_names)

    async def run(state: DriverState, config: RunnableConfig) -> dict[str, Any]:
        from pydantic_monty import AsyncMonty, MontyComplete, MontyError, ResourceLimits

        ctx = _context()
        printed: list[str] = [state.get("output") or ""]

        def on_print(stream: str, text: str) -> None:
            printed.append(text)

        pending: dict[str, dict[str, Any]] = {}
        host_calls = state.get("host_calls") or 0
        limits_ = ResourceLimits(**limits.resource_limits())  # pyright: ignore[reportArgumentType]
        async with AsyncMonty(min_processes=1, max_processes=1) as pool:
            session = pool.checkout(limits=limits_)
            async with session:
                try:
                    if state.get("snapshot"):
                        raw = unseal(state.get("snapshot"), signing_key)
                        if raw is None:
                            return {"error": _TAMPERED, "output": "".join(printed),
                                    "done": True, "snapshot": None}
                        snap = await session.load_snapshot(raw, print_callback=on_print)
                        answers = state.get("results") or {}
                        ids = getattr(snap, "pending_call_ids", [])
                        snap = await _resume(snap,
                            {i: answers[str(i)] for i in ids if str(i) in answers})
                        leftover = {k: v for k, v in answers.items()
                                    if int(k) not in ids}
                    else:
                        leftover = {}
                        stored = state.get("session")
                        kept = unseal(stored, signing_key) if stored else None
                        if stored and kept is None:
                            logger.warning("Discarding an interpreter session whose signature "
                                           "is missing or wrong; the code starts afresh.")
                        if kept:
                            await session.load_session(kept)
                        elif setup:
                            await session.feed_run(setup, print_callback=on_print)
                        snap = await session.feed_start(state.get("code") or "",
                                                        print_callback=on_print)
                    snap, host_calls = await _drive(snap, ctx, limits, pending, host_calls,
                                                    config)
                except (MontyError, HostCallLimitError) as error:
                    return {"error": describe_failure(error, limits), "output": "".join(printed),
                            "done": True, "snapshot": None}
                if isinstance(snap, MontyComplete):
                    blob = seal(await session.dump(), signing_key) if ctx.keep_session else None
                    value = snap.output
                    return {"result": None if value is None else render_value(plain(value)),
                            "session": blob, "snapshot": None, "done": True,
                            "output": "".join(printed)}
                return {"snapshot": seal(snap.dump(), signing_key), "pending": pending,
                        "host_calls": host_calls,
                        "results": {"__replace__": leftover}, "output": "".join(printed)}

    def route(state: DriverState) -> Any:
        if state.get("done"):
            return END
        answered = state.get("results") or {}
        sends = [Send("dispatch", {"call_id": cid, **call})
                 for cid, call in (state.get("pending") or {}).items() if cid not in answered]
        return sends or "run"

    async def dispatch(call: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        ctx = _context()
        cid, label, kind = call["call_id"], call.get("label"), call["subagent_type"]
        event = {"subagent_type": kind, "label": label, "call_id": cid,
                 "tool_call_id": ctx.tool_call_id}
        async with ctx.semaphore:
            subagent_event(ctx.writer, "start", **event)
            run_config = RunnableConfig(**config)
            if ctx.recursion_limit is not None:
                run_config["recursion_limit"] = ctx.recursion_limit
            runtime = _Runtime(ctx.state, run_config, f"{ctx.tool_call_id}:{cid}")
            description = call["description"]
            schema = call.get("response_schema")
            if schema:
                description += schema_instruction(schema)
            prepared = ctx.subagents._prepare(runtime, description, kind)

            async def run() -> tuple[Any, dict[str, Any]]:
                if not isinstance(prepared, tuple):
                    raise ValueError(str(prepared.content))
                spec, payload, sub_config = prepared
                result = await spec["runnable"].ainvoke(payload, sub_config)
                command = ctx.subagents._finish(runtime, spec, result)
                update = {k: v for k, v in (command.update or {}).items() if k != "messages"}
                answer = command.update["messages"][0].content
                return (parse_answer(answer, schema) if schema else answer), update

            # the subagent's run is a boundary: its failure (logged by `aattempt`) is raised
            # in the code, and an interrupt goes on up
            outcome = await aattempt(run(), f"subagent {kind!r} for the code interpreter")
            if isinstance(outcome, Failure):
                error = outcome.error
                schema_error = isinstance(error, ResponseSchemaError)
                kind_name = "ValueError" if schema_error else "RuntimeError"
                message = (str(error) if schema_error
                           else f"subagent {kind!r} failed: {exception_text(error)}")
                subagent_event(ctx.writer, "error", **event, error=message)
                return {"results": {cid: exception_result(kind_name, message)}}
            value, update = outcome
            subagent_event(ctx.writer, "complete", **event)
            return {"results": {cid: {"return_value": plain(value)}}, "updates": update}

    graph = StateGraph(DriverState)
    graph.add_node("run", run)
    graph.add_node("dispatch", dispatch)  # pyright: ignore[reportArgumentType]
    graph.add_edge(START, "run")
    graph.add_conditional_edges("run", route, ["dispatch", "run", END])
    graph.add_edge("dispatch", "run")
    return graph.compile(name="code_interpreter")
