"""Drive the async subagents example: a supervisor delegates to `researcher` and `coder`.

Not from the tutorial (no section of it covers async subagents); see
`docs/async-subagents.md`. It runs the deployment in `langgraph.json` on fathom's server
in this process (offline, no port), or drives a server you started with `--url`:

    python examples/async_subagents/main.py
    fathom serve --config examples/async_subagents/langgraph.json --port 2024
    python examples/async_subagents/main.py --url http://127.0.0.1:2024

The user asks for research and code; the supervisor launches both subagents in the
background and answers at once. Once they are done it reports their results, sends the
coder a follow-up (the same task, a new run), and lists the tasks. `main()` returns the
supervisor's replies, its `async_tasks` and what task updates it was told about.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

HERE = Path(__file__).resolve().parent
DEADLINE_S = 60.0
"""Bounds a hang while waiting for the subagents; they normally finish in well under a second."""
NOTIFICATION_KEY = "deepagents_notification"
TERMINAL = frozenset({"success", "error", "interrupted", "timeout"})


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `condition` until it holds."""
    deadline = time.monotonic() + DEADLINE_S
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def runs_done(client: LangGraphClient, thread_id: str) -> bool:
    """Whether every run on the thread has ended."""
    return all(run["status"] in TERMINAL for run in await client.runs.list(thread_id))


async def converse(client: LangGraphClient) -> dict[str, Any]:
    """The whole conversation on one supervisor thread of the server behind `client`."""
    thread_id = (await client.threads.create())["thread_id"]
    replies: dict[str, str] = {}

    async def say(text: str) -> str:
        # queued behind a run that a subagent's notification may have started meanwhile
        values = await client.runs.wait(
            thread_id, "supervisor", input={"messages": [{"role": "user", "content": text}]},
            multitask_strategy="enqueue",
        )  # fmt: skip
        assert isinstance(values, dict)
        # the answer to this message: later ones may answer task updates that came meanwhile
        messages = values["messages"]
        asked = max(i for i, m in enumerate(messages) if m["type"] == "human"
                    and m["content"] == text)  # fmt: skip
        reply = next(str(m["content"]) for m in messages[asked:]
                     if m["type"] == "ai" and m["content"] and not m.get("tool_calls"))  # fmt: skip
        print(f"user: {text}\nsupervisor: {reply}\n")
        replies[text] = reply
        return reply

    async def tasks() -> dict[str, Any]:
        values = (await client.threads.get_state(thread_id))["values"]
        assert isinstance(values, dict)
        return dict(values.get("async_tasks") or {})

    async def subagents_done() -> bool:
        return all([await runs_done(client, t) for t in await tasks()])

    await say("Research how LangGraph makes long-running agents durable, and write a retry "
              "helper in Python.")  # fmt: skip
    await wait_for(subagents_done, "the subagents to finish")
    await say("What did they find?")
    await say("Ask the coder to add type hints.")
    await wait_for(subagents_done, "the coder's follow-up")
    await say("What did they find?")
    await say("List my tasks.")

    async def supervisor_idle() -> bool:
        return await runs_done(client, thread_id)

    await wait_for(supervisor_idle, "the supervisor to settle")
    values = (await client.threads.get_state(thread_id))["values"]
    assert isinstance(values, dict)
    told = sorted({
        f"{event['agent_name']} {event['status']}" for m in values["messages"]
        if (event := (m.get("additional_kwargs") or {}).get(NOTIFICATION_KEY))
    })  # fmt: skip
    print("task updates the supervisor was told about:", ", ".join(told))
    final_tasks = await tasks()
    print("async_tasks:", {t["agent_name"]: t["status"] for t in final_tasks.values()})
    return {"thread_id": thread_id, "replies": replies, "async_tasks": final_tasks,
            "told": told}  # fmt: skip


async def run_in_process() -> dict[str, Any]:
    """Serve `langgraph.json` with fathom's server in this process and converse with it."""
    from fathom.server import create_app, in_process_client, load_deployment

    app = create_app(load_deployment(HERE / "langgraph.json").graphs)
    try:
        return await converse(in_process_client(app))
    finally:
        await app.state.fathom.runs.shutdown()


def main(url: str | None = None) -> dict[str, Any]:
    """Run the conversation in process, or against the server at `url`."""
    if url:
        return asyncio.run(converse(get_client(url=url)))
    return asyncio.run(run_in_process())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="a server hosting langgraph.json (default: in process)")
    main(parser.parse_args().url)
