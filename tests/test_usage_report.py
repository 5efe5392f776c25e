"""`AgentUsage.total()` and `report()`: calls and tokens per agent and in total."""

from __future__ import annotations

from fathom.testing import ScriptedModel
from fathom.usage import AgentUsage


def test_report_lists_agents_in_first_call_order_and_the_total() -> None:
    usage = AgentUsage()
    model = ScriptedModel(policy=lambda request: "x" * 40)
    for agent in ("supervisor", "coffee", "supervisor"):
        model.invoke("hello there", config={"callbacks": [usage],
                                            "metadata": {"lc_agent_name": agent}})
    totals = usage.totals()
    overall = usage.total()
    assert overall.calls == 3 == totals["supervisor"].calls + totals["coffee"].calls
    assert overall.input_tokens == sum(t.input_tokens for t in totals.values()) > 0
    assert overall.output_tokens == 3 * totals["coffee"].output_tokens
    lines = usage.report().splitlines()
    assert lines[0].split() == ["agent", "calls", "input", "output", "tokens"]
    assert [line.split()[0] for line in lines[2:] if not line.startswith("-")] == [
        "supervisor", "coffee", "total"]
    assert lines[-1].split()[1] == "3"
    assert lines[-1].split()[-1] == f"{overall.total_tokens:,}"


def test_empty_report_has_a_zero_total() -> None:
    assert AgentUsage().report().splitlines()[-1].split() == ["total", "0", "0", "0", "0"]
