"""Forked subagents: delegate without restating the context, and keep the prompt cache warm.

Deep Agents tutorial, section on subagent context modes (`mode="fork"`): a subagent spec
with `mode="fork"` does not start from the task description alone. It continues the main
agent's conversation (after summarization, without the pending `task` call), with the main
agent's system prompt and tools, and gets the task as one more user message. Its requests
therefore start with the main agent's last request, byte for byte, which a provider's
prompt cache serves from cache; the task description can stay short.

Here the main agent looks up an order, then forks a `reply-writer` with the one-line task
"Draft the reply to the customer." The fork writes the reply from the order details it
inherited. The example prints how much of the main agent's last request starts the fork's
first request (1.0: all of it), measured on `ScriptedModel`'s canonical requests (system
prompt, tool schemas, messages, as a provider would see them).

Ported to fathom: only the import changes (`deepagents` → `fathom`). The hosted model
becomes a `ScriptedModel` whose policy tells the fork's calls apart by the task message.

Run: `.venv/bin/python examples/subagent_fork.py`
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.middleware.subagents import FORK_TASK_PREAMBLE
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

TASK = "Draft the reply to the customer."


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"Order {order_id}: shipped 2 days late, carrier Parcelo, new ETA Friday."


def policy(request: ScriptRequest) -> Any:
    if request.last_human_text.startswith(FORK_TASK_PREAMBLE):  # the fork
        order = next(m.text for m in request.messages if m.type == "tool")
        return ai(f"Dear customer, sorry for the delay. {order}")
    if not request.tool_results:
        return ai("", tool_call("lookup_order", {"order_id": "A-17"}))
    if request.tool_results[-1].name == "lookup_order":
        return ai("", tool_call("task", {"description": TASK, "subagent_type": "reply-writer"}))
    return ai("Reply drafted:\n" + request.tool_results[-1].text)


def shared_prefix(earlier: str, later: str) -> float:
    """The share of `earlier` (a canonical request, less its closing `]}]`) that starts
    `later`: 1.0 when `later` extends it."""
    body = earlier[: -len("]}]")]
    common = next((i for i, (a, b) in enumerate(zip(body, later, strict=False)) if a != b),
                  min(len(body), len(later)))  # fmt: skip
    return common / len(body)


def main() -> dict[str, Any]:
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model,
        [lookup_order],
        system_prompt="You are the support desk of an online shop.",
        subagents=[
            {
                "name": "reply-writer",
                "description": "Writes the customer reply for the case at hand.",
                "mode": "fork",
            }
        ],
    )
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "Customer asks where order A-17 is."}]}
    )
    fork_index = next(
        i for i, r in enumerate(model.requests)
        if r.last_human_text.startswith(FORK_TASK_PREAMBLE)
    )  # fmt: skip
    parent, fork = model.requests[fork_index - 1], model.requests[fork_index]
    fraction = shared_prefix(parent.canonical_json(), fork.canonical_json())
    print(f"task description: {TASK!r}")
    print(f"fork's messages: {[m.type for m in fork.messages]}")
    print(f"same system prompt: {fork.system_prompt == parent.system_prompt}")
    print(f"same tools: {fork.tool_names == parent.tool_names}")
    print(f"share of the main agent's last request that starts the fork's: {fraction:.3f}")
    print(state["messages"][-1].text)
    return {"state": state, "fraction": fraction, "parent": parent, "fork": fork}


if __name__ == "__main__":
    main()
