"""How a pending tool call is shown and answered: diffs against the real file, numbered new
files, commands, pretty arguments, answering several calls at once, and `$EDITOR` editing
the real content (`fathom.cli.approval_view`, `fathom.cli.approvals`)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from fathom.cli.approval_view import CurrentUnknown, apply_edit, render_view, view_call
from fathom.cli.approvals import ask_decisions, file_reader
from fathom.cli.approve import pending_calls_json
from fathom.cli.session import PendingApproval
from fathom.project.build import AgentSetup
from fathom.project.config import load_config, project_sources
from fathom.testing import ScriptedModel

BIG = "".join(f"line {i:04d}\n" for i in range(1, 2001))


def _files(**files: str):
    def read(path: str) -> str | None:
        return files.get(path.lstrip("/"))
    return read


def _text(request: dict[str, Any], read=None, **kwargs: Any) -> str:
    return render_view(view_call(request, read, **kwargs))


def test_an_edit_on_a_2000_line_file_shows_the_hunk_not_the_file() -> None:
    shown = _text({"name": "edit_file", "args": {
        "file_path": "/big.txt", "old_string": "line 1000\n", "new_string": "line one thousand\n"}},
        _files(**{"big.txt": BIG}))
    lines = shown.splitlines()
    assert lines[0] == "approval needed: edit_file /big.txt (1 line added, 1 removed)"
    assert "  @@ -997,7 +997,7 @@" in lines
    assert "  -line 1000" in lines and "  +line one thousand" in lines
    assert "   line 0997" in lines and "   line 1003" in lines  # three lines of context
    assert "line 0996" not in shown and "line 1004" not in shown and "line 0001" not in shown
    assert len(lines) < 15


def test_a_new_file_is_its_content_with_line_numbers() -> None:
    content = "".join(f"row {i}\n" for i in range(1, 11))
    shown = _text({"name": "write_file", "args": {"file_path": "/new.txt", "content": content}},
                  _files())
    lines = shown.splitlines()
    assert lines[0] == "approval needed: write_file /new.txt (new file, 10 lines)"
    assert lines[1] == "   1  row 1" and lines[10] == "  10  row 10"


def test_overwriting_a_file_is_a_diff_and_the_same_content_says_no_change() -> None:
    read = _files(**{"a.md": "one\ntwo\nthree\n"})
    shown = _text({"name": "write_file", "args": {"file_path": "/a.md",
                                                   "content": "one\n2\nthree\n"}}, read)
    assert "(replaces the file: 1 line added, 1 removed)" in shown
    assert "  -two\n  +2\n" in shown
    same = _text({"name": "write_file", "args": {"file_path": "/a.md",
                                                  "content": "one\ntwo\nthree\n"}}, read)
    assert "(no change)" in same and "already holds exactly this content" in same


def test_a_long_diff_is_cut_and_says_how_much_is_left() -> None:
    shown = _text({"name": "write_file", "args": {"file_path": "/big.txt",
                                                   "content": BIG.upper()}},
                  _files(**{"big.txt": BIG}), max_lines=50)
    assert "(replaces the file: 2,000 lines added, 2,000 removed)" in shown
    assert "… 3,953 more diff lines not shown" in shown  # 2 headers, 1 hunk, 4,000 changes
    assert len(shown.splitlines()) == 52


@pytest.mark.parametrize(("current", "args", "expected"), [
    pytest.param("a b\n", {"old_string": "x", "new_string": "y"},
                 "old_string was not found in the file: the edit will fail as proposed",
                 id="not-found"),
    pytest.param("x x\n", {"old_string": "x", "new_string": "y"},
                 "old_string occurs 2 times in the file and replace_all is not set",
                 id="ambiguous"),
    pytest.param(None, {"old_string": "x", "new_string": "y"},
                 "/f.txt does not exist, so the edit will fail as proposed", id="no-file"),
])
def test_an_edit_that_would_fail_says_so_plainly(
    current: str | None, args: dict[str, str], expected: str
) -> None:
    read = _files(**({"f.txt": current} if current is not None else {}))
    shown = _text({"name": "edit_file", "args": {"file_path": "/f.txt", **args}}, read)
    assert "(will fail)" in shown.splitlines()[0]
    assert expected in shown
    assert "  -x\n  +y\n" in shown  # the proposed strings are still shown


def test_replace_all_is_applied_everywhere() -> None:
    assert apply_edit("x x\n", "x", "y", replace_all=True) == ("y y\n", 2)
    shown = _text({"name": "edit_file", "args": {"file_path": "/f.txt", "old_string": "x\n",
                                                  "new_string": "y\n", "replace_all": True}},
                  _files(**{"f.txt": "x\na\nx\n"}))
    assert shown.splitlines()[0] == (
        "approval needed: edit_file /f.txt (replace_all) (2 places: 2 lines added, 2 removed)")


def test_execute_is_its_command_and_timeout() -> None:
    shown = _text({"name": "execute", "args": {"command": "make test\necho done", "timeout": 30}})
    assert shown == "approval needed: execute\n  $ make test\n    echo done\n  timeout: 30 s\n"


def test_other_tools_show_their_arguments_one_per_line() -> None:
    shown = _text({"name": "task", "args": {"description": "Read it.\nReport.", "n": 2,
                                             "flags": ["a"]}})
    assert shown == ('approval needed: task\n  description:\n    Read it.\n    Report.\n'
                     '  n: 2\n  flags:\n    [\n      "a"\n    ]\n')


def test_control_characters_from_the_model_are_shown_not_obeyed() -> None:
    shown = _text({"name": "write_file", "args": {"file_path": "/a", "content": "ok\x1b[2J\rx\n"}},
                  _files())
    assert "\x1b" not in shown and "\r" not in shown
    assert "1  ok\\x1b[2J\\x0dx" in shown


def test_colour_only_when_asked() -> None:
    request = {"name": "write_file", "args": {"file_path": "/a", "content": "new\n"}}
    read = _files(a="old\n")
    assert "\x1b[" not in render_view(view_call(request, read))
    coloured = render_view(view_call(request, read), color=True)
    assert "\x1b[32m+new\x1b[0m" in coloured and "\x1b[31m-old\x1b[0m" in coloured


def _setup(project: Path, home: Path) -> AgentSetup:
    return AgentSetup(project_dir=project, home=home, config=load_config(project, home),
                      sources=project_sources(project, home), model_name="scripted",
                      model=ScriptedModel(policy=lambda request: None))  # never called


def test_file_reader_reads_the_project_as_the_agent_sees_it(tmp_path: Path) -> None:
    project, home = tmp_path / "p", tmp_path / "h"
    (project / "docs").mkdir(parents=True)
    home.mkdir()
    (project / "docs" / "a.md").write_text("hello\n", encoding="utf-8")
    read = file_reader(_setup(project, home))
    assert read("/docs/a.md") == "hello\n"
    assert read("/docs/missing.md") is None
    with pytest.raises(CurrentUnknown, match="thread's state"):
        read("/large_tool_results/call_1")
    with pytest.raises(CurrentUnknown, match="outside the project"):
        read("/../outside.txt")
    shown = _text({"name": "write_file", "args": {"file_path": "/large_tool_results/x",
                                                   "content": "kept\n"}}, read)
    assert "cannot compare with the current file: the file is kept in the thread's state" in shown
    assert "  1  kept" in shown


# --------------------------------------------------------------------------- answering


def _approval(*requests: dict[str, Any], interrupt_id: str = "i1",
              allowed: tuple[str, ...] = ("approve", "edit", "reject")) -> PendingApproval:
    return PendingApproval(
        interrupt_id=interrupt_id, action_requests=list(requests),
        review_configs=[{"action_name": r["name"], "allowed_decisions": list(allowed)}
                        for r in requests])


def _write(path: str, content: str = "x\n") -> dict[str, Any]:
    return {"name": "write_file", "args": {"file_path": path, "content": content}}


def _answers(*replies: str):
    queue = list(replies)
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return queue.pop(0)

    return ask, prompts


def test_approve_all_remaining_settles_the_rest_after_showing_them() -> None:
    out = io.StringIO()
    ask, prompts = _answers("n", "not this one", "A")
    resume = ask_decisions(
        [_approval(_write("/a"), _write("/b")), _approval(_write("/c"), interrupt_id="i2")],
        ask=ask, out=out, read_current=_files())
    assert resume == {
        "i1": {"decisions": [{"type": "reject", "message": "not this one"}, {"type": "approve"}]},
        "i2": {"decisions": [{"type": "approve"}]},
    }
    assert prompts[0] == ("approve [y] / edit [e] / reject [n] / approve all remaining [A] / "
                          "reject all remaining [N]? ")
    shown = out.getvalue()
    # Every call was shown before the first question.
    assert shown.index("approval needed (3 of 3): write_file /c") < shown.index("1 of 3: ")
    assert "3 of 3: write_file /c: approved (all remaining)" in shown


def test_reject_all_asks_one_reason_and_the_last_call_has_no_all_choice() -> None:
    ask, prompts = _answers("y", "N", "use git instead")
    resume = ask_decisions([_approval(_write("/a"), _write("/b"), _write("/c"))], ask=ask,
                           out=io.StringIO())
    reject = {"type": "reject", "message": "use git instead"}
    assert resume == {"i1": {"decisions": [{"type": "approve"}, reject, reject]}}
    ask, prompts = _answers("y", "y")
    ask_decisions([_approval(_write("/a"), _write("/b"))], ask=ask, out=io.StringIO())
    assert "all remaining" in prompts[0] and prompts[1] == "approve [y] / edit [e] / reject [n]? "


def _editor(tmp_path: Path, new_text: str) -> tuple[str, Path]:
    """A shell-script editor that keeps what it was given and writes `new_text`."""
    seen = tmp_path / "seen.txt"
    script = tmp_path / "editor.sh"
    (tmp_path / "new.txt").write_text(new_text, encoding="utf-8")
    script.write_text(f'#!/bin/sh\ncp "$1" {seen}\ncp {tmp_path / "new.txt"} "$1"\n',
                      encoding="utf-8")
    script.chmod(0o755)
    return str(script), seen


@pytest.mark.parametrize(("request_", "key"), [
    pytest.param(_write("/a.py", "print(1)\n"), "content", id="write_file-content"),
    pytest.param({"name": "edit_file", "args": {"file_path": "/a.py", "old_string": "1",
                                                "new_string": "print(2)\n"}},
                 "new_string", id="edit_file-new_string"),
    pytest.param({"name": "execute", "args": {"command": "ls -l\n"}}, "command",
                 id="execute-command"),
])
def test_the_editor_opens_the_real_content(tmp_path: Path, request_: dict[str, Any],
                                           key: str) -> None:
    editor, seen = _editor(tmp_path, "echo edited\n")
    ask, _ = _answers("e")
    out = io.StringIO()
    resume = ask_decisions([_approval(request_)], ask=ask, out=out, editor=editor,
                           read_current=_files(**{"a.py": "1"}))
    assert seen.read_text(encoding="utf-8") == request_["args"][key]  # not JSON
    [decision] = resume["i1"]["decisions"]
    expected = "echo edited" if key == "command" else "echo edited\n"
    assert decision == {"type": "edit", "edited_action": {
        "name": request_["name"], "args": {**request_["args"], key: expected}}}
    assert "edited: " in out.getvalue()  # the edited call is shown as it will run


def test_an_unchanged_editor_asks_again_and_other_tools_edit_json(tmp_path: Path) -> None:
    unchanged = tmp_path / "keep.sh"
    unchanged.write_text("#!/bin/sh\ntrue\n", encoding="utf-8")
    unchanged.chmod(0o755)
    ask, prompts = _answers("e", "n", "")
    out = io.StringIO()
    resume = ask_decisions([_approval(_write("/a"))], ask=ask, out=out, editor=str(unchanged))
    assert resume["i1"]["decisions"] == [{"type": "reject"}]
    assert "nothing was changed in the editor; answer again" in out.getvalue()
    assert prompts == ["approve [y] / edit [e] / reject [n]? "] * 2 + [
        "reason for the agent (optional): "]
    editor = tmp_path / "edit_args.py"
    editor.write_text("import json, sys\np = sys.argv[1]\nargs = json.load(open(p))\n"
                      "args['n'] = 5\njson.dump(args, open(p, 'w'))\n", encoding="utf-8")
    ask, _ = _answers("e")
    resume = ask_decisions([_approval({"name": "task", "args": {"n": 1}})], ask=ask,
                           out=io.StringIO(), editor=f"{sys.executable} {editor}")
    assert resume["i1"]["decisions"][0]["edited_action"]["args"] == {"n": 5}


def test_without_an_editor_a_command_is_edited_inline() -> None:
    ask, prompts = _answers("e", "ls -a")
    resume = ask_decisions([_approval({"name": "execute", "args": {"command": "rm -rf /"}})],
                           ask=ask, out=io.StringIO())
    assert prompts[1] == "new command (empty keeps it): "
    assert resume["i1"]["decisions"][0]["edited_action"]["args"] == {"command": "ls -a"}


def test_pending_calls_json_lists_each_call_for_scripts() -> None:
    approvals = [_approval(_write("/a"), {"name": "execute", "args": {"command": "ls"}},
                           allowed=("approve", "reject"))]
    assert pending_calls_json(approvals) == [
        {"interrupt_id": "i1", "index": 0, "name": "write_file",
         "args": {"file_path": "/a", "content": "x\n"}, "description": "",
         "allowed_decisions": ["approve", "reject"]},
        {"interrupt_id": "i1", "index": 1, "name": "execute", "args": {"command": "ls"},
         "description": "", "allowed_decisions": ["approve", "reject"]},
    ]
