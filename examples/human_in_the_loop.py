"""Human in the loop: approve, edit or reject sensitive tool calls.

Deep Agents tutorial, section 3.6 (the `interrupt_on` example with `delete_file`,
`read_file` and `send_email`), run the way section 10 (人机回环 / Human-in-the-loop)
describes: invoke with `version="v2"`, look at `result.interrupts`, and resume with
`Command(resume={"decisions": [...]})` on the same `thread_id`, one decision per action
request, in order (10.3 handling interrupts, 10.4 several tool calls in one interrupt,
10.5 editing arguments).

Ported to fathom: only the import changes (`deepagents` → `fathom`); the hosted model
becomes a `ScriptedModel`. Two conversations:

1. "Clean up": the model reads /logs/app.log (not gated), then asks to delete it and to
   email the team in one step. Both calls land in one interrupt; the person approves the
   deletion and rejects the email.
2. "Free space": the model asks to delete a whole directory; the person edits the call to
   delete only /tmp/cache. Then the model asks to send a report, which the person approves.

The custom `read_file` tool has the same name as fathom's built-in `read_file`; the custom
one replaces the built-in (the model is shown the custom schema).

Run: `.venv/bin/python examples/human_in_the_loop.py`
"""

from __future__ import annotations

from typing import Any

from langchain.tools import tool
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.utils.uuid import uuid7
from langgraph.checkpoint.memory import MemorySaver
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


@tool
def delete_file(path: str) -> str:
    """Delete a file from the filesystem."""
    return f"Deleted {path}"


@tool
def read_file(path: str) -> str:
    """Read a file from the filesystem."""
    return f"Contents of {path}"


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"Sent email to {to}"


# --------------------------------------------------------------------------- scripted model


def _tool_messages(request: ScriptRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


def _last_line(message: ToolMessage) -> str:
    # After an edit, LangChain puts a note before the tool's own output; keep the output.
    return str(message.text).splitlines()[-1]


def ops_policy(request: ScriptRequest) -> AIMessage:
    """A careful ops assistant: one step at a time, and it reports what really happened."""
    task = request.last_human_text
    done = _tool_messages(request)
    if task.startswith("Clean up"):
        if not done:
            return ai("", tool_call("read_file", {"path": "/logs/app.log"}))
        if len(done) == 1:
            return ai(
                "The log is stale. I'll delete it and tell the team.",
                tool_call("delete_file", {"path": "/logs/app.log"}),
                tool_call(
                    "send_email",
                    {
                        "to": "team@company.com",
                        "subject": "Log cleanup",
                        "body": "I deleted /logs/app.log.",
                    },
                ),
            )
    elif task.startswith("Free space"):
        if not done:
            return ai("", tool_call("delete_file", {"path": "/tmp"}))
        if len(done) == 1:
            return ai(
                "",
                tool_call(
                    "send_email",
                    {
                        "to": "ops@company.com",
                        "subject": "Disk space",
                        "body": f"Freed disk space: {_last_line(done[0])}.",
                    },
                ),
            )
    outcomes = [
        f"{m.name}: not done ({m.text})" if m.status == "error" else f"{m.name}: {_last_line(m)}"
        for m in done
    ]
    return ai("Summary:\n" + "\n".join(f"- {line}" for line in outcomes))


# --------------------------------------------------------------------------- the tutorial


def build_agent():
    # Checkpointer is REQUIRED for human-in-the-loop
    checkpointer = MemorySaver()

    agent = create_deep_agent(
        model=ScriptedModel(policy=ops_policy),  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[delete_file, read_file, send_email],
        interrupt_on={
            "delete_file": True,  # Default: approve, edit, reject
            "read_file": False,  # No interrupts needed
            "send_email": {"allowed_decisions": ["approve", "reject"]},  # No editing
        },
        checkpointer=checkpointer,  # Required!
    )
    return agent


def show_interrupt(result) -> list[dict[str, Any]]:
    """Print the pending action requests with the decisions each allows (10.3)."""
    interrupt_value = result.interrupts[0].value
    action_requests = interrupt_value["action_requests"]
    review_configs = interrupt_value["review_configs"]
    config_map = {cfg["action_name"]: cfg for cfg in review_configs}
    pending = []
    for action_request in action_requests:
        allowed = config_map[action_request["name"]]["allowed_decisions"]
        print(
            f"  needs review: {action_request['name']}({action_request['args']}) allowed={allowed}"
        )
        pending.append({**action_request, "allowed_decisions": allowed})
    return pending


def clean_up(agent) -> dict[str, Any]:
    """Two tool calls batched in one interrupt: approve the first, reject the second (10.4)."""
    config = {"configurable": {"thread_id": str(uuid7())}}
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "Clean up the stale application log."}]},
        config=config,
        version="v2",
    )
    reviews = []
    if result.interrupts:
        action_requests = show_interrupt(result)
        assert len(action_requests) == 2
        decisions = [{"type": "approve"}, {"type": "reject"}]  # delete_file, send_email
        reviews.append({"requests": action_requests, "decisions": decisions})
        result = agent.invoke(Command(resume={"decisions": decisions}), config=config, version="v2")
    print(result.value["messages"][-1].content)
    return {"state": result.value, "reviews": reviews, "interrupts_left": result.interrupts}


def free_space(agent) -> dict[str, Any]:
    """Edit a call's arguments before it runs (10.5), then approve the next one."""
    config = {"configurable": {"thread_id": str(uuid7())}}
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "Free space on the disk."}]},
        config=config,
        version="v2",
    )
    reviews = []
    while result.interrupts:
        action_requests = show_interrupt(result)
        decisions = []
        for action_request in action_requests:
            if action_request["name"] == "delete_file":
                decisions.append(
                    {
                        "type": "edit",
                        "edited_action": {
                            "name": action_request["name"],  # Must include the tool name
                            "args": {"path": "/tmp/cache"},
                        },
                    }
                )
            else:
                decisions.append({"type": "approve"})
        reviews.append({"requests": action_requests, "decisions": decisions})
        result = agent.invoke(Command(resume={"decisions": decisions}), config=config, version="v2")
    print(result.value["messages"][-1].content)
    return {"state": result.value, "reviews": reviews, "interrupts_left": result.interrupts}


def main() -> dict[str, Any]:
    """Run both conversations; return each one's final state and the reviews made."""
    agent = build_agent()
    print("Conversation 1: approve + reject")
    first = clean_up(agent)
    print("Conversation 2: edit, then approve")
    second = free_space(agent)
    return {"clean_up": first, "free_space": second}


if __name__ == "__main__":
    main()
