"""Pending interrupts as A2A ``input-required`` prompts, and replies as resume values.

A fathom agent with ``interrupt_on`` pauses with LangChain's human-in-the-loop request
(``{"action_requests": [...], "review_configs": [...]}``). Over A2A that pause becomes a task
in ``input-required`` whose status message describes each action, and the client's next
message on that task answers it. The reply grammar:

* **Text**: a reply starting with ``approve`` (or ``approved``, ``yes``, ``y``, ``ok``)
  approves every pending action; one starting with ``reject`` (or ``rejected``, ``deny``,
  ``no``, ``n``) rejects them all, and the rest of the text (after an optional ``:`` or
  ``-``) is the reason the agent is told. Case and trailing punctuation do not matter.
* **Data part** (structured): ``{"decision": "approve"}``,
  ``{"decision": "reject", "message": "why"}``, ``{"decision": "edit", "args": {...}}``
  (``"name"`` optional: the action's own), applied to every pending action; or
  ``{"decisions": [...]}`` with one such entry per action, in order (LangChain's own
  ``{"type": "approve"}`` entries are accepted too).

A reply that fits none of these, or names a decision the action does not allow, leaves the
task ``input-required`` with a message saying what is accepted. Any other ``interrupt(value)``
(not a human-in-the-loop request) is resumed with the reply's data part if it has one, else
with its text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.errors import FathomError

__all__ = [
    "APPROVE_WORDS",
    "REJECT_WORDS",
    "PendingInterrupt",
    "ReplyError",
    "describe",
    "resume_value",
]

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "ok"})
"""First words of a text reply that approve every pending action."""
REJECT_WORDS = frozenset({"reject", "rejected", "deny", "no", "n"})
"""First words of a text reply that reject every pending action."""

_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)[\s.!,;:-]*(.*)", re.DOTALL)


class ReplyError(FathomError, ValueError):
    """A reply to an ``input-required`` task that cannot answer its pending interrupt."""


@dataclass(frozen=True)
class PendingInterrupt:
    """One interrupt a thread waits on: its id and the value ``interrupt()`` was given."""

    id: str
    value: Any

    @property
    def is_approval(self) -> bool:
        """Whether this is a human-in-the-loop request (``interrupt_on``)."""
        return isinstance(self.value, dict) and isinstance(
            self.value.get("action_requests"), list
        )


def _allowed(value: dict[str, Any], index: int, name: str) -> list[str]:
    configs = value.get("review_configs") or []
    for config in configs:
        if isinstance(config, dict) and config.get("action_name") == name:
            return list(config.get("allowed_decisions") or [])
    if index < len(configs) and isinstance(configs[index], dict):
        return list(configs[index].get("allowed_decisions") or [])
    return ["approve", "edit", "reject"]


def describe(interrupts: Sequence[PendingInterrupt]) -> str:
    """A human-readable prompt for the pending interrupts, with how to answer."""
    lines: list[str] = []
    approvals = False
    for pending in interrupts:
        if pending.is_approval:
            approvals = True
            for index, action in enumerate(pending.value["action_requests"]):
                name = action.get("name", "?")
                args = json.dumps(action.get("args", {}), sort_keys=True, default=str)
                allowed = ", ".join(_allowed(pending.value, index, name))
                line = f"Approval needed: call `{name}` with {args} (allowed: {allowed})."
                if action.get("description"):
                    line += f"\n{action['description']}"
                lines.append(line)
        elif isinstance(pending.value, str):
            lines.append(pending.value)
        elif isinstance(pending.value, dict) and isinstance(pending.value.get("question"), str):
            lines.append(pending.value["question"])
        else:
            lines.append(json.dumps(pending.value, default=str))
    if approvals:
        lines.append(
            "Reply 'approve', or 'reject: <reason>', or send a data part "
            '{"decision": "approve" | "reject" | "edit", ...}.'
        )
    return "\n".join(lines)


def _text_decision(text: str) -> dict[str, Any]:
    match = _FIRST_WORD.match(text)
    word = match.group(1).lower() if match else ""
    if word in APPROVE_WORDS:
        return {"type": "approve"}
    if word in REJECT_WORDS:
        reason = match.group(2).strip() if match else ""
        return {"type": "reject", "message": reason} if reason else {"type": "reject"}
    raise ReplyError(
        f"Cannot read {text.strip()[:80]!r} as a decision: reply 'approve' or "
        "'reject: <reason>', or send a data part {\"decision\": ...}."
    )


def _data_decision(entry: Any, action: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ReplyError(f"A decision must be an object, got {json.dumps(entry, default=str)}")
    kind = entry.get("decision", entry.get("type"))
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        message = entry.get("message")
        return {"type": "reject", "message": str(message)} if message else {"type": "reject"}
    if kind == "edit":
        edited = entry.get("edited_action") or {}
        args = entry.get("args", edited.get("args"))
        if not isinstance(args, dict):
            raise ReplyError("An 'edit' decision needs 'args' (an object)")
        name = entry.get("name") or edited.get("name") or action.get("name")
        return {"type": "edit", "edited_action": {"name": name, "args": args}}
    raise ReplyError(
        f"Unknown decision {kind!r}: expected 'approve', 'reject' or 'edit'"
    )


def _approval_resume(pending: PendingInterrupt, text: str, data: Any) -> dict[str, Any]:
    actions: list[dict[str, Any]] = pending.value["action_requests"]
    if data is None:
        decisions = [_text_decision(text)] * len(actions)
    elif isinstance(data, dict) and isinstance(data.get("decisions"), list):
        entries = data["decisions"]
        if len(entries) != len(actions):
            raise ReplyError(
                f"'decisions' has {len(entries)} entries but {len(actions)} actions wait"
            )
        decisions = [_data_decision(e, a) for e, a in zip(entries, actions, strict=True)]
    else:
        decisions = [_data_decision(data, action) for action in actions]
    for index, (decision, action) in enumerate(zip(decisions, actions, strict=True)):
        allowed = _allowed(pending.value, index, action.get("name", ""))
        if decision["type"] not in allowed:
            raise ReplyError(
                f"`{action.get('name')}` does not allow {decision['type']!r} "
                f"(allowed: {', '.join(allowed)})"
            )
    return {"decisions": decisions}


def resume_value(interrupts: Sequence[PendingInterrupt], text: str, data: Any) -> Any:
    """The ``Command(resume=...)`` value answering ``interrupts`` with a reply.

    ``text`` is the reply's text, ``data`` its first data part (``None`` if it has none).
    Several interrupts are answered alike, keyed by interrupt id.

    Raises:
        ReplyError: the reply does not answer the interrupts (the message says why).
    """
    if not interrupts:
        raise ReplyError("Nothing waits for input on this task")
    values = []
    for pending in interrupts:
        if pending.is_approval:
            values.append(_approval_resume(pending, text, data))
        elif data is not None:
            values.append(data)
        elif text.strip():
            values.append(text)
        else:
            raise ReplyError("The reply is empty: send text or a data part")
    if len(interrupts) == 1:
        return values[0]
    return {pending.id: value for pending, value in zip(interrupts, values, strict=True)}
