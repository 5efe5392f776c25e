"""Async subagents on fathom's own server, in process: a supervisor launches, checks,
updates, cancels and lists background children hosted by the same app.

Everything goes through the real `langgraph-sdk` client over ASGI (`in_process_client`),
the supervisor's tools reach the children through the app that hosts it (the loopback
registry), and the children wait on events the tests set.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from langgraph_sdk.client import LangGraphClient
from starlette.responses import JSONResponse
from tests.middleware.async_subagents.support import Child, supervisor, tool_results, turn
from tests.server.app_support import until

from fathom.middleware.async_subagents.transport import create_run, read_thread
from fathom.middleware.context.summarization import SummarizationMiddleware
from fathom.server import create_app, in_process_client


class Deployment:
    """One app hosting the supervisor and its children."""

    def __init__(self, specs: list[dict[str, Any]], children: dict[str, Child]) -> None:
        self.children = children
        graphs: dict[str, Any] = {name: child.graph() for name, child in children.items()}
        graphs["supervisor"] = supervisor(specs)
        self.app = create_app(graphs)
        self.client: LangGraphClient = in_process_client(self.app)

    async def thread(self) -> str:
        return (await self.client.threads.create())["thread_id"]

    async def tasks(self, thread_id: str) -> dict[str, Any]:
        state = await self.client.threads.get_state(thread_id)
        return dict(state["values"].get("async_tasks") or {})  # pyright: ignore[reportAttributeAccessIssue]

    async def task_id(self, thread_id: str, agent: str) -> str:
        [found] = [t for t in (await self.tasks(thread_id)).values() if t["agent_name"] == agent]
        return found["task_id"]

    async def run_statuses(self, task_id: str) -> list[str]:
        runs = await self.client.runs.list(task_id)
        return [r["status"] for r in sorted(runs, key=lambda r: r["created_at"])]


SPECS = [
    {"name": "researcher", "description": "researches", "graph_id": "researcher"},
    {"name": "coder", "description": "codes", "graph_id": "coder"},
    {"name": "writer", "description": "writes", "graph_id": "writer", "update_strategy": "enqueue"},
    {"name": "broken", "description": "fails", "graph_id": "broken"},
]


@pytest.fixture
async def deployment() -> AsyncIterator[Deployment]:
    names = ("researcher", "coder", "writer", "broken")
    children = {n: Child(n, fail=n == "broken") for n in names}
    deployed = Deployment(SPECS, children)
    try:
        yield deployed
    finally:
        for child in children.values():
            child.release.set()
        await deployed.app.state.fathom.runs.shutdown()


def _report(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, list):
        content = content[0]["text"]
    return json.loads(content)


async def test_supervisor_launches_checks_updates_cancels_and_lists_while_children_run(
    deployment: Deployment,
) -> None:
    d = deployment
    thread = await d.thread()
    # the supervisor answers while both children are held at their gates
    values = await turn(d.client, thread, "start researcher coder")
    launched = tool_results(values)
    assert [m["content"].split("task_id: ")[0] for m in launched] == [
        "Launched async subagent. "
    ] * 2
    assert values["messages"][-1]["content"] == "done"
    researcher, coder = await d.task_id(thread, "researcher"), await d.task_id(thread, "coder")
    tasks = await d.tasks(thread)
    assert {t["status"] for t in tasks.values()} == {"running"}
    assert tasks[researcher]["thread_id"] == researcher
    child_thread = await d.client.threads.get(researcher)
    assert child_thread["metadata"]["subagent_name"] == "researcher"
    assert child_thread["metadata"]["parent_thread_id"] == thread
    await until(lambda: [len(d.children[n].seen) for n in ("researcher", "coder")] == [1, 1])

    values = await turn(d.client, thread, f"check {researcher} {coder}")
    assert [_report(m)["status"] for m in tool_results(values)] == ["running", "running"]

    # interrupt strategy: the run restarts with the whole history, under the same task id
    values = await turn(d.client, thread, f"update {researcher} also cover X")
    [answer] = tool_results(values)
    assert answer["content"] == f"Updated async subagent. task_id: {researcher}"
    await until(lambda: len(d.children["researcher"].seen) == 2, "the restarted run")
    assert d.children["researcher"].seen[1] == ["task for researcher", "also cover X"]
    assert d.children["researcher"].cancelled == 1

    values = await turn(d.client, thread, f"cancel {coder}")
    assert tool_results(values)[0]["content"] == f"Cancelled async subagent task: {coder}"
    await until(lambda: d.children["coder"].cancelled == 1, "the coder's run to stop")

    d.children["researcher"].release.set()

    async def researcher_done() -> bool:
        return (await d.run_statuses(researcher))[-1] == "success"

    await _eventually(researcher_done)
    assert await d.run_statuses(researcher) == ["interrupted", "success"]

    values = await turn(d.client, thread, "list")
    [listing] = tool_results(values)
    assert f"task_id: {researcher}  agent: researcher  status: success" in listing["content"]
    assert f"task_id: {coder}  agent: coder  status: cancelled" in listing["content"]
    tasks = await d.tasks(thread)
    assert tasks[researcher]["status"] == "success" and tasks[coder]["status"] == "cancelled"
    assert set(tasks) == {researcher, coder}

    values = await turn(d.client, thread, f"check {researcher}")
    report = _report(tool_results(values)[0])
    assert report["status"] == "success"
    assert report["result"] == "researcher answer to: also cover X"


async def test_enqueued_follow_up_waits_behind_the_current_run(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start writer")
    writer = await d.task_id(thread, "writer")
    first_run = (await d.tasks(thread))[writer]["run_id"]
    await until(lambda: len(d.children["writer"].seen) == 1)

    values = await turn(d.client, thread, f"update {writer} then polish it")
    assert tool_results(values)[0]["content"] == (
        f"Queued the follow-up behind the current run. task_id: {writer}"
    )
    record = (await d.tasks(thread))[writer]
    assert record["superseded_run_ids"] == [first_run]
    assert record["status"] == "pending" and record["run_id"] != first_run
    assert d.children["writer"].cancelled == 0  # the first run goes on

    d.children["writer"].release.set()
    await until(lambda: len(d.children["writer"].seen) == 2, "the queued run to start")
    assert d.children["writer"].seen[1] == [
        "task for writer", "writer answer to: task for writer", "then polish it",
    ]


async def test_refresh_before_a_model_call_reports_a_finished_task(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start researcher")
    researcher = await d.task_id(thread, "researcher")
    d.children["researcher"].release.set()

    async def finished() -> bool:
        return (await d.run_statuses(researcher)) == ["success"]

    await _eventually(finished)
    values = await turn(d.client, thread, "say hi")
    # the model was told before it answered, without calling a tool
    notices = [m for m in values["messages"] if m["type"] == "human"
               and "deepagents_notification" in m.get("additional_kwargs", {})]
    assert len(notices) == 1
    text = "".join(b["text"] for b in notices[0]["content"] if b["type"] == "text")
    assert "<status>success</status>" in text
    assert "researcher answer to: task for researcher" in text
    assert (await d.tasks(thread))[researcher]["status"] == "success"
    assert values["messages"][-1]["content"] == "said: say hi"


async def _eventually(condition: Any) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + 60
    while not await condition():
        if time.monotonic() > deadline:  # bounds a hang only
            pytest.fail("the condition did not hold within 60 s")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------- bad input


async def test_a_child_that_raises_is_reported_as_error(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start broken")
    broken = await d.task_id(thread, "broken")
    d.children["broken"].release.set()

    async def failed() -> bool:
        return (await d.run_statuses(broken)) == ["error"]

    await _eventually(failed)
    values = await turn(d.client, thread, f"check {broken}")
    [answer] = tool_results(values)
    report = _report(answer)
    assert report["status"] == "error" and "broken broke" in report["error"]
    assert (await d.tasks(thread))[broken]["status"] == "error"


async def test_a_truncated_task_id_is_refused_with_the_known_ids(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start researcher")
    researcher = await d.task_id(thread, "researcher")
    before = await d.tasks(thread)
    values = await turn(d.client, thread, f"check {researcher[:8]}")
    [answer] = tool_results(values)
    assert answer["status"] == "error"
    assert "truncated" in answer["content"] and researcher in answer["content"]
    assert await d.tasks(thread) == before


async def test_check_on_a_cancelled_task_says_cancelled(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start coder")
    coder = await d.task_id(thread, "coder")
    await until(lambda: len(d.children["coder"].seen) == 1)
    await turn(d.client, thread, f"cancel {coder}")
    values = await turn(d.client, thread, f"check {coder}")
    assert _report(tool_results(values)[0])["status"] == "cancelled"
    values = await turn(d.client, thread, f"cancel {coder}")
    assert tool_results(values)[0]["content"] == f"Task {coder} was already cancelled."
    assert (await d.tasks(thread))[coder]["status"] == "cancelled"


async def test_a_second_update_to_one_task_in_one_turn_is_refused(deployment: Deployment) -> None:
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start writer")
    writer = await d.task_id(thread, "writer")
    first_run = (await d.tasks(thread))[writer]["run_id"]
    values = await turn(d.client, thread, f"update2 {writer}")
    sent, refused = tool_results(values)
    assert sent["content"].startswith("Queued the follow-up")
    assert refused["status"] == "error" and refused["content"].startswith("Not sent:")
    record = (await d.tasks(thread))[writer]
    assert record["superseded_run_ids"] == [first_run]
    assert len(await d.client.runs.list(writer)) == 2


async def test_an_unknown_subagent_type_is_answered_with_the_available_types(
    deployment: Deployment,
) -> None:
    d = deployment
    thread = await d.thread()
    values = await turn(d.client, thread, "start nosuch")
    [answer] = tool_results(values)
    assert answer["status"] == "error"
    assert "Unknown async subagent type `nosuch`" in answer["content"]
    assert "`researcher`" in answer["content"]
    assert await d.tasks(thread) == {}


async def test_a_task_of_an_unknown_thread_is_an_error_answer_not_an_exception() -> None:
    """The server lost the child's thread (404): the check answers, the run goes on."""
    child = Child("researcher")
    d = Deployment(SPECS[:1], {"researcher": child})
    thread = await d.thread()
    await turn(d.client, thread, "start researcher")
    researcher = await d.task_id(thread, "researcher")
    child.release.set()
    await _eventually(lambda: _done(d, researcher))
    await d.client.threads.delete(researcher)
    values = await turn(d.client, thread, f"check {researcher}")
    [answer] = tool_results(values)
    assert answer["status"] == "error" and "404" in answer["content"]
    assert uuid.UUID(researcher)
    await d.app.state.fathom.runs.shutdown()


async def _done(d: Deployment, task_id: str) -> bool:
    return (await d.run_statuses(task_id)) == ["success"]


async def test_task_ids_survive_two_summarizations() -> None:
    """`async_tasks` is a state channel of its own: summarizing the messages (twice), which
    takes the launch out of what the model is shown, leaves the tracked ids, so the model
    can still list and check its tasks."""
    summaries: list[int] = []

    def summarize(messages: Any) -> str:
        summaries.append(len(messages))
        return f"summary {len(summaries)}"

    child = Child("researcher")
    summarization = SummarizationMiddleware(
        summarizer=summarize, trigger=("messages", 6), keep=("messages", 2)
    )
    graphs: dict[str, Any] = {
        "researcher": child.graph(),
        "supervisor": supervisor(SPECS[:1], middleware=(summarization,)),
    }
    app = create_app(graphs)
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        await turn(client, thread, "start researcher")
        state = await client.threads.get_state(thread)
        [task_id] = state["values"]["async_tasks"]  # pyright: ignore[reportCallIssue,reportArgumentType,reportIndexIssue]
        for n in range(12):
            if len(summaries) >= 2:
                break
            await turn(client, thread, f"say hi {n}")
        assert len(summaries) >= 2
        values = (await client.threads.get_state(thread))["values"]
        assert isinstance(values, dict)
        assert set(values["async_tasks"]) == {task_id}
        values = await turn(client, thread, "list")
        [listing] = tool_results(values)
        assert f"task_id: {task_id}  agent: researcher  status: running" in listing["content"]
    finally:
        child.release.set()
        await app.state.fathom.runs.shutdown()


def _asking_graph() -> Any:
    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "may I deploy?"})
        return {"messages": [AIMessage(f"user said {answer}")]}

    g = StateGraph(MessagesState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile()


async def test_a_paused_child_is_waiting_with_its_question_and_cancel_only_marks_it() -> None:
    spec = {"name": "asker", "description": "asks", "graph_id": "asker"}
    app = create_app({"asker": _asking_graph(), "supervisor": supervisor([spec])})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        await turn(client, thread, "start asker")
        state = await client.threads.get_state(thread)
        [task_id] = state["values"]["async_tasks"]  # pyright: ignore[reportCallIssue,reportArgumentType,reportIndexIssue]

        async def paused() -> bool:
            return (await client.threads.get(task_id))["status"] == "interrupted"

        await _eventually(paused)
        values = await turn(client, thread, f"check {task_id}")
        report = _report(tool_results(values)[0])
        assert report["status"] == "waiting"
        assert [i["value"] for i in report["interrupts"]] == [{"question": "may I deploy?"}]
        values = await turn(client, thread, f"cancel {task_id}")
        assert tool_results(values)[0]["content"] == f"Cancelled async subagent task: {task_id}"
        # nothing ran to cancel: the child still waits for its human
        assert (await client.threads.get(task_id))["status"] == "interrupted"
        assert [r["status"] for r in await client.runs.list(task_id)] == ["success"]
        values = await turn(client, thread, f"check {task_id}")
        assert _report(tool_results(values)[0])["status"] == "cancelled"
    finally:
        await app.state.fathom.runs.shutdown()


class _LessCapableServer:
    """A real fathom app behind a filter that makes it answer like a server implementing
    less of the API (aegra): threads without `values` and `interrupts`, and 422 for
    `multitask_strategy="interrupt"`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.refused = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and scope["method"] == "POST" and path.endswith("/runs"):
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            if json.loads(body or b"{}").get("multitask_strategy") == "interrupt":
                self.refused += 1
                response = JSONResponse({"detail": "multitask_strategy not supported"}, 422)
                await response(scope, receive, send)
                return
            replay = [{"type": "http.request", "body": body, "more_body": False}]

            async def again() -> Any:
                return replay.pop() if replay else await receive()

            await self.app(scope, again, send)
            return
        if scope["type"] == "http" and scope["method"] == "GET" and path.count("/") == 2:
            await self.app(scope, receive, self._strip(send))
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _strip(send: Any) -> Any:
        start: dict[str, Any] = {}

        async def filtered(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            body = json.loads(message.get("body") or b"{}")
            body.pop("values", None)
            body.pop("interrupts", None)
            data = json.dumps(body).encode()
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(data)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": data})

        return filtered


async def test_a_server_without_thread_values_or_interrupt_strategy_still_works() -> None:
    """Thread values and interrupts are read from the thread's state instead, and an
    interrupting follow-up becomes a cancel followed by a plain run."""
    child = Child("researcher")
    app = create_app({"researcher": child.graph(), "asker": _asking_graph()})
    filtered = _LessCapableServer(app)
    client = LangGraphClient(httpx.AsyncClient(
        transport=httpx.ASGITransport(app=filtered), base_url="http://less.local"
    ))  # fmt: skip
    try:
        asking = (await client.threads.create())["thread_id"]
        go = {"messages": [{"role": "user", "content": "go"}]}
        await client.runs.wait(asking, "asker", input=go)
        assert "values" not in await client.threads.get(asking)
        thread = await read_thread(client, asking)
        assert thread["status"] == "interrupted"
        assert thread["values"]["messages"][0]["content"] == "go"
        [[pending]] = thread["interrupts"].values()
        assert pending["value"] == {"question": "may I deploy?"}

        busy = (await client.threads.create())["thread_id"]
        first = await client.runs.create(busy, "researcher", input={"messages": [
            {"role": "user", "content": "one"}]})  # fmt: skip
        await until(lambda: len(child.seen) == 1)
        second = await create_run(
            client, thread_id=busy, assistant_id="researcher",
            input={"messages": [{"role": "user", "content": "two"}]},
            multitask_strategy="interrupt", active_run_id=first["run_id"],
        )  # fmt: skip
        assert filtered.refused == 1
        assert (await client.runs.get(busy, first["run_id"]))["status"] == "interrupted"
        await until(lambda: len(child.seen) == 2)
        assert child.seen[1] == ["one", "two"]
        child.release.set()
        await client.runs.join(busy, second["run_id"])
        assert (await client.runs.get(busy, second["run_id"]))["status"] == "success"
    finally:
        child.release.set()
        await app.state.fathom.runs.shutdown()


async def test_a_fork_child_starts_from_the_parents_conversation() -> None:
    child = Child("forker")
    spec = {"name": "forker", "description": "forks", "graph_id": "forker", "mode": "fork"}
    app = create_app({"forker": child.graph(), "supervisor": supervisor([spec])})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        await turn(client, thread, "say earlier words")
        await turn(client, thread, "start forker")
        await until(lambda: len(child.seen) == 1)
        seen = child.seen[0]
        assert seen[:3] == ["say earlier words", "said: say earlier words", "start forker"]
        assert seen[-1].endswith("task for forker") and len(seen) == 4
    finally:
        child.release.set()
        await app.state.fathom.runs.shutdown()


async def test_a_wake_up_notification_is_recorded_and_not_reported_twice(
    deployment: Deployment,
) -> None:
    """A run started by a child's notification (what a child sends to wake its idle
    parent) records the outcome, so the refresh before the model call adds no second
    notice of the same outcome."""
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start researcher")
    researcher = await d.task_id(thread, "researcher")
    run_id = (await d.tasks(thread))[researcher]["run_id"]
    d.children["researcher"].release.set()
    await _eventually(lambda: _done(d, researcher))
    event = {"task_id": researcher, "agent_name": "researcher", "status": "success",
             "run_id": run_id}  # fmt: skip
    values = await d.client.runs.wait(thread, "supervisor", input={"messages": [
        {"role": "user", "content": "researcher finished", "deepagents_notification": event},
    ]})  # fmt: skip
    assert isinstance(values, dict)
    notices = [m for m in values["messages"]
               if "deepagents_notification" in m.get("additional_kwargs", {})]
    assert [m["content"] for m in notices] == ["researcher finished"]
    assert (await d.tasks(thread))[researcher]["status"] == "success"


async def test_a_notification_of_an_outcome_already_reported_is_dropped_unanswered(
    deployment: Deployment,
) -> None:
    """The other order: the supervisor's own refresh reports the child's outcome first, then
    the child's notifier wakes it with the same outcome. That second notice is dropped and
    its run ends before any model call, so the conversation holds one notice and one answer."""
    d = deployment
    thread = await d.thread()
    await turn(d.client, thread, "start researcher")
    researcher = await d.task_id(thread, "researcher")
    run_id = (await d.tasks(thread))[researcher]["run_id"]
    d.children["researcher"].release.set()
    await _eventually(lambda: _done(d, researcher))
    before = await turn(d.client, thread, "say hi")  # its refresh reports the success
    notices = [m for m in before["messages"]
               if "deepagents_notification" in m.get("additional_kwargs", {})]
    assert [m["additional_kwargs"]["deepagents_notification"]["run_id"] for m in notices] == [
        run_id]
    event = {"task_id": researcher, "agent_name": "researcher", "status": "success",
             "run_id": run_id}  # fmt: skip
    values = await d.client.runs.wait(thread, "supervisor", input={"messages": [
        {"role": "user", "content": "researcher finished", "deepagents_notification": event},
    ]})  # fmt: skip
    assert isinstance(values, dict) and "__error__" not in values, values
    assert [m["id"] for m in values["messages"]] == [m["id"] for m in before["messages"]]
    assert (await d.tasks(thread))[researcher]["status"] == "success"
