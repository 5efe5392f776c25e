"""Alice and Bob talk to the memory server; a cron consolidates Alice's conversations.

Start the server on this folder, then run the client against it:

    fathom serve --config examples/memory_server/langgraph.json --port 2024
    python examples/memory_server/client.py --url http://127.0.0.1:2024

(`langgraph dev --config examples/memory_server/langgraph.json` serves it too.) Each user
calls with their own bearer token (`auth.py`); the server gives the graphs the user as
`runtime.server_info.user`. What happens, and what it shows (see docs/memory.md, "The whole
chapter, served"):

1. The application preloads the organisation's policy (`load_policies.py`).
2. Monday: Alice asks the agent to remember a preference (the agent writes her
   `/memories/AGENTS.md`), mentions where she lives and a decision about billing; Bob, in his
   own thread, says where he lives and his own billing decision.
3. Tuesday, new threads: the agent knows Alice's preference and not Bob's (none); both see
   the policy; the agent's attempt to relax the policy is refused; each user's
   `search_conversations` finds their own Monday thread and never the other's.
4. A cron (every two seconds here; `"0 */6 * * *"` in a real deployment, in UTC) runs
   `consolidation_agent` as Alice: it merges what she said about herself into her memory
   file. Her next thread knows where she lives; Bob's memory is untouched.

`story(url)` returns what each step answered.
"""

import argparse
import asyncio
import time
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from load_policies import preload

EVERY_TWO_SECONDS = "* * * * * */2"
"""A 6-field (seconds) croniter schedule, so the example ends in seconds."""
DEADLINE_S = 120.0
"""Bounds a hang while waiting for consolidation; a tick normally merges within seconds."""


def user_client(url: str, token: str) -> LangGraphClient:
    """A client that calls as the user of `token` (see `auth.py`)."""
    return get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})


async def say(client: LangGraphClient, thread_id: str, text: str) -> str:
    """One turn of the agent on the thread; its answer."""
    state: Any = await client.runs.wait(
        thread_id, "agent", input={"messages": [{"role": "user", "content": text}]}
    )
    return str(state["messages"][-1]["content"])


async def memory_of(client: LangGraphClient, user: str) -> str | None:
    """The user's memory file as stored, or None before it exists."""
    item = await client.store.get_item([user], "/AGENTS.md")
    return None if item is None else str(item["value"]["content"])


async def consolidate(alice: LangGraphClient, fact: str) -> str:
    """Run Alice's consolidation cron until her memory holds `fact`; then delete the cron."""
    cron: Any = await alice.crons.create(
        "consolidation_agent", schedule=EVERY_TWO_SECONDS, input={"messages": []}
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while fact not in (await memory_of(alice, "alice") or ""):
            if time.monotonic() > deadline:
                raise TimeoutError("consolidation did not write alice's memory")
            await asyncio.sleep(0.2)
    finally:
        await alice.crons.delete(cron["cron_id"])
    return await memory_of(alice, "alice") or ""


async def story(url: str) -> dict[str, Any]:
    """The whole story against the server at `url`; what each step answered."""
    await preload(url)
    alice, bob = user_client(url, "alice-token"), user_client(url, "bob-token")
    out: dict[str, Any] = {}
    try:
        monday = (await alice.threads.create())["thread_id"]
        out["alice remembers"] = await say(alice, monday, "remember: I like short answers")
        await say(alice, monday, "I live in Lyon.")
        await say(alice, monday, "We chose PostgreSQL for the billing service.")
        bobs_monday = (await bob.threads.create())["thread_id"]
        await say(bob, bobs_monday, "I live in Oslo.")
        await say(bob, bobs_monday, "We chose MySQL for the billing service.")
        out["threads"] = {"alice monday": monday, "bob monday": bobs_monday}

        tuesday = (await alice.threads.create())["thread_id"]
        bobs_tuesday = (await bob.threads.create())["thread_id"]
        out["alice tuesday"] = await say(alice, tuesday, "What do you know about me?")
        out["bob tuesday"] = await say(bob, bobs_tuesday, "What do you know about me?")
        out["alice relaxes the policy"] = await say(alice, tuesday, "relax the policy")
        out["alice recalls"] = await say(alice, tuesday, "recall billing database")
        out["bob recalls"] = await say(bob, bobs_tuesday, "recall billing database")

        out["alice memory"] = await consolidate(alice, "I live in Lyon")
        wednesday = (await alice.threads.create())["thread_id"]
        out["alice wednesday"] = await say(alice, wednesday, "What do you know about me?")
        out["bob memory"] = await memory_of(bob, "bob")
    finally:
        await alice.http.client.aclose()
        await bob.http.client.aclose()
    return out


def main(url: str) -> dict[str, Any]:
    """Run the story and print what each step answered."""
    out = asyncio.run(story(url))
    for step, answer in out.items():
        print(f"{step}: {answer!r}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Alice and Bob talk to the memory server.")
    parser.add_argument("--url", default="http://127.0.0.1:2024")
    main(parser.parse_args().url)
