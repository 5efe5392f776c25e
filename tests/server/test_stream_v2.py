"""The thread-centric streaming protocol, as langgraph-sdk 0.4.14 documents it:
`async with client.threads.stream(assistant_id=...) as thread`, `thread.run.start(...)`,
`thread.values`, `thread.output`, `thread.messages` (one chat-model stream per model reply, its
text streamed in content-block deltas), `thread.tool_calls`, `thread.interrupts` and
`thread.run.respond(...)`, over its
SSE transport (`POST /threads/{id}/commands` and `POST /threads/{id}/stream/events`), and the
replay of a thread's events after a `since` cursor.

The same client code runs against `fathom serve` and `langgraph dev`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.stream.transport.http import ProtocolSseTransport
from tests.postgres import postgres_uri
from tests.server.servers import ServerProcess, copy_deployment, fathom_serve_available
from tests.server.support import eventually, user

__all__ = ["postgres_uri"]  # the fixture, imported for this module's tests

DEADLINE_S = 60.0
"""Bounds a hang; the scripted runs end in milliseconds."""


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return str(content)


async def _events_until_completed(
    transport: ProtocolSseTransport,
    params: dict[str, Any],
    runs: int,
    start: Callable[[], Awaitable[None]] | None = None,
) -> list[dict[str, Any]]:
    """The events of one stream until `runs` root `lifecycle` ends; then it is closed.
    `start` is awaited once the server answered the subscription."""
    handle = transport.open_event_stream(params)
    seen: list[dict[str, Any]] = []
    ended = 0
    try:
        async with asyncio.timeout(DEADLINE_S):
            if start is not None:
                await handle.ready
                await start()
            async for event in handle.events:
                seen.append(dict(event))
                data = event["params"].get("data") or {}
                if (
                    event["method"] == "lifecycle"
                    and not event["params"].get("namespace")
                    and data.get("event") in ("completed", "failed")
                ):
                    ended += 1
                    if ended == runs:
                        break
    finally:
        await handle.close()
    return seen


async def test_a_run_started_by_a_command_streams_its_values_and_output(
    client: LangGraphClient,
) -> None:
    async with client.threads.stream(assistant_id="agent") as thread:
        await thread.run.start(input=user("hello"))
        async with asyncio.timeout(DEADLINE_S):
            snapshots = [snapshot async for snapshot in thread.values]
            output = await thread.output
    assert _text(output["messages"][-1]) == "echo: hello"
    assert any(
        _text(message) == "echo: hello"
        for snapshot in snapshots
        for message in (snapshot or {}).get("messages", [])
    ), "the run's values reached the stream"


async def _message_texts(thread: Any) -> list[str]:
    """The text of every root message stream of the thread's run, in order.

    The streams are read after the iteration ends: the projection feeds a stream its events
    while it is being iterated, so a text awaited inside the loop would never complete."""
    streams = [stream async for stream in thread.messages]
    return [await stream.text for stream in streams]


async def _tool_calls(thread: Any) -> list[tuple[str, Any, Any]]:
    """``(name, input, output)`` of every root tool call of the thread's run."""
    handles = [handle async for handle in thread.tool_calls]
    return [(handle.name, handle.input, await handle.output) for handle in handles]


async def test_a_tool_calls_partial_output_streams_as_its_deltas(
    client: LangGraphClient,
) -> None:
    async with client.threads.stream(assistant_id="weather") as thread:
        await thread.run.start(input=user("Bern"))
        async with asyncio.timeout(DEADLINE_S):
            handles = [handle async for handle in thread.tool_calls]
            assert len(handles) == 1
            deltas = [delta async for delta in handles[0].deltas]
            result = await handles[0].output
    assert deltas == ["looking up ", "the sky"]
    assert _text(result) == "sunny in Bern"


async def test_a_commanded_run_streams_its_model_replies_and_tool_calls(
    client: LangGraphClient,
) -> None:
    async with client.threads.stream(assistant_id="weather") as thread:
        await thread.run.start(input=user("Paris"))
        async with asyncio.timeout(DEADLINE_S):
            texts, calls = await asyncio.gather(_message_texts(thread), _tool_calls(thread))
            output = await thread.output
    assert texts, "the model's replies reached thread.messages"
    assert texts[-1] == "The weather: sunny in Paris"
    assert len(calls) == 1
    name, arguments, result = calls[0]
    assert (name, arguments) == ("lookup_weather", {"city": "Paris"})
    assert _text(result) == "sunny in Paris"
    assert _text(output["messages"][-1]) == "The weather: sunny in Paris"


async def test_a_subgraphs_model_replies_and_tool_calls_stream_on_its_handle(
    client: LangGraphClient, server: ServerProcess
) -> None:
    async with client.threads.stream(assistant_id="forecast") as thread:
        await thread.run.start(input=user("Rome"))
        async with asyncio.timeout(DEADLINE_S):
            handles = [handle async for handle in thread.subgraphs]
            forecasters = [handle for handle in handles if handle.graph_name == "forecaster"]
            assert len(forecasters) == 1, [handle.namespace for handle in handles]
            (forecaster,) = forecasters
            texts = await _message_texts(forecaster)
            calls = await _tool_calls(forecaster)
            output = await thread.output
    assert texts and texts[-1] == "The weather: sunny in Rome"
    assert _text(output["messages"][-1]) == "The weather: sunny in Rome"
    if server.kind == "fathom":  # langgraph dev sends no `tools` events from a subgraph
        assert [(name, arguments) for name, arguments, _ in calls] == [
            ("lookup_weather", {"city": "Rome"})
        ]


async def test_message_events_stream_the_reply_in_content_block_deltas(
    client: LangGraphClient,
) -> None:
    async with client.threads.stream(assistant_id="weather") as thread:
        await thread.run.start(input=user("Oslo"))
        await asyncio.wait_for(thread.output, DEADLINE_S)
    transport = ProtocolSseTransport(client=client.http.client, thread_id=thread.thread_id)
    try:
        channels = {"channels": ["messages", "tools", "lifecycle"]}
        seen = await _events_until_completed(transport, channels, 1)
    finally:
        await transport.close()
    kinds = [(event["method"], event["params"]["data"]["event"]) for event in seen
             if event["method"] != "lifecycle"]  # fmt: skip
    assert ("messages", "message-start") in kinds and ("messages", "message-finish") in kinds
    assert [kind for method, kind in kinds if method == "tools"] == [
        "tool-started",
        "tool-output-delta",
        "tool-output-delta",
        "tool-finished",
    ]
    # root messages only: langgraph dev also mirrors each tool result as a message under
    # the namespace `tools:<tool_call_id>`
    root = [e["params"]["data"] for e in seen
            if e["method"] == "messages" and not e["params"]["namespace"]]  # fmt: skip
    deltas = [
        data["delta"]["text"]
        for data in root
        if data["event"] == "content-block-delta" and data["delta"].get("type") == "text-delta"
    ]
    assert len(deltas) > 1, "the reply came in several chunks"
    assert "".join(deltas) == "The weather: sunny in Oslo"


async def test_a_run_started_by_the_classic_api_shows_its_values_but_no_message_events(
    client: LangGraphClient,
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    transport = ProtocolSseTransport(client=client.http.client, thread_id=thread_id)
    channels = {"channels": ["values", "messages", "tools", "lifecycle"]}

    async def start() -> None:  # once subscribed: langgraph dev keeps no classic run's events
        await client.runs.create(
            thread_id, "weather", input=user("Kyiv"), stream_mode=["values", "messages-tuple"]
        )

    try:
        seen = await _events_until_completed(transport, channels, 1, start)
    finally:
        await transport.close()
    methods = {event["method"] for event in seen}
    assert "values" in methods
    assert not methods & {"messages", "tools"}, "only protocol runs carry them"


async def test_the_thread_event_stream_replays_after_a_since_cursor(
    client: LangGraphClient,
) -> None:
    async with client.threads.stream(assistant_id="agent") as thread:
        await thread.run.start(input=user("hello"))
        await asyncio.wait_for(thread.output, DEADLINE_S)
    transport = ProtocolSseTransport(client=client.http.client, thread_id=thread.thread_id)
    try:
        channels = {"channels": ["values", "updates", "lifecycle"]}
        everything = await _events_until_completed(transport, channels, 1)
        seqs = [event["seq"] for event in everything]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert {event["method"] for event in everything} >= {"values", "lifecycle"}
        middle = len(everything) // 2
        since = everything[middle - 1]["seq"]
        rest = await _events_until_completed(transport, {**channels, "since": since}, 1)
        ids = [event["event_id"] for event in rest]
        assert ids == [event["event_id"] for event in everything[middle:]]
    finally:
        await transport.close()


async def test_an_interrupted_run_is_resumed_with_run_respond(
    client: LangGraphClient, server: ServerProcess
) -> None:
    async with client.threads.stream(assistant_id="interrupting") as thread:
        await thread.run.start(input=user("the plan"))

        async def interrupted() -> bool:
            return thread.interrupted

        await eventually(interrupted, "the run to wait on its interrupt")
        assert len(thread.interrupts) == 1
        if server.kind == "fathom":  # langgraph dev sends the value as `payload` only
            assert thread.interrupts[0]["value"] == {"question": "approve the plan?"}
        await thread.run.respond("yes")
        output = await asyncio.wait_for(thread.output, DEADLINE_S)
    assert output["answer"] == "yes"
    assert _text(output["messages"][-1]) == "answer: yes"


async def test_bad_commands_and_subscriptions_get_clear_errors(
    client: LangGraphClient, server: ServerProcess
) -> None:
    if server.kind != "fathom":
        pytest.skip("fathom's own errors (langgraph dev answers 400 with other words)")
    thread_id = (await client.threads.create())["thread_id"]
    transport = ProtocolSseTransport(client=client.http.client, thread_id=thread_id)
    try:
        unknown = await transport.send_command({"id": 1, "method": "run.fly", "params": {}})
        assert unknown is not None and unknown["error"] == "unknown_command"
        no_graph = await transport.send_command(
            {"id": 2, "method": "run.start", "params": {"assistant_id": "no-such-graph"}}
        )
        assert no_graph is not None and no_graph["type"] == "error"
        assert "no-such-graph" in no_graph["message"]
        handle = transport.open_event_stream({"channels": ["everything"]})
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await handle.ready
        assert refused.value.response.status_code == 422
        await handle.close()
    finally:
        await transport.close()


@pytest.fixture
def replicas(tmp_path: Path, postgres_uri: str) -> Iterator[list[ServerProcess]]:
    """Two `fathom serve` replicas on one PostgreSQL database (started by the test)."""
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path / "deploy")
    options = ("--database", postgres_uri, "--lease-seconds", "5")
    made = [
        ServerProcess(kind="fathom", workdir=workdir, name=name, extra_args=options)
        for name in ("-a", "-b")
    ]
    yield made
    for replica in made:
        replica.stop()


async def test_another_replica_streams_a_commanded_runs_messages_and_tool_calls(
    replicas: list[ServerProcess],
) -> None:
    first, second = replicas
    first.start()  # the only replica when the run starts: it runs there
    one = get_client(url=first.url, api_key=None)
    two = get_client(url=second.url, api_key=None)
    try:
        async with one.threads.stream(assistant_id="weather") as started:
            await started.run.start(input=user("Lima"))
            await asyncio.wait_for(started.output, DEADLINE_S)
        second.start()
        async with two.threads.stream(started.thread_id, assistant_id="weather") as thread:
            async with asyncio.timeout(DEADLINE_S):
                texts, calls = await asyncio.gather(_message_texts(thread), _tool_calls(thread))
    finally:
        await one.http.client.aclose()
        await two.http.client.aclose()
    assert texts[-1] == "The weather: sunny in Lima"
    assert [(name, arguments) for name, arguments, _ in calls] == [
        ("lookup_weather", {"city": "Lima"})
    ]
    assert _text(calls[0][2]) == "sunny in Lima"
