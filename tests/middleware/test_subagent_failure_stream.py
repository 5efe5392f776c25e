"""A subagent that fails streams as failed, with its error, while the parent goes on."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain.agents import create_agent

from fathom import create_deep_agent
from fathom.middleware import SubAgentMiddleware
from fathom.project.events import EventTranslator, ToolFinished
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "delegate it"}]}
FLAKY_PROMPT = "You are flaky."


def policy(request: Any) -> Any:
    if FLAKY_PROMPT in (request.system_prompt or ""):
        raise RuntimeError("model exploded")
    if not request.tool_results:
        return ai("", tool_call("task", {"description": "go", "subagent_type": "flaky"}))
    return ai("handled")


def flaky_agent() -> Any:
    spec = {"name": "flaky", "description": "d", "system_prompt": FLAKY_PROMPT, "tools": []}
    return create_deep_agent(ScriptedModel(policy=policy), subagents=[spec])


def _v3(agent: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the v3 protocol is marked experimental
        return agent.stream_events(USER, version="v3")


def test_a_failed_subagent_ends_failed_with_its_error_in_the_v3_stream():
    run = _v3(flaky_agent())
    handles = []
    for handle in run.subagents:
        handles.append(handle)
        with pytest.raises(RuntimeError, match="model exploded"):
            list(handle.messages)  # a failed subagent's own stream fails with its error
    (handle,) = handles
    assert handle.name == "flaky"
    assert handle.status == "failed"
    assert handle.error == "RuntimeError: model exploded"
    # the parent read the error and went on
    assert run.output is not None and run.output["messages"][-1].text == "handled"

    ends = [e for e in _v3(flaky_agent()).lifecycle if e["event"] != "started"]
    assert [(e["event"], e.get("error")) for e in ends] == [
        ("failed", "RuntimeError: model exploded")
    ]


async def test_a_failed_subagent_ends_failed_in_the_async_v3_stream():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = await flaky_agent().astream_events(USER, version="v3")
    ends = [e async for e in run.lifecycle if e["event"] != "started"]
    assert [(e["event"], e.get("error")) for e in ends] == [
        ("failed", "RuntimeError: model exploded")
    ]


def test_a_subagent_stopped_at_the_step_limit_ends_failed():
    def looping(request: Any) -> Any:
        if "You loop." in (request.system_prompt or ""):
            return ai("", tool_call("ls", {"path": "/"}))
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "looper"}))
        return ai("gave up")

    spec = {"name": "looper", "description": "d", "system_prompt": "You loop."}
    agent = create_deep_agent(ScriptedModel(policy=looping), subagents=[spec])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = agent.stream_events(USER, {"recursion_limit": 12}, version="v3")
    ends = [e for e in run.lifecycle if e["event"] != "started"]
    assert [e["event"] for e in ends] == ["failed"]
    assert ends[0]["error"].startswith("GraphRecursionError")


def test_a_subagent_that_succeeds_still_ends_completed():
    def fine(request: Any) -> Any:
        if "You are fine." in (request.system_prompt or ""):
            return ai("all good")
        if not request.tool_results:
            return ai("", tool_call("task", {"description": "go", "subagent_type": "fine"}))
        return ai("done")

    spec = {"name": "fine", "description": "d", "system_prompt": "You are fine."}
    agent = create_deep_agent(ScriptedModel(policy=fine), subagents=[spec])
    ends = [e for e in _v3(agent).lifecycle if e["event"] != "started"]
    assert [(e["event"], e.get("error")) for e in ends] == [("completed", None)]


def test_the_hand_composed_middleware_streams_the_failure_too():
    flaky = {"name": "flaky", "description": "d", "system_prompt": FLAKY_PROMPT,
             "model": ScriptedModel(policy=policy), "tools": []}  # fmt: skip
    agent = create_agent(
        ScriptedModel(policy=policy), middleware=[SubAgentMiddleware(subagents=[flaky])]
    )
    ends = [e for e in _v3(agent).lifecycle if e["event"] != "started"]
    assert [e["event"] for e in ends] == ["failed"]


def test_the_cli_events_and_the_subgraph_stream_show_the_failure():
    translator = EventTranslator()
    events = []
    failed_nodes = []
    for namespace, mode, data in flaky_agent().stream(
        USER, stream_mode=["updates", "messages", "custom", "tasks"], subgraphs=True
    ):
        if mode == "tasks" and namespace and data.get("error"):
            failed_nodes.append((namespace[0].split(":")[0], data["name"], str(data["error"])))
        events.extend(translator.translate(namespace, mode, data))
    # inside the subagent's namespace, the step that raised carries the error
    assert failed_nodes == [("tools", "model", "model exploded")]
    (finished,) = [e for e in events if isinstance(e, ToolFinished) and e.name == "task"]
    assert finished.is_error
    assert "failed: RuntimeError: model exploded" in finished.text
