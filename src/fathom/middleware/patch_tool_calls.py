"""Repair tool calls that would break the conversation.

Two cases, both seen in real runs:

- A dangling tool call: an `AIMessage` asked for tools but the run stopped (cancelled,
  crashed, interrupted and abandoned) before their results arrived. Providers reject a
  history like that, so before the next run each missing result is filled in with a note
  that the call did not complete.
- A malformed tool call: the model produced arguments that are not valid JSON, which
  LangChain keeps in `invalid_tool_calls`. Without help the loop would end there; instead
  the model gets an error result for each and another turn to call the tool properly.
  Some providers send such a call without an id; it gets a stable one (derived from the
  call) on both the call and its answer, so the history stays a valid pairing.
  This happens inside the model step (`wrap_model_call`), not in an `after_model` hook:
  a hook is a graph node of its own and would add a checkpoint to every step of every run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    InvalidToolCall,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from fathom.backends.protocol import Plan, adrive, drive
from fathom.tool_answers import tool_error

__all__ = ["MAX_MALFORMED_RETRIES", "PatchToolCallsMiddleware", "patch_dangling_tool_calls"]

MAX_MALFORMED_RETRIES = 3
"""Extra model calls in one step when every tool call the model makes is malformed."""


def _cancelled_result(call: ToolCall) -> ToolMessage:
    return tool_error(
        content=(
            # the reference's words first (callers look for them), then what to do
            f"Tool call {call['name']} with id {call['id']} did not complete - no result was "
            "recorded: the run stopped before it returned one. Call it again if you still "
            "need it."
        ),
        tool_call_id=call["id"],
        name=call["name"],
    )


def patch_dangling_tool_calls(messages: list[AnyMessage]) -> list[AnyMessage] | None:
    """Messages with a result after every unanswered tool call, or `None` if none is missing."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    patched: list[AnyMessage] = []
    changed = False
    for message in messages:
        patched.append(message)
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") and call["id"] not in answered:
                    patched.append(_cancelled_result(call))
                    changed = True
    return patched if changed else None


def _invalid_call_id(message: AIMessage, position: int, call: InvalidToolCall) -> str:
    """A stable id for an id-less malformed call: the same message gets the same id."""
    key = json.dumps(
        [message.id, position, call.get("name"), call.get("args"), call.get("error")],
        default=str,
    )
    return "invalid_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _with_invalid_call_ids(message: AIMessage) -> AIMessage:
    """`message` with an id on every malformed call (itself when each has one already)."""
    calls = message.invalid_tool_calls
    if all(call.get("id") for call in calls):
        return message
    filled = [
        call if call.get("id") else {**call, "id": _invalid_call_id(message, k, call)}
        for k, call in enumerate(calls)
    ]
    return message.model_copy(update={"invalid_tool_calls": filled})


def _normalised(response: ModelResponse | AIMessage) -> ModelResponse:
    """`response` as a `ModelResponse` whose last `AIMessage` has ids on malformed calls."""
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    result = list(response.result)
    for position in range(len(result) - 1, -1, -1):
        message = result[position]
        if isinstance(message, AIMessage):
            fixed = _with_invalid_call_ids(message)
            if fixed is message:
                return response
            result[position] = fixed
            return ModelResponse(result=result, structured_response=response.structured_response)
    return response


def _malformed_results(message: AIMessage) -> list[ToolMessage]:
    results = []
    for call in message.invalid_tool_calls:
        if not call.get("id"):  # `_normalised` gave every call an id; never answer None
            continue
        name = call.get("name") or "(no name)"
        detail = f" ({call['error']})" if call.get("error") else ""
        results.append(
            tool_error(
                content=(
                    f"Error: the arguments of your call to {name} are not valid JSON{detail}. "
                    "Call the tool again with a JSON object of arguments."
                ),
                tool_call_id=call["id"],
                name=name,
            )
        )
    return results


class PatchToolCallsMiddleware(AgentMiddleware):
    """Fills in results for dangling tool calls and answers malformed ones with an error."""

    def before_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        patched = patch_dangling_tool_calls(list(state.get("messages", [])))
        if patched is None:
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *patched]}

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        return drive(_attempts(request), handler)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await adrive(_attempts(request), handler)


def _attempts(request: ModelRequest) -> Plan[ModelResponse]:
    """The model step for both paths: each request it yields is answered with the model's
    response; malformed-only replies are retried up to `MAX_MALFORMED_RETRIES` times."""
    response = _normalised((yield request))
    added: list[AnyMessage] = []
    for _ in range(MAX_MALFORMED_RETRIES):
        retry = _next_attempt(request, response, added)
        if retry is None:
            break
        response = _normalised((yield retry))
    return _with_answers(response, added)


def _last_ai(response: ModelResponse) -> AIMessage | None:
    if isinstance(response, AIMessage):  # a handler may answer with the message itself
        return response
    return next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)


def _next_attempt(
    request: ModelRequest, response: ModelResponse, added: list[AnyMessage]
) -> ModelRequest | None:
    """The request for another try when the reply's only tool calls are malformed.

    The malformed reply and its error results go into `added` either way they are needed.
    """
    last = _last_ai(response)
    if last is None or not last.invalid_tool_calls or last.tool_calls:
        return None
    results = _malformed_results(last)
    if not results:
        return None
    added += [*([response] if isinstance(response, AIMessage) else response.result), *results]
    return request.override(messages=[*request.messages, *added])


def _with_answers(response: ModelResponse, added: list[AnyMessage]) -> ModelResponse:
    """The final response with earlier attempts before it and errors for malformed calls."""
    if isinstance(response, AIMessage):
        response = ModelResponse(result=[response])
    last = _last_ai(response)
    answers = _malformed_results(last) if last is not None else []
    if not added and not answers:
        return response
    return ModelResponse(
        result=[*added, *response.result, *answers],
        structured_response=response.structured_response,
    )
