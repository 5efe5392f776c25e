"""Episodic memory: an agent searches the user's earlier conversations, never another user's.

Every test drives a real deep agent (`tests/memory/support.py`) on both indexes: SQLite FTS5
in a temporary file and PostgreSQL full-text in a throwaway cluster (`postgres_uri`). Users
and threads get unique names, so tests sharing the PostgreSQL database stay apart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command
from tests.memory.support import Agent, AuthUser, policy, search_answer, unique
from tests.postgres import postgres_uri

from fathom import create_deep_agent
from fathom.memory import (
    ConversationIndex,
    ConversationMessage,
    ConversationSearchError,
    ConversationSearchMiddleware,
    PostgresConversationIndex,
    SqliteConversationIndex,
    index_for_store,
)
from fathom.memory.conversation_search import MAX_LIMIT, turn_messages
from fathom.memory.records import ID_BATCH
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

__all__ = ["postgres_uri"]


@pytest.fixture(params=["sqlite", "postgres", "postgres-pool"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationIndex]:
    if request.param == "sqlite":
        made = SqliteConversationIndex(tmp_path / "conversations.sqlite")
        yield made
        made.close()
    elif request.param == "postgres":
        yield PostgresConversationIndex(request.getfixturevalue("postgres_uri"))
    else:
        from psycopg_pool import AsyncConnectionPool

        url = request.getfixturevalue("postgres_uri")
        async with AsyncConnectionPool(url, kwargs={"autocommit": True}, open=False) as pool:
            yield PostgresConversationIndex(pool=pool)


def thread() -> str:
    return str(uuid.uuid4())


async def test_a_new_thread_finds_the_users_earlier_thread_by_a_word_in_it(
    index: ConversationIndex,
) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice, bob = unique("alice"), unique("bob")
    earlier, bobs, later = thread(), thread(), thread()
    await agent.say("We picked the Zanzibar codename for the billing rewrite.",
                    thread_id=earlier, user=alice)  # fmt: skip
    await agent.say("My Zanzibar notes are private to me.", thread_id=bobs, user=bob)

    answer = search_answer(await agent.say("search: zanzibar", thread_id=later, user=alice))

    assert answer.status != "error"
    assert earlier in answer.text
    assert "[Zanzibar]" in answer.text  # the snippet marks the matched word
    assert "billing rewrite" in answer.text
    assert "user:" in answer.text
    assert "UTC" in answer.text  # when it was said
    assert bobs not in answer.text
    assert "private" not in answer.text


async def test_another_user_never_gets_the_users_threads(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice, bob = unique("alice"), unique("bob")
    alices = thread()
    await agent.say("The vault combination is kumquat.", thread_id=alices, user=alice)

    answer = search_answer(await agent.say("search: kumquat vault", thread_id=thread(), user=bob))

    assert answer.status != "error"
    assert alices not in answer.text
    assert "kumquat" not in answer.text.replace("matches: kumquat vault", "")
    assert answer.text.startswith("No earlier conversation")


async def test_the_authenticated_identity_wins_over_a_user_id_the_caller_names(
    index: ConversationIndex,
) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice, mallory = unique("alice"), unique("mallory")
    alices = thread()
    await agent.say("Payroll runs on the ninth.", thread_id=alices, user=alice)

    answer = search_answer(await agent.say(
        "search: payroll", thread_id=thread(), user=mallory, user_id=alice))  # fmt: skip

    assert alices not in answer.text


async def test_messages_with_more_of_the_words_rank_first(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    one_word, both_words, unrelated = thread(), thread(), thread()
    await agent.say("I bought a kayak last spring and it sits in the garage.",
                    thread_id=one_word, user=alice)  # fmt: skip
    await agent.say("The kayak paddle snapped, so I need a new kayak paddle.",
                    thread_id=both_words, user=alice)  # fmt: skip
    await agent.say("Lunch was soup.", thread_id=unrelated, user=alice)

    hits = await index.asearch(alice, "kayak paddle", limit=5)
    answer = search_answer(await agent.say("search: kayak paddle", thread_id=thread(), user=alice))

    assert [hit.thread_id for hit in hits][:1] == [both_words]
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert unrelated not in {hit.thread_id for hit in hits}
    assert answer.text.index(both_words) < answer.text.index("1.") + 200
    assert unrelated not in answer.text


async def test_when_no_message_has_every_word_one_with_some_of_them_is_found(
    index: ConversationIndex,
) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    earlier = thread()
    await agent.say("Our dentist appointment moved to Thursday.", thread_id=earlier, user=alice)

    answer = search_answer(await agent.say(
        "search: when is the dentist appointment with doctor Okafor?", thread_id=thread(),
        user=alice))  # fmt: skip

    assert earlier in answer.text


async def test_a_snippet_is_the_matching_part_of_a_long_message(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    filler = " ".join(f"filler{n}" for n in range(300))
    await agent.say(f"{filler} the turbine blueprint is in the blue folder {filler}",
                    thread_id=thread(), user=alice)  # fmt: skip

    hits = await index.asearch(alice, "turbine", limit=5)

    assert sorted(hit.role for hit in hits) == ["assistant", "user"]  # its echo, "noted: ..."
    for hit in hits:
        assert "[turbine]" in hit.snippet
        assert len(hit.snippet) < 400


async def test_the_current_thread_is_left_out_unless_asked(index: ConversationIndex) -> None:
    alice = unique("alice")
    current = thread()
    agent = Agent(ConversationSearchMiddleware(index))
    await agent.say("The marmalade recipe needs seville oranges.", thread_id=current, user=alice)

    excluded = search_answer(await agent.say("search: marmalade", thread_id=current, user=alice))
    included = Agent(ConversationSearchMiddleware(index, exclude_current_thread=False))
    found = search_answer(await included.say("search: marmalade", thread_id=current, user=alice))

    assert excluded.text.startswith("No earlier conversation")
    assert current in found.text


@pytest.mark.parametrize(
    "query",
    ['zeppelin" OR NEAR(', "zeppelin*", '"zeppelin', "zeppelin AND OR NOT", "what's zeppelin?",
     "content: zeppelin", "zeppelin) -- ; DROP TABLE x", "zeppelin & | ! :*"],
)  # fmt: skip
async def test_a_query_in_search_syntax_or_with_stray_punctuation_still_searches(
    index: ConversationIndex, query: str
) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    earlier = thread()
    await agent.say("The zeppelin museum opens at ten.", thread_id=earlier, user=alice)

    answer = search_answer(await agent.say(f"search: {query}", thread_id=thread(), user=alice))

    assert answer.status != "error", answer.text
    assert earlier in answer.text


async def test_a_query_without_words_is_an_answer_not_a_crash(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")

    result = await agent.say("search: ?!* ()", thread_id=thread(), user=alice)

    answer = search_answer(result)
    assert answer.status == "error"
    assert "no words" in answer.text
    assert result["messages"][-1].text.startswith("found:")  # the run went on


async def test_a_huge_message_is_indexed_cut_to_the_limit(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index, max_message_chars=2_000))
    alice = unique("alice")
    huge = "quasar " + "lorem ipsum " * 100_000 + " pulsar"
    await agent.say(huge, thread_id=thread(), user=alice)

    found = await index.asearch(alice, "quasar", limit=5)
    assert sorted(hit.role for hit in found) == ["assistant", "user"]  # the echo is as huge
    assert await index.asearch(alice, "pulsar", limit=5) == []


async def test_the_number_of_hits_is_bounded(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index, max_limit=7))
    alice = unique("alice")
    for n in range(9):
        await agent.say(f"Note {n} about the glacier survey.", thread_id=thread(), user=alice)

    default = search_answer(await agent.say("search: glacier", thread_id=thread(), user=alice))
    asked = search_answer(await agent.say("search 50: glacier", thread_id=thread(), user=alice))

    assert default.text.splitlines()[0].startswith("5 matching messages")
    assert len(default.text.splitlines()) == 6
    assert asked.text.splitlines()[0].startswith("7 matching messages")


async def test_a_turn_indexed_again_adds_nothing(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    earlier = thread()
    await agent.say("The lighthouse keeper is named Ines.", thread_id=earlier, user=alice)
    for n in range(3):  # every later turn's end looks back over the first turn again
        await agent.say(f"more chatter {n}", thread_id=earlier, user=alice)

    hits = await index.asearch(alice, "lighthouse", limit=10)

    assert [hit.thread_id for hit in hits] == [earlier, earlier]
    assert sorted(hit.role for hit in hits) == ["assistant", "user"]  # each message once


async def test_the_assistants_replies_are_searchable_too(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    await agent.say("remember: saffron", thread_id=thread(), user=alice)

    hits = await index.asearch(alice, "noted saffron", limit=5)

    assert [hit.role for hit in hits] == ["assistant"]


async def test_a_local_agent_scopes_to_the_user_id_it_was_given(tmp_path: Path) -> None:
    index = SqliteConversationIndex(tmp_path / "conversations.sqlite")
    mine = Agent(ConversationSearchMiddleware(index, user_id="me"))
    yours = Agent(ConversationSearchMiddleware(index, user_id="you"))
    earlier = thread()
    await mine.say("The garden gnome is called Hector.", thread_id=earlier, user=None)

    found = search_answer(await mine.say("search: gnome", thread_id=thread(), user=None))
    missed = search_answer(await yours.say("search: gnome", thread_id=thread(), user=None))

    assert earlier in found.text
    assert earlier not in missed.text


async def test_without_any_identity_nothing_is_indexed_and_the_tool_says_why(
    tmp_path: Path,
) -> None:
    index = SqliteConversationIndex(tmp_path / "conversations.sqlite")
    agent = Agent(ConversationSearchMiddleware(index))
    await agent.say("Anonymous words about walruses.", thread_id=thread(), user=None)

    answer = search_answer(await agent.say("search: walruses", thread_id=thread(), user=None))

    assert answer.status == "error"
    assert "user_id" in answer.text
    assert await index.asearch("", "walruses", limit=5) == []


async def test_without_an_index_the_store_of_the_run_holds_it(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
        store.setup()
        agent = Agent(ConversationSearchMiddleware(), store=store)
        earlier = thread()
        await agent.say("The ferry leaves from pier nine.", thread_id=earlier, user="alice")

        answer = search_answer(await agent.say("search: ferry", thread_id=thread(), user="alice"))

    assert earlier in answer.text
    assert (tmp_path / "conversations.sqlite").is_file()


async def test_without_an_index_a_postgres_store_shares_its_connection(postgres_uri: str) -> None:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(postgres_uri) as store:
        await store.setup()
        agent = Agent(ConversationSearchMiddleware(), store=store)
        alice, earlier = unique("alice"), thread()
        await agent.say("The cello lesson is at five.", thread_id=earlier, user=alice)

        answer = search_answer(await agent.say("search: cello", thread_id=thread(), user=alice))
        index = index_for_store(store)
        await store.aput(("notes",), "after", {"ok": True})  # the store's connection still works

    assert earlier in answer.text
    assert isinstance(index, PostgresConversationIndex)
    assert index.pool is None  # not a pool of its own: the store's connection
    in_database = await PostgresConversationIndex(postgres_uri).asearch(alice, "lesson", limit=5)
    assert {hit.thread_id for hit in in_database if hit.role == "user"} == {earlier}


async def test_an_in_memory_store_gets_an_in_memory_index_of_its_own() -> None:
    first, second = Agent(ConversationSearchMiddleware(), store=InMemoryStore()), None
    second = Agent(ConversationSearchMiddleware(), store=InMemoryStore())
    earlier = thread()
    await first.say("The owl sanctuary is closed on Mondays.", thread_id=earlier, user="alice")

    same = search_answer(await first.say("search: owl", thread_id=thread(), user="alice"))
    other = search_answer(await second.say("search: owl", thread_id=thread(), user="alice"))

    assert earlier in same.text
    assert earlier not in other.text


async def test_without_an_index_or_a_store_the_tool_says_what_to_pass() -> None:
    agent = Agent(ConversationSearchMiddleware())

    answer = search_answer(await agent.say("search: anything", thread_id=thread(), user="alice"))

    assert answer.status == "error"
    assert "index=" in answer.text


def test_the_sync_agent_indexes_and_searches_as_well(tmp_path: Path) -> None:
    index = SqliteConversationIndex(tmp_path / "conversations.sqlite")
    agent = Agent(ConversationSearchMiddleware(index, user_id="me"))
    earlier = thread()
    agent.graph.invoke({"messages": [("user", "The anvil weighs forty kilos.")]},
                       {"configurable": {"thread_id": earlier}})  # fmt: skip

    result = agent.graph.invoke({"messages": [("user", "search: anvil")]},
                                {"configurable": {"thread_id": thread()}})  # fmt: skip

    assert earlier in search_answer(result).text


@pytest.mark.parametrize(
    ("options", "named"),
    [({"limit": 0}, "limit=0"), ({"limit": 30}, "max_limit=20"),
     ({"max_message_chars": 0}, "max_message_chars"), ({"index": "db.sqlite"}, "index=")],
)  # fmt: skip
def test_bad_settings_fail_at_construction_naming_the_setting(
    options: dict[str, object], named: str
) -> None:
    with pytest.raises(ConversationSearchError, match=named):
        ConversationSearchMiddleware(**options)  # type: ignore[arg-type]


async def test_a_turn_paused_for_approval_is_indexed_once_when_it_is_resumed(
    index: ConversationIndex,
) -> None:
    def ring_bell(loudness: str) -> str:
        """Ring the office bell."""
        return f"rang {loudness}"

    def bell_policy(request: ScriptRequest) -> AIMessage:
        if request.last_human_text.startswith("bell") and not request.turn_results:
            return ai("", tool_call("ring_bell", {"loudness": "softly"}))
        return policy(request)

    alice = unique("alice")
    graph = create_deep_agent(
        model=ScriptedModel(policy=bell_policy), tools=[ring_bell],
        middleware=[ConversationSearchMiddleware(index)], interrupt_on={"ring_bell": True},
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    earlier = thread()
    config: Any = {"configurable": {"thread_id": earlier, "langgraph_auth_user": AuthUser(alice)}}

    paused = await graph.ainvoke({"messages": [HumanMessage("bell for the albatross")]}, config)
    before = await index.asearch(alice, "albatross", limit=10)
    await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    await graph.ainvoke({"messages": [HumanMessage("and thanks")]}, config)

    assert "__interrupt__" in paused
    assert before == []  # the run has not ended yet
    hits = await index.asearch(alice, "albatross", limit=10)
    assert [(hit.thread_id, hit.role) for hit in hits] == [(earlier, "user")]


async def test_adding_messages_again_keeps_the_first_copy_and_counts_only_new_ones(
    index: ConversationIndex,
) -> None:
    alice, where = unique("alice"), thread()
    first = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    batch = [ConversationMessage(alice, where, f"m{n}", "user", f"pelican number {n}", first)
             for n in range(ID_BATCH + 20)]  # fmt: skip
    again = [replace(m, time=first + timedelta(days=1)) for m in batch[-30:]]
    later = ConversationMessage(alice, where, "extra", "user", "pelican extra", first)

    assert await index.aadd(batch) == len(batch)
    assert await index.aadd([*again, later]) == 1
    hits = await index.asearch(alice, "pelican", limit=MAX_LIMIT)
    assert len(hits) == MAX_LIMIT
    assert {hit.time for hit in hits} == {first}


async def test_concurrent_runs_on_many_threads_are_all_indexed(index: ConversationIndex) -> None:
    agent = Agent(ConversationSearchMiddleware(index))
    alice = unique("alice")
    threads = [thread() for _ in range(6)]

    await asyncio.gather(*(agent.say(f"Concurrent heron sighting {n}.", thread_id=where,
                                     user=alice) for n, where in enumerate(threads)))  # fmt: skip

    hits = await index.asearch(alice, "heron sighting", limit=MAX_LIMIT)
    assert sorted({hit.thread_id for hit in hits}) == sorted(threads)
    assert len(hits) == 12  # each message and its echo, once


def test_the_tool_description_says_whether_the_current_thread_is_searched() -> None:
    (excluding,) = ConversationSearchMiddleware().tools
    (including,) = ConversationSearchMiddleware(exclude_current_thread=False, limit=3).tools

    assert "current conversation is not searched" in excluding.description
    assert "default 5, never more than 20" in excluding.description
    assert "current conversation is searched too" in including.description
    assert "default 3" in including.description
    assert set(excluding.args) == {"query", "limit"}


async def test_the_middlewares_default_limit_applies_when_the_model_gives_none(
    index: ConversationIndex,
) -> None:
    agent = Agent(ConversationSearchMiddleware(index, limit=2))
    alice = unique("alice")
    for n in range(4):
        await agent.say(f"Osprey nest {n}.", thread_id=thread(), user=alice)

    answer = search_answer(await agent.say("search: osprey", thread_id=thread(), user=alice))

    assert answer.text.splitlines()[0].startswith("2 matching messages")


def test_a_summary_in_place_of_older_messages_is_not_indexed_as_said() -> None:
    said = HumanMessage("The tram to the zoo is number 4.", id="said")
    summary = HumanMessage(
        "[The conversation so far was summarized] tram zoo", id="summary",
        additional_kwargs={"lc_source": "summarization"},
    )  # fmt: skip
    calls = AIMessage("", id="calls", tool_calls=[tool_call("ls", {}, id="c1")])
    now = datetime.now(UTC)

    rows = turn_messages([summary, said, calls], user_id="u", thread_id="t", time=now,
                         max_chars=100)  # fmt: skip

    assert [(row.message_id, row.role) for row in rows] == [("said", "user")]


async def test_a_forgotten_thread_or_user_is_no_longer_found(index: ConversationIndex) -> None:
    alice, bob = unique("alice"), unique("bob")
    kept, dropped, bobs = thread(), thread(), thread()
    now = datetime.now(UTC)
    await index.aadd([ConversationMessage(alice, kept, "k", "user", "walnut kept", now)])
    await index.aadd([ConversationMessage(alice, dropped, "d", "user", "walnut dropped", now)])
    await index.aadd([ConversationMessage(bob, bobs, "b", "user", "walnut bob", now)])

    assert await index.aforget(alice, dropped) == 1
    assert [hit.thread_id for hit in await index.asearch(alice, "walnut", limit=5)] == [kept]
    assert await index.aforget(alice) == 1
    assert await index.asearch(alice, "walnut", limit=5) == []
    assert [hit.thread_id for hit in await index.asearch(bob, "walnut", limit=5)] == [bobs]
