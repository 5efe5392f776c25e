"""`FilesystemBackend(root_dir=".", virtual_mode=True)`: the agent's files are real files.

Deep Agents tutorial, section 7.2.2 (FilesystemBackend, 本地磁盘): the backend reads and
writes real files under `root_dir`. `virtual_mode=True` anchors every path at the root and
blocks `..`, `~` and absolute paths that would leave it; without it `root_dir` protects
nothing.

Ported to fathom: only the import changes (`deepagents.backends` → `fathom.backends`); the
hosted model becomes a `ScriptedModel` that writes a report, then tries to read
`/../outside.txt` and `/etc/passwd`. `root_dir="."` stays as written, but `main()` first
changes into a temporary directory (and back afterwards), so the example writes nothing into
the repository. Next to that root lies `outside.txt`, a file the agent must not reach.

Run: `.venv/bin/python examples/filesystem_backend.py`
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

REPORT_PATH = "/reports/summary.md"
REPORT = "# Summary\n\nAll checks passed.\n"
SECRET = "the outside secret\n"

STEPS = [
    tool_call("write_file", {"file_path": REPORT_PATH, "content": REPORT}),
    tool_call("read_file", {"file_path": "/../outside.txt"}),
    tool_call("read_file", {"file_path": "/etc/passwd"}),
]


def report_policy(request: ScriptRequest) -> AIMessage:
    """Take the steps one at a time, then say what worked."""
    done = [m for m in request.messages if isinstance(m, ToolMessage)]
    if len(done) < len(STEPS):
        return ai("", STEPS[len(done)])
    refused = [m for m in done if m.status == "error"]
    return ai(f"Wrote {REPORT_PATH}; {len(refused)} of the reads were refused or not found.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=report_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def files_under(directory: Path) -> dict[str, str]:
    """Every file under `directory`, relative path → text."""
    return {
        p.relative_to(directory).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def main(workdir: str | None = None) -> dict[str, Any]:
    """Run the agent in `<workdir>/project` (a temporary directory by default)."""
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(workdir or scratch)
        root = base / "project"
        root.mkdir()
        (base / "outside.txt").write_text(SECRET, encoding="utf-8")
        before_outside = files_under(base)

        from fathom.backends import FilesystemBackend

        previous = os.getcwd()
        os.chdir(root)
        try:
            agent = create_deep_agent(
                model=model(),
                backend=FilesystemBackend(root_dir=".", virtual_mode=True),
            )
            state = agent.invoke(
                {"messages": [{"role": "user", "content": "Write the report, then check."}]}
            )
        finally:
            os.chdir(previous)

        results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        for call, result in zip(STEPS, results, strict=True):
            status = "error" if result.status == "error" else "ok"
            print(f"{call['name']}({call['args']['file_path']!r}) -> {status}: {result.content}")
        on_disk = files_under(root)
        outside = {k: v for k, v in files_under(base).items() if not k.startswith("project/")}
        print(f"files on disk under the root: {sorted(on_disk)}")
        print(
            f"the machine's /etc/passwd exists: {os.path.exists('/etc/passwd')}; the agent's "
            "/etc/passwd is <root>/etc/passwd"
        )
        print(f"files outside the root unchanged: {outside == before_outside}")
        leaked = any(SECRET.strip() in str(m.content) for m in results)
        print(f"secret leaked to the model: {leaked}")
        print(state["messages"][-1].content)
        return {"state": state, "on_disk": on_disk, "outside": outside, "root": str(root)}


if __name__ == "__main__":
    main()
