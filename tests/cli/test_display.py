"""The `fathom` command's displays: exact plain lines, and what the rich live view leaves behind."""

from __future__ import annotations

import io
import re
import sys

import pytest
from langchain_core.messages import AIMessage
from rich.console import Console
from rich.file_proxy import FileProxy

from fathom.cli.display import PlainDisplay, RichDisplay, make_display
from fathom.project.events import (
    Event,
    ShellOutput,
    TextDelta,
    TodosChanged,
    ToolFinished,
    ToolStarted,
)
from fathom.testing import ScriptedModel
from fathom.usage import AgentUsage

LONG = "x" * 200
TODOS = [
    {"content": "Survey the code", "status": "completed"},
    {"content": "Write [bold] report", "status": "in_progress"},
    {"content": "Review", "status": "pending"},
]

# A main agent that plans, runs two subagents in parallel (their events interleaved), writes a
# file, runs a shell command, and answers.
EVENTS: list[Event] = [
    TextDelta(None, "I'll plan "),
    TextDelta(None, "this first.\nThen delegate."),
    ToolStarted(None, "c1", "write_todos", {"todos": TODOS}),
    ToolFinished(None, "c1", "write_todos", "Updated todo list"),
    TodosChanged(None, TODOS),
    ToolStarted(
        None,
        "t1",
        "task",
        {"description": "Survey the parser module\nIn detail.", "subagent_type": "general-purpose"},
    ),
    ToolStarted(
        None, "t2", "task", {"description": "Find the tests", "subagent_type": "researcher"}
    ),
    TextDelta("t1", "Looking at "),
    TextDelta("t2", "Searching tests."),
    TextDelta("t1", "the parser."),
    ToolStarted("t1", "s1", "read_file", {"file_path": "src/parser.py"}),
    ToolStarted("t2", "s2", "grep", {"pattern": "def test_", "output_mode": "content"}),
    ToolFinished("t2", "s2", "grep", "/tests/test_parser.py:\n  3: def test_x\n  9: def test_y"),
    ToolFinished("t1", "s1", "read_file", "Error: file not found: src/parser.py", is_error=True),
    TextDelta("t2", "Found one test."),
    ToolFinished(None, "t2", "task", "One test: tests/test_parser.py"),
    TextDelta("t1", "The parser is missing."),
    ToolFinished(None, "t1", "task", "No parser module exists."),
    ToolStarted(None, "w1", "write_file", {"file_path": "report.md", "content": LONG}),
    ToolFinished(None, "w1", "write_file", "Updated file /report.md"),
    ToolStarted(None, "e1", "execute", {"command": "pytest -q"}),
    ShellOutput(None, "e1", "..F\n1 failed"),
    ShellOutput(None, "e1", ", 2 passed"),
    ToolFinished(None, "e1", "execute", "..F\n1 failed, 2 passed\n[exit code 1]", is_error=True),
    TextDelta(None, "Done: see [bold]report[/bold].\n\nBye."),
]

WRITE_FILE_ARGS = '{"file_path": "report.md", "content": "'
PLAIN_LINES = [
    "── run on thread th-1 (scripted)",
    "model › I'll plan this first.",
    "model › Then delegate.",
    "todos:",
    "  [x] Survey the code",
    "  [>] Write [bold] report",
    "  [ ] Review",
    "subagent › general-purpose#1 started: Survey the parser module",
    "subagent › researcher#2 started: Find the tests",
    "  [general-purpose#1] › Looking at the parser.",
    '  [general-purpose#1] call › read_file({"file_path": "src/parser.py"})',
    "  [researcher#2] › Searching tests.",
    '  [researcher#2] call › grep({"pattern": "def test_", "output_mode": "content"})',
    "  [researcher#2] result ‹ grep: 2 matches in 1 file [#1]",
    "  [general-purpose#1] error ‹ read_file: Error: file not found: src/parser.py [#2]",
    "  [researcher#2] › Found one test.",
    "subagent › researcher#2 finished: One test: tests/test_parser.py [#3]",
    "  [general-purpose#1] › The parser is missing.",
    "subagent › general-purpose#1 finished: No parser module exists. [#4]",
    f"call › write_file({WRITE_FILE_ARGS}{'x' * (99 - len(WRITE_FILE_ARGS))}…)",
    "result ‹ write_file: Updated file /report.md (1 line) [#5]",
    'call › execute({"command": "pytest -q"})',
    "  │ ..F",
    "  │ 1 failed, 2 passed",
    # the output was printed as it came, so only the summary line follows
    "error ‹ execute: exit code 1 · 2 lines of output [#6]",
    "model › Done: see [bold]report[/bold].",
    "model ›",
    "model › Bye.",
    "── done: 4 model calls, 1,250 in / 60 out tokens",
    "   main: 2 calls, 1,040 tokens",
    "   general-purpose: 1 calls, 210 tokens",
    "   researcher: 1 calls, 60 tokens",
]


def _usage() -> AgentUsage:
    """An `AgentUsage` filled by real calls to a scripted model, as three agents."""
    usage = AgentUsage()
    tokens = {
        "main": [(500, 20), (500, 20)],
        "general-purpose": [(200, 10)],
        "researcher": [(50, 10)],
    }
    for agent, calls in tokens.items():
        replies = [
            AIMessage(
                "ok",
                usage_metadata={
                    "input_tokens": i,
                    "output_tokens": o,
                    "total_tokens": i + o,
                },
            )
            for i, o in calls
        ]
        model = ScriptedModel(replies=replies)
        for _ in calls:
            model.invoke("hi", config={"callbacks": [usage], "metadata": {"lc_agent_name": agent}})
    return usage


def _screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`: applies the cursor-up and erase-line codes rich uses."""
    lines, row, col = [""], 0, 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", raw):
        if not token:
            continue
        if token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
            elif token.endswith("K"):
                lines[row] = ""
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    text = "\n".join(line.rstrip() for line in lines)
    return text.strip("\n").splitlines()


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> tuple[Console, io.StringIO]:
    monkeypatch.setenv("TERM", "xterm-256color")
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100, color_system=None), out


# --------------------------------------------------------------------------- plain


def test_plain_display_prints_a_run_as_stable_lines() -> None:
    out = io.StringIO()
    display = PlainDisplay(out)
    usage = _usage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    for event in EVENTS:
        display.event(event)
    display.run_finished(status="done", usage=usage)
    assert out.getvalue().splitlines() == PLAIN_LINES


def test_plain_display_status_words_detail_and_single_agent() -> None:
    out = io.StringIO()
    display = PlainDisplay(out)
    usage = AgentUsage()
    reply = AIMessage(
        "hello", usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    )
    ScriptedModel(replies=[reply]).invoke(
        "hi", config={"callbacks": [usage], "metadata": {"lc_agent_name": "main"}}
    )
    for status in ("interrupted", "approval", "error"):
        display.run_finished(status=status, usage=usage, detail="why")
    display.run_finished(status="done", usage=AgentUsage())
    assert out.getvalue().splitlines() == [
        "── interrupted: 1 model calls, 1 in / 1 out tokens — why",
        "── waiting for approval: 1 model calls, 1 in / 1 out tokens — why",
        "── failed: 1 model calls, 1 in / 1 out tokens — why",
        "── done: 0 model calls, 0 in / 0 out tokens",
    ]


def test_plain_display_unknown_lane_pause_notice_and_error() -> None:
    out = io.StringIO()
    display = PlainDisplay(out)
    display.event(TextDelta("ghost", "hello\nthere"))
    display.event(ToolStarted("ghost", "g1", "ls", {}))
    display.event(ShellOutput("ghost", "g2", "a\nb"))
    display.event(TextDelta(None, "Shall I go on?"))
    display.pause()
    display.pause()
    display.notice("thread saved")
    display.error("no model")
    assert out.getvalue().splitlines() == [
        "  [subagent] › hello",
        "  [subagent] › there",
        "  [subagent] call › ls({})",
        "  [subagent]   │ a",
        "model › Shall I go on?",
        "  [subagent]   │ b",
        "thread saved",
        "error: no model",
    ]


# --------------------------------------------------------------------------- rich


def test_rich_display_prints_finished_items_and_summary(
    terminal: tuple[Console, io.StringIO],
) -> None:
    console, out = terminal
    display = RichDisplay(console)
    usage = _usage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    for event in EVENTS:
        display.event(event)
    display.run_finished(status="done", usage=usage)

    raw = out.getvalue()
    # The live region showed the counters, the subagent tree and each subagent's activity.
    assert "4 model calls · 1,310 tokens" in raw
    assert "subagents" in raw
    assert "general-purpose#1 Survey the parser module" in raw
    assert "read_file ⎿ error: Error: file not found: src/parser.py" in raw

    screen = _screen(raw)
    text = "\n".join(screen)
    # The live region is gone; what is left is the permanent record.
    assert "Working…" not in text
    # markdown: the two lines are one paragraph
    assert "● I'll plan this first. Then delegate." in text
    assert "● todos\n  ⎿ ✔ Survey the code\n    ▶ Write [bold] report\n    ○ Review" in text
    assert "● researcher#2 Find the tests · 1 step · " in text
    assert "  ⎿ One test: tests/test_parser.py" in text
    assert "● general-purpose#1 Survey the parser module · 1 step · " in text
    assert "  ⎿ No parser module exists." in text
    assert '● write_file({"file_path": "report.md", "content":\n  "xxxxxxxx' in text
    assert "x…) #5\n  ⎿ Updated file /report.md (1 line)" in text
    assert (
        '● execute({"command": "pytest -q"}) #6\n  ⎿ exit code 1 · 2 lines of output\n'
        "    ..F\n    1 failed, 2 passed"
    ) in text
    assert "● Done: see [bold]report[/bold].\n\n  Bye." in text
    assert "✔ done · 4 model calls · 1,250 in / 60 out tokens · " in text
    table = [line.split() for line in screen[-3:]]
    assert ["main", "2", "1,000", "40", "1,040"] in table
    assert ["general-purpose", "1", "200", "10", "210"] in table
    assert ["researcher", "1", "50", "10", "60"] in table
    # Subagents' own tool calls only showed in the live tree.
    assert "● read_file" not in text


def test_rich_display_pause_stops_live_and_next_event_restarts_it(
    terminal: tuple[Console, io.StringIO],
) -> None:
    console, out = terminal
    display = RichDisplay(console)
    usage = AgentUsage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    display.event(TextDelta(None, "Shall I delete [red]it[/red]?"))
    display.pause()
    display.pause()
    assert not isinstance(sys.stdout, FileProxy)  # input() would work now
    assert "● Shall I delete [red]it[/red]?" in "\n".join(_screen(out.getvalue()))

    display.event(ToolStarted(None, "r1", "rm", {"path": "it"}))
    assert isinstance(sys.stdout, FileProxy)  # live again
    display.event(ToolFinished(None, "r1", "rm", "removed"))
    display.notice("thread th-1 saved")
    display.error("bad [bold]thing[/bold]")
    display.run_finished(status="approval", usage=usage, detail="approve rm?")
    assert not isinstance(sys.stdout, FileProxy)

    text = "\n".join(_screen(out.getvalue()))
    assert '● rm({"path": "it"}) #1\n  ⎿ removed' in text
    assert "thread th-1 saved" in text
    assert "error: bad [bold]thing[/bold]" in text
    assert re.search(
        r"\? waiting for approval · 0 model calls · 0 in / 0 out tokens · \d+s — approve", text
    )


def test_rich_display_unknown_lane_and_unfinished_calls(
    terminal: tuple[Console, io.StringIO],
) -> None:
    console, out = terminal
    display = RichDisplay(console)
    usage = AgentUsage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    display.event(TextDelta("ghost", "hello [b]"))
    display.event(ToolStarted("ghost", "g1", "ls", {}))
    display.event(TodosChanged("ghost", TODOS))
    display.event(ShellOutput("ghost", "g2", "output\n"))
    display.event(ToolStarted(None, "e1", "execute", {"command": "sleep 99"}))
    display.event(ShellOutput(None, "e1", "waiting...\n"))
    display.run_finished(status="interrupted", usage=usage)

    text = "\n".join(_screen(out.getvalue()))
    assert '● execute({"command": "sleep 99"})\n  ⎿ no result' in text
    assert re.search(r"● subagent · 1 step · \d+s\n  ⎿ not finished", text)
    assert "■ interrupted · 0 model calls" in text


# --------------------------------------------------------------------------- factory


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_make_display_picks_plain_unless_a_capable_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    assert isinstance(make_display(plain=False, stream=io.StringIO()), PlainDisplay)
    assert isinstance(make_display(plain=True, stream=_Tty()), PlainDisplay)
    assert isinstance(make_display(plain=False, stream=_Tty()), RichDisplay)
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_display(plain=False, stream=_Tty()), PlainDisplay)


# --------------------------------------------------------------------------- markdown answers

ANSWER = (
    "# Results\n\nThe run **passed**:\n\n- parser fixed\n- tests added\n\n"
    "```python\ndef parse(text):\n\n    return text.split()\n```\n\n"
    "| file | lines |\n|---|---|\n| a.py | 12 |\n\nThat is all."
)


def _stream(display: PlainDisplay | RichDisplay, text: str, size: int = 3) -> None:
    """`text` as the model streams it: small deltas that split lines and fences."""
    for start in range(0, len(text), size):
        display.event(TextDelta(None, text[start : start + size]))


def test_rich_display_renders_a_streamed_answer_as_markdown(
    terminal: tuple[Console, io.StringIO],
) -> None:
    console, out = terminal
    display = RichDisplay(console)
    usage = AgentUsage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    _stream(display, ANSWER)
    display.run_finished(status="done", usage=usage)

    screen = _screen(out.getvalue())
    text = "\n".join(screen)
    assert "Results" in text and "# Results" not in text  # a heading, not its marker
    assert "The run passed:" in text and "**" not in text
    assert "• parser fixed" in text and "• tests added" in text
    # the code block is whole although it holds a blank line, and has no fence marks
    assert "def parse(text):" in text and "return text.split()" in text and "```" not in text
    assert re.search(r"a\.py\s+12", text) and "|---|" not in text
    assert "That is all." in text
    assert text.index("Results") < text.index("def parse") < text.index("That is all.")


def test_rich_display_prints_finished_markdown_blocks_while_the_answer_streams(
    terminal: tuple[Console, io.StringIO],
) -> None:
    console, out = terminal
    display = RichDisplay(console)
    usage = AgentUsage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    _stream(display, "# Results\n\nThe run passed.\n\n- still being")
    printed = out.getvalue()
    display.pause()  # stop the live region so only what was printed is on screen
    # The heading and the paragraph are final, so they were rendered before the end (the
    # live region shows raw text: "● # Results")...
    assert re.search(r"●\s+Results", printed) and "The run passed." in printed
    # ...and the list still being written appeared only in the live region.
    assert "• still being" not in printed
    assert "• still being" in "\n".join(_screen(out.getvalue()))
    display.run_finished(status="done", usage=usage)


def test_plain_display_keeps_markdown_as_plain_text() -> None:
    out = io.StringIO()
    display = PlainDisplay(out)
    usage = AgentUsage()
    display.run_started(thread_id="th-1", model="scripted", usage=usage)
    _stream(display, ANSWER)
    display.run_finished(status="done", usage=usage)
    lines = out.getvalue().splitlines()
    assert "model › # Results" in lines
    assert "model › - parser fixed" in lines
    assert "model › ```python" in lines
    assert "\x1b" not in out.getvalue()


# --------------------------------------------------------------------------- tool results

TRACEBACK = "\n".join(
    ["Error: deploy failed", *(f'  File "deploy.py", line {n}, in step{n}' for n in range(30)),
     "RuntimeError: the cluster refused the release " + "x" * 150]
)


def test_both_displays_show_a_tool_error_in_full(terminal: tuple[Console, io.StringIO]) -> None:
    events: list[Event] = [
        ToolStarted(None, "d1", "deploy", {"target": "prod"}),
        ToolFinished(None, "d1", "deploy", TRACEBACK, is_error=True),
    ]
    plain_out = io.StringIO()
    plain = PlainDisplay(plain_out)
    console, rich_out = terminal
    rich = RichDisplay(console)
    for display in (plain, rich):
        display.run_started(thread_id="th-1", model="scripted", usage=AgentUsage())
        for event in events:
            display.event(event)
        display.run_finished(status="done", usage=AgentUsage())

    plain_lines = plain_out.getvalue().splitlines()
    assert "error ‹ deploy: Error: deploy failed [#1]" in plain_lines
    assert [line.strip() for line in plain_lines[3:34]] == [
        line.strip() for line in TRACEBACK.splitlines()[1:]
    ]
    screen = "".join("".join(_screen(rich_out.getvalue())).split())
    for line in TRACEBACK.splitlines():  # every line, the long one wrapped but not cut
        assert "".join(line.split()) in screen
    assert "…" not in screen


def test_expand_gives_back_each_result_in_full(terminal: tuple[Console, io.StringIO]) -> None:
    listing = "\n".join(f"/src/file{n}.py  ({n} B)" for n in range(40))
    events: list[Event] = [
        ToolStarted(None, "l1", "ls", {"path": "/src"}),
        ToolFinished(None, "l1", "ls", listing),
        ToolStarted(None, "x1", "fetch", {}),
        ToolFinished(None, "x1", "fetch", "ok"),
    ]
    console, _out = terminal
    for display in (PlainDisplay(io.StringIO()), RichDisplay(console)):
        assert display.expand("") == "no tool results yet in this session"
        display.run_started(thread_id="th-1", model="scripted", usage=AgentUsage())
        for event in events:
            display.event(event)
        display.run_finished(status="done", usage=AgentUsage())
        assert display.expand("1") == f"#1 ls:\n{listing}"
        assert display.expand("") == display.expand("#2") == "#2 fetch:\nok"
        assert display.expand("5").startswith("no tool result #5: this session has results #1")


def test_plain_display_summarizes_a_listing_with_its_number() -> None:
    out = io.StringIO()
    display = PlainDisplay(out)
    listing = "\n".join(f"/src/file{n}.py  ({n} B)" for n in range(40))
    display.event(ToolStarted(None, "l1", "ls", {"path": "/src"}))
    display.event(ToolFinished(None, "l1", "ls", listing))
    (line,) = out.getvalue().splitlines()[1:]
    assert line.startswith("result ‹ ls: 40 entries: file0.py, file1.py")
    assert line.endswith("[#1]")
