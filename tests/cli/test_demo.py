"""`fathom demo` (what `make demo` runs): the command's whole path, offline, in-process."""

from __future__ import annotations

import io
import re

from fathom.cli.demo import DEMO_TASK, FOLLOW_UP, demo_model, run_demo
from fathom.testing import ScriptedModel


def test_demo_shows_plan_parallel_subagents_approval_edit_and_resume() -> None:
    out = io.StringIO()
    assert run_demo(plain=True, out=out) == 0
    text = out.getvalue()
    assert "The model is scripted" in text
    # a plan, two readers started before either finished (parallel), an approval, an edit
    assert "todos:" in text and "[x] Polish the title" in text
    started = [text.index(f"reader#{n} started") for n in (1, 2)]
    finished = [text.index(f"reader#{n} finished") for n in (1, 2)]
    assert max(started) < min(finished)
    assert "approval needed: write_file" in text
    assert "approve [y] / edit [e] / reject [n]? y" in text
    edited = "Successfully replaced 1 instance(s) of the string in '/GUIDE.md'"
    assert f"result ‹ edit_file: {edited}" in text
    assert "# calc: a guide" in text
    # the resumed session sees the first session's history
    assert f"› {FOLLOW_UP}" in text
    assert "I wrote GUIDE.md and then edited its title (1 write, 1 edit)" in text
    assert re.search(r"Threads in \.fathom/threads\.sqlite: \w{8} “Write GUIDE\.md", text)
    assert "OPENAI_API_KEY" in text


def test_demo_model_decides_from_what_it_sees() -> None:
    """The script answers from the request, so a reordered conversation changes its step."""
    model = demo_model()
    assert isinstance(model, ScriptedModel)
    first = model.invoke([("system", "You are fathom"), ("human", DEMO_TASK)])
    assert [c["name"] for c in first.tool_calls] == ["write_todos", "task", "task"]
    follow = model.invoke([("system", "You are fathom"), ("human", FOLLOW_UP)])
    assert [c["name"] for c in follow.tool_calls] == ["read_file"]
