"""Customer support as a state machine: one agent, three steps, tools that move between them.

LangChain's customer-support-with-handoffs tutorial (multi-agent docs). The agent first
collects the warranty status, then classifies the issue as hardware or software, then
resolves it: software issues and in-warranty hardware get a solution, out-of-warranty
hardware goes to a human. `current_step` lives in graph state, so with a checkpointer and
one `thread_id` every turn continues in the step the last one ended in.

`StepMiddleware` gives each model call the current step's prompt and tools; the record
tools and the go-back tools change the step by returning `transition(...)`, which always
answers the tool call with a `ToolMessage` (the tutorial's go-back tools forget it, and
LangGraph rejects such a `Command`).

The conversation is the tutorial's four turns plus a go-back turn. Each model call is
printed with its step, the tools the model could see, and the tool calls it made.

Run offline: `.venv/bin/python examples/patterns/customer_support.py`
With a real model: `... customer_support.py --model openai:gpt-4.1-mini`
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, Literal, NotRequired
from uuid import UUID, uuid4

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.chat_models import init_chat_model
from langchain.tools import ToolRuntime, tool
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Checkpointer, Command

from fathom.patterns.handoffs import Step, StepMiddleware, go_back_tool, transition
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

SupportStep = Literal["warranty_collector", "issue_classifier", "resolution_specialist"]
WarrantyStatus = Literal["in_warranty", "out_of_warranty"]
IssueType = Literal["hardware", "software"]


class SupportState(AgentState):
    """The conversation plus where the support flow stands."""

    current_step: NotRequired[SupportStep]
    warranty_status: NotRequired[WarrantyStatus]
    issue_type: NotRequired[IssueType]


# ---------------------------------------------------------------------------- tools


@tool
def record_warranty_status(
    status: WarrantyStatus, runtime: ToolRuntime[None, SupportState]
) -> Command:
    """Record whether the customer's device is under warranty, then move on to the issue."""
    return transition(
        runtime,
        "issue_classifier",
        f"Warranty status recorded as: {status}",
        updates={"warranty_status": status},
    )


@tool
def record_issue_type(issue_type: IssueType, runtime: ToolRuntime[None, SupportState]) -> Command:
    """Record whether the issue is hardware or software, then move on to resolving it."""
    return transition(
        runtime,
        "resolution_specialist",
        f"Issue type recorded as: {issue_type}",
        updates={"issue_type": issue_type},
    )


@tool
def provide_solution(solution: str) -> str:
    """Give the customer a solution to their issue."""
    return f"Solution provided: {solution}"


@tool
def escalate_to_human(reason: str) -> str:
    """Hand the case to a human support agent, saying why."""
    return f"Escalated to human support: {reason}"


go_back_to_warranty = go_back_tool(
    "warranty_collector",
    name="go_back_to_warranty",
    description="Go back to the warranty step when the customer corrects their warranty status.",
)
go_back_to_classification = go_back_tool(
    "issue_classifier",
    name="go_back_to_classification",
    description="Go back to classifying the issue when the customer corrects its description.",
)


# ---------------------------------------------------------------------------- steps

WARRANTY_PROMPT = """CURRENT STEP: warranty_collector
You are a customer support agent for a phone maker.
Known so far: nothing yet.
This step: greet the customer and find out whether their device is under warranty. Ask one
question at a time. Once they tell you, call record_warranty_status. Do not classify the
issue or suggest fixes yet."""

CLASSIFIER_PROMPT = """CURRENT STEP: issue_classifier
You are a customer support agent for a phone maker.
Known so far:
- Warranty status: {warranty_status}
This step: ask the customer to describe the problem, decide whether it is a hardware issue
(physical damage, a broken part) or a software issue (an app, an update, a crash), and call
record_issue_type. Ask for details if it is unclear."""

RESOLUTION_PROMPT = """CURRENT STEP: resolution_specialist
You are a customer support agent for a phone maker.
Known so far:
- Warranty status: {warranty_status}
- Issue type: {issue_type}
This step: when the customer asks for help, resolve the issue.
- Software issue: give troubleshooting steps with provide_solution.
- Hardware issue under warranty: arrange a warranty repair with provide_solution.
- Hardware issue out of warranty: call escalate_to_human so a person can quote a repair.
If the customer says earlier information was wrong, call go_back_to_warranty or
go_back_to_classification."""

STEPS: dict[str, Step] = {
    "warranty_collector": Step(WARRANTY_PROMPT, tools=[record_warranty_status]),
    "issue_classifier": Step(
        CLASSIFIER_PROMPT, tools=[record_issue_type], requires=["warranty_status"]
    ),
    "resolution_specialist": Step(
        RESOLUTION_PROMPT,
        tools=[
            provide_solution,
            escalate_to_human,
            go_back_to_warranty,
            go_back_to_classification,
        ],
        requires=["warranty_status", "issue_type"],
    ),
}


def build_support_agent(
    model: BaseChatModel,
    *,
    checkpointer: Checkpointer = None,
    middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
) -> Any:
    """The support agent: `StepMiddleware` over `STEPS`, then any further middleware."""
    steps = StepMiddleware(STEPS, default="warranty_collector", state_schema=SupportState)
    return create_agent(
        model,
        middleware=[steps, *middleware],
        state_schema=SupportState,
        checkpointer=checkpointer,
        name="support_agent",
    )


# ---------------------------------------------------------------------------- offline model

_STEP_MARKER = re.compile(r"^CURRENT STEP: (\w+)", re.MULTILINE)
_CORRECTION = ("mistake", "actually", "wrong", "not right")
_HELP = ("what should i do", "what do i do", "help", "fix", "how do i")
_HARDWARE = re.compile(r"\b(crack|drop|screen|batter|button|water)")
_SOFTWARE = re.compile(r"\b(apps?\b|crash|update|freez|software)")


def _known(prompt: str, label: str) -> str:
    found = re.search(rf"^- {label}: (\w+)", prompt, re.MULTILINE)
    return found.group(1) if found else ""


def _results_this_turn(request: ScriptRequest) -> list[str]:
    """Names of the tools whose results arrived since the customer last spoke."""
    names: list[str] = []
    for message in reversed(request.messages):
        if isinstance(message, HumanMessage):
            break
        if message.type == "tool":
            names.append(str(getattr(message, "name", "")))
    return names


def support_policy(request: ScriptRequest) -> AIMessage | str:
    """A stand-in for the model: acts on the step prompt, visible tools and the latest turn.

    Each step acts at most once per customer message, and only on what that message says.
    """
    prompt = request.system_prompt or ""
    marker = _STEP_MARKER.search(prompt)
    step = marker.group(1) if marker else ""
    said = request.last_human_text.lower()
    done = _results_this_turn(request)

    if step == "warranty_collector" and "record_warranty_status" not in done:
        if "out of warranty" in said or "not under warranty" in said:
            return ai("", tool_call("record_warranty_status", {"status": "out_of_warranty"}))
        if "under warranty" in said or "in warranty" in said:
            return ai("", tool_call("record_warranty_status", {"status": "in_warranty"}))
        return "Hello, sorry to hear that! Is your device still under warranty?"

    if step == "issue_classifier" and "record_issue_type" not in done:
        if _HARDWARE.search(said):
            return ai("", tool_call("record_issue_type", {"issue_type": "hardware"}))
        if _SOFTWARE.search(said):
            return ai("", tool_call("record_issue_type", {"issue_type": "software"}))
        return "Thanks, noted. Could you describe what is wrong with the device?"

    if step == "resolution_specialist":
        warranty, issue = _known(prompt, "Warranty status"), _known(prompt, "Issue type")
        if "provide_solution" in done or "escalate_to_human" in done:
            return "Done. Is there anything else I can help you with?"
        if any(word in said for word in _CORRECTION):
            back = "go_back_to_warranty" if "warranty" in said else "go_back_to_classification"
            return ai("", tool_call(back))
        if any(phrase in said for phrase in _HELP):
            if issue == "hardware" and warranty == "out_of_warranty":
                reason = "Hardware damage on a device out of warranty; needs a repair quote."
                return ai("", tool_call("escalate_to_human", {"reason": reason}))
            if issue == "hardware":
                solution = "Book a free warranty screen repair at any service centre."
            else:
                solution = "Update the system, then restart the phone in safe mode."
            return ai("", tool_call("provide_solution", {"solution": solution}))
        status = "under warranty" if warranty == "in_warranty" else "out of warranty"
        return f"Thanks. I have a {issue} issue on a device {status}. How can I help?"

    return "I'm here to help. What do you need?"


def scripted_model() -> ScriptedModel:
    """The offline model for this example."""
    return ScriptedModel(policy=support_policy)


# ---------------------------------------------------------------------------- tracing


def _tool_names(tools: Any) -> list[str]:
    names = []
    for spec in tools or []:
        function = spec.get("function") if isinstance(spec, dict) else None
        if isinstance(function, dict):
            names.append(str(function.get("name")))
        elif isinstance(spec, dict):
            names.append(str(spec.get("name")))
    return names


class CallTrace(BaseCallbackHandler):
    """Per model call: the step (from the prompt), the visible tools, the tool calls made.

    A callback handler, passed per invocation, so it works with any chat model.
    """

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._open: dict[UUID, dict[str, Any]] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        sent = messages[0] if messages else []
        system = str(sent[0].text) if sent and sent[0].type == "system" else ""
        marker = _STEP_MARKER.search(system)
        call = {
            "step": marker.group(1) if marker else "?",
            "tools": _tool_names((invocation_params or {}).get("tools")),
            "tool_calls": [],
        }
        self._open[run_id] = call
        self.calls.append(call)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._open.pop(run_id, None)
        if call is None:
            return
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                if isinstance(message, AIMessage):
                    call["tool_calls"] += [(tc["name"], tc["args"]) for tc in message.tool_calls]


# ---------------------------------------------------------------------------- the conversation

TURNS = [
    "Hi, my phone screen is cracked",
    "Yes, it's still under warranty",
    "I dropped it last week and the screen cracked",
    "What should I do?",
    "Actually, I made a mistake - my device is out of warranty",
]

_STATE_KEYS = ("current_step", "warranty_status", "issue_type")


def _flow(values: dict[str, Any]) -> dict[str, Any]:
    return {key: values.get(key) for key in _STATE_KEYS}


def _after_go_back(agent: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    """The flow state in the checkpoint written right after `go_back_to_warranty` ran."""
    for snapshot in agent.get_state_history(config):  # newest first
        messages = snapshot.values.get("messages") or []
        if messages and getattr(messages[-1], "name", None) == "go_back_to_warranty":
            return _flow(snapshot.values)
    return None


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the five turns on one thread; print and return each turn's calls and state."""
    agent = build_support_agent(model or scripted_model(), checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": str(uuid4())}}
    turns: list[dict[str, Any]] = []
    for number, text in enumerate(TURNS, start=1):
        trace = CallTrace()
        result = agent.invoke(
            {"messages": [{"role": "user", "content": text}]},
            {**config, "callbacks": [trace]},
        )
        reply = result["messages"][-1]
        state = _flow(result)
        print(f"Turn {number} | customer: {text}")
        for index, call in enumerate(trace.calls, start=1):
            made = ", ".join(f"{name}({args})" for name, args in call["tool_calls"]) or "-"
            tools = ", ".join(call["tools"])
            print(f"  call {index}: step={call['step']} tools=[{tools}] tool calls: {made}")
        print(f"  agent: {reply.text}")
        print(f"  state: {state}")
        turns.append({"user": text, "calls": trace.calls, "reply": reply.text, "state": state})

    after_go_back = _after_go_back(agent, config)
    print(f"Right after go_back_to_warranty: {after_go_back}")
    messages = agent.get_state(config).values["messages"]
    print(f"Messages in the thread: {len(messages)}")
    return {
        "turns": turns,
        "after_go_back": after_go_back,
        "final_state": turns[-1]["state"],
        "messages": messages,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help='a "provider:model" string for init_chat_model')
    args = parser.parse_args()
    main(init_chat_model(args.model) if args.model else None)
