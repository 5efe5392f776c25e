"""Run one graph invocation and translate its stream into LangGraph-server SSE events.

Stream modes map as LangGraph's server maps them: ``values``, ``updates``, ``custom``,
``debug``, ``tasks``, ``checkpoints`` pass through under their own name; ``messages-tuple``
sends ``messages`` events carrying ``[message_chunk, metadata]``; ``messages`` sends
``messages/metadata`` once per message id, then ``messages/partial`` (accumulated chunks) or
``messages/complete``; ``events`` sends every ``astream_events`` v2 event. With
``stream_subgraphs`` the event name gets the subgraph namespace appended, ``|``-separated.

A run of the thread-centric protocol (``kwargs["protocol_v2"]``, set by ``run.start``) is
streamed the way LangGraph streams for that protocol: ``Pregel.astream(version="v2")`` with
``CONFIG_KEY_STREAM_MESSAGES_V2`` set, so the ``messages`` mode carries LangGraph's
content-block events (``message-start``, ``content-block-*``, ``message-finish``; sent as
``messages`` events, the event dict alone), plus the ``tools`` mode (``tool-started``,
``tool-output-delta``, ``tool-finished``, ``tool-error``; sent as ``tools`` events). Whole
messages a node returns without streaming them stay off that channel, as in langgraph-api.

The graph is always streamed with ``values`` and ``updates`` too (events the client did not ask
for are not sent), so the run's final values and whether it paused are known when the stream
ends, without reading the checkpoint back: LangGraph's ``updates`` stream reports every pause
(an ``interrupt()``, ``interrupt_before/after``, a subgraph's pause) as an ``__interrupt__``
update of the root graph.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, message_chunk_to_message
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs

# The switch LangGraph's own server sets for protocol runs; LangGraph exports it only here.
try:  # LangGraph exports this key nowhere public; the tests pin what it switches on
    from langgraph._internal._constants import CONFIG_KEY_STREAM_MESSAGES_V2
except ImportError:  # moved in a later LangGraph: its value in 1.2
    CONFIG_KEY_STREAM_MESSAGES_V2 = "__pregel_stream_messages_v2"
from langgraph.pregel import Pregel
from langgraph.types import Command, Send
from pydantic import BaseModel

from fathom.cache_metrics import PrefixRecorder
from fathom.measure.calls import CallRecord, CallRecorder
from fathom.server.auth.run_config import rebuild_identity
from fathom.tracing.settings import run_span

__all__ = ["RunEnd", "build_config", "build_input", "stream_run"]

Emit = Callable[[str, Any], None]


def build_config(run: dict[str, Any], graph_id: str) -> RunnableConfig:
    """The ``RunnableConfig`` for ``run``: its config plus thread/run ids and metadata."""
    kwargs = run["kwargs"]
    user = dict(kwargs.get("config") or {})
    configurable = dict(user.get("configurable") or {})
    configurable.update(
        thread_id=run["thread_id"],
        run_id=run["run_id"],
        graph_id=graph_id,
        assistant_id=run["assistant_id"],
    )
    checkpoint = kwargs.get("checkpoint") or {}
    if kwargs.get("checkpoint_id"):
        checkpoint = {**checkpoint, "checkpoint_id": kwargs["checkpoint_id"]}
    for key in ("checkpoint_id", "checkpoint_ns"):
        if checkpoint.get(key):
            configurable[key] = checkpoint[key]
    rebuild_identity(configurable)  # the caller, for runtime.server_info.user
    metadata = {
        **dict(user.get("metadata") or {}),
        **run["metadata"],
        "graph_id": graph_id,
        "assistant_id": run["assistant_id"],
        "thread_id": run["thread_id"],
        "run_id": run["run_id"],
    }
    config: dict[str, Any] = {
        **user,
        "configurable": configurable,
        "metadata": metadata,
        "run_id": uuid.UUID(run["run_id"]),
    }
    return RunnableConfig(**config)


def _send(value: Any) -> Any:
    if isinstance(value, dict) and "node" in value:
        return Send(value["node"], value.get("input"))
    return value


def build_input(kwargs: dict[str, Any]) -> Any:
    """The graph input: ``input`` as given, or a ``Command`` built from ``command``."""
    cmd = kwargs.get("command")
    if not cmd:
        return kwargs.get("input")
    goto = cmd.get("goto")
    if isinstance(goto, list):
        goto = [_send(g) for g in goto]
    elif goto is not None:
        goto = _send(goto)
    args: dict[str, Any] = {}
    if "resume" in cmd:
        args["resume"] = cmd["resume"]
    if cmd.get("update") is not None:
        update = cmd["update"]
        args["update"] = [tuple(u) for u in update] if isinstance(update, list) else update
    if goto is not None:
        args["goto"] = goto
    return Command(**args)


@dataclass
class RunEnd:
    """What the root graph's stream showed by the time it ended."""

    values: Any = None
    """The last ``values`` chunk of the root graph (None if it sent none)."""
    paused: bool = False
    """Whether the root graph stopped at a pause (an ``__interrupt__`` update)."""
    prefix: PrefixRecorder | None = None
    """The run's prompt-cache prefix figures per agent (set when the stream ends)."""
    calls: list[CallRecord] | None = None
    """The run's model calls (``fathom.measure.calls``; set when the stream ends)."""

    @property
    def finished(self) -> bool:
        """Whether the run ran to its end with known values: the thread waits on nothing."""
        return not self.paused and isinstance(self.values, dict)


class _Translator:
    """Turns ``(namespace, mode, chunk)`` parts into named SSE events."""

    def __init__(
        self, requested: list[str], subgraphs: bool, emit: Emit, *, protocol: bool = False
    ) -> None:
        self.requested = set(requested)
        self.protocol = protocol
        """Whether ``messages`` parts are content-block events (a protocol run)."""
        self.subgraphs = subgraphs
        self.emit = emit
        self.messages: dict[str, BaseMessage] = {}
        self.end = RunEnd()

    def name(self, mode: str, ns: tuple[str, ...]) -> str:
        return f"{mode}|{'|'.join(ns)}" if self.subgraphs and ns else mode

    def part(self, ns: tuple[str, ...], mode: str, chunk: Any) -> None:
        if not ns:
            if mode == "values":
                self.end.values = chunk
            elif mode == "updates" and isinstance(chunk, dict) and "__interrupt__" in chunk:
                self.end.paused = True
        if mode == "messages":
            if self.protocol:
                self._protocol_message(ns, chunk)
            elif "messages-tuple" in self.requested:
                self.emit(self.name("messages", ns), chunk)
            elif "messages" in self.requested:
                self._message(chunk)
        elif mode in self.requested:
            self.emit(self.name(mode, ns), chunk)

    def _protocol_message(self, ns: tuple[str, ...], chunk: Any) -> None:
        """A content-block event (``(event, metadata)`` from LangGraph's v2 handler) goes out
        as the event dict; a whole ``(message, metadata)`` has no protocol form: dropped."""
        event, _meta = chunk
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            self.emit(self.name("messages", ns), event)

    def _message(self, chunk: Any) -> None:
        msg, meta = chunk
        if not isinstance(msg, BaseMessage):
            return
        key = msg.id or ""
        if key in self.messages:
            merged = self.messages[key] + msg  # pyright: ignore[reportOperatorIssue]
            self.messages[key] = merged  # pyright: ignore[reportArgumentType]
        else:
            self.messages[key] = msg
            self.emit("messages/metadata", {key: {"metadata": meta}})
        # Both events carry the accumulated message converted to its non-chunk type ("ai").
        whole = message_chunk_to_message(self.messages[key])  # pyright: ignore[reportArgumentType]
        name = "messages/partial" if isinstance(msg, BaseMessageChunk) else "messages/complete"
        self.emit(name, [whole])


async def stream_run(
    graph: Pregel, run: dict[str, Any], config: RunnableConfig, emit: Emit
) -> RunEnd:
    """Invoke ``graph`` for ``run``, emit its stream events, and say how it ended.

    Exceptions (and cancellation) propagate. A ``fathom.cache_metrics.PrefixRecorder``
    measures how much each model request repeats the previous one (``RunEnd.prefix``), and a
    ``fathom.measure.calls.CallRecorder`` records every model call (``RunEnd.calls``). With
    tracing on (``fathom.tracing``) the run is a span of its own, the parent of the graph's
    spans.
    """
    graph_id = str((config.get("configurable") or {}).get("graph_id") or "")
    prefix = PrefixRecorder()  # the run's prompt-cache prefix figures, kept on its thread
    calls = CallRecorder(run_id=str(run["run_id"]))  # its model calls, kept there too
    with run_span(run, graph_id):
        end = await _stream(graph, run, merge_configs(config, {"callbacks": [prefix, calls]}),
                            emit)
    end.prefix = prefix
    end.calls = calls.records()
    return end


def _state_dict(value: Any) -> Any:
    """A ``version="v2"`` values chunk as the dict ``version="v1"`` sends: LangGraph turns a
    pydantic or dataclass state into its schema there; its fields are the channels."""
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def _v1_part(part: dict[str, Any]) -> tuple[tuple[str, ...], str, Any]:
    """``(namespace, mode, chunk)`` of a ``version="v2"`` stream part, the chunk as
    ``version="v1"`` has it (a values chunk keeps its ``__interrupt__`` key)."""
    mode, chunk = part["type"], part["data"]
    if mode == "values":
        chunk = _state_dict(chunk)
        if part.get("interrupts") and isinstance(chunk, dict):
            chunk = {**chunk, "__interrupt__": part["interrupts"]}
    return tuple(part["ns"]), mode, chunk


async def _stream(graph: Pregel, run: dict[str, Any], config: RunnableConfig, emit: Emit) -> RunEnd:
    kwargs = run["kwargs"]
    if kwargs.get("protocol_v2"):
        return await _stream_protocol(graph, run, config, emit)
    requested = list(kwargs.get("stream_mode") or ["values"])
    modes = {m for m in requested if m != "events"} | {"values", "updates"}
    if "messages-tuple" in modes:
        modes.discard("messages-tuple")
        modes.add("messages")
    subgraphs = bool(kwargs.get("subgraphs"))
    tr = _Translator(requested, subgraphs, emit)
    extra = _extra(kwargs)
    graph_input = build_input(kwargs)
    stream_modes: Any = sorted(modes)
    if "events" in requested:
        root = str(config.get("run_id"))
        async for event in graph.astream_events(
            graph_input,
            config,
            version="v2",
            stream_mode=stream_modes,
            subgraphs=subgraphs,
            **extra,
        ):
            if event["event"] == "on_chain_stream" and event["run_id"] == root:
                data: Any = event["data"].get("chunk")
                ns, mode, chunk = data if subgraphs else ((), *data)
                tr.part(tuple(ns), mode, chunk)
            else:
                emit("events", event)
        return tr.end
    async for part in graph.astream(
        graph_input, config, stream_mode=stream_modes, subgraphs=subgraphs, **extra
    ):
        ns, mode, chunk = part if subgraphs else ((), *part)
        tr.part(tuple(ns), mode, chunk)
    return tr.end


def _extra(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run's keyword arguments to ``astream`` besides input, config and modes."""
    extra: dict[str, Any] = {}
    for key in ("interrupt_before", "interrupt_after", "durability"):
        if kwargs.get(key) is not None:
            extra[key] = kwargs[key]
    if kwargs.get("context") is not None:
        extra["context"] = kwargs["context"]
    return extra


_GRAPH_MODES = frozenset(
    {"values", "updates", "custom", "debug", "tasks", "checkpoints", "messages", "tools"}
)
"""The stream modes a graph streams itself (``events`` and ``messages-tuple`` are the
server's)."""


async def _stream_protocol(
    graph: Pregel, run: dict[str, Any], config: RunnableConfig, emit: Emit
) -> RunEnd:
    """Stream a thread-centric protocol run: its modes plus content-block ``messages`` and
    ``tools``, through LangGraph's ``version="v2"`` stream."""
    kwargs = run["kwargs"]
    requested = [*(kwargs.get("stream_mode") or ["values"]), "tools"]
    modes: Any = sorted(
        {m for m in requested if m in _GRAPH_MODES} | {"values", "updates", "messages"}
    )
    subgraphs = bool(kwargs.get("subgraphs"))
    tr = _Translator(requested, subgraphs, emit, protocol=True)
    configurable = {**(config.get("configurable") or {}), CONFIG_KEY_STREAM_MESSAGES_V2: True}
    config = RunnableConfig(**{**config, "configurable": configurable})
    stream: Any = graph.astream(
        build_input(kwargs),
        config,
        stream_mode=modes,
        subgraphs=subgraphs,
        version="v2",
        **_extra(kwargs),
    )
    async for part in stream:
        tr.part(*_v1_part(part))
    return tr.end
