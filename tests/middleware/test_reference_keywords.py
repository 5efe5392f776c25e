"""The reference's constructor keywords that change behaviour: each does what the reference's
does (`max_execute_timeout`, `human_message_token_limit_before_evict`, a dict summarization
`trigger`, `CompositeBackend(artifacts_root=)`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom.backends.composite import CompositeBackend
from fathom.backends.shell.local import LocalShellBackend
from fathom.backends.state import StateBackend
from fathom.middleware import FilesystemMiddleware
from fathom.middleware.context.eviction import EVICTED_TO
from fathom.middleware.context.summarization import SummarizationMiddleware
from fathom.middleware.execute import ExecuteMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

GO = {"messages": [{"role": "user", "content": "go"}]}


def _invoke(agent: Any, payload: Any, config: Any = None, mode: str = "invoke") -> Any:
    if mode == "ainvoke":
        return asyncio.run(agent.ainvoke(payload, config))
    return agent.invoke(payload, config)


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


# -- FilesystemMiddleware(max_execute_timeout=) ---------------------------------------------


def test_an_execute_timeout_above_max_execute_timeout_is_refused_and_not_run(
    mode: str, tmp_path: Path
) -> None:
    backend = LocalShellBackend(root_dir=tmp_path)
    model = ScriptedModel(
        replies=[
            ai(
                "",
                tool_call("execute", {"command": "touch slow.txt", "timeout": 120}, id="slow"),
                tool_call("execute", {"command": "touch fast.txt", "timeout": 60}, id="fast"),
            ),
            ai("done"),
        ]
    )
    middleware = [
        FilesystemMiddleware(backend=backend, max_execute_timeout=60),
        ExecuteMiddleware(backend=backend),
    ]
    result = _invoke(create_agent(model, middleware=middleware), GO, mode=mode)
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers["slow"].status == "error"
    assert "timeout 120s is above the limit of 60s" in answers["slow"].text
    assert not (tmp_path / "slow.txt").exists()  # refused before the command ran
    assert answers["fast"].status != "error" and (tmp_path / "fast.txt").exists()


@pytest.mark.parametrize("bad", [0, -5, True, "60", float("inf")])
def test_max_execute_timeout_must_be_a_positive_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_execute_timeout must be positive"):
        FilesystemMiddleware(max_execute_timeout=bad)


# -- FilesystemMiddleware(human_message_token_limit_before_evict=) ------------------------


BIG = "\n".join(f"line {i} of the pasted document" for i in range(200))  # ~6,000 chars


def test_a_large_user_message_is_saved_and_the_model_sees_a_preview(mode: str) -> None:
    model = ScriptedModel(replies=[ai("first"), ai("second")])
    fs = FilesystemMiddleware(backend=StateBackend(), human_message_token_limit_before_evict=500)
    agent = create_agent(model, middleware=[fs], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    _invoke(agent, {"messages": [HumanMessage(BIG)]}, config, mode)
    _invoke(agent, {"messages": [HumanMessage("a short follow-up")]}, config, mode)

    state = agent.get_state(config).values
    kept = state["messages"][0]
    path = kept.additional_kwargs[EVICTED_TO]
    assert path.startswith("/conversation_history/") and path.endswith(".md")
    assert kept.content == BIG  # the state keeps the whole message
    assert "".join(state["files"][path]["content"]) in (BIG, BIG.splitlines())
    for request in model.requests:  # both calls show the preview, not the document
        shown = request.messages[1]
        assert isinstance(shown, HumanMessage)
        assert f"saved to `{path}`" in shown.text and "line 3 of" in shown.text
        assert "line 150 of" not in shown.text
    assert model.requests[1].messages[-1].text == "a short follow-up"  # small: whole
    assert len(state["messages"]) == 4  # tagged in place, not appended


def test_a_user_message_under_the_limit_is_left_whole() -> None:
    model = ScriptedModel(replies=[ai("ok")])
    fs = FilesystemMiddleware(backend=StateBackend(), human_message_token_limit_before_evict=5_000)
    result = create_agent(model, middleware=[fs]).invoke({"messages": [HumanMessage(BIG)]})
    assert model.requests[0].messages[1].text == BIG
    assert EVICTED_TO not in result["messages"][0].additional_kwargs


def test_user_message_eviction_keeps_images_and_can_be_turned_off() -> None:
    image = {"type": "image", "url": "https://example.com/a.png"}
    message = HumanMessage(content=[{"type": "text", "text": BIG}, image])
    model = ScriptedModel(replies=[ai("ok")])
    fs = FilesystemMiddleware(backend=StateBackend(), human_message_token_limit_before_evict=500)
    create_agent(model, middleware=[fs]).invoke({"messages": [message]})
    shown = model.requests[0].messages[1].content
    assert isinstance(shown, list) and shown[-1] == image
    assert "saved to `/conversation_history/" in shown[0]["text"]

    model = ScriptedModel(replies=[ai("ok")])
    fs = FilesystemMiddleware(backend=StateBackend(), human_message_token_limit_before_evict=None)
    create_agent(model, middleware=[fs]).invoke({"messages": [HumanMessage(BIG)]})
    assert model.requests[0].messages[1].text == BIG


# -- SummarizationMiddleware(trigger={...}) ---------------------------------------------


@tool
def look() -> str:
    """Look around."""
    return "nothing new"


def _three_steps() -> ScriptedModel:
    return ScriptedModel(
        replies=[
            ai("", tool_call("look", {}, id="c1")),
            ai("", tool_call("look", {}, id="c2")),
            ai("done"),
        ]
    )


def _summary_calls(trigger: Any) -> tuple[ScriptedModel, ScriptedModel]:
    """Run three model steps (1, 3 and 5 messages; 1,000 "tokens" a message) under
    `trigger`; the agent's model and the summarizer."""
    summarizer = ScriptedModel(replies=[ai("SUMMARY"), ai("SUMMARY")])
    middleware = SummarizationMiddleware(
        summarizer,
        StateBackend(),
        trigger=trigger,
        keep=("messages", 1),
        token_counter=lambda messages: 1000 * len(messages),
    )
    model = _three_steps()
    create_agent(model, tools=[look], middleware=[middleware]).invoke(GO)
    return model, summarizer


def _summarized_at(model: ScriptedModel) -> list[int]:
    return [
        r.index for r in model.requests if any("SUMMARY" in m.text for m in r.messages)
    ]


def test_a_dict_trigger_summarizes_only_when_all_its_conditions_hold() -> None:
    # tokens alone are reached at the second step (3,000); messages >= 5 only at the third
    model, summarizer = _summary_calls({"tokens": 2500, "messages": 5})
    assert len(summarizer.requests) == 1
    assert _summarized_at(model) == [2]
    model, _ = _summary_calls(("tokens", 2500))  # the single condition: earlier
    assert _summarized_at(model)[0] == 1


def test_a_list_of_dict_triggers_summarizes_when_any_clause_holds() -> None:
    model, _ = _summary_calls([{"tokens": 100_000, "messages": 1}, {"messages": 5, "tokens": 10}])
    assert _summarized_at(model) == [2]
    model, summarizer = _summary_calls([{"tokens": 100_000, "messages": 1}])
    assert not summarizer.requests


@pytest.mark.parametrize(
    ("trigger", "match"),
    [
        ({}, "at least one of"),
        ({"turns": 3}, "pair such as"),
        ({"tokens": 0, "messages": 2}, "pair such as"),
        ({"fraction": 1.5, "messages": 2}, "fraction lies in"),
        ("tokens", "a dict such as"),
    ],
)
def test_bad_dict_triggers_raise(trigger: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SummarizationMiddleware(trigger=trigger)


# -- CompositeBackend(artifacts_root=) ------------------------------------------------------


@tool
def big_report() -> str:
    """A long report."""
    return "\n".join(f"line {i} of the report" for i in range(400))


def test_artifacts_root_holds_offloaded_results_archives_and_saved_messages() -> None:
    backend = CompositeBackend(StateBackend(), {}, artifacts_root="/artifacts/")
    model = ScriptedModel(
        replies=[
            ai("", tool_call("big_report", {}, id="c1")),
            ai("", tool_call("big_report", {}, id="c2")),
            ai("done"),
        ]
    )
    summarizer = ScriptedModel(replies=[ai("SUMMARY")])
    middleware = [
        FilesystemMiddleware(
            backend=backend,
            tool_token_limit_before_evict=100,
            human_message_token_limit_before_evict=500,
        ),
        SummarizationMiddleware(summarizer, backend, trigger=("messages", 5), keep=("messages", 1)),
    ]
    agent = create_agent(model, tools=[big_report], middleware=middleware)
    result = agent.invoke({"messages": [HumanMessage(BIG)]})
    files = sorted(result["files"])
    assert "/artifacts/large_tool_results/c1" in files
    assert "/artifacts/large_tool_results/c2" in files
    assert any(f.startswith("/artifacts/conversation_history/") for f in files)
    assert all(f.startswith("/artifacts/") for f in files), files
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "`/artifacts/large_tool_results/c" in answer.text


# -- FilesystemMiddleware(offload_binary_content=True) -------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def _payloads(messages: Any) -> list[str]:
    return [
        block["base64"]
        for m in messages
        if isinstance(m.content, list)
        for block in m.content
        if isinstance(block, dict) and "base64" in block
    ]


def test_binary_content_is_kept_out_of_the_history_and_read_back_for_the_model(
    mode: str, tmp_path: Path
) -> None:
    import base64
    import hashlib

    from fathom.backends.filesystem import FilesystemBackend
    from fathom.middleware.context.blob_offload import BLOB_REF

    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pic.png").write_bytes(PNG)
    disk = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    backend = CompositeBackend(disk, {}, artifacts_root="/artifacts/")
    inline = base64.b64encode(b"inline picture bytes").decode()
    question = HumanMessage(
        content=[{"type": "text", "text": "look"}, {"type": "image", "base64": inline,
                                                     "mime_type": "image/png"}]
    )
    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/work/pic.png"}, id="r1")),
                 ai("done")]
    )
    fs = FilesystemMiddleware(backend=backend, offload_binary_content=True)
    agent = create_agent(model, middleware=[fs], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    _invoke(agent, {"messages": [question]}, config, mode)

    digest = hashlib.sha256(PNG).hexdigest()
    assert (tmp_path / "artifacts" / "blobs" / digest).read_bytes() == PNG
    inline_digest = hashlib.sha256(b"inline picture bytes").hexdigest()
    assert (tmp_path / "artifacts" / "blobs" / inline_digest).exists()
    history = agent.get_state(config).values["messages"]
    assert _payloads(history) == []  # the checkpoint holds digests, not payloads
    refs = [b[BLOB_REF] for m in history if isinstance(m.content, list) for b in m.content
            if isinstance(b, dict) and BLOB_REF in b]
    assert sorted(refs) == sorted([digest, inline_digest])
    # the model saw both pictures whole, on the call after the read
    assert sorted(_payloads(model.requests[1].messages)) == sorted(
        [inline, base64.b64encode(PNG).decode()]
    )


def test_a_blob_that_can_no_longer_be_read_becomes_a_notice(tmp_path: Path) -> None:
    import hashlib

    from fathom.backends.filesystem import FilesystemBackend
    from fathom.middleware.context.blob_offload import MISSING_BLOB_TEXT

    (tmp_path / "pic.png").write_bytes(PNG)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/pic.png"}, id="r1")), ai("ok"),
                 ai("again")]
    )
    fs = FilesystemMiddleware(backend=backend, offload_binary_content=True)
    agent = create_agent(model, middleware=[fs], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(GO, config)
    blob = tmp_path / "blobs" / hashlib.sha256(PNG).hexdigest()
    blob.write_bytes(b"tampered")  # no longer matches its digest
    agent.invoke({"messages": [HumanMessage("and now?")]}, config)
    shown = next(m for m in model.requests[2].messages if isinstance(m, ToolMessage))
    assert shown.content == [{"type": "text", "text": MISSING_BLOB_TEXT}]


def test_offload_binary_content_warns_and_does_nothing_on_state_backed_blobs() -> None:
    with pytest.warns(UserWarning, match="no effect"):
        middleware = FilesystemMiddleware(backend=StateBackend(), offload_binary_content=True)
    assert middleware.offload_binary_content is False


# -- SummarizationMiddleware(summarizer=) -------------------------------------------------


def test_a_summarizer_function_writes_the_summary_instead_of_the_model() -> None:
    seen: list[int] = []

    def summarize(messages: list[Any]) -> str:
        seen.append(len(messages))
        return "FUNCTION SUMMARY"

    model_that_must_not_summarize = ScriptedModel(replies=[])
    middleware = SummarizationMiddleware(
        model_that_must_not_summarize, StateBackend(), trigger=("messages", 5),
        keep=("messages", 1), summarizer=summarize,
    )
    model = _three_steps()
    create_agent(model, tools=[look], middleware=[middleware]).invoke(GO)
    assert seen and not model_that_must_not_summarize.requests
    assert any("FUNCTION SUMMARY" in m.text for m in model.requests[2].messages)


def test_a_summarizer_chat_model_is_prompted_with_the_summary_prompt() -> None:
    writer = ScriptedModel(replies=[ai("WRITER SUMMARY")])
    middleware = SummarizationMiddleware(
        None, StateBackend(), trigger=("messages", 5), keep=("messages", 1),
        summary_prompt="CONDENSE:\n{messages}", summarizer=writer,
    )
    model = _three_steps()
    create_agent(model, tools=[look], middleware=[middleware]).invoke(GO)
    assert writer.requests[0].messages[-1].text.startswith("CONDENSE:\n")
    assert any("WRITER SUMMARY" in m.text for m in model.requests[2].messages)
    with pytest.raises(TypeError, match="summarizer must be"):
        SummarizationMiddleware(summarizer=42)  # type: ignore[arg-type]


def test_execute_timeouts_over_an_hour_are_refused_by_default(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path)
    model = ScriptedModel(
        replies=[ai("", tool_call("execute", {"command": "touch x", "timeout": 7200}, id="x")),
                 ai("done")]
    )
    middleware = [FilesystemMiddleware(backend=backend), ExecuteMiddleware(backend=backend)]
    result = create_agent(model, middleware=middleware).invoke(GO)
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error" and "limit of 3600s" in answer.text
    assert not (tmp_path / "x").exists()
