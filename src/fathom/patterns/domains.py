"""The domain of a turn: which subagent, skill or handoff target served it, read from the thread.

`turn_domain` labels a `fathom.measure.sticky.TurnView` (a turn's messages and the state it
ended in) for the repeated-request ratio:

1. a handoff's state: the `active_agent` of a `build_handoff_graph` thread, or the
   `current_step` of a `StepMiddleware` agent, when the turn ended with one set (a turn that
   stays with the agent the last one handed to makes no handoff call, and is labelled all
   the same);
2. otherwise the turn's tool calls, in order: `task` (its `subagent_type`, or the `agent_name`
   of the patterns' `task_tool`), `start_async_task` (its `subagent_type`), `load_skill` (its
   `skill_name`), a `read_file` of a skill's `SKILL.md` (the skill's folder), a handoff tool
   named `transfer_to_<target>` or `go_back_to_<target>` (the target), and any tool named in
   `tools` (a tool -> domain table, for agents wrapped as tools with `agent_as_tool`);
3. otherwise None: nothing says which domain served the turn.

A turn that used several domains (two subagents side by side) gets them joined with `+`, in
sorted order: `calendar+email`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fathom.measure.sticky import TurnView, message_kind
from fathom.middleware.async_subagents.tools import START_ASYNC_TASK_TOOL
from fathom.middleware.skills import SKILL_FILE
from fathom.middleware.subagents import TASK_TOOL
from fathom.patterns.handoffs import ACTIVE_AGENT_KEY
from fathom.patterns.skills import LOAD_SKILL_TOOL

__all__ = ["STEP_KEYS", "domain_labeller", "turn_domain"]

STEP_KEYS = (ACTIVE_AGENT_KEY, "current_step")
"""State keys that name where a handoff conversation stands."""

_HANDOFF_PREFIXES = ("transfer_to_", "go_back_to_")


def _calls(message: Any) -> list[Mapping[str, Any]]:
    if message_kind(message) != "ai":
        return []
    calls = (message.get("tool_calls") if isinstance(message, Mapping)
             else getattr(message, "tool_calls", None))
    return [c for c in calls or [] if isinstance(c, Mapping)]


def _call_domain(call: Mapping[str, Any], tools: Mapping[str, str]) -> str | None:
    name = str(call.get("name") or "")
    raw = call.get("args")
    args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if name in tools:
        return tools[name]
    if name in (TASK_TOOL, START_ASYNC_TASK_TOOL):
        found = args.get("subagent_type") or args.get("agent_name")
        return str(found) if found else None
    if name == LOAD_SKILL_TOOL:
        found = args.get("skill_name") or args.get("name")
        return str(found) if found else None
    if name == "read_file":
        path = str(args.get("file_path") or args.get("path") or "")
        folder, _, file = path.rstrip("/").rpartition("/")
        if file == SKILL_FILE and folder:
            return folder.rpartition("/")[2] or None
        return None
    for prefix in _HANDOFF_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return None


def turn_domain(turn: TurnView, tools: Mapping[str, str] | None = None) -> str | None:
    """The domain that served `turn`, or None (see the module docstring for the order)."""
    for key in STEP_KEYS:
        step = turn.state.get(key)
        if isinstance(step, str) and step:
            return step
    found: set[str] = set()
    for message in turn.messages:
        for call in _calls(message):
            domain = _call_domain(call, tools or {})
            if domain:
                found.add(domain)
    return "+".join(sorted(found)) or None


def domain_labeller(tools: Mapping[str, str] | None = None) -> Callable[[TurnView], str | None]:
    """`turn_domain` with a tool -> domain table."""
    table = dict(tools or {})

    def label(turn: TurnView) -> str | None:
        return turn_domain(turn, table)

    return label
