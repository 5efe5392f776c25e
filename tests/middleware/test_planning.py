"""write_todos keeps a todo list in state, with its prompt section."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

TODOS = [
    {"content": "search", "status": "completed"},
    {"content": "write report", "status": "in_progress"},
    {"content": "review", "status": "pending"},
]


def test_write_todos_stores_items_with_status_in_state():
    model = ScriptedModel(replies=[ai("", tool_call("write_todos", {"todos": TODOS})), ai("ok")])
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "plan"}]})
    assert result["todos"] == TODOS


def test_todos_survive_across_turns_of_a_thread():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_todos", {"todos": TODOS})),
            ai("planned"),
            ai("still here"),
        ]
    )
    agent = create_deep_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "p"}}
    agent.invoke({"messages": [{"role": "user", "content": "plan"}]}, config)
    later = agent.invoke({"messages": [{"role": "user", "content": "next"}]}, config)
    assert later["todos"] == TODOS


def test_an_unknown_status_is_rejected_back_to_the_model():
    bad = [{"content": "x", "status": "done"}]
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_todos", {"todos": bad})),
            ai("", tool_call("write_todos", {"todos": TODOS})),
            ai("ok"),
        ]
    )
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "plan"}]})
    first = next(m for m in result["messages"] if m.type == "tool")
    assert first.status == "error" and "status" in first.content
    assert result["todos"] == TODOS


def test_parallel_write_todos_calls_are_refused():
    model = ScriptedModel(
        replies=[
            ai(
                "",
                tool_call("write_todos", {"todos": TODOS}),
                tool_call("write_todos", {"todos": TODOS[:1]}),
            ),
            ai("ok"),
        ]
    )
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "plan"}]})
    errors = [m for m in result["messages"] if m.type == "tool"]
    assert len(errors) == 2 and all(m.status == "error" for m in errors)
    assert "todos" not in result or not result["todos"]


def test_prompt_has_a_planning_section_and_the_tool():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "## Planning" in model.requests[0].system_prompt
    assert "write_todos" in model.requests[0].tool_names


def test_the_tool_result_acknowledges_without_echoing_the_list():
    model = ScriptedModel(replies=[ai("", tool_call("write_todos", {"todos": TODOS})), ai("ok")])
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "plan"}]})
    ack = next(m for m in result["messages"] if m.type == "tool")
    assert ack.content == "Todo list saved: 3 items (1 in progress, 1 pending, 1 completed)."
    assert "write report" not in ack.content
