"""Summarizing the history near the model's window, and what comes with it.

Three mechanisms keep a long run inside the model's window, cheapest first:

1. **Offloading.** A tool result over `offload_tokens` is written to the backend (under
   `/large_tool_results/`) and the conversation keeps a preview and the path
   (`offload.ToolResultOffload`). A `CompositeBackend`'s `artifacts_root` moves this
   folder and the archive's under it.
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
no graph node and no checkpoint of its own. The model step is written once, as a plan
(`fathom.backends.protocol.Plan`) that the sync and the async hook drive.

Owns `SummarizationMiddleware`, the transcript archive and the factories. Measuring lives in
`budget`, offloading in `offload`, the `compact_conversation` tool in `compact_tool`; this
module re-exports their public names (the reference's `deepagents.middleware.summarization`
path, through `fathom.middleware.summarization`). Nothing in `middleware.context` imports it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import coerce_to_runnable
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from fathom.backends.protocol import (
    HookRuntime,
    Plan,
    adrive,
    arun_call,
    drive,
    resolve_backend,
    run_call,
)
from fathom.backends.protocol import (
    call as step,
)
from fathom.backends.state import StateBackend
from fathom.middleware.context.budget import (
    CHARS_PER_TOKEN,
    FALLBACK_KEEP_MESSAGES,
    FALLBACK_TRIGGER_TOKENS,
    KEEP_FRACTION,
    OFFLOAD_TOKENS,
    TRIGGER_FRACTION,
    ContextSize,
    TriggerClause,
    approx_tokens,
    context_window,
    is_context_overflow,
    parse_size,
    parse_trigger,
)
from fathom.middleware.context.compact_tool import (
    COMPACT_FLAG,
    COMPACT_PROMPT,
    COMPACT_TOOL,
    COMPACT_TOOL_DESCRIPTION,
    SUMMARIZING,
    CompactionState,
    SummarizationToolMiddleware,
    compaction_requested,
)
from fathom.middleware.context.eviction import with_command
from fathom.middleware.context.offload import (
    ARCHIVE_DIR,
    OFFLOAD_DIR,
    ToolResultOffload,
    artifacts_dir,
)
from fathom.middleware.context.offload import BATCH_OFFLOAD_CHARS as BATCH_OFFLOAD_CHARS
from fathom.middleware.context.offload import PREVIEW_LINES as PREVIEW_LINES
from fathom.models import resolve_model

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

SUMMARY_SOURCE = "summarization"
"""`lc_source` metadata of summary calls (filter their streamed tokens) and summary messages."""

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


class _RestOfCall:
    """The rest of a model call (`handler`) as a plan step, `call(rest, "run", request)`:
    run with `SUMMARIZING` set, and a context overflow handed back as the error itself."""

    def __init__(self, handler: Callable[[ModelRequest], Any]) -> None:
        self.handler = handler

    @contextmanager
    def _overflow_caught(self) -> Iterator[list[BaseException]]:
        """Runs the block with `SUMMARIZING` set; an overflow it raises is put in the list."""
        caught: list[BaseException] = []
        token = SUMMARIZING.set(True)
        try:
            yield caught
        except Exception as error:  # a provider's error: the plan answers an overflow
            if not is_context_overflow(error):
                raise
            caught.append(error)
        finally:
            SUMMARIZING.reset(token)

    def run(self, request: ModelRequest) -> Any:
        with self._overflow_caught() as caught:
            return self.handler(request)
        return caught[0]

    async def arun(self, request: ModelRequest) -> Any:
        with self._overflow_caught() as caught:
            return await self.handler(request)
        return caught[0]


@dataclass
class _Compaction:
    messages: list[AnyMessage]
    files: dict[str, Any]
    tokens: int | None = None
    """The size after compaction when known better than a fresh count (after a trim)."""


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
        for conditions in parse_trigger(trigger):
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
            kind, value = parse_size(keep, "keep")
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
        self.results_offload = ToolResultOffload(self.backend, offload_tokens)

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
        system = [request.system_message] if request.system_message else []
        if self.token_counter is not None:
            return int(self.token_counter([*system, *messages]))
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AIMessage) and message.usage_metadata:
                usage = message.usage_metadata
                reported = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
                return reported + approx_tokens(messages[index + 1 :])
        return approx_tokens([*system, *messages], request.tools)

    # -- the model step --------------------------------------------------------------------

    def _plan(self, request: ModelRequest) -> tuple[ModelRequest, _Compaction | None, int]:
        """The request with old tool inputs trimmed when the trigger is reached, the trim
        (None: nothing trimmed), and the request's size as counted before any trim."""
        messages = list(request.messages)
        tokens = self.count_tokens(request, messages)
        if not self._reached(request, messages, tokens):
            return request, None, tokens
        trimmed = self._trim_old_inputs(request, messages)
        if trimmed is None:
            return request, None, tokens  # summarization needs the model: done by the caller
        # the model's reported usage predates the trim, so subtract what the trim saved
        saved = approx_tokens(messages) - approx_tokens(trimmed)
        compaction = _Compaction(trimmed, {}, tokens - saved)
        return request.override(messages=trimmed), compaction, tokens

    def _cutoff(self, request: ModelRequest, messages: list[AnyMessage]) -> int:
        """Index of the first kept message; tool results stay with their call."""
        window = self._window(request)
        if self.keep_messages is not None:
            index = max(len(messages) - self.keep_messages, 0)
        elif window or self.keep_tokens is not None:
            budget = self.keep_tokens or int((window or 0) * self.keep_fraction)
            kept, index = 0, len(messages)
            while index > 0:
                size = approx_tokens([messages[index - 1]])
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

    def _archive(self, request: ModelRequest, messages: list[AnyMessage]) -> Plan[tuple[str, dict]]:
        """Write the transcript of `messages` to the backend: (path, files update)."""
        first_id = next((m.id for m in messages if m.id), None) or "session"
        backend = resolve_backend(self.backend, HookRuntime(request.state, request.runtime))
        path = f"{artifacts_dir(backend, ARCHIVE_DIR.strip('/'))}/{first_id}.md"
        written = yield step(backend, "write", path, _transcript(messages))
        if written.error:
            return f"(not archived: {written.error})", {}
        return path, dict(written.files_update or {})

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

    def _config(self) -> RunnableConfig:
        return {"metadata": {"lc_source": SUMMARY_SOURCE}, "tags": ["fathom:summarization"]}

    def _compact(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> Plan[_Compaction | None]:
        """The older messages replaced by a summary, their transcript archived."""
        split = self._split(request, messages)
        if split is None:
            return None
        old, kept = split
        if self.summarizer is not None:
            answer = yield step(self.summarizer, "invoke", old, config=self._config())
            summary = _summary_text(answer)
        else:
            model = self.summary_model or self.model or request.model
            prompt = self._summary_prompt(request, old)
            summary = (yield step(model, "invoke", prompt, config=self._config())).text
        path, files = yield from self._archive(request, old)
        return _Compaction([self._summary_message(summary, path), *kept], files)

    def _needs_summary(
        self, request: ModelRequest, compaction: _Compaction | None, tokens: int
    ) -> bool:
        """Whether the trigger still holds after the trim; ``tokens``: the untrimmed size
        `_plan` counted, so an untrimmed request is not counted twice."""
        messages = compaction.messages if compaction else list(request.messages)
        if compaction is not None and compaction.tokens is not None:
            return self._reached(request, messages, compaction.tokens)
        if compaction is not None:
            tokens = self.count_tokens(request, messages)
        return self._reached(request, messages, tokens)

    @staticmethod
    def _merge(first: _Compaction | None, second: _Compaction) -> _Compaction:
        if first is None:
            return second
        return _Compaction(second.messages, {**first.files, **second.files})

    def _respond(self, response: Any, compaction: _Compaction | None, requested: bool) -> Any:
        if compaction is None:  # nothing to compact: lower the flag anyway when raised
            lowered = Command(update={COMPACT_FLAG: False}) if requested else None
            return with_command(response, lowered)
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
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
        return with_command(result, Command(update=update))

    def _model_step(self, request: ModelRequest, rest: _RestOfCall) -> Plan[Any]:
        """The model step: compact when due or asked, call the model, and after an
        overflow offload the newest batch, then summarize, retrying each time."""
        requested = compaction_requested(request)
        request, compaction, tokens = self._plan(request)
        if requested or self._needs_summary(request, compaction, tokens):
            base = compaction.messages if compaction else list(request.messages)
            if (summary := (yield from self._compact(request, base))) is not None:
                compaction = self._merge(compaction, summary)
            if compaction is not None:
                request = request.override(messages=compaction.messages)
        response = yield step(rest, "run", request)
        # the newest batch of results is kept whole by summarization, so a batch too big
        # for the window goes to files first; then the summary is forced
        reliefs = [self._offload_batch, self._compact]
        while isinstance(response, BaseException):  # an overflow
            if not reliefs:
                raise response
            relief = yield from reliefs.pop(0)(request, list(request.messages))
            if relief is not None:
                compaction = self._merge(compaction, relief)
                request = request.override(messages=compaction.messages)
                response = yield step(rest, "run", request)
        return self._respond(response, compaction, requested)

    def _offload_batch(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> Plan[_Compaction | None]:
        batch = yield from self.results_offload.batch(request, messages)
        return None if batch is None else _Compaction(*batch)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> Any:
        return drive(self._model_step(request, _RestOfCall(handler)), run_call)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        return await adrive(self._model_step(request, _RestOfCall(handler)), arun_call)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        return self.results_offload.tool_result(request, handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        return await self.results_offload.atool_result(request, await handler(request))



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
