"""`fathom --server URL [--thread ID]`: the interactive session against a thread on a server.

The agent runs on a `fathom serve` (or any Agent Protocol server, such as `langgraph dev`);
this process only shows it and answers its approvals. `RemoteSession` offers what the
interactive loop uses of a local `Session` (`run`, `pending`, `display`, `threads`,
`setup.model_name`), over the LangGraph SDK client:

- a turn is one streamed run (`stream_mode` updates, messages-tuple and custom, subgraphs
  included); each event's messages are turned back into LangChain messages and go through the
  same `EventTranslator` and `Display` as a local turn, so the screen looks the same;
- approvals are the thread's interrupts, answered with `command={"resume": ...}`;
- Ctrl-C cancels the run on the server; a server that stops answering ends the turn with an
  error message, and the thread is still there once the server is back.

What changes local checkpoints or files (/undo, /compact, /model) is refused
(`supports_local_ops = False`): the thread lives on the server.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import logging
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, LLMResult

from fathom.cli.display import Display, RunStatus
from fathom.cli.session import PendingApproval, TurnResult, final_answer
from fathom.cli.startup import EXIT_APPROVAL, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, fail
from fathom.errors import FathomError
from fathom.middleware.async_subagents.transport import REMOTE_ERRORS
from fathom.project.events import EventTranslator
from fathom.project.threads import ThreadInfo
from fathom.usage import UNNAMED_AGENT, AgentTotals, AgentUsage

__all__ = ["RemoteSession", "RemoteSetup", "RemoteThreads", "ServerUnavailable", "attach"]

logger = logging.getLogger(__name__)

STREAM_MODES = ["updates", "messages-tuple", "custom"]
CONNECT_TIMEOUT_S = 10.0
CONNECT_RETRIES = 1
LOCAL_ONLY_OPTIONS = ("model", "sandbox", "auto_approve")
"""Options of the local agent, which an attached session cannot honour."""
READ_TIMEOUT_S = 600.0
"""The longest silence a run's stream may have (a slow model call) before the turn fails."""


class ServerUnavailable(FathomError):
    """The server cannot be reached or refused the request; the message says which."""


def _connection_problem(url: str, error: BaseException) -> str:
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status in (401, 403):
        return f"{url} refused the request ({status}); set FATHOM_API_KEY to its API key"
    if status is not None:
        return f"{url} answered {status}: {error}"
    return f"cannot reach the server at {url} ({type(error).__name__}: {error}); is it running?"


def _client(url: str) -> Any:
    """A LangGraph SDK client for `url` (`$FATHOM_API_KEY` sent as `x-api-key`).

    Its transport retries a refused connection once, not the SDK's five times: with the
    SDK's own reconnects of a dropped run stream (about 20 s of back-off, which rides out a
    server restart), a server that is gone ends the turn in seconds rather than a minute.
    """
    import httpx
    from langgraph_sdk import get_sync_client
    from langgraph_sdk.client import SyncLangGraphClient

    key = os.environ.get("FATHOM_API_KEY")
    sdk = get_sync_client(url=url, headers={"x-api-key": key} if key else None)
    base = sdk.http.client  # the SDK's headers (user agent, API key) and URL
    http = httpx.Client(
        base_url=base.base_url, headers=base.headers,
        transport=httpx.HTTPTransport(retries=CONNECT_RETRIES),
        timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
    )  # fmt: skip
    base.close()
    return SyncLangGraphClient(http)


def _message(value: Any) -> Any:
    """A message dict from the server as a LangChain message; anything else unchanged."""
    if isinstance(value, Mapping) and isinstance(value.get("type"), str):
        try:
            return messages_from_dict([{"type": value["type"], "data": dict(value)}])[0]
        except (ValueError, TypeError, KeyError):  # not a message after all
            return value
    return value


def _with_messages(update: Any) -> Any:
    """An `updates` payload with its `messages` turned into LangChain messages."""
    if isinstance(update, list):
        return [_with_messages(one) for one in update]
    if not isinstance(update, Mapping):
        return update
    result = dict(update)
    messages = result.get("messages")
    if isinstance(messages, list):
        result["messages"] = [_message(m) for m in messages]
    elif isinstance(messages, Mapping):
        result["messages"] = _message(messages)
    return result


def stream_items(event: str, data: Any) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """The `(namespace, mode, data)` item, as LangGraph's `astream` gives it, of one SSE event
    (`updates|tools:1|model` → namespace `("tools:1", "model")`); none for other events."""
    mode, *namespace = event.split("|")
    if mode == "messages" and isinstance(data, list) and len(data) == 2:
        yield tuple(namespace), "messages", (_message(data[0]), data[1] or {})
    elif mode == "updates" and isinstance(data, Mapping):
        yield tuple(namespace), "updates", {k: _with_messages(v) for k, v in data.items()}
    elif mode == "custom":
        yield tuple(namespace), "custom", data


def _pending(state: Mapping[str, Any]) -> list[PendingApproval]:
    """The approvals in a thread state's interrupts (top-level, or per task on older servers)."""
    interrupts = list(state.get("interrupts") or [])
    if not interrupts:
        for task in state.get("tasks") or []:
            interrupts.extend(task.get("interrupts") or [])
    pending = []
    for interrupt in interrupts:
        if not isinstance(interrupt, Mapping):
            continue
        value = interrupt.get("value")
        value = value if isinstance(value, Mapping) else {}
        pending.append(PendingApproval(
            interrupt_id=str(interrupt.get("id") or interrupt.get("interrupt_id") or ""),
            action_requests=list(value.get("action_requests", [])),
            review_configs=list(value.get("review_configs", [])),
        ))  # fmt: skip
    return pending


def _values(state: Mapping[str, Any]) -> dict[str, Any]:
    values = dict(state.get("values") or {}) if isinstance(state.get("values"), Mapping) else {}
    if isinstance(values.get("messages"), list):
        values["messages"] = [m for m in map(_message, values["messages"])
                              if isinstance(m, BaseMessage)]  # fmt: skip
    return values


def _timestamp(value: Any) -> float:
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


@dataclass
class RemoteSetup:
    """What the loop shows of the agent: here, the server's assistant."""

    server_url: str
    assistant_id: str
    model_name: str
    """The assistant's graph id (the model is chosen by the server's graph)."""
    mcp: Any = None
    sandbox: str = "none"
    project_dir: Path | None = None
    """None: the agent's files are on the server (`@path` and history use `--project`)."""


class RemoteThreads:
    """The server's threads, with the methods of the local `ThreadIndex` the loop uses."""

    def __init__(self, client: Any, model_name: str, url: str) -> None:
        self._client = client
        self._model = model_name
        self._url = url

    def _info(self, thread: Mapping[str, Any]) -> ThreadInfo:
        metadata = thread.get("metadata") or {}
        return ThreadInfo(
            thread_id=str(thread["thread_id"]), title=str(metadata.get("title") or ""),
            created=_timestamp(thread.get("created_at")),
            updated=_timestamp(thread.get("updated_at")),
            model=str(metadata.get("graph_id") or self._model), project="",
        )  # fmt: skip

    def new_thread_id(self) -> str:
        """A new thread created on the server; its id."""
        thread = self._client.threads.create(metadata={"created_by": "fathom"})
        return str(thread["thread_id"])

    def get(self, thread_id: str) -> ThreadInfo | None:
        """The thread with this id, or `None` when the server has none."""
        try:
            return self._info(self._client.threads.get(thread_id))
        except REMOTE_ERRORS as error:
            if getattr(getattr(error, "response", None), "status_code", None) in (404, 422):
                return None
            raise

    def list(self) -> list[ThreadInfo]:
        """The server's threads, most recently updated first (at most 100); none, with a
        message on stderr, when the server cannot be reached."""
        try:
            found = self._client.threads.search(limit=100, sort_by="updated_at",
                                                sort_order="desc")  # fmt: skip
        except REMOTE_ERRORS as error:  # the server went away
            print(f"fathom: {_connection_problem(self._url, error)}", file=sys.stderr)
            return []
        return [self._info(t) for t in found]

    def latest(self) -> ThreadInfo | None:
        """The most recently updated thread, or `None`."""
        threads = self.list()
        return threads[0] if threads else None

    def touch(self, thread_id: str, *, first_message: str) -> None:
        """Give a thread without a title its first message as the title."""
        info = self.get(thread_id)
        if info is not None and not info.title and first_message.strip():
            title = " ".join(first_message.split())[:200]
            self._client.threads.update(thread_id, metadata={"title": title})


def _count_call(usage: AgentUsage, message: AIMessage) -> None:
    """Add one model call (and its tokens) of a message the server streamed to `usage`."""
    run_id = uuid.uuid4()
    name = message.name or UNNAMED_AGENT
    usage.on_chat_model_start({}, [[]], run_id=run_id, metadata={"lc_agent_name": name})
    usage.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]), run_id=run_id)


def _model_of(message: AIMessage) -> str | None:
    """The model that wrote `message`, as its provider reported it (None when unknown)."""
    name = (message.response_metadata or {}).get("model_name")
    return str(name) if name else None


class RemoteSession:
    """A session whose agent runs on an Agent Protocol server (see the module's docstring)."""

    supports_local_ops = False
    db_path = None

    def __init__(self, client: Any, setup: RemoteSetup, display: Display) -> None:
        self._client = client
        self.setup = setup
        self.display = display
        self.threads = RemoteThreads(client, setup.model_name, setup.server_url)
        self._translators: dict[str, EventTranslator] = {}
        self._counted: dict[str, set[str]] = {}  # thread -> ids of model replies counted
        self._usage: dict[str, dict[tuple[str, str | None], AgentTotals]] = {}
        # The files in the state of the thread last run or asked about: what approval diffs
        # compare against (`read_current`). None when that state has no `files`.
        self._state_files: Mapping[str, Any] | None = None

    @classmethod
    def connect(cls, url: str, display: Display, assistant: str | None = None) -> RemoteSession:
        """Connect to `url` and choose the assistant (`assistant`: an assistant id, graph id
        or name; default the first). Raises `ServerUnavailable`."""
        client = _client(url)
        try:
            assistants = client.assistants.search(limit=100)
        except REMOTE_ERRORS as error:  # down, refused, not an Agent Protocol server
            raise ServerUnavailable(_connection_problem(url, error)) from error
        if not assistants:
            raise ServerUnavailable(f"{url} serves no assistants")
        if assistant is None:
            chosen = assistants[0]
        else:
            chosen = next((a for a in assistants if assistant in (
                a.get("assistant_id"), a.get("graph_id"), a.get("name"))), None)
            if chosen is None:
                names = ", ".join(sorted({str(a.get("graph_id")) for a in assistants}))
                raise ServerUnavailable(f"{url} has no assistant {assistant!r}; it has: {names}")
        setup = RemoteSetup(server_url=url, assistant_id=str(chosen["assistant_id"]),
                            model_name=str(chosen.get("graph_id") or chosen["assistant_id"]))
        return cls(client, setup, display)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.http.client.close()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(self, thread_id: str, message: str | None = None, *, resume: Any = None) -> TurnResult:
        """Run one turn on the server: a new `message`, or a `resume` value for its approvals.

        Ctrl-C cancels the run on the server (status "interrupted"); a lost connection or a
        failed run is status "error", with the reason in `detail`.
        """
        usage = AgentUsage()
        self.display.run_started(thread_id=thread_id, model=self.setup.model_name, usage=usage)
        status: RunStatus = "done"
        detail = ""
        run_id: str | None = None
        try:
            if message is not None:
                self.threads.touch(thread_id, first_message=message)
            kwargs: dict[str, Any] = (
                {"command": {"resume": resume}} if resume is not None
                else {"input": {"messages": [{"role": "user", "content": message or ""}]}}
            )  # fmt: skip
            translator = self._translators.setdefault(thread_id, EventTranslator())
            counted = self._counted.setdefault(thread_id, set())
            parts = self._client.runs.stream(
                thread_id, self.setup.assistant_id, stream_mode=STREAM_MODES,
                stream_subgraphs=True, **kwargs,
            )  # fmt: skip
            # Closed however the turn stops (Ctrl-C included), and its connection with it.
            with contextlib.closing(parts):
                for part in parts:
                    if part.event == "metadata" and isinstance(part.data, Mapping):
                        run_id = str(part.data.get("run_id") or "") or None
                    elif part.event == "error":
                        status, detail = "error", _run_error(part.data)
                    for item in stream_items(part.event, part.data):
                        self._count(thread_id, usage, item, counted)
                        for event in translator.translate(*item):
                            self.display.event(event)
        except KeyboardInterrupt:
            status, detail = "interrupted", "stopped by Ctrl-C; the run was cancelled on the server"
            self._cancel(thread_id, run_id)
        except BrokenPipeError:
            raise
        except REMOTE_ERRORS as error:  # lost connection, refused run: shown, the loop goes on
            status = "error"
            detail = _connection_problem(self.setup.server_url, error)
        values: dict[str, Any] = {}
        approvals: list[PendingApproval] = []
        try:
            state = self._client.threads.get_state(thread_id)
            values = _values(state)
            self._remember_files(values)
            approvals = _pending(state) if status == "done" else []
        except REMOTE_ERRORS as error:  # the server went away: the turn already says so
            if status == "done":
                status, detail = "error", _connection_problem(self.setup.server_url, error)
        if approvals:
            status = "approval"
            names = [r.get("name", "?") for a in approvals for r in a.action_requests]
            detail = "approval needed for " + ", ".join(names)
        self.display.run_finished(status=status, usage=usage, detail=detail)
        return TurnResult(status=status, answer=final_answer(values), detail=detail,
                          approvals=approvals, values=values, usage=usage)

    def _remember_files(self, values: Mapping[str, Any]) -> None:
        files = values.get("files")
        self._state_files = files if isinstance(files, Mapping) else None

    def read_current(self, path: str) -> str | None:
        """A file's current text for an approval's diff, from the thread's state on the
        server (where a deep agent's default backend keeps its files).

        Raises `CurrentUnknown` when the state does not hold the file: the server's agent
        may keep it on its own disk, which this client cannot read, so the view shows the
        proposed content instead of claiming the file is new.
        """
        from fathom.backends.utils import text_view
        from fathom.cli.approval_view import CurrentUnknown

        entry = (self._state_files or {}).get(path)
        if not isinstance(entry, Mapping) or "content" not in entry:
            raise CurrentUnknown("the file is not in the thread's state on the server (the "
                                 "server's agent may keep it on its own disk)")
        text = text_view(entry).text  # pyright: ignore[reportArgumentType]
        if text is None:
            raise CurrentUnknown("the file is binary")
        return text

    def usage_of(self, thread_id: str) -> dict[tuple[str, str | None], AgentTotals]:
        """Calls and tokens of this session's turns on `thread_id`, per agent and model."""
        return {key: AgentTotals(**vars(t)) for key, t in self._usage.get(thread_id, {}).items()}

    def _count(self, thread_id: str, usage: AgentUsage, item: tuple[tuple[str, ...], str, Any],
               counted: set[str]) -> None:  # fmt: skip
        _namespace, mode, data = item
        if mode != "updates":
            return
        for update in data.values():
            for one in update if isinstance(update, list) else [update]:
                messages = one.get("messages") if isinstance(one, Mapping) else None
                for message in messages if isinstance(messages, list) else []:
                    # A resumed run sends the reply it paused at again: counted once.
                    if isinstance(message, AIMessage) and (message.id or "") not in counted:
                        counted.add(message.id or str(uuid.uuid4()))
                        _count_call(usage, message)
                        key = (message.name or UNNAMED_AGENT, _model_of(message))
                        totals = self._usage.setdefault(thread_id, {}).setdefault(
                            key, AgentTotals())
                        tokens = message.usage_metadata or {}
                        totals.add(AgentTotals(1, tokens.get("input_tokens", 0),
                                               tokens.get("output_tokens", 0)))

    def _cancel(self, thread_id: str, run_id: str | None) -> None:
        if run_id is None:
            return
        try:
            self._client.runs.cancel(thread_id, run_id)
        except REMOTE_ERRORS as error:  # the run may have ended meanwhile
            logger.info("cancelling run %s: %s", run_id, error)

    def call_records(self, thread_id: str) -> list[Any]:
        """The call records the server kept on the thread (its `fathom_calls` metadata);
        none when the server cannot be reached (the message says so)."""
        from fathom.measure.calls import CALLS_METADATA_KEY, records_from_json

        try:
            thread = self._client.threads.get(thread_id)
        except REMOTE_ERRORS as error:  # the server went away, or the thread is not there yet
            self.display.error(_connection_problem(self.setup.server_url, error))
            return []
        found = (thread.get("metadata") or {}).get(CALLS_METADATA_KEY)
        return records_from_json(found if isinstance(found, list) else [])

    def pending(self, thread_id: str) -> list[PendingApproval]:
        """Approvals the thread is waiting for, from its state on the server; none when the
        server cannot be reached (the message says so, and the next turn fails the same way)."""
        try:
            state = self._client.threads.get_state(thread_id)
            self._remember_files(_values(state))
            return _pending(state)
        except REMOTE_ERRORS as error:  # the server went away
            self.display.error(_connection_problem(self.setup.server_url, error))
            return []


def _run_error(data: Any) -> str:
    if isinstance(data, Mapping):
        name, text = data.get("error"), data.get("message")
        return f"{name}: {text}" if name and text else str(text or name or data)
    return str(data)


def attach(args: argparse.Namespace) -> int:
    """`fathom --server URL [--thread ID] [--assistant ID]`: the interactive session on a
    server's thread; with piped stdin, its text is one turn, as `fathom run` would do."""
    from fathom.cli.display import PlainDisplay, make_display
    from fathom.cli.scripting import ScriptingError, read_stdin_task, stdin_is_piped

    url = str(args.server).rstrip("/")
    local = [f"--{name.replace('_', '-')}" for name in LOCAL_ONLY_OPTIONS
             if getattr(args, name, None)]  # fmt: skip
    if local:  # silently ignored, an --auto-approve would seem to apply and would not
        return fail(f"fathom: {', '.join(local)} cannot be used with --server: the server's "
                     "graph has its own model, tools, sandbox and approvals")
    piped = stdin_is_piped()
    display: Any = PlainDisplay(sys.stderr) if piped else make_display(
        bool(getattr(args, "plain", False)))
    try:
        session = RemoteSession.connect(url, display, getattr(args, "assistant", None))
    except ServerUnavailable as error:
        return fail(f"fathom: {error}")
    with session:
        task = None
        if piped:  # read once the server answered, so a server that is down is said first
            try:
                task = read_stdin_task()
            except ScriptingError as error:
                return fail(str(error))
        try:
            thread_id, existed = _thread_for(args, session)
        except ServerUnavailable as error:
            return fail(f"fathom: {error}")
        except REMOTE_ERRORS as error:  # the server went away between two calls
            return fail(f"fathom: {_connection_problem(url, error)}")
        if task is not None:
            return _one_turn(session, thread_id, task)
        state = "resumed" if existed else "new"
        print(f"fathom · {session.setup.model_name} · thread {thread_id} ({state}) · {url}")
        print(f"attached to {url}: the agent, its files and its commands are on the server")
        return _loop(args, session, thread_id, existed)


def _thread_for(args: argparse.Namespace, session: RemoteSession) -> tuple[str, bool]:
    thread = getattr(args, "thread", None)
    if thread:
        if session.threads.get(thread) is None:
            raise ServerUnavailable(f"{session.setup.server_url} has no thread {thread}")
        return thread, True
    if getattr(args, "resume", False):
        latest = session.threads.latest()
        if latest is None:
            raise ServerUnavailable(f"{session.setup.server_url} has no thread to resume yet")
        return latest.thread_id, True
    return session.threads.new_thread_id(), False


def _one_turn(session: RemoteSession, thread_id: str, task: str) -> int:
    if session.pending(thread_id):
        return fail(f"thread {thread_id} is waiting for an approval; answer it with "
                     f"`fathom --server {session.setup.server_url} --thread {thread_id}`")
    result = session.run(thread_id, task)
    if result.status == "done":
        print(result.answer)
        return EXIT_OK
    if result.status == "approval":
        print(f"{result.detail} on thread {thread_id}; answer it with `fathom --server "
              f"{session.setup.server_url} --thread {thread_id}`", file=sys.stderr)
        return EXIT_APPROVAL
    return EXIT_INTERRUPTED if result.status == "interrupted" else EXIT_FAILED


def _loop(args: argparse.Namespace, session: RemoteSession, thread_id: str, existed: bool) -> int:
    """The interactive loop of `fathom.cli.interactive`, on the remote session."""
    from fathom.cli import interactive
    from fathom.cli.approvals import NoTerminalForApproval

    try:
        return interactive._talk(args, session, thread_id, existed)  # pyright: ignore[reportPrivateUsage]
    except NoTerminalForApproval:
        return EXIT_APPROVAL
