"""The offline demo (`make demo`) runs the whole harness end to end."""

from __future__ import annotations

import io

from fathom import demo


def test_demo_plans_researches_asks_approval_and_answers():
    out = io.StringIO()
    state = demo.main(out)
    text = out.getvalue()
    assert sorted(state["files"]) == ["/notes/sources.md", "/report.md"]
    assert all(t["status"] == "completed" for t in state["todos"])
    assert "approve? write_file /report.md" in text
    assert "approve? write_file /notes" not in text
    assert state["messages"][-1].content.startswith("The report is in /report.md")
    assert "model calls: 6" in text
