"""A supervisor with two async subagents, `researcher` and `coder`, all in one deployment.

`langgraph.json` next to this file names the three graphs, so one server hosts them all:

    fathom serve --config examples/async_subagents/langgraph.json --port 2024
    langgraph dev --config examples/async_subagents/langgraph.json   # LangGraph's own server

The supervisor's specs have no `url`, so its subagents run on the server that hosts it;
give each spec `"url": "http://host:port"` to run them on another server instead.

The models are `ScriptedModel`s from `fathom.testing` that act as sensible models would,
so the example runs offline. Swap in a real model (`"anthropic:claude-sonnet-4-6"`,
`"openai:gpt-5.4"`, ...) to use it for real.
"""

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from fathom import AsyncSubAgent, create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NOTIFICATION_KEY = "deepagents_notification"
"""Marks a task update in a user-role message (a subagent's end, not the user speaking)."""

ASYNC_SUBAGENTS: list[AsyncSubAgent] = [
    {
        "name": "researcher",
        "description": "Researches a technical question and reports its findings.",
        "graph_id": "researcher",
    },
    {
        "name": "coder",
        "description": "Writes and revises Python code for a task.",
        "graph_id": "coder",
        "update_strategy": "enqueue",
    },
]
"""The async subagents: `graph_id` names a graph of this deployment (no `url`: same server)."""


# ----------------------------------------------------------------------------- subagents


def _user_texts(request: ScriptRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, HumanMessage)]


def _research(request: ScriptRequest) -> str:
    return (
        f"Findings on {request.last_human_text!r}: LangGraph saves a checkpoint after every "
        "step, so a failed or interrupted run resumes from its last checkpoint instead of "
        "starting over."
    )


def _code(request: ScriptRequest) -> str:
    typed = any("type hints" in text for text in _user_texts(request))
    signature = "def retry(call: Callable[[], T], attempts: int = 3) -> T:" if typed else (
        "def retry(call, attempts=3):")
    return f"```python\n{signature}\n    for n in range(attempts):\n        try:\n" \
           "            return call()\n        except Exception:\n" \
           "            if n == attempts - 1:\n                raise\n```"


researcher = create_deep_agent(
    ScriptedModel(policy=_research),
    system_prompt="You research technical questions and report concise findings.",
    name="researcher",
)
coder = create_deep_agent(
    ScriptedModel(policy=_code),
    system_prompt="You write small, correct Python functions.",
    name="coder",
)


# ----------------------------------------------------------------------------- supervisor


def _task_ids(request: ScriptRequest) -> dict[str, str]:
    """Subagent name -> task id, from the `start_async_task` answers in the conversation."""
    ids: dict[str, str] = {}
    calls = {c["id"]: c["args"] for m in request.messages if isinstance(m, AIMessage)
             for c in m.tool_calls}  # fmt: skip
    for message in request.messages:
        if isinstance(message, ToolMessage) and message.name == "start_async_task":
            found = re.search(r"task_id: (\S+)", message.text)
            args = calls.get(message.tool_call_id, {})
            if found and args:
                ids[args["subagent_type"]] = found.group(1)
    return ids


def _is_update(message: object) -> bool:
    return isinstance(message, HumanMessage) and NOTIFICATION_KEY in message.additional_kwargs


def _supervise(request: ScriptRequest) -> AIMessage | str:
    """Answer what is pending: tool results or the user first, then task updates."""
    messages = list(request.messages)
    updates: list[HumanMessage] = []
    while messages and _is_update(messages[-1]):
        updates.insert(0, messages.pop())  # pyright: ignore[reportArgumentType]
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return _after_tools(messages)
    if not isinstance(last, HumanMessage):
        events = [m.additional_kwargs[NOTIFICATION_KEY] for m in updates]
        return " ".join(f"(The {e['agent_name']} task is {e['status']}.)" for e in events)
    text = last.text
    ids = _task_ids(request)
    if text.startswith("Research"):
        question, _, job = text.removeprefix("Research ").partition(", and ")
        return ai("", tool_call("start_async_task", {"subagent_type": "researcher",
                                                     "description": question}),
                  tool_call("start_async_task", {"subagent_type": "coder",
                                                 "description": job.rstrip(".")}))  # fmt: skip
    if text.startswith("What did they"):
        return ai("", *(tool_call("check_async_task", {"task_id": ids[name]})
                        for name in ("researcher", "coder")))  # fmt: skip
    if "type hints" in text:
        return ai("", tool_call("update_async_task",
                                {"task_id": ids["coder"], "message": "Add type hints."}))
    if text.startswith("List"):
        return ai("", tool_call("list_async_tasks"))
    return "I can start research and coding tasks in the background."


def _after_tools(messages: list[Any]) -> str:
    turn: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        turn.insert(0, message)
    name = turn[0].name
    if name == "start_async_task":
        return ("I started the researcher and the coder; they work in the background. "
                "Ask me anything meanwhile.")
    if name == "check_async_task":
        reports = [json.loads(m.text) for m in turn]
        return "\n\n".join(str(r.get("result", r["status"])) for r in reports)
    if name == "update_async_task":
        return "I asked the coder to add type hints; it continues on the same task."
    return turn[0].text


supervisor = create_deep_agent(
    ScriptedModel(policy=_supervise),
    system_prompt="You are a supervisor: delegate research and coding, then report back.",
    subagents=[*ASYNC_SUBAGENTS],
    name="supervisor",
)
