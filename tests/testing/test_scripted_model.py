"""Tests for `fathom.testing.ScriptedModel` against the real LangChain/LangGraph stack."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, ValidationError

from fathom.testing import (
    RecordedRequest,
    Rendezvous,
    ScriptedModel,
    ScriptExhausted,
    ScriptRequest,
    ai,
    approx_tokens,
    tool_call,
)


@tool
def search(query: str) -> str:
    """Search the corpus for `query`."""
    return f"result for {query}"


class Calculator(BaseModel):
    """Evaluate an arithmetic expression."""

    expression: str = Field(description="The expression to evaluate")


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


class Person(BaseModel):
    """A person."""

    name: str
    age: int


def _shared_prefix(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _add(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


# --------------------------------------------------------------------------- scripting


def test_list_replies_are_used_in_order() -> None:
    model = ScriptedModel(replies=[ai("first"), "second"])

    first = model.invoke("hi")
    second = model.invoke("again")

    assert isinstance(first, AIMessage)
    assert (first.content, second.content) == ("first", "second")
    assert model.calls == 2
    assert [r.index for r in model.requests] == [0, 1]


def test_string_reply_becomes_a_plain_ai_message() -> None:
    reply = ScriptedModel(replies=["just text"]).invoke("hi")

    assert isinstance(reply, AIMessage)
    assert reply.content == "just text"
    assert reply.tool_calls == []
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == "scripted"


def test_policy_echoes_last_human_text() -> None:
    model = ScriptedModel(policy=lambda req: f"echo: {req.last_human_text}")

    assert model.invoke("hello").content == "echo: hello"
    assert model.invoke([HumanMessage("a"), AIMessage("b"), HumanMessage("c")]).content == (
        "echo: c"
    )


def test_policy_can_branch_on_bound_tools() -> None:
    def policy(req: ScriptRequest) -> AIMessage | str:
        if req.has_tool("search") and not req.tool_results:
            return ai("", tool_call("search", {"query": req.last_human_text}))
        return "no tools needed"

    model = ScriptedModel(policy=policy)

    with_tools = model.bind_tools([search]).invoke("fathom")
    without_tools = model.invoke("fathom")

    assert [tc["name"] for tc in with_tools.tool_calls] == ["search"]
    assert with_tools.tool_calls[0]["args"] == {"query": "fathom"}
    assert without_tools.content == "no tools needed"


def test_replies_are_used_before_the_policy() -> None:
    model = ScriptedModel(replies=["scripted"], policy=lambda req: f"policy #{req.index}")

    answers = [model.invoke("x").content for _ in range(3)]

    assert answers == ["scripted", "policy #1", "policy #2"]


def test_callable_reply_receives_the_request() -> None:
    seen: list[ScriptRequest] = []

    def reply(req: ScriptRequest) -> str:
        seen.append(req)
        return "ok"

    model = ScriptedModel(replies=[reply])
    model.bind_tools([search]).invoke([SystemMessage("be brief"), HumanMessage("hi")])

    (req,) = seen
    assert req.index == 0
    assert req.system_prompt == "be brief"
    assert req.tool_names == ["search"]
    assert isinstance(req.messages[0], SystemMessage)
    assert req.last_message is not None and req.last_message.content == "hi"
    assert req.tool_results == []


def test_script_request_tool_results_are_those_after_the_last_ai_message() -> None:
    req = ScriptRequest(
        messages=[
            HumanMessage("q"),
            ai("", tool_call("search", {"query": "a"}, id="1")),
            ToolMessage("old", tool_call_id="1"),
            ai("", tool_call("search", {"query": "b"}, id="2"), tool_call("search", id="3")),
            ToolMessage("new b", tool_call_id="2"),
            ToolMessage("new c", tool_call_id="3"),
        ],
        tools=[convert_to_openai_tool(search)],
        index=5,
    )

    assert [m.content for m in req.tool_results] == ["new b", "new c"]
    assert req.system_prompt is None
    assert req.last_human_text == "q"
    assert req.has_tool("search") and not req.has_tool("weather")


def test_several_tool_calls_get_deterministic_ids() -> None:
    model = ScriptedModel(
        replies=[
            ai(
                "working",
                tool_call("search", {"query": "a"}),
                tool_call("weather", {"city": "Oslo"}),
                tool_call("search", {"query": "b"}, id="mine"),
            ),
            ai("", tool_call("search", {"query": "c"})),
        ]
    )

    first = model.invoke("go")
    second = model.invoke("again")

    assert [tc["id"] for tc in first.tool_calls] == ["call_0_0", "call_0_1", "mine"]
    assert [tc["name"] for tc in first.tool_calls] == ["search", "weather", "search"]
    assert first.tool_calls[1]["args"] == {"city": "Oslo"}
    assert first.response_metadata["finish_reason"] == "tool_calls"
    assert [tc["id"] for tc in second.tool_calls] == ["call_1_0"]


def test_scripted_message_is_not_mutated_and_can_be_reused() -> None:
    message = ai("", tool_call("search", {"query": "a"}))
    model = ScriptedModel(replies=[message, message])

    ids = [model.invoke("x").tool_calls[0]["id"] for _ in range(2)]

    assert ids == ["call_0_0", "call_1_0"]
    assert message.tool_calls[0]["id"] is None
    assert message.usage_metadata is None


def test_bind_tools_records_tool_schemas_in_bound_order() -> None:
    model = ScriptedModel(replies=["ok"])

    model.bind_tools([WEATHER_TOOL, search, Calculator]).invoke("hi")

    (request,) = model.requests
    assert request.tool_names == ["weather", "search", "Calculator"]
    assert request.tools == [
        convert_to_openai_tool(WEATHER_TOOL),
        convert_to_openai_tool(search),
        convert_to_openai_tool(Calculator),
    ]


def test_bind_tools_passes_tool_choice_through_bind() -> None:
    bound = ScriptedModel(replies=["ok"]).bind_tools([search], tool_choice="any")

    assert isinstance(bound, RunnableBinding)
    assert bound.kwargs["tool_choice"] == "any"
    assert bound.kwargs["tools"] == [convert_to_openai_tool(search)]


def test_requests_record_messages_tools_and_tokens() -> None:
    model = ScriptedModel(replies=["hello there"])
    messages: list[BaseMessage] = [SystemMessage("sys prompt"), HumanMessage("hi")]

    reply = model.bind_tools([search]).invoke(messages)
    messages[1].content = "mutated afterwards"

    (request,) = model.requests
    assert isinstance(request, RecordedRequest)
    assert request.index == 0
    assert [m.content for m in request.messages] == ["sys prompt", "hi"]
    assert request.system_prompt == "sys prompt"
    assert request.tool_names == ["search"]
    assert request.input_tokens == approx_tokens(request.canonical_json())
    assert request.output_tokens == approx_tokens("hello there")
    assert request.response.content == "hello there"
    assert reply.usage_metadata is not None
    assert request.input_tokens == reply.usage_metadata["input_tokens"]


def test_requests_is_a_copy_and_reset_rewinds() -> None:
    model = ScriptedModel(replies=["a", "b"])
    model.invoke("x")
    model.requests.clear()
    assert len(model.requests) == 1

    model.reset()

    assert model.requests == [] and model.calls == 0
    assert model.invoke("x").content == "a"


def test_canonical_json_is_deterministic_and_ordered_system_tools_messages() -> None:
    model = ScriptedModel(replies=[ai("", tool_call("search", {"query": "ü"})), "done"])
    bound = model.bind_tools([search])
    history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("find ü")]
    first = bound.invoke(history)
    history += [first, ToolMessage("found", tool_call_id=first.tool_calls[0]["id"])]
    bound.invoke(history)

    req0, req1 = model.requests
    payload = json.loads(req1.canonical_json())
    assert [next(iter(part)) for part in payload] == ["system", "tools", "messages"]
    assert payload[0]["system"] == "sys"
    assert payload[2]["messages"][1] == {
        "type": "ai",
        "content": "",
        "tool_calls": [{"name": "search", "args": {"query": "ü"}, "id": "call_0_0"}],
        "tool_call_id": None,
    }
    assert payload[2]["messages"][2]["tool_call_id"] == "call_0_0"
    assert "ü" in req0.canonical_json()  # ensure_ascii=False
    assert req0.canonical_json() == req0.canonical_json()
    # Consecutive requests of a loop share everything but the closing brackets.
    assert _shared_prefix(req0.canonical_json(), req1.canonical_json()) >= (
        len(req0.canonical_json()) - 3
    )


# --------------------------------------------------------------------------- usage


def test_approx_tokens() -> None:
    assert [approx_tokens(t) for t in ["", "a", "abcd", "abcde", "x" * 400]] == [0, 1, 1, 2, 100]


def test_usage_metadata_is_consistent_with_approx_tokens() -> None:
    calls = [tool_call("search", {"query": "deep agents"}, id="c1")]
    model = ScriptedModel(replies=[ai("Let me search.", *calls)])

    reply = model.bind_tools([search]).invoke([SystemMessage("sys"), HumanMessage("hi")])

    usage = reply.usage_metadata
    assert usage is not None
    calls_json = json.dumps(
        [{"name": "search", "args": {"query": "deep agents"}, "id": "c1"}],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert usage["output_tokens"] == approx_tokens("Let me search." + calls_json)
    assert usage["input_tokens"] == approx_tokens(model.requests[0].canonical_json())
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_scripted_usage_metadata_is_kept() -> None:
    usage = {"input_tokens": 31_000, "output_tokens": 5, "total_tokens": 31_005}
    model = ScriptedModel(replies=[AIMessage("full", usage_metadata=usage)])

    reply = model.invoke("x")

    assert reply.usage_metadata == usage
    assert model.requests[0].input_tokens == 31_000


def test_profile_field_still_works() -> None:
    model = ScriptedModel(replies=["x"], profile={"max_input_tokens": 32000})

    assert model.profile == {"max_input_tokens": 32000}


# --------------------------------------------------------------------------- paths


SCRIPT = [ai("Here is a longer answer that spans chunks.", tool_call("search", {"query": "q"}))]


def _summary(message: AIMessage) -> tuple[Any, ...]:
    return (
        message.content,
        message.tool_calls,
        message.usage_metadata,
        message.response_metadata.get("finish_reason"),
        message.response_metadata.get("model_name"),
    )


async def test_invoke_stream_astream_and_ainvoke_are_equivalent() -> None:
    def fresh() -> Any:
        return ScriptedModel(replies=list(SCRIPT), stream_chunk_chars=5).bind_tools([search])

    invoked = fresh().invoke("q")
    ainvoked = await fresh().ainvoke("q")
    streamed = list(fresh().stream("q"))
    astreamed = [chunk async for chunk in fresh().astream("q")]

    assert invoked.tool_calls[0]["id"] == "call_0_0"
    for chunks in (streamed, astreamed):
        content_chunks = [c for c in chunks if c.content]
        assert [c.content for c in content_chunks][:2] == ["Here ", "is a "]
        assert len(content_chunks) == -(-len(str(invoked.content)) // 5)
        assert chunks[-1].chunk_position == "last"
        assert _summary(_add(chunks)) == _summary(invoked)
    assert _summary(ainvoked) == _summary(invoked)


def test_streaming_tokens_reach_callbacks_once() -> None:
    class Collect(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens: list[str] = []

        def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
            self.tokens.append(token)

    handler = Collect()
    model = ScriptedModel(replies=["one two three four"], stream_chunk_chars=4)

    list(model.stream("x", config={"callbacks": [handler]}))

    assert "".join(handler.tokens) == "one two three four"


def test_invoke_with_stream_kwarg_aggregates_chunks() -> None:
    model = ScriptedModel(replies=[ai("abc", tool_call("search", {"query": "z"}))])

    reply = model.invoke("x", stream=True)

    assert reply.content == "abc"
    assert reply.tool_calls[0]["args"] == {"query": "z"}
    assert reply.usage_metadata is not None


async def test_async_calls_overlap() -> None:
    # Each call sleeps its latency and then waits until all four are in flight at once:
    # calls that ran one after another would break the rendezvous instead.
    meet = Rendezvous(4)
    model = ScriptedModel(
        policy=lambda req: f"answer {req.last_human_text}", latency=0.05, rendezvous=meet
    )

    replies = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(4)))

    assert meet.max_in_flight == 4
    assert sorted(r.content for r in replies) == [f"answer q{i}" for i in range(4)]
    assert sorted(r.index for r in model.requests) == [0, 1, 2, 3]


async def test_async_streams_overlap() -> None:
    meet = Rendezvous(4)
    model = ScriptedModel(policy=lambda req: "streamed", latency=0.05, rendezvous=meet)

    async def consume() -> str:
        return "".join([str(c.content) async for c in model.astream("x")])

    texts = await asyncio.gather(*(consume() for _ in range(4)))

    assert meet.max_in_flight == 4
    assert texts == ["streamed"] * 4


def test_sync_latency_is_honoured() -> None:
    model = ScriptedModel(replies=["slow", "slow"], latency=0.1)

    started = time.perf_counter()
    model.invoke("x")
    invoke_elapsed = time.perf_counter() - started
    started = time.perf_counter()
    list(model.stream("x"))
    stream_elapsed = time.perf_counter() - started

    assert invoke_elapsed >= 0.1
    assert stream_elapsed >= 0.1


# --------------------------------------------------------------------------- errors


def test_script_exhausted_explains_what_happened() -> None:
    model = ScriptedModel(replies=["one", "two"])
    model.invoke("a")
    model.invoke("b")

    with pytest.raises(ScriptExhausted) as info:
        model.invoke("please answer " + "x" * 500)

    text = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "2 replies were scripted" in text
    assert "call 2" in text
    assert "please answer xxx" in text
    assert "x" * 300 not in text  # truncated
    assert "add more replies" in text and "policy" in text


def test_failing_script_consumes_its_turn() -> None:
    def flaky(req: ScriptRequest) -> str:
        raise ConnectionError("simulated provider outage")

    model = ScriptedModel(replies=[flaky, "recovered"])

    with pytest.raises(ConnectionError, match="outage"):
        model.invoke("x")
    assert model.invoke("x").content == "recovered"
    assert model.calls == 2
    assert [r.index for r in model.requests] == [1]


def test_failing_script_then_reply_drives_a_retry() -> None:
    def flaky(req: ScriptRequest) -> str:
        raise ConnectionError("simulated provider outage")

    model = ScriptedModel(replies=[flaky, "recovered"])

    retrying = model.with_retry(
        retry_if_exception_type=(ConnectionError,),
        stop_after_attempt=2,
        wait_exponential_jitter=False,
    )

    assert retrying.invoke("x").content == "recovered"
    assert model.calls == 2


def test_replies_of_the_wrong_type_are_rejected_up_front() -> None:
    with pytest.raises(ValidationError, match=r"replies\[1\] is a int"):
        ScriptedModel(replies=["ok", 42])  # type: ignore[list-item]


def test_script_returning_the_wrong_type_is_a_type_error() -> None:
    model = ScriptedModel(policy=lambda req: 42)  # type: ignore[arg-type, return-value]

    with pytest.raises(TypeError, match="expected an AIMessage or a str"):
        model.invoke("x")


# --------------------------------------------------------------------------- integrations


def test_with_structured_output_pydantic() -> None:
    model = ScriptedModel(replies=[ai("", tool_call("Person", {"name": "Ada", "age": 36}))])

    person = model.with_structured_output(Person).invoke("Who wrote the first program?")

    assert person == Person(name="Ada", age=36)
    assert model.requests[0].tool_names == ["Person"]


def test_with_structured_output_include_raw() -> None:
    model = ScriptedModel(replies=[ai("", tool_call("Person", {"name": "Alan", "age": 41}))])

    result = model.with_structured_output(Person, include_raw=True).invoke("x")

    assert isinstance(result, dict)
    assert result["parsed"] == Person(name="Alan", age=41)
    assert isinstance(result["raw"], AIMessage)
    assert result["parsing_error"] is None


def _agent_model() -> ScriptedModel:
    def final(req: ScriptRequest) -> str:
        (result,) = req.tool_results
        return f"Final answer based on: {result.content}"

    return ScriptedModel(replies=[ai("", tool_call("search", {"query": "fathom"})), final])


def _assert_agent_loop(model: ScriptedModel, messages: list[BaseMessage]) -> None:
    assert messages[-1].content == "Final answer based on: result for fathom"
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    first, second = model.requests
    assert first.system_prompt == "You are a test agent."
    assert first.tool_names == ["search"]
    tool_messages = [m for m in second.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("call_0_0", "result for fathom")
    ]


def test_drives_create_agent_through_a_tool_loop() -> None:
    model = _agent_model()
    agent = create_agent(model, tools=[search], system_prompt="You are a test agent.")

    result = agent.invoke({"messages": [HumanMessage("look up fathom")]})

    _assert_agent_loop(model, result["messages"])


async def test_drives_create_agent_async_with_message_streaming() -> None:
    model = _agent_model()
    agent = create_agent(model, tools=[search], system_prompt="You are a test agent.")

    tokens: list[str] = []
    final_state: dict[str, Any] = {}
    stream: Any = agent.astream(
        {"messages": [HumanMessage("look up fathom")]}, stream_mode=["messages", "values"]
    )
    async for mode, data in stream:
        if mode == "messages":
            chunk, _meta = data
            if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str):
                tokens.append(chunk.content)
        else:
            final_state = data

    _assert_agent_loop(model, final_state["messages"])
    assert "".join(tokens) == "Final answer based on: result for fathom"


def test_a_misspelled_keyword_is_refused_instead_of_leaving_the_script_empty():
    import pydantic
    import pytest

    from fathom.testing import ScriptedModel

    with pytest.raises(pydantic.ValidationError, match="responses"):
        ScriptedModel(responses=["hello"])  # type: ignore[call-arg]
