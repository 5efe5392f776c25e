"""Sandbox lifecycle: one workspace per thread or per assistant; skills' scripts run inside."""

from __future__ import annotations

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
