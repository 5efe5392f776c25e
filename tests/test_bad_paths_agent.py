"""An agent on a confined disk: every escape attempt is a tool error and the run goes on."""

from __future__ import annotations

import os
import sqlite3

from langgraph.checkpoint.sqlite import SqliteSaver

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.testing import ScriptedModel, ai, tool_call


def test_escapes_are_refused_nothing_outside_changes_and_the_checkpoint_survives(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside / "secret.txt", root / "link_out")
    os.symlink(outside, root / "dir_out")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"latin-1 name")
    (root / "ok.md").write_text("inside")

    attempts = [
        tool_call("read_file", {"file_path": "~/.bashrc"}),
        tool_call("read_file", {"file_path": "/../outside/secret.txt"}),
        tool_call("read_file", {"file_path": "/link_out"}),
        tool_call("edit_file", {"file_path": "/link_out", "old_string": "top",
                                "new_string": "no"}),
        tool_call("write_file", {"file_path": "/dir_out/new.txt", "content": "x"}),
        tool_call("ls", {"path": "/dir_out"}),
        tool_call("read_file", {"file_path": "/caf\udce9.txt"}),
        tool_call("read_file", {"file_path": "/etc/passwd"}),
    ]
    listing = [
        tool_call("ls", {"path": "/"}),
        tool_call("grep", {"pattern": "secret"}),
        tool_call("glob", {"pattern": "**"}),
    ]
    model = ScriptedModel(replies=[ai("", *attempts), ai("", *listing), ai("done")])
    conn = sqlite3.connect(tmp_path / "cp.db", check_same_thread=False)
    agent = create_deep_agent(
        model,
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        checkpointer=SqliteSaver(conn),
    )
    config = {"configurable": {"thread_id": "t"}}
    result = agent.invoke({"messages": [{"role": "user", "content": "try"}]}, config)

    tool_messages = [m for m in result["messages"] if m.type == "tool"]
    refused, answers = tool_messages[: len(attempts)], tool_messages[len(attempts) :]
    assert all(m.status == "error" for m in refused), [m.content for m in refused]
    assert "top secret" not in " ".join(str(m.content) for m in tool_messages)
    ls_root, grep_all, glob_all = (str(m.content) for m in answers)
    assert "caf\\xe9.txt" in ls_root and "/ok.md" in ls_root
    assert "link_out" not in ls_root and "dir_out" not in ls_root
    assert "secret" not in glob_all and "/ok.md" in glob_all
    assert "/link_out" not in grep_all
    assert result["messages"][-1].content == "done"

    assert (outside / "secret.txt").read_text() == "top secret"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    # the whole exchange, surrogate path included, was checkpointed and reads back
    saved = agent.get_state(config).values["messages"]
    assert len(saved) == len(result["messages"])
