"""`CodeInterpreterMiddleware`: the `eval` tool, Python in the Monty sandbox for the model.

One `eval` call can start many subagents (`await asyncio.gather(*(task(...) for x in
items))`) and reduce their answers in code, where the `task` tool would cost one tool call
and one growing model request per subagent. The code runs in Monty, a sandboxed subset of
Python in a worker subprocess: it has no files, processes or network, only the host
functions given here. See `fathom.middleware.code_interpreter.driver` for how an approval
inside a subagent pauses and resumes the code. A sync run of the agent (`invoke`) runs the
same async code on a worker event loop (`worker_loop`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools import tool as as_tool
from langgraph.types import Command
from pydantic import BaseModel, Field

from fathom.middleware.code_interpreter.driver import EvalContext, build_driver, current_eval
from fathom.middleware.code_interpreter.limits import CodeInterpreterLimits
from fathom.middleware.code_interpreter.session import (
    PERSISTENCE_MODES,
    SESSION_KEY,
    CodeInterpreterState,
    Persistence,
    signing_key,
)
from fathom.middleware.code_interpreter.worker_loop import run_on_worker_loop
from fathom.middleware.subagents import TASK_TOOL, SubAgentMiddleware, task_tool_owner
from fathom.prompt import PromptSection, SectionPromptMixin, offered_tool_names
from fathom.tool_answers import tool_error

logger = logging.getLogger(__name__)

__all__ = ["EVAL_TOOL", "EVAL_TOOL_DESCRIPTION", "CodeInterpreterMiddleware", "require_monty"]

EVAL_TOOL = "eval"
"""The name of the tool that runs Python code in the sandbox."""

EVAL_TOOL_DESCRIPTION = """Run Python code in a sandbox and get back the value of its last expression (clipped) and what it printed.

The sandbox is a subset of Python: no files, no network, no processes, no third-party packages; `json`, `re`, `math`, `itertools`, `collections`, `dataclasses`, `asyncio.gather` and the like work. Top-level `await` works.

Subagents: `await task(description, subagent_type, *, response_schema=None, label=None)` runs one subagent and returns its final answer as a str; with `response_schema` (a JSON Schema dict) it returns the parsed JSON object instead. `task` raises ValueError for an unknown subagent_type or an answer that does not match the schema, RuntimeError when the subagent fails; catch them with try/except. Start independent tasks together with `await asyncio.gather(...)`: they run at the same time.
{subagents}{tools}
Use it to fan work out to many subagents in one call and to combine their answers in code; the answers reach you only through the value you return or print, so return a compact summary."""  # noqa: E501

_PROMPT = (
    "You have an `eval` tool that runs Python in a sandbox and can start subagents with "
    "`await task(...)` from code. When a task splits into many similar subtasks (one per "
    "file, item or candidate), write one short program that runs them with "
    "`asyncio.gather` and combines the answers, instead of calling `task` once per item."
)


class EvalInput(BaseModel):
    code: str = Field(description="Python code to run; the value of the last expression is returned.")  # noqa: E501


def require_monty() -> None:
    """Raise `ImportError` naming the install command when `pydantic-monty` is missing."""
    try:
        import pydantic_monty  # noqa: F401
    except ImportError:
        raise ImportError(
            "The code interpreter (code_interpreter=True / CodeInterpreterMiddleware) needs the "
            "pydantic-monty package: pip install 'fathom[code]'"
        ) from None


def _as_tool(item: Any) -> BaseTool:
    if isinstance(item, BaseTool):
        return item
    if callable(item):
        return as_tool(item)
    raise TypeError(f"ptc entries must be tools, functions or tool names, not {item!r}")


def _allowed_tools(ptc: Sequence[Any], available: Sequence[Any]) -> dict[str, BaseTool]:
    """The tools `tools.<name>()` reaches: `ptc` entries, names looked up in `available`."""
    by_name: dict[str, BaseTool] = {}
    for item in available:
        try:
            tool = _as_tool(item)
        except TypeError:
            continue  # provider tool dicts cannot run on the host
        by_name[tool.name] = tool
    allowed: dict[str, BaseTool] = {}
    for item in ptc:
        if isinstance(item, str):
            if item not in by_name:
                have = ", ".join(sorted(by_name)) or "none were given: pass available_tools"
                raise ValueError(
                    f"ptc names {item!r}, which is not one of the agent's tools "
                    f"(it has: {have})."
                )
            allowed[item] = by_name[item]
        else:
            tool = _as_tool(item)
            allowed[tool.name] = tool
    return allowed


_UNSET: Any = object()


def _persistence(persistence: Persistence | None, mode: Persistence | None) -> Persistence:
    """`persistence=`, or the reference's `mode=` for it (the same values)."""
    if persistence is not None and mode is not None and persistence != mode:
        raise ValueError(
            f"persistence={persistence!r} and mode={mode!r} disagree; `mode` is the "
            "reference's name for `persistence`, give one of them."
        )
    chosen = persistence or mode or "thread"
    if chosen not in PERSISTENCE_MODES:
        raise ValueError(
            f"persistence={chosen!r}; use one of {', '.join(map(repr, PERSISTENCE_MODES))}."
        )
    return chosen


def _limits(
    limits: CodeInterpreterLimits | Mapping[str, Any] | None, *, timeout: float | None,
    memory_limit: int | None, max_ptc_calls: Any, max_result_chars: int | None,
    max_subagent_concurrency: int | None,
) -> CodeInterpreterLimits:
    """`limits` with the reference's keywords laid over it (each maps to one field)."""
    base = limits if isinstance(limits, CodeInterpreterLimits) else CodeInterpreterLimits(
        **dict(limits or {}))
    if max_ptc_calls is None:
        raise ValueError(
            "max_ptc_calls=None (no limit on task()/tools calls per eval) is not supported: "
            "the sandbox always bounds them. Give a number, as large as you need."
        )
    given = {
        "timeout_s": timeout,
        "max_memory_bytes": memory_limit,
        "max_host_calls": None if max_ptc_calls is _UNSET else max_ptc_calls,
        "max_result_chars": max_result_chars,
        "max_concurrency": max_subagent_concurrency,
    }
    return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})


class CodeInterpreterMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `eval` tool: model-written Python, run in the Monty sandbox.

    Args:
        subagents: What `task()` in the code runs: the agent's `SubAgentMiddleware` (the
            same subagents, tools, backend and usage accounting as the `task` tool), or
            subagent specs to build one from. `True` (the default, as in the reference's
            `CodeInterpreterMiddleware`): the subagents of the agent's own `task` tool,
            found at each `eval`, or none when the agent has no `task` tool. `False` or
            `None`: the code has no subagents (delegation goes through `task` itself,
            which keeps per-call approvals).
        ptc: Programmatic tool calling: the tools the code may call as
            `await tools.<name>(**args)`, as tools or as names of `available_tools`.
            Off (empty, or `None`) by default.
        available_tools: Where names in `ptc` are looked up.
        persistence: How long the code's variables live: `"thread"` (all turns of the
            thread, checkpointed with it), `"turn"` (one run) or `"call"` (one `eval`).
            `mode` is the reference's name for it.
        limits: A `CodeInterpreterLimits` or a dict of its fields (time, memory, host
            calls per `eval`, concurrency, result size).
        timeout: Seconds of sandboxed execution per `eval` (`limits.timeout_s`).
        memory_limit: Bytes the code may allocate (`limits.max_memory_bytes`).
        max_ptc_calls: `task()` and `tools.<name>()` calls per `eval`
            (`limits.max_host_calls`); the count cannot be switched off (`None` is refused).
        max_result_chars: The answer is clipped to this (`limits.max_result_chars`).
        max_subagent_concurrency: Subagents and tools running at once for one `eval`
            (`limits.max_concurrency`).
        capture_console: With `False`, what the code prints is not returned, only the
            value of its last expression.
        tool_name: The tool's name (default `eval`).
        max_snapshot_bytes: A saved session (the variables kept between calls) larger than
            this is dropped, so the next `eval` starts afresh; `None`: no limit.
        snapshot_signing_key: Sign what is checkpointed of the interpreter (its session,
            and its suspended state while subagents run) with HMAC-SHA256 under this key;
            a dump whose signature is missing or wrong is discarded, never loaded. Use the
            same key in every process that shares the threads.

    The keywords from `timeout` on are the reference's (`langchain-quickjs`) with the same
    meaning; its defaults differ (see `CodeInterpreterLimits`). A value given both in
    `limits` and as a keyword takes the keyword's.

    Raises:
        ImportError: `pydantic-monty` is not installed (`pip install 'fathom[code]'`).
    """

    state_schema = CodeInterpreterState

    def __init__(
        self,
        subagents: SubAgentMiddleware | Sequence[Mapping[str, Any]] | bool | None = True,
        *,
        ptc: Sequence[BaseTool | Callable[..., Any] | str] | None = (),
        available_tools: Sequence[Any] = (),
        persistence: Persistence | None = None,
        limits: CodeInterpreterLimits | Mapping[str, Any] | None = None,
        mode: Persistence | None = None,
        timeout: float | None = None,
        memory_limit: int | None = None,
        max_ptc_calls: int | None = _UNSET,
        max_result_chars: int | None = None,
        max_subagent_concurrency: int | None = None,
        capture_console: bool = True,
        tool_name: str = EVAL_TOOL,
        max_snapshot_bytes: int | None = None,
        snapshot_signing_key: str | bytes | None = None,
    ) -> None:
        super().__init__()
        require_monty()
        self.persistence: Persistence = _persistence(persistence, mode)
        self.find_subagents = subagents is True
        """Whether `task()` runs the subagents of the agent's own `task` tool, found at
        each `eval` (`subagents=True`)."""
        if isinstance(subagents, SubAgentMiddleware) or subagents in (None, True, False):
            self.subagents = subagents if isinstance(subagents, SubAgentMiddleware) else None
        elif isinstance(subagents, Sequence) and not isinstance(subagents, str | bytes):
            self.subagents = SubAgentMiddleware(list(subagents))
        else:
            raise TypeError(
                "subagents must be a SubAgentMiddleware, a list of subagent specs, True (the "
                f"agent's own task tool), or False/None (no subagents), not {subagents!r}."
            )
        self.limits = _limits(limits, timeout=timeout, memory_limit=memory_limit,
                              max_ptc_calls=max_ptc_calls, max_result_chars=max_result_chars,
                              max_subagent_concurrency=max_subagent_concurrency)
        if not (isinstance(tool_name, str) and tool_name.isidentifier()):
            raise ValueError(f"tool_name must be a name such as 'eval', not {tool_name!r}.")
        self.tool_name = tool_name
        self.capture_console = bool(capture_console)
        if max_snapshot_bytes is not None and (
            isinstance(max_snapshot_bytes, bool) or not isinstance(max_snapshot_bytes, int)
            or max_snapshot_bytes < 1
        ):
            raise ValueError(
                f"max_snapshot_bytes must be a positive int or None, not {max_snapshot_bytes!r}."
            )
        self.max_snapshot_bytes = max_snapshot_bytes
        self.ptc_tools = _allowed_tools(list(ptc or ()), list(available_tools))
        self._driver = build_driver(self.limits, list(self.ptc_tools),
                                    signing_key(snapshot_signing_key))
        self.section = PromptSection(
            "code_interpreter",
            _PROMPT.replace("`eval`", f"`{tool_name}`")
            if self.subagents or self.find_subagents else "",
            tools=frozenset({tool_name}),
        )
        self.tools = [StructuredTool.from_function(
            name=tool_name, description=self._description(), func=self._eval_sync,
            coroutine=self._aeval, args_schema=EvalInput, infer_schema=False,
        )]

    def section_for_request(self, request: Any) -> PromptSection | None:
        """The section about `task()` in code; with `subagents=True`, only while the
        agent offers its `task` tool."""
        if self.find_subagents and TASK_TOOL not in offered_tool_names(request.tools):
            return None
        return self.section

    def _subagents_for(self, runtime: ToolRuntime) -> SubAgentMiddleware | None:
        if self.subagents is not None or not self.find_subagents:
            return self.subagents
        return task_tool_owner(getattr(runtime, "tools", None) or ())

    def _description(self) -> str:
        catalogue = ""
        if self.subagents is not None:
            catalogue = "\nSubagent types:\n" + "\n".join(
                f"- {name}: {spec['description']}"
                for name, spec in self.subagents.subagents.items()
            ) + "\n"
        tools = ""
        if self.ptc_tools:
            tools = "\nTools: `await tools.<name>(**args)` runs one of these tools:\n" + "\n".join(
                f"- {name}: {tool.description.splitlines()[0] if tool.description else ''}"
                for name, tool in self.ptc_tools.items()
            ) + "\n"
        return (EVAL_TOOL_DESCRIPTION.replace("{subagents}", catalogue)
                .replace("{tools}", tools))

    # -- persistence -----------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """A new turn starts with a fresh session in `"turn"` mode."""
        if self.persistence == "turn" and state.get(SESSION_KEY) is not None:
            return {SESSION_KEY: None}
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    # -- the tool ----------------------------------------------------------------------

    def _eval_sync(self, code: str, runtime: ToolRuntime) -> Command | ToolMessage:
        """A sync run (`invoke` / `stream`): the async side runs on the worker loop."""
        return run_on_worker_loop(self._aeval(code, runtime))

    def _clip(self, text: str) -> str:
        limit = self.limits.max_result_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n... [clipped: {len(text) - limit:,} more characters]"

    async def _aeval(self, code: str, runtime: ToolRuntime) -> Command | ToolMessage:
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        tool_call_id = runtime.tool_call_id or self.tool_name
        config: dict[str, Any] = dict(runtime.config or {})
        ctx = EvalContext(
            subagents=self._subagents_for(runtime), tools=self.ptc_tools, state=state,
            tool_call_id=tool_call_id, writer=getattr(runtime, "stream_writer", None),
            semaphore=asyncio.Semaphore(self.limits.max_concurrency),
            recursion_limit=limit if isinstance(limit := config.get("recursion_limit"), int)
            else None,
            keep_session=self.persistence != "call",
            runtime=runtime if dataclasses.is_dataclass(runtime) else None,
        )
        # each round of the code is two steps of the driver graph
        config["recursion_limit"] = 4 * self.limits.max_host_calls + 10
        token = current_eval().set(ctx)
        try:
            out = await self._driver.ainvoke(
                {"code": code, "session": None if self.persistence == "call"
                 else state.get(SESSION_KEY)},
                config,
            )
        finally:
            current_eval().reset(token)
        printed = (out.get("output") or "") if self.capture_console else ""
        if out.get("error"):
            text = f"Error: {out['error']}"
            if printed:
                text += f"\n\nPrinted before the error:\n{printed}"
            return tool_error(content=self._clip(text), tool_call_id=tool_call_id,
                               name=self.tool_name)
        parts = [printed.rstrip("\n")] if printed else []
        if out.get("result") is not None:
            parts.append(out["result"])
        message = ToolMessage(content=self._clip("\n".join(parts) or "(no value, no output)"),
                              tool_call_id=tool_call_id, name=self.tool_name)
        updates = out.get("updates") or {}
        if ctx.tool_updates:  # what the tools the code called wrote into state (files)
            files = {**(ctx.tool_updates.get("files") or {}), **(updates.get("files") or {})}
            updates = {**ctx.tool_updates, **updates, **({"files": files} if files else {})}
        update: dict[str, Any] = {**updates, "messages": [message]}
        if self.persistence != "call":
            update[SESSION_KEY] = self._kept(out.get("session"))
        return Command(update=update)

    def _kept(self, session: bytes | None) -> bytes | None:
        """The session to checkpoint: dropped when over `max_snapshot_bytes`."""
        limit = self.max_snapshot_bytes
        if session is not None and limit is not None and len(session) > limit:
            logger.warning("The interpreter session (%d bytes) is over max_snapshot_bytes=%d; "
                           "it is dropped and the next call starts afresh.", len(session), limit)
            return None
        return session
