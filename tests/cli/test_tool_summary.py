"""Tool-result summaries, computed from what fathom's real tools answer.

Two agent turns (a `ScriptedModel` on a real directory through `LocalShellBackend`) produce
the `ToolMessage`s: first every call that only reads or runs a command, at once, then the two
that change files. Calls of one turn run concurrently, so a listing made in the same turn as
a write would count the new file or not depending on which finished first. Each message is
summarized with the arguments of the call that produced it, as the displays do.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.backends import LocalShellBackend
from fathom.cli.tool_summary import PREVIEW_LINES, ResultLog, ToolSummary, summarize
from fathom.testing import ScriptedModel, ai, tool_call

Results = dict[str, tuple[dict[str, Any], ToolMessage]]

CALLS = {
    "ls": ("ls", {"path": "/"}),
    "glob": ("glob", {"pattern": "**/*.py"}),
    "grep_content": ("grep", {"pattern": "def ", "output_mode": "content"}),
    "grep_files": ("grep", {"pattern": "def "}),
    "grep_count": ("grep", {"pattern": "def ", "output_mode": "count"}),
    "grep_none": ("grep", {"pattern": "no such text"}),
    "read": ("read_file", {"file_path": "/README.md"}),
    "read_window": ("read_file", {"file_path": "/README.md", "offset": 10, "limit": 20}),
    "read_missing": ("read_file", {"file_path": "/nope.txt"}),
    "write": ("write_file", {"file_path": "/new.txt", "content": "one\ntwo\nthree\n"}),
    "edit": ("edit_file", {"file_path": "/src/b.py", "old_string": "return 2",
                           "new_string": "x = 2\n    return x"}),
    "execute": ("execute", {"command": "for i in 1 2 3 4 5 6 7 8; do echo line$i; done; exit 3"}),
    "execute_quiet": ("execute", {"command": "true"}),
}
CHANGES = ("write", "edit")
"""Asked for in a turn of their own, after the listings and reads."""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Each call's arguments and the `ToolMessage` the real tool answered."""
    root = tmp_path_factory.mktemp("project")
    (root / "src").mkdir()
    (root / "docs").mkdir()
    (root / "src" / "a.py").write_text("def a():\n    return 1\n\n\ndef a2():\n    pass\n")
    (root / "src" / "b.py").write_text("def b():\n    return 2\n")
    (root / "README.md").write_text("".join(f"line {n}\n" for n in range(1, 121)))
    calls = {key: tool_call(name, args, id=key) for key, (name, args) in CALLS.items()}
    reads = [call for key, call in calls.items() if key not in CHANGES]
    model = ScriptedModel(replies=[ai("", *reads), ai("", *(calls[k] for k in CHANGES)),
                                   ai("done")])
    agent = create_deep_agent(model, backend=LocalShellBackend(root, virtual_mode=True))
    state = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    answers = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    asked = [call for m in state["messages"] if isinstance(m, AIMessage)
             for call in m.tool_calls]
    assert sorted(str(call["id"]) for call in asked) == sorted(CALLS)
    return {call["id"]: (call["args"], answers[call["id"]]) for call in asked
            if call["id"] is not None}


def _summary(results: Results, key: str) -> ToolSummary:
    args, message = results[key]
    return summarize(str(message.name), message.text, args=args,
                     is_error=message.status == "error")


def test_listings_are_counted(results: Results) -> None:
    assert _summary(results, "ls").headline == "3 entries (2 folders): README.md, docs/, src/"
    assert _summary(results, "glob").headline == "2 files: a.py, b.py"


def test_grep_counts_matches_and_files_in_each_output_mode(
    results: Results,
) -> None:
    assert _summary(results, "grep_content").headline == "3 matches in 2 files"
    assert _summary(results, "grep_count").headline == "3 matches in 2 files"
    assert _summary(results, "grep_files").headline == "matches in 2 files: a.py, b.py"
    assert _summary(results, "grep_none").headline == "No matches found"


def test_read_file_says_how_many_lines(
    results: Results,
) -> None:
    whole = _summary(results, "read")
    assert whole.headline == "120 lines of /README.md"
    assert whole.lines == () and not whole.complete  # the lines themselves: /expand
    assert _summary(results, "read_window").headline == "lines 11-30 of 120 (/README.md)"


def test_writes_and_edits_say_what_changed(
    results: Results,
) -> None:
    assert _summary(results, "write").headline == "Updated file /new.txt (3 lines)"
    assert _summary(results, "edit").headline == (
        "Successfully replaced 1 instance(s) of the string in '/src/b.py' (1 line → 2 lines)"
    )


def test_execute_shows_the_exit_code_and_the_first_and_last_lines(
    results: Results,
) -> None:
    summary = _summary(results, "execute")
    assert results["execute"][1].status == "error"  # a non-zero exit marks the message
    assert summary.headline == "exit code 3 · 8 lines of output"
    assert summary.lines == ("line1", "line2", "…", "line6", "line7", "line8")
    assert not summary.error and not summary.complete
    assert _summary(results, "execute_quiet").headline == "exit code 0 · no output"


def test_a_tool_error_is_shown_whole(
    results: Results,
) -> None:
    summary = _summary(results, "read_missing")
    assert summary.error
    assert summary.headline == results["read_missing"][1].text.splitlines()[0]
    long_error = "\n".join(f"Traceback line {n}: " + "x" * 300 for n in range(40))
    whole = summarize("deploy", long_error, is_error=True)
    assert [whole.headline, *whole.lines] == long_error.splitlines()  # nothing cut


def test_other_tools_show_their_first_lines() -> None:
    text = "\n".join(f"row {n}" for n in range(10))
    summary = summarize("fetch_url", text)
    assert summary.headline == "row 0"
    assert summary.lines == tuple(f"row {n}" for n in range(1, 1 + PREVIEW_LINES))
    assert not summary.complete
    assert summarize("fetch_url", "ok").complete
    # an `execute` answer without its exit code (the tool itself failed) is an error, whole
    assert summarize("execute", "Error: sandbox is gone\ndetails").error


def test_result_log_expands_by_number_or_the_latest() -> None:
    log = ResultLog()
    assert log.expand("") == "no tool results yet in this session"
    assert log.add("ls", "a\nb") == "1"
    assert log.add("grep", "c") == "2"
    assert log.expand("") == "#2 grep:\nc"
    assert log.expand("1") == log.expand("#1") == "#1 ls:\na\nb"
    assert log.expand("7") == (
        "no tool result #7: this session has results #1 to #2; "
        "/expand with no number shows the latest"
    )
