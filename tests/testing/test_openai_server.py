"""Tests for `fathom.testing.ScriptedOpenAIServer` with real HTTP clients on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI

from fathom.testing import (
    Rendezvous,
    ScriptedModel,
    ScriptedOpenAIServer,
    ScriptRequest,
    ai,
    tool_call,
)


@tool
def search(query: str) -> str:
    """Search the corpus for `query`."""
    return f"result for {query}"


@tool
def weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


def _client(srv: ScriptedOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url=srv.base_url, api_key="scripted", model="scripted", **kwargs)


@pytest.fixture
def served() -> Iterator[tuple[ScriptedModel, ScriptedOpenAIServer]]:
    """A policy-driven model behind a running server."""
    model = ScriptedModel(policy=lambda req: f"echo: {req.last_human_text}")
    with ScriptedOpenAIServer(model) as srv:
        yield model, srv


TWO_CALLS = ai(
    "Checking both.",
    tool_call("search", {"query": "fathom"}),
    tool_call("weather", {"city": "Oslo"}, id="w1"),
)


def test_base_url_and_models_endpoint(served: tuple[ScriptedModel, ScriptedOpenAIServer]) -> None:
    _model, srv = served
    assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
    assert srv.base_url == f"{srv.url}/v1"

    response = httpx.get(f"{srv.base_url}/models")

    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == ["scripted"]


def test_invoke_with_tools_gets_tool_calls_back() -> None:
    model = ScriptedModel(replies=[TWO_CALLS])
    with ScriptedOpenAIServer(model) as srv:
        reply = _client(srv).bind_tools([search, weather]).invoke("look things up")

    assert isinstance(reply, AIMessage)
    assert reply.content == "Checking both."
    assert [(tc["name"], tc["args"], tc["id"]) for tc in reply.tool_calls] == [
        ("search", {"query": "fathom"}, "call_0_0"),
        ("weather", {"city": "Oslo"}, "w1"),
    ]
    assert reply.response_metadata["finish_reason"] == "tool_calls"
    (request,) = model.requests
    assert request.tool_names == ["search", "weather"]
    assert request.tools[0]["function"] == convert_to_openai_tool(search)["function"]
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] == request.input_tokens
    assert reply.usage_metadata["output_tokens"] == request.output_tokens


def test_invoke_round_trips_system_and_content_parts(
    served: tuple[ScriptedModel, ScriptedOpenAIServer],
) -> None:
    model, srv = served
    messages = [
        SystemMessage("be terse"),
        HumanMessage(content=[{"type": "text", "text": "part one"}]),
        AIMessage("ok"),
        HumanMessage("part two"),
    ]

    reply = _client(srv).invoke(messages)

    assert reply.content == "echo: part two"
    assert reply.response_metadata["finish_reason"] == "stop"
    (request,) = model.requests
    assert request.system_prompt == "be terse"
    assert [m.type for m in request.messages] == ["system", "human", "ai", "human"]
    assert request.messages[1].text == "part one"


def test_http_and_direct_calls_see_the_same_request() -> None:
    history = [SystemMessage("sys"), HumanMessage("hi")]
    direct = ScriptedModel(replies=[TWO_CALLS])
    direct.bind_tools([search, weather]).invoke(history)
    remote = ScriptedModel(replies=[TWO_CALLS])
    with ScriptedOpenAIServer(remote) as srv:
        _client(srv).bind_tools([search, weather]).invoke(history)

    assert remote.requests[0].canonical_json() == direct.requests[0].canonical_json()


@pytest.mark.parametrize("stream_usage", [True, False])
def test_stream_with_tools_sums_to_the_reply(stream_usage: bool) -> None:
    model = ScriptedModel(replies=[TWO_CALLS], stream_chunk_chars=4)
    with ScriptedOpenAIServer(model) as srv:
        llm = _client(srv, stream_usage=stream_usage).bind_tools([search, weather])
        chunks = list(llm.stream("look things up"))

    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert sum(1 for c in chunks if c.content) == len("Checking both.") // 4 + 1
    total = cast(AIMessageChunk, chunks[0])
    for chunk in chunks[1:]:
        total += cast(AIMessageChunk, chunk)
    assert total.content == "Checking both."
    assert [(tc["name"], tc["args"], tc["id"]) for tc in total.tool_calls] == [
        ("search", {"query": "fathom"}, "call_0_0"),
        ("weather", {"city": "Oslo"}, "w1"),
    ]
    assert total.response_metadata["finish_reason"] == "tool_calls"
    if stream_usage:
        assert total.usage_metadata is not None
        assert total.usage_metadata["input_tokens"] == model.requests[0].input_tokens
        assert total.usage_metadata["output_tokens"] == model.requests[0].output_tokens
    else:
        assert total.usage_metadata is None


def test_raw_stream_is_well_formed_sse() -> None:
    model = ScriptedModel(replies=[ai("hey", tool_call("search", {"query": "q"}))])
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with ScriptedOpenAIServer(model) as srv:
        response = httpx.post(f"{srv.base_url}/chat/completions", json=body)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in response.text.splitlines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    finish = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    assert finish[-1] == "tool_calls"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] > 0


def _agent_model() -> ScriptedModel:
    def final(req: ScriptRequest) -> str:
        (result,) = req.tool_results
        return f"Final answer based on: {result.content}"

    return ScriptedModel(replies=[ai("", tool_call("search", {"query": "fathom"})), final])


def test_create_agent_loop_over_http_with_streaming() -> None:
    model = _agent_model()
    with ScriptedOpenAIServer(model) as srv:
        agent = create_agent(
            _client(srv, streaming=True, stream_usage=True),
            tools=[search],
            system_prompt="You are a test agent.",
        )
        result = agent.invoke({"messages": [HumanMessage("look up fathom")]})

    messages = result["messages"]
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1].tool_calls[0]["id"] == "call_0_0"
    assert messages[-1].content == "Final answer based on: result for fathom"
    assert messages[-1].usage_metadata is not None
    first, second = model.requests
    assert first.system_prompt == "You are a test agent."
    assert first.tool_names == ["search"]
    tool_message = second.messages[-1]
    assert isinstance(tool_message, ToolMessage)
    assert (tool_message.tool_call_id, tool_message.content) == ("call_0_0", "result for fathom")


async def test_concurrent_async_requests_overlap() -> None:
    # Every request waits in the server until all four are in flight at once.
    meet = Rendezvous(4)
    model = ScriptedModel(policy=lambda req: f"echo: {req.last_human_text}", rendezvous=meet)
    with ScriptedOpenAIServer(model) as srv:
        llm = _client(srv)
        replies = await asyncio.gather(*(llm.ainvoke(f"q{i}") for i in range(4)))

    assert meet.max_in_flight == 4
    assert sorted(r.content for r in replies) == [f"echo: q{i}" for i in range(4)]


# --------------------------------------------------------------------------- errors


def test_bad_json_is_a_400_and_the_server_keeps_serving(
    served: tuple[ScriptedModel, ScriptedOpenAIServer],
) -> None:
    _model, srv = served
    url = f"{srv.base_url}/chat/completions"
    with httpx.Client() as client:
        bad = client.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
        missing = client.post(url, json={"model": "scripted"})
        not_object = client.post(url, json={"messages": ["hi"]})
        good = client.post(url, json={"messages": [{"role": "user", "content": "still here"}]})

    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in bad.json()["error"]["message"]
    assert missing.status_code == 400
    assert "'messages' is required" in missing.json()["error"]["message"]
    assert not_object.status_code == 400
    assert "messages[0]" in not_object.json()["error"]["message"]
    assert good.status_code == 200
    assert good.json()["choices"][0]["message"]["content"] == "echo: still here"
    assert _client(srv).invoke("and via ChatOpenAI").content == "echo: and via ChatOpenAI"


def test_unknown_path_is_a_404(served: tuple[ScriptedModel, ScriptedOpenAIServer]) -> None:
    _model, srv = served

    post = httpx.post(f"{srv.url}/v1/completions", json={"prompt": "x"})
    get = httpx.get(f"{srv.url}/nowhere")

    assert (post.status_code, get.status_code) == (404, 404)
    assert post.json()["error"]["code"] == "not_found"


def test_script_exhausted_is_a_500_that_is_not_retried() -> None:
    model = ScriptedModel(replies=["only one"])
    with ScriptedOpenAIServer(model) as srv:
        assert _client(srv).invoke("first").content == "only one"
        raw = httpx.post(
            f"{srv.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": "second"}]},
        )
        with pytest.raises(openai.InternalServerError, match="1 replies were scripted"):
            _client(srv, max_retries=2).invoke("third")

    assert raw.status_code == 500
    assert raw.headers["x-should-retry"] == "false"
    error = raw.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "script_exhausted"
    assert "no policy is set" in error["message"] and "second" in error["message"]
    assert model.calls == 3  # the SDK obeyed x-should-retry: false


def test_exception_in_script_is_a_500_with_its_text() -> None:
    def broken(req: ScriptRequest) -> str:
        raise ValueError("script blew up")

    model = ScriptedModel(replies=[broken, "fine again"])
    with ScriptedOpenAIServer(model) as srv:
        url = f"{srv.base_url}/chat/completions"
        body = {"messages": [{"role": "user", "content": "x"}]}
        failed = httpx.post(url, json=body)
        recovered = httpx.post(url, json=body)

    assert failed.status_code == 500
    assert failed.json()["error"]["message"] == "ValueError: script blew up"
    assert recovered.json()["choices"][0]["message"]["content"] == "fine again"


def test_start_and_stop_are_explicit_and_idempotent() -> None:
    srv = ScriptedOpenAIServer(ScriptedModel(replies=["hi"]))
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.url
    srv.start()
    srv.start()
    url = srv.url
    assert httpx.get(f"{url}/v1/models").status_code == 200
    srv.stop()
    srv.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/models")
