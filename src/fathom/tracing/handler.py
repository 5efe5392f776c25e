"""A LangChain callback handler that turns an agent's runs into OpenTelemetry spans.

LangChain reports every run (graph, node, model call, tool call) to callback handlers with
its `run_id` and its parent's `parent_run_id`; the handler keeps a span for the runs a
reader cares about and hangs each under the span of its nearest traced ancestor:

* AGENT: the top-level graph run, and every subagent's graph (a chain run named after the
  agent in its `lc_agent_name` metadata), whether the `task` tool, the code interpreter's
  `task()` or an async subagent's server run started it;
* LLM: each chat-model call, with tokens (and cost when prices are given);
* TOOL: each tool call;
* CHAIN: a chain run that asks for a span in its metadata (`SPAN_METADATA_KEY`), such as
  each subtask of the plan → work → check → report workflow.

A custom event named `SPAN_ATTRIBUTES_EVENT` sets its data as attributes on the span of
the nearest traced run it was dispatched in (how the workflow reports its metrics).

Graph nodes and middleware steps get no span of their own. A tool or model error marks
its span ERROR with an `exception` event; an error `ToolMessage` (a handled tool error)
marks it ERROR too. A human-approval pause (`GraphInterrupt`) is not an error: the spans it
passes through get `fathom.interrupt = True` and the innermost one a `fathom.interrupt`
event with the interrupt's value. The resumed run is a new AGENT span on the same
`session.id` (the thread id) with `fathom.resume = True`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import Command
from openinference.semconv.trace import SpanAttributes
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from fathom.tracing.attributes import (
    AGENT,
    CHAIN,
    FATHOM_AGENT_NAME,
    FATHOM_INPUT_MESSAGES,
    FATHOM_INTERRUPT,
    FATHOM_RESUME,
    FATHOM_RUN_ID,
    FATHOM_TOOL_CALL_ID,
    KIND,
    LLM,
    TOOL,
    cost_attributes,
    cut,
    dumps,
    input_message_attributes,
    message_text,
    output_message_attributes,
    token_attributes,
    tool_message,
)
from fathom.tracing.keys import SPAN_ATTRIBUTES_EVENT, SPAN_METADATA_KEY

__all__ = ["TracingHandler"]

logger = logging.getLogger(__name__)

_PROPAGATOR = TraceContextTextMapPropagator()
_UNNAMED = "agent"
_INTERRUPTS_KEPT = 1024


@dataclass(slots=True)
class _Node:
    """A traced run: its span, the run that owns it, and what its children inherit."""

    span: Span
    run_id: UUID
    kind: str
    root_run_id: str
    thread_id: str | None
    agent_name: str | None
    context: Context
    """The context with `span` current: what children start in."""


class TracingHandler(BaseCallbackHandler):
    """Spans for agent runs, model calls and tool calls, in OpenInference conventions.

    Built by `fathom.tracing.enable()`; `create_deep_agent` adds it to the agents it builds.
    Thread-safe; it runs inline (no executor hop) on async runs.
    """

    run_inline = True
    raise_error = False

    def __init__(
        self,
        tracer: Tracer,
        *,
        provider: TracerProvider | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        capture_messages: bool = False,
        max_value_chars: int = 4096,
    ) -> None:
        self.tracer = tracer
        self.provider = provider
        self.prices = dict(prices or {})
        self.capture_messages = capture_messages
        self.max_value_chars = max_value_chars
        self._lock = threading.Lock()
        # every live run -> the node its children hang under (its own, or its ancestor's)
        self._runs: dict[UUID, _Node] = {}
        self._interrupts: dict[str, None] = {}  # ids already shown as an event
        self._tool_calls: dict[str, UUID] = {}  # tool call id -> run id, while it runs

    # ------------------------------------------------------------------ bookkeeping
    def _parent(self, parent_run_id: UUID | None) -> _Node | None:
        if parent_run_id is None:
            return None
        with self._lock:
            return self._runs.get(parent_run_id)

    def _start(
        self,
        name: str,
        kind: str,
        run_id: UUID,
        parent: _Node | None,
        metadata: Mapping[str, Any] | None,
        attributes: dict[str, Any],
        agent_name: str | None = None,
    ) -> _Node:
        metadata = metadata or {}
        thread_id = parent.thread_id if parent else None
        thread_id = str(metadata.get("thread_id") or thread_id or "") or None
        agent = (agent_name or metadata.get("lc_agent_name")
                 or (parent.agent_name if parent else None))
        root_run_id = parent.root_run_id if parent else str(run_id)
        context = parent.context if parent else None
        attributes[KIND] = kind
        attributes[FATHOM_RUN_ID] = root_run_id
        if thread_id:
            attributes[SpanAttributes.SESSION_ID] = thread_id
        if agent:
            attributes[FATHOM_AGENT_NAME] = agent
        span = self.tracer.start_span(name, context=context, attributes=attributes)
        node = _Node(span, run_id, kind, root_run_id, thread_id, agent,
                     trace.set_span_in_context(span))
        with self._lock:
            self._runs[run_id] = node
        return node

    def _pass_through(self, run_id: UUID, parent: _Node | None) -> None:
        if parent is not None:
            with self._lock:
                self._runs[run_id] = parent

    def _finish(self, run_id: UUID) -> _Node | None:
        """The node `run_id` owned (now forgotten), or `None` if it owned none."""
        with self._lock:
            node = self._runs.pop(run_id, None)
            owned = node if node is not None and node.run_id == run_id else None
            if owned is not None and owned.kind == TOOL and self._tool_calls:
                call = _attribute(owned.span, FATHOM_TOOL_CALL_ID)
                if call is not None and self._tool_calls.get(str(call)) == run_id:
                    del self._tool_calls[str(call)]
        return owned

    def _interrupted(self, error: GraphInterrupt, at: _Node | None) -> None:
        """Mark `at` (the span the pause passes through); the first one also gets the event."""
        if at is None:
            return
        at.span.set_attribute(FATHOM_INTERRUPT, True)
        for interrupt in _interrupts_of(error):
            key = str(getattr(interrupt, "id", "") or id(interrupt))
            with self._lock:
                if key in self._interrupts:
                    continue
                self._interrupts[key] = None
                while len(self._interrupts) > _INTERRUPTS_KEPT:
                    self._interrupts.pop(next(iter(self._interrupts)))
            value = getattr(interrupt, "value", interrupt)
            at.span.add_event(FATHOM_INTERRUPT, {
                "fathom.interrupt.id": key,
                "fathom.interrupt.value": cut(dumps(value), self.max_value_chars),
            })

    def _failed(self, run_id: UUID, error: BaseException) -> None:
        with self._lock:
            at = self._runs.get(run_id)
        owned = self._finish(run_id)
        if isinstance(error, GraphInterrupt):
            self._interrupted(error, at)
        elif owned is not None and not isinstance(error, GraphBubbleUp):
            owned.span.record_exception(error)
            owned.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        if owned is not None:
            owned.span.end()

    # ------------------------------------------------------------------ chains (agents)
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        parent = self._parent(parent_run_id)
        name = kwargs.get("name") or (serialized or {}).get("name") or _UNNAMED
        agent_name = (metadata or {}).get("lc_agent_name")
        if (metadata or {}).get(SPAN_METADATA_KEY) == name:
            self._start(name, CHAIN, run_id, parent, metadata, {})
            return
        if parent is not None and name != agent_name:
            self._pass_through(run_id, parent)
            return
        attributes: dict[str, Any] = {SpanAttributes.AGENT_NAME: agent_name or name}
        if isinstance(inputs, Command):
            attributes[FATHOM_RESUME] = inputs.resume is not None
            attributes[SpanAttributes.INPUT_VALUE] = cut(dumps(inputs.resume), self.max_value_chars)
        elif (text := _last_text(inputs)) is not None:
            attributes[SpanAttributes.INPUT_VALUE] = cut(text, self.max_value_chars)
        self._start(name, AGENT, run_id, parent, metadata, attributes, agent_name or name)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        node = self._finish(run_id)
        if node is None:
            return
        if (text := _last_text(outputs)) is not None:
            node.span.set_attribute(SpanAttributes.OUTPUT_VALUE, cut(text, self.max_value_chars))
        node.span.end()

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    # ------------------------------------------------------------------ model calls
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        metadata = metadata or {}
        params = invocation_params or {}
        request = messages[0] if messages else []
        model = str(metadata.get("ls_model_name") or params.get("model")
                    or params.get("model_name") or (serialized or {}).get("name") or "model")
        attributes: dict[str, Any] = {SpanAttributes.LLM_MODEL_NAME: model}
        if provider := metadata.get("ls_provider"):
            attributes[SpanAttributes.LLM_PROVIDER] = str(provider)
        if request:
            attributes[SpanAttributes.INPUT_VALUE] = cut(message_text(request[-1]),
                                                         self.max_value_chars)
        if self.capture_messages:
            attributes[FATHOM_INPUT_MESSAGES] = len(request)
            attributes[SpanAttributes.LLM_INVOCATION_PARAMETERS] = cut(
                dumps({k: v for k, v in params.items() if k != "tools"}), self.max_value_chars
            )
            attributes.update(input_message_attributes(request, self.max_value_chars))
        self._start(model, LLM, run_id, self._parent(parent_run_id), metadata, attributes)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        model = str((metadata or {}).get("ls_model_name") or (serialized or {}).get("name")
                    or "model")
        attributes: dict[str, Any] = {SpanAttributes.LLM_MODEL_NAME: model}
        if prompts:
            attributes[SpanAttributes.INPUT_VALUE] = cut(prompts[-1], self.max_value_chars)
        self._start(model, LLM, run_id, self._parent(parent_run_id), metadata, attributes)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        node = self._finish(run_id)
        if node is None:
            return
        span = node.span
        generation = (response.generations[0][:1] or [None])[0] if response.generations else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        attributes: dict[str, Any] = {}
        if isinstance(message, AIMessage):
            attributes[SpanAttributes.OUTPUT_VALUE] = cut(message_text(message),
                                                          self.max_value_chars)
            if self.capture_messages:
                attributes.update(output_message_attributes(message, self.max_value_chars))
            model = (message.response_metadata or {}).get("model_name")
            if model:
                attributes[SpanAttributes.LLM_MODEL_NAME] = str(model)
            if usage := message.usage_metadata:
                attributes.update(token_attributes(usage))
                if self.prices:
                    price = self.prices.get(str(model)) if model else None
                    if price is None:
                        started = _attribute(span, SpanAttributes.LLM_MODEL_NAME)
                        price = self.prices.get(str(started))
                    attributes.update(cost_attributes(usage, price))
        elif generation is not None:
            attributes[SpanAttributes.OUTPUT_VALUE] = cut(generation.text, self.max_value_chars)
        span.set_attributes(attributes)
        span.end()

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    # ------------------------------------------------------------------ tool calls
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        value = dumps(inputs) if inputs is not None else input_str
        attributes: dict[str, Any] = {
            SpanAttributes.TOOL_NAME: name,
            SpanAttributes.INPUT_VALUE: cut(value, self.max_value_chars),
        }
        tool_call_id = kwargs.get("tool_call_id")
        if tool_call_id:
            attributes[FATHOM_TOOL_CALL_ID] = str(tool_call_id)
        self._start(name, TOOL, run_id, self._parent(parent_run_id), metadata, attributes)
        if tool_call_id:
            with self._lock:
                self._tool_calls[str(tool_call_id)] = run_id

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        node = self._finish(run_id)
        if node is None:
            return
        message = tool_message(output)
        text = message_text(message) if message is not None else str(output)
        node.span.set_attribute(SpanAttributes.OUTPUT_VALUE, cut(text, self.max_value_chars))
        if message is not None and message.status == "error":
            node.span.add_event("fathom.tool_error", {"message": cut(text, self.max_value_chars)})
            node.span.set_status(Status(StatusCode.ERROR, cut(text, 200)))
        node.span.end()

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    # ------------------------------------------------------------------ custom events
    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if name != SPAN_ATTRIBUTES_EVENT or not isinstance(data, Mapping):
            return
        with self._lock:
            node = self._runs.get(run_id)
        if node is not None:
            node.span.set_attributes(
                {str(key): _attribute_value(value) for key, value in data.items()}
            )

    # ------------------------------------------------------------------ outside runs
    def carrier(
        self, config: Mapping[str, Any], tool_call_id: str | None = None
    ) -> dict[str, str]:
        """The W3C `traceparent` of tool call `tool_call_id` while it runs, else of the
        traced run that `config` was handed to (empty when neither is traced)."""
        node: _Node | None = None
        if tool_call_id is not None:
            with self._lock:
                run_id = self._tool_calls.get(tool_call_id)
                node = self._runs.get(run_id) if run_id is not None else None
        if node is None:
            parent_run_id = getattr(config.get("callbacks"), "parent_run_id", None)
            node = self._parent(parent_run_id) if isinstance(parent_run_id, UUID) else None
        if node is None:
            return {}
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=node.context)
        return carrier

    def shutdown(self) -> None:
        """Send the spans still queued and stop the provider fathom built (if it did)."""
        if self.provider is not None:
            try:
                self.provider.force_flush()
            except Exception:  # boundary (cleanup): a collector down must not break the caller
                logger.warning("could not flush the last spans", exc_info=True)


def _attribute(span: Span, key: str) -> Any:
    attributes = getattr(span, "attributes", None)
    return attributes.get(key) if isinstance(attributes, Mapping) else None


def _attribute_value(value: Any) -> Any:
    """`value` as OpenTelemetry takes it: a primitive, a list of primitives, or JSON text."""
    primitive = (str, bool, int, float)
    if isinstance(value, primitive):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, primitive) for v in value):
        kinds = {type(v) for v in value}
        if len(kinds) <= 1:
            return list(value)
    return dumps(value)


def _interrupts_of(error: GraphInterrupt) -> Sequence[Any]:
    value = error.args[0] if error.args else ()
    return value if isinstance(value, Sequence) and not isinstance(value, str) else [value]


def _last_text(value: Any) -> str | None:
    """The text of the last message in a state dict (`{"messages": [...]}`), if any."""
    if not isinstance(value, Mapping):
        return None
    messages = value.get("messages")
    if not isinstance(messages, Sequence) or not messages:
        return None
    last = messages[-1]
    if isinstance(last, BaseMessage):
        return message_text(last)
    if isinstance(last, Mapping):
        return str(last.get("content", ""))
    if isinstance(last, tuple) and len(last) == 2:
        return str(last[1])
    return None
