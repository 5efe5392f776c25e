"""`examples/memory_server/`: the memory chapter served, driven by its own client script.

A copy of the example folder is served by `fathom serve` and by `langgraph dev` (each in a
subprocess, with the example's `auth.py`), and `client.py --url ...` runs the whole story
against it with the real `langgraph-sdk`: the application preloads the organisation's
policy, alice and bob talk in their own threads, a 6-field (seconds) cron consolidates
alice's conversations. The tests check what the script printed, and look at the server
through the SDK as each user. Nothing here waits on a clock: the script polls the store with
a generous deadline that only bounds a hang.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from tests.server.servers import (
    REPO_ROOT,
    ServerProcess,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.system_requirements import needs

EXAMPLE = REPO_ROOT / "examples" / "memory_server"
SCRIPT_TIMEOUT_S = 240
"""Bounds a hang of the client script; it normally ends within seconds."""
COMPLIANCE = (
    "## Compliance policies\n"
    "- Never disclose internal pricing\n"
    "- Always include disclaimers on financial advice\n"
)

pytestmark = pytest.mark.timeout(400)


@dataclass(frozen=True)
class Story:
    """A served copy of the example and what its client script printed, step by step."""

    server: ServerProcess
    out: dict[str, Any]


def run_client(url: str, workdir: Path) -> dict[str, Any]:
    """Run `client.py --url URL` from the served copy; its `step: value` lines, parsed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(workdir / "client.py"), "--url", url], cwd=workdir, env=env,
        capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        step, _, value = line.partition(": ")
        out[step] = ast.literal_eval(value)
    return out


@pytest.fixture(scope="module", params=["fathom", "langgraph-dev"])
def story(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Story]:
    kind: str = request.param
    if kind == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    if kind == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    workdir = tmp_path_factory.mktemp(f"memory-server-{kind}") / "memory_server"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("__pycache__", ".fathom"))
    server = ServerProcess(kind=kind, workdir=workdir, name=kind)
    server.start()
    try:
        yield Story(server, run_client(server.url, workdir))
    finally:
        server.stop()


def _client(story: Story, token: str) -> LangGraphClient:
    return get_client(url=story.server.url, api_key=None,
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip


@pytest.fixture
async def alice(story: Story) -> AsyncIterator[LangGraphClient]:
    client = _client(story, "alice-token")
    try:
        yield client
    finally:
        await client.http.client.aclose()


@pytest.fixture
async def bob(story: Story) -> AsyncIterator[LangGraphClient]:
    client = _client(story, "bob-token")
    try:
        yield client
    finally:
        await client.http.client.aclose()


async def test_alices_preference_is_remembered_in_her_next_thread_and_not_seen_by_bob(
    story: Story, bob: LangGraphClient
) -> None:
    out = story.out
    assert out["alice remembers"] == "I will remember that I like short answers."
    assert out["alice tuesday"].startswith("What I know about you: I like short answers.")
    assert out["bob tuesday"].startswith("What I know about you: nothing yet.")
    assert out["bob memory"] is None
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await bob.store.get_item(["alice"], "/AGENTS.md")
    assert refused.value.response.status_code == 403
    bobs_threads = await bob.threads.search(limit=100)
    assert {t["thread_id"] for t in bobs_threads} >= {out["threads"]["bob monday"]}
    assert out["threads"]["alice monday"] not in {t["thread_id"] for t in bobs_threads}


async def test_the_org_policy_is_in_both_users_prompts_and_the_agent_cannot_edit_it(
    story: Story, alice: LangGraphClient
) -> None:
    out = story.out
    rules = "Policies I follow: Never disclose internal pricing; Always include disclaimers"
    assert rules in out["alice tuesday"] and rules in out["bob tuesday"]
    assert rules in out["alice wednesday"]
    refusal = out["alice relaxes the policy"]
    assert "'/policies/compliance.md' is organisation policy, read-only for you" in refusal
    item = await alice.store.get_item(["acme"], "/compliance.md")
    assert item is not None and item["value"]["content"] == COMPLIANCE
    with pytest.raises(httpx.HTTPStatusError) as refused:  # only the application writes it
        await alice.store.put_item(["acme"], "/compliance.md", {"content": "relaxed\n"})
    assert refused.value.response.status_code == 403
    item = await alice.store.get_item(["acme"], "/compliance.md")
    assert item is not None and item["value"]["content"] == COMPLIANCE


async def test_a_cron_consolidates_what_alice_said_into_her_next_threads_prompt(
    story: Story, alice: LangGraphClient
) -> None:
    out = story.out
    # the hot path wrote the first line, consolidation merged the statement it never wrote
    assert out["alice memory"] == "# About the user\n- I like short answers\n- I live in Lyon\n"
    assert "I live in Lyon" not in out["alice tuesday"]
    assert out["alice wednesday"].startswith(
        "What I know about you: I like short answers; I live in Lyon."
    )
    assert "Oslo" not in out["alice memory"]  # bob's statement stays out of alice's memory
    assert await alice.crons.search() == []  # the script deleted its cron


async def test_episodic_search_finds_the_users_earlier_thread_by_a_word_and_never_the_others(
    story: Story,
) -> None:
    threads = story.out["threads"]
    alices, bobs = story.out["alice recalls"], story.out["bob recalls"]
    assert alices.startswith("1 matching message from earlier conversations")
    assert f"thread {threads['alice monday']} · " in alices and "PostgreSQL" in alices
    assert threads["bob monday"] not in alices and "MySQL" not in alices
    assert f"thread {threads['bob monday']} · " in bobs and "MySQL" in bobs
    assert threads["alice monday"] not in bobs and "PostgreSQL" not in bobs


async def test_a_thread_belongs_to_its_creator_whatever_metadata_the_client_sends(
    alice: LangGraphClient, bob: LangGraphClient
) -> None:
    forged = await alice.threads.create(metadata={"user_id": "bob", "owner": "bob"})
    metadata = forged["metadata"] or {}
    assert (metadata["user_id"], metadata["owner"]) == ("alice", "alice")
    assert forged["thread_id"] not in {t["thread_id"] for t in await bob.threads.search(limit=100)}
