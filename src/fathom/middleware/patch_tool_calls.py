"""Repair tool calls that would break the conversation.

Two cases, both seen in real runs:

- A dangling tool call: an `AIMessage` asked for tools but the run stopped (cancelled,
  crashed, interrupted and abandoned) before their results arrived. Providers reject a
  history like that, so before the next run each missing result is filled in with a note
  that the call did not complete.
- A malformed tool call: the model produced arguments that are not valid JSON, which
  LangChain keeps in `invalid_tool_calls`. Without help the loop would end there; instead
  the model gets an error result for each and another turn to call the tool properly.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, AgentState, hook_config
from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

__all__ = ["PatchToolCallsMiddleware", "patch_dangling_tool_calls"]


def _cancelled_result(call: dict[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=(
            f"Tool call {call['name']} (id {call['id']}) did not complete: the run stopped "
            "before it returned a result. Call it again if you still need it."
        ),
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
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


def _malformed_results(message: AIMessage) -> list[ToolMessage]:
    results = []
    for call in message.invalid_tool_calls:
        if not call.get("id"):
            continue
        name = call.get("name") or "(no name)"
        detail = f" ({call['error']})" if call.get("error") else ""
        results.append(
            ToolMessage(
                content=(
                    f"Error: the arguments of your call to {name} are not valid JSON{detail}. "
                    "Call the tool again with a JSON object of arguments."
                ),
                tool_call_id=call["id"],
                name=name,
                status="error",
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

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        messages = state.get("messages", [])
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or not last.invalid_tool_calls:
            return None
        results = _malformed_results(last)
        if not results:
            return None
        update: dict[str, Any] = {"messages": results}
        if not last.tool_calls:
            update["jump_to"] = "model"
        return update
