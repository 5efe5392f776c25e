"""Sandbox lifecycle: one workspace per thread or per assistant; skills' scripts run inside."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.backends import BubblewrapSandbox, SandboxScope
from fathom.testing import ScriptedModel, ai, tool_call


def sandbox(root):
    return BubblewrapSandbox(root_dir=root, timeout=120)


def test_each_thread_gets_its_own_workspace_and_close_removes_it(tmp_path):
    scope = SandboxScope(sandbox, tmp_path / "sandboxes")

    def policy(request):
        done = [m for m in request.messages if m.type == "tool"]
        if request.last_human_text == "write" and not done:
            return ai("", tool_call("write_file", {"file_path": "/note.txt", "content": "mine"}))
        if not request.tool_results:
            return ai("", tool_call("execute", {"command": "ls; cat note.txt"}))
        return ai(str(request.tool_results[-1].content))

    agent = create_deep_agent(
        ScriptedModel(policy=policy), backend=scope, checkpointer=InMemorySaver()
    )

    def run(thread, text):
        config = {"configurable": {"thread_id": thread}}
        return agent.invoke({"messages": [{"role": "user", "content": text}]}, config)

    run("alpha", "write")
    seen_by_alpha = run("alpha", "look")["messages"][-1].content
    seen_by_beta = run("beta", "look")["messages"][-1].content
    assert "mine" in seen_by_alpha
    assert "No such file" in seen_by_beta and "mine" not in seen_by_beta
    assert scope.keys() == ["alpha", "beta"]
    assert (scope.workspace("alpha") / "note.txt").read_text() == "mine"
    scope.close("alpha")
    assert not scope.workspace("alpha").exists() and scope.keys() == ["beta"]
    scope.close_all()
    assert list((tmp_path / "sandboxes").iterdir()) == []


def test_an_assistant_scope_is_shared_by_its_threads_and_odd_keys_are_safe(tmp_path):
    scope = SandboxScope(sandbox, tmp_path, scope="assistant")
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/shared.txt", "content": "x"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, backend=scope)
    config = {"configurable": {"thread_id": "t1", "assistant_id": "../../etc/evil"}}
    agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
    (workspace,) = list(tmp_path.iterdir())
    assert workspace.parent == tmp_path and ".." not in workspace.name
    assert (workspace / "shared.txt").read_text() == "x"


def test_a_skill_script_runs_inside_the_sandbox(tmp_path):
    box = BubblewrapSandbox(root_dir=tmp_path, timeout=120)
    skill = "---\nname: greet\ndescription: Greets people.\n---\nRun skills/greet/greet.py."
    uploaded = box.upload_files(
        [
            ("/skills/greet/SKILL.md", skill.encode()),
            ("/skills/greet/greet.py", b"import os\nprint('hello from', os.getcwd())\n"),
        ]
    )
    assert [u.error for u in uploaded] == [None, None]

    def policy(request):
        done = [m for m in request.messages if m.type == "tool"]
        if not done:
            return ai("", tool_call("read_file", {"file_path": "/skills/greet/SKILL.md"}))
        if len(done) == 1:
            return ai("", tool_call("execute", {"command": "python3 -B skills/greet/greet.py"}))
        return ai(str(done[-1].content))

    model = ScriptedModel(policy=policy)
    result = create_deep_agent(model, backend=box, skills=["/skills/"]).invoke(
        {"messages": [{"role": "user", "content": "greet"}]}
    )
    assert "greet" in model.requests[0].system_prompt
    assert "hello from /workspace" in result["messages"][-1].content


# --------------------------------------------------------------------------- idle expiry


class _Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _closable(closed: list[str]):
    """A real `BaseSandbox` over its workspace that records when it is closed."""
    from tests.backends.local_sandbox import LocalShellSandbox

    class Closable(LocalShellSandbox):
        max_timeout = 30.0

        def close(self) -> None:
            closed.append(self.root)

    return Closable


def test_an_idle_sandbox_is_closed_and_reopened_on_demand_with_its_files(tmp_path):
    closed: list[str] = []
    clock = _Clock()
    scope = SandboxScope(_closable(closed), tmp_path, idle_ttl=60, clock=clock)
    first = scope.get("alpha")
    assert first.write("/note.txt", "kept").error is None
    scope.get("beta")

    clock.now += 60 + 30  # idle_ttl plus the longest a command may run: not yet
    assert scope.expire_idle() == [] and scope.keys() == ["alpha", "beta"]
    scope.get("beta")  # beta is used again
    clock.now += 1
    assert scope.expire_idle() == ["alpha"]  # alpha alone has been idle too long
    assert closed == [str(scope.workspace("alpha").resolve())]
    assert scope.keys() == ["beta"]
    assert (scope.workspace("alpha") / "note.txt").read_text() == "kept"  # files stay

    again = scope.get("alpha")  # reopened on demand, over the same workspace
    assert again is not first
    read = again.read("/note.txt")
    assert read.file_data is not None and read.file_data["content"] == "kept"
    assert scope.keys() == ["alpha", "beta"]


def test_each_call_expires_the_other_idle_sandboxes_in_an_agent(tmp_path):
    closed: list[str] = []
    clock = _Clock()
    scope = SandboxScope(_closable(closed), tmp_path, idle_ttl=10, clock=clock)

    def policy(request):
        if not request.tool_results:
            return ai("", tool_call("ls", {"path": "/"}))
        return ai("listed")

    agent = create_deep_agent(ScriptedModel(policy=policy), backend=scope)
    agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                 {"configurable": {"thread_id": "old"}})
    clock.now += 10 + 30 + 1
    agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                 {"configurable": {"thread_id": "new"}})
    assert scope.keys() == ["new"]  # the new thread's call closed the old one
    assert closed == [str(scope.workspace("old").resolve())]


def test_without_idle_ttl_nothing_expires_and_bad_values_are_refused(tmp_path):
    clock = _Clock()
    scope = SandboxScope(_closable([]), tmp_path, clock=clock)
    scope.get("a")
    clock.now += 10**9
    assert scope.expire_idle() == [] and scope.keys() == ["a"]
    for bad in (0, -5, float("inf"), float("nan"), True, "60"):
        with pytest.raises(ValueError, match="idle_ttl must be a positive number"):
            SandboxScope(_closable([]), tmp_path, idle_ttl=bad)  # type: ignore[arg-type]
