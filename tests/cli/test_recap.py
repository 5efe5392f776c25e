"""`thread_recap`: the last exchange and the open todos of a thread's saved state."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.cli.recap import ANSWER_LINES, thread_recap
from fathom.testing import ScriptedModel, ai, tool_call

TODOS = [
    {"content": "Survey the code", "status": "completed"},
    {"content": "Write the report", "status": "in_progress"},
    {"content": "Review it", "status": "pending"},
]


def test_recap_of_a_real_thread_shows_the_last_exchange_and_open_todos() -> None:
    model = ScriptedModel(replies=[
        ai("first answer"),
        ai("Planning.", tool_call("write_todos", {"todos": TODOS})),
        ai("## Plan\n\nI surveyed the code; the report is next."),
    ])
    agent = create_deep_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [{"role": "user", "content": "hello"}]}, config)
    agent.invoke({"messages": [{"role": "user", "content": "plan the work"}]}, config)
    values = dict(agent.get_state(config).values)

    assert thread_recap(values).splitlines() == [
        "── where this thread left off",
        "you › plan the work",
        "agent › ## Plan",
        "",
        "        I surveyed the code; the report is next.",
        "open todos (2 of 3):",
        "  [>] Write the report",
        "  [ ] Review it",
    ]


def test_a_long_answer_and_message_are_cut_to_a_few_lines() -> None:
    asked = "\n".join(f"pasted line {n}" for n in range(10))
    answer = "\n".join(f"answer line {n}" for n in range(40))
    values = {"messages": [HumanMessage(asked), AIMessage(answer)], "todos": []}
    lines = thread_recap(values).splitlines()
    assert lines[1:5] == ["you › pasted line 0", "      pasted line 1", "      pasted line 2",
                          "      … 7 more lines"]
    assert lines[5] == "agent › answer line 0"
    assert lines[-1] == f"        … {40 - ANSWER_LINES} more lines"
    assert len(lines) == 1 + 4 + ANSWER_LINES + 1


def test_a_turn_without_an_answer_says_so_and_older_answers_are_not_reused() -> None:
    values = {
        "messages": [
            HumanMessage("first"), AIMessage("old answer"), HumanMessage("write notes"),
            AIMessage("", tool_calls=[{"name": "write_file", "args": {}, "id": "w1"}]),
            ToolMessage("Updated file /notes.txt", tool_call_id="w1", name="write_file"),
        ],
    }
    assert thread_recap(values).splitlines()[1:] == [
        "you › write notes",
        "agent › (no answer yet: the turn stopped before the agent replied)",
    ]


def test_an_empty_thread_or_finished_todos_give_no_recap() -> None:
    assert thread_recap({}) == ""
    assert thread_recap({"todos": [{"content": "done", "status": "completed"}]}) == ""
