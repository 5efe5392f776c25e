"""Many runs at once over HTTP, on both servers: no message lost, duplicated or crossed."""

from __future__ import annotations

import asyncio

from langgraph_sdk.client import LangGraphClient
from tests.server.support import contents, user

THREADS = 10
RUNS_PER_THREAD = 5


async def _queue_turns(client: LangGraphClient, index: int) -> tuple[str, list[str]]:
    thread = await client.threads.create(metadata={"index": index})
    run_ids = []
    for turn in range(RUNS_PER_THREAD):
        run = await client.runs.create(
            thread["thread_id"], "agent", input=user(f"t{index}-m{turn}"),
            multitask_strategy="enqueue",
        )  # fmt: skip
        run_ids.append(run["run_id"])
    return thread["thread_id"], run_ids


async def test_fifty_concurrent_runs_over_ten_threads_keep_each_threads_messages(
    client: LangGraphClient,
) -> None:
    queued = await asyncio.gather(*(_queue_turns(client, i) for i in range(THREADS)))
    await asyncio.gather(
        *(client.runs.join(tid, rid) for tid, run_ids in queued for rid in run_ids)
    )

    for index, (thread_id, run_ids) in enumerate(queued):
        expected = []
        for turn in range(RUNS_PER_THREAD):
            expected += [f"t{index}-m{turn}", f"echo: t{index}-m{turn}"]
        state = await client.threads.get_state(thread_id)
        assert contents(state["values"]) == expected
        runs = await client.runs.list(thread_id, limit=100)
        assert sorted(r["run_id"] for r in runs) == sorted(run_ids)
        assert {r["status"] for r in runs} == {"success"}
