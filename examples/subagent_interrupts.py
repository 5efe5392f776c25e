"""Subagent interrupts: a subagent's own `interrupt_on`, and `interrupt()` inside its tool.

Deep Agents tutorial, section 10.6 (子智能体中断):

1. Interrupts at tool-call time: each subagent can have its own `interrupt_on`, which
   overrides the main agent's. Here the main agent reads files without review
   (`"read_file": False`) while its `file-manager` subagent must get each read approved
   (`"read_file": True`). When the subagent pauses, the run returns its action request in
   `result.interrupts` and is resumed as usual with
   `Command(resume={"decisions": [...]})` on the same thread: approve, edit, reject.
2. Interrupts inside a tool: the `request_approval` tool of a `CompiledSubAgent`
   (`create_agent(..., name="approval-agent")`) calls `interrupt({...})`; the interrupt
   surfaces at the parent as `result.interrupts[0].value`, and
   `Command(resume={"approved": True})` becomes the return value of `interrupt()`.

Ported to fathom: only the imports change (`deepagents` → `fathom`,
`deepagents.graph` → `fathom.agent`, `deepagents.middleware.subagents` →
`fathom.middleware.subagents`). The models (`"google_genai:gemini-3.1-pro-preview"`,
`ChatAnthropic(model_name="claude-sonnet-4-6", max_tokens=4096)`) become `ScriptedModel`s:
the main model reads the log itself and hands the old log to `file-manager`; the file
manager reads it and reports what happened; the approval agent calls `request_approval`
and reports the outcome. Invocations use `version="v2"` (`result.interrupts`,
`result.value`) as in section 10.3. The tutorial's `main()` is `in_tool_interrupt()` here,
run once approving (its sample output) and once rejecting.

Run: `.venv/bin/python examples/subagent_interrupts.py`
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.messages import HumanMessage
from langchain.tools import tool
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from fathom.agent import create_deep_agent
from fathom.middleware.subagents import CompiledSubAgent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- 1. interrupt_on


@tool
def delete_file(path: str) -> str:
    """Delete a file from the filesystem."""
    return f"Deleted {path}"


@tool
def read_file(path: str) -> str:
    """Read a file from the filesystem."""
    return f"Contents of {path}"


FILE_MANAGER_PROMPT = "You are a file management assistant."


def file_policy(request: ScriptRequest) -> AIMessage:
    """Main agent: read the current log, delegate the old one. File manager: read, report."""
    results = request.tool_results
    if (request.system_prompt or "").startswith(FILE_MANAGER_PROMPT):
        if not results:
            return ai("", tool_call("read_file", {"path": "/logs/old.log"}))
        return ai(f"file-manager: {results[-1].text.splitlines()[-1]}")
    if not results:
        return ai("", tool_call("read_file", {"path": "/logs/app.log"}))
    if results[-1].name == "read_file":
        return ai(
            "",
            tool_call(
                "task",
                {"subagent_type": "file-manager", "description": "Read /logs/old.log."},
            ),
        )
    return ai(f"Done. {results[-1].text}")


def build_file_agent(checkpointer: InMemorySaver, model: ScriptedModel):
    agent = create_deep_agent(
        model=model,  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[delete_file, read_file],
        interrupt_on={
            "delete_file": True,
            "read_file": False,
        },
        subagents=[
            {
                "name": "file-manager",
                "description": "Manages file operations",
                "system_prompt": "You are a file management assistant.",
                "tools": [delete_file, read_file],
                "interrupt_on": {
                    # Override: require approval for reads in this subagent
                    "delete_file": True,
                    "read_file": True,  # Different from main agent!
                },
            }
        ],
        checkpointer=checkpointer,
    )
    return agent


DECISIONS: dict[str, dict[str, Any]] = {
    "approve": {"type": "approve"},
    "edit": {
        "type": "edit",
        "edited_action": {
            "name": "read_file",  # Must include the tool name
            "args": {"path": "/logs/archive/old.log"},
        },
    },
    "reject": {"type": "reject", "message": "Old logs stay closed."},
}


def tool_call_interrupts() -> dict[str, Any]:
    """One thread per decision: the file-manager's read_file pauses; resume it."""
    checkpointer = InMemorySaver()
    model = ScriptedModel(policy=file_policy)
    agent = build_file_agent(checkpointer, model)
    runs = {}
    for kind, decision in DECISIONS.items():
        calls_before = model.calls
        config = {"configurable": {"thread_id": f"file-manager-{kind}"}}
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "Check the application logs."}]},
            config=config,
            version="v2",
        )
        main_read = next(m for m in result.value["messages"] if m.type == "tool")
        print(f"  [{kind}] main agent's {main_read.name} ran unreviewed: {main_read.content}")
        reviewed = []
        while result.interrupts:
            interrupt_value = result.interrupts[0].value
            config_map = {cfg["action_name"]: cfg for cfg in interrupt_value["review_configs"]}
            for action_request in interrupt_value["action_requests"]:
                allowed = config_map[action_request["name"]]["allowed_decisions"]
                print(
                    f"  [{kind}] paused: {action_request['name']}({action_request['args']}) "
                    f"allowed={allowed}"
                )
                reviewed.append(action_request)
            result = agent.invoke(
                Command(resume={"decisions": [decision]}),
                config=config,
                version="v2",
            )
        print(f"  [{kind}] resumed -> {result.value['messages'][-1].content}")
        runs[kind] = {
            "state": result.value,
            "reviewed": reviewed,
            "model_calls": model.calls - calls_before,
        }
    return runs


# --------------------------------------------------------------------------- 2. interrupt()


@tool(description="Request human approval before proceeding with an action.")
def request_approval(action_description: str) -> str:
    """Request human approval using the interrupt() primitive."""
    # interrupt() pauses execution and returns the value passed to Command(resume=...)
    approval = interrupt(
        {
            "type": "approval_request",
            "action": action_description,
            "message": f"Please approve or reject: {action_description}",
        }
    )

    if approval.get("approved"):
        return f"Action '{action_description}' was APPROVED. Proceeding..."
    else:
        return (
            f"Action '{action_description}' was REJECTED. Reason: "
            f"{approval.get('reason', 'No reason provided')}"
        )


def approval_agent_policy(request: ScriptRequest) -> AIMessage:
    """Ask for approval of the action named in the task, then report the outcome."""
    results = request.tool_results
    if not results:
        action = request.last_human_text.split("'")[1]
        return ai("", tool_call("request_approval", {"action_description": action}))
    outcome = results[-1].text
    action = outcome.split("'")[1]
    if "APPROVED" in outcome:
        return ai(
            f'Great! The approval request has been processed. The action **"{action}"** was '
            "**APPROVED**. You can now proceed with the production deployment."
        )
    reason = outcome.split("Reason: ", 1)[1]
    return ai(f'The action **"{action}"** was **REJECTED** ({reason}). Do not proceed.')


def parent_policy(request: ScriptRequest) -> AIMessage:
    """Launch approval-agent as told; pass its answer on."""
    results = request.tool_results
    if not results:
        description = (
            "Use the request_approval tool to request approval for 'deploying to production'."
        )
        return ai(
            "",
            tool_call("task", {"subagent_type": "approval-agent", "description": description}),
        )
    return ai(results[-1].text)


def in_tool_interrupt(resume: dict[str, Any], thread_id: str) -> dict[str, Any]:
    """The tutorial's `main()`, resuming with `resume`; returns what happened."""
    checkpointer = InMemorySaver()
    model = ScriptedModel(policy=approval_agent_policy)
    # was: ChatAnthropic(model_name="claude-sonnet-4-6", max_tokens=4096)

    compiled_subagent = create_agent(
        model=model,
        tools=[request_approval],
        name="approval-agent",
    )

    parent_agent = create_deep_agent(
        model=ScriptedModel(policy=parent_policy),  # was: "google_genai:gemini-3.1-pro-preview"
        checkpointer=checkpointer,
        subagents=[
            CompiledSubAgent(
                name="approval-agent",
                description="An agent that can request approvals",
                runnable=compiled_subagent,
            )
        ],
    )

    config = {"configurable": {"thread_id": thread_id}}

    print("Invoking agent - sub-agent will use request_approval tool...")

    result = parent_agent.invoke(
        {
            "messages": [
                HumanMessage(
                    content="Use the task tool to launch the approval-agent sub-agent. "
                    "Tell it to use the request_approval tool to request approval for "
                    "'deploying to production'."
                )
            ]
        },
        config=config,
        version="v2",
    )
    outcome: dict[str, Any] = {"first": result, "second": None, "approval_model": model}

    # Check for interrupt
    if result.interrupts:
        interrupt_value = result.interrupts[0].value
        print("\nInterrupt received!")
        print(f"  Type: {interrupt_value.get('type')}")
        print(f"  Action: {interrupt_value.get('action')}")
        print(f"  Message: {interrupt_value.get('message')}")

        print(f"\nResuming with Command(resume={resume})...")
        result2 = parent_agent.invoke(
            Command(resume=resume),
            config=config,
            version="v2",
        )
        outcome["second"] = result2

        if not result2.interrupts:
            print("\nExecution completed!")
            # Find the tool response
            tool_msgs = [m for m in result2.value.get("messages", []) if m.type == "tool"]
            if tool_msgs:
                print(f"  Tool result: {tool_msgs[-1].content}")
        else:
            print("\nAnother interrupt occurred")
    else:
        print("\n  No interrupt - the model may not have called request_approval")
    return outcome


def main() -> dict[str, Any]:
    """Run both kinds of subagent interrupt; return the states and what was reviewed."""
    print("1. file-manager's own interrupt_on (read_file needs approval in the subagent):")
    tool_calls = tool_call_interrupts()
    print("\n2. interrupt() inside a CompiledSubAgent's tool:")
    approved = in_tool_interrupt({"approved": True}, "test_interrupt_directly")
    print()
    rejected = in_tool_interrupt(
        {"approved": False, "reason": "change freeze"}, "test_interrupt_rejected"
    )
    return {"tool_calls": tool_calls, "approved": approved, "rejected": rejected}


if __name__ == "__main__":
    main()
