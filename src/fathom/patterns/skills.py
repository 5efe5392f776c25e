"""Skills as a pattern: one agent that loads specialised instructions when it needs them.

Only a catalogue (each skill's name and description) sits in the system prompt. When a
request calls for a skill, the model calls `load_skill(skill_name)` and the skill's full
content enters the conversation as that call's `ToolMessage` (progressive disclosure). The
names of the skills loaded so far are kept in the `skills_loaded` state key, so a tool can
refuse to run until the skill it depends on has been read.

```python
agent = create_agent(
    model,
    system_prompt="You are a SQL query assistant.",
    middleware=[SkillMiddleware(SKILLS, requires={"write_sql_query": "sales_analytics"})],
    tools=[write_sql_query],
    checkpointer=InMemorySaver(),
)
```

This is the light construct over `create_agent` that LangChain's multi-agent docs describe.
fathom's deep-agent skills (`fathom.middleware.skills`) read `SKILL.md` files from a backend
instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ToolCallRequest,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from fathom.call_hooks import ModelRequestRewrite, ToolCallGate
from fathom.errors import wrong_type
from fathom.tool_answers import tool_error

__all__ = [
    "LOAD_SKILL_TOOL",
    "Skill",
    "SkillMiddleware",
    "SkillsState",
    "merge_skill_names",
    "require_skill",
]

LOAD_SKILL_TOOL = "load_skill"
"""Name of the tool that loads a skill's content into the conversation."""


class Skill(TypedDict):
    """A skill: instructions the agent loads on demand.

    `name` and `description` are always in the system prompt (the description is what the
    model picks a skill by); `content` reaches the model only when it loads the skill.
    """

    name: str
    description: str
    content: str


def merge_skill_names(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Reducer for `skills_loaded`: keep every name once, in the order first loaded.

    Without a reducer the channel keeps only the last write, so loading a second skill
    would forget the first; with `operator.add` a reloaded skill would be listed twice.
    """
    merged = list(left or [])
    for name in right or []:
        if name not in merged:
            merged.append(name)
    return merged


class SkillsState(AgentState):
    """Agent state with the names of the skills loaded in this thread."""

    skills_loaded: NotRequired[Annotated[list[str], merge_skill_names]]


def require_skill(state: Mapping[str, Any] | None, skill_name: str) -> str | None:
    """An error for the model if `skill_name` has not been loaded yet, else `None`.

    Use it at the top of a tool that only makes sense after the skill was read (the
    tool gets the state through a `ToolRuntime` argument):

    ```python
    if error := require_skill(runtime.state, vertical):
        return error
    ```
    """
    loaded = (state or {}).get("skills_loaded") or []
    if skill_name in loaded:
        return None
    return (
        f"Error: the '{skill_name}' skill is not loaded, so its rules are unknown to you. "
        f"Call load_skill('{skill_name}') first, then repeat this call following what it says."
    )


_CATALOG_HINT = (
    "Each skill holds detailed instructions (schemas, rules, examples) for one kind of "
    "request. Before you handle such a request, call load_skill with the skill's name and "
    "follow what it returns."
)


class _LoadSkillInput(BaseModel):
    skill_name: str = Field(description="The name of the skill to load, exactly as listed.")


def _check_skills(skills: Iterable[Mapping[str, Any]]) -> dict[str, Skill]:
    registry: dict[str, Skill] = {}
    for position, skill in enumerate(skills):
        if not isinstance(skill, Mapping):
            raise wrong_type(f"skills[{position}]", skill,
                             "a Skill dict with 'name', 'description' and 'content'.")
        for key in ("name", "description", "content"):
            value = skill.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(
                    f"skills[{position}] ({skill.get('name', '?')!r}) needs a non-empty "
                    f"string {key!r}."
                )
        name = skill["name"]
        if name in registry:
            raise ValueError(f"Skill names must be unique; {name!r} is given twice.")
        registry[name] = Skill(
            name=name, description=skill["description"], content=skill["content"]
        )
    if not registry:
        raise ValueError("SkillMiddleware needs at least one skill.")
    return registry


class SkillMiddleware(ModelRequestRewrite, ToolCallGate, AgentMiddleware[SkillsState]):
    """Progressive disclosure of skills for one agent.

    Adds the `load_skill(skill_name)` tool, appends an `## Available Skills` catalogue to
    the system message of every model call (after the agent's own prompt, which is kept),
    and records loaded skills in `skills_loaded`. An unknown name is answered with the
    list of skills, never an exception.

    Args:
        skills: The registry. Names must be unique; the tool's description and the
            catalogue are derived from it, so there is one source of truth.
        requires: Tool name → skill name. A call to such a tool before its skill was
            loaded is answered with an error telling the model to load the skill; the tool
            does not run. For a check that depends on the call's arguments, use
            `require_skill` inside the tool instead.
    """

    state_schema = SkillsState

    def __init__(
        self,
        skills: Sequence[Skill],
        *,
        requires: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.skills: dict[str, Skill] = _check_skills(skills)
        self.requires: dict[str, str] = dict(requires or {})
        unknown = sorted(set(self.requires.values()) - set(self.skills))
        if unknown:
            raise ValueError(
                f"requires= names skills that are not registered: {unknown}. "
                f"Registered skills: {', '.join(self.skills)}."
            )
        listing = "\n".join(
            f"- **{s['name']}**: {s['description']}" for s in self.skills.values()
        )
        self.catalog = f"\n\n## Available Skills\n\n{listing}\n\n{_CATALOG_HINT}\n"
        tool_listing = "\n".join(f"- {s['name']}: {s['description']}" for s in self.skills.values())
        self.tools = [
            StructuredTool.from_function(
                name=LOAD_SKILL_TOOL,
                description=(
                    "Load a skill's full instructions into the conversation. Call it before "
                    "working on a request that one of these skills covers:\n" + tool_listing
                ),
                func=self._load_skill,
                coroutine=self._aload_skill,
                args_schema=_LoadSkillInput,
                infer_schema=False,
            )
        ]

    # -- the tool ------------------------------------------------------------------------

    def _load_skill(self, skill_name: str, runtime: ToolRuntime) -> Command | ToolMessage:
        skill = self.skills.get(skill_name)
        if skill is None:
            return tool_error(
                content=(
                    f"Skill '{skill_name}' not found. "
                    f"Available skills: {', '.join(self.skills)}"
                ),
                tool_call_id=runtime.tool_call_id,
                name=LOAD_SKILL_TOOL,
            )
        message = ToolMessage(
            content=f"Loaded skill: {skill['name']}\n\n{skill['content']}",
            tool_call_id=runtime.tool_call_id,
            name=LOAD_SKILL_TOOL,
        )
        return Command(update={"messages": [message], "skills_loaded": [skill["name"]]})

    async def _aload_skill(self, skill_name: str, runtime: ToolRuntime) -> Command | ToolMessage:
        return self._load_skill(skill_name, runtime)

    # -- the catalogue -------------------------------------------------------------------

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        """Show the model the skill catalogue after its own system prompt."""
        original = request.system_message
        if original is None:
            return request.override(system_message=SystemMessage(content=self.catalog.lstrip()))
        # The raw blocks, not `content_blocks`: provider fields such as cache markers survive.
        content = original.content
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        blocks.append({"type": "text", "text": self.catalog})
        return request.override(system_message=original.model_copy(update={"content": blocks}))

    # -- the gate ------------------------------------------------------------------------

    def refuse_tool_call(self, request: ToolCallRequest) -> ToolMessage | None:
        """Refuse a `requires=` tool until its skill is loaded."""
        call = request.tool_call
        skill_name = self.requires.get(call["name"])
        if skill_name is None:
            return None
        error = require_skill(request.state, skill_name)
        if error is None:
            return None
        return tool_error(
            content=error, tool_call_id=call["id"], name=call["name"])
