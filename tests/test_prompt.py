"""Prompt assembly: section order, stable-first rendering, fixed tool order, stable prefixes."""

from __future__ import annotations

import itertools

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom import PromptSection, create_deep_agent
from fathom.prompt import (
    BASE_PROMPT,
    AssembledSystemMessage,
    add_prompt_section,
    render_sections,
    sections_of,
    with_section,
)
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hi"}]}


def test_render_puts_stable_then_conditional_then_volatile():
    text = render_sections(
        [
            PromptSection("clock", "V", "volatile"),
            PromptSection("a", "A"),
            PromptSection("flag", "C", "conditional"),
            PromptSection("b", "B"),
        ]
    )
    assert text == "A\n\nB\n\nC\n\nV"


def test_with_section_replaces_a_section_of_the_same_name_in_place():
    message = AssembledSystemMessage.from_sections(
        [PromptSection("a", "A"), PromptSection("b", "B")]
    )
    updated = with_section(message, PromptSection("a", "A2"))
    assert updated.content == "A2\n\nB"
    assert [s.name for s in sections_of(updated)] == ["a", "b"]


def test_plain_system_message_becomes_one_stable_section():
    sections = sections_of(SystemMessage("hello"))
    assert sections == [PromptSection("system", "hello", "stable")]
    assert sections_of(None) == []


def test_system_prompt_comes_first_then_base_then_middleware_sections():
    model = ScriptedModel(replies=[ai("ok")])
    agent = create_deep_agent(
        model,
        system_prompt="You are a careful researcher.",
        interrupt_on={"write_file": True},
        checkpointer=InMemorySaver(),
    )
    agent.invoke(USER, {"configurable": {"thread_id": "p"}})
    prompt = model.requests[0].system_prompt
    assert prompt.startswith("You are a careful researcher.\n\n" + BASE_PROMPT)
    order = [prompt.index(h) for h in ("## Planning", "## Files", "## Approval")]
    assert order == sorted(order)


def test_system_message_instance_is_accepted():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, system_prompt=SystemMessage("Custom first.")).invoke(USER)
    assert model.requests[0].system_prompt.startswith("Custom first.")


class _ClockSection(AgentMiddleware):
    """A user middleware adding a volatile section (changes every call) and a stable one."""

    def wrap_model_call(self, request, handler):
        calls = len(request.messages)
        request = add_prompt_section(request, PromptSection("clock", f"Turn {calls}.", "volatile"))
        return handler(add_prompt_section(request, PromptSection("style", "Be brief.")))


def test_volatile_sections_go_last_even_when_added_first():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, middleware=[_ClockSection()]).invoke(USER)
    prompt = model.requests[0].system_prompt
    assert prompt.endswith("Turn 1.")
    assert prompt.index("Be brief.") < prompt.index("Turn 1.")


class _PlainAppender(AgentMiddleware):
    """A LangChain-style middleware that appends raw text to the system message."""

    def wrap_model_call(self, request, handler):
        text = (request.system_prompt or "") + "\n\nPLAIN ADDITION"
        return handler(request.override(system_message=SystemMessage(text)))


def test_plain_middleware_text_is_kept():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, middleware=[_PlainAppender()]).invoke(USER)
    prompt = model.requests[0].system_prompt
    assert "PLAIN ADDITION" in prompt and "## Files" in prompt


def test_consecutive_requests_of_a_run_extend_each_other():
    todos = [{"content": "a", "status": "in_progress"}]
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_todos", {"todos": todos})),
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "alpha"})),
            ai("", tool_call("read_file", {"file_path": "/a.md"})),
            ai("", tool_call("edit_file", {"file_path": "/a.md", "old_string": "alpha",
                                           "new_string": "beta"})),
            ai("done"),
        ]
    )  # fmt: skip
    create_deep_agent(model, system_prompt="Be exact.").invoke(USER)
    requests = model.requests
    assert len(requests) == 5
    for earlier, later in itertools.pairwise(requests):
        assert later.system_prompt == earlier.system_prompt
        assert later.tools == earlier.tools
        assert later.messages[: len(earlier.messages)] == earlier.messages


def test_tool_schemas_are_in_name_order_whatever_the_construction_order():
    def zeta(x: str) -> str:
        """Z."""
        return x

    def alpha(x: str) -> str:
        """A."""
        return x

    one = ScriptedModel(replies=[ai("ok")])
    two = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(one, [zeta, alpha]).invoke(USER)
    create_deep_agent(two, [alpha, zeta]).invoke(USER)
    assert one.requests[0].tools == two.requests[0].tools
    assert one.requests[0].tool_names == sorted(one.requests[0].tool_names)


def test_a_section_marked_last_renders_after_volatile_ones():
    text = render_sections(
        [
            PromptSection("suffix", "S", last=True),
            PromptSection("clock", "V", "volatile"),
            PromptSection("a", "A"),
        ]
    )
    assert text == "A\n\nV\n\nS"


def test_prompt_assembly_drops_a_section_whose_tools_are_not_offered():
    from langchain.agents.middleware import ModelRequest

    from fathom.prompt import PromptAssemblyMiddleware

    message = AssembledSystemMessage.from_sections([
        PromptSection("general", "G"),
        PromptSection("shell", "SHELL", tools=frozenset({"execute"})),
        PromptSection("files", "FILES", tools=frozenset({"ls", "read_file"})),
    ])
    seen = []
    assembly = PromptAssemblyMiddleware()
    for tools in ([{"name": "read_file"}], [{"name": "execute"}, {"name": "ls"}], []):
        request = ModelRequest(model=ScriptedModel(replies=[]), messages=[], tools=tools,
                               system_message=message)
        assembly.wrap_model_call(request, lambda r: seen.append(r.system_message.content))
    assert seen == ["G\n\nFILES", "G\n\nSHELL\n\nFILES", "G"]
