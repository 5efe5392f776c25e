"""Dangling tool calls are given a result; malformed tool calls get an error and another turn."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.middleware.patch_tool_calls import patch_dangling_tool_calls
from fathom.testing import ScriptedModel, ai, tool_call


def _dangling_history():
    return [
        HumanMessage("start"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "write_file", "args": {"file_path": "/a", "content": "a"}, "id": "c1"},
                {"name": "ls", "args": {"path": "/"}, "id": "c2"},
            ],
        ),
        ToolMessage("listing", tool_call_id="c2", name="ls"),
        HumanMessage("are you there?"),
    ]


def test_patch_inserts_a_result_right_after_the_call_that_lacks_one():
    patched = patch_dangling_tool_calls(_dangling_history())
    assert [type(m).__name__ for m in patched] == [
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "HumanMessage",
    ]  # fmt: skip
    filler = patched[2]
    assert filler.tool_call_id == "c1" and filler.status == "error"
    assert "did not complete" in filler.content


def test_patch_returns_none_when_every_call_has_a_result():
    history = _dangling_history()
    history.insert(3, ToolMessage("ok", tool_call_id="c1", name="write_file"))
    assert patch_dangling_tool_calls(history) is None


def test_the_model_never_sees_a_dangling_call():
    model = ScriptedModel(replies=[ai("I am here")])
    result = create_deep_agent(model).invoke({"messages": _dangling_history()})
    sent = model.requests[0].messages
    answered = {m.tool_call_id for m in sent if m.type == "tool"}
    assert answered == {"c1", "c2"}
    assert result["messages"][-1].content == "I am here"


def test_a_cancelled_approval_is_repaired_when_the_user_moves_on():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/x", "content": "x"})),
            ai("ok, never mind"),
        ]
    )
    agent = create_deep_agent(
        model, interrupt_on={"write_file": True}, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "write"}]}, config, version="v2"
    )
    assert paused.interrupts
    # The user ignores the approval request and sends a new message instead.
    result = agent.invoke({"messages": [{"role": "user", "content": "forget it"}]}, config)
    assert result["messages"][-1].content == "ok, never mind"
    second = model.requests[1].messages
    kinds = [m.type for m in second]
    assert kinds[-3:] == ["ai", "tool", "human"]
    assert "/x" not in (result.get("files") or {})


def test_malformed_arguments_get_an_error_result_and_another_turn():
    broken = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "write_file",
                "args": '{"file_path": "/a.md", "content": "unterminated',
                "id": "bad1",
                "error": "Unterminated string",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = ScriptedModel(
        replies=[
            broken,
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "fixed"})),
            ai("saved"),
        ]
    )
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "save"}]})
    error = next(m for m in result["messages"] if m.type == "tool" and m.tool_call_id == "bad1")
    assert error.status == "error"
    assert "not valid JSON" in error.content and "write_file" in error.content
    assert result["files"]["/a.md"]["content"] == "fixed"
    assert result["messages"][-1].content == "saved"
    assert model.calls == 3


async def test_repairs_work_under_ainvoke():
    model = ScriptedModel(replies=[ai("async here")])
    result = await create_deep_agent(model).ainvoke({"messages": _dangling_history()})
    assert {m.tool_call_id for m in model.requests[0].messages if m.type == "tool"} == {"c1", "c2"}
    assert result["messages"][-1].content == "async here"


def _idless_broken(args: str) -> AIMessage:
    return AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "write_file", "args": args, "id": None,
             "error": "Expecting value", "type": "invalid_tool_call"}
        ],
    )  # fmt: skip


def test_a_malformed_call_without_an_id_is_answered_not_dropped():
    # Some providers send invalid-JSON calls with no id; the model must still hear about it,
    # and the call and its answer must carry the same id so the history stays paired.
    model = ScriptedModel(
        replies=[
            _idless_broken("{not json"),
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "fixed"})),
            ai("saved"),
        ]
    )
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "save"}]})

    retry = model.requests[1].messages
    broken = next(m for m in retry if m.type == "ai")
    (call,) = broken.invalid_tool_calls
    assert call["id"] and call["id"].startswith("invalid_")
    answer = retry[-1]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == call["id"]
    assert answer.status == "error" and "not valid JSON" in answer.content
    kept = next(m for m in result["messages"] if m.type == "ai" and m.invalid_tool_calls)
    assert kept.invalid_tool_calls[0]["id"] == call["id"]
    assert result["files"]["/a.md"]["content"] == "fixed"
    assert result["messages"][-1].content == "saved"


async def test_a_malformed_call_without_an_id_is_answered_under_ainvoke():
    model = ScriptedModel(replies=[_idless_broken("{"), ai("gave up")])
    result = await create_deep_agent(model).ainvoke(
        {"messages": [{"role": "user", "content": "save"}]}
    )
    answers = [m for m in result["messages"] if m.type == "tool"]
    ai_ids = [c["id"] for m in result["messages"] if m.type == "ai" for c in m.invalid_tool_calls]
    assert [a.tool_call_id for a in answers] == ai_ids and all(ai_ids)
    assert model.calls == 2
