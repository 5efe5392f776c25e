"""Bulk calls of the SDK: run batches, cancel many, count, prune, and thread search options.

The tests taking `client` run once against `fathom serve` and once against `langgraph dev`,
and assert what both answer. Those named `..._on_fathom` cover what `langgraph dev` does not
do (the batch error's index, `keep_latest` pruning, which its in-memory runtime refuses) or
does differently; each says which.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import RunCreate
from tests.postgres import postgres_uri
from tests.server.servers import ServerProcess, copy_deployment
from tests.server.support import Gate, contents, eventually, user, wait_started, wait_status

__all__ = ["postgres_uri"]  # the fixture, imported for the PostgreSQL test


async def _status_of(call: Any) -> int:
    """The HTTP status an SDK call fails with."""
    with pytest.raises(httpx.HTTPStatusError) as failed:
        await call
    return failed.value.response.status_code


async def _gone(client: LangGraphClient, thread_id: str) -> bool:
    try:
        await client.threads.get(thread_id)
    except httpx.HTTPStatusError as error:
        return error.response.status_code == 404
    return False


async def _held_run(client: LangGraphClient, gate: Gate) -> tuple[str, str]:
    """A `gated` run on a new thread, running at its gate: (thread_id, run_id)."""
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "gated", input=gate.input("held"))
    await wait_started(gate)
    await wait_status(client, thread_id, run["run_id"], "running")
    return thread_id, run["run_id"]


def _payload(marker: str, text: str, **more: Any) -> RunCreate:
    body: dict[str, Any] = {
        "assistant_id": "custom",
        "input": user(text),
        "metadata": {"batch": marker},
        "on_completion": "keep",
        **more,
    }
    return body  # type: ignore[return-value]  # RunCreate lacks on_completion; the API has it


# ------------------------------------------------------------------------- runs.create_batch


async def test_create_batch_starts_each_payload_as_a_stateless_run(
    client: LangGraphClient,
) -> None:
    marker = uuid.uuid4().hex
    runs = await client.runs.create_batch([_payload(marker, "one"), _payload(marker, "two")])

    assert len(runs) == 2
    assert len({r["run_id"] for r in runs}) == len({r["thread_id"] for r in runs}) == 2
    assert all(r["assistant_id"] == runs[0]["assistant_id"] for r in runs)
    assert all(r["status"] in ("pending", "running", "success") for r in runs)
    results = [await client.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    assert [contents(result) for result in results] == [["one", "reported"], ["two", "reported"]]
    kept = await client.threads.search(metadata={"batch": marker}, limit=10)
    assert {t["thread_id"] for t in kept} == {r["thread_id"] for r in runs}


async def test_create_batch_with_an_invalid_item_answers_422_and_starts_nothing(
    client: LangGraphClient,
) -> None:
    marker = uuid.uuid4().hex
    no_assistant: Any = {"input": user("lost"), "metadata": {"batch": marker}}

    status = await _status_of(client.runs.create_batch([_payload(marker, "ok"), no_assistant]))

    assert status == 422
    assert await client.threads.search(metadata={"batch": marker}) == []


async def test_create_batch_refuses_an_empty_list(client: LangGraphClient) -> None:
    assert await _status_of(client.runs.create_batch([])) == 422


async def test_create_batch_error_names_the_item_and_nothing_starts_on_fathom(
    fathom_client: LangGraphClient,
) -> None:
    # langgraph dev answers an unknown assistant in one item with 422 only after the other
    # items' runs were created, words its schema errors as `instance[N]`, and ignores an
    # item's `thread_id` (the run gets a new thread).
    marker = uuid.uuid4().hex
    unknown: Any = _payload(marker, "x", assistant_id="no-such-graph")
    bad_mode: Any = _payload(marker, "x", stream_mode=["nope"])

    with pytest.raises(httpx.HTTPStatusError) as missing:
        await fathom_client.runs.create_batch([_payload(marker, "ok"), unknown])
    with pytest.raises(httpx.HTTPStatusError) as invalid:
        await fathom_client.runs.create_batch([_payload(marker, "ok"), _payload(marker, "ok"),
                                               bad_mode])  # fmt: skip

    with pytest.raises(httpx.HTTPStatusError) as stateful:
        await fathom_client.runs.create_batch([_payload(marker, "x", thread_id=str(uuid.uuid4()))])

    assert missing.value.response.status_code == 404
    assert "Run 1 of the batch" in missing.value.response.json()["detail"]
    assert invalid.value.response.status_code == 422
    assert "Run 2 of the batch" in invalid.value.response.json()["detail"]
    assert stateful.value.response.status_code == 422
    assert "'thread_id'" in stateful.value.response.json()["detail"]
    assert await fathom_client.threads.search(metadata={"batch": marker}) == []


# -------------------------------------------------------------------------- runs.cancel_many


async def test_cancel_many_cancels_the_given_runs_of_a_thread(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    gate = new_gate()
    thread_id, run_id = await _held_run(client, gate)

    await client.runs.cancel_many(thread_id=thread_id, run_ids=[run_id, str(uuid.uuid4())])

    await wait_status(client, thread_id, run_id, "interrupted")
    gate.release()


async def test_cancel_many_with_rollback_deletes_the_runs(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    gate = new_gate()
    thread_id, run_id = await _held_run(client, gate)

    await client.runs.cancel_many(thread_id=thread_id, run_ids=[run_id], action="rollback")

    async def deleted() -> bool:
        return not await client.runs.list(thread_id)

    await eventually(deleted, "the rolled-back run to be deleted")
    gate.release()


async def test_cancel_many_by_status_cancels_running_runs_of_every_thread(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    first, second = new_gate(), new_gate()
    held = [await _held_run(client, first), await _held_run(client, second)]

    await client.runs.cancel_many(status="running")

    for thread_id, run_id in held:
        await wait_status(client, thread_id, run_id, "interrupted")
    first.release()
    second.release()


async def test_cancel_many_answers_404_when_no_chosen_run_is_active(
    client: LangGraphClient,
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "custom", input=user("done"))
    finished = (await client.runs.list(thread_id))[0]["run_id"]

    unknown = await _status_of(
        client.runs.cancel_many(thread_id=thread_id, run_ids=[str(uuid.uuid4())])
    )
    ended = await _status_of(client.runs.cancel_many(thread_id=thread_id, run_ids=[finished]))

    assert unknown == ended == 404
    assert (await client.runs.get(thread_id, finished))["status"] == "success"


async def test_cancel_many_refuses_incomplete_or_mixed_selections(
    client: LangGraphClient,
) -> None:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())

    only_thread = await _status_of(client.runs.cancel_many(thread_id=thread_id))
    only_runs = await _status_of(client.runs.cancel_many(run_ids=[run_id]))
    mixed = await _status_of(client.runs.cancel_many(thread_id=thread_id, status="pending"))
    nothing = await _status_of(client.runs.cancel_many())
    bad_status: Any = "finished"
    unknown_status = await _status_of(client.runs.cancel_many(status=bad_status))

    assert only_thread == only_runs == mixed == nothing == unknown_status == 422


# ----------------------------------------------------------------------------- threads.count


async def test_count_counts_threads_matching_metadata_values_and_status(
    client: LangGraphClient,
) -> None:
    marker = uuid.uuid4().hex
    for kind in ("a", "a", "b"):
        thread_id = (await client.threads.create(metadata={"count": marker, "kind": kind}))[
            "thread_id"
        ]
        await client.runs.wait(thread_id, "custom", input=user(f"{marker}-{kind}"))

    everything = await client.threads.count(metadata={"count": marker})
    of_kind = await client.threads.count(metadata={"count": marker, "kind": "a"})
    idle = await client.threads.count(metadata={"count": marker}, status="idle")
    busy = await client.threads.count(metadata={"count": marker}, status="busy")

    assert (everything, of_kind, idle, busy) == (3, 2, 3, 0)


async def test_count_values_filter_matches_lists_by_containment_on_fathom(
    fathom_client: LangGraphClient,
) -> None:
    # As PostgreSQL's jsonb @> on langgraph-api; langgraph dev's in-memory filter compares
    # lists whole, so it finds none of these.
    client = fathom_client
    marker = uuid.uuid4().hex
    for text in ("a", "b"):
        thread_id = (await client.threads.create(metadata={"values": marker}))["thread_id"]
        await client.runs.wait(thread_id, "custom", input=user(f"{marker}-{text}"))

    said_b = await client.threads.count(
        metadata={"values": marker}, values={"messages": [{"content": f"{marker}-b"}]}
    )
    replied = await client.threads.count(
        metadata={"values": marker}, values={"messages": [{"content": "reported"}]}
    )
    found = await client.threads.search(
        metadata={"values": marker}, values={"messages": [{"content": f"{marker}-a"}]}
    )

    assert (said_b, replied, len(found)) == (1, 2, 1)


async def test_count_refuses_an_unknown_status(client: LangGraphClient) -> None:
    bad: Any = "sleeping"
    assert await _status_of(client.threads.count(status=bad)) == 422


# ----------------------------------------------------------------------------- threads.prune


async def test_prune_deletes_threads_and_their_state_and_skips_unknown_ids(
    client: LangGraphClient,
) -> None:
    kept = (await client.threads.create())["thread_id"]
    pruned = []
    for text in ("one", "two"):
        thread_id = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread_id, "custom", input=user(text))
        pruned.append(thread_id)

    result = await client.threads.prune([*pruned, str(uuid.uuid4())])

    assert result == {"pruned_count": 2}
    for thread_id in pruned:
        assert await _gone(client, thread_id)
        assert await _status_of(client.threads.get_state(thread_id)) == 404
    assert (await client.threads.get(kept))["thread_id"] == kept
    assert await client.threads.prune([]) == {"pruned_count": 0}


async def test_prune_removes_a_thread_whose_run_is_active(
    client: LangGraphClient, new_gate: Callable[[], Gate]
) -> None:
    gate = new_gate()
    thread_id, _run_id = await _held_run(client, gate)

    result = await client.threads.prune([thread_id])
    gate.release()

    assert result == {"pruned_count": 1}
    assert await _gone(client, thread_id)


async def test_prune_refuses_bad_ids_bad_strategy_and_a_missing_list(
    client: LangGraphClient,
) -> None:
    bad_strategy: Any = "shred"

    bad_id = await _status_of(client.threads.prune(["not a thread id!"]))
    strategy = await _status_of(client.threads.prune([str(uuid.uuid4())], strategy=bad_strategy))
    missing = await _status_of(client.http.post("/threads/prune", json={}))

    assert bad_id == strategy == missing == 422


async def test_prune_keep_latest_is_refused_on_in_memory_and_sqlite_storage(
    client: LangGraphClient,
) -> None:
    # `langgraph dev` (in memory) and `fathom serve` on SQLite have no checkpoint pruning.
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "custom", input=user("stays"))

    status = await _status_of(client.threads.prune([thread_id], strategy="keep_latest"))

    assert status == 422
    assert contents((await client.threads.get_state(thread_id))["values"]) == [
        "stays", "reported",
    ]  # fmt: skip


async def test_cancel_many_refuses_an_unknown_action_on_fathom(
    fathom_client: LangGraphClient,
) -> None:
    # langgraph dev takes any other action as "interrupt".
    response = await fathom_client.http.client.post(
        "/runs/cancel", params={"action": "shred"}, json={"status": "all"}
    )

    assert response.status_code == 422
    assert "'action'" in response.json()["detail"]


@pytest.fixture
async def postgres_client(tmp_path: Path, postgres_uri: str) -> AsyncIterator[LangGraphClient]:
    """A client of a `fathom serve` on PostgreSQL storage, whose checkpointer can prune."""
    workdir = copy_deployment(tmp_path / "deploy")
    server = ServerProcess(kind="fathom", workdir=workdir, name="-postgres",
                           extra_args=("--database", postgres_uri))  # fmt: skip
    server.start()
    sdk = get_client(url=server.url, api_key=None)
    try:
        yield sdk
    finally:
        await sdk.http.client.aclose()
        server.stop()


async def test_prune_keep_latest_keeps_the_threads_and_only_their_latest_checkpoint_on_fathom(
    postgres_client: LangGraphClient,
) -> None:
    # langgraph dev answers 422 (its in-memory runtime does not support keep_latest).
    client = postgres_client
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "custom", input=user("one"))
    await client.runs.wait(thread_id, "custom", input=user("two"))
    before = await client.threads.get_state(thread_id)
    assert len(await client.threads.get_history(thread_id, limit=100)) > 1

    result = await client.threads.prune([thread_id, str(uuid.uuid4())], strategy="keep_latest")

    assert result == {"pruned_count": 1}
    after = await client.threads.get_state(thread_id)
    assert after["values"] == before["values"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    history = await client.threads.get_history(thread_id, limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in history] == [
        before["checkpoint"]["checkpoint_id"]
    ]
    followed = await client.runs.wait(thread_id, "custom", input=user("three"))
    assert contents(followed)[-2:] == ["three", "reported"]


# ---------------------------------------------------------------------------- threads.search


def _stamp(thread: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(thread["updated_at"]).replace("Z", "+00:00"))


async def test_search_sorted_by_updated_at_finds_threads_updated_since_a_moment(
    client: LangGraphClient,
) -> None:
    # The SDK's search has no updated_at filter: a job reads newest-updated first and stops
    # at the first thread older than its last pass.
    marker = uuid.uuid4().hex
    old = (await client.threads.create(metadata={"since": marker}))["thread_id"]
    touched = (await client.threads.create(metadata={"since": marker}))["thread_id"]
    last_pass = _stamp(await client.threads.get(touched))
    await client.runs.wait(touched, "custom", input=user("new"))

    newest_first = await client.threads.search(
        metadata={"since": marker}, sort_by="updated_at", sort_order="desc", limit=10
    )
    default_order = await client.threads.search(metadata={"since": marker}, limit=10)
    since = [t["thread_id"] for t in newest_first if _stamp(t) > last_pass]

    assert [t["thread_id"] for t in newest_first] == [touched, old]
    assert [t["thread_id"] for t in default_order] == [touched, old]
    assert since == [touched]
    oldest_first = await client.threads.search(
        metadata={"since": marker}, sort_by="updated_at", sort_order="asc", limit=10
    )
    assert [t["thread_id"] for t in oldest_first] == [old, touched]
    by_state = await client.threads.search(
        metadata={"since": marker}, sort_by="state_updated_at", limit=10
    )
    assert by_state[0]["thread_id"] == touched


async def test_search_select_returns_only_the_chosen_fields(client: LangGraphClient) -> None:
    marker = uuid.uuid4().hex
    thread_id = (await client.threads.create(metadata={"select": marker}))["thread_id"]

    found = await client.threads.search(metadata={"select": marker}, select=["thread_id", "status"])

    assert found == [{"thread_id": thread_id, "status": "idle"}]


async def test_search_extract_returns_values_at_paths(client: LangGraphClient) -> None:
    marker = uuid.uuid4().hex
    thread_id = (await client.threads.create(metadata={"extract": marker}))["thread_id"]
    await client.runs.wait(thread_id, "custom", input=user("first words"))

    found = await client.threads.search(
        metadata={"extract": marker},
        select=["thread_id"],
        extract={
            "last": "values.messages[-1].content",
            "first": "values.messages[0].content",
            "tag": "metadata.extract",
            "missing": "values.messages[9].content",
        },
    )

    assert found == [{"thread_id": thread_id, "extracted": {
        "last": "reported", "first": "first words", "tag": marker, "missing": None,
    }}]  # fmt: skip


async def test_search_refuses_unknown_select_fields_bad_extract_paths_and_limits(
    client: LangGraphClient,
) -> None:
    unknown_field: Any = ["thread_id", "secret"]

    select = await _status_of(client.threads.search(select=unknown_field))
    root = await _status_of(client.threads.search(extract={"x": "kwargs.input"}))
    alias = await _status_of(client.threads.search(extract={"status": "values.a"}))
    too_many = await _status_of(
        client.threads.search(extract={f"a{i}": "values.a" for i in range(11)})
    )
    limit = await _status_of(client.http.post("/threads/search", json={"limit": 0}))
    sort: Any = "size"
    sort_by = await _status_of(client.threads.search(sort_by=sort))

    assert select == root == alias == too_many == limit == sort_by == 422


async def test_search_pages_with_pagination_headers(client: LangGraphClient) -> None:
    marker = uuid.uuid4().hex
    for _ in range(3):
        await client.threads.create(metadata={"page": marker})
    body = {"metadata": {"page": marker}, "limit": 2}
    http = client.http.client

    first = await http.post("/threads/search", json=body)
    last = await http.post("/threads/search", json={**body, "offset": 2})

    assert len(first.json()) == 2
    assert first.headers["X-Pagination-Next"] == "2"
    assert len(last.json()) == 1
    assert "X-Pagination-Next" not in last.headers
    assert last.headers["X-Pagination-Total"] == "3"


# ------------------------------------------------------------------------------ fathom only


@pytest.fixture
async def fathom_client(server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    """A client of the session's `fathom serve` (the test is skipped for other kinds)."""
    if server.kind != "fathom":
        pytest.skip("this behaviour is fathom's own")
    sdk = get_client(url=server.url, api_key=None)
    try:
        yield sdk
    finally:
        await sdk.http.client.aclose()
