"""The supervisor's whole async subagent flow, against whichever servers host it.

Shared by the one-server and two-server tests: the supervisor launches `researcher`
(update strategy `interrupt`) and `coder` (`enqueue`), answers the user while both run,
checks both, updates both mid-run, cancels `coder`, lists them, and learns that
`researcher` finished (woken by its notification where the child can reach it).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk.client import LangGraphClient
from tests.async_e2e.support import Conversation, Gates, launched_id
from tests.server.support import eventually

NOTIFICATION_KEY = "deepagents_notification"


def notifications(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The task events of the notification messages in a thread's values."""
    return [
        m["additional_kwargs"][NOTIFICATION_KEY] for m in values["messages"]
        if m["type"] == "human" and NOTIFICATION_KEY in (m.get("additional_kwargs") or {})
    ]  # fmt: skip


async def run_status(client: LangGraphClient, thread_id: str, run_id: str) -> str:
    """A child run's status on the server that hosts it."""
    return str((await client.runs.get(thread_id, run_id))["status"])


async def supervisor_flow(
    user: Conversation, children: LangGraphClient, gates: Gates, *, woken: bool
) -> None:
    """Drive the flow; `children` reads the server hosting the child threads; `woken`
    says whether `researcher`'s end wakes the idle supervisor (children on its server)."""
    # launch two; the supervisor answers at once, and again while both still run
    answers = await user.tool_answers("start researcher:alpha coder:beta")
    researcher, coder = (launched_id(a) for a in answers)
    await gates.wait_started("alpha", "beta")
    values = await user.turn("say hello")
    assert values["messages"][-1]["content"] == "said: hello"
    tasks = await user.tasks()
    assert {t: tasks[t]["status"] for t in tasks} == {researcher: "running", coder: "running"}
    assert tasks[researcher]["agent_name"] == "researcher"
    assert tasks[coder]["agent_name"] == "coder"

    # check both
    [r_answer, c_answer] = await user.tool_answers(f"check {researcher} {coder}")
    assert '"status": "running"' in r_answer["content"]
    assert '"status": "running"' in c_answer["content"]
    assert f'"thread_id": "{researcher}"' in r_answer["content"]

    # interrupt: the current run stops, a new one starts on the same thread
    first_run = tasks[researcher]["run_id"]
    [answer] = await user.tool_answers(f"update {researcher} alpha-more")
    assert answer["content"] == f"Updated async subagent. task_id: {researcher}"
    await gates.wait_started("alpha-more")
    assert await run_status(children, researcher, first_run) == "interrupted"
    tasks = await user.tasks()
    assert tasks[researcher]["run_id"] != first_run
    assert tasks[researcher]["task_id"] == researcher

    # enqueue: the follow-up waits behind the current run, then runs after it
    coder_first = tasks[coder]["run_id"]
    [answer] = await user.tool_answers(f"update {coder} beta-more")
    assert answer["content"] == f"Queued the follow-up behind the current run. task_id: {coder}"
    tasks = await user.tasks()
    queued = tasks[coder]["run_id"]
    assert tasks[coder]["status"] == "pending"
    assert tasks[coder]["superseded_run_ids"] == [coder_first]
    assert await run_status(children, coder, queued) == "pending"
    assert not gates["beta-more"].started
    gates["beta"].release()
    await gates.wait_started("beta-more")
    assert await run_status(children, coder, coder_first) == "success"
    report = await user.check(coder)
    assert report["status"] == "running"  # the first run's success is not the task's

    # cancel coder while its follow-up runs
    [answer] = await user.tool_answers(f"cancel {coder}")
    assert answer["content"] == f"Cancelled async subagent task: {coder}"

    async def coder_stopped() -> bool:
        return await run_status(children, coder, queued) == "interrupted"

    await eventually(coder_stopped, "the cancelled run to stop")
    report = await user.check(coder)
    assert report["status"] == "cancelled"

    # researcher finishes: with the whole history, under the same task id
    gates["alpha-more"].release()
    if woken:

        async def was_woken() -> bool:
            state = await user.client.threads.get_state(user.thread_id)
            values = state["values"]
            assert isinstance(values, dict)
            last = values["messages"][-1]
            return last["type"] == "ai" and last["content"] == "notified: researcher success"

        await eventually(was_woken, "the researcher's notification to wake the supervisor")
        state = await user.client.threads.get_state(user.thread_id)
        values = state["values"]
        assert isinstance(values, dict)
        events = [e for e in notifications(values) if e["task_id"] == researcher]
        assert [e["status"] for e in events][-1] == "success"
        tasks = await user.tasks()
        assert tasks[researcher]["status"] == "success"  # recorded from the notification
    else:
        # no wake across servers: the refresh before the next model call tells the model
        second_run = tasks[researcher]["run_id"]

        async def finished() -> bool:
            return await run_status(children, researcher, second_run) == "success"

        await eventually(finished, "the researcher to finish")
        values = await user.turn("say anything new?")
        told = [e["status"] for e in notifications(values) if e["task_id"] == researcher]
        assert told == ["success"]
        assert (await user.tasks())[researcher]["status"] == "success"
    report = await user.check(researcher)
    assert report == {"status": "success", "thread_id": researcher,
                      "result": "researcher done: alpha | alpha-more"}  # fmt: skip

    # list: both, with their current statuses; the channel holds exactly the two tasks
    [answer] = await user.tool_answers("list")
    assert answer["content"].splitlines() == [
        "2 tracked task(s):",
        f"- task_id: {researcher}  agent: researcher  status: success",
        f"- task_id: {coder}  agent: coder  status: cancelled",
    ]
    [answer] = await user.tool_answers("list cancelled")
    assert f"task_id: {coder}" in answer["content"]
    assert researcher not in answer["content"]
    assert set(await user.tasks()) == {researcher, coder}
