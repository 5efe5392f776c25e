"""`fathom serve` keeps each thread's prompt-cache prefix figures in its metadata.

Real app in process, real langgraph-sdk client; the figures must equal the prefix reuse
rates computed from the scripted model's own record of the requests it received.
"""

from __future__ import annotations

import pytest

from fathom import create_deep_agent
from fathom.cache_metrics import PREFIX_METADATA_KEY, prefix_reuse_rates
from fathom.server import create_app, in_process_client
from fathom.testing import ScriptedModel, ai, tool_call


async def test_each_run_adds_its_prefix_reuse_rates_to_the_thread_metadata() -> None:
    model = ScriptedModel(replies=[
        ai("", tool_call("ls", {"path": "/"})), "nothing there",  # run 1: two requests
        ai("", tool_call("write_todos", {"todos": []})), ai("", tool_call("ls", {"path": "/"})),
        "still nothing",  # run 2: three requests
    ])
    app = create_app({"main": create_deep_agent(model, name="main")})
    client = in_process_client(app)
    try:
        thread = (await client.threads.create())["thread_id"]
        for text in ("look", "look again"):
            run = await client.runs.create(thread, "main", input={
                "messages": [{"role": "user", "content": text}]})
            await client.runs.join(thread, run["run_id"])
        figures = (await client.threads.get(thread))["metadata"][PREFIX_METADATA_KEY]
    finally:
        await app.state.fathom.runs.shutdown()
    canonical = [r.canonical_json() for r in model.requests]
    # pairs within a run
    rates = prefix_reuse_rates(canonical[:2]) + prefix_reuse_rates(canonical[2:])
    entry = figures["main"]
    assert entry["requests"] == 5 and entry["pairs"] == 3
    assert entry["rate_sum"] == pytest.approx(sum(rates), rel=1e-12)
    assert entry["mean"] == pytest.approx(sum(rates) / 3, rel=1e-12)
    assert entry["min"] == min(rates)
    assert 0 < entry["cached_share"] <= 1
