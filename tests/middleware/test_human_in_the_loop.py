"""Human approval: approve, edit, reject, respond; batched decisions; resume across processes."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "tidy up"}]}
DELETED: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}: {subject}"


@tool
def ask_user(question: str) -> str:
    """Ask the user a question."""
    return "(no answer)"


@pytest.fixture(autouse=True)
def _clear():
    DELETED.clear()


def _agent(replies, interrupt_on, tools=(delete_file, send_email, ask_user)):
    model = ScriptedModel(replies=replies)
    agent = create_deep_agent(
        model, list(tools), interrupt_on=interrupt_on, checkpointer=InMemorySaver()
    )
    return agent, model


def _tool_results(state):
    return {m.name: m for m in state["messages"] if m.type == "tool"}


CONFIG = {"configurable": {"thread_id": "t1"}}


def test_true_pauses_with_the_four_reference_decisions_and_approve_runs_the_tool():
    agent, _ = _agent(
        [ai("", tool_call("delete_file", {"path": "/tmp/a"})), ai("deleted it")],
        {"delete_file": True},
    )
    paused = agent.invoke(USER, CONFIG, version="v2")
    assert DELETED == []
    value = paused.interrupts[0].value
    assert value["action_requests"][0]["name"] == "delete_file"
    assert value["action_requests"][0]["args"] == {"path": "/tmp/a"}
    assert value["review_configs"] == [
        {"action_name": "delete_file",
         "allowed_decisions": ["approve", "edit", "reject", "respond"]}
    ]
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG, version="v2")
    assert DELETED == ["/tmp/a"]
    assert done.value["messages"][-1].content == "deleted it"


def test_false_never_pauses():
    agent, _ = _agent(
        [ai("", tool_call("delete_file", {"path": "/x"})), ai("ok")], {"delete_file": False}
    )
    result = agent.invoke(USER, CONFIG, version="v2")
    assert not result.interrupts
    assert DELETED == ["/x"]


def test_custom_allowed_decisions_are_reported():
    agent, _ = _agent(
        [ai("", tool_call("send_email", {"to": "a@b.c", "subject": "s", "body": "b"})), ai("ok")],
        {"send_email": {"allowed_decisions": ["approve", "reject"]}},
    )
    paused = agent.invoke(USER, CONFIG, version="v2")
    assert paused.interrupts[0].value["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "reject",
    ]


def test_reject_skips_the_tool_and_tells_the_model_the_reason():
    agent, model = _agent(
        [ai("", tool_call("delete_file", {"path": "/etc"})), ai("understood")],
        {"delete_file": True},
    )
    agent.invoke(USER, CONFIG, version="v2")
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "never touch /etc"}]}),
        CONFIG,
        version="v2",
    )
    assert DELETED == []
    result = _tool_results(done.value)["delete_file"]
    assert result.status == "error"
    assert "never touch /etc" in result.content
    assert "never touch /etc" in model.requests[-1].messages[-1].content


def test_edit_runs_the_tool_with_the_edited_arguments():
    agent, _ = _agent(
        [ai("", tool_call("send_email", {"to": "all@corp", "subject": "hi", "body": "x"})),
         ai("sent")],
        {"send_email": True},
    )  # fmt: skip
    agent.invoke(USER, CONFIG, version="v2")
    edited = {"name": "send_email", "args": {"to": "team@corp", "subject": "hi", "body": "x"}}
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}),
        CONFIG,
        version="v2",
    )
    assert "sent to team@corp" in _tool_results(done.value)["send_email"].content


def test_respond_answers_on_behalf_of_the_tool_when_allowed():
    agent, _ = _agent(
        [ai("", tool_call("ask_user", {"question": "which color?"})), ai("blue it is")],
        {"ask_user": {"allowed_decisions": ["respond"]}},
    )
    agent.invoke(USER, CONFIG, version="v2")
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "respond", "message": "blue"}]}),
        CONFIG,
        version="v2",
    )
    assert _tool_results(done.value)["ask_user"].content == "blue"


def test_several_gated_calls_are_one_interrupt_decided_in_order():
    agent, _ = _agent(
        [
            ai(
                "",
                tool_call("delete_file", {"path": "/a"}),
                tool_call("send_email", {"to": "x@y", "subject": "s", "body": "b"}),
                tool_call("delete_file", {"path": "/b"}),
            ),
            ai("done"),
        ],
        {"delete_file": True, "send_email": True},
    )
    paused = agent.invoke(USER, CONFIG, version="v2")
    assert len(paused.interrupts) == 1
    requests = paused.interrupts[0].value["action_requests"]
    assert [r["name"] for r in requests] == ["delete_file", "send_email", "delete_file"]
    done = agent.invoke(
        Command(
            resume={"decisions": [{"type": "approve"}, {"type": "reject"}, {"type": "approve"}]}
        ),
        CONFIG,
        version="v2",
    )
    assert sorted(DELETED) == ["/a", "/b"]
    assert _tool_results(done.value)["send_email"].status == "error"


def test_ungated_calls_in_the_same_turn_run_without_approval():
    agent, _ = _agent(
        [
            ai(
                "",
                tool_call("write_file", {"file_path": "/n.md", "content": "n"}),
                tool_call("delete_file", {"path": "/a"}),
            ),
            ai("done"),
        ],
        {"delete_file": True},
    )
    paused = agent.invoke(USER, CONFIG, version="v2")
    assert [r["name"] for r in paused.interrupts[0].value["action_requests"]] == ["delete_file"]
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG, version="v2")
    assert "/n.md" in done.value["files"]


def test_builtin_filesystem_tools_can_be_gated():
    agent, _ = _agent(
        [ai("", tool_call("write_file", {"file_path": "/x.md", "content": "x"})), ai("ok")],
        {"write_file": True},
    )
    agent.invoke(USER, CONFIG, version="v2")
    assert "/x.md" not in (agent.get_state(CONFIG).values.get("files") or {})
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), CONFIG, version="v2"
    )
    assert "/x.md" not in (done.value.get("files") or {})


def test_decision_count_mismatch_is_an_error():
    agent, _ = _agent(
        [ai("", tool_call("delete_file", {"path": "/a"}), tool_call("delete_file", {"path": "/b"})),
         ai("done")],
        {"delete_file": True},
    )  # fmt: skip
    agent.invoke(USER, CONFIG, version="v2")
    with pytest.raises(ValueError):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG, version="v2")
    assert DELETED == []


def test_approval_section_names_the_gated_tools():
    agent, model = _agent([ai("hi")], {"delete_file": True, "send_email": False})
    agent.invoke(USER, CONFIG)
    prompt = model.requests[0].system_prompt
    assert "`delete_file`" in prompt and "send_email" not in prompt.split("## Approval")[1]
