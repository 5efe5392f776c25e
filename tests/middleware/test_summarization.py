"""Context compression: offloading, trimming old tool inputs, summarization, overflow retry."""

from __future__ import annotations

import logging
import re

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.backends.state import StateBackend
from fathom.backends.utils import create_file_data
from fathom.middleware.context.summarization import (
    ARCHIVE_DIR,
    CHARS_PER_TOKEN,
    OFFLOAD_DIR,
    OFFLOAD_TOKENS,
    SUMMARY_SOURCE,
    SummarizationMiddleware,
)
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "go"}]}
SUMMARY_MARK = "You are compressing the history"


@tool
def dump(query: str) -> str:
    """Return a very large report."""
    return "\n".join(f"row {i}: " + "v" * 95 for i in range(2000))  # ~200,000 characters


def test_a_huge_tool_result_is_offloaded_and_readable_from_its_path():
    def policy(request):
        done = [m for m in request.messages if m.type == "tool"]
        if not done:
            return ai("", tool_call("dump", {"query": "all"}))
        if len(done) == 1:
            path = re.search(r"saved to `([^`]+)`\. Its", done[0].content).group(1)
            return ai("", tool_call("read_file", {"file_path": path, "offset": 1500, "limit": 3}))
        return ai("done")

    model = ScriptedModel(policy=policy)
    result = create_deep_agent(model, [dump]).invoke(USER)
    offloaded = next(m for m in result["messages"] if m.type == "tool")
    assert len(offloaded.content) < 3_000 and "row 0:" in offloaded.content
    assert model.requests[1].input_tokens < 20_000
    read = [m for m in result["messages"] if m.type == "tool"][1]
    assert "row 1500: " + "v" * 95 in read.content
    (path,) = [p for p in result["files"] if p.startswith(OFFLOAD_DIR)]
    assert len(result["files"][path]["content"]) > 190_000


def test_file_tool_results_are_never_offloaded():
    # 500 listed entries of ~250 characters: a result well over the offload threshold, so
    # only the exclusion of file tools keeps it in the conversation.
    stamp = "2024-01-01T00:00:00Z"
    entry = {"content": "x", "encoding": "utf-8", "created_at": stamp, "modified_at": stamp}
    files = {f"/data/{i:04d}-{'n' * 240}.txt": dict(entry) for i in range(500)}
    model = ScriptedModel(replies=[ai("", tool_call("ls", {"path": "/data"})), ai("done")])
    result = create_deep_agent(model).invoke({**USER, "files": files})

    listing = model.requests[1].messages[-1]
    assert len(listing.content) > OFFLOAD_TOKENS * CHARS_PER_TOKEN
    assert listing.content.count("/data/") == 500
    assert not [p for p in result["files"] if p.startswith(OFFLOAD_DIR)]


@tool
def observe(step: int) -> str:
    """Observe the world at one step."""
    if step == 1:
        return "the secret code is 4721"
    return f"step {step}: nothing special, filler text that takes room in the context window"


def long_run_policy(steps: int, counters: dict, tool_name: str = "observe"):
    def policy(request):
        last = request.last_human_text or ""
        if last.startswith(SUMMARY_MARK):
            counters["summaries"] += 1
            codes = re.findall(r"secret code is (\d+)", last)
            fact = f"- the secret code is {codes[0]}\n" if codes else "- nothing yet\n"
            return ai(f"## Facts and decisions\n{fact}## Progress\n- {counters['steps']} steps")
        if counters["steps"] < steps:
            counters["steps"] += 1
            return ai("", tool_call(tool_name, {"step": counters["steps"]}))
        text = "\n".join(str(m.content) for m in request.messages)
        codes = re.findall(r"secret code is (\d+)", text)
        return ai(f"The secret code is {codes[0] if codes else 'unknown'}")

    return policy


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_300_step_run_stays_inside_a_small_window_and_remembers_step_1(mode):
    window = 4_000
    counters = {"steps": 0, "summaries": 0}
    policy = long_run_policy(300, counters)
    model = ScriptedModel(policy=policy, profile={"max_input_tokens": window})
    agent = create_deep_agent(model, [observe])
    config = {"recursion_limit": 2_000}
    if mode == "invoke":
        result = agent.invoke(USER, config)
    else:
        result = await agent.ainvoke(USER, config)
    assert counters["steps"] == 300
    assert max(r.input_tokens for r in model.requests) <= window
    assert counters["summaries"] >= 5
    assert result["messages"][-1].content == "The secret code is 4721"
    # one archive for the conversation, a section per summarization
    (archive,) = [d["content"] for p, d in result["files"].items() if p.startswith(ARCHIVE_DIR)]
    assert archive.count("## Summarized at") == counters["summaries"]
    assert "secret code is 4721" in archive and "observe" in archive
    # the state keeps every message; the model is shown the summary and the rest
    assert len(result["messages"]) == 2 * 300 + 2
    # tool calls and their results are never split: every result follows its call
    for request in model.requests:
        shown = [m for m in request.messages if m.type != "system"]
        for i, message in enumerate(shown):
            if isinstance(message, ToolMessage):
                calls = {c["id"] for m in shown[:i] if isinstance(m, AIMessage)
                         for c in m.tool_calls}  # fmt: skip
                assert message.tool_call_id in calls
    summary = next(m for m in model.requests[-1].messages if m.type != "system")
    assert summary.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    assert "4721" in summary.content and ARCHIVE_DIR in summary.content


@tool
def observe_bulky(step: int) -> str:
    """Observe the world at one step, in detail."""
    if step == 1:
        return "the secret code is 4721"
    return f"step {step}: " + "a long and uneventful reading of every sensor. " * 12


def test_a_summary_of_a_long_history_keeps_its_start_and_its_end():
    """The first summary's transcript is longer than the summary budget (half the window):
    the middle is cut, the first step and the latest steps are kept."""
    counters = {"steps": 0, "summaries": 0}
    policy = long_run_policy(200, counters, "observe_bulky")
    model = ScriptedModel(policy=policy, profile={"max_input_tokens": 16_000})
    agent = create_deep_agent(model, [observe_bulky])
    agent.invoke(USER, {"recursion_limit": 1_000})
    first = next(r for r in model.requests if r.last_human_text.startswith(SUMMARY_MARK))
    prompt = first.last_human_text
    assert "middle part cut" in prompt
    assert "secret code is 4721" in prompt
    shown = {int(n) for n in re.findall(r"step (\d+):", prompt)}
    assert max(shown) >= 40  # the most recent steps before the summary are there
    assert set(range(2, max(shown))) - shown  # and a stretch of the middle is not


def test_a_context_overflow_error_summarizes_and_retries_once():
    counters = {"steps": 0, "summaries": 0, "raised": 0}
    inner = long_run_policy(30, counters)

    def policy(request):
        if counters["steps"] == 20 and not counters["raised"]:
            counters["raised"] += 1
            raise ContextOverflowError("prompt is too long for this model")
        return inner(request)

    model = ScriptedModel(policy=policy)  # no profile: the fallback trigger is far away
    result = create_deep_agent(model, [observe]).invoke(USER, {"recursion_limit": 500})
    assert counters["raised"] == 1 and counters["summaries"] == 1
    assert result["messages"][-1].content == "The secret code is 4721"
    # the fallback keeps the last 6 messages (plus whole call/result pairs)
    assert any(p.startswith(ARCHIVE_DIR) for p in result["files"])


@pytest.mark.parametrize(
    "wording",
    [
        "This model's maximum context length is 4096 tokens.",  # OpenAI, vLLM
        "prompt is too long: 5000 tokens > 4096 maximum",  # Anthropic style
    ],
)
def test_an_overflow_from_a_real_provider_client_is_recovered(wording):
    from langchain_openai import ChatOpenAI

    from fathom.testing import ScriptedOpenAIServer

    counters = {"steps": 0, "summaries": 0, "raised": 0}
    inner = long_run_policy(12, counters)

    def policy(request):
        if counters["steps"] == 8 and not counters["raised"]:
            counters["raised"] += 1
            raise ContextOverflowError(wording)
        return inner(request)

    with ScriptedOpenAIServer(ScriptedModel(policy=policy)) as server:
        client = ChatOpenAI(model="scripted", base_url=server.base_url, api_key="none",
                            max_retries=0)  # fmt: skip
        result = create_deep_agent(client, [observe]).invoke(USER, {"recursion_limit": 200})
    assert counters["raised"] == 1 and counters["summaries"] == 1
    assert result["messages"][-1].content == "The secret code is 4721"


@tool
def part(index: int) -> str:
    """Return one big part of a report."""
    return f"part {index}\n" + f"line of part {index}\n" * 2_000  # ~36,000 characters


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_an_overflow_from_a_batch_of_results_offloads_them_and_retries(mode):
    # Five parallel results, each under the offload threshold, together too big for the
    # provider: summarization keeps the newest batch whole, so only files can make it fit.
    counters = {"overflows": 0, "summaries": 0}

    def policy(request):
        if (request.last_human_text or "").startswith(SUMMARY_MARK):
            counters["summaries"] += 1
            return ai("## Intent\n- read the report")
        results = [m for m in request.messages if m.type == "tool"]
        if not results:
            calls = [tool_call("part", {"index": i}, id=f"call_big_{i}") for i in range(5)]
            read = tool_call("read_file", {"file_path": "/report.md"}, id="call_read")
            return ai("", *calls, read)
        if sum(len(m.content) for m in results) > 50_000:
            counters["overflows"] += 1
            raise ContextOverflowError("prompt is too long: 90000 tokens > 40000 maximum")
        found = [re.search(r"saved to `([^`]+)`\. Its", m.content) for m in results[:5]]
        return ai("read " + ",".join(match.group(1) for match in found if match))

    files = {"/report.md": create_file_data("\n".join("report " * 20 for _ in range(600)))}
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, [part])
    state = {**USER, "files": files}
    result = agent.invoke(state) if mode == "invoke" else await agent.ainvoke(state)
    assert counters["overflows"] == 1 and counters["summaries"] == 0
    paths = [f"{OFFLOAD_DIR}/call_big_{i}" for i in range(5)]
    assert result["messages"][-1].content == "read " + ",".join(paths)
    for i, path in enumerate(paths):
        assert result["files"][path]["content"] == part.invoke({"index": i})
    results = [m for m in result["messages"] if m.type == "tool"]
    assert [m.tool_call_id for m in results] == [f"call_big_{i}" for i in range(5)] + [
        "call_read"
    ]
    assert all(len(m.content) < 2_500 for m in results)
    # a page of a file is not written again: it is cut, with a note on how to page it
    assert "offset and limit" in results[-1].content
    assert not [p for p in result["files"] if p.endswith("call_read")]


def test_old_write_inputs_are_truncated_before_anything_is_summarized():
    contents = [f"doc {i} " + "w" * 600 for i in range(6)]

    def policy(request):
        assert not (request.last_human_text or "").startswith(SUMMARY_MARK), "no summary needed"
        done = sum(1 for m in request.messages if m.type == "tool")
        if done < len(contents):
            args = {"file_path": f"/doc{done}.md", "content": contents[done]}
            return ai("", tool_call("write_file", args))
        return ai("done")

    model = ScriptedModel(policy=policy, profile={"max_input_tokens": 3_600})
    middleware = SummarizationMiddleware(truncate_args_settings={
        "trigger": ("fraction", 0.5), "keep": ("messages", 2), "max_length": 200})  # fmt: skip
    result = create_deep_agent(model, middleware=[middleware]).invoke(USER)
    # the model was shown the start of the older contents; the state and files keep them
    shown = [c["args"]["content"] for m in model.requests[-1].messages
             if isinstance(m, AIMessage) for c in m.tool_calls]  # fmt: skip
    assert shown[0] == contents[0][:20] + "...(argument truncated)"
    assert shown[-1] == contents[-1]
    calls = [c for m in result["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["args"]["content"] for c in calls] == contents
    assert [result["files"][f"/doc{i}.md"]["content"] for i in range(6)] == contents
    assert max(r.input_tokens for r in model.requests) <= 3_600


def test_summary_tokens_can_be_told_apart_in_a_stream():
    counters = {"steps": 0, "summaries": 0}
    model = ScriptedModel(policy=long_run_policy(40, counters), profile={"max_input_tokens": 3_000})
    agent = create_deep_agent(model, [observe])
    sources = set()
    for chunk in agent.stream(USER, {"recursion_limit": 500}, stream_mode="messages",
                              version="v2"):  # fmt: skip
        _, metadata = chunk["data"]
        sources.add(metadata.get("lc_source"))
    assert counters["summaries"] >= 1
    assert SUMMARY_SOURCE in sources and None in sources


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="keep_fraction"):
        SummarizationMiddleware(keep_fraction=0.9, trigger_fraction=0.5)


def test_the_agent_can_compact_on_purpose_between_tasks():
    from fathom.middleware.context.summarization import create_summarization_tool_middleware

    counters = {"summaries": 0}

    def policy(request):
        last = request.last_human_text or ""
        if last.startswith(SUMMARY_MARK):
            counters["summaries"] += 1
            return ai("## Facts and decisions\n- task one is finished")
        done = sum(1 for m in request.messages if m.type == "tool")
        if last == "task one" and done < 8 and not any(
            m.type == "tool" and m.name == "compact_conversation" for m in request.messages
        ):
            return ai("", tool_call("observe", {"step": done + 2}))
        if last == "task one" and not any(m.type == "tool" and m.name == "compact_conversation"
                                          for m in request.messages):  # fmt: skip
            return ai("", tool_call("compact_conversation", {}))
        return ai("ready for the next task")

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, [observe], middleware=[create_summarization_tool_middleware()])
    result = agent.invoke({"messages": [{"role": "user", "content": "task one"}]})
    assert counters["summaries"] == 1
    shown = [m for m in model.requests[-1].messages if m.type != "system"]
    assert shown[0].additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    assert len(shown) < 10 < len(result["messages"])
    assert not result.get("compact_requested")
    assert result["messages"][-1].content == "ready for the next task"


def test_archives_point_to_written_files_instead_of_copying_them():
    contents = [f"doc {i} " + "q" * 1_500 for i in range(8)]
    state = {"summaries": 0}

    def policy(request):
        if (request.last_human_text or "").startswith(SUMMARY_MARK):
            state["summaries"] += 1
            return ai("## Artifacts\n- /doc*.md")
        done = sum(1 for m in request.messages if m.type == "tool")
        written = sum(1 for m in request.messages if isinstance(m, AIMessage) and m.tool_calls)
        if state["summaries"] == 0 and done < len(contents):
            args = {"file_path": f"/doc{written}.md", "content": contents[written]}
            return ai("", tool_call("write_file", args))
        return ai("done")

    model = ScriptedModel(policy=policy, profile={"max_input_tokens": 3_000})
    result = create_deep_agent(model).invoke(USER)
    assert state["summaries"] >= 1
    (archive,) = [d["content"] for p, d in result["files"].items() if p.startswith(ARCHIVE_DIR)]
    assert "characters, written to /doc0.md]" in archive
    assert "q" * 1_500 not in archive
    assert result["files"]["/doc0.md"]["content"] == contents[0]


def test_a_message_trigger_fires_at_its_count_and_keeps_the_last_n_with_their_calls() -> None:
    """`trigger=("messages", 6)` summarizes at the first model call whose history holds 6
    or more messages, not before; `keep=("messages", 3)` then hands the model the summary
    and the 3 latest messages, widened to 4 when the oldest kept one is a tool result, so
    that a result never arrives without the call it answers. The summarizer gets the rest."""
    from langchain.agents import create_agent

    from fathom.backends import StateBackend

    @tool
    def step(n: int) -> str:
        """Do step n."""
        return f"result {n}"

    def policy(request):
        # steps 0..3, one a call, then the answer (by call number: a summary shortens the
        # history the model sees)
        if request.index >= 4:
            return ai("finished")
        return ai("", tool_call("step", {"n": request.index}))

    model = ScriptedModel(policy=policy)
    summarizer = ScriptedModel(policy=lambda request: ai(f"SUMMARY {request.index}"))
    middleware = SummarizationMiddleware(
        summarizer, StateBackend(), trigger=("messages", 6), keep=("messages", 3)
    )
    result = create_agent(model, tools=[step], middleware=[middleware]).invoke(USER)
    assert result["messages"][-1].content == "finished"

    def seen(index: int) -> list[tuple[str, str]]:
        return [(m.type, m.text) for m in model.requests[index].messages if m.type != "system"]

    # histories of 1, 3 and 5 messages: under the trigger, passed whole
    assert [len(seen(i)) for i in range(3)] == [1, 3, 5]
    assert all("SUMMARY" not in text for i in range(3) for _, text in seen(i))
    # 7 messages at the 4th call: summarized; the summary, then the kept tail
    first, *kept = seen(3)
    assert "SUMMARY 0" in first[1]
    assert kept == [("ai", ""), ("tool", "result 1"), ("ai", ""), ("tool", "result 2")]
    # the summarizer was given what was cut: the request and step 0, not what was kept
    cut = summarizer.requests[0].messages[-1].text
    assert "go" in cut and "result 0" in cut and "result 1" not in cut
    # the summary and 6 messages at the 5th call: at the trigger again, so summarized again
    first, *kept = seen(4)
    assert "SUMMARY 1" in first[1]
    assert kept == [("ai", ""), ("tool", "result 2"), ("ai", ""), ("tool", "result 3")]
    assert len(summarizer.requests) == 2


class _UnreadableArchive(StateBackend):
    """Files in state, but a download raises (a disk gone, a backend's own bug)."""

    def download_files(self, paths):
        raise OSError("the archive's disk is gone")


def test_an_archive_that_cannot_be_read_is_written_anew_and_the_failure_logged(caplog):
    contents = [f"doc {i} " + "q" * 1_500 for i in range(8)]
    state = {"summaries": 0}

    def policy(request):
        if (request.last_human_text or "").startswith(SUMMARY_MARK):
            state["summaries"] += 1
            return ai("## Artifacts\n- /doc*.md")
        done = sum(1 for m in request.messages if m.type == "tool")
        if state["summaries"] == 0 and done < len(contents):
            args = {"file_path": f"/doc{done}.md", "content": contents[done]}
            return ai("", tool_call("write_file", args))
        return ai("done")

    model = ScriptedModel(policy=policy, profile={"max_input_tokens": 3_000})
    agent = create_deep_agent(model, backend=_UnreadableArchive())
    with caplog.at_level(logging.WARNING, logger="fathom.middleware.context.summarization"):
        result = agent.invoke(USER)
    assert state["summaries"] >= 1
    assert result["messages"][-1].content == "done"
    (archive,) = [d["content"] for p, d in result["files"].items() if p.startswith(ARCHIVE_DIR)]
    assert "## Summarized at" in archive
    unread = [r for r in caplog.records if "could not be read" in r.getMessage()]
    assert unread and "the archive's disk is gone" in unread[0].getMessage()
