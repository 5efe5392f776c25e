"""Subagents: the `task` tool, which hands a task to another agent with a fresh context.

The subagent sees only its own system prompt and the task's `description`; the parent sees
only the subagent's final answer (or, with `response_format`, its structured result as
JSON). Files go both ways through the shared backend: the subagent starts from the parent's
`files` and the files it changes come back as one update. Several `task` calls in one model
message run at the same time, each as its own LangGraph task, so with `subgraphs=True` a
subagent's events stream under the namespace `tools:<task id>`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired

from langchain.agents.middleware import InterruptOnConfig
from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.errors import GraphBubbleUp, GraphRecursionError
from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from fathom.middleware.permissions import FilesystemPermission
from fathom.state import FileData

__all__ = [
    "GENERAL_PURPOSE",
    "GENERAL_PURPOSE_DESCRIPTION",
    "TASK_TOOL_DESCRIPTION",
    "CompiledSubAgent",
    "SubAgent",
    "SubAgentMiddleware",
    "subagent_answer",
]

GENERAL_PURPOSE = "general-purpose"
"""Name of the subagent every deep agent has unless it is replaced or turned off."""

GENERAL_PURPOSE_DESCRIPTION = (
    "Does any task the main agent could do itself, with the same tools and instructions, "
    "in a separate context. Use it to keep bulky intermediate work (many searches, long "
    "files) out of the main conversation."
)


class SubAgent(TypedDict):
    """A subagent described by its parts; `create_deep_agent` builds it.

    Inheritance from the main agent: `tools`, `model`, `interrupt_on` and `permissions` are
    the main agent's unless given (given `tools` and `permissions` replace the main ones,
    given `interrupt_on` entries override the main ones); `system_prompt` and
    `middleware` are never inherited.
    """

    name: str
    description: str
    system_prompt: str
    tools: NotRequired[Sequence[BaseTool | Any]]
    model: NotRequired[str | BaseChatModel]
    middleware: NotRequired[Sequence[AgentMiddleware]]
    interrupt_on: NotRequired[Mapping[str, bool | InterruptOnConfig]]
    skills: NotRequired[list[str]]
    permissions: NotRequired[Sequence[FilesystemPermission]]
    response_format: NotRequired[Any]


class CompiledSubAgent(TypedDict):
    """A subagent that is any compiled LangGraph graph whose state has `messages`."""

    name: str
    description: str
    runnable: Runnable


TASK_TOOL_DESCRIPTION = """Hand a self-contained task to a subagent, which works on it in a fresh context and returns one final report.

Subagents you can use (subagent_type: what it is for):
{available_agents}

The subagent sees only `description`, not this conversation: put in everything it needs (goal, inputs, file paths, the form of the answer you want). It cannot ask you questions. Files it writes are visible to you afterwards. For independent tasks, call `task` several times in one message; they run at the same time. Do not delegate quick, single-step work."""  # noqa: E501


class TaskInput(BaseModel):
    description: str = Field(
        description="The complete task for the subagent, with all the context it needs."
    )
    subagent_type: str = Field(description="Which subagent to use: one of the names listed.")


# The state channels that cross into and out of a subagent: the shared filesystem.
_SHARED_KEYS = frozenset({"files"})


def _private_state_keys() -> frozenset[str]:
    """State keys that belong to one agent and never cross into or out of a subagent.

    Derived from the state schemas of the agent and of fathom's middleware (conversation,
    plan, loaded memory, skill catalogue, compaction flag, ...), all but `_SHARED_KEYS`,
    so a middleware that adds a key keeps it private without a hand-kept list to update.
    A user's own state keys are not among them and do cross.
    """
    from langchain.agents.middleware.todo import PlanningState

    from fathom.middleware.memory import MemoryState
    from fathom.middleware.skills import SkillsState
    from fathom.middleware.summarization import CompactionState
    from fathom.state import DeepAgentState

    keys = {"remaining_steps"}  # a managed value LangGraph adds to every agent graph
    for schema in (DeepAgentState, PlanningState, MemoryState, SkillsState, CompactionState):
        keys |= schema.__required_keys__ | schema.__optional_keys__
    return frozenset(keys - _SHARED_KEYS)


_PRIVATE_KEYS = _private_state_keys()


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
            f"Subagent {spec['name']!r}: its graph state has no 'messages' key; the task is "
            "given as a message and the answer is read from the messages."
        )
    return CompiledSubAgent(
        name=spec["name"], description=spec["description"], runnable=runnable
    )


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


def _shared_update(state: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of the subagent's final state that go back to the parent."""
    update: dict[str, Any] = {}
    if "files" in result:
        delta = _files_delta(state.get("files") or {}, result.get("files") or {})
        if delta:
            update["files"] = delta
    for key, value in result.items():
        if key in _PRIVATE_KEYS or key == "files" or key not in state:
            continue
        if state[key] != value:
            update[key] = value
    return update


class SubAgentMiddleware(AgentMiddleware):
    """Adds the `task` tool over compiled subagents.

    Args:
        subagents: `CompiledSubAgent` dicts (`name`, `description`, `runnable`); names must
            be unique. `create_deep_agent` builds `SubAgent` specs into these.
        task_description: Replaces the tool description; `{available_agents}` in it is
            replaced by the `- name: description` list.
    """

    def __init__(
        self,
        subagents: Sequence[Mapping[str, Any]],
        *,
        task_description: str | None = None,
    ) -> None:
        super().__init__()
        checked = [_check_compiled(spec) for spec in subagents]
        names = [spec["name"] for spec in checked]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Subagent names must be unique; repeated: {duplicates}.")
        if not checked:
            raise ValueError("SubAgentMiddleware needs at least one subagent.")
        self.subagents: dict[str, CompiledSubAgent] = {s["name"]: s for s in checked}
        catalogue = "\n".join(f"- {s['name']}: {s['description']}" for s in checked)
        template = task_description or TASK_TOOL_DESCRIPTION
        self.tools = [
            StructuredTool.from_function(
                name="task",
                description=template.replace("{available_agents}", catalogue),
                func=self._task,
                coroutine=self._atask,
                args_schema=TaskInput,
                infer_schema=False,
            )
        ]

    # -- the tool ------------------------------------------------------------------------

    def _prepare(
        self, runtime: ToolRuntime, description: str, subagent_type: str
    ) -> tuple[CompiledSubAgent, dict[str, Any], RunnableConfig] | ToolMessage:
        spec = self.subagents.get(subagent_type)
        if spec is None:
            return ToolMessage(
                content=(
                    f"Error: there is no subagent called {subagent_type!r}. Use one of: "
                    f"{', '.join(sorted(self.subagents))}."
                ),
                tool_call_id=runtime.tool_call_id,
                name="task",
                status="error",
            )
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        runnable = spec["runnable"]
        channels = runnable.channels if isinstance(runnable, Pregel) else None
        payload = {
            key: value
            for key, value in state.items()
            if key not in _PRIVATE_KEYS and (channels is None or key in channels)
        }
        payload["messages"] = [HumanMessage(content=description)]
        config = RunnableConfig(**(runtime.config or {}))
        metadata = {
            **(config.get("metadata") or {}),
            "lc_agent_name": spec["name"],
            "ls_agent_type": "subagent",
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
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        result = result if isinstance(result, Mapping) else {"messages": []}
        message = ToolMessage(
            content=subagent_answer(result),
            tool_call_id=runtime.tool_call_id,
            name="task",
        )
        return Command(update={**_shared_update(state, result), "messages": [message]})

    def _failure(self, runtime: ToolRuntime, name: str, error: Exception) -> ToolMessage:
        if isinstance(error, GraphRecursionError):
            text = (
                f"Error: subagent {name!r} was stopped: it reached the step limit "
                "(recursion_limit) without finishing. Give it a narrower task, or do the work "
                "another way."
            )
        else:
            text = (
                f"Error: subagent {name!r} failed: {type(error).__name__}: {error}. Its work "
                "is lost; retry with a clearer task or do it another way."
            )
        return ToolMessage(content=text, tool_call_id=runtime.tool_call_id, name="task",
                           status="error")

    def _task(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Any:
        prepared = self._prepare(runtime, description, subagent_type)
        if isinstance(prepared, ToolMessage):
            return prepared
        spec, payload, config = prepared
        try:
            result = spec["runnable"].invoke(payload, config)
        except GraphBubbleUp:
            raise
        except Exception as error:
            return self._failure(runtime, spec["name"], error)
        return self._finish(runtime, spec, result)

    async def _atask(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Any:
        prepared = self._prepare(runtime, description, subagent_type)
        if isinstance(prepared, ToolMessage):
            return prepared
        spec, payload, config = prepared
        try:
            result = await spec["runnable"].ainvoke(payload, config)
        except GraphBubbleUp:
            raise
        except Exception as error:
            return self._failure(runtime, spec["name"], error)
        return self._finish(runtime, spec, result)
