"""Human approval before sensitive tool calls, on LangChain's `HumanInTheLoopMiddleware`.

fathom adds a short prompt section that tells the model which tools wait for a person.
`True` allows every decision LangChain knows (approve, edit, reject, respond), as in the
reference.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
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
    "with_gate",
]

DEFAULT_DECISIONS = ("approve", "edit", "reject", "respond")
"""The decisions `interrupt_on={tool: True}` allows: LangChain's four, as in the reference."""

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


def unknown_tools_message(
    unknown: Iterable[str],
    known: Collection[str],
    where: str,
    owners: str = "The agent's tools are",
) -> str:
    """The error for tool names that are not among `known`: names each typo, suggests the
    closest real name, and lists every tool the agent has (`owners` heads that list)."""
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
        f"so the tool it was meant for would run without approval. {owners}: "
        f"{', '.join(sorted(known)) or '(none)'}."
    )


def check_tool_names(
    interrupt_on: Mapping[str, object],
    tool_names: Collection[str],
    who: str = "",
    owners: str = "The agent's tools are",
) -> None:
    """Refuse `interrupt_on` keys that are not tools of the agent.

    A misspelled key (`"wrte_file"`) would leave the real tool running without approval,
    with nothing to show for it; so an unknown name is a construction error, `False`
    entries included. `tool_names` holds every tool the entries can reach (an agent's
    subagents inherit its `interrupt_on`, so theirs count too); `owners` says whose they are.

    Raises:
        ValueError: naming the unknown keys and listing `tool_names`.
    """
    unknown = [name for name in interrupt_on if name not in tool_names]
    if unknown:
        raise ValueError(
            unknown_tools_message(unknown, tool_names, f"interrupt_on{who}", owners)
        )


def _either(first: Callable[[Any], bool], second: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def when(request: Any) -> bool:
        return bool(first(request)) or bool(second(request))

    return when


def with_gate(
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None,
    gate: Mapping[str, InterruptOnConfig],
) -> dict[str, bool | InterruptOnConfig]:
    """`interrupt_on` with the entries of a permission gate (`interrupt_on_from_permissions`).

    A tool the caller configured keeps the caller's decisions, and still pauses wherever the
    gate does: `True` or a config without `when` already pauses on every call; a config
    with its own `when` pauses when either predicate says so; `False` (which would let the
    call through) gives way to the gate, since an `interrupt` rule names exactly these paths.
    """
    merged: dict[str, bool | InterruptOnConfig] = dict(interrupt_on or {})
    for tool, entry in gate.items():
        own = merged.get(tool)
        if own is None or own is False:
            merged[tool] = entry
        elif isinstance(own, Mapping) and "when" in own and "when" in entry:
            merged[tool] = InterruptOnConfig(**{**own, "when": _either(own["when"], entry["when"])})
    return merged


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
