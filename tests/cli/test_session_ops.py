"""`/undo`, `/compact`, `/model` and `/cost` on a real `Session`: a real SQLite checkpointer,
a scripted model, and real files in a temporary project."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from fathom.cli.display import PlainDisplay
from fathom.cli.pricing import DEFAULT_PRICES, Price, find_price
from fathom.cli.session import Session
from fathom.cli.session_ops import compact_thread, cost_report, switch_model, undo_last_turn
from fathom.project.build import AgentSetup
from fathom.project.config import ConfigError, SandboxKind, load_config, project_sources
from fathom.project.threads import threads_db_path
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ai, tool_call
from fathom.testing.scripted import ScriptRequest

AUTO_APPROVED = ("write_file", "edit_file", "delete", "execute")


def _humans(request: ScriptRequest) -> list[str]:
    return [str(m.text) for m in request.messages if isinstance(m, HumanMessage)]


def _policy(request: ScriptRequest) -> object:
    """File work for "edit a", "change files" and "run a command", a summary when asked for
    one, and otherwise the human messages it sees."""
    text = request.last_human_text
    results = [m for m in request.turn_messages if m.type == "tool"]
    if text.startswith("You are compressing"):
        return "SUMMARY of the earlier work"
    if text == "edit a" and not results:
        return ai("", tool_call("edit_file", {"file_path": "/a.txt", "old_string": "original",
                                              "new_string": "first edit"}))
    if text == "change files" and not results:
        return ai("", tool_call("write_file", {"file_path": "/a.txt", "content": "second\n"}),
                  tool_call("edit_file", {"file_path": "/b.txt", "old_string": "two",
                                          "new_string": "TWO"}),
                  tool_call("write_file", {"file_path": "/sub/new.txt", "content": "new\n"}))
    if text == "run a command" and not results:
        return ai("", tool_call("execute", {"command": "echo made > made.txt"}),
                  tool_call("write_file", {"file_path": "/a.txt",
                                           "content": "by the command turn\n"}))
    return "seen: " + " / ".join(_humans(request))


def _session(project: Path, model: ScriptedModel, *, config_text: str = "",
             sandbox: SandboxKind = "none",
             auto_approve: tuple[str, ...] = AUTO_APPROVED,
             out: io.StringIO | None = None) -> Session:
    home = project.parent / "home"
    home.mkdir(exist_ok=True)
    if config_text:
        (project / "fathom.toml").write_text(config_text, encoding="utf-8")
    config = load_config(project, home)
    setup = AgentSetup(project, home, config, project_sources(project, home), "openai:scripted",
                       model, sandbox=sandbox, auto_approve=auto_approve)
    return Session(setup, threads_db_path(project, home), PlainDisplay(out or io.StringIO()))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.txt").write_text("original\n", encoding="utf-8")
    (folder / "b.txt").write_text("one\ntwo\n", encoding="utf-8")
    return folder


def test_undo_restores_files_and_conversation_turn_by_turn(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        assert undo_last_turn(session, "t1") == "nothing to undo on this thread"
        assert session.run("t1", "edit a").status == "done"
        assert (project / "a.txt").read_text() == "first edit\n"
        assert session.run("t1", "change files").status == "done"
        assert (project / "a.txt").read_text() == "second\n"
        assert (project / "b.txt").read_text() == "one\nTWO\n"
        assert (project / "sub" / "new.txt").read_text() == "new\n"

        message = undo_last_turn(session, "t1")
        assert (project / "a.txt").read_text() == "first edit\n"  # overwritten: restored
        assert (project / "b.txt").read_text() == "one\ntwo\n"  # edited: restored
        assert not (project / "sub" / "new.txt").exists()  # created: deleted
        assert "files restored: /a.txt, /b.txt" in message
        assert "files removed (the turn created them): /sub/new.txt" in message

        # the next request continues from before the undone turn
        answer = session.run("t1", "what now?").answer
        assert answer == "seen: edit a / what now?"
        assert _humans(model.requests[-1]) == ["edit a", "what now?"]

        # repeated undo walks further back: "what now?", then "edit a"
        assert "no files to put back" in undo_last_turn(session, "t1")
        message = undo_last_turn(session, "t1")
        assert (project / "a.txt").read_text() == "original\n"
        assert "files restored: /a.txt" in message and "no earlier turns" in message
        assert undo_last_turn(session, "t1") == "nothing to undo on this thread"
        assert session.run("t1", "fresh start").answer == "seen: fresh start"


def test_undo_in_a_later_session_says_what_commands_changed_is_not_undone(
    project: Path,
) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model, sandbox="local") as session:
        session.run("t1", "hello")
        assert session.run("t1", "run a command").status == "done"
    assert (project / "made.txt").read_text() == "made\n"
    assert (project / "a.txt").read_text() == "by the command turn\n"
    with _session(project, model, sandbox="local") as later:  # the records are on disk
        message = undo_last_turn(later, "t1")
        assert (project / "a.txt").read_text() == "original\n"
        assert (project / "made.txt").exists()  # the shell wrote it: not tracked
        assert "files restored: /a.txt" in message
        assert "not undone: what the turn's commands (`echo made > made.txt`)" in message
        assert later.run("t1", "again").answer == "seen: hello / again"


def test_writes_approved_later_are_undone_with_the_turn_that_asked(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model, auto_approve=()) as session:
        asked = session.run("t1", "change files")
        assert asked.status == "approval"
        approve = {a.interrupt_id: {"decisions": [{"type": "approve"}] * 3}
                   for a in asked.approvals}
        assert session.run("t1", resume=approve).status == "done"
        assert (project / "sub" / "new.txt").exists()
        message = undo_last_turn(session, "t1")
        assert not (project / "sub" / "new.txt").exists()
        assert (project / "a.txt").read_text() == "original\n"
        assert "no earlier turns to undo" in message
        assert session.pending("t1") == []
        assert session.run("t1", "hi").answer == "seen: hi"


def test_compact_summarizes_now_and_the_next_request_carries_the_summary(
    project: Path,
) -> None:
    model = ScriptedModel(policy=_policy)
    with _session(project, model) as session:
        assert compact_thread(session, "t1").startswith("nothing to compact")
        for n in range(4):
            session.run("t1", f"question {n} " + "words " * 200)
        report = compact_thread(session, "t1")
        assert report.startswith("compacted:"), report
        sizes = re.search(r"about ([\d,]+) tokens now \(was ([\d,]+);", report)
        assert sizes is not None, report
        after, before = (int(n.replace(",", "")) for n in sizes.groups())
        assert after < before
        session.run("t1", "and next?")
        sent = model.requests[-1]
        texts = [str(m.text) for m in sent.messages]
        assert any("SUMMARY of the earlier work" in t for t in texts)
        assert not any(t.startswith("question 0") for t in texts)
        assert texts[-1] == "and next?"
        assert "(compaction)" in cost_report(session, "t1")


def test_model_switch_takes_effect_next_turn_and_bad_names_are_refused(
    project: Path,
) -> None:
    first, second = ScriptedModel(policy=_policy), ScriptedModel(policy=_policy)
    server = ScriptedOpenAIServer(second).start()  # "openai:other" is served here
    try:
        config = f'base_url = "{server.base_url}"\n'
        with _session(project, first, config_text=config) as session:
            assert switch_model(session, None).startswith("model: openai:scripted")
            refused = switch_model(session, "nosuchprovider:some-model")
            assert "still using openai:scripted" in refused
            assert "must be 'provider:model'" in switch_model(session, "no-colon")
            session.run("t1", "hello")
            assert switch_model(session, "openai:other") == (
                "model: openai:other from the next turn on (was openai:scripted)")
            assert switch_model(session, None).startswith("model: openai:other")
            answer = session.run("t1", "after the switch").answer
    finally:
        server.stop()
    assert answer == "seen: hello / after the switch"
    assert [_humans(r)[-1] for r in first.requests] == ["hello"]
    assert [_humans(r)[-1] for r in second.requests] == ["after the switch"]


def test_cost_report_prices_tokens_from_the_configured_table(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    config = '[prices."openai:scripted"]\ninput = 1000.0\noutput = 2000.0\n'
    with _session(project, model, config_text=config) as session:
        assert cost_report(session, "t1") == "no model calls on thread t1 in this session yet"
        session.run("t1", "hello")
        session.run("t1", "again")
        report = cost_report(session, "t1")
    rows = [line.split() for line in report.splitlines()]
    fathom_row = next(row for row in rows if row[0] == "fathom")
    assert fathom_row[1] == "openai:scripted"
    calls, tokens_in, tokens_out = (int(x.replace(",", "")) for x in fathom_row[2:5])
    assert calls == 2 and tokens_in > 0 and tokens_out > 0
    expected = (tokens_in * 1000.0 + tokens_out * 2000.0) / 1_000_000
    assert fathom_row[5] == f"${expected:.4f}"
    assert "fathom.toml" in report
    # The second turn's request repeats the first's whole prefix: a sticky rate of 100 %.
    sticky = report[report.index("prompt-cache prefix"):].splitlines()
    sticky_row = next(line.split() for line in sticky if line.startswith("fathom"))
    assert sticky_row[1] == "2" and sticky_row[2] == "100.0%", sticky

    (project / "fathom.toml").unlink()
    with _session(project, model) as unpriced:
        unpriced.run("t2", "hello")
        report = cost_report(unpriced, "t2")
    assert "no price for openai:scripted" in report
    assert '[prices."openai:scripted"]' in report


def test_prices_are_checked_like_other_keys_and_win_over_the_table(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config_file = tmp_path / "fathom.toml"
    config_file.write_text('model = "openai:gpt-4.1"\n[prices."openai:gpt-4.1"]\n'
                           "input = 1.0\noutptu = 2.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"line 2: prices.'openai:gpt-4.1': unknown key\(s\) "
                                          "outptu"):
        load_config(tmp_path, home)
    config_file.write_text('[prices."openai:gpt-4.1"]\ninput = 1.0\noutput = 2.0\n',
                           encoding="utf-8")
    prices = load_config(tmp_path, home).prices
    assert find_price("openai:gpt-4.1", prices) == Price(1.0, 2.0, source="fathom.toml")
    assert find_price("openai:gpt-4.1", {}) == DEFAULT_PRICES["openai:gpt-4.1"]
    # a dated snapshot takes the price of the longest entry it extends
    assert (find_price("openai:gpt-4.1-mini-2025-04-14", {})
            == DEFAULT_PRICES["openai:gpt-4.1-mini"])
    assert find_price("openai:scripted", prices) is None


def test_a_budget_in_fathom_toml_stops_the_thread_and_cost_shows_it(project: Path) -> None:
    model = ScriptedModel(policy=_policy)
    config = "[budget]\nmax_model_calls = 2\n"
    out = io.StringIO()
    with _session(project, model, config_text=config, out=out) as session:
        before = cost_report(session, "t1")
        assert "budget: nothing spent on this thread yet (caps: max_model_calls = 2)" in before
        assert session.run("t1", "hello").answer == "seen: hello"
        report = cost_report(session, "t1")
        assert ("budget: tokens" in report and "model calls 1 of 2 (50%)" in report
                and "(whole thread, all agents)" in report)
        session.run("t1", "again")
        stopped = session.run("t1", "and again")
        assert stopped.status == "done"
        shown = out.getvalue()
        assert "── budget: tokens" in shown and "model calls 2 of 2 (100%)" in shown
        assert "model-call cap is reached (2 of 2 model calls)" in stopped.answer
        assert model.calls == 2
        assert "reached: model-call cap" in cost_report(session, "t1")


def test_a_bad_budget_table_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "fathom.toml").write_text('model = "openai:gpt-4.1"\n[budget]\n'
                                          "max_tokns = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"fathom.toml, line 2: budget: unknown key\(s\) "
                                          r"max_tokns"):
        load_config(tmp_path, tmp_path / "home")


def test_a_cost_cap_needs_a_price_for_the_model(project: Path) -> None:
    from fathom.project.build import agent_budget

    model = ScriptedModel(policy=_policy)
    with (_session(project, model, config_text="[budget]\nmax_usd = 1.0\n") as session,
          pytest.raises(ConfigError, match=r"price of scriptedmodel:scripted")):
        agent_budget(session.setup)
    priced = '[budget]\nmax_usd = 1.0\n[prices."scriptedmodel:scripted"]\ninput = 1\noutput = 2\n'
    with _session(project, model, config_text=priced) as session:
        budget = agent_budget(session.setup)
        assert budget is not None and budget.max_usd == 1.0
        assert budget.price("scriptedmodel:scripted").input == 1.0
