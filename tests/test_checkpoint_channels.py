"""`messages` and `files` are delta channels: a checkpoint does not carry the whole history."""

from __future__ import annotations

import sqlite3

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call


def test_messages_and_files_are_delta_channels():
    agent = create_deep_agent(ScriptedModel(replies=[ai("x")]))
    assert isinstance(agent.channels["messages"], DeltaChannel)
    assert isinstance(agent.channels["files"], DeltaChannel)


def _largest_checkpoint(tmp_path, steps: int) -> int:
    def policy(request):
        done = sum(1 for m in request.messages if m.type == "tool")
        if done < steps:
            args = {"file_path": f"/f{done}.txt", "content": "x" * 2000}
            return ai("", tool_call("write_file", args))
        return ai("done")

    conn = sqlite3.connect(tmp_path / f"{steps}.db", check_same_thread=False)
    agent = create_deep_agent(ScriptedModel(policy=policy), checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    assert len(result["files"]) == steps
    assert len(agent.get_state(config).values["messages"]) == 2 * steps + 2
    (largest,) = conn.execute("select max(length(checkpoint)) from checkpoints").fetchone()
    return largest


def test_checkpoint_rows_do_not_grow_with_the_length_of_the_run(tmp_path):
    short, long = _largest_checkpoint(tmp_path, 5), _largest_checkpoint(tmp_path, 40)
    # With whole-history checkpoints the 40-step row would be ~8x the 5-step one.
    assert long < 2 * short
