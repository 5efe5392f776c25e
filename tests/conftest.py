"""Suite-wide test configuration: which tests are `slow`.

`slow` marks end-to-end tests (a real terminal, the examples, the benchmarks, the
bubblewrap sandbox, bounded race and kill trials). `make test` runs them all; while
developing, `pytest -m "not slow"` skips them. They are listed here by file, not marked
in each file, so that one place says what the quick run leaves out.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.system_requirements import requirement_of

_TESTS = Path(__file__).resolve().parent

SLOW_FILES = frozenset(
    {
        "benchmarks",  # a whole folder
        "protocols/acp/test_turns.py",  # these spawn `fathom acp`
        "protocols/acp/test_modes.py",
        "protocols/acp/test_mcp_and_bad_input.py",
        "protocols/acp/test_graph.py",
        "cli/test_command_pty.py",
        "cli/test_pty_line_editor.py",
        "cli/test_scripting.py",  # these spawn `fathom` (and `fathom serve`)
        "cli/test_pty_remote.py",
        "cli/test_pty_undo.py",
        "cli/test_pty_approvals.py",
        "cli/test_demo_server.py",
        "cli/test_tasks_command.py",
        "cli/test_mcp_command.py",
        "cli/test_pty_output.py",
        "tools/test_mcp_client_stdio.py",
        "tools/test_mcp_client_http.py",
        "protocols/mcp/test_mcp_serve.py",
        "test_examples.py",
        "test_docs_code.py",  # servers and `fathom mcp serve` in subprocesses
        "tracing/test_phoenix.py",  # starts a Phoenix server
        "tracing/test_switch.py",  # a fresh interpreter per check
        "test_sandbox_agent.py",
        "test_resume_after_kill.py",
        "test_startup_imports.py",  # fresh interpreters
        "middleware/async_subagents/test_async_subagents_http.py",
        "test_async_interop_langgraph_dev.py",
        "test_async_interop_reference.py",
        "async_e2e",  # a whole folder
        "protocols/a2a/test_a2a_serve.py",
        "backends/test_bubblewrap.py",
        "backends/test_sandbox_security.py",
        "backends/test_sandbox_seccomp.py",
        "backends/test_sandbox_overlay.py",
        "backends/test_sandbox_limits.py",
        "backends/test_path_races.py",
        "patterns/test_patterns_benchmark.py",
        "server/test_serve_cli.py",
        "server/web/test_web_page.py",
        "server/web/test_web_prefix.py",
        "server/web/test_serve_open.py",
        "server/test_contract_assistants.py",
        "server/test_contract_concurrency.py",
        "server/test_contract_errors.py",
        "server/test_contract_interrupts.py",
        "server/test_contract_multitask.py",
        "server/test_contract_runs.py",
        "server/test_contract_streaming.py",
        "server/test_contract_threads.py",
        "server/test_serve_restart.py",
    }
)
"""Files (or folders) under `tests/` whose tests are all `slow`."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a file in `SLOW_FILES` as `slow`."""
    for item in items:
        try:
            relative = item.path.resolve().relative_to(_TESTS)
        except ValueError:
            continue
        if relative.as_posix() in SLOW_FILES or relative.parts[0] in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """End the run with what it skipped (one line per missing requirement, with the
    package that would enable it, then one line per other reason) and with the
    random-order seed, so that a failure can be replayed."""
    skipped: list[pytest.TestReport] = terminalreporter.stats.get("skipped", [])
    groups: Counter[str] = Counter()
    for report in skipped:
        reason = _skip_reason(report)
        requirement = requirement_of(reason)
        if requirement is not None:
            groups[f"needs {requirement.name}: {requirement.enable}"] += 1
        else:
            groups[reason] += 1
    if groups:
        terminalreporter.section("skipped, by what they need")
        for line, count in sorted(groups.items()):
            noun = "test" if count == 1 else "tests"
            terminalreporter.line(f"{count:4d} {noun:5s} {line}")
    random_seed = getattr(terminalreporter.config.option, "randomly_seed", None)
    if isinstance(random_seed, int):
        terminalreporter.line(
            f"random order seed {random_seed}; replay this order with "
            f"-p randomly --randomly-seed={random_seed}"
        )
