"""Every path in a tool answer is delimited, so punctuation is never read as part of it.

A model that copies a path out of "saved to /large_tool_results/call_1." gets a file that
does not exist. Paths in answers are in backticks or quotes (or start a line of a
listing), and this test scans what every tool answers, on success and on common errors.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.backends.shell.local import LocalShellBackend
from fathom.testing import ScriptedModel, ai, tool_call

BARE_PATH = re.compile(r"(?:^|(?<=[\s(\[]))(/[\w./-]*[\w-])([.,:;)])(?=\s|$)", re.MULTILINE)
"""A path that no backtick or quote opens, followed by punctuation."""


def undelimited(text: str) -> list[str]:
    """Paths in `text` followed by punctuation outside any delimiter.

    grep's record lines (`/a.txt:` above its matching lines, `/a.txt: 3` in count mode)
    start with the path and are exempt: that is the line format grep answers in.
    """
    found = []
    for match in BARE_PATH.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if match.start() == line_start and match.group(2) == ":":
            continue
        found.append(match.group(0))
    return found


def test_the_scanner_catches_a_path_ending_a_sentence():
    assert undelimited("so it was saved to /large_tool_results/call_big_2. Its") == [
        "/large_tool_results/call_big_2."
    ]
    assert undelimited("(no files under /docs)") == ["/docs)"]
    assert undelimited("saved to `/large_tool_results/call_big_2`. Read 'a/b.txt'.") == []
    assert undelimited("/a.txt:\n  3: text\n/b.txt: 2") == []


@tool
def dump(query: str) -> str:
    """Return a very large report."""
    return "\n".join(f"row {i}: " + "v" * 95 for i in range(2000))


def edit(path: str, old: str, new: str) -> dict:
    return tool_call("edit_file", {"file_path": path, "old_string": old, "new_string": new})


def test_no_tool_answer_leaves_a_path_undelimited(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo two two\n")
    (tmp_path / "e.txt").write_text("")
    turns = [
        [
            tool_call("write_file", {"file_path": "/new.txt", "content": "hello"}),
            tool_call("write_file", {"file_path": "/a.txt", "content": "again"}),
            tool_call("ls", {"path": "/"}),
            tool_call("ls", {"path": "/nope"}),
            tool_call("read_file", {"file_path": "/missing.txt"}),
            tool_call("read_file", {"file_path": "/e.txt"}),
            tool_call("read_file", {"file_path": "/a.txt", "offset": 10}),
            tool_call("read_file", {"file_path": "relative.txt"}),
            tool_call("glob", {"pattern": "*.rs"}),
            tool_call("glob", {"pattern": "*.txt"}),
            tool_call("grep", {"pattern": "zzz"}),
            tool_call("grep", {"pattern": "two", "output_mode": "content"}),
            tool_call("grep", {"pattern": "two", "output_mode": "count"}),
            tool_call("execute", {"command": "seq 1 40000"}),
            tool_call("dump", {"query": "all"}),
        ],
        [
            edit("/a.txt", "two", "2"),
            edit("/a.txt", "absent", "x"),
            edit("/none.txt", "a", "b"),
            tool_call("delete", {"path": "/missing.txt"}),
        ],
        [
            edit("/a.txt", "one", "1"),
            tool_call("delete", {"path": "/new.txt"}),
        ],
        [edit("/a.txt", "1", "I")],
    ]
    model = ScriptedModel(replies=[*(ai("", *calls) for calls in turns), ai("done")])
    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    result = create_deep_agent(model, [dump], backend=backend).invoke(
        {"messages": [{"role": "user", "content": "go"}]}
    )
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == sum(len(calls) for calls in turns)
    assert {m.status for m in answers} == {"success", "error"}
    texts = {f"{m.name} ({m.status})": m.text for m in answers}
    assert "large_tool_results" in texts["dump (success)"]
    assert "large_tool_results" in texts["execute (success)"]
    bad = {f"{m.name}#{i}": undelimited(m.text) for i, m in enumerate(answers)}
    assert {label: paths for label, paths in bad.items() if paths} == {}, texts


def test_path_errors_delimit_the_example_paths_they_suggest():
    from fathom.backends._paths import PathError, normalize_file_path, normalize_path

    messages = []
    for bad in ("", "~/notes.md"):
        with pytest.raises(PathError) as caught:
            normalize_path(bad)
        messages.append(str(caught.value))
    with pytest.raises(PathError) as caught:
        normalize_file_path("/newdir/")
    messages.append(str(caught.value))
    for message in messages:
        assert undelimited(message) == [], message
        assert "such as `/" in message


def test_the_skills_list_delimits_each_skill_path():
    from fathom.middleware.skills import skills_section

    skill = {"name": "report", "path": "/skills/report/SKILL.md", "description": "Reports."}
    section = skills_section([skill])  # type: ignore[list-item]
    assert section is not None
    assert "- report (`/skills/report/SKILL.md`): Reports." in section.text
