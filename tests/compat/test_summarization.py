"""Summarization and the `compact_conversation` tool, used the way a reference user does.

The agent's state keeps every message; a summarization is recorded in the private
`_summarization_event` key and the model is shown the summary followed by the recent
messages. The replaced messages go to `/conversation_history/<session>.md` (inline media
next to it, under `media/`). Old `write_file` / `edit_file` arguments are cut to 20
characters and `...(argument truncated)` in what the model is shown. The tool compacts in
its own call once the conversation is at half of the summarization trigger.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend, StateBackend
from fathom.middleware.summarization import (
    SummarizationMiddleware,
    SummarizationToolMiddleware,
    compute_summarization_defaults,
    create_summarization_middleware,
    create_summarization_tool_middleware,
)
from fathom.testing import ScriptedModel, ai, tool_call

GO = {"messages": [{"role": "user", "content": "look around"}]}
SUMMARY = "SUMMARY-OF-EARLIER-WORK"
HISTORY_FILE = re.compile(r"/conversation_history/session_[0-9a-f]{32}\.md")


@tool
def look(step: int) -> str:
    """Look around once."""
    return f"step {step}: the lamp is on"


def _looking_model(steps: int, *, then: list[Any] | None = None) -> ScriptedModel:
    replies: list[Any] = [
        ai("", tool_call("look", {"step": i}, id=f"look{i}")) for i in range(steps)
    ]
    return ScriptedModel(replies=[*replies, *(then or []), ai("done")])


def _summarizer(**kwargs: Any) -> ScriptedModel:
    return ScriptedModel(policy=lambda request: SUMMARY, **kwargs)


def _shown(request: Any) -> list[Any]:
    return [m for m in request.messages if m.type != "system"]


def _archive(result: dict[str, Any]) -> tuple[str, str]:
    (path,) = [p for p in result["files"] if HISTORY_FILE.fullmatch(p)]
    data = result["files"][path]
    content = data["content"]
    return path, content if isinstance(content, str) else "\n".join(content)


# -- constructor keywords -------------------------------------------------------------------


def test_the_defaults_are_shares_of_a_known_window_and_counts_otherwise() -> None:
    windowed = compute_summarization_defaults(ScriptedModel(profile={"max_input_tokens": 3_000}))
    assert windowed == {
        "trigger": ("fraction", 0.85),
        "keep": ("fraction", 0.10),
        "truncate_args_settings": {"trigger": ("fraction", 0.85), "keep": ("fraction", 0.10)},
    }
    assert compute_summarization_defaults(ScriptedModel()) == {
        "trigger": ("tokens", 170_000),
        "keep": ("messages", 6),
        "truncate_args_settings": {"trigger": ("messages", 20), "keep": ("messages", 20)},
    }


def test_max_tokens_before_summary_is_deprecated_and_sets_the_trigger() -> None:
    summarizer = _summarizer()
    with pytest.warns(DeprecationWarning, match="max_tokens_before_summary is deprecated"):
        middleware = SummarizationMiddleware(
            model=summarizer, backend=StateBackend(), max_tokens_before_summary=1,
            keep=("messages", 1),
        )  # fmt: skip
    model = _looking_model(2)
    create_deep_agent(model=model, tools=[look], middleware=[middleware]).invoke(GO)
    assert summarizer.requests  # one token is reached at once
    first = _shown(model.requests[1])[0]
    assert first.additional_kwargs.get("lc_source") == "summarization"


def test_messages_to_keep_is_deprecated_and_sets_what_is_kept() -> None:
    summarizer = _summarizer()
    with pytest.warns(DeprecationWarning, match="messages_to_keep is deprecated"):
        middleware = SummarizationMiddleware(
            model=summarizer, backend=StateBackend(), trigger=("messages", 5), messages_to_keep=2
        )
    model = _looking_model(3)
    create_deep_agent(model=model, tools=[look], middleware=[middleware]).invoke(GO)
    # five messages reached at the third call: the summary, then the last two
    shown = _shown(model.requests[2])
    assert [m.type for m in shown] == ["human", "ai", "tool"]
    assert SUMMARY in shown[0].content


def test_history_path_prefix_is_refused() -> None:
    with pytest.raises(TypeError, match="history_path_prefix"):
        SummarizationMiddleware(
            model=_summarizer(), backend=StateBackend(), history_path_prefix="/history"
        )


def test_constructor_keywords_are_the_references() -> None:
    params = inspect.signature(SummarizationMiddleware).parameters
    for name in ("model", "backend", "trigger", "keep", "token_counter", "summary_prompt",
                 "trim_tokens_to_summarize", "truncate_args_settings", "summarizer"):  # fmt: skip
        assert name in params
    assert params["summary_prompt"].kind is inspect.Parameter.KEYWORD_ONLY
    tool_params = inspect.signature(create_summarization_tool_middleware).parameters
    assert tool_params["system_prompt"].kind is inspect.Parameter.KEYWORD_ONLY
    assert tool_params["system_prompt"].default is None
    factory = inspect.signature(create_summarization_middleware).parameters
    for name in ("summary_prompt", "trim_tokens_to_summarize", "token_counter", "summarizer"):
        assert factory[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_factory_takes_only_a_chat_model_instance() -> None:
    with pytest.raises(TypeError, match="BaseChatModel"):
        create_summarization_middleware("openai:gpt-5", StateBackend())  # type: ignore[arg-type]


# -- what a summarization leaves ------------------------------------------------------------


def test_the_state_keeps_every_message_and_records_the_summary() -> None:
    summarizer = _summarizer()
    middleware = SummarizationMiddleware(
        model=summarizer, backend=StateBackend(), trigger=("messages", 6), keep=("messages", 2)
    )
    model = _looking_model(4)
    agent = create_deep_agent(
        model=model, tools=[look], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    result = agent.invoke(GO, config)
    assert len(result["messages"]) == 1 + 2 * 4 + 1  # nothing removed
    assert result["messages"][-1].content == "done"
    values = agent.get_state(config).values
    event = values["_summarization_event"]
    assert isinstance(event["summary_message"], HumanMessage)
    assert event["summary_message"].additional_kwargs["lc_source"] == "summarization"
    assert SUMMARY in event["summary_message"].content
    path, archive = _archive(result)
    assert event["file_path"] == path
    assert path == f"/conversation_history/{values['_summarization_session_id']}.md"
    assert "## Summarized at" in archive and '<message type="human">' in archive
    # the model is shown the summary, then the messages from the cutoff on
    last = _shown(model.requests[-1])
    assert last[0].content == event["summary_message"].content
    kept = result["messages"][event["cutoff_index"] : -1]
    assert [m.id for m in last[1:]] == [m.id for m in kept]


def test_the_summary_message_names_the_saved_history() -> None:
    middleware = SummarizationMiddleware(
        model=_summarizer(), backend=StateBackend(), trigger=("messages", 4), keep=("messages", 2)
    )
    model = _looking_model(2)
    result = create_deep_agent(model=model, tools=[look], middleware=[middleware]).invoke(GO)
    path, _ = _archive(result)
    summary = _shown(model.requests[-1])[0].content
    assert f"full conversation history has been saved to {path}" in summary
    assert f"<summary>\n{SUMMARY}\n</summary>" in summary


def test_wrap_model_call_returns_the_event_as_a_state_update(tmp_path: Path) -> None:
    middleware = SummarizationMiddleware(
        model=_summarizer(),
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        trigger=("messages", 4),
        keep=("messages", 2),
    )
    messages = [
        HumanMessage(content="first", id="h1"),
        AIMessage(content="one", id="a1"),
        HumanMessage(content="second", id="h2"),
        AIMessage(content="two", id="a2"),
        HumanMessage(content="third", id="h3"),
    ]
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> AIMessage:
        sent.append(request)
        return AIMessage(content="answer")

    request = ModelRequest(model=_summarizer(), messages=messages, state={"messages": messages})
    result = middleware.wrap_model_call(request, handler)  # type: ignore[arg-type]
    assert isinstance(result, ExtendedModelResponse)
    update = result.command.update
    assert isinstance(update, dict)
    event = update["_summarization_event"]
    assert event["cutoff_index"] == 3
    assert event["created_at_index"] == 5
    assert [m.content for m in sent[0].messages[1:]] == ["two", "third"]
    session = update["_summarization_session_id"]
    archive = (tmp_path / "conversation_history" / f"{session}.md").read_text()
    assert "first" in archive and "third" not in archive

    # the next call applies the event; a second summary appends to the same file
    later = [*messages, AIMessage(content="three", id="a3"), HumanMessage(content="fourth")]
    state = {"messages": later, **update}
    again = middleware.wrap_model_call(
        ModelRequest(model=_summarizer(), messages=later, state=state), handler  # type: ignore[arg-type]
    )
    assert isinstance(again, ExtendedModelResponse)
    assert isinstance(again.command.update, dict)
    assert again.command.update["_summarization_event"]["cutoff_index"] == 5
    assert again.command.update["_summarization_session_id"] == session
    archive = (tmp_path / "conversation_history" / f"{session}.md").read_text()
    assert archive.count("## Summarized at") == 2
    assert SUMMARY not in archive  # the earlier summary is not archived again


def test_below_the_trigger_the_request_is_passed_on_unchanged() -> None:
    middleware = SummarizationMiddleware(
        model=_summarizer(), backend=StateBackend(), trigger=("messages", 100)
    )
    messages = [HumanMessage(content="hi", id="h1")]
    request = ModelRequest(model=_summarizer(), messages=messages, state={"messages": messages})
    result = middleware.wrap_model_call(request, lambda r: AIMessage(content="ok"))  # type: ignore[arg-type]
    assert isinstance(result, AIMessage)


# -- truncation of old tool inputs ----------------------------------------------------------


def _writing_model(contents: list[str]) -> ScriptedModel:
    writes = [
        ai("", tool_call("write_file", {"file_path": f"/doc{i}.md", "content": c}, id=f"w{i}"))
        for i, c in enumerate(contents)
    ]
    return ScriptedModel(replies=[*writes, ai("done")])


@pytest.mark.parametrize(
    ("settings", "marker"),
    [
        ({}, "...(argument truncated)"),
        ({"truncation_text": " [cut]"}, " [cut]"),
    ],
)
def test_old_write_arguments_are_cut_in_what_the_model_is_shown(
    settings: dict[str, Any], marker: str
) -> None:
    contents = [f"document {i} " + "x" * 300 for i in range(3)]
    middleware = SummarizationMiddleware(
        model=_summarizer(),
        backend=StateBackend(),
        trigger=("messages", 100),
        truncate_args_settings={
            "trigger": ("messages", 4),
            "keep": ("messages", 2),
            "max_length": 100,
            **settings,
        },
    )
    model = _writing_model(contents)
    result = create_deep_agent(model=model, middleware=[middleware]).invoke(GO)
    shown = [c["args"]["content"] for m in _shown(model.requests[-1]) if isinstance(m, AIMessage)
             for c in m.tool_calls]  # fmt: skip
    assert shown[0] == contents[0][:20] + marker
    assert shown[-1] == contents[-1]  # inside the kept messages
    kept = [c["args"]["content"] for m in result["messages"] if isinstance(m, AIMessage)
            for c in m.tool_calls]  # fmt: skip
    assert kept == contents  # the state keeps the arguments whole
    assert all(f"/doc{i}.md" in result["files"] for i in range(3))


def test_without_a_trigger_no_argument_is_cut() -> None:
    contents = [f"document {i} " + "x" * 300 for i in range(3)]
    middleware = SummarizationMiddleware(
        model=_summarizer(), backend=StateBackend(), trigger=("messages", 100),
        truncate_args_settings={"keep": ("messages", 1), "max_length": 10},
    )  # fmt: skip
    model = _writing_model(contents)
    create_deep_agent(model=model, middleware=[middleware]).invoke(GO)
    shown = [c["args"]["content"] for m in _shown(model.requests[-1]) if isinstance(m, AIMessage)
             for c in m.tool_calls]  # fmt: skip
    assert shown == contents


# -- media in the history -------------------------------------------------------------------

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def test_inline_images_are_saved_and_referenced_in_the_history() -> None:
    middleware = SummarizationMiddleware(
        model=_summarizer(), backend=StateBackend(), trigger=("messages", 4), keep=("messages", 2)
    )
    picture = {"type": "image", "base64": base64.b64encode(PNG).decode(), "mime_type": "image/png"}
    start = {"messages": [HumanMessage(content=[{"type": "text", "text": "see this"}, picture])]}
    model = _looking_model(2)
    result = create_deep_agent(model=model, tools=[look], middleware=[middleware]).invoke(start)
    media = f"/conversation_history/media/{hashlib.sha256(PNG).hexdigest()[:16]}.png"
    assert media in result["files"]
    _, archive = _archive(result)
    assert f'<image url="{media}" />' in archive
    assert picture["base64"] not in archive


# -- the compact_conversation tool -------------------------------------------------------------


def _compacting_agent(trigger: Any, steps: int, **tool_kwargs: Any) -> tuple[Any, ScriptedModel]:
    summarizer = _summarizer()
    engine = SummarizationMiddleware(
        model=summarizer, backend=StateBackend(), trigger=trigger, keep=("messages", 2)
    )
    model = _looking_model(steps, then=[ai("", tool_call("compact_conversation", {}, id="c"))])
    agent = create_deep_agent(
        model=model, tools=[look], middleware=[SummarizationToolMiddleware(engine, **tool_kwargs)]
    )
    return agent, model


def _compact_answer(result: dict[str, Any]) -> ToolMessage:
    return next(m for m in result["messages"] if m.name == "compact_conversation")


def test_the_tool_compacts_once_past_half_the_trigger() -> None:
    agent, model = _compacting_agent(("messages", 12), steps=3)  # 8 messages >= 6
    result = agent.invoke(GO)
    answer = _compact_answer(result)
    assert answer.content.startswith("Conversation compacted.")
    assert "Summarized 5 messages" in answer.content  # the last call and result are kept
    after = _shown(model.requests[-1])
    assert after[0].additional_kwargs.get("lc_source") == "summarization"
    assert SUMMARY in after[0].content
    assert len(result["messages"]) == 1 + 2 * 3 + 2 + 1  # the state keeps every message
    _archive(result)


def test_the_tool_refuses_a_conversation_under_half_the_trigger() -> None:
    agent, model = _compacting_agent(("messages", 100), steps=2)
    result = agent.invoke(GO)
    assert _compact_answer(result).content.startswith("Nothing to compact yet")
    assert not any(m.additional_kwargs.get("lc_source") for m in _shown(model.requests[-1]))


def test_the_tool_nudge_is_added_only_when_given() -> None:
    agent, model = _compacting_agent(("messages", 100), steps=0, system_prompt="USE-COMPACT")
    agent.invoke(GO)
    assert "USE-COMPACT" in (model.requests[0].system_prompt or "")
    assert "compact_conversation" in model.requests[0].tool_names
    with pytest.raises(TypeError, match="must be str or None"):
        SummarizationToolMiddleware(
            SummarizationMiddleware(model=_summarizer(), backend=StateBackend()),
            system_prompt=0,  # type: ignore[arg-type]
        )


def test_the_factory_builds_the_tool_with_its_model() -> None:
    middleware = create_summarization_tool_middleware(_summarizer(), StateBackend())
    assert isinstance(middleware, SummarizationToolMiddleware)
    assert [t.name for t in middleware.tools] == ["compact_conversation"]
    assert middleware.tools[0].description
    custom = create_summarization_tool_middleware(
        _summarizer(), StateBackend(), system_prompt="custom nudge"
    )
    assert custom.system_prompt == "custom nudge"


@pytest.mark.fathom_only
def test_a_prompt_without_a_slot_and_unknown_keywords_warn() -> None:
    with pytest.warns(UserWarning, match="slot"):
        SummarizationMiddleware(summary_prompt="Summarize.")
    with pytest.warns(UserWarning, match="trigger_fraktion"):
        SummarizationMiddleware(trigger_fraktion=0.5)


@pytest.mark.fathom_only
def test_a_tool_without_a_model_compacts_at_the_next_model_step() -> None:
    def policy(request: Any) -> Any:
        if (request.last_human_text or "").startswith("You are compressing"):
            return ai(SUMMARY)  # the agent's own model writes the summary
        looks = sum(1 for m in request.messages if m.type == "tool" and m.name == "look")
        if looks < 3:
            return ai("", tool_call("look", {"step": looks}))
        if not any(m.type == "tool" and m.name == "compact_conversation" for m in request.messages):
            return ai("", tool_call("compact_conversation", {}))
        return ai("done")

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model=model, tools=[look], middleware=[create_summarization_tool_middleware()]
    )
    result = agent.invoke(GO)
    assert _compact_answer(result).content.startswith("The conversation will be compacted")
    assert SUMMARY in _shown(model.requests[-1])[0].content


class _CountingSummarizer(SummarizationMiddleware):
    """Overrides the summary hooks, sync and async, as a reference user may."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[str] = []

    def _create_summary(self, messages_to_summarize: list[Any]) -> str:
        self.calls.append("sync")
        return "OVERRIDDEN-SUMMARY"

    async def _acreate_summary(self, messages_to_summarize: list[Any]) -> str:
        self.calls.append("async")
        return "OVERRIDDEN-SUMMARY"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_tool_summarizes_with_the_overridden_summary_hook(mode: str) -> None:
    engine = _CountingSummarizer(
        model=_summarizer(), backend=StateBackend(), trigger=("messages", 12),
        keep=("messages", 2),
    )  # fmt: skip
    model = _looking_model(3, then=[ai("", tool_call("compact_conversation", {}, id="c"))])
    agent = create_deep_agent(
        model=model, tools=[look], middleware=[SummarizationToolMiddleware(engine)]
    )
    result = agent.invoke(GO) if mode == "sync" else await agent.ainvoke(GO)
    assert _compact_answer(result).content.startswith("Conversation compacted.")
    assert engine.calls == [mode]
    assert "OVERRIDDEN-SUMMARY" in _shown(model.requests[-1])[0].content
    _archive(result)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failing_summary_is_the_tools_answer_and_compacts_nothing(mode: str) -> None:
    def broken(request: Any) -> Any:
        raise RuntimeError("summarizer is down")

    engine = SummarizationMiddleware(
        model=ScriptedModel(policy=broken), backend=StateBackend(), trigger=("messages", 12),
        keep=("messages", 2),
    )  # fmt: skip
    model = _looking_model(3, then=[ai("", tool_call("compact_conversation", {}, id="c"))])
    agent = create_deep_agent(
        model=model, tools=[look], middleware=[SummarizationToolMiddleware(engine)]
    )
    result = agent.invoke(GO) if mode == "sync" else await agent.ainvoke(GO)
    answer = _compact_answer(result)
    assert "Compaction failed" in answer.content and "summarizer is down" in answer.content
    assert not any(m.additional_kwargs.get("lc_source") for m in _shown(model.requests[-1]))
    assert result["messages"][-1].content == "done"
