"""Scripted graphs for the web page's browser tests: deterministic, offline.

- `agent`: a deep agent whose `ScriptedModel` acts on the user's words: `plan` writes todos
  and a file, `delegate` starts two sync `helper` subagents in parallel and one async
  `worker` task, `ask helper` starts one sync `helper`, `slow` waits at a file gate (held by
  the test, for a reload mid-run), `fail` makes the model call raise; anything else gets a
  markdown answer.
- `careful`: the same model, with `write_file` needing approval; `three files` writes three.
- `fan out` (to `agent`): a tool writes the custom `subagent` events an `eval` writes for the
  dynamic subagents its code starts (one completes, one fails).
- `worker`: the async subagent's graph (in the same deployment, reached without a url).
- `frugal`: the same model under a budget of two model calls per thread.

The gate is the directory in `FATHOM_WEB_GATE`: the `wait_gate` tool creates `started`
there and returns once `release` exists, so a test controls a run from another process
without timing anything.
"""

import asyncio
import os
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer

from fathom import Budget, create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

GATE_POLL_SECONDS = 0.02
NOTIFICATION_KEY = "deepagents_notification"

ANSWER = (
    "## Notes\n\nHere is **the answer**, with a list:\n\n- one\n- two\n\n"
    "```python\ndef greet(name: str) -> str:\n    return f\"hello {name}\"\n```\n"
)
PLAN_FILE = "# Notes\n\nThe plan, written down.\n"


@tool
async def wait_gate() -> str:
    """Wait until the test opens the gate."""
    gate = Path(os.environ["FATHOM_WEB_GATE"])
    await asyncio.to_thread(gate.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread((gate / "started").touch)
    while not await asyncio.to_thread((gate / "release").exists):
        await asyncio.sleep(GATE_POLL_SECONDS)
    return "the gate opened"


@tool
def fan_out() -> str:
    """Report two dynamic subagents the way `eval` does (custom stream events)."""
    write = get_stream_writer()
    for call_id, label, end in (("c1", "judge 1", "complete"), ("c2", "judge 2", "error")):
        base = {"type": "subagent", "subagent_type": "helper", "label": label,
                "call_id": call_id, "tool_call_id": "eval-call"}  # fmt: skip
        write({**base, "event": "start"})
        write({**base, "event": end, **({"error": "judge 2 gave up"} if end == "error" else {})})
    return "two judges ran"


def _after_tools(results: list[ToolMessage]) -> str:
    names = {m.name for m in results}
    if "fan_out" in names:
        return "The judges are done."
    if "wait_gate" in names:
        return "Gate released; the slow step is done."
    if "task" in names:
        return "Both helpers answered: " + " / ".join(m.text for m in results if m.name == "task")
    if "start_async_task" in names:
        return "Both helpers answered, and the worker runs in the background."
    if names == {"write_file"}:
        return "Writes done: " + "; ".join(m.text for m in results)
    return "The plan is ready and written to `/notes.md`.\n\n" + ANSWER


def _is_notification(message: object) -> bool:
    return isinstance(message, HumanMessage) and NOTIFICATION_KEY in message.additional_kwargs


def _trailing_results(messages: list[Any]) -> list[ToolMessage]:
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.insert(0, message)
    return results


def _main(request: ScriptRequest) -> AIMessage | str:
    last = request.last_message
    if isinstance(last, HumanMessage) and NOTIFICATION_KEY in last.additional_kwargs:
        event = last.additional_kwargs[NOTIFICATION_KEY]
        note = f"(The {event['agent_name']} task is {event['status']}.)"
        # the task may end before this agent answered its tool results: answer both
        earlier = [m for m in request.messages if not _is_notification(m)]
        unanswered = isinstance(earlier[-1], ToolMessage) if earlier else False
        return f"{_after_tools(_trailing_results(earlier))} {note}" if unanswered else note
    if isinstance(last, ToolMessage):
        return _after_tools(request.tool_results)
    text = request.last_human_text.strip().lower()
    if text == "plan":
        todos = [
            {"content": "Read the brief", "status": "completed"},
            {"content": "Write the notes", "status": "in_progress"},
            {"content": "Review the notes", "status": "pending"},
        ]
        return ai("", tool_call("write_todos", {"todos": todos}),
                  tool_call("write_file", {"file_path": "/notes.md", "content": PLAN_FILE}))
    if text == "delegate":
        return ai(
            "",
            tool_call("task", {"subagent_type": "helper", "description": "Find the alpha fact"}),
            tool_call("task", {"subagent_type": "helper", "description": "Find the beta fact"}),
            tool_call("start_async_task", {"subagent_type": "worker",
                                           "description": "Summarise the log"}),
        )
    if text == "ask helper":
        return ai("", tool_call("task", {"subagent_type": "helper",
                                         "description": "Find the alpha fact"}))
    if text == "three files":
        return ai("", *(tool_call("write_file", {"file_path": f"/{name}.txt",
                                                 "content": f"{name} draft\n"})
                        for name in ("alpha", "beta", "gamma")))  # fmt: skip
    if text == "fan out":
        return ai("", tool_call("fan_out", {}))
    if text == "slow":
        return ai("Starting the slow step.", tool_call("wait_gate", {}))
    if text == "fail":
        raise RuntimeError("the model service is unavailable")
    return f"You said *{request.last_human_text}*.\n\n" + ANSWER


def _helper(request: ScriptRequest) -> str:
    return f"helper found: {request.last_human_text}"


def _worker(request: ScriptRequest) -> str:
    return f"worker summary of {request.last_human_text!r}"


HELPER = {
    "name": "helper",
    "description": "Finds one fact.",
    "system_prompt": "You find facts.",
    "model": ScriptedModel(policy=_helper),
}
WORKER = {"name": "worker", "description": "Summarises logs in the background.",
          "graph_id": "worker"}  # fmt: skip

agent = create_deep_agent(
    model=ScriptedModel(policy=_main),
    tools=[wait_gate, fan_out],
    system_prompt="You are the web page's scripted agent.",
    subagents=[HELPER, WORKER],  # pyright: ignore[reportArgumentType]
    name="agent",
)
careful = create_deep_agent(
    model=ScriptedModel(policy=_main),
    system_prompt="You are the careful scripted agent.",
    interrupt_on={"write_file": True},
    checkpointer=InMemorySaver(),  # the server swaps in its own
    name="careful",
)
worker = create_deep_agent(
    model=ScriptedModel(policy=_worker),
    system_prompt="You summarise logs.",
    name="worker",
)
frugal = create_deep_agent(
    model=ScriptedModel(policy=_main),
    system_prompt="You are the frugal scripted agent.",
    budget=Budget(max_model_calls=2),
    name="frugal",
)
