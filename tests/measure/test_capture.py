"""Call records from a capture of the model API's bodies: Responses and Chat Completions,
JSONL and HAR, whole and streamed.

`data/subagent_timeline_responses.jsonl` is the four round trips of the hand-written subagents demo
(see `test_calls.py`) as a capture addon writes them: one line per round trip, request and
response bodies only, over the Responses protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fathom.measure.calls import card_totals, format_call_card
from fathom.measure.capture import read_capture, records_from_bodies

CAPTURE = Path(__file__).parent / "data" / "subagent_timeline_responses.jsonl"
NAMES = {"personal-assistant supervisor": "supervisor", "calendar assistant": "calendar"}


def _trips() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    lines = CAPTURE.read_text(encoding="utf-8").splitlines()
    return [(e["request"], e["response"]) for e in map(json.loads, lines)]


def test_the_responses_capture_sums_up_to_the_timeline() -> None:
    records = read_capture(CAPTURE, NAMES)
    assert [r.caller for r in records] == ["supervisor", "calendar", "calendar", "supervisor"]
    assert [r.kind for r in records] == ["agent", "subagent", "subagent", "agent"]
    assert [(r.input_tokens, r.output_tokens, r.reasoning_tokens) for r in records] == [
        (347, 75, 18), (398, 584, 494), (1020, 30, 0), (462, 31, 0)]
    totals = card_totals(records)
    assert (totals.input_tokens, totals.output_tokens, totals.reasoning_tokens,
            totals.total_tokens) == (2227, 720, 512, 2947)
    assert records[3].cached_tokens == 256
    first, second, _third, fourth = records
    assert first.output_calls == ["schedule_event"] and first.output_text == ""
    assert first.tools == ["schedule_event"]  # the supervisor never sees the calendar's tool
    assert second.messages == 2 and [i.kind for i in second.new] == ["system", "user"]
    assert [i.kind for i in fourth.new] == ["reasoning", "function_call", "function_call_output"]
    assert fourth.new[-1].text.startswith("Created 'Product review'")
    assert records[0].model == "deepseek-flash"
    card = format_call_card(records)
    assert "4 model calls · 2,227 in · 720 out · 512 reasoning · 2,947 tokens" in card


def test_without_names_the_first_system_prompt_is_the_agent_and_later_ones_subagents() -> None:
    records = read_capture(CAPTURE)
    assert [r.caller for r in records] == ["agent", "subagent", "subagent", "agent"]


def _as_chat(request: dict[str, Any], response: dict[str, Any]
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same round trip over Chat Completions."""
    messages: list[dict[str, Any]] = []
    for item in request["input"]:
        if "role" in item:
            messages.append({"role": item["role"], "content": item["content"]})
        elif item["type"] == "function_call":
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": item["call_id"], "type": "function",
                 "function": {"name": item["name"], "arguments": item["arguments"]}}]})
        elif item["type"] == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": item["output"]})
    tools = [{"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}}
             for t in request["tools"]]
    calls = [{"id": o["call_id"], "type": "function",
              "function": {"name": o["name"], "arguments": o["arguments"]}}
             for o in response["output"] if o["type"] == "function_call"]
    text = " ".join(c["text"] for o in response["output"] if o["type"] == "message"
                    for c in o["content"])
    usage = response["usage"]
    return ({"model": request["model"], "messages": messages, "tools": tools},
            {"model": response["model"], "choices": [{"index": 0, "message": {
                "role": "assistant", "content": text or None, "tool_calls": calls or None}}],
             "usage": {"prompt_tokens": usage["input_tokens"],
                       "completion_tokens": usage["output_tokens"],
                       "completion_tokens_details": {
                           "reasoning_tokens": usage["output_tokens_details"]["reasoning_tokens"]},
                       "prompt_tokens_details": {
                           "cached_tokens": usage["input_tokens_details"]["cached_tokens"]}}})


def test_chat_completions_bodies_give_the_same_card(tmp_path: Path) -> None:
    chat = [_as_chat(*trip) for trip in _trips()]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"request_body": json.dumps(q), "response_body": r}) + "\n"
                            for q, r in chat), encoding="utf-8")
    records = read_capture(path, NAMES)
    assert [r.caller for r in records] == ["supervisor", "calendar", "calendar", "supervisor"]
    totals = card_totals(records)
    assert (totals.input_tokens, totals.output_tokens, totals.reasoning_tokens) == (2227, 720, 512)
    assert records[0].output_calls == ["schedule_event"] and records[0].output_text == ""
    assert records[1].messages == 2
    assert [i.kind for i in records[3].new] == ["assistant", "tool"]


def test_a_har_file_with_a_streamed_response_and_other_traffic(tmp_path: Path) -> None:
    trips = _trips()
    entries: list[dict[str, Any]] = [{  # not a model call: skipped
        "request": {"method": "GET", "url": "https://api.example.com/v1/models"},
        "response": {"content": {"text": json.dumps({"data": []})}},
    }]
    for n, (request, response) in enumerate(trips):
        body = json.dumps(response)
        if n == 1:  # streamed: the last event carries the whole response
            events = [{"type": "response.created", "response": {"id": response["id"]}},
                      {"type": "response.completed", "response": response}]
            body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        entries.append({"request": {"method": "POST", "postData": {"text": json.dumps(request)}},
                        "response": {"content": {"text": body}}})
    path = tmp_path / "capture.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}), encoding="utf-8")
    records = read_capture(path, NAMES)
    assert len(records) == 4
    assert (records[1].input_tokens, records[1].reasoning_tokens) == (398, 494)
    assert records[1].output_calls == ["create_calendar_event"]


def test_a_streamed_chat_completion_is_added_up() -> None:
    request = {"model": "m", "messages": [{"role": "system", "content": "s"},
                                          {"role": "user", "content": "u"}]}
    chunks = [
        {"model": "m", "choices": [{"delta": {"content": "Hel"}}]},
        {"model": "m", "choices": [{"delta": {"content": "lo"}}]},
        {"model": "m", "choices": [{"delta": {"tool_calls": [
            {"index": 0, "function": {"name": "lookup", "arguments": "{}"}}]}}]},
        {"model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
    ]
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    [record] = records_from_bodies([(request, stream)])  # pyright: ignore[reportArgumentType]
    assert (record.output_text, record.output_calls) == ("Hello", ["lookup"])
    assert (record.input_tokens, record.output_tokens, record.reasoning_tokens) == (9, 4, None)
