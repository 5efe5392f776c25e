"""Subagents: the `task` tool, which hands a task to another agent with a fresh context.

The subagent sees only its own system prompt and the task's `description` (a subagent with
`mode="fork"` continues the parent's conversation instead: see `fork_messages`); the parent
sees only the subagent's final answer (or, with `response_format`, its structured result as
JSON). Files go both ways through the shared backend: the subagent starts from the parent's
`files` and the files it changes come back as one update. Several `task` calls in one model
message run at the same time, each as its own LangGraph task, so with `subgraphs=True` a
subagent's events stream under the namespace `tools:<task id>`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NotRequired

from langchain.agents.middleware import InterruptOnConfig
from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphRecursionError
from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from fathom import tool_answers
from fathom.middleware.async_subagents.tasks import ASYNC_SUBAGENT_KEYS as _ASYNC_KEYS
from fathom.middleware.async_subagents.tasks import validate_async_subagents
from fathom.middleware.context.history import SUMMARIZATION_EVENT_KEY, apply_event
from fathom.middleware.permissions import FilesystemPermission
from fathom.middleware.subagent_status import (
    SubagentFailureTransformer,
    subagent_failure_artifact,
)
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.state import FileData
from fathom.tool_answers import Failure, aattempt, attempt, exception_text, tool_error, tool_of

__all__ = [
    "ASYNC_SUBAGENT_KEYS",
    "COMPILED_SUBAGENT_KEYS",
    "DEFAULT_GENERAL_PURPOSE_DESCRIPTION",
    "DEFAULT_SUBAGENT_PROMPT",
    "FORK_TASK_PREAMBLE",
    "GENERAL_PURPOSE",
    "GENERAL_PURPOSE_DESCRIPTION",
    "GENERAL_PURPOSE_PROMPT",
    "GENERAL_PURPOSE_SUBAGENT",
    "SUBAGENT_KEYS",
    "SUBAGENT_MODES",
    "TASK_TOOL",
    "TASK_TOOL_DESCRIPTION",
    "CompiledSubAgent",
    "ForkTaskToolMiddleware",
    "SubAgent",
    "SubAgentMiddleware",
    "compiled_subagent",
    "create_sub_agent",
    "fork_messages",
    "is_fork",
    "mark_declarative_fork",
    "subagent_answer",
    "subagent_catalogue",
    "task_tool_description",
    "task_tool_owner",
    "validate_subagent_spec",
]

TASK_TOOL = "task"
"""The name of the tool that hands a task to a subagent."""
GENERAL_PURPOSE = "general-purpose"
"""Name of the subagent every deep agent has unless it is replaced or turned off."""

GENERAL_PURPOSE_DESCRIPTION = (
    "Does any task the main agent could do itself, with the same tools and instructions, "
    "in a separate context. Use it to keep bulky intermediate work (many searches, long "
    "files) out of the main conversation."
)
"""The default general-purpose subagent's line in the `task` tool's list of subagents."""

GENERAL_PURPOSE_PROMPT = (
    "You are a subagent working on one task the main agent handed you, with the same tools "
    "it has. Only your final message goes back to the main agent: it never sees your tool "
    "calls or their results. Make that message the complete answer, with what you found, "
    "the paths of the files you wrote, and anything you could not do."
)
"""The default general-purpose subagent's own instructions (the main agent's system prompt
is not passed on). A subagent spec named `general-purpose` replaces the default subagent,
its description and prompt included."""


class SubAgent(TypedDict):
    """A subagent described by its parts; `create_deep_agent` builds it.

    Inheritance from the main agent: `tools`, `model`, `interrupt_on` and `permissions` are
    the main agent's unless given (given `tools` and `permissions` replace the main ones,
    given `interrupt_on` entries override the main ones); `system_prompt` and
    `middleware` are never inherited.
    """

    name: str
    description: str
    system_prompt: NotRequired[str]
    """The subagent's instructions, before fathom's base prompt; none when omitted."""
    tools: NotRequired[Sequence[BaseTool | Any]]
    model: NotRequired[str | BaseChatModel]
    middleware: NotRequired[Sequence[AgentMiddleware]]
    interrupt_on: NotRequired[Mapping[str, bool | InterruptOnConfig]]
    skills: NotRequired[list[str]]
    permissions: NotRequired[Sequence[FilesystemPermission]]
    response_format: NotRequired[Any]
    mode: NotRequired[Literal["isolated", "fork"]]
    """`"isolated"` (the default): the subagent sees only the task. `"fork"`: it continues
    the parent's conversation (see `fork_messages`) with the parent's system prompt, tools
    and middleware, so its requests start with the parent's last request byte for byte and
    a provider's prompt cache serves that part. Its own `system_prompt` is then added to the
    inherited prompt, its `tools` and `middleware` replace or join the inherited ones (at
    the cost of that cache), and it cannot set `skills` (it has the parent's)."""


GENERAL_PURPOSE_SUBAGENT: SubAgent = {
    "name": GENERAL_PURPOSE,
    "description": GENERAL_PURPOSE_DESCRIPTION,
    "system_prompt": GENERAL_PURPOSE_PROMPT,
}
"""The general-purpose subagent's spec without `model` and `tools` (the reference's name):
`{**GENERAL_PURPOSE_SUBAGENT, "tools": [...]}` in `subagents=` replaces the default one."""

DEFAULT_GENERAL_PURPOSE_DESCRIPTION = GENERAL_PURPOSE_DESCRIPTION
DEFAULT_SUBAGENT_PROMPT = GENERAL_PURPOSE_PROMPT
"""The general-purpose subagent's description and prompt under the reference's names."""


class CompiledSubAgent(TypedDict):
    """A subagent that is any compiled LangGraph graph whose state has `messages`.

    With `mode="fork"` its input `messages` are the parent's conversation and the task (see
    `fork_messages`) instead of the task alone; its prompt and tools stay its own.
    """

    name: str
    description: str
    runnable: Runnable
    mode: NotRequired[Literal["isolated", "fork"]]


SUBAGENT_KEYS = frozenset({
    "name", "description", "system_prompt", "tools", "model", "middleware", "interrupt_on",
    "skills", "permissions", "response_format", "mode",
})  # fmt: skip
"""The keys a `SubAgent` spec may have."""

COMPILED_SUBAGENT_KEYS = frozenset({"name", "description", "runnable", "mode"})
"""The keys a `CompiledSubAgent` spec may have."""

ASYNC_SUBAGENT_KEYS = _ASYNC_KEYS
"""The keys of an async (remote, background) subagent spec, recognised by `graph_id`."""

SUBAGENT_MODES = ("isolated", "fork")
"""The values of a subagent spec's `mode`."""


def is_fork(spec: Mapping[str, Any]) -> bool:
    """Whether `spec` (a `SubAgent` or `CompiledSubAgent`) continues the parent's conversation."""
    return spec.get("mode") == "fork"


def compiled_subagent(spec: Mapping[str, Any], runnable: Any) -> CompiledSubAgent:
    """The `CompiledSubAgent` of `runnable`, with `spec`'s name, description and fork mode."""
    entry = CompiledSubAgent(name=spec["name"], description=spec["description"], runnable=runnable)
    if is_fork(spec):
        entry["mode"] = "fork"
    return entry


def validate_subagent_spec(spec: Mapping[str, Any]) -> None:
    """Raise `ValueError` when a subagent spec cannot be what its author meant.

    A spec is a plain dict, so a misspelled key (`"sytem_prompt"`, `"tool"`) would
    otherwise be ignored without a word and the subagent built without it. The kind of
    spec is told by its keys: `graph_id` marks an async subagent, `runnable` a compiled
    one, anything else a `SubAgent`.
    """
    if not isinstance(spec, Mapping):
        raise TypeError(
            f"A subagent spec must be a dict (SubAgent or CompiledSubAgent), not "
            f"{type(spec).__name__}: {spec!r}."
        )
    label = repr(spec.get("name", "?"))
    if "graph_id" in spec:
        validate_async_subagents([spec])  # an `AsyncSubAgent`, for AsyncSubAgentMiddleware
        return
    if "runnable" in spec:
        kind, allowed = "CompiledSubAgent", COMPILED_SUBAGENT_KEYS
    else:
        kind, allowed = "SubAgent", SUBAGENT_KEYS
    unknown = sorted(str(key) for key in spec if key not in allowed)
    if unknown:
        raise ValueError(
            f"{kind} {label} has unknown key(s) {unknown}; the allowed keys are "
            f"{sorted(allowed)}."
        )
    for key in ("name", "description"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise ValueError(f"{kind} {label} needs a non-empty string {key!r}.")
    _validate_mode(spec, label)


def _validate_mode(spec: Mapping[str, Any], label: str) -> None:
    mode = spec.get("mode", "isolated")
    if mode not in SUBAGENT_MODES:
        raise ValueError(
            f"Subagent {label} has mode={mode!r}; the allowed modes are "
            f"{', '.join(repr(m) for m in SUBAGENT_MODES)}."
        )
    if mode == "fork" and spec.get("skills"):
        raise ValueError(
            f"Subagent {label} has mode='fork' and its own 'skills'; a fork has the main "
            "agent's skills (its prompt must be the main agent's). Remove 'skills', or "
            "use mode='isolated'."
        )


TASK_TOOL_DESCRIPTION = """Hand a self-contained task to a subagent, which works on it in a fresh context and returns one final report.

Subagents you can use (subagent_type: what it is for):
{available_agents}

The subagent sees only `description`, not this conversation: put in everything it needs (goal, inputs, file paths, the form of the answer you want). It cannot ask you questions. Files it writes are visible to you afterwards. For independent tasks, call `task` several times in one message; they run at the same time. Do not delegate quick, single-step work."""  # noqa: E501


FORK_NOTE = " (forked: it continues this conversation and sees all of it, so the task need not repeat what is already here)"  # noqa: E501
"""Added to a forked subagent's line in the list of subagents: the tool description says
that subagents see only the task, which is not so for this one."""


def subagent_catalogue(specs: Iterable[Mapping[str, Any]]) -> str:
    """The `- name: description` list of subagents (forks marked) that the `task` tool shows."""
    return "\n".join(
        f"- {s['name']}: {s['description']}{FORK_NOTE if is_fork(s) else ''}" for s in specs
    )


def task_tool_description(specs: Iterable[Mapping[str, Any]], template: str | None = None) -> str:
    """The `task` tool's description: `template` (or the default) with the catalogue in
    its `{available_agents}` slot."""
    return (template or TASK_TOOL_DESCRIPTION).replace(
        "{available_agents}", subagent_catalogue(specs)
    )


FORK_TASK_PREAMBLE = (
    "[Everything above is the conversation so far. You continue it as the subagent it just "
    "delegated to: the request to delegate was about you, and you cannot hand the work on "
    "to another subagent, so do it yourself. Use the facts, figures and names already "
    "established above rather than general knowledge. Your task:]\n\n"
)
"""Opens the task message of a forked subagent, after the inherited conversation."""


def fork_messages(messages: Sequence[Any], description: str) -> list[Any]:
    """A forked subagent's input: the parent's conversation, then the task.

    Give the parent's conversation as its model was last shown it (the summarization
    event applied, `fathom.middleware.context.history.apply_event`), so a fork gets the
    summary, not the summarized messages. The last message, the parent's `AIMessage`
    holding the pending `task` call (and any calls next to it), is left out: its calls
    have no results yet. The task follows as a new human message, after
    `FORK_TASK_PREAMBLE`.
    """
    history = list(messages)
    if history and isinstance(history[-1], AIMessage) and history[-1].tool_calls:
        history.pop()
    return [*history, HumanMessage(content=FORK_TASK_PREAMBLE + description)]


FORK_REFUSAL = (
    "Error: you are a forked subagent and cannot delegate to another subagent. Do this "
    "task yourself with your other tools."
)


class TaskInput(BaseModel):
    description: str = Field(
        description="The complete task for the subagent, with all the context it needs."
    )
    subagent_type: str = Field(description="Which subagent to use: one of the names listed.")


# The state channels that cross into and out of a subagent: the shared filesystem.
_SHARED_KEYS = frozenset({"files"})

# What a fork does not take over from the parent's state, though its graph has the same
# channels: its messages are built by `fork_messages`, a structured response would read
# as its own result, a pending compaction request is the parent's, and `jump_to` and
# `remaining_steps` are the loop's own bookkeeping.
_FORK_EXCLUDED_KEYS = frozenset({
    "messages", "structured_response", "compact_requested", "jump_to", "remaining_steps",
})  # fmt: skip


def _private_state_keys() -> frozenset[str]:
    """State keys that belong to one agent and never cross into or out of a subagent.

    Derived from the state schemas of the agent and of fathom's middleware (conversation,
    plan, loaded memory, skill catalogue, compaction flag, ...), all but `_SHARED_KEYS`,
    so a middleware that adds a key keeps it private without a hand-kept list to update.
    A user's own state keys are not among them and do cross.
    """
    from langchain.agents.middleware.todo import PlanningState

    from fathom.middleware.context.summarization import CompactionState
    from fathom.middleware.memory import MemoryState
    from fathom.middleware.skills import SkillsState
    from fathom.state import DeepAgentState

    keys = {"remaining_steps"}  # a managed value LangGraph adds to every agent graph
    for schema in (DeepAgentState, PlanningState, MemoryState, SkillsState, CompactionState):
        keys |= schema.__required_keys__ | schema.__optional_keys__
    return frozenset(keys - _SHARED_KEYS)


_PRIVATE_KEYS = _private_state_keys()

_CREATE_AGENT_RECURSION_LIMIT = 9999
"""The limit LangChain's `create_agent` binds on every agent graph: a default, not a choice
of the subagent's author, so the run's own limit replaces it."""


def _own_recursion_limit(runnable: Any) -> int | None:
    """The `recursion_limit` bound on a subagent's graph by its author, if any."""
    bound = getattr(runnable, "config", None)  # a compiled graph's or a binding's config
    limit = bound.get("recursion_limit") if isinstance(bound, Mapping) else None
    return None if limit in (None, _CREATE_AGENT_RECURSION_LIMIT) else limit


def _check_compiled(spec: Mapping[str, Any]) -> CompiledSubAgent:
    for key in ("name", "description", "runnable"):
        if not spec.get(key):
            raise ValueError(f"CompiledSubAgent {spec.get('name', '?')!r} needs a {key!r}.")
    runnable = spec["runnable"]
    if not isinstance(runnable, Runnable) or not hasattr(runnable, "invoke"):
        raise TypeError(
            f"Subagent {spec['name']!r}: runnable must be a compiled graph (call .compile() "
            f"on the StateGraph), not {type(runnable).__name__}."
        )
    if isinstance(runnable, Pregel) and "messages" not in runnable.channels:
        raise ValueError(
            f"Subagent {spec['name']!r}: CompiledSubAgent must return a state containing a "
            "'messages' key, and its graph state has none; the task is given as a message "
            "and the answer is read from the messages."
        )
    return compiled_subagent(spec, runnable)


def _to_json(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.dumps(dataclasses.asdict(value), ensure_ascii=False, default=str)
    return json.dumps(value, ensure_ascii=False, default=str)


def subagent_answer(result: Mapping[str, Any]) -> str:
    """What the parent receives: the structured response as JSON, else the last answer."""
    structured = result.get("structured_response")
    if structured is not None:
        return _to_json(structured)
    for message in reversed(result.get("messages", [])):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text.rstrip()
    return "(The subagent finished without writing an answer.)"


def _files_delta(
    before: Mapping[str, FileData], after: Mapping[str, FileData]
) -> dict[str, FileData | None]:
    """The `files` update that turns `before` into `after` (None deletes)."""
    delta: dict[str, FileData | None] = {
        path: data for path, data in after.items() if before.get(path) != data
    }
    delta.update({path: None for path in before if path not in after})
    return delta


def _shared_update(
    state: Mapping[str, Any],
    result: Mapping[str, Any],
    private: frozenset[str] | set[str] = _PRIVATE_KEYS,
) -> dict[str, Any]:
    """The parts of the subagent's final state that go back to the parent (not `private`)."""
    update: dict[str, Any] = {}
    if "files" in result:
        delta = _files_delta(state.get("files") or {}, result.get("files") or {})
        if delta:
            update["files"] = delta
    for key, value in result.items():
        if key in private or key == "files" or key not in state:
            continue
        if state[key] != value:
            update[key] = value
    return update


_DECLARATIVE_FORKS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Fork graphs built from `SubAgent` specs: they share the parent's state channels."""


def mark_declarative_fork(runnable: Any) -> Any:
    """Record that `runnable` is a fork built from a `SubAgent` spec, with the parent's
    state channels, so it takes over the parent's state (its private keys included)."""
    _DECLARATIVE_FORKS.add(runnable)
    return runnable


def _task_tool(description: str, func: Any, coroutine: Any) -> StructuredTool:
    return tool_of(TASK_TOOL, description, TaskInput, func, coroutine)


def _refuse(description: str, subagent_type: str) -> str:
    return FORK_REFUSAL


async def _arefuse(description: str, subagent_type: str) -> str:
    return FORK_REFUSAL


class ForkTaskToolMiddleware(AgentMiddleware):
    """Gives a forked subagent the parent's `task` tool, which refuses to delegate.

    A fork's tool schemas must be the parent's, byte for byte, for the prompt cache, and
    the parent's include `task`; calling it from a fork answers with an error instead of
    starting yet another subagent.
    """

    def __init__(self, description: str) -> None:
        super().__init__()
        self.tools = [_task_tool(description, _refuse, _arefuse)]

    @property
    def name(self) -> str:
        """Named like `SubAgentMiddleware`, whose place it takes in a fork's stack."""
        return SubAgentMiddleware.__name__


def create_sub_agent(
    spec: SubAgent | Mapping[str, Any],
    *,
    state_schema: type | None = None,
    response_format: Any = None,
) -> Runnable:
    """Compile a `SubAgent` spec on its own, with LangChain's `create_agent`.

    Nothing is inherited here, so the spec must give `model` and `tools`; its
    `system_prompt`, `middleware`, `interrupt_on` (a `HumanInTheLoopMiddleware` is added)
    and `response_format` (`response_format=` overrides it) are used as they are.
    `state_schema` is the graph's state schema (`create_agent`'s default when `None`).
    `SubAgentMiddleware` compiles the specs it is given with this function;
    `create_deep_agent` builds its subagents itself (they inherit from the main agent).

    Raises:
        ValueError: the spec has no `model` or no `tools`.
    """
    from langchain.agents import create_agent

    from fathom.models import resolve_model

    name = spec.get("name", "?")
    for key in ("model", "tools"):
        if key not in spec:
            raise ValueError(
                f"SubAgent '{name}' must specify '{key}' when it is compiled on its own "
                "(given to SubAgentMiddleware or create_sub_agent, nothing is inherited); "
                "add it, or use create_deep_agent, which fills it from the main agent."
            )
    middleware = list(spec.get("middleware") or [])
    if spec.get("interrupt_on"):
        from langchain.agents.middleware import HumanInTheLoopMiddleware

        gated = dict(spec.get("interrupt_on") or {})
        middleware.append(HumanInTheLoopMiddleware(interrupt_on=gated))
    return create_agent(
        resolve_model(spec.get("model")),
        tools=list(spec.get("tools") or []),
        system_prompt=spec.get("system_prompt") or None,
        middleware=middleware,
        response_format=(
            response_format if response_format is not None else spec.get("response_format")
        ),
        state_schema=state_schema,
        name=name,
    )


def _compile_spec(
    spec: Mapping[str, Any], state_schema: type[Any] | None, task_description: str
) -> dict[str, Any]:
    """A `SubAgent` spec given straight to `SubAgentMiddleware`, compiled on its own
    (`create_sub_agent`).

    A fork gets the `task` tool (`ForkTaskToolMiddleware`); its prompt, tools and model are
    the spec's, so whether its requests share the parent's prefix is up to the caller.
    """
    name = spec.get("name", "?")
    compiled = spec
    if is_fork(spec):
        fork_tool = ForkTaskToolMiddleware(task_description)
        compiled = {**spec, "middleware": [*(spec.get("middleware") or []), fork_tool]}
    # looked up in the module when called, so a replaced `create_sub_agent` is the one used
    runnable = globals()["create_sub_agent"](compiled, state_schema=state_schema)
    if is_fork(spec):
        mark_declarative_fork(runnable)
    return {**spec, "name": name, "description": spec.get("description", ""), "runnable": runnable}


@contextlib.contextmanager
def _subagent_tracing() -> Iterator[None]:
    """Tag the LangSmith runs of a subagent with `ls_agent_type="subagent"` (as LangChain
    tags a root agent's `"root"`): in the tracing context only, so the tag reaches the
    tracer but not the metadata of streamed callback events. The rest of the context
    (parent, client, project, tags) is kept as it is."""
    from langsmith.run_helpers import get_tracing_context, tracing_context

    current = get_tracing_context()
    metadata = {**(current.get("metadata") or {}), "ls_agent_type": "subagent"}
    with tracing_context(**{**current, "metadata": metadata}):
        yield


class SubAgentMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds the `task` tool over compiled subagents.

    Args:
        subagents: `CompiledSubAgent` dicts (`name`, `description`, `runnable`); names must
            be unique. `create_deep_agent` builds `SubAgent` specs into these.
        task_description: Replaces the tool description; `{available_agents}` in it is
            replaced by the `- name: description` list.
        backend: Accepted for the reference's API and kept as `self.backend`; like the
            reference's, it changes nothing (files reach subagents through the shared
            state and the backends of their own file tools).
        system_prompt: A prompt section about delegating, followed by the list of
            subagents; `None` adds none (the tool description already lists them).
        private_state_keys: More state keys that are neither passed to subagents nor
            taken back from them (`messages`, `todos` and the like always are).
        state_schema: The state schema of subagents compiled here from `SubAgent` specs.

    `SubAgent` specs (no `runnable`) are compiled here with LangChain's `create_agent`;
    each must then give `model` and `tools`, as nothing is inherited from a parent.
    """

    # a failed subagent ends as `failed` in LangGraph's v3 stream (see `subagent_status`)
    transformers = (SubagentFailureTransformer,)

    def __init__(
        self,
        subagents: Sequence[Mapping[str, Any]] | None = None,
        *,
        backend: Any = None,
        system_prompt: str | None = None,
        task_description: str | None = None,
        private_state_keys: Iterable[str] | None = None,
        state_schema: type[Any] | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.private_state_keys: frozenset[str] = _PRIVATE_KEYS | frozenset(
            private_state_keys or ()
        )
        for spec in subagents or []:
            if isinstance(spec, Mapping):
                _validate_mode(spec, repr(spec.get("name", "?")))
        # computed from the specs first: a fork compiled here gets the same `task` tool
        description = task_tool_description(subagents or [], task_description)
        checked = [
            _check_compiled(
                spec if "runnable" in spec else _compile_spec(spec, state_schema, description)
            )
            for spec in subagents or []
        ]
        names = [spec["name"] for spec in checked]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Subagent names must be unique; repeated: {duplicates}.")
        if not checked:
            raise ValueError(
                "At least one subagent must be specified: SubAgentMiddleware needs at least "
                "one subagent."
            )
        self.subagents: dict[str, CompiledSubAgent] = {s["name"]: s for s in checked}
        self.subagent_names: frozenset[str] = frozenset(self.subagents)
        """The subagents' names (the reference's attribute)."""
        catalogue = subagent_catalogue(checked)
        self.section = PromptSection(
            "subagents",
            f"{system_prompt}\n\nAvailable subagent types:\n{catalogue}" if system_prompt else "",
            tools=frozenset({TASK_TOOL}),
        )
        self.system_prompt: str | None = self.section.text or system_prompt
        """The section's text (the prompt and the list), or `system_prompt` as given when
        it is empty or `None`: the reference's attribute."""
        self.tools = [_task_tool(description, self._task, self._atask)]

    # -- the tool ------------------------------------------------------------------------

    def _prepare(
        self, runtime: ToolRuntime, description: str, subagent_type: str
    ) -> tuple[CompiledSubAgent, dict[str, Any], RunnableConfig] | ToolMessage:
        spec = self.subagents.get(subagent_type)
        if spec is None:
            return tool_answers.unknown_name_error(
                "subagent", subagent_type, sorted(self.subagents),
                tool_call_id=runtime.tool_call_id, name=TASK_TOOL,
            )  # fmt: skip
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        runnable = spec["runnable"]
        channels = runnable.channels if isinstance(runnable, Pregel) else None
        # A fork built by create_deep_agent has the parent's channels and takes them over
        # (its middleware rebuilds the parent's prompt from them); a compiled one gets only
        # what any subagent gets. Either way only shared keys come back (`_finish`).
        declarative_fork = is_fork(spec) and runnable in _DECLARATIVE_FORKS
        excluded = _FORK_EXCLUDED_KEYS if declarative_fork else self.private_state_keys
        payload = {
            key: value
            for key, value in state.items()
            if key not in excluded and (channels is None or key in channels)
        }
        shown = apply_event(state.get("messages") or [], state.get(SUMMARIZATION_EVENT_KEY))
        payload["messages"] = (
            fork_messages(shown, description)
            if is_fork(spec)
            else [HumanMessage(content=description)]
        )
        config = RunnableConfig(**(runtime.config or {}))
        # The run's config (recursion_limit, configurable, callbacks) goes to the subagent,
        # but a limit bound on the subagent itself (`graph.with_config(recursion_limit=n)`)
        # is kept: the config passed to `invoke` would otherwise override it.
        if _own_recursion_limit(runnable) is not None:
            config.pop("recursion_limit", None)
        metadata = {
            **(config.get("metadata") or {}),
            "lc_agent_name": spec["name"],
            # Lets a stream consumer tell which `task` call a subagent's events belong to.
            "fathom_task_call_id": runtime.tool_call_id,
        }
        config["metadata"] = metadata
        return spec, payload, config

    def _finish(
        self,
        runtime: ToolRuntime,
        spec: CompiledSubAgent,
        result: Any,
    ) -> Command | ToolMessage:
        """The `task` call's answer from the subagent's final state, or from its `Failure`."""
        if isinstance(result, Failure):
            return self._failure(runtime, spec["name"], result.error)
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        result = result if isinstance(result, Mapping) else {"messages": []}
        message = ToolMessage(
            content=subagent_answer(result),
            tool_call_id=runtime.tool_call_id,
            name=TASK_TOOL,
        )
        update = _shared_update(state, result, self.private_state_keys)
        return Command(update={**update, "messages": [message]})

    def _failure(self, runtime: ToolRuntime, name: str, error: Exception) -> ToolMessage:
        # the artifact (never sent to the model) lets the stream end the subagent as failed
        detail = exception_text(error)
        if isinstance(error, GraphRecursionError):
            text = (
                f"Error: subagent {name!r} was stopped: it reached the step limit "
                "(recursion_limit) without finishing. Give it a narrower task, or do the work "
                "another way."
            )
        else:
            text = (
                f"Error: subagent {name!r} failed: {detail}. Its work is lost; retry with a "
                "clearer task or do it another way."
            )
        return tool_error(text, tool_call_id=runtime.tool_call_id, name=TASK_TOOL,
                          artifact=subagent_failure_artifact(name, detail))

    def _task(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Any:
        prepared = self._prepare(runtime, description, subagent_type)
        if isinstance(prepared, ToolMessage):
            return prepared
        spec, payload, config = prepared
        with _subagent_tracing():
            result = attempt(lambda: spec["runnable"].invoke(payload, config), spec["name"])
        return self._finish(runtime, spec, result)

    async def _atask(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Any:
        prepared = self._prepare(runtime, description, subagent_type)
        if isinstance(prepared, ToolMessage):
            return prepared
        spec, payload, config = prepared
        with _subagent_tracing():
            result = await aattempt(spec["runnable"].ainvoke(payload, config), spec["name"])
        return self._finish(runtime, spec, result)


def task_tool_owner(tools: Iterable[Any]) -> SubAgentMiddleware | None:
    """The `SubAgentMiddleware` whose `task` tool is among `tools` (a tool call's
    `runtime.tools`), or `None` when there is none (or it is a fork's refusing `task`)."""
    for tool in tools:
        if getattr(tool, "name", None) != TASK_TOOL:
            continue
        owner = getattr(getattr(tool, "coroutine", None), "__self__", None)
        if isinstance(owner, SubAgentMiddleware):
            return owner
    return None
