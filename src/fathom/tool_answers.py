"""The one place a failure becomes a model-facing tool answer.

A tool call that fails (a refused path, an unknown tool, a crashed subagent, malformed
arguments) answers the model with a `ToolMessage` whose `status` is `"error"`, so the model
reads what happened and what to do, and the run goes on. Every middleware, tool and pattern
builds those answers here (`tool_error`), and an exception caught at a tool-call boundary is
worded here (`exception_text`): a `FathomError` by its own message (written for the reader),
anything else by its type and message.

Owns: `tool_error`, `tool_answer`, `exception_text`, and `tool_of`, which makes the tools
those answers come from. Layer: core, the lowest; it imports nothing of fathom but the
error root.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel

from fathom.errors import FathomError

__all__ = [
    "Failure", "aattempt", "attempt", "exception_text", "tool_answer", "tool_error", "tool_of",
    "unknown_name_error",
]

R = TypeVar("R")
logger = logging.getLogger(__name__)


def tool_of(
    name: str,
    description: str,
    schema: type[BaseModel],
    func: Callable[..., Any],
    coroutine: Callable[..., Awaitable[Any]],
) -> StructuredTool:
    """The tool `name` with a sync body (`func`) and an async one (`coroutine`), whose
    arguments are exactly `schema` (nothing is read from the functions' signatures)."""
    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=name, description=description,
        args_schema=schema, infer_schema=False,
    )  # fmt: skip


def tool_error(
    content: str, *, tool_call_id: str | None, name: str | None = None, artifact: Any = None
) -> ToolMessage:
    """The failed answer `content` to the tool call `tool_call_id` (of the tool `name`).

    `artifact` travels with the message but is never sent to the model (a subagent's
    failure record, for instance).
    """
    return _message("error", content, tool_call_id, name, artifact)


def unknown_name_error(
    kind: str, called: str, known: Iterable[str], *, tool_call_id: str | None, name: str
) -> ToolMessage:
    """The failed answer of tool `name` to a call naming `called`, which is no `kind` it
    knows (an agent, a subagent): the names it does know, for the model to pick from."""
    return tool_error(
        content=f"Error: there is no {kind} called {called!r}. Use one of: {', '.join(known)}.",
        tool_call_id=tool_call_id, name=name,
    )


def tool_answer(
    content: Any, *, tool_call_id: str | None, name: str | None = None, artifact: Any = None
) -> ToolMessage:
    """The successful answer `content` to the tool call `tool_call_id` (of the tool `name`):
    what a tool returns when it is invoked outside a tool node too, where text would stay
    text."""
    return _message("success", content, tool_call_id, name, artifact)


def _message(
    status: Literal["success", "error"], content: Any, call_id: str | None, name: str | None,
    artifact: Any,
) -> ToolMessage:  # fmt: skip
    return ToolMessage(
        content=content, tool_call_id=call_id or "", name=name, status=status, artifact=artifact
    )


def exception_text(error: BaseException) -> str:
    """`error` in words for the model: a `FathomError`'s own message, else `Type: message`."""
    if isinstance(error, FathomError):
        return str(error) or type(error).__name__
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(frozen=True)
class Failure:
    """What `attempt` caught: the exception, and its words for the model (`text`)."""

    error: Exception

    @property
    def text(self) -> str:
        return exception_text(self.error)


def attempt(work: Callable[[], R], what: str) -> R | Failure:
    """`work()`, or the `Failure` it raised; `what` names the work in the log."""
    try:
        return work()
    except GraphBubbleUp:
        raise
    except Exception as error:  # boundary: the failure of this work is an answer
        logger.debug("%s failed", what, exc_info=error)
        return Failure(error)


async def aattempt(work: Awaitable[R], what: str) -> R | Failure:
    """`await work`, or the `Failure` it raised (see `attempt`)."""
    try:
        return await work
    except GraphBubbleUp:
        raise
    except Exception as error:  # boundary: as in `attempt`
        logger.debug("%s failed", what, exc_info=error)
        return Failure(error)
