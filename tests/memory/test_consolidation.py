"""Background memory consolidation: the watermark's rules, and the graph on a real server.

The watermark tests replay timelines of thread updates and consolidation runs with made-up
times (no clock, no sleeping): runs closer together than any look-back window, runs far
apart, threads sharing a timestamp, a thread committed late at an old timestamp, batches cut
by `max_threads`. Each thread's each update is processed exactly once.

The graph tests serve `consolidation_agent` and a conversation `assistant`
(`tests/memory/consolidation_graphs.py`) on a fathom app in process, driven by the real
`langgraph-sdk` client; the end-to-end test runs them on a `fathom serve` subprocess, with a
6-field cron (every two seconds) that consolidates alice's memory.
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.store.memory import InMemoryStore
from langgraph_sdk import Auth, get_client
from langgraph_sdk.client import LangGraphClient
from tests.memory import consolidation_graphs
from tests.server.servers import (
    ServerProcess,
    copy_deployment,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.server.support import eventually
from tests.system_requirements import needs

from fathom.hosting.client import in_process_client
from fathom.memory.claims import aclaim, arelease
from fathom.memory.consolidation import (
    DEFAULT_MEMORY_PATH,
    WATERMARK_PREFIX,
    ServerThreads,
    create_consolidation_agent,
    load_watermark,
)
from fathom.memory.watermark import ThreadStamp, Watermark, advance, select_due
from fathom.server import create_app
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Timeline:
    """Threads and their `updated_at`, as a server's thread search would list them."""

    def __init__(self) -> None:
        self.updated: dict[str, datetime] = {}
        self.watermark: Watermark | None = None
        self.processed: Counter[tuple[str, datetime]] = Counter()

    def update(self, thread_id: str, when: datetime) -> None:
        self.updated[thread_id] = when

    def newest_first(self) -> list[ThreadStamp]:
        stamps = [ThreadStamp(i, t) for i, t in self.updated.items()]
        return sorted(stamps, key=lambda s: s.updated_at, reverse=True)

    def consolidate(
        self, *, floor: datetime | None = None, limit: int | None = None
    ) -> list[ThreadStamp]:
        """One consolidation run: what it processes, with the watermark advanced over it."""
        due = select_due(self.newest_first(), self.watermark, floor=floor, limit=limit)
        self.processed.update((s.thread_id, s.updated_at) for s in due)
        self.watermark = advance(self.watermark, due)
        return due

    def every_update_processed_once(self) -> bool:
        latest = {(i, t) for i, t in self.updated.items()}
        return latest <= set(self.processed) and max(self.processed.values()) == 1


# ------------------------------------------------------------------------ the watermark


def test_runs_closer_together_than_the_updates_process_each_thread_once() -> None:
    timeline = Timeline()
    for second in range(12):
        timeline.update(f"t{second}", at(second))
        timeline.consolidate()  # a run after every update (and again, with nothing new)
        assert timeline.consolidate() == []
    assert timeline.every_update_processed_once()
    assert len(timeline.processed) == 12


def test_runs_far_apart_miss_nothing_and_process_each_thread_once() -> None:
    timeline = Timeline()
    batches = []
    for second in range(30):
        timeline.update(f"t{second}", at(second))
        if second % 10 == 9:  # a run every ten updates: each window has ten threads
            batches.append(timeline.consolidate())
    assert [len(b) for b in batches] == [10, 10, 10]
    assert timeline.every_update_processed_once()


def test_a_thread_updated_after_it_was_processed_is_processed_again() -> None:
    timeline = Timeline()
    timeline.update("a", at(1))
    timeline.update("b", at(2))
    assert [s.thread_id for s in timeline.consolidate()] == ["a", "b"]
    timeline.update("a", at(3))  # alice comes back to her first conversation
    assert timeline.consolidate() == [ThreadStamp("a", at(3))]
    assert timeline.consolidate() == []
    assert timeline.every_update_processed_once()


def test_a_thread_committed_late_at_the_watermarks_time_is_still_processed_once() -> None:
    timeline = Timeline()
    timeline.update("a", at(5))
    assert timeline.consolidate() == [ThreadStamp("a", at(5))]
    assert timeline.watermark == Watermark(at(5), frozenset({"a"}))
    timeline.update("b", at(5))  # the same timestamp, visible only after the first run
    assert timeline.consolidate() == [ThreadStamp("b", at(5))]
    assert timeline.watermark == Watermark(at(5), frozenset({"a", "b"}))
    assert timeline.consolidate() == []


def test_a_batch_limit_takes_the_oldest_first_and_later_runs_the_rest() -> None:
    timeline = Timeline()
    for thread_id, second in [("a", 1), ("b", 2), ("c", 2), ("d", 2), ("e", 3)]:
        timeline.update(thread_id, at(second))
    batches = [[s.thread_id for s in timeline.consolidate(limit=2)] for _ in range(4)]
    assert batches == [["a", "b"], ["c", "d"], ["e"], []]
    assert timeline.every_update_processed_once()


def test_the_first_run_reads_back_to_the_floor_and_later_runs_from_the_watermark() -> None:
    timeline = Timeline()
    timeline.update("old", at(0))
    timeline.update("recent", at(100))
    assert timeline.consolidate(floor=at(50)) == [ThreadStamp("recent", at(100))]
    timeline.update("newer", at(200))
    # the floor matters no more: the watermark says where the last run stopped
    assert timeline.consolidate(floor=at(190)) == [ThreadStamp("newer", at(200))]
    assert ("old", at(0)) not in timeline.processed


@pytest.mark.parametrize("random_seed", range(25))
def test_random_timelines_process_every_update_exactly_once(random_seed: int) -> None:
    rng = random.Random(random_seed)
    timeline = Timeline()
    clock = 0
    for _ in range(60):
        clock += rng.choice([0, 0, 1, 2])  # timestamps are shared now and then
        timeline.update(f"t{rng.randrange(15)}", at(clock))  # a new thread, or one again
        if rng.random() < 0.3:
            timeline.consolidate(limit=rng.choice([None, 1, 3]))
    while timeline.consolidate(limit=2):
        pass
    assert timeline.every_update_processed_once()


def test_the_watermark_never_moves_back_and_reads_back_from_its_store_value() -> None:
    mark = Watermark(at(10), frozenset({"a", "b"}))
    assert advance(mark, [ThreadStamp("z", at(9))]) == mark
    assert advance(mark, []) == mark
    assert Watermark.from_value(json.loads(json.dumps(mark.to_value()))) == mark
    with pytest.raises(ValueError, match="not a consolidation watermark"):
        Watermark.from_value({"updated_at": "2026-01-01T00:00:00Z"})


def test_bad_settings_are_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="max_threads"):
        create_consolidation_agent(ScriptedModel(replies=["x"]), max_threads=0)
    with pytest.raises(ValueError, match="look_back"):
        create_consolidation_agent(ScriptedModel(replies=["x"]), look_back=timedelta(-1))


# ------------------------------------------------------------------------ claims

CLAIM = ((WATERMARK_PREFIX, "alice"), "/memories/facts.md#claim")


async def test_a_claim_keeps_other_runs_out_until_released_or_expired() -> None:
    store = InMemoryStore()
    hold = timedelta(minutes=10)
    assert await aclaim(store, *CLAIM, run_id="one", now=at(0), hold_for=hold)
    assert not await aclaim(store, *CLAIM, run_id="two", now=at(1), hold_for=hold)
    assert await aclaim(store, *CLAIM, run_id="one", now=at(2), hold_for=hold)  # resumed
    await arelease(store, *CLAIM, run_id="two")  # not its claim: nothing changes
    assert not await aclaim(store, *CLAIM, run_id="two", now=at(3), hold_for=hold)
    await arelease(store, *CLAIM, run_id="one")
    assert await aclaim(store, *CLAIM, run_id="two", now=at(4), hold_for=hold)
    # a run that died holding it blocks the others only until it expires
    assert await aclaim(store, *CLAIM, run_id="three", now=at(4 + 601), hold_for=hold)


async def test_a_run_that_finds_another_runs_claim_merges_nothing_and_leaves_it() -> None:
    client, store = _served()
    thread = await client.threads.create(metadata={"user_id": "alice"})
    await _say(client, thread["thread_id"], "alice", "remember: alice has a cat called Miso")
    now, hold = datetime.now(UTC), timedelta(minutes=10)
    assert await aclaim(store, *CLAIM, run_id="a-run-still-merging", now=now, hold_for=hold)

    answer = await _consolidate(client, "alice")
    assert answer.startswith("Another consolidation of this memory is running")
    assert await _memory(client, "alice") is None
    assert await load_watermark(store, "alice", "/memories/facts.md") is None

    await arelease(store, *CLAIM, run_id="a-run-still-merging")
    assert (await _consolidate(client, "alice")).startswith("merged: ")
    assert await store.aget(*CLAIM) is None  # the run gave its claim up


# ------------------------------------------------------------------------ on a server


def _served() -> tuple[LangGraphClient, InMemoryStore]:
    store = InMemoryStore()
    graphs = {
        "consolidation_agent": consolidation_graphs.consolidation_agent,
        "assistant": consolidation_graphs.assistant,
    }
    return in_process_client(create_app(graphs, store=store)), store


async def _say(client: LangGraphClient, thread_id: str, user: str, text: str) -> str:
    state = await client.runs.wait(
        thread_id, "assistant", input={"messages": [{"role": "user", "content": text}]},
        config={"configurable": {"user_id": user}},
    )  # fmt: skip
    assert isinstance(state, dict)
    return str(state["messages"][-1]["content"])


async def _consolidate(
    client: LangGraphClient, user: str, graph: str = "consolidation_agent"
) -> str:
    # tagged like a conversation of the user: consolidation still never reads its own threads
    thread = await client.threads.create(metadata={"user_id": user})
    state = await client.runs.wait(
        thread["thread_id"], graph, input={"messages": []},
        config={"configurable": {"user_id": user}},
    )  # fmt: skip
    assert isinstance(state, dict), state
    return str(state["messages"][-1]["content"])


async def _memory(client: LangGraphClient, user: str) -> str | None:
    item = await client.store.get_item([user, "memories"], "/facts.md")
    return None if item is None else str(item["value"]["content"])


async def test_a_served_consolidation_merges_each_message_once_and_a_changed_thread_again() -> None:
    client, store = _served()
    alice = await client.threads.create(metadata={"user_id": "alice"})
    bob = await client.threads.create(metadata={"user_id": "bob"})
    await _say(client, alice["thread_id"], "alice", "please remember: alice has a cat called Miso")
    await _say(client, bob["thread_id"], "bob", "remember: bob plays the oboe")

    assert (await _consolidate(client, "alice")).startswith("merged: ")
    assert await _memory(client, "alice") == "# Facts\n- alice has a cat called Miso\n"
    assert await _consolidate(client, "alice") == "Nothing new to consolidate."

    # alice comes back to the same thread: only its new messages are merged
    await _say(client, alice["thread_id"], "alice", "remember: alice moved to Lyon")
    assert (await _consolidate(client, "alice")).startswith("merged: ")
    assert await _memory(client, "alice") == (
        "# Facts\n- alice has a cat called Miso\n- alice moved to Lyon\n"
    )
    # the consolidation's own threads are not conversations, and bob's are not alice's
    assert await _consolidate(client, "alice") == "Nothing new to consolidate."
    assert await _memory(client, "bob") is None
    mark = await load_watermark(store, "alice", "/memories/facts.md")
    assert mark is not None and mark.thread_ids == {alice["thread_id"]}

    # alice's next conversation is told what consolidation remembered
    later = await client.threads.create(metadata={"user_id": "alice"})
    answer = await _say(client, later["thread_id"], "alice", "what do you know about me?")
    assert "- alice moved to Lyon" in answer
    assert await store.asearch((WATERMARK_PREFIX, "bob")) == []


async def test_a_consolidation_without_a_user_fails_and_remembers_nothing() -> None:
    client, store = _served()
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "consolidation_agent", input={})
    await client.runs.join(thread["thread_id"], run["run_id"])
    done = await client.runs.get(thread["thread_id"], run["run_id"])
    assert done["status"] == "error"
    failed = await client.threads.get(thread["thread_id"])
    assert "consolidation needs a user" in json.dumps(failed.get("error"))
    assert await store.asearch((WATERMARK_PREFIX,)) == []


async def test_a_consolidation_thread_holds_only_its_latest_runs_batch() -> None:
    client, _ = _served()
    alice = await client.threads.create(metadata={"user_id": "alice"})
    own = await client.threads.create()  # a thread cron's thread: every run on it

    async def consolidate() -> list[dict[str, Any]]:
        state = await client.runs.wait(
            own["thread_id"], "consolidation_agent", input={"messages": []},
            config={"configurable": {"user_id": "alice"}},
        )  # fmt: skip
        assert isinstance(state, dict)
        return state["messages"]

    await _say(client, alice["thread_id"], "alice", "remember: alice has a cat called Miso")
    await consolidate()
    await _say(client, alice["thread_id"], "alice", "remember: alice moved to Lyon")
    messages = await consolidate()
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert len(humans) == 1  # this run's batch: the earlier run's is gone from the state
    assert "remember: alice moved to Lyon" in humans[0]
    assert "remember: alice has a cat" not in humans[0]
    assert await _memory(client, "alice") == (
        "# Facts\n- alice has a cat called Miso\n- alice moved to Lyon\n"
    )


async def test_on_a_server_with_an_api_key_the_thread_search_gets_in_as_the_runs_caller() -> None:
    def agent(threads: ServerThreads) -> Any:
        model = ScriptedModel(policy=consolidation_graphs.merge_policy)
        return create_consolidation_agent(model, threads=threads)

    graphs = {  # the hosting app's loopback secret lets the search past the key; headers= too
        "keyless": agent(ServerThreads()),
        "keyed": agent(ServerThreads(headers={"x-api-key": "sesame"})),
        "assistant": consolidation_graphs.assistant,
    }
    client = in_process_client(create_app(graphs, api_key="sesame"))
    client.http.client.headers["x-api-key"] = "sesame"
    thread = await client.threads.create(metadata={"user_id": "alice"})
    await _say(client, thread["thread_id"], "alice", "remember: alice has a cat called Miso")

    async def stateless(graph: str) -> str:  # untagged threads: neither graph reads the other's
        state = await client.runs.wait(None, graph, input={"messages": []},
                                       config={"configurable": {"user_id": "alice"}})  # fmt: skip
        assert isinstance(state, dict), state
        return str(state["messages"][-1]["content"])

    assert (await stateless("keyless")).startswith("merged: ")
    assert await _memory(client, "alice") == "# Facts\n- alice has a cat called Miso\n"
    await _say(client, thread["thread_id"], "alice", "remember: alice moved to Lyon")
    assert (await stateless("keyed")).startswith("merged: ")
    assert await _memory(client, "alice") == (
        "# Facts\n- alice has a cat called Miso\n- alice moved to Lyon\n"
    )


def _owner_auth() -> Auth:
    """The owner-filter `Auth` of the server tests (alice-token, bob-token)."""
    path = Path(__file__).resolve().parents[1] / "server" / "auth_deploy" / "auth.py"
    spec = importlib.util.spec_from_file_location("fathom_test_consolidation_auth", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.auth


async def test_with_custom_auth_consolidation_reads_only_threads_its_user_may_see() -> None:
    graphs = {
        "consolidation_agent": consolidation_graphs.consolidation_agent,
        "assistant": consolidation_graphs.assistant,
    }
    app = create_app(graphs, store=InMemoryStore(), auth=_owner_auth())
    alice, bob = in_process_client(app), in_process_client(app)
    alice.http.client.headers["Authorization"] = "Bearer alice-token"
    bob.http.client.headers["Authorization"] = "Bearer bob-token"
    own = await alice.threads.create(metadata={"user_id": "alice"})
    await _say(alice, own["thread_id"], "alice", "remember: alice takes her tea green")
    forged = await bob.threads.create(metadata={"user_id": "alice"})  # bob's, tagged alice's
    await _say(bob, forged["thread_id"], "alice", "remember: alice owes bob money")

    # the run's user is the authenticated alice, whose search sees her own threads only
    assert (await _consolidate(alice, "alice")).startswith("merged: ")
    assert await _memory(alice, "alice") == "# Facts\n- alice takes her tea green\n"


def _edit_after_a_refusal(store: InMemoryStore) -> Any:
    """A merging model whose first write meets a live conversation's change to the file."""

    def policy(request: ScriptRequest) -> AIMessage:
        results = request.turn_results
        if not results:  # meanwhile, a live conversation adds a fact of its own
            store.put(("alice", "memories"), "/facts.md",
                      {"content": "# Facts\n- alice's cat is called Miso\n"})  # fmt: skip
            content = "# Facts\n- alice moved to Lyon\n"  # from the prompt: no file yet
            return ai("", tool_call("write_file", {"file_path": DEFAULT_MEMORY_PATH,
                                                   "content": content}))  # fmt: skip
        if len(results) == 1:  # refused, with the current text: add to it instead
            assert "changed since you last read it" in results[0].text
            return ai("", tool_call("edit_file", {
                "file_path": DEFAULT_MEMORY_PATH, "old_string": "# Facts\n",
                "new_string": "# Facts\n- alice moved to Lyon\n",
            }))  # fmt: skip
        return ai("merged after a conflict")

    return policy


async def test_a_merge_that_meets_a_live_conversations_change_loses_neither_fact() -> None:
    store = InMemoryStore()
    graphs = {
        "conflicted": create_consolidation_agent(
            ScriptedModel(policy=_edit_after_a_refusal(store))
        ),
        "assistant": consolidation_graphs.assistant,
    }
    client = in_process_client(create_app(graphs, store=store))
    thread = await client.threads.create(metadata={"user_id": "alice"})
    await _say(client, thread["thread_id"], "alice", "remember: alice moved to Lyon")

    assert await _consolidate(client, "alice", "conflicted") == "merged after a conflict"
    assert await _memory(client, "alice") == (
        "# Facts\n- alice moved to Lyon\n- alice's cat is called Miso\n"
    )


# ------------------------------------------------------------------------ end to end


@pytest.fixture(params=["fathom", "langgraph-dev"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    if request.param == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    if request.param == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    workdir = copy_deployment(tmp_path / "deploy")
    shutil.copy(Path(consolidation_graphs.__file__), workdir / "consolidation_graphs.py")
    config = json.loads((workdir / "langgraph.json").read_text(encoding="utf-8"))
    config["graphs"]["consolidation_agent"] = "./consolidation_graphs.py:consolidation_agent"
    config["graphs"]["assistant"] = "./consolidation_graphs.py:assistant"
    (workdir / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    process = ServerProcess(kind=request.param, workdir=workdir, name=request.param)
    process.start()
    try:
        yield process
    finally:
        process.stop()


EVERY_TWO_SECONDS = "* * * * * */2"


async def test_a_cron_consolidates_alices_conversation_into_her_next_threads_prompt(
    served: ServerProcess,
) -> None:
    client = get_client(url=served.url, api_key=None)
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    suite = uuid.uuid4().hex
    try:
        thread = await client.threads.create(metadata={"user_id": alice})
        await _say(client, thread["thread_id"], alice, "remember: alice takes her tea green")
        bobs = await client.threads.create(metadata={"user_id": bob})
        await _say(client, bobs["thread_id"], bob, "remember: bob takes his coffee black")

        cron = await client.crons.create(
            "consolidation_agent", schedule=EVERY_TWO_SECONDS, input={"messages": []},
            config={"configurable": {"user_id": alice}}, on_run_completed="keep",
            metadata={"suite": suite, "user_id": alice},  # its threads look like alice's
        )  # fmt: skip
        try:

            async def remembered() -> bool:
                return await _memory(client, alice) is not None

            async def three_ticks() -> bool:
                return await _ended_ticks(client, suite) >= 3

            await eventually(remembered, "consolidation to write alice's memory")
            # more ticks after the merge: the watermark keeps them from merging it again
            await eventually(three_ticks, "three consolidation runs to end")
        finally:
            await client.crons.delete(cron["cron_id"])
        assert await _memory(client, alice) == "# Facts\n- alice takes her tea green\n"

        later = await client.threads.create(metadata={"user_id": alice})
        answer = await _say(client, later["thread_id"], alice, "how do I take my tea?")
        assert "- alice takes her tea green" in answer
        assert await _memory(client, bob) is None
    finally:
        await client.http.client.aclose()


async def _ended_ticks(client: LangGraphClient, suite: str) -> int:
    """How many of the cron's runs have succeeded (their threads are kept: `keep`)."""
    ended = 0
    for thread in await client.threads.search(metadata={"suite": suite}, limit=100):
        runs = await client.runs.list(thread["thread_id"], limit=10)
        ended += any(run["status"] == "success" for run in runs)
    return ended
