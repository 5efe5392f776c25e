"""`interrupt_on` reaches the subagents: a tool only a subagent has can be gated from the top.

Written as a reference user writes it: `create_deep_agent(interrupt_on=..., subagents=...)`
with the tool in a subagent spec's `tools`, a scripted model for each agent, and an
in-memory checkpointer to pause and resume.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

SENT: list[str] = []


@tool
def send_email(to: str) -> str:
    """Send an email to `to`."""
    SENT.append(to)
    return f"sent to {to}"


def _delegating_model() -> ScriptedModel:
    return ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "Mail bob.", "subagent_type": "mailer"},
                             id="t1")),
            ai("all done"),
        ]
    )


def _mailer(**extra: Any) -> dict[str, Any]:
    model = ScriptedModel(replies=[ai("", tool_call("send_email", {"to": "bob"}, id="s1")),
                                   ai("mailed bob")])
    return {"name": "mailer", "description": "Sends mail.", "system_prompt": "You send mail.",
            "model": model, "tools": [send_email], **extra}


def _run(agent: Any, thread: str) -> tuple[dict[str, Any], dict[str, Any]]:
    config: Any = {"configurable": {"thread_id": thread}}
    return agent.invoke({"messages": [{"role": "user", "content": "Mail bob."}]}, config), config


def test_a_tool_only_a_subagent_has_can_be_gated_from_the_top() -> None:
    SENT.clear()
    agent = create_deep_agent(
        model=_delegating_model(),
        interrupt_on={"send_email": True},
        subagents=[_mailer()],
        checkpointer=InMemorySaver(),
    )
    paused, config = _run(agent, "gated")
    (pending,) = paused["__interrupt__"]
    (request,) = pending.value["action_requests"]
    assert request["name"] == "send_email"
    assert request["args"] == {"to": "bob"}
    (review,) = pending.value["review_configs"]
    assert review["action_name"] == "send_email"
    # `True` allows every decision LangChain's human-in-the-loop middleware knows
    assert review["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert SENT == []

    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert SENT == ["bob"]
    assert done["messages"][-1].content == "all done"


def test_a_subagents_own_false_entry_lets_its_tool_run() -> None:
    SENT.clear()
    agent = create_deep_agent(
        model=_delegating_model(),
        interrupt_on={"send_email": True},
        subagents=[_mailer(interrupt_on={"send_email": False})],
        checkpointer=InMemorySaver(),
    )
    result, _ = _run(agent, "own-false")
    assert "__interrupt__" not in result
    assert SENT == ["bob"]


def test_a_tool_of_a_compiled_subagent_may_be_named() -> None:
    compiled = create_agent(ScriptedModel(replies=[ai("ok")]), tools=[send_email])
    create_deep_agent(
        model=_delegating_model(),
        interrupt_on={"send_email": True},
        subagents=[{"name": "mailer", "description": "Sends mail.", "runnable": compiled}],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.fathom_only
def test_a_name_no_agent_of_the_tree_has_is_refused() -> None:
    with pytest.raises(ValueError, match="send_emial") as refused:
        create_deep_agent(
            model=_delegating_model(),
            interrupt_on={"send_emial": True},
            subagents=[_mailer()],
            checkpointer=InMemorySaver(),
        )
    assert "did you mean 'send_email'" in str(refused.value)
