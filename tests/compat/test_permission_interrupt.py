"""An `interrupt` permission pauses a file tool call with the tool's own approval request.

Written as a reference front end reads it: the interrupt value's `action_requests` name the
tool (`write_file`) with its arguments (`file_path`, `content`), `review_configs` list the
decisions (approve, edit, reject, respond), and the run is resumed with
`Command(resume={"decisions": [...]})`.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import FilesystemPermission, create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

RULE = FilesystemPermission(operations=["write"], paths=["/secret/**"], mode="interrupt")


def _agent(path: str) -> Any:
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": path, "content": "x"}, id="w1")),
            ai("done"),
        ]
    )
    return create_deep_agent(model=model, permissions=[RULE], checkpointer=InMemorySaver())


def _start(agent: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    config: Any = {"configurable": {"thread_id": "t"}}
    return agent.invoke({"messages": [{"role": "user", "content": "write it"}]}, config), config


def _tool_answer(state: dict[str, Any]) -> Any:
    return next(m for m in state["messages"] if m.type == "tool")


def test_the_interrupt_carries_the_tool_call_itself() -> None:
    paused, _ = _start(_agent("/secret/a.txt"))
    (pending,) = paused["__interrupt__"]
    (request,) = pending.value["action_requests"]
    assert request["name"] == "write_file"
    assert request["args"] == {"file_path": "/secret/a.txt", "content": "x"}
    assert isinstance(request["description"], str)
    (review,) = pending.value["review_configs"]
    assert review["action_name"] == "write_file"
    assert review["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert "/secret/a.txt" not in paused.get("files", {})


def test_approve_runs_the_write() -> None:
    agent = _agent("/secret/a.txt")
    _, config = _start(agent)
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert "/secret/a.txt" in done["files"]
    assert _tool_answer(done).status != "error"
    assert done["messages"][-1].content == "done"


def test_reject_leaves_the_file_unwritten() -> None:
    agent = _agent("/secret/a.txt")
    _, config = _start(agent)
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), config
    )
    assert "/secret/a.txt" not in done.get("files", {})
    answer = _tool_answer(done)
    assert answer.status == "error"
    assert "not now" in answer.content


def test_respond_answers_in_place_of_the_tool() -> None:
    agent = _agent("/secret/a.txt")
    _, config = _start(agent)
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "respond", "message": "I saved it myself."}]}),
        config,
    )
    assert "/secret/a.txt" not in done.get("files", {})
    assert _tool_answer(done).content == "I saved it myself."


def test_edit_runs_the_reviewers_call() -> None:
    agent = _agent("/secret/a.txt")
    _, config = _start(agent)
    edited = {"name": "write_file", "args": {"file_path": "/secret/b.txt", "content": "y"}}
    done = agent.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}), config
    )
    assert "/secret/a.txt" not in done["files"]
    assert "/secret/b.txt" in done["files"]


def test_a_path_outside_the_rule_is_written_without_asking() -> None:
    done, _ = _start(_agent("/open.txt"))
    assert "__interrupt__" not in done
    assert "/open.txt" in done["files"]


@pytest.mark.fathom_only
def test_the_description_names_the_rule() -> None:
    paused, _ = _start(_agent("/secret/a.txt"))
    (request,) = paused["__interrupt__"][0].value["action_requests"]
    assert "rule 1: interrupt write /secret/**" in request["description"]
