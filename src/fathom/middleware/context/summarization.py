"""Context compression: offload big tool results, trim old tool inputs, summarize history.

Three mechanisms keep a long run inside the model's window, cheapest first:

1. **Offloading.** A tool result over `offload_tokens` is written to the backend (under
   `/large_tool_results/`) and the conversation keeps a preview and the path. A
   `CompositeBackend`'s `artifacts_root` moves this folder and the archive's under it.
2. **Trimming old tool inputs.** Once the context reaches the trigger, the big arguments
   of earlier `write_file` / `edit_file` calls (the file is on the backend already) are
   replaced by a pointer to the file.
3. **Summarization.** If that is not enough, the older messages are replaced by a
   structured summary written by the model; the replaced messages are archived as a
   transcript under `/conversation_history/`, readable with `read_file` and `grep`.
   Tool calls and their results are never separated. A `ContextOverflowError` from the
   provider first sends the newest batch of tool results to files (summarization keeps
   that batch whole, so it alone can be what does not fit) and retries; if that is not
   enough, it forces a summarization and one more retry.

Everything happens inside the model step (`wrap_model_call` / `wrap_tool_call`), so it adds
no graph node and no checkpoint of its own.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, overload

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    ToolCallRequest,
)
from langchain.tools import ToolRuntime
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import coerce_to_runnable
from langchain_core.tools import StructuredTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from fathom.backends.protocol import BackendProtocol, resolve_backend
from fathom.backends.state import StateBackend
from fathom.models import resolve_model
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import tool_error

__all__ = [
    "ARCHIVE_DIR",
    "COMPACT_FLAG",
    "COMPACT_TOOL",
    "COMPACT_TOOL_DESCRIPTION",
    "FALLBACK_KEEP_MESSAGES",
    "FALLBACK_TRIGGER_TOKENS",
    "OFFLOAD_DIR",
    "SUMMARY_SOURCE",
    "SummarizationMiddleware",
    "SummarizationToolMiddleware",
    "artifacts_dir",
    "context_window",
    "create_summarization_middleware",
    "create_summarization_tool_middleware",
    "is_context_overflow",
]

COMPACT_TOOL = "compact_conversation"
"""The name of the tool the model calls to compact the conversation."""
COMPACT_FLAG = "compact_requested"
"""State key the `compact_conversation` tool sets; the next model step then summarizes."""
OFFLOAD_DIR = "/large_tool_results"
ARCHIVE_DIR = "/conversation_history"
SUMMARY_SOURCE = "summarization"
"""`lc_source` metadata of summary calls (filter their streamed tokens) and summary messages."""

TRIGGER_FRACTION = 0.85
KEEP_FRACTION = 0.10
FALLBACK_TRIGGER_TOKENS = 170_000
FALLBACK_KEEP_MESSAGES = 6
OFFLOAD_TOKENS = 20_000
CHARS_PER_TOKEN = 4
PREVIEW_LINES = 10
BATCH_OFFLOAD_CHARS = 2_000
"""After a context overflow, results of the newest batch longer than this go to files."""
# File tools bound their own output (and offloading a read would only offload it again).
_NOT_OFFLOADED = frozenset({"ls", "glob", "grep", "read_file", "write_file", "edit_file"})
_TRIMMED_ARGS = {"write_file": "content", "edit_file": "new_string"}

SUMMARY_PROMPT = """You are compressing the history of an agent's working session so the agent can continue without it. Write a summary with exactly these sections:

## Intent
What the user asked for and any constraints or preferences they stated.

## Facts and decisions
Every concrete fact, number, name, identifier and decision the work depends on. Keep exact values.

## Artifacts
Files created or changed (full paths) and what each holds.

## Progress and next steps
What is done, what is in progress, and what remains.

Write only the summary. The session so far:

{conversation}"""  # noqa: E501


def context_window(model: Any, explicit: int | None = None) -> int | None:
    """The model's input window in tokens: `explicit`, else its profile, else `None`."""
    if explicit:
        return explicit
    profile = getattr(model, "profile", None) or {}
    window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return window if isinstance(window, int) and window > 0 else None


def artifacts_dir(backend: Any, name: str) -> str:
    """The directory `name` under the backend's `artifacts_root`: a `CompositeBackend`'s
    (so offloaded results and archives can be routed, e.g. under `/artifacts/`), else `/`.

    `artifacts_dir(CompositeBackend(..., artifacts_root="/artifacts/"), "large_tool_results")`
    is `/artifacts/large_tool_results`.
    """
    root = getattr(backend, "artifacts_root", None)
    root = root if isinstance(root, str) and root else "/"
    return f"{root.rstrip('/')}/{name}"


def _approx(messages: Sequence[Any], tools: Sequence[Any] | None = None) -> int:
    return count_tokens_approximately(list(messages), tools=list(tools or []) or None)


_OVERFLOW_TEXT = re.compile(
    r"context_length_exceeded|maximum context length|prompt is too long|context window|"
    r"too many (input )?tokens",
    re.IGNORECASE,
)


def is_context_overflow(error: BaseException) -> bool:
    """Whether `error` says the prompt did not fit the model's window.

    LangChain raises `ContextOverflowError` for the providers it recognises; OpenAI-
    compatible servers such as vLLM word it differently ("maximum context length"), so
    the message is checked too.
    """
    return isinstance(error, ContextOverflowError) or bool(_OVERFLOW_TEXT.search(str(error)))


def _is_summary(message: Any) -> bool:
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    )


_ARCHIVE_ARG_CHARS = 200
"""File content longer than this is not copied into an archive: the file holds it."""


def _archived_args(call: Any, succeeded: set[str]) -> Any:
    """A call's arguments for the archive: content a successful write put in a file is
    replaced by a pointer, so the archive does not store every file a second time."""
    key = _TRIMMED_ARGS.get(call["name"])
    value = call["args"].get(key) if key else None
    if call.get("id") not in succeeded or not isinstance(value, str):
        return call["args"]
    if len(value) <= _ARCHIVE_ARG_CHARS:
        return call["args"]
    path = call["args"].get("file_path", "the file")
    return {**call["args"], key: f"[{len(value):,} characters, written to {path}]"}


def _transcript(messages: Sequence[AnyMessage]) -> str:
    """The messages as a readable Markdown transcript (the archive format)."""
    succeeded = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status != "error"
    }
    lines: list[str] = []
    for message in messages:
        lines.append(f"### {message.type}" + (f" ({message.name})" if message.name else ""))
        text = message.text if isinstance(message.content, list) else str(message.content)
        if text:
            lines.append(text)
        for call in getattr(message, "tool_calls", None) or []:
            args = json.dumps(_archived_args(call, succeeded), ensure_ascii=False)
            lines.append(f"-> {call['name']}({args})")
        lines.append("")
    return "\n".join(lines)


ContextSize = tuple[Literal["fraction", "tokens", "messages"], float]
"""A size the reference's way: `("fraction", 0.85)`, `("tokens", 100_000)`, `("messages", 6)`."""
TriggerClause = Mapping[Literal["fraction", "tokens", "messages"], float]
"""Conditions that must all hold, e.g. `{"tokens": 4000, "messages": 10}`."""

_HANDLED: ContextVar[bool] = ContextVar("fathom_summarization_handled", default=False)
"""Set while a `SummarizationMiddleware` runs the rest of a model call, so a compaction
tool's own summarizer further in does not compact the same request again."""


Summarizer = BaseChatModel | str | Runnable | Callable[[list[AnyMessage]], str]
"""What `summarizer=` takes: a chat model (or its name), or what turns messages into text."""


def _summarizer(value: Any) -> tuple[BaseChatModel | None, Runnable | None]:
    """`summarizer=` as (chat model prompted with the summary prompt, or runnable)."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return resolve_model(value), None
    if isinstance(value, BaseChatModel):
        return value, None
    if isinstance(value, Runnable) or callable(value):
        return None, coerce_to_runnable(value)
    raise TypeError(
        "summarizer must be a chat model, a 'provider:model' string, or a runnable or "
        f"function from messages to text, not {type(value).__name__}"
    )


def _summary_text(value: Any) -> str:
    """The text a custom summarizer returned (a message's text is accepted)."""
    if isinstance(value, BaseMessage):
        return value.text
    if not isinstance(value, str):
        raise TypeError(f"summarizer must return a str, not {type(value).__name__}")
    return value


def _clause(value: Any, what: str) -> tuple[str, float]:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or value[0] not in ("fraction", "tokens", "messages")
        or isinstance(value[1], bool)
        or not isinstance(value[1], int | float)
        or value[1] <= 0
    ):
        raise ValueError(
            f"{what} is a pair such as ('fraction', 0.85), ('tokens', 100000) or "
            f"('messages', 20), not {value!r}"
        )
    if value[0] == "fraction" and not 0 < value[1] <= 1:
        raise ValueError(f"a {what} fraction lies in (0, 1], not {value[1]!r}")
    return value[0], value[1]


def _all_of(clause: Any) -> list[tuple[str, float]]:
    """One trigger clause as the conditions that must all hold: a pair is one condition,
    a dict such as `{"tokens": 4000, "messages": 10}` one per key (LangChain's
    `TriggerClause`)."""
    if not isinstance(clause, Mapping):
        return [_clause(clause, "trigger")]
    if not clause:
        raise ValueError(
            "a dict trigger names at least one of 'tokens', 'messages' and 'fraction', "
            "e.g. {'tokens': 4000, 'messages': 10}"
        )
    return [_clause((kind, value), "trigger") for kind, value in clause.items()]


def _clauses(trigger: Any) -> list[list[tuple[str, float]]]:
    """`trigger=` as clauses, any of which triggers; each is conditions that must all hold.

    A pair or a dict is one clause; a list holds several (OR across the list, AND within a
    dict), as in LangChain's `SummarizationMiddleware`.
    """
    if trigger is None:
        return []
    if isinstance(trigger, tuple | Mapping):
        return [_all_of(trigger)]
    if isinstance(trigger, str) or not isinstance(trigger, Sequence):
        raise ValueError(
            "trigger is a pair such as ('fraction', 0.85), a dict such as "
            f"{{'tokens': 4000, 'messages': 10}}, or a list of them, not {trigger!r}"
        )
    return [_all_of(item) for item in trigger]


def _handled_here(handler: Callable[[ModelRequest], Any]) -> Callable[[ModelRequest], Any]:
    """`handler`, run with `_HANDLED` set (for sync and async handlers alike)."""

    def call(request: ModelRequest) -> Any:
        token = _HANDLED.set(True)
        try:
            result = handler(request)
        finally:
            _HANDLED.reset(token)
        if inspect.isawaitable(result):
            return _awaited_handled(result)
        return result

    return call


async def _awaited_handled(pending: Awaitable[Any]) -> Any:
    token = _HANDLED.set(True)
    try:
        return await pending
    finally:
        _HANDLED.reset(token)


@dataclass
class _Compaction:
    messages: list[AnyMessage]
    files: dict[str, Any]
    tokens: int | None = None
    """The size after compaction when known better than a fresh count (after a trim)."""


class CompactionState(AgentState):
    """The flag the `compact_conversation` tool raises."""

    compact_requested: NotRequired[Annotated[bool, PrivateStateAttr]]


class SummarizationMiddleware(AgentMiddleware):
    """Keeps the context under the model's window (see the module docstring).

    Args:
        model: The model that writes summaries; `None` uses the agent's own model.
        backend: Where offloaded results and archives go (a backend or factory);
            `None` is `StateBackend()`.
        max_input_tokens: The window; `None` reads the model's profile.
        trigger_fraction: Compress when the context reaches this share of the window.
        keep_fraction: Share of the window kept as recent messages when summarizing.
        fallback_trigger_tokens: The trigger when the window is unknown.
        fallback_keep_messages: Messages kept when the window is unknown.
        offload_tokens: Tool results (and old tool inputs) above this size are offloaded.
        trigger: The reference's form of the trigger: `("fraction", f)`, `("tokens", n)` or
            `("messages", n)`; a dict of several such conditions that must all hold, e.g.
            `{"tokens": 4000, "messages": 10}`; or a list of pairs and dicts (whichever is
            reached first), as in LangChain's `SummarizationMiddleware`. The window's
            `trigger_fraction` stays a ceiling. `None` keeps fathom's `trigger_fraction` /
            `fallback_trigger_tokens`.
        keep: What stays unsummarized: `("fraction", f)` of the window, `("tokens", n)`
            or `("messages", n)`. `None` keeps `keep_fraction` / `fallback_keep_messages`.
        token_counter: Counts a list of messages (the system message first) instead of
            the model's reported usage and the built-in estimate.
        summary_prompt: The prompt that asks for the summary; it must contain
            `{conversation}` (or the reference's `{messages}`), replaced by the transcript.
        trim_tokens_to_summarize: The most tokens of transcript the summary prompt carries
            (the middle is cut; the archive has all of it). `None`: half the window.
        truncate_args_settings: How big write/edit arguments of older messages are cut:
            `max_length` (characters; default `offload_tokens` worth) and `trigger: None`
            to turn this off. Its `keep` and `truncation_text` are accepted and not used
            (the kept region is `keep`'s; the cut text is a pointer to the file).
        summarizer: Writes the summaries instead of `model` (which still gives the window):
            a chat model or `"provider:model"` string, prompted with `summary_prompt`; or
            a runnable or function that receives the messages to summarize and returns
            the summary text (`summary_prompt` is then not used), as in LangChain's
            `SummarizationMiddleware`.
    """

    state_schema = CompactionState

    def __init__(
        self,
        model: BaseChatModel | None = None,
        backend: Any = None,
        *,
        max_input_tokens: int | None = None,
        trigger_fraction: float = TRIGGER_FRACTION,
        keep_fraction: float = KEEP_FRACTION,
        fallback_trigger_tokens: int = FALLBACK_TRIGGER_TOKENS,
        fallback_keep_messages: int = FALLBACK_KEEP_MESSAGES,
        offload_tokens: int = OFFLOAD_TOKENS,
        trigger: ContextSize | TriggerClause | Sequence[ContextSize | TriggerClause] | None = None,
        keep: ContextSize | None = None,
        token_counter: Callable[[Sequence[BaseMessage]], int] | None = None,
        summary_prompt: str = SUMMARY_PROMPT,
        trim_tokens_to_summarize: int | None = None,
        truncate_args_settings: Mapping[str, Any] | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        super().__init__()
        self.summary_model, self.summarizer = _summarizer(summarizer)
        self.trigger_tokens: int | None = None
        self.trigger_messages: int | None = None
        self.trigger_all: list[list[tuple[str, float]]] = []
        """Dict clauses of more than one condition: each triggers when all of them hold."""
        for conditions in _clauses(trigger):
            if len(conditions) > 1:
                self.trigger_all.append(conditions)
                continue
            [(kind, value)] = conditions
            if kind == "fraction":
                trigger_fraction = float(value)
            elif kind == "tokens":
                self.trigger_tokens = min(int(value), self.trigger_tokens or int(value))
            else:
                self.trigger_messages = min(int(value), self.trigger_messages or int(value))
        self.keep_tokens: int | None = None
        self.keep_messages: int | None = None
        if keep is not None:
            kind, value = _clause(keep, "keep")
            if kind == "fraction":
                keep_fraction = float(value)
            elif kind == "tokens":
                self.keep_tokens = int(value)
            else:
                self.keep_messages = int(value)
        if not 0 < keep_fraction < trigger_fraction <= 1:
            raise ValueError("Need 0 < keep_fraction < trigger_fraction <= 1.")
        if "{conversation}" not in summary_prompt and "{messages}" not in summary_prompt:
            raise ValueError(
                "summary_prompt must contain `{conversation}` (or `{messages}`), where the "
                "transcript to summarize goes."
            )
        settings = dict(truncate_args_settings or {})
        unknown = sorted(set(settings) - {"trigger", "keep", "max_length", "truncation_text"})
        if unknown:
            raise ValueError(
                f"truncate_args_settings has unknown keys {unknown}; the keys are trigger, "
                "keep, max_length and truncation_text."
            )
        self.token_counter = token_counter
        self.summary_prompt = summary_prompt
        self.trim_tokens_to_summarize = trim_tokens_to_summarize
        self.truncate_args = not ("trigger" in settings and settings["trigger"] is None)
        self.truncate_max_chars: int | None = settings.get("max_length")
        self.model = model
        self.backend = backend if backend is not None else StateBackend()
        self.max_input_tokens = max_input_tokens
        self.trigger_fraction = trigger_fraction
        self.keep_fraction = keep_fraction
        self.fallback_trigger_tokens = fallback_trigger_tokens
        self.fallback_keep_messages = fallback_keep_messages
        self.offload_tokens = offload_tokens

    # -- measuring -------------------------------------------------------------------------

    def _window(self, request: ModelRequest) -> int | None:
        return context_window(self.model or request.model, self.max_input_tokens)

    def _trigger(self, request: ModelRequest) -> int:
        window = self._window(request)
        tokens = int(window * self.trigger_fraction) if window else self.fallback_trigger_tokens
        if self.trigger_tokens is not None:
            tokens = min(tokens, self.trigger_tokens) if window else self.trigger_tokens
        return tokens

    def _reached(self, request: ModelRequest, messages: Sequence[Any], tokens: int) -> bool:
        """Whether the context is at the trigger (in tokens, or in messages if one is set),
        or meets every condition of one of the dict clauses."""
        if self.trigger_messages is not None and len(messages) >= self.trigger_messages:
            return True
        if any(
            all(self._holds(request, messages, tokens, kind, value) for kind, value in clause)
            for clause in self.trigger_all
        ):
            return True
        return tokens >= self._trigger(request)

    def _holds(
        self, request: ModelRequest, messages: Sequence[Any], tokens: int, kind: str, value: float
    ) -> bool:
        """Whether one condition of a dict clause holds (a fraction of an unknown window
        is read as `fallback_trigger_tokens`)."""
        if kind == "messages":
            return len(messages) >= value
        if kind == "tokens":
            return tokens >= value
        window = self._window(request)
        return tokens >= (int(window * value) if window else self.fallback_trigger_tokens)

    def count_tokens(self, request: ModelRequest, messages: Sequence[AnyMessage]) -> int:
        """The request's size: the model's own count for the prefix it last reported on
        (its `usage_metadata`), plus an estimate for what came after; all estimated when
        no usage is reported. A `token_counter` given to the middleware counts instead."""
        if self.token_counter is not None:
            system = [request.system_message] if request.system_message else []
            return int(self.token_counter([*system, *messages]))
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AIMessage) and message.usage_metadata:
                usage = message.usage_metadata
                reported = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
                return reported + _approx(messages[index + 1 :])
        system = [request.system_message] if request.system_message else []
        return _approx([*system, *messages], request.tools)

    # -- the model step --------------------------------------------------------------------

    def _plan(self, request: ModelRequest) -> tuple[ModelRequest, _Compaction | None]:
        messages = list(request.messages)
        tokens = self.count_tokens(request, messages)
        if not self._reached(request, messages, tokens):
            return request, None
        trimmed = self._trim_old_inputs(request, messages)
        if trimmed is None:
            return request, None  # summarization needs the model: done by the caller
        # the model's reported usage predates the trim, so subtract what the trim saved
        saved = _approx(messages) - _approx(trimmed)
        compaction = _Compaction(trimmed, {}, tokens - saved)
        return request.override(messages=trimmed), compaction

    def _cutoff(self, request: ModelRequest, messages: list[AnyMessage]) -> int:
        """Index of the first kept message; tool results stay with their call."""
        window = self._window(request)
        if self.keep_messages is not None:
            index = max(len(messages) - self.keep_messages, 0)
        elif window or self.keep_tokens is not None:
            budget = self.keep_tokens or int((window or 0) * self.keep_fraction)
            kept, index = 0, len(messages)
            while index > 0:
                size = _approx([messages[index - 1]])
                if kept + size > budget:
                    break
                kept += size
                index -= 1
        else:
            index = max(len(messages) - self.fallback_keep_messages, 0)
        index = min(index, len(messages) - 1)  # always keep the newest message
        while index > 0 and isinstance(messages[index], ToolMessage):
            index -= 1  # keep the call together with its results
        return index

    def _trim_old_inputs(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> list[AnyMessage] | None:
        """Messages with big write/edit arguments before the kept region replaced by a pointer."""
        if not self.truncate_args:
            return None
        cutoff = self._cutoff(request, messages)
        limit = self.truncate_max_chars or self.offload_tokens * CHARS_PER_TOKEN
        changed = False
        result = list(messages)
        for i, message in enumerate(messages[:cutoff]):
            if not isinstance(message, AIMessage) or not message.tool_calls:
                continue
            calls = []
            for call in message.tool_calls:
                key = _TRIMMED_ARGS.get(call["name"])
                value = call["args"].get(key) if key else None
                if isinstance(value, str) and len(value) > limit:
                    path = call["args"].get("file_path", "the file")
                    stored = f"{len(value):,} characters, stored in `{path}`"
                    note = f"[{stored}: read it with read_file]"
                    call = {**call, "args": {**call["args"], key: note}}
                    changed = True
                calls.append(call)
            result[i] = message.model_copy(update={"tool_calls": calls})
        return result if changed else None

    def _archive_target(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> tuple[BackendProtocol, str, str]:
        """Where the transcript of `messages` goes: (backend, path, transcript)."""
        first_id = next((m.id for m in messages if m.id), None) or "session"
        backend = resolve_backend(self.backend, _tool_like_runtime(request))
        path = f"{artifacts_dir(backend, ARCHIVE_DIR.strip('/'))}/{first_id}.md"
        return backend, path, _transcript(messages)

    @staticmethod
    def _archived(path: str, result: Any) -> tuple[str, dict]:
        if result.error:
            return f"(not archived: {result.error})", {}
        return path, dict(result.files_update or {})

    def _archive(self, request: ModelRequest, messages: list[AnyMessage]) -> tuple[str, dict]:
        """Write the transcript of `messages` to the backend: (path, files update)."""
        backend, path, text = self._archive_target(request, messages)
        return self._archived(path, backend.write(path, text))

    async def _aarchive(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> tuple[str, dict]:
        """Async `_archive`, on the backend's `awrite` (async runs never block on a write,
        and stores with only an async API work)."""
        backend, path, text = self._archive_target(request, messages)
        return self._archived(path, await backend.awrite(path, text))

    def _summary_prompt(self, request: ModelRequest, messages: list[AnyMessage]) -> list:
        window = self._window(request) or self.fallback_trigger_tokens
        budget = int(window * 0.5) * CHARS_PER_TOKEN
        if self.trim_tokens_to_summarize is not None:
            budget = self.trim_tokens_to_summarize * CHARS_PER_TOKEN
        earlier = [m for m in messages if _is_summary(m)]
        text = _transcript([m for m in messages if not _is_summary(m)])
        if len(text) > budget:
            # Keep the start (the user's request and the first findings) and the most recent
            # work; the middle is what the archive is for.
            head = budget // 4
            text = (
                text[:head]
                + "\n[...middle part cut; the full transcript is in the archive...]\n"
                + text[-(budget - head) :]
            )
        previous = "\n\n".join(str(m.content) for m in earlier)
        if previous:
            text = f"(Summary of an even earlier part)\n{previous}\n\n{text}"
        prompt = self.summary_prompt
        if prompt is SUMMARY_PROMPT:
            return [HumanMessage(content=prompt.format(conversation=text))]
        prompt = prompt.replace("{conversation}", text).replace("{messages}", text)
        return [HumanMessage(content=prompt)]

    def _summary_message(self, summary: str, archive: str) -> HumanMessage:
        return HumanMessage(
            content=(
                "[The conversation so far was summarized to save space.]\n\n"
                f"{summary.strip()}\n\nThe full transcript of the summarized part is in "
                f"`{archive}`: use read_file or grep on it if you need an exact detail."
            ),
            additional_kwargs={"lc_source": SUMMARY_SOURCE},
        )

    def _split(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> tuple[list[AnyMessage], list[AnyMessage]] | None:
        cutoff = self._cutoff(request, messages)
        if cutoff <= 0:
            return None
        kept = [
            m.model_copy(update={"usage_metadata": None}) if isinstance(m, AIMessage) else m
            for m in messages[cutoff:]
        ]
        return messages[:cutoff], kept

    def _summarized(
        self, request: ModelRequest, old: list[AnyMessage], kept: list, summary: str, archive: tuple
    ) -> _Compaction:
        path, files = archive
        return _Compaction([self._summary_message(summary, path), *kept], files)

    def _config(self) -> RunnableConfig:
        return {"metadata": {"lc_source": SUMMARY_SOURCE}, "tags": ["fathom:summarization"]}

    def _compact(self, request: ModelRequest, messages: list[AnyMessage]) -> _Compaction | None:
        split = self._split(request, messages)
        if split is None:
            return None
        old, kept = split
        if self.summarizer is not None:
            summary = _summary_text(self.summarizer.invoke(old, config=self._config()))
        else:
            model = self.summary_model or self.model or request.model
            prompt = self._summary_prompt(request, old)
            summary = model.invoke(prompt, config=self._config()).text
        return self._summarized(request, old, kept, summary, self._archive(request, old))

    async def _acompact(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> _Compaction | None:
        split = self._split(request, messages)
        if split is None:
            return None
        old, kept = split
        if self.summarizer is not None:
            summary = _summary_text(await self.summarizer.ainvoke(old, config=self._config()))
        else:
            model = self.summary_model or self.model or request.model
            prompt = self._summary_prompt(request, old)
            summary = (await model.ainvoke(prompt, config=self._config())).text
        archive = await self._aarchive(request, old)
        return self._summarized(request, old, kept, summary, archive)

    def _needs_summary(self, request: ModelRequest, compaction: _Compaction | None) -> bool:
        messages = compaction.messages if compaction else list(request.messages)
        if compaction is not None and compaction.tokens is not None:
            return self._reached(request, messages, compaction.tokens)
        return self._reached(request, messages, self.count_tokens(request, messages))

    @overload
    @staticmethod
    def _merge(first: _Compaction | None, second: _Compaction) -> _Compaction: ...

    @overload
    @staticmethod
    def _merge(first: _Compaction | None, second: _Compaction | None) -> _Compaction | None: ...

    @staticmethod
    def _merge(first: _Compaction | None, second: _Compaction | None) -> _Compaction | None:
        if second is None:
            return first
        if first is None:
            return second
        return _Compaction(second.messages, {**first.files, **second.files})

    def _respond(self, response: Any, compaction: _Compaction | None, requested: bool) -> Any:
        if compaction is None:
            if requested:  # nothing to compact: lower the flag anyway
                return ExtendedModelResponse(
                    model_response=_as_response(response),
                    command=Command(update={COMPACT_FLAG: False}),
                )
            return response
        response = _as_response(response)
        result = ModelResponse(
            result=[
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                *compaction.messages,
                *response.result,
            ],
            structured_response=response.structured_response,
        )
        update: dict[str, Any] = {COMPACT_FLAG: False}
        if compaction.files:
            update["files"] = compaction.files
        return ExtendedModelResponse(model_response=result, command=Command(update=update))

    @staticmethod
    def _requested(request: ModelRequest) -> bool:
        state = request.state if isinstance(request.state, dict) else {}
        return bool(state.get(COMPACT_FLAG))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> Any:
        handler = _handled_here(handler)
        requested = self._requested(request)
        request, compaction = self._plan(request)
        if requested or self._needs_summary(request, compaction):
            base = compaction.messages if compaction else list(request.messages)
            compaction = self._merge(compaction, self._compact(request, base))
            if compaction is not None:
                request = request.override(messages=compaction.messages)
        try:
            return self._respond(handler(request), compaction, requested)
        except Exception as error:
            if not is_context_overflow(error):
                raise
            overflow = error
        batch = self._offload_batch(request, list(request.messages))
        if batch is not None:
            # the newest batch of results is kept whole by summarization, so a batch
            # too big for the window goes to files first
            compaction = self._merge(compaction, batch)
            request = request.override(messages=compaction.messages)
            try:
                return self._respond(handler(request), compaction, requested)
            except Exception as error:
                if not is_context_overflow(error):
                    raise
                overflow = error
        forced = self._compact(request, list(request.messages))
        if forced is None:
            raise overflow
        compaction = self._merge(compaction, forced)
        retry = request.override(messages=compaction.messages)
        return self._respond(handler(retry), compaction, requested)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        handler = _handled_here(handler)
        requested = self._requested(request)
        request, compaction = self._plan(request)
        if requested or self._needs_summary(request, compaction):
            base = compaction.messages if compaction else list(request.messages)
            compaction = self._merge(compaction, await self._acompact(request, base))
            if compaction is not None:
                request = request.override(messages=compaction.messages)
        try:
            return self._respond(await handler(request), compaction, requested)
        except Exception as error:
            if not is_context_overflow(error):
                raise
            overflow = error
        batch = await self._aoffload_batch(request, list(request.messages))
        if batch is not None:
            compaction = self._merge(compaction, batch)
            request = request.override(messages=compaction.messages)
            try:
                return self._respond(await handler(request), compaction, requested)
            except Exception as error:
                if not is_context_overflow(error):
                    raise
                overflow = error
        forced = await self._acompact(request, list(request.messages))
        if forced is None:
            raise overflow
        compaction = self._merge(compaction, forced)
        retry = request.override(messages=compaction.messages)
        return self._respond(await handler(retry), compaction, requested)

    # -- offloading the newest batch after an overflow ----------------------------------------

    @staticmethod
    def _batch(messages: list[AnyMessage]) -> list[int]:
        """Indexes of the results of the newest AI message's tool calls that are big enough
        to be worth moving out (their text is longer than the notice that replaces them)."""
        start = len(messages)
        while start > 0 and isinstance(messages[start - 1], ToolMessage):
            start -= 1
        return [
            i
            for i in range(start, len(messages))
            if isinstance(messages[i].content, str)
            and len(messages[i].content) > BATCH_OFFLOAD_CHARS
        ]

    @staticmethod
    def _clipped(message: ToolMessage) -> ToolMessage:
        """A file tool's result cut to its start: what it showed is on the backend already,
        so it is asked for again in smaller pieces rather than written a second time."""
        content = str(message.content)
        how = (
            "read it again in smaller pages (offset and limit)"
            if message.name == "read_file"
            else f"call {message.name} again with a narrower path or pattern"
        )
        text = (
            f"{content[:BATCH_OFFLOAD_CHARS]}\n[Cut at {BATCH_OFFLOAD_CHARS:,} of "
            f"{len(content):,} characters: the results of this turn did not fit the "
            f"context together. To see the rest, {how}.]"
        )
        return message.model_copy(update={"content": text})

    def _batch_writes(self, messages: list[AnyMessage]) -> tuple[list[int], list[int]]:
        """The batch split into results to clip (file tools) and results to write."""
        indexes = self._batch(messages)
        clip = [i for i in indexes if getattr(messages[i], "name", None) in _NOT_OFFLOADED]
        return clip, [i for i in indexes if i not in clip]

    @staticmethod
    def _batch_path(backend: BackendProtocol, message: AnyMessage, index: int) -> str:
        call_id = getattr(message, "tool_call_id", None) or f"result_{index}"
        return f"{artifacts_dir(backend, OFFLOAD_DIR.strip('/'))}/{call_id}"

    def _batch_result(
        self, messages: list[AnyMessage], clip: list[int], written: dict[int, tuple[str, Any]]
    ) -> _Compaction | None:
        """The conversation with the batch's big results replaced (clipped, or a notice of
        the file each went to); `None` when nothing could be replaced."""
        result, files = list(messages), {}
        for index in clip:
            message = messages[index]
            if isinstance(message, ToolMessage):
                result[index] = self._clipped(message)
        for index, (path, outcome) in written.items():
            message = messages[index]
            if outcome.error or not isinstance(message, ToolMessage):
                continue  # kept as it is: summarization may still make room
            result[index] = self._notice(message, path, str(message.content), outcome)
            files.update(outcome.files_update or {})
        if all(new is old for new, old in zip(result, messages, strict=True)):
            return None
        return _Compaction(result, files)

    def _offload_batch(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> _Compaction | None:
        """After an overflow: the newest batch's big results moved out of the conversation."""
        clip, write = self._batch_writes(messages)
        if not clip and not write:
            return None
        backend = resolve_backend(self.backend, _tool_like_runtime(request))
        written = {}
        for index in write:
            path = self._batch_path(backend, messages[index], index)
            written[index] = (path, backend.write(path, str(messages[index].content)))
        return self._batch_result(messages, clip, written)

    async def _aoffload_batch(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> _Compaction | None:
        """Async `_offload_batch`, on the backend's `awrite`."""
        clip, write = self._batch_writes(messages)
        if not clip and not write:
            return None
        backend = resolve_backend(self.backend, _tool_like_runtime(request))
        written = {}
        for index in write:
            path = self._batch_path(backend, messages[index], index)
            written[index] = (path, await backend.awrite(path, str(messages[index].content)))
        return self._batch_result(messages, clip, written)

    # -- offloading big tool results ---------------------------------------------------------

    def _offload_target(
        self, request: ToolCallRequest, result: Any
    ) -> tuple[BackendProtocol, str, str] | None:
        """Where a too-large tool result goes: (backend, path, content); `None` keeps it."""
        if not isinstance(result, ToolMessage) or request.tool_call["name"] in _NOT_OFFLOADED:
            return None
        content = result.content
        if not isinstance(content, str) or len(content) <= self.offload_tokens * CHARS_PER_TOKEN:
            return None
        call_id = request.tool_call.get("id") or "result"
        backend: BackendProtocol = resolve_backend(self.backend, request.runtime)
        return backend, f"{artifacts_dir(backend, OFFLOAD_DIR.strip('/'))}/{call_id}", content

    def _offloaded(self, result: ToolMessage, path: str, content: str, written: Any) -> Any:
        """The tool result that replaces one whose content was written to `path`, with the
        `files` update of an in-state backend."""
        message = self._notice(result, path, content, written)
        if written.files_update:
            return Command(update={"files": written.files_update, "messages": [message]})
        return message

    def _notice(self, result: ToolMessage, path: str, content: str, written: Any) -> ToolMessage:
        """The message that replaces `result`, whose content was written to `path`."""
        lines = content.splitlines()
        preview = "\n".join(line[:200] for line in lines[:PREVIEW_LINES])
        if written.error:
            cut = self.offload_tokens * CHARS_PER_TOKEN
            text = (
                f"{content[:cut]}\n[Output cut at {cut:,} of {len(content):,} characters; it "
                f"could not be saved in full: {written.error}]"
            )
        else:
            text = (
                f"This result was too large to show ({len(content):,} characters, "
                f"{len(lines):,} lines), so it was saved to `{path}`. Its first lines:\n\n"
                f"{preview}\n\nRead the rest with read_file (offset and limit) or search it "
                "with grep."
            )
        return result.model_copy(update={"content": text})

    def _offload(self, request: ToolCallRequest, result: Any) -> Any:
        target = self._offload_target(request, result)
        if target is None:
            return result
        backend, path, content = target
        return self._offloaded(result, path, content, backend.write(path, content))

    async def _aoffload(self, request: ToolCallRequest, result: Any) -> Any:
        """Async `_offload`, on the backend's `awrite`."""
        target = self._offload_target(request, result)
        if target is None:
            return result
        backend, path, content = target
        return self._offloaded(result, path, content, await backend.awrite(path, content))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        return self._offload(request, handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        return await self._aoffload(request, await handler(request))


def _as_response(response: Any) -> ModelResponse:
    return ModelResponse(result=[response]) if isinstance(response, AIMessage) else response


def _tool_like_runtime(request: ModelRequest) -> Any:
    """The model request's state and runtime, shaped for `resolve_backend`."""
    from fathom.backends.protocol import HookRuntime

    return HookRuntime(request.state, request.runtime)


COMPACT_TOOL_DESCRIPTION = """Compact the conversation: older messages are replaced by a summary before your next step (the full transcript is kept in a file you can read). Use it between tasks, when what came before is no longer needed in detail. Call it alone, not next to other tools."""  # noqa: E501


def _compact_conversation(runtime: ToolRuntime) -> Command | ToolMessage:
    state = runtime.state if isinstance(runtime.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage):
            if len(message.tool_calls) > 1:
                return tool_error(
                    content=(
                        "Error: compact_conversation must be the only tool call of its turn. "
                        "Finish the other calls, then call it alone."
                    ),
                    tool_call_id=runtime.tool_call_id,
                    name=COMPACT_TOOL,
                )
            break
    message = ToolMessage(
        content="The conversation will be compacted before your next step.",
        tool_call_id=runtime.tool_call_id,
        name=COMPACT_TOOL,
    )
    return Command(update={COMPACT_FLAG: True, "messages": [message]})


async def _acompact_conversation(runtime: ToolRuntime) -> Command | ToolMessage:
    return _compact_conversation(runtime)


COMPACT_PROMPT = """## Compacting

When the conversation has grown long and what came before is no longer needed in detail (between tasks), call `compact_conversation` alone to replace older messages with a summary."""  # noqa: E501
"""The prompt section `create_summarization_tool_middleware(system_prompt=)` replaces."""


class SummarizationToolMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `compact_conversation` tool, with which the agent compacts on purpose.

    The tool asks the next model step to summarize now. That is done by the agent's
    `SummarizationMiddleware` (every fathom deep agent has one), or, when the agent has
    none, by `summarization` given here.

    Args:
        summarization: The summarizer to use when no `SummarizationMiddleware` of the
            agent handles the request (e.g. under plain `create_agent`).
        system_prompt: A prompt section about the tool; `None` adds none.
    """

    state_schema = CompactionState

    def __init__(
        self,
        summarization: SummarizationMiddleware | None = None,
        *,
        system_prompt: str | None = None,
    ) -> None:
        super().__init__()
        self.summarization = summarization
        self.section = PromptSection("compacting", system_prompt or "")
        self.tools = [
            StructuredTool.from_function(
                name=COMPACT_TOOL,
                description=COMPACT_TOOL_DESCRIPTION,
                func=_compact_conversation,
                coroutine=_acompact_conversation,
            )
        ]


    def _own(self, request: ModelRequest) -> SummarizationMiddleware | None:
        """The summarizer to run here: only for a requested compaction no agent-level
        `SummarizationMiddleware` is already handling."""
        if self.summarization is None or _HANDLED.get():
            return None
        return self.summarization if SummarizationMiddleware._requested(request) else None

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> Any:
        """Add the section; compact here when asked and nothing else does."""
        request = self._with_section(request)
        own = self._own(request)
        return handler(request) if own is None else own.wrap_model_call(request, handler)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Async `wrap_model_call`."""
        request = self._with_section(request)
        own = self._own(request)
        if own is None:
            return await handler(request)
        return await own.awrap_model_call(request, handler)


def create_summarization_tool_middleware(
    model: str | BaseChatModel | None = None,
    backend: Any = None,
    *,
    system_prompt: str | None = COMPACT_PROMPT,
) -> SummarizationToolMiddleware:
    """The `compact_conversation` tool, summarizing with `model` into `backend` when the
    agent has no `SummarizationMiddleware` of its own (which then does it instead).

    `model=None` summarizes with the agent's own model; `system_prompt=None` adds no
    prompt section about the tool.
    """
    chat = resolve_model(model) if isinstance(model, str) else model
    return SummarizationToolMiddleware(
        SummarizationMiddleware(chat, backend), system_prompt=system_prompt
    )


def create_summarization_middleware(
    model: BaseChatModel,
    backend: Any,
    *,
    summary_prompt: str = SUMMARY_PROMPT,
    trim_tokens_to_summarize: int | None = None,
    token_counter: Callable[[Sequence[BaseMessage]], int] | None = None,
    summarizer: Summarizer | None = None,
) -> SummarizationMiddleware:
    """A `SummarizationMiddleware` with defaults from the model's profile: a share of its
    context window when the profile gives one, fixed token and message counts otherwise
    (which is what `SummarizationMiddleware` does by default)."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            "create_summarization_middleware takes a chat model instance; resolve a "
            "'provider:model' string with fathom.models.resolve_model first."
        )
    return SummarizationMiddleware(
        model,
        backend,
        summary_prompt=summary_prompt,
        trim_tokens_to_summarize=trim_tokens_to_summarize,
        token_counter=token_counter,
        summarizer=summarizer,
    )
