"""Budgets on fathom's server: async subagents are held to what the parent has left, their
reported usage counts towards the parent's cap, and a run's or an assistant's config sets
the caps.

Real fathom server app in process, real langgraph-sdk client over ASGI, scripted models.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from tests.server.support import eventually

from fathom import Budget, create_deep_agent
from fathom.budget import BUDGET_KEY, GRANT_KEY
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


def _supervisor(request: ScriptRequest) -> AIMessage | str:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return "started"
    if isinstance(last, HumanMessage) and last.text == "start":
        return ai("", tool_call("start_async_task",
                                {"description": "dig", "subagent_type": "researcher"}))
    return "noted"


def _researcher(request: ScriptRequest) -> AIMessage | str:
    """Ten calls if nothing stops it."""
    made = sum(isinstance(m, AIMessage) for m in request.messages)
    if made < 9:
        return ai(f"step {made}", tool_call("write_todos", {"todos": []}))
    return "found it"


async def _idle(client: Any, thread_id: str) -> bool:
    runs = await client.runs.list(thread_id)
    return bool(runs) and all(r["status"] not in ("pending", "running") for r in runs)


async def test_an_async_subagent_spends_only_what_is_left_and_its_usage_counts() -> None:
    researcher = ScriptedModel(policy=_researcher)
    app = create_app({
        "supervisor": create_deep_agent(
            ScriptedModel(policy=_supervisor),
            subagents=[{"name": "researcher", "description": "digs",
                        "graph_id": "researcher"}],
            budget=Budget(max_model_calls=6), name="supervisor"),
        # a budget with no caps of its own: it holds the run to the parent's grant
        "researcher": create_deep_agent(researcher, budget=Budget(), name="researcher"),
    })
    client = in_process_client(app)
    try:
        parent = (await client.threads.create())["thread_id"]
        first = await client.runs.wait(parent, "supervisor", input={
            "messages": [{"role": "user", "content": "start"}]})
        assert isinstance(first, dict) and first["messages"][-1]["content"] == "started"
        [task] = first["async_tasks"].values()

        async def reported() -> bool:
            thread = await client.threads.get(task["thread_id"])
            return "fathom_usage" in (thread["metadata"] or {})

        await eventually(reported, "the researcher to report its usage")
        child_run = await client.runs.get(task["thread_id"], task["run_id"])
        # one supervisor call had been made when it started the task: five were left
        assert child_run["metadata"][GRANT_KEY] == {"max_model_calls": 5}
        child = await client.threads.get_state(task["thread_id"])
        assert researcher.calls == 5
        assert "model-call cap is reached" in child["values"]["messages"][-1]["content"]

        await eventually(lambda: _idle(client, parent), "the supervisor to be idle")
        after = await client.runs.wait(parent, "supervisor", input={
            "messages": [{"role": "user", "content": "anything new?"}]})
        assert isinstance(after, dict)
        budget = after[BUDGET_KEY]
        assert budget["tasks"][task["task_id"]]["calls"] == 5
        assert budget["reached"] == "max_model_calls"
        assert budget["spent"]["calls"] >= 7  # the supervisor's 2, the researcher's 5
        final = after["messages"][-1]
        assert final["response_metadata"]["finish_reason"] == "budget"
    finally:
        await app.state.fathom.runs.shutdown()


async def test_an_assistants_config_and_a_runs_config_set_the_caps() -> None:
    model = ScriptedModel(policy=lambda request: "hello")
    app = create_app({"agent": create_deep_agent(model, budget=Budget(), name="agent")})
    client = in_process_client(app)
    try:
        assistant = await client.assistants.create(
            "agent", config={"configurable": {BUDGET_KEY: {"max_model_calls": 1}}})
        thread = (await client.threads.create())["thread_id"]
        hello = {"messages": [{"role": "user", "content": "hi"}]}
        first = await client.runs.wait(thread, assistant["assistant_id"], input=hello)
        assert isinstance(first, dict) and first["messages"][-1]["content"] == "hello"
        stopped = await client.runs.wait(thread, assistant["assistant_id"], input=hello)
        assert isinstance(stopped, dict)
        assert "model-call cap" in stopped["messages"][-1]["content"]
        assert stopped[BUDGET_KEY]["limits"] == {"max_model_calls": 1}
        # the run's own config wins over the assistant's, and the thread goes on
        raised = await client.runs.wait(
            thread, assistant["assistant_id"], input=hello,
            config={"configurable": {BUDGET_KEY: {"max_model_calls": 5}}})
        assert isinstance(raised, dict) and raised["messages"][-1]["content"] == "hello"
        assert raised[BUDGET_KEY]["spent"]["calls"] == 2
        assert model.calls == 2
    finally:
        await app.state.fathom.runs.shutdown()


async def test_a_bad_budget_in_a_runs_config_is_refused_before_the_run_starts() -> None:
    model = ScriptedModel(policy=lambda request: "hello")
    app = create_app({"agent": create_deep_agent(model, budget=Budget(), name="agent")})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        import httpx

        try:
            await client.runs.create(thread, "agent", input={"messages": []}, config={
                "configurable": {BUDGET_KEY: {"max_tokenz": 5}}})
        except httpx.HTTPStatusError as error:
            assert error.response.status_code == 422
            assert "max_tokenz" in error.response.text
        else:
            raise AssertionError("the run was accepted")
        assert model.calls == 0
    finally:
        await app.state.fathom.runs.shutdown()
