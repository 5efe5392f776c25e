"""Tool calls are dispatched without their arguments, so checkpoints store them once."""

from __future__ import annotations

import random
import sqlite3
import string

from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from fathom import create_deep_agent
from fathom.compact_dispatch import ELIDED_ARGS_KEY
from fathom.testing import ScriptedModel, ai, tool_call


def _contents(n: int) -> list[str]:
    rng = random.Random(7)
    return [
        f"file{i:04d}:" + "".join(rng.choices(string.ascii_letters, k=2000)) for i in range(n)
    ]


def _run(tmp_path, contents: list[str]) -> sqlite3.Connection:
    def policy(request):
        done = sum(1 for m in request.messages if m.type == "tool")
        if done < len(contents):
            args = {"file_path": f"/f{done}.txt", "content": contents[done]}
            return ai("", tool_call("write_file", args))
        return ai("done")

    conn = sqlite3.connect(tmp_path / "run.db", check_same_thread=False)
    agent = create_deep_agent(ScriptedModel(policy=policy), checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    assert [result["files"][f"/f{i}.txt"]["content"] for i in range(len(contents))] == contents
    return conn


def _blobs(conn: sqlite3.Connection) -> list[bytes]:
    rows = conn.execute("select checkpoint from checkpoints union all select value from writes")
    return [bytes(blob) for (blob,) in rows if blob]


def test_each_written_content_is_stored_twice_in_the_tool_call_and_in_the_file(tmp_path):
    contents = _contents(12)
    blobs = _blobs(_run(tmp_path, contents))
    for content in contents:
        copies = sum(blob.count(content.encode()) for blob in blobs)
        assert copies == 2, (content[:8], copies)


def test_stored_bytes_stay_below_four_times_the_bytes_written(tmp_path):
    contents = _contents(40)
    conn = _run(tmp_path, contents)
    (checkpoints,) = conn.execute(
        "select sum(length(checkpoint)) + sum(length(metadata)) from checkpoints"
    ).fetchone()
    (writes,) = conn.execute("select sum(length(value)) from writes").fetchone()
    ratio = (checkpoints + writes) / sum(len(c) for c in contents)
    assert ratio < 4, ratio


def test_parallel_calls_each_get_their_own_arguments():
    model = ScriptedModel(
        replies=[
            ai(
                "",
                *[
                    tool_call("write_file", {"file_path": f"/p{i}.md", "content": f"body {i}"})
                    for i in range(4)
                ],
            ),
            ai("done"),
        ]
    )
    result = create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "go"}]})
    assert {p: d["content"] for p, d in result["files"].items()} == {
        f"/p{i}.md": f"body {i}" for i in range(4)
    }


def test_calls_sharing_an_id_keep_their_arguments_in_the_dispatch():
    first = {"name": "write_file", "args": {"file_path": "/a.md", "content": "A"}, "id": "same"}
    second = {"name": "write_file", "args": {"file_path": "/b.md", "content": "B"}, "id": "same"}
    model = ScriptedModel(
        replies=[AIMessage(content="", tool_calls=[first, second]), ai("done")]
    )
    seen = []

    from langchain.agents.middleware import wrap_tool_call

    @wrap_tool_call
    def record(request, handler):
        seen.append(dict(request.tool_call))
        return handler(request)

    create_deep_agent(model, middleware=[record]).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    # the two calls run in parallel, so they may be seen in either order
    assert sorted(c["args"]["file_path"] for c in seen) == ["/a.md", "/b.md"]
    assert not any(ELIDED_ARGS_KEY in c for c in seen)


def test_user_middleware_sees_the_restored_arguments():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "hello"})),
            ai("done"),
        ]
    )
    seen = []

    from langchain.agents.middleware import wrap_tool_call

    @wrap_tool_call
    def record(request, handler):
        seen.append(dict(request.tool_call))
        return handler(request)

    create_deep_agent(model, middleware=[record]).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    assert seen[0]["args"] == {"file_path": "/a.md", "content": "hello"}
    assert ELIDED_ARGS_KEY not in seen[0]


async def test_async_runs_restore_arguments_too():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/a.md", "content": "async"})),
            ai("done"),
        ]
    )
    result = await create_deep_agent(model).ainvoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    assert result["files"]["/a.md"]["content"] == "async"
