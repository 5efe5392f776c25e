"""The six filesystem tools end to end: `create_deep_agent` driven by a `ScriptedModel`.

Every test scripts one model turn of tool calls, then a final answer, and checks what the
tools returned (the `ToolMessage`s the model sees next), that the run reached the final
answer, and what ended up in `files`.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import re
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent, create_file_data
from fathom.backends.utils import MAX_EDIT_BYTES
from fathom.middleware.filesystem import (
    EMPTY_CONTENT_WARNING,
    FILESYSTEM_PROMPT,
    GREP_TRUNCATION_NOTE,
    NO_LINES_REQUESTED_WARNING,
    READ_FILE_TRUNCATION_MSG,
)
from fathom.middleware.filesystem.answers import READ_OUTPUT_CHARS
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.scripted import ScriptRequest

OLD = "2024-01-01T00:00:00Z"
FINAL = "done"
TOOLS = [
    "delete", "edit_file", "glob", "grep", "ls", "read_file", "task", "write_file", "write_todos"
]


def fd(content: str | bytes, stamp: str = OLD) -> dict:
    """File data with fixed timestamps, so listings and comparisons are deterministic."""
    data = dict(create_file_data(content))
    data["created_at"] = data["modified_at"] = stamp
    return data


@dataclass
class Run:
    result: dict[str, Any]
    model: ScriptedModel

    @property
    def tool_messages(self) -> list[ToolMessage]:
        return [m for m in self.result["messages"] if m.type == "tool"]

    @property
    def only(self) -> ToolMessage:
        (message,) = self.tool_messages
        return message

    @property
    def files(self) -> dict[str, Any]:
        return self.result.get("files", {})

    @property
    def final(self) -> AIMessage:
        return self.result["messages"][-1]


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def drive_with(mode: str, replies: list[Any], files: dict[str, Any] | None = None) -> Run:
    model = ScriptedModel(replies=replies)
    agent = create_deep_agent(model)
    state: dict[str, Any] = {"messages": [{"role": "user", "content": "go"}]}
    if files is not None:
        state["files"] = copy.deepcopy(files)
    result = asyncio.run(agent.ainvoke(state)) if mode == "ainvoke" else agent.invoke(state)
    return Run(result, model)


@pytest.fixture
def drive(mode: str):
    """`drive(*tool_calls, files=...)`: one turn of tool calls, then the final answer."""

    def _drive(*calls: Any, files: dict[str, Any] | None = None) -> Run:
        return drive_with(mode, [ai("", *calls), ai(FINAL)], files)

    return _drive


def assert_finished(run: Run) -> None:
    assert run.final.type == "ai"
    assert run.final.content == FINAL
    assert not run.final.tool_calls


def assert_error(run: Run, tool: str, *fragments: str) -> str:
    """The single tool result is an error for `tool`, the model saw it, the run finished."""
    message = run.only
    assert message.status == "error"
    assert message.name == tool
    text = message.text
    assert text.startswith("Error")
    for fragment in fragments:
        assert fragment in text
    seen = run.model.requests[1].messages[-1]
    assert seen.type == "tool"
    assert seen.text == text
    assert_finished(run)
    return text


def assert_success(message: ToolMessage, tool: str) -> str:
    assert message.status == "success"
    assert message.name == tool
    return message.text


# --------------------------------------------------------------------------- read_file


def test_read_file_numbers_lines(drive) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/a.txt"}),
        files={"/a.txt": fd("hello\nworld\n")},
    )
    assert assert_success(run.only, "read_file") == "     1\thello\n     2\tworld"
    assert_finished(run)


def test_read_file_pages_with_offset_and_limit(drive) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11))
    run = drive(
        tool_call("read_file", {"file_path": "/ten.txt", "offset": 2, "limit": 3}),
        files={"/ten.txt": fd(text)},
    )
    assert run.only.text == (
        "     3\tline 3\n"
        "     4\tline 4\n"
        "     5\tline 5\n"
        "[showing lines 3-5 of 10; call read_file with offset=5 to read more]"
    )


def test_read_file_last_page_has_no_continuation_note(drive) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11))
    run = drive(
        tool_call("read_file", {"file_path": "/ten.txt", "offset": 8, "limit": 5}),
        files={"/ten.txt": fd(text)},
    )
    assert run.only.text == "     9\tline 9\n    10\tline 10"


def test_read_file_empty_file(drive) -> None:
    run = drive(tool_call("read_file", {"file_path": "/e.txt"}), files={"/e.txt": fd("")})
    assert assert_success(run.only, "read_file") == EMPTY_CONTENT_WARNING


def test_read_file_cuts_long_lines(drive) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/w.txt"}),
        files={"/w.txt": fd("a" * 2500 + "\nshort\n")},
    )
    assert run.only.text == (
        "     1\t" + "a" * 2000 + " [… 500 more characters on this line]\n     2\tshort"
        + READ_FILE_TRUNCATION_MSG.format(file_path="/w.txt")
    )


def test_read_file_offset_past_end_is_an_error(drive) -> None:
    files = {"/a.txt": fd("one\ntwo\n")}
    run = drive(tool_call("read_file", {"file_path": "/a.txt", "offset": 2}), files=files)
    text = assert_error(run, "read_file", "'/a.txt'", "below 2")
    assert text.startswith("Error: Line offset 2 exceeds file length (2 lines)")
    assert run.files == files


# --------------------------------------------------------------------------- ls


def test_ls_lists_entries_with_size_and_time(drive) -> None:
    files = {
        "/a.txt": fd("hello"),
        "/héllo.md": fd("é"),
        "/sub/b.txt": fd("x"),
        "/sub/deep/c.txt": fd("y"),
    }
    run = drive(tool_call("ls", {"path": "/"}), files=files)
    assert assert_success(run.only, "ls") == (
        f"/a.txt  (5 B, {OLD})\n/héllo.md  (2 B, {OLD})\n/sub/"
    )


def test_ls_defaults_to_root_and_lists_subdirectories(drive) -> None:
    files = {"/a.txt": fd("hello"), "/sub/b.txt": fd("xy"), "/sub/deep/c.txt": fd("y")}
    run = drive(tool_call("ls", {}), tool_call("ls", {"path": "/sub"}), files=files)
    root, sub = run.tool_messages
    assert root.text == f"/a.txt  (5 B, {OLD})\n/sub/"
    assert sub.text == f"/sub/b.txt  (2 B, {OLD})\n/sub/deep/"


def test_ls_empty_filesystem(drive) -> None:
    run = drive(tool_call("ls", {"path": "/"}))
    assert assert_success(run.only, "ls") == "No files found"


def test_ls_missing_directory_is_an_error(drive) -> None:
    run = drive(tool_call("ls", {"path": "/nope"}), files={"/a.txt": fd("a")})
    assert_error(run, "ls", "directory '/nope' not found")


# --------------------------------------------------------------------------- write_file


def test_write_file_creates_the_file(drive) -> None:
    run = drive(tool_call("write_file", {"file_path": "/new.txt", "content": "fresh\n"}))
    assert assert_success(run.only, "write_file") == "Updated file /new.txt"
    assert list(run.files) == ["/new.txt"]
    data = run.files["/new.txt"]
    assert data["content"] == "fresh\n"
    assert data["encoding"] == "utf-8"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", data["modified_at"])
    assert_finished(run)


def test_write_file_keeps_other_files(drive) -> None:
    files = {"/keep.txt": fd("keep")}
    run = drive(tool_call("write_file", {"file_path": "/new.txt", "content": "x"}), files=files)
    assert run.files["/keep.txt"] == files["/keep.txt"]
    assert run.files["/new.txt"]["content"] == "x"


def test_two_writes_in_one_message_both_land(drive) -> None:
    run = drive(
        tool_call("write_file", {"file_path": "/one.txt", "content": "1"}),
        tool_call("write_file", {"file_path": "/two/two.txt", "content": "2"}),
    )
    assert [m.text for m in run.tool_messages] == [
        "Updated file /one.txt", "Updated file /two/two.txt"
    ]
    assert {p: d["content"] for p, d in run.files.items()} == {
        "/one.txt": "1",
        "/two/two.txt": "2",
    }


def test_relative_path_is_rooted_at_slash(drive, mode: str) -> None:
    run = drive_with(
        mode,
        [
            ai("", tool_call("write_file", {"file_path": "notes/a.md", "content": "# A\n"})),
            ai("", tool_call("read_file", {"file_path": "notes/a.md"})),
            ai(FINAL),
        ],
    )
    wrote, read = run.tool_messages
    assert wrote.text == "Updated file /notes/a.md"
    assert read.status == "success"
    assert read.text == "     1\t# A"
    assert list(run.files) == ["/notes/a.md"]
    assert_finished(run)


def test_write_to_existing_file_overwrites_it(drive) -> None:
    files = {"/a.txt": fd("original\n"), "/b.txt": fd("other\n")}
    run = drive(tool_call("write_file", {"file_path": "/a.txt", "content": "clobber"}), files=files)
    assert assert_success(run.only, "write_file") == "Updated file /a.txt"
    data = run.files["/a.txt"]
    assert data["content"] == "clobber"
    assert data["created_at"] == OLD  # still the same file: its creation time is kept
    assert data["modified_at"] != OLD
    assert run.files["/b.txt"] == files["/b.txt"]
    assert_finished(run)


def test_write_file_over_the_size_limit_is_refused(drive) -> None:
    files = {"/keep.txt": fd("keep")}
    content = "y" * (6 * 1024 * 1024)
    run = drive(tool_call("write_file", {"file_path": "/big.txt", "content": content}), files=files)
    assert_error(
        run,
        "write_file",
        f"'/big.txt' is {len(content):,} bytes, over the {MAX_EDIT_BYTES:,}-byte limit",
        "Split the content into several smaller files",
    )
    assert run.files == files


# --------------------------------------------------------------------------- edit_file


def test_edit_file_replaces_unique_text(drive) -> None:
    files = {"/a.txt": fd("alpha\nbeta\n")}
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "beta", "new_string": "B"}),
        files=files,
    )
    assert assert_success(run.only, "edit_file") == (
        "Successfully replaced 1 instance(s) of the string in '/a.txt'"
    )
    data = run.files["/a.txt"]
    assert data["content"] == "alpha\nB\n"
    assert data["created_at"] == OLD
    assert data["modified_at"] != OLD
    assert_finished(run)


def test_edit_file_replace_all_counts_occurrences(drive) -> None:
    run = drive(
        tool_call(
            "edit_file",
            {"file_path": "/a.txt", "old_string": "x", "new_string": "y", "replace_all": True},
        ),
        files={"/a.txt": fd("x x x\n")},
    )
    assert run.only.text == "Successfully replaced 3 instance(s) of the string in '/a.txt'"
    assert run.files["/a.txt"]["content"] == "y y y\n"


def test_edit_file_non_unique_old_string_is_refused(drive) -> None:
    files = {"/a.txt": fd("x x x\n")}
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "x", "new_string": "y"}),
        files=files,
    )
    assert_error(
        run, "edit_file", "Error: String 'x' appears 3 times in file.", "set replace_all=True"
    )
    assert run.files == files


def test_edit_file_old_string_not_found(drive) -> None:
    files = {"/a.txt": fd("hello\n")}
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "bye", "new_string": "y"}),
        files=files,
    )
    assert run.only.text == "Error: String not found in file: 'bye'"
    assert_error(run, "edit_file")
    assert run.files == files


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [("", "y", "old_string is empty"), ("hello", "hello", "are the same")],
)
def test_edit_file_with_unusable_strings_says_how_to_fix_them(
    drive, old: str, new: str, problem: str
) -> None:
    files = {"/a.txt": fd("hello\n")}
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": old, "new_string": new}),
        files=files,
    )
    text = assert_error(run, "edit_file", "cannot edit '/a.txt'", problem)
    assert "copied exactly from the file" in text
    assert "absolute path" not in text  # the path is fine; the advice is about the strings
    assert run.files == files


def test_edit_file_too_large_to_edit_in_place(drive) -> None:
    size = MAX_EDIT_BYTES + 1
    files = {"/big.txt": fd("a" * size)}
    run = drive(
        tool_call("edit_file", {"file_path": "/big.txt", "old_string": "a", "new_string": "b"}),
        files=files,
    )
    text = assert_error(
        run, "edit_file", f"'/big.txt' is {size:,} bytes, over the {MAX_EDIT_BYTES:,}-byte limit"
    )
    assert "cannot be edited in place" in text
    assert run.files == files


def test_edit_file_missing_file(drive) -> None:
    run = drive(
        tool_call("edit_file", {"file_path": "/none.txt", "old_string": "a", "new_string": "b"}),
    )
    assert_error(run, "edit_file", "Error: File '/none.txt' not found")
    assert run.files == {}


# --------------------------------------------------------------------------- glob


def test_glob_lists_matching_paths(drive) -> None:
    files = {
        "/a.py": fd("a"),
        "/src/b.py": fd("b"),
        "/src/c.md": fd("c"),
        "/src/deep/d.py": fd("d"),
    }
    run = drive(
        tool_call("glob", {"pattern": "*.py"}),
        tool_call("glob", {"pattern": "/*.py"}),
        tool_call("glob", {"pattern": "**/*.{py,md}", "path": "/src"}),
        files=files,
    )
    every, top, under = (m.text for m in run.tool_messages)
    assert every == "/a.py\n/src/b.py\n/src/deep/d.py"
    assert top == "/a.py"
    assert under == "/src/b.py\n/src/c.md\n/src/deep/d.py"
    assert all(m.status == "success" and m.name == "glob" for m in run.tool_messages)


def test_glob_no_matches(drive) -> None:
    run = drive(tool_call("glob", {"pattern": "*.rs"}), files={"/a.py": fd("a")})
    assert assert_success(run.only, "glob") == "No files found"


def test_glob_invalid_pattern_is_an_error_message(drive) -> None:
    run = drive(tool_call("glob", {"pattern": "[z-a]*"}), files={"/a.py": fd("a")})
    assert_error(run, "glob")


# --------------------------------------------------------------------------- grep

GREP_FILES = {
    "/a.txt": fd("abc\nxyz\nabc again\n"),
    "/b.md": fd("no match\n"),
    "/src/c.py": fd("x = 'a.c'\nabc\n"),
    "/bin/blob": fd(b"abc\x00\x01abc"),
}


def test_grep_files_with_matches_is_the_default(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "abc"}), files=GREP_FILES)
    assert assert_success(run.only, "grep") == "/a.txt\n/src/c.py"


def test_grep_content_mode_shows_numbered_lines_by_file(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "abc", "output_mode": "content"}), files=GREP_FILES)
    assert run.only.text == "/a.txt:\n  1: abc\n  3: abc again\n/src/c.py:\n  2: abc"


def test_grep_count_mode(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "abc", "output_mode": "count"}), files=GREP_FILES)
    assert run.only.text == "/a.txt: 2\n/src/c.py: 1"


def test_grep_is_literal(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "a.c", "output_mode": "content"}), files=GREP_FILES)
    assert run.only.text == "/src/c.py:\n  1: x = 'a.c'"


def test_grep_path_and_glob_filters(drive) -> None:
    run = drive(
        tool_call("grep", {"pattern": "abc", "path": "/src"}),
        tool_call("grep", {"pattern": "abc", "glob": "*.txt"}),
        files=GREP_FILES,
    )
    by_path, by_glob = (m.text for m in run.tool_messages)
    assert by_path == "/src/c.py"
    assert by_glob == "/a.txt"


def test_grep_no_matches(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "zzz"}), files=GREP_FILES)
    assert assert_success(run.only, "grep") == "No matches found"


def test_grep_invalid_output_mode_is_a_validation_error(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "abc", "output_mode": "lines"}), files=GREP_FILES)
    assert_error(run, "grep", "output_mode", "Please fix the error and try again")


MANY = {f"/m{n}.txt": fd("hit\nhit\n") for n in range(5)}  # 10 matches in 5 files


def test_grep_max_count_caps_the_matches_and_says_more_exist(drive) -> None:
    run = drive(
        tool_call("grep", {"pattern": "hit", "output_mode": "content", "max_count": 3}),
        tool_call("grep", {"pattern": "hit", "output_mode": "count", "max_count": 10}),
        files=MANY,
    )
    capped, whole = (m.text for m in run.tool_messages)
    assert capped.splitlines()[:4] == ["/m0.txt:", "  1: hit", "  2: hit", "/m1.txt:"]
    assert capped.splitlines()[4] == "  1: hit"
    assert capped.endswith("\n\n" + GREP_TRUNCATION_NOTE)
    assert "raise max_count" in capped
    assert "stopped" not in whole  # exactly 10 matches: nothing was left out
    assert whole.count(": 2") == 5


def test_grep_max_count_must_be_positive(drive) -> None:
    run = drive(tool_call("grep", {"pattern": "hit", "max_count": 0}), files=MANY)
    assert_error(run, "grep", "max_count", "greater than 0")


def _grep_agent(mode: str, middleware: Any, calls: list[Any], files: dict) -> list[str]:
    from langchain.agents import create_agent

    model = ScriptedModel(replies=[ai("", *calls), ai(FINAL)])
    agent = create_agent(model, middleware=[middleware])
    state = {"messages": [{"role": "user", "content": "go"}], "files": copy.deepcopy(files)}
    result = asyncio.run(agent.ainvoke(state)) if mode == "ainvoke" else agent.invoke(state)
    return [m.text for m in result["messages"] if m.type == "tool"]


def test_grep_default_cap_comes_from_the_middleware(mode: str) -> None:
    from fathom.middleware.filesystem import FilesystemMiddleware

    calls = [
        tool_call("grep", {"pattern": "hit", "output_mode": "content"}),
        tool_call("grep", {"pattern": "hit", "output_mode": "content", "max_count": 4}),
    ]
    default, asked = _grep_agent(mode, FilesystemMiddleware(grep_max_count=2), calls, MANY)
    assert default.count(": hit") == 2 and GREP_TRUNCATION_NOTE in default
    assert asked.count(": hit") == 4 and GREP_TRUNCATION_NOTE in asked
    (uncapped,) = _grep_agent(mode, FilesystemMiddleware(grep_max_count=None), calls[:1], MANY)
    assert uncapped.count(": hit") == 10 and "stopped" not in uncapped


def test_grep_caps_a_backend_whose_grep_takes_no_max_count(mode: str) -> None:
    from fathom.backends import StateBackend
    from fathom.middleware.filesystem import FilesystemMiddleware

    seen: list[tuple[Any, ...]] = []

    class OldGrep(StateBackend):
        """A backend written before `max_count`: grep(pattern, path, glob) only."""

        def grep(self, pattern, path=None, glob=None):  # type: ignore[override]
            seen.append((pattern, path, glob))
            return super().grep(pattern, path, glob)

        async def agrep(self, pattern, path=None, glob=None):  # type: ignore[override]
            return self.grep(pattern, path, glob)

    calls = [tool_call("grep", {"pattern": "hit", "output_mode": "content", "max_count": 3})]
    (text,) = _grep_agent(mode, FilesystemMiddleware(backend=OldGrep()), calls, MANY)
    assert seen == [("hit", None, None)]
    assert text.count(": hit") == 3 and GREP_TRUNCATION_NOTE in text


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_grep_max_count_setting_is_checked_at_construction(bad: Any) -> None:
    from fathom.middleware.filesystem import FilesystemMiddleware

    with pytest.raises(ValueError, match="grep_max_count must be positive or None"):
        FilesystemMiddleware(grep_max_count=bad)


# --------------------------------------------------------------------------- bad paths


def test_read_missing_file(drive) -> None:
    files = {"/a.txt": fd("a")}
    run = drive(tool_call("read_file", {"file_path": "/missing.txt"}), files=files)
    text = assert_error(run, "read_file")
    assert text == "Error: File '/missing.txt' not found"
    assert run.files == files


@pytest.mark.parametrize(
    ("call", "tool"),
    [
        (tool_call("read_file", {"file_path": "/../etc/passwd"}), "read_file"),
        (tool_call("write_file", {"file_path": "../escape.txt", "content": "x"}), "write_file"),
        (
            tool_call(
                "edit_file", {"file_path": "/a/../../a.txt", "old_string": "a", "new_string": "b"}
            ),
            "edit_file",
        ),
        (tool_call("ls", {"path": ".."}), "ls"),
        (tool_call("glob", {"pattern": "*", "path": "/.."}), "glob"),
        (tool_call("grep", {"pattern": "a", "path": "../.."}), "grep"),
    ],
)
def test_path_above_root_is_refused(drive, call: dict, tool: str) -> None:
    files = {"/a.txt": fd("a")}
    run = drive(call, files=files)
    text = assert_error(run, tool)
    path = call["args"].get("file_path", call["args"].get("path"))
    assert text == f"Error: Path traversal not allowed: {path}"
    assert run.files == files


@pytest.mark.parametrize(
    ("call", "tool"),
    [
        (tool_call("read_file", {"file_path": "~/x"}), "read_file"),
        (tool_call("write_file", {"file_path": "~/x", "content": "x"}), "write_file"),
        (tool_call("ls", {"path": "~"}), "ls"),
    ],
)
def test_home_tilde_path_is_refused(drive, call: dict, tool: str) -> None:
    files = {"/a.txt": fd("a")}
    run = drive(call, files=files)
    text = assert_error(run, tool)
    path = call["args"].get("file_path", call["args"].get("path"))
    assert text == f"Error: Path traversal not allowed: {path}"
    assert run.files == files


# --------------------------------------------------------------------------- binary and non-UTF-8

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"


def test_read_binary_file_is_refused(drive) -> None:
    raw = b"head\x00\x01\x02tail"
    files = {"/data.bin": fd(raw)}
    run = drive(tool_call("read_file", {"file_path": "/data.bin"}), files=files)
    assert_error(
        run, "read_file", f"'/data.bin' is a binary file ({len(raw)} bytes)", "cannot be shown"
    )
    assert run.files == files


def test_edit_binary_file_is_refused(drive) -> None:
    files = {"/data.bin": fd(b"head\x00\x01\x02tail")}
    run = drive(
        tool_call(
            "edit_file", {"file_path": "/data.bin", "old_string": "head", "new_string": "HEAD"}
        ),
        files=files,
    )
    assert_error(run, "edit_file", "'/data.bin' is a binary file and cannot be edited")
    assert run.files == files


def test_read_latin1_file_shows_replacement_characters_with_a_note(drive) -> None:
    files = {"/latin.txt": fd("café\nnaïve\n".encode("latin-1"))}
    run = drive(tool_call("read_file", {"file_path": "/latin.txt"}), files=files)
    assert assert_success(run.only, "read_file") == (
        "[note: this file is not valid UTF-8; undecodable bytes are shown as \ufffd]\n"
        "     1\tcaf\ufffd\n"
        "     2\tna\ufffdve"
    )
    assert run.files == files


def test_edit_latin1_file_is_refused(drive) -> None:
    files = {"/latin.txt": fd("café\n".encode("latin-1"))}
    run = drive(
        tool_call(
            "edit_file", {"file_path": "/latin.txt", "old_string": "caf", "new_string": "CAF"}
        ),
        files=files,
    )
    assert_error(
        run, "edit_file", "'/latin.txt' cannot be edited as text (not valid UTF-8)", "corrupt"
    )
    assert run.files == files


@pytest.mark.parametrize("name", ["/pic.png", "/PIC.PNG"])
def test_read_image_returns_an_image_block(drive, name: str) -> None:
    files = {name: fd(PNG)}
    run = drive(tool_call("read_file", {"file_path": name}), files=files)
    message = run.only
    assert message.status == "success"
    assert message.name == "read_file"
    assert isinstance(message.content, list)
    (block,) = message.content
    assert block["type"] == "image"
    assert block["mime_type"] == "image/png"
    assert base64.b64decode(block["base64"]) == PNG
    assert run.files == files
    assert_finished(run)


def test_read_jpeg_has_jpeg_mime_type(drive) -> None:
    raw = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
    run = drive(tool_call("read_file", {"file_path": "/p.jpg"}), files={"/p.jpg": fd(raw)})
    assert run.only.content[0]["mime_type"] == "image/jpeg"
    assert base64.b64decode(run.only.content[0]["base64"]) == raw


# --------------------------------------------------------------------------- big files

FILL = "x" * 92
BIG_LINES = 10_000_000 // 100  # 100 bytes a line: 7 digits, 92 x, newline


@pytest.fixture(scope="module")
def big_files() -> dict[str, Any]:
    text = "".join(f"{i:07d}{FILL}\n" for i in range(BIG_LINES))
    assert len(text.encode()) == 10_000_000
    return {"/big.log": fd(text)}


def test_read_huge_file_default_output_is_bounded_and_says_how_to_continue(
    drive, mode: str, big_files: dict
) -> None:
    def follow(request: ScriptRequest) -> AIMessage:
        note = re.search(r"offset=(\d+)", request.tool_results[-1].text)
        assert note is not None
        offset = int(note.group(1))
        return ai("", tool_call("read_file", {"file_path": "/big.log", "offset": offset}))

    run = drive_with(
        mode,
        [ai("", tool_call("read_file", {"file_path": "/big.log"})), follow, ai(FINAL)],
        big_files,
    )
    first, second = run.tool_messages
    assert first.status == second.status == "success"
    for message in (first, second):
        assert len(message.text) < 70_000
        assert len(message.text) <= READ_OUTPUT_CHARS + 200
    first_lines = first.text.splitlines()
    assert first_lines[0] == "     1\t0000000" + FILL
    stop = re.fullmatch(
        r"\[Output was truncated due to size limits: it stopped at line (\d+) to stay under "
        r"60,000 characters; call read_file with offset=(\d+) to continue\]",
        first_lines[-1],
    )
    assert stop is not None
    next_offset = int(stop.group(2))
    assert next_offset == int(stop.group(1)) == len(first_lines) - 1
    assert first_lines[-2].startswith(f"{next_offset:6d}\t")
    # The follow-up read starts exactly where the first stopped.
    assert second.text.splitlines()[0] == f"{next_offset + 1:6d}\t{next_offset:07d}" + FILL
    assert run.files == big_files
    assert_finished(run)


def test_read_huge_file_from_the_middle(drive, big_files: dict) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/big.log", "offset": 50_000, "limit": 3}),
        files=big_files,
    )
    assert run.only.text == (
        f"{50_001:6d}\t0050000{FILL}\n"
        f"{50_002:6d}\t0050001{FILL}\n"
        f"{50_003:6d}\t0050002{FILL}\n"
        f"[showing lines 50001-50003 of {BIG_LINES}; "
        "call read_file with offset=50003 to read more]"
    )


def test_edit_huge_file_is_refused_with_the_size_limit(drive, big_files: dict) -> None:
    run = drive(
        tool_call(
            "edit_file",
            {"file_path": "/big.log", "old_string": "0050000x", "new_string": "edited"},
        ),
        files=big_files,
    )
    assert_error(
        run,
        "edit_file",
        f"'/big.log' is 10,000,000 bytes, over the {MAX_EDIT_BYTES:,}-byte limit",
    )
    assert run.files == big_files


def test_read_single_huge_line_is_cut_with_a_note(drive) -> None:
    files = {"/one.line": fd("z" * 3_000_000)}
    run = drive(tool_call("read_file", {"file_path": "/one.line"}), files=files)
    text = assert_success(run.only, "read_file")
    assert text == (
        "     1\t" + "z" * 2000 + " [… 2998000 more characters on this line]"
        + READ_FILE_TRUNCATION_MSG.format(file_path="/one.line")
    )
    assert len(text) < 70_000
    assert_finished(run)


# --------------------------------------------------------------------------- malformed calls


def test_read_file_with_non_integer_offset_is_a_validation_error(drive) -> None:
    files = {"/a.txt": fd("a\n")}
    run = drive(tool_call("read_file", {"file_path": "/a.txt", "offset": "abc"}), files=files)
    assert_error(run, "read_file", "offset", "valid integer", "Please fix the error")
    assert run.files == files


def test_read_file_with_negative_offset_reads_from_the_start_and_says_so(drive) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/a.txt", "offset": -1}),
        files={"/a.txt": fd("a\n")},
    )
    text = assert_success(run.only, "read_file")
    assert text.startswith("     1\ta\n")
    assert "offset -1 is before the start of the file" in text


def test_read_file_with_no_lines_requested_says_the_file_was_not_read(drive) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/a.txt", "limit": 0}),
        files={"/a.txt": fd("a\n")},
    )
    assert assert_success(run.only, "read_file") == NO_LINES_REQUESTED_WARNING.format(limit=0)


def test_read_file_without_file_path_is_a_validation_error(drive) -> None:
    run = drive(tool_call("read_file", {}), files={"/a.txt": fd("a\n")})
    assert_error(run, "read_file", "file_path", "Field required", "Please fix the error")


def test_write_file_without_content_is_a_validation_error(drive) -> None:
    run = drive(tool_call("write_file", {"file_path": "/a.txt"}))
    assert_error(run, "write_file", "content", "Field required")
    assert run.files == {}


def test_unknown_tool_name(drive) -> None:
    run = drive(tool_call("delete_file", {"file_path": "/a.txt"}), files={"/a.txt": fd("a")})
    text = assert_error(run, "delete_file", "delete_file is not a valid tool")
    for name in ("ls", "read_file", "write_file", "edit_file", "glob", "grep"):
        assert name in text
    assert run.files == {"/a.txt": fd("a")}


def test_invalid_json_arguments_get_an_error_and_another_turn(mode: str) -> None:
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "id": "bad1",
                "name": "read_file",
                "args": '{"file_path": "/a.txt"',
                "error": "Unterminated string",
            }
        ],
    )
    run = drive_with(mode, [broken, ai(FINAL)], {"/a.txt": fd("a")})
    message = run.only
    assert message.status == "error"
    assert message.tool_call_id == "bad1"
    assert "not valid JSON" in message.text
    assert "Call the tool again" in message.text
    assert_finished(run)


def test_errors_do_not_stop_later_calls_in_the_same_message(drive) -> None:
    run = drive(
        tool_call("read_file", {"file_path": "/missing"}),
        tool_call("write_file", {"file_path": "/ok.txt", "content": "ok"}),
        tool_call("read_file", {"file_path": "~/x"}),
    )
    statuses = [m.status for m in run.tool_messages]
    assert statuses == ["error", "success", "error"]
    assert {p: d["content"] for p, d in run.files.items()} == {"/ok.txt": "ok"}
    assert_finished(run)


# --------------------------------------------------------------------------- concurrency


def test_two_edits_to_one_file_in_one_message_are_both_kept(drive) -> None:
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "one", "new_string": "1"}),
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "two", "new_string": "2"}),
        files={"/a.txt": fd("one two\n")},
    )
    results = [(m.status, m.text) for m in run.tool_messages]
    content = run.files["/a.txt"]["content"]
    # Either both edits land, or the one that cannot be applied reports an error.
    assert content == "1 2\n" or any(status == "error" for status, _ in results)


def test_two_writes_to_one_path_in_one_message_do_not_both_succeed(drive) -> None:
    run = drive(
        tool_call("write_file", {"file_path": "/n.txt", "content": "A"}),
        tool_call("write_file", {"file_path": "/n.txt", "content": "B"}),
    )
    assert [m.status for m in run.tool_messages].count("success") == 1


# --------------------------------------------------------------------------- sync vs async


def _write_then_read(mode: str) -> Run:
    return drive_with(
        mode,
        [
            ai(
                "",
                tool_call("write_file", {"file_path": "/s.txt", "content": "one\ntwo\n"}),
            ),
            ai(
                "",
                tool_call(
                    "edit_file", {"file_path": "/s.txt", "old_string": "two", "new_string": "2"}
                ),
                tool_call("read_file", {"file_path": "/missing"}),
            ),
            ai("", tool_call("read_file", {"file_path": "/s.txt"})),
            ai(FINAL),
        ],
    )


def test_ainvoke_gives_the_same_results_as_invoke() -> None:
    sync, asynchronous = _write_then_read("invoke"), _write_then_read("ainvoke")

    def summary(run: Run) -> list[tuple]:
        return [(m.name, m.status, m.text) for m in run.tool_messages]

    assert (
        summary(sync)
        == summary(asynchronous)
        == [
            ("write_file", "success", "Updated file /s.txt"),
            (
                "edit_file",
                "success",
                "Successfully replaced 1 instance(s) of the string in '/s.txt'",
            ),
            ("read_file", "error", "Error: File '/missing' not found"),
            ("read_file", "success", "     1\tone\n     2\t2"),
        ]
    )
    contents = [
        {p: (d["content"], d["encoding"]) for p, d in run.files.items()}
        for run in (sync, asynchronous)
    ]
    assert contents[0] == contents[1] == {"/s.txt": ("one\n2\n", "utf-8")}
    assert_finished(sync)
    assert_finished(asynchronous)


# --------------------------------------------------------------------------- what the model sees


def test_system_prompt_has_the_files_section_and_tools_are_sorted(drive) -> None:
    run = drive(tool_call("ls", {}))
    assert len(run.model.requests) == 2
    for request in run.model.requests:
        assert request.system_prompt is not None
        assert "## Files" in request.system_prompt
        assert FILESYSTEM_PROMPT in request.system_prompt
        assert request.tool_names == TOOLS
        assert request.tool_names == sorted(request.tool_names)


def test_tool_schemas_describe_the_arguments(drive) -> None:
    run = drive(tool_call("ls", {}))
    schemas = {
        t["function"]["name"]: t["function"]["parameters"] for t in run.model.requests[0].tools
    }
    assert schemas["read_file"]["required"] == ["file_path"]
    assert set(schemas["read_file"]["properties"]) == {"file_path", "offset", "limit"}
    assert set(schemas["edit_file"]["required"]) == {"file_path", "old_string", "new_string"}
    assert set(schemas["write_file"]["required"]) == {"file_path", "content"}
    assert schemas["grep"]["properties"]["output_mode"]["enum"] == [
        "files_with_matches",
        "content",
        "count",
    ]
    assert "runtime" not in schemas["read_file"]["properties"]


def test_second_change_to_one_file_in_a_turn_is_refused_and_the_first_kept(drive) -> None:
    run = drive(
        tool_call("edit_file", {"file_path": "/a.txt", "old_string": "one", "new_string": "1"}),
        tool_call("edit_file", {"file_path": "a.txt", "old_string": "two", "new_string": "2"}),
        tool_call("write_file", {"file_path": "/b.txt", "content": "B"}),
        files={"/a.txt": fd("one two\n")},
    )
    statuses = [m.status for m in run.tool_messages]
    assert statuses == ["success", "error", "success"]
    assert "earlier edit_file call in this same turn" in run.tool_messages[1].text
    assert run.files["/a.txt"]["content"] == "1 two\n"
    assert run.files["/b.txt"]["content"] == "B"


def test_grep_says_which_files_were_too_large_to_search(drive) -> None:
    big = "needle\n" + "x" * (6 * 1024 * 1024)
    run = drive(
        tool_call("grep", {"pattern": "needle"}),
        files={"/big.txt": fd(big), "/small.txt": fd("a needle\n")},
    )
    text = run.tool_messages[0].text
    assert text.splitlines()[0] == "/small.txt"
    assert "not searched, too large for grep: `/big.txt`" in text
