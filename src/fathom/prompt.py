"""Prompt assembly: the system prompt as named sections, emitted stable-first.

Provider prompt caches match on the exact prefix of a request (system, then tools, then
messages). fathom builds the system prompt from sections marked `stable` (the same for
every call of every run), `conditional` (present only under some configuration, but fixed
once the agent is built) or `volatile` (may change between calls), and renders them in
that order, each group in the order the sections were added. Whatever changes therefore
changes as late in the prompt as possible.

Middleware adds its section with `add_prompt_section(request, section)`; the sections
travel on the request's system message (`AssembledSystemMessage`), whose `content` is always
the rendered text, so any model and any other middleware see an ordinary system message.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
)
from langchain_core.messages import SystemMessage

from fathom.call_hooks import ModelRequestRewrite

__all__ = [
    "BASE_PROMPT",
    "AssembledSystemMessage",
    "PromptAssemblyMiddleware",
    "PromptSection",
    "PromptSectionMiddleware",
    "SectionPromptMixin",
    "Stability",
    "add_prompt_section",
    "check_prompt_template",
    "explains_offered_tools",
    "offered_tool_names",
    "render_sections",
    "sections_of",
    "tool_sort_key",
    "with_section",
]

Stability = Literal["stable", "conditional", "volatile"]
_RANK: dict[str, int] = {"stable": 0, "conditional": 1, "volatile": 2}

BASE_PROMPT = """You work through multi-step tasks with the tools you have.

- Keep bulky material out of the conversation: save it to files and read back only what you need.
- When a `task` tool is available, hand self-contained pieces of work to a subagent and give it everything it needs to know.
- Check your work before you finish (read back what you wrote, re-run what you built). Then reply with the result itself, not a report that you are done."""  # noqa: E501
"""fathom's built-in base prompt: it follows the caller's `system_prompt`."""


@dataclass(frozen=True)
class PromptSection:
    """One named part of the system prompt."""

    name: str
    text: str
    stability: Stability = "stable"
    cache_breakpoint: bool = False
    """End the text block here with an Anthropic `cache_control` marker, so the prompt up to
    and including this section is cached on its own (`MemoryMiddleware(add_cache_control=)`)."""
    tools: frozenset[str] = frozenset()
    """The tools this section explains: it is left out of a model request that offers none
    of them (a profile's `excluded_tools`, a filter hiding tools). Empty: always shown."""
    last: bool = False
    """Rendered after every other section, whatever their stability: a harness profile's
    `system_prompt_suffix`, which the Deep Agents API places at the end of the prompt."""


def _ordered(sections: Iterable[PromptSection]) -> list[PromptSection]:
    return sorted(
        (s for s in sections if s.text.strip()), key=lambda s: (s.last, _RANK[s.stability])
    )


def render_sections(sections: Iterable[PromptSection]) -> str:
    """Join sections stable-first (then conditional, then volatile; a section marked `last`
    after all of them), blank line between."""
    return "\n\n".join(s.text.strip("\n") for s in _ordered(sections))


def _cached_prefix(sections: Iterable[PromptSection]) -> str | None:
    """The rendered text up to and including the last section with a cache breakpoint."""
    ordered = _ordered(sections)
    marked = [i for i, s in enumerate(ordered) if s.cache_breakpoint]
    if not marked:
        return None
    return render_sections(ordered[: marked[-1] + 1])


@functools.lru_cache(maxsize=64)
def _rendered(sections: tuple[PromptSection, ...]) -> tuple[str, str | None]:
    """`render_sections` and `_cached_prefix` of `sections`, computed once per distinct tuple.

    Every model call renders the same few section tuples again (each middleware adds its
    section to the message the previous one built), so the text is kept rather than joined
    anew on every call. Sections are frozen, so a tuple always renders the same.
    """
    return render_sections(sections), _cached_prefix(sections)


class AssembledSystemMessage(SystemMessage):
    """A system message that remembers the sections it was rendered from.

    `leading` holds content blocks the caller gave as its own system message (for example
    text blocks with `cache_control` breakpoints). They are kept unchanged at the start of
    the message and the rendered sections follow as one more text block.
    """

    sections: tuple[PromptSection, ...] = ()
    leading: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_sections(
        cls, sections: Iterable[PromptSection], leading: Iterable[dict[str, Any]] = ()
    ) -> AssembledSystemMessage:
        """Render `sections` into a new message, after the `leading` content blocks."""
        sections, leading = tuple(sections), tuple(leading)
        return cls(content=_content(sections, leading), sections=sections, leading=leading)


def _content(
    sections: tuple[PromptSection, ...], leading: tuple[dict[str, Any], ...]
) -> str | list[str | dict[str, Any]]:
    """The `content` of the system message rendered from `sections` after `leading`."""
    rendered, prefix = _rendered(sections)
    if not leading and prefix is None:
        return rendered
    blocks: list[str | dict[str, Any]] = [dict(block) for block in leading]
    gap = "\n\n" if leading else ""
    if prefix is not None:
        # split after the marked section; the text, joined, is the same as unmarked
        cached = {"type": "text", "text": f"{gap}{prefix}"}
        blocks.append({**cached, "cache_control": {"type": "ephemeral"}})
        if rest := rendered[len(prefix) :]:
            blocks.append({"type": "text", "text": rest})
    elif rendered:
        blocks.append({"type": "text", "text": f"{gap}{rendered}"})
    return blocks


def sections_of(message: SystemMessage | None) -> list[PromptSection]:
    """The sections of a system message; a plain message is one stable section."""
    if message is None:
        return []
    if (
        isinstance(message, AssembledSystemMessage)
        and message.sections
        and message.content == _content(message.sections, message.leading)
    ):
        return list(message.sections)
    text = message.text
    return [PromptSection("system", text, "stable")] if text.strip() else []


def with_section(message: SystemMessage | None, section: PromptSection) -> AssembledSystemMessage:
    """A message with `section` added, or replacing (in place) a section of the same name."""
    sections = sections_of(message)
    names = [s.name for s in sections]
    if section.name in names:
        sections[names.index(section.name)] = section
    else:
        sections.append(section)
    leading = message.leading if isinstance(message, AssembledSystemMessage) else ()
    return AssembledSystemMessage.from_sections(sections, leading)


def add_prompt_section(request: ModelRequest, section: PromptSection) -> ModelRequest:
    """Return `request` with `section` added to its system message."""
    return request.override(system_message=with_section(request.system_message, section))


def check_prompt_template(system_prompt: object, slot: str, fills: str, without: str) -> None:
    """Refuse a `system_prompt=` that is neither `None` nor a str holding `{slot}`, where a
    middleware renders what `fills` names; `without` says what `None` does instead."""
    if system_prompt is None:
        return
    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str or None, not {type(system_prompt).__name__}")
    if f"{{{slot}}}" not in system_prompt:
        raise ValueError(
            f"system_prompt must contain the `{{{slot}}}` slot where {fills} go; add it, or "
            f"pass None to {without}."
        )


def _tool_name(tool: Any) -> str | None:
    name = getattr(tool, "name", None)
    if name is None and isinstance(tool, dict):
        function = tool.get("function")
        name = tool.get("name") or (function.get("name") if isinstance(function, dict) else None)
    return name if isinstance(name, str) else None


def offered_tool_names(tools: Iterable[Any]) -> frozenset[str]:
    """The names of the tools a request offers (tools, provider tool dicts)."""
    return frozenset(name for tool in tools if (name := _tool_name(tool)) is not None)


def explains_offered_tools(section: PromptSection, offered: frozenset[str]) -> bool:
    """Whether `section` belongs in a request offering the tools `offered` (one naming no
    tools always does)."""
    return not section.tools or bool(section.tools & offered)


def tool_sort_key(tool: Any) -> str:
    """Key that gives tool schemas one fixed order: by name."""
    name = getattr(tool, "name", None)
    if name is None and isinstance(tool, dict):
        name = tool.get("name") or tool.get("function", {}).get("name")
        if name is None:
            return "~" + json.dumps(tool, sort_keys=True, default=str)
    return str(name)


class PromptAssemblyMiddleware(ModelRequestRewrite, AgentMiddleware):
    """Innermost middleware: fixes tool order and hands the model a plain-text system prompt.

    Sections added by other middleware are already rendered stable-first; this step sorts
    the tool schemas by name, so the request prefix does not depend on the order in which
    middleware contributed tools.

    While the rendered prompt stays the same, every call gets the same `SystemMessage`
    object rather than a fresh copy, so whatever keys on message identity downstream
    (request recorders, caches of converted messages) sees one unchanged message.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last_system: SystemMessage | None = None

    def _plain(self, message: AssembledSystemMessage) -> SystemMessage:
        """A plain system message with `message`'s content: the last one, when equal."""
        last = self._last_system
        if last is not None and last.content == message.content:
            return last
        plain = SystemMessage(content=message.content)
        self._last_system = plain
        return plain

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        tools = sorted(request.tools, key=tool_sort_key)
        message = request.system_message
        if isinstance(message, AssembledSystemMessage):
            message = self._plain(_for_tools(message, offered_tool_names(tools)))
        return request.override(tools=tools, system_message=message)


def _for_tools(message: AssembledSystemMessage, offered: frozenset[str]) -> AssembledSystemMessage:
    """`message` without the sections about tools the request does not offer."""
    sections = sections_of(message)
    kept = [s for s in sections if explains_offered_tools(s, offered)]
    if len(kept) == len(sections):
        return message
    return AssembledSystemMessage.from_sections(kept, message.leading)


class SectionPromptMixin(ModelRequestRewrite):
    """Adds `self.section` to the system prompt of every model call.

    Put it before the middleware base class (`class M(SectionPromptMixin, AgentMiddleware)`)
    so its `wrap_model_call` is the one LangChain finds.
    """

    section: PromptSection

    def section_for_request(self, request: ModelRequest) -> PromptSection | None:
        """The section for this call (default `self.section`); `None` or empty adds none.

        Override it when the section depends on the run's state (memory, skills).
        """
        return self.section

    def _with_section(self, request: ModelRequest) -> ModelRequest:
        """`request` with the section added; the message built for the same system message
        and section last time is handed out again rather than rendered anew."""
        section = self.section_for_request(request)
        if section is None or not section.text.strip():
            return request
        if not explains_offered_tools(section, offered_tool_names(request.tools)):
            return request  # its tools were filtered out before this middleware
        message = request.system_message
        last: tuple[SystemMessage | None, PromptSection, AssembledSystemMessage] | None = (
            getattr(self, "_last_assembled", None)
        )
        if last is not None and last[0] is message and last[1] == section:
            return request.override(system_message=last[2])
        assembled = with_section(message, section)
        self._last_assembled = (message, section, assembled)
        return request.override(system_message=assembled)

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        return self._with_section(request)


class PromptSectionMiddleware(SectionPromptMixin, AgentMiddleware):
    """Adds one fixed section to the system prompt of every model call."""

    def __init__(self, section: PromptSection) -> None:
        super().__init__()
        self.section = section

    @property
    def name(self) -> str:
        return f"PromptSection[{self.section.name}]"
