"""Human approval before sensitive tool calls, on LangChain's `HumanInTheLoopMiddleware`.

fathom adds two things: `True` means the reference's three decisions (approve, edit,
reject), and a short prompt section tells the model which tools wait for a person.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware as _LangChainHITL
from langchain.agents.middleware import InterruptOnConfig

from fathom.middleware.execute import EXECUTE_TOOL
from fathom.prompt import PromptSection, SectionPromptMixin

__all__ = [
    "DEFAULT_DECISIONS",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "check_tool_names",
    "normalize_interrupt_on",
    "unknown_tools_message",
]

DEFAULT_DECISIONS = ("approve", "edit", "reject")
"""The decisions `interrupt_on={tool: True}` allows, as in the reference API."""

_VALID_DECISIONS = {"approve", "edit", "reject", "respond"}


def normalize_interrupt_on(
    interrupt_on: Mapping[str, bool | InterruptOnConfig],
) -> dict[str, bool | InterruptOnConfig]:
    """Expand `True` to the default decisions and check every configuration.

    Raises:
        ValueError: for a value that is neither a bool nor a config with known decisions.
    """
    normalized: dict[str, bool | InterruptOnConfig] = {}
    for tool, config in interrupt_on.items():
        if config is True:
            normalized[tool] = InterruptOnConfig(allowed_decisions=list(DEFAULT_DECISIONS))
        elif config is False:
            normalized[tool] = False
        elif isinstance(config, Mapping):
            decisions = config.get("allowed_decisions")
            if not decisions:
                raise ValueError(
                    f"interrupt_on[{tool!r}] needs a non-empty 'allowed_decisions' list, "
                    f"e.g. {{'allowed_decisions': {list(DEFAULT_DECISIONS)}}}"
                )
            unknown = set(decisions) - _VALID_DECISIONS
            if unknown:
                raise ValueError(
                    f"interrupt_on[{tool!r}] has unknown decisions {sorted(unknown)}; "
                    f"allowed are {sorted(_VALID_DECISIONS)}"
                )
            normalized[tool] = InterruptOnConfig(**config)
        else:
            raise ValueError(
                f"interrupt_on[{tool!r}] must be True, False or an InterruptOnConfig, "
                f"not {config!r}"
            )
    return normalized


def unknown_tools_message(unknown: Iterable[str], known: Collection[str], where: str) -> str:
    """The error for tool names that are not among `known`: names each typo, suggests the
    closest real name, and lists every tool the agent has."""
    unknown = sorted(unknown)
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=1)
        hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    if EXECUTE_TOOL in unknown:
        hints[unknown.index(EXECUTE_TOOL)] += (
            " (the agent has `execute` only with a backend that runs commands, such as "
            "LocalShellBackend or BubblewrapSandbox)"
        )
    return (
        f"{where} names {'an unknown tool' if len(unknown) == 1 else 'unknown tools'}: "
        f"{', '.join(hints)}. An entry for a tool the agent does not have gates nothing, "
        "so the tool it was meant for would run without approval. The agent's tools are: "
        f"{', '.join(sorted(known)) or '(none)'}."
    )


def check_tool_names(
    interrupt_on: Mapping[str, object], tool_names: Collection[str], who: str = ""
) -> None:
    """Refuse `interrupt_on` keys that are not tools of the agent.

    A misspelled key (`"wrte_file"`) would leave the real tool running without approval,
    with nothing to show for it; so an unknown name is a construction error, `False`
    entries included.

    Raises:
        ValueError: naming the unknown keys and listing `tool_names`.
    """
    unknown = [name for name in interrupt_on if name not in tool_names]
    if unknown:
        raise ValueError(unknown_tools_message(unknown, tool_names, f"interrupt_on{who}"))


def gated_tools(interrupt_on: Mapping[str, bool | InterruptOnConfig]) -> list[str]:
    """Names of the tools that pause for approval."""
    return sorted(tool for tool, config in interrupt_on.items() if config is not False)


class HumanInTheLoopMiddleware(SectionPromptMixin, _LangChainHITL):
    """Pauses before the configured tools run until a person decides.

    The interrupt value has `action_requests` (each `{name, args, description}`) and
    `review_configs` (each `{action_name, allowed_decisions}`); resume with
    `Command(resume={"decisions": [...]})`, one decision per request, in order.
    Needs a checkpointer.
    """

    def __init__(self, interrupt_on: Mapping[str, bool | InterruptOnConfig], **kwargs: Any):
        normalized = normalize_interrupt_on(interrupt_on)
        super().__init__(interrupt_on=normalized, **kwargs)
        tools = gated_tools(normalized)
        text = (
            "## Approval\n\nA person reviews these tool calls before they run: "
            + ", ".join(f"`{t}`" for t in tools)
            + ". They may approve, change or reject a call. If a call is rejected, do not "
            "repeat it; follow the reason you are given."
        )
        self.section = PromptSection("approval", text if tools else "", "conditional")
