"""The functions sandboxed code calls on the host: `task()` and `tools.<name>()`.

Inside the sandbox both are names the code leaves undefined: a call to `task` suspends
the code with the call's arguments, which are checked here; `tools` is a small object
defined by `prelude`, whose methods call the host function `_fathom_tool(name, kwargs)`.
Answers cross back as Monty's settled results (`{"return_value": v}` or
`{"exc_type": ..., "message": ...}`), plain data that a checkpoint can hold.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from fathom.tool_answers import Failure, aattempt

__all__ = [
    "TOOL_FUNCTION",
    "TaskCall",
    "exception_result",
    "plain",
    "prelude",
    "render_value",
    "run_tool",
    "task_call",
]


TOOL_FUNCTION = "_fathom_tool"
"""The host function behind `tools.<name>(**args)` (name, kwargs)."""


@dataclass(frozen=True)
class TaskCall:
    """One `task()` call of the code, as checked arguments."""

    description: str
    subagent_type: str
    response_schema: dict[str, Any] | None = None
    label: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The call as plain data, for the checkpointed interpreter state."""
        return {"description": self.description, "subagent_type": self.subagent_type,
                "response_schema": self.response_schema, "label": self.label}


def _task(description: str, subagent_type: str, *, response_schema: Any = None,
          label: Any = None) -> None: ...


_TASK_SIGNATURE = inspect.signature(_task)


def task_call(args: tuple[Any, ...], kwargs: Mapping[str, Any], known: Iterable[str]) -> TaskCall:
    """Check one `task(...)` call's arguments against the signature and the subagents.

    Raises:
        TypeError: wrong arguments (the message is the one Python would give).
        ValueError: `subagent_type` names no subagent.
    """
    try:
        bound = _TASK_SIGNATURE.bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"task(): {error}") from None
    values = {**{k: p.default for k, p in _TASK_SIGNATURE.parameters.items()},
              **bound.arguments}
    description, subagent_type = values["description"], values["subagent_type"]
    if not isinstance(description, str) or not description.strip():
        raise TypeError("task(): description must be a non-empty str")
    if not isinstance(subagent_type, str):
        raise TypeError("task(): subagent_type must be a str")
    names = sorted(known)
    if subagent_type not in names:
        raise ValueError(
            f"task(): there is no subagent called {subagent_type!r}; use one of {names}"
        )
    schema = values["response_schema"]
    if schema is not None and not isinstance(schema, dict):
        raise TypeError("task(): response_schema must be a JSON schema dict")
    label = values["label"]
    return TaskCall(description, subagent_type, schema, None if label is None else str(label))


def exception_result(kind: str, message: str) -> dict[str, Any]:
    """A settled Monty result that raises `kind(message)` where the code awaits the call."""
    return {"exc_type": kind, "message": message}


def prelude(tool_names: Iterable[str]) -> str:
    """Code fed to a new session before the model's: the `tools` object, when any tools
    are allowed. A name that is not a Python identifier is reachable as
    `getattr(tools, "name")` only if it is one, so such tools are left out."""
    names = [n for n in tool_names if n.isidentifier() and not keyword.iskeyword(n)]
    if not names:
        return ""
    methods = "".join(
        f"    async def {n}(self, **kwargs):\n"
        f"        return await {TOOL_FUNCTION}({n!r}, kwargs)\n"
        for n in names
    )
    return f"class _FathomTools:\n{methods}\ntools = _FathomTools()\n"


def plain(value: Any) -> Any:
    """`value` as data the sandbox takes: JSON types kept, anything else as its text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    content = getattr(value, "content", None)  # a message
    return content if isinstance(content, str) else str(value)


async def run_tool(tools: Mapping[str, BaseTool], args: tuple[Any, ...], config: Any, *,
                   runtime: Callable[[], Any] | None = None,
                   on_update: Callable[[Mapping[str, Any]], None] | None = None) -> dict:
    """Run `tools.<name>(**kwargs)` (args: the name and the kwargs) for the sandbox.

    A tool that takes the agent's `ToolRuntime` (the built-in file tools) gets one from
    `runtime()`; one that answers with a `Command` (a write to files kept in state) has
    its state update handed to `on_update` and its message's text returned."""
    name, kwargs = [*args, None, None][:2]
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return exception_result("NameError", f"there is no tool {name!r} in tools")
    arguments = dict(kwargs or {})
    if runtime is not None and "runtime" in getattr(tool, "_injected_args_keys", ()):
        arguments["runtime"] = runtime()
    output = await aattempt(tool.ainvoke(arguments, config), f"tool {name!r}")
    if isinstance(output, Failure):  # a tool's failure is raised in the sandbox's code
        return exception_result("RuntimeError", f"tool {name!r} failed: {output.text}")
    if isinstance(output, Command):
        update = dict(output.update) if isinstance(output.update, Mapping) else {}
        messages = update.pop("messages", None) or []
        if update and on_update is not None:
            on_update(update)
        output = messages[-1] if messages else None
    if isinstance(output, ToolMessage) and output.status == "error":
        return exception_result("RuntimeError", f"tool {name!r} failed: {output.text}")
    return {"return_value": plain(output)}


def render_value(value: Any) -> str:
    """The trailing expression's value as the model reads it: strings as they are, data as
    JSON when it is JSON, anything else by its `repr`."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
