"""Span attribute names (OpenInference's, plus fathom's own) and the values put in them.

OpenInference semantic conventions (https://github.com/Arize-ai/openinference, the
`openinference-semantic-conventions` package) are what Phoenix and Langfuse read: the span
kind, `input.value` / `output.value`, `llm.*` token counts and costs, `tool.name`,
`session.id`. fathom adds `fathom.*` attributes for what they have no name for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command
from openinference.semconv.trace import (
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolCallAttributes,
)

__all__ = [
    "AGENT",
    "CHAIN",
    "FATHOM_AGENT_NAME",
    "FATHOM_INTERRUPT",
    "FATHOM_RESUME",
    "FATHOM_RUN_ID",
    "KIND",
    "LLM",
    "TOOL",
    "cost_attributes",
    "cut",
    "dumps",
    "message_text",
    "output_message_attributes",
    "token_attributes",
    "tool_message",
]

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
AGENT = OpenInferenceSpanKindValues.AGENT.value
LLM = OpenInferenceSpanKindValues.LLM.value
TOOL = OpenInferenceSpanKindValues.TOOL.value
CHAIN = OpenInferenceSpanKindValues.CHAIN.value

FATHOM_RUN_ID = "fathom.run_id"
"""The id of the top-level run (the server's run id under `fathom serve`)."""
FATHOM_AGENT_NAME = "fathom.agent_name"
"""The agent that made the call, or the agent the span is (main agent or subagent)."""
FATHOM_INTERRUPT = "fathom.interrupt"
"""`True` on spans a human-approval pause went through; the event of that name has the
interrupt's id and value."""
FATHOM_RESUME = "fathom.resume"
"""`True` on an agent run that resumes a paused thread (`Command(resume=...)`)."""
FATHOM_TOOL_CALL_ID = "fathom.tool_call_id"
FATHOM_INPUT_MESSAGES = "fathom.input_messages"
"""How many messages a model request sent."""


def dumps(value: Any) -> str:
    """Compact JSON, anything unknown as its `str`."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cut(text: str, limit: int) -> str:
    """`text`, at most `limit` characters (an ellipsis marks a cut)."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def message_text(message: BaseMessage) -> str:
    """A message's text; an AI message without text shows its tool calls as JSON."""
    text = str(message.text)
    if not text and isinstance(message, AIMessage) and message.tool_calls:
        return dumps([{"name": c["name"], "args": c["args"]} for c in message.tool_calls])
    return text


def tool_message(output: Any) -> ToolMessage | None:
    """The `ToolMessage` a tool answered with, also when it came inside a `Command`."""
    if isinstance(output, ToolMessage):
        return output
    if isinstance(output, Command) and isinstance(output.update, Mapping):
        messages = output.update.get("messages") or ()
        for message in messages if isinstance(messages, Sequence) else ():
            if isinstance(message, ToolMessage):
                return message
    return None


def token_attributes(usage: Mapping[str, Any]) -> dict[str, int]:
    """OpenInference token counts from a LangChain `usage_metadata`."""
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    attributes = {
        SpanAttributes.LLM_TOKEN_COUNT_PROMPT: prompt,
        SpanAttributes.LLM_TOKEN_COUNT_COMPLETION: completion,
        SpanAttributes.LLM_TOKEN_COUNT_TOTAL: int(usage.get("total_tokens") or prompt + completion),
    }
    details = usage.get("input_token_details") or {}
    for key, name in (
        ("cache_read", SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ),
        ("cache_creation", SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_WRITE),
    ):
        if details.get(key):
            attributes[name] = int(details[key])
    return attributes


def cost_attributes(
    usage: Mapping[str, Any], price: tuple[float, float] | None
) -> dict[str, float]:
    """`llm.cost.*` in US dollars from `price` (per million input, output tokens)."""
    if price is None:
        return {}
    prompt = int(usage.get("input_tokens") or 0) * price[0] / 1e6
    completion = int(usage.get("output_tokens") or 0) * price[1] / 1e6
    return {
        SpanAttributes.LLM_COST_PROMPT: prompt,
        SpanAttributes.LLM_COST_COMPLETION: completion,
        SpanAttributes.LLM_COST_TOTAL: prompt + completion,
    }


def output_message_attributes(message: AIMessage, limit: int) -> dict[str, Any]:
    """`llm.output_messages.0.*`: the answer's role, text and tool calls."""
    prefix = f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0."
    attributes: dict[str, Any] = {
        prefix + MessageAttributes.MESSAGE_ROLE: "assistant",
        prefix + MessageAttributes.MESSAGE_CONTENT: cut(str(message.text), limit),
    }
    for index, call in enumerate(message.tool_calls):
        at = f"{prefix}{MessageAttributes.MESSAGE_TOOL_CALLS}.{index}."
        attributes[at + ToolCallAttributes.TOOL_CALL_FUNCTION_NAME] = call["name"]
        attributes[at + ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON] = cut(
            dumps(call["args"]), limit
        )
        if call.get("id"):
            attributes[at + ToolCallAttributes.TOOL_CALL_ID] = str(call["id"])
    return attributes


def input_message_attributes(messages: Sequence[BaseMessage], limit: int) -> dict[str, Any]:
    """`llm.input_messages.N.*`: every message of a request (role and text)."""
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    attributes: dict[str, Any] = {}
    for index, message in enumerate(messages):
        prefix = f"{SpanAttributes.LLM_INPUT_MESSAGES}.{index}."
        attributes[prefix + MessageAttributes.MESSAGE_ROLE] = roles.get(message.type, message.type)
        attributes[prefix + MessageAttributes.MESSAGE_CONTENT] = cut(message_text(message), limit)
    return attributes
