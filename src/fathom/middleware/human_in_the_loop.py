"""Human approval before sensitive tool calls, on LangChain's `HumanInTheLoopMiddleware`.

fathom adds two things: `True` means the reference's three decisions (approve, edit,
reject), and a short prompt section tells the model which tools wait for a person.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware as _LangChainHITL
from langchain.agents.middleware import InterruptOnConfig

from fathom.prompt import PromptSection, SectionPromptMixin

__all__ = [
    "DEFAULT_DECISIONS",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "normalize_interrupt_on",
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
            normalized[tool] = InterruptOnConfig(**config)  # type: ignore[typeddict-item]
        else:
            raise ValueError(
                f"interrupt_on[{tool!r}] must be True, False or an InterruptOnConfig, "
                f"not {config!r}"
            )
    return normalized


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
