"""Applying a harness profile to one agent: its prompt, its tools and its middleware."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
)
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from fathom.call_hooks import ModelRequestRewrite, ToolCallGate
from fathom.profiles.harness import SCAFFOLDING_MIDDLEWARE, HarnessProfile
from fathom.prompt import AssembledSystemMessage, PromptSection, sections_of
from fathom.tool_answers import tool_error

__all__ = [
    "SUFFIX_SECTION",
    "ProfileToolsMiddleware",
    "apply_profile",
    "check_exclusions_matched",
    "tool_name",
]

SUFFIX_SECTION = "profile_suffix"
"""The name of the prompt section holding a harness profile's `system_prompt_suffix`, which
is rendered after every other section (`PromptSection.last`)."""


def tool_name(tool: Any) -> str:
    """The name the model calls `tool` by: a `BaseTool`, a provider tool dict or a function."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        return str(tool.get("name") or (function.get("name") if isinstance(function, Mapping)
                                        else "") or "")
    return str(getattr(tool, "name", None) or getattr(tool, "__name__", ""))


def _described(tool: Any, description: str) -> Any:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping):
            return {**tool, "function": {**function, "description": description}}
        return {**tool, "description": description}
    return tool.model_copy(update={"description": description})


class ProfileToolsMiddleware(ModelRequestRewrite, ToolCallGate, AgentMiddleware):
    """Shows the model the profile's tool descriptions and hides its excluded tools.

    It works on each model request, so it reaches every tool alike: the caller's and those
    the built-in middleware add (`task`, the file tools, `write_todos`).
    """

    def __init__(self, overrides: Mapping[str, str], excluded: frozenset[str]) -> None:
        super().__init__()
        self.overrides = dict(overrides)
        self.excluded = frozenset(excluded)

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        tools = []
        for tool in request.tools:
            name = tool_name(tool)
            if name in self.excluded:
                continue
            tools.append(_described(tool, self.overrides[name]) if name in self.overrides else tool)
        return request.override(tools=tools)

    def refuse_tool_call(self, request: ToolCallRequest) -> ToolMessage | None:
        """An error answer for a call to a hidden tool: the tool node still has it, so a
        model that names it anyway (from memory or an earlier turn) must not run it."""
        name = request.tool_call["name"]
        if name not in self.excluded:
            return None
        return tool_error(content=f"Error: the tool `{name}` is not available.",
                           tool_call_id=request.tool_call["id"] or "", name=name)


def _entry_label(entry: object) -> str:
    return repr(entry) if isinstance(entry, str) else getattr(entry, "__name__", repr(entry))


def check_exclusions_matched(profile: HarnessProfile, stack: Sequence[AgentMiddleware]) -> None:
    """Raise `ValueError` when an `excluded_middleware` entry matches nothing in `stack`.

    An entry that removes nothing is a typo or a profile written for another stack; left
    alone it would silently keep the middleware it meant to remove.
    """
    unmatched = sorted(
        _entry_label(entry) for entry in profile.excluded_middleware
        if not any(HarnessProfile(excluded_middleware=frozenset({entry})).excludes(m)
                   for m in stack)
    )
    if unmatched:
        present = sorted({m.name for m in stack})
        raise ValueError(
            f"HarnessProfile.excluded_middleware entries {', '.join(unmatched)} match no "
            f"middleware of this agent (it has: {', '.join(present)}); remove them or fix "
            "the name."
        )


def _filled(overrides: Mapping[str, str], stack: Sequence[AgentMiddleware]) -> dict[str, str]:
    """`overrides` with `{available_agents}` in the `task` description replaced by the list
    of subagents, as the subagent middleware does for its own description."""
    out = dict(overrides)
    task = out.get("task")
    if task is None or "{available_agents}" not in task:
        return out
    for middleware in stack:
        subagents = getattr(middleware, "subagents", None)
        if type(middleware).__name__ == "SubAgentMiddleware" and isinstance(subagents, Mapping):
            catalogue = "\n".join(f"- {s['name']}: {s['description']}"
                                  for s in subagents.values())
            out["task"] = task.replace("{available_agents}", catalogue)
    return out


def apply_profile(
    profile: HarnessProfile,
    system_message: AssembledSystemMessage,
    stack: Sequence[AgentMiddleware],
    *,
    check_exclusions: bool = True,
) -> tuple[AssembledSystemMessage, list[AgentMiddleware]]:
    """`system_message` and the middleware `stack` changed as `profile` says.

    The prompt keeps the caller's part first; the `base` section becomes the profile's
    base prompt, and the suffix is a section rendered last of all, after the sections the
    middleware adds on each call (the prompt assembly order the Deep Agents API documents:
    the caller's prompt, the base, then the suffix at the end). Excluded middleware leaves
    the stack (never the scaffolding), extra middleware follows it, and the tool changes
    come last, so they see every tool.
    With `check_exclusions`, an exclusion that matches none of the stack raises
    `ValueError` (see `check_exclusions_matched`).
    """
    full = [*stack, *profile.materialize_extra_middleware()]
    if check_exclusions:
        check_exclusions_matched(profile, full)
    sections = sections_of(system_message)
    base = next((s for s in sections if s.name == "base"), None)
    if profile.base_system_prompt is not None:
        if base is not None:
            sections[sections.index(base)] = PromptSection(
                "base", profile.base_system_prompt, base.stability
            )
        else:
            sections.append(PromptSection("base", profile.base_system_prompt))
    if profile.system_prompt_suffix:
        # after every section the middleware adds too (memory, skills, files, ...)
        sections.append(PromptSection(SUFFIX_SECTION, profile.system_prompt_suffix, last=True))
    kept = [m for m in full if type(m).__name__ in SCAFFOLDING_MIDDLEWARE
            or not profile.excludes(m)]
    if profile.tool_description_overrides or profile.excluded_tools:
        kept.append(ProfileToolsMiddleware(_filled(profile.tool_description_overrides, kept),
                                           profile.excluded_tools))
    return AssembledSystemMessage.from_sections(sections, system_message.leading), kept
