"""The middleware take the reference's constructor keywords and compose with plain
LangChain `create_agent`; each keyword does what it says."""

from __future__ import annotations

from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from fathom import create_deep_agent, create_file_data
from fathom.backends.state import StateBackend
from fathom.middleware import (
    FilesystemMiddleware,
    MemoryMiddleware,
    SkillsMiddleware,
    SubAgentMiddleware,
)
from fathom.middleware.context.summarization import (
    SummarizationMiddleware,
    create_summarization_middleware,
    create_summarization_tool_middleware,
)
from fathom.middleware.memory import MEMORY_GUIDANCE
from fathom.middleware.permissions import FilesystemPermission
from fathom.middleware.planning import PLANNING_PROMPT, PlanningMiddleware
from fathom.testing import ScriptedModel, ai, tool_call


def _run(model: ScriptedModel, middleware: list[Any], tools: list[Any] | None = None) -> dict:
    agent = create_agent(model, tools=tools or [], middleware=middleware)
    return agent.invoke({"messages": [{"role": "user", "content": "go"}]})


def _tool_names(model: ScriptedModel) -> list[str]:
    return model.requests[0].tool_names


# -- FilesystemMiddleware ------------------------------------------------------------------


def test_filesystem_tools_selects_the_offered_tools() -> None:
    model = ScriptedModel(replies=[ai("done")])
    _run(model, [FilesystemMiddleware(backend=StateBackend(), tools=["ls", "read_file"])])
    assert sorted(_tool_names(model)) == ["ls", "read_file"]


@pytest.mark.parametrize("tools", [None, "all"])
def test_filesystem_tools_all_offers_every_file_tool(tools: Any) -> None:
    names = [t.name for t in FilesystemMiddleware(tools=tools).tools]
    assert names == ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"]


def test_filesystem_tools_bad_lists_raise_naming_the_fix() -> None:
    with pytest.raises(ValueError, match="unknown tools \\['lss'\\]"):
        FilesystemMiddleware(tools=["lss", "read_file"])
    with pytest.raises(ValueError, match="read_file must be included in tools"):
        FilesystemMiddleware(tools=["ls"])


def test_custom_tool_descriptions_reach_the_model() -> None:
    model = ScriptedModel(replies=[ai("done")])
    _run(model, [FilesystemMiddleware(custom_tool_descriptions={"ls": "LIST IT"})])
    described = {t["function"]["name"]: t["function"]["description"]
                 for t in model.requests[0].tools}
    assert described["ls"] == "LIST IT"
    assert FilesystemMiddleware(tool_descriptions={"ls": "X"}).tool_descriptions == {"ls": "X"}
    with pytest.raises(ValueError, match="not both"):
        FilesystemMiddleware(tool_descriptions={"ls": "a"}, custom_tool_descriptions={"ls": "b"})


@tool
def big_report() -> str:
    """Return a long report."""
    return "line of the report\n" * 400  # about 7,600 characters, ~1,900 tokens


def test_tool_token_limit_before_evict_saves_a_large_result_to_a_file() -> None:
    model = ScriptedModel(
        replies=[ai("", tool_call("big_report", {}, id="call_big")), ai("done")]
    )
    result = _run(
        model, [FilesystemMiddleware(tool_token_limit_before_evict=500)], tools=[big_report]
    )
    answer = next(m for m in result["messages"] if m.type == "tool")
    assert "`/large_tool_results/call_big`" in answer.content
    assert len(answer.content) < 2000
    assert result["files"]["/large_tool_results/call_big"]["content"].count("line of") == 400


def test_tool_token_limit_none_keeps_results_whole() -> None:
    model = ScriptedModel(
        replies=[ai("", tool_call("big_report", {}, id="call_big")), ai("done")]
    )
    result = _run(
        model, [FilesystemMiddleware(tool_token_limit_before_evict=None)], tools=[big_report]
    )
    answer = next(m for m in result["messages"] if m.type == "tool")
    assert answer.content.count("line of") == 400


def test_reference_only_filesystem_keywords_are_accepted() -> None:
    middleware = FilesystemMiddleware(
        backend=StateBackend(),
        system_prompt="FILES",
        human_message_token_limit_before_evict=50000,
        max_execute_timeout=3600,
        grep_max_count=10,
        offload_binary_content=False,
        permissions=[],
    )
    assert middleware.section.text == "FILES"
    assert middleware.grep_max_count == 10


# -- SubAgentMiddleware --------------------------------------------------------------------


class _SecretState(AgentState):
    secret: NotRequired[str]


def test_subagent_spec_is_compiled_and_runs_under_plain_create_agent() -> None:
    child = ScriptedModel(replies=[ai("child answer")])
    parent = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "look", "subagent_type": "r"}, id="t1")),
            ai("done"),
        ]
    )
    middleware = SubAgentMiddleware(
        backend=StateBackend(),
        subagents=[{"name": "r", "description": "researches", "system_prompt": "CHILD",
                    "model": child, "tools": []}],
        system_prompt="DELEGATE WELL",
        task_description="Run one: {available_agents}",
    )
    result = _run(parent, [middleware])
    answer = next(m for m in result["messages"] if m.type == "tool")
    assert answer.content == "child answer"
    assert child.requests[0].system_prompt == "CHILD"
    assert "DELEGATE WELL" in (parent.requests[0].system_prompt or "")
    assert "- r: researches" in (parent.requests[0].system_prompt or "")
    task = next(t for t in parent.requests[0].tools if t["function"]["name"] == "task")
    assert task["function"]["description"] == "Run one: - r: researches"


@pytest.mark.parametrize("missing", ["model", "tools"])
def test_subagent_spec_without_model_or_tools_raises(missing: str) -> None:
    spec: dict[str, Any] = {"name": "r", "description": "d", "system_prompt": "S",
                            "model": ScriptedModel(replies=[]), "tools": []}
    del spec[missing]
    with pytest.raises(ValueError, match=f"must specify '{missing}'"):
        SubAgentMiddleware(backend=StateBackend(), subagents=[spec])


def test_private_state_keys_are_neither_sent_nor_taken_back() -> None:
    seen: list[dict] = []

    def child(payload: dict) -> dict:
        seen.append(dict(payload))
        return {"messages": [AIMessage("ok")], "secret": "from child"}

    parent = ScriptedModel(
        replies=[
            ai("", tool_call("task", {"description": "x", "subagent_type": "c"}, id="t1")),
            ai("done"),
        ]
    )
    compiled = {"name": "c", "description": "d", "runnable": RunnableLambda(child)}
    agent = create_agent(
        parent,
        middleware=[SubAgentMiddleware(subagents=[compiled], private_state_keys={"secret"})],
        state_schema=_SecretState,
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}], "secret": "mine"})
    assert "secret" not in seen[0]
    assert result["secret"] == "mine"


# -- planning name, permission modes ------------------------------------------------------


def test_langchain_todo_list_middleware_replaces_the_builtin_planning() -> None:
    model = ScriptedModel(replies=[ai("done")])
    agent = create_deep_agent(model, middleware=[TodoListMiddleware()])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    request = model.requests[0]
    assert request.tool_names.count("write_todos") == 1
    assert PlanningMiddleware().name == "TodoListMiddleware"
    assert PLANNING_PROMPT not in (request.system_prompt or "")


def _interrupt_agent(model: ScriptedModel) -> Any:
    rule = FilesystemPermission(operations=["write"], paths=["/secret/**"], mode="interrupt")
    return create_agent(
        model,
        middleware=[FilesystemMiddleware(permissions=[rule])],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_interrupt_permission_asks_a_person(decision: str) -> None:
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/secret/a.txt", "content": "x"},
                             id="w1")),
            ai("done"),
        ]
    )
    agent = _interrupt_agent(model)
    config: Any = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    (pending,) = paused["__interrupt__"]
    (action,) = pending.value["action_requests"]
    # the reference's request shape: the file tool's name and its path argument
    assert action["name"] == "write_file" and action["args"]["file_path"] == "/secret/a.txt"
    assert "/secret/a.txt" not in paused.get("files", {})
    result = agent.invoke(Command(resume={"decisions": [{"type": decision}]}), config)
    answer = next(m for m in result["messages"] if m.type == "tool")
    if decision == "approve":
        assert result["files"]["/secret/a.txt"]["content"] == "x"
        assert answer.status != "error"
    else:
        assert "/secret/a.txt" not in result.get("files", {})
        assert "not approved by the user" in answer.content


def test_interrupt_permission_leaves_other_paths_alone() -> None:
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/open.txt", "content": "y"})),
            ai("done"),
        ]
    )
    result = _interrupt_agent(model).invoke(
        {"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "t"}}
    )
    assert "__interrupt__" not in result
    assert result["files"]["/open.txt"]["content"] == "y"


@pytest.mark.parametrize("path", ["/a/../secret/**", "/..", "/x/.."])
def test_permission_paths_with_dotdot_are_refused(path: str) -> None:
    with pytest.raises(ValueError, match="'\\.\\.' segment"):
        FilesystemPermission(operations=["read"], paths=[path])


# -- MemoryMiddleware, SkillsMiddleware ---------------------------------------------------

_MEMORY_FILES = {"/AGENTS.md": create_file_data("Always answer in French.")}


def _first_prompt(middleware: list[Any], files: dict[str, Any]) -> str:
    model = ScriptedModel(replies=[ai("done")])
    agent = create_agent(model, middleware=middleware)
    agent.invoke({"messages": [{"role": "user", "content": "go"}], "files": files})
    return model.requests[0].system_prompt or ""


def test_memory_system_prompt_template_gets_the_files() -> None:
    prompt = _first_prompt(
        [MemoryMiddleware(sources=["/AGENTS.md"], system_prompt="MEMO START\n{agent_memory}\nEND",
                          add_cache_control=True)],
        _MEMORY_FILES,
    )
    assert prompt.startswith("MEMO START\n<memory_file path=\"/AGENTS.md\">")
    assert "Always answer in French." in prompt and prompt.endswith("END")
    assert MEMORY_GUIDANCE.splitlines()[0] not in prompt


def test_memory_system_prompt_none_adds_no_section() -> None:
    prompt = _first_prompt([MemoryMiddleware(sources=["/AGENTS.md"], system_prompt=None)],
                           _MEMORY_FILES)
    assert "French" not in prompt


def test_memory_system_prompt_without_slot_raises() -> None:
    with pytest.raises(ValueError, match="agent_memory"):
        MemoryMiddleware(sources=["/AGENTS.md"], system_prompt="no slot")


_SKILL = """---
name: deploy
description: Deploys the service.
metadata:
  include_tools: [release]
---
Run the release tool.
"""


@tool
def release() -> str:
    """Release the service."""
    return "released"


def test_skills_labels_and_template() -> None:
    files = {"/team/deploy/SKILL.md": create_file_data(_SKILL)}
    prompt = _first_prompt(
        [SkillsMiddleware(sources=[("/team/", "Team")],
                          system_prompt="S:\n{skills_locations}\n{skills_load_warnings}\n"
                                        "{skills_list}")],
        files,
    )
    assert "- **Team Skills**: `/team/`" in prompt
    assert "**Team Skills**\n- deploy (`/team/deploy/SKILL.md`): Deploys the service." in prompt


def test_skills_tools_are_offered_after_the_skill_is_read() -> None:
    files = {"/skills/deploy/SKILL.md": create_file_data(_SKILL)}
    model = ScriptedModel(
        replies=[
            ai("", tool_call("read_file", {"file_path": "/skills/deploy/SKILL.md"})),
            ai("", tool_call("release", {})),
            ai("done"),
        ]
    )
    agent = create_agent(
        model,
        middleware=[FilesystemMiddleware(),
                    SkillsMiddleware(sources=["/skills/"], tools=[release])],
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}], "files": files})
    assert "release" not in model.requests[0].tool_names
    assert "release" in model.requests[1].tool_names
    answers = [m.content for m in result["messages"] if m.type == "tool"]
    assert answers[-1] == "released"


def test_skills_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="skills_list"):
        SkillsMiddleware(sources=["/s/"], system_prompt="nothing")
    with pytest.raises(TypeError, match="list of tools"):
        SkillsMiddleware(sources=["/s/"], tools=release)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pair"):
        SkillsMiddleware(sources=[("/s/", "a", "b")])  # type: ignore[list-item]


# -- summarization ------------------------------------------------------------------------


def _two_tool_turns() -> ScriptedModel:
    return ScriptedModel(
        replies=[
            ai("", tool_call("big_report", {}, id="c1")),
            ai("", tool_call("big_report", {}, id="c2")),
            ai("done"),
        ]
    )


def _summarized_run(model: ScriptedModel, summarization: Any) -> dict:
    return _run(model, [FilesystemMiddleware(tool_token_limit_before_evict=None), summarization],
                tools=[big_report])


def test_summarization_message_trigger_keep_and_prompt() -> None:
    summarizer = ScriptedModel(replies=[ai("SUMMARY TEXT"), ai("SUMMARY TEXT")])
    model = _two_tool_turns()
    middleware = SummarizationMiddleware(
        summarizer,
        StateBackend(),
        trigger=("messages", 3),
        keep=("messages", 1),
        summary_prompt="CONDENSE THIS:\n{messages}",
    )
    result = _summarized_run(model, middleware)
    assert summarizer.requests
    prompt = summarizer.requests[0].messages[-1].content
    assert prompt.startswith("CONDENSE THIS:\n") and "go" in prompt
    second = model.requests[1]
    assert "SUMMARY TEXT" in str(second.messages[1].content)
    assert result["messages"][-1].content == "done"


def test_summarization_token_counter_and_token_trigger() -> None:
    summarizer = ScriptedModel(replies=[ai("SUMMARY TEXT"), ai("SUMMARY TEXT")])
    counted: list[int] = []

    def counter(messages: Any) -> int:
        counted.append(len(messages))
        return 1000 * len(messages)

    middleware = SummarizationMiddleware(
        summarizer, StateBackend(), trigger=("tokens", 3500), keep=("messages", 1),
        token_counter=counter,
    )
    _summarized_run(_two_tool_turns(), middleware)
    assert counted  # the given counter measured the context
    assert summarizer.requests  # 1 system + 3 messages reached 3,500 "tokens"


def test_summarization_trim_tokens_to_summarize_cuts_the_transcript() -> None:
    summarizer = ScriptedModel(replies=[ai("SUMMARY TEXT"), ai("SUMMARY TEXT")])
    middleware = SummarizationMiddleware(
        summarizer, StateBackend(), trigger=("messages", 7), keep=("messages", 1),
        trim_tokens_to_summarize=100,
    )
    _summarized_run(_compacting_model(), middleware)
    prompt = summarizer.requests[0].messages[-1].content
    assert "middle part cut" in prompt
    assert prompt.count("line of the report") < 50


def test_summarization_bad_arguments_raise_and_doubtful_ones_warn() -> None:
    with pytest.raises(ValueError, match="pair such as"):
        SummarizationMiddleware(trigger=("turns", 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chat model instance"):
        create_summarization_middleware("openai:gpt-4o", StateBackend())  # type: ignore[arg-type]
    # accepted as the reference accepts them, with a warning naming what is odd
    with pytest.warns(UserWarning, match="no {messages} slot"):
        SummarizationMiddleware(summary_prompt="no slot")
    with pytest.warns(UserWarning, match="unknown keys"):
        SummarizationMiddleware(truncate_args_settings={"max_len": 3})  # type: ignore[typeddict-unknown-key]
    with pytest.warns(UserWarning, match="trigger_fration"):
        SummarizationMiddleware(trigger_fration=0.5)


def test_create_summarization_middleware_uses_what_it_is_given() -> None:
    summarizer = ScriptedModel(replies=[ai("S")])
    backend = StateBackend()
    middleware = create_summarization_middleware(summarizer, backend, summary_prompt="P {messages}")
    assert middleware.model is summarizer and middleware.backend is backend
    assert middleware.summary_prompt == "P {messages}"


def _compacting_model(*summaries: str) -> ScriptedModel:
    """Four tool turns (more than the six messages kept by default), then compaction, with
    `summaries` answered before the final reply (when the agent's model summarizes)."""
    return ScriptedModel(
        replies=[
            *(ai("", tool_call("big_report", {}, id=f"c{i}")) for i in range(4)),
            ai("", tool_call("compact_conversation", {}, id="compact")),
            *(ai(text) for text in summaries),
            ai("done"),
        ]
    )


def _compact_answer(result: dict) -> Any:
    return next(m for m in result["messages"] if m.name == "compact_conversation")


def test_compaction_tool_middleware_summarizes_with_its_own_model() -> None:
    # a window of 10,000 tokens: the four reports pass half of its 85% trigger
    summarizer = ScriptedModel(replies=[ai("TOOL SUMMARY")], profile={"max_input_tokens": 10_000})
    model = _compacting_model()
    tool_middleware = create_summarization_tool_middleware(
        summarizer, StateBackend(), system_prompt="COMPACT NUDGE"
    )
    result = _run(model, [FilesystemMiddleware(), tool_middleware], tools=[big_report])
    assert "COMPACT NUDGE" in (model.requests[0].system_prompt or "")
    assert len(summarizer.requests) == 1
    assert "TOOL SUMMARY" in str(model.requests[5].messages[1].content)
    answer = _compact_answer(result)
    assert answer.content.startswith("Conversation compacted. Summarized ")


def test_compaction_tool_in_a_deep_agent_summarizes_once_with_its_own_model() -> None:
    own = ScriptedModel(replies=[ai("TOOL SUMMARY")], profile={"max_input_tokens": 10_000})
    model = _compacting_model()
    agent = create_deep_agent(
        model,
        tools=[big_report],
        middleware=[create_summarization_tool_middleware(own, StateBackend())],
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    assert len(own.requests) == 1  # in the tool; the agent's summarizer shows it, once
    assert "TOOL SUMMARY" in str(model.requests[5].messages[1].content)
    assert result["messages"][-1].content == "done"


def test_compaction_tool_refuses_a_short_conversation() -> None:
    own = ScriptedModel(replies=[ai("UNUSED")])  # no window known: the trigger is 170,000
    model = _compacting_model()
    result = _run(model, [create_summarization_tool_middleware(own, StateBackend())],
                  tools=[big_report])  # fmt: skip
    assert own.requests == []
    answer = _compact_answer(result)
    assert answer.content.startswith("Nothing to compact yet")
