"""What fathom keeps between model calls to make a step cheap stays right when things change.

Two things are kept: the plain system message handed to the model (reused while the
rendered prompt is unchanged, rebuilt when a section changes) and the previews of saved
user messages (only messages new since the previous call are examined; any other history,
another thread's or one with messages removed, is examined whole).
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom import PromptSection, create_deep_agent
from fathom.backends.state import StateBackend
from fathom.middleware import FilesystemMiddleware
from fathom.middleware.context.eviction import EVICTED_TO
from fathom.prompt import SectionPromptMixin
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

BIG = "\n".join(f"line {i} of the pasted document" for i in range(200))  # ~6,000 chars


@tool
def tick(i: int) -> str:
    """Acknowledge tick i."""
    return f"ok {i}"


def _ticking_model(steps: int, seen: list[list[BaseMessage]]) -> ScriptedModel:
    """Calls `tick` `steps` times, then answers; keeps the message objects of every call."""

    def policy(request: ScriptRequest) -> AIMessage:
        seen.append(list(request.messages))
        if len(seen) <= steps:
            return ai("", tool_call("tick", {"i": len(seen)}))
        return ai("done")

    return ScriptedModel(policy=policy)


class _Clock(SectionPromptMixin, AgentMiddleware):
    """A volatile prompt section whose text changes from the third model call on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def section_for_request(self, request: ModelRequest) -> PromptSection | None:
        self.calls += 1
        return PromptSection("clock", "early" if self.calls < 3 else "late", "volatile")


def test_the_model_gets_the_same_system_message_until_the_prompt_changes() -> None:
    seen: list[list[BaseMessage]] = []
    agent = create_deep_agent(
        _ticking_model(4, seen), tools=[tick], middleware=[_Clock()],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                 {"configurable": {"thread_id": "t"}})

    systems = [messages[0] for messages in seen]
    assert len(systems) == 5
    assert systems[0] is systems[1]  # unchanged prompt: one object
    assert systems[1] is not systems[2]  # the clock section changed: a new message
    assert systems[2] is systems[3] is systems[4]
    assert systems[1].text.endswith("early") and systems[2].text.endswith("late")


def _evicting_agent(model: ScriptedModel) -> Any:
    fs = FilesystemMiddleware(backend=StateBackend(), human_message_token_limit_before_evict=500)
    return create_agent(model, tools=[tick], middleware=[fs], checkpointer=InMemorySaver())


def _replying_model(seen: list[list[BaseMessage]]) -> ScriptedModel:
    """Answers every call with "reply N"; keeps the message objects of every call."""

    def policy(request: ScriptRequest) -> AIMessage:
        seen.append(list(request.messages))
        return ai(f"reply {len(seen)}")

    return ScriptedModel(policy=policy)


def test_a_saved_message_keeps_one_preview_across_the_steps_of_a_run() -> None:
    seen: list[list[BaseMessage]] = []
    agent = _evicting_agent(_ticking_model(2, seen))
    agent.invoke({"messages": [HumanMessage(BIG)]}, {"configurable": {"thread_id": "a"}})

    previews = [messages[1] for messages in seen]  # after the filesystem's system message
    assert len(previews) == 3
    assert all("saved to `/conversation_history/" in p.text for p in previews)
    assert previews[0] is previews[1] is previews[2]  # the same history: one preview


def test_previews_follow_each_thread_and_a_removed_message() -> None:
    seen: list[list[BaseMessage]] = []
    agent = _evicting_agent(_replying_model(seen))
    big, small = {"configurable": {"thread_id": "big"}}, {"configurable": {"thread_id": "small"}}
    agent.invoke({"messages": [HumanMessage(BIG)]}, big)
    agent.invoke({"messages": [HumanMessage("tiny"), AIMessage("x"), HumanMessage("more")]},
                 small)
    # the small thread's history is as long as the big one's but shares none of it
    assert [m.text for m in seen[1][1:]] == ["tiny", "x", "more"]

    agent.invoke({"messages": [HumanMessage("and now?")]}, big)
    assert "saved to `/conversation_history/" in seen[2][1].text

    state = agent.get_state(big).values["messages"]
    assert EVICTED_TO in state[0].additional_kwargs
    agent.update_state(big, {"messages": [RemoveMessage(id=state[0].id)]})
    agent.invoke({"messages": [HumanMessage("last")]}, big)
    assert all("saved to" not in m.text for m in seen[3][1:])
    assert [m.text for m in seen[3][1:]] == ["reply 1", "and now?", "reply 3", "last"]
