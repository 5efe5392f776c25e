"""Filesystem permissions and policy hooks: ordered rules enforced before the backend."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fathom import FilesystemPermission, create_deep_agent
from fathom.backends import (
    BackendPolicy,
    CompositeBackend,
    FileOperation,
    PolicyBackend,
    StateBackend,
    create_file_data,
)
from fathom.backends.errors import ErrorKind, error_kind
from fathom.middleware.permissions import PermissionPolicy, check_permissions_apply
from fathom.testing import ScriptedModel, ai, tool_call

FILES = {
    "/workspace/main.py": create_file_data("print('hi')  # token"),
    "/workspace/.env": create_file_data("API_KEY=token"),
    "/workspace/examples/demo.py": create_file_data("demo token"),
    "/etc/hosts": create_file_data("127.0.0.1 token"),
}


class CountingStateBackend(StateBackend):
    """A state backend that counts the calls that reach it."""

    calls: list[str]

    def __init__(self, runtime=None):
        super().__init__(runtime)
        self.calls = []

    def bind(self, runtime):
        bound = super().bind(runtime)
        bound.calls = self.calls
        return bound

    def read(self, file_path, offset=0, limit=2000):
        self.calls.append(f"read {file_path}")
        return super().read(file_path, offset, limit)

    def write(self, file_path, content):
        self.calls.append(f"write {file_path}")
        return super().write(file_path, content)


def guarded(rules, files=FILES, inner=None):
    runtime = SimpleNamespace(state={"files": dict(files)})
    return PolicyBackend(inner or StateBackend(), [PermissionPolicy(rules)]).bind(runtime)


def deny(ops, *paths):
    return FilesystemPermission(operations=ops, paths=list(paths), mode="deny")


def allow(ops, *paths):
    return FilesystemPermission(operations=ops, paths=list(paths))


def test_rule_fields_are_validated():
    assert FilesystemPermission(["read"], ["/a/**"]).mode == "allow"
    with pytest.raises(ValueError, match="operations"):
        FilesystemPermission(["execute"], ["/**"])
    with pytest.raises(ValueError, match="operations"):
        FilesystemPermission([], ["/**"])
    with pytest.raises(ValueError, match="absolute"):
        FilesystemPermission(["read"], ["workspace/**"])
    with pytest.raises(ValueError, match="mode"):
        FilesystemPermission(["read"], ["/**"], mode="maybe")
    with pytest.raises(TypeError, match="lists"):
        FilesystemPermission("read", ["/**"])


def test_no_rules_or_no_match_allows():
    backend = guarded([deny(["write"], "/secrets/**")])
    assert backend.read("/workspace/.env").file_data["content"] == "API_KEY=token"
    assert backend.write("/new.md", "x").error is None


def test_first_match_wins_specific_deny_before_broad_allow():
    rules = [
        deny(["read", "write"], "/workspace/.env", "/workspace/examples/**"),
        allow(["read", "write"], "/workspace/**"),
        deny(["read", "write"], "/**"),
    ]
    backend = guarded(rules)
    assert backend.read("/workspace/main.py").error is None
    refused = backend.read("/workspace/.env").error
    assert error_kind(refused) is ErrorKind.PERMISSION  # a typed refusal, in the rule's words
    error = str(refused)
    assert "permission denied" in error and "rule 1" in error
    assert "rule 1" in str(backend.read("/workspace/examples/demo.py").error)
    assert "rule 3" in str(backend.read("/etc/hosts").error)
    assert "rule 3" in str(backend.write("/outside.md", "x").error)
    assert backend.write("/workspace/notes.md", "x").error is None


def test_a_broad_allow_placed_first_shadows_the_specific_deny():
    # The reference's "bug" example: the deny for .env is never reached.
    rules = [allow(["read", "write"], "/workspace/**"), deny(["read"], "/workspace/.env")]
    assert guarded(rules).read("/workspace/.env").file_data["content"] == "API_KEY=token"


def test_listings_and_searches_leave_out_what_may_not_be_read():
    backend = guarded([deny(["read"], "/workspace/.env", "/etc/**")])
    assert [e["path"] for e in backend.ls("/").entries] == ["/workspace/"]
    assert "/workspace/.env" not in [e["path"] for e in backend.ls("/workspace").entries]
    assert [m["path"] for m in backend.glob("**").matches] == [
        "/workspace/examples/demo.py",
        "/workspace/main.py",
    ]
    assert sorted({m["path"] for m in backend.grep("token").matches}) == [
        "/workspace/examples/demo.py",
        "/workspace/main.py",
    ]
    assert "permission denied" in str(backend.ls("/etc").error)
    assert "permission denied" in str(backend.grep("token", "/etc/hosts").error)


def test_brace_alternation_and_globstar_in_rule_paths():
    backend = guarded([deny(["read"], "/**/*.{env,pem}", "/workspace/{examples,tmp}/**")])
    # `*` also matches an empty name, so `*.env` covers `.env` itself (no dotfile rule).
    assert "denied" in str(backend.read("/workspace/.env").error)
    assert "denied" in str(guarded([deny(["read"], "/**/*.{env,pem}")]).read("/a/b/c.pem").error)
    assert guarded([deny(["read"], "/**/*.{env,pem}")]).read("/workspace/main.py").error is None
    assert "denied" in str(backend.read("/workspace/examples/demo.py").error)
    assert backend.read("/workspace/main.py").error is None


def test_a_trailing_slash_pattern_covers_the_directory_tree():
    backend = guarded([deny(["write"], "/workspace/")])
    assert "denied" in str(backend.write("/workspace/deep/new.md", "x").error)
    assert backend.write("/other.md", "x").error is None


def test_paths_are_normalised_before_rules_are_checked():
    backend = guarded([deny(["read"], "/workspace/.env")])
    assert "denied" in str(backend.read("/workspace/examples/../.env").error)
    assert "denied" in str(backend.read("workspace//./.env").error)


def test_a_denied_operation_never_reaches_the_backend():
    inner = CountingStateBackend()
    backend = guarded([deny(["read", "write"], "/workspace/.env")], inner=inner)
    assert "denied" in str(backend.read("/workspace/.env").error)
    assert "denied" in str(backend.write("/workspace/.env", "x").error)
    assert "denied" in str(backend.edit("/workspace/.env", "API", "X").error)
    assert inner.calls == []
    backend.read("/workspace/main.py")
    assert inner.calls == ["read /workspace/main.py"]


async def test_async_operations_are_checked_too():
    backend = guarded([deny(["read", "write"], "/workspace/.env")])
    assert "denied" in str((await backend.aread("/workspace/.env")).error)
    assert "denied" in str((await backend.awrite("/workspace/.env", "x")).error)
    assert "denied" in str((await backend.aedit("/workspace/.env", "a", "b")).error)
    assert "denied" in str((await backend.adelete("/workspace/.env")).error)
    listed = await backend.aglob("**")
    assert "/workspace/.env" not in [m["path"] for m in listed.matches]


def test_a_read_only_agent_gets_errors_and_finishes_its_run():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/report.md", "content": "x"})),
            ai("", tool_call("read_file", {"file_path": "/data.txt"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, permissions=[deny(["write"], "/**")])
    result = agent.invoke(
        {
            "messages": [{"role": "user", "content": "go"}],
            "files": {"/data.txt": create_file_data("numbers")},
        }
    )
    write, read = [m for m in result["messages"] if m.type == "tool"]
    assert write.status == "error" and "permission denied" in write.content
    assert read.status != "error" and "numbers" in read.content
    assert "/report.md" not in result["files"]
    assert result["messages"][-1].content == "done"


async def test_permissions_apply_under_ainvoke():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("edit_file", {"file_path": "/policies/p.md", "old_string": "a",
                                           "new_string": "b"})),
            ai("done"),
        ]
    )
    agent = create_deep_agent(model, permissions=[deny(["write"], "/policies/**")])
    result = await agent.ainvoke(
        {
            "messages": [{"role": "user", "content": "go"}],
            "files": {"/policies/p.md": create_file_data("a")},
        }
    )
    (edit,) = [m for m in result["messages"] if m.type == "tool"]
    assert edit.status == "error" and "denied" in edit.content
    assert result["files"]["/policies/p.md"]["content"] == "a"


class ShellDisk(StateBackend):
    """Stands in for a sandbox: a backend that can execute commands."""

    def execute(self, command: str):  # pragma: no cover - never called here
        raise AssertionError("not run")


def test_rules_on_paths_a_shell_backend_serves_are_refused():
    routes = {"/memories/": StateBackend()}
    composite = CompositeBackend(default=ShellDisk(), routes=routes)
    check_permissions_apply([deny(["write"], "/memories/**")], composite)
    for path in ("/workspace/**", "/**"):
        with pytest.raises(NotImplementedError, match="route"):
            check_permissions_apply([deny(["write"], path)], composite)
    with pytest.raises(NotImplementedError, match="shell"):
        create_deep_agent(ScriptedModel(replies=[]), backend=ShellDisk(),
                          permissions=[deny(["write"], "/**")])
    # without a shell anywhere, any rule is fine
    check_permissions_apply([deny(["write"], "/**")], CompositeBackend(StateBackend(), routes))


class RedactSecrets(BackendPolicy):
    """A policy hook that rewrites content and keeps an audit log."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def check(self, operation: FileOperation):
        self.log.append(f"{operation.name} {operation.path}")
        if operation.name == "write" and "SECRET" in operation.arguments["content"]:
            content = operation.arguments["content"].replace("SECRET", "[redacted]")
            return FileOperation("write", operation.path, {"content": content})
        if operation.name == "delete":
            return "Error: deleting is switched off for this agent."
        return None


def test_policy_hooks_can_rewrite_veto_and_audit():
    policy = RedactSecrets()
    runtime = SimpleNamespace(state={"files": {}})
    backend = PolicyBackend(StateBackend(), [policy]).bind(runtime)
    written = backend.write("/a.md", "key SECRET here")
    assert written.files_update["/a.md"]["content"] == "key [redacted] here"
    refused = backend.delete("/a.md").error
    assert str(refused) == "Error: deleting is switched off for this agent."
    assert error_kind(refused) is ErrorKind.PERMISSION
    assert policy.log == ["write /a.md", "delete /a.md"]


def test_policies_run_in_order_and_the_first_refusal_wins():
    class Refuse(BackendPolicy):
        def __init__(self, name):
            self.name = name

        def check(self, operation):
            return f"refused by {self.name}"

    backend = PolicyBackend(StateBackend(), [Refuse("first"), Refuse("second")])
    assert str(backend.write("/x", "y").error) == "refused by first"


def test_policy_backend_wraps_a_factory():
    seen = []

    def factory(runtime):
        seen.append(runtime)
        return StateBackend(runtime)

    runtime = SimpleNamespace(state={"files": {"/a.md": create_file_data("A")}})
    backend = PolicyBackend(factory, [BackendPolicy()]).bind(runtime)
    assert backend.read("/a.md").file_data["content"] == "A" and seen == [runtime]


def test_a_symlink_inside_the_root_cannot_reach_a_denied_path(tmp_path):
    import os

    from fathom.backends import FilesystemBackend

    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("hunter2")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.md").write_text("hello")
    os.symlink(tmp_path / "secrets" / "key", tmp_path / "workspace" / "key")
    os.symlink(tmp_path / "secrets", tmp_path / "workspace" / "vault")
    rules = [deny(["read", "write"], "/secrets/**"), allow(["read", "write"], "/workspace/**"),
             deny(["read", "write"], "/**")]
    backend = PolicyBackend(
        FilesystemBackend(root_dir=tmp_path, virtual_mode=True), [PermissionPolicy(rules)]
    )
    error = str(backend.read("/workspace/key").error)
    assert "permission denied" in error and "/secrets/key" in error
    assert "permission denied" in str(backend.read("/workspace/vault/key").error)
    assert "permission denied" in str(backend.edit("/workspace/key", "hunter2", "x").error)
    assert (tmp_path / "secrets" / "key").read_text() == "hunter2"
    assert backend.read("/workspace/notes.md").error is None
    listed = [e["path"] for e in backend.ls("/workspace").entries]
    assert "/workspace/notes.md" in listed and "/workspace/key" not in listed
    assert [m["path"] for m in backend.grep("hunter2", "/workspace").matches] == []
    assert [m["path"] for m in backend.glob("**", "/workspace").matches] == [
        "/workspace/notes.md"
    ]


def test_rules_work_through_a_composite_of_disk_and_state(tmp_path):
    from fathom.backends import FilesystemBackend

    (tmp_path / "readme.md").write_text("disk")
    composite = CompositeBackend(
        default=StateBackend(),
        routes={"/workspace/": FilesystemBackend(root_dir=tmp_path, virtual_mode=True)},
    )
    rules = [allow(["read", "write"], "/workspace/**"), deny(["read", "write"], "/**")]
    runtime = SimpleNamespace(state={"files": {"/notes.md": create_file_data("state")}})
    backend = PolicyBackend(composite, [PermissionPolicy(rules)]).bind(runtime)
    assert backend.read("/workspace/readme.md").file_data["content"] == "disk"
    assert "denied" in str(backend.read("/notes.md").error)
    assert backend.write("/workspace/new.md", "x").error is None
    assert (tmp_path / "new.md").read_text() == "x"
    assert "denied" in str(backend.write("/elsewhere.md", "x").error)
    assert [m["path"] for m in backend.glob("**/*.md", "/workspace").matches] == [
        "/workspace/new.md",
        "/workspace/readme.md",
    ]
