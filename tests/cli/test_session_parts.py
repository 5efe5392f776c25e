"""The command's parts below the terminal: the thread index, the approval prompt, the
stream-to-event translation, and a session's turns over a real SQLite checkpointer."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from fathom import create_deep_agent
from fathom.cli.approvals import ask_decisions
from fathom.cli.display import PlainDisplay
from fathom.cli.session import PendingApproval, Session
from fathom.middleware import PlanningMiddleware
from fathom.project.build import AgentSetup
from fathom.project.config import load_config, project_sources
from fathom.project.events import (
    EventTranslator,
    TextDelta,
    TodosChanged,
    ToolFinished,
    ToolStarted,
)
from fathom.project.threads import ThreadIndex, threads_db_path
from fathom.testing import ScriptedModel, ai, tool_call


def test_thread_index_keeps_first_message_and_orders_by_last_use(tmp_path: Path) -> None:
    index = ThreadIndex(tmp_path / "t.sqlite")
    first, second = index.new_thread_id(), index.new_thread_id()
    assert first != second and len(first) == 8
    index.touch(first, first_message="fix   the\nbug", model="m1", project=tmp_path)
    index.touch(second, first_message="write docs", model="m1", project=tmp_path)
    index.touch(first, first_message="later message", model="m2", project=tmp_path)
    listed = index.list()
    assert [t.thread_id for t in listed] == [first, second]
    assert listed[0].title == "fix the bug" and listed[0].model == "m2"
    assert index.latest().thread_id == first
    assert ThreadIndex(tmp_path / "t.sqlite").get(second).title == "write docs"
    assert index.get("nope") is None


def test_threads_db_falls_back_to_home_when_project_folder_cannot_be_made(
    tmp_path: Path,
) -> None:
    project, home = tmp_path / "p", tmp_path / "h"
    project.mkdir()
    assert threads_db_path(project, home) == project / ".fathom" / "threads.sqlite"
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".fathom").write_text("a file where the folder would go", encoding="utf-8")
    assert threads_db_path(blocked, home) == home / ".fathom" / "threads.sqlite"
    assert (home / ".fathom").is_dir()


def _approval(name: str = "write_file", args: dict | None = None,
              allowed: tuple[str, ...] = ("approve", "edit", "reject")) -> PendingApproval:
    return PendingApproval(
        interrupt_id="i1",
        action_requests=[{"name": name, "args": args or {"file_path": "/a", "content": "x"}}],
        review_configs=[{"action_name": name, "allowed_decisions": list(allowed)}],
    )


def _answers(*replies: str):
    queue = list(replies)
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return queue.pop(0)

    return ask, prompts


def test_approve_reject_with_reason_and_inline_edit() -> None:
    out = io.StringIO()
    ask, prompts = _answers("y")
    assert ask_decisions([_approval()], ask=ask, out=out) == {"i1": {"decisions": [
        {"type": "approve"}]}}
    assert "approval needed: write_file" in out.getvalue()
    assert prompts == ["approve [y] / edit [e] / reject [n]? "]

    ask, _ = _answers("n", "keep the old file")
    assert ask_decisions([_approval()], ask=ask, out=out)["i1"]["decisions"] == [
        {"type": "reject", "message": "keep the old file"}]

    ask, _ = _answers("e", "{not json", '{"file_path": "/b", "content": "y"}')
    decision = ask_decisions([_approval()], ask=ask, out=out)["i1"]["decisions"][0]
    assert decision == {"type": "edit", "edited_action": {
        "name": "write_file", "args": {"file_path": "/b", "content": "y"}}}
    assert "not valid JSON" in out.getvalue()


def test_only_allowed_decisions_are_accepted() -> None:
    out = io.StringIO()
    ask, prompts = _answers("e", "y")
    decisions = ask_decisions([_approval(allowed=("approve", "reject"))], ask=ask, out=out)
    assert decisions["i1"]["decisions"] == [{"type": "approve"}]
    assert prompts[0] == "approve [y] / reject [n]? " and "please answer y, n" in out.getvalue()


def test_edit_in_editor(tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\np = sys.argv[1]\nassert open(p).read() == 'x'\n"
        "open(p, 'w').write('edited')\n", encoding="utf-8")  # the content itself, not JSON
    ask, _ = _answers("e")
    decision = ask_decisions([_approval()], ask=ask, out=io.StringIO(),
                             editor=f"{sys.executable} {editor}")["i1"]["decisions"][0]
    assert decision["edited_action"]["args"] == {"file_path": "/a", "content": "edited"}


def test_translator_puts_subagent_events_in_their_task_lane() -> None:
    def policy(request):
        if request.last_human_text.startswith("sub"):
            if not any(m.type == "tool" for m in request.messages):
                return ai("sub working", tool_call("write_todos", {"todos": [
                    {"content": request.last_human_text, "status": "in_progress"}]}))
            return f"{request.last_human_text} done"
        if not any(m.type == "tool" for m in request.messages):
            return ai("delegating", *(tool_call("task", {
                "description": f"sub {n}", "subagent_type": "general-purpose"})
                for n in "AB"))
        return "all done"

    # subagents plan only with planning middleware of their own (as in the reference)
    planner = {"name": "general-purpose", "description": "d", "system_prompt": "p",
               "middleware": [PlanningMiddleware()]}  # fmt: skip
    agent = create_deep_agent(ScriptedModel(policy=policy), subagents=[planner])
    translator = EventTranslator()
    events = [
        event
        for item in agent.stream({"messages": [{"role": "user", "content": "go"}]},
                                 stream_mode=["updates", "messages", "custom"], subgraphs=True)
        for event in translator.translate(*item)
    ]
    tasks = [e for e in events if isinstance(e, ToolStarted) and e.name == "task"]
    assert [t.lane for t in tasks] == [None, None]
    lanes = {t.args["description"]: t.call_id for t in tasks}
    todos = {e.todos[0]["content"]: e.lane for e in events if isinstance(e, TodosChanged)}
    assert todos == {"sub A": lanes["sub A"], "sub B": lanes["sub B"]}
    finished = {e.call_id: e.text for e in events
                if isinstance(e, ToolFinished) and e.name == "task"}
    assert finished == {lanes["sub A"]: "sub A done", lanes["sub B"]: "sub B done"}
    main_text = "".join(e.text for e in events if isinstance(e, TextDelta) and e.lane is None)
    assert main_text == "delegatingall done"


def test_session_turns_persist_and_interrupt_for_approval(tmp_path: Path) -> None:
    def policy(request):
        if "write" in request.last_human_text:
            done = [m for m in request.messages if m.type == "tool"]
            if not done:
                return ai("", tool_call("write_file", {"file_path": "/out.md", "content": "hi"}))
            return f"wrote it: {done[-1].text}"
        return "seen: " + " / ".join(m.text for m in request.messages if m.type == "human")

    model = ScriptedModel(policy=policy)
    home = tmp_path / "home"
    config = load_config(tmp_path, home)
    setup = AgentSetup(tmp_path, home, config, project_sources(tmp_path, home), "scripted",
                       model)
    out = io.StringIO()
    db = threads_db_path(tmp_path, home)
    with Session(setup, db, PlainDisplay(out)) as session:
        first = session.run("t1", "write a file")
        assert first.status == "approval" and not (tmp_path / "out.md").exists()
        assert session.pending("t1")[0].action_requests[0]["name"] == "write_file"
        resume = {a.interrupt_id: {"decisions": [{"type": "approve"}]} for a in first.approvals}
        second = session.run("t1", resume=resume)
        assert second.status == "done" and second.answer == "wrote it: Updated file /out.md"
    assert (tmp_path / "out.md").read_text() == "hi"
    with Session(setup, db, PlainDisplay(out)) as later:  # a new session, same database
        third = later.run("t1", "and now?")
        assert third.answer == "seen: write a file / and now?"
        assert later.threads.get("t1").title == "write a file"
    assert "waiting for approval" in out.getvalue() and "── done" in out.getvalue()
