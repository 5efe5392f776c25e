"""Scripted graphs for the async subagent end-to-end tests, loadable by any server.

- `supervisor`: a fathom deep agent whose `ScriptedModel` obeys the user's commands:
  `start researcher:alpha coder:beta` (one `start_async_task` per pair, the word after the
  colon being the task), `check ID...`, `update ID TEXT`, `cancel ID...`, `list [STATUS]`
  and `say TEXT`. A notification (a child waking it) is answered `notified: NAME STATUS`.
  Its async subagents are `researcher` (update strategy `interrupt`) and `coder`
  (`enqueue`); with `FATHOM_E2E_CHILD_URL` set they run on that server, else on this one.
- `researcher`, `coder`: fathom deep agents whose model first calls `wait_at_gate` with the
  last user text as the gate's name, then answers `NAME done: T1 | T2 ...` with every user
  text it saw (so a restarted run shows it had the whole history).

Gates are folders under `FATHOM_E2E_GATES`: a run creates `<gate>/started`, then waits for
`<gate>/release`, which the test creates. That holds a child in flight for exactly as long as
a test needs, across processes, without timing anything.

No `from __future__ import annotations`: a loader may execute this file without
registering it in `sys.modules`.
"""

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NOTIFICATION_KEY = "deepagents_notification"
GATE_POLL_SECONDS = 0.02
"""Pause between two looks at a gate's release file (an `asyncio.sleep`: cancellable)."""
_GATE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def _gates() -> Path:
    root = os.environ.get("FATHOM_E2E_GATES")
    if not root:
        raise RuntimeError("set FATHOM_E2E_GATES to the folder that holds the gates")
    return Path(root)


@tool
async def wait_at_gate(gate: str) -> str:
    """Wait until the test releases the gate named `gate`."""
    if not _GATE_NAME.match(gate):
        return f"bad gate name {gate!r}"
    folder = _gates() / gate
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread((folder / "started").touch)
    release = folder / "release"
    while not await asyncio.to_thread(release.exists):
        await asyncio.sleep(GATE_POLL_SECONDS)
    return f"gate {gate} released"


def _human_texts(request: ScriptRequest) -> list[str]:
    return [
        m.text for m in request.messages
        if isinstance(m, HumanMessage) and NOTIFICATION_KEY not in m.additional_kwargs
    ]  # fmt: skip


def _child_policy(name: str) -> Any:
    def policy(request: ScriptRequest) -> AIMessage | str:
        last = request.last_message
        if isinstance(last, ToolMessage) and last.name == "wait_at_gate":
            return f"{name} done: " + " | ".join(_human_texts(request))
        return ai("", tool_call("wait_at_gate", {"gate": request.last_human_text.strip()}))

    return policy


def _child(name: str) -> Any:
    return create_deep_agent(
        ScriptedModel(policy=_child_policy(name)),
        tools=[wait_at_gate],
        system_prompt=f"You are the scripted {name}.",
        name=name,
    )


researcher = _child("researcher")
coder = _child("coder")


def _notification(message: Any) -> dict[str, Any] | None:
    if isinstance(message, HumanMessage):
        event = message.additional_kwargs.get(NOTIFICATION_KEY)
        return event if isinstance(event, dict) else None
    return None


def _command(request: ScriptRequest) -> str | None:
    """The user's command for this model call; `None` once the turn already answered it."""
    for message in reversed(request.messages):
        if isinstance(message, AIMessage):
            return None
        if isinstance(message, HumanMessage) and _notification(message) is None:
            return message.text
    return None


def _supervise(request: ScriptRequest) -> AIMessage | str:
    last = request.last_message
    if isinstance(last, ToolMessage):
        return "done"
    command = _command(request)
    event = _notification(last)
    if command is None and event is not None:
        return f"notified: {event.get('agent_name')} {event.get('status')}"
    if command is None:
        return "noted"
    verb, *args = command.split()
    if verb == "start":
        pairs = [arg.split(":", 1) for arg in args]
        return ai("", *(tool_call("start_async_task", {"description": task, "subagent_type": kind})
                        for kind, task in pairs))  # fmt: skip
    if verb == "check":
        return ai("", *(tool_call("check_async_task", {"task_id": a}) for a in args))
    if verb == "update":
        return ai("", tool_call("update_async_task",
                                {"task_id": args[0], "message": " ".join(args[1:])}))  # fmt: skip
    if verb == "cancel":
        return ai("", *(tool_call("cancel_async_task", {"task_id": a}) for a in args))
    if verb == "list":
        return ai("", tool_call("list_async_tasks", {"status_filter": args[0]} if args else {}))
    return f"said: {' '.join(args) if verb == 'say' else command}"


def _specs() -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = [
        {"name": "researcher", "description": "Researches a topic in depth.",
         "graph_id": "researcher"},
        {"name": "coder", "description": "Writes code for a task.", "graph_id": "coder",
         "update_strategy": "enqueue"},
    ]  # fmt: skip
    url = os.environ.get("FATHOM_E2E_CHILD_URL")
    if url:
        for spec in specs:
            spec["url"] = url
    return specs


supervisor = create_deep_agent(
    ScriptedModel(policy=_supervise),
    subagents=_specs(),
    system_prompt="You are the scripted supervisor.",
    name="supervisor",
)
