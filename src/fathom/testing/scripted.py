"""`ScriptedModel`: a deterministic, offline LangChain chat model driven by a script.

A script is a list of replies (consumed in order), a policy function (answers every call
once the replies are used up), or both. Every request the model answers is recorded so
tests and benchmarks can inspect exactly what the model was shown.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr, SkipValidation, field_validator

from fathom.errors import FathomError
from fathom.testing.concurrency import Rendezvous
from fathom.testing.tokens import approx_tokens

__all__ = [
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptExhausted",
    "ScriptRequest",
    "ScriptedModel",
    "ai",
    "tool_call",
]

_PREVIEW_CHARS = 200
_KEPT_TAPES = 16


class ScriptExhausted(FathomError, RuntimeError):
    """Raised when a `ScriptedModel` is called after its replies ran out and it has no policy."""


# --------------------------------------------------------------------------- helpers


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """Build a LangChain `ToolCall` for use in scripted replies.

    Args:
        name: The tool to call.
        args: The call's arguments (defaults to no arguments).
        id: The call id. When omitted, `ScriptedModel` fills in `call_{index}_{k}`, where
            `index` is the model call number and `k` the position of the call in the message.

    Returns:
        The tool call.
    """
    return ToolCall(name=name, args=dict(args or {}), id=id, type="tool_call")


def ai(text: str = "", *tool_calls: ToolCall) -> AIMessage:
    """Build an `AIMessage` with optional text and any number of tool calls.

    Args:
        text: The message text.
        *tool_calls: Tool calls, typically built with `tool_call`.

    Returns:
        The message.
    """
    return AIMessage(content=text, tool_calls=list(tool_calls))


def _text(message: BaseMessage) -> str:
    return str(message.text)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _split_system(messages: Sequence[BaseMessage]) -> tuple[str | None, list[BaseMessage]]:
    if messages and isinstance(messages[0], SystemMessage):
        return _text(messages[0]), list(messages[1:])
    return None, list(messages)


def _render_tool_calls(message: BaseMessage) -> list[dict[str, Any]]:
    if not isinstance(message, AIMessage):
        return []
    return [
        {"name": tc["name"], "args": tc["args"], "id": tc.get("id")} for tc in message.tool_calls
    ]


def _render_message(message: BaseMessage) -> dict[str, Any]:
    plain = message_chunk_to_message(message)
    return {
        "type": plain.type,
        "content": plain.content,
        "tool_calls": _render_tool_calls(plain),
        "tool_call_id": plain.tool_call_id if isinstance(plain, ToolMessage) else None,
    }


def _canonical_json(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> str:
    """Render system prompt, tools and messages, in that order, as deterministic JSON.

    The top level is a list so the order survives `sort_keys`: what a provider would see
    first (system prompt, then tool schemas) comes first, which keeps shared prompt
    prefixes between consecutive requests measurable as shared string prefixes.
    """
    system, rest = _split_system(messages)
    return _dumps(
        [
            {"system": system},
            {"tools": list(tools)},
            {"messages": [_render_message(m) for m in rest]},
        ]
    )


def _tool_name(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, dict) and "name" in function:
        return str(function["name"])
    return str(tool.get("name", ""))


def _preview(message: BaseMessage | None) -> str:
    if message is None:
        return "<no messages>"
    body = _text(message) or _dumps(_render_tool_calls(message))
    if len(body) > _PREVIEW_CHARS:
        body = body[:_PREVIEW_CHARS] + "…"
    return f"{message.type}: {body!r}"


# --------------------------------------------------------------------------- requests


class _MessageViews:
    """Views of `self.messages` shared by `ScriptRequest` and `RecordedRequest`."""

    messages: list[BaseMessage]

    @property
    def last_message(self) -> BaseMessage | None:
        """The last message received, or `None` for an empty request."""
        messages = self.messages
        return messages[-1] if messages else None

    @property
    def last_human_text(self) -> str:
        """Text of the last `HumanMessage`, or `""` if there is none."""
        for message in reversed(self.messages):
            if isinstance(message, HumanMessage):
                return _text(message)
        return ""

    @property
    def tool_results(self) -> list[ToolMessage]:
        """The `ToolMessage`s that follow the last `AIMessage`, in order."""
        results: list[ToolMessage] = []
        for message in reversed(self.messages):
            if isinstance(message, AIMessage):
                break
            if isinstance(message, ToolMessage):
                results.append(message)
        return results[::-1]

    @property
    def turn_messages(self) -> list[BaseMessage]:
        """The messages after the last `HumanMessage`: the work of the current turn so far."""
        messages = self.messages
        for position in range(len(messages) - 1, -1, -1):
            if isinstance(messages[position], HumanMessage):
                return messages[position + 1 :]
        return list(messages)

    @property
    def turn_results(self) -> list[ToolMessage]:
        """The `ToolMessage`s after the last `HumanMessage`, in order."""
        return [m for m in self.turn_messages if isinstance(m, ToolMessage)]


@dataclass(frozen=True)
class ScriptRequest(_MessageViews):
    """What a script sees for one model call.

    Attributes:
        messages: The messages as received, including any leading system message.
        tools: The bound tools in OpenAI format, in bound order (empty if none).
        index: The 0-based number of this call on the model.
    """

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    index: int

    @property
    def tool_names(self) -> list[str]:
        """Names of the bound tools, in bound order."""
        return [_tool_name(t) for t in self.tools]

    @property
    def system_prompt(self) -> str | None:
        """Text of the leading `SystemMessage`, or `None` if there is none."""
        return _split_system(self.messages)[0]

    def has_tool(self, name: str) -> bool:
        """Whether a tool called `name` is bound to this call."""
        return name in self.tool_names


@dataclass(frozen=True)
class RecordedRequest(_MessageViews):
    """A snapshot of one answered model call.

    `messages` is a property: a new list on each access, of copies of the messages
    received (including the system message). Each message is copied once, when the model
    first receives it, and the copy is shared by every later request that received the
    same message object, and so are the lists themselves where a request extends an
    earlier one: a long run's record grows with its history, not with the history's
    square. A message changed in place after the model first received it is recorded as
    it was then (LangGraph replaces messages rather than changing them).

    Attributes:
        index: The 0-based call number.
        tools: The bound tools in OpenAI format (shared with the previous record when
            they did not change).
        tool_names: Names of the bound tools, in bound order.
        system_prompt: Text of the leading system message, or `None`.
        input_tokens: Input tokens reported in the response's `usage_metadata`.
        output_tokens: Output tokens reported in the response's `usage_metadata`.
        response: A copy of the `AIMessage` the model answered with.
    """

    index: int
    _tape: list[BaseMessage] = field(repr=False)
    _length: int = field(repr=False)
    tools: list[dict[str, Any]]
    tool_names: list[str]
    system_prompt: str | None
    input_tokens: int
    output_tokens: int
    response: AIMessage

    @property
    def messages(self) -> list[BaseMessage]:  # pyright: ignore[reportIncompatibleVariableOverride]
        """Copies of the messages received, including the system message (a new list)."""
        return self._tape[: self._length]

    def canonical_json(self) -> str:
        """Deterministic JSON of system prompt, tools and messages (in that order).

        Messages are rendered as `{type, content, tool_calls, tool_call_id}` with tool calls
        as `{name, args, id}`. Consecutive requests of an agent loop share a string prefix
        whose length approximates the provider-side prompt cache hit.
        """
        return _canonical_json(self.messages, self.tools)


Script: TypeAlias = Callable[[ScriptRequest], AIMessage | str]
"""A function that answers a request with an `AIMessage` or plain text."""

Reply: TypeAlias = AIMessage | str | Script
"""One scripted reply: a fixed message, plain text, or a function of the request."""


# --------------------------------------------------------------------------- the model


class ScriptedModel(BaseChatModel):
    """A real `BaseChatModel` that answers from a script instead of a provider.

    `replies` are used in order, one per call; after that `policy` answers every call.
    Each reply (and the policy's result) is an `AIMessage` or a `str`; a reply may also be
    a function of the `ScriptRequest`. Missing tool-call ids become `call_{index}_{k}`,
    `usage_metadata` is filled from `approx_tokens` unless the scripted message carries
    its own, and every answered call is recorded in `requests`. A script that raises
    still uses up its turn, so `replies=[raise_rate_limit, "ok"]` scripts a retry.
    `stop` sequences and `tool_choice` are accepted but not enforced.

    Example:
        ```python
        model = ScriptedModel(
            replies=[ai("", tool_call("search", {"q": "fathom"}))],
            policy=lambda req: f"done: {req.tool_results[-1].text}",
        )
        ```
    """

    model_config = ConfigDict(extra="forbid")
    """A misspelled keyword (`responses=` for `replies=`) raises instead of leaving the
    script empty."""

    replies: SkipValidation[list[Reply]] = Field(default_factory=list)
    """Replies consumed in order, one per call (checked by `_check_replies`)."""
    policy: Script | None = None
    """Answers every call after the replies are used up."""
    latency: float = Field(default=0.0, ge=0.0)
    """Seconds to wait before each answer (`asyncio.sleep` on async paths)."""
    stream_chunk_chars: int = Field(default=8, ge=1)
    """Characters of content per streamed chunk."""
    model_name: str = "scripted"
    """Reported as `response_metadata["model_name"]`."""
    rendezvous: SkipValidation[Rendezvous | None] = None
    """When set, every call waits here (after `latency`) until `rendezvous.parties` calls
    are in flight at once: a test's proof that calls run concurrently, without timing them."""

    _lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)
    _next_index: int = PrivateAttr(default=0)
    _record: list[RecordedRequest] = PrivateAttr(default_factory=list)
    # id(original) -> (original, its copy): the original is kept so the id stays its own.
    _snapshots: dict[int, tuple[BaseMessage, BaseMessage]] = PrivateAttr(default_factory=dict)
    # Recent histories as (originals, copies); records point into the copies (see _on_tape).
    _tapes: list[tuple[list[BaseMessage], list[BaseMessage]]] = PrivateAttr(
        default_factory=list
    )

    @field_validator("replies", mode="before")
    @classmethod
    def _check_replies(cls, value: Any) -> list[Reply]:
        # `AIMessage`'s own validators choke on strs and callables inside a union, so the
        # field skips pydantic validation and is checked here instead.
        replies = list(value)
        for position, reply in enumerate(replies):
            if not (isinstance(reply, AIMessage | str) or callable(reply)):
                msg = (
                    f"replies[{position}] is a {type(reply).__name__}; "
                    "expected an AIMessage, a str or a callable"
                )
                raise ValueError(msg)
        return replies

    # ------------------------------------------------------------------ public API

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the record of answered calls, oldest first."""
        with self._lock:
            return list(self._record)

    @property
    def calls(self) -> int:
        """Number of calls received, including calls whose script raised."""
        with self._lock:
            return self._next_index

    def reset(self) -> None:
        """Clear the record and rewind to the first reply."""
        with self._lock:
            self._next_index = 0
            self._record.clear()
            self._snapshots.clear()
            self._tapes.clear()

    def respond(
        self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None
    ) -> AIMessage:
        """Answer one call: pick the script, run it, normalise and record the result.

        Every path (sync, async, streaming, and the HTTP server) goes through here. It
        does not sleep for `latency`; callers do that before calling it.

        Args:
            messages: The conversation, including any system message.
            tools: The bound tools in OpenAI format.

        Returns:
            The answer, with tool-call ids, `usage_metadata` and `response_metadata` set.

        Raises:
            ScriptExhausted: If the replies are used up and there is no policy.
        """
        received = list(messages)
        bound = [dict(t) for t in tools or []]
        with self._lock:
            previous = self._record[-1].tools if self._record else None
            kept_tools = (
                previous if previous is not None and previous == bound
                else copy.deepcopy(bound)
            )
            index = self._next_index
            self._next_index += 1
            script = self._script_for(index, received)
            request = ScriptRequest(messages=received, tools=bound, index=index)
            result = script(request) if callable(script) else script
            message = self._finalise(result, request)
            usage = message.usage_metadata
            self._record.append(
                RecordedRequest(
                    index=index,
                    _tape=self._on_tape(received),
                    _length=len(received),
                    tools=kept_tools,
                    tool_names=request.tool_names,
                    system_prompt=request.system_prompt,
                    input_tokens=usage["input_tokens"] if usage else 0,
                    output_tokens=usage["output_tokens"] if usage else 0,
                    response=message.model_copy(deep=True),
                )
            )
        return message

    def wait_turn(self) -> None:
        """Sleep `latency` seconds, then wait at `rendezvous` if one is set.

        Every sync path (and each request of the HTTP server) calls this before `respond`.

        Raises:
            RendezvousTimeout: If the rendezvous did not fill within its timeout.
        """
        if self.latency:
            time.sleep(self.latency)
        if self.rendezvous is not None:
            self.rendezvous.arrive()

    async def wait_turn_async(self) -> None:
        """`wait_turn` for the async paths: `asyncio.sleep`, then the rendezvous.

        Raises:
            RendezvousTimeout: If the rendezvous did not fill within its timeout.
        """
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.rendezvous is not None:
            await self.rendezvous.arrive_async()

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (converted to OpenAI format, order kept) to the model.

        Args:
            tools: Tools as dicts, pydantic models, functions or `BaseTool`s.
            tool_choice: Recorded in the bound kwargs when given; not enforced.
            **kwargs: Further kwargs to bind.

        Returns:
            The model bound with `tools=[...]`.
        """
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    # ------------------------------------------------------------------ internals

    def _snapshot(self, message: BaseMessage) -> BaseMessage:
        """The copy of `message` made when the model first received it."""
        kept = self._snapshots.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1]
        snapshot = message.model_copy(deep=True)
        self._snapshots[id(message)] = (message, snapshot)
        return snapshot

    def _on_tape(self, received: list[BaseMessage]) -> list[BaseMessage]:
        """A list of copies whose first `len(received)` items are `received`'s copies.

        An agent loop's next request is the previous one plus new messages, so a recent
        tape whose messages start like `received` (the same objects) is extended and
        shared instead of copying the whole history into every record. A few tapes are
        kept so that interleaved histories (parallel subagents on one model) share too.
        """
        for position in range(len(self._tapes) - 1, -1, -1):
            originals, copies = self._tapes[position]
            common = min(len(originals), len(received))
            if common and originals[common - 1] is not received[common - 1]:
                continue
            if all(originals[k] is received[k] for k in range(common)):
                for message in received[common:]:
                    originals.append(message)
                    copies.append(self._snapshot(message))
                self._tapes.append(self._tapes.pop(position))
                return copies
        tape = (list(received), [self._snapshot(m) for m in received])
        self._tapes.append(tape)
        del self._tapes[:-_KEPT_TAPES]
        return tape[1]

    def _script_for(self, index: int, messages: list[BaseMessage]) -> Reply:
        if index < len(self.replies):
            return self.replies[index]
        if self.policy is not None:
            return self.policy
        last = messages[-1] if messages else None
        msg = (
            f"ScriptedModel has no answer for call {index} (0-based): "
            f"{len(self.replies)} replies were scripted and no policy is set. "
            f"Last message received: {_preview(last)}. "
            "Fix: add more replies or pass a policy=... to answer later calls."
        )
        raise ScriptExhausted(msg)

    def _finalise(self, result: AIMessage | str, request: ScriptRequest) -> AIMessage:
        index = request.index
        if isinstance(result, str):
            message = AIMessage(content=result)
        elif isinstance(result, AIMessage):
            message = cast(AIMessage, message_chunk_to_message(result)).model_copy(deep=True)
        else:
            msg = (
                f"Script for call {index} returned {type(result).__name__}; "
                "expected an AIMessage or a str."
            )
            raise TypeError(msg)

        tool_calls = [
            ToolCall(
                name=tc["name"],
                args=tc["args"],
                id=tc.get("id") or f"call_{index}_{k}",
                type="tool_call",
            )
            for k, tc in enumerate(message.tool_calls)
        ]
        usage = message.usage_metadata or self._usage(request, message, tool_calls)
        metadata = {
            "model_name": self.model_name,
            "finish_reason": "tool_calls" if tool_calls else "stop",
            **message.response_metadata,
        }
        return message.model_copy(
            update={
                "tool_calls": tool_calls,
                "usage_metadata": usage,
                "response_metadata": metadata,
            }
        )

    @staticmethod
    def _usage(
        request: ScriptRequest, message: AIMessage, tool_calls: list[ToolCall]
    ) -> UsageMetadata:
        input_tokens = approx_tokens(_canonical_json(request.messages, request.tools))
        output_text = _text(message)
        if tool_calls:
            output_text += _dumps(
                [{"name": tc["name"], "args": tc["args"], "id": tc["id"]} for tc in tool_calls]
            )
        output_tokens = approx_tokens(output_text)
        return UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )

    def _chunks(self, message: AIMessage) -> Iterator[ChatGenerationChunk]:
        content = message.content
        empty: str | list[str | dict[Any, Any]] = "" if isinstance(content, str) else []
        if isinstance(content, str):
            size = self.stream_chunk_chars
            for start in range(0, len(content), size):
                piece = content[start : start + size]
                yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        elif content:
            yield ChatGenerationChunk(message=AIMessageChunk(content=list(content)))
        for k, tc in enumerate(message.tool_calls):
            chunk = tool_call_chunk(
                name=tc["name"], args=json.dumps(tc["args"]), id=tc["id"], index=k
            )
            yield ChatGenerationChunk(
                message=AIMessageChunk(content=empty, tool_call_chunks=[chunk])
            )
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=empty,
                additional_kwargs=dict(message.additional_kwargs),
                response_metadata=dict(message.response_metadata),
                usage_metadata=message.usage_metadata,
                chunk_position="last",
            )
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.wait_turn()
        message = self.respond(messages, kwargs.get("tools"))
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await self.wait_turn_async()
        message = self.respond(messages, kwargs.get("tools"))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self.wait_turn()
        message = self.respond(messages, kwargs.get("tools"))
        for chunk in self._chunks(message):
            if run_manager and chunk.text:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        await self.wait_turn_async()
        message = self.respond(messages, kwargs.get("tools"))
        for chunk in self._chunks(message):
            if run_manager and chunk.text:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "latency": self.latency,
            "stream_chunk_chars": self.stream_chunk_chars,
        }
