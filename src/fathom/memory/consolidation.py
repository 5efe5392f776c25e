"""Background memory consolidation: merge what a user said in recent threads into a memory file.

`create_consolidation_agent(model)` returns a compiled graph (serve it from `langgraph.json`,
e.g. as `consolidation_agent`, and trigger it with a cron) whose every run:

1. **gathers**: finds the user (`user_id` in the run's `configurable` or `context`, or the
   server's authenticated user, as `search_conversations` does), claims the user's memory
   file so that no other run merges at the same time (`fathom.memory.claims`), reads the
   watermark from the store, and lists the user's threads newest first through the
   server's own thread search (`metadata={"user_id": ...}`, sorted by `updated_at`),
   stopping at the first thread older than the watermark (`fathom.memory.watermark`);
2. **merges**: an agent on `model` with the ordinary file tools gets the messages of the due
   conversations not merged before, as one message, and the memory file in its prompt, and
   edits the file (so the versioned-write protection applies: a file another conversation
   changed meanwhile is not overwritten);
3. **records**: moves the watermark, and each thread's "merged up to" message, over the
   threads it merged, only once the merge ended, and gives the claim up.

A run with nothing due answers without calling the model. A run that fails leaves the
watermark where it was, so the next run reads the same threads again.

How threads are found: on `fathom serve` the graph calls the server that hosts it in process
(`fathom.hosting`, no url), on `langgraph dev` and LangGraph Platform through the SDK's own
in-process transport; `ServerThreads(client)` takes any other `langgraph_sdk` client. A
conversation belongs to a user when its thread's metadata says so: the application creates
the user's threads with `client.threads.create(metadata={"user_id": "alice"})`. Threads the
consolidation graph itself runs on, and threads with a run in progress (they are read once
that run ends, which updates them), are skipped.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NotRequired, Protocol, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
)
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph_sdk.client import LangGraphClient

from fathom.backends.composite import CompositeBackend
from fathom.backends.protocol import BackendOrFactory
from fathom.backends.state import StateBackend
from fathom.backends.store import StoreBackend
from fathom.errors import FathomError, require_at_least_one
from fathom.memory.claims import aclaim, arelease
from fathom.memory.conversation_search import user_identity
from fathom.memory.watermark import (
    ThreadStamp,
    Watermark,
    advance,
    parse_time,
    select_due,
)
from fathom.middleware.filesystem.middleware import FilesystemMiddleware, FsToolName
from fathom.middleware.memory import MemoryMiddleware
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.models import resolve_model
from fathom.prompt import PromptAssemblyMiddleware

__all__ = [
    "CLAIM_TIMEOUT",
    "CONSOLIDATION_PROMPT",
    "DEFAULT_MEMORY_PATH",
    "MEMORY_ROUTE",
    "USER_KEY",
    "WATERMARK_PREFIX",
    "ConsolidationError",
    "ConversationThread",
    "DueConversation",
    "Said",
    "ServerThreads",
    "ThreadSource",
    "conversation_of",
    "create_consolidation_agent",
    "load_watermark",
    "render_conversations",
    "user_memory_backend",
    "user_memory_namespace",
]

logger = logging.getLogger(__name__)

DEFAULT_MEMORY_PATH = "/memories/facts.md"
"""The memory file consolidation merges facts into, by default."""
MEMORY_ROUTE = "/memories/"
"""Where `user_memory_backend` mounts the user's store namespace."""
USER_KEY = "user_id"
"""The thread metadata key that names a conversation's user."""
WATERMARK_PREFIX = "fathom_consolidation"
"""The first component of the store namespace `(WATERMARK_PREFIX, user_id)` that holds each
consolidation's watermark (keyed by its memory file), apart from the user's own files."""
MEMORY_SUFFIX = "memories"
"""The last component of a user's memory namespace `(user_id, "memories")`."""

CONSOLIDATION_PROMPT = """You keep the long-term memory of one user: the file `{memory_path}`, shown below as it is now. You are given the conversations this user has had since the last consolidation. Merge into the file the durable facts they reveal about the user (who they are, their preferences, their projects, decisions they made, people they work with): add new facts, correct facts a newer conversation contradicts, and never duplicate a fact already there. Leave out small talk, one-off requests and anything only the assistant said. Change the file with `edit_file` (or `write_file` to create it), keeping it short: one fact per line under `# Facts`. If nothing is worth remembering, change nothing. Then answer in one sentence what you changed."""  # noqa: E501
"""The consolidation agent's system prompt; `{memory_path}` is the memory file."""

MAX_THREAD_CHARS = 20_000
"""Text of one conversation the model is given at most (its end: the newest messages)."""
DEFAULT_MAX_THREADS = 20
"""Conversations one run merges at most; the next run takes the rest."""
PAGE_SIZE = 100
"""Threads fetched per thread search."""
CLAIM_TIMEOUT = timedelta(minutes=10)
"""How long the claim of a run that died keeps other runs out."""
MERGE_TOOLS: tuple[FsToolName, ...] = ("ls", "read_file", "write_file", "edit_file")
"""The file tools the merging model has."""


class ConsolidationError(FathomError):
    """Consolidation cannot run: no user, no store, or no server to read threads from."""


# ------------------------------------------------------------------------ whose memory


def _user(runtime: Any) -> str | None:
    """The user of the current run (the rules of `search_conversations`), or None."""
    try:
        config = get_config()
    except RuntimeError:
        config = getattr(runtime, "config", None)
    return user_identity(
        server_info=getattr(runtime, "server_info", None),
        config=config,
        context=getattr(runtime, "context", None),
    )


def user_memory_namespace(runtime: Any) -> tuple[str, ...]:
    """`(user_id, "memories")` for the current run: a `StoreBackend` namespace factory.

    Give it to the conversation agent's backend too (or use `user_memory_backend()`), so
    what consolidation writes is the memory that agent loads.

    Raises:
        ConsolidationError: the run names no user.
    """
    user = _user(runtime)
    if user is None:
        raise ConsolidationError(
            "this run names no user: pass config={'configurable': {'user_id': ...}} "
            "(or context={'user_id': ...})"
        )
    return (user, MEMORY_SUFFIX)


def user_memory_backend() -> CompositeBackend:
    """Thread-local files, with `/memories/` in the user's store namespace
    (`user_memory_namespace`): the backend consolidation writes through by default, and the
    one a conversation agent needs to load the same memory (`memory=["/memories/facts.md"]`).
    """
    return CompositeBackend(
        StateBackend(), {MEMORY_ROUTE: StoreBackend(namespace=user_memory_namespace)}
    )


# ------------------------------------------------------------------------ threads


@dataclass(frozen=True)
class Said:
    """One human or assistant message with text."""

    message_id: str | None
    role: str
    """`user` or `assistant`."""
    text: str


@dataclass(frozen=True)
class ConversationThread:
    """One of the user's threads: when it was last updated, and what was said in it."""

    stamp: ThreadStamp
    status: str
    metadata: Mapping[str, Any]
    messages: tuple[Said, ...]
    """The user's and the assistant's messages with text, oldest first."""

    def after(self, message_id: str | None) -> tuple[Said, ...]:
        """The messages after the one with `message_id` (all of them when it is None or no
        longer in the thread, e.g. after summarization replaced it)."""
        ids = [m.message_id for m in self.messages]
        if message_id is None or message_id not in ids:
            return self.messages
        return self.messages[ids.index(message_id) + 1 :]

    @property
    def last_message_id(self) -> str | None:
        """The id of the newest message with text (where the next run carries on)."""
        return self.messages[-1].message_id if self.messages else None


class ThreadSource(Protocol):
    """Where consolidation reads a user's threads from."""

    async def newest_first(
        self, user_id: str, *, until: datetime | None
    ) -> list[ConversationThread]:
        """The user's threads by `updated_at`, newest first, at least down to `until` (all
        of them when None); more may follow, older ones are not needed."""
        ...


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block if isinstance(block, str) else str(block.get("text") or "")
            for block in content
            if isinstance(block, str)
            or (isinstance(block, Mapping) and block.get("type") == "text")
        ]
        return "".join(parts)
    return ""


_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}


def _said(message: Any) -> Said | None:
    """A human or assistant message with text (JSON or a LangChain message); None otherwise
    (tool calls and results, summaries: not something the user or the assistant said)."""
    if isinstance(message, BaseMessage):
        kind, content, message_id = message.type, message.content, message.id
        source = message.additional_kwargs.get("lc_source")
    elif isinstance(message, Mapping):
        kind, content = message.get("type") or message.get("role"), message.get("content")
        message_id = message.get("id")
        source = (message.get("additional_kwargs") or {}).get("lc_source")
    else:
        return None
    role = _ROLES.get(str(kind))
    text = _text(content).strip()
    if role is None or not text or source == "summarization":
        return None
    return Said(str(message_id) if message_id else None, role, text)


def conversation_of(thread: Mapping[str, Any]) -> ConversationThread:
    """A thread as the server's thread search answers it, as a `ConversationThread`."""
    values = thread.get("values")
    raw = values.get("messages") if isinstance(values, Mapping) else None
    said = [m for m in (_said(m) for m in raw or ()) if m is not None]
    return ConversationThread(
        stamp=ThreadStamp(str(thread["thread_id"]), parse_time(thread["updated_at"])),
        status=str(thread.get("status") or "idle"),
        metadata=dict(thread.get("metadata") or {}),
        messages=tuple(said),
    )


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, LangGraphClient]] = (
    weakref.WeakKeyDictionary()
)
"""Clients per event loop (an `httpx.AsyncClient` belongs to one) and hosting app (by id;
0: the SDK's own in-process transport)."""


def _hosting_client() -> LangGraphClient:
    """A client for the server that runs this graph: the fathom app in process, else the
    SDK's in-process transport (`langgraph dev`, LangGraph Platform)."""
    from fathom.hosting.client import in_process_client
    from fathom.hosting.loopback import hosting_app

    per_app = _clients.setdefault(asyncio.get_running_loop(), {})
    app = hosting_app()
    key = id(app) if app is not None else 0
    client = per_app.get(key)
    if client is not None:
        return client
    if app is not None:
        # as the user of the run this graph runs in: past custom auth and --api-key alike
        client = in_process_client(app, loopback=True)
    else:
        try:
            import langgraph_api.server  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            raise ConsolidationError(
                "no server hosts this graph, so it has no threads to read: serve it with "
                "`fathom serve` (or langgraph dev), or pass threads=ServerThreads(client)"
            ) from None
        from langgraph_sdk import get_client

        client = get_client(url=None)
    per_app[key] = client
    return client


class ServerThreads:
    """A user's threads through a server's thread search (`POST /threads/search`).

    Args:
        client: A `langgraph_sdk` client; None (the default) calls the server hosting the
            running graph, in process.
        user_key: The thread metadata key that names the user.
        page_size: Threads per search call.
        headers: Sent with every search, e.g. `{"x-api-key": ...}` for another client's
            server. Calls to the hosting `fathom serve` need none: they carry its loopback
            secret, which gets them past `--api-key` and custom auth as the run's user.

    langgraph-sdk's search has no "updated after" filter, so it pages through the user's
    threads sorted by `updated_at`, newest first, and stops after the first page that
    reaches past `until`. A thread updated while the pages are read moves to the front: it
    is listed twice at worst (counted once), and is due again next run anyway.
    """

    def __init__(
        self,
        client: LangGraphClient | None = None,
        *,
        user_key: str = USER_KEY,
        page_size: int = PAGE_SIZE,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        require_at_least_one("page_size", page_size)
        self.client = client
        self.user_key = user_key
        self.page_size = page_size
        self.headers = dict(headers or {})

    async def newest_first(
        self, user_id: str, *, until: datetime | None
    ) -> list[ConversationThread]:
        """The user's threads, newest first, down to the first one older than `until`."""
        client = self.client if self.client is not None else _hosting_client()
        found: list[ConversationThread] = []
        offset = 0
        while True:
            page = await client.threads.search(
                metadata={self.user_key: user_id}, sort_by="updated_at", sort_order="desc",
                limit=self.page_size, offset=offset,
                select=["thread_id", "updated_at", "status", "metadata", "values"],
                headers=self.headers or None,
            )  # fmt: skip
            threads = [conversation_of(t) for t in page]
            found.extend(threads)
            if len(page) < self.page_size:
                return found
            if until is not None and threads and threads[-1].stamp.updated_at < until:
                return found
            offset += self.page_size


# ------------------------------------------------------------------------ the model's input


@dataclass(frozen=True)
class DueConversation:
    """A due thread and the messages of it not merged yet."""

    thread: ConversationThread
    new: tuple[Said, ...]


def render_conversations(
    user_id: str, memory_path: str, due: Sequence[DueConversation], *, max_chars: int
) -> str:
    """The message the merging model gets: the new messages of the due conversations,
    oldest conversation first (those with no new message are left out)."""
    shown = [d for d in due if d.new]
    head = (
        f"Conversations of user {user_id} since the last consolidation ({len(shown)}, "
        f"oldest first; only messages not merged before). Merge the durable facts about the "
        f"user into {memory_path}."
    )
    parts = [head]
    for conversation in shown:
        body = "\n".join(f"{m.role}: {m.text}" for m in conversation.new)
        if len(body) > max_chars:
            body = "[earlier messages left out]\n" + body[-max_chars:]
        stamp = conversation.thread.stamp
        parts.append(
            f'<conversation thread_id="{stamp.thread_id}" '
            f'updated_at="{stamp.updated_at.isoformat()}">\n{body}\n</conversation>'
        )
    return "\n\n".join(parts)


# ------------------------------------------------------------------------ the watermark


def _namespace(user_id: str) -> tuple[str, ...]:
    return (WATERMARK_PREFIX, user_id)


def _cursor_namespace(user_id: str) -> tuple[str, ...]:
    return (WATERMARK_PREFIX, user_id, "threads")


def _cursor_key(memory_path: str, thread_id: str) -> str:
    return f"{memory_path}#{thread_id}"


async def load_watermark(store: BaseStore, user_id: str, memory_path: str) -> Watermark | None:
    """The watermark of the consolidation of `user_id` into `memory_path`, None before the
    first run (or when the stored value is unreadable, which is logged)."""
    item = await store.aget(_namespace(user_id), memory_path)
    if item is None:
        return None
    try:
        return Watermark.from_value(item.value)
    except ValueError:
        logger.warning("ignoring the unreadable consolidation watermark of %s", user_id)
        return None


async def _merged_up_to(
    store: BaseStore, user_id: str, memory_path: str, thread_id: str
) -> str | None:
    """The id of the last message of `thread_id` an earlier run merged, if any."""
    item = await store.aget(_cursor_namespace(user_id), _cursor_key(memory_path, thread_id))
    value = item.value.get("message_id") if item is not None else None
    return value if isinstance(value, str) else None


async def _record(
    store: BaseStore, user_id: str, memory_path: str, batch: Sequence[Mapping[str, Any]]
) -> Watermark | None:
    """Keep where each thread of `batch` was merged up to, then advance the stored watermark
    over the batch (from what is stored now: it never moves back)."""
    for entry in batch:
        if entry.get("message_id"):
            await store.aput(
                _cursor_namespace(user_id), _cursor_key(memory_path, entry["thread_id"]),
                {"message_id": entry["message_id"]}, index=False,
            )  # fmt: skip
    processed = [ThreadStamp(e["thread_id"], parse_time(e["updated_at"])) for e in batch]
    current = await load_watermark(store, user_id, memory_path)
    moved = advance(current, processed)
    if moved is not None and moved != current:
        await store.aput(_namespace(user_id), memory_path, moved.to_value(), index=False)
    return moved


# ------------------------------------------------------------------------ the graph


class ConsolidationState(TypedDict):
    """The consolidation graph's state: its messages and the batch being merged."""

    messages: Annotated[list[AnyMessage], add_messages]
    consolidation: NotRequired[dict[str, Any]]
    """This run's batch: `user_id`, `threads` (each `thread_id`, `updated_at` and the
    `message_id` merged up to) and `text` (whether any of them has a new message)."""


@dataclass(frozen=True)
class _Settings:
    memory_path: str
    threads: ThreadSource | None
    look_back: timedelta | None
    max_threads: int
    max_thread_chars: int
    claim_timeout: timedelta


def _own_ids() -> tuple[str | None, str | None]:
    """The graph id and thread id this run has on its server (from the run config)."""
    try:
        config = get_config()
    except RuntimeError:
        return None, None
    metadata = config.get("metadata") or {}
    configurable = config.get("configurable") or {}
    graph_id, thread_id = metadata.get("graph_id"), configurable.get("thread_id")
    return (str(graph_id) if graph_id else None, str(thread_id) if thread_id else None)


def _is_conversation(
    thread: ConversationThread, graph_id: str | None, thread_id: str | None
) -> bool:
    """Whether `thread` is a conversation to read: not this graph's own, not mid-run."""
    if thread.stamp.thread_id == thread_id or thread.status == "busy":
        return False
    return graph_id is None or thread.metadata.get("graph_id") != graph_id


def _entry(thread: ConversationThread) -> dict[str, Any]:
    """How a batch keeps a due thread: its id, its `updated_at`, its newest message id."""
    return {
        "thread_id": thread.stamp.thread_id,
        "updated_at": thread.stamp.updated_at.isoformat(),
        "message_id": thread.last_message_id,
    }


_FRESH = (RemoveMessage(id=REMOVE_ALL_MESSAGES),)
"""What a run's messages start with: each run's merge sees its own batch only (the run's
input, and earlier runs' messages on a thread cron's thread, are dropped from the state;
the thread's checkpoints keep them)."""


def _run_id(runtime: Any) -> str:
    """This run's id (a resumed run keeps it), or a new one for a run without an id."""
    info = getattr(runtime, "execution_info", None)
    run_id = getattr(info, "run_id", None)
    if not run_id:
        try:
            run_id = (get_config().get("metadata") or {}).get("run_id")
        except RuntimeError:
            run_id = None
    return str(run_id) if run_id else str(uuid.uuid4())


def _claim_key(memory_path: str) -> str:
    return f"{memory_path}#claim"


def _ended(user: str, text: str) -> dict[str, Any]:
    """The update of a run that ends in `gather`, answering `text`."""
    return {
        "messages": [*_FRESH, AIMessage(text)],
        "consolidation": {"user_id": user, "threads": [], "text": False},
    }


async def _due(settings: _Settings, store: BaseStore, user: str) -> list[DueConversation]:
    """The user's due conversations, oldest first, with their messages not merged yet."""
    path = settings.memory_path
    watermark = await load_watermark(store, user, path)
    floor = datetime.now(UTC) - settings.look_back if settings.look_back is not None else None
    source = settings.threads if settings.threads is not None else ServerThreads()
    graph_id, thread_id = _own_ids()
    until = watermark.time if watermark is not None else floor
    listed = [
        t for t in await source.newest_first(user, until=until)
        if _is_conversation(t, graph_id, thread_id)
    ]  # fmt: skip
    by_id = {t.stamp.thread_id: t for t in reversed(listed)}  # the newest listing wins
    stamps = select_due((t.stamp for t in listed), watermark, floor=floor,
                        limit=settings.max_threads)  # fmt: skip
    due = []
    for stamp in stamps:
        thread = by_id[stamp.thread_id]
        merged = await _merged_up_to(store, user, path, stamp.thread_id)
        due.append(DueConversation(thread, thread.after(merged)))
    return due


def _gather_node(settings: _Settings) -> Any:
    async def gather(state: ConsolidationState, runtime: Runtime) -> dict[str, Any]:
        """Claim the user's memory file, find the due conversations and hand them to the
        merge, or end the run (nothing due, or another run holds the claim)."""
        user = _user(runtime)
        if user is None:
            raise ConsolidationError(
                "consolidation needs a user: create the cron with "
                "config={'configurable': {'user_id': ...}}"
            )
        store = runtime.store
        if store is None:
            raise ConsolidationError(
                "consolidation needs a store (it keeps the memory and its watermark there)"
            )
        path, run_id = settings.memory_path, _run_id(runtime)
        claim = (_namespace(user), _claim_key(path))
        if not await aclaim(store, *claim, run_id=run_id, now=datetime.now(UTC),
                            hold_for=settings.claim_timeout):  # fmt: skip
            return _ended(user, "Another consolidation of this memory is running; it merges.")
        due = None
        try:
            due = await _due(settings, store, user)
        finally:
            if not due:  # nothing due, or the read failed (and goes on up): the claim is freed
                await arelease(store, *claim, run_id=run_id)
        if not due:
            return _ended(user, "Nothing new to consolidate.")
        batch = [_entry(d.thread) for d in due]
        text = any(d.new for d in due)
        update: dict[str, Any] = {
            "consolidation": {"user_id": user, "threads": batch, "text": text, "run_id": run_id}
        }
        if text:
            rendered = render_conversations(user, path, due, max_chars=settings.max_thread_chars)
            update["messages"] = [*_FRESH, HumanMessage(rendered)]
        else:
            update["messages"] = [*_FRESH, AIMessage("No new messages to consolidate.")]
        return update

    return gather


def _record_node(settings: _Settings) -> Any:
    async def record(state: ConsolidationState, runtime: Runtime) -> dict[str, Any]:
        """Keep how far the batch was merged, now that the merge has ended; give up the
        claim."""
        batch = state.get("consolidation") or {}
        store, user, path = runtime.store, batch.get("user_id"), settings.memory_path
        if store is not None and user and batch.get("threads"):
            await _record(store, user, path, batch["threads"])
            await arelease(store, _namespace(user), _claim_key(path), run_id=batch["run_id"])
        return {}

    return record


def _after_gather(state: ConsolidationState) -> str:
    batch = state.get("consolidation") or {}
    if not batch.get("threads"):
        return END
    return "merge" if batch.get("text") else "record"


def create_consolidation_agent(
    model: str | BaseChatModel,
    *,
    memory_path: str = DEFAULT_MEMORY_PATH,
    backend: BackendOrFactory | None = None,
    threads: ThreadSource | None = None,
    look_back: timedelta | None = None,
    max_threads: int = DEFAULT_MAX_THREADS,
    max_thread_chars: int = MAX_THREAD_CHARS,
    claim_timeout: timedelta = CLAIM_TIMEOUT,
    system_prompt: str | None = None,
    name: str = "consolidation_agent",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A graph that merges a user's recent conversations into their memory file.

    Args:
        model: The chat model that merges the facts (or a `provider:model` string).
        memory_path: The memory file, on `backend`.
        backend: Where the memory file lives; by default `user_memory_backend()`
            (`/memories/` in the store namespace `(user_id, "memories")`).
        threads: Where the user's threads are read; by default `ServerThreads()`, the
            server hosting the graph.
        look_back: How far back the *first* run reads (None: every thread of the user).
            Later runs read from the watermark, whatever this says and however often the
            cron fires.
        max_threads: Conversations one run merges at most (the oldest due first; the next
            run takes the rest).
        max_thread_chars: Text of one conversation the model gets at most (its end).
        claim_timeout: How long a run's claim of the memory file keeps other runs of the
            same user and file out (`fathom.memory.claims`) when it dies without giving the
            claim up; make it longer than a merge takes.
        system_prompt: Replaces `CONSOLIDATION_PROMPT` (`{memory_path}` is filled in).
        name: The graph's name.

    Raises:
        ValueError: `max_threads` or `max_thread_chars` below 1, a negative `look_back`, a
            `claim_timeout` that is not positive.
    """
    if max_threads < 1 or max_thread_chars < 1:
        raise ValueError("max_threads and max_thread_chars must be at least 1")
    if look_back is not None and look_back < timedelta(0):
        raise ValueError(f"look_back must not be negative, not {look_back!r}")
    if claim_timeout <= timedelta(0):
        raise ValueError(f"claim_timeout must be positive, not {claim_timeout!r}")
    settings = _Settings(
        memory_path, threads, look_back, max_threads, max_thread_chars, claim_timeout
    )
    files = backend if backend is not None else user_memory_backend()
    prompt = (system_prompt or CONSOLIDATION_PROMPT).replace("{memory_path}", memory_path)
    stack: list[AgentMiddleware[Any, Any, Any]] = [
        MemoryMiddleware(backend=files, sources=[memory_path]),
        FilesystemMiddleware(backend=files, tools=list(MERGE_TOOLS)),
        PatchToolCallsMiddleware(),
        PromptAssemblyMiddleware(),
    ]
    merge = create_agent(resolve_model(model), system_prompt=prompt, middleware=stack, name="merge")
    graph = StateGraph(ConsolidationState)
    graph.add_node("gather", _gather_node(settings))
    graph.add_node("merge", merge)
    graph.add_node("record", _record_node(settings))
    graph.add_edge(START, "gather")
    graph.add_conditional_edges("gather", _after_gather, ["merge", "record", END])
    graph.add_edge("merge", "record")
    graph.add_edge("record", END)
    return graph.compile(name=name)
