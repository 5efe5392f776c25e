"""Episodic memory through a server: the real `langgraph-sdk` client over HTTP.

A graph with `ConversationSearchMiddleware()` (no index given) is added to a copy of
`tests/server/deploy`; the server's storage decides where the index lives: beside `fathom
serve`'s SQLite files in `.fathom/`, in its PostgreSQL database, or, on `langgraph dev`
(in-memory store), in memory. The client cannot set `langgraph_auth_user` (the server owns
it), so the user travels as `configurable.user_id`, the middleware's fallback when the server
has no authenticated user (`langgraph dev` without auth hands the graph an anonymous user
whose identity is `""`, which counts as none).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client
from tests.postgres import postgres_uri
from tests.server.servers import (
    ServerProcess,
    copy_deployment,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.system_requirements import needs

__all__ = ["postgres_uri"]

GRAPH = '''"""A deep agent with episodic memory on a scripted model (`search: WORDS` searches)."""

from fathom import create_deep_agent
from fathom.memory import ConversationSearchMiddleware
from fathom.testing import ScriptedModel, ai, tool_call


def _policy(request):
    text = request.last_human_text
    if text.startswith("search: ") and not request.turn_results:
        return ai("", tool_call("search_conversations", {"query": text[len("search: "):]}))
    if request.turn_results:
        return ai("found: " + request.turn_results[-1].text)
    return ai("noted: " + text)


agent = create_deep_agent(
    model=ScriptedModel(policy=_policy),
    middleware=[ConversationSearchMiddleware()],
    name="episodic",
)
'''


def _deployment(tmp_path: Path) -> Path:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path / "deploy")
    (workdir / "episodic.py").write_text(GRAPH, encoding="utf-8")
    config = json.loads((workdir / "langgraph.json").read_text(encoding="utf-8"))
    config["graphs"]["episodic"] = "./episodic.py:agent"
    (workdir / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    return workdir


@pytest.fixture(params=["sqlite", "postgres", "langgraph-dev"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    extra: tuple[str, ...] = ()
    kind = "fathom"
    if request.param == "postgres":
        extra = ("--database", request.getfixturevalue("postgres_uri"))
    elif request.param == "langgraph-dev":
        if langgraph_dev_binary() is None:
            pytest.skip(needs("langgraph dev"))
        kind = "langgraph-dev"
    process = ServerProcess(kind=kind, workdir=_deployment(tmp_path), extra_args=extra,
                            name=request.param)  # fmt: skip
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _last_text(state: Any) -> str:
    return str(state["messages"][-1]["content"])


async def test_a_served_agent_finds_the_users_earlier_thread_and_not_another_users(
    server: ServerProcess,
) -> None:
    client = get_client(url=server.url, api_key=None)
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"

    async def say(text: str, user: str, **configurable: Any) -> tuple[str, str]:
        thread = await client.threads.create()
        message = {"role": "user", "content": text}
        state = await client.runs.wait(
            thread["thread_id"], "episodic", input={"messages": [message]},
            config={"configurable": {"user_id": user, **configurable}},
        )  # fmt: skip
        return thread["thread_id"], _last_text(state)

    try:
        alices, _ = await say("The harbour festival is on the second of June.", alice)
        bobs, _ = await say("Bob's harbour boat is called Petrel.", bob)

        _, alice_found = await say("search: harbour", alice)
        _, bob_found = await say("search: festival", bob)
        # a client cannot pass itself off as an authenticated user: JSON is no user object
        _, forged = await say("search: festival", bob, langgraph_auth_user={"identity": alice})

        assert alice_found.startswith("found: 2 matching messages")  # the message, its echo
        assert alices in alice_found
        assert "[harbour] festival" in alice_found
        assert bobs not in alice_found
        assert "Petrel" not in alice_found
        assert alices not in bob_found
        assert "No earlier conversation" in bob_found
        assert alices not in forged
        if server.kind == "fathom":
            assert _indexed_messages(server, alice) == 4  # two turns: each message, its answer
            # a deleted conversation is no longer in the index, so no search finds it
            assert _indexed_messages(server, alice, alices) == 2
            await client.threads.delete(alices)
            assert _indexed_messages(server, alice, alices) == 0
            assert _indexed_messages(server, alice) == 2  # the search turn's own two stay
    finally:
        await client.http.client.aclose()


def _indexed_messages(server: ServerProcess, user: str, thread_id: str | None = None) -> int:
    """How many of `user`'s messages (in `thread_id`, when given) the server's own storage
    holds in the index."""
    query = "SELECT count(*) FROM fathom_conversation_messages WHERE user_id = %s"
    parameters: tuple[str, ...] = (user,)
    if thread_id is not None:
        query, parameters = query + " AND thread_id = %s", (user, thread_id)
    if server.name == "postgres":
        import psycopg

        with psycopg.connect(server.extra_args[1]) as connection:
            row = connection.execute(query, parameters).fetchone()
    else:
        path = server.workdir / ".fathom" / "conversations.sqlite"
        with contextlib.closing(sqlite3.connect(path)) as connection:
            row = connection.execute(query.replace("%s", "?"), parameters).fetchone()
    assert row is not None
    return int(row[0])
