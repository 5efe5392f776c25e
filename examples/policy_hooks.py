"""Policy hooks: a backend subclass or wrapper that refuses writes under some prefixes.

Deep Agents tutorial, section 7.7 (添加策略钩子 / adding policy hooks): for rules beyond
path permissions (rate limits, audit logs, moderation) subclass or wrap a backend. The
tutorial's `GuardedBackend(FilesystemBackend)` and generic `PolicyWrapper(BackendProtocol)`
are kept as written; each returns `WriteResult(error=...)` / `EditResult(error=...)` for a
path under a denied prefix, which the model receives as the tool's error.

Ported to fathom: only the imports change (`deepagents.backends.filesystem` →
`fathom.backends.filesystem`, `deepagents.backends.protocol` → `fathom.backends.protocol`;
the tutorial's `edit` signature is wrapped to fit 100 columns). The hosted model becomes a
`ScriptedModel` that makes four changes, two of them under `/protected/`.
`GuardedBackend` gets a temporary `root_dir` (with `virtual_mode=True`), so the files it
writes are real files there; `PolicyWrapper` wraps `StateBackend()` and runs under `invoke`
and `ainvoke`.

Run: `.venv/bin/python examples/policy_hooks.py`
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.backends import StateBackend, create_file_data
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.protocol import (
    BackendProtocol,
    EditResult,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


class GuardedBackend(FilesystemBackend):
    def __init__(self, *, deny_prefixes: list[str], **kwargs):
        super().__init__(**kwargs)
        self.deny_prefixes = [p if p.endswith("/") else p + "/" for p in deny_prefixes]

    def write(self, file_path: str, content: str) -> WriteResult:
        if any(file_path.startswith(p) for p in self.deny_prefixes):
            return WriteResult(error=f"Writes are not allowed under {file_path}")
        return super().write(file_path, content)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        if any(file_path.startswith(p) for p in self.deny_prefixes):
            return EditResult(error=f"Edits are not allowed under {file_path}")
        return super().edit(file_path, old_string, new_string, replace_all)


class PolicyWrapper(BackendProtocol):
    def __init__(self, inner: BackendProtocol, deny_prefixes: list[str] | None = None):
        self.inner = inner
        self.deny_prefixes = [p if p.endswith("/") else p + "/" for p in (deny_prefixes or [])]

    def _deny(self, path: str) -> bool:
        return any(path.startswith(p) for p in self.deny_prefixes)

    def ls(self, path: str) -> LsResult:
        return self.inner.ls(path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self.inner.read(file_path, offset=offset, limit=limit)
    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        return self.inner.grep(pattern, path, glob)
    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        return self.inner.glob(pattern, path)
    def write(self, file_path: str, content: str) -> WriteResult:
        if self._deny(file_path):
            return WriteResult(error=f"Writes are not allowed under {file_path}")
        return self.inner.write(file_path, content)
    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        if self._deny(file_path):
            return EditResult(error=f"Edits are not allowed under {file_path}")
        return self.inner.edit(file_path, old_string, new_string, replace_all)


RULES = "No deploys on Friday.\n"

STEPS = [
    tool_call("write_file", {"file_path": "/drafts/plan.md", "content": "Deploy on Monday.\n"}),
    tool_call("write_file", {"file_path": "/protected/new.md", "content": "Deploy any day.\n"}),
    tool_call(
        "edit_file",
        {"file_path": "/protected/rules.md", "old_string": "Friday", "new_string": "Sunday"},
    ),
    tool_call(
        "edit_file",
        {"file_path": "/drafts/plan.md", "old_string": "Monday", "new_string": "Tuesday"},
    ),
]


def change_policy(request: ScriptRequest) -> AIMessage:
    """Make the four changes one after another; then report the refusals."""
    done = [m for m in request.messages if isinstance(m, ToolMessage)]
    if len(done) < len(STEPS):
        return ai("", STEPS[len(done)])
    refused = [str(m.content) for m in done if m.status == "error"]
    return ai(f"{len(done) - len(refused)} changes made; refused: {refused}")


def model() -> ScriptedModel:
    return ScriptedModel(policy=change_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def show(state: dict[str, Any]) -> list[tuple[str, str]]:
    """Print and return (path, result) for each change."""
    rows = []
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    for call, result in zip(STEPS, results, strict=True):
        status = "error" if result.status == "error" else "ok"
        print(f"  {call['name']}({call['args']['file_path']}) -> {status}: {result.content}")
        rows.append((call["args"]["file_path"], f"{status}: {result.content}"))
    return rows


def guarded(root: Path) -> dict[str, Any]:
    """`GuardedBackend` over real files under `root`."""
    (root / "protected").mkdir(parents=True)
    (root / "protected" / "rules.md").write_text(RULES, encoding="utf-8")
    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        backend=GuardedBackend(deny_prefixes=["/protected"], root_dir=root, virtual_mode=True),
    )
    state = agent.invoke({"messages": [{"role": "user", "content": "Update the plan."}]})
    rows = show(state)
    on_disk = {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    print(f"  on disk: {on_disk}")
    return {"state": state, "rows": rows, "on_disk": on_disk}


def wrapped() -> dict[str, Any]:
    """`PolicyWrapper(StateBackend())`, run with `invoke` and with `ainvoke`."""
    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        backend=PolicyWrapper(StateBackend(), deny_prefixes=["/protected"]),
    )
    start = {
        "messages": [{"role": "user", "content": "Update the plan."}],
        "files": {"/protected/rules.md": create_file_data(RULES)},
    }
    outcome = {}
    for mode in ("invoke", "ainvoke"):
        print(f" {mode}:")
        state = agent.invoke(start) if mode == "invoke" else asyncio.run(agent.ainvoke(start))
        rows = show(state)
        files = {path: data["content"] for path, data in state["files"].items()}
        print(f"  files in state: {files}")
        outcome[mode] = {"state": state, "rows": rows, "files": files}
    return outcome


def main(workdir: str | None = None) -> dict[str, Any]:
    """Run both hooks; `GuardedBackend`'s root is under `workdir` (a temporary directory)."""
    print("GuardedBackend(FilesystemBackend):")
    with tempfile.TemporaryDirectory() as scratch:
        guarded_outcome = guarded(Path(workdir or scratch) / "workspace")
    print("PolicyWrapper(StateBackend()):")
    return {"guarded": guarded_outcome, "wrapped": wrapped()}


if __name__ == "__main__":
    main()
