"""End to end: an agent writes a package and its tests, runs them in the sandbox, fixes them."""

from __future__ import annotations

from fathom import create_deep_agent
from fathom.backends.shell.bubblewrap import BubblewrapSandbox
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# -B: no .pyc files, so an edit within the same second as the first run is not masked by
# a cached module with the same size and mtime
TEST_COMMAND = "python3 -B -m unittest discover -s tests -t . -v"
BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = (
    "import unittest\n\nfrom calc.ops import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def developer(request: ScriptRequest):
    """Write, test, read the failure, fix, test again, report."""
    results = [m for m in request.messages if m.type == "tool"]
    if not results:
        return ai(
            "",
            tool_call("write_file", {"file_path": "/calc/__init__.py", "content": ""}),
            tool_call("write_file", {"file_path": "/calc/ops.py", "content": BUGGY}),
            tool_call("write_file", {"file_path": "/tests/__init__.py", "content": ""}),
            tool_call("write_file", {"file_path": "/tests/test_ops.py", "content": TESTS}),
        )
    last = results[-1]
    if last.name == "write_file":
        return ai("", tool_call("execute", {"command": TEST_COMMAND}))
    if last.name == "execute" and "FAILED" in str(last.content):
        fix = {"file_path": "/calc/ops.py", "old_string": "a - b", "new_string": "a + b"}
        return ai("", tool_call("edit_file", fix))
    if last.name == "edit_file" and last.status != "error":
        return ai("", tool_call("execute", {"command": TEST_COMMAND}))
    return ai("The tests pass." if "OK" in str(last.content) else "Still failing.")


def test_an_agent_fixes_a_failing_test_inside_the_sandbox(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    model = ScriptedModel(policy=developer)
    agent = create_deep_agent(model, backend=BubblewrapSandbox(root_dir=workspace, timeout=120))
    result = agent.invoke({"messages": [{"role": "user", "content": "write add() with tests"}]})
    assert "execute" in model.requests[0].tool_names
    runs = [m for m in result["messages"] if m.type == "tool" and m.name == "execute"]
    assert len(runs) == 2
    assert "FAILED" in runs[0].content and runs[0].status == "error"
    assert "OK" in runs[1].content and runs[1].status != "error"
    assert result["messages"][-1].content == "The tests pass."
    assert (workspace / "calc" / "ops.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_the_execute_tool_is_offered_only_when_the_backend_can_run_commands():
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model).invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "execute" not in model.requests[0].tool_names
    assert "## Shell" not in model.requests[0].system_prompt


def test_sandbox_command_output_streams_as_custom_events(tmp_path):
    model = ScriptedModel(
        replies=[
            ai("", tool_call("execute", {"command": "for i in 1 2 3; do echo tick $i; done"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, backend=BubblewrapSandbox(root_dir=tmp_path, timeout=120))
    events = [
        chunk
        for chunk in agent.stream(
            {"messages": [{"role": "user", "content": "go"}]}, stream_mode="custom"
        )
    ]
    text = "".join(e["chunk"] for e in events if e.get("type") == "execute_output")
    assert "tick 1" in text and "tick 3" in text
