"""`fathom demo --server` (the second half of `make demo`): a run streamed over real HTTP.

The demo starts the real `fathom serve` in a subprocess and drives it with the real LangGraph
SDK client, so this test exercises the command, the deployment file, SQLite storage, the
run's SSE stream and the thread state end to end.
"""

from __future__ import annotations

import re

import pytest

from fathom.cli.demo_server import SERVER_TASK, server_demo_model
from fathom.cli.main import main


def _events(text: str) -> list[str]:
    return re.findall(r"^  event: (\S+)", text, flags=re.MULTILINE)


def test_demo_server_streams_a_run_over_http_and_shows_the_final_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--server"]) == 0
    text = capsys.readouterr().out

    assert re.search(r"fathom serve: http://127\.0\.0\.1:\d+ · graphs: agent · storage: SQLite",
                     text)  # fmt: skip
    events = _events(text)
    assert events[0] == "metadata"
    assert re.search(r"event: metadata +run_id=[0-9a-f-]{36} attempt=1", text)
    assert {"updates", "values"} <= set(events)
    assert "error" not in events
    # the updates show the agent's steps in order: plan, write, answer
    written = text.index("tools: write_file → Updated file /NOTES.md")
    assert text.index("model: calls write_todos") < written
    assert written < text.index("model: says 'NOTES.md is written")
    # the final state read back over HTTP
    assert "GET /threads/{id}/state → thread idle, next=[]" in text
    assert "[x] Write NOTES.md, [x] Report back" in text
    assert "file /NOTES.md:\n    fathom serve runs a langgraph.json's graphs" in text
    assert "final answer: NOTES.md is written (2 lines) and the plan is done." in text
    assert "Server stopped (SIGTERM)" in text


def test_demo_server_model_plans_before_it_writes() -> None:
    model = server_demo_model()
    first = model.invoke([("system", "You write short notes."), ("human", SERVER_TASK)])
    assert [c["name"] for c in first.tool_calls] == ["write_todos"]
