"""Prompt-cache friendliness: stable sections first, and Anthropic cache markers for Claude."""

from __future__ import annotations

from langchain.agents.middleware import wrap_model_call
from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage

from fathom import create_deep_agent
from fathom.backends import create_file_data
from fathom.testing import ScriptedModel, ai

USER = {"messages": [{"role": "user", "content": "hi"}]}


def test_anthropic_models_get_cache_control_and_others_do_not():
    from langchain_anthropic import ChatAnthropic  # installed by `make test` (extra "anthropic")

    seen = []

    @wrap_model_call
    def offline(request, handler):
        # stands in for the network call: record what would be sent, answer locally
        seen.append(dict(request.model_settings))
        return ModelResponse(result=[AIMessage(content="ok")])

    claude = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-test")
    create_deep_agent(claude, middleware=[offline]).invoke(USER)
    create_deep_agent(ScriptedModel(replies=[ai("ok")]), middleware=[offline]).invoke(USER)
    assert seen[0].get("cache_control", {}).get("type") == "ephemeral"
    assert "cache_control" not in seen[1]


def test_memory_and_skills_are_stable_sections_ahead_of_conditional_ones():
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedModel(replies=[ai("ok"), ai("ok")])
    files = {
        "/AGENTS.md": create_file_data("Always answer in English."),
        "/skills/report/SKILL.md": create_file_data(
            "---\nname: report\ndescription: Write reports.\n---\n# Report\nBody."
        ),
    }
    agent = create_deep_agent(
        model,
        memory=["/AGENTS.md"],
        skills=["/skills/"],
        interrupt_on={"write_file": True},
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({**USER, "files": files}, config)
    agent.invoke({"messages": [{"role": "user", "content": "again"}]}, config)
    first, second = (r.system_prompt for r in model.requests)
    assert first == second  # the same prefix on every call: cacheable
    memory = first.index("Always answer in English.")
    skills = first.index("Write reports.")
    approval = first.index("## Approval")
    assert memory < approval and skills < approval
    assert "Body." not in first  # the skill body stays out until it is read


def _memory_agent_prompt(model, add_cache_control):
    """The system message content the model is sent, for an agent with one memory file
    followed by a section that changes between turns."""
    from langchain.agents import create_agent

    from fathom.backends.state import StateBackend
    from fathom.middleware import MemoryMiddleware
    from fathom.prompt import PromptSection, PromptSectionMiddleware

    seen = []

    @wrap_model_call
    def offline(request, handler):
        seen.append(request.system_message.content)
        return ModelResponse(result=[AIMessage(content="ok")])

    memory = MemoryMiddleware(
        backend=StateBackend(), sources=["/AGENTS.md"], add_cache_control=add_cache_control
    )
    later = PromptSectionMiddleware(PromptSection("status", "Turn 1.", "volatile"))
    agent = create_agent(model, system_prompt="You help.", middleware=[memory, later, offline])
    agent.invoke({**USER, "files": {"/AGENTS.md": create_file_data("Answer in English.")}})
    return seen[0]


def test_memory_add_cache_control_marks_the_block_ending_with_memory_for_claude():
    from langchain_anthropic import ChatAnthropic

    claude = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-test")
    content = _memory_agent_prompt(claude, add_cache_control=True)
    assert isinstance(content, list)
    marked = [block for block in content if "cache_control" in block]
    assert len(marked) == 1 and marked[0]["cache_control"] == {"type": "ephemeral"}
    assert marked[0]["text"].endswith("Answer in English.\n</memory_file>\n</agent_memory>")
    assert content[-1]["text"] == "\n\nTurn 1."  # what changes follows the breakpoint
    unmarked = _memory_agent_prompt(claude, add_cache_control=False)
    assert "".join(block["text"] for block in content) == unmarked  # same text


def test_memory_add_cache_control_adds_no_marker_for_other_models():
    content = _memory_agent_prompt(ScriptedModel(replies=[ai("ok")]), add_cache_control=True)
    assert isinstance(content, str) and "Answer in English." in content
