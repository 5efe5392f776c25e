"""The call card: every model call of a run with its caller, what it sent and what it cost.

The timeline is the hand-written subagents demo of LangChain's multi-agent docs, as a packet
capture of it showed: a supervisor whose only tool hands the request to a calendar
subagent, which calls its own tool once. Four calls, in series:

1. supervisor: system + user text; answers with a tool call and no text;
2. subagent: its own system prompt + the forwarded request (2 items); calls its tool;
3. subagent: that plus its tool call and the tool's result; answers in text;
4. supervisor: its first request plus its tool call and the tool's output (the subagent's
   answer); answers the user.

With (input, output, reasoning) tokens (347, 75, 18), (398, 584, 494), (1020, 30, 0) and
(462, 31, 0), the card adds up to 2,227 in, 720 out, 512 reasoning, 2,947 tokens.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.measure.calls import (
    STORED_ITEMS,
    CallRecord,
    CallRecorder,
    PromptItem,
    append_stored,
    card_totals,
    format_call_card,
    records_from_json,
    stored,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

TRIPLES = [(347, 75, 18), (398, 584, 494), (1020, 30, 0), (462, 31, 0)]
USER = "Book a product review meeting with Zhang San tomorrow at 3pm, 1 hour"
FORWARDED = "Book a product review with Zhang San on 2025-06-11 at 15:00, duration 1 hour"
CONFIRMED = "Created 'Product review' on 2025-06-11 at 15:00 for 60 minutes."


def _usage(tokens_in: int, tokens_out: int, reasoning: int) -> dict[str, Any]:
    return {"input_tokens": tokens_in, "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
            "output_token_details": {"reasoning": reasoning}}


def _reply(index: int, text: str = "", *calls: Any) -> AIMessage:
    return AIMessage(content=text, tool_calls=list(calls), usage_metadata=_usage(*TRIPLES[index]))  # pyright: ignore[reportArgumentType]


@tool
def create_calendar_event(title: str, start_iso: str, duration_minutes: int) -> str:
    """Create a calendar event."""
    return f"OK: created '{title}' at {start_iso} for {duration_minutes} min"


def _calendar_model() -> ScriptedModel:
    return ScriptedModel(replies=[
        _reply(1, "", tool_call("create_calendar_event", {
            "title": "Product review", "start_iso": "2025-06-11T15:00:00",
            "duration_minutes": 60})),
        _reply(2, CONFIRMED),
    ])


def _supervisor_model(tool_name: str, args: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel(replies=[
        _reply(0, "", tool_call(tool_name, args)),
        _reply(3, "Done: the product review is booked for tomorrow at 3pm, 1 hour."),
    ])


def _check_timeline(records: list[CallRecord], subagent: str, forwarding_tool: str) -> None:
    assert [r.caller for r in records] == ["supervisor", subagent, subagent, "supervisor"]
    assert [r.kind for r in records] == ["agent", "subagent", "subagent", "agent"]
    assert [(r.input_tokens, r.output_tokens, r.reasoning_tokens) for r in records] == TRIPLES
    totals = card_totals(records)
    assert (totals.calls, totals.input_tokens, totals.output_tokens) == (4, 2227, 720)
    assert (totals.reasoning_tokens, totals.total_tokens) == (512, 2947)
    first, second, third, fourth = records
    assert first.output_calls == [forwarding_tool] and first.output_text == ""  # no text
    assert second.messages == 2  # its own system prompt and the forwarded request only
    assert [i.kind for i in second.new] == ["system", "human"]
    assert second.new[1].text == FORWARDED
    assert [i.kind for i in third.new] == ["ai", "tool"]  # its tool call and the result
    assert third.new[1].text.endswith("OK: created 'Product review' at 2025-06-11T15:00:00 "
                                      "for 60 min")
    assert third.output_text == CONFIRMED
    assert [i.kind for i in fourth.new] == ["ai", "tool"]  # ends with the tool's output
    assert fourth.new[-1].text.endswith(CONFIRMED)
    assert fourth.messages == first.messages + 2
    card = format_call_card(records)
    assert "4 model calls · 2,227 in · 720 out · 512 reasoning · 2,947 tokens" in card
    rows = [line.split() for line in card.splitlines()[2:6]]
    assert [row[1] for row in rows] == ["supervisor", subagent, subagent, "supervisor"]


def test_the_four_call_subagent_timeline_of_a_hand_written_supervisor() -> None:
    calendar = create_agent(_calendar_model(), tools=[create_calendar_event], name="calendar",
                            system_prompt="You are the calendar assistant.")

    @tool("schedule_event")
    def schedule_event(request: str) -> str:
        """Hand the user's scheduling request to the calendar assistant."""
        result = calendar.invoke({"messages": [{"role": "user", "content": request}]})
        return str(result["messages"][-1].text)

    supervisor = create_agent(
        _supervisor_model("schedule_event", {"request": FORWARDED}), tools=[schedule_event],
        name="supervisor", system_prompt="You are the personal-assistant supervisor.")
    recorder = CallRecorder(run_id="run-1")
    supervisor.invoke({"messages": [{"role": "user", "content": USER}]},
                      {"callbacks": [recorder]})
    records = recorder.records()
    _check_timeline(records, "calendar", "schedule_event")
    assert [r.tools for r in records] == [["schedule_event"], ["create_calendar_event"],
                                          ["create_calendar_event"], ["schedule_event"]]
    assert {r.run_id for r in records} == {"run-1"}
    assert all(r.seconds is not None and r.started_at for r in records)


def test_the_same_timeline_through_a_deep_agents_task_tool() -> None:
    subagent = {"name": "calendar", "description": "Books meetings.",
                "system_prompt": "You are the calendar assistant.",
                "tools": [create_calendar_event], "model": _calendar_model()}
    agent = create_deep_agent(
        _supervisor_model("task", {"description": FORWARDED, "subagent_type": "calendar"}),
        subagents=[subagent], name="supervisor")
    recorder = CallRecorder()
    agent.invoke({"messages": [{"role": "user", "content": USER}]}, {"callbacks": [recorder]})
    records = recorder.records()
    _check_timeline(records, "calendar", "task")
    assert "task" in records[0].tools and "task" not in records[1].tools
    assert "create_calendar_event" in records[1].tools


def _worker(request: ScriptRequest) -> AIMessage | str:
    if request.turn_results:
        return f"found {request.turn_results[-1].text}"
    return ai("", tool_call("lookup", {"q": request.last_human_text}))


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"<{q}>"


def test_two_runs_of_one_subagent_are_each_compared_with_their_own_previous_call() -> None:
    subagent = {"name": "worker", "description": "Looks things up.", "system_prompt": "Work.",
                "tools": [lookup], "model": ScriptedModel(policy=_worker)}

    def main(request: ScriptRequest) -> AIMessage | str:
        if request.turn_results:
            return "both done"
        return ai("", tool_call("task", {"description": "alpha", "subagent_type": "worker"}),
                  tool_call("task", {"description": "beta", "subagent_type": "worker"}))

    agent = create_deep_agent(ScriptedModel(policy=main), subagents=[subagent], name="main")
    recorder = CallRecorder()
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, {"callbacks": [recorder]})
    workers = [r for r in recorder.records() if r.caller == "worker"]
    assert len(workers) == 4
    firsts = [r for r in workers if r.messages == 2]
    seconds = [r for r in workers if r.messages == 4]
    # Each run's first call is all new (its system prompt and its own task), whichever ran
    # first; each second call adds only its own tool call and result.
    assert sorted(r.new[1].text for r in firsts) == ["alpha", "beta"]
    assert all([i.kind for i in r.new] == ["system", "human"] for r in firsts)
    assert all([i.kind for i in r.new] == ["ai", "tool"] for r in seconds)
    assert sorted(r.new[1].text.split("] ")[1] for r in seconds) == ["<alpha>", "<beta>"]


def test_a_failed_call_is_recorded_with_its_error() -> None:
    def refuse(request: ScriptRequest) -> str:
        raise RuntimeError("rate limited")

    recorder = CallRecorder()
    agent = create_agent(ScriptedModel(replies=[refuse]), name="solo")
    with pytest.raises(RuntimeError):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"callbacks": [recorder]})
    [record] = recorder.records()
    assert record.error == "RuntimeError: rate limited"
    assert "error: RuntimeError: rate limited" in format_call_card([record])


def test_a_new_part_after_a_changed_prompt_starts_where_the_change_is() -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    recorder = CallRecorder()
    model = ScriptedModel(policy=lambda r: "ok")
    model.invoke([SystemMessage("v1"), HumanMessage("a")], {"callbacks": [recorder]})
    model.invoke([SystemMessage("v1"), HumanMessage("a"), AIMessage("ok"), HumanMessage("b")],
                 {"callbacks": [recorder]})
    model.invoke([SystemMessage("v2"), HumanMessage("a")], {"callbacks": [recorder]})
    records = recorder.records()
    assert [r.new_count for r in records] == [2, 2, 2]
    assert [i.text for i in records[1].new] == ["ok", "b"]
    assert [i.text for i in records[2].new] == ["v2", "a"]


# --------------------------------------------------------------------------- storage


def test_records_round_trip_through_json_and_are_trimmed_when_stored() -> None:
    record = CallRecord(caller="main", kind="agent", messages=12, tools=["ls"],
                        input_tokens=10, output_tokens=2, reasoning_tokens=None,
                        new=[PromptItem("human", f"m{n}", 2) for n in range(12)], new_count=12,
                        output_calls=["ls"], run_id="r")
    kept = stored(record)
    assert len(kept["new"]) == STORED_ITEMS and kept["new_count"] == 12
    assert kept["new"][-1]["text"] == "m11"  # the last items: the ones that end the prompt
    [back] = records_from_json([kept])
    assert back.new == record.new[-STORED_ITEMS:]
    assert (back.caller, back.tools, back.input_tokens, back.run_id) == ("main", ["ls"], 10, "r")
    assert "+ … 4 earlier new items" in format_call_card([back])
    assert records_from_json([{"caller": "x", "unknown": 1}, "junk"])[0].caller == "x"  # pyright: ignore[reportArgumentType]


def test_a_thread_keeps_its_most_recent_calls() -> None:
    records = [CallRecord(caller="main", kind="agent", messages=n) for n in range(5)]
    kept = append_stored(None, records[:3], limit=4)
    kept = append_stored(kept, records[3:], limit=4)
    assert [e["messages"] for e in kept] == [1, 2, 3, 4]


def test_a_card_without_reasoning_has_no_reasoning_column() -> None:
    card = format_call_card([CallRecord(caller="main", kind="agent", messages=2,
                                        input_tokens=5, output_tokens=1)])
    assert "reasoning" not in card
    assert format_call_card([]) == "no model calls recorded"
