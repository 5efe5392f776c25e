"""`CodeInterpreterMiddleware`: the `eval` tool, Python in the Monty sandbox for the model.

One `eval` call can start many subagents (`await asyncio.gather(*(task(...) for x in
items))`) and reduce their answers in code, where the `task` tool would cost one tool call
and one growing model request per subagent. The code runs in Monty, a sandboxed subset of
Python in a worker subprocess: it has no files, processes or network, only the host
functions given here. See `fathom.middleware.code_interpreter.driver` for how an approval
inside a subagent pauses and resumes the code.
"""

from __future__ import annotations

import asyncio
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
)
from fathom.middleware.subagents import SubAgentMiddleware
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import tool_error

__all__ = ["EVAL_TOOL", "EVAL_TOOL_DESCRIPTION", "CodeInterpreterMiddleware", "require_monty"]

logger = logging.getLogger(__name__)

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
                raise ValueError(
                    f"ptc names {item!r}, which is not one of the agent's tools "
                    f"({sorted(by_name) or 'none'})."
                )
            allowed[item] = by_name[item]
        else:
            tool = _as_tool(item)
            allowed[tool.name] = tool
    return allowed


class CodeInterpreterMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `eval` tool: model-written Python, run in the Monty sandbox.

    Args:
        subagents: What `task()` in the code runs: the agent's `SubAgentMiddleware` (the
            same subagents, tools, backend and usage accounting as the `task` tool), or
            subagent specs to build one from. `None`: the code has no subagents.
        ptc: Programmatic tool calling: the tools the code may call as
            `await tools.<name>(**args)`, as tools or as names of `available_tools`.
            Off (empty) by default.
        available_tools: Where names in `ptc` are looked up.
        persistence: How long the code's variables live: `"thread"` (all turns of the
            thread, checkpointed with it), `"turn"` (one run) or `"call"` (one `eval`).
        limits: A `CodeInterpreterLimits` or a dict of its fields (time, memory, host
            calls per `eval`, concurrency, result size).

    Raises:
        ImportError: `pydantic-monty` is not installed (`pip install 'fathom[code]'`).
    """

    state_schema = CodeInterpreterState

    def __init__(
        self,
        subagents: SubAgentMiddleware | Sequence[Mapping[str, Any]] | None = None,
        *,
        ptc: Sequence[BaseTool | Callable[..., Any] | str] = (),
        available_tools: Sequence[Any] = (),
        persistence: Persistence = "thread",
        limits: CodeInterpreterLimits | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        require_monty()
        if persistence not in PERSISTENCE_MODES:
            raise ValueError(
                f"persistence={persistence!r}; use one of "
                f"{', '.join(map(repr, PERSISTENCE_MODES))}."
            )
        if isinstance(subagents, SubAgentMiddleware) or subagents is None:
            self.subagents = subagents
        else:
            self.subagents = SubAgentMiddleware(list(subagents))
        self.persistence: Persistence = persistence
        self.limits = (limits if isinstance(limits, CodeInterpreterLimits)
                       else CodeInterpreterLimits(**dict(limits or {})))
        self.ptc_tools = _allowed_tools(list(ptc), list(available_tools))
        self._driver = build_driver(self.limits, list(self.ptc_tools))
        self.section = PromptSection("code_interpreter", _PROMPT if self.subagents else "",
                                     tools=frozenset({EVAL_TOOL}))
        self.tools = [StructuredTool.from_function(
            name=EVAL_TOOL, description=self._description(), func=self._eval_sync,
            coroutine=self._aeval, args_schema=EvalInput, infer_schema=False,
        )]

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

    def _eval_sync(self, code: str, runtime: ToolRuntime) -> ToolMessage:
        return tool_error(
            content="Error: eval runs only in async runs of the agent (ainvoke / astream).",
            tool_call_id=runtime.tool_call_id, name=EVAL_TOOL)

    def _clip(self, text: str) -> str:
        limit = self.limits.max_result_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n... [clipped: {len(text) - limit:,} more characters]"

    async def _aeval(self, code: str, runtime: ToolRuntime) -> Command | ToolMessage:
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        tool_call_id = runtime.tool_call_id or EVAL_TOOL
        config: dict[str, Any] = dict(runtime.config or {})
        ctx = EvalContext(
            subagents=self.subagents, tools=self.ptc_tools, state=state,
            tool_call_id=tool_call_id, writer=getattr(runtime, "stream_writer", None),
            semaphore=asyncio.Semaphore(self.limits.max_concurrency),
            recursion_limit=limit if isinstance(limit := config.get("recursion_limit"), int)
            else None,
            keep_session=self.persistence != "call",
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
        printed = out.get("output") or ""
        if out.get("error"):
            text = f"Error: {out['error']}"
            if printed:
                text += f"\n\nPrinted before the error:\n{printed}"
            return tool_error(content=self._clip(text), tool_call_id=tool_call_id,
                               name=EVAL_TOOL)
        parts = [printed.rstrip("\n")] if printed else []
        if out.get("result") is not None:
            parts.append(out["result"])
        message = ToolMessage(content=self._clip("\n".join(parts) or "(no value, no output)"),
                              tool_call_id=tool_call_id, name=EVAL_TOOL)
        update: dict[str, Any] = {**(out.get("updates") or {}), "messages": [message]}
        if self.persistence != "call":
            update[SESSION_KEY] = out.get("session")
        return Command(update=update)
