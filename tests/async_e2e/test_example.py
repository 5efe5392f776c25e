"""`examples/async_subagents/`: the driver runs offline, and its `langgraph.json` deploys as is.

The script runs in a subprocess (exit code, key output lines); `main()` is imported and
its result checked; the same deployment served by `fathom serve` and by `langgraph dev`
is driven with `--url`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.server.servers import (
    REPO_ROOT,
    ServerProcess,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.system_requirements import needs

EXAMPLE = REPO_ROOT / "examples" / "async_subagents"
SCRIPT_TIMEOUT_S = 120
"""Bounds a hang of the example; it normally ends within seconds."""

EXPECTED_LINES = [
    "supervisor: I started the researcher and the coder; they work in the background. "
    "Ask me anything meanwhile.",
    "supervisor: Findings on 'how LangGraph makes long-running agents durable': LangGraph "
    "saves a checkpoint after every step",
    "def retry(call, attempts=3):",
    "supervisor: I asked the coder to add type hints; it continues on the same task.",
    "def retry(call: Callable[[], T], attempts: int = 3) -> T:",
    "agent: researcher  status: success",
    "agent: coder  status: success",
    "task updates the supervisor was told about: coder success, researcher success",
    "async_tasks: {'researcher': 'success', 'coder': 'success'}",
]


def load_example() -> ModuleType:
    """Import `examples/async_subagents/main.py` under a private module name."""
    name = "fathom_example_async_subagents_main"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_script(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "main.py"), *args], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_output(stdout: str) -> None:
    for line in EXPECTED_LINES:
        assert line in stdout, f"{line!r} not in output:\n{stdout}"


def test_async_subagents_example_runs_offline_as_a_script() -> None:
    assert_output(run_script())


def test_async_subagents_example_main_follows_up_on_the_same_task() -> None:
    result: dict[str, Any] = load_example().main()
    tasks = result["async_tasks"]
    by_name = {task["agent_name"]: task for task in tasks.values()}
    assert set(by_name) == {"researcher", "coder"}
    coder = by_name["coder"]
    assert coder["task_id"] == coder["thread_id"]
    # the follow-up ran as a new run of the same task; nothing was queued behind it
    assert len(coder["superseded_run_ids"]) == 1
    assert coder["superseded_run_ids"][0] != coder["run_id"]
    assert "superseded_run_ids" not in by_name["researcher"]
    assert result["told"] == ["coder success", "researcher success"]
    assert "Callable" in result["replies"]["What did they find?"]


def test_async_subagents_example_docstring_points_to_the_guide_and_deployment() -> None:
    module = load_example()
    assert module.__doc__ and "docs/async-subagents.md" in module.__doc__
    assert "fathom serve --config examples/async_subagents/langgraph.json" in module.__doc__


@pytest.mark.parametrize("kind", ["fathom", "langgraph-dev"])
def test_async_subagents_example_deploys_with_its_langgraph_json(
    kind: str, tmp_path: Path
) -> None:
    if kind == "fathom" and not fathom_serve_available():
        pytest.skip("no `fathom serve`")
    if kind == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    workdir = tmp_path / "deploy"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("__pycache__"))
    server = ServerProcess(kind=kind, workdir=workdir)
    server.start()
    try:
        assert_output(run_script("--url", server.url))
    finally:
        server.stop()
