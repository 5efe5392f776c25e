"""SSE streaming, identical on both servers: event names and payload shapes (never timing)."""

from __future__ import annotations

import itertools
from typing import Any

from langgraph_sdk.client import LangGraphClient
from tests.server.support import contents, user


async def _stream(
    client: LangGraphClient, graph: str, text: str, **options: Any
) -> list[tuple[str, Any]]:
    thread = await client.threads.create()
    stream = client.runs.stream(thread["thread_id"], graph, input=user(text), **options)
    return [(part.event, part.data) async for part in stream]


def _names(parts: list[tuple[str, Any]]) -> list[str]:
    return [name for name, _ in parts]


async def test_stream_opens_with_metadata_naming_the_run(client: LangGraphClient) -> None:
    parts = await _stream(client, "agent", "hi", stream_mode="values")

    name, data = parts[0]
    assert name == "metadata"
    assert set(data) >= {"run_id", "attempt"}
    assert data["attempt"] == 1


async def test_values_mode_streams_each_state_and_ends_with_the_final_one(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "agent", "hi", stream_mode="values")

    values = [data for name, data in parts if name == "values"]
    assert set(_names(parts)) == {"metadata", "values"}
    assert contents(values[0]) == ["hi"]
    assert contents(values[-1]) == ["hi", "echo: hi"]


async def test_updates_mode_streams_one_event_per_node_keyed_by_node(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "nested", "hi", stream_mode="updates")

    updates = [data for name, data in parts if name == "updates"]
    assert set(_names(parts)) == {"metadata", "updates"}
    assert [next(iter(update)) for update in updates] == ["parent_step", "child"]
    assert contents(updates[0]["parent_step"]) == ["parent: hi"]


async def test_messages_tuple_mode_streams_chunk_and_metadata_pairs(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "agent", "hello", stream_mode="messages-tuple")

    pairs = [data for name, data in parts if name == "messages"]
    assert set(_names(parts)) == {"metadata", "messages"}
    assert pairs and all(len(pair) == 2 for pair in pairs)
    chunks = [chunk for chunk, _ in pairs]
    assert {chunk["type"] for chunk in chunks} == {"AIMessageChunk"}
    assert "".join(chunk["content"] for chunk in chunks) == "echo: hello"
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert all(meta["langgraph_node"] == "model" for _, meta in pairs)


async def test_messages_mode_streams_metadata_then_growing_partials(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "agent", "hello", stream_mode="messages")

    names = [name for name in _names(parts) if name != "metadata"]
    assert names[0] == "messages/metadata"
    assert set(names) <= {"messages/metadata", "messages/partial", "messages/complete"}
    partials = [data for name, data in parts if name == "messages/partial"]
    texts = [data[0]["content"] for data in partials]
    assert texts[-1] == "echo: hello"
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert {data[0]["type"] for data in partials} == {"ai"}


async def test_custom_mode_streams_what_the_graph_writes(client: LangGraphClient) -> None:
    parts = await _stream(client, "custom", "hi", stream_mode="custom")

    assert [data for name, data in parts if name == "custom"] == [
        {"progress": 0}, {"progress": 1}, {"progress": 2},
    ]  # fmt: skip


async def test_several_modes_at_once_interleave_under_their_own_names(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "custom", "hi", stream_mode=["values", "updates", "custom"])

    names = _names(parts)
    assert set(names) == {"metadata", "values", "updates", "custom"}
    assert names.index("custom") < names.index("updates")
    assert [d for n, d in parts if n == "updates"] == [
        {"report": {"messages": [_ai_shape(parts)]}}
    ]


def _ai_shape(parts: list[tuple[str, Any]]) -> dict[str, Any]:
    update = next(d for n, d in parts if n == "updates")
    message = update["report"]["messages"][0]
    assert message["type"] == "ai"
    assert message["content"] == "reported"
    return message


async def test_stream_subgraphs_namespaces_child_events_with_pipe_names(
    client: LangGraphClient,
) -> None:
    parts = await _stream(
        client, "nested", "hi", stream_mode=["updates", "values"], stream_subgraphs=True
    )

    names = _names(parts)
    child_updates = [d for n, d in parts if n.startswith("updates|child:")]
    assert [list(update) for update in child_updates] == [["child_step"]]
    assert contents(child_updates[0]["child_step"]) == ["child: hi"]
    assert any(n.startswith("values|child:") for n in names)
    top_level = {n for n in names if "|" not in n}
    assert top_level == {"metadata", "updates", "values"}
    assert [next(iter(d)) for n, d in parts if n == "updates"] == ["parent_step", "child"]


async def test_without_stream_subgraphs_child_events_stay_hidden(client: LangGraphClient) -> None:
    parts = await _stream(client, "nested", "hi", stream_mode="updates")

    assert not any("|" in name for name in _names(parts))


async def test_debug_mode_streams_checkpoints_tasks_and_results(client: LangGraphClient) -> None:
    parts = await _stream(client, "nested", "hi", stream_mode="debug")

    debug = [data for name, data in parts if name == "debug"]
    assert {event["type"] for event in debug} == {"checkpoint", "task", "task_result"}
    tasks = [event["payload"]["name"] for event in debug if event["type"] == "task"]
    assert tasks == ["parent_step", "child"]
    assert all({"step", "timestamp", "type", "payload"} <= set(event) for event in debug)


async def test_events_mode_streams_langchain_astream_events(client: LangGraphClient) -> None:
    parts = await _stream(client, "custom", "hi", stream_mode="events")

    events = [data for name, data in parts if name == "events"]
    assert events[0]["event"] == "on_chain_start"
    assert events[-1]["event"] == "on_chain_end"
    assert {"report"} <= {event["name"] for event in events}
    assert all({"event", "name", "run_id"} <= set(event) for event in events)


async def test_failing_run_streams_an_error_event_with_type_and_message(
    client: LangGraphClient,
) -> None:
    parts = await _stream(client, "failing", "boom", stream_mode="values")

    assert parts[-1] == ("error", {"error": "RuntimeError", "message": "scripted failure"})
