"""An async subagent's run wakes the agent that launched it, on a real fathom server app.

The children are started as a supervisor's `start_async_task` starts them (the reference
package's wire contract): a thread with `subagent_name` metadata, and a run whose config
carries `configurable.deepagents_parent = {thread_id, assistant_id}`. Everything goes
through the real langgraph-sdk client over ASGI.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.types import interrupt
from langgraph_sdk.client import LangGraphClient
from tests.middleware.async_subagents.support import supervisor, turn
from tests.server.app_support import GatedGraph
from tests.server.support import eventually

from fathom import create_deep_agent
from fathom.middleware.async_subagents import parent_notifier
from fathom.middleware.async_subagents.parent_notifier import NOTIFICATION_KEY, USAGE_METADATA_KEY
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NOTIFIER_LOGGER = "fathom.middleware.async_subagents.parent_notifier"


@tool
def ask_human(question: str) -> str:
    """Ask a person and wait for the answer."""
    return str(interrupt({"question": question}))


def _explode(request: ScriptRequest) -> str:
    raise RuntimeError("secret internals: db password is hunter2")


class World:
    """A server with a supervisor, children that succeed, fail or wait, and a busy parent."""

    def __init__(self) -> None:
        self.supervisor_model = ScriptedModel(policy=lambda req: "noted")
        self.gate = GatedGraph()
        graphs: dict[str, Any] = {
            "supervisor": create_deep_agent(self.supervisor_model, name="supervisor"),
            "researcher": create_deep_agent(
                ScriptedModel(policy=lambda req: "Found it: <b>42</b> & more"),
                name="researcher",
            ),
            "broken": create_deep_agent(ScriptedModel(policy=_explode), name="broken"),
            "asker": create_deep_agent(
                ScriptedModel(replies=[ai("", tool_call("ask_human", {"question": "go?"}))],
                              policy=lambda req: "done"),
                tools=[ask_human],
                name="asker",
            ),
            "gated": self.gate.graph(),
        }
        self.client: LangGraphClient = in_process_client(create_app(graphs))

    async def parent(self, assistant_id: str = "supervisor") -> str:
        thread = await self.client.threads.create(metadata={"graph_id": assistant_id})
        return thread["thread_id"]

    async def launch(self, child: str, parent_thread: str, name: str | None = None,
                     parent_assistant: str = "supervisor") -> tuple[str, str]:
        """Start `child` as the async subagent `name` of `parent_thread`."""
        thread = await self.client.threads.create(
            metadata={"subagent_name": name or child, "parent_thread_id": parent_thread}
        )
        run = await self.client.runs.create(
            thread["thread_id"],
            child,
            input={"messages": [{"role": "user", "content": "please work"}]},
            config={"configurable": {"deepagents_parent": {
                "thread_id": parent_thread, "assistant_id": parent_assistant}}},
        )
        return thread["thread_id"], run["run_id"]

    async def notification_runs(self, parent_thread: str) -> list[dict[str, Any]]:
        return list(await self.client.runs.list(parent_thread))

    async def woken_and_done(self, parent_thread: str) -> dict[str, Any]:
        """Wait for the parent's notification run to finish; return the parent's values."""

        async def done() -> bool:
            runs = await self.notification_runs(parent_thread)
            return bool(runs) and all(r["status"] == "success" for r in runs)

        await eventually(done, "the parent to be woken and finish its run")
        state = await self.client.threads.get_state(parent_thread)
        return dict(state["values"])


def _notification(values: dict[str, Any]) -> dict[str, Any]:
    notes = [m for m in values["messages"]
             if (m.get("additional_kwargs") or {}).get(NOTIFICATION_KEY)]
    assert len(notes) == 1, values["messages"]
    return notes[0]


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


async def test_finished_child_wakes_idle_parent_whose_model_reads_the_result() -> None:
    world = World()
    parent = await world.parent()
    child_thread, child_run = await world.launch("researcher", parent)

    values = await world.woken_and_done(parent)

    note = _notification(values)
    assert note["type"] == "human"
    assert note["additional_kwargs"][NOTIFICATION_KEY] == {
        "task_id": child_thread, "agent_name": "researcher", "status": "success",
        "run_id": child_run,
    }
    text = _text(note)
    assert text.startswith("[SYSTEM NOTIFICATION")
    assert f"<task-id>{child_thread}</task-id>" in text
    assert "<status>success</status>" in text
    # the child's text is escaped, so it cannot close the notification's tags
    assert "Found it: &lt;b&gt;42&lt;/b&gt; &amp; more" in text
    seen = world.supervisor_model.requests[-1].messages
    assert any(NOTIFICATION_KEY in m.additional_kwargs for m in seen)
    assert values["messages"][-1]["content"] == "noted"
    assert (await world.client.runs.get(child_thread, child_run))["status"] == "success"


async def test_failed_child_sends_error_with_only_the_exception_type() -> None:
    world = World()
    parent = await world.parent()
    child_thread, child_run = await world.launch("broken", parent)

    values = await world.woken_and_done(parent)

    note = _notification(values)
    assert note["additional_kwargs"][NOTIFICATION_KEY]["status"] == "error"
    text = _text(note)
    assert "<status>error</status>" in text
    assert "RuntimeError" in text
    assert "hunter2" not in text
    assert (await world.client.runs.get(child_thread, child_run))["status"] == "error"


async def test_child_paused_on_interrupt_reports_waiting_with_its_question() -> None:
    world = World()
    parent = await world.parent()
    child_thread, _ = await world.launch("asker", parent)

    values = await world.woken_and_done(parent)

    note = _notification(values)
    assert note["additional_kwargs"][NOTIFICATION_KEY]["status"] == "waiting"
    text = _text(note)
    assert "<status>waiting</status>" in text
    assert "go?" in text
    assert (await world.client.threads.get(child_thread))["status"] == "interrupted"


async def test_busy_parent_gets_no_second_run_and_child_still_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=NOTIFIER_LOGGER)
    world = World()
    parent = await world.parent("gated")
    busy_run = await world.client.runs.create(parent, "gated", input={"x": 1})

    async def parent_busy() -> bool:
        return (await world.client.threads.get(parent))["status"] == "busy"

    await eventually(parent_busy, "the parent's own run to hold its thread")
    child_thread, child_run = await world.launch("researcher", parent, parent_assistant="gated")

    async def declined() -> bool:
        return any(parent in r.getMessage() and r.name == NOTIFIER_LOGGER
                   for r in caplog.records)

    await eventually(declined, "the notifier to decline the busy parent")
    runs = await world.notification_runs(parent)
    assert [r["run_id"] for r in runs] == [busy_run["run_id"]]
    assert (await world.client.runs.get(child_thread, child_run))["status"] == "success"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    world.gate.release.set()
    await world.client.runs.join(parent, busy_run["run_id"])


async def test_missing_parent_is_logged_and_the_child_run_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=NOTIFIER_LOGGER)
    world = World()
    gone = str(uuid.uuid4())
    child_thread, child_run = await world.launch("researcher", gone)

    async def logged() -> bool:
        return any(gone in r.getMessage() for r in caplog.records)

    await eventually(logged, "the notifier to log the missing parent")
    assert (await world.client.runs.get(child_thread, child_run))["status"] == "success"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_child_run_records_its_model_calls_and_tokens_on_its_thread() -> None:
    world = World()
    parent = await world.parent()
    child_thread, _ = await world.launch("researcher", parent)
    await world.woken_and_done(parent)

    usage = (await world.client.threads.get(child_thread))["metadata"][USAGE_METADATA_KEY]
    assert usage["calls"] == 1
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


def _delegate_then_answer(request: ScriptRequest) -> Any:
    if request.last_human_text == "look it up":  # the sync subagent's own task
        return "sub-answer"
    if not request.turn_results:
        return ai("", tool_call("task", {"description": "look it up",
                                         "subagent_type": "general-purpose"}))
    return "final answer"


async def test_nested_sync_subagent_neither_notifies_nor_escapes_the_usage_count() -> None:
    model = ScriptedModel(policy=_delegate_then_answer)
    supervisor = ScriptedModel(policy=lambda req: "noted")
    app = create_app({
        "supervisor": create_deep_agent(supervisor, name="supervisor"),
        "delegator": create_deep_agent(model, name="delegator"),
    })
    client = in_process_client(app)
    parent = (await client.threads.create(metadata={"graph_id": "supervisor"}))["thread_id"]
    child = (await client.threads.create(metadata={"subagent_name": "delegator"}))["thread_id"]
    await client.runs.create(
        child, "delegator", input={"messages": [{"role": "user", "content": "please work"}]},
        config={"configurable": {"deepagents_parent": {"thread_id": parent,
                                                       "assistant_id": "supervisor"}}},
    )

    async def woken() -> bool:
        runs = await client.runs.list(parent)
        return bool(runs) and all(r["status"] == "success" for r in runs)

    await eventually(woken, "the parent to be woken")
    values = (await client.threads.get_state(parent))["values"]
    note = _notification(values)  # exactly one: the nested agent did not report
    assert "final answer" in _text(note)
    assert len(await client.runs.list(parent)) == 1
    usage = (await client.threads.get(child))["metadata"][USAGE_METADATA_KEY]
    assert usage["calls"] == len(model.requests) == 3


async def test_a_parent_whose_refresh_saw_the_outcome_first_is_not_woken_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child's run ends; before its notifier wakes the parent, the parent's own refresh
    (a user turn meanwhile) reports the outcome. The notifier then finds the parent idle but
    already told, and starts no second run: one notice of the outcome in the conversation."""
    reached, go = asyncio.Event(), asyncio.Event()
    woke: list[bool] = []
    real_wake = parent_notifier.wake_parent

    async def held_wake(*args: Any, **kwargs: Any) -> bool:
        reached.set()
        await go.wait()  # the notifier is slower than the parent's next refresh
        woke.append(await real_wake(*args, **kwargs))
        return woke[-1]

    monkeypatch.setattr(parent_notifier, "wake_parent", held_wake)
    spec = {"name": "researcher", "description": "researches", "graph_id": "researcher"}
    app = create_app({
        "supervisor": supervisor([spec]),
        "researcher": create_deep_agent(ScriptedModel(policy=lambda req: "found it"),
                                        name="researcher"),
    })
    client = in_process_client(app)
    try:
        parent = (await client.threads.create())["thread_id"]
        await turn(client, parent, "start researcher")

        async def notifier_waiting() -> bool:
            return reached.is_set()

        await eventually(notifier_waiting, "the child to end and its notifier to report")
        values = await turn(client, parent, "say hi")  # its refresh reports the outcome
        [task] = values["async_tasks"].values()
        assert task["status"] == "success"
        go.set()

        async def notifier_done() -> bool:
            return bool(woke)

        await eventually(notifier_done, "the notifier to finish")
        assert woke == [False]
        assert len(await client.runs.list(parent)) == 2  # the two user turns only
        state = await client.threads.get_state(parent)
        events = [m["additional_kwargs"][NOTIFICATION_KEY] for m in state["values"]["messages"]
                  if NOTIFICATION_KEY in (m.get("additional_kwargs") or {})]
        assert [(e["run_id"], e["status"]) for e in events] == [(task["run_id"], "success")]
    finally:
        go.set()
        await app.state.fathom.runs.shutdown()
