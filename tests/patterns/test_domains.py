"""The domain of a turn, read from real threads: which subagent, skill or handoff served it.

Real agents on a checkpointer, driven by scripted models that decide from what they are
sent; the turns come from the thread's checkpoint history, as `fathom stats sticky` reads
them, and are labelled by `turn_domain`.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.measure.sticky import Turn, TurnView, sticky_card, thread_turns
from fathom.patterns.domains import domain_labeller, turn_domain
from fathom.patterns.handoffs import Step, StepMiddleware, transfer_tool
from fathom.project.measure import timestamp
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


def _turns(agent: Any, config: dict[str, Any], label: Any = turn_domain) -> list[Turn]:
    snapshots = [(timestamp(s.created_at), dict(s.values)) for s in agent.get_state_history(config)]
    return thread_turns(config["configurable"]["thread_id"], snapshots, label)


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid4().hex}}


def _ask(agent: Any, config: dict[str, Any], *texts: str) -> None:
    for text in texts:
        agent.invoke({"messages": [{"role": "user", "content": text}]}, config)


def _delegate(request: ScriptRequest) -> AIMessage | str:
    """Hand the turn to the subagent its words name, then answer with its result."""
    if request.turn_results:
        return "done: " + str(request.turn_results[-1].text)
    kind = "flight" if "flight" in request.last_human_text else "coffee"
    return ai("", tool_call("task", {"description": request.last_human_text,
                                     "subagent_type": kind}))


def test_a_deep_agents_turns_are_labelled_by_the_subagent_its_task_call_chose() -> None:
    subagents = [{"name": name, "description": f"{name} orders", "system_prompt": name,
                  "model": ScriptedModel(policy=lambda r: "ok")} for name in ("coffee", "flight")]
    agent = create_deep_agent(ScriptedModel(policy=_delegate), subagents=subagents,
                              checkpointer=InMemorySaver())
    config = _config()
    _ask(agent, config, "a coffee", "another coffee", "now a flight")
    turns = _turns(agent, config)
    assert [t.domain for t in turns] == ["coffee", "coffee", "flight"]
    assert turns[0].ts < turns[1].ts < turns[2].ts
    card = sticky_card(turns)
    assert (card.sticky_pairs, card.pairs, card.switch_rate) == (1, 2, 0.5)
    assert sticky_card(turns, idle_s=0.0).rate == 0.0  # turns a moment apart: past a 0 s gap


@tool
def buy_coffee() -> str:
    """Buy a coffee."""
    return "Coffee ordered."


@tool
def book_flight() -> str:
    """Book a flight."""
    return "Flight booked."


def _desk(request: ScriptRequest) -> AIMessage | str:
    wants = "book_flight" if "flight" in request.last_human_text else "buy_coffee"
    if wants in [m.name for m in request.turn_results]:
        return "All done."
    if request.has_tool(wants):
        return ai("", tool_call(wants))
    return ai("", tool_call("transfer_to_flights" if wants == "book_flight"
                            else "transfer_to_coffee"))


def test_a_handoff_turn_that_stays_in_its_step_is_labelled_by_the_step() -> None:
    to_coffee, to_flights = transfer_tool("coffee"), transfer_tool("flights")
    steps = StepMiddleware({
        "triage": Step("Front desk.", [to_coffee, to_flights]),
        "coffee": Step("Coffee desk.", [buy_coffee, to_flights]),
        "flights": Step("Flight desk.", [book_flight, to_coffee]),
    })
    model = ScriptedModel(policy=_desk)
    agent = create_agent(model, middleware=[steps], checkpointer=InMemorySaver(), name="desk")
    config = _config()
    _ask(agent, config, "Buy coffee", "Buy coffee again", "Book a flight")
    assert model.calls == 3 + 2 + 3  # turn 2 makes no handoff call: the state keeps the step
    assert [t.domain for t in _turns(agent, config)] == ["coffee", "coffee", "flights"]


def _view(*messages: Any, state: dict[str, Any] | None = None) -> TurnView:
    return TurnView("t", 0, 0.0, [HumanMessage("hi"), *messages], state or {})


def _calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{i}"}
                                     for i, (n, a) in enumerate(calls)])


def test_skill_loads_handoff_tools_and_async_tasks_name_the_domain() -> None:
    assert turn_domain(_view(_calls(("load_skill", {"skill_name": "sales"})))) == "sales"
    assert turn_domain(_view(_calls(("read_file", {"file_path": "/skills/sql/SKILL.md"})))) == "sql"
    assert turn_domain(_view(_calls(("read_file", {"file_path": "/notes.md"})))) is None
    assert turn_domain(_view(_calls(("go_back_to_warranty", {})))) == "warranty"
    assert turn_domain(_view(_calls(("start_async_task", {"subagent_type": "researcher",
                                                           "description": "x"})))) == "researcher"
    assert turn_domain(_view(_calls(("task", {"agent_name": "billing", "description": "x"})))) \
        == "billing"
    assert turn_domain(_view(AIMessage("just chatting"))) is None


def test_side_by_side_subagents_join_their_names_and_a_table_labels_wrapped_agents() -> None:
    both = _calls(("task", {"subagent_type": "email"}), ("task", {"subagent_type": "calendar"}))
    assert turn_domain(_view(both)) == "calendar+email"
    wrapped = _calls(("schedule_event", {"request": "tomorrow 3pm"}))
    assert turn_domain(_view(wrapped)) is None
    assert domain_labeller({"schedule_event": "calendar"})(_view(wrapped)) == "calendar"


def test_the_state_step_wins_and_server_dicts_are_read_too() -> None:
    assert turn_domain(_view(_calls(("transfer_to_coffee", {})),
                             state={"active_agent": "flights"})) == "flights"
    server = TurnView("t", 0, 0.0, [
        {"type": "human", "content": "hi", "id": "h"},
        {"type": "ai", "content": "", "id": "a",
         "tool_calls": [{"name": "task", "args": {"subagent_type": "coffee"}, "id": "c"}]},
    ], {})
    assert turn_domain(server) == "coffee"
