"""The call card: every model call of a run, with what it sent and what it cost.

For each call: its caller (the agent or subagent, by the `lc_agent_name` of the call's
metadata), whether that is the main agent or a subagent, how many messages it sent, the
tools it offered, its input, output and (when the provider reports them) reasoning tokens,
what it answered (the tools it called, its text), and the **new part** of its prompt: the
messages it sent that the same caller's previous call did not (its first call: all of
them). That is what shows, call by call, where a pattern's tokens go: a subagent starts
from two messages (its system prompt and the task), a supervisor's last call adds the
subagent's answer as a tool result.

Live: pass a `CallRecorder` as a callback, then `format_call_card(recorder.records())`.
`fathom serve` records every run this way and appends the records to the thread's
`fathom_calls` metadata; the `fathom` command keeps them in its threads database. Both are
what `fathom calls THREAD`, the command's `/calls` and the web page show. Records kept there
are trimmed (`stored`): previews of at most `PREVIEW_CHARS` characters, the last
`STORED_ITEMS` new items of a call, the last `STORED_CALLS` calls of a thread.

A capture of the HTTP bodies (Responses or Chat Completions, from mitmproxy or a HAR file)
gives the same records: `fathom.measure.capture.read_capture`.

A caller's calls are told apart by instance too: two runs of one subagent side by side
(different `task` calls) are compared each with its own previous call, by the LangGraph
namespace they run in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, message_chunk_to_message
from langchain_core.outputs import LLMResult

from fathom.pricing import model_key
from fathom.usage import UNNAMED_AGENT, ChatModelCalls, agent_name, ai_messages

__all__ = [
    "CALLS_METADATA_KEY",
    "PREVIEW_CHARS",
    "STORED_CALLS",
    "STORED_ITEMS",
    "UNNAMED_AGENT",
    "CallRecord",
    "CallRecorder",
    "CardTotals",
    "PromptItem",
    "append_stored",
    "card_totals",
    "format_call_card",
    "records_from_json",
    "stored",
    "tool_names",
]

CALLS_METADATA_KEY = "fathom_calls"
"""Thread metadata key holding a server thread's call records (a list of `stored` dicts)."""
PREVIEW_CHARS = 200
"""Characters of an item's or an answer's text kept in a record."""
STORED_ITEMS = 8
"""New prompt items kept per stored call (the last ones; `new_count` counts them all)."""
STORED_CALLS = 200
"""Calls kept per thread (the most recent)."""


@dataclass(frozen=True)
class PromptItem:
    """One item of a prompt: a message (or a wire item of a capture) in short."""

    kind: str
    """`system`, `human`, `ai`, `tool` (a capture: the wire's role or item type, such as
    `user` or `function_call_output`)."""
    text: str
    """Its text, cut at `PREVIEW_CHARS`; an AI message's tool calls as `→ name(args)`."""
    chars: int
    """The length of its whole text."""


@dataclass
class CallRecord:
    """One model call."""

    caller: str
    kind: str
    """`agent` (the main agent) or `subagent`."""
    messages: int
    """How many messages (items) the call sent, the system prompt included."""
    tools: list[str] = field(default_factory=list)
    """The names of the tools it offered, in order."""
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None
    """Output tokens spent reasoning, when the provider reports them."""
    cached_tokens: int | None = None
    """Input tokens served from the provider's prompt cache, when reported."""
    new: list[PromptItem] = field(default_factory=list)
    """What the call added over the same caller's previous call (all of it for the first)."""
    new_count: int = 0
    """How many items were new (`new` may keep only the last of them)."""
    tools_changed: bool = False
    """Whether the tools offered differ from the caller's previous call."""
    output_calls: list[str] = field(default_factory=list)
    """The tools the answer called."""
    output_text: str = ""
    """The answer's text, cut at `PREVIEW_CHARS`."""
    started_at: float | None = None
    """When the call started (seconds since the epoch)."""
    seconds: float | None = None
    """How long it took."""
    model: str | None = None
    """"provider:model", when the call's metadata says."""
    run_id: str | None = None
    """The run (a server run, a turn of the command) it belongs to."""
    error: str | None = None
    """The error it ended with, if it failed."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (reasoning tokens are part of the output)."""
        return self.input_tokens + self.output_tokens

    def as_json(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        return asdict(self)


def records_from_json(data: Iterable[Mapping[str, Any]]) -> list[CallRecord]:
    """Records back from `CallRecord.as_json()` dicts; unknown keys are ignored."""
    known = set(CallRecord.__dataclass_fields__)
    records = []
    for entry in data:
        if not isinstance(entry, Mapping):
            continue
        values = {k: v for k, v in entry.items() if k in known}
        values["new"] = [PromptItem(str(i.get("kind", "")), str(i.get("text", "")),
                                    int(i.get("chars", 0)))
                         for i in values.get("new") or [] if isinstance(i, Mapping)]
        values.setdefault("caller", UNNAMED_AGENT)
        values.setdefault("kind", "agent")
        values.setdefault("messages", 0)
        records.append(CallRecord(**values))
    return records


def stored(record: CallRecord) -> dict[str, Any]:
    """`record` as kept on a thread: the last `STORED_ITEMS` new items only."""
    return replace(record, new=list(record.new[-STORED_ITEMS:])).as_json()


def append_stored(
    before: Any, records: Iterable[CallRecord], limit: int = STORED_CALLS
) -> list[dict[str, Any]]:
    """A thread's stored calls (`before`, a list or nothing) plus `records`, the last `limit`."""
    kept = [dict(e) for e in before if isinstance(e, Mapping)] if isinstance(before, list) else []
    kept.extend(stored(r) for r in records)
    return kept[-limit:]


# --------------------------------------------------------------------------- rendering


def _cut(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def _message_text(message: BaseMessage) -> str:
    text = str(message.text)
    if isinstance(message, AIMessage):
        calls = [f"→ {c['name']}({_dumps(c['args'])})" for c in message.tool_calls]
        text = " ".join(part for part in [text, *calls] if part)
    elif isinstance(message, ToolMessage) and message.name:
        text = f"[{message.name}] {text}"
    return text


def _item(message: BaseMessage) -> PromptItem:
    text = _message_text(message)
    return PromptItem(message.type, _cut(" ".join(text.split())), len(text))


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    if a is b:
        return True
    return (a.type == b.type and a.content == b.content
            and getattr(a, "tool_calls", None) == getattr(b, "tool_calls", None)
            and getattr(a, "tool_call_id", None) == getattr(b, "tool_call_id", None))


def tool_names(tools: Sequence[Any]) -> list[str]:
    """The names of tools in OpenAI (`function.name`), Responses or Anthropic (`name`) form."""
    names = []
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            names.append(str(name or tool.get("type") or "?"))
        else:
            names.append(str(getattr(tool, "name", "?")))
    return names


# --------------------------------------------------------------------------- the recorder


@dataclass
class _Previous:
    messages: list[BaseMessage]
    tools: list[str]


class CallRecorder(ChatModelCalls[tuple[CallRecord, float]]):
    """A callback handler that records every chat-model call as a `CallRecord`.

    The first caller it sees is the main agent unless the call's metadata marks it as a
    subagent (`ls_agent_type="subagent"`, as fathom's and LangChain's subagents are tagged);
    every other caller is a subagent. `run_id` is written into each record.
    """

    run_inline = True

    def __init__(self, run_id: str | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self._records: list[CallRecord] = []
        self._previous: dict[tuple[str, str], _Previous] = {}
        self._main: str | None = None

    def _started(
        self, request: list[BaseMessage], meta: dict[str, Any], params: dict[str, Any]
    ) -> tuple[CallRecord, float]:
        name = agent_name(meta)
        namespace = str(meta.get("langgraph_checkpoint_ns") or meta.get("checkpoint_ns") or "")
        instance = (name, namespace.rpartition("|")[0])  # the graph the model node runs in
        request = [message_chunk_to_message(m) for m in request]  # pyright: ignore[reportArgumentType]
        tools = tool_names(params.get("tools") or [])
        if meta.get("ls_agent_type") == "subagent":
            kind = "subagent"
        else:
            self._main = self._main or name
            kind = "agent" if name == self._main else "subagent"
        previous = self._previous.get(instance)
        kept = 0
        if previous is not None:
            limit = min(len(previous.messages), len(request))
            while kept < limit and _same(previous.messages[kept], request[kept]):
                kept += 1
        new = [_item(m) for m in request[kept:]]
        record = CallRecord(
            caller=name, kind=kind, messages=len(request), tools=tools, new=new,
            new_count=len(new),
            tools_changed=previous is not None and previous.tools != tools,
            started_at=time.time(), model=model_key(meta), run_id=self.run_id,
        )
        self._previous[instance] = _Previous(request, tools)
        self._records.append(record)
        return record, time.monotonic()

    def _ended(self, call: tuple[CallRecord, float], response: LLMResult) -> None:
        record, started = call
        record.seconds = time.monotonic() - started
        for message in ai_messages(response):
            usage = message.usage_metadata or {}
            record.input_tokens += int(usage.get("input_tokens", 0))
            record.output_tokens += int(usage.get("output_tokens", 0))
            reasoning = (usage.get("output_token_details") or {}).get("reasoning")
            if reasoning is not None:
                record.reasoning_tokens = (record.reasoning_tokens or 0) + int(reasoning)
            cached = (usage.get("input_token_details") or {}).get("cache_read")
            if cached is not None:
                record.cached_tokens = (record.cached_tokens or 0) + int(cached)
            record.output_calls.extend(c["name"] for c in message.tool_calls)
            record.output_text = _cut(" ".join(str(message.text).split()))
            name = (message.response_metadata or {}).get("model_name")
            if record.model is None and name:
                record.model = str(name)

    def _failed(self, call: tuple[CallRecord, float], error: BaseException) -> None:
        record, started = call
        record.seconds = time.monotonic() - started
        record.error = _cut(f"{type(error).__name__}: {error}")

    def records(self) -> list[CallRecord]:
        """Copies of the records so far, in the order the calls started."""
        with self._lock:
            return [replace(r, tools=list(r.tools), new=list(r.new),
                            output_calls=list(r.output_calls)) for r in self._records]


# --------------------------------------------------------------------------- the card


@dataclass(frozen=True)
class CardTotals:
    """The calls of a card added up."""

    calls: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cached_tokens: int

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


def card_totals(records: Sequence[CallRecord]) -> CardTotals:
    """Calls and tokens of `records` together."""
    return CardTotals(
        calls=len(records),
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        reasoning_tokens=sum(r.reasoning_tokens or 0 for r in records),
        cached_tokens=sum(r.cached_tokens or 0 for r in records),
    )


def _answer(record: CallRecord) -> str:
    if record.error:
        return f"error: {record.error}"
    parts = [f"→ {name}" for name in record.output_calls]
    parts.append(f"text: {record.output_text}" if record.output_text else "(no text)")
    return "; ".join(parts)


def format_call_card(records: Sequence[CallRecord], *, details: bool = True) -> str:
    """The card as plain text: a row per call and the totals, then (with `details`) each
    call's new prompt items and its answer."""
    if not records:
        return "no model calls recorded"
    totals = card_totals(records)
    reasoning = any(r.reasoning_tokens is not None for r in records)
    header = ["#", "caller", "kind", "msgs", "tools", "in", "out"]
    if reasoning:
        header.append("reasoning")
    header.append("new")
    rows: list[list[str]] = []
    for n, r in enumerate(records, 1):
        kinds = ", ".join(dict.fromkeys(item.kind for item in r.new))
        row = [str(n), r.caller, r.kind, str(r.messages), str(len(r.tools)),
               f"{r.input_tokens:,}", f"{r.output_tokens:,}"]
        if reasoning:
            row.append("-" if r.reasoning_tokens is None else f"{r.reasoning_tokens:,}")
        row.append(f"{r.new_count}: {kinds}" if r.new_count else "0")
        rows.append(row)
    total = ["", "total", "", "", "", f"{totals.input_tokens:,}", f"{totals.output_tokens:,}"]
    if reasoning:
        total.append(f"{totals.reasoning_tokens:,}")
    total.append("")
    widths = [max(len(row[i]) for row in [header, *rows, total]) for i in range(len(header))]
    left = {1, 2, len(header) - 1}

    def line(row: list[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) if i in left else cell.rjust(widths[i])
                         for i, cell in enumerate(row)).rstrip()

    summary = (f"{totals.calls} model calls · {totals.input_tokens:,} in · "
               f"{totals.output_tokens:,} out")
    if reasoning:
        summary += f" · {totals.reasoning_tokens:,} reasoning"
    summary += f" · {totals.total_tokens:,} tokens"
    lines = [summary, line(header), *(line(row) for row in rows), line(total)]
    if details:
        for n, r in enumerate(records, 1):
            tools = ", ".join(r.tools) if r.tools else "none"
            changed = " (changed)" if r.tools_changed else ""
            lines += ["", f"call {n} · {r.caller} ({r.kind}) · {r.messages} messages · "
                      f"tools: {tools}{changed}"]
            hidden = r.new_count - len(r.new)
            if hidden > 0:
                lines.append(f"  + … {hidden} earlier new items")
            lines.extend(f"  + {item.kind:<7} {item.text}" for item in r.new)
            lines.append(f"  {_answer(r)}")
    return "\n".join(lines)
