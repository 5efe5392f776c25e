"""`create_deep_agent`: composes fathom's middleware and calls LangChain's `create_agent`.

Layer: agent; it must not import project, server, protocols or cli.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware import InterruptOnConfig
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    InputAgentState,
    OutputAgentState,
    ResponseT,
)
from langchain.agents.structured_output import ResponseFormat
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langgraph.cache.base import BaseCache
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer
from langgraph.typing import ContextT

from fathom.backends.protocol import BackendFactory, BackendProtocol, adopt, supports_execute
from fathom.compact_dispatch import ToolArgsFromMessagesMiddleware, compact_tool_dispatch
from fathom.middleware.async_subagents.middleware import AsyncSubAgent, AsyncSubAgentMiddleware
from fathom.middleware.async_subagents.parent_notifier import ParentNotifierMiddleware
from fathom.middleware.context.summarization import SummarizationMiddleware
from fathom.middleware.execute import ExecuteMiddleware
from fathom.middleware.filesystem.middleware import FilesystemMiddleware
from fathom.middleware.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    check_tool_names,
    gated_tools,
    with_gate,
)
from fathom.middleware.memory import MemoryMiddleware
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.middleware.permissions import (
    FilesystemPermission,
    gated_by_approval,
    interrupt_on_from_permissions,
)
from fathom.middleware.planning import PlanningMiddleware
from fathom.middleware.skills import SkillsMiddleware
from fathom.middleware.subagents import (
    GENERAL_PURPOSE,
    GENERAL_PURPOSE_DESCRIPTION,
    GENERAL_PURPOSE_PROMPT,
    CompiledSubAgent,
    ForkTaskToolMiddleware,
    SubAgent,
    SubAgentMiddleware,
    compiled_subagent,
    is_fork,
    mark_declarative_fork,
    task_tool_description,
    validate_subagent_spec,
)
from fathom.middleware.unsupported_content import UnsupportedContentMiddleware
from fathom.models import resolve_model
from fathom.profiles.apply import apply_profile, tool_name
from fathom.profiles.harness import GeneralPurposeSubagentProfile
from fathom.profiles.registry import general_purpose_settings, harness_profile_for_model
from fathom.prompt import (
    BASE_PROMPT,
    AssembledSystemMessage,
    PromptAssemblyMiddleware,
    PromptSection,
)
from fathom.runs import ThreadGuardedGraph
from fathom.state import DeepAgentState

if TYPE_CHECKING:  # a budget's modules load only for an agent that has one
    from fathom.budget import Budget

__all__ = ["MAX_CONCURRENCY", "create_deep_agent"]

MAX_CONCURRENCY = 256
"""The default `max_concurrency` of every agent graph: how many of a step's tool calls
(parallel `task` calls among them) run at once. LangGraph's sync `invoke` runs them in a
thread pool of `max_concurrency` threads, which unset is Python's default of
min(32, CPU cores + 4): six parallel subagents at a time on a 2-core machine, where `ainvoke`
runs them all. A run's own `config={"max_concurrency": n}` still wins."""


def _initial_system_message(
    system_prompt: str | SystemMessage | None, addendum: str | None = None
) -> AssembledSystemMessage:
    """The agent's starting system message: the caller's prompt, then fathom's sections.

    A `SystemMessage` whose content is a list of blocks keeps those blocks as they are
    (with any `cache_control` markers) at the start; fathom's sections follow as one more
    text block. A string (or string content) becomes the first section. A forked
    subagent's own prompt (`addendum`) follows the inherited base prompt.
    """
    sections = []
    leading: list[dict[str, Any]] = []
    if isinstance(system_prompt, SystemMessage):
        if isinstance(system_prompt.content, str):
            system_prompt = system_prompt.content
        else:
            leading = [
                block if isinstance(block, dict) else {"type": "text", "text": block}
                for block in system_prompt.content
            ]
            system_prompt = None
    if system_prompt:
        sections.append(PromptSection("custom", system_prompt))
    sections.append(PromptSection("base", BASE_PROMPT))
    if addendum:
        sections.append(PromptSection("fork", addendum))
    return AssembledSystemMessage.from_sections(sections, leading)


def _prompt_caching_middleware() -> list[AgentMiddleware]:
    """Anthropic prompt caching when the agent may use an Anthropic model; none otherwise.

    A `ChatAnthropic` instance can only exist once `langchain_anthropic` has been imported
    (models are resolved before their middleware is built), so when it has not been, the
    middleware would be a no-op and importing the package (about a second) is skipped.
    """
    if "langchain_anthropic" not in sys.modules:
        return []
    try:
        from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
    except ImportError:
        return []
    return [AnthropicPromptCachingMiddleware(unsupported_model_behavior="ignore")]


def _merged_by_name(
    core: list[AgentMiddleware], extra: Sequence[AgentMiddleware]
) -> list[AgentMiddleware]:
    """`core` with `extra` merged in: same `.name` replaces in place, others are appended."""
    merged = list(core)
    positions = {m.name: i for i, m in enumerate(merged)}
    for item in extra:
        if item.name in positions:
            merged[positions[item.name]] = item
        else:
            positions[item.name] = len(merged)
            merged.append(item)
    return merged


def _hitl(
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None,
    has_checkpointer: bool,
    permissions: Sequence[FilesystemPermission] | None = None,
) -> list[AgentMiddleware]:
    """The approval middleware for `interrupt_on` and the `interrupt` rules of `permissions`
    (none when neither pauses anything)."""
    merged = with_gate(interrupt_on, interrupt_on_from_permissions(permissions or []))
    if not merged:
        return []
    hitl = HumanInTheLoopMiddleware(merged)
    if gated_tools(hitl.interrupt_on) and not has_checkpointer:
        # not an error: a LangGraph server (`langgraph dev`, a deployment) supplies the
        # checkpointer of a graph compiled without one. One text for the agent and its
        # subagents, so the warning shows once.
        warnings.warn(
            "interrupt_on (or an 'interrupt' permission) pauses the run for approval, which "
            "needs a checkpointer. "
            "Pass checkpointer=InMemorySaver() (from langgraph.checkpoint.memory) or a "
            "SqliteSaver / PostgresSaver, or checkpointer=True inside a parent graph that "
            "has one, unless a LangGraph server supplies it; without one the first "
            "approval fails.",
            stacklevel=3,
        )
    return [hitl]


_TREE_TOOL_NAMES: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
"""The tools of each agent `create_deep_agent` built and of its subagents, all the way down."""


def _tool_names_of(runnable: Any) -> set[str] | None:
    """The names of the tools a compiled agent graph and its subagents run, or `None` when
    they cannot be told (a runnable that is not an agent graph)."""
    try:
        known = _TREE_TOOL_NAMES.get(runnable)
    except TypeError:  # not weakly referable
        known = None
    if known is not None:
        return set(known)
    nodes = getattr(runnable, "nodes", None)
    if not isinstance(nodes, Mapping):
        return None
    names: set[str] = set()
    for node in nodes.values():
        tools = getattr(getattr(node, "bound", None), "tools_by_name", None)
        if isinstance(tools, Mapping):
            names.update(str(name) for name in tools)
    return names


def _subagent_tool_names(compiled: Sequence[CompiledSubAgent]) -> set[str] | None:
    """The tools of every subagent (`None` when one of them has tools that cannot be told)."""
    names: set[str] = set()
    for subagent in compiled:
        found = _tool_names_of(subagent["runnable"])
        if found is None:
            return None
        names |= found
    return names


def _build_graph(
    model: BaseChatModel,
    tools: Sequence[Any],
    *,
    system_prompt: str | SystemMessage | None,
    core: list[AgentMiddleware],
    middleware: Sequence[AgentMiddleware],
    approval: list[AgentMiddleware],
    interrupt_on: Mapping[str, Any] | None = None,
    who: str = "",
    state_schema: type[Any] | None = None,
    general_purpose: GeneralPurposeSubagentProfile | None = None,
    prompt_addendum: str | None = None,
    subagent_tool_names: Collection[str] | None = (),
    **create_agent_options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent graph for one agent (main or subagent) around LangChain's `create_agent`.

    `general_purpose` is given when this is the default general-purpose subagent: its own
    prompt from the profile then wins over the profile's base prompt (the suffix still
    follows), and the profile's middleware exclusions are checked on the main agent alone
    (whose stack holds everything this one's does).

    `interrupt_on` is the part of the approval configuration given for this agent itself;
    its names are checked against every tool the agent ends up with (its own tools and
    those of its middleware) and the tools of its subagents (`subagent_tool_names`: the
    subagents inherit `interrupt_on`; `None` when one of them is a runnable whose tools
    cannot be told, and then only the agent's own tools are known), so a misspelled name
    fails here instead of approving nothing.

    `create_agent_options` (`response_format`, `context_schema`, `checkpointer`, `store`,
    `debug`, `name`, `cache`) go to `create_agent` as they are.
    """
    # the harness profile registered for this agent's own model (main agent or subagent)
    profile = harness_profile_for_model(model)
    if general_purpose is not None and general_purpose.system_prompt is not None:
        profile = dataclasses.replace(profile, base_system_prompt=None)
    system_message, profiled = apply_profile(
        profile,
        _initial_system_message(system_prompt, prompt_addendum),
        _merged_by_name(core, middleware),
        check_exclusions=general_purpose is None,
    )
    stack = [*profiled, *approval, PatchToolCallsMiddleware(), PromptAssemblyMiddleware()]
    if not any(m.name == UnsupportedContentMiddleware.__name__ for m in stack):
        stack.append(UnsupportedContentMiddleware())  # innermost: judges the model called
    if interrupt_on and subagent_tool_names is not None:
        # (with a subagent whose tools are unknown, any name may be one of its tools)
        offered = [*(tools or []), *(t for m in stack for t in getattr(m, "tools", None) or ())]
        names = {tool_name(t) for t in offered} - {""}
        owners = "The agent's tools are"
        if set(subagent_tool_names) - names:
            names |= set(subagent_tool_names)
            owners = "The tools of the agent and its subagents are"
        check_tool_names(interrupt_on, names, who, owners)
    agent = create_agent(
        model,
        tools=list(tools or []),
        system_prompt=system_message,
        middleware=stack,
        state_schema=state_schema if state_schema is not None else DeepAgentState,
        **create_agent_options,
    )
    return compact_tool_dispatch(agent).with_config(max_concurrency=MAX_CONCURRENCY)


def _offers_execute(backend: Any, permissions: Sequence[Any] | None = None) -> bool:
    """Whether the agent gets the `execute` tool: the backend runs commands, or it is a
    factory, whose backend is only known per tool call (the tool then answers with an error
    when that call's backend cannot run commands).

    A factory may say what its backends can do with a `can_execute` attribute (as
    `SandboxScope` does). One that does not, given `permissions`, gets no `execute`: a shell
    its backend might have would walk around the rules, which only the file tools enforce.
    """
    if callable(backend) and not isinstance(backend, BackendProtocol):
        declared = getattr(backend, "can_execute", None)
        return bool(declared) if declared is not None else not permissions
    return supports_execute(backend) or bool(getattr(backend, "can_execute", False))


def _core_middleware(
    backend: Any,
    permissions: Sequence[FilesystemPermission] | None,
    *,
    memory: Sequence[str] | None = None,
    skills: Sequence[str] | None = None,
    planning: bool = True,
) -> list:
    """The built-in middleware of one agent. Subagents from specs have no planning
    (`write_todos`), as in the reference: a spec's `tools=[x]` gives x and the file tools."""
    return [
        ToolArgsFromMessagesMiddleware(),
        *([PlanningMiddleware()] if planning else []),
        # a cache breakpoint after memory for Anthropic models, as in the reference
        *([MemoryMiddleware(backend=backend, sources=memory, permissions=permissions,
                            add_cache_control=True)]
          if memory else []),
        *([SkillsMiddleware(backend=backend, sources=skills)] if skills else []),
        # the `interrupt` rules pause through the approval gate `_hitl` adds for them
        FilesystemMiddleware(backend=backend, permissions=gated_by_approval(permissions or [])),
        *([ExecuteMiddleware(backend=backend)] if _offers_execute(backend, permissions) else []),
        *_prompt_caching_middleware(),
        SummarizationMiddleware(backend=backend),
        # inert unless the run is some agent's async subagent: then it wakes that agent
        ParentNotifierMiddleware(),
    ]


def _with_task_tool(core: list[AgentMiddleware], task: AgentMiddleware) -> list[AgentMiddleware]:
    """`core` with the `task` tool's middleware right after the file tools."""
    after_files = next(i for i, m in enumerate(core) if isinstance(m, FilesystemMiddleware))
    return [*core[: after_files + 1], task, *core[after_files + 1 :]]


def _compile_subagents(
    specs: Sequence[Mapping[str, Any]],
    *,
    model: BaseChatModel,
    tools: Sequence[Any],
    system_prompt: str | SystemMessage | None,
    middleware: Sequence[AgentMiddleware],
    permissions: Sequence[FilesystemPermission] | None,
    backend: Any,
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None,
    context_schema: type[Any] | None,
    has_checkpointer: bool,
    general_purpose: bool,
    skills: Sequence[str] | None = None,
    state_schema: type[Any] | None = None,
    memory: Sequence[str] | None = None,
    gate: Sequence[AgentMiddleware] = (),
) -> list[CompiledSubAgent]:
    """Build every `SubAgent` spec into a graph, and add the general-purpose subagent.

    A fork (`mode="fork"`) is built like the main agent (its system prompt, tools, memory,
    skills and middleware, with a `task` tool of the same schema that refuses to delegate),
    so the requests it makes start with the main agent's last request, byte for byte.
    """
    specs = list(specs)
    for spec in specs:
        validate_subagent_spec(spec)
    # async specs (`graph_id`) go to AsyncSubAgentMiddleware, not the `task` tool
    specs = [spec for spec in specs if "graph_id" not in spec]
    # the main model's harness profile may turn it off or change its description and prompt
    gp = general_purpose_settings(model)
    gp_spec: dict[str, Any] | None = None
    if general_purpose and gp.enabled is not False and not any(
        s.get("name") == GENERAL_PURPOSE for s in specs
    ):
        core_names = {m.name for m in _core_middleware(backend, permissions, planning=False)}
        specs.insert(
            0,
            gp_spec := {
                "name": GENERAL_PURPOSE,
                "description": gp.description or GENERAL_PURPOSE_DESCRIPTION,
                # its own instructions, not the main agent's (as in the reference)
                "system_prompt": gp.system_prompt or GENERAL_PURPOSE_PROMPT,
                "skills": skills,  # the general-purpose subagent inherits the skills
                # only the caller's replacements of built-in middleware carry over
                "middleware": [m for m in middleware if m.name in core_names],
            },
        )
    # the parent's `task` tool lists every subagent; a fork's copy must read the same
    task_description = task_tool_description(specs)
    compiled: list[CompiledSubAgent] = []
    for spec in specs:
        fork = is_fork(spec)
        if "runnable" in spec:
            graph = spec["runnable"]
        else:
            rules = spec.get("permissions", permissions)
            sub_interrupt_on = {**(interrupt_on or {}), **(spec.get("interrupt_on") or {})}
            who = f" of subagent {spec['name']!r}"
            if fork:
                core = _with_task_tool(
                    _core_middleware(backend, rules, memory=memory, skills=skills),
                    ForkTaskToolMiddleware(task_description),
                )
                # the parent's middleware, a spec entry replacing one of the same name
                own = list(_merged_by_name(list(middleware), spec.get("middleware", ())))
            else:
                core = _core_middleware(backend, rules, skills=spec.get("skills"), planning=False)
                own = list(spec.get("middleware", ()))
            core = [*gate, *core]  # a budget's gate, outermost (none without a budget)
            graph = _build_graph(
                resolve_model(spec["model"]) if spec.get("model") else model,
                spec.get("tools", tools),
                # a fork keeps the parent's prompt; its own is added after the base prompt
                system_prompt=system_prompt if fork else spec.get("system_prompt"),
                prompt_addendum=spec.get("system_prompt") if fork else None,
                core=core,
                middleware=own,
                approval=_hitl(sub_interrupt_on, has_checkpointer, rules),
                response_format=spec.get("response_format"),
                context_schema=context_schema,
                # no checkpointer or store: a subgraph uses the parent's
                name=spec["name"],
                # only the spec's own entries: inherited ones may name parent-only tools
                interrupt_on=spec.get("interrupt_on"),
                who=who,
                state_schema=state_schema,
                general_purpose=gp if spec is gp_spec else None,
            )
            if fork:
                mark_declarative_fork(graph)
        compiled.append(compiled_subagent(spec, graph))
    return compiled


def _budget(budget: Any, model: BaseChatModel, subagents: Sequence[Any]) -> tuple[Any, list]:
    """The main agent's budget middleware and each subagent's gate; none without a budget."""
    if budget is None:
        return None, []
    from fathom.middleware.budget import budget_middleware

    return budget_middleware(budget, model, subagents)


def _code_interpreter(
    option: bool | Mapping[str, Any] | AgentMiddleware,
    subagents: SubAgentMiddleware | None,
    tools: list[Any],
) -> AgentMiddleware:
    """The `eval` tool's middleware for `create_deep_agent(code_interpreter=...)`, over the
    agent's own subagents; `ptc` names are looked up among `tools`, every tool the agent
    has."""
    if isinstance(option, AgentMiddleware):
        return option
    from fathom.middleware.code_interpreter import CodeInterpreterMiddleware

    options = dict(option) if isinstance(option, Mapping) else {}
    options.setdefault("available_tools", tools)
    # `subagents` in the options: True (the default) is the agent's own, False none
    chosen = options.pop("subagents", True)
    return CodeInterpreterMiddleware(subagents if chosen is True else chosen, **options)


def create_deep_agent(
    model: str | BaseChatModel | None = None,
    tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    subagents: Sequence[SubAgent | CompiledSubAgent | AsyncSubAgent | Mapping[str, Any]]
    | None = None,
    skills: list[str] | None = None,
    memory: list[str] | None = None,
    permissions: Sequence[FilesystemPermission] | None = None,
    backend: BackendProtocol | BackendFactory | None = None,
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None = None,
    response_format: ResponseFormat[ResponseT] | type[ResponseT] | dict[str, Any] | None = None,
    state_schema: type[DeepAgentState] | None = None,
    context_schema: type[ContextT] | None = None,
    checkpointer: Checkpointer | None = None,
    store: BaseStore | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: BaseCache[Any] | None = None,
    general_purpose_subagent: bool = True,
    code_interpreter: bool | Mapping[str, Any] | AgentMiddleware | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
) -> CompiledStateGraph[
    AgentState[ResponseT], ContextT, InputAgentState, OutputAgentState[ResponseT]
]:
    """Build a deep agent: a compiled LangGraph graph that plans, keeps files and delegates.

    The agent runs LangChain's agent loop with fathom's middleware stack, outermost first:
    planning (`write_todos`), the filesystem tools over `backend`, the `task` tool over the
    subagents, Anthropic prompt caching (ignored for other providers), the caller's
    `middleware` (one with the `.name` of a built-in replaces it), human approval for the
    tools in `interrupt_on`, repair of dangling and malformed tool calls, and prompt
    assembly.

    Args:
        model: A `"provider:model"` string, a chat model, or `None` to read `FATHOM_MODEL`.
        tools: Extra tools, next to the built-in ones.
        system_prompt: The caller's instructions; they come first in the system prompt,
            before fathom's base prompt and each middleware's section. A `SystemMessage`
            with a list of content blocks keeps its blocks (and their `cache_control`
            markers) unchanged; fathom's sections follow as one more text block.
        middleware: Extra middleware, placed after fathom's own.
        subagents: `SubAgent` specs (dicts: `name`, `description`, `system_prompt`, and
            optionally `tools`, `model`, `middleware`, `interrupt_on`, `permissions`,
            `response_format`, `mode`) and `CompiledSubAgent`s (`name`, `description`,
            `runnable`, `mode`). They are reached through the `task` tool. A spec's `tools`
            replace the main agent's; it has the file tools too, but no `write_todos`.
            `mode="fork"` makes a subagent continue the main agent's conversation with the
            main agent's system prompt, tools and middleware (its own `system_prompt` is
            added to that prompt), so its requests share the main agent's prompt-cache
            prefix. An `AsyncSubAgent` (told by its `graph_id`: `name`, `description`,
            `graph_id`, and optionally `url`, `headers`, `webhook`, `update_strategy`,
            `notify_parent`, `mode`) runs in the background on an Agent Protocol server,
            reached through `start_async_task` and the other async subagent tools
            (`AsyncSubAgentMiddleware`); the `task` tool and the general-purpose subagent
            stay.
        skills: Skill source directories on the backend (`"/skills/project/"`): each
            holds `<name>/SKILL.md`; only names and descriptions go into the prompt, the
            model reads a skill when it needs it. Later sources win on a name clash. The
            general-purpose subagent inherits them; other subagents take their own.
        memory: `AGENTS.md`-style files on the backend, loaded into the system prompt at
            the start of every run; the agent may edit them.
        permissions: Ordered `FilesystemPermission` rules for the file tools, checked
            before the backend is touched: first match wins, no match allows. An
            `"interrupt"` rule pauses the file tool call for approval, as an `interrupt_on`
            entry would (its decisions: approve, edit, reject, respond).
        backend: Where files live: a backend or a factory `(runtime) -> backend`.
            Defaults to `StateBackend()`. Subagents share it. A backend that runs commands
            (`LocalShellBackend`, `BubblewrapSandbox`, a `SandboxScope`) adds `execute`.
        interrupt_on: Tool name → `True` (approve / edit / reject / respond), `False`, or
            an `InterruptOnConfig`. Needs a checkpointer (`checkpointer`, or one a
            LangGraph server supplies; without either, a warning). Subagents built from
            specs inherit it (a spec's own entries override the inherited ones). Every key
            must name one of the tools of the agent (its `tools`, the file tools,
            `write_todos`, `task`, `execute` when the backend runs commands) or of its
            subagents; a misspelled one raises.
        response_format: A schema (pydantic model, dataclass, TypedDict, JSON schema) or a
            LangChain response format; the validated result is `structured_response`.
        state_schema: A `TypedDict` that extends `fathom.state.DeepAgentState` with the
            caller's own keys. It becomes the graph's state schema (merged with the
            middleware's) and the state of the subagents built from specs, so those keys
            reach the subagents and their changes come back to the parent. A
            `CompiledSubAgent` keeps its own schema.
        context_schema: Type of the runtime `context` passed at invocation.
        checkpointer: Saves thread state; required for `interrupt_on`.
        store: A LangGraph store for cross-thread data.
        debug: LangGraph debug output.
        name: The agent's name (graph name and `lc_agent_name` in stream metadata).
        cache: A LangGraph node cache.
        general_purpose_subagent: `False` leaves out the default `general-purpose`
            subagent (a spec with that name replaces it either way). Without any subagent
            there is no `task` tool.
        code_interpreter: `True`, a dict of `CodeInterpreterMiddleware` options
            (`ptc`, `persistence`, `limits`) or the middleware itself: adds the `eval`
            tool, Python in the Monty sandbox that runs this agent's subagents with
            `await task(...)`. `ptc` may name any tool the agent has, built-in ones
            such as `read_file` included. It works under `invoke` as under `ainvoke`
            (a sync run hands the interpreter to a worker event loop). Needs
            `pip install 'fathom[code]'`.
        budget: A `fathom.Budget` (or a mapping of its fields): caps on the tokens, US
            dollars, seconds and model calls of the whole tree (this agent, its `task`
            and `eval` subagents, and its async subagents as their servers report).
            At a cap no new model call starts and the run ends with a final message that
            says which cap was reached; the spend is kept in the `fathom_budget` state
            channel, so a later run on the thread with a raised budget continues. A run's
            `config["configurable"]["fathom_budget"]` replaces its caps. See
            docs/budgets.md. `None` (the default) changes nothing.

    Returns:
        The compiled agent graph. Its state has `messages`, `files`, `todos` and, with
        `response_format`, `structured_response`.
        With a `checkpointer` it is a `fathom.runs.ThreadGuardedGraph`: a second run
        on a thread that is still running raises `ThreadBusyError`.

    Raises:
        ModelNotConfiguredError: no model given and `FATHOM_MODEL` unset.
        ValueError: a bad `interrupt_on` entry, an `interrupt_on` key that no agent of the
            tree has (a subagent's own keys: not one of the subagent's tools), or a bad
            subagent spec.
        NotImplementedError: `permissions` on paths served by a backend that can run
            shell commands.
        BudgetError: a bad `budget`, or `max_usd` with a model that has no price.
    """
    chat_model = resolve_model(model)
    backend = adopt(backend) if backend is not None else None  # a foreign one, wrapped once
    core = _core_middleware(backend, permissions, memory=memory, skills=skills)
    approval = _hitl(interrupt_on, checkpointer is not None, permissions)
    budget_root, budget_gate = _budget(budget, chat_model, subagents or [])
    compiled = _compile_subagents(
        subagents or [],
        model=chat_model,
        tools=list(tools or []),
        system_prompt=system_prompt,
        middleware=middleware,
        permissions=permissions,
        backend=backend,
        interrupt_on=interrupt_on,
        context_schema=context_schema,
        has_checkpointer=checkpointer is not None,
        general_purpose=general_purpose_subagent,
        skills=skills,
        state_schema=state_schema,
        memory=memory,
        gate=budget_gate,
    )
    # the subagents inherit `interrupt_on`: a name one of them has is not a typo
    subagent_tools = _subagent_tool_names(compiled)
    task_middleware = SubAgentMiddleware(compiled) if compiled else None
    if task_middleware is not None:
        core = _with_task_tool(core, task_middleware)
    async_specs = [
        cast("AsyncSubAgent", spec)
        for spec in subagents or []
        if isinstance(spec, Mapping) and "graph_id" in spec
    ]
    async_middleware = (AsyncSubAgentMiddleware(async_subagents=async_specs)
                        if async_specs else None)
    if code_interpreter:
        # `ptc` may name any tool the agent has: its own, its middleware's (the built-in
        # file tools, `write_todos`, `task`, `execute`) and the async task tools
        everything = [*(tools or []),
                      *(t for m in [*core, *(middleware or ()), async_middleware] if m
                        for t in getattr(m, "tools", None) or ())]
        core = [*core, _code_interpreter(code_interpreter, task_middleware, everything)]
    if async_middleware is not None:  # next to the `task` tool, which stays
        core = [*core, async_middleware]
    if budget_root is not None:  # outermost: it admits every model call, sees every tool call
        budget_root.async_subagents = next(
            (m for m in core if isinstance(m, AsyncSubAgentMiddleware)), None)
        core = [budget_root, *core]
    graph = _build_graph(
        chat_model,
        list(tools or []),
        system_prompt=system_prompt,
        core=core,
        middleware=middleware,
        approval=approval,
        response_format=response_format,
        context_schema=context_schema,
        checkpointer=checkpointer,
        store=store,
        debug=debug,
        name=name,
        cache=cache,
        interrupt_on=interrupt_on,
        state_schema=state_schema,
        subagent_tool_names=subagent_tools,
    )
    _add_tracing(graph)
    # one run per thread at a time: a second one would overwrite the first's turn
    agent = ThreadGuardedGraph.from_graph(graph) if checkpointer is not None else graph
    own = _tool_names_of(graph) or set()
    if subagent_tools is not None:
        _TREE_TOOL_NAMES[agent] = frozenset(own | subagent_tools)
    return agent


def _add_tracing(graph: Any) -> None:
    """Give `graph` the tracing callback handler when `fathom.tracing` is on (else nothing).

    The handler sits in the graph's own config, so every run of it (and of the subagents it
    starts, which inherit its callbacks) is traced without the caller passing it.
    """
    from fathom.tracing.settings import active_handler

    handler = active_handler()
    if handler is not None:
        graph.config = {**(graph.config or {}), "callbacks": [handler]}
