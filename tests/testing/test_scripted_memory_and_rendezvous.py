"""`ScriptedModel`'s record stays proportional to the history; `Rendezvous` proves overlap."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from fathom.testing import Rendezvous, RendezvousTimeout, ScriptedModel, tool_call

USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


def _step(index: int) -> list[BaseMessage]:
    call = tool_call("read_file", {"path": f"/notes/{index}.md"}, id=f"c{index}")
    return [
        AIMessage("", tool_calls=[call]),
        ToolMessage(f"line {index}: " + "x" * 400, tool_call_id=f"c{index}"),
    ]


def test_a_long_run_records_every_request_in_memory_proportional_to_its_history() -> None:
    # The usage is given so the model does not render the history as JSON on every call:
    # that is time, not memory, and it would only slow the test down.
    model = ScriptedModel(
        policy=lambda req: AIMessage("", tool_calls=[tool_call("read_file", {"path": "/x"})],
                                     usage_metadata=USAGE)
    )  # fmt: skip
    steps = 1_000
    tracemalloc.start()
    try:
        history: list[BaseMessage] = [SystemMessage("You are a worker."), HumanMessage("Go.")]
        for index in range(steps):
            history.extend(_step(index))
        own, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for index in range(steps):
            model.invoke(history[: 2 + 2 * index])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert len(history) == 2_000 + 2
    records = model.requests
    assert len(records) == steps
    assert [len(r.messages) for r in records[:3]] == [2, 4, 6]
    last = records[-1].messages
    assert last[-1].content == history[2 * steps - 1].content
    assert last[-1] is not history[2 * steps - 1]  # a copy, not the caller's object
    # A deep copy of every history into every record reached 196x the history at 500
    # steps (and grows with the square); sharing copies and lists keeps it near 3x.
    assert peak < 5 * own, f"peak {peak:,} B for a history of {own:,} B"


def test_records_keep_each_request_as_it_was_received() -> None:
    model = ScriptedModel(policy=lambda req: "ok")
    history: list[BaseMessage] = [HumanMessage("one")]
    model.invoke(history)
    history.append(AIMessage("two"))
    model.invoke(history)
    model.invoke([HumanMessage("other thread")])
    history.append(HumanMessage("three"))
    model.invoke(history)
    history[0].content = "changed later"

    assert [[m.content for m in r.messages] for r in model.requests] == [
        ["one"],
        ["one", "two"],
        ["other thread"],
        ["one", "two", "three"],
    ]


async def test_async_calls_meet_at_a_rendezvous() -> None:
    meet = Rendezvous(4, timeout=30)
    model = ScriptedModel(policy=lambda req: f"answer {req.last_human_text}", rendezvous=meet)

    replies = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(4)))

    assert sorted(r.content for r in replies) == [f"answer q{i}" for i in range(4)]
    assert (meet.max_in_flight, meet.groups) == (4, 1)


def test_calls_one_after_another_never_meet() -> None:
    model = ScriptedModel(policy=lambda req: "ok", rendezvous=Rendezvous(2, timeout=0.2))

    with pytest.raises(RendezvousTimeout, match="at most 1 of 2 callers"):
        model.invoke("alone")


def test_a_rendezvous_is_reusable_and_counts_groups() -> None:
    meet = Rendezvous(3, timeout=30)
    threads = [threading.Thread(target=meet.arrive) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert meet.groups == 2
    assert meet.max_in_flight >= 3


def test_a_rendezvous_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="parties must be at least 1"):
        Rendezvous(0)
    with pytest.raises(ValueError, match="timeout must be a positive"):
        Rendezvous(2, timeout=0)
