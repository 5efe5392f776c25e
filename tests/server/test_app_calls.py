"""`fathom serve` keeps each run's model calls in the thread's `fathom_calls` metadata.

Real app in process, real langgraph-sdk client, a deep agent with a real subagent.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from fathom import create_deep_agent
from fathom.measure.calls import CALLS_METADATA_KEY, records_from_json
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


def _delegate(request: ScriptRequest) -> AIMessage | str:
    if request.turn_results:
        return "done: " + str(request.turn_results[-1].text)
    return ai("", tool_call("task", {"description": request.last_human_text,
                                     "subagent_type": "coffee"}))


def _app() -> Any:
    coffee = {"name": "coffee", "description": "Coffee orders.", "system_prompt": "Coffee.",
              "model": ScriptedModel(policy=lambda r: "one flat white")}
    return create_app({"desk": create_deep_agent(ScriptedModel(policy=_delegate),
                                                 subagents=[coffee], name="desk")})


async def test_each_run_appends_its_calls_to_the_thread_metadata() -> None:
    app = _app()
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        runs = []
        for text in ("a coffee", "another"):
            run = await client.runs.create(thread, "desk", input={
                "messages": [{"role": "user", "content": text}]})
            await client.runs.join(thread, run["run_id"])
            runs.append(run["run_id"])
        stored = (await client.threads.get(thread))["metadata"][CALLS_METADATA_KEY]
    finally:
        await app.state.fathom.runs.shutdown()
    records = records_from_json(stored)
    assert [(r.caller, r.kind) for r in records] == [
        ("desk", "agent"), ("coffee", "subagent"), ("desk", "agent")] * 2
    assert [r.run_id for r in records] == [runs[0]] * 3 + [runs[1]] * 3
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in records)
    assert records[0].output_calls == ["task"] and records[1].messages == 2
    assert records[2].new[-1].kind == "tool" and records[2].new[-1].text.endswith(
        "one flat white")
    # A run's first call is compared with nothing the run saw before: all of it is new.
    assert [i.kind for i in records[3].new] == ["system", "human", "ai", "tool", "ai", "human"]
