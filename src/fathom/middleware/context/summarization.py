"""Summarizing the history near the model's window, and what comes with it.

Three mechanisms keep a long run inside the model's window, cheapest first:

1. **Offloading.** A tool result over `offload_tokens` is written to the backend (under
   `/large_tool_results/`) and the conversation keeps a preview and the path
   (`offload.ToolResultOffload`). A `CompositeBackend`'s `artifacts_root` moves this
   folder and the archive's under it.
2. **Truncating old tool inputs.** Once the context reaches the truncation trigger, every
   long string argument of earlier `write_file` / `edit_file` calls (the file is on the
   backend already) is cut to its first 20 characters followed by
   `...(argument truncated)`, in what the model is shown.
3. **Summarization.** If that is not enough, the older messages are replaced, in what the
   model is shown, by a structured summary written by the model. The state keeps every
   message: the summary is recorded as the `_summarization_event` (`history`), and the
   replaced messages are appended as a section to the conversation's archive,
   `/conversation_history/<session id>.md` (inline media saved next to it, `media`),
   readable with `read_file` and `grep`. Tool calls and their results are never
   separated. A `ContextOverflowError` from the provider first sends the newest batch of
   tool results to files (summarization keeps that batch whole, so it alone can be what
   does not fit) and retries; if that is not enough, it forces a summarization and one
   more retry.

Everything happens inside the model step (`wrap_model_call` / `wrap_tool_call`), so it adds
no graph node and no checkpoint of its own. The model step is written once, as a plan
(`fathom.backends.protocol.Plan`) that the sync and the async hook drive; its parts (the
cutoff, the summary, the archive, the media) are methods of their own, which the
`compact_conversation` tool calls too.

Owns `SummarizationMiddleware`, the archive and the factories. Measuring lives in
`budget`, offloading in `offload`, the event in `history`, the tool in `compact_tool`;
this module re-exports their public names (the reference's
`deepagents.middleware.summarization` path, through `fathom.middleware.summarization`).
Nothing in `middleware.context` imports it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ToolCallRequest,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import get_buffer_string
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import coerce_to_runnable
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

from fathom.backends.protocol import (
    HookRuntime,
    Plan,
    adopt,
    adrive,
    arun_call,
    drive,
    is_factory,
    resolve_backend,
    run_call,
)
from fathom.backends.protocol import (
    call as step,
)
from fathom.backends.state import StateBackend
from fathom.middleware.context import media
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
    COMPACT_PROMPT,
    COMPACT_TOOL,
    COMPACT_TOOL_DESCRIPTION,
    SummarizationToolMiddleware,
)
from fathom.middleware.context.eviction import with_command
from fathom.middleware.context.history import (
    COMPACT_FLAG,
    SUMMARIZATION_EVENT_KEY,
    SUMMARIZATION_SESSION_ID_KEY,
    SUMMARIZING,
    SUMMARY_SOURCE,
    CompactionState,
    SummarizationEvent,
    SummarizationState,
    apply_event,
    compaction_requested,
    is_summary_message,
    messages_of,
    settled,
    state_cutoff,
)
from fathom.middleware.context.offload import (
    ARCHIVE_DIR,
    OFFLOAD_DIR,
    ToolResultOffload,
    artifacts_dir,
)
from fathom.middleware.context.offload import BATCH_OFFLOAD_CHARS as BATCH_OFFLOAD_CHARS
from fathom.middleware.context.offload import PREVIEW_LINES as PREVIEW_LINES
from fathom.models import resolve_model
from fathom.tool_answers import Failure

__all__ = [
    "ARCHIVE_DIR",
    "COMPACT_FLAG",
    "COMPACT_PROMPT",
    "COMPACT_TOOL",
    "COMPACT_TOOL_DESCRIPTION",
    "DEEPAGENTS_DEFAULT_SUMMARY_PROMPT",
    "FALLBACK_KEEP_MESSAGES",
    "FALLBACK_TRIGGER_TOKENS",
    "OFFLOAD_DIR",
    "SUMMARIZATION_EVENT_KEY",
    "SUMMARIZATION_SESSION_ID_KEY",
    "SUMMARY_PROMPT",
    "SUMMARY_SOURCE",
    "CompactConversationSchema",
    "CompactionState",
    "SummarizationDefaults",
    "SummarizationEvent",
    "SummarizationMiddleware",
    "SummarizationState",
    "SummarizationToolMiddleware",
    "TriggerClause",
    "TruncateArgsSettings",
    "artifacts_dir",
    "compaction_requested",
    "compute_summarization_defaults",
    "context_window",
    "create_summarization_middleware",
    "create_summarization_tool_middleware",
    "is_context_overflow",
]

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = """You are compressing the history of an agent's working session so the agent can continue without it. Write a summary with exactly these sections:

## Intent
What the user asked for and any constraints or preferences they stated.

## Facts and decisions
Every concrete fact, number, name, identifier and decision the work depends on. Keep exact values.

## Artifacts
Files created or changed (full paths) and what each holds.

## Progress and next steps
What is done, what is in progress, and what remains.

Media the session contained (images, audio, other files) appears as a tag with the path it was saved to, such as <image url="/conversation_history/media/{{hash}}.png" />. Describe only what the surrounding text says about it, and keep the tag of any media that may matter later: the agent can open its path with read_file.

Write only the summary. The session so far:

{messages}"""  # noqa: E501
"""The default `summary_prompt`; `{messages}` (or `{conversation}`) is where the
transcript goes."""

DEEPAGENTS_DEFAULT_SUMMARY_PROMPT = SUMMARY_PROMPT
"""The reference's name of the default summary prompt (fathom's own text)."""

_TRUNCATED_TOOLS = frozenset({"write_file", "edit_file"})
_TRUNCATION_TEXT = "...(argument truncated)"
_TRUNCATION_KEEP_CHARS = 20
_MAX_ARG_LENGTH = 2000
_TRUNCATION_KEEP_MESSAGES = 20
"""What the truncation keeps by default, and without a known window."""
_FILE_CONTENT_ARGS = {"write_file": "content", "edit_file": "new_string"}
_ARCHIVE_ARG_CHARS = 200
"""File content longer than this is not copied into an archive: the file holds it."""
_SLOTS = ("{messages}", "{conversation}")


class TruncateArgsSettings(TypedDict, total=False):
    """How big arguments of older tool calls are cut (`truncate_args_settings=`)."""

    trigger: ContextSize | None
    """When to cut: `("messages", n)`, `("tokens", n)` or `("fraction", f)`; `None` never."""
    keep: ContextSize
    """The recent part left whole (default the last 20 messages)."""
    max_length: int
    """Arguments longer than this many characters are cut (default 2,000)."""
    truncation_text: str
    """What follows the first 20 characters of a cut argument (default
    `...(argument truncated)`)."""


class SummarizationDefaults(TypedDict):
    """The settings `compute_summarization_defaults` picks for a model."""

    trigger: ContextSize
    keep: ContextSize
    truncate_args_settings: TruncateArgsSettings


class CompactConversationSchema(BaseModel):
    """The (empty) arguments of the `compact_conversation` tool."""


def compute_summarization_defaults(model: Any) -> SummarizationDefaults:
    """Trigger, keep and truncation settings for `model`: shares of its window when its
    profile gives `max_input_tokens`, fixed counts otherwise."""
    trigger: ContextSize
    keep: ContextSize
    truncate: TruncateArgsSettings
    if context_window(model) is not None:
        trigger, keep = ("fraction", TRIGGER_FRACTION), ("fraction", KEEP_FRACTION)
        truncate = {"trigger": trigger, "keep": keep}
    else:
        trigger, keep = ("tokens", FALLBACK_TRIGGER_TOKENS), ("messages", FALLBACK_KEEP_MESSAGES)
        last: ContextSize = ("messages", _TRUNCATION_KEEP_MESSAGES)
        truncate = {"trigger": last, "keep": last}
    return {"trigger": trigger, "keep": keep, "truncate_args_settings": truncate}


def _token_counter_accepts_tools(counter: Callable[..., Any]) -> bool | None:
    """Whether `counter` takes a `tools=` keyword (or `**kwargs`); `None` when its
    signature cannot be read (it is then tried with `tools=` and without)."""
    try:
        parameters = inspect.signature(counter).parameters.values()
    except (TypeError, ValueError):
        return None
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == "tools" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


_upload_response_error = media.upload_error

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


def _deprecated(
    trigger: Any, keep: Any, kwargs: dict[str, Any]
) -> tuple[Any, Any]:
    """`trigger` and `keep` after the reference's deprecated keywords; the rest warned of."""
    kwargs = dict(kwargs)
    if "history_path_prefix" in kwargs:
        raise TypeError(
            "history_path_prefix is no longer accepted: the archive goes under the "
            "backend's artifacts root; set CompositeBackend(artifacts_root=...) instead."
        )
    for old, new in (("max_tokens_before_summary", "trigger=('tokens', value)"),
                     ("messages_to_keep", "keep=('messages', value)")):  # fmt: skip
        if old in kwargs:
            warnings.warn(f"{old} is deprecated: pass {new}.", DeprecationWarning, stacklevel=3)
    tokens = kwargs.pop("max_tokens_before_summary", None)
    if trigger is None and tokens is not None:
        trigger = ("tokens", tokens)
    if "messages_to_keep" in kwargs:
        value = kwargs.pop("messages_to_keep")
        if keep is None or keep == ("messages", _TRUNCATION_KEEP_MESSAGES):
            keep = ("messages", value)
    if kwargs:
        warnings.warn(
            f"SummarizationMiddleware ignores the unknown keyword argument(s) {sorted(kwargs)}",
            UserWarning,
            stacklevel=3,
        )
    return trigger, keep


_REQUEST_MODEL: ContextVar[Any] = ContextVar("fathom_summarization_model", default=None)
"""The model of the model call being handled (the window and summary writer of a
`SummarizationMiddleware` without a model of its own)."""
_WRITTEN: ContextVar[dict[str, Any] | None] = ContextVar("fathom_summary_files", default=None)
"""Where the archive and media writes of one summarization put what a state backend
stores, for the `files` update of its `Command`."""


def _note_files(result: Any) -> None:
    files = _WRITTEN.get()
    update = getattr(result, "files_update", None)
    if files is not None and update:
        files.update(update)


def _archived_args(call: Any, succeeded: set[str]) -> Any:
    """A call's arguments for the archive: content a successful write put in a file is
    replaced by a pointer, so the archive does not store every file a second time."""
    key = _FILE_CONTENT_ARGS.get(call["name"])
    value = call["args"].get(key) if key else None
    if call.get("id") not in succeeded or not isinstance(value, str):
        return call["args"]
    if len(value) <= _ARCHIVE_ARG_CHARS:
        return call["args"]
    path = call["args"].get("file_path", "the file")
    return {**call["args"], key: f"[{len(value):,} characters, written to {path}]"}


def render(messages: Sequence[Any]) -> str:
    """`messages` as the archive and the summary prompt show them: LangChain's XML
    rendering, with file contents already written by a successful call left out."""
    succeeded = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status != "error"
    }
    shown: list[Any] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [{**c, "args": _archived_args(c, succeeded)} for c in message.tool_calls]
            message = message.model_copy(update={"tool_calls": calls})
        shown.append(message)
    return get_buffer_string(shown, format="xml")


def _archived_text(answer: Any) -> str:
    """The archive's text so far, from a one-file `download_files` answer: empty when
    there is none (no such file yet, a failed download, an answer in another shape, bytes
    that are not UTF-8)."""
    if isinstance(answer, Failure) or not isinstance(answer, Sequence) or not answer:
        return ""
    first = answer[0]
    content = getattr(first, "content", None)
    if content is None or getattr(first, "error", None) is not None:
        return ""
    try:
        return bytes(content).decode("utf-8")
    except (TypeError, ValueError):  # not bytes, or not UTF-8 (UnicodeDecodeError)
        return ""


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
        except Exception as error:  # boundary: the model call; re-raised unless an overflow
            if not is_context_overflow(error):
                raise
            logger.info("a model call overflowed the context window (%s): offloading or "
                        "summarizing, then calling again", type(error).__name__)  # fmt: skip
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


class _Parts:
    """The middleware's summarizing parts as plan steps (`media`, `history`), so a plan
    calls the overridable methods, sync or async; the async history writes the archive
    and the summary at the same time."""

    def __init__(self, middleware: SummarizationMiddleware, runtime: Any) -> None:
        self.middleware = middleware
        self.runtime = runtime
        self._backend: Any = None

    @property
    def backend(self) -> Any:
        """The backend of this model call, resolved on first use (a factory is called only
        when something is written)."""
        if self._backend is None:
            self._backend = self.middleware._backend_for(self.runtime)
        return self._backend

    def media(self, messages: list[AnyMessage]) -> tuple[list[AnyMessage], int]:
        return self.middleware._offload_inline_media(self.backend, messages)

    async def amedia(self, messages: list[AnyMessage]) -> tuple[list[AnyMessage], int]:
        return await self.middleware._aoffload_inline_media(self.backend, messages)

    def history(self, messages: list[AnyMessage], session_id: str) -> tuple[str | None, str]:
        path = self.middleware._offload_to_backend(self.backend, messages, session_id)
        return path, self.middleware._create_summary(messages)

    async def ahistory(
        self, messages: list[AnyMessage], session_id: str
    ) -> tuple[str | None, str]:
        path, summary = await asyncio.gather(
            self.middleware._aoffload_to_backend(self.backend, messages, session_id),
            self.middleware._acreate_summary(messages),
        )
        return path, summary


class SummarizationMiddleware(AgentMiddleware):
    """Keeps the context under the model's window (see the module docstring).

    Args:
        model: The model whose window is managed and which writes the summaries (a chat
            model or a `"provider:model"` string); `None` uses the model of each call.
        backend: Where offloaded results, archives and media go (a backend or factory);
            `None` is `StateBackend()`.
        trigger: When to summarize: `("fraction", f)` of the window, `("tokens", n)` or
            `("messages", n)`; a dict of several such conditions that must all hold,
            e.g. `{"tokens": 4000, "messages": 10}`; or a list of pairs and dicts
            (whichever is reached first). `None`: at `trigger_fraction` of the window, or
            `fallback_trigger_tokens` when the window is unknown. `trigger_fraction` of the
            window stays a ceiling (an explicit `("fraction", f)` replaces it).
        keep: What stays unsummarized: `("fraction", f)` of the window, `("tokens", n)`
            or `("messages", n)`. `None`: `keep_fraction` of the window, or
            `fallback_keep_messages` when it is unknown.
        token_counter: Counts a list of messages (the system message first; with `tools=`
            when it takes that keyword). `None`: the model's reported usage of the last
            answer plus an estimate of what came after.
        summary_prompt: The prompt that asks for the summary; `{messages}` (or
            `{conversation}`) is replaced by the transcript, which follows the prompt when
            it has neither.
        trim_tokens_to_summarize: The most tokens of transcript the summary prompt carries
            (its middle is cut; the archive has all of it). `None`: half the window.
        truncate_args_settings: When and how long arguments of older `write_file` /
            `edit_file` calls are cut (`TruncateArgsSettings`: `trigger`, `keep`,
            `max_length`, `truncation_text`; without a `trigger`, nothing is cut).
            `None`: at the summarization trigger, outside what `keep` keeps, over 2,000
            characters.
        summarizer: Writes the summaries instead of `model` (which still gives the window):
            a chat model or `"provider:model"` string, prompted with `summary_prompt`; or
            a runnable or function that receives the messages to summarize and returns
            the summary text (`summary_prompt` is then not used).
        max_input_tokens: The window; `None` reads the model's profile.
        trigger_fraction, keep_fraction: The default trigger and keep, as shares of the
            window.
        fallback_trigger_tokens, fallback_keep_messages: The defaults when the window is
            unknown.
        offload_tokens: Tool results above this size are written to files as they arrive.
        **deprecated_kwargs: The reference's `max_tokens_before_summary` (for `trigger`)
            and `messages_to_keep` (for `keep`), accepted with a `DeprecationWarning`.
            Other unknown keywords are ignored with a `UserWarning`.

    Raises:
        TypeError: `history_path_prefix` is given (the archive follows the backend's
            `artifacts_root`), or `summarizer` is of an unsupported type.
        ValueError: a malformed `trigger` or `keep`, or fractions out of order.
    """

    state_schema = SummarizationState

    def __init__(
        self,
        model: str | BaseChatModel | None = None,
        backend: Any = None,
        *,
        trigger: ContextSize | TriggerClause | Sequence[ContextSize | TriggerClause] | None = None,
        keep: ContextSize | None = None,
        token_counter: Callable[..., int] | None = None,
        summary_prompt: str = SUMMARY_PROMPT,
        trim_tokens_to_summarize: int | None = None,
        truncate_args_settings: TruncateArgsSettings | Mapping[str, Any] | None = None,
        summarizer: Summarizer | None = None,
        max_input_tokens: int | None = None,
        trigger_fraction: float = TRIGGER_FRACTION,
        keep_fraction: float = KEEP_FRACTION,
        fallback_trigger_tokens: int = FALLBACK_TRIGGER_TOKENS,
        fallback_keep_messages: int = FALLBACK_KEEP_MESSAGES,
        offload_tokens: int = OFFLOAD_TOKENS,
        **deprecated_kwargs: Any,
    ) -> None:
        trigger, keep = _deprecated(trigger, keep, deprecated_kwargs)
        super().__init__()
        self.model: BaseChatModel | None = (
            resolve_model(model) if isinstance(model, str) else model
        )
        self.summary_model, self.summarizer = _summarizer(summarizer)
        self.trigger = trigger
        self._trigger_clauses: list[dict[str, float]] = [
            dict(conditions) for conditions in parse_trigger(trigger)
        ]
        self._ceiling_fraction = trigger_fraction
        for clause in self._trigger_clauses:
            if list(clause) == ["fraction"]:
                self._ceiling_fraction = float(clause["fraction"])
        self.keep = keep
        if keep is not None:
            parse_size(keep, "keep")
        if not 0 < keep_fraction < trigger_fraction <= 1:
            raise ValueError("Need 0 < keep_fraction < trigger_fraction <= 1.")
        if not any(slot in summary_prompt for slot in _SLOTS):
            warnings.warn(
                "summary_prompt has no {messages} slot: the transcript to summarize is "
                "put after the prompt.",
                UserWarning,
                stacklevel=2,
            )
        self.truncate_args_settings = (
            None if truncate_args_settings is None else dict(truncate_args_settings)
        )
        self._parse_truncation(self.truncate_args_settings)
        self.token_counter = token_counter
        self._counter_accepts_tools = (
            True if token_counter is None else _token_counter_accepts_tools(token_counter)
        )
        self.summary_prompt = summary_prompt
        self.trim_tokens_to_summarize = trim_tokens_to_summarize
        self._backend = adopt(backend) if backend is not None else StateBackend()
        static = None if is_factory(self._backend) else self._backend
        self._history_path_prefix = artifacts_dir(static, ARCHIVE_DIR.strip("/"))
        self._large_tool_results_prefix = artifacts_dir(static, OFFLOAD_DIR.strip("/"))
        self._media_prefix = f"{self._history_path_prefix}/media"
        self.max_input_tokens = max_input_tokens
        self.trigger_fraction = trigger_fraction
        self.keep_fraction = keep_fraction
        self.fallback_trigger_tokens = fallback_trigger_tokens
        self.fallback_keep_messages = fallback_keep_messages
        self.offload_tokens = offload_tokens
        self.results_offload = ToolResultOffload(self._backend, offload_tokens)

    def _parse_truncation(self, settings: dict[str, Any] | None) -> None:
        self._truncate_args_trigger: ContextSize | None = None
        self._truncate_args_keep: ContextSize = ("messages", _TRUNCATION_KEEP_MESSAGES)
        self._max_arg_length = _MAX_ARG_LENGTH
        self._truncation_text = _TRUNCATION_TEXT
        if settings is None:
            return
        unknown = sorted(set(settings) - {"trigger", "keep", "max_length", "truncation_text"})
        if unknown:
            warnings.warn(
                f"truncate_args_settings ignores the unknown keys {unknown}; the keys are "
                "trigger, keep, max_length and truncation_text.",
                UserWarning,
                stacklevel=4,
            )
        if settings.get("trigger") is not None:
            self._truncate_args_trigger = cast(
                "ContextSize", parse_size(settings["trigger"], "truncate_args_settings trigger")
            )
        if "keep" in settings:
            self._truncate_args_keep = cast(
                "ContextSize", parse_size(settings["keep"], "truncate_args_settings keep")
            )
        self._max_arg_length = int(settings.get("max_length", _MAX_ARG_LENGTH))
        self._truncation_text = str(settings.get("truncation_text", _TRUNCATION_TEXT))

    @property
    def backend(self) -> Any:
        """Where offloaded results, archives and media go (a backend or a factory)."""
        return self._backend

    @property
    def can_summarize_alone(self) -> bool:
        """Whether this middleware writes summaries without a model call's model (it has
        a model or a summarizer of its own), as the `compact_conversation` tool needs."""
        return self.model is not None or self.summarizer is not None or (
            self.summary_model is not None
        )

    # -- measuring -------------------------------------------------------------------------

    def _current_model(self) -> Any:
        return self.model if self.model is not None else _REQUEST_MODEL.get()

    def _get_profile_limits(self) -> int | None:
        """The window in tokens (`max_input_tokens`, else the model's profile), or `None`."""
        return context_window(self._current_model(), self.max_input_tokens)

    def _trigger_clauses_now(self) -> list[dict[str, float]]:
        if self._trigger_clauses:
            return self._trigger_clauses
        if self._get_profile_limits() is not None:
            return [{"fraction": self.trigger_fraction}]
        return [{"tokens": self.fallback_trigger_tokens}]

    def _compaction_clauses(self) -> list[dict[str, float]]:
        """The trigger's clauses, which the `compact_conversation` tool measures against."""
        return self._trigger_clauses_now()

    def _holds(self, clause: Mapping[str, float], messages: Sequence[Any], tokens: int) -> bool:
        """Whether every condition of `clause` holds (a fraction needs a known window)."""
        window = self._get_profile_limits()
        for kind, value in clause.items():
            if kind == "messages" and len(messages) < value:
                return False
            if kind == "tokens" and tokens < value:
                return False
            if kind == "fraction" and (window is None or tokens < max(1, int(window * value))):
                return False
        return True

    def _should_summarize(self, messages: list[AnyMessage], total_tokens: int) -> bool:
        """Whether the conversation (of `total_tokens`) is at the trigger: one of its
        clauses holds, or the context reached the window's ceiling."""
        if any(self._holds(c, messages, total_tokens) for c in self._trigger_clauses_now()):
            return True
        window = self._get_profile_limits()
        return window is not None and total_tokens >= int(window * self._ceiling_fraction)

    def _count_tokens(
        self,
        messages: Sequence[Any],
        system_message: SystemMessage | None,
        tools: Sequence[Any] | None,
    ) -> int:
        """The size of a request. With a `token_counter`, its count of the system message
        and `messages` (and `tools`, when it takes them); otherwise the model's own count
        for the prefix it last reported on (`usage_metadata`), plus an estimate of what
        came after, all estimated when no usage is reported."""
        if self.token_counter is None:
            for index in range(len(messages) - 1, -1, -1):
                message = messages[index]
                if isinstance(message, AIMessage) and message.usage_metadata:
                    usage = message.usage_metadata
                    reported = usage.get("total_tokens") or (
                        usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
                    )
                    return int(reported) + approx_tokens(messages[index + 1 :])
            counted = [system_message, *messages] if system_message else list(messages)
            return approx_tokens(counted, tools)
        counted = [system_message, *messages] if system_message else list(messages)
        counter = self.token_counter
        if self._counter_accepts_tools is True:
            return int(counter(counted, tools=tools))
        if self._counter_accepts_tools is False:
            return int(counter(counted))
        try:
            return int(counter(counted, tools=tools))
        except TypeError:
            return int(counter(counted))

    def _partial_tokens(self, messages: Sequence[Any]) -> int:
        """The size of some messages on their own (no system message, no usage)."""
        if self.token_counter is None:
            return approx_tokens(messages)
        return int(self.token_counter(list(messages)))

    # -- what is summarized ----------------------------------------------------------------

    def _keep_now(self) -> tuple[str, float]:
        if self.keep is not None:
            return self.keep
        if self._get_profile_limits() is not None:
            return "fraction", self.keep_fraction
        return "messages", self.fallback_keep_messages

    @staticmethod
    def _safe_cutoff(messages: Sequence[Any], index: int) -> int:
        """`index`, moved back to the AI message whose calls the results at `index`
        answer, so a call and its results stay on one side (forward past the results
        when no such call is found)."""
        if index >= len(messages) or not isinstance(messages[index], ToolMessage):
            return index
        end = index
        answered: set[str] = set()
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            answered.add(messages[end].tool_call_id)
            end += 1
        for earlier in range(index - 1, -1, -1):
            message = messages[earlier]
            if isinstance(message, AIMessage) and any(
                c.get("id") in answered for c in message.tool_calls
            ):
                return earlier
        return end

    def _determine_cutoff_index(self, messages: list[AnyMessage]) -> int:
        """Index of the first message kept as it is (0: nothing to summarize)."""
        kind, value = self._keep_now()
        window = self._get_profile_limits()
        if kind == "fraction" and window is None:
            kind, value = "messages", self.fallback_keep_messages
        if kind == "messages":
            keep = int(value)
            if len(messages) <= keep:
                return 0
            return self._safe_cutoff(messages, len(messages) - keep)
        budget = max(1, int(value) if kind == "tokens" else int((window or 0) * value))
        if self._partial_tokens(messages) <= budget:
            return 0
        low, high = 0, len(messages)
        while low < high:  # the first index whose suffix fits the budget
            middle = (low + high) // 2
            if self._partial_tokens(messages[middle:]) <= budget:
                high = middle
            else:
                low = middle + 1
        if low >= len(messages):
            if len(messages) == 1:
                return 0
            low = len(messages) - 1  # always keep the newest message
        return self._safe_cutoff(messages, low)

    @staticmethod
    def _partition_messages(
        messages: list[AnyMessage], cutoff_index: int
    ) -> tuple[list[AnyMessage], list[AnyMessage]]:
        """(the messages to summarize, the messages kept)."""
        return messages[:cutoff_index], messages[cutoff_index:]

    _apply_event_to_messages = staticmethod(apply_event)
    _compute_state_cutoff = staticmethod(state_cutoff)

    def _get_effective_messages(self, request: ModelRequest) -> list[AnyMessage]:
        """The request's messages with the state's summarization event applied."""
        state = request.state if isinstance(request.state, Mapping) else {}
        return apply_event(request.messages, state.get(SUMMARIZATION_EVENT_KEY))

    # -- truncating old tool inputs ------------------------------------------------------

    def _should_truncate_args(self, messages: list[AnyMessage], total_tokens: int) -> bool:
        if self.truncate_args_settings is None:
            return self._should_summarize(messages, total_tokens)
        if self._truncate_args_trigger is None:
            return False
        return self._holds(dict([self._truncate_args_trigger]), messages, total_tokens)

    def _determine_truncate_cutoff_index(self, messages: list[AnyMessage]) -> int:
        """Index of the first message whose arguments stay whole."""
        kind, value = (
            self._keep_now() if self.truncate_args_settings is None else self._truncate_args_keep
        )
        window = self._get_profile_limits()
        if kind == "fraction" and window is None:
            kind, value = "messages", _TRUNCATION_KEEP_MESSAGES
        if kind == "messages":
            return max(len(messages) - int(value), 0) if len(messages) > value else len(messages)
        budget = max(1, int(value) if kind == "tokens" else int((window or 0) * value))
        kept = 0
        for index in range(len(messages) - 1, -1, -1):
            kept += self._partial_tokens([messages[index]])
            if kept > budget:
                return index + 1
        return 0

    def _truncate_tool_call(self, call: Any) -> Any:
        """`call` with each string argument over `max_length` cut to its start and the
        truncation text."""
        args = call.get("args") or {}
        cut = {
            key: value[:_TRUNCATION_KEEP_CHARS] + self._truncation_text
            if isinstance(value, str) and len(value) > self._max_arg_length
            else value
            for key, value in args.items()
        }
        return call if cut == args else {**call, "args": cut}

    def _truncate_args(
        self, messages: list[AnyMessage], total_tokens: int
    ) -> tuple[list[AnyMessage], bool]:
        """`messages` with the long arguments of older file writes and edits cut, and
        whether anything was cut."""
        if not self._should_truncate_args(messages, total_tokens):
            return messages, False
        cutoff = self._determine_truncate_cutoff_index(messages)
        result = list(messages)
        changed = False
        for index, message in enumerate(messages[:cutoff]):
            if not isinstance(message, AIMessage) or not message.tool_calls:
                continue
            calls = [
                self._truncate_tool_call(c) if c["name"] in _TRUNCATED_TOOLS else c
                for c in message.tool_calls
            ]
            if any(new is not old for new, old in zip(calls, message.tool_calls, strict=True)):
                copy = message.model_copy()
                copy.tool_calls = calls
                result[index] = copy
                changed = True
        return (result, True) if changed else (messages, False)

    # -- the archive, the media and the summary ---------------------------------------------

    def _get_session_id(self, state: Mapping[str, Any]) -> str:
        """The id naming the conversation's archive: the one in state, else a new one."""
        existing = state.get(SUMMARIZATION_SESSION_ID_KEY) if isinstance(state, Mapping) else None
        if isinstance(existing, str) and existing:
            return existing
        return f"session_{uuid.uuid4().hex}"

    def _get_history_path(self, session_id: str) -> str:
        return f"{self._history_path_prefix}/{session_id}.md"

    def _backend_for(self, runtime: Any) -> Any:
        """The backend serving one model or tool call (a factory called, bound to it)."""
        return resolve_backend(self._backend, runtime)

    @contextmanager
    def _collecting_files(self) -> Iterator[dict[str, Any]]:
        """Collects what the archive and media writes store in a state backend."""
        files: dict[str, Any] = {}
        token = _WRITTEN.set(files)
        try:
            yield files
        finally:
            _WRITTEN.reset(token)

    def _media_plan(self, backend: Any, messages: list[AnyMessage]) -> Plan[Any]:
        directory = f"{artifacts_dir(backend, ARCHIVE_DIR.strip('/'))}/media"
        files: dict[str, Any] = {}
        result = yield from media.offload(backend, messages, directory, files)
        if (collected := _WRITTEN.get()) is not None:
            collected.update(files)
        return result

    def _offload_inline_media(
        self, backend: Any, messages: list[AnyMessage]
    ) -> tuple[list[AnyMessage], int]:
        """`messages` with their inline media saved as files and referenced by path, and
        how many media blocks could not be saved (see `media`)."""
        return drive(self._media_plan(backend, messages), run_call)

    async def _aoffload_inline_media(
        self, backend: Any, messages: list[AnyMessage]
    ) -> tuple[list[AnyMessage], int]:
        """Async `_offload_inline_media`."""
        return await adrive(self._media_plan(backend, messages), arun_call)

    def _archive_plan(
        self, backend: Any, messages: list[AnyMessage], session_id: str
    ) -> Plan[str | None]:
        path = f"{artifacts_dir(backend, ARCHIVE_DIR.strip('/'))}/{session_id}.md"
        kept = [m for m in messages if not is_summary_message(m)]
        stamp = datetime.now(UTC).isoformat()
        section = f"## Summarized at {stamp}\n\n{render(kept)}\n\n"
        guarded = media.Guarded(backend)
        answer = yield step(guarded, "download_files", [path])
        if isinstance(answer, Failure):
            logger.warning("The archive %s could not be read (%s); it is written anew",
                           path, answer.error)  # fmt: skip
        existing = _archived_text(answer)
        if existing:
            written = yield step(guarded, "edit", path, existing, existing + section)
        else:
            written = yield step(guarded, "write", path, section)
        error = written.error if isinstance(written, Failure) else getattr(written, "error", None)
        if written is None or error:
            logger.warning(
                "The summarized messages (%d) could not be archived to %s: %s",
                len(kept), path, error or "no answer from the backend",
            )  # fmt: skip
            return None
        _note_files(written)
        return path

    def _offload_to_backend(
        self, backend: Any, messages: list[AnyMessage], session_id: str
    ) -> str | None:
        """Append `messages` (earlier summaries left out) as a section of the session's
        archive; its path, or `None` when it could not be written."""
        return drive(self._archive_plan(backend, messages, session_id), run_call)

    async def _aoffload_to_backend(
        self, backend: Any, messages: list[AnyMessage], session_id: str
    ) -> str | None:
        """Async `_offload_to_backend`."""
        return await adrive(self._archive_plan(backend, messages, session_id), arun_call)

    def _summary_prompt(self, messages: list[AnyMessage]) -> list[HumanMessage]:
        window = self._get_profile_limits() or self.fallback_trigger_tokens
        budget = int(window * 0.5) * CHARS_PER_TOKEN
        if self.trim_tokens_to_summarize is not None:
            budget = self.trim_tokens_to_summarize * CHARS_PER_TOKEN
        earlier = [m for m in messages if is_summary_message(m)]
        text = render([m for m in messages if not is_summary_message(m)])
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
            filled = prompt.format(messages=text)
        elif any(slot in prompt for slot in _SLOTS):
            filled = prompt.replace("{conversation}", text).replace("{messages}", text)
        else:
            filled = f"{prompt}\n\n{text}"
        return [HumanMessage(content=filled)]

    def _config(self) -> RunnableConfig:
        return {"metadata": {"lc_source": SUMMARY_SOURCE}, "tags": ["fathom:summarization"]}

    def _summary_plan(self, messages: list[AnyMessage]) -> Plan[str]:
        if not messages:
            return "Nothing was said before this point."
        if self.summarizer is not None:
            answer = yield step(self.summarizer, "invoke", list(messages), config=self._config())
            return _summary_text(answer).strip()
        model = self.summary_model or self._current_model()
        if model is None:
            raise ValueError(
                "SummarizationMiddleware has no model to write the summary with: give it "
                "model= or summarizer=, or let it run inside an agent's model call."
            )
        answer = yield step(model, "invoke", self._summary_prompt(messages), config=self._config())
        return str(answer.text).strip()

    def _create_summary(self, messages_to_summarize: list[AnyMessage]) -> str:
        """The summary of `messages_to_summarize`, written by the summarizer."""
        return drive(self._summary_plan(messages_to_summarize), run_call)

    async def _acreate_summary(self, messages_to_summarize: list[AnyMessage]) -> str:
        """Async `_create_summary`."""
        return await adrive(self._summary_plan(messages_to_summarize), arun_call)

    def _build_new_messages_with_path(
        self, summary: str, file_path: str | None
    ) -> list[HumanMessage]:
        """The summary message (in a list), naming the archive when there is one."""
        if file_path is not None:
            where = (
                "The conversation so far has been summarized to save space; its full "
                f"conversation history has been saved to {file_path}: use read_file or "
                "grep on it when you need an exact detail."
            )
        else:
            where = "The conversation so far has been summarized to save space."
        return [
            HumanMessage(
                content=f"{where}\n\n<summary>\n{summary.strip()}\n</summary>",
                additional_kwargs={"lc_source": SUMMARY_SOURCE},
            )
        ]

    # -- the model step --------------------------------------------------------------------

    def _summarize(
        self, request: ModelRequest, messages: list[AnyMessage], parts: _Parts
    ) -> Plan[tuple[list[AnyMessage], SummarizationEvent, str] | None]:
        """The older of `messages` summarized: (the messages the model is shown now, the
        event to record, the session id), or `None` when there is nothing to summarize."""
        cutoff = self._determine_cutoff_index(messages)
        if cutoff <= 0:
            return None
        old, kept = self._partition_messages(messages, cutoff)
        state = request.state if isinstance(request.state, Mapping) else {}
        old, failed = yield step(parts, "media", old)
        session_id = self._get_session_id(state)
        path, summary = yield step(parts, "history", old, session_id)
        if path is None:
            message = (
                "Offloading conversation history to backend failed during summarization: "
                "the summarized messages are kept only in the summary and the state."
            )
            logger.error(message)
            warnings.warn(message, UserWarning, stacklevel=2)
        elif failed:
            message = (
                f"The conversation history was saved to {path}, but {failed} media "
                "block(s) could not be offloaded: the archive shows a placeholder for each."
            )
            logger.warning(message)
            warnings.warn(message, UserWarning, stacklevel=2)
        summary_message = self._build_new_messages_with_path(summary, path)[0]
        event: SummarizationEvent = {
            "cutoff_index": state_cutoff(state.get(SUMMARIZATION_EVENT_KEY), cutoff),
            "summary_message": summary_message,
            "file_path": path,
            "created_at_index": len(messages_of(state) or request.messages),
        }
        return [summary_message, *map(settled, kept)], event, session_id

    def _offload_batch(
        self, request: ModelRequest, messages: list[AnyMessage]
    ) -> Plan[tuple[list[AnyMessage], list[AnyMessage]] | None]:
        """After an overflow: (the messages with the newest batch's big results sent to
        files, the replaced results), or `None` when nothing could be replaced."""
        batch = yield from self.results_offload.batch(request, messages)
        if batch is None:
            return None
        replaced, files = batch
        if (collected := _WRITTEN.get()) is not None:
            collected.update(files)
        changed = [new for new, old in zip(replaced, messages, strict=True) if new is not old]
        return replaced, changed

    def _model_step(
        self, request: ModelRequest, rest: _RestOfCall, files: dict[str, Any]
    ) -> Plan[Any]:
        """The model step: truncate and summarize when due or asked, call the model, and
        after an overflow offload the newest batch, then summarize, retrying each time."""
        requested = compaction_requested(request)
        parts = _Parts(self, HookRuntime(request.state, request.runtime))
        messages = (
            list(request.messages) if SUMMARIZING.get() else self._get_effective_messages(request)
        )
        tokens = self._count_tokens(messages, request.system_message, request.tools)
        messages, truncated = self._truncate_args(messages, tokens)
        if truncated:
            tokens = self._count_tokens(messages, request.system_message, request.tools)
        summarized: tuple[list[AnyMessage], SummarizationEvent, str] | None = None
        if requested or self._should_summarize(messages, tokens):
            summarized = yield from self._summarize(request, messages, parts)
            if summarized is not None:
                messages = summarized[0]
        response = yield step(rest, "run", request.override(messages=messages))
        # the newest batch of results is kept whole by summarization, so a batch too big
        # for the window goes to files first; then the summary is forced
        replacements: list[AnyMessage] = []
        reliefs = ["batch"] if summarized is not None else ["batch", "summary"]
        while isinstance(response, BaseException):  # an overflow
            if not reliefs:
                raise response
            if reliefs.pop(0) == "batch":
                batch = yield from self._offload_batch(request, messages)
                if batch is None:
                    continue
                messages, changed = batch
                replacements.extend(m for m in changed if m.id is not None)
            else:
                summarized = yield from self._summarize(request, messages, parts)
                if summarized is None:
                    continue
                messages = summarized[0]
            response = yield step(rest, "run", request.override(messages=messages))
        update: dict[str, Any] = {}
        if summarized is not None:
            update[SUMMARIZATION_EVENT_KEY] = summarized[1]
            update[SUMMARIZATION_SESSION_ID_KEY] = summarized[2]
        if replacements:
            update["messages"] = replacements
        if files:
            update["files"] = dict(files)
        if requested:
            update[COMPACT_FLAG] = False
        return with_command(response, Command(update=update) if update else None)

    @contextmanager
    def _model_call(self, request: ModelRequest) -> Iterator[dict[str, Any]]:
        token = _REQUEST_MODEL.set(request.model)
        try:
            with self._collecting_files() as files:
                yield files
        finally:
            _REQUEST_MODEL.reset(token)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> Any:
        with self._model_call(request) as files:
            return drive(self._model_step(request, _RestOfCall(handler), files), run_call)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        with self._model_call(request) as files:
            plan = self._model_step(request, _RestOfCall(handler), files)
            return await adrive(plan, arun_call)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]
    ) -> Any:
        return self.results_offload.tool_result(request, handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        return await self.results_offload.atool_result(request, await handler(request))


def create_summarization_middleware(
    model: BaseChatModel,
    backend: Any,
    *,
    summary_prompt: str = SUMMARY_PROMPT,
    trim_tokens_to_summarize: int | None = None,
    token_counter: Callable[..., int] | None = None,
    summarizer: Summarizer | None = None,
) -> SummarizationMiddleware:
    """A `SummarizationMiddleware` with `compute_summarization_defaults(model)`: shares of
    the model's window when its profile gives one, fixed token and message counts
    otherwise."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            "create_summarization_middleware takes a chat model instance (a BaseChatModel); "
            "resolve a 'provider:model' string with fathom.models.resolve_model first."
        )
    defaults = compute_summarization_defaults(model)
    return SummarizationMiddleware(
        model,
        backend,
        trigger=defaults["trigger"],
        keep=defaults["keep"],
        truncate_args_settings=defaults["truncate_args_settings"],
        summary_prompt=summary_prompt,
        trim_tokens_to_summarize=trim_tokens_to_summarize,
        token_counter=token_counter,
        summarizer=summarizer,
    )


def create_summarization_tool_middleware(
    model: str | BaseChatModel | None = None,
    backend: Any = None,
    *,
    system_prompt: str | None = None,
) -> SummarizationToolMiddleware:
    """The `compact_conversation` tool, summarizing with a `create_summarization_middleware`
    of `model` into `backend` (`StateBackend()` when `None`).

    `model=None` (fathom's shorthand) summarizes with the agent's own model, at the model
    step after the tool call. `system_prompt` is a prompt section about the tool
    (`COMPACT_PROMPT` is one); `None` adds none.
    """
    backend = backend if backend is not None else StateBackend()
    if model is None:
        return SummarizationToolMiddleware(
            SummarizationMiddleware(None, backend), system_prompt=system_prompt
        )
    chat = resolve_model(model) if isinstance(model, str) else model
    return SummarizationToolMiddleware(
        create_summarization_middleware(chat, backend), system_prompt=system_prompt
    )
