"""`FathomACPAgent`: the `fathom` command's agent as an Agent Client Protocol agent.

An editor (Zed, JetBrains) starts `fathom acp` and talks JSON-RPC to it over stdio
(https://agentclientprotocol.com). Each session works on the project in its `cwd` with the
same set-up as the `fathom` command (`fathom.toml`, memory, skills, subagents) and is a
thread of that project's threads database, so it survives restarts:

- `session/new` builds the agent, connecting the MCP servers the editor hands over;
- `session/prompt` streams the run: text as message chunks, tool calls as tool-call
  updates (diffs for `write_file` / `edit_file`), todos as plan updates, approvals as
  permission requests; it ends with `end_turn`, or `cancelled` after `session/cancel`;
- an interrupt that is not an approval (a graph's own `interrupt(value)`) is shown as a
  message and ends the turn; the next prompt's text is its resume value;
- `session/load` replays a stored session's conversation;
- modes (`ask`, `accept_edits`, `auto`) decide which calls ask first; the `model` option
  switches the model; both rebuild the agent and are kept with the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    update_agent_message_text,
    update_agent_thought_text,
    update_user_message,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from fathom.errors import FathomError
from fathom.protocols.acp.content import UnsupportedContentError, from_acp, to_acp
from fathom.protocols.acp.mcp import load_mcp_tools
from fathom.protocols.acp.sessions import SessionRecord, SessionStore
from fathom.protocols.acp.updates import (
    plan_update,
    tool_call_start,
    tool_call_title,
    tool_result_update,
)

__all__ = ["MODES", "AcpOptions", "FathomACPAgent"]

logger = logging.getLogger(__name__)

MODES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "ask": ("Ask", "Ask before changing files or running commands", ()),
    "accept_edits": ("Accept edits", "Change files without asking; ask before commands",
                     ("write_file", "edit_file", "delete")),
    "auto": ("Auto", "Run every tool without asking", ("*",)),
}  # fmt: skip
"""Mode id -> (name, description, tools it approves up front; "*" for all)."""

_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow this tool", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
]
_REJECTED = "The person rejected this tool call in the editor; do not retry it unasked."
RECURSION_LIMIT = 1000


@dataclass(frozen=True)
class AcpOptions:
    """Command-line choices that apply to every session (as for the `fathom` command)."""

    model: str | None = None
    models: tuple[str, ...] = ()
    """Extra models offered in the editor's model picker."""
    sandbox: str | None = None
    auto_approve: tuple[str, ...] = ()
    home: Path | None = None


class _Cancelled(FathomError):
    """The editor cancelled the turn while a permission request was open."""


@dataclass
class _Session:
    record: SessionRecord
    project_dir: Path
    db_path: Path
    checkpointer: Any
    setup: Any = None
    agent: Any = None
    mcp: Any = None
    mcp_tools: list[Any] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    always: set[str] = field(default_factory=set)
    task: asyncio.Task[Any] | None = None
    cancel_requested: bool = False

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.record.session_id},
                "recursion_limit": RECURSION_LIMIT}  # fmt: skip


def _error(code: int, message: str) -> RequestError:
    """A JSON-RPC error whose message says what went wrong (also as `data.detail`)."""
    return RequestError(code, message, {"detail": message})


class FathomACPAgent:
    """An ACP agent (`acp.Agent`) serving the `fathom` command's agent, one per session.

    Checkpointers are opened per project database on first use; `aclose` closes them.
    """

    def __init__(self, options: AcpOptions | None = None) -> None:
        self.options = options or AcpOptions()
        self._conn: Client | None = None
        self._sessions: dict[str, _Session] = {}
        self._savers: dict[Path, Any] = {}
        self._exits = contextlib.AsyncExitStack()

    def on_connect(self, conn: Client) -> None:
        """Keep the client connection, for session updates and permission requests."""
        self._conn = conn

    async def aclose(self) -> None:
        """Cancel running prompts and close the checkpointers."""
        for session in self._sessions.values():
            await self._close(session)
        await self._exits.aclose()

    # --------------------------------------------------------------------- protocol

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        """Capabilities: stored sessions, images and embedded files, HTTP and SSE MCP."""
        from importlib.metadata import version

        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(name="fathom", title="fathom", version=version("fathom")),
        )  # fmt: skip

    async def new_session(self, cwd: str, additional_directories: Any = None,
                          mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        """A new session (a new thread) working on the project in `cwd`."""
        project_dir, db_path = self._project(cwd)
        from fathom.project.threads import ThreadIndex

        fresh = await asyncio.to_thread(lambda: ThreadIndex(db_path).new_thread_id())
        session_id = fresh + uuid.uuid4().hex[:8]
        record = SessionRecord(session_id, str(project_dir), "ask", "")
        session = await self._open(record, project_dir, db_path, mcp_servers or [])
        self._sessions[session_id] = session
        return NewSessionResponse(session_id=session_id, modes=self._modes(session),
                                  config_options=self._config_options(session))  # fmt: skip

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        """Reopen a stored session and replay its conversation as session updates."""
        project_dir, db_path = self._project(cwd)
        record = await SessionStore(db_path).aget(session_id)
        if record is None:
            raise _error(-32002, f"no session {session_id!r} in {project_dir}; start a new one")
        old = self._sessions.pop(session_id, None)
        if old is not None:
            await self._close(old)
        session = await self._open(record, project_dir, db_path, mcp_servers or [])
        self._sessions[session_id] = session
        await self._replay(session)
        return LoadSessionResponse(modes=self._modes(session),
                                   config_options=self._config_options(session))  # fmt: skip

    async def set_session_mode(self, mode_id: str, session_id: str,
                               **kwargs: Any) -> SetSessionModeResponse:
        """Switch the approval mode; the agent is rebuilt with the new approvals."""
        session = self._session(session_id)
        await self._set_mode(session, mode_id)
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        """Set the `mode` or `model` option; the agent is rebuilt with it."""
        session = self._session(session_id)
        if not isinstance(value, str):
            raise _error(-32602, f"option {config_id!r} takes a string value")
        if config_id == "mode":
            await self._set_mode(session, value)
        elif config_id == "model":
            choices = self._model_choices(session)
            if value not in choices:
                raise _error(-32602, f"unknown model {value!r}; choose one of "
                             f"{', '.join(choices)}")  # fmt: skip
            await self._rebuild(session, model=value)
        else:
            raise _error(-32602, f"unknown option {config_id!r}; options are mode and model")
        return SetSessionConfigOptionResponse(config_options=self._config_options(session))

    async def prompt(self, prompt: list[Any], session_id: str,
                     **kwargs: Any) -> PromptResponse:
        """Run one turn; `end_turn` when it finished, `cancelled` after `session/cancel`."""
        session = self._session(session_id)
        try:
            content = from_acp(prompt, session.project_dir)
        except UnsupportedContentError as error:
            raise _error(-32602, str(error)) from None
        if session.task is not None and not session.task.done():
            raise _error(-32600, "a prompt is already running in this session; wait for it "
                         "or cancel it first")  # fmt: skip
        session.cancel_requested = False
        task = asyncio.ensure_future(self._guarded_turn(session, content))
        session.task = task
        try:
            await task
        except asyncio.CancelledError:
            if not session.cancel_requested:
                task.cancel()
                raise
        except _Cancelled:
            pass
        except RequestError:
            raise
        except Exception as error:  # boundary: the run failed; say so, the thread is kept
            logger.exception("turn failed in session %s", session_id)
            raise _error(-32603, f"the run failed: {type(error).__name__}: {error}. "
                         "What finished is kept; send another prompt to go on.") from None
        if session.cancel_requested:
            session.record.stopped = True
            await SessionStore(session.db_path).asave(session.record)
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's running turn; what finished is kept in the thread."""
        session = self._sessions.get(session_id)
        if session is None or session.task is None or session.task.done():
            return
        session.cancel_requested = True
        session.task.cancel()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        """No authentication: model keys come from the environment, as for `fathom`."""
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # --------------------------------------------------------------------- sessions

    def _project(self, cwd: str) -> tuple[Path, Path]:
        from fathom.project.threads import threads_db_path

        project_dir = Path(cwd).expanduser()
        if not project_dir.is_absolute() or not project_dir.is_dir():
            raise _error(-32602, f"cwd {cwd!r} is not an existing absolute directory")
        project_dir = project_dir.resolve()
        return project_dir, threads_db_path(project_dir, self._home())

    def _home(self) -> Path:
        return self.options.home or Path.home()

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise _error(-32002, f"unknown session {session_id!r}; create or load it first")
        return session

    async def _saver(self, db_path: Path) -> Any:
        if db_path not in self._savers:
            from fathom.project.checkpoints import CancelSafeSqliteSaver

            saver = CancelSafeSqliteSaver.from_conn_string(str(db_path))
            self._savers[db_path] = await self._exits.enter_async_context(saver)
        return self._savers[db_path]

    async def _open(self, record: SessionRecord, project_dir: Path, db_path: Path,
                    mcp_servers: list[Any]) -> _Session:
        session = _Session(record, project_dir, db_path, await self._saver(db_path))
        loaded = await load_mcp_tools(mcp_servers)
        session.mcp, session.mcp_tools = loaded, loaded.tools
        session.notices = list(loaded.problems)
        async with contextlib.AsyncExitStack() as on_failure:
            # cleanup: a session that fails to build closes its MCP servers (re-raised)
            on_failure.push_async_callback(loaded.aclose)
            await self._rebuild(session, model=record.model or None)
            on_failure.pop_all()  # built: the session owns them now
        return session

    async def _close(self, session: _Session) -> None:
        if session.task is not None:
            session.task.cancel()
        if session.mcp is not None:
            await session.mcp.aclose()

    async def _rebuild(self, session: _Session, *, model: str | None = None,
                       mode: str | None = None) -> None:
        """Build the session's agent from the project's set-up, the model and the mode.

        Raises a JSON-RPC error with the configuration problem (and keeps the old agent).
        """
        from fathom.project.build import (
            AgentSetup,
            ModelSetupError,
            build_agent,
            build_model,
            choose_model,
        )
        from fathom.project.config import ConfigError, load_config, project_sources

        mode = mode or session.record.mode
        home = self._home()
        try:
            config = load_config(session.project_dir, home)
            name = model or choose_model(self.options.model, config)
            base = AgentSetup(
                project_dir=session.project_dir, home=home, config=config,
                sources=project_sources(session.project_dir, home), model_name=name,
                model=build_model(name, config),
                sandbox=self.options.sandbox or config.sandbox,  # type: ignore[arg-type]
                auto_approve=list(self.options.auto_approve), tools=list(session.mcp_tools),
            )  # fmt: skip
            gated = base.approvals()  # checks the names, too
            extra = MODES[mode][2]
            approved = list(gated) if "*" in extra else [t for t in extra if t in gated]
            base.auto_approve = [*base.auto_approve, *approved]
            agent = build_agent(base, session.checkpointer)
        except (ConfigError, ModelSetupError, RuntimeError, ValueError) as error:
            raise _error(-32602, f"cannot set up the agent for {session.project_dir}: "
                         f"{error}") from None  # fmt: skip
        session.setup, session.agent = base, agent
        session.record.model, session.record.mode = name, mode
        await SessionStore(session.db_path).asave(session.record)

    async def _set_mode(self, session: _Session, mode_id: str) -> None:
        if mode_id not in MODES:
            raise _error(-32602, f"unknown mode {mode_id!r}; modes are {', '.join(MODES)}")
        await self._rebuild(session, model=session.record.model, mode=mode_id)

    def _modes(self, session: _Session) -> SessionModeState:
        return SessionModeState(
            current_mode_id=session.record.mode,
            available_modes=[SessionMode(id=key, name=name, description=text)
                             for key, (name, text, _) in MODES.items()],
        )  # fmt: skip

    def _model_choices(self, session: _Session) -> list[str]:
        import os

        from fathom.project.build import DEFAULT_MODELS, KEY_VARIABLES

        choices = [session.record.model, *(self.options.models)]
        if self.options.model:
            choices.append(self.options.model)
        if session.setup is not None and session.setup.config.model:
            choices.append(session.setup.config.model)
        choices += [DEFAULT_MODELS[p] for p, var in KEY_VARIABLES.items() if os.environ.get(var)]
        return list(dict.fromkeys(c for c in choices if c))

    def _config_options(self, session: _Session) -> list[Any]:
        mode = SessionConfigOptionSelect(
            id="mode", name="Mode", category="mode", type="select",
            current_value=session.record.mode,
            options=[SessionConfigSelectOption(value=key, name=name, description=text)
                     for key, (name, text, _) in MODES.items()],
        )  # fmt: skip
        model = SessionConfigOptionSelect(
            id="model", name="Model", category="model", type="select",
            current_value=session.record.model,
            options=[SessionConfigSelectOption(value=m, name=m)
                     for m in self._model_choices(session)],
        )  # fmt: skip
        return [mode, model]

    # --------------------------------------------------------------------- turns

    async def _send(self, session: _Session, update: Any) -> None:
        assert self._conn is not None, "no client connection"
        await self._conn.session_update(session_id=session.record.session_id, update=update)

    async def _guarded_turn(self, session: _Session, content: list[dict[str, Any]]) -> None:
        from fathom.project.threads import ThreadIndex
        from fathom.runs import ThreadBusyError, thread_file_lock

        text = " ".join(b["text"] for b in content if b.get("type") == "text")
        record, project = session.record, session.project_dir
        await asyncio.to_thread(lambda: ThreadIndex(session.db_path).touch(
            record.session_id, first_message=text, model=record.model, project=project,
        ))  # fmt: skip
        try:
            with thread_file_lock(session.db_path.parent / "locks", session.record.session_id):
                await self._turn(session, content)
        except ThreadBusyError as error:
            raise _error(-32600, str(error)) from None

    async def _turn(self, session: _Session, content: list[dict[str, Any]]) -> None:
        from langgraph.types import Command

        from fathom.project.events import EventTranslator
        from fathom.runs import has_unfinished_step

        for notice in session.notices:
            await self._send(session, update_agent_message_text(f"Note: {notice}\n\n"))
        session.notices = []
        translator = EventTranslator()
        agent = session.agent
        state = await agent.aget_state(session.config)
        _mark_seen(translator, state)
        payload: Any = {"messages": [{"role": "user", "content": content}]}
        if state.interrupts and _questions(state):  # the graph asked; this prompt answers
            text = " ".join(b["text"] for b in content if b.get("type") == "text")
            payload = await self._decide(session, state, reply=text)
        elif state.interrupts:  # an approval left open (cancelled, or another process)
            await self._stream(session, translator, await self._decide(session, state))
        elif has_unfinished_step(state) and not session.record.stopped:
            await self._stream(session, translator, None)  # finish a killed run first
        session.record.stopped = False
        await SessionStore(session.db_path).asave(session.record)
        while True:
            await self._stream(session, translator, payload)
            state = await agent.aget_state(session.config)
            if not state.interrupts:
                return
            questions = _questions(state)
            if questions:  # ends the turn; the next prompt is the answer
                for value in questions:
                    await self._send(session, update_agent_message_text(_question_text(value)))
                return
            payload = await self._decide(session, state)
            if not isinstance(payload, Command):
                return

    async def _stream(self, session: _Session, translator: Any, payload: Any) -> None:
        from fathom.project.events import TextDelta, TodosChanged, ToolFinished, ToolStarted

        async for namespace, mode, data in session.agent.astream(
            payload, session.config, stream_mode=["updates", "messages"], subgraphs=True,
            durability="sync",
        ):
            if mode == "messages" and not namespace:
                for thought in _reasoning(data[0]):
                    await self._send(session, update_agent_thought_text(thought))
            for event in translator.translate(namespace, mode, data):
                if event.lane is not None:
                    continue  # subagents work inside their `task` call
                if isinstance(event, TextDelta):
                    await self._send(session, update_agent_message_text(event.text))
                elif isinstance(event, ToolStarted):
                    old = await self._old_text(session, event.name, event.args)
                    await self._send(session, tool_call_start(
                        event.call_id, event.name, event.args, root=session.project_dir,
                        old_text=old))  # fmt: skip
                elif isinstance(event, ToolFinished):
                    await self._send(session, tool_result_update(
                        event.call_id, event.text, failed=event.is_error))  # fmt: skip
                elif isinstance(event, TodosChanged):
                    await self._send(session, plan_update(event.todos))

    def _approved_up_front(self, session: _Session, name: str) -> bool:
        """Whether a call of `name` runs without asking: "Always allow", the mode, or the
        command line's `--auto-approve` (for a graph whose own approvals ask for it)."""
        extra = MODES.get(session.record.mode, MODES["ask"])[2]
        return (name in session.always or "*" in extra or name in extra
                or name in self.options.auto_approve)  # fmt: skip

    async def _decide(self, session: _Session, state: Any, *,
                      reply: str | None = None) -> Any:
        """Ask the editor about each pending approval; the `Command` resuming them all.

        An interrupt that is not an approval (the graph's own `interrupt(value)`) is resumed
        with `reply`, the text of the prompt that answers it.
        """
        from langgraph.types import Command

        assert self._conn is not None, "no client connection"
        calls = _pending_calls(state)
        resume: dict[str, Any] = {}
        for interrupt in state.interrupts:
            if not _is_approval(interrupt.value):
                resume[interrupt.id] = reply or ""
                continue
            value = interrupt.value
            decisions = []
            for request in value.get("action_requests", []):
                name, args = str(request.get("name", "tool")), dict(request.get("args") or {})
                if self._approved_up_front(session, name):
                    decisions.append({"type": "approve"})
                    continue
                call_id = calls.pop((name, _key(args)), None) or f"{interrupt.id}:{name}"
                start = tool_call_start(call_id, name, args, root=session.project_dir,
                                        old_text=await self._old_text(session, name, args))
                answer = await self._conn.request_permission(
                    session_id=session.record.session_id, options=_OPTIONS,
                    tool_call=ToolCallUpdate(
                        tool_call_id=call_id, title=tool_call_title(name, args),
                        kind=start.kind, status="pending", content=start.content,
                        locations=start.locations, raw_input=args,
                    ),
                )  # fmt: skip
                outcome = answer.outcome
                if not isinstance(outcome, AllowedOutcome):
                    raise _Cancelled
                if outcome.option_id == "allow_always":
                    session.always.add(name)
                if outcome.option_id in ("allow_once", "allow_always"):
                    decisions.append({"type": "approve"})
                else:
                    decisions.append({"type": "reject", "message": _REJECTED})
            resume[interrupt.id] = {"decisions": decisions}
        return Command(resume=resume)

    async def _old_text(self, session: _Session, name: str,
                        args: dict[str, Any]) -> str | None:
        """The current text of the file a `write_file` call replaces (None: a new file):
        from the thread's `files` (a state backend), else from disk under the session's
        directory."""
        if name != "write_file":
            return None
        state = await session.agent.aget_state(session.config)
        path = str(args.get("file_path") or "")
        in_state = _state_file_text(state.values or {}, path)
        return in_state if in_state is not None else _disk_text(session.project_dir, name, args)

    async def _replay(self, session: _Session) -> None:
        """Send a stored conversation as the updates that showed it the first time."""
        state = await session.agent.aget_state(session.config)
        values = state.values or {}
        for message in values.get("messages", []):
            if isinstance(message, HumanMessage):
                for block in to_acp(message.content):
                    await self._send(session, update_user_message(block))
            elif isinstance(message, AIMessage):
                for block in to_acp(message.content):
                    await self._send(session, AgentMessageChunk(
                        session_update="agent_message_chunk", content=block))  # fmt: skip
                for call in message.tool_calls:
                    await self._send(session, tool_call_start(
                        str(call.get("id")), call["name"], dict(call["args"]),
                        root=session.project_dir))  # fmt: skip
            elif isinstance(message, ToolMessage):
                await self._send(session, tool_result_update(
                    message.tool_call_id, message.text, failed=message.status == "error"))
        if values.get("todos"):
            await self._send(session, plan_update(values["todos"]))


def _reasoning(chunk: Any) -> list[str]:
    """Reasoning text a provider streamed in the clear (shown as thoughts)."""
    blocks = getattr(chunk, "content_blocks", None) if isinstance(chunk, AIMessage) else None
    return [b["reasoning"] for b in blocks or []
            if b.get("type") == "reasoning" and b.get("reasoning")]  # fmt: skip


def _mark_seen(translator: Any, state: Any) -> None:
    """Let the translator skip messages the thread already had before this turn."""
    for _ in translator.translate((), "updates", {"replay": {"messages": list(
            (state.values or {}).get("messages", []))}}):  # fmt: skip
        pass


def _key(args: dict[str, Any]) -> str:
    import json

    return json.dumps(args, sort_keys=True, default=str)


def _pending_calls(state: Any) -> dict[tuple[str, str], str]:
    """Tool calls of the last AI message by (name, args), to link approvals to their cards."""
    for message in reversed((state.values or {}).get("messages", [])):
        if isinstance(message, AIMessage):
            return {(c["name"], _key(dict(c["args"]))): str(c.get("id"))
                    for c in message.tool_calls}  # fmt: skip
    return {}


def _is_approval(value: Any) -> bool:
    """Whether an interrupt's value is a `HumanInTheLoopMiddleware` approval request."""
    return isinstance(value, dict) and isinstance(value.get("action_requests"), list)


def _questions(state: Any) -> list[Any]:
    """The values of the pending interrupts that are not approvals (the graph's questions)."""
    return [i.value for i in state.interrupts if not _is_approval(i.value)]


def _question_text(value: Any) -> str:
    """How the editor is shown a graph's own interrupt; the next prompt answers it."""
    import json

    shown = value if isinstance(value, str) else json.dumps(value, default=str, indent=2)
    return f"\n\nThe agent is waiting for your answer:\n\n{shown}\n\n(Your next message is " \
        "the answer.)\n"


def _state_file_text(values: dict[str, Any], path: str) -> str | None:
    """The text of `path` in the state's `files` channel (a graph on a state backend)."""
    from fathom.backends.utils import file_data_to_string

    files = values.get("files")
    data = files.get(path) if isinstance(files, dict) else None
    if not isinstance(data, dict) or data.get("encoding") == "base64":
        return None
    try:
        return file_data_to_string(data)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None


def _disk_text(project_dir: Path, name: str, args: dict[str, Any]) -> str | None:
    """The current text of the file a `write_file` call replaces on disk (None: none)."""
    if name != "write_file":
        return None
    path = str(args.get("file_path") or "")
    try:
        target = (project_dir / path.lstrip("/")).resolve()
        target.relative_to(project_dir)
        return target.read_text(encoding="utf-8") if target.is_file() else None
    except (OSError, ValueError):
        return None
